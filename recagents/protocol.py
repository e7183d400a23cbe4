"""The shared ranking contract: how an LLM ranks numbered candidates, and how we read it.

Every method that asks a model to rank a candidate list (AgentCF's rankers, the zero-shot
LLM ranker, InteRecAgent's one-turn evaluation, the cross-paper comparison) uses the same
JSON schema (:func:`ranking_schema`), the same checked parse with a stated repair policy
(:func:`parse_ranking`, :class:`RankingParse`) and the same long frame
``[user_id, item_id, score, rank]`` (:func:`ranking_frame`), so one evaluation serves them
all. Notebook 01, section "Ranking the candidates", teaches it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import ITEM, RANK, SCORE, USER

__all__ = [
    "FAITHFUL_MISSING_RANK",
    "RankingParse",
    "parse_ranking",
    "ranking_frame",
    "ranking_schema",
]

#: Rank given to a candidate the model left out, under the paper's ("faithful") scorer: the
#: official code scores it -10000, tied with every item outside the candidate list.
FAITHFUL_MISSING_RANK = 1_000_000


def ranking_schema(n: int) -> dict[str, Any]:
    """A ranking of ``n`` numbered candidates: exactly ``n`` numbers from 1 to ``n``.

    Backends cannot enforce "each number once"; :func:`parse_ranking` checks and repairs.

    Taught in: not shown in a notebook (used by
        recagents.papers.agentcf.evaluate.rank_candidates and
        recagents.papers.interecagent.evaluate.one_turn_ranking).
    """
    return {
        "type": "object",
        "properties": {
            "ranking": {
                "type": "array",
                "items": {"type": "integer", "enum": list(range(1, n + 1))},
                "minItems": n,
                "maxItems": n,
            }
        },
        "required": ["ranking"],
    }


@dataclass(frozen=True)
class RankingParse:
    """A ranking reply checked against the candidates, and how it was repaired.

    Taught in: not shown in a notebook (used by recagents.protocol.parse_ranking).

    Attributes:
        order: The valid candidate indices (0-based) in the order given, duplicates dropped.
        missing: Candidate indices the reply left out (0-based, display order).
        duplicates: Numbers that appeared more than once (extra copies dropped).
        out_of_range: Entries that were not a candidate number (dropped).
        status: ``complete`` (a permutation), ``repaired`` or ``failed`` (nothing usable).
    """

    order: tuple[int, ...]
    missing: tuple[int, ...]
    duplicates: int
    out_of_range: int
    status: Literal["complete", "repaired", "failed"]


def parse_ranking(data: Any, n: int) -> RankingParse:
    """Validate a ranking reply as a permutation of candidates ``1..n``.

    The repair policy: duplicates keep their first position, entries that are not a
    candidate number are dropped, and candidates left out are reported as ``missing``
    (:func:`ranking_frame` places them after every ranked one, in random order).

    Taught in: not shown in a notebook (used by
        recagents.papers.agentcf.evaluate.rank_candidates and
        recagents.papers.interecagent.evaluate.one_turn_ranking).
    """
    raw = data.get("ranking") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        return RankingParse((), tuple(range(n)), 0, 0, "failed")
    order: list[int] = []
    duplicates = out_of_range = 0
    for entry in raw:
        number = int(entry) if isinstance(entry, int) and not isinstance(entry, bool) else None
        if isinstance(entry, str) and entry.strip().isascii() and entry.strip().isdecimal():
            number = int(entry.strip())
        if number is None or not 1 <= number <= n:
            out_of_range += 1
        elif number - 1 in order:
            duplicates += 1
        else:
            order.append(number - 1)
    missing = tuple(i for i in range(n) if i not in order)
    if not order:
        status: Literal["complete", "repaired", "failed"] = "failed"
    elif missing or duplicates or out_of_range:
        status = "repaired"
    else:
        status = "complete"
    return RankingParse(tuple(order), missing, duplicates, out_of_range, status)


def ranking_frame(
    user: str,
    items: Sequence[str],
    parse: RankingParse,
    scorer: Literal["repaired", "faithful"] = "repaired",
    seed: int = 0,
) -> pd.DataFrame:
    """One user's ``[user_id, item_id, score, rank]`` from a checked ranking reply.

    Ranked candidates come first, in the order given (score ``n - position``). Candidates
    the reply left out:

    - ``repaired`` (ours): placed after all ranked ones in a seeded random order, so leaving
      the positive out costs what a random placement among the rest would;
    - ``faithful`` (the official code): scored -10000 and tied with every item outside the
      list, i.e. ranked beyond any cut-off (:data:`FAITHFUL_MISSING_RANK`).

    Taught in: not shown in a notebook (used by recagents.papers.agentcf.evaluate.rank_candidates).
    """
    n = len(items)
    rank = np.zeros(n, dtype=np.int64)
    score = np.zeros(n, dtype=float)
    for position, index in enumerate(parse.order):
        rank[index] = position + 1
        score[index] = n - position
    missing = np.array(parse.missing, dtype=int)
    if len(missing):
        if scorer == "faithful":
            rank[missing] = FAITHFUL_MISSING_RANK
            score[missing] = -10000.0
        else:
            shuffled = np.random.default_rng(seed).permutation(missing)
            rank[shuffled] = len(parse.order) + 1 + np.arange(len(shuffled))
            score[shuffled] = -np.arange(1, len(shuffled) + 1, dtype=float)
    return pd.DataFrame({USER: user, ITEM: list(items), SCORE: score, RANK: rank})
