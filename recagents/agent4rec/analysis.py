"""Agent4Rec analyses computed from simulation logs, without an LLM.

Zhang et al., *On Generative Agents in Recommendation*, SIGIR 2024. Everything here reads
tidy frames, either produced by :func:`recagents.agent4rec.simulate.simulate` or converted
from the authors' released 1,000-agent run by :func:`load_official_run`:

* ``exposures``: one row per item shown: ``user_id`` (str), ``recommender`` (str), ``page``
  (1-based), ``position`` (0-based within the page), ``item_id`` (str), ``aligned``
  (nullable boolean), ``watched`` (bool), ``rating`` (1-5, NaN when not watched) and
  ``feeling`` (str, ``""`` when none).
* ``sessions``: one row per agent session: ``user_id``, ``recommender``, ``exit_page`` (last
  page seen), ``exited`` (the agent chose to leave) and ``satisfaction`` (1-10, NaN when the
  interview failed).
* ``traits``: ``user_id``, the levels ``activity``, ``conformity``, ``diversity`` (1..3) and
  the raw statistics ``n_ratings``, ``conformity_mse``, ``n_top_genres``.

The analyses are the paper's: social traits (:func:`compute_traits`), engagement per
recommender (:func:`engagement`), agent vs real rating histograms
(:func:`rating_distribution`), behaviour by trait level with ANOVA (:func:`trait_anova`),
the filter bubble (:func:`genre_concentration`) and causal discovery with DirectLiNGAM
(:func:`causal_discovery`). Importing this module loads no data and starts nothing.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from recagents import safepickle
from recagents.columns import GENRES, ITEM, RATING, TITLE, USER
from recagents.metrics import bootstrap_ci

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from recagents.data import Dataset

__all__ = [
    "CAUSAL_COLUMNS",
    "OFFICIAL_ENV",
    "TRAITS",
    "TRAIT_CUTS",
    "TRAIT_MEASURES",
    "TRAIT_SENTENCES",
    "OfficialRun",
    "UnsafePickleError",
    "bubble_figure",
    "causal_discovery",
    "causal_figure",
    "compute_traits",
    "engagement",
    "engagement_summary",
    "genre_concentration",
    "item_causal_table",
    "load_official_pickle",
    "load_official_run",
    "official_run_dir",
    "parse_satisfaction",
    "rating_distribution",
    "rating_figure",
    "satisfaction_by",
    "trait_anova",
    "trait_behaviour",
    "trait_figure",
]

RECOMMENDER = "recommender"
TRAITS: tuple[str, ...] = ("activity", "conformity", "diversity")
"""The three social traits, in the order the paper lists them."""

TRAIT_CUTS: dict[str, tuple[float, float]] = {
    "activity": (60.0, 90.0),
    "conformity": (25.0, 80.0),
    "diversity": (33.0, 66.0),
}
"""Percentiles (over all users of the dataset) that cut each trait statistic into 3 levels."""

TRAIT_SENTENCES: dict[str, dict[int, str]] = {
    "activity": {
        1: (
            "You seldom watch anything, and one disappointing page is enough "
            "to make you close the site."
        ),
        2: (
            "You watch now and then; you give the site a few pages but leave "
            "when little catches your eye."
        ),
        3: (
            "You are an avid viewer who watches a lot and keeps browsing "
            "long after most people would have stopped."
        ),
    },
    "conformity": {
        1: (
            "Your ratings stay close to what the public thinks: a title's average "
            "score weighs heavily on the score you give."
        ),
        2: (
            "You look at a title's average score, but your own impression can push "
            "your rating somewhat above or below it."
        ),
        3: (
            "You rate purely by your own experience and do not care how other "
            "people scored a title."
        ),
    },
    "diversity": {
        1: "You keep to a handful of favourite genres and rarely try anything else.",
        2: "You have some favourite genres but will try others from time to time.",
        3: "Your viewing ranges widely across genres; you enjoy trying something different.",
    },
}
"""Trait -> level -> one behaviour sentence for the agent's role prompt (our own wording)."""

TRAIT_MEASURES: tuple[tuple[str, str], ...] = (
    ("activity", "exit_page"),
    ("activity", "n_watched"),
    ("conformity", "rating_mse"),
    ("diversity", "n_genres_watched"),
)
"""(trait, behaviour column) pairs the paper relates by one-way ANOVA."""

CAUSAL_COLUMNS: tuple[str, ...] = ("quality", "popularity", "exposure", "views", "rating")
"""Per-item variables of the causal analysis, in the paper's causal order."""

OFFICIAL_ENV = "RECAGENTS_AGENT4REC_OFFICIAL"
"""Environment variable naming the folder of the official recorded run."""

OFFICIAL_RECOMMENDER = "LightGCN"
OFFICIAL_MAX_PAGES = 5

EXPOSURE_COLUMNS = (
    USER,
    RECOMMENDER,
    "page",
    "position",
    ITEM,
    "aligned",
    "watched",
    RATING,
    "feeling",
)
SESSION_COLUMNS = (USER, RECOMMENDER, "exit_page", "exited", "satisfaction")
ENGAGEMENT_METRICS = ("p_view", "n_like", "p_like", "exit_page", "satisfaction")
SUMMARY_COLUMNS = ["recommender", "metric", "mean", "low", "high", "n"]


# --------------------------------------------------------------------------- validation


def _require(frame: pd.DataFrame, columns: Iterable[str], name: str) -> None:
    """Raise a ValueError naming the missing columns of ``frame``."""
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} is missing column(s) {missing}; it has {list(frame.columns)}")


def _as_series(values: pd.Series | dict, name: str) -> pd.Series:
    """An item-keyed lookup Series with string index."""
    if isinstance(values, dict):
        values = pd.Series(values, dtype=object)
    if not isinstance(values, pd.Series):
        raise ValueError(f"{name} must be a pandas Series indexed by item_id")
    out = values.copy()
    out.index = out.index.astype(str)
    if out.index.has_duplicates:
        raise ValueError(f"{name} has duplicate item ids in its index")
    return out


