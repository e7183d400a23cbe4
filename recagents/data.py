"""Datasets as tidy pandas frames, item text, deterministic splits and candidate sets.

Every experiment in the project starts here, so that all methods (RecBole baselines
and LLM agents alike) see the same interactions, the same split and the same
candidates. Datasets are read from RecBole's atomic format: a folder ``NAME/`` with
``NAME.inter`` (required) and optionally ``NAME.item`` and ``NAME.user``; each file is
tab-separated with a header of ``field:type`` pairs.

Reading is strict: a malformed file stops with one line naming the file and the line
(:func:`read_atomic`), and interaction rows that could leak into or become a test item
are dropped, counted in :attr:`Dataset.report` and summarised in one warning
(:func:`load_dataset`).
"""

from __future__ import annotations

import codecs
import csv
import hashlib
import importlib.resources
import io
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from recagents.columns import GENRES, ITEM, LABEL, RATING, TIMESTAMP, TITLE, USER, YEAR
from recagents.config import settings

#: Datasets that ship inside an installed package and need no path.
EMBEDDED_DATASETS = ("ml-100k",)

#: Item-file fields that hold the title, the year and the genres, first match wins.
TITLE_FIELDS = ("movie_title", "title", "name", "app_name", "artist_name")
YEAR_FIELDS = ("release_year", "year")
GENRE_FIELDS = ("class", "genre", "genres", "categories", "category", "tags")

_ARTICLE = re.compile(r"^(?P<body>.+), (?P<article>The|A|An)(?P<rest> \(.*\))?$")

POSITION = "position"

#: RecBole's field types: ``float`` fields become floats, the others stay strings.
FIELD_TYPES = ("token", "token_seq", "float", "float_seq")

#: The header an interaction file needs, for error messages.
INTER_HEADER = "user_id:token, item_id:token [, rating:float, timestamp:float]"

#: Why :func:`load_dataset` drops an interaction row (the keys of ``LoadReport.dropped``).
EMPTY_USER = "empty user_id"
EMPTY_ITEM = "empty item_id"
MISSING_TIMESTAMP = "missing timestamp"
DUPLICATE = "duplicate (user_id, item_id)"
DROP_REASONS = (EMPTY_USER, EMPTY_ITEM, MISSING_TIMESTAMP, DUPLICATE)

_FLOAT_NA = ["", "nan", "NaN", "NAN"]  # the spellings of a missing float (NaN)
_TRAILING = "\0trailing"  # the empty column of a trailing tab on every data line


class DatasetError(ValueError):
    """A dataset name, path or file that cannot be used, with a message saying why.

    Taught in: not shown in a notebook (used by recagents.compare.adapters.agentcf_subset
        and 14 more).
    """


class DatasetWarning(UserWarning):
    """Rows of a dataset file that :func:`load_dataset` dropped, with counts per reason.

    Taught in: not shown in a notebook (used by recagents.data.load_dataset).
    """


@dataclass(frozen=True)
class Dataset:
    """One dataset as tidy frames.

    Taught in: not shown in a notebook (used by recagents.data.load_dataset and
        recagents.data.sample_users).

    Attributes:
        name: Short name (``ml-100k`` or the folder name of an atomic dataset).
        path: Folder the files were read from.
        interactions: ``[user_id, item_id, rating?, timestamp?]`` in file order, less the
            rows :func:`load_dataset` dropped.
        items: ``[item_id, title, year, genres, ...]`` or ``None`` without a ``.item`` file;
            ``genres`` holds tuples of strings.
        users: ``[user_id, ...]`` or ``None`` without a ``.user`` file.
        report: What loading the ``.inter`` file dropped, per reason; ``None`` for a
            dataset built by hand.
    """

    name: str
    path: Path
    interactions: pd.DataFrame
    items: pd.DataFrame | None
    users: pd.DataFrame | None
    report: LoadReport | None = None

    @property
    def fingerprint(self) -> str:
        """A short content hash of the interactions, used to key saved artefacts."""
        return frame_fingerprint(self.interactions)

    @property
    def n_users(self) -> int:
        """Number of distinct users with at least one interaction."""
        return int(self.interactions[USER].nunique())

    @property
    def n_items(self) -> int:
        """Number of distinct items with at least one interaction."""
        return int(self.interactions[ITEM].nunique())

    def __repr__(self) -> str:
        return (
            f"Dataset({self.name!r}: {len(self.interactions):,} interactions, "
            f"{self.n_users:,} users, {self.n_items:,} items)"
        )


