"""Read-only, bounded SQL for InteRecAgent's planner: text checks, SQLite limits, allow-list.

The planner is a language model and its SQL is untrusted input. :class:`ReadOnlyTable` runs
it on an in-memory SQLite table :data:`TABLE`, in a separate worker process
(:mod:`~recagents.papers.interecagent.sqlworker`), so that it can only read that table,
within bounds of time, memory, temporary storage and output size, without touching this
process's SQLite (the reply cache's included), and so that every failure becomes a
:class:`ToolError` the planner can read and recover from. The guards, in the order a
statement meets them, prefer SQLite's own mechanisms to hand-written parsing:

1. Text (:func:`prepare_select`, in this process): at most :data:`SQL_MAX_CHARS`
   characters, checked before anything else looks at the text; one statement, starting with
   SELECT or WITH; a table name after FROM or JOIN is grounded to :data:`TABLE` (as the paper
   does) with a note.
2. The authorizer: SELECT, reading :data:`TABLE` and calling the functions of
   :data:`SQL_FUNCTIONS`; everything else is refused while the statement is prepared.
3. Per-connection limits (:data:`SQL_LIMITS`, ``Connection.setlimit``): the length of any
   string, blob or row (:data:`SQL_VALUE_MAX_BYTES`), of the SQL text, the result columns,
   compound SELECTs, expression depth, function arguments, LIKE patterns and the size of the
   compiled program.
4. The worker's heap (``PRAGMA hard_heap_limit``): :data:`SQL_HEAP_LIMIT_BYTES` plus room
   for the table itself (:func:`_heap_bytes`). Sorts, temporary b-trees, materialised
   subqueries and window buffers live on that heap too (``temp_store = MEMORY``), so a query
   that would spill to temporary files (an ORDER BY, GROUP BY, DISTINCT or window over a
   cross join) fails there within about a second, as does a statement that blows up while it
   is *prepared* (nested subqueries that repeat a column are flattened into exponentially
   large expression trees before any row is read). The limit is process-wide in SQLite,
   which is why it is set in the worker: in this process it made the reply cache's writes
   fail while a bomb ran in another thread. The worker may not write any file
   (``RLIMIT_FSIZE = 0``) and its address space is capped (``RLIMIT_AS``) as a backstop.
5. Time: a progress handler in the worker stops a statement after ``timeout_s``, checked
   every :data:`PROGRESS_OPS` virtual-machine steps. The value and pattern limits keep any
   single step short (a quadratic function over the longest value allowed takes
   milliseconds). If the worker still has not answered :data:`WORKER_GRACE_S` after the time
   limit, this process kills it and starts a fresh one for the next query.
6. Output: rows are read one at a time (or in small batches) and never all at once: at most
   :data:`SQL_MAX_ROWS` rows and :data:`SQL_RESULT_MAX_CHARS` characters are kept, each text
   value is cut to :data:`CELL_CHARS` with a visible mark, and :func:`clip_text` caps any
   observation built from them. :meth:`ReadOnlyTable.select_ids` streams ids, keeps only
   those of the given candidates and stops after :data:`FILTER_MAX_ROWS` rows.

The limits, :class:`ToolError` and :func:`clip_text` are in
:mod:`~recagents.papers.interecagent.sqllimits` and the text check (1.) in
:mod:`~recagents.papers.interecagent.sqltext`; this module holds the results and
:class:`ReadOnlyTable` (the client of the worker, which does 2. to 6.). The worker starts
with the first query of a table (about 0.1 s) and ends with :meth:`ReadOnlyTable.close` or
when the table is garbage-collected.
"""

from __future__ import annotations

import marshal
import os
import sqlite3
import subprocess
import sys
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NamedTuple

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
    SQL_MAX_LIKE_PATTERN,
    SQL_MAX_ROWS,
    SQL_RESULT_MAX_CHARS,
    SQL_VALUE_MAX_BYTES,
    TABLE,
    ToolError,
    clip_text,
)
from recagents.papers.interecagent.sqltext import has_order_by, prepare_select

