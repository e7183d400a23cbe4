"""InteRecAgent's tools without a language model: item table, safe SQL, candidate bus, plans.

InteRecAgent lets a language model plan calls to classic recommender tools. The tools pass
item ids through a shared *candidate bus*, so item lists never enter the prompt. Everything
in this module runs without a model, so that the tool chain can be tested, traced and
scripted on its own:

- :class:`ItemTable`: the catalogue as an in-memory SQLite table ``items``, with a
  :meth:`~ItemTable.describe` text for prompts and read-only SQL (:meth:`~ItemTable.run_select`)
  enforced by SQLite's authorizer, limits and a time limit, not by pattern matching alone
  (:mod:`recagents.interecagent.sqlguard`). Every observation a tool returns is capped in
  characters (:data:`OBSERVATION_CHARS`; ``lookup_chars`` for the SQL tools).
- :class:`CandidateBus`: the current candidate ids (all items at the start of a turn), capped
  at 1,000 whenever a tool writes to it.
- The six tools: :func:`candidate_store`, :func:`lookup`, :func:`hard_filter`,
  :func:`soft_filter` (ItemCF), :func:`rank` and :func:`map_titles`. Each takes a
  :class:`ToolContext` and the input the planner wrote, updates the bus and returns a short
  text observation.
- Plans: :data:`PLAN_SCHEMA`, :func:`validate_plan` and :func:`execute_plan`, which returns
  an :class:`ExecutionTrack` for the critic prompt and for a notebook trace.
- Metrics of the multi-turn and one-turn protocols and the Random / Pop baselines.

Deviations from the released code, each deliberate and documented where it happens:

- The bus starts with *all* items (the paper's starts at ids 1..N-1 and never holds the last).
- A plan keeps its order and may repeat a tool (the paper turns a plan into a dict, so a tool
  runs at most once).
- Unknown columns are reported with the real ones (the paper maps them to the nearest column).
- The executor stops at the first failing step, as the paper's does; ``stop_on_error=False``
  runs the remaining steps instead.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd
from rapidfuzz import fuzz, process
from scipy import sparse

from recagents.columns import GENRES, ITEM, RATING, TITLE, USER, YEAR
from recagents.data import Dataset, readable_title
from recagents.interecagent.sqlguard import (
    COLUMNS,
    LOOKUP_CHARS,
    TABLE,
    IdSelection,
    ReadOnlyTable,
    SelectResult,
    ToolError,
    _prepare_select,
    _selects_id,
    clip_text,
)
from recagents.metrics import bootstrap_ci

if TYPE_CHECKING:
    from recagents.baselines import Baseline

__all__ = [
    "BUS_CAP",
    "COLUMNS",
    "LOOKUP_CHARS",
    "OBSERVATION_CHARS",
    "PLAN_OBJECT_SCHEMA",
    "PLAN_SCHEMA",
    "RANK_SCHEMAS",
    "TABLE",
    "TOOL_DESCRIPTIONS",
    "TOOL_NAMES",
    "BusEvent",
    "CandidateBus",
    "ConversationMetrics",
    "ExecutionTrack",
    "IdSelection",
    "ItemCF",
    "ItemRow",
    "ItemTable",
    "PlanError",
    "PlanStep",
    "SelectResult",
    "StepRecord",
    "TitleMatch",
    "ToolContext",
    "ToolError",
    "build_context",
    "candidate_store",
    "execute_plan",
    "execute_step",
    "fuzzy_hit",
    "hard_filter",
    "hit_at_k_and_at",
    "hit_by_id",
    "leaks",
    "lookup",
    "map_titles",
    "parse_plan",
    "parse_rank_input",
    "popular_recommend",
    "random_recommend",
    "rank",
    "ranking_ndcg",
    "recall_at_k",
    "soft_filter",
    "split_titles",
    "validate_plan",
]

#: Most candidates the bus holds after a tool writes to it (the paper's cap).
BUS_CAP = 1000
#: Candidates kept by :func:`rank` (the paper's top 100).
RANK_KEEP = 100
#: Longest observation or error text any tool returns (map_titles' list of 100 titles fits);
#: lookup and hard_filter keep to the smaller ``ToolContext.lookup_chars``.
OBSERVATION_CHARS = 4000
#: Soft filter's share of the catalogue: 0.1 in the paper's evaluation, 0.05 in its app.
TOP_RATIO_EVAL = 0.1
TOP_RATIO_APP = 0.05
#: Separator between titles in the input of candidate_store and soft_filter.
TITLE_SEPARATOR = ";;"
#: Ranking schemas the rank tool understands.
RANK_SCHEMAS = ("popularity", "similarity", "preference")
#: The tools a plan may call, in the order a typical plan uses them.
TOOL_NAMES = ("candidate_store", "lookup", "hard_filter", "soft_filter", "rank", "map_titles")
#: One line per tool for the planner prompt (the project's own words).
TOOL_DESCRIPTIONS = {
    "candidate_store": (
        "Input: the titles the user names, separated by ';;'. Makes exactly those items the "
        "candidates, e.g. when the user asks to choose among them."
    ),
    "lookup": (
        "Input: one SQL SELECT on the table items. Answers questions about items (year, "
        "genres, popularity); returns the rows. Does not change the candidates."
    ),
    "hard_filter": (
        "Input: one SQL SELECT on the table items that selects the id column, e.g. "
        "SELECT id FROM items WHERE tags LIKE '%Comedy%'. Keeps the candidates that match "
        "hard conditions (genre, year, popularity, rating)."
    ),
    "soft_filter": (
        "Input: seed titles separated by ';;'. Keeps the candidates most similar to the seeds "
        "(people who liked one liked the other), most similar first."
    ),
    "rank": (
        'Input: {"schema": "popularity" | "similarity" | "preference", "prefer": [titles the '
        'user likes], "unwanted": [titles to exclude]}. Orders the candidates and keeps the '
        "best 100."
    ),
    "map_titles": (
        "Input: how many items to recommend (default 5). Turns the first candidates into "
        "titles; always the last step."
    ),
}

#: Tools that read or write the candidate bus (all but lookup).
_BUS_TOOLS = frozenset(TOOL_NAMES) - {"lookup"}


class PlanError(ValueError):
    """A plan that cannot be executed; ``problems`` lists every reason, one line each."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid plan: " + "; ".join(self.problems))


# --------------------------------------------------------------------------- item table