def frame_fingerprint(frame: pd.DataFrame) -> str:
    """Return a 12-hex-digit hash of a frame's values and column names.

    Taught in: not shown in a notebook (used by recagents.data.Dataset.fingerprint and
        recagents.data.Split.fingerprint).
    """
    digest = hashlib.sha1(",".join(map(str, frame.columns)).encode())
    digest.update(pd.util.hash_pandas_object(frame, index=False).values.tobytes())
    return digest.hexdigest()[:12]


def embedded_dataset_dir(name: str) -> Path:
    """Folder of a dataset shipped inside an installed wheel (``ml-100k`` from ``recbole``).

    Taught in: not shown in a notebook (used by recagents.data.resolve_dataset).
    """
    if name != "ml-100k":
        raise DatasetError(f"unknown embedded dataset {name!r}; known: {EMBEDDED_DATASETS}")
    return Path(str(importlib.resources.files("recbole") / "dataset_example" / "ml-100k"))


def resolve_dataset(name_or_path: str | Path) -> tuple[str, Path]:
    """Turn ``ml-100k`` or a path into ``(name, folder)``, failing with one clear line.

    A path may be the dataset folder ``.../NAME`` (holding ``NAME.inter``) or the
    ``NAME.inter`` file itself.

    Taught in: not shown in a notebook (used by recagents.data.load_dataset).
    """
    text = str(name_or_path)
    if text in EMBEDDED_DATASETS:
        return text, embedded_dataset_dir(text)
    path = Path(text).expanduser()
    if path.exists():
        path = path.resolve()
    if path.suffix == ".inter":
        if not path.is_file():
            raise DatasetError(f"interaction file not found: {path}")
        return path.stem, path.parent
    if path.is_dir():
        inter = path / f"{path.name}.inter"
        if not inter.is_file():
            found = sorted(p.name for p in path.glob("*.inter"))
            hint = f" (found {', '.join(found)})" if found else ""
            raise DatasetError(
                f"no {path.name}.inter in {path}{hint}: a RecBole atomic dataset folder NAME/ "
                f"must hold NAME.inter with columns {INTER_HEADER}"
            )
        return path.name, path
    if path.exists():
        raise DatasetError(f"{path} is neither a dataset folder nor a .inter file")
    if "/" not in text and "\\" not in text:
        raise DatasetError(
            f"unknown dataset {text!r}: use one of {', '.join(EMBEDDED_DATASETS)} "
            "or the path of a RecBole atomic dataset folder"
        )
    raise DatasetError(f"dataset path not found: {path}")


def read_atomic(path: Path, required: tuple[str, ...] = ()) -> pd.DataFrame:
    """Read one RecBole atomic file into a frame with plain column names.

    ``token`` and ``token_seq`` fields stay strings, ``float`` fields become floats (an
    empty field or ``nan`` is NaN), ``float_seq`` fields stay strings. Reading is strict,
    so that a malformed file stops with one line naming the file and the line instead of
    shifting columns in silence:

    * The file must be UTF-8 (a leading byte-order mark is ignored); a bad byte is an error
      naming its line and byte offset.
    * The first line is the header of tab-separated ``name:type`` fields, ``type`` one of
      :data:`FIELD_TYPES`; an empty file is an error saying which header is expected.
    * Every data line must have as many fields as the header. The one tolerated exception
      is a trailing tab on *every* data line (an empty extra last field everywhere), which
      is ignored, as is a trailing tab at the end of the header. Otherwise the first line
      whose field count differs is an error. No column is ever used as the index.
    * Fully empty lines are skipped (as RecBole does); CRLF line ends are accepted.

    Taught in: not shown in a notebook (used by recagents.data.load_dataset).

    Raises:
        DatasetError: One of the above, a value that does not parse in a ``float`` field, or
            a missing required column, in one line naming the file.
    """
    return _parse_atomic(path, required).frame


@dataclass(frozen=True)
class _Lines:
    """The data lines of an atomic file, each ending in a newline, with their line numbers."""

    body: bytes
    ends: np.ndarray  # offset of each line's newline in ``body``
    numbers: np.ndarray  # 1-based line number of each line in the file

    @classmethod
    def of(cls, body: bytes, numbers: np.ndarray | None = None) -> _Lines:
        """Index ``body`` (which ends in a newline); lines are numbered from 2 by default."""
        ends = np.flatnonzero(np.frombuffer(body, np.uint8) == ord("\n"))
        return cls(body, ends, np.arange(2, len(ends) + 2) if numbers is None else numbers)

    def raw(self, row: int) -> bytes:
        """The bytes of line ``row`` (0-based among the data lines), without the newline."""
        start = int(self.ends[row - 1]) + 1 if row else 0
        return self.body[start : int(self.ends[row])]


