#!/usr/bin/env python3
"""PyTorch's own softmax, LayerNorm, RMSNorm (forward and backward), attention (training's and decoding's) and
cross-entropy, timed as the timing program times its rows.

A second baseline, beside cuDNN, for the chapters whose registry entry asks for it: each entry's ``pytorch``
lists its rows, each with the sizes to time it at (the main shapes of the row-wise chapters, every size of
attention's final step) and what the call needs besides the size's ``shape`` (``dtype``, ``epsilon``,
``kv_heads``, ``causal``, ``ignored_one_in``). A row's id names the call (:data:`CALLS`): ``torch.softmax``,
``torch.native_layer_norm`` (LayerNorm that also returns each row's mean and 1/std, as the steps write them),
``torch.nn.functional.rms_norm`` and ``torch.nn.functional.scaled_dot_product_attention`` on its
FlashAttention backend (bf16, [batch, heads, seq, head_dim], scale 1/sqrt(head_dim), causal or not, grouped K
and V with ``enable_gqa``), ``torch.nn.functional.cross_entropy`` with the gradient of its mean loss by
``torch.autograd.grad`` (random int64 labels, about one in ``ignored_one_in`` of them ``ignore_index`` -100,
as the timing program's), the backward pass of ``torch.nn.functional.layer_norm`` and ``rms_norm`` alone
(``torch.autograd.grad`` of x and the parameters, the forward run once before), and a decoding step's
``scaled_dot_product_attention`` over a cache gathered into contiguous K and V (``heads``, ``kv_heads`` and
``head_dim`` from the registry; the new tokens causal at the cache's end; on each backend that takes the problem,
the fastest kept); all called on the GPU with
random inputs, after a second of bf16 products that brings the clocks up. Timed as the timing program's ``single_cold`` rows: CUDA events
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
#: The calls a chapter's registry entry may ask for, by row id: how the pages cite each.
CALLS = {
    "pytorch_softmax": "torch.softmax(x, dim=-1)",
    "pytorch_layer_norm": "torch.native_layer_norm(x, (cols,), gamma, beta, epsilon)",
    "pytorch_rms_norm": "torch.nn.functional.rms_norm(x, (cols,), gamma, epsilon)",
    "pytorch_sdpa_bf16": "torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, "
                         "scale=1/sqrt(head_dim), enable_gqa=kv_heads < heads), FlashAttention backend",
    "pytorch_cross_entropy": "loss = torch.nn.functional.cross_entropy(x, labels, ignore_index=-100) and "
                             "torch.autograd.grad(loss, x): the mean loss and the gradient of the logits",
    "pytorch_layer_norm_backward": "torch.autograd.grad(y, (x, gamma, beta), dy) of y = "
                                   "torch.nn.functional.layer_norm(x, (cols,), gamma, beta, epsilon), the forward "
                                   "run once before: the backward pass alone, from its saved statistics",
    "pytorch_rms_norm_backward": "torch.autograd.grad(y, (x, gamma), dy) of y = "
                                 "torch.nn.functional.rms_norm(x, (cols,), gamma, epsilon), the forward run once "
                                 "before: the backward pass alone",
    "pytorch_sdpa_backward_bf16": "torch.autograd.grad(o, (q, k, v), do) of o = "
                                  "torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, "
                                  "scale=1/sqrt(head_dim), enable_gqa=kv_heads < heads), the forward run once before: "
                                  "the backward pass alone, FlashAttention backend",
    "pytorch_sdpa_decode_bf16": "torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=causal at the "
                                "cache's end where q_len > 1, scale=1/sqrt(head_dim), enable_gqa=True) over the cache "
                                "gathered into contiguous K and V [batch, kv_heads, tokens, head_dim]",
}
#: The rows of the calls on [batch, heads, seq, head_dim] queries, keys and values (the forward, the backward pass);
#: the others take rows x cols.
ATTENTION_ROW = "pytorch_sdpa_bf16"
ATTENTION_BACKWARD_ROW = "pytorch_sdpa_backward_bf16"
ATTENTION_ROWS = (ATTENTION_ROW, ATTENTION_BACKWARD_ROW)
#: The row of a decoding step: [batch, q_len, tokens] (``shape``), q_len new tokens a sequence against its cache.
DECODE_ROW = "pytorch_sdpa_decode_bf16"
#: The backends a decoding step is timed on, in this order; the fastest of those that take the problem is kept.
DECODE_BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")
#: The row of the loss and its gradient: rows x cols logits and a label a row.
CROSS_ENTROPY_ROW = "pytorch_cross_entropy"
#: The rows of the normalizations' backward pass: rows x cols x and dy, gamma (and beta) in x's type.
NORM_BACKWARD_ROWS = ("pytorch_layer_norm_backward", "pytorch_rms_norm_backward")
IGNORE_INDEX = -100  # PyTorch's default, and the timing program's
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
    shape: tuple[int, ...]  # rows, cols; attention: batch, heads, seq, head_dim; decoding: batch, q_len, tokens
    dtype: str  # "fp32" or "bf16"
    epsilon: float = 0.0  # LayerNorm, RMSNorm
    kv_heads: int = 0  # attention: the heads of K and V
    heads: int = 0  # decoding: the query heads (attention has them in its shape)
    head_dim: int = 0  # decoding
    causal: bool = False
    ignored_one_in: int = 0  # cross-entropy: about one label in this many is IGNORE_INDEX (0: none)


def cases(registry: dict, chapters: list[str] | None = None) -> list[Case]:
    """What to time: every size of every PyTorch row of the chapters' registry entries (``chapters``: those
    only; None: every chapter that has rows), in the registry's order."""
    out: list[Case] = []
    by_id = {c["id"]: c for c in registry.get("chapters", [])}
    for chapter_id in chapters or [c for c, entry in by_id.items() if entry.get("pytorch")]:
        chapter = by_id.get(chapter_id)
        if chapter is None:
            raise InputError(f"the step registry has no chapter {chapter_id!r}")
        if not chapter.get("pytorch"):
            raise InputError(f"chapter {chapter_id!r} has no PyTorch rows in the step registry (the chapters that "
                             f"have: {', '.join(c for c, e in by_id.items() if e.get('pytorch')) or 'none'})")
        for row in chapter["pytorch"]:
            if row["id"] not in CALLS:
                raise InputError(f"chapter {chapter_id!r}: no PyTorch call {row['id']!r} (known: {', '.join(CALLS)})")
            if not row["sizes"]:
                raise InputError(f"chapter {chapter_id!r}: PyTorch row {row['id']!r} has no sizes")
            for size in row["sizes"]:
                shape = tuple(size["shape"])
                wanted = ("batch, heads, seq, head_dim" if row["id"] in ATTENTION_ROWS else
                          "batch, q_len, tokens" if row["id"] == DECODE_ROW else "rows, cols")
                if len(shape) != len(wanted.split(", ")):
                    raise InputError(f"{row['id']} at {size['problem']!r}: its shape {list(shape)} is not {wanted}")
                if row["id"] == DECODE_ROW and not all(int(size.get(k, 0)) > 0 for k in ("heads", "kv_heads",
                                                                                         "head_dim")):
                    raise InputError(f"{row['id']} at {size['problem']!r}: no heads, kv_heads and head_dim")
                if size["dtype"] not in TOLERANCE:
                    raise InputError(f"{row['id']} at {size['problem']!r}: no dtype {size['dtype']!r} "
                                     f"(known: {', '.join(TOLERANCE)})")
                epsilon = float(size.get("epsilon", 0.0))
                call = CALLS[row["id"]].replace("epsilon", f"{epsilon:g}".replace("e-0", "e-"))  # 1e-5
                out.append(Case(chapter_id, row["id"], call, size["n"], size["problem"], shape, size["dtype"],
                                epsilon, int(size.get("kv_heads", 0)), int(size.get("heads", 0)),
                                int(size.get("head_dim", 0)), bool(size.get("causal", False)),
                                int(size.get("ignored_one_in", 0))))
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
    if case.row_id == ATTENTION_BACKWARD_ROW:
        return attention_backward_call(case, torch, gen)
    if case.row_id == DECODE_ROW:
        return decode_call(case, torch, gen)
    if case.row_id == ATTENTION_ROW:
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
    if case.row_id == CROSS_ENTROPY_ROW:
        return cross_entropy_call(case, torch, gen, dtype)
    if case.row_id in NORM_BACKWARD_ROWS:
        return norm_backward_call(case, torch, gen, dtype)
    x = torch.randn(rows, cols, device="cuda", generator=gen).to(dtype)
    gamma = torch.randn(cols, device="cuda", generator=gen).to(dtype)
    beta = torch.randn(cols, device="cuda", generator=gen).to(dtype)
    call = {
        "pytorch_softmax": lambda t, g, b: torch.softmax(t, dim=-1),
        "pytorch_layer_norm": lambda t, g, b: torch.native_layer_norm(t, (cols,), g, b, case.epsilon)[0],
        "pytorch_rms_norm": lambda t, g, b: torch.nn.functional.rms_norm(t, (cols,), g, case.epsilon),
    }[case.row_id]

    def error(y):
        reference = call(x.double(), gamma.double(), beta.double())
        return ((y.double() - reference).abs().max() / reference.abs().max()).item()

    return call, (x, gamma, beta), error


