"""The authors' two recorded Agent4Rec runs, read from their release safely.

The pinned release ``agent4rec-ml1m`` (:mod:`recagents.data.releases`) holds two gpt-3.5
runs on ML-1M: LightGCN with 1,000 agents and MF with 100 (:data:`RUNS`), each a behaviour
pickle per agent and the run's ``metrics.txt``. :func:`load_official_run` reads a run's
pickles through :func:`load_official_pickle` (no code runs from them), checks every record
(:func:`check_record`) and turns the run into the ``exposures``, ``sessions`` and ``traits``
frames every analysis reads (:func:`build_official_run`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import GENRES, ITEM, TITLE, USER, YEAR
from recagents.data import numpy_pickle, released, releases, safepickle
from recagents.papers.agent4rec.frames import (
    EXPOSURE_COLUMNS,
    SESSION_COLUMNS,
)

#: The release the runs come from (``recagents/resources/releases.json``).
RELEASE = released.AGENT4REC_RELEASE
OFFICIAL_MAX_PAGES = 5

#: A recorded run by name: its recommender and its folder in the release.
RUNS: dict[str, tuple[str, str]] = {
    "lightgcn": ("LightGCN", "storage/ml-1m/LightGCN/lgn_1000_5_4_1009"),
    "mf": ("MF", "storage/ml-1m/MF/mf_100_5_4"),
}
RunName = Literal["lightgcn", "mf"]

# --------------------------------------------------------------------------- official run


def load_official_pickle(path: str | Path, plain: bool = False) -> Any:
    """Load one official per-agent behaviour pickle without running code from it.

    The file goes through :func:`recagents.data.safepickle.load` with the numpy plain-data
    allow-list: numpy arrays and scalars of plain dtypes in built-in containers. Any other
    global (``os.system``, ``builtins.eval``, ...) or an allocation the file's size cannot
    account for raises, so a tampered file can neither run code nor exhaust memory.

    Args:
        path: A ``behavior/<agent>.pkl`` file of the official repository.
        plain: Turn numpy scalars and arrays into Python ints/floats and lists.

    Returns:
        The stored object: ``{page: {...}, ..., "interview": [...]}``.

    Raises:
        recagents.data.safepickle.UnsafePickleError: The file asks for something the
            allow-list refuses; the message names the file and the global.
    """
    obj = safepickle.load(path, allow=numpy_pickle.NUMPY_PLAIN)
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
    """One of the authors' recorded Agent4Rec runs, converted to the shared log format.

    Attributes:
        name: The run (a key of :data:`RUNS`).
        recommender: Its recommender (``LightGCN``, ``MF``).
        records: Each agent's checked record by id (:func:`check_record`): ``pages`` (ids as
            strings) and ``interview``.
        exposures: One row per item shown (see :mod:`~recagents.papers.agent4rec.frames`).
        sessions: One row per agent; ``exited`` is ``exit_page < 5``.
        traits: Trait levels and raw statistics of the run's agents.
        items: ``item_id, title, genres, mean_rating, summary, popularity`` (``title`` with
            its year, as the authors' pages show it; ``popularity``: training interactions
            of the agents in ``cf_data/train.txt``, 0 for items absent there).
        metrics_txt: The run's ``metrics.txt`` totals (:func:`read_metrics_txt`), ``{}`` when
            it was built without one.
        n_unparsed_interviews: Interviews whose score could not be read (satisfaction NaN).
    """

    name: str
    recommender: str
    records: dict[str, dict[str, Any]]
    exposures: pd.DataFrame
    sessions: pd.DataFrame
    traits: pd.DataFrame
    items: pd.DataFrame
    metrics_txt: dict[str, float]
    n_unparsed_interviews: int


class RecordedRunError(ValueError):
    """A recorded record that cannot be read: the message names the file and the field."""


#: ``metrics.txt`` lines that the released code writes from the behaviour it records.
METRICS_TXT_KEYS = {
    "Average recall": "recall",
    "Average presion": "precision",  # sic: the released code's spelling
    "Overall click rate": "click_rate",
    "Average number of likes": "n_likes",
    "Average exit page": "exit_page",
}


#: The ``metrics.txt`` line giving the number of agents its totals are over.
METRICS_TXT_AGENTS = ("n_avatars", "n_agents")


def read_metrics_txt(path: str | Path) -> dict[str, float]:
    """The totals of a released ``metrics.txt``: :data:`METRICS_TXT_KEYS` and ``n_agents``.

    Raises:
        ValueError: A total is missing or not a number (the message names it).
    """
    keys = {**METRICS_TXT_KEYS, METRICS_TXT_AGENTS[0]: METRICS_TXT_AGENTS[1]}
    found: dict[str, float] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        label, _, value = line.partition(":")
        if label.strip() in keys:
            try:
                found[keys[label.strip()]] = float(value.strip())
            except ValueError as error:
                raise ValueError(f"{path}: {label.strip()} is not a number: {value!r}") from error
    missing = sorted(set(keys.values()) - set(found))
    if missing:
        raise ValueError(f"{path} lacks {missing}")
    return found


#: Per-page lists of item ids; ``recommended_id`` is required, the others may be absent.
_ID_LISTS = ("recommended_id", "align_id", "like_id", "watch_id", "rating_id", "ground_truth")


def _show(value: Any) -> str:
    """``repr(value)``, cut to 60 characters for a message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_id(value: Any) -> bool:
    return isinstance(value, int | str) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond a float's range
        return False


