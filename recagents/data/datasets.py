"""Datasets as tidy pandas frames, item text, deterministic splits and candidate sets.

Every experiment in the project starts here, so that all methods (RecBole baselines
and LLM agents alike) see the same interactions, the same split and the same
candidates. Datasets are read from RecBole's atomic format: a folder ``NAME/`` with
``NAME.inter`` (required) and optionally ``NAME.item`` and ``NAME.user``; each file is
tab-separated with a header of ``field:type`` pairs.

Reading is strict: a malformed file stops with one line naming the file and the line
(:func:`read_atomic`), and interaction rows that could leak into or become a test item
are dropped, counted in :attr:`Dataset.report` and summarised in one warning
(:func:`read_dataset`).
"""

from __future__ import annotations

import hashlib
import importlib.resources
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
from recagents.data.atomic import (
    INTER_HEADER,
    DatasetError,
    Parsed,
    parse_atomic,
    read_atomic,
)

#: Datasets that ship inside an installed package and need no path.
EMBEDDED_DATASETS = ("ml-100k",)
#: The papers' released datasets, fetched by :mod:`recagents.data.releases` and read by
#: :mod:`recagents.data.released` (AgentCF's CDs subsets with their split; AFL's LastFM;
#: Agent4Rec's ML-1M agents with their split).
RELEASED_DATASETS = ("cds-dense", "cds-sparse", "lastfm", "agent4rec-ml1m")

#: Item-file fields that hold the title, the year and the genres, first match wins.
TITLE_FIELDS = ("movie_title", "title", "name", "app_name", "artist_name")
YEAR_FIELDS = ("release_year", "year")
GENRE_FIELDS = ("class", "genre", "genres", "categories", "category", "tags")

_ARTICLE = re.compile(r"^(?P<body>.+), (?P<article>The|A|An)(?P<rest> \(.*\))?$")

POSITION = "position"

#: Why :func:`read_dataset` drops an interaction row (the keys of ``LoadReport.dropped``).
EMPTY_USER = "empty user_id"
EMPTY_ITEM = "empty item_id"
MISSING_TIMESTAMP = "missing timestamp"
DUPLICATE = "duplicate (user_id, item_id)"
DROP_REASONS = (EMPTY_USER, EMPTY_ITEM, MISSING_TIMESTAMP, DUPLICATE)


class DatasetWarning(UserWarning):
    """Rows of a dataset file that :func:`read_dataset` dropped, with counts per reason."""


class CandidateCacheWarning(UserWarning):
    """A saved candidate file did not match its recorded SHA-256 and was drawn again."""


@dataclass(frozen=True)
class Dataset:
    """One dataset as tidy frames.

    Attributes:
        name: Short name (``ml-100k`` or the folder name of an atomic dataset).
        path: Folder the files were read from.
        interactions: ``[user_id, item_id, rating?, timestamp?]`` in file order, less the
            rows :func:`read_dataset` dropped.
        items: ``[item_id, title, year, genres, ...]`` or ``None`` without a ``.item`` file;
            ``genres`` holds tuples of strings.
        users: ``[user_id, ...]`` or ``None`` without a ``.user`` file.
        report: What loading the ``.inter`` file dropped, per reason; ``None`` for a
            dataset built by hand.
        domain: The noun for one item in prompts and tables: ``"movie"`` unless the
            dataset says otherwise (``"CD"`` for AgentCF's CDs subsets, ``"artist"`` for
            LastFM, see :mod:`recagents.data.released`).
    """

    name: str
    path: Path
    interactions: pd.DataFrame
    items: pd.DataFrame | None
    users: pd.DataFrame | None
    report: LoadReport | None = None
    domain: str = "movie"

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
    """Return a 12-hex-digit hash of a frame's values and column names."""
    digest = hashlib.sha1(",".join(map(str, frame.columns)).encode())
    digest.update(pd.util.hash_pandas_object(frame, index=False).values.tobytes())
    return digest.hexdigest()[:12]


def embedded_dataset_dir(name: str) -> Path:
    """Folder of a dataset shipped inside an installed wheel (``ml-100k`` from ``recbole``)."""
    if name != "ml-100k":
        raise DatasetError(f"unknown embedded dataset {name!r}; known: {EMBEDDED_DATASETS}")
    return Path(str(importlib.resources.files("recbole") / "dataset_example" / "ml-100k"))


