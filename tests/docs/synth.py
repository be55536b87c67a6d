"""FIXTURE data for tests/docs: a made-up registry and measurement file for any steps.

Nothing here is a measurement. Every GPU name says "FIXTURE GPU (not a
measurement)" and every time is a made-up round number; these files are only
ever written under pytest's tmp_path.
"""
from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURE_PROJECT = FIXTURES / "project"
SCHEMA = REPO / "conf" / "measurement.schema.json"
BUILD_DOCS = REPO / "conf" / "build_docs.py"

for p in (REPO / "conf", REPO / "docs" / "_ext"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from source_hash import source_sha256  # noqa: E402

FIXTURE_GPU = "FIXTURE GPU (not a measurement)"

ELEMENTWISE_TIMINGS = [
    {"id": "batch", "label": "FIXTURE: events around 10 back-to-back launches, per launch; L2 warm",
     "l2": "warm", "launches_per_sample": 10},
    {"id": "single_cold", "label": "FIXTURE: events around one launch; L2 flushed before each sample",
     "l2": "flushed", "launches_per_sample": 1},
]
ELEMENTWISE_CEILINGS = [
    {"id": "inplace_read_write", "title": "FIXTURE: in-place read and write"},
    {"id": "device_copy", "title": "FIXTURE: device-to-device copy"},
    {"id": "empty_launch", "title": "FIXTURE: empty launch"},
]


REDUCTION_TIMINGS = [
    {"id": "single_cold", "label": "FIXTURE: events around one call; L2 flushed before each sample",
     "l2": "flushed", "launches_per_sample": 1},
]
REDUCTION_CEILINGS = [{"id": "device_copy", "title": "FIXTURE: device-to-device copy"}]
REDUCTION_BASELINES = [{"id": "cub_device_reduce_sum", "title": "FIXTURE: a library sum"}]
REDUCTION_SIZES = [{"n": 4194304, "problem": "2^22 int"}, {"n": 268435456, "problem": "2^28 int"}]


def snippet_steps(root: Path, chapter: str, launcher: str = "update",
                  sizes: list[dict] | None = None) -> list[dict]:
    """Registry step entries for the snippet files of a chapter (ids from file names)."""
    steps = []
    for path in sorted((root / "snippets" / chapter).glob("[0-9][0-9]_*.cuh")):
        text = path.read_text(encoding="utf-8")
        ns = re.search(r"^namespace\s+(stepwise::[\w:]+)\s*\{", text, re.MULTILINE)
        brief = re.search(r"@brief\s+(.+)", text)
        steps.append({
            "id": path.stem,
            "title": (brief.group(1).strip() if brief else path.stem),
            "file": path.relative_to(root).as_posix(),
            "namespace": ns.group(1) if ns else f"stepwise::{chapter}",
            "launcher": launcher,
            "same_operation": "lookup" not in path.stem,
            "beyond_article": False,
            "sizes": sizes or [{"n": 4194304, "problem": "2048 x 2048 float"}],
        })
    return steps


def registry_for(steps: list[dict], chapter: str = "elementwise",
                 timings=ELEMENTWISE_TIMINGS, ceilings=ELEMENTWISE_CEILINGS,
                 baselines=()) -> dict:
    return {"schema": 1, "generator": "stepwise_bench", "chapters": [{
        "id": chapter, "title": f"FIXTURE {chapter}", "share_of": ceilings[0]["id"],
        "timings": list(timings), "ceilings": list(ceilings), "baselines": list(baselines),
        "steps": steps}]}


def _stats(n: int, timing: str, median: float, nbytes: int | None) -> dict:
    return {"n": n, "timing": timing, "samples": 50, "median_ms": median,
            "min_ms": median * 0.95, "max_ms": median * 1.2, "rel_noise": 0.02,
            "throttled_samples": 0, "bytes": nbytes,
            "gbps": nbytes / (median * 1e-3) / 1e9 if nbytes else None,
            "flops": None, "gflops": None}


def measurement_for(registry: dict, root: Path, date: str = "2000-01-01T00:00:00Z",
                    commit: str = "f1xture") -> dict:
    """A schema-valid FIXTURE measurement file covering every registry row."""
    chapters = []
    for ch in registry["chapters"]:
        rows_s, rows_c, rows_b = [], [], []
        sizes = list(dict.fromkeys(size["n"] for s in ch["steps"] for size in s["sizes"]))
        for t_index, t in enumerate(ch["timings"]):
            scale = 1.0 + t_index
            for ref_kind, entries, out in (("c", ch["ceilings"], rows_c), ("b", ch["baselines"], rows_b)):
                for i, e in enumerate(entries):
                    for n in sizes:  # every size of the chapter, as the timing program writes them
                        nbytes = None if e["id"] == "empty_launch" else 8 * n
                        out.append({"id": e["id"], "title": e["title"],
                                    **_stats(n, t["id"], 0.01 * scale * (i + 1), nbytes)})
            for i, s in enumerate(ch["steps"]):
                for size in s["sizes"]:
                    median = 0.1 * scale / (i + 1)
                    rows_s.append({
                        "id": s["id"], "title": s["title"],
                        **_stats(size["n"], t["id"], median, 8 * size["n"]),
                        "file": s["file"], "source_sha256": source_sha256(root / s["file"]),
                        "problem": size.get("problem", ""), "same_operation": s.get("same_operation", True),
                        "beyond_article": s.get("beyond_article", False),
                        "share_of_ceiling": 0.01 * scale / median, "validated": True,
                        "accuracy": {"tolerance_ulp": 1, "max_ulp": 1, "max_rel": 1e-7,
                                     "second_application_max_rel": 1e-7},
                        "tests": {"passed": 3, "failed": 0, "skipped": 0},
                    })
        chapters.append({"id": ch["id"], "title": ch["title"], "share_of": ch["share_of"],
                         "timings": ch["timings"], "ceilings": rows_c, "baselines": rows_b,
                         "steps": rows_s})
    return {
        "schema": 1, "generator": "stepwise_bench",
        "gpu": {"name": FIXTURE_GPU, "slug": "fixture-gpu", "compute_capability": "9.0",
                "sm_count": 100, "l2_bytes": 50331648, "driver": "FIXTURE", "cuda_runtime": "13.0",
                "cuda_driver": "13.0", "sm_clock_mhz": {"before": 1000, "after": 1000}},
        "run": {"date": date, "commit": commit, "dirty": False,
                "stopping_rule": {"min_samples": 10, "max_samples": 100, "target_rel_stderr": 0.01,
                                  "max_seconds_per_row": 1.0, "throttle_threshold": 0.9}},
        "chapters": chapters,
    }


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def fixture_measurement() -> dict:
    return json.loads((FIXTURE_PROJECT / "measurements" / "fixture-gpu.json").read_text())


def fixture_registry() -> dict:
    return json.loads((FIXTURE_PROJECT / "registry.json").read_text())


def deep(data):
    return copy.deepcopy(data)