def decode_call(case: Case, torch, gen):  # pragma: no cover - needs a GPU
    """A decoding step over a cache already gathered into contiguous K and V: q [batch, heads, q_len, head_dim], K and
    V [batch, kv_heads, tokens, head_dim]; query i sees the keys up to tokens - q_len + i. The error is over the
    first sequence, every head, against float64 computed a K/V head at a time."""
    batch, q_len, tokens = case.shape
    heads, kv_heads, head_dim = case.heads, case.kv_heads, case.head_dim
    group = heads // kv_heads
    q = torch.randn(batch, heads, q_len, head_dim, device="cuda", generator=gen).to(torch.bfloat16)
    k, v = (torch.randn(batch, kv_heads, tokens, head_dim, device="cuda", generator=gen).to(torch.bfloat16)
            for _ in range(2))
    scale = head_dim ** -0.5
    sees = (torch.arange(tokens, device="cuda")[None, :]
            <= torch.arange(q_len, device="cuda")[:, None] + (tokens - q_len))  # [q_len, tokens]
    mask = sees if q_len > 1 else None

    def call(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale,
                                                                enable_gqa=True)

    def error(y):
        qq = q[0].double().reshape(kv_heads, group * q_len, head_dim)  # head h = kv_head * group + g, then i
        scores = qq @ k[0].double().transpose(-1, -2) * scale
        scores = scores.masked_fill(~sees.repeat(group, 1)[None], float("-inf"))
        reference = torch.softmax(scores, dim=-1) @ v[0].double()
        got = y[0].double().reshape(kv_heads, group * q_len, head_dim)
        return ((got - reference).abs().max() / reference.abs().max()).item()

    return call, (q, k, v), error


