"""The authors' recorded Agent4Rec run, read safely and converted to the shared log format.

The official repository releases a 1,000-agent LightGCN run (gpt-3.5-turbo) and per-agent
behaviour pickles; :func:`load_official_run` turns the run into the ``exposures``,
``sessions`` and ``traits`` frames every analysis reads, and :func:`load_official_pickle`
opens a pickle without running code from it. The data is never part of the project: its
folder is passed in or named by ``$RECAGENTS_AGENT4REC_RECORDED`` (:func:`official_run_dir`).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import GENRES, ITEM, TITLE, USER
from recagents.data import safepickle
from recagents.papers.agent4rec.config import TRAITS
from recagents.papers.agent4rec.frames import (
    EXPOSURE_COLUMNS,
    SESSION_COLUMNS,
)

OFFICIAL_ENV = "RECAGENTS_AGENT4REC_RECORDED"
"""Environment variable naming the folder of the official recorded run (see
:func:`official_run_dir`); nothing else is searched."""

OFFICIAL_RECOMMENDER = "LightGCN"
OFFICIAL_MAX_PAGES = 5


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


def official_run_dir(recorded: str | Path | None = "auto") -> Path | None:
    """Folder of the official recorded run, or ``None`` when it is not available.

    The authors' export is not part of the project: it is read only from a folder the
    caller names, never looked up beside the repository, and never copied into it.

    * A path (``str`` or :class:`~pathlib.Path`): that folder, returned even if it does not
      exist, so that :func:`load_official_run` fails loudly on a wrong setting.
    * ``"auto"`` (the default): the folder in the environment variable
      ``RECAGENTS_AGENT4REC_RECORDED`` (:data:`OFFICIAL_ENV`) when it is set and not empty;
      otherwise ``None``, the run is not available.
    * ``"none"``, ``""`` or ``None``: ``None``.

    For example ``export RECAGENTS_AGENT4REC_RECORDED=/data/agent4rec_official`` before
    starting Jupyter or pytest makes notebook 02 (``RECORDED_RUN = "auto"``) and the
    recorded-run tests use that folder.
    """
    if recorded is None:
        return None
    if isinstance(recorded, str):
        setting = recorded.strip()
        if setting in ("", "none"):
            return None
        if setting == "auto":
            override = os.environ.get(OFFICIAL_ENV, "").strip()
            return Path(override).expanduser() if override else None
    return Path(recorded).expanduser()


def run_folder(folder: str | Path | None = None) -> Path:
    """``folder``, or when it is ``None`` the one :func:`official_run_dir` names.

    Raises:
        FileNotFoundError: No folder is given or set (the message names ``$OFFICIAL_ENV``).
    """
    found = Path(folder) if folder is not None else official_run_dir()
    if found is None:
        raise FileNotFoundError(
            "the official Agent4Rec recorded run is not available: pass its folder, or set "
            f"${OFFICIAL_ENV} to it (nothing beside the repository is searched)"
        )
    return found


_OFFICIAL_FILES = (
    "run_lightgcn_1000.jsonl",
    "user_statistic.csv",
    "user_statistic_num.csv",
    "movie_detail.csv",
    "train.txt",
)


class RecordedRunError(ValueError):
    """A recorded-run file that cannot be read: the message names the file, line and field."""


#: The longest line :func:`read_run_records` reads (the authors' longest is under 10 KB).
MAX_RECORD_BYTES = 16 << 20
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
    """One stored page, checked; absent or ``null`` optional lists become ``[]``.

    Raises:
        _Bad: ``(field, problem)`` for the caller to name the file and line.
    """
    if not isinstance(page, dict):
        raise _Bad(at, f"is {type(page).__name__}, not an object")
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


def read_run_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each visit record of a recorded-run JSONL file, checked, with its line number.

    Every line (blank lines are skipped) must be UTF-8 JSON of one object with an
    ``agent_id`` (an int or a string, not seen on an earlier line) and ``pages``: a list of
    objects, each with a ``recommended_id`` list of ids; ``align_id``, ``like_id``,
    ``watch_id``, ``rating_id`` and ``ground_truth`` are lists of ids when present,
    ``rating`` (finite numbers) and ``feeling`` (strings) lists as long as ``rating_id``,
    ``page`` an int. Absent or ``null`` optional lists are yielded as ``[]``.

    Raises:
        RecordedRunError: The first line that breaks a rule, naming the file, the line and
            the field (e.g. ``pages[2].recommended_id``) and what is wrong with it.
    """
    path = Path(path)
    first_line: dict[str, int] = {}
    with open(path, "rb") as handle:
        for line_no, raw in enumerate(iter(lambda: handle.readline(MAX_RECORD_BYTES + 1), b""), 1):
            where = f"{path}: line {line_no}"
            if len(raw) > MAX_RECORD_BYTES:
                raise RecordedRunError(
                    f"{where}: longer than {MAX_RECORD_BYTES:,} bytes (MAX_RECORD_BYTES); "
                    "a visit record is one line of a few KB"
                )
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise RecordedRunError(
                    f"{where} (byte {error.start} of the line): not valid UTF-8"
                ) from None
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as error:
                raise RecordedRunError(
                    f"{where}, column {error.colno}: not valid JSON ({error.msg})"
                ) from None
            except RecursionError:
                raise RecordedRunError(f"{where}: JSON nested too deeply") from None
            except ValueError as error:  # e.g. an integer of more digits than Python allows
                raise RecordedRunError(f"{where}: not valid JSON ({error})") from None
            if not isinstance(record, dict):
                raise RecordedRunError(
                    f"{where}: a visit record must be a JSON object, not {type(record).__name__}"
                )
            try:
                for key in ("agent_id", "pages"):
                    if key not in record:
                        raise _Bad(key, "is missing")
                if not _is_id(record["agent_id"]):
                    raise _Bad("agent_id", f"is {_show(record['agent_id'])}, not an id")
                if not isinstance(record["pages"], list):
                    kind = type(record["pages"]).__name__
                    raise _Bad("pages", f"is {kind}, not a list of pages")
                pages = [_check_page(page, f"pages[{i}]") for i, page in enumerate(record["pages"])]
            except _Bad as error:
                field, problem = error.args
                raise RecordedRunError(f"{where}: {field} {problem}") from None
            user = str(record["agent_id"])
            if user in first_line:
                raise RecordedRunError(
                    f"{where}: agent_id {_show(record['agent_id'])} was already recorded on line "
                    f"{first_line[user]}; each agent's visit is one line"
                )
            first_line[user] = line_no
            yield line_no, {**record, "pages": pages}