class _Bad(Exception):
    """A field of a record that breaks a rule: ``(field, problem)``, turned into a message."""


def _check_page(page: Any, at: str) -> dict[str, Any]:
    """One stored page, checked; absent or ``None`` optional lists become ``[]``; ids str.

    Raises:
        _Bad: ``(field, problem)`` for the caller to name the file.
    """
    if not isinstance(page, dict):
        raise _Bad(at, f"is {type(page).__name__}, not a dict")
    page = dict(page)
    if "recommended_id" not in page:
        raise _Bad(f"{at}.recommended_id", "is missing")
    for key in _ID_LISTS:
        value = page.get(key)
        if value is None and key != "recommended_id":
            page[key] = []
            continue
        if not isinstance(value, list):
            raise _Bad(f"{at}.{key}", f"is {type(value).__name__}, not a list of ids")
        for index, item in enumerate(value):
            if not _is_id(item):
                raise _Bad(f"{at}.{key}[{index}]", f"is {_show(item)}, not an id")
        page[key] = [str(item) for item in value]
    for key, check, kind in (("rating", _is_number, "a finite number"),
                             ("feeling", lambda v: isinstance(v, str), "a string")):  # fmt: skip
        value = page.get(key)
        if value is None:
            page[key] = []
            continue
        if not isinstance(value, list):
            raise _Bad(f"{at}.{key}", f"is {type(value).__name__}, not a list")
        for index, item in enumerate(value):
            if not check(item):
                raise _Bad(f"{at}.{key}[{index}]", f"is {_show(item)}, not {kind}")
        if len(value) != len(page["rating_id"]):
            raise _Bad(
                f"{at}.{key}",
                f"has {len(value)} entries but rating_id has {len(page['rating_id'])}",
            )
    number = page.get("page")
    if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
        raise _Bad(f"{at}.page", f"is {_show(number)}, not a page number")
    return page


def check_record(record: Any, where: str) -> dict[str, Any]:
    """One agent's behaviour record (a pickle's plain content), checked.

    The authors' code stores ``{1: page, 2: page, ..., "interview": [...]}``: integer page
    keys from 1 without gaps, each page a dict with a ``recommended_id`` list of ids;
    ``align_id``, ``like_id``, ``watch_id``, ``rating_id`` and ``ground_truth`` lists of
    ids when present, ``rating`` (finite numbers) and ``feeling`` (strings) as long as
    ``rating_id``, ``page`` an int. Absent or ``None`` optional lists become ``[]``.

    Args:
        record: The plain object (:func:`load_official_pickle` with ``plain=True``).
        where: What to name in a message (the file).

    Returns:
        ``{"pages": [page, ...], "interview": ...}``, pages in order, ids as strings.

    Raises:
        RecordedRunError: The first field that breaks a rule, named with ``where``.
    """
    try:
        if not isinstance(record, dict):
            raise _Bad("the record", f"is {type(record).__name__}, not a dict")
        keys = [k for k in record if k != "interview"]
        bad = [k for k in keys if not isinstance(k, int) or isinstance(k, bool)]
        if bad:
            raise _Bad(f"key {_show(bad[0])}", "is neither a page number nor 'interview'")
        if sorted(keys) != list(range(1, len(keys) + 1)):
            raise _Bad("the page keys", f"are {sorted(keys)}, not 1..{len(keys)}")
        pages = [_check_page(record[k], f"page {k}") for k in sorted(keys)]
    except _Bad as error:
        field, problem = error.args
        raise RecordedRunError(f"{where}: {field} {problem}") from None
    return {"pages": pages, "interview": record.get("interview")}


def behaviour_paths(run: RunName, agents: int | None = None) -> dict[str, str]:
    """The run's behaviour pickles in the manifest by agent id, the first ``agents`` by id."""
    if run not in RUNS:
        raise ValueError(f"run must be one of {sorted(RUNS)}, got {run!r}")
    folder = f"{RUNS[run][1]}/behavior/"
    found = {
        path[len(folder) : -len(".pkl")]: path
        for path in (f.path for f in releases.manifest(RELEASE).files)
        if path.startswith(folder) and path.endswith(".pkl")
    }
    ordered = sorted(found, key=int)[:agents]
    return {user: found[user] for user in ordered}