def attention_backward_call(case: Case, torch, gen):  # pragma: no cover - needs a GPU
    """The backward pass alone, as norm_backward_call() times the norms': the forward runs once here (under the
    backend measure() chose, which the saved graph keeps), and the call is autograd's gradient of Q, K and V from
    it. The error is the largest of the three gradients' errors, each over its largest value (over the largest of
    the three where it is zero throughout), at the query heads of batch 0 that share its first K/V head, against
    the same graph in float64 there, written plainly."""
    batch, heads, seq, head_dim = case.shape
    group = heads // case.kv_heads
    q = torch.randn(batch, heads, seq, head_dim, device="cuda", generator=gen).to(torch.bfloat16).requires_grad_()
    k, v = (torch.randn(batch, case.kv_heads, seq, head_dim, device="cuda", generator=gen).to(torch.bfloat16)
            .requires_grad_() for _ in range(2))
    d_o = torch.randn(batch, heads, seq, head_dim, device="cuda", generator=gen).to(torch.bfloat16)
    scale = head_dim ** -0.5
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=case.causal, scale=scale,
                                                         enable_gqa=case.kv_heads < heads)

    def call(o, d_o):
        return torch.autograd.grad(o, (q, k, v), d_o, retain_graph=True)

    def error(grads):
        leaves = [t[:1, :n].detach().double().requires_grad_() for t, n in ((q, group), (k, 1), (v, 1))]
        scores = leaves[0] @ leaves[1].transpose(-1, -2) * scale
        if case.causal:
            scores = scores.masked_fill(~torch.ones(seq, seq, dtype=torch.bool, device="cuda").tril(), float("-inf"))
        reference = torch.softmax(scores, dim=-1) @ leaves[2]
        references = torch.autograd.grad(reference, leaves, d_o[:1, :group].double())
        got = (grads[0][:1, :group], grads[1][:1, :1], grads[2][:1, :1])
        largest = [r.abs().max().item() for r in references]
        # A gradient that is zero throughout (dQ and dK of one key, whose probabilities are all 1): over the
        # largest value of the three instead.
        return max((g.double() - r).abs().max().item() / (top if top > 0 else max(largest))
                   for g, r, top in zip(got, references, largest))

    return call, (o, d_o), error


def cross_entropy_call(case: Case, torch, gen, dtype):  # pragma: no cover - needs a GPU
    """The loss and its gradient, as row_call() gives the others: the call returns both, and the error is the larger
    of the loss's (over max(|loss|, 1)) and the gradient's (over its largest value) against float64."""
    rows, cols = case.shape
    x = torch.randn(rows, cols, device="cuda", generator=gen).to(dtype).requires_grad_()
    labels = torch.randint(0, cols, (rows,), device="cuda", generator=gen)
    if case.ignored_one_in:
        ignored = torch.randint(0, case.ignored_one_in, (rows,), device="cuda", generator=gen) == 0
        labels = labels.masked_fill(ignored, IGNORE_INDEX)

    def call(logits, targets):
        loss = torch.nn.functional.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX)
        (grad,) = torch.autograd.grad(loss, logits)
        return loss, grad

    def error(result):
        loss, grad = result
        ref_loss, ref_grad = call(x.detach().double().requires_grad_(), labels)
        loss_error = abs(loss.double().item() - ref_loss.item()) / max(abs(ref_loss.item()), 1.0)
        grad_error = ((grad.double() - ref_grad).abs().max() / ref_grad.abs().max()).item()
        return max(loss_error, grad_error)

    return call, (x, labels), error


