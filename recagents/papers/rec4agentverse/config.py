"""Rec4Agentverse settings: the closed vocabularies, the field groups and the run config.

:class:`Rec4AConfig` holds every setting of a session with our defaults (the paper, a
perspective piece, states none); the constants are the genre and era vocabularies every
prompt, schema and metric shares, and the consent groups of a report. Every other module of
the package imports from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

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

#: Field groups a report may carry from an agent item to the recommender (consent-gated).
SHARE_FIELDS = ("genres", "era", "age", "gender", "occupation", "zip")

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
_KEY_GROUP = {key: group for group, keys in _GROUP_KEYS.items() for key in keys}

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

_UNKNOWN_ERA = "unknown"

#: Speakers in an agent's view of the conversation.
_USER_ROLE, _AGENT_ROLE = "User", "You"


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

    stage: int = 3
    k: int = 5
    max_turns: int = 3
    shortlist_size: int = 20
    agent_mode: Literal["llm", "template"] = "llm"
    recommender: Literal["classic", "llm"] = "classic"
    message_mode: Literal["schema", "free_text"] = "schema"
    share_fields: tuple[str, ...] = ("genres", "era")
    include_adversary: bool = False
    n_consult: int = 2
    consult_items: int = 5
    satisfy_share: float = 0.6
    genre_weight: float = 1.0
    era_weight: float = 0.5
    popularity_weight: float = 0.2
    dislike_weight: float = 0.5
    switch_penalty: float = 0.3
    temperature: float = 0.0
    max_tokens: int = 200
    seed: int = 0
    message_chars: int = 160
    phase: str = "rec4a"

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {self.stage!r}")
        if self.k < 1 or self.max_turns < 1:
            raise ValueError("k and max_turns must be at least 1")
        if self.shortlist_size < self.k:
            raise ValueError(f"shortlist_size ({self.shortlist_size}) must be at least k")
        if self.agent_mode not in ("llm", "template"):
            raise ValueError(f"agent_mode must be 'llm' or 'template', got {self.agent_mode!r}")
        if self.recommender not in ("classic", "llm"):
            raise ValueError(f"recommender must be 'classic' or 'llm', got {self.recommender!r}")
        if self.message_mode not in ("schema", "free_text"):
            raise ValueError(
                f"message_mode must be 'schema' or 'free_text', got {self.message_mode!r}"
            )
        unknown = set(self.share_fields) - set(SHARE_FIELDS)
        if unknown:
            raise ValueError(f"unknown share_fields {sorted(unknown)}; known: {SHARE_FIELDS}")
        if self.n_consult < 0 or self.consult_items < 0:
            raise ValueError("n_consult and consult_items must be non-negative")
        if not 0 < self.satisfy_share <= 1:
            raise ValueError(f"satisfy_share must be in (0, 1], got {self.satisfy_share}")

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


def _join(words: Sequence[str], empty: str = "none") -> str:
    return ", ".join(words) if words else empty