@dataclass(frozen=True)
class _Parsed:
    """An atomic file as a frame, with the data lines its rows came from."""

    frame: pd.DataFrame
    lines: _Lines

    def raw_field(self, row: int, column: str) -> str:
        """The text of ``column`` in row ``row`` as written in the file, for messages."""
        return self.lines.raw(row).split(b"\t")[self.frame.columns.get_loc(column)].decode()


def _parse_atomic(path: Path, required: tuple[str, ...] = ()) -> _Parsed:
    """Read an atomic file by the rules of :func:`read_atomic`, keeping line numbers."""
    try:
        data = path.read_bytes()
    except FileNotFoundError as error:
        raise DatasetError(f"file not found: {path}") from error
    _check_utf8(path, data)
    data = data.removeprefix(codecs.BOM_UTF8)
    if b"\r\n" in data:
        data = data.replace(b"\r\n", b"\n")
    header, _, body = data.partition(b"\n")
    if not header.strip():
        what = "is empty" if not data.strip() else "has an empty first line"
        example = ", ".join(f"{c}:token" for c in required or ("name",)) + " [, ...]"
        raise DatasetError(
            f"{path} {what}; expected a header line of tab-separated name:type fields, e.g. "
            + (INTER_HEADER if path.suffix == ".inter" else example)
        )
    dtypes = _parse_header(path, header, required)
    lines = _Lines.of(body if not body or body.endswith(b"\n") else body + b"\n")
    empty = np.diff(lines.ends, prepend=-1) == 1
    if empty.any():  # skipped, keeping the numbers of the other lines
        kept = b"".join(line + b"\n" for line in lines.body.split(b"\n") if line)
        lines = _Lines.of(kept, lines.numbers[~empty])
    names = list(dtypes)
    columns = [*names, _TRAILING] if _trailing_tabs(path, lines, names) else names
    if not len(lines.ends):
        empty_frame = {c: pd.Series(dtype=k if k is float else object) for c, k in dtypes.items()}
        return _Parsed(pd.DataFrame(empty_frame), lines)
    try:
        frame = pd.read_csv(
            io.BytesIO(lines.body),
            sep="\t",
            header=None,
            names=columns,
            index_col=False,
            dtype={column: dtypes.get(column, str) for column in columns},
            quoting=csv.QUOTE_NONE,
            # A stray carriage return must stay in its field, as counted above.
            lineterminator="\n" if b"\r" in lines.body else None,
            skip_blank_lines=False,
            keep_default_na=False,
            na_values={name: _FLOAT_NA for name, kind in dtypes.items() if kind is float},
            encoding="utf-8",
        )
    except ValueError as error:
        raise _float_error(path, lines, dtypes, error) from error
    return _Parsed(frame.drop(columns=_TRAILING) if _TRAILING in frame else frame, lines)


