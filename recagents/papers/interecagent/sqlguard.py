"""Read-only, bounded SQL for InteRecAgent's planner: text checks, SQLite limits, allow-list.

The planner is a language model and its SQL is untrusted input. :class:`ReadOnlyTable` runs
it on an in-memory SQLite table :data:`TABLE` so that it can only read that table, within
bounds of time, memory and output size, and so that every failure becomes a
:class:`ToolError` the planner can read and recover from. The guards, in the order a
statement meets them, prefer SQLite's own mechanisms to hand-written parsing:

1. Text (:func:`_prepare_select`): at most :data:`SQL_MAX_CHARS` characters, checked before
   anything else looks at the text; one statement, starting with SELECT or WITH; a table name
   after FROM or JOIN is grounded to :data:`TABLE` (as the paper does) with a note.
2. The authorizer: SELECT, reading :data:`TABLE` and calling the functions of
   :data:`SQL_FUNCTIONS`; everything else is refused while the statement is prepared.
3. Per-connection limits (:data:`SQL_LIMITS`, ``Connection.setlimit``): the length of any
   string, blob or row (:data:`SQL_VALUE_MAX_BYTES`), of the SQL text, the result columns,
   compound SELECTs, expression depth, function arguments, LIKE patterns and the size of the
   compiled program. Temporary b-trees and sorts spill to temporary files (``temp_store =
   FILE``) instead of memory.
4. SQLite's heap (``PRAGMA hard_heap_limit``, :data:`SQL_HEAP_LIMIT_BYTES`): the one guard
   against blow-ups while a statement is *prepared* (nested subqueries that repeat a column
   are flattened into exponentially large expression trees before any row is read, where
   neither the time limit nor the program-size limit can see them). The limit is
   process-wide, so it is a generous backstop, far above what legitimate use needs.
5. Time: a progress handler stops a statement after ``timeout_s``, checked every
   :data:`PROGRESS_OPS` virtual-machine steps. The value and pattern limits keep any single
   step short (a quadratic function over the longest value allowed takes milliseconds), so
   a statement cannot overrun its deadline by more than a fraction of a second.
6. Output: rows are read one at a time (or in small batches) and never all at once: at most
   :data:`SQL_MAX_ROWS` rows and :data:`SQL_RESULT_MAX_CHARS` characters are kept, each text
   value is cut to :data:`CELL_CHARS` with a visible mark, and :func:`clip_text` caps any
   observation built from them. :meth:`ReadOnlyTable.select_ids` streams ids, keeps only
   those of the given candidates and stops after :data:`FILTER_MAX_ROWS` rows.

The limits, :class:`ToolError` and :func:`clip_text` are in
:mod:`~recagents.papers.interecagent.sqllimits` and the text check (1.) in
:mod:`~recagents.papers.interecagent.sqltext`; this module holds the results and
:class:`ReadOnlyTable` (2. to 6.) and re-exports the limits.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from rapidfuzz import fuzz, process

from recagents.papers.interecagent.sqllimits import (
    CELL_CHARS,
    COLUMNS,
    ERROR_CHARS,
    FILTER_MAX_ROWS,
    LOOKUP_CHARS,
    PROGRESS_OPS,
    SQL_FUNCTIONS,
    SQL_HEAP_LIMIT_BYTES,
    SQL_LIMITS,
    SQL_MAX_CHARS,
    SQL_MAX_COLUMNS,
    SQL_MAX_COMPOUND,
    SQL_MAX_EXPR_DEPTH,
    SQL_MAX_FUNCTION_ARGS,
    SQL_MAX_LIKE_PATTERN,
    SQL_MAX_PROGRAM_OPS,
    SQL_MAX_ROWS,
    SQL_MAX_VARIABLES,
    SQL_RESULT_MAX_CHARS,
    SQL_VALUE_MAX_BYTES,
    TABLE,
    ToolError,
    clip_text,
)
from recagents.papers.interecagent.sqltext import _has_order_by, _prepare_select, _PreparedSQL

__all__ = [
    "CELL_CHARS",
    "COLUMNS",
    "ERROR_CHARS",
    "FILTER_MAX_ROWS",
    "LOOKUP_CHARS",
    "PROGRESS_OPS",
    "SQL_FUNCTIONS",
    "SQL_HEAP_LIMIT_BYTES",
    "SQL_LIMITS",
    "SQL_MAX_CHARS",
    "SQL_MAX_COLUMNS",
    "SQL_MAX_COMPOUND",
    "SQL_MAX_EXPR_DEPTH",
    "SQL_MAX_FUNCTION_ARGS",
    "SQL_MAX_LIKE_PATTERN",
    "SQL_MAX_PROGRAM_OPS",
    "SQL_MAX_ROWS",
    "SQL_MAX_VARIABLES",
    "SQL_RESULT_MAX_CHARS",
    "SQL_VALUE_MAX_BYTES",
    "TABLE",
    "IdSelection",
    "ReadOnlyTable",
    "SelectResult",
    "ToolError",
    "clip_text",
]


_T = TypeVar("_T")


#: Failures of SQLite or of converting its values that a query can cause.
_SQL_FAILURES = (sqlite3.Error, sqlite3.Warning, MemoryError, OverflowError, UnicodeError)
#: Room kept at the end of a rendered table for its "... (N more rows not shown)" line.
_TAIL_CHARS = 60
#: Rows fetched per call while streaming ids.
_BATCH = 512


# --------------------------------------------------------------------------- results


def _cell(value: Any) -> str:
    """One value as shown in an observation, cut to :data:`CELL_CHARS`."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.2f}"
    return clip_text(str(value), CELL_CHARS)


