"""Agent4Rec's agents and their world: the paper's data split, item lines, the agents.

:func:`random_split` draws the paper's users and splits their ratings at random;
:func:`item_lines` is how an agent sees an item; :func:`build_agents` makes one
:class:`Agent` per user, with traits from the data and a persona written by the LLM;
:func:`released_agents` and :func:`agents_from_released` are the authors' own 1,000 ML-1M
agents instead (their personas and trait levels, no LLM call).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from recagents.columns import GENRES, ITEM, RATING, TITLE, USER, YEAR
from recagents.data import released
from recagents.data.atomic import DatasetError
from recagents.data.datasets import Dataset, Split, readable_title
from recagents.llm.client import LLMClient, get_client
from recagents.llm.runlog import RunContext, RunLog
from recagents.papers.agent4rec.config import TRAITS, Agent4RecConfig
from recagents.papers.agent4rec.prompts import persona_messages, persona_schema, persona_text

# --------------------------------------------------------------------------- data


def random_split(
    dataset: Dataset,
    n_users: int | None = 1000,
    min_positives: int = 20,
    positive_above: float = 3.0,
    fractions: tuple[float, float, float] = (0.4, 0.3, 0.3),
    seed: int = 101,
) -> Split:
    """The paper's data: users with enough liked items, each split at random 40/30/30.

    Users with at least ``min_positives`` ratings above ``positive_above`` are eligible;
    ``n_users`` of them are drawn (all for ``None``) with *all* their ratings. Each user's
    ratings are split at random (not by time) into train, valid and test; valid and test
    keep only items that occur in train, so every recommender can score them.

    Raises:
        DatasetError: Too few eligible users, or no rating column.
    """
    frame = dataset.interactions
    if RATING not in frame:
        raise DatasetError("Agent4Rec needs ratings: the interactions have no rating column")
    if abs(sum(fractions) - 1.0) > 1e-9 or min(fractions) <= 0:
        raise ValueError(f"fractions must be positive and sum to 1, got {fractions}")
    positives = frame[frame[RATING] > positive_above].groupby(USER).size()
    eligible = np.array(sorted(positives[positives >= min_positives].index))
    wanted = len(eligible) if n_users is None else n_users
    if wanted > len(eligible):
        raise DatasetError(
            f"{dataset.name}: {len(eligible)} users have {min_positives}+ ratings above "
            f"{positive_above:g}; asked for {wanted}"
        )
    rng = np.random.default_rng(seed)
    users = set(rng.choice(eligible, size=wanted, replace=False))
    rows = frame[frame[USER].isin(users)].reset_index(drop=True)
    draw = rng.random(len(rows))
    part = np.where(draw < fractions[0], 0, np.where(draw < fractions[0] + fractions[1], 1, 2))
    train = rows[part == 0]
    known = set(train[ITEM])
    valid = rows[(part == 1) & rows[ITEM].isin(known)]
    test = rows[(part == 2) & rows[ITEM].isin(known)]
    return Split(
        train=train.reset_index(drop=True),
        valid=valid.reset_index(drop=True),
        test=test.reset_index(drop=True),
        name=f"a4r-random-{wanted}-s{seed}",
    )


#: How :func:`item_lines` may describe an item after its title and mean rating.
DESCRIBE = ("genres", "summary", "none")


def item_mean_ratings(dataset: Dataset) -> pd.Series:
    """Each item's mean rating by id: from the ratings, else the items' ``mean_rating``.

    Why: a released dataset without ratings (``agent4rec-ml1m``) still carries the mean
    rating the authors' pages show; every analysis that needs an item's quality reads it here.

    Raises:
        DatasetError: Neither ratings nor a ``mean_rating`` item column.
    """
    if RATING in dataset.interactions:
        return dataset.interactions.groupby(ITEM)[RATING].mean()
    if dataset.items is not None and "mean_rating" in dataset.items:
        return dataset.items.set_index(ITEM)["mean_rating"].astype(float)
    raise DatasetError(f"{dataset.name}: no ratings and no mean_rating column for the items")


def item_line(
    title: str,
    mean_rating: float,
    genres: Sequence[str] = (),
    summary: str = "",
    describe: str = "genres",
) -> str:
    """One item as an agent sees it: ``title; rated 4.15 on average`` and its description.

    ``describe``: ``"genres"`` adds ``; Animation, Comedy``; ``"summary"`` adds
    ``; about: <summary>`` (the one-sentence summary the authors' pages show); ``"none"``
    adds nothing. A missing genre list or summary adds nothing either.
    """
    if describe not in DESCRIBE:
        raise ValueError(f"describe must be one of {DESCRIBE}, got {describe!r}")
    text = f"{title}; rated {mean_rating:.2f} on average"
    if describe == "genres" and len(genres):
        text += f"; {', '.join(genres)}"
    if describe == "summary" and summary.strip():
        text += f"; about: {' '.join(summary.split())}"
    return text


def item_lines(dataset: Dataset, split: Split, describe: str = "genres") -> dict[str, str]:
    """One line per item as an agent sees it (:func:`item_line`): title (year), mean rating.

    The paper shows title, year, the item's mean rating ("history rating") and a one-sentence
    LLM-written summary. ``describe="summary"`` shows that summary where the items have one
    (``agent4rec-ml1m``: the authors' own); MovieLens has none, so there ``"genres"`` (the
    default, a documented deviation) or ``"none"``.
    """
    everything = pd.concat([split.train, split.valid, split.test])
    mean = item_mean_ratings(dataset)
    items = dataset.items.set_index(ITEM) if dataset.items is not None else None
    lines = {}
    for item in sorted(set(everything[ITEM]) | set(mean.index)):
        title = f"item {item}"
        genres: Sequence[str] = ()
        summary = ""
        if items is not None and item in items.index:
            row = items.loc[item]
            title = readable_title(str(row[TITLE]))
            if YEAR in items and pd.notna(row[YEAR]):
                title += f" ({int(row[YEAR])})"
            genres = row[GENRES] if GENRES in items else ()
            summary = str(row["summary"]) if "summary" in items else ""
        lines[item] = item_line(
            title, float(mean.get(item, float("nan"))), genres, summary, describe
        )
    return lines


# --------------------------------------------------------------------------- agents


@dataclass
class Agent:
    """One generative agent: who it is, and what it remembers.

    Attributes:
        user_id: The real user it is built from.
        traits: ``{"activity": 1-3, "conformity": 1-3, "diversity": 1-3}``.
        persona: The taste persona (tastes with reasons, and what it rates highly).
        memory: Factual and emotional memories, oldest first.
    """

    user_id: str
    traits: dict[str, int]
    persona: str
    memory: list[str] = field(default_factory=list)


def build_agents(
    split: Split,
    traits: pd.DataFrame,
    lines: dict[str, str],
    config: Agent4RecConfig | None = None,
    client: LLMClient | None = None,
    log: RunLog | None = None,
) -> dict[str, Agent]:
    """Make one agent per user of the split: traits from the data, persona from the LLM.

    The persona comes from at most ``persona_items`` of the user's training ratings (a
    seeded draw). A failed persona call leaves a neutral one, and is counted in ``log``.
    """
    config = config or Agent4RecConfig()
    ctx = RunContext(client or get_client(), log if log is not None else RunLog(), "persona")
    trait_rows = traits.set_index(USER)
    users = sorted(split.train[USER].unique())
    messages = []
    for user in users:
        rated = split.train[split.train[USER] == user]
        if len(rated) > config.persona_items:
            rated = rated.sample(config.persona_items, random_state=config.seed)
        pairs = [(lines[i], r) for i, r in rated[[ITEM, RATING]].itertuples(index=False)]
        messages.append(persona_messages(pairs, config.domain))
    results = ctx.ask(
        "persona", users, messages, persona_schema(), temperature=config.temperature,
        max_tokens=600, desc="personas",
    )  # fmt: skip
    agents = {}
    for user, result in zip(users, results, strict=True):
        persona = persona_text(result.data) if result.ok else None
        if persona is None:
            ctx.log.count("persona_unusable")
        level = trait_rows.loc[user] if user in trait_rows.index else None
        agents[user] = Agent(
            user_id=user,
            traits={t: int(level[t]) if level is not None else 2 for t in TRAITS},
            persona=persona or f"I watch all kinds of {config.domain}s.",
        )
    return agents


#: Who wrote a released agent's persona (shown beside it wherever it is displayed).
RELEASED_PERSONA_SOURCE = "the authors' (Agent4Rec release, written by their LLM)"


def released_agents() -> pd.DataFrame:
    """The authors' 1,000 ML-1M agents: their personas and trait levels, as released.

    The persona is the released one (``all_personas_like_modify.csv``: tastes, a reason per
    taste, what the user rates highly) put in the shape our prompts use
    (:func:`~recagents.papers.agent4rec.prompts.persona_text`); ``low_rating`` is left out,
    as the authors' own page prompt leaves it out. Trait levels are ``user_statistic.csv``.

    Returns:
        Indexed by ``user_id`` (``"0"``..``"999"``): ``persona``, ``activity``,
        ``conformity``, ``diversity`` (1-3) and ``persona_source``.
    """
    personas = released.agent4rec_personas()
    traits = released.agent4rec_traits().set_index(USER)
    rows = []
    for user, row in personas.iterrows():
        tastes = [
            {"taste": taste, "reason": reason}
            for taste, reason in zip(
                row["tastes"], row["reasons"] + [""] * len(row["tastes"]), strict=False
            )
        ]
        persona = persona_text({"tastes": tastes, "rates_high": row["high_rating"]})
        rows.append((user, persona, *(int(traits.loc[user, t]) for t in TRAITS)))
    out = pd.DataFrame(rows, columns=[USER, "persona", *TRAITS]).set_index(USER)
    out["persona_source"] = RELEASED_PERSONA_SOURCE
    return out


def agents_from_released(users: Sequence[str], agents: pd.DataFrame) -> dict[str, Agent]:
    """One :class:`Agent` per user from :func:`released_agents` (no LLM call).

    Raises:
        DatasetError: A user that is not a released agent.
    """
    missing = [u for u in users if u not in agents.index]
    if missing:
        raise DatasetError(f"users {missing[:5]} are not among the released agents")
    return {
        user: Agent(
            user_id=user,
            traits={t: int(agents.loc[user, t]) for t in TRAITS},
            persona=str(agents.loc[user, "persona"]),
        )
        for user in users
    }
