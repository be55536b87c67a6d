"""conf/pytorch_baselines.py: what it times and how it decides when to stop (no GPU, no PyTorch needed)."""
from __future__ import annotations

import json
import sys

import pytest

import synth

sys.path.insert(0, str(synth.REPO / "conf"))
import pytorch_baselines as pb  # noqa: E402


def registry() -> dict:
    """A made-up registry whose chapters ask for PyTorch rows as the real ones do (bench/<chapter>/*_chapter.cu)."""
    def size(n, problem, shape, dtype, **extra):
        return {"n": n, "problem": problem, "shape": list(shape), "dtype": dtype, **extra}

    rows_cols = {"id": "rows_cols", "steps": [{"id": "01_x", "sizes": []}], "pytorch": [
        {"id": "pytorch_softmax", "sizes": [size(1, "16384 x 8192 fp32", (16384, 8192), "fp32"),
                                            size(2, "16384 x 8192 bf16", (16384, 8192), "bf16")]}]}
    norms = {"id": "norms", "steps": [], "pytorch": [
        {"id": "pytorch_layer_norm", "sizes": [size(11, "65536 x 128 LayerNorm bf16", (65536, 128), "bf16",
                                                    epsilon=1e-5)]},
        {"id": "pytorch_rms_norm", "sizes": [size(12, "65536 x 128 RMSNorm bf16", (65536, 128), "bf16",
                                                  epsilon=1e-5)]}]}
    heads = {"id": "heads", "steps": [], "pytorch": [{"id": "pytorch_sdpa_bf16", "sizes": [
        size(7, "4 x 32 (8 K/V heads) x 4096, head dim 128, non-causal", (4, 32, 4096, 128), "bf16", kv_heads=8,
             causal=False),
        size(8, "8 x 16 x 2048, head dim 64, causal", (8, 16, 2048, 64), "bf16", kv_heads=16, causal=True)]}]}
    logits = {"id": "logits", "steps": [], "pytorch": [{"id": "pytorch_cross_entropy", "sizes": [
        size(21, "8192 x 50257 bf16", (8192, 50257), "bf16", ignored_one_in=16)]}]}
    backward = {"id": "backward", "steps": [], "pytorch": [
        {"id": "pytorch_layer_norm_backward", "sizes": [size(31, "16384 x 8192 LayerNorm fp32", (16384, 8192),
                                                             "fp32", epsilon=1e-5)]},
        {"id": "pytorch_rms_norm_backward", "sizes": [size(32, "4097 x 4095 RMSNorm bf16", (4097, 4095), "bf16",
                                                           epsilon=1e-5)]}]}
    heads_backward = {"id": "heads_backward", "steps": [], "pytorch": [{"id": "pytorch_sdpa_backward_bf16", "sizes": [
        size(41, "4 x 32 (8 K/V heads) x 4096, head dim 128, causal", (4, 32, 4096, 128), "bf16", kv_heads=8,
             causal=True)]}]}
    decoding = {"id": "decoding", "steps": [], "pytorch": [{"id": "pytorch_sdpa_decode_bf16", "sizes": [
        size(51, "8 x 32768 tokens, 1 new token", (8, 1, 32768), "bf16", heads=32, kv_heads=8, head_dim=128),
        size(52, "64 x 4096 tokens, 4 new tokens", (64, 4, 4096), "bf16", heads=32, kv_heads=8, head_dim=128)]}]}
    return {"chapters": [rows_cols, norms, heads, {"id": "none", "steps": [], "pytorch": []}, logits, backward,
                         decoding, heads_backward]}