def _check_utf8(path: Path, data: bytes) -> None:
    """Fail with the line and byte offset of the first byte that is not UTF-8."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise DatasetError(
            f"{path}: line {line} (byte offset {error.start}): byte 0x{data[error.start]:02x} "
            "is not valid UTF-8; save the file as UTF-8"
        ) from None


def _parse_header(path: Path, header: bytes, required: tuple[str, ...]) -> dict[str, type]:
    """``{name: float or str}`` from a header line; each field needs a RecBole type."""
    fields = header.decode().split("\t")
    if len(fields) > 1 and not fields[-1]:
        fields.pop()  # a trailing tab at the end of the header
    dtypes: dict[str, type] = {}
    for text in fields:
        name, _, kind = text.partition(":")
        if not kind:
            raise DatasetError(
                f"{path}: header field {text!r} has no type; expected 'name:type' "
                f"({', '.join(FIELD_TYPES)})"
            )
        if kind not in FIELD_TYPES or not name or name in dtypes:
            raise DatasetError(
                f"{path}: header field {text!r} is not a new 'name:type' with a type among "
                f"{', '.join(FIELD_TYPES)}"
            )
        dtypes[name] = float if kind == "float" else str
    missing = [column for column in required if column not in dtypes]
    if missing:
        raise DatasetError(
            f"{path}: missing column(s) {', '.join(missing)}; found {', '.join(dtypes)}; "
            f"expected at least {', '.join(f'{c}:token' for c in required)}"
        )
    return dtypes


def _trailing_tabs(path: Path, lines: _Lines, names: list[str]) -> bool:
    """Check each data line has one field per column; ``True`` if all end in an extra tab."""
    if not len(lines.ends):
        return False
    codes = np.frombuffer(lines.body, np.uint8)
    starts = np.r_[0, lines.ends[:-1] + 1]
    counts = np.add.reduceat(codes == ord("\t"), starts, dtype=np.int64) + 1
    wrong = np.flatnonzero(counts != len(names))
    if not len(wrong):
        return False
    ends_in_tab = codes[lines.ends - 1] == ord("\t")  # lines are never empty here
    if (counts == len(names) + 1).all() and ends_in_tab.all():
        return True
    first = int(wrong[0])
    hint = (
        "; a trailing tab is ignored only when every data line has one"
        if counts[first] == len(names) + 1 and ends_in_tab[first]
        else ""
    )
    raise DatasetError(
        f"{path}: line {lines.numbers[first]} has {counts[first]} tab-separated field(s), "
        f"expected {len(names)} as in the header ({', '.join(names)}){hint}"
    )


def _float_error(
    path: Path, lines: _Lines, dtypes: dict[str, type], error: Exception
) -> DatasetError:
    """The one-line error for a ``float`` field that pandas could not parse."""
    floats = [(j, name) for j, (name, kind) in enumerate(dtypes.items()) if kind is float]
    for number, line in zip(lines.numbers, lines.body.split(b"\n"), strict=False):
        fields = line.split(b"\t")
        for j, name in floats:
            text = fields[j].decode()
            try:
                float(text or "0")
            except ValueError:
                return DatasetError(
                    f"{path}: line {number}: cannot parse {text!r} as a number "
                    f"(column {name}:float)"
                )
    reason = " ".join(str(error).split())
    return DatasetError(f"{path}: cannot parse ({reason})")


def _first_present(columns: pd.Index, candidates: tuple[str, ...]) -> str | None:
    return next((name for name in candidates if name in columns), None)


def _tidy_items(raw: pd.DataFrame) -> pd.DataFrame:
    """Add the standard ``title``, ``year`` and ``genres`` columns to a raw item frame."""
    items = raw.copy()
    title = _first_present(items.columns, TITLE_FIELDS)
    year = _first_present(items.columns, YEAR_FIELDS)
    genres = _first_present(items.columns, GENRE_FIELDS)
    items[TITLE] = items[title].astype(str) if title else items[ITEM].astype(str)
    items[YEAR] = pd.to_numeric(items[year], errors="coerce").astype("Int64") if year else pd.NA
    if genres:
        items[GENRES] = items[genres].fillna("").map(lambda text: tuple(text.split()))
    else:
        items[GENRES] = [() for _ in range(len(items))]
    rename_away = {c for c in (title, year, genres) if c and c not in (TITLE, YEAR, GENRES)}
    ordered = [ITEM, TITLE, YEAR, GENRES] + [
        c for c in items.columns if c not in {ITEM, TITLE, YEAR, GENRES} | rename_away
    ]
    return items[ordered]


@dataclass(frozen=True)
class LoadReport:
    """What :func:`load_dataset` dropped from the interaction file, and why.

    Taught in: not shown in a notebook (used by recagents.data._clean_interactions).

    Attributes:
        path: The ``.inter`` file.
        rows_read: Data rows in the file.
        dropped: ``{reason: rows}`` for each reason that dropped rows (see
            :data:`DROP_REASONS`); empty when every row was kept.
        lines: ``{reason: (line, ...)}``, the file lines of the first few dropped rows.
    """

    path: Path
    rows_read: int
    dropped: dict[str, int] = field(default_factory=dict)
    lines: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def rows_dropped(self) -> int:
        """Rows dropped for any reason."""
        return sum(self.dropped.values())

    @property
    def rows_kept(self) -> int:
        """Rows left in :attr:`Dataset.interactions`."""
        return self.rows_read - self.rows_dropped

    def summary(self) -> str:
        """One line: the file, the rows dropped per reason and the first lines of each."""
        if not self.dropped:
            return f"{self.path}: kept all {self.rows_read:,} rows"
        parts = []
        for reason, count in self.dropped.items():
            lines = ", ".join(map(str, self.lines.get(reason, ())))
            more = ", ..." if count > len(self.lines.get(reason, ())) else ""
            parts.append(f"{count:,} with {reason} (line{'s' * (count > 1)} {lines}{more})")
        rule = "; of duplicates the earliest is kept" if DUPLICATE in self.dropped else ""
        return (
            f"{self.path}: dropped {self.rows_dropped:,} of {self.rows_read:,} rows: "
            + ", ".join(parts)
            + rule
        )


def _id_codes(ids: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of ``ids`` and the mask of empty or whitespace-only ids among them."""
    codes, distinct = pd.factorize(ids)
    blank = np.fromiter((not value.strip() for value in distinct), bool, len(distinct))
    return codes.astype(np.int64), blank[codes]


