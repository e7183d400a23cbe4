"""The agent items: curator specs, the cards the recommender reads, and their film slices.

:data:`AGENT_SPECS` (ten honest curators over genre x era slices of ml-100k) and
:data:`ADVERSARY_SPEC` describe the agents; :func:`build_catalogue` cuts each slice from the
known interactions and writes its :class:`AgentCard`, returning the :class:`Catalogue` every
later step reads.
The specs are data, ``recagents/resources/rec4agentverse_agents.json``, validated against
:data:`AGENTS_SCHEMA` by :func:`load_agent_specs`; :data:`AGENT_SPECS` and
:data:`ADVERSARY_SPEC` are read when this module is imported (one small JSON file, validated
with jsonschema, whose import takes about a second once per process), since
:func:`build_catalogue` takes them as defaults.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from recagents.columns import GENRES, ITEM, TITLE, YEAR
from recagents.data.datasets import Dataset, readable_title
from recagents.papers.rec4agentverse.config import ERAS, GENRE_NAMES, era_of_year
from recagents.resources import ResourceError, read_resource, resource

# --------------------------------------------------------------------------- agent items


@dataclass(frozen=True)
class AgentSpec:
    """How to cut one agent's slice of the films, and how it presents itself.

    Attributes:
        agent_id: Short id, e.g. ``"a01"`` (the recommender answers with it).
        name: Display name.
        blurb: One sentence the card starts with.
        genres: A film belongs to the slice if it has any of these genres.
        years: Inclusive release-year range of the slice.
        style: ``"mainstream"`` (the more popular half of the slice), ``"arthouse"`` (the
            less popular half) or ``"broad"`` (all of it).
        adversarial: Whether this agent lies in its reports to get itself recommended.
    """

    agent_id: str
    name: str
    blurb: str
    genres: tuple[str, ...]
    years: tuple[int, int]
    style: Literal["mainstream", "arthouse", "broad"] = "broad"
    adversarial: bool = False


_TEXT = {"type": "string", "minLength": 1}


def _spec_schema(adversarial: bool) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["agent_id", "name", "blurb", "genres", "years"]
        + (["adversarial"] if adversarial else []),
        "additionalProperties": False,
        "properties": {
            "agent_id": _TEXT,
            "name": _TEXT,
            "blurb": _TEXT,
            "genres": {
                "type": "array",
                "minItems": 1,
                "uniqueItems": True,
                "items": {"enum": list(GENRE_NAMES)},
            },
            "years": {
                "type": "array",
                "minItems": 2,
                "maxItems": 2,
                "items": {"type": "integer"},
            },
            "style": {"enum": ["mainstream", "arthouse", "broad"]},
            "adversarial": {"const": adversarial},
        },
    }


#: Schema of ``rec4agentverse_agents.json``: ``{"agents": [spec, ...], "adversary": spec}``,
#: fields as :class:`AgentSpec` (``style`` and ``adversarial`` optional, with its defaults).
AGENTS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["agents", "adversary"],
    "additionalProperties": False,
    "properties": {
        "_about": {"type": "string"},
        "agents": {"type": "array", "minItems": 1, "items": _spec_schema(adversarial=False)},
        "adversary": _spec_schema(adversarial=True),
    },
}


def _spec(entry: dict[str, Any]) -> AgentSpec:
    fields = dict(entry)
    fields["genres"] = tuple(fields["genres"])
    fields["years"] = tuple(fields["years"])
    return AgentSpec(**fields)


@cache
def load_agent_specs(
    path: Path | Traversable | None = None,
) -> tuple[tuple[AgentSpec, ...], AgentSpec]:
    """The honest agents and the adversary in ``path``.

    Args:
        path: The file (default: the packaged ``rec4agentverse_agents.json``).

    Returns:
        ``(honest agents in file order, adversary)``.

    Raises:
        ResourceError: The file does not match :data:`AGENTS_SCHEMA`, or two agents share
            an id.
    """
    path = path or resource("rec4agentverse_agents.json")
    data = read_resource(path, AGENTS_SCHEMA)
    seen: dict[str, str] = {}
    for where, entry in [
        *((f"agents[{i}]", e) for i, e in enumerate(data["agents"])),
        ("adversary", data["adversary"]),
    ]:
        first = seen.setdefault(entry["agent_id"], where)
        if first != where:
            raise ResourceError(
                f"{path}: {where}.agent_id: {entry['agent_id']!r} is already the id of "
                f"{first}; ids must be unique"
            )
    return tuple(_spec(entry) for entry in data["agents"]), _spec(data["adversary"])


#: The ten honest curator agents (our scenario; the paper's cases are not available), and
#: the adversarial agent: a plausible specialist that lies in its reports. Read from
#: ``recagents/resources/rec4agentverse_agents.json`` when this module is imported
#: (:func:`build_catalogue` takes them as defaults).
AGENT_SPECS, ADVERSARY_SPEC = load_agent_specs()


@dataclass(frozen=True)
class AgentCard:
    """What the recommender knows about one agent item.

    Attributes:
        agent_id: The id the recommender answers with.
        name: Display name.
        description: The text the recommender reads (genres, years, style, size).
        genres: The slice's genres.
        years: The slice's inclusive release-year range.
        style: ``mainstream``, ``arthouse`` or ``broad``.
        n_items: Films in the slice.
        popularity: The slice's share of all known interactions, scaled so the most used
            agent has 1.0 (the "agent popularity" of the classic scorer).
        era_shares: Share of the slice's films in each era (for the scorer).
        adversarial: Whether the agent lies in its reports (never shown to the recommender).
    """

    agent_id: str
    name: str
    description: str
    genres: tuple[str, ...]
    years: tuple[int, int]
    style: str
    n_items: int
    popularity: float
    era_shares: dict[str, float] = field(default_factory=dict)
    adversarial: bool = False


@dataclass(frozen=True)
class Catalogue:
    """The agent items, each agent's film slice, and what prompts need to know of films.

    Attributes:
        cards: The agent cards, in id order.
        slices: Agent id -> its film ids, most popular first.
        titles: Film id -> readable title.
        years: Film id -> release year (``None`` when unknown).
        genres: Film id -> genres.
        popularity: Film id -> known interactions.
    """

    cards: tuple[AgentCard, ...]
    slices: dict[str, tuple[str, ...]]
    titles: dict[str, str]
    years: dict[str, int | None]
    genres: dict[str, tuple[str, ...]]
    popularity: dict[str, int]

    def __repr__(self) -> str:
        ids = ", ".join(self.ids)
        return f"Catalogue({len(self.cards)} agents: {ids}; {len(self.titles)} films)"

    def card(self, agent_id: str) -> AgentCard:
        """The card of ``agent_id`` (a clear KeyError if unknown)."""
        for card in self.cards:
            if card.agent_id == agent_id:
                return card
        raise KeyError(f"no agent {agent_id!r}; known: {[c.agent_id for c in self.cards]}")

    @property
    def ids(self) -> tuple[str, ...]:
        """All agent ids."""
        return tuple(c.agent_id for c in self.cards)

    @property
    def adversary(self) -> str | None:
        """The adversarial agent's id, if the catalogue has one."""
        return next((c.agent_id for c in self.cards if c.adversarial), None)

    def without_adversary(self) -> Catalogue:
        """The same catalogue with only the honest agents."""
        keep = tuple(c for c in self.cards if not c.adversarial)
        return dataclasses.replace(
            self, cards=keep, slices={c.agent_id: self.slices[c.agent_id] for c in keep}
        )

    def line(self, item: str) -> str:
        """One film as prompts show it: ``Title (1995) [Comedy, Drama]``."""
        year = self.years.get(item)
        when = f" ({year})" if year is not None else ""
        return f"{self.titles[item]}{when} [{', '.join(self.genres.get(item, ()))}]"

    def table(self) -> pd.DataFrame:
        """The cards as a table for the notebook."""
        rows = [
            {
                "agent_id": c.agent_id,
                "name": c.name,
                "genres": ", ".join(c.genres),
                "years": f"{c.years[0]}-{c.years[1]}",
                "style": c.style,
                "n_items": c.n_items,
                "popularity": round(c.popularity, 3),
                "adversarial": c.adversarial,
                "top_films": "; ".join(self.titles[i] for i in self.slices[c.agent_id][:3]),
            }
            for c in self.cards
        ]
        return pd.DataFrame(rows)


