"""Helpers that every notebook uses: one-line setup, and recording headline results.

A notebook starts with :func:`setup` (seeds, plotting theme, pandas display options) and ends
by calling :func:`record` for each headline metric. :func:`record` emits a Jupyter output with
the custom MIME type :data:`RECORD_MIME`, so the values travel inside the executed ``.ipynb``;
tests and the cross-paper report read them back with :func:`read_records`.

Importing this module has no side effects.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recagents.expectations import expectation as expectation  # re-exported for notebooks

if TYPE_CHECKING:
    from recagents.protocol import PaperRun

RECORD_MIME = "application/vnd.recagents.record+json"
"""MIME type of the display outputs written by :func:`record`."""

TORCH_THREADS = 1
"""PyTorch's CPU threads in a notebook (:func:`setup`): bitwise-repeatable training and
scoring on any machine and under any ``make -j``, for the price of a slower training on a
machine with many cores (the baselines train in minutes on one)."""

# Known-benign warnings silenced by setup(). Each entry: (message regex, category, why).
# Keep this list short; anything not listed here is a real signal and must stay visible.
_BENIGN_WARNINGS: tuple[tuple[str, type[Warning], str], ...] = (
    # tqdm.auto inside a kernel without ipywidgets (not a dependency) falls back to the text
    # progress bar and says so with a TqdmWarning (a plain Warning subclass); harmless.
    (r"IProgress not found", Warning, "tqdm.auto without ipywidgets"),
)


def setup(seed: int = 0) -> None:
    """Make a notebook run reproducible and its output uniform.

    Seeds Python's :mod:`random`, NumPy's global generator and, if it is installed, PyTorch
    (CPU and CUDA), whose CPU work it keeps on :data:`TORCH_THREADS` thread; applies the
    shared plotting theme; sets pandas display options (up to 50 columns, floats with 4
    decimals); and silences a short, documented list of known-benign
    warnings. Calling it again with the same seed gives the same state.

    ``PYTHONHASHSEED`` cannot be changed from inside a running interpreter, so code must not
    rely on the iteration order of sets of strings.

    Args:
        seed: Seed for every random number generator.
    """
    import numpy as np
    import pandas as pd

    from recagents.plotting import set_theme

    random.seed(seed)
    np.random.seed(seed)
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.manual_seed(seed)  # also seeds every CUDA device
        # One CPU thread: a matrix product split over another number of threads sums in
        # another order, so trained weights (and the prompts built from their rankings)
        # would differ in the last bits between machines and between `make -j1` and `-j2`.
        torch.set_num_threads(TORCH_THREADS)

    set_theme()

    pd.set_option("display.max_columns", 50)
    pd.set_option("display.width", 120)
    pd.set_option("display.precision", 4)
    pd.set_option("display.float_format", "{:.4f}".format)

    for message, category, _why in _BENIGN_WARNINGS:
        # filterwarnings replaces an identical filter instead of stacking it: idempotent.
        warnings.filterwarnings("ignore", message=message, category=category)


def _to_json_value(value: Any, where: str) -> Any:
    """Convert ``value`` to plain JSON types (numpy scalars/arrays included) or raise."""
    import numpy as np

    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()

    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}; only finite numbers can be recorded")
        return value
    if isinstance(value, list | tuple):
        return [_to_json_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for key, v in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has a non-string key {key!r}; JSON keys must be str")
            out[key] = _to_json_value(v, f"{where}[{key!r}]")
        return out
    raise TypeError(
        f"{where} has type {type(value).__name__}, which cannot be recorded; record a number, "
        f"string, bool, None, or a list/dict of them (e.g. use .tolist() or .to_dict())"
    )


def record(name: str, value: Any) -> None:
    """Record a headline result so that tests and reports can read it from the notebook.

    Emits a display output with MIME type :data:`RECORD_MIME` holding
    ``{"name": name, "value": value}``, plus a ``text/plain`` line ``name = value``. Outside
    a notebook only the text line is printed.

    Args:
        name: Key of the result, e.g. ``"ndcg@10"``.
        value: A JSON scalar (int, float, str, bool, None), or a list/dict of them. NumPy
            scalars and arrays are converted to Python values.

    Raises:
        TypeError: If ``name`` is not a non-empty string or ``value`` is not recordable.
        ValueError: If ``value`` holds a NaN or infinite float (not valid JSON).
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"record name must be a non-empty string, got {name!r}")
    clean = _to_json_value(value, f"record {name!r}")
    text = f"{name} = {json.dumps(clean, sort_keys=True)}"

    from IPython.core.interactiveshell import InteractiveShell

    if not InteractiveShell.initialized():
        # Plain Python: IPython's display() would print the whole MIME bundle.
        print(text)
        return
    from IPython.display import display

    display({RECORD_MIME: {"name": name, "value": clean}, "text/plain": text}, raw=True)


def run_records(run: PaperRun) -> dict[str, Any]:
    """The records of a paper's run: ``<metric>`` -> ``[value, low, high]``, ``<metric>/n`` -> n.

    Values are rounded to 4 decimals, as every notebook records its numbers.

    One row of :attr:`~recagents.protocol.PaperRun.metrics` gives two records, named by the
    metric (e.g. ``"HR@1/AFL"``), so a claim names a metric, not a notebook's f-string; the
    test of the one pipeline compares these with what the paper's ``run`` returns.
    """
    records: dict[str, Any] = {}
    for row in run.metrics.itertuples(index=False):
        records[str(row.metric)] = [round(float(v), 4) for v in (row.value, row.low, row.high)]
        records[f"{row.metric}/n"] = int(row.n)
    return records


def record_run(run: PaperRun) -> None:
    """:func:`record` every headline metric of a paper's run (:func:`run_records`)."""
    for name, value in run_records(run).items():
        record(name, value)


def read_records(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read every value recorded with :func:`record` from an executed notebook.

    Args:
        path: The executed ``.ipynb`` file.

    Returns:
        Mapping of record name to value, in notebook order; a later record with the same
        name overrides an earlier one.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
    """
    import nbformat

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"executed notebook not found: {path}")
    nb = nbformat.read(path, as_version=4)
    records: dict[str, Any] = {}
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") not in ("display_data", "execute_result"):
                continue
            payload = output.get("data", {}).get(RECORD_MIME)
            if isinstance(payload, Mapping) and "name" in payload:
                records[payload["name"]] = _plain(payload.get("value"))
    return records


def _plain(value: Any) -> Any:
    """Turn nbformat's attribute dicts back into plain ``dict``/``list`` values."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def pick_profile(profiles: Mapping[str, Mapping[str, Any]], name: str) -> dict[str, Any]:
    """The settings of profile ``name`` from a notebook's ``PROFILES`` table, checked.

    Every profile must have the same keys, so a parameter cannot silently fall back to a value
    that only one profile defines.

    Raises:
        ValueError: ``name`` is not a profile, or the profiles' keys differ.
    """
    if name not in profiles:
        raise ValueError(f"PROFILE must be one of {list(profiles)}, got {name!r}")
    keys = {key: set(values) for key, values in profiles.items()}
    first = next(iter(keys.values()))
    uneven = {key: sorted(first ^ value) for key, value in keys.items() if value != first}
    if uneven:
        raise ValueError(f"PROFILES do not share their keys: {uneven}")
    return dict(profiles[name])


def show_source(function: Any) -> Any:
    """The source of a library function, shown in a notebook beside the cell that runs it.

    Returns:
        ``IPython.display.Code`` of the function's source (Python highlighting).
    """
    import inspect

    from IPython.display import Code

    return Code(inspect.getsource(function), language="python")