@dataclass(frozen=True)
class ItemRow:
    """One row of the item table.

    Attributes:
        id: Our item id (the ``item_id`` string of the dataset).
        title: Readable title (a trailing ", The" moved to the front), without the year.
        release_year: Release year, or ``None``.
        tags: Genres, comma-joined, or ``None`` without any.
        visited_num: Interactions with the item in the frame the table was built from.
        avg_rating: Mean rating in that frame, or ``None`` (no ratings, or no interactions).
    """

    id: str
    title: str
    release_year: int | None = None
    tags: str | None = None
    visited_num: int = 0
    avg_rating: float | None = None

    @property
    def display(self) -> str:
        """Title with the year, e.g. ``"Hamlet (1948)"``: titles alone are not unique."""
        return self.title if self.release_year is None else f"{self.title} ({self.release_year})"


class TitleMatch(NamedTuple):
    """The item a written title was mapped to.

    Attributes:
        query: The title as written.
        item_id: The matched id, or ``None`` when nothing scored high enough.
        score: Fuzzy score of the title part (0-100) of the chosen item.
        note: Why the choice needs attention (ambiguity), or ``""``.
    """

    query: str
    item_id: str | None
    score: float
    note: str


_YEAR_SUFFIX = re.compile(r"^(?P<title>.*?)\s*\((?P<year>\d{4})\)\s*$")


_LEADING_ARTICLE = re.compile(r"^(the|a|an) ")


def _numbers(text: str) -> list[str]:
    """The numbers in a normalised title, in order (sequels differ by them)."""
    return re.findall(r"\d+", text)


