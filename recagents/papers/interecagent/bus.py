"""The candidate bus: the item ids InteRecAgent's tools hand to each other.

Item lists never enter a prompt: each tool reads the current candidates from the
:class:`CandidateBus`, writes its result back (capped at 1,000 ids) and reports only a
short observation; :class:`BusEvent` records each write for traces.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from recagents.papers.interecagent.config import BUS_CAP


class BusEvent(NamedTuple):
    """One write to the bus: which tool, and how many candidates before and after."""

    tool: str
    before: int
    after: int


class CandidateBus:
    """The candidate item ids the tools pass to each other, so that lists stay out of prompts.

    It holds all items after :meth:`reset` (the start of a user turn). Unlike the paper's bus,
    which starts with ids 1..N-1 and so never holds the last item, it holds every item of the
    table. Whenever a tool writes more than ``cap`` ids, the first ``cap`` are kept when they
    come in a meaningful order (a query's ORDER BY, similarity), else a random ``cap``
    drawn with the bus's seeded generator (kept in their incoming order).

    Args:
        all_ids: Every item id, in table order.
        cap: Most ids kept after a write (the paper's 1,000).
        seed: Seed of the generator for random caps; :meth:`reset` restarts it.

    Attributes:
        ids: Current candidates, in order.
        scores: Scores of the current candidates from the last tool that scored them, or
            ``None``; ``score_kind`` says which ("similarity", "popularity", "preference").
        history: One :class:`BusEvent` per write since the last reset.
    """

    def __init__(self, all_ids: Sequence[str], cap: int = BUS_CAP, seed: int = 0) -> None:
        if cap < 1:
            raise ValueError(f"cap must be at least 1, got {cap}")
        if len(set(all_ids)) != len(all_ids):
            raise ValueError("all_ids lists an id more than once")
        self.all_ids: tuple[str, ...] = tuple(all_ids)
        self.cap = cap
        self.seed = seed
        self.ids: list[str] = []
        self.scores: dict[str, float] | None = None
        self.score_kind: str | None = None
        self.history: list[BusEvent] = []
        self.reset()

    def reset(self) -> None:
        """Back to all items, no scores, empty history and a restarted generator."""
        self.ids = list(self.all_ids)
        self.scores = None
        self.score_kind = None
        self.history = []
        self._rng = np.random.default_rng(self.seed)

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, item: object) -> bool:
        return item in set(self.ids)

    def __repr__(self) -> str:
        return f"CandidateBus({len(self):,} of {len(self.all_ids):,} items)"

    def set(
        self,
        ids: Iterable[str],
        tool: str,
        ordered: bool = True,
        scores: Mapping[str, float] | None = None,
        score_kind: str | None = None,
    ) -> str:
        """Replace the candidates (duplicates dropped, the cap applied) and record the write.

        Args:
            ids: New candidates, in order.
            tool: Name of the tool writing, for :attr:`history`.
            ordered: Whether the order means something (then a cap keeps the first ids).
            scores: Scores of (at least) the new ids; ``None`` keeps the existing scores of
                the ids that remain.
            score_kind: What ``scores`` measure.

        Returns:
            A note when the cap cut the list, else ``""``.
        """
        new = list(dict.fromkeys(ids))
        before = len(self.ids)
        note = ""
        if len(new) > self.cap:
            if ordered:
                note = (
                    f"{len(new):,} items matched; kept the first {self.cap:,} in order "
                    f"(the candidate list holds at most {self.cap:,})"
                )
                new = new[: self.cap]
            else:
                picked = np.sort(self._rng.choice(len(new), size=self.cap, replace=False))
                note = (
                    f"{len(new):,} items matched in no particular order; kept a random "
                    f"{self.cap:,} (the candidate list holds at most {self.cap:,})"
                )
                new = [new[i] for i in picked]
        self.ids = new
        if scores is not None:
            self.scores = {i: float(scores[i]) for i in new}
            self.score_kind = score_kind
        elif self.scores is not None:
            self.scores = {i: self.scores[i] for i in new if i in self.scores}
        self.history.append(BusEvent(tool, before, len(new)))
        return note
