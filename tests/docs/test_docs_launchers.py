"""The launchers a step's registry entry names: one, a template with its arguments, or several (a chapter of two
operations, as the normalization chapter's layer_norm and rms_norm)."""
from __future__ import annotations

import pytest

from stepwise_docs.steps import launcher_names


@pytest.mark.parametrize("text, names", [
    ("update", ["update"]),
    ("sum_matrix<32, 16>", ["sum_matrix<32, 16>"]),
    ("layer_norm, rms_norm", ["layer_norm", "rms_norm"]),
    ("layer_norm_of, rms_norm_of<float, 4>", ["layer_norm_of", "rms_norm_of<float, 4>"]),
    (" a ,, b ", ["a", "b"]),
])
def test_launcher_names(text, names):
    assert launcher_names(text) == names