def _norm_title(text: str) -> str:
    """Lower case, punctuation to spaces, one space between words."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text.lower()).split())


def split_titles(titles: str | Sequence[str]) -> list[str]:
    """Titles from a ``;;``-separated string (or a list), stripped of quotes, empties dropped."""
    if isinstance(titles, str):
        parts = titles.split(TITLE_SEPARATOR)
    elif isinstance(titles, Sequence) and all(isinstance(t, str) for t in titles):
        parts = list(titles)
    else:
        raise ToolError(f"titles must be a ';;'-separated string or a list of strings: {titles!r}")
    return [p.strip().strip("\"'").strip() for p in parts if p.strip().strip("\"'").strip()]


class ItemTable(ReadOnlyTable):
    """The catalogue as an in-memory SQLite table ``items`` that the SQL tools may only read.

    Columns: ``id`` (our item id), ``title`` (readable, year-free), ``release_year``,
    ``tags`` (genres, comma-joined), ``visited_num`` (interactions in the frame given) and
    ``avg_rating``. The SQL side is :class:`~recagents.interecagent.sqlguard.ReadOnlyTable`:
    once built, the connection's authorizer allows nothing but SELECT, reading the item table
    and calling the allowed SQL functions, within SQLite's limits, a heap cap and a time
    limit; every SQL text from a planner goes through :meth:`run_select`, :meth:`select_ids`
    or :meth:`check_select`.

    Args:
        rows: The items, in the order the bus lists them at the start of a turn.
        domain: Noun for the items in :meth:`describe` ("movie", "game").
        timeout_s: Longest a query may run before it is stopped.

    Raises:
        ValueError: No rows, or an id listed twice.
    """

    def __init__(self, rows: Sequence[ItemRow], domain: str = "movie", timeout_s: float = 5.0):
        if not rows:
            raise ValueError("an item table needs at least one item")
        ids = [row.id for row in rows]
        if len(set(ids)) != len(ids):
            dup = pd.Series(ids)[pd.Series(ids).duplicated()].iloc[0]
            raise ValueError(f"item id {dup!r} is listed more than once")
        self.domain = domain
        self.ids: tuple[str, ...] = tuple(ids)
        self.rows: dict[str, ItemRow] = {row.id: row for row in rows}
        self.position: dict[str, int] = {item: i for i, item in enumerate(ids)}
        super().__init__(
            [
                (r.id, r.title, r.release_year, r.tags, int(r.visited_num), r.avg_rating)
                for r in rows
            ],
            timeout_s=timeout_s,
        )
        self._title_choices: list[str] | None = None
        self._title_owner: list[str] | None = None

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_dataset(
        cls,
        dataset: Dataset,
        interactions: pd.DataFrame,
        domain: str = "movie",
        move_article: bool = True,
    ) -> ItemTable:
        """Build the table of a dataset's catalogue, with popularity from ``interactions``.

        Args:
            dataset: The dataset; its ``.item`` file gives titles, years and genres. Items
                that only occur in the interactions get their id as title.
            interactions: The frame that counts as known (train, or train + valid), e.g.
                ``split.history("test")``; held-out rows must not leak into popularity.
            domain: Noun for the items in :meth:`describe`.
            move_article: Move a trailing ", The" to the front, as the papers' loaders do.

        Returns:
            The table, rows in the order of the item file, then items only seen in data.
        """
        items = dataset.items
        records: list[ItemRow] = []
        counts = interactions[ITEM].value_counts()
        ratings = (
            interactions.groupby(ITEM)[RATING].mean()
            if RATING in interactions
            else pd.Series(dtype=float)
        )
        known: set[str] = set()

        def stats(item: str) -> tuple[int, float | None]:
            rating = ratings.get(item)
            mean = None if rating is None or pd.isna(rating) else float(rating)
            return int(counts.get(item, 0)), mean

        if items is not None:
            for item, title, year, genres in items[[ITEM, TITLE, YEAR, GENRES]].itertuples(
                index=False
            ):
                visited, rating = stats(item)
                records.append(
                    ItemRow(
                        id=str(item),
                        title=readable_title(str(title), move_article),
                        release_year=None if pd.isna(year) else int(year),
                        tags=", ".join(genres) if len(genres) else None,
                        visited_num=visited,
                        avg_rating=rating,
                    )
                )
                known.add(str(item))
        for item in pd.unique(dataset.interactions[ITEM].astype(str)):
            if item not in known:
                visited, rating = stats(item)
                records.append(ItemRow(id=item, title=item, visited_num=visited, avg_rating=rating))
                known.add(item)
        return cls(records, domain=domain)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, domain: str = "movie") -> ItemTable:
        """Build the table from a frame with (a subset of) :data:`COLUMNS`; ``id`` required.

        Meant for hand-built tables in tests and teaching examples.
        """
        if "id" not in frame:
            raise ValueError(f"the frame needs an 'id' column; it has {list(frame.columns)}")
        rows = []
        for record in frame.to_dict("records"):
            year = record.get("release_year")
            rating = record.get("avg_rating")
            tags = record.get("tags")
            tags = None if tags is None or (isinstance(tags, float) and pd.isna(tags)) else tags
            rows.append(
                ItemRow(
                    id=str(record["id"]),
                    title=str(record.get("title", record["id"])),
                    release_year=None if year is None or pd.isna(year) else int(year),
                    tags=None if tags is None else str(tags),
                    visited_num=int(record.get("visited_num", 0)),
                    avg_rating=None if rating is None or pd.isna(rating) else float(rating),
                )
            )
        return cls(rows, domain=domain)

    # ------------------------------------------------------------------ basics

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"ItemTable({len(self):,} {self.domain}s)"

    def display_title(self, item_id: str) -> str:
        """Title with year of one item, e.g. ``"Hamlet (1948)"``."""
        return self.rows[item_id].display

    def frame(self) -> pd.DataFrame:
        """The whole table as a DataFrame, for notebooks."""
        return pd.DataFrame([vars(self.rows[i]) for i in self.ids], columns=list(COLUMNS))

    def popularity(self, item_ids: Sequence[str]) -> np.ndarray:
        """``visited_num`` of each id."""
        return np.array([self.rows[i].visited_num for i in item_ids], dtype=np.int64)

    def item_texts(self) -> list[str]:
        """One line per item, in table order: ``"Title (year) - tags"`` (for embeddings)."""
        out = []
        for item in self.ids:
            row = self.rows[item]
            out.append(row.display + (f" - {row.tags}" if row.tags else ""))
        return out

    def describe(self) -> str:
        """Describe the table for a prompt, as the paper's grounding does.

        Gives each column's type and meaning, min / max / mean / median of the numeric
        columns and up to 10 example values of ``tags`` (the most frequent genres).
        """
        noun = self.domain
        meanings = {
            "id": ("TEXT", f"the {noun}'s id; tools and answers refer to {noun}s by it"),
            "title": (
                "TEXT",
                "the title without the year, any leading article in front; not unique",
            ),
            "release_year": ("INTEGER or NULL", "year of release"),
            "tags": (
                "TEXT or NULL",
                "genres, comma-separated; match one with tags LIKE '%Comedy%'",
            ),
            "visited_num": ("INTEGER", "interactions in the training data (popularity)"),
            "avg_rating": ("REAL or NULL", "mean rating in the training data"),
        }
        frame = self.frame()
        lines = [f"Table {TABLE}: one row per {noun} ({len(self):,} rows). Columns:"]
        for column in COLUMNS:
            kind, meaning = meanings[column]
            line = f"- {column} ({kind}): {meaning}."
            if column in ("release_year", "visited_num", "avg_rating"):
                values = pd.to_numeric(frame[column], errors="coerce").dropna()
                if len(values):
                    line += (
                        f" min {_number(values.min())}, max {_number(values.max())}, "
                        f"mean {values.mean():.1f}, median {_number(values.median())}."
                    )
                else:
                    line += " No values."
            if column == "tags":
                tags = pd.Series(
                    [t.strip() for value in frame["tags"].dropna() for t in value.split(",")]
                )
                examples = tags[tags != ""].value_counts().index[:10].tolist()
                if examples:
                    line += " Values include: " + ", ".join(examples) + "."
            lines.append(line)
        return "\n".join(lines)

    # ------------------------------------------------------------------ titles

    def _choices(self) -> tuple[list[str], list[str]]:
        if self._title_choices is None:
            choices, owner = [], []
            for item in self.ids:
                title = _norm_title(self.rows[item].title)
                forms = {title, _norm_title(self.rows[item].display)}
                forms.add(_LEADING_ARTICLE.sub("", title))
                for form in forms:
                    choices.append(form)
                    owner.append(item)
            self._title_choices, self._title_owner = choices, owner
        assert self._title_owner is not None
        return self._title_choices, self._title_owner

    def match_title(self, text: str, min_score: float = 85.0) -> TitleMatch:
        """Map a title as written (optionally with a year in brackets) to one item id.

        Query and titles are lower-cased with punctuation removed; each item is scored by the
        better of rapidfuzz's ``ratio`` and ``token_sort_ratio`` against its title, its title
        without a leading article and its title with the year. Numbers must agree ("Toy Story
        2" is not "Toy Story"). Whole-string scorers are used on purpose: partial scorers such
        as ``WRatio`` map "It" to "Titanic". A year in brackets that agrees with the item's
        adds 5 points, so duplicate titles are told apart ("Hamlet (1948)"). Remaining ties go
        to the most visited item, then to the first in table order, and the note says so.

        Args:
            text: The title, e.g. ``"Hamlet (1948)"`` or ``"usual suspects"``.
            min_score: Lowest fuzzy score (0-100) accepted as a match.

        Returns:
            The :class:`TitleMatch` (``item_id`` is ``None`` when nothing scores enough).
        """
        query = text.strip()
        match = _YEAR_SUFFIX.match(query)
        year = int(match["year"]) if match else None
        base = match["title"] if match and match["title"].strip() else query
        choices, owner = self._choices()
        wanted = _norm_title(base)
        numbers = _numbers(wanted)
        best: dict[str, float] = {}
        for scorer in (fuzz.ratio, fuzz.token_sort_ratio):
            found = process.extract(
                wanted, choices, scorer=scorer, processor=None, limit=None, score_cutoff=min_score
            )
            for _, score, index in found:
                item = owner[index]
                row = self.rows[item]
                own = _numbers(_norm_title(row.title))
                if numbers not in (own, [*own, str(row.release_year)]):
                    continue
                best[item] = max(best.get(item, 0.0), float(score))
        if not best:
            return TitleMatch(query, None, 0.0, "")

        def combined(item: str) -> float:
            bonus = 5.0 if year is not None and self.rows[item].release_year == year else 0.0
            return best[item] + bonus

        top = max(combined(i) for i in best)
        tied = [i for i in best if combined(i) >= top - 1e-9]
        tied.sort(key=lambda i: (-self.rows[i].visited_num, self.position[i]))
        chosen = tied[0]
        note = ""
        if len(tied) > 1:
            options = ", ".join(self.display_title(i) for i in tied[:4])
            note = (
                f"{query!r} is ambiguous ({options}); took {self.display_title(chosen)}, "
                "the most visited"
            )
        return TitleMatch(query, chosen, best[chosen], note)

    def match_titles(
        self, titles: str | Sequence[str], min_score: float = 85.0
    ) -> list[TitleMatch]:
        """:meth:`match_title` for each title of a ``;;``-separated string or a list."""
        return [self.match_title(t, min_score) for t in split_titles(titles)]


def _number(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"


# --------------------------------------------------------------------------- bus


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


# --------------------------------------------------------------------------- ItemCF


class ItemCF:
    """Item-to-item similarity from co-occurrence: ``C_ij / sqrt(N_i * N_j)``.

    ``C_ij`` counts the users who interacted with both items and ``N_i`` those who
    interacted with item ``i`` (repeats of a pair count once). The diagonal is zero, so an
    item is not similar to itself. Stored as a sparse matrix over ``item_ids``.

    Args:
        similarity: Square sparse matrix aligned with ``item_ids``.
        item_ids: Item ids of the rows and columns.
    """

    def __init__(self, similarity: sparse.spmatrix, item_ids: Sequence[str]) -> None:
        if similarity.shape != (len(item_ids), len(item_ids)):
            raise ValueError(f"similarity is {similarity.shape}, ids are {len(item_ids)}")
        self.matrix = sparse.csr_matrix(similarity)
        self.item_ids = tuple(item_ids)
        self.index = {item: i for i, item in enumerate(self.item_ids)}

    @classmethod
    def from_interactions(cls, interactions: pd.DataFrame, item_ids: Sequence[str]) -> ItemCF:
        """Count co-occurrences in ``interactions`` (train, or train + valid).

        Args:
            interactions: ``[user_id, item_id, ...]``; items outside ``item_ids`` are ignored.
            item_ids: The catalogue (rows and columns of the matrix).
        """
        index = {item: i for i, item in enumerate(item_ids)}
        pairs = interactions[[USER, ITEM]].drop_duplicates()
        pairs = pairs[pairs[ITEM].isin(index)]
        users, _ = pd.factorize(pairs[USER])
        columns = pairs[ITEM].map(index).to_numpy(dtype=np.int64)
        n_users = int(users.max()) + 1 if len(users) else 0
        x = sparse.csr_matrix(
            (np.ones(len(pairs)), (users, columns)), shape=(n_users, len(item_ids))
        )
        co = (x.T @ x).tocsr()
        counts = np.asarray(x.sum(axis=0)).ravel()
        inv = np.divide(1.0, np.sqrt(counts), out=np.zeros_like(counts), where=counts > 0)
        scale = sparse.diags(inv)
        sim = (scale @ co @ scale).tocsr()
        sim = (sim - sparse.diags(sim.diagonal())).tocsr()
        sim.eliminate_zeros()
        return cls(sim, item_ids)

    def similarity(self, a: str, b: str) -> float:
        """Similarity of two items."""
        return float(self.matrix[self.index[a], self.index[b]])

    def scores(self, items: Sequence[str], seeds: Sequence[str]) -> np.ndarray:
        """Mean similarity of each of ``items`` to the ``seeds``."""
        if not seeds:
            raise ValueError("scores needs at least one seed")
        rows = [self.index[i] for i in items]
        cols = [self.index[s] for s in seeds]
        block = self.matrix[rows][:, cols]
        return np.asarray(block.mean(axis=1)).ravel()


# --------------------------------------------------------------------------- tools


@dataclass
class ToolContext:
    """What the tools share: the table, the bus and the models behind them.

    Attributes:
        table: The item table.
        bus: The candidate bus.
        itemcf: ItemCF similarities for :func:`soft_filter` (``None``: the embedding fallback).
        ranker: A trained sequential :class:`~recagents.baselines.Baseline` (SASRec) for the
            preference schema of :func:`rank`; ``None`` falls back to popularity.
        embed: Text-embedding function for the soft filter's fallback; ``None`` uses
            :func:`recagents.llm.embed.embed` (offline MiniLM, cached).
        top_ratio: Soft filter's share of the catalogue (0.1 eval, 0.05 app).
        lookup_chars: Character budget of a lookup or hard_filter observation.
        rank_keep: Candidates kept by :func:`rank`.
        map_n: Recommendations made by :func:`map_titles` when the plan does not say.
        title_min_score: Lowest fuzzy score accepted when mapping titles to ids.
    """

    table: ItemTable
    bus: CandidateBus
    itemcf: ItemCF | None = None
    ranker: Baseline | None = None
    embed: Callable[[Sequence[str]], np.ndarray] | None = None
    top_ratio: float = TOP_RATIO_EVAL
    lookup_chars: int = LOOKUP_CHARS
    rank_keep: int = RANK_KEEP
    map_n: int = 5
    title_min_score: float = 85.0
    _item_vectors: np.ndarray | None = field(default=None, init=False, repr=False)

    def item_vectors(self) -> np.ndarray:
        """Embeddings of :meth:`ItemTable.item_texts`, computed once."""
        if self._item_vectors is None:
            self._item_vectors = self.embed_texts(self.table.item_texts())
        return self._item_vectors

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts with ``embed`` (or the project's cached offline MiniLM)."""
        if self.embed is not None:
            return np.asarray(self.embed(texts))
        from recagents.llm.embed import embed

        return embed(texts)


def build_context(
    dataset: Dataset,
    interactions: pd.DataFrame,
    ranker: Baseline | None = None,
    cap: int = BUS_CAP,
    seed: int = 0,
    top_ratio: float = TOP_RATIO_EVAL,
    domain: str = "movie",
) -> ToolContext:
    """Build the table, bus and ItemCF of a dataset in one call.

    Args:
        dataset: The dataset.
        interactions: Known interactions (train + valid for the test phase): popularity,
            ratings and ItemCF come from them only.
        ranker: A trained SASRec :class:`~recagents.baselines.Baseline`, or ``None``.
        cap: Bus cap.
        seed: Seed of the bus's random cap.
        top_ratio: Soft filter's share of the catalogue.
        domain: Noun for the items.
    """
    table = ItemTable.from_dataset(dataset, interactions, domain=domain)
    return ToolContext(
        table=table,
        bus=CandidateBus(table.ids, cap=cap, seed=seed),
        itemcf=ItemCF.from_interactions(interactions, table.ids),
        ranker=ranker,
        top_ratio=top_ratio,
    )


def _matched(ctx: ToolContext, titles: str | Sequence[str]) -> tuple[list[str], list[str]]:
    """Ids of the titles that matched (in order, once each) and notes on the rest."""
    ids: list[str] = []
    notes: list[str] = []
    unmatched = []
    for match in ctx.table.match_titles(titles, ctx.title_min_score):
        if match.item_id is None:
            unmatched.append(match.query)
            continue
        if match.note:
            notes.append(match.note)
        if match.item_id not in ids:
            ids.append(match.item_id)
    if unmatched:
        notes.append("not found: " + "; ".join(repr(t) for t in unmatched))
    return ids, notes


def _sentence(parts: Iterable[str]) -> str:
    """Join observation parts as sentences (first letter up, full stop at the end)."""
    out = []
    for part in parts:
        if part:
            part = part[0].upper() + part[1:]
            out.append(part if part.endswith(".") else part + ".")
    return " ".join(out)


def candidate_store(ctx: ToolContext, titles: str | Sequence[str]) -> str:
    """Make the titles the user names the candidates (e.g. "which of these should I watch").

    Titles are fuzzy-matched to ids (year in brackets disambiguates duplicates). When no
    title matches, the bus is left as it was, and the observation says so.

    Args:
        ctx: The tool context.
        titles: ``;;``-separated titles (or a list).

    Returns:
        How many titles were stored, and which were not found.
    """
    parts = split_titles(titles)
    if not parts:
        raise ToolError("candidate_store needs at least one title (separate titles with ';;')")
    ids, notes = _matched(ctx, parts)
    if not ids:
        head = f"No title matched; the candidates are unchanged ({len(ctx.bus):,} items)"
        return clip_text(_sentence([head, *notes]), OBSERVATION_CHARS)
    cap_note = ctx.bus.set(ids, "candidate_store", ordered=True)
    stored = ", ".join(ctx.table.display_title(i) for i in ids[:10])
    head = f"Stored {len(ids)} of {len(parts)} titles as the candidates: {stored}"
    return clip_text(_sentence([head, *notes, cap_note]), OBSERVATION_CHARS)


#: What SQLite, or converting its values, may raise on a planner's SQL.
_SQL_TOOL_FAILURES = (
    sqlite3.Error,
    sqlite3.Warning,
    MemoryError,
    OverflowError,
    UnicodeError,
    RecursionError,
)


def _sql_tool(tool: Callable[[ToolContext, str], str]) -> Callable[[ToolContext, str], str]:
    """Turn any failure a planner's SQL can cause inside ``tool`` into a :class:`ToolError`.

    :class:`ItemTable` already does so for SQLite's own work; this boundary also covers
    whatever the tool does with the rows, so that a failed query ends one step (which the
    planner sees and can retry), never the whole run. Programming errors (``TypeError``,
    ``KeyError``, ...) are not caught.
    """

    @functools.wraps(tool)
    def guarded(ctx: ToolContext, sql: str) -> str:
        try:
            return tool(ctx, sql)
        except _SQL_TOOL_FAILURES as error:
            kind = "ran out of memory" if isinstance(error, MemoryError) else "failed"
            detail = clip_text(f"{type(error).__name__}: {error}", 200)
            raise ToolError(f"the SQL {kind} ({detail}); simplify the query") from error

    return guarded


@_sql_tool
def lookup(ctx: ToolContext, sql: str) -> str:
    """Answer a question about items with one read-only SELECT over the whole table.

    Args:
        ctx: The tool context.
        sql: One SELECT statement on ``items``.

    Returns:
        The rows as compact text, at most ``ctx.lookup_chars`` characters however wide the
        rows (each value cut to ``CELL_CHARS``, cuts marked); the bus is unchanged.
    """
    result = ctx.table.run_select(sql, max_rows=100)
    notes = clip_text(_sentence(result.notes), max(ctx.lookup_chars // 4, 80))
    room = ctx.lookup_chars - (len(notes) + 3 if notes else 0)
    text = result.as_text(room)
    return clip_text(f"{text}\n({notes})" if notes else text, ctx.lookup_chars)


@_sql_tool
def hard_filter(ctx: ToolContext, sql: str) -> str:
    """Keep the candidates that satisfy hard conditions, written as one SELECT.

    The query runs over the current candidates only (``items`` is restricted to the bus while
    it runs) and must select the ``id`` column. A hard filter only narrows: its result is
    intersected with the current candidates whatever the SQL says (``main.items`` reaches the
    whole catalogue). With an ORDER BY the kept ids follow the query's order (and a cap keeps
    the first 1,000); without one they keep the bus's order (and a cap keeps a random 1,000).

    Args:
        ctx: The tool context.
        sql: One SELECT statement on ``items`` selecting ``id``.

    Returns:
        How many candidates are left.
    """
    candidates = list(ctx.bus.ids)
    selection = ctx.table.select_ids(sql, within=candidates)
    # select_ids keeps only candidates already; intersecting here too keeps the rule local.
    current = set(candidates)
    if selection.ordered:
        kept = [i for i in selection.ids if i in current]
    else:
        wanted = set(selection.ids)
        kept = [i for i in candidates if i in wanted]
    cap_note = ctx.bus.set(kept, "hard_filter", ordered=selection.ordered)
    head = f"Hard filter: {len(kept):,} of {len(candidates):,} candidates match"
    if not kept:
        head += "; no candidate is left (the conditions may be too strict)"
    return clip_text(_sentence([head, *selection.notes, cap_note]), ctx.lookup_chars)


def soft_filter(
    ctx: ToolContext, seeds: str | Sequence[str], top_ratio: float | None = None
) -> str:
    """Keep the candidates most similar to seed items, most similar first.

    Each candidate's score is its mean ItemCF similarity to the matched seeds. With
    ``k = ceil(top_ratio * len(table))``, candidates scoring at least the k-th best score
    among the candidates (ties kept) and above zero are kept; the seeds themselves are not.
    When no seed title matches (the planner wrote a description, not titles), the scores are
    the cosine similarities between the text embedding of the whole input and those of the
    item texts ("Title (year) - tags"), through ``ctx.embed`` (offline MiniLM by default).
    The scores are stored on the bus for ``rank(schema="similarity")``.

    Args:
        ctx: The tool context.
        seeds: ``;;``-separated seed titles (or a list).
        top_ratio: Share of the catalogue to keep (``None``: ``ctx.top_ratio``).

    Returns:
        How many candidates are left, from which seeds, and what was not found.
    """
    ratio = ctx.top_ratio if top_ratio is None else top_ratio
    if not 0 < ratio <= 1:
        raise ToolError(f"top_ratio must lie in (0, 1], got {ratio}")
    parts = split_titles(seeds)
    if not parts:
        raise ToolError("soft_filter needs at least one seed title (separate titles with ';;')")
    seed_ids, notes = _matched(ctx, parts)
    seed_set = set(seed_ids)
    candidates = [i for i in ctx.bus.ids if i not in seed_set]
    before = len(ctx.bus)
    if seed_ids and ctx.itemcf is not None:
        values = ctx.itemcf.scores(candidates, seed_ids)
        how = "ItemCF similarity to " + ", ".join(ctx.table.display_title(i) for i in seed_ids)
    else:
        request = ", ".join(parts)
        try:
            query = ctx.embed_texts([request])[0]
            vectors = ctx.item_vectors()
        except RuntimeError as error:  # EmbeddingError and friends
            raise ToolError(f"soft_filter's embedding fallback failed: {error}") from error
        rows = [ctx.table.position[i] for i in candidates]
        values = vectors[rows] @ query if rows else np.zeros(0)
        why = "no ItemCF model" if seed_ids else "no seed title matched"
        how = f"text similarity to {request!r} ({why})"
    k = math.ceil(ratio * len(ctx.table))
    if len(values):
        order = np.argsort(-values, kind="stable")
        threshold = values[order[min(k, len(values)) - 1]]
        keep = [int(j) for j in order if values[j] >= threshold and values[j] > 0]
    else:
        keep = []
    kept = [candidates[j] for j in keep]
    scores = {candidates[j]: float(values[j]) for j in keep}
    cap_note = ctx.bus.set(
        kept, "soft_filter", ordered=True, scores=scores, score_kind="similarity"
    )
    head = f"Soft filter ({how}): {len(kept):,} of {before:,} candidates kept"
    return clip_text(_sentence([head, *notes, cap_note]), OBSERVATION_CHARS)


def parse_rank_input(value: Any) -> dict[str, Any]:
    """Turn the planner's rank input into ``{"schema", "prefer", "unwanted"}``.

    Accepts a mapping, a JSON object string, or a bare schema name. ``prefer`` and
    ``unwanted`` may be lists of titles or ``;;``-separated strings.

    Raises:
        ToolError: Not an object, an unknown key, or a schema outside :data:`RANK_SCHEMAS`.
    """
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in RANK_SCHEMAS:
            value = {"schema": text.lower()}
        else:
            try:
                value = json.loads(text)
            except json.JSONDecodeError as error:
                raise ToolError(
                    'rank needs a JSON object like {"schema": "popularity", "prefer": [], '
                    f'"unwanted": []}}, got {value!r}'
                ) from error
    if not isinstance(value, Mapping):
        raise ToolError(f"rank needs a JSON object, got {type(value).__name__}")
    extra = set(value) - {"schema", "prefer", "unwanted"}
    if extra:
        raise ToolError(
            f"rank got unknown key(s) {sorted(extra)}; it takes schema, prefer, unwanted"
        )
    schema = str(value.get("schema", "popularity")).strip().lower()
    if schema not in RANK_SCHEMAS:
        raise ToolError(f"rank schema {schema!r} is not one of {', '.join(RANK_SCHEMAS)}")
    out: dict[str, Any] = {"schema": schema}
    for key in ("prefer", "unwanted"):
        titles = value.get(key) or []
        out[key] = split_titles(titles)
    return out


def rank(
    ctx: ToolContext,
    schema: str = "popularity",
    prefer: Sequence[str] = (),
    unwanted: Sequence[str] = (),
) -> str:
    """Order the candidates, drop unwanted ones and keep the best ``ctx.rank_keep``.

    - ``popularity``: ``log(visited_num + 1)``.
    - ``similarity``: the soft filter's scores on the bus (popularity when there are none).
    - ``preference``: the sequential ranker scores every candidate after the ``prefer`` items
      as a pseudo-history (``Baseline.sequence_scores``); items the model never saw come
      last. Popularity when there is no ranker or no ``prefer`` title matches. A non-empty
      ``prefer`` switches any schema to preference, as the paper does. The sigmoid the paper
      applies is left out: it does not change the order.

    ``prefer`` items act as the user's history and are never ranked back to them; ``unwanted``
    items are removed.

    Args:
        ctx: The tool context.
        schema: One of :data:`RANK_SCHEMAS`.
        prefer: Titles the user likes.
        unwanted: Titles the user does not want.

    Returns:
        What the ranking used and how many candidates are left.
    """
    if schema not in RANK_SCHEMAS:
        raise ToolError(f"rank schema {schema!r} is not one of {', '.join(RANK_SCHEMAS)}")
    notes: list[str] = []
    prefer_ids, prefer_notes = _matched(ctx, prefer) if prefer else ([], [])
    unwanted_ids, unwanted_notes = _matched(ctx, unwanted) if unwanted else ([], [])
    notes += prefer_notes + unwanted_notes
    used = schema
    if prefer and schema != "preference":
        notes.append(f"prefer is not empty, so {schema} became preference")
        used = "preference"
    unwanted_set = set(unwanted_ids)
    drop = unwanted_set | set(prefer_ids)
    removed = sum(1 for i in ctx.bus.ids if i in unwanted_set)
    candidates = [i for i in ctx.bus.ids if i not in drop]
    before = len(ctx.bus)
    values = np.zeros(0)
    how = used
    if used == "preference":
        history: list[str] = []
        if ctx.ranker is not None:
            columns = ctx.ranker.item_index(prefer_ids, unknown=-1)
            history = [i for i, c in zip(prefer_ids, columns, strict=True) if c >= 0]
        if ctx.ranker is None:
            notes.append("no preference model is loaded; ranked by popularity instead")
            used = "popularity"
        elif not prefer:
            notes.append("preference needs liked titles in prefer; ranked by popularity instead")
            used = "popularity"
        elif not prefer_ids:
            notes.append("no prefer title matched an item; ranked by popularity instead")
            used = "popularity"
        elif not history:
            notes.append("no preferred title is known to the model; ranked by popularity instead")
            used = "popularity"
        else:
            full = ctx.ranker.sequence_scores([history])[0]
            values = full[ctx.ranker.item_index(candidates, unknown=0)]
            how = f"preference ({ctx.ranker.name} reading {len(history)} liked item(s))"
    if used == "similarity":
        if ctx.bus.score_kind == "similarity" and ctx.bus.scores is not None:
            values = np.array([ctx.bus.scores.get(i, -np.inf) for i in candidates], dtype=float)
            how = "similarity (the soft filter's scores)"
        else:
            notes.append("no soft-filter scores on the candidates; ranked by popularity instead")
            used = "popularity"
    if used == "popularity":
        values = np.log1p(ctx.table.popularity(candidates).astype(float))
        how = "popularity"
    if candidates:
        order = np.argsort(-np.asarray(values), kind="stable")[: ctx.rank_keep]
        ranked = [candidates[j] for j in order]
        scores = {candidates[j]: float(values[j]) for j in order}
    else:
        ranked, scores = [], {}
    ctx.bus.set(ranked, "rank", ordered=True, scores=scores, score_kind=used)
    head = f"Ranked {len(candidates):,} of {before:,} candidates by {how}; kept {len(ranked):,}"
    if removed:
        notes.insert(0, f"removed {removed} unwanted item(s)")
    return clip_text(_sentence([head, *notes]), OBSERVATION_CHARS)


def map_titles(ctx: ToolContext, n: int | str | None = None) -> tuple[list[str], str]:
    """Turn the first ``n`` candidates into titles: the recommendation of this turn.

    The executor clears the bus afterwards (a new turn starts with all items).

    Args:
        ctx: The tool context.
        n: How many (``None``: ``ctx.map_n``); a numeric string is accepted.

    Returns:
        ``(ids, text)`` with text ``"Here are recommendations: 1. Title (year); ..."``.
    """
    count = ctx.map_n if n is None or n == "" else n
    try:
        count = int(count)
    except (TypeError, ValueError) as error:
        raise ToolError(f"map_titles needs a number of items, got {n!r}") from error
    if count < 1:
        raise ToolError(f"map_titles needs at least 1 item, got {count}")
    ids = list(ctx.bus.ids[:count])
    if not ids:
        return [], "No candidate is left to recommend."
    listed = "; ".join(f"{k}. {ctx.table.display_title(i)}" for k, i in enumerate(ids, 1))
    return ids, clip_text(f"Here are recommendations: {listed}", OBSERVATION_CHARS)


# --------------------------------------------------------------------------- plans


_INPUT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string"},
        {"type": "integer"},
        {
            "type": "object",
            "properties": {
                "schema": {"type": "string", "enum": list(RANK_SCHEMAS)},
                "prefer": {"type": "array", "items": {"type": "string"}},
                "unwanted": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["schema"],
            "additionalProperties": False,
        },
    ]
}

#: JSON schema of a plan (a list of steps) for constrained decoding and validation.
PLAN_SCHEMA: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "maxItems": 10,
    "items": {
        "type": "object",
        "properties": {
            "tool_name": {"type": "string", "enum": list(TOOL_NAMES)},
            "input": _INPUT_SCHEMA,
        },
        "required": ["tool_name", "input"],
        "additionalProperties": False,
    },
}

#: The same plan wrapped as ``{"plan": [...]}``, for endpoints whose JSON mode needs an object.
PLAN_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"plan": PLAN_SCHEMA},
    "required": ["plan"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class PlanStep:
    """One step of a plan: a tool and the input the planner wrote for it."""

    tool_name: str
    input: Any


def _structure(plan: Any) -> tuple[list[PlanStep], list[str]]:
    """Steps that are well-formed, and a problem line for each that is not."""
    if isinstance(plan, str):
        try:
            plan = json.loads(plan)
        except json.JSONDecodeError as error:
            return [], [f"the plan is not JSON ({error.msg} at position {error.pos})"]
    if isinstance(plan, Mapping) and set(plan) == {"plan"}:
        plan = plan["plan"]
    if not isinstance(plan, list):
        return [], [f"a plan must be a JSON list of steps, got {type(plan).__name__}"]
    if not plan:
        return [], ["the plan has no steps"]
    steps, problems = [], []
    for number, step in enumerate(plan, 1):
        if isinstance(step, PlanStep):
            step = {"tool_name": step.tool_name, "input": step.input}
        if not isinstance(step, Mapping) or "tool_name" not in step or "input" not in step:
            problems.append(
                f"step {number} must be an object with tool_name and input, got {step!r}"
            )
            continue
        extra = set(step) - {"tool_name", "input"}
        if extra:
            problems.append(f"step {number} has unknown key(s) {sorted(extra)}")
            continue
        name = step["tool_name"]
        if name not in TOOL_NAMES:
            problems.append(
                f"step {number}: unknown tool {name!r}; valid tools: {', '.join(TOOL_NAMES)}"
            )
            continue
        steps.append(PlanStep(str(name), step["input"]))
    return steps, problems


def parse_plan(plan: Any) -> list[PlanStep]:
    """Read a plan (JSON text, a list of ``{tool_name, input}``, or ``{"plan": [...]}``).

    Raises:
        PlanError: Not a list, empty, a malformed step or an unknown tool (all listed).
    """
    steps, problems = _structure(plan)
    if problems:
        raise PlanError(problems)
    return steps


def _input_problem(step: PlanStep, table: ItemTable) -> str | None:
    """Why a step's input would fail, checked without running anything."""
    value = step.input
    try:
        if step.tool_name in ("candidate_store", "soft_filter"):
            if isinstance(value, Mapping) or not split_titles(value):
                return "needs at least one title (titles separated by ';;')"
        elif step.tool_name in ("lookup", "hard_filter"):
            if not isinstance(value, str):
                return f"needs one SQL SELECT as a string, got {type(value).__name__}"
            table.check_select(value)
            if step.tool_name == "hard_filter" and not _selects_id(_prepare_select(value).tokens):
                return f"the query must select the id column (SELECT id FROM {TABLE} WHERE ...)"
        elif step.tool_name == "rank":
            parse_rank_input(value)
        elif step.tool_name == "map_titles" and value not in (None, ""):
            if isinstance(value, bool) or int(value) < 1:
                return f"needs a positive number of items, got {value!r}"
    except ToolError as error:
        return str(error)
    except (TypeError, ValueError):
        return f"needs a positive number of items, got {value!r}"
    return None


def validate_plan(plan: Any, table: ItemTable) -> list[str]:
    """List every problem of a plan without executing it (an empty list: the plan is fine).

    Checks the structure (a list of ``{tool_name, input}`` with known tools), each input
    (SQL of lookup and hard_filter is prepared under the read-only authorizer via
    ``EXPLAIN`` but never run; rank's schema; map's count) and the bus rules of the paper's
    prompt: hard filters before the soft filter, candidate_store before any filter or
    ranking, and nothing that uses the candidates after map_titles (which ends the turn and
    clears the bus; so rank comes before map). A tool may appear more than once (the paper
    turns a plan into a dict, which silently keeps one step per tool; we keep the order and
    every step). A missing map_titles is not a problem: the executor adds it.

    Args:
        plan: The plan (see :func:`parse_plan`).
        table: The item table the SQL must run on.

    Returns:
        One line per problem, naming the step.
    """
    steps, problems = _structure(plan)
    if problems and not steps:
        return problems
    for number, step in enumerate(steps, 1):
        problem = _input_problem(step, table)
        if problem:
            problems.append(f"step {number} ({step.tool_name}): {problem}")
    first: dict[str, int] = {}
    for number, step in enumerate(steps, 1):
        name = step.tool_name
        if name == "hard_filter" and "soft_filter" in first:
            problems.append(
                f"step {number} (hard_filter) comes after soft_filter (step "
                f"{first['soft_filter']}): run hard filters before the soft filter"
            )
        if name == "candidate_store":
            earlier = [t for t in ("hard_filter", "soft_filter", "rank") if t in first]
            if earlier:
                problems.append(
                    f"step {number} (candidate_store) comes after {', '.join(earlier)}: it "
                    "replaces the candidates they selected; store titles first"
                )
        if name in _BUS_TOOLS and "map_titles" in first:
            problems.append(
                f"step {number} ({name}) comes after map_titles (step {first['map_titles']}), "
                "which ends the turn; rank and filter before map_titles"
            )
        first.setdefault(name, number)
    return problems


@dataclass
class StepRecord:
    """What one executed step did.

    Attributes:
        tool: Tool name.
        input: The input as the plan wrote it.
        size_before: Candidates before the step.
        size_after: Candidates after the step (before the executor clears the bus).
        observation: Text the tool returned, or ``None`` when it failed.
        error: The :class:`ToolError` message, or ``None``.
        added: Whether the executor added this step (a missing map_titles).
        seconds: Wall time of the step.
    """

    tool: str
    input: Any
    size_before: int
    size_after: int
    observation: str | None = None
    error: str | None = None
    added: bool = False
    seconds: float = 0.0


@dataclass
class ExecutionTrack:
    """The record of one executed plan, for the critic prompt and for a notebook trace.

    Attributes:
        steps: One :class:`StepRecord` per step that ran (or failed).
        recommended_ids: Ids from the last map_titles step (empty if none ran).
        stopped: Whether execution stopped at a failing step.
        map_added: Whether the executor appended map_titles.
    """

    steps: list[StepRecord] = field(default_factory=list)
    recommended_ids: list[str] = field(default_factory=list)
    stopped: bool = False
    map_added: bool = False

    @property
    def failed(self) -> bool:
        """Whether any step raised a :class:`ToolError`."""
        return any(s.error is not None for s in self.steps)

    @property
    def reply(self) -> str:
        """The last map_titles observation, or ``""``."""
        maps = [s.observation for s in self.steps if s.tool == "map_titles" and s.observation]
        return maps[-1] if maps else ""

    def as_text(self) -> str:
        """The track as numbered lines: tool, input, candidates before -> after, observation."""
        lines = [f"Tool execution track ({len(self.steps)} steps):"]
        for number, step in enumerate(self.steps, 1):
            shown = step.input if isinstance(step.input, str) else json.dumps(step.input)
            added = " [added by the executor]" if step.added else ""
            lines.append(f"{number}. {step.tool}({shown}){added}")
            lines.append(f"   candidates: {step.size_before:,} -> {step.size_after:,}")
            if step.error is not None:
                lines.append(f"   ERROR: {step.error}")
            else:
                lines.append("   " + (step.observation or "").replace("\n", "\n   "))
        if self.stopped:
            lines.append("Execution stopped at the failing step; nothing was recommended.")
        return "\n".join(lines)

    def as_frame(self) -> pd.DataFrame:
        """One row per step, for a notebook table."""
        return pd.DataFrame([vars(s) for s in self.steps])


def _run_step(ctx: ToolContext, step: PlanStep) -> tuple[str, list[str] | None]:
    """Run one step; return its observation and, for map_titles, the recommended ids."""
    name, value = step.tool_name, step.input
    if name == "candidate_store":
        return candidate_store(ctx, value), None
    if name == "lookup":
        return lookup(ctx, value), None
    if name == "hard_filter":
        return hard_filter(ctx, value), None
    if name == "soft_filter":
        return soft_filter(ctx, value), None
    if name == "rank":
        return rank(ctx, **parse_rank_input(value)), None
    if name == "map_titles":
        ids, text = map_titles(ctx, value)
        return text, ids
    raise ToolError(f"unknown tool {name!r}; valid tools: {', '.join(TOOL_NAMES)}")


def execute_step(ctx: ToolContext, step: PlanStep, track: ExecutionTrack) -> StepRecord:
    """Run one step on the bus as it is and append its record to ``track``.

    The step-by-step (ReAct) executor: unlike :func:`execute_plan` it neither adds
    map_titles nor resets the bus, and a failing step is recorded, not fatal, so the planner
    can read the error and try again. A map_titles step sets ``track.recommended_ids``.

    Args:
        ctx: The tool context; its bus is used and changed.
        step: The step (a tool :data:`TOOL_NAMES` names and its input).
        track: Receives the :class:`StepRecord`.

    Returns:
        The record (its ``error`` is set when the tool refused the input).
    """
    before = len(ctx.bus)
    started = time.perf_counter()
    record = StepRecord(step.tool_name, step.input, before, before)
    try:
        observation, ids = _run_step(ctx, step)
    except ToolError as error:
        record.error = clip_text(str(error), OBSERVATION_CHARS)
    else:
        record.observation = clip_text(observation, OBSERVATION_CHARS)
        if ids is not None:
            track.recommended_ids = ids
    record.size_after = len(ctx.bus)
    record.seconds = time.perf_counter() - started
    track.steps.append(record)
    return record


def execute_plan(
    plan: Any,
    ctx: ToolContext,
    stop_on_error: bool = True,
    reset_bus: bool = True,
) -> ExecutionTrack:
    """Run a plan's steps in order on the context's bus, as the paper's executor does.

    A map_titles step is appended when the plan has none. Steps keep their order and may
    repeat. A step whose input fails raises no exception: its :class:`ToolError` message is
    recorded; by default execution stops there (as the paper's does, so a failed plan
    recommends nothing), with ``stop_on_error=False`` the remaining steps run. The SQL tools
    turn every failure a query can cause (SQLite errors, MemoryError, ...) into a ToolError;
    other exceptions are bugs and propagate.

    Args:
        plan: The plan (see :func:`parse_plan`).
        ctx: The tool context; its bus is used as it is at the call.
        stop_on_error: Stop at the first failing step.
        reset_bus: Clear the bus when the plan ends (the paper starts every turn with all
            items); ``False`` keeps it, the "persistent bus" option.

    Returns:
        The :class:`ExecutionTrack`.

    Raises:
        PlanError: The plan is malformed or names an unknown tool (nothing ran).
    """
    steps = parse_plan(plan)
    track = ExecutionTrack()
    added = not any(s.tool_name == "map_titles" for s in steps)
    if added:
        steps = [*steps, PlanStep("map_titles", ctx.map_n)]
        track.map_added = True
    try:
        for number, step in enumerate(steps):
            before = len(ctx.bus)
            started = time.perf_counter()
            record = StepRecord(step.tool_name, step.input, before, before)
            record.added = added and number == len(steps) - 1
            try:
                observation, ids = _run_step(ctx, step)
            except ToolError as error:
                record.error = clip_text(str(error), OBSERVATION_CHARS)
            else:
                record.observation = clip_text(observation, OBSERVATION_CHARS)
                if ids is not None:
                    track.recommended_ids = ids
            record.size_after = len(ctx.bus)
            record.seconds = time.perf_counter() - started
            track.steps.append(record)
            if record.error is not None and stop_on_error:
                track.stopped = True
                track.recommended_ids = []
                break
    finally:
        if reset_bus:
            ctx.bus.reset()
    return track


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
