"""Shared fixtures for the docs tooling tests (no GPU, no C++ build needed)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import synth  # noqa: E402


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A private copy of tests/docs/fixtures/project (snippets, docs, registry, FIXTURE numbers)."""
    dest = tmp_path / "project"
    shutil.copytree(synth.FIXTURE_PROJECT, dest)
    return dest


@pytest.fixture
def schema_path() -> Path:
    return synth.SCHEMA