def _clean_interactions(parsed: _Parsed, path: Path) -> tuple[pd.DataFrame, LoadReport]:
    """Apply :func:`load_dataset`'s row rules: reject impossible values, drop and count."""
    keep = [c for c in (USER, ITEM, RATING, TIMESTAMP) if c in parsed.frame.columns]
    frame = parsed.frame[keep].reset_index(drop=True)
    if RATING in frame:
        values = frame[RATING].to_numpy()
        advice = "ratings are explicit feedback: fix or remove them, or drop the column"
        bad = ~np.isfinite(values) | (values < 0)
        _reject(parsed, path, RATING, bad, "is not a finite number >= 0", advice)
    if TIMESTAMP in frame:
        infinite = np.isinf(frame[TIMESTAMP].to_numpy())
        _reject(parsed, path, TIMESTAMP, infinite, "is infinite", "fix or remove them")
    users, no_user = _id_codes(frame[USER])
    items, no_item = _id_codes(frame[ITEM])
    checks = [(EMPTY_USER, no_user), (EMPTY_ITEM, no_item)]
    if TIMESTAMP in frame:
        checks.append((MISSING_TIMESTAMP, frame[TIMESTAMP].isna().to_numpy()))
    gone = np.zeros(len(frame), bool)
    dropped: dict[str, np.ndarray] = {}
    for reason, mask in checks:
        mask = mask & ~gone
        if mask.any():
            dropped[reason], gone = np.flatnonzero(mask), gone | mask
    pairs = pd.Series(users * (items.max(initial=0) + 1) + items)
    rest = np.flatnonzero(~gone)
    if pairs.iloc[rest].duplicated().any():
        if TIMESTAMP in frame:  # chronological order; ties keep file order
            rest = rest[np.argsort(frame[TIMESTAMP].to_numpy()[rest], kind="stable")]
        later = rest[pairs.iloc[rest].duplicated().to_numpy()]
        dropped[DUPLICATE] = np.sort(later)
        gone[later] = True
    report = LoadReport(
        path=path,
        rows_read=len(frame),
        dropped={reason: len(rows) for reason, rows in dropped.items()},
        lines={
            reason: tuple(parsed.lines.numbers[rows[:5]].tolist())
            for reason, rows in dropped.items()
        },
    )
    if gone.any():
        frame = frame[~gone].reset_index(drop=True)
    return frame, report


def _reject(
    parsed: _Parsed, path: Path, column: str, bad: np.ndarray, rule: str, advice: str
) -> None:
    """Fail on the first row flagged ``bad``, with its line, raw value and the bad count."""
    if not bad.any():
        return
    row = int(np.flatnonzero(bad)[0])
    raise DatasetError(
        f"{path}: line {parsed.lines.numbers[row]}: {column} {parsed.raw_field(row, column)!r} "
        f"{rule} ({int(bad.sum()):,} such row(s) in the file; {advice})"
    )


