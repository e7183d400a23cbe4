"""The two values of a claim: the paper's, from ``paper_numbers.json``, and ours, from the records.

:func:`paper_value` reads the paper's cell (a number, a comparison of two rows, or a
statement in words) with its tag and source; :class:`Estimate` is our recorded mean with its
95% interval, read from an executed notebook's records by a
:class:`~recagents.report.claims.RecordRef` (:func:`resolve_key` fills its placeholders). A
record a run did not write is a :class:`MissingRecord`.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recagents.report.claims import PaperRef, RecordRef

_NUMBER = re.compile(r"[-+]?\d*\.?\d+")


@dataclass(frozen=True)
class PaperValue:
    """The paper's side of a claim, as read from ``paper_numbers.json``.

    Attributes:
        text: What to show (the printed cell, ``"A vs B"`` for a comparison, or the quote).
        number: The value for ``contains``/``at_least`` (scaled), or ``None``.
        tag: Confidence tag(s) of the row(s), e.g. ``"[note]"``.
        table: The table id.
        where: Which row and column, in words.
        source: The paper and the table's source line.
        difference: For a comparison of two cells that each hold one number, the first minus
            the second (scaled): the difference the claim is about.
    """

    text: str
    number: float | None
    tag: str
    table: str
    where: str
    source: str
    difference: float | None = None


def _parse_number(text: str) -> float | None:
    """The one number printed in a cell (``"3.85*"`` -> 3.85), or ``None`` if none or several."""
    found = _NUMBER.findall(text.replace(",", ""))
    return float(found[0]) if len(found) == 1 else None


def _select_row(frame: Any, table_id: str, row: Mapping[str, str]) -> Any:
    """The one row of ``frame`` matching ``row``; a clear ``KeyError`` otherwise."""
    mask = None
    for column, value in row.items():
        if column not in frame.columns:
            raise KeyError(f"{table_id} has no column {column!r}; columns: {list(frame.columns)}")
        hit = frame[column] == value
        mask = hit if mask is None else mask & hit
    rows = frame if mask is None else frame[mask]
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} rows of {table_id} match {dict(row)}; expected exactly 1")
    return rows.iloc[0]


def paper_value(ref: PaperRef) -> PaperValue:
    """Read the paper's side of a claim from ``paper_numbers.json``.

    Args:
        ref: Where the value is.

    Returns:
        The shown text, the number (scaled) when the cell holds exactly one, tag and source.

    Raises:
        KeyError: An unknown table, column, or a row filter that does not match exactly one row.
    """
    from recagents import paper_numbers

    frame = paper_numbers.table(ref.table)
    source = frame.attrs["source"]
    if not ref.row and ref.column is None:
        all_tags = " ".join(sorted(set(frame["tag"])))
        return PaperValue(ref.quote or "stated in words", None, all_tags, ref.table, "", source)
    row = _select_row(frame, ref.table, ref.row)
    column = ref.column or "claim"
    if column not in frame.columns:
        raise KeyError(f"{ref.table} has no column {column!r}; columns: {list(frame.columns)}")
    text = str(row[column])
    tags = {str(row["tag"])}
    hidden = ("tag", column)  # the shown text already says what the row is
    where = " · ".join(str(v) for k, v in ref.row.items() if k not in hidden)
    if ref.has_versus:
        other = _select_row(frame, ref.table, ref.versus_row or ref.row)
        other_column = ref.versus_column or column
        if other_column not in frame.columns:
            raise KeyError(f"{ref.table} has no column {other_column!r}")
        tags.add(str(other["tag"]))
        other_where = " · ".join(str(v) for v in (ref.versus_row or {}).values())
        first, second = _parse_number(text), _parse_number(str(other[other_column]))
        diff = None if first is None or second is None else round((first - second) * ref.scale, 6)
        text = f"{text} vs {other[other_column]}"
        where = f"{where} vs {other_where or other_column}"
        return PaperValue(text, None, " ".join(sorted(tags)), ref.table, where, source, diff)
    number = _parse_number(text) if ref.column is not None else None
    if number is not None and ref.scale != 1.0:
        number = round(number * ref.scale, 6)
        text = f"{text} (= {number:.4f})"
    if column not in ("claim", "value"):
        where = f"{where} · {column}" if where else column
    if ref.quote:
        text = f"{text}: {ref.quote}"
    return PaperValue(text, number, " ".join(sorted(tags)), ref.table, where, source)


@dataclass(frozen=True)
class Estimate:
    """Our value: a mean with its 95% interval, or a point value.

    Attributes:
        mean: The mean (or the point value).
        low: Lower end of the 95% interval, ``None`` for a point value.
        high: Upper end of the 95% interval, ``None`` for a point value.
        n: Sample size when the record holds one (REPRODUCTION.md shows it in its own column).
    """

    mean: float
    low: float | None = None
    high: float | None = None
    n: int | None = None

    @property
    def has_interval(self) -> bool:
        """Whether a 95% interval was recorded."""
        return self.low is not None and self.high is not None

    @property
    def half_width(self) -> float | None:
        """Half the interval's width, the smallest shift it resolves; ``None`` without one."""
        if self.low is None or self.high is None:
            return None
        from recagents.metrics import interval_half_width

        return interval_half_width(self.low, self.high)

    @property
    def is_zero(self) -> bool:
        """Whether the value is exactly 0 with no spread (every unit scored 0)."""
        return self.mean == 0 and (self.half_width or 0.0) == 0

    def text(self) -> str:
        """``"0.4356 [0.2891, 0.6309]"``, or ``"0.4356 (no interval)"``."""
        if self.has_interval:
            return f"{self.mean:.4f} [{self.low:.4f}, {self.high:.4f}]"
        return f"{self.mean:.4f} (no interval)"

    @classmethod
    def from_value(cls, value: Any, n: int | None = None) -> Estimate:
        """Turn a recorded value (``[mean, low, high]`` or a number) into an estimate.

        Raises:
            ValueError: The value is neither.
        """
        if isinstance(value, bool):
            raise ValueError(f"expected a number or [mean, low, high], got {value!r}")
        if isinstance(value, int | float):
            return cls(float(value), n=n)
        if (
            isinstance(value, list | tuple)
            and len(value) == 3
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        ):
            mean, low, high = (float(v) for v in value)
            return cls(mean, low, high, n=n)
        raise ValueError(f"expected a number or [mean, low, high], got {value!r}")


