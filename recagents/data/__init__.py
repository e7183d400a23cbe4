"""Data: datasets as tidy frames, the papers' released files, and how they are read safely.

Its modules are in MODULES.md; :func:`load_dataset` is the one entry point that knows every
dataset name (``ml-100k``, a paper's release, or the path of any RecBole atomic dataset).
"""

from __future__ import annotations

from pathlib import Path

from recagents.data import released
from recagents.data.datasets import RELEASED_DATASETS, Dataset, read_dataset


def load_dataset(name_or_path: str | Path = "ml-100k") -> Dataset:
    """Load a dataset by name or path: ``ml-100k``, a paper's release, or any atomic dataset.

    A name in :data:`~recagents.data.datasets.RELEASED_DATASETS` (``"cds-dense"``,
    ``"cds-sparse"``, ``"lastfm"``, ``"agent4rec-ml1m"``) loads a paper's released files through
    :func:`~recagents.data.released.released_dataset` (their split and test samples come from
    :mod:`~recagents.data.released`); anything else is read by
    :func:`~recagents.data.datasets.read_dataset`.

    Raises:
        DatasetError: Unknown name, missing or malformed file, or impossible value, in one
            line naming the file (and the line, for a malformed row).
        recagents.data.releases.ReleaseError: A released file that cannot be fetched.
    """
    if isinstance(name_or_path, str) and name_or_path in RELEASED_DATASETS:
        return released.released_dataset(name_or_path)
    return read_dataset(name_or_path)