def load_dataset(name_or_path: str | Path = "ml-100k") -> Dataset:
    """Load a dataset by name (``ml-100k``, shipped in the ``recbole`` wheel) or by path.

    Files are read by the strict rules of :func:`read_atomic`. Rows of the interaction
    file then follow these rules, so that no row can leak into or become a test item:

    * An impossible rating (empty, NaN, infinite or negative) rejects the file: ratings
      are explicit feedback, so such a column is a bad file, not a few bad rows. An
      infinite timestamp rejects the file too.
    * Rows with an empty (or whitespace-only) user or item id, or an empty (NaN)
      timestamp, are dropped: they cannot be placed in anyone's history.
    * Duplicates of a (user, item) pair keep only the first in chronological order (the
      earliest timestamp, ties and files without timestamps by file order), as RecBole's
      ``rm_dup_inter: first``: an item enters a history once, when first met, so the
      test item can never sit in the history too.

    Dropped rows are counted in :attr:`Dataset.report` and summarised in one
    :class:`DatasetWarning`.

    Taught in: notebook 00, section 1 "The data"; notebook 01, section 1 "The data";
        notebook 02, section 1 "The data, the traits and the agents";
        notebook 03, section 1 "The data and the candidates";
        notebook 04, section 1 "The item table and the split";
        notebook 05, section 1 "The agent items";
        notebook 06, section 1 "One protocol for every method".

    Args:
        name_or_path: ``"ml-100k"`` or the folder (or ``.inter`` file) of any RecBole
            atomic dataset, e.g. one of the papers' released subsets.

    Returns:
        The :class:`Dataset`; interactions keep file order, which breaks timestamp ties.

    Raises:
        DatasetError: Unknown name, missing or malformed file, or impossible value, in one
            line naming the file (and the line, for a malformed row).
    """
    name, folder = resolve_dataset(name_or_path)
    path = folder / f"{name}.inter"
    interactions, report = _clean_interactions(_parse_atomic(path, (USER, ITEM)), path)
    if interactions.empty:
        after = f" ({report.summary()})" if report.dropped else ""
        raise DatasetError(f"{path} holds no interactions{after}")
    if report.dropped:
        warnings.warn(report.summary(), DatasetWarning, stacklevel=2)
    item_file, user_file = folder / f"{name}.item", folder / f"{name}.user"
    items = _tidy_items(read_atomic(item_file, (ITEM,))) if item_file.is_file() else None
    users = read_atomic(user_file, (USER,)) if user_file.is_file() else None
    return Dataset(
        name=name, path=folder, interactions=interactions, items=items, users=users, report=report
    )


def readable_title(title: str, move_article: bool = True) -> str:
    """Undo the library-catalogue form: ``"Usual Suspects, The"`` -> ``"The Usual Suspects"``.

    MovieLens titles put a trailing ``, The`` / ``, A`` / ``, An`` last (also before a
    parenthesised alternative title); the papers' loaders move it to the front.

    Taught in: not shown in a notebook (used by recagents.data.item_text and 4 more).
    """
    if not move_article:
        return title
    match = _ARTICLE.match(title)
    if not match:
        return title
    return f"{match['article']} {match['body']}{match['rest'] or ''}"


def item_text(
    items: pd.DataFrame,
    with_year: bool = True,
    with_genres: bool = True,
    move_article: bool = True,
) -> pd.Series:
    """One readable line per item, indexed by ``item_id``, for prompts and tables.

    Example: ``"The Usual Suspects (1995) - Crime, Thriller"``. Titles are not unique in
    ml-100k (45 items share a title), so code must refer to items by id, never by text.

    Taught in: notebook 00, section 1 "The data";
        notebook 03, section 1 "The data and the candidates".
    """
    titles = items[TITLE].map(lambda t: readable_title(t, move_article))
    if with_year and YEAR in items:
        years = items[YEAR].map(lambda y: "" if pd.isna(y) else f" ({int(y)})")
        titles = titles + years
    if with_genres and GENRES in items:
        genres = items[GENRES].map(lambda g: f" - {', '.join(g)}" if len(g) else "")
        titles = titles + genres
    return pd.Series(titles.to_numpy(), index=items[ITEM].to_numpy(), name="text")


@dataclass(frozen=True)
class Split:
    """A train / valid / test split of interactions (each a frame like the input).

    Taught in: notebook 02, section 1 "The data, the traits and the agents".
    """

    train: pd.DataFrame
    valid: pd.DataFrame
    test: pd.DataFrame
    name: str

    @property
    def fingerprint(self) -> str:
        """A content hash of all three parts, used to key candidates and trained models."""
        parts = [frame_fingerprint(p[[USER, ITEM]]) for p in (self.train, self.valid, self.test)]
        return hashlib.sha1(("|".join(parts) + self.name).encode()).hexdigest()[:12]

    def history(self, phase: Literal["valid", "test"] = "test") -> pd.DataFrame:
        """Interactions a model may see before ``phase``: train, plus valid for test."""
        if phase == "valid":
            return self.train
        return pd.concat([self.train, self.valid], ignore_index=True)

    def truth(self, phase: Literal["valid", "test"] = "test") -> pd.DataFrame:
        """The held-out ``[user_id, item_id]`` of ``phase``."""
        return (self.valid if phase == "valid" else self.test)[[USER, ITEM]].reset_index(drop=True)

    def summary(self) -> pd.DataFrame:
        """Rows, users and items per part, for a notebook table."""
        rows = []
        for part in ("train", "valid", "test"):
            frame = getattr(self, part)
            rows.append(
                {
                    "part": part,
                    "interactions": len(frame),
                    "users": frame[USER].nunique(),
                    "items": frame[ITEM].nunique(),
                }
            )
        return pd.DataFrame(rows).set_index("part")


