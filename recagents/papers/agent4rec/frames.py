"""The log formats every Agent4Rec analysis reads, and the checks each one runs first.

Our simulation (:func:`recagents.papers.agent4rec.loop.simulate`) and the authors' recorded
run (:func:`recagents.papers.agent4rec.recorded.load_official_run`) give the same frames:

* ``exposures``: one row per item shown: ``user_id`` (str), ``recommender`` (str), ``page``
  (1-based), ``position`` (0-based within the page), ``item_id`` (str), ``aligned``
  (nullable boolean), ``watched`` (bool), ``rating`` (1-5, NaN when not watched) and
  ``feeling`` (str, ``""`` when none).
* ``sessions``: one row per agent session: ``user_id``, ``recommender``, ``exit_page`` (last
  page seen), ``exited`` (the agent chose to leave) and ``satisfaction`` (1-10, NaN when the
  interview failed).
* ``traits``: ``user_id``, the levels ``activity``, ``conformity``, ``diversity`` (1..3) and
  the raw statistics ``n_ratings``, ``conformity_mse``, ``n_top_genres``.

The validators turn a malformed frame into a ValueError naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from recagents.columns import ITEM, RATING, USER

RECOMMENDER = "recommender"

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


def require(frame: pd.DataFrame, columns: Iterable[str], name: str) -> None:
    """Raise a ValueError naming the missing columns of ``frame``."""
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} is missing column(s) {missing}; it has {list(frame.columns)}")


def as_series(values: pd.Series | dict, name: str) -> pd.Series:
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


def check_unknown(ids: Iterable[str], lookup: pd.Series, name: str) -> None:
    """Raise a ValueError naming the ids that ``lookup`` (called ``name``) lacks."""
    missing = sorted(set(ids) - set(lookup.index))
    if missing:
        raise ValueError(f"{len(missing)} item(s) missing from {name}, e.g. {missing[:5]}")


def check_boot(n_boot: int) -> None:
    """Raise a ValueError unless ``n_boot`` is an integer of at least 1."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 1:
        raise ValueError(f"n_boot must be an integer >= 1, got {n_boot!r}")


def bool_column(series: pd.Series, name: str) -> pd.Series:
    """Booleans from a bool/0-1/nullable column; missing values count as False."""
    try:
        values = series.astype("boolean")
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must hold booleans: {error}") from error
    return values.fillna(False).astype(bool)