def _check_unknown(ids: Iterable[str], lookup: pd.Series, name: str) -> None:
    missing = sorted(set(ids) - set(lookup.index))
    if missing:
        raise ValueError(f"{len(missing)} item(s) missing from {name}, e.g. {missing[:5]}")


def _check_boot(n_boot: int) -> None:
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot!r}")


def _bool_column(series: pd.Series, name: str) -> pd.Series:
    """Booleans from a bool/0-1/nullable column; missing values count as False."""
    try:
        values = series.astype("boolean")
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must hold booleans: {error}") from error
    return values.fillna(False).astype(bool)


# --------------------------------------------------------------------------- traits


def _levels(values: pd.Series, cuts: tuple[float, float], ties: str) -> pd.Series:
    """1 + (value past the low cut) + (value past the high cut)."""
    low, high = np.percentile(values.to_numpy(dtype=float), list(cuts))
    if ties == "lower":
        level = 1 + (values > low).astype(int) + (values > high).astype(int)
    else:
        level = 1 + (values >= low).astype(int) + (values >= high).astype(int)
    return level.astype(int)


def _n_top_genres(genre_counts: pd.DataFrame, share: float) -> pd.Series:
    """Per user: genres (ranked by count) whose cumulative share stays <= ``share``, >= 1."""
    ranked = genre_counts.sort_values([USER, "count"], ascending=[True, False], kind="stable")
    cumulative = ranked.groupby(USER, sort=False)["count"].cumsum()
    total = ranked.groupby(USER, sort=False)["count"].transform("sum")
    # Exact rational comparison cum/total <= share: 4 of 5 labels is exactly 80%.
    frac = Fraction(share).limit_denominator(10_000)
    inside = cumulative * frac.denominator <= total * frac.numerator
    counts = inside.groupby(ranked[USER], sort=False).sum()
    return counts.clip(lower=1).astype(int)


