"""Shared fixtures: the committed tiny dataset and an isolated cache directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from recagents.data import Dataset, load_dataset

TINY_PATH = Path(__file__).resolve().parent / "fixtures" / "tiny"


@pytest.fixture
def tiny_path() -> Path:
    """Folder of the tiny RecBole atomic dataset (see tests/fixtures/make_tiny.py)."""
    return TINY_PATH


@pytest.fixture
def tiny(tiny_path: Path) -> Dataset:
    """The tiny dataset, loaded afresh for each test (40 users, 59 items, 574 rows)."""
    return load_dataset(tiny_path)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder, set as RECAGENTS_CACHE_DIR for the test."""
    path = tmp_path / "cache"
    path.mkdir()
    monkeypatch.setenv("RECAGENTS_CACHE_DIR", str(path))
    return path
