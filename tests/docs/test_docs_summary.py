"""The front page's results in a sentence or two: where each final step stands against its library, and the range
of the speedups that compare like with like (stepwise_docs.overview)."""
from __future__ import annotations

import pytest

from stepwise_docs import fmt
from stepwise_docs.data import Dataset
from stepwise_docs.overview import standing, summary_sentences


@pytest.mark.parametrize("ratio, where", [
    (1.06, "ahead"), (1.02, "level"), (1.0, "level"), (0.982, "level"), (0.98, "behind"), (0.959, "behind")])
def test_standing_is_level_within_two_percent(ratio, where):
    assert standing(ratio) == where


def test_two_runs_that_disagree_make_it_level():
    class Disagreeing:
        level = True

    assert standing(1.5, Disagreeing()) == "level"


def test_the_sentences_count_chapters_level_or_ahead_and_leave_unlike_speedups_out(project):
    ds = Dataset.load(project / "registry.json", project / "measurements", project)
    headlines = [fmt.headline(c) for c in ds.chapters.values() if c.headline]
    text = summary_sentences(headlines, {}, ds.gpu_name)
    # demo: lib_scale 0.625x its final step (behind); gemm: cuBLAS 0.947x (behind, more than 2 % apart)
    assert text.startswith(f"On the {ds.gpu_name} (the reference GPU), the final step is level with its library "
                           "(within 2 %) or ahead of it in 0 of the 2 chapters measured against one; it is behind in ")
    assert "FIXTURE chapter (not real) (0.625\u00d7 lib_scale)" in text
    # demo's two steps compute different functions: its speedup is left out of the range
    gemm = next(h for h in headlines if h.chapter.id == "gemm")
    assert text.endswith(f"Final steps run {fmt.format_speedup(gemm.speedup)} to {fmt.format_speedup(gemm.speedup)} "
                         "as fast as first steps (in the one chapter where both compute the same function).")


def test_a_chapter_whose_rerun_disagrees_is_named_with_the_range_of_the_two(project):
    class Disagreeing:  # the recording's 0.625x and a rerun's 0.65x: both behind, more than 2 % apart
        level, disagree = False, True

        @staticmethod
        def range_text() -> str:
            return "0.625\u20130.65\u00d7"

    ds = Dataset.load(project / "registry.json", project / "measurements", project)
    headlines = [fmt.headline(c) for c in ds.chapters.values() if c.headline]
    text = summary_sentences(headlines, {"demo": [Disagreeing()]}, ds.gpu_name)
    assert "FIXTURE chapter (not real) (0.625\u20130.65\u00d7 lib_scale)" in text
    assert standing(0.625, Disagreeing()) == "behind"
