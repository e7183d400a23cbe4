"""Shared fixtures (the committed tiny dataset, an isolated cache directory) and the tiers.

Tests live in three tiers: ``unit/`` (no model, no RecBole training beyond the tiny fixture;
``make test-fast``), ``integration/`` (the embedded model, RecBole training) and
``notebooks/`` (smoke runs of every notebook). Tests outside ``unit/`` are marked ``slow``
here, so ``-m "not slow"`` selects the unit tier wherever pytest is pointed.
``scripted_server.py`` beside this file is importable from every tier (pytest puts this
folder on ``sys.path`` when it loads this file).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from recagents.data import load_dataset
from recagents.data.datasets import Dataset

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
    """An empty cache folder, set as RECAGENTS_CACHE_DIR (and holding the reply cache)."""
    path = tmp_path / "cache"
    path.mkdir()
    monkeypatch.setenv("RECAGENTS_CACHE_DIR", str(path))
    monkeypatch.delenv("RECAGENTS_LLM_CACHE", raising=False)
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test outside ``tests/unit`` as ``slow``."""
    unit = Path(__file__).resolve().parent / "unit"
    for item in items:
        if unit not in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.slow)