def resolve_dataset(name_or_path: str | Path) -> tuple[str, Path]:
    """Turn ``ml-100k`` or a path into ``(name, folder)``, failing with one clear line.

    A path may be the dataset folder ``.../NAME`` (holding ``NAME.inter``) or the
    ``NAME.inter`` file itself.
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
            f"unknown dataset {text!r}: use one of "
            f"{', '.join(EMBEDDED_DATASETS + RELEASED_DATASETS)} "
            "or the path of a RecBole atomic dataset folder"
        )
    raise DatasetError(f"dataset path not found: {path}")


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
    """What :func:`read_dataset` dropped from the interaction file, and why.

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


def _clean_interactions(parsed: Parsed, path: Path) -> tuple[pd.DataFrame, LoadReport]:
    """Apply :func:`read_dataset`'s row rules: reject impossible values, drop and count."""
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
    parsed: Parsed, path: Path, column: str, bad: np.ndarray, rule: str, advice: str
) -> None:
    """Fail on the first row flagged ``bad``, with its line, raw value and the bad count."""
    if not bad.any():
        return
    row = int(np.flatnonzero(bad)[0])
    raise DatasetError(
        f"{path}: line {parsed.lines.numbers[row]}: {column} {parsed.raw_field(row, column)!r} "
        f"{rule} ({int(bad.sum()):,} such row(s) in the file; {advice})"
    )


def read_dataset(name_or_path: str | Path = "ml-100k") -> Dataset:
    """Read a dataset in RecBole's atomic format: ``ml-100k`` (in the ``recbole`` wheel) or a path.

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

    :func:`recagents.data.load_dataset` also knows the papers' released datasets.

    Args:
        name_or_path: ``"ml-100k"``, or the folder (or ``.inter`` file) of any RecBole
            atomic dataset.

    Returns:
        The :class:`Dataset`; interactions keep file order, which breaks timestamp ties.

    Raises:
        DatasetError: Unknown name, missing or malformed file, or impossible value, in one
            line naming the file (and the line, for a malformed row).
    """
    name, folder = resolve_dataset(name_or_path)
    path = folder / f"{name}.inter"
    interactions, report = _clean_interactions(parse_atomic(path, (USER, ITEM)), path)
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
    """A train / valid / test split of interactions (each a frame like the input)."""

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
    """
    frame = interactions.reset_index(drop=True)
    keys = [USER, TIMESTAMP] if TIMESTAMP in frame else [USER]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


def leave_one_out(
    dataset: Dataset | pd.DataFrame,
    min_rating: float | None = None,
) -> Split:
    """Chronological leave-one-out: per user, last item = test, second-to-last = valid.

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
    and the seed, so a changed split can never pick up stale candidates. A SHA-256 of the
    file is written beside it (``.csv.sha256``) and checked on every reuse: a saved file
    that was edited or damaged since is drawn again, with a :class:`CandidateCacheWarning`
    naming it, so that it can never silently change what every method is scored on.
    """
    folder = Path(cache_dir or settings().cache_dir) / "candidates"
    stem = f"{split.fingerprint}-{phase}-1+{n_negatives}-{distribution}-seed{seed}"
    path = folder / f"{stem}.csv"
    digest_path = path.with_name(f"{path.name}.sha256")
    if path.is_file():
        saved = path.read_bytes()
        recorded = digest_path.read_text().strip() if digest_path.is_file() else None
        if recorded == hashlib.sha256(saved).hexdigest():
            return pd.read_csv(path, dtype={USER: str, ITEM: str}, keep_default_na=False)
        if recorded is not None:  # files saved before checksums existed are re-drawn quietly
            warnings.warn(
                f"{path} differs from the candidates saved there (SHA-256 mismatch with "
                f"{digest_path.name}); drawing them again from the split",
                CandidateCacheWarning,
                stacklevel=2,
            )
    frame = sample_candidates(split, n_negatives, seed, phase, distribution)
    folder.mkdir(parents=True, exist_ok=True)
    text = frame.to_csv(index=False).encode()
    for target, payload in ((path, text), (digest_path, hashlib.sha256(text).hexdigest().encode())):
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")  # per process: make -j2
        tmp.write_bytes(payload)
        tmp.replace(target)
    return frame


def subsample_users(split: Split, n_users: int | None, seed: int = 0) -> list[str]:
    """A seeded, sorted sample of ``n_users`` test users (all of them for ``None``)."""
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
        domain=dataset.domain,
    )


def describe(dataset: Dataset) -> pd.Series:
    """Headline statistics of a dataset: sizes, density, activity and popularity spread."""
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