def test_cases_are_the_rows_and_sizes_the_registry_asks_for():
    got = pb.cases(registry(), ["rows_cols", "norms"])
    assert [(c.chapter, c.row_id, c.n, c.shape, c.dtype) for c in got] == [
        ("rows_cols", "pytorch_softmax", 1, (16384, 8192), "fp32"),
        ("rows_cols", "pytorch_softmax", 2, (16384, 8192), "bf16"),
        ("norms", "pytorch_layer_norm", 11, (65536, 128), "bf16"), ("norms", "pytorch_rms_norm", 12, (65536, 128), "bf16")]
    assert got[2].call == "torch.native_layer_norm(x, (cols,), gamma, beta, 1e-5)" and got[2].epsilon == 1e-5
    assert got[2].problem == "65536 x 128 LayerNorm bf16"
    assert [c.chapter for c in pb.cases(registry())] == (["rows_cols"] * 2 + ["norms"] * 2 + ["heads"] * 2
                                                         + ["logits"] + ["backward"] * 2
                                                         + ["decoding"] * 2
                                                         + ["heads_backward"])  # every chapter with rows


def test_attention_takes_its_heads_and_mask_from_the_registry():
    grouped, causal = pb.cases(registry(), ["heads"])
    assert (grouped.row_id, grouped.shape, grouped.kv_heads, grouped.causal, grouped.dtype) == (
        "pytorch_sdpa_bf16", (4, 32, 4096, 128), 8, False, "bf16")
    assert (causal.shape, causal.kv_heads, causal.causal) == ((8, 16, 2048, 64), 16, True)
    reg = registry()
    reg["chapters"][2]["pytorch"][0]["sizes"][0]["shape"] = [4, 32, 4096]
    with pytest.raises(pb.InputError, match="is not batch, heads, seq, head_dim"):
        pb.cases(reg, ["heads"])


def test_decoding_takes_its_heads_from_the_registry():
    one, four = pb.cases(registry(), ["decoding"])
    assert (one.row_id, one.shape, one.heads, one.kv_heads, one.head_dim) == (
        "pytorch_sdpa_decode_bf16", (8, 1, 32768), 32, 8, 128)
    assert four.shape == (64, 4, 4096) and "causal at the cache's end" in four.call
    reg = registry()
    decoding_rows = next(c for c in reg["chapters"] if c["id"] == "decoding")["pytorch"][0]
    decoding_rows["sizes"][0]["shape"] = [8, 32768]
    with pytest.raises(pb.InputError, match="is not batch, q_len, tokens"):
        pb.cases(reg, ["decoding"])
    reg = registry()
    decoding_rows = next(c for c in reg["chapters"] if c["id"] == "decoding")["pytorch"][0]
    del decoding_rows["sizes"][1]["head_dim"]
    with pytest.raises(pb.InputError, match="no heads, kv_heads and head_dim"):
        pb.cases(reg, ["decoding"])


def test_cross_entropy_takes_its_ignored_labels_from_the_registry():
    (case,) = pb.cases(registry(), ["logits"])
    assert (case.row_id, case.shape, case.dtype, case.ignored_one_in) == (
        "pytorch_cross_entropy", (8192, 50257), "bf16", 16)
    assert "cross_entropy(x, labels, ignore_index=-100)" in case.call and "autograd.grad" in case.call
    assert pb.IGNORE_INDEX == -100  # the timing program's (cross_entropy::default_ignore_index)
    assert pb.cases(registry(), ["rows_cols"])[0].ignored_one_in == 0


def test_the_norms_backward_passes_are_timed_alone_from_the_forwards_saved_graph():
    layer, rms = pb.cases(registry(), ["backward"])
    assert (layer.row_id, layer.shape, layer.dtype, layer.epsilon) == (
        "pytorch_layer_norm_backward", (16384, 8192), "fp32", 1e-5)
    assert "autograd.grad(y, (x, gamma, beta), dy)" in layer.call
    assert "layer_norm(x, (cols,), gamma, beta, 1e-5)" in layer.call
    assert (rms.row_id, rms.shape, rms.dtype) == ("pytorch_rms_norm_backward", (4097, 4095), "bf16")
    assert "autograd.grad(y, (x, gamma), dy)" in rms.call and "rms_norm(x, (cols,), gamma, 1e-5)" in rms.call
    assert set(pb.NORM_BACKWARD_ROWS) <= set(pb.CALLS)


