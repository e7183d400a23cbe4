"""What went wrong with the embedded model in an Agent4Rec run, per agent session, by code.

Why: with the 135M model the default run shows no effect at all (every agent leaves early
with the same satisfaction for every recommender); counting *how* its replies fail turns the
blank into a lesson. A unit is one agent session (one agent on one recommender's list): its
exposures and its interview, read from the run's two logs. The modes are
:class:`recagents.failures.FailureMode` detectors; :func:`recagents.failures.classify`
counts them and keeps a real example of each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from recagents.columns import ITEM, USER
from recagents.failures import FailureMode, has_placeholder


@dataclass(frozen=True)
class Session:
    """One agent's session as its replies left it: per item shown, and its interview.

    Attributes:
        user: The agent.
        recommender: Whose list it browsed.
        exit_page: The last page it saw.
        exited: Whether it chose to leave there (rather than ran out of pages).
        satisfaction: Its interview score (NaN when unusable).
        pages: The page of each item shown.
        aligned: Whether it said the item matches its taste (None: not said).
        watched: Whether it watched the item.
        ratings: Its rating of each watched item (NaN when not watched).
        feelings: Its feeling about each watched item ("" when not watched).
        mine: Whether the item is one of its held-out items (its true taste).
    """

    user: str
    recommender: str
    exit_page: int
    exited: bool
    satisfaction: float
    pages: tuple[int, ...]
    aligned: tuple[bool | None, ...]
    watched: tuple[bool, ...]
    ratings: tuple[float, ...]
    feelings: tuple[str, ...]
    mine: tuple[bool, ...]

    def text(self) -> str:
        """The session in one line, for a failure table's example."""
        feelings = [f for f, w in zip(self.feelings, self.watched, strict=True) if w]
        said = f'; feeling: "{feelings[0]}"' if feelings else ""
        return (
            f"agent {self.user}, {self.recommender}: watched {sum(self.watched)} of "
            f"{len(self.watched)} shown ({sum(self.mine)} of them its own), left on page "
            f"{self.exit_page}, satisfaction {self.satisfaction:g}{said}"
        )


def sessions_of(
    exposures: pd.DataFrame, sessions: pd.DataFrame, held_out: Mapping[str, set[str]]
) -> list[Session]:
    """Every session of a run, with its exposures, in the order of ``sessions``."""
    by_session = {key: rows for key, rows in exposures.groupby([USER, "recommender"])}
    out = []
    for row in sessions.itertuples(index=False):
        user, name = str(getattr(row, USER)), str(row.recommender)
        shown = by_session.get((user, name), exposures.iloc[0:0])
        taste = held_out.get(user, set())
        out.append(
            Session(
                user=user, recommender=name, exit_page=int(row.exit_page),
                exited=bool(row.exited), satisfaction=float(row.satisfaction),
                pages=tuple(int(p) for p in shown["page"]),
                aligned=tuple(None if pd.isna(a) else bool(a) for a in shown["aligned"]),
                watched=tuple(bool(w) for w in shown["watched"]),
                ratings=tuple(float(r) if pd.notna(r) else np.nan for r in shown["rating"]),
                feelings=tuple(str(f or "") for f in shown["feeling"]),
                mine=tuple(str(i) in taste for i in shown[ITEM]),
            )
        )  # fmt: skip
    return out


def _all_or_none(session: Session) -> bool:
    """On every page it saw, it watched every item or none."""
    pages: dict[int, list[bool]] = {}
    for page, watched in zip(session.pages, session.watched, strict=True):
        pages.setdefault(page, []).append(watched)
    return bool(pages) and all(all(w) or not any(w) for w in pages.values())


def _contradicts(session: Session) -> bool:
    """It watched an item it said does not match its taste."""
    return any(w and a is False for w, a in zip(session.watched, session.aligned, strict=True))


def _taste_blind(session: Session) -> bool:
    """Shown its own held-out items and others, it watched its own no more often."""
    own = [w for w, m in zip(session.watched, session.mine, strict=True) if m]
    other = [w for w, m in zip(session.watched, session.mine, strict=True) if not m]
    return bool(own) and bool(other) and np.mean(own) <= np.mean(other)


def _placeholder(session: Session) -> bool:
    """A watched item's feeling is empty or a template placeholder."""
    return any(
        w and (not f.strip() or has_placeholder(f))
        for w, f in zip(session.watched, session.feelings, strict=True)
    )


def modal_satisfaction(units: Sequence[Session]) -> float | None:
    """The interview score most sessions gave, when more than half of them gave it."""
    scores = pd.Series([u.satisfaction for u in units], dtype=float).dropna()
    if scores.empty:
        return None
    counts = scores.value_counts()
    return float(counts.index[0]) if counts.iloc[0] * 2 > len(scores) else None


def failure_modes(units: Sequence[Session]) -> list[FailureMode[Session]]:
    """Agent4Rec's failure modes of a small model, for this run's sessions.

    The "same satisfaction" mode needs the run: it flags the sessions that gave the score
    more than half of all sessions gave (none when no score is that common).
    """
    modal = modal_satisfaction(units)
    return [
        FailureMode(
            "leaves_page_1", "chooses to leave on page 1",
            "the exit reply does not weigh the page against the agent's habits; a 135M model "
            "gives the same likely continuation to every exit prompt of the same shape.",
            lambda s: s.exited and s.exit_page == 1,
        ),
        FailureMode(
            "same_satisfaction",
            "gives the interview score most sessions give"
            + (f" ({modal:g})" if modal is not None else ""),
            "the score follows the prompt's shape, not the memory of the visit, so it does not "
            "change with what was shown or watched.",
            lambda s: modal is not None and s.satisfaction == modal,
        ),
        FailureMode(
            "all_or_none", "watches every item of a page or none",
            "it fills the per-item JSON by repeating one pattern down the list instead of "
            "judging each item.",
            _all_or_none,
        ),
        FailureMode(
            "contradicts_itself", "watches an item it says does not match its taste",
            "each JSON field is filled from local patterns, so 'aligned' and 'watch' need not "
            "agree although the prompt says to watch only what matches.",
            _contradicts,
        ),
        FailureMode(
            "taste_blind", "watches its own held-out items no more often than the others",
            "the persona and the items are read as text but not matched: at 135M parameters "
            "the taste judgement is at chance (section 2's probe).",
            _taste_blind,
        ),
        FailureMode(
            "empty_or_placeholder", "leaves a watched item's feeling empty or a placeholder",
            "a small model copies the schema's or template's slot instead of writing content.",
            _placeholder,
        ),
    ]  # fmt: skip