def norm_backward_call(case: Case, torch, gen, dtype):  # pragma: no cover - needs a GPU
    """The backward pass alone, as row_call() gives the others: the forward runs once here, keeping its graph,
    and the call is autograd's gradient of x and the parameters from the saved statistics (PyTorch's own
    backward kernels). gamma and beta take x's type, which every PyTorch version takes (the chapter's steps take
    them in fp32; their bytes are a row's, against the matrices' thousands of rows). The error is the largest of
    the gradients' errors, each over its largest value, against the same graph in float64."""
    rows, cols = case.shape
    layer = case.row_id == "pytorch_layer_norm_backward"
    x = torch.randn(rows, cols, device="cuda", generator=gen).to(dtype).requires_grad_()
    gamma = (1 + 0.5 * torch.rand(cols, device="cuda", generator=gen)).to(dtype).requires_grad_()
    beta = torch.randn(cols, device="cuda", generator=gen).to(dtype).requires_grad_()
    dy = torch.randn(rows, cols, device="cuda", generator=gen).to(dtype)

    def graph(x, gamma, beta):
        if layer:
            return torch.nn.functional.layer_norm(x, (cols,), gamma, beta, case.epsilon), (x, gamma, beta)
        return torch.nn.functional.rms_norm(x, (cols,), gamma, case.epsilon), (x, gamma)

    y, wrt = graph(x, gamma, beta)

    def call(y, dy):
        return torch.autograd.grad(y, wrt, dy, retain_graph=True)

    def error(grads):
        leaves = [t.detach().double().requires_grad_() for t in (x, gamma, beta)]
        reference_y, reference_wrt = graph(*leaves)
        references = torch.autograd.grad(reference_y, reference_wrt, dy.double())
        return max(((g.double() - r).abs().max() / r.abs().max()).item() for g, r in zip(grads, references))

    return call, (y, dy), error


def sample(call, args, backend, torch, flush, error_of) -> tuple[dict, float]:  # pragma: no cover - needs a GPU
    """``call(*args)`` under ``backend()``: its error (error_of its result), then timed as the module says."""
    import time

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
    return summary(samples), error


def result(case: Case, label: str, timing: dict, error: float) -> dict:
    """A row of the output file: the case, the call as timed, its times and its error."""
    return {"chapter": case.chapter, "id": case.row_id, "call": label, "n": case.n, "problem": case.problem,
            **timing, "max_error_over_max_reference": error,
            "validated": bool(error == error and error <= TOLERANCE[case.dtype])}


def measure(case: Case, torch, flush, seed: int) -> dict:  # pragma: no cover - needs a GPU
    import contextlib

    def inputs():  # the backward row runs its forward here: under the backend that its saved graph keeps
        return row_call(case, torch, torch.Generator(device="cuda").manual_seed(seed))

    label, backend = case.call, contextlib.nullcontext
    if case.row_id == DECODE_ROW:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        call, args, error_of = inputs()
        best = None
        for name in DECODE_BACKENDS:
            def on(name=name):
                return sdpa_kernel([getattr(SDPBackend, name)])
            try:
                with on():
                    call(*args)
            except RuntimeError:  # this backend does not take the problem
                continue
            timed = sample(call, args, on, torch, flush, error_of)
            if best is None or timed[0]["median_ms"] < best[0][0]["median_ms"]:
                best = (timed, name)
        if best is None:
            raise RuntimeError(f"{case.row_id} at {case.problem}: no backend of {', '.join(DECODE_BACKENDS)} takes it")
        (timing, error), name = best
        return result(case, f"{case.call}, on its {name} backend (the fastest of {', '.join(DECODE_BACKENDS)} "
                            f"that take it)", timing, error)
    if case.row_id in ATTENTION_ROWS:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def backend():
            return sdpa_kernel([SDPBackend.FLASH_ATTENTION])
        try:
            with backend():
                call, args, error_of = inputs()
                call(*args)
        except RuntimeError:  # no FlashAttention kernel for this problem: what PyTorch picks itself
            label = case.call.replace("FlashAttention backend", "its own choice of backend (FlashAttention "
                                      "takes no such problem)")
            backend = contextlib.nullcontext
            call, args, error_of = inputs()
    else:
        call, args, error_of = inputs()
    return result(case, label, *sample(call, args, backend, torch, flush, error_of))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pytorch_baselines.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--registry", type=Path, required=True, help="the step registry (build/registry.json)")
    parser.add_argument("--chapters", nargs="+", default=None,
                        help="chapters to time (default: every chapter whose registry entry has PyTorch rows)")
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
