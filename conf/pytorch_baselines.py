#!/usr/bin/env python3
"""PyTorch's own softmax, LayerNorm, RMSNorm and attention, timed as the timing program times its rows.

A second baseline for the softmax, normalization and attention chapters, beside cuDNN: at each of the
six main shapes, in fp32 and bf16, ``torch.softmax``, ``torch.native_layer_norm`` (LayerNorm that also
returns each row's mean and 1/std, as the chapter's steps write them) and ``torch.nn.functional.rms_norm``;
at each size of the attention chapter's final step, ``torch.nn.functional.scaled_dot_product_attention``
on its FlashAttention backend (bf16, [batch, heads, seq, head_dim], scale 1/sqrt(head_dim), causal or not,
grouped K and V with ``enable_gqa``); all called on the GPU with random inputs, after a second of bf16 products that brings the clocks up. Timed as
the timing program's ``single_cold`` rows: CUDA events
around one call, a buffer of twice the L2 written before each sample and a spin of some 200 us queued
after it (so that the events time the GPU's work, not Python's dispatch), 3 warm-up samples, then samples
until the standard error of their mean is 0.2 % of it (at least 50, at most 2000, at most 1 s a row);
median, fastest and slowest kept. Each output is checked against the same operation in float64.

Runs with a ``python3`` that has PyTorch (the project's virtualenv has none, and needs none: this
module imports it only to measure). Writes one JSON file per GPU (``docs/measurements/pytorch/
<gpu-slug>.json`` when recorded), which the pages read beside the timing program's file::

    pytorch_baselines.py --registry build/registry.json --gpu-slug nvidia-h200 --commit abc1234 --out FILE

Exit status: 0 written, 2 usage or input error, 3 PyTorch or a CUDA GPU missing (one line says which).
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

SCHEMA = 1
#: The chapters' six main shapes (rows x cols), from the issue that asked for them.
MAIN_SHAPES = [(16384, 8192), (4096, 32768), (65536, 128), (32768, 1024), (8192, 4096), (1024, 131072)]
EPSILON = 1e-5  # the normalization chapter's
#: The rows of each chapter: id, the call, and the word of a size's problem text that selects it.
CALLS = {
    "softmax": [("pytorch_softmax", "torch.softmax(x, dim=-1)", None)],
    "normalization": [
        ("pytorch_layer_norm", "torch.native_layer_norm(x, (cols,), gamma, beta, 1e-5)", "LayerNorm"),
        ("pytorch_rms_norm", "torch.nn.functional.rms_norm(x, (cols,), gamma, 1e-5)", "RMSNorm"),
    ],
    "attention": [("pytorch_sdpa_bf16", "torch.nn.functional.scaled_dot_product_attention(q, k, v, "
                   "is_causal=causal, scale=1/sqrt(head_dim), enable_gqa=kv_heads < heads), FlashAttention "
                   "backend", None)],
}
ATTENTION_CHECKED_ROWS = 128  # the queries checked against float64 (the first ones: a causal row sees keys 0 to i)
TIMING = ("events around one call; L2 flushed before each sample (a buffer of twice its size written), then a "
          "spin of some 200 us queued, so that Python's dispatch is not timed; 3 warm-up samples, then until the "
          "mean's standard error is 0.2 % (50 to 2000 samples, 1 s a row)")
#: Largest |y - reference| over the largest |reference| that passes, per dtype: a few roundings.
TOLERANCE = {"fp32": 1e-5, "bf16": 2e-2}
MIN_SAMPLES, MAX_SAMPLES, TARGET_REL_STDERR, MAX_SECONDS = 50, 2000, 0.002, 1.0
WARM_UP_SECONDS = 1.0  # of tensor-core work before the first row
#: A spin queued after each flush, some 200 us: Python launches the call while the GPU spins, so that the
#: events time the GPU's work and not PyTorch's dispatch (the timing program's C++ launchers are timed
#: with theirs: a few microseconds, against tens here in a trial without it).
HOST_AHEAD_CYCLES = 400_000


class InputError(Exception):
    """A registry that does not describe what this script measures."""


@dataclass(frozen=True)
class Case:
    chapter: str
    row_id: str
    call: str
    n: int
    problem: str
    shape: tuple[int, ...]  # rows, cols; attention: batch, heads, seq, head_dim
    dtype: str  # "fp32" or "bf16"
    kv_heads: int = 0  # attention: the heads of K and V
    causal: bool = False


def attention_problem(n: int) -> tuple[int, bool]:
    """The K/V heads and the mask of an attention size, from its key (bench/attention: causal * 10^18 +
    head_dim * 10^15 + batch * 10^12 + heads * 10^9 + kv_heads * 10^6 + seq)."""
    return n // 10**6 % 1000, n >= 10**18


def cases(registry: dict, chapters: list[str]) -> list[Case]:
    """What to time: for each chapter, its final step's sizes at the main shapes (attention: every size),
    each with the call its problem text names (LayerNorm or RMSNorm), in the registry's order."""
    out: list[Case] = []
    by_id = {c["id"]: c for c in registry.get("chapters", [])}
    for chapter_id in chapters:
        if chapter_id not in CALLS:
            raise InputError(f"no PyTorch baseline for chapter {chapter_id!r} (known: {', '.join(CALLS)})")
        chapter = by_id.get(chapter_id)
        if chapter is None or not chapter.get("steps"):
            raise InputError(f"the step registry has no chapter {chapter_id!r} with steps")
        found = 0
        for size in chapter["steps"][-1]["sizes"]:
            shape = tuple(size.get("shape", ()))
            if chapter_id == "attention":
                (row_id, call, _word), = CALLS[chapter_id]
                if len(shape) != 4:
                    raise InputError(f"attention size {size['problem']!r}: its shape is not batch, heads, seq, "
                                     "head_dim")
                kv_heads, causal = attention_problem(size["n"])
                out.append(Case(chapter_id, row_id, call, size["n"], size["problem"], shape, "bf16", kv_heads,
                                causal))
                found += 1
                continue
            words = size["problem"].split()
            if shape not in MAIN_SHAPES or words[-1] not in TOLERANCE:
                continue
            for row_id, call, word in CALLS[chapter_id]:
                if word is None or word in words:
                    out.append(Case(chapter_id, row_id, call, size["n"], size["problem"], shape, words[-1]))
                    found += 1
        if found == 0:
            raise InputError(f"chapter {chapter_id!r}: its final step has no size at the main shapes")
    return out


