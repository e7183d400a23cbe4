"""Session metrics of the method: Hit@k, taste fit, turns needed and profile match.

Pure functions of one session's final list, verdicts and profile; :func:`stage_comparison`
in :mod:`recagents.papers.rec4agentverse.analysis` summarises them over users.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from recagents.papers.rec4agentverse.config import era_of_year
from recagents.papers.rec4agentverse.recommender import Profile
from recagents.papers.rec4agentverse.users import SimUser

# --------------------------------------------------------------------------- metrics


def hit_at_k(items: Sequence[str], targets: Iterable[str], k: int) -> float:
    """1.0 if any of the first ``k`` items is a target, else 0.0."""
    wanted = set(targets)
    return float(any(item in wanted for item in list(items)[:k]))


def preference_share(
    items: Sequence[str],
    favourite_genres: Iterable[str],
    era: str | None,
    genres: dict[str, tuple[str, ...]],
    years: dict[str, int | None],
    k: int,
) -> float:
    """Share of the ``k`` slots filled by a film with a favourite genre *and* from the era.

    The denominator is ``k``, so a shorter (or empty, failed) list scores lower.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    favourites = set(favourite_genres)
    good = sum(
        bool(favourites & set(genres.get(i, ()))) and era_of_year(years.get(i)) == era
        for i in list(items)[:k]
    )
    return good / k


def turns_needed(satisfied: Sequence[bool | None], max_turns: int) -> int:
    """The first turn (1-based) the user said they were satisfied; ``max_turns + 1`` if never.

    Never satisfied is scored one past the limit (not ``NaN``), so that means over
    sessions stay defined and unsatisfied sessions count as the worst outcome.
    """
    for turn, flag in enumerate(satisfied, start=1):
        if flag:
            return turn
    return max_turns + 1


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """``|a & b| / |a | b|`` (0.0 when both are empty)."""
    x, y = set(a), set(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def profile_match(profile: Profile, user: SimUser) -> tuple[float, float]:
    """How well the recommender's profile matches the hidden taste.

    Returns:
        ``(Jaccard of liked vs favourite genres, 1.0 if the era matches else 0.0)``.
    """
    return jaccard(profile.liked, user.favourite_genres), float(profile.era == user.era)
