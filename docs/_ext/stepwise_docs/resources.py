"""What each step's kernels use of the GPU, as the pages show it (no Sphinx here).

The numbers come from the step registry: the build compiles the timing program
with ``nvcc --resource-usage`` and ``stepwise_bench --list --json
--ptxas-report ...`` puts ptxas's counts (registers, static shared memory, stack
frame and spills) and the theoretical occupancy at the launcher's block shape
(NVIDIA's occupancy calculator, ``cuda_occupancy.h``, over the architecture's
limits) into every kernel's entry. They need no GPU and are always those of
the sources being built.

Where the measurement file's step rows carry ``resources`` (what the CUDA
runtime reported for the kernels on the measuring GPU), each value is checked
against the build's; a difference is shown beside the build's value.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .data import Chapter, Dataset
from .fmt import DASH, TIMES, format_bytes, sig


@dataclass
class KernelRow:
    """One kernel of one step, ready to print."""

    step: dict
    name: str
    block: str
    arch: str
    registers: str
    shared: str
    local: str
    blocks_per_sm: str
    occupancy: str
    limited_by: str
    spills: bool = False
    missing: bool = False  # the registry has no compiled counts for it
    notes: list[str] = field(default_factory=list)  # differences from the measurement run


def block_text(block: list[int]) -> str:
    """``[32, 8, 1]`` -> ``"32 × 8"``; ``[256, 1, 1]`` -> ``"256"``."""
    dims = list(block)
    while len(dims) > 1 and dims[-1] == 1:
        dims.pop()
    return f" {TIMES} ".join(str(d) for d in dims)


def preferred_arch(dataset: Dataset) -> str | None:
    """The architecture of the measuring GPU (``"9.0"`` -> ``"sm_90"``), if there is a measurement file."""
    cc = dataset.gpu.get("compute_capability")
    if not cc:
        return None
    major, _, minor = cc.partition(".")
    return f"sm_{major}{minor}"


def _compiled_for(kernel: dict, arch: str | None) -> dict | None:
    """The kernel's counts for ``arch``, else for its arch-specific variant (``sm_90a`` on a 9.0 GPU), else the
    first architecture compiled."""
    compiled = kernel.get("compiled") or []
    for wanted in (arch, f"{arch}a") if arch is not None else ():
        for entry in compiled:
            if entry["arch"] == wanted:
                return entry
    return compiled[0] if compiled else None


def _measured(chapter: Chapter, step: dict, kernel_name: str) -> dict | None:
    """The kernel's runtime resources from the first measured row of the step, if any."""
    state = chapter.states[step["id"]]
    for row in state.rows.values():
        for entry in row.get("resources") or []:
            if entry.get("kernel") == kernel_name:
                return entry
    return None


def _local_text(c: dict) -> tuple[str, bool]:
    spills = c["spill_store_bytes"] + c["spill_load_bytes"]
    frame = c["stack_frame_bytes"]
    if frame == 0 and spills == 0:
        return "0", False
    text = f"{frame} B"
    if spills:
        text += f" (spills: {c['spill_store_bytes']} B stored, {c['spill_load_bytes']} B loaded)"
    return text, spills > 0


def kernel_rows(dataset: Dataset, chapter: Chapter, step: dict) -> list[KernelRow]:
    """Every kernel of a step, with the build's counts and, where they differ, the measurement run's."""
    arch = preferred_arch(dataset)
    gpu = dataset.gpu.get("name", "the measuring GPU")
    rows = []
    for kernel in step.get("kernels", []):
        c = _compiled_for(kernel, arch)
        block = block_text(kernel["block"])
        if c is None:
            rows.append(KernelRow(step, kernel["name"], block, DASH, DASH, DASH, DASH, DASH, DASH, DASH,
                                  missing=True))
            continue
        occ = c.get("occupancy")
        local, spills = _local_text(c)
        row = KernelRow(
            step=step, name=kernel["name"], block=block, arch=c["arch"],
            registers=str(c["registers"]),
            shared=format_bytes(c["static_shared_bytes"]) if c["static_shared_bytes"] else "0",
            local=local,
            blocks_per_sm=str(occ["blocks_per_sm"]) if occ else DASH,
            occupancy=f"{sig(100 * occ['fraction'])} %" if occ else DASH,
            limited_by=", ".join(occ["limited_by"]) if occ else f"(no limits known for {c['arch']})",
            spills=spills)
        measured = _measured(chapter, step, kernel["name"])
        if measured is not None:
            checks = [("registers", c["registers"], measured.get("registers")),
                      ("static shared bytes", c["static_shared_bytes"], measured.get("static_shared_bytes")),
                      ("local bytes", c["stack_frame_bytes"], measured.get("local_bytes"))]
            if occ:
                checks.append(("blocks per SM", occ["blocks_per_sm"], measured.get("blocks_per_sm")))
            for what, built, ran in checks:
                if ran is not None and ran != built:
                    row.notes.append(f"{what}: {ran} in the measured binary on {gpu}")
        rows.append(row)
    return rows


def compiled_by(dataset: Dataset) -> str:
    """``"nvcc 13.0.88, sm_90"``: the compiler and architectures of the build's counts."""
    by = dataset.registry.get("compiled_by", {})
    archs = []
    for chapter in dataset.chapters.values():
        for step in chapter.steps:
            for kernel in step.get("kernels", []):
                for c in kernel.get("compiled") or []:
                    if c["arch"] not in archs:
                        archs.append(c["arch"])
    compiler = by.get("compiler", "an unrecorded compiler")
    return f"{compiler}, {', '.join(archs) or 'no architecture'}"


def legend(dataset: Dataset) -> str:
    return (
        f"Registers per thread, static shared memory per block, local memory per thread (the stack frame: "
        f"arrays the compiler could not keep in registers, and spills) from the compiler\u2019s own report "
        f"(ptxas, via nvcc --resource-usage) for this build ({compiled_by(dataset)}). Theoretical "
        f"occupancy: resident warps per SM over the architecture\u2019s maximum, for the block shape the "
        f"step\u2019s launcher uses, computed with NVIDIA\u2019s occupancy calculator (cuda_occupancy.h) from "
        f"the architecture\u2019s limits; \u201climited by\u201d names the resource that caps the blocks per SM. "
        f"Where the measurement run\u2019s CUDA runtime (cudaFuncGetAttributes, "
        f"cudaOccupancyMaxActiveBlocksPerMultiprocessor) reported a different value, it is shown beside it."
    )