def compute_traits(
    dataset: Dataset,
    top_share: float = 0.8,
    ties: Literal["lower", "upper"] = "lower",
) -> pd.DataFrame:
    """The paper's three social traits of every user, cut into levels 1-3.

    Computed over *all* users of the dataset (the paper cuts over all 6,040 ML-1M users,
    not only the simulated ones):

    * activity: ``n_ratings``, the number of ratings; cut at P60 and P90.
    * conformity: ``conformity_mse``, the mean over the user's ratings of
      ``(rating - item's mean rating)^2`` (item means over all users); cut at P25 and P80,
      so level 1 is a small deviation (a follower of the crowd).
    * diversity: ``n_top_genres``; the genres of the user's rated items (each rating adds
      each of its item's genres once) ranked by share, counting the top genres whose
      cumulative share stays <= ``top_share`` (at least 1); cut at P33 and P66.

    ``level = 1 + (value > low cut) + (value > high cut)`` with numpy's linear percentiles.
    With ``ties="upper"`` a value equal to a cut moves up (``>=``), which is the official
    code's ``x < cut`` rule; the two differ only on ties, which integer statistics have.
    The official code also drops users whose top genre alone exceeds ``top_share``; here
    they get ``n_top_genres = 1``.

    Args:
        dataset: Interactions with ratings and items with genres.
        top_share: Cumulative genre share of the diversity statistic.
        ties: ``"lower"`` (the formula above) or ``"upper"`` (official tie rule).

    Returns:
        ``user_id, activity, conformity, diversity, n_ratings, conformity_mse,
        n_top_genres``, one row per user, sorted by ``user_id``.

    Raises:
        ValueError: Without ratings, items or genres, or on bad parameters.
    """
    if not 0.0 < top_share <= 1.0:
        raise ValueError(f"top_share must lie in (0, 1], got {top_share!r}")
    if ties not in ("lower", "upper"):
        raise ValueError(f"ties must be 'lower' or 'upper', got {ties!r}")
    frame = dataset.interactions
    _require(frame, [USER, ITEM, RATING], "dataset.interactions")
    if dataset.items is None:
        raise ValueError("compute_traits needs the item table (genres) of the dataset")
    _require(dataset.items, [ITEM, GENRES], "dataset.items")
    frame = frame[[USER, ITEM, RATING]].dropna()
    if frame.empty:
        raise ValueError("dataset has no rated interactions")

    n_ratings = frame.groupby(USER).size()
    item_mean = frame.groupby(ITEM)[RATING].transform("mean")
    mse = ((frame[RATING] - item_mean) ** 2).groupby(frame[USER]).mean()

    genres = dataset.items[[ITEM, GENRES]].explode(GENRES).dropna()
    genres = genres[genres[GENRES].astype(str) != ""]
    per_rating = frame[[USER, ITEM]].merge(genres, on=ITEM, how="inner")
    counts = per_rating.groupby([USER, GENRES]).size().rename("count").reset_index()
    n_top = _n_top_genres(counts, top_share).reindex(n_ratings.index)
    if n_top.isna().any():
        missing = n_top.index[n_top.isna()].tolist()
        raise ValueError(
            f"{len(missing)} user(s) rated only items without genres, e.g. {missing[:5]}"
        )

    out = pd.DataFrame(
        {
            USER: n_ratings.index.astype(str),
            "n_ratings": n_ratings.to_numpy(dtype=int),
            "conformity_mse": mse.reindex(n_ratings.index).to_numpy(dtype=float),
            "n_top_genres": n_top.to_numpy(dtype=int),
        }
    )
    for trait, column in (
        ("activity", "n_ratings"),
        ("conformity", "conformity_mse"),
        ("diversity", "n_top_genres"),
    ):
        out[trait] = _levels(out[column], TRAIT_CUTS[trait], ties).to_numpy()
    ordered = [USER, *TRAITS, "n_ratings", "conformity_mse", "n_top_genres"]
    return out[ordered].sort_values(USER, kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- official run


UnsafePickleError = safepickle.UnsafePickleError


def load_official_pickle(path: str | Path, plain: bool = False) -> Any:
    """Load one official per-agent behaviour pickle without running code from it.

    The file goes through :func:`recagents.safepickle.load` with the numpy plain-data
    allow-list: numpy arrays and scalars of plain dtypes in built-in containers. Any other
    global (``os.system``, ``builtins.eval``, ...) or an allocation the file's size cannot
    account for raises, so a tampered file can neither run code nor exhaust memory.

    Args:
        path: A ``behavior/<agent>.pkl`` file of the official repository.
        plain: Turn numpy scalars and arrays into Python ints/floats and lists.

    Returns:
        The stored object: ``{page: {...}, ..., "interview": [...]}``.

    Raises:
        UnsafePickleError: If the file asks for something the allow-list refuses; the
            message names the file and the global.
    """
    obj = safepickle.load(path, allow=safepickle.NUMPY_PLAIN)
    return _to_plain(obj) if plain else obj


def _to_plain(obj: Any) -> Any:
    """Recursively replace numpy values by their Python equivalents."""
    if isinstance(obj, dict):
        return {_to_plain(k): _to_plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_to_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_to_plain(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def parse_satisfaction(interview: Any) -> float:
    """The 1-10 satisfaction score at the head of an official interview record.

    Accepts ``[rating, reason]`` (a list or tuple) or one string such as
    ``" 3; REASON: ..."``. The first number before any ``;`` or ``REASON`` is taken;
    anything else, or a number outside 1-10, gives NaN.
    """
    if isinstance(interview, list | tuple):
        if not interview:
            return math.nan
        interview = interview[0]
    if isinstance(interview, int | float | np.integer | np.floating) and not isinstance(
        interview, bool
    ):
        value = float(interview)
        return value if 1.0 <= value <= 10.0 else math.nan
    if not isinstance(interview, str):
        return math.nan
    head = re.split(r";|reason", interview, maxsplit=1, flags=re.IGNORECASE)[0]
    match = _NUMBER.search(head)
    if match is None:
        return math.nan
    value = float(match.group())
    return value if 1.0 <= value <= 10.0 else math.nan


@dataclass(frozen=True)
class OfficialRun:
    """The authors' recorded Agent4Rec run, converted to the shared log format.

    Attributes:
        exposures: One row per item shown (see the module docstring).
        sessions: One row per agent; ``exited`` is ``exit_page < 5``.
        traits: Trait levels and raw statistics of the 1,000 agents.
        items: ``item_id, title, genres, mean_rating, summary, popularity`` (training
            interactions of the agents in ``train.txt``; 0 for items absent there).
        n_unparsed_interviews: Interviews whose score could not be read (satisfaction NaN).
    """

    exposures: pd.DataFrame
    sessions: pd.DataFrame
    traits: pd.DataFrame
    items: pd.DataFrame
    n_unparsed_interviews: int


def _repo_root() -> Path | None:
    """The checkout holding this module (a folder with ``pyproject.toml``), if any."""
    here = Path(__file__).resolve()
    for directory in here.parents:
        if (directory / "pyproject.toml").is_file():
            return directory
    return None


def official_run_dir() -> Path | None:
    """Folder of the official recorded run, or ``None`` when it is not available.

    ``$RECAGENTS_AGENT4REC_OFFICIAL`` when set (returned even if it does not exist, so a
    wrong setting fails loudly), else ``<repo root>/../shared/data/agent4rec_official`` when
    that folder exists. The data is never copied into the repository.
    """
    override = os.environ.get(OFFICIAL_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    root = _repo_root()
    if root is None:
        return None
    candidate = root.parent / "shared" / "data" / "agent4rec_official"
    return candidate if candidate.is_dir() else None


_OFFICIAL_FILES = (
    "run_lightgcn_1000.jsonl",
    "user_statistic.csv",
    "user_statistic_num.csv",
    "movie_detail.csv",
    "train.txt",
)


def _official_items(folder: Path) -> pd.DataFrame:
    items = pd.read_csv(folder / "movie_detail.csv", keep_default_na=False)
    _require(items, ["movie_id", "title", "genres", "rating", "summary"], "movie_detail.csv")
    popularity: dict[str, int] = {}
    with open(folder / "train.txt", encoding="utf-8") as handle:
        for line in handle:
            for item in line.split()[1:]:
                popularity[item] = popularity.get(item, 0) + 1
    out = pd.DataFrame(
        {
            ITEM: items["movie_id"].astype(str),
            TITLE: items["title"].astype(str),
            GENRES: items["genres"].map(lambda g: tuple(x for x in str(g).split("|") if x)),
            "mean_rating": pd.to_numeric(items["rating"], errors="coerce").astype(float),
            "summary": items["summary"].astype(str),
        }
    )
    out["popularity"] = out[ITEM].map(popularity).fillna(0).astype(int)
    return out


def _official_traits(folder: Path) -> pd.DataFrame:
    levels = pd.read_csv(folder / "user_statistic.csv")
    raw = pd.read_csv(folder / "user_statistic_num.csv")
    _require(levels, [USER, *TRAITS], "user_statistic.csv")
    _require(raw, [USER, "activity_num", "diversity_num", "deviation"], "user_statistic_num.csv")
    raw = raw.rename(
        columns={
            "activity_num": "n_ratings",
            "deviation": "conformity_mse",
            "diversity_num": "n_top_genres",
        }
    )
    out = levels.merge(raw, on=USER, how="outer")
    out[USER] = out[USER].astype(str)
    ordered = [USER, *TRAITS, "n_ratings", "conformity_mse", "n_top_genres"]
    return out[ordered].reset_index(drop=True)


def _official_logs(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    exposures: list[tuple] = []
    sessions: list[tuple] = []
    unparsed = 0
    with open(folder / "run_lightgcn_1000.jsonl", encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            record = json.loads(line)
            if "agent_id" not in record or "pages" not in record:
                raise ValueError(f"run_lightgcn_1000.jsonl line {line_no} lacks agent_id/pages")
            user = str(record["agent_id"])
            pages = record["pages"]
            for page_no, page in enumerate(pages, 1):
                aligned = {str(i) for i in page.get("align_id", [])}
                watched = {str(i) for i in page.get("watch_id", [])}
                rated = [str(i) for i in page.get("rating_id", [])]
                ratings = dict(zip(rated, page.get("rating", []), strict=False))
                feelings = dict(zip(rated, page.get("feeling", []), strict=False))
                for position, item in enumerate(page["recommended_id"]):
                    item = str(item)
                    rating = ratings.get(item)
                    exposures.append(
                        (
                            user,
                            OFFICIAL_RECOMMENDER,
                            int(page.get("page", page_no)),
                            position,
                            item,
                            item in aligned,
                            item in watched,
                            float(rating) if rating is not None else math.nan,
                            str(feelings.get(item, "") or ""),
                        )
                    )
            score = parse_satisfaction(record.get("interview"))
            unparsed += int(math.isnan(score))
            exit_page = len(pages)
            sessions.append(
                (user, OFFICIAL_RECOMMENDER, exit_page, exit_page < OFFICIAL_MAX_PAGES, score)
            )
    exposure_frame = pd.DataFrame(exposures, columns=list(EXPOSURE_COLUMNS))
    exposure_frame["aligned"] = exposure_frame["aligned"].astype("boolean")
    exposure_frame["watched"] = exposure_frame["watched"].astype(bool)
    session_frame = pd.DataFrame(sessions, columns=list(SESSION_COLUMNS))
    session_frame["satisfaction"] = session_frame["satisfaction"].astype(float)
    return exposure_frame, session_frame, unparsed


def load_official_run(folder: str | Path | None = None) -> OfficialRun:
    """Convert the authors' recorded LightGCN run (1,000 agents) into the shared format.

    Reads ``run_lightgcn_1000.jsonl`` (pages and interviews), ``user_statistic.csv`` and
    ``user_statistic_num.csv`` (trait levels; raw ``activity_num``, ``deviation``,
    ``diversity_num``), ``movie_detail.csv`` (items) and ``train.txt`` (item popularity).
    Ids become strings. ``aligned``, ``watched`` and ``rating`` come from ``align_id``,
    ``watch_id`` and ``rating_id``/``rating``; ``exit_page`` is the number of pages and
    ``exited`` is ``exit_page < 5`` (an agent that saw all 5 pages ran out of pages).

    Args:
        folder: The data folder; defaults to :func:`official_run_dir`.

    Returns:
        The :class:`OfficialRun`.

    Raises:
        FileNotFoundError: If the folder or one of its files is missing.
    """
    if folder is None:
        folder = official_run_dir()
        if folder is None:
            raise FileNotFoundError(
                f"official Agent4Rec run not found; set ${OFFICIAL_ENV} to its folder"
            )
    folder = Path(folder)
    missing = [name for name in _OFFICIAL_FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} lacks the official run file(s) {missing}")
    exposures, sessions, unparsed = _official_logs(folder)
    return OfficialRun(
        exposures=exposures,
        sessions=sessions,
        traits=_official_traits(folder),
        items=_official_items(folder),
        n_unparsed_interviews=unparsed,
    )


# --------------------------------------------------------------------------- engagement


def engagement(
    exposures: pd.DataFrame, sessions: pd.DataFrame, like_threshold: float = 3.0
) -> pd.DataFrame:
    """Per-agent engagement metrics of the paper, one row per (recommender, user).

    * ``p_view`` = watched / exposed items.
    * ``n_like`` = watched items rated above ``like_threshold`` (the paper's threshold is
      not stated; a later paper reads it as rating > 3).
    * ``p_like`` = ``n_like`` / exposed items.
    * ``exit_page`` and ``satisfaction`` copied from ``sessions``.

    Sessions without exposures get NaN rates; exposures without a session get NaN
    ``exit_page``/``satisfaction``.

    Returns:
        ``recommender, user_id, p_view, n_like, p_like, exit_page, satisfaction``.

    Raises:
        ValueError: On a missing column or a non-finite ``like_threshold``.
    """
    _require(exposures, [USER, RECOMMENDER, ITEM, "watched", RATING], "exposures")
    _require(sessions, [USER, RECOMMENDER, "exit_page", "satisfaction"], "sessions")
    if not np.isfinite(like_threshold):
        raise ValueError(f"like_threshold must be a finite number, got {like_threshold!r}")
    keys = [RECOMMENDER, USER]
    watched = _bool_column(exposures["watched"], "exposures['watched']")
    rating = pd.to_numeric(exposures[RATING], errors="coerce")
    per = pd.DataFrame(
        {
            RECOMMENDER: exposures[RECOMMENDER].astype(str),
            USER: exposures[USER].astype(str),
            "exposed": 1,
            "watched": watched.astype(int),
            "liked": (watched & (rating > like_threshold)).astype(int),
        }
    )
    counts = per.groupby(keys, sort=True)[["exposed", "watched", "liked"]].sum().reset_index()
    sess = sessions[[*keys, "exit_page", "satisfaction"]].copy()
    sess[RECOMMENDER] = sess[RECOMMENDER].astype(str)
    sess[USER] = sess[USER].astype(str)
    if sess.duplicated(keys).any():
        raise ValueError("sessions has several rows for one (recommender, user_id)")
    out = counts.merge(sess, on=keys, how="outer")
    exposed = out["exposed"].astype(float)
    out["p_view"] = out["watched"] / exposed
    out["n_like"] = out["liked"].astype(float)
    out["p_like"] = out["liked"] / exposed
    out["exit_page"] = out["exit_page"].astype(float)
    out["satisfaction"] = out["satisfaction"].astype(float)
    out = out.sort_values(keys, kind="stable").reset_index(drop=True)
    return out[[*keys, *ENGAGEMENT_METRICS]]


def _summary_rows(values: pd.Series, n_boot: int, seed: int) -> dict[str, float]:
    x = values.to_numpy(dtype=float, na_value=np.nan)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return {"mean": math.nan, "low": math.nan, "high": math.nan, "n": 0}
    mean, low, high = bootstrap_ci(x, n_boot=n_boot, seed=seed)
    return {"mean": mean, "low": low, "high": high, "n": int(x.size)}


def _metric_columns(per_user: pd.DataFrame, metrics: Sequence[str] | None) -> list[str]:
    if metrics is None:
        return [
            c
            for c in per_user.columns
            if c not in (USER, RECOMMENDER, *TRAITS) and pd.api.types.is_numeric_dtype(per_user[c])
        ]
    _require(per_user, metrics, "per_user")
    return list(metrics)


def engagement_summary(
    per_user: pd.DataFrame,
    n_boot: int = 1000,
    seed: int = 0,
    metrics: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Mean and 95% percentile bootstrap interval of each metric, per recommender.

    Uses :func:`recagents.metrics.bootstrap_ci` over agents (NaN values dropped per metric,
    the same seed for every cell). A metric with no values gets NaN and ``n = 0``.

    Args:
        per_user: Output of :func:`engagement`.
        n_boot: Bootstrap resamples.
        seed: Resampling seed.
        metrics: Columns to summarise; default every numeric metric column.

    Returns:
        ``recommender, metric, mean, low, high, n``.
    """
    _require(per_user, [RECOMMENDER], "per_user")
    _check_boot(n_boot)
    columns = _metric_columns(per_user, metrics)
    rows = []
    for recommender, group in per_user.groupby(RECOMMENDER, sort=False):
        for metric in columns:
            rows.append(
                {"recommender": recommender, "metric": metric}
                | _summary_rows(group[metric], n_boot, seed)
            )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def satisfaction_by(
    per_user: pd.DataFrame,
    traits: pd.DataFrame,
    trait: str = "activity",
    metrics: Sequence[str] | None = ("satisfaction",),
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """:func:`engagement_summary` stratified by one trait's level.

    An outside critique of Agent4Rec found that the activity trait alone inflates the
    reported satisfaction, so satisfaction should be read per activity level.

    Args:
        per_user: Output of :func:`engagement`.
        traits: Frame with ``user_id`` and the trait's level column.
        trait: ``"activity"``, ``"conformity"`` or ``"diversity"``.
        metrics: Columns to summarise (``None``: every metric column).
        n_boot: Bootstrap resamples.
        seed: Resampling seed.

    Returns:
        ``recommender, trait, level, metric, mean, low, high, n``; agents without a trait
        row are left out.
    """
    if trait not in TRAITS:
        raise ValueError(f"trait must be one of {TRAITS}, got {trait!r}")
    _require(per_user, [USER, RECOMMENDER], "per_user")
    _require(traits, [USER, trait], "traits")
    _check_boot(n_boot)
    columns = _metric_columns(per_user.drop(columns=list(TRAITS), errors="ignore"), metrics)
    levels = traits[[USER, trait]].dropna().copy()
    levels[USER] = levels[USER].astype(str)
    frame = per_user.drop(columns=list(TRAITS), errors="ignore").copy()
    frame[USER] = frame[USER].astype(str)
    frame = frame.merge(levels, on=USER, how="inner")
    rows = []
    for (recommender, level), group in frame.groupby([RECOMMENDER, trait], sort=True):
        for metric in columns:
            rows.append(
                {
                    "recommender": recommender,
                    "trait": trait,
                    "level": int(level),
                    "metric": metric,
                }
                | _summary_rows(group[metric], n_boot, seed)
            )
    return pd.DataFrame(
        rows, columns=["recommender", "trait", "level", "metric", "mean", "low", "high", "n"]
    )


# --------------------------------------------------------------------------- ratings


def _rating_counts(values: pd.Series, name: str) -> pd.Series:
    x = pd.to_numeric(pd.Series(values), errors="coerce").dropna().to_numpy(dtype=float)
    if x.size == 0:
        raise ValueError(f"{name} holds no ratings")
    if (x < 1).any() or (x > 5).any():
        raise ValueError(f"{name} must lie in 1-5, found {x.min():g}..{x.max():g}")
    stars = np.rint(x).astype(int)
    return pd.Series(np.bincount(stars, minlength=6)[1:], index=range(1, 6))


def rating_distribution(
    exposures: pd.DataFrame, real_ratings: pd.Series | Sequence[float] | None = None
) -> pd.DataFrame:
    """Share of each star value 1-5 among agent ratings, and among real ratings if given.

    Agent ratings are the non-missing ``rating`` values of watched exposures. Ratings are
    rounded to the nearest star before counting.

    Returns:
        Long frame ``source`` (``"agents"``/``"real"``), ``rating`` (1-5), ``count``,
        ``share`` (of that source's ratings).

    Raises:
        ValueError: On a missing column, no ratings or a rating outside 1-5.
    """
    _require(exposures, ["watched", RATING], "exposures")
    watched = _bool_column(exposures["watched"], "exposures['watched']")
    sources = {"agents": _rating_counts(exposures.loc[watched, RATING], "agent ratings")}
    if real_ratings is not None:
        sources["real"] = _rating_counts(pd.Series(real_ratings), "real_ratings")
    rows = []
    for source, counts in sources.items():
        total = counts.sum()
        for star, count in counts.items():
            rows.append((source, int(star), int(count), count / total))
    return pd.DataFrame(rows, columns=["source", "rating", "count", "share"])


def rating_figure(table: pd.DataFrame, title: str = "Rating distribution") -> Figure:
    """Grouped bars of the rating shares, agents next to real users."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from recagents.plotting import PALETTE

    _require(table, ["source", "rating", "share"], "table")
    sources = list(dict.fromkeys(table["source"]))
    colors = sns.color_palette(PALETTE, len(sources))
    width = 0.8 / len(sources)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for k, (source, color) in enumerate(zip(sources, colors, strict=True)):
        part = table[table["source"] == source].sort_values("rating")
        x = part["rating"].to_numpy(dtype=float) + (k - (len(sources) - 1) / 2) * width
        bars = ax.bar(x, part["share"] * 100, width=width, color=color, label=source)
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks(range(1, 6))
    ax.set(title=title, xlabel="rating", ylabel="% of ratings")
    ax.legend()
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- traits vs behaviour


def trait_behaviour(
    exposures: pd.DataFrame,
    sessions: pd.DataFrame,
    traits: pd.DataFrame,
    item_mean_rating: pd.Series,
    item_genres: pd.Series,
) -> pd.DataFrame:
    """Per-agent behaviour next to the agent's trait levels.

    * ``exit_page`` from ``sessions``;
    * ``n_watched``: items watched;
    * ``rating_mse``: mean over the agent's ratings of ``(rating - item mean rating)^2``
      (NaN when the agent rated nothing);
    * ``n_genres_watched``: distinct genres among the watched items.

    Args:
        exposures: Exposure log.
        sessions: Session log.
        traits: ``user_id`` and the three trait levels.
        item_mean_rating: Item id -> mean rating in the data (the "history rating").
        item_genres: Item id -> tuple of genres.

    Returns:
        ``recommender, user_id, exit_page, n_watched, rating_mse, n_genres_watched,
        activity, conformity, diversity``; agents without a trait row are left out.

    Raises:
        ValueError: On a missing column or a watched item missing from the lookups.
    """
    _require(exposures, [USER, RECOMMENDER, ITEM, "watched", RATING], "exposures")
    _require(sessions, [USER, RECOMMENDER, "exit_page"], "sessions")
    _require(traits, [USER, *TRAITS], "traits")
    means = _as_series(item_mean_rating, "item_mean_rating")
    genres = _as_series(item_genres, "item_genres")
    keys = [RECOMMENDER, USER]
    frame = exposures[[*keys, ITEM, RATING]].copy()
    for column in (*keys, ITEM):
        frame[column] = frame[column].astype(str)
    frame["watched"] = _bool_column(exposures["watched"], "exposures['watched']").to_numpy()
    frame[RATING] = pd.to_numeric(frame[RATING], errors="coerce")
    seen = frame[frame["watched"]]
    rated = seen.dropna(subset=[RATING])
    _check_unknown(rated[ITEM], means, "item_mean_rating")
    _check_unknown(seen[ITEM], genres, "item_genres")

    sess = sessions[[*keys, "exit_page"]].copy()
    sess[RECOMMENDER] = sess[RECOMMENDER].astype(str)
    sess[USER] = sess[USER].astype(str)
    n_watched = seen.groupby(keys).size().rename("n_watched")
    squared = (rated[RATING] - rated[ITEM].map(means).astype(float)) ** 2
    mse = squared.groupby([rated[RECOMMENDER], rated[USER]]).mean().rename("rating_mse")
    exploded = seen[[*keys, ITEM]].assign(genre=seen[ITEM].map(genres)).explode("genre")
    n_genres = exploded.dropna(subset=["genre"]).groupby(keys)["genre"].nunique()
    out = (
        sess.set_index(keys)
        .join(n_watched, how="left")
        .join(mse, how="left")
        .join(n_genres.rename("n_genres_watched"), how="left")
        .reset_index()
    )
    out["n_watched"] = out["n_watched"].fillna(0).astype(int)
    out["n_genres_watched"] = out["n_genres_watched"].fillna(0).astype(int)
    out["exit_page"] = out["exit_page"].astype(float)
    levels = traits[[USER, *TRAITS]].copy()
    levels[USER] = levels[USER].astype(str)
    out = out.merge(levels, on=USER, how="inner")
    columns = [*keys, "exit_page", "n_watched", "rating_mse", "n_genres_watched", *TRAITS]
    return out[columns].sort_values(keys, kind="stable").reset_index(drop=True)


def trait_anova(behaviour: pd.DataFrame, min_group: int = 2) -> pd.DataFrame:
    """Mean behaviour per trait level and a one-way ANOVA across levels.

    For each pair of :data:`TRAIT_MEASURES` (activity/exit page, activity/items watched,
    conformity/rating MSE, diversity/genres watched) NaN values are dropped, levels with
    fewer than ``min_group`` agents are left out of the test, and
    :func:`scipy.stats.f_oneway` gives F and p; both are NaN when fewer than two levels
    remain (or when every group is constant). With a ``recommender`` column the test runs
    per recommender.

    Returns:
        ``[recommender,] trait, measure, mean_1, mean_2, mean_3, n_1, n_2, n_3, f_stat,
        p_value`` (level means over every agent of the level).
    """
    from scipy.stats import f_oneway

    if isinstance(min_group, bool) or not isinstance(min_group, int) or min_group < 2:
        raise ValueError(f"min_group must be an integer >= 2, got {min_group!r}")
    needed = sorted({c for pair in TRAIT_MEASURES for c in pair})
    _require(behaviour, needed, "behaviour")
    groups = (
        list(behaviour.groupby(RECOMMENDER, sort=False))
        if RECOMMENDER in behaviour
        else [(None, behaviour)]
    )
    rows = []
    for recommender, frame in groups:
        for trait, measure in TRAIT_MEASURES:
            part = frame[[trait, measure]].dropna()
            row: dict[str, Any] = {} if recommender is None else {"recommender": recommender}
            row |= {"trait": trait, "measure": measure}
            samples = []
            for level in (1, 2, 3):
                values = part.loc[part[trait] == level, measure].to_numpy(dtype=float)
                row[f"mean_{level}"] = float(values.mean()) if values.size else math.nan
                row[f"n_{level}"] = int(values.size)
                if values.size >= min_group:
                    samples.append(values)
            f_stat = p_value = math.nan
            if len(samples) >= 2:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = f_oneway(*samples)
                f_stat, p_value = float(result.statistic), float(result.pvalue)
            row |= {"f_stat": f_stat, "p_value": p_value}
            rows.append(row)
    return pd.DataFrame(rows)


_MEASURE_LABELS = {
    "exit_page": "exit page",
    "n_watched": "items watched",
    "rating_mse": "(rating - item mean)$^2$",
    "n_genres_watched": "genres watched",
}


def trait_figure(behaviour: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> Figure:
    """One panel per (trait, measure) pair: mean and 95% bootstrap CI per trait level."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from recagents.plotting import PALETTE

    needed = sorted({c for pair in TRAIT_MEASURES for c in pair})
    _require(behaviour, needed, "behaviour")
    _check_boot(n_boot)
    recommenders = (
        list(dict.fromkeys(behaviour[RECOMMENDER])) if RECOMMENDER in behaviour else [None]
    )
    colors = sns.color_palette(PALETTE, len(recommenders))
    offsets = np.linspace(-0.15, 0.15, len(recommenders)) if len(recommenders) > 1 else [0.0]
    fig, axes = plt.subplots(1, len(TRAIT_MEASURES), figsize=(3.2 * len(TRAIT_MEASURES), 3.4))
    for ax, (trait, measure) in zip(axes, TRAIT_MEASURES, strict=True):
        for name, offset, color in zip(recommenders, offsets, colors, strict=True):
            frame = behaviour if name is None else behaviour[behaviour[RECOMMENDER] == name]
            xs, means, lows, highs = [], [], [], []
            for level in (1, 2, 3):
                values = frame.loc[frame[trait] == level, measure].dropna()
                if values.empty:
                    continue
                mean, low, high = bootstrap_ci(values.to_numpy(float), n_boot=n_boot, seed=seed)
                xs.append(level + offset)
                means.append(mean)
                lows.append(mean - low)
                highs.append(high - mean)
            ax.errorbar(xs, means, yerr=[lows, highs], fmt="o-", capsize=3, color=color, label=name)
        ax.set_xticks([1, 2, 3])
        ax.set(title=f"{trait} level", xlabel="level", ylabel=_MEASURE_LABELS[measure])
    if recommenders != [None]:
        axes[-1].legend(title="recommender")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- filter bubble


def genre_concentration(recommended: pd.DataFrame, item_genres: pd.Series) -> pd.DataFrame:
    """How concentrated the recommended genres are, per round of the feedback loop.

    Every recommendation row counts (an item shown to two users counts twice) and each of
    an item's genres counts once. Per round (and per recommender when that column exists):

    * ``top_genre`` and ``top_share``: the most common genre and its count divided by all
      genre labels of the round (ties go to the alphabetically first genre);
    * ``items_with_top``: share of recommended items that carry the top genre;
    * ``n_genres``: distinct genres; ``n_items``: recommendation rows.

    A bubble shows as a rising ``top_share`` and a falling ``n_genres``.

    Returns:
        ``[recommender,] round, n_items, n_genres, top_genre, top_share, items_with_top``.
    """
    _require(recommended, [USER, ITEM, "round"], "recommended")
    genres = _as_series(item_genres, "item_genres")
    frame = recommended.copy()
    frame[ITEM] = frame[ITEM].astype(str)
    _check_unknown(frame[ITEM], genres, "item_genres")
    frame["_row"] = np.arange(len(frame))
    keys = [RECOMMENDER, "round"] if RECOMMENDER in frame else ["round"]
    rows = []
    for key, group in frame.groupby(keys, sort=True):
        labels = group[["_row", ITEM]].assign(genre=group[ITEM].map(genres)).explode("genre")
        labels = labels.dropna(subset=["genre"]).drop_duplicates(["_row", "genre"])
        counts = labels["genre"].value_counts()
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        row |= {"n_items": len(group), "n_genres": int(counts.size)}
        if counts.empty:
            row |= {"top_genre": None, "top_share": math.nan, "items_with_top": math.nan}
        else:
            best = counts[counts == counts.max()].index.astype(str).sort_values()[0]
            row |= {
                "top_genre": best,
                "top_share": float(counts[best] / counts.sum()),
                "items_with_top": float(counts[best] / len(group)),
            }
        rows.append(row)
    columns = [*keys, "n_items", "n_genres", "top_genre", "top_share", "items_with_top"]
    return pd.DataFrame(rows, columns=columns)


def bubble_figure(table: pd.DataFrame) -> Figure:
    """Top-genre share and number of genres recommended, round by round."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from recagents.plotting import PALETTE

    _require(table, ["round", "n_genres", "top_share"], "table")
    names = list(dict.fromkeys(table[RECOMMENDER])) if RECOMMENDER in table else [None]
    colors = sns.color_palette(PALETTE, len(names))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, color in zip(names, colors, strict=True):
        part = table if name is None else table[table[RECOMMENDER] == name]
        part = part.sort_values("round")
        axes[0].plot(part["round"], part["top_share"] * 100, "o-", color=color, label=name)
        axes[1].plot(part["round"], part["n_genres"], "o-", color=color, label=name)
    axes[0].set(title="Share of the top genre", xlabel="round", ylabel="% of genre labels")
    axes[1].set(title="Distinct genres recommended", xlabel="round", ylabel="genres")
    if names != [None]:
        axes[1].legend(title="recommender")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- causal discovery


def item_causal_table(
    exposures: pd.DataFrame,
    item_mean_rating: pd.Series,
    item_popularity: pd.Series,
    min_exposures: int = 10,
) -> pd.DataFrame:
    """Per-item variables of the paper's causal analysis.

    * ``quality``: the item's mean rating in the data;
    * ``popularity``: its training interactions (items absent from the Series get 0);
    * ``exposure``: times shown to agents; ``views``: times watched;
    * ``rating``: mean agent rating (NaN when nobody rated it).

    Only items shown at least ``min_exposures`` times are kept.

    Returns:
        ``item_id, quality, popularity, exposure, views, rating``, sorted by ``item_id``.
    """
    _require(exposures, [ITEM, "watched", RATING], "exposures")
    if isinstance(min_exposures, bool) or not isinstance(min_exposures, int) or min_exposures < 1:
        raise ValueError(f"min_exposures must be an integer >= 1, got {min_exposures!r}")
    means = _as_series(item_mean_rating, "item_mean_rating")
    popularity = _as_series(item_popularity, "item_popularity")
    frame = pd.DataFrame(
        {
            ITEM: exposures[ITEM].astype(str).to_numpy(),
            "watched": _bool_column(exposures["watched"], "watched").to_numpy(),
            RATING: pd.to_numeric(exposures[RATING], errors="coerce").to_numpy(),
        }
    )
    frame.loc[~frame["watched"], RATING] = np.nan
    grouped = frame.groupby(ITEM).agg(
        exposure=("watched", "size"), views=("watched", "sum"), rating=(RATING, "mean")
    )
    grouped = grouped[grouped["exposure"] >= min_exposures]
    _check_unknown(grouped.index, means, "item_mean_rating")
    out = pd.DataFrame(
        {
            ITEM: grouped.index.astype(str),
            "quality": grouped.index.map(means).astype(float),
            "popularity": grouped.index.map(popularity).fillna(0).astype(float),
            "exposure": grouped["exposure"].to_numpy(dtype=float),
            "views": grouped["views"].to_numpy(dtype=float),
            "rating": grouped["rating"].to_numpy(dtype=float),
        }
    )
    return out.sort_values(ITEM, kind="stable").reset_index(drop=True)


def causal_discovery(
    table: pd.DataFrame,
    prior_order: Sequence[str] | None = CAUSAL_COLUMNS,
    columns: Sequence[str] | None = None,
    random_state: int = 0,
) -> pd.DataFrame:
    """DirectLiNGAM over z-scored per-item variables, optionally with a causal order prior.

    Rows with a missing value are dropped. With ``prior_order``, the prior knowledge matrix
    ``pk`` (causal-learn's convention: ``pk[j, i] = 0`` means no directed path from
    ``x_i`` to ``x_j``) forbids every path from a later variable of the order to an earlier
    one; all other entries are ``-1`` (unknown). ``prior_order=None`` runs without prior.

    Args:
        table: Output of :func:`item_causal_table` (or any numeric frame).
        prior_order: Variables from cause to effect; it sets the variables when
            ``columns`` is None. Must contain every variable.
        columns: Variables to use; defaults to ``prior_order`` or :data:`CAUSAL_COLUMNS`.
        random_state: Passed to DirectLiNGAM.

    Returns:
        The adjacency matrix ``B`` as causal-learn returns it: row = effect, column = cause,
        so ``B.loc["rating", "quality"]`` is the (standardised) effect of quality on rating.
        ``attrs`` holds ``n_rows`` and ``causal_order``.

    Raises:
        ValueError: On missing or constant columns, a bad order or too few rows.
    """
    from causallearn.search.FCMBased.lingam import DirectLiNGAM

    variables = list(columns or prior_order or CAUSAL_COLUMNS)
    if len(set(variables)) != len(variables) or len(variables) < 2:
        raise ValueError(f"need at least two distinct variables, got {variables}")
    _require(table, variables, "table")
    if prior_order is not None:
        order = list(prior_order)
        if sorted(order) != sorted(variables):
            raise ValueError(
                f"prior_order {order} must list exactly the variables {variables} once each"
            )
    data = table[variables].apply(pd.to_numeric, errors="coerce").dropna()
    if len(data) < len(variables) + 2:
        raise ValueError(f"need at least {len(variables) + 2} complete rows, got {len(data)}")
    std = data.std(ddof=0)
    constant = std.index[~(std > 0)].tolist()
    if constant:
        raise ValueError(f"column(s) {constant} are constant; they cannot be standardised")
    z = ((data - data.mean()) / std).to_numpy(dtype=float)
    prior = None
    if prior_order is not None:
        position = {name: k for k, name in enumerate(prior_order)}
        prior = np.full((len(variables), len(variables)), -1)
        for i, earlier in enumerate(variables):
            for j, later in enumerate(variables):
                if position[later] > position[earlier]:
                    prior[i, j] = 0  # no path from `later` (x_j) into `earlier` (x_i)
    model = DirectLiNGAM(random_state=random_state, prior_knowledge=prior)
    model.fit(z)
    out = pd.DataFrame(model.adjacency_matrix_, index=variables, columns=variables)
    out.index.name, out.columns.name = "effect", "cause"
    out.attrs["n_rows"] = int(len(data))
    out.attrs["causal_order"] = [variables[k] for k in model.causal_order_]
    return out


def causal_figure(
    adjacency: pd.DataFrame, threshold: float = 0.05, title: str = "DirectLiNGAM"
) -> Figure:
    """Draw the causal graph: nodes on a circle, arrows cause -> effect labelled by weight.

    Edges with ``|weight| <= threshold`` are omitted; positive weights are blue, negative
    red, and the line width grows with ``|weight|``. Matplotlib only (no graphviz).
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch

    if not isinstance(adjacency, pd.DataFrame) or adjacency.shape[0] != adjacency.shape[1]:
        raise ValueError("adjacency must be a square DataFrame (row = effect, column = cause)")
    if list(adjacency.index) != list(adjacency.columns):
        raise ValueError("adjacency rows and columns must name the same variables in order")
    if not threshold >= 0:
        raise ValueError(f"threshold must be >= 0, got {threshold!r}")
    names = list(adjacency.index)
    angles = np.pi / 2 - 2 * np.pi * np.arange(len(names)) / len(names)
    pos = {n: (np.cos(a), np.sin(a)) for n, a in zip(names, angles, strict=True)}
    fig, ax = plt.subplots(figsize=(6, 6))
    weights = adjacency.to_numpy(dtype=float)
    biggest = max(float(np.nanmax(np.abs(weights))), 1e-12)
    for i, effect in enumerate(names):
        for j, cause in enumerate(names):
            w = weights[i, j]
            if i == j or not np.isfinite(w) or abs(w) <= threshold:
                continue
            arrow = FancyArrowPatch(
                pos[cause],
                pos[effect],
                arrowstyle="-|>",
                mutation_scale=16,
                shrinkA=28,
                shrinkB=28,
                connectionstyle="arc3,rad=0.12",
                color="tab:blue" if w > 0 else "tab:red",
                linewidth=1 + 3 * abs(w) / biggest,
            )
            ax.add_patch(arrow)
            (x0, y0), (x1, y1) = pos[cause], pos[effect]
            mx, my = (x0 + x1) / 2, (y0 + y1) / 2
            # The arc bulges by rad/2 of the chord at its middle: put the label there.
            nx, ny = (y1 - y0) * 0.06, -(x1 - x0) * 0.06
            ax.text(
                mx + nx,
                my + ny,
                f"{w:+.2f}",
                ha="center",
                va="center",
                fontsize=9,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"},
            )
    for name, (x, y) in pos.items():
        ax.text(
            x,
            y,
            name,
            ha="center",
            va="center",
            fontsize=11,
            zorder=3,
            bbox={"boxstyle": "round,pad=0.4", "fc": "#eeeeee", "ec": "#555555"},
        )
    ax.set_xlim(-1.45, 1.45)
    ax.set_ylim(-1.45, 1.45)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title)
    fig.tight_layout()
    return fig