def keep_sampling(samples: list[float], seconds: float) -> bool:
    """The timing program's rule: at least MIN_SAMPLES, then until the mean's standard error is
    TARGET_REL_STDERR of it, MAX_SAMPLES are taken or MAX_SECONDS spent."""
    if len(samples) < MIN_SAMPLES:
        return True
    if len(samples) >= MAX_SAMPLES or seconds >= MAX_SECONDS:
        return False
    mean = statistics.fmean(samples)
    return statistics.stdev(samples) / mean / len(samples) ** 0.5 > TARGET_REL_STDERR


def summary(samples: list[float]) -> dict:
    """Median, fastest and slowest (ms) and the count, as the measurement file's rows keep them."""
    if not samples:
        raise ValueError("no samples")
    return {"median_ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples),
            "samples": len(samples)}


def slug_ok(slug: str) -> bool:
    return bool(slug) and all(c.isalnum() or c == "-" for c in slug) and slug == slug.lower()


def warm_up(torch, seconds: float = WARM_UP_SECONDS) -> None:  # pragma: no cover - needs a GPU
    """Bf16 products for ``seconds``: an idle GPU's clocks take a while to rise, and the first rows
    would be timed on the way up (a first softmax row ran at half its speed in a run without this)."""
    import time

    a = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()