#: Seconds past a query's time limit after which this process stops a worker that has not
#: answered (the worker's own deadline check normally answers first).
WORKER_GRACE_S = 2.0
#: The worker's SQLite heap holds the table too: :data:`SQL_HEAP_LIMIT_BYTES` plus this many
#: times the characters of the table's values (its b-tree takes about twice that, measured
#: at 100,000 rows; a sort of the whole table about as much again).
_TABLE_HEAP_FACTOR = 4
#: Address space of the worker beyond its heap limit (``RLIMIT_AS``, a backstop; the worker's
#: interpreter takes about 20 MB).
_WORKER_ADDRESS_SPACE_EXTRA = 256 * 2**20
#: Longest wait for a new worker to load its table.
_WORKER_START_S = 60.0
#: Largest reply accepted from the worker (replies are bounded by the output limits).
_REPLY_MAX_BYTES = 64 * 2**20
#: The worker's script, run by path with ``-I -S``: stdlib only, no project imports.
_WORKER_SCRIPT = Path(__file__).with_name("sqlworker.py")
#: Exceptions a worker reports, by name (see ``sqlworker.ERROR_KINDS``).
_REPORTED = {
    "MemoryError": MemoryError,
    "OverflowError": OverflowError,
    "UnicodeError": UnicodeError,
    "RecursionError": RecursionError,
    "Warning": sqlite3.Warning,
    "Error": sqlite3.Error,
}
#: The table's schema, in the worker and in this process's trusted copy.
_CREATE = (
    f"CREATE TABLE {TABLE} (id TEXT PRIMARY KEY, title TEXT NOT NULL, "
    "release_year INTEGER, tags TEXT, visited_num INTEGER NOT NULL, avg_rating REAL)"
)
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


def _restored(value: Any) -> tuple[Any, bool]:
    """A value as the worker sent it, as kept in a result, and whether it was cut.

    The worker sends a text or blob longer than :data:`CELL_CHARS` as ``(prefix, length)``
    (SQLite never returns a tuple): text is cut with the mark :func:`clip_text` gives the
    whole value (its length is at most :data:`SQL_VALUE_MAX_BYTES`), a blob is described.
    """
    if not isinstance(value, tuple):
        return value, False
    prefix, length = value
    if isinstance(prefix, str):
        return clip_text(prefix.ljust(length), CELL_CHARS), True
    return f"<blob of {length:,} bytes, not shown>", True


@dataclass(frozen=True)
class SelectResult:
    """Rows of one read-only SELECT.

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
            "the query needs more memory than a tool may use (its sorts and temporary tables "
            "included, or it is too complex once SQLite expands it); simplify it: sort, group "
            "or join fewer rows, use fewer subqueries or repeated columns"
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


def _refusal(message: str, refused: str | None) -> str | None:
    """The authorizer's refusal, naming the refused function if there was one."""
    if "not authorized" not in message and "prohibited" not in message:
        return None
    if refused:
        return (
            f"refused: the SQL function {refused}() is not allowed here; "
            f"the functions allowed are {', '.join(sorted(SQL_FUNCTIONS))}"
        )
    return (
        "refused: the statement would do more than read the items table "
        "(only a read-only SELECT is allowed)"
    )


def _heap_bytes(records: Sequence[Sequence[Any]]) -> int:
    """The worker's SQLite heap limit: :data:`SQL_HEAP_LIMIT_BYTES` plus room for the table."""
    chars = sum(len(v) if isinstance(v, str | bytes) else 8 for row in records for v in row)
    return SQL_HEAP_LIMIT_BYTES + _TABLE_HEAP_FACTOR * chars


class _WorkerGone(Exception):
    """The worker stopped, or broke the protocol, while a request was in flight."""


class _WorkerSilent(Exception):
    """The worker did not answer in time."""