def chronological_order(interactions: pd.DataFrame) -> pd.DataFrame:
    """Sort by user, then timestamp; ties keep file order (a stable sort), as documented.

    415 ml-100k users have their last two ratings at the same second, so the tie-break
    decides their test item; file order is the one every run reproduces.

    Taught in: not shown in a notebook (used by recagents.data.describe and 7 more).
    """
    frame = interactions.reset_index(drop=True)
    keys = [USER, TIMESTAMP] if TIMESTAMP in frame else [USER]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


def leave_one_out(
    dataset: Dataset | pd.DataFrame,
    min_rating: float | None = None,
) -> Split:
    """Chronological leave-one-out: per user, last item = test, second-to-last = valid.

    Taught in: notebook 00, section 2 "The split: chronological leave-one-out";
        notebook 01, section 5 "Ranking 1 + 9 candidates";
        notebook 03, section 1 "The data and the candidates";
        notebook 04, section 1 "The item table and the split";
        notebook 05, section 1 "The agent items".

    Args:
        dataset: A :class:`Dataset` or its interaction frame.
        min_rating: Keep only interactions rated at least this (``None`` keeps all), e.g.
            ``4`` for "liked" items. Applied before splitting.

    Returns:
        The :class:`Split`. Users with fewer than three interactions stay in train only.
    """
    frame = dataset.interactions if isinstance(dataset, Dataset) else dataset
    if min_rating is not None:
        if RATING not in frame:
            raise DatasetError("min_rating needs a rating column in the interactions")
        frame = frame[frame[RATING] >= min_rating]
    ordered = chronological_order(frame)
    from_end = ordered.groupby(USER, sort=False).cumcount(ascending=False)
    counts = ordered.groupby(USER, sort=False)[ITEM].transform("size")
    eligible = counts >= 3
    test = ordered[eligible & (from_end == 0)]
    valid = ordered[eligible & (from_end == 1)]
    train = ordered[~(eligible & (from_end <= 1))]
    name = "loo" if min_rating is None else f"loo-r{min_rating:g}"
    return Split(
        train=train.reset_index(drop=True),
        valid=valid.reset_index(drop=True),
        test=test.reset_index(drop=True),
        name=name,
    )


def sample_candidates(
    split: Split,
    n_negatives: int,
    seed: int = 0,
    phase: Literal["valid", "test"] = "test",
    distribution: Literal["uniform", "popularity"] = "uniform",
    users: list[str] | None = None,
) -> pd.DataFrame:
    """Draw ``1 + n_negatives`` candidates per user: the held-out item and unseen negatives.

    Negatives are drawn without replacement from the items of the whole dataset that the
    user never interacted with (train, valid or test), uniformly or in proportion to
    training popularity. The display order (``position``, 0-based) is a seeded shuffle,
    so the positive is not always first; methods that care about order use it.

    Taught in: not shown in a notebook (used by recagents.data.candidate_sets).

    Returns:
        ``[user_id, item_id, label, position]`` with ``label`` 1 for the held-out item.
    """
    if n_negatives < 1:
        raise ValueError(f"n_negatives must be at least 1, got {n_negatives}")
    truth = split.truth(phase)
    if users is not None:
        truth = truth[truth[USER].isin(set(users))]
    everything = pd.concat([split.train, split.valid, split.test], ignore_index=True)
    catalogue = np.array(sorted(everything[ITEM].unique()))
    if n_negatives >= len(catalogue):
        raise ValueError(f"n_negatives={n_negatives} needs more than {len(catalogue)} items")
    if distribution == "popularity":
        counts = split.train[ITEM].value_counts()
        weights = counts.reindex(catalogue).fillna(0).to_numpy(float) + 1.0
    elif distribution == "uniform":
        weights = np.ones(len(catalogue))
    else:
        raise ValueError(f"distribution must be 'uniform' or 'popularity', got {distribution!r}")
    position_of = {item: i for i, item in enumerate(catalogue)}
    seen = everything.groupby(USER)[ITEM].agg(lambda s: {position_of[i] for i in s})
    rng = np.random.default_rng(seed)
    rows = []
    for user, positive in truth.sort_values(USER, kind="stable").itertuples(index=False):
        mask = np.ones(len(catalogue), bool)
        mask[list(seen[user])] = False
        if mask.sum() < n_negatives:
            raise ValueError(f"user {user} has fewer than {n_negatives} unseen items")
        allowed = np.flatnonzero(mask)
        p = weights[allowed] / weights[allowed].sum()
        negatives = catalogue[rng.choice(allowed, size=n_negatives, replace=False, p=p)]
        items = np.concatenate([[positive], negatives])
        labels = np.r_[1, np.zeros(n_negatives, int)]
        order = rng.permutation(len(items))
        for position, index in enumerate(order):
            rows.append((user, items[index], labels[index], position))
    return pd.DataFrame(rows, columns=[USER, ITEM, LABEL, POSITION])