def read_release_csv(
    path: Path, columns: Sequence[str], numeric: Sequence[str] = (), **read_options: Any
) -> pd.DataFrame:
    """One CSV file of the recorded run, checked: readable, with ``columns``, numbers numeric.

    Why: pandas' own errors name neither the file nor the row, and a non-numeric rating
    would otherwise surface as a bare ``ValueError`` far from the file that holds it.

    Args:
        path: The file.
        columns: Columns it must have.
        numeric: Columns whose every non-empty value must be a finite number.
        read_options: Passed to :func:`pandas.read_csv`.

    Raises:
        RecordedRunError: Naming the file, and for a bad value its line (the header is
            line 1) and column.
    """
    try:
        frame = pd.read_csv(path, **read_options)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise RecordedRunError(f"{path}: not a readable CSV file ({error})") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise RecordedRunError(f"{path}: missing column(s) {missing}; it has {list(frame.columns)}")
    for column in numeric:
        text = frame[column].astype(str).str.strip()
        values = pd.to_numeric(text.where(text != "", "nan"), errors="coerce")
        bad = (values.isna() & (text != "") & (text.str.lower() != "nan")) | values.abs().eq(
            float("inf")
        )
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raise RecordedRunError(
                f"{path}: line {row + 2}, column {column}: {frame[column].iloc[row]!r} is not "
                "a finite number"
            )
    return frame


def _official_items(folder: Path) -> pd.DataFrame:
    items = read_release_csv(
        folder / "movie_detail.csv",
        ["movie_id", "title", "genres", "rating", "summary"],
        numeric=["rating"],
        keep_default_na=False,
    )
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
    levels = read_release_csv(folder / "user_statistic.csv", [USER, *TRAITS])
    counts = ["activity_num", "diversity_num", "deviation"]
    raw = read_release_csv(folder / "user_statistic_num.csv", [USER, *counts], numeric=counts)
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
    for _, record in read_run_records(folder / "run_lightgcn_1000.jsonl"):
        user = str(record["agent_id"])
        pages = record["pages"]
        for page_no, page in enumerate(pages, 1):
            aligned = {str(i) for i in page["align_id"]}
            watched = {str(i) for i in page["watch_id"]}
            rated = [str(i) for i in page["rating_id"]]
            ratings = dict(zip(rated, page["rating"], strict=False))  # [] when absent
            feelings = dict(zip(rated, page["feeling"], strict=False))
            for position, item in enumerate(page["recommended_id"]):
                item = str(item)
                rating = ratings.get(item)
                exposures.append(
                    (
                        user,
                        OFFICIAL_RECOMMENDER,
                        page_no if page.get("page") is None else page["page"],
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
        folder: The data folder; ``None`` asks :func:`official_run_dir` (the folder in
            ``$RECAGENTS_AGENT4REC_RECORDED``).

    Returns:
        The :class:`OfficialRun`.

    Raises:
        FileNotFoundError: If no folder is given or set, or the folder or one of its
            files is missing.
        RecordedRunError: A line of the run file breaks a rule of :func:`read_run_records`
            (the message names the file, the line and the field).
    """
    folder = run_folder(folder)
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
