"""Rec4Agentverse settings: the closed vocabularies, the field groups and the run config.

:class:`Rec4AConfig` holds every setting of a session with our defaults (the paper, a
perspective piece, states none); the constants are the genre and era vocabularies every
prompt, schema and metric shares, and the consent groups of a report. Every other module of
the package imports from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import pandas as pd

from recagents.config import ConfigError, bounds, check_fields

#: The stages of the paper, each adding an information flow to the previous one.
STAGES = (1, 2, 3)

#: The closed genre vocabulary of MovieLens-100K (its ``unknown`` genre left out).
GENRE_NAMES = (
    "Action",
    "Adventure",
    "Animation",
    "Children's",
    "Comedy",
    "Crime",
    "Documentary",
    "Drama",
    "Fantasy",
    "Film-Noir",
    "Horror",
    "Musical",
    "Mystery",
    "Romance",
    "Sci-Fi",
    "Thriller",
    "War",
    "Western",
)

#: Eras (closed vocabulary) and their inclusive release-year ranges. Four buckets, because
#: 79% of ml-100k films are from the 1990s: one "1990s" bucket would tell users apart little.
ERAS: dict[str, tuple[int, int]] = {
    "pre-1970": (1900, 1969),
    "1970s-1980s": (1970, 1989),
    "early 1990s": (1990, 1994),
    "late 1990s": (1995, 2010),
}

#: A field group a report may carry from an agent item to the recommender (consent-gated).
ShareField = Literal["genres", "era", "age", "gender", "occupation", "zip"]
#: Every field group: the choices of :attr:`Rec4AConfig.share_fields`.
SHARE_FIELDS: tuple[ShareField, ...] = get_args(ShareField)

#: Fields treated as sensitive in the privacy measure.
SENSITIVE_FIELDS = ("age", "zip")

#: What each share group puts in a report.
_GROUP_KEYS = {
    "genres": ("liked_genres", "disliked_genres"),
    "era": ("era",),
    "age": ("age",),
    "gender": ("gender",),
    "occupation": ("occupation",),
    "zip": ("zip",),
}
#: The share group of each report key.
KEY_GROUP = {key: group for group, keys in _GROUP_KEYS.items() for key in keys}

#: Session metrics reported by :func:`stage_comparison`, in display order.
METRICS = (
    "hit",
    "pref_share",
    "pref_satisfied",
    "user_satisfied",
    "turns_needed",
    "profile_jaccard",
    "era_match",
)

#: The era a report or reply gives when it does not know one.
UNKNOWN_ERA = "unknown"

#: Speakers in an agent's view of the conversation.
USER_ROLE, AGENT_ROLE = "User", "You"


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Rec4AConfig:
    """Every setting of a Rec4Agentverse session; the paper states none, these are ours.

    Attributes:
        stage: Which protocol runs: 1 (user <-> agent), 2 (+ agent <-> recommender) or 3
            (+ agents consult each other through the recommender).
        k: Films an agent recommends per turn (Hit@k uses the final list).
        max_turns: Most user turns per session.
        shortlist_size: Films an agent chooses from per turn (the most popular of its slice,
            those that fit its instruction first).
        agent_mode: ``"llm"`` (the simulated user and the agent items are the LLM) or
            ``"template"`` (rule-based user and agents, no LLM: a named baseline).
        recommender: ``"classic"`` (genre + era + popularity scorer, no LLM) or ``"llm"``
            (the LLM picks an agent id from the cards).
        message_mode: How a report reaches the recommender: ``"schema"`` (validated against
            a strict JSON schema, shown as data fields) or ``"free_text"`` (shown as text).
        share_fields: Consent: the field groups (of :data:`SHARE_FIELDS`) that may cross
            from an agent item to the recommender; everything else is withheld and logged.
        include_adversary: Offer the adversarial agent in sessions (the manipulation
            experiment always does).
        n_consult: Stage 3: other agents consulted per turn.
        consult_items: Stage 3: films each consulted agent contributes to the shortlist.
        satisfy_share: Share of the k films that must match the hidden favourite genres and
            era for ``pref_satisfied`` (and for the template user to say yes).
        genre_weight: Classic scorer: weight of the liked-genre overlap.
        era_weight: Classic scorer: weight of the share of the agent's films in the era.
        popularity_weight: Classic scorer: weight of the agent's usage share.
        dislike_weight: Classic scorer: penalty for the agent's disliked genres.
        switch_penalty: Classic scorer: penalty per turn that left the user unsatisfied
            with this agent (so an unhelpful agent is eventually switched away from).
        temperature: Sampling temperature of every LLM call.
        max_tokens: Most tokens per LLM reply.
        seed: Sampling seed sent with every request.
        message_chars: Cap on free-text fields in replies (keeps calls short).
        phase: Prefix of the phase names in the run log.
    """

    stage: int = field(default=3, metadata=bounds(1, len(STAGES)))
    k: int = field(default=5, metadata=bounds(1))
    max_turns: int = field(default=3, metadata=bounds(1))
    shortlist_size: int = field(default=20, metadata=bounds(1))
    agent_mode: Literal["llm", "template"] = "llm"
    recommender: Literal["classic", "llm"] = "classic"
    message_mode: Literal["schema", "free_text"] = "schema"
    share_fields: tuple[ShareField, ...] = ("genres", "era")
    include_adversary: bool = False
    n_consult: int = field(default=2, metadata=bounds(0))
    consult_items: int = field(default=5, metadata=bounds(0))
    satisfy_share: float = field(default=0.6, metadata=bounds(high=1, above=0))
    genre_weight: float = 1.0
    era_weight: float = 0.5
    popularity_weight: float = 0.2
    dislike_weight: float = 0.5
    switch_penalty: float = 0.3
    temperature: float = field(default=0.0, metadata=bounds(0))
    max_tokens: int = field(default=200, metadata=bounds(1))
    seed: int = 0
    message_chars: int = field(default=160, metadata=bounds(1))
    phase: str = "rec4a"

    def __post_init__(self) -> None:
        check_fields(self)
        if self.shortlist_size < self.k:
            raise ConfigError(
                f"Rec4AConfig.shortlist_size={self.shortlist_size} must be at least k={self.k}"
            )

    @property
    def uses_llm(self) -> bool:
        """Whether a run makes LLM calls."""
        return self.agent_mode == "llm" or self.recommender == "llm"


# --------------------------------------------------------------------------- eras and text


def era_of_year(year: Any) -> str | None:
    """The era (a key of :data:`ERAS`) of a release year; ``None`` when unknown."""
    if year is None or pd.isna(year):
        return None
    for name, (first, last) in ERAS.items():
        if first <= int(year) <= last:
            return name
    return None


def join_words(words: Sequence[str], empty: str = "none") -> str:
    """``words`` joined with commas, or ``empty`` when there are none (prompts, reports)."""
    return ", ".join(words) if words else empty
