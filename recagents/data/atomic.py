"""RecBole's atomic files (``.inter``, ``.item``, ``.user``) read strictly into frames.

Split out of :mod:`recagents.data` (which re-exports :func:`read_atomic` and
:class:`DatasetError`): a malformed file stops with one line naming the file and the line
instead of shifting columns in silence.
"""

from __future__ import annotations

import codecs
import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

#: RecBole's field types: ``float`` fields become floats, the others stay strings.
FIELD_TYPES = ("token", "token_seq", "float", "float_seq")

#: The header an interaction file needs, for error messages.
INTER_HEADER = "user_id:token, item_id:token [, rating:float, timestamp:float]"

_FLOAT_NA = ["", "nan", "NaN", "NAN"]  # the spellings of a missing float (NaN)
_TRAILING = "\0trailing"  # the empty column of a trailing tab on every data line


class DatasetError(ValueError):
    """A dataset name, path or file that cannot be used, with a message saying why."""


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

    Raises:
        DatasetError: One of the above, a value that does not parse in a ``float`` field, or
            a missing required column, in one line naming the file.
    """
    return parse_atomic(path, required).frame


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
class Parsed:
    """An atomic file as a frame, with the data lines its rows came from (for messages)."""

    frame: pd.DataFrame
    lines: _Lines

    def raw_field(self, row: int, column: str) -> str:
        """The text of ``column`` in row ``row`` as written in the file, for messages."""
        return self.lines.raw(row).split(b"\t")[self.frame.columns.get_loc(column)].decode()


def parse_atomic(path: Path, required: tuple[str, ...] = ()) -> Parsed:
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
        return Parsed(pd.DataFrame(empty_frame), lines)
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
    return Parsed(frame.drop(columns=_TRAILING) if _TRAILING in frame else frame, lines)


def _check_utf8(path: Path, data: bytes) -> None:
    """Fail with the line and byte offset of the first byte that is not UTF-8, or of a NUL.

    A NUL byte has no place in these text files, and pandas' parser would end the field at
    it in silence (a field ``i1<NUL>-EXTRA`` would load as ``i1``).
    """
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise DatasetError(
            f"{path}: line {line} (byte offset {error.start}): byte 0x{data[error.start]:02x} "
            "is not valid UTF-8; save the file as UTF-8"
        ) from None
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise DatasetError(
            f"{path}: line {line} (byte offset {nul}): a NUL byte (0x00), which a text "
            "dataset file cannot hold; remove it"
        )


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
                value = float(text or "0")
            except ValueError:
                return DatasetError(
                    f"{path}: line {number}: cannot parse {text!r} as a number "
                    f"(column {name}:float)"
                )
            if math.isinf(value) and "inf" not in text.lower():  # 1e400: out of range
                return DatasetError(
                    f"{path}: line {number}: {text!r} is beyond the range of a float "
                    f"(column {name}:float)"
                )
    reason = " ".join(str(error).split())
    return DatasetError(f"{path}: cannot parse ({reason})")
