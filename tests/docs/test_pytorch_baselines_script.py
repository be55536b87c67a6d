"""conf/pytorch_baselines.py: what it times and how it decides when to stop (no GPU, no PyTorch needed)."""
from __future__ import annotations

import json
import sys

import pytest

import synth

sys.path.insert(0, str(synth.REPO / "conf"))
import pytorch_baselines as pb  # noqa: E402


def registry() -> dict:
    def size(n, problem, shape):
        return {"n": n, "problem": problem, "shape": list(shape)}

    softmax = {"id": "softmax", "steps": [{"id": "01_x", "sizes": []}, {"id": "08_bf16", "sizes": [
        size(1, "16384 x 8192 fp32", (16384, 8192)), size(2, "16384 x 8192 bf16", (16384, 8192)),
        size(3, "1000 x 1000 fp32", (1000, 1000))]}]}  # an odd shape: not a main one
    norm = {"id": "normalization", "steps": [{"id": "08_bf16", "sizes": [
        size(11, "65536 x 128 LayerNorm bf16", (65536, 128)), size(12, "65536 x 128 RMSNorm bf16", (65536, 128)),
        size(13, "3 x 100000 RMSNorm fp32", (3, 100000))]}]}
    attention = {"id": "attention", "steps": [{"id": "09_x", "sizes": [
        size(128004032008004096, "4 x 32 (8 K/V heads) x 4096, head dim 128, non-causal", (4, 32, 4096, 128)),
        size(1064008016016002048, "8 x 16 x 2048, head dim 64, causal", (8, 16, 2048, 64))]}]}
    return {"chapters": [softmax, norm, attention, {"id": "sgemm", "steps": []}]}


def test_cases_are_the_final_steps_main_shapes_with_the_call_the_problem_names():
    got = pb.cases(registry(), ["softmax", "normalization"])
    assert [(c.row_id, c.n, c.shape, c.dtype) for c in got] == [
        ("pytorch_softmax", 1, (16384, 8192), "fp32"), ("pytorch_softmax", 2, (16384, 8192), "bf16"),
        ("pytorch_layer_norm", 11, (65536, 128), "bf16"), ("pytorch_rms_norm", 12, (65536, 128), "bf16")]
    assert got[2].call.startswith("torch.native_layer_norm") and got[2].problem == "65536 x 128 LayerNorm bf16"


def test_attention_takes_every_size_with_its_heads_and_mask_from_the_key():
    grouped, causal = pb.cases(registry(), ["attention"])
    assert (grouped.row_id, grouped.shape, grouped.kv_heads, grouped.causal, grouped.dtype) == (
        "pytorch_sdpa_bf16", (4, 32, 4096, 128), 8, False, "bf16")
    assert (causal.shape, causal.kv_heads, causal.causal) == ((8, 16, 2048, 64), 16, True)
    reg = registry()
    reg["chapters"][2]["steps"][-1]["sizes"][0]["shape"] = [4, 32, 4096]
    with pytest.raises(pb.InputError, match="is not batch, heads, seq, head_dim"):
        pb.cases(reg, ["attention"])


@pytest.mark.parametrize("chapters, needle", [
    (["sgemm"], "no PyTorch baseline for chapter 'sgemm'"),
    (["softmax", "transpose"], "no PyTorch baseline for chapter 'transpose'"),
])
def test_cases_refuse_chapters_without_calls(chapters, needle):
    with pytest.raises(pb.InputError, match=needle):
        pb.cases(registry(), chapters)


def test_cases_refuse_a_registry_without_the_chapter_or_its_main_shapes():
    with pytest.raises(pb.InputError, match="no chapter 'softmax'"):
        pb.cases({"chapters": []}, ["softmax"])
    reg = registry()
    reg["chapters"][0]["steps"][-1]["sizes"] = reg["chapters"][0]["steps"][-1]["sizes"][2:]
    with pytest.raises(pb.InputError, match="no size at the main shapes"):
        pb.cases(reg, ["softmax"])


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
    (["--chapters", "sgemm"], "no PyTorch baseline"),
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