def _kept(value: Any) -> tuple[Any, bool]:
    """A fetched value as kept in a result, and whether it was cut.

    Text longer than :data:`CELL_CHARS` is cut with a mark; a longer blob is described.
    """
    if isinstance(value, str) and len(value) > CELL_CHARS:
        return clip_text(value, CELL_CHARS), True
    if isinstance(value, bytes) and len(value) > CELL_CHARS:
        return f"<blob of {len(value):,} bytes, not shown>", True
    return value, False


def _size(value: Any) -> int:
    """Characters a kept value counts against :data:`SQL_RESULT_MAX_CHARS`."""
    return len(value) if isinstance(value, str | bytes) else 8


@dataclass(frozen=True)
class SelectResult:
    """Rows of one read-only SELECT.

    Taught in: not shown in a notebook (used by
        recagents.papers.interecagent.sqlguard.ReadOnlyTable.run_select).

    Attributes:
        sql: The statement that ran (after grounding).
        columns: Result column names.
        rows: Result rows (at most the row cap); text longer than :data:`CELL_CHARS` is cut
            with a visible mark and a note says so.
        trimmed: Whether the query returned more rows than were kept.
        notes: What grounding, trimming and cutting did, for the observation.
        ordered: Whether the outermost query has an ORDER BY.
    """

    sql: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    trimmed: bool
    notes: tuple[str, ...]
    ordered: bool

    def as_text(self, max_chars: int = LOOKUP_CHARS) -> str:
        """Rows as ``a | b | c`` lines under a header, at most ``max_chars`` characters.

        Each value is cut to :data:`CELL_CHARS`; rows that do not fit are counted in a last
        line; a first row too wide for the budget is shown cut rather than dropped.
        """
        if not self.rows:
            return "No rows."
        header = " | ".join(clip_text(c, CELL_CHARS) for c in self.columns)
        lines = [clip_text(header, max(max_chars // 2, 0))]
        used = len(lines[0])
        room = max_chars - _TAIL_CHARS
        shown = 0
        for row in self.rows:
            line = " | ".join(_cell(value) for value in row)
            if used + 1 + len(line) > room:
                if not shown and room - used - 1 >= _TAIL_CHARS:
                    lines.append(clip_text(line, room - used - 1))
                    shown = 1
                break
            lines.append(line)
            used += len(line) + 1
            shown += 1
        left = len(self.rows) - shown
        if left or self.trimmed:
            more = f"{left} more rows" + (" and possibly others" if self.trimmed else "")
            lines.append(f"... ({more} not shown)")
        return clip_text("\n".join(lines), max_chars)


class IdSelection(NamedTuple):
    """The candidate ids a SELECT named, read by :meth:`ReadOnlyTable.select_ids`.

    Taught in: not shown in a notebook (used by
        recagents.papers.interecagent.sqlguard.ReadOnlyTable.select_ids).

    Attributes:
        sql: The statement that ran (after grounding).
        columns: Result column names.
        ids: Ids of the ``id`` column that are candidates, each once, in the query's order.
        ordered: Whether the outermost query has an ORDER BY.
        notes: What grounding did, and how many rows named ids that are not candidates.
        rows_read: Rows the query returned.
    """

    sql: str
    columns: tuple[str, ...]
    ids: list[str]
    ordered: bool
    notes: tuple[str, ...]
    rows_read: int


# --------------------------------------------------------------------------- the table


def _value_problem(error: BaseException, message: str) -> str | None:
    """Memory, number-range and text-decoding failures, or ``None``."""
    if isinstance(error, MemoryError):
        return (
            "the query needs more memory than a tool may use (too large or too complex "
            "once SQLite expands it); simplify it: fewer subqueries, joins or repeated columns"
        )
    if isinstance(error, OverflowError):
        return f"a number in the query is out of range ({message})"
    if isinstance(error, UnicodeError) or "decode" in message:
        return "a value is not valid text (a CAST to BLOB or TEXT?); select the columns as they are"
    return None


def _unknown_name(message: str) -> str | None:
    """An unknown column (with the nearest real one), table or function, or ``None``."""
    if "no such column" in message:
        name = clip_text(message.split(":", 1)[1].strip(), 80)
        guess = process.extractOne(name.split(".")[-1], COLUMNS, scorer=fuzz.ratio)
        hint = f" Did you mean {guess[0]!r}?" if guess and guess[1] >= 60 else ""
        return f"unknown column {name!r}; the {TABLE} table has columns {', '.join(COLUMNS)}.{hint}"
    if "no such table" in message:
        name = clip_text(message.split(":", 1)[1].strip(), 80)
        return f"unknown table {name!r}; the only table is {TABLE!r}"
    if "no such function" in message:
        return f"{message}; the functions allowed are {', '.join(sorted(SQL_FUNCTIONS))}"
    return None


class ReadOnlyTable:
    """An in-memory SQLite table :data:`TABLE` that untrusted SQL may only read, within bounds.

    After construction, the connection's authorizer allows nothing but SELECT, reading the
    table and calling :data:`SQL_FUNCTIONS`; :data:`SQL_LIMITS` bound what a statement may
    build; SQLite's heap is capped process-wide at :data:`SQL_HEAP_LIMIT_BYTES` (the pragma
    only ever lowers an existing limit); temporary data spills to files. Every SQL text from
    a planner goes through :meth:`check_select`, :meth:`run_select` or :meth:`select_ids`,
    which turn any failure into a :class:`ToolError` with a short message.

    Taught in: not shown in a notebook (used by recagents.papers.interecagent.catalogue.ItemTable).

    Args:
        records: Rows of :data:`TABLE`, values in :data:`COLUMNS` order.
        timeout_s: Longest a query may run before it is stopped.
    """

    def __init__(self, records: Iterable[Sequence[Any]], timeout_s: float = 5.0) -> None:
        self.timeout_s = timeout_s
        self._trusted = True
        self._refused_function: str | None = None
        # Autocommit: the module never opens a transaction an untrusted statement could see.
        self._conn = sqlite3.connect(":memory:", isolation_level=None)
        self._conn.execute(f"PRAGMA hard_heap_limit = {SQL_HEAP_LIMIT_BYTES}")
        self._conn.execute("PRAGMA temp_store = FILE")
        self._conn.execute(
            f"CREATE TABLE {TABLE} (id TEXT PRIMARY KEY, title TEXT NOT NULL, "
            "release_year INTEGER, tags TEXT, visited_num INTEGER NOT NULL, avg_rating REAL)"
        )
        self._conn.executemany(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?, ?, ?)", records)
        for limit, value in SQL_LIMITS.items():
            self._conn.setlimit(limit, value)
        self._conn.set_authorizer(self._authorize)
        self._trusted = False

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
    ) -> int:
        """SQLite authorizer: SELECT, reading the item table and allowed functions only."""
        if self._trusted or action == sqlite3.SQLITE_SELECT:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            name = (arg2 or "").lower()
            if name in SQL_FUNCTIONS:
                return sqlite3.SQLITE_OK
            self._refused_function = self._refused_function or name
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_READ and arg1 in (TABLE, "bus_ids"):
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY

    @contextmanager
    def _trusted_block(self) -> Iterator[None]:
        self._trusted = True
        try:
            yield
        finally:
            self._trusted = False

    @contextmanager
    def _within(self, item_ids: Sequence[str] | None) -> Iterator[None]:
        """Let ``items`` mean only ``item_ids`` for the queries inside (a TEMP view shadows it)."""
        if item_ids is None:
            yield
            return
        with self._trusted_block():
            # Left over only if an earlier clean-up failed; start from a clean state.
            self._conn.execute(f"DROP VIEW IF EXISTS temp.{TABLE}")
            self._conn.execute("DROP TABLE IF EXISTS temp.bus_ids")
            self._conn.execute("CREATE TEMP TABLE bus_ids (id TEXT PRIMARY KEY)")
            self._conn.executemany("INSERT INTO temp.bus_ids VALUES (?)", [(i,) for i in item_ids])
            self._conn.execute(
                f"CREATE TEMP VIEW {TABLE} AS SELECT * FROM main.{TABLE} "
                "WHERE id IN (SELECT id FROM temp.bus_ids)"
            )
        try:
            yield
        finally:
            with self._trusted_block():
                self._conn.execute(f"DROP VIEW IF EXISTS temp.{TABLE}")
                self._conn.execute("DROP TABLE IF EXISTS temp.bus_ids")

    def _timed_out(self) -> ToolError:
        return ToolError(f"the query ran longer than {self.timeout_s:g} s and was stopped")

    def _sql_error(self, error: BaseException, sql: str) -> ToolError:
        """A short message, for the planner, on why ``sql`` failed."""
        message = str(error)
        text = (
            _value_problem(error, message)
            or _unknown_name(message)
            or self._refusal(message)
            or self._limit_hit(message)
            or f"SQL error: {clip_text(message, 200)} (in: {clip_text(sql, 200)})"
        )
        return ToolError(clip_text(text, ERROR_CHARS))

    def _refusal(self, message: str) -> str | None:
        """The authorizer's refusal, naming the refused function if there was one."""
        if "not authorized" not in message and "prohibited" not in message:
            return None
        if self._refused_function:
            return (
                f"refused: the SQL function {self._refused_function}() is not allowed here; "
                f"the functions allowed are {', '.join(sorted(SQL_FUNCTIONS))}"
            )
        return (
            "refused: the statement would do more than read the items table "
            "(only a read-only SELECT is allowed)"
        )

    def _limit_hit(self, message: str) -> str | None:
        """A time, size or pattern limit that stopped the query, or ? parameters."""
        if "interrupted" in message:
            return str(self._timed_out())
        if "string or blob too big" in message:
            return (
                f"a value or row grew past {SQL_VALUE_MAX_BYTES:,} bytes and the query was "
                "stopped; select fewer or shorter values (e.g. no group_concat over many rows)"
            )
        if "pattern too complex" in message:
            return f"a LIKE or GLOB pattern is longer than {SQL_MAX_LIKE_PATTERN} characters"
        if "binding" in message or "variable" in message:
            return "the SQL has ? parameters; write the values into the query instead"
        return None

    def check_select(self, sql: str) -> list[str]:
        """Validate ``sql`` as one read-only SELECT without running it.

        SQLite prepares ``EXPLAIN <sql>`` under the authorizer and the limits: preparing
        resolves every table, column and function and asks the authorizer for each action,
        and running EXPLAIN only lists the program; the query itself never runs.

        Returns:
            Notes on grounding (e.g. a table name that was replaced).

        Raises:
            ToolError: Why the SQL would be refused or fail.
        """
        prepared = _prepare_select(sql)
        self._refused_function = None
        try:
            self._conn.execute("EXPLAIN " + prepared.sql).fetchall()
        except _SQL_FAILURES as error:
            raise self._sql_error(error, prepared.sql) from error
        return prepared.notes

    def _execute(
        self,
        prepared: _PreparedSQL,
        within: Sequence[str] | None,
        read: Callable[[sqlite3.Cursor, float], _T],
    ) -> _T:
        """Run ``prepared`` (over ``within`` only) under the time limit; ``read`` its cursor.

        Any failure of SQLite or of converting its values, while preparing, running or
        reading, becomes a :class:`ToolError`.
        """
        try:
            with self._within(within):
                deadline = time.monotonic() + self.timeout_s
                self._refused_function = None
                self._conn.set_progress_handler(
                    lambda: int(time.monotonic() > deadline), PROGRESS_OPS
                )
                try:
                    cursor = self._conn.execute(prepared.sql)
                    try:
                        return read(cursor, deadline)
                    finally:
                        cursor.close()
                finally:
                    self._conn.set_progress_handler(None, 0)
        except _SQL_FAILURES as error:
            raise self._sql_error(error, prepared.sql) from error

    def run_select(
        self, sql: str, max_rows: int | None = 100, within: Sequence[str] | None = None
    ) -> SelectResult:
        """Run one read-only SELECT and return its rows.

        Rows are fetched one at a time: at most ``max_rows`` (never more than
        :data:`SQL_MAX_ROWS`) and :data:`SQL_RESULT_MAX_CHARS` characters are kept, and
        text longer than :data:`CELL_CHARS` is cut, so a wide or long result cannot fill
        memory.

        Args:
            sql: One SELECT (or WITH ... SELECT) statement on :data:`TABLE`. A different table
                name after FROM or JOIN is replaced by :data:`TABLE` and a note says so.
            max_rows: Most rows returned; ``None``: up to :data:`SQL_MAX_ROWS`. A note says
                when rows were cut.
            within: Restrict ``items`` to these ids for this query (the hard filter runs over
                the bus only), so ``LIMIT`` and aggregates see only them.

        Returns:
            The :class:`SelectResult`.

        Raises:
            ToolError: Several statements, anything but a SELECT (refused by the text check
                or by the authorizer), an unknown column (the message lists the real ones),
                a function outside :data:`SQL_FUNCTIONS`, a limit reached, the time limit, or
                any other SQL error; the table is never changed.
        """
        prepared = _prepare_select(sql)
        limit = SQL_MAX_ROWS if max_rows is None else max(0, min(max_rows, SQL_MAX_ROWS))

        def read(cursor: sqlite3.Cursor, deadline: float) -> SelectResult:
            columns = tuple(d[0] for d in cursor.description or ())
            rows: list[tuple[Any, ...]] = []
            budget, cut, trimmed, full = SQL_RESULT_MAX_CHARS, 0, False, False
            while (row := cursor.fetchone()) is not None:
                if time.monotonic() > deadline:
                    raise self._timed_out()
                if len(rows) >= limit or full:
                    trimmed = True
                    break
                kept = []
                for value in row:
                    value, was_cut = _kept(value)
                    cut += was_cut
                    budget -= _size(value)
                    kept.append(value)
                rows.append(tuple(kept))
                full = budget < 0
            notes = list(prepared.notes)
            if trimmed and full:
                notes.append(
                    f"the rows hold more than {SQL_RESULT_MAX_CHARS:,} characters; "
                    f"kept the first {len(rows):,}"
                )
            elif trimmed:
                notes.append(f"the query returned more than {limit} rows; showing the first")
            if cut:
                notes.append(f"{cut} long value(s) were cut to {CELL_CHARS} characters")
            return SelectResult(
                sql=prepared.sql,
                columns=columns,
                rows=rows,
                trimmed=trimmed,
                notes=tuple(notes),
                ordered=_has_order_by(prepared.tokens),
            )

        return self._execute(prepared, within, read)

    def select_ids(self, sql: str, within: Sequence[str] | None = None) -> IdSelection:
        """Run one read-only SELECT that selects ``id`` and return the ids it names.

        Rows are streamed in small batches; only the ``id`` column is kept, and with
        ``within`` only ids among ``within``, whatever the SQL says (a comma join with
        ``main.items`` can reach items outside the restriction; they are dropped). More than
        :data:`FILTER_MAX_ROWS` rows (or twice ``within``) stops the query.

        Args:
            sql: One SELECT on :data:`TABLE` whose result has a column named ``id``.
            within: Restrict ``items`` to these ids and keep only these ids.

        Returns:
            The :class:`IdSelection`.

        Raises:
            ToolError: As :meth:`run_select`, no ``id`` column, or too many rows.
        """
        prepared = _prepare_select(sql)
        allowed = None if within is None else set(within)
        max_read = max(FILTER_MAX_ROWS, 2 * len(allowed or ()))

        def read(cursor: sqlite3.Cursor, deadline: float) -> IdSelection:
            columns = tuple(d[0] for d in cursor.description or ())
            lowered = [c.lower() for c in columns]
            if "id" not in lowered:
                shown = clip_text(", ".join(columns) or "nothing", 200)
                raise ToolError(
                    "the query must select the id column, e.g. "
                    f"SELECT id FROM {TABLE} WHERE tags LIKE '%Comedy%'; this one selects {shown}"
                )
            column = lowered.index("id")
            ids: list[str] = []
            seen: set[str] = set()
            rows_read = outside = 0
            while batch := cursor.fetchmany(_BATCH):
                rows_read += len(batch)
                if rows_read > max_read:
                    raise ToolError(
                        f"the query returned more than {max_read:,} rows (a join repeating "
                        "items?); select each item once, e.g. SELECT id FROM items WHERE ..."
                    )
                if time.monotonic() > deadline:
                    raise self._timed_out()
                for row in batch:
                    if row[column] is None:
                        continue
                    item = str(row[column])
                    if allowed is not None and item not in allowed:
                        outside += 1
                    elif item not in seen:
                        seen.add(item)
                        ids.append(item)
            notes = list(prepared.notes)
            if outside:
                notes.append(
                    f"ignored {outside:,} row(s) naming items that are not candidates "
                    "(a hard filter only narrows the candidates)"
                )
            return IdSelection(
                sql=prepared.sql,
                columns=columns,
                ids=ids,
                ordered=_has_order_by(prepared.tokens),
                notes=tuple(notes),
                rows_read=rows_read,
            )

        return self._execute(prepared, within, read)

    def count_rows(self) -> int:
        """Rows in the table (the trusted way, for checks that nothing changed)."""
        with self._trusted_block():
            return int(self._conn.execute(f"SELECT COUNT(*) FROM main.{TABLE}").fetchone()[0])
