"""The Agent Recommender's side: its profile of a user, instructions, shortlists, scorer.

:class:`Profile` and :func:`update_profile` are the recommender's (and an agent's) view of a
user's taste; :func:`profile_from_text` reads one from free text by keywords (no LLM);
:class:`Instruction`, :func:`shortlist` and :func:`merge_shortlists` are what the recommender
tells agents and how their film lists follow; :func:`score_agents` / :func:`choose_agent`
are the classic (no LLM) router.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from recagents.papers.rec4agentverse.catalogue import Catalogue
from recagents.papers.rec4agentverse.config import Rec4AConfig, era_of_year, join_words

# --------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class Profile:
    """The recommender's (or an agent's) view of a user's taste.

    Attributes:
        liked: Liked genres, most recent evidence first.
        disliked: Disliked genres.
        era: Preferred era (a key of :data:`ERAS`) or ``None`` when unknown.
    """

    liked: tuple[str, ...] = ()
    disliked: tuple[str, ...] = ()
    era: str | None = None

    def text(self) -> str:
        """One line for prompts and traces."""
        return (
            f"likes: {join_words(self.liked, 'unknown')}; dislikes: {join_words(self.disliked)}; "
            f"era: {self.era or 'unknown'}"
        )

    @property
    def empty(self) -> bool:
        """Whether nothing is known."""
        return not (self.liked or self.disliked or self.era)


def update_profile(profile: Profile, evidence: Profile) -> Profile:
    """Merge new evidence into a profile: newer statements win.

    A genre newly liked leaves the disliked list and vice versa; a known era replaces the
    old one, an unknown one keeps it.
    """
    liked = list(evidence.liked) + [
        g for g in profile.liked if g not in evidence.liked and g not in evidence.disliked
    ]
    disliked = list(evidence.disliked) + [
        g for g in profile.disliked if g not in evidence.disliked and g not in evidence.liked
    ]
    return Profile(tuple(liked), tuple(disliked), evidence.era or profile.era)


_GENRE_WORDS: dict[str, tuple[str, ...]] = {
    "Action": ("action",),
    "Adventure": ("adventure", "adventures"),
    "Animation": ("animation", "animated", "cartoon", "cartoons"),
    "Children's": ("children's", "childrens", "children", "kids", "family"),
    "Comedy": ("comedy", "comedies", "funny"),
    "Crime": ("crime", "gangster", "gangsters", "heist"),
    "Documentary": ("documentary", "documentaries"),
    "Drama": ("drama", "dramas", "dramatic"),
    "Fantasy": ("fantasy",),
    "Film-Noir": ("film-noir", "film noir", "noir"),
    "Horror": ("horror", "scary"),
    "Musical": ("musical", "musicals"),
    "Mystery": ("mystery", "mysteries"),
    "Romance": ("romance", "romances", "romantic", "love story", "love stories"),
    "Sci-Fi": ("sci-fi", "science fiction", "scifi", "sci fi"),
    "Thriller": ("thriller", "thrillers", "suspense"),
    "War": ("war",),
    "Western": ("western", "westerns"),
}
_GENRE_RE = {
    genre: re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b")
    for genre, words in _GENRE_WORDS.items()
}
_ERA_RE = {
    "pre-1970": re.compile(
        r"\b(?:pre-1970|before 1970|classics?|old(?:er)? films?|old(?:er)? movies?|golden[- ]age"
        r"|black[- ]and[- ]white|19[2-6]0s|[2-6]0s|19[2-6]\d)\b"
    ),
    "1970s-1980s": re.compile(
        r"(?<!pre-)(?<!before )\b(?:1970s-1980s|19[78]0s|[78]0s|seventies|eighties|19[78]\d)\b"
    ),
    "early 1990s": re.compile(r"\b(?:early (?:19)?90s|early nineties|199[0-4])\b"),
    "late 1990s": re.compile(
        r"\b(?:late (?:19)?90s|late nineties|mid-to-late (?:19)?90s|199[5-9]|recent|newer"
        r"|latest|modern)\b"
    ),
}
_NEGATION = re.compile(
    r"\b(?:no|not|don't|dont|do not|never|dislike|dislikes|hate|hates|avoid|without|less|"
    r"fewer|skip|nothing|tired of|enough|except)\b"
)
_CLAUSE = re.compile(r"[.;!?\n]|\bbut\b|\bhowever\b")


def _negated(clause: str, start: int, window: int = 4) -> bool:
    """Whether one of the ``window`` words before ``start`` (after the last comma) negates."""
    before = clause[:start].rsplit(",", 1)[-1].split()[-window:]
    return bool(_NEGATION.search(" ".join(before)))


def profile_from_text(text: str) -> Profile:
    """Read genres and an era from free text by keywords (a rule, no LLM).

    Used where free text must become profile fields: the recommender reading a user's
    opening request or a free-text report, and the template agent reading the user. A
    genre word counts as disliked when a negation ("no", "not", "less", "avoid", ...) is
    among the four words before it in its clause (clauses end at . ; ! ? "but"
    "however"; a comma ends a negation's reach), otherwise as liked. The last era named
    without a negation wins; a bare "1990s" is ambiguous between our two 1990s eras and is
    ignored.
    """
    liked: list[str] = []
    disliked: list[str] = []
    era_hits: list[tuple[int, int, str]] = []
    for number, clause in enumerate(_CLAUSE.split((text or "").casefold())):
        hits = []
        for genre, pattern in _GENRE_RE.items():
            for match in pattern.finditer(clause):
                hits.append((match.start(), genre, _negated(clause, match.start())))
        for _, genre, negated in sorted(hits):
            target, other = (disliked, liked) if negated else (liked, disliked)
            if genre in other:
                other.remove(genre)
            if genre not in target:
                target.append(genre)
        for name, pattern in _ERA_RE.items():
            for match in pattern.finditer(clause):
                if not _negated(clause, match.start()):
                    era_hits.append((number, match.start(), name))
    era = max(era_hits)[2] if era_hits else None
    return Profile(tuple(liked), tuple(disliked), era)


@dataclass(frozen=True)
class Instruction:
    """What the recommender tells an agent item: what to focus on and what to avoid."""

    genres: tuple[str, ...] = ()
    era: str | None = None
    avoid: tuple[str, ...] = ()

    def text(self) -> str:
        """The instruction as the agent reads it."""
        parts = []
        if self.genres or self.era:
            focus = f"{', '.join(self.genres)} films" if self.genres else "films"
            parts.append(f"focus on {focus}" + (f" from the {self.era} era" if self.era else ""))
        if self.avoid:
            parts.append(f"avoid {', '.join(self.avoid)}")
        return ("The platform asks you to " + " and ".join(parts) + ".") if parts else ""

    @property
    def empty(self) -> bool:
        """Whether the instruction says nothing."""
        return not (self.genres or self.era or self.avoid)


def instruction_for(profile: Profile) -> Instruction:
    """The recommender's instruction from its profile: focus genres, era, genres to avoid."""
    return Instruction(tuple(profile.liked[:3]), profile.era, tuple(profile.disliked[:2]))


def _fits(
    catalogue: Catalogue, item: str, genres: Iterable[str], era: str | None
) -> tuple[int, int]:
    """(genre match, era match) of one film, each 0 or 1."""
    wanted = set(genres)
    genre = int(bool(wanted & set(catalogue.genres.get(item, ())))) if wanted else 0
    in_era = int(era is not None and era_of_year(catalogue.years.get(item)) == era)
    return genre, in_era


def shortlist(
    catalogue: Catalogue, agent_id: str, instruction: Instruction | None, size: int
) -> list[str]:
    """The films an agent chooses from: its slice's most popular, as instructed.

    Without an instruction: the ``size`` most popular films of the slice. With one: films
    matching both the focus genres and the era first, then those matching one of them,
    then the rest, each group most popular first; films with a genre to avoid come last.
    So the agent sees first what fits the instruction, and never an empty list.
    """
    items = catalogue.slices[agent_id]
    if instruction is None or instruction.empty:
        return list(items[:size])
    avoid = set(instruction.avoid)

    def key(indexed: tuple[int, str]) -> tuple[int, int, int]:
        position, item = indexed
        genre, era = _fits(catalogue, item, instruction.genres, instruction.era)
        bad = int(bool(avoid & set(catalogue.genres.get(item, ()))))
        return (bad, -(genre + era), position)

    return [item for _, item in sorted(enumerate(items), key=key)[:size]]


def merge_shortlists(
    own: Sequence[str],
    consulted: Mapping[str, Sequence[str]],
    size: int,
    per_agent: int,
    own_id: str,
) -> tuple[list[str], list[str]]:
    """Stage 3: merge consulted agents' films into the current agent's shortlist.

    Each consulted agent contributes its first ``per_agent`` films not already present;
    the lists are interleaved round-robin (own, first consulted, second consulted, own,
    ...), so consulted films are not all at the end, and cut to ``size``.

    Returns:
        ``(films, sources)``: the merged shortlist and, per film, the agent it came from.
    """
    lists: list[tuple[str, list[str]]] = [(own_id, list(own))]
    seen = set(own)
    for agent_id, items in consulted.items():
        fresh = [i for i in items if i not in seen][:per_agent]
        seen.update(fresh)
        lists.append((agent_id, fresh))
    films: list[str] = []
    sources: list[str] = []
    cursors = [0] * len(lists)
    while len(films) < size and any(
        c < len(items) for c, (_, items) in zip(cursors, lists, strict=True)
    ):
        for k, (agent_id, items) in enumerate(lists):
            if cursors[k] < len(items) and len(films) < size:
                films.append(items[cursors[k]])
                sources.append(agent_id)
                cursors[k] += 1
    return films, sources


# --------------------------------------------------------------------------- the recommender


def score_agents(
    profile: Profile,
    catalogue: Catalogue,
    config: Rec4AConfig,
    unsatisfied: dict[str, int] | None = None,
) -> pd.Series:
    """The classic Agent Recommender's score of every agent for a profile (no LLM).

    ``genre_weight * |liked & genres| / |liked| + era_weight * share of the agent's films
    in the era + popularity_weight * popularity - dislike_weight * |disliked & genres| /
    |genres| - switch_penalty * unsatisfied turns with this agent``.

    Returns:
        Scores indexed by agent id, in catalogue order.
    """
    unsatisfied = unsatisfied or {}
    scores = {}
    liked, disliked = set(profile.liked), set(profile.disliked)
    for card in catalogue.cards:
        genres = set(card.genres)
        genre_fit = len(liked & genres) / len(liked) if liked else 0.0
        era_fit = card.era_shares.get(profile.era, 0.0) if profile.era else 0.0
        dislike = len(disliked & genres) / len(genres) if genres else 0.0
        scores[card.agent_id] = (
            config.genre_weight * genre_fit
            + config.era_weight * era_fit
            + config.popularity_weight * card.popularity
            - config.dislike_weight * dislike
            - config.switch_penalty * unsatisfied.get(card.agent_id, 0)
        )
    return pd.Series(scores, name="score")


def choose_agent(
    profile: Profile,
    catalogue: Catalogue,
    config: Rec4AConfig,
    unsatisfied: dict[str, int] | None = None,
    exclude: Iterable[str] = (),
) -> str:
    """The classic recommender's pick: the best-scored agent (ties: catalogue order)."""
    scores = score_agents(profile, catalogue, config, unsatisfied).drop(list(exclude))
    return str(scores.idxmax())


def ranked_agents(
    profile: Profile, catalogue: Catalogue, config: Rec4AConfig, exclude: Iterable[str]
) -> list[str]:
    """Agent ids best first by the classic score (ties: catalogue order), ``exclude`` left out."""
    scores = score_agents(profile, catalogue, config).drop(list(exclude))
    order = sorted(range(len(scores)), key=lambda k: (-scores.iloc[k], k))
    return [str(scores.index[k]) for k in order]