def candidate_sets(
    split: Split,
    n_negatives: int,
    seed: int = 0,
    phase: Literal["valid", "test"] = "test",
    distribution: Literal["uniform", "popularity"] = "uniform",
    cache_dir: Path | None = None,
) -> pd.DataFrame:
    """Like :func:`sample_candidates`, but saved once and reused by every method.

    The file name carries the split fingerprint, the size, the phase, the distribution
    and the seed, so a changed split can never pick up stale candidates.

    Taught in: notebook 00, section 3 "Candidate protocols";
        notebook 03, section 1 "The data and the candidates".
    """
    folder = Path(cache_dir or settings().cache_dir) / "candidates"
    stem = f"{split.fingerprint}-{phase}-1+{n_negatives}-{distribution}-seed{seed}"
    path = folder / f"{stem}.csv"
    if path.is_file():
        return pd.read_csv(path, dtype={USER: str, ITEM: str}, keep_default_na=False)
    frame = sample_candidates(split, n_negatives, seed, phase, distribution)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # one per process: make -j2 safe
    frame.to_csv(tmp, index=False)
    tmp.replace(path)
    return frame


def subsample_users(split: Split, n_users: int | None, seed: int = 0) -> list[str]:
    """A seeded, sorted sample of ``n_users`` test users (all of them for ``None``).

    Taught in: notebook 03, section 1 "The data and the candidates".
    """
    users = np.array(sorted(split.test[USER].unique()))
    if n_users is None or n_users >= len(users):
        return users.tolist()
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(users, size=n_users, replace=False).tolist())


def sample_users(dataset: Dataset, n_users: int | None, seed: int = 0) -> Dataset:
    """Keep a seeded random sample of ``n_users`` users and all their interactions.

    A smaller dataset for quick runs (the ``smoke`` profile); ``None`` or a number at
    least the user count returns ``dataset`` unchanged. Item and user tables are kept
    whole, as is the load report. The name gains a ``-uN`` suffix so saved artefacts
    never mix the two.

    Taught in: notebook 00, section 1 "The data".
    """
    users = np.array(sorted(dataset.interactions[USER].unique()))
    if n_users is None or n_users >= len(users):
        return dataset
    if n_users < 1:
        raise ValueError(f"n_users must be positive, got {n_users}")
    keep = set(np.random.default_rng(seed).choice(users, size=n_users, replace=False))
    frame = dataset.interactions[dataset.interactions[USER].isin(keep)].reset_index(drop=True)
    return Dataset(
        name=f"{dataset.name}-u{n_users}",
        path=dataset.path,
        interactions=frame,
        items=dataset.items,
        users=dataset.users,
        report=dataset.report,
    )


def describe(dataset: Dataset) -> pd.Series:
    """Headline statistics of a dataset: sizes, density, activity and popularity spread.

    Taught in: notebook 00, section 1 "The data".
    """
    frame = dataset.interactions
    per_user = frame.groupby(USER).size()
    per_item = frame.groupby(ITEM).size()
    top_share = per_item.sort_values(ascending=False)
    head = top_share.iloc[: max(1, int(round(0.2 * len(top_share))))].sum() / len(frame)
    stats = {
        "interactions": len(frame),
        "users": dataset.n_users,
        "items": dataset.n_items,
        "density": len(frame) / (dataset.n_users * dataset.n_items),
        "interactions per user (median)": float(per_user.median()),
        "interactions per user (min)": int(per_user.min()),
        "interactions per item (median)": float(per_item.median()),
        "share of interactions on the top 20% items": float(head),
    }
    if RATING in frame:
        stats["mean rating"] = float(frame[RATING].mean())
    if TIMESTAMP in frame:
        ordered = chronological_order(frame)
        last_two = ordered.groupby(USER)[TIMESTAMP].agg(
            lambda s: len(s) > 1 and s.iloc[-2:].nunique() == 1
        )
        stats["users whose last two interactions tie in time"] = int(last_two.sum())
    return pd.Series(stats, name=dataset.name)
