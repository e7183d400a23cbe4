"""What went wrong: the embedded model's failure modes, classified and counted by code.

Why: the default run's small model (SmolLM2-135M) is at chance on every taste judgement, and
a blank result teaches nothing. Each paper names the ways its replies fail (copies a template
placeholder, always picks one position, accepts everything, ...) as :class:`FailureMode`
detectors; :func:`classify` counts them over a run's replies and keeps a real example of
each; :meth:`FailureReport.sentences` says, from those counts, what went wrong and (in the
mode's hand-written ``why``) why a 135M model does it. A reply may show several modes; one
that shows none is counted as ``clean``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pandas as pd

T = TypeVar("T")

#: Longest example text kept per mode (characters).
EXAMPLE_CHARS = 160

#: Text a chat template leaves for the writer to fill ("[Your Name]", "<response ...>").
PLACEHOLDER = re.compile(
    r"\[(?:your|insert|name|user|item|movie)[^\]]{0,40}\]|<[a-z][^<>]{2,40}>", re.I
)


def has_placeholder(text: str) -> bool:
    """Whether ``text`` holds a template placeholder such as ``[Your Name]`` or ``<reason>``."""
    return bool(PLACEHOLDER.search(text or ""))


@dataclass(frozen=True)
class FailureMode(Generic[T]):
    """One way the model's replies go wrong.

    Attributes:
        name: Short identifier (``placeholder``, ``same_position``).
        label: What went wrong, as a phrase ("copies a template placeholder").
        why: Why a 135M model does it (hand-written: it explains the model, not this run).
        detect: Whether one unit (a reply, a user's replies) shows the mode.
    """

    name: str
    label: str
    why: str
    detect: Callable[[T], bool]


@dataclass(frozen=True)
class FailureCount:
    """How many units showed one mode, and the first one's text."""

    name: str
    label: str
    why: str
    count: int
    n: int
    example: str

    @property
    def share(self) -> float:
        """The fraction of units that showed the mode."""
        return self.count / self.n if self.n else 0.0


def _clip(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= EXAMPLE_CHARS else flat[: EXAMPLE_CHARS - 1] + "…"


@dataclass
class FailureReport:
    """The counts of every mode over ``n`` units of one kind (``what``)."""

    what: str
    n: int
    counts: list[FailureCount] = field(default_factory=list)
    clean: int = 0

    def frame(self) -> pd.DataFrame:
        """One row per mode, most frequent first: what went wrong, count, share, example."""
        rows = [
            {
                "failure": c.label,
                "count": c.count,
                "of": c.n,
                "share": round(c.share, 3),
                "example": c.example,
            }
            for c in sorted(self.counts, key=lambda c: -c.count)
        ]
        rows.append(
            {
                "failure": "none of these",
                "count": self.clean,
                "of": self.n,
                "share": round(self.clean / self.n, 3) if self.n else 0.0,
                "example": "",
            }
        )
        return pd.DataFrame(rows)

    def sentences(self, limit: int = 4) -> list[str]:
        """What went wrong, in words made from the counts: the ``limit`` most frequent modes."""
        if self.n == 0:
            return [f"No {self.what} to classify in this run."]
        seen = [c for c in sorted(self.counts, key=lambda c: -c.count) if c.count]
        if not seen:
            return [f"None of the {self.n} {self.what} shows a classified failure."]
        out = []
        for c in seen[:limit]:
            example = f' (e.g. "{c.example}")' if c.example else ""
            out.append(
                f"In {c.count} of {c.n} {self.what} ({c.share:.0%}) the model {c.label}"
                f"{example}. Why: {c.why}"
            )
        out.append(
            f"{self.clean} of {self.n} {self.what} ({self.clean / self.n:.0%}) show none of "
            "these failures."
        )
        return out

    def markdown(self, limit: int = 4) -> str:
        """The sentences as a bullet list, for ``IPython.display.Markdown``."""
        return "\n".join(f"- {s}" for s in self.sentences(limit))

    def records(self) -> dict[str, Any]:
        """Plain data for ``record()``: n, clean and each mode's count and example."""
        return {
            "what": self.what,
            "n": self.n,
            "clean": self.clean,
            "modes": {c.name: {"count": c.count, "example": c.example} for c in self.counts},
        }


def classify(
    units: Iterable[T],
    modes: Sequence[FailureMode[T]],
    what: str = "replies",
    text: Callable[[T], str] = str,
) -> FailureReport:
    """Count each mode over ``units`` and keep the text of its first example.

    Args:
        units: The replies (or per-user groups of replies) of one kind.
        modes: The detectors; names must be unique.
        what: The plural noun the sentences use ("page replies", "dialogues").
        text: How a unit's example is shown (default ``str``).
    """
    names = [m.name for m in modes]
    if len(set(names)) != len(names):
        raise ValueError(f"failure mode names must be unique, got {names}")
    items = list(units)
    counts = {m.name: 0 for m in modes}
    examples = {m.name: "" for m in modes}
    clean = 0
    for unit in items:
        hit = False
        for mode in modes:
            if mode.detect(unit):
                hit = True
                counts[mode.name] += 1
                if not examples[mode.name]:
                    examples[mode.name] = _clip(text(unit))
        clean += not hit
    return FailureReport(
        what=what,
        n=len(items),
        counts=[
            FailureCount(m.name, m.label, m.why, counts[m.name], len(items), examples[m.name])
            for m in modes
        ],
        clean=clean,
    )
