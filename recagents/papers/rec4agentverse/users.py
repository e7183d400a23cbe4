"""Simulated users: hidden tastes and held-out target films drawn from real ml-100k ratings.

:func:`make_users` turns a leave-one-out split into :class:`SimUser` records; only the user
simulator's own prompts ever see the hidden taste, and no prompt names a target.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import GENRES, ITEM, RATING, USER, YEAR
from recagents.data.datasets import Dataset, Split, chronological_order
from recagents.papers.rec4agentverse.catalogue import id_key
from recagents.papers.rec4agentverse.config import GENRE_NAMES, era_of_year

# --------------------------------------------------------------------------- simulated users


@dataclass(frozen=True)
class SimUser:
    """A simulated user: a real ml-100k user's hidden preferences and held-out films.

    Only the user simulator sees ``favourite_genres``, ``disliked_genres`` and ``era``;
    no agent or recommender prompt contains them, and no prompt names a target.

    Attributes:
        user_id: The ml-100k user id.
        favourite_genres: Genres most over-represented among the user's liked known films.
        disliked_genres: At most one genre over-represented among the user's low ratings.
        era: The era most over-represented among the user's liked known films.
        targets: The held-out films (the split's valid and test items).
        history: The user's liked known films (the split's train part).
        demographics: ``age``, ``gender``, ``occupation``, ``zip`` (age and zip sensitive).
    """

    user_id: str
    favourite_genres: tuple[str, ...]
    disliked_genres: tuple[str, ...]
    era: str
    targets: tuple[str, ...]
    history: tuple[str, ...]
    demographics: dict[str, Any] = field(default_factory=dict)


def _excess(counts: Counter, shares: dict[str, float], n: int, least: int) -> list[str]:
    """Keys by how much more often they occur than expected from ``shares`` (with a floor)."""
    scored = [
        (counts[key] - shares.get(key, 0.0) * n, key)
        for key in counts
        if counts[key] >= least and key is not None
    ]
    return [key for value, key in sorted(scored, key=lambda p: (-p[0], p[1])) if value > 0]


def make_users(
    split: Split,
    dataset: Dataset,
    n: int | None,
    seed: int = 0,
    n_favourite: int = 2,
    min_liked: int = 10,
    like_threshold: float = 4.0,
) -> list[SimUser]:
    """Draw ``n`` simulated users with hidden preferences from their real ratings.

    Known history = the split's train part; targets = the user's valid and test items (with
    ``leave_one_out(dataset, min_rating=4)``: the last two films the user liked, in time
    order). Favourite genres: the ``n_favourite`` genres whose count among the user's liked
    known films (rating >= ``like_threshold``) most exceeds the count expected from all
    users' liked films; raw counts would give every user Drama and Comedy. Era: the era
    with the largest such excess. Disliked genre: the genre most over-represented among the
    user's ratings <= 2 (at least 3 of them, none if no such genre), never a favourite.

    Args:
        split: A leave-one-out split (``valid`` and ``test`` hold each user's targets).
        dataset: The dataset (items for genres and years, users for demographics).
        n: Users to draw (``None``: every eligible user).
        seed: Seeds the draw.
        n_favourite: Favourite genres per user.
        min_liked: Least liked known films for a user to be eligible.
        like_threshold: Rating at which a film counts as liked.

    Returns:
        The users, sorted by id.
    """
    if dataset.items is None:
        raise ValueError("make_users needs the dataset's item table (genres and years)")
    train = split.train
    liked = train[train[RATING] >= like_threshold] if RATING in train else train
    liked = liked.assign(**{ITEM: liked[ITEM].astype(str), USER: liked[USER].astype(str)})
    base = Population.of(dataset.items, liked[ITEM])
    held = pd.concat([split.valid, split.test], ignore_index=True)
    held = chronological_order(held.assign(**{USER: held[USER].astype(str)}))
    targets = held.groupby(USER, sort=False)[ITEM].agg(lambda s: tuple(map(str, s))).to_dict()
    histories = liked.groupby(USER, sort=False)[ITEM].agg(tuple).to_dict()
    eligible = sorted((u for u in targets if len(histories.get(u, ())) >= min_liked), key=id_key)
    if n is not None and n < len(eligible):
        rng = np.random.default_rng(seed)
        eligible = sorted(rng.choice(eligible, size=n, replace=False).tolist(), key=id_key)
    low_by_user = _low_ratings(dataset)
    people = _people(dataset)
    users = []
    for user in eligible:
        history = histories[user]
        favourites = base.favourites(history, n_favourite)
        lows = [i for i in low_by_user.get(user, ()) if i not in targets[user]]
        users.append(
            SimUser(
                user_id=user,
                favourite_genres=tuple(favourites),
                disliked_genres=base.disliked(lows, favourites),
                era=base.era(history),
                targets=targets[user],
                history=tuple(history),
                demographics=read_demographics(people.get(user, {})),
            )
        )
    return users


@dataclass(frozen=True)
class Population:
    """Every film's genres and year, and the genre and era shares of all users' liked films.

    A user's taste is what is over-represented in their films against these shares.
    """

    genres: dict[str, Any]
    years: dict[str, Any]
    genre_shares: dict[str, float]
    era_shares: dict[str, float]

    @staticmethod
    def of(items: pd.DataFrame, liked: pd.Series) -> Population:
        """The shares among ``liked`` (item ids of every liked known interaction)."""
        genres = dict(zip(items[ITEM].astype(str), items[GENRES], strict=True))
        years = dict(zip(items[ITEM].astype(str), items[YEAR], strict=True))
        genre_counts = Counter(g for i in liked for g in genres.get(i, ()) if g in GENRE_NAMES)
        era_counts = Counter(era_of_year(years.get(i)) for i in liked)
        return Population(
            genres=genres,
            years=years,
            genre_shares={g: c / max(len(liked), 1) for g, c in genre_counts.items()},
            era_shares={e: c / max(len(liked), 1) for e, c in era_counts.items() if e is not None},
        )

    def genre_counts(self, films: Sequence[str]) -> Counter:
        """How often each known genre occurs among ``films``."""
        return Counter(g for i in films for g in self.genres.get(i, ()) if g in GENRE_NAMES)

    def favourites(self, history: Sequence[str], n_favourite: int) -> list[str]:
        """The most over-represented genres of the history (topped up by the most frequent)."""
        counts = self.genre_counts(history)
        favourites = _excess(counts, self.genre_shares, len(history), least=2)[:n_favourite]
        if len(favourites) < n_favourite:  # too few over-represented genres: most frequent
            extra = [g for g, _ in sorted(counts.items(), key=lambda p: (-p[1], p[0]))]
            favourites += [g for g in extra if g not in favourites][: n_favourite - len(favourites)]
        return favourites

    def era(self, history: Sequence[str]) -> str:
        """The most over-represented era of the history (``late 1990s`` when none is)."""
        eras = Counter(era_of_year(self.years.get(i)) for i in history)
        return (_excess(eras, self.era_shares, len(history), least=1) or ["late 1990s"])[0]

    def disliked(self, lows: Sequence[str], favourites: Sequence[str]) -> tuple[str, ...]:
        """At most one genre over-represented among the low ratings, never a favourite."""
        if not lows:
            return ()
        low_genres = [
            g
            for g in _excess(self.genre_counts(lows), self.genre_shares, len(lows), 3)
            if g not in favourites
        ]
        return tuple(low_genres[:1])


def _low_ratings(dataset: Dataset) -> dict[str, tuple[str, ...]]:
    """Each user's films rated 2 or lower (none without ratings)."""
    low = pd.DataFrame(columns=[USER, ITEM])
    if RATING in dataset.interactions:
        everything = dataset.interactions
        low = everything[everything[RATING] <= 2].assign(
            **{USER: lambda f: f[USER].astype(str), ITEM: lambda f: f[ITEM].astype(str)}
        )
    return low.groupby(USER, sort=False)[ITEM].agg(tuple).to_dict()


def _people(dataset: Dataset) -> dict[str, dict[str, Any]]:
    """The user table by user id (empty without one)."""
    if dataset.users is None:
        return {}
    people = dataset.users.assign(**{USER: dataset.users[USER].astype(str)})
    return people.set_index(USER).to_dict("index")


def read_demographics(info: dict[str, Any]) -> dict[str, Any]:
    """``age``, ``gender``, ``occupation``, ``zip`` from a user-table row (known ones only)."""
    demographics = {
        "age": int(info["age"]) if str(info.get("age", "")).isdigit() else info.get("age"),
        "gender": info.get("gender"),
        "occupation": info.get("occupation"),
        "zip": info.get("zip_code", info.get("zip")),
    }
    return {k: v for k, v in demographics.items() if v is not None}