def row_call(case: Case, torch, gen):  # pragma: no cover - needs a GPU
    """The inputs of ``case``, the call to time on them, and the largest error of its result over the
    largest value of the same call in float64 (attention: of the first ATTENTION_CHECKED_ROWS queries,
    computed plainly, with K and V repeated for grouped heads)."""
    if case.chapter == "attention":
        batch, heads, seq, head_dim = case.shape
        q = torch.randn(batch, heads, seq, head_dim, device="cuda", generator=gen).to(torch.bfloat16)
        k, v = (torch.randn(batch, case.kv_heads, seq, head_dim, device="cuda", generator=gen).to(torch.bfloat16)
                for _ in range(2))
        scale = head_dim ** -0.5

        def call(q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=case.causal, scale=scale, enable_gqa=case.kv_heads < heads)

        def error(y):
            rows = min(seq, ATTENTION_CHECKED_ROWS)
            kk, vv = (t.double().repeat_interleave(heads // case.kv_heads, dim=1) for t in (k, v))
            scores = q[:, :, :rows].double() @ kk.transpose(-1, -2) * scale
            if case.causal:
                scores = scores.masked_fill(~torch.ones(rows, seq, dtype=torch.bool, device="cuda").tril(),
                                            float("-inf"))
            reference = torch.softmax(scores, dim=-1) @ vv
            return ((y[:, :, :rows].double() - reference).abs().max() / reference.abs().max()).item()

        return call, (q, k, v), error
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[case.dtype]
    rows, cols = case.shape
    x = torch.randn(rows, cols, device="cuda", generator=gen).to(dtype)
    gamma = torch.randn(cols, device="cuda", generator=gen).to(dtype)
    beta = torch.randn(cols, device="cuda", generator=gen).to(dtype)
    call = {
        "pytorch_softmax": lambda t, g, b: torch.softmax(t, dim=-1),
        "pytorch_layer_norm": lambda t, g, b: torch.native_layer_norm(t, (cols,), g, b, EPSILON)[0],
        "pytorch_rms_norm": lambda t, g, b: torch.nn.functional.rms_norm(t, (cols,), g, EPSILON),
    }[case.row_id]

    def error(y):
        reference = call(x.double(), gamma.double(), beta.double())
        return ((y.double() - reference).abs().max() / reference.abs().max()).item()

    return call, (x, gamma, beta), error


def measure(case: Case, torch, flush, seed: int) -> dict:  # pragma: no cover - needs a GPU
    import contextlib
    import time

    call, args, error_of = row_call(case, torch, torch.Generator(device="cuda").manual_seed(seed))
    label, backend = case.call, contextlib.nullcontext
    if case.chapter == "attention":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def backend():
            return sdpa_kernel([SDPBackend.FLASH_ATTENTION])
        try:
            with backend():
                call(*args)
        except RuntimeError:  # no FlashAttention kernel for this problem: what PyTorch picks itself
            label = case.call.replace("FlashAttention backend", "its own choice of backend (FlashAttention "
                                      "takes no such problem)")
            backend = contextlib.nullcontext
    with backend():
        error = error_of(call(*args))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        samples: list[float] = []
        began = None
        for i in range(3 + MAX_SAMPLES):
            flush.fill_(i & 0xFF)
            torch.cuda._sleep(HOST_AHEAD_CYCLES)  # the GPU waits here, not for Python to launch the call
            start.record()
            call(*args)
            end.record()
            end.synchronize()
            if i < 3:
                continue
            began = began or time.perf_counter()
            samples.append(start.elapsed_time(end))
            if not keep_sampling(samples, time.perf_counter() - began):
                break
    return {"chapter": case.chapter, "id": case.row_id, "call": label, "n": case.n, "problem": case.problem,
            **summary(samples), "max_error_over_max_reference": error,
            "validated": bool(error == error and error <= TOLERANCE[case.dtype])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pytorch_baselines.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--registry", type=Path, required=True, help="the step registry (build/registry.json)")
    parser.add_argument("--chapters", nargs="+", default=list(CALLS), help="chapters to time (default: all three)")
    parser.add_argument("--gpu-slug", required=True, help="the GPU's slug, as the timing program names it")
    parser.add_argument("--commit", required=True, help="the commit whose registry this is")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--seed", type=int, default=20261128)
    args = parser.parse_args(argv)
    try:
        if not slug_ok(args.gpu_slug):
            raise InputError(f"--gpu-slug {args.gpu_slug!r} is not a slug (lower-case letters, digits, '-')")
        todo = cases(json.loads(args.registry.read_text()), args.chapters)
    except (OSError, json.JSONDecodeError, KeyError, InputError) as exc:
        print(f"pytorch_baselines.py: {exc}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print(f"pytorch_baselines.py: no PyTorch in {sys.executable}: PyTorch's rows not measured")
        return 3
    if not torch.cuda.is_available():  # pragma: no cover - needs PyTorch
        print("pytorch_baselines.py: PyTorch sees no CUDA GPU: PyTorch's rows not measured")
        return 3
    props = torch.cuda.get_device_properties(0)  # pragma: no cover - needs a GPU from here on
    flush = torch.empty(2 * props.L2_cache_size, dtype=torch.uint8, device="cuda")
    warm_up(torch)
    rows = []
    for i, case in enumerate(todo):
        rows.append(measure(case, torch, flush, args.seed + i))
        r = rows[-1]
        print(f"pytorch_baselines.py: {case.row_id} at {case.problem}: median {r['median_ms']:.4g} ms of "
              f"{r['samples']} samples, error {r['max_error_over_max_reference']:.2g}"
              + ("" if r["validated"] else " (over the tolerance)"))
    out = {"schema": SCHEMA, "generator": "conf/pytorch_baselines.py",
           "gpu": {"name": props.name, "slug": args.gpu_slug},
           "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "commit": args.commit, "seed": args.seed, "timing": TIMING, "tolerance": TOLERANCE, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"pytorch_baselines.py: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
