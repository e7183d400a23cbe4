"""How InteRecAgent's recommendations are scored, and the Random / Pop baselines.

Hit@K and AT@K of conversations (:func:`hit_at_k_and_at`, by id with :func:`hit_by_id` or
by the paper's fuzzy rule :func:`fuzzy_hit`), the simulator's leak check (:func:`leaks`),
the one-turn Recall@k and ranking NDCG, and the two recommenders without a language model
that the one-turn tasks compare with. None of it needs a language model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
from rapidfuzz import fuzz

from recagents.metrics import bootstrap_ci
from recagents.papers.interecagent.catalogue import ItemTable

# --------------------------------------------------------------------------- metrics


def hit_by_id(
    recommended_ids_per_turn: Sequence[Sequence[str]], target: str
) -> tuple[bool, int | None]:
    """Whether (and in which 1-based turn) the target id was first recommended."""
    for turn, ids in enumerate(recommended_ids_per_turn, 1):
        if target in ids:
            return True, turn
    return False, None


class ConversationMetrics(NamedTuple):
    """Hit@K and AT@K of a set of conversations, with bootstrap intervals."""

    hit: float
    hit_low: float
    hit_high: float
    at: float
    at_low: float
    at_high: float
    n: int


def hit_at_k_and_at(
    sessions: Iterable[int | None | tuple[bool, int | None]],
    max_turns: int = 5,
    n_boot: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> ConversationMetrics:
    """Hit@K (share of conversations with a hit) and AT@K (mean hit turn, lower is better).

    A miss counts as ``max_turns + 1`` turns in AT@K (6 for the paper's 5 turns), and a hit
    after ``max_turns`` counts as a miss. Intervals: :func:`recagents.metrics.bootstrap_ci`.

    Args:
        sessions: Per conversation the hit turn (1-based) or ``None``, or the
            ``(hit, turn)`` pair of :func:`hit_by_id`.
        max_turns: K, the most turns a conversation has.
        n_boot: Bootstrap resamples.
        ci: Confidence level.
        seed: Seed of the resampling.
    """
    turns: list[int | None] = []
    for session in sessions:
        turn = session[1] if isinstance(session, tuple) else session
        if turn is not None and (isinstance(turn, bool) or int(turn) < 1):
            raise ValueError(f"a hit turn must be an integer >= 1 or None, got {turn!r}")
        turns.append(None if turn is None or int(turn) > max_turns else int(turn))
    if not turns:
        raise ValueError("hit_at_k_and_at needs at least one conversation")
    hits = np.array([t is not None for t in turns], dtype=float)
    at = np.array([max_turns + 1 if t is None else t for t in turns], dtype=float)
    hit_ci = bootstrap_ci(hits, n_boot=n_boot, ci=ci, seed=seed)
    at_ci = bootstrap_ci(at, n_boot=n_boot, ci=ci, seed=seed)
    return ConversationMetrics(*hit_ci, *at_ci, n=len(turns))


def _alnum(text: str) -> str:
    """Lower case with every non-alphanumeric character removed (spaces too)."""
    return re.sub(r"[^0-9a-z]", "", text.lower())


def fuzzy_hit(reply_text: str, target_title: str, threshold: float = 80) -> bool:
    """The paper's hit rule: partial ratio of target and reply above ``threshold``.

    Both texts are lower-cased and stripped of everything but letters and digits, then
    ``rapidfuzz.fuzz.partial_ratio`` compares the target with its best-matching stretch of
    the reply. Short titles match by chance ("It" is inside "Titanic"), and titles named
    anywhere in the reply count; report :func:`hit_by_id` beside it.
    """
    target = _alnum(target_title)
    if not target:
        return False
    return fuzz.partial_ratio(target, _alnum(reply_text)) > threshold


def leaks(text: str, target_title: str, threshold: float = 60) -> bool:
    """Whether a simulated user's message gives away the target (partial ratio >= threshold).

    Same normalisation as :func:`fuzzy_hit`; the paper regenerates such a message up to
    five times.
    """
    target = _alnum(target_title)
    if not target:
        return False
    return fuzz.partial_ratio(target, _alnum(text)) >= threshold


def recall_at_k(recommended_ids: Sequence[str], target: str, k: int = 5) -> float:
    """1.0 when the target is among the first ``k`` recommendations, else 0.0 (one target)."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return float(target in list(recommended_ids)[:k])


def ranking_ndcg(rank_of_target: int | None) -> float:
    """The one-turn ranking score ``1 / log2(rank + 1)``, not truncated; 0 when missing."""
    if rank_of_target is None:
        return 0.0
    if isinstance(rank_of_target, bool) or int(rank_of_target) < 1:
        raise ValueError(f"a rank must be an integer >= 1 or None, got {rank_of_target!r}")
    return 1.0 / math.log2(int(rank_of_target) + 1)


# --------------------------------------------------------------------------- baselines


def random_recommend(
    table: ItemTable, n: int, seed: int = 0, exclude: Iterable[str] = ()
) -> list[str]:
    """``n`` distinct items drawn uniformly (seeded) from the table, none in ``exclude``."""
    banned = set(exclude)
    pool = [i for i in table.ids if i not in banned]
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(pool), size=min(n, len(pool)), replace=False)
    return [pool[int(j)] for j in picked]


def popular_recommend(table: ItemTable, n: int, exclude: Iterable[str] = ()) -> list[str]:
    """The ``n`` most visited items not in ``exclude`` (ties in table order)."""
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    banned = set(exclude)
    pool = [i for i in table.ids if i not in banned]
    order = np.argsort(-table.popularity(pool), kind="stable")[:n]
    return [pool[int(j)] for j in order]