class MissingRecord(KeyError):
    """A record the claim needs is not in this run's records."""


def resolve_key(template: str, records: Mapping[str, Any]) -> str:
    """Fill ``{name}`` placeholders of a record key from the notebook's other records.

    Raises:
        MissingRecord: A placeholder names a record this run did not write.
    """
    names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    missing = [name for name in names if name not in records]
    if missing:
        raise MissingRecord(f"record {missing[0]!r} (needed to name {template!r})")
    return template.format(**{name: records[name] for name in names})


def read_ref(ref: RecordRef, records: Mapping[str, Any]) -> tuple[str, Any]:
    """The resolved key of ``ref`` and ``(value, n)`` (``n`` from the record, when it holds one).

    Raises:
        MissingRecord: The run wrote no such record, or the record lacks ``ref.field``.
    """
    key = resolve_key(ref.key, records)
    if key not in records:
        raise MissingRecord(f"record {key!r}")
    value = records[key]
    if ref.field is not None:
        if not isinstance(value, Mapping) or ref.field not in value:
            raise MissingRecord(f"field {ref.field!r} of record {key!r}")
        n = value.get("n") if isinstance(value.get("n"), int) else None
        return key, (value[ref.field], n)
    return key, (value, None)


def read_estimate(ref: RecordRef, records: Mapping[str, Any]) -> tuple[str, Estimate]:
    """The resolved key of ``ref`` and its :class:`Estimate` (a clear error for a bad value)."""
    key, (value, n) = read_ref(ref, records)
    try:
        return key, Estimate.from_value(value, n)
    except ValueError as error:
        raise ValueError(f"record {key!r}: {error}") from None