def _logs(
    records: Mapping[str, dict[str, Any]], recommender: str
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """The exposure and session frames of checked records (and the unparsed interviews)."""
    exposures: list[tuple[Any, ...]] = []
    sessions: list[tuple[Any, ...]] = []
    unparsed = 0
    for user, record in records.items():
        pages = record["pages"]
        for page_no, page in enumerate(pages, 1):
            aligned, watched = set(page["align_id"]), set(page["watch_id"])
            ratings = dict(zip(page["rating_id"], page["rating"], strict=False))
            feelings = dict(zip(page["rating_id"], page["feeling"], strict=False))
            number = page_no if page.get("page") is None else page["page"]
            for position, item in enumerate(page["recommended_id"]):
                rating = ratings.get(item)
                exposures.append(
                    (user, recommender, number, position, item, item in aligned,
                     item in watched, float(rating) if rating is not None else math.nan,
                     str(feelings.get(item, "") or ""))
                )  # fmt: skip
        score = parse_satisfaction(record.get("interview"))
        unparsed += int(math.isnan(score))
        exit_page = len(pages)
        sessions.append((user, recommender, exit_page, exit_page < OFFICIAL_MAX_PAGES, score))
    exposure_frame = pd.DataFrame(exposures, columns=list(EXPOSURE_COLUMNS))
    exposure_frame["aligned"] = exposure_frame["aligned"].astype("boolean")
    exposure_frame["watched"] = exposure_frame["watched"].astype(bool)
    session_frame = pd.DataFrame(sessions, columns=list(SESSION_COLUMNS))
    session_frame["satisfaction"] = session_frame["satisfaction"].astype(float)
    return exposure_frame, session_frame, unparsed


def release_items() -> pd.DataFrame:
    """The released items as a run analysis reads them (see :attr:`OfficialRun.items`)."""
    items = released.agent4rec_items()
    years = items[YEAR].map(lambda y: f" ({int(y)})" if pd.notna(y) else "")
    popularity = released.agent4rec_popularity()
    out = items[[ITEM, TITLE, GENRES, "mean_rating", "summary"]].assign(
        **{TITLE: items[TITLE] + years}
    )
    out["popularity"] = out[ITEM].map(popularity).fillna(0).astype(int)
    return out


def build_official_run(
    name: str,
    recommender: str,
    records: Mapping[str, dict[str, Any]],
    traits: pd.DataFrame,
    items: pd.DataFrame,
    metrics_txt: Mapping[str, float] | None = None,
) -> OfficialRun:
    """An :class:`OfficialRun` from checked records (:func:`check_record`), traits and items.

    Ids become strings; ``aligned``, ``watched`` and ``rating`` come from ``align_id``,
    ``watch_id`` and ``rating_id``/``rating``; ``exit_page`` is the number of pages and
    ``exited`` is ``exit_page < 5`` (an agent that saw all 5 pages ran out of pages).
    ``traits`` is kept for the records' agents only.
    """
    ordered = {user: records[user] for user in sorted(records, key=lambda u: (len(u), u))}
    exposures, sessions, unparsed = _logs(ordered, recommender)
    traits = traits.assign(**{USER: traits[USER].astype(str)})
    return OfficialRun(
        name=name,
        recommender=recommender,
        records=ordered,
        exposures=exposures,
        sessions=sessions,
        traits=traits[traits[USER].isin(ordered)].reset_index(drop=True),
        items=items,
        metrics_txt=dict(metrics_txt or {}),
        n_unparsed_interviews=unparsed,
    )


def load_official_run(run: RunName = "lightgcn", agents: int | None = None) -> OfficialRun:
    """One of the authors' recorded runs (:data:`RUNS`), from the pinned release.

    Every behaviour pickle of the run (``behavior/<agent>.pkl``, the first ``agents`` by
    id) comes through one :func:`recagents.data.releases.fetch` call (SHA-256 checked; the
    offline mirror only when ``$RECAGENTS_RELEASES_MIRROR`` names it), is opened by
    :func:`load_official_pickle` and checked by :func:`check_record`. Traits are
    ``user_statistic.csv`` and ``user_statistic_num.csv``, items ``movie_detail.csv`` with
    the popularity of ``cf_data/train.txt``, totals the run's ``metrics.txt``.

    Args:
        run: ``"lightgcn"`` (1,000 agents) or ``"mf"`` (100 agents).
        agents: Read only the first ``agents`` agents by id (``None``: all).

    Raises:
        ValueError: An unknown run.
        RecordedRunError: A record breaks a rule of :func:`check_record` (naming the file).
        recagents.data.safepickle.UnsafePickleError: A pickle asks for what the allow-list
            refuses.
        recagents.data.releases.ReleaseError: A file not in the cache, mirror or network.
    """
    paths = behaviour_paths(run, agents)
    recommender, folder = RUNS[run]
    root = releases.fetch(RELEASE, [*paths.values(), f"{folder}/metrics.txt"], progress=False)
    records = {
        user: check_record(load_official_pickle(root / path, plain=True), path)
        for user, path in paths.items()
    }
    return build_official_run(
        run, recommender, records, released.agent4rec_traits(), release_items(),
        read_metrics_txt(root / folder / "metrics.txt"),
    )  # fmt: skip