def _describe(spec: AgentSpec, n_items: int, era_shares: dict[str, float]) -> str:
    main_era = max(era_shares, key=lambda e: era_shares[e]) if era_shares else None
    style = {
        "mainstream": "popular titles",
        "arthouse": "lesser-known titles",
        "broad": "popular and lesser-known titles",
    }[spec.style]
    mostly = f" (mostly {main_era})" if main_era else ""
    return (
        f"{spec.blurb} Genres: {', '.join(spec.genres)}. Years {spec.years[0]}-"
        f"{spec.years[1]}{mostly}. {style.capitalize()}, {n_items} films."
    )


def build_catalogue(
    dataset: Dataset,
    known_interactions: pd.DataFrame,
    specs: Sequence[AgentSpec] = AGENT_SPECS,
    with_adversary: bool = True,
    min_interactions: int = 2,
) -> Catalogue:
    """Cut each agent's slice of the films and write its card.

    A film is in a slice if it has one of the spec's genres, its release year is in the
    spec's range, and it has at least ``min_interactions`` known interactions. A
    ``mainstream`` agent keeps the more popular half of that (ties broken by id), an
    ``arthouse`` agent the other half, so the two variants of one slice are disjoint.
    Slices of different genre groups overlap where a film has genres of both (e.g. a
    romantic comedy): that is by design, as several curators can know the same film.

    Args:
        dataset: Needs an item table with titles, years and genres.
        known_interactions: What the platform knows (e.g. the split's train part): slice
            membership and popularity are counted here, never on held-out items.
        specs: The agents (default: :data:`AGENT_SPECS`).
        with_adversary: Add :data:`ADVERSARY_SPEC` (flagged ``adversarial``).
        min_interactions: Least known interactions for a film to be in any slice.

    Returns:
        The :class:`Catalogue`; every slice is ordered most popular first.
    """
    if dataset.items is None:
        raise ValueError(f"{dataset.name} has no item table: agent slices need genres and years")
    specs = list(specs) + ([ADVERSARY_SPEC] if with_adversary else [])
    ids = [s.agent_id for s in specs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"agent ids must be unique, got {ids}")
    titles, years, genres = _film_facts(dataset.items)
    counts = known_interactions[ITEM].astype(str).value_counts()
    popularity = {item: int(counts.get(item, 0)) for item in titles}
    ordered = sorted(titles, key=lambda i: (-popularity[i], id_key(i)))
    # The films' facts first (no agents yet): the slices are cut from them.
    films = Catalogue((), {}, titles, years, genres, popularity)
    slices = {spec.agent_id: cut_slice(spec, ordered, films, min_interactions) for spec in specs}
    usage = {a: sum(popularity[i] for i in chosen) for a, chosen in slices.items()}
    top = max(usage.values())
    cards = [
        agent_card(spec, slices[spec.agent_id], years, usage[spec.agent_id] / top) for spec in specs
    ]
    return dataclasses.replace(films, cards=tuple(cards), slices=slices)


