"""What each paper reports, with its source and confidence, read from ``paper_numbers.json``.

The file is package data, ``recagents/resources/paper_numbers.json``.

The numbers are data, not code: each table is transcribed from the project's paper cards,
values kept as the text the source prints (``"0.2333"``, ``"unknown"``), each row tagged
with how far it can be trusted. Notebooks print them beside our results; nothing here is
computed.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import pandas as pd

#: Where the reported numbers live, relative to the ``recagents`` package.
DATA_FILE = "resources/paper_numbers.json"

#: What each confidence tag means, for a caption under a table.
TAGS = {
    "[paper]": "stated in the paper itself (its arXiv abstract)",
    "[paper-copy]": "a verbatim third-party copy of the paper",
    "[reprint]": "reprinted by a later paper",
    "[note]": "a third-party summary: low confidence",
    "[repo-out]": "computed from the official repository's released outputs",
    "[rerun]": "an independent re-run reported on the official repository: not paper values",
}


@cache
def _all() -> dict[str, Any]:
    text = resources.files("recagents").joinpath(DATA_FILE).read_text("utf-8")
    return json.loads(text)


def card_ids() -> list[str]:
    """The experiment ids that have reported numbers (e.g. ``"AgentCF-T2"``)."""
    return [key for key in _all() if not key.startswith("_")]


def table(card_id: str) -> pd.DataFrame:
    """The reported rows of one experiment, as text, with ``tag`` and the ``source``.

    Raises:
        KeyError: An unknown experiment id (the message lists the known ones).
    """
    entries = _all()
    if card_id not in entries or card_id.startswith("_"):
        raise KeyError(f"no reported numbers for {card_id!r}; known: {card_ids()}")
    entry = entries[card_id]
    frame = pd.DataFrame(entry["rows"]).fillna("unknown")
    frame.attrs["source"] = f"{entry['paper']}, {entry['source']}"
    frame.attrs["notes"] = list(entry.get("notes", []))
    return frame


def caption(card_id: str) -> str:
    """One line naming the source and what the tags in the table mean."""
    frame = table(card_id)
    tags = sorted(set(frame.get("tag", pd.Series(dtype=str))))
    meanings = "; ".join(f"{tag} = {TAGS.get(tag, 'see the paper card')}" for tag in tags)
    notes = " ".join(frame.attrs["notes"])
    return f"Source: {frame.attrs['source']}. {meanings}. {notes}".strip()