class _Worker:
    """A running :mod:`~recagents.papers.interecagent.sqlworker` and its channel.

    Args:
        config: The worker's first frame (see :mod:`~recagents.papers.interecagent.sqlworker`).

    Raises:
        RuntimeError: The worker could not be started or could not load the table.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        self.owner = os.getpid()
        self._closed = False
        to_child, self._to_child_w = os.pipe()
        self._from_child_r, from_child = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_WORKER_SCRIPT)],
                stdin=to_child,
                stdout=from_child,
                stderr=subprocess.DEVNULL,
            )
        except OSError as error:
            os.close(self._to_child_w)
            os.close(self._from_child_r)
            raise RuntimeError(
                f"could not start the SQL worker process ({sys.executable} {_WORKER_SCRIPT}): "
                f"{error}"
            ) from error
        finally:
            os.close(to_child)
            os.close(from_child)
        self._send = Connection(self._to_child_w, readable=False)
        self._recv = Connection(self._from_child_r, writable=False)
        try:
            reply = self.call(config, _WORKER_START_S)
        except (_WorkerGone, _WorkerSilent) as error:
            self.kill()
            raise RuntimeError(
                f"the SQL worker process ({_WORKER_SCRIPT}) did not start within "
                f"{_WORKER_START_S:g} s: {type(error).__name__} {error}"
            ) from error
        if reply[0] != "ok":
            self.close()
            raise RuntimeError(
                f"the SQL worker process ({_WORKER_SCRIPT}) could not load the table: "
                f"{reply[1]}: {clip_text(str(reply[2]), 300)} (its SQLite heap is capped at "
                f"{config['heap_bytes']:,} bytes; see SQL_HEAP_LIMIT_BYTES)"
            )

    @property
    def usable(self) -> bool:
        """Whether this process started the worker and it is still running."""
        return not self._closed and self.owner == os.getpid() and self.process.poll() is None

    def call(self, message: Any, timeout_s: float) -> tuple[Any, ...]:
        """Send one frame and return the reply.

        Raises:
            _WorkerSilent: No reply within ``timeout_s`` (the worker is left as it is).
            _WorkerGone: The worker stopped or sent something that is not a reply.
        """
        try:
            self._send.send_bytes(marshal.dumps(message))
            if not self._recv.poll(timeout_s):
                raise _WorkerSilent
            data = self._recv.recv_bytes(_REPLY_MAX_BYTES)
        except (EOFError, OSError) as error:
            raise _WorkerGone(self._ending()) from error
        try:
            reply = marshal.loads(data)
        except (EOFError, ValueError, TypeError) as error:
            raise _WorkerGone("it sent an unreadable reply") from error
        if not isinstance(reply, tuple) or not reply:
            raise _WorkerGone("it sent an unreadable reply")
        return reply

    def _ending(self) -> str:
        """How the worker ended, for a message (it is given a moment to finish exiting)."""
        try:
            code = self.process.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            return "it closed its channel"
        return f"killed by signal {-code}" if code < 0 else f"exit status {code}"

    def close(self) -> None:
        """End the worker (it exits when its input closes; killed if it does not)."""
        if self._closed:
            return
        self._closed = True
        for channel in (self._send, self._recv):
            channel.close()
        if self.owner != os.getpid():
            return  # a forked child: the worker belongs to the parent
        try:
            self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """Stop the worker at once."""
        self._closed = True
        for channel in (self._send, self._recv):
            channel.close()
        if self.owner == os.getpid() and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class ReadOnlyTable:
    """An in-memory SQLite table :data:`TABLE` that untrusted SQL may only read, within bounds.

    This process keeps a trusted copy of the table (:meth:`count_rows`); every SQL text from a
    planner goes through :meth:`check_select`, :meth:`run_select` or :meth:`select_ids`, which
    send it to a worker process where the authorizer allows nothing but SELECT, reading the
    table and calling :data:`SQL_FUNCTIONS`, :data:`SQL_LIMITS` bound what a statement may
    build, SQLite's heap is capped (temporary sorts and tables included, see
    :func:`_heap_bytes`) and no file may be written; every failure becomes a
    :class:`ToolError` with a short message. The worker starts with the first query and ends
    with :meth:`close` or when the table is garbage-collected; one that stopped is replaced.

    Args:
        records: Rows of :data:`TABLE`, values in :data:`COLUMNS` order.
        timeout_s: Longest a query may run before it is stopped.
    """

    def __init__(self, records: Iterable[Sequence[Any]], timeout_s: float = 5.0) -> None:
        self.timeout_s = timeout_s
        self._trusted = True
        self._worker: _Worker | None = None
        self._finalizer: weakref.finalize | None = None
        self._worker_lock = threading.Lock()
        # Autocommit; this copy only ever runs the module's own statements (and the
        # authorizer and limits refuse anything else should someone try).
        self._conn = sqlite3.connect(":memory:", isolation_level=None)
        self._conn.execute(_CREATE)
        self._conn.executemany(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?, ?, ?)", records)
        for limit, value in SQL_LIMITS.items():
            self._conn.setlimit(limit, value)
        self._conn.set_authorizer(self._authorize)
        self._trusted = False

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
    ) -> int:
        """SQLite authorizer of this process's copy: SELECT and reading the table only."""
        if self._trusted or action == sqlite3.SQLITE_SELECT:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in SQL_FUNCTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ and arg1 == TABLE:
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY

    @contextmanager
    def _trusted_block(self) -> Iterator[None]:
        self._trusted = True
        try:
            yield
        finally:
            self._trusted = False

    # ------------------------------------------------------------------ the worker

    def _start_worker(self) -> _Worker:
        """A worker loaded with this table (read from the trusted copy), ended with the table."""
        with self._trusted_block():
            records = self._conn.execute(f"SELECT * FROM main.{TABLE}").fetchall()
        worker = _Worker(
            {
                "create": _CREATE,
                "table": TABLE,
                "records": records,
                "limits": dict(SQL_LIMITS),
                "functions": sorted(SQL_FUNCTIONS),
                "heap_bytes": _heap_bytes(records),
                "address_space": _heap_bytes(records) + _WORKER_ADDRESS_SPACE_EXTRA,
                "progress_ops": PROGRESS_OPS,
            }
        )
        if self._finalizer is not None:
            self._finalizer.detach()
        self._finalizer = weakref.finalize(self, worker.close)
        return worker

    def _request(
        self, op: str, sql: str, within: Sequence[str] | None = None, args: Any = None
    ) -> Any:
        """Send one request to the worker (started or replaced as needed); its payload.

        Raises:
            ToolError: The statement failed (see :meth:`_sql_error`), ran past the time limit,
                or the worker stopped while running it (a fresh one serves the next query).
        """
        ids = None if within is None else [str(i) for i in within]
        with self._worker_lock:
            if self._worker is None or not self._worker.usable:
                if self._worker is not None:
                    self._worker.kill()  # after a fork: only closes the inherited channel
                self._worker = self._start_worker()
            worker = self._worker
            try:
                reply = worker.call(
                    (op, sql, ids, args, self.timeout_s), self.timeout_s + WORKER_GRACE_S
                )
            except _WorkerSilent:
                worker.kill()
                raise self._timed_out() from None
            except _WorkerGone as error:
                worker.kill()
                raise ToolError(
                    f"the SQL worker process stopped while running the query ({error}); "
                    "a fresh one will run the next query. Simplify the query"
                ) from None
            except BaseException:
                worker.kill()  # e.g. Ctrl-C: a reply may still be on its way
                raise
        if reply[0] == "ok":
            return reply[1]
        _, kind, message, refused = reply
        raise self._failure(str(kind), str(message), refused, sql)

    def _worker_status(self) -> dict[str, Any]:
        """The worker's settings and process id (starting it if needed); for tests."""
        return dict(self._request("status", ""))

    def close(self) -> None:
        """Stop the worker process now (a later query starts a new one)."""
        with self._worker_lock:
            if self._worker is not None:
                self._worker.close()
                self._worker = None

    # ------------------------------------------------------------------ errors

    def _timed_out(self) -> ToolError:
        return ToolError(f"the query ran longer than {self.timeout_s:g} s and was stopped")

    def _failure(self, kind: str, message: str, refused: str | None, sql: str) -> ToolError:
        """The :class:`ToolError` for a failure the worker reported."""
        if kind == "timeout":
            return self._timed_out()
        if kind == "no_id":
            shown = clip_text(message or "nothing", 200)
            return ToolError(
                "the query must select the id column, e.g. "
                f"SELECT id FROM {TABLE} WHERE tags LIKE '%Comedy%'; this one selects {shown}"
            )
        if kind == "too_many":
            return ToolError(
                f"the query returned more than {int(message):,} rows (a join repeating "
                "items?); select each item once, e.g. SELECT id FROM items WHERE ..."
            )
        error = _REPORTED.get(kind, sqlite3.Error)(message)
        return self._sql_error(error, sql, refused)

    def _sql_error(self, error: BaseException, sql: str, refused: str | None = None) -> ToolError:
        """A short message, for the planner, on why ``sql`` failed."""
        message = str(error)
        text = (
            _value_problem(error, message)
            or _unknown_name(message)
            or _refusal(message, refused)
            or self._limit_hit(message)
            or f"SQL error: {clip_text(message, 200)} (in: {clip_text(sql, 200)})"
        )
        return ToolError(clip_text(text, ERROR_CHARS))

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

    # ------------------------------------------------------------------ queries

    def check_select(self, sql: str) -> list[str]:
        """Validate ``sql`` as one read-only SELECT without running it.

        The worker prepares ``EXPLAIN <sql>`` under the authorizer and the limits: preparing
        resolves every table, column and function and asks the authorizer for each action,
        and running EXPLAIN only lists the program; the query itself never runs.

        Returns:
            Notes on grounding (e.g. a table name that was replaced).

        Raises:
            ToolError: Why the SQL would be refused or fail.
        """
        prepared = prepare_select(sql)
        self._request("explain", prepared.sql)
        return prepared.notes

    def run_select(
        self, sql: str, max_rows: int | None = 100, within: Sequence[str] | None = None
    ) -> SelectResult:
        """Run one read-only SELECT and return its rows.

        The worker fetches rows one at a time: at most ``max_rows`` (never more than
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
                a function outside :data:`SQL_FUNCTIONS`, a limit reached (sorts and
                temporary tables included), the time limit, or any other SQL error; the
                table is never changed.
        """
        prepared = prepare_select(sql)
        limit = SQL_MAX_ROWS if max_rows is None else max(0, min(max_rows, SQL_MAX_ROWS))
        columns, sent, cut, trimmed, full = self._request(
            "rows", prepared.sql, within, (limit, SQL_RESULT_MAX_CHARS, CELL_CHARS)
        )
        rows = [tuple(_restored(value)[0] for value in row) for row in sent]
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
            columns=tuple(columns),
            rows=rows,
            trimmed=trimmed,
            notes=tuple(notes),
            ordered=has_order_by(prepared.tokens),
        )

    def select_ids(self, sql: str, within: Sequence[str] | None = None) -> IdSelection:
        """Run one read-only SELECT that selects ``id`` and return the ids it names.

        The worker streams rows in small batches; only the ``id`` column is kept, and with
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
        prepared = prepare_select(sql)
        max_read = max(FILTER_MAX_ROWS, 2 * len(set(within or ())))
        columns, ids, rows_read, outside = self._request(
            "ids", prepared.sql, within, (max_read, _BATCH)
        )
        notes = list(prepared.notes)
        if outside:
            notes.append(
                f"ignored {outside:,} row(s) naming items that are not candidates "
                "(a hard filter only narrows the candidates)"
            )
        return IdSelection(
            sql=prepared.sql,
            columns=tuple(columns),
            ids=list(ids),
            ordered=has_order_by(prepared.tokens),
            notes=tuple(notes),
            rows_read=rows_read,
        )

    def count_rows(self) -> int:
        """Rows in the table (the trusted way, for checks that nothing changed)."""
        with self._trusted_block():
            return int(self._conn.execute(f"SELECT COUNT(*) FROM main.{TABLE}").fetchone()[0])
