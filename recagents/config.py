"""One settings object, read from ``RECAGENTS_*`` environment variables.

Why: notebooks, tests and the Makefile must agree on where cached artefacts live
without passing paths around. Nothing is read at import time; call :func:`settings`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    """Project-wide settings.

    Attributes:
        cache_dir: Where saved splits, candidate sets and trained models live
            (``RECAGENTS_CACHE_DIR``; default ``~/.cache/recagents``).
    """

    cache_dir: Path


def settings() -> Settings:
    """Read the settings from the environment now (no caching, so tests can monkeypatch)."""
    cache = os.environ.get("RECAGENTS_CACHE_DIR") or Path.home() / ".cache" / "recagents"
    return Settings(cache_dir=Path(cache).expanduser())