def test_attention_backward_is_timed_alone_with_its_heads_and_mask():
    (case,) = pb.cases(registry(), ["heads_backward"])
    assert (case.row_id, case.shape, case.kv_heads, case.causal, case.dtype) == (
        "pytorch_sdpa_backward_bf16", (4, 32, 4096, 128), 8, True, "bf16")
    assert "autograd.grad(o, (q, k, v), do)" in case.call and "the backward pass alone" in case.call
    reg = registry()
    reg["chapters"][-1]["pytorch"][0]["sizes"][0]["shape"] = [4096, 128]
    with pytest.raises(pb.InputError, match="is not batch, heads, seq, head_dim"):
        pb.cases(reg, ["heads_backward"])


@pytest.mark.parametrize("chapters, needle", [
    (["none"], "chapter 'none' has no PyTorch rows in the step registry"),
    (["rows_cols", "other"], "no chapter 'other'"),
])
def test_cases_refuse_chapters_without_rows(chapters, needle):
    with pytest.raises(pb.InputError, match=needle):
        pb.cases(registry(), chapters)


@pytest.mark.parametrize("change, needle", [
    (lambda row: row.update(id="pytorch_gelu"), "no PyTorch call 'pytorch_gelu'"),
    (lambda row: row.update(sizes=[]), "has no sizes"),
    (lambda row: row["sizes"][0].update(dtype="fp16"), "no dtype 'fp16'"),
    (lambda row: row["sizes"][0].update(shape=[1, 2, 3]), "is not rows, cols"),
])
def test_cases_refuse_rows_they_cannot_time(change, needle):
    reg = registry()
    change(reg["chapters"][0]["pytorch"][0])
    with pytest.raises(pb.InputError, match=needle):
        pb.cases(reg, ["rows_cols"])


def test_sampling_stops_as_the_timing_program_does():
    steady = [1.0] * pb.MIN_SAMPLES
    assert pb.keep_sampling(steady[:-1], 0.0)  # fewer than the minimum
    assert not pb.keep_sampling(steady, 0.0)  # no spread: the standard error is met at once
    noisy = [1.0, 2.0] * (pb.MIN_SAMPLES // 2)
    assert pb.keep_sampling(noisy, 0.0)
    assert not pb.keep_sampling(noisy, pb.MAX_SECONDS)  # out of time
    assert not pb.keep_sampling([1.0, 2.0] * (pb.MAX_SAMPLES // 2), 0.0)  # out of samples


def test_summary_and_slugs():
    assert pb.summary([3.0, 1.0, 2.0]) == {"median_ms": 2.0, "min_ms": 1.0, "max_ms": 3.0, "samples": 3}
    with pytest.raises(ValueError):
        pb.summary([])
    assert pb.slug_ok("nvidia-h200") and not pb.slug_ok("NVIDIA H200") and not pb.slug_ok("")


def test_main_without_pytorch_says_so_and_writes_nothing(tmp_path, monkeypatch, capsys):
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(registry()))
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    out = tmp_path / "out" / "x.json"
    assert pb.main(["--registry", str(path), "--gpu-slug", "nvidia-h200", "--commit", "abc1234",
                    "--out", str(out)]) == 3
    assert "no PyTorch in" in capsys.readouterr().out and not out.exists()


@pytest.mark.parametrize("args, needle", [
    (["--gpu-slug", "NVIDIA H200"], "is not a slug"),
    (["--chapters", "none"], "has no PyTorch rows"),
    (["--registry", "/nonexistent/registry.json"], "registry.json"),
])
def test_main_refuses_bad_input_with_one_line(tmp_path, capsys, args, needle):
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(registry()))
    base = {"--registry": str(path), "--gpu-slug": "nvidia-h200", "--commit": "abc1234",
            "--out": str(tmp_path / "x.json")}
    base.update(zip(args[::2], args[1::2]))
    assert pb.main([x for pair in base.items() for x in pair]) == 2
    assert needle in capsys.readouterr().err
