"""The catalogue as InteRecAgent's item table, and mapping written titles to item ids.

:class:`ItemTable` is the read-only SQLite table ``items`` the SQL tools query (its SQL side
is :class:`~recagents.papers.interecagent.sqlguard.ReadOnlyTable`), built from a dataset with
popularity and ratings from the known interactions only; it describes itself for prompts and
fuzzy-matches titles (:meth:`ItemTable.match_title`), which every tool that takes titles
relies on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
from rapidfuzz import fuzz, process

from recagents.columns import GENRES, ITEM, RATING, TITLE, YEAR
from recagents.data.datasets import Dataset, readable_title
from recagents.papers.interecagent.config import TITLE_SEPARATOR
from recagents.papers.interecagent.sqlguard import ReadOnlyTable
from recagents.papers.interecagent.sqllimits import COLUMNS, TABLE, ToolError


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
    ``avg_rating``. The SQL side is :class:`~recagents.papers.interecagent.sqlguard.ReadOnlyTable`:
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