def _film_facts(
    items: pd.DataFrame,
) -> tuple[dict[str, str], dict[str, int | None], dict[str, tuple[str, ...]]]:
    """Each film's readable title, release year (``None`` if unknown) and known genres."""
    titles = {
        str(i): readable_title(str(t)) for i, t in zip(items[ITEM], items[TITLE], strict=True)
    }
    years = {
        str(i): (None if pd.isna(y) else int(y))
        for i, y in zip(items[ITEM], items[YEAR], strict=True)
    }
    genres = {
        str(i): tuple(g for g in gs if g in GENRE_NAMES)
        for i, gs in zip(items[ITEM], items[GENRES], strict=True)
    }
    return titles, years, genres


def cut_slice(
    spec: AgentSpec, ordered: Sequence[str], films: Catalogue, min_interactions: int
) -> tuple[str, ...]:
    """The spec's films (``ordered`` most popular first): genre, years, style; never empty."""
    wanted = set(spec.genres)
    first, last = spec.years
    base = [
        i
        for i in ordered
        if films.popularity[i] >= min_interactions
        and wanted & set(films.genres[i])
        and (year := films.years[i]) is not None
        and first <= year <= last
    ]
    half = (len(base) + 1) // 2
    chosen = {"mainstream": base[:half], "arthouse": base[half:], "broad": base}[spec.style]
    if not chosen:
        raise ValueError(f"agent {spec.agent_id} ({spec.name}) has an empty slice")
    return tuple(chosen)


def agent_card(
    spec: AgentSpec, chosen: Sequence[str], years: dict[str, int | None], popularity: float
) -> AgentCard:
    """The card of one agent: its description, slice size, popularity and era shares."""
    eras = Counter(era_of_year(years[i]) for i in chosen)
    shares = {e: eras.get(e, 0) / len(chosen) for e in ERAS}
    return AgentCard(
        agent_id=spec.agent_id,
        name=spec.name,
        description=_describe(spec, len(chosen), shares),
        genres=spec.genres,
        years=spec.years,
        style=spec.style,
        n_items=len(chosen),
        popularity=popularity,
        era_shares=shares,
        adversarial=spec.adversarial,
    )


def id_key(item: str) -> tuple[int, str]:
    """Sort key of an item id: numeric ids in numeric order, then the others."""
    return (int(item), item) if item.isdigit() else (1 << 62, item)
