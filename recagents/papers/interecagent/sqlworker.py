"""The process that runs a planner's SQL, apart from the caller's own process (stdlib only).

Why a separate process: SQLite's only guard against a statement that blows up while it is
*prepared* (nested subqueries flattened into exponentially large expressions) is its heap
limit, and that limit is process-wide: in the caller's process it made every other SQLite
connection there fail too, the reply cache's writes included. Temporary sorts and b-trees
of a query (ORDER BY, GROUP BY, DISTINCT, window functions over a cross join) wrote
gigabytes of temporary files, bounded only by the time limit. Here both are bounded per
process: ``temp_store = MEMORY`` puts every temporary structure on SQLite's heap, under the
same ``hard_heap_limit``, so a query that would spill fails with ``MemoryError`` instead;
``RLIMIT_FSIZE = 0`` makes any file write fail, and ``RLIMIT_AS`` backs the heap limit up.

:class:`~recagents.papers.interecagent.sqlguard.ReadOnlyTable` starts this file as a script
(``python -I -S sqlworker.py``: no site-packages, no project imports, so it starts in tens
of milliseconds) and talks to it over its standard input and output with
:class:`multiprocessing.connection.Connection` frames holding :mod:`marshal`-encoded plain
values. The first frame configures the table, its limits, the allowed functions and the
resource caps (answered by ``("ok", pid)``); each later frame is one request
``(op, sql, within, args, timeout_s)``, answered by exactly one reply. ``within`` (a list of
ids, or ``None``) restricts the table to those ids for that statement:

- ``"explain"``: prepare ``EXPLAIN sql`` (nothing runs) -> ``("ok", None)``.
- ``"rows"`` with ``args = (limit, budget, cell_chars)``: rows, each text or blob longer than
  ``cell_chars`` sent as ``(prefix, length)`` -> ``("ok", (columns, rows, cut, trimmed,
  full))``.
- ``"ids"`` with ``args = (max_read, batch)``: the distinct ids of the ``id`` column (of
  ``within`` only, when given) -> ``("ok", (columns, ids, rows_read, outside))``.
- ``"status"``: the settings in force -> ``("ok", {...})``.

A failure is ``("error", kind, message, refused_function)`` with ``kind`` one of
:data:`ERROR_KINDS`. The caller turns both into results or ``ToolError`` messages; all
wording for the planner lives there. Ctrl-C is left to the caller, which kills the worker;
the worker exits when its input closes.
"""

from __future__ import annotations

import marshal
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

#: What a failure reply's ``kind`` may be: a Python exception class raised by SQLite or by
#: converting its values, ``timeout`` (the deadline passed), ``no_id`` (the result has no
#: ``id`` column; the message lists the columns), ``too_many`` (more rows than allowed).
ERROR_KINDS = frozenset(
    {
        "MemoryError",
        "OverflowError",
        "UnicodeError",
        "RecursionError",
        "Error",
        "Warning",
        "timeout",
        "no_id",
        "too_many",
    }
)


class _Failure(Exception):
    """A failure of a request that is not an exception of SQLite (kind, message)."""

    def __init__(self, kind: str, message: str = "") -> None:
        super().__init__(message)
        self.kind = kind


def _kind(error: BaseException) -> str:
    """The :data:`ERROR_KINDS` entry of an exception raised while running a statement."""
    for cls in (MemoryError, OverflowError, UnicodeError, RecursionError):
        if isinstance(error, cls):
            return cls.__name__
    return "Warning" if isinstance(error, sqlite3.Warning) else "Error"


class SqlWorker:
    """One read-only table on a connection of this process, and the requests it answers.

    Args:
        config: ``create`` (the CREATE TABLE statement), ``table`` (its name), ``records``
            (its rows), ``limits`` (``Connection.setlimit`` values), ``functions`` (the SQL
            functions allowed), ``heap_bytes`` (SQLite's hard heap limit) and
            ``progress_ops`` (virtual-machine steps between deadline checks).
    """

    def __init__(self, config: dict[str, Any]) -> None:
        self.table: str = config["table"]
        self.functions = frozenset(config["functions"])
        self.progress_ops: int = config["progress_ops"]
        self._trusted = True
        self._refused_function: str | None = None
        # Autocommit: no transaction an untrusted statement could see.
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        self.conn.execute(f"PRAGMA hard_heap_limit = {int(config['heap_bytes'])}")
        # Sorts, temporary b-trees, materialised views and the temp schema on the heap.
        self.conn.execute("PRAGMA temp_store = MEMORY")
        self.conn.execute(config["create"])
        columns = len(config["records"][0]) if config["records"] else 0
        marks = ", ".join("?" * columns)
        self.conn.executemany(f"INSERT INTO {self.table} VALUES ({marks})", config["records"])
        for limit, value in config["limits"].items():
            self.conn.setlimit(limit, value)
        self.conn.set_authorizer(self._authorize)
        self._trusted = False

    def _authorize(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None
    ) -> int:
        """SQLite authorizer: SELECT, reading the table (or the bus ids) and allowed functions."""
        if self._trusted or action == sqlite3.SQLITE_SELECT:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            name = (arg2 or "").lower()
            if name in self.functions:
                return sqlite3.SQLITE_OK
            self._refused_function = self._refused_function or name
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_READ and arg1 in (self.table, "bus_ids"):
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
    def _within(self, item_ids: list[str] | None) -> Iterator[None]:
        """Let the table mean only ``item_ids`` for the statement inside (a TEMP view)."""
        table = self.table
        with self._trusted_block():
            # Left over only if an earlier clean-up failed; start from a clean state.
            self.conn.execute(f"DROP VIEW IF EXISTS temp.{table}")
            self.conn.execute("DROP TABLE IF EXISTS temp.bus_ids")
        if item_ids is None:
            yield
            return
        with self._trusted_block():
            self.conn.execute("CREATE TEMP TABLE bus_ids (id TEXT PRIMARY KEY)")
            self.conn.executemany("INSERT INTO temp.bus_ids VALUES (?)", [(i,) for i in item_ids])
            self.conn.execute(
                f"CREATE TEMP VIEW {table} AS SELECT * FROM main.{table} "
                "WHERE id IN (SELECT id FROM temp.bus_ids)"
            )
        try:
            yield
        finally:
            with self._trusted_block():
                self.conn.execute(f"DROP VIEW IF EXISTS temp.{table}")
                self.conn.execute("DROP TABLE IF EXISTS temp.bus_ids")

    def handle(self, request: tuple[Any, ...]) -> tuple[Any, ...]:
        """Answer one request (see the module docstring); never raises for a bad statement."""
        op, sql, within, args, timeout_s = request
        if op == "status":
            return ("ok", self.status())
        self._refused_function = None
        deadline = time.monotonic() + timeout_s
        try:
            with self._within(within):
                self.conn.set_progress_handler(
                    lambda: int(time.monotonic() > deadline), self.progress_ops
                )
                try:
                    if op == "explain":
                        self.conn.execute("EXPLAIN " + sql).fetchall()
                        return ("ok", None)
                    cursor = self.conn.execute(sql)
                    try:
                        if op == "rows":
                            return ("ok", _rows(cursor, deadline, *args))
                        return ("ok", _ids(cursor, deadline, set(within or ()), within, *args))
                    finally:
                        cursor.close()
                finally:
                    self.conn.set_progress_handler(None, 0)
        except _Failure as failure:
            return ("error", failure.kind, str(failure), self._refused_function)
        except (sqlite3.Error, sqlite3.Warning, MemoryError, OverflowError, UnicodeError) as error:
            message = str(error)
            if isinstance(error, sqlite3.OperationalError) and "interrupted" in message:
                return ("error", "timeout", message, None)
            return ("error", _kind(error), message, self._refused_function)
        except RecursionError as error:
            return ("error", "RecursionError", str(error), None)

    def status(self) -> dict[str, Any]:
        """The settings in force (for tests and diagnostics)."""
        with self._trusted_block():
            heap = self.conn.execute("PRAGMA hard_heap_limit").fetchone()[0]
            temp_store = self.conn.execute("PRAGMA temp_store").fetchone()[0]
        limits = {}
        try:
            import resource

            for name in ("RLIMIT_AS", "RLIMIT_FSIZE"):
                limits[name] = resource.getrlimit(getattr(resource, name))[0]
        except ImportError:  # pragma: no cover - not POSIX
            pass
        return {
            "pid": os.getpid(),
            "heap_bytes": heap,
            "temp_store": temp_store,
            "rlimits": limits,
        }


def _deadline_passed(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise _Failure("timeout")


def _rows(
    cursor: sqlite3.Cursor, deadline: float, limit: int, budget: int, cell_chars: int
) -> tuple[list[str], list[tuple[Any, ...]], int, bool, bool]:
    """Fetch at most ``limit`` rows, stopping once their kept values pass ``budget`` chars.

    A text or blob longer than ``cell_chars`` is kept as ``(its first cell_chars characters
    (none of a blob), its length)`` and counts ``cell_chars`` against the budget, as its cut
    form does in the caller.
    """
    columns = [d[0] for d in cursor.description or ()]
    rows: list[tuple[Any, ...]] = []
    cut, trimmed, full = 0, False, False
    while (row := cursor.fetchone()) is not None:
        _deadline_passed(deadline)
        if len(rows) >= limit or full:
            trimmed = True
            break
        kept = []
        for value in row:
            if isinstance(value, str | bytes):
                if len(value) > cell_chars:
                    value = (value[:cell_chars] if isinstance(value, str) else b"", len(value))
                    cut += 1
                    budget -= cell_chars
                else:
                    budget -= len(value)
            else:
                budget -= 8
            kept.append(value)
        rows.append(tuple(kept))
        full = budget < 0
    return columns, rows, cut, trimmed, full


def _ids(
    cursor: sqlite3.Cursor,
    deadline: float,
    allowed: set[str],
    within: list[str] | None,
    max_read: int,
    batch: int,
) -> tuple[list[str], list[str], int, int]:
    """Stream the ``id`` column; keep distinct ids (of ``within`` only, when given)."""
    columns = [d[0] for d in cursor.description or ()]
    lowered = [c.lower() for c in columns]
    if "id" not in lowered:
        raise _Failure("no_id", ", ".join(columns))
    column = lowered.index("id")
    ids: list[str] = []
    seen: set[str] = set()
    rows_read = outside = 0
    while chunk := cursor.fetchmany(batch):
        rows_read += len(chunk)
        if rows_read > max_read:
            raise _Failure("too_many", str(max_read))
        _deadline_passed(deadline)
        for row in chunk:
            if row[column] is None:
                continue
            item = str(row[column])
            if within is not None and item not in allowed:
                outside += 1
            elif item not in seen:
                seen.add(item)
                ids.append(item)
    return columns, ids, rows_read, outside


def _limit_resources(address_space: int) -> None:
    """Cap this process: no file may grow (``RLIMIT_FSIZE``), ``RLIMIT_AS`` as a backstop."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX; SQLite's heap limit still holds
        return
    # A write past the size limit then fails with EFBIG instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    for which, value in ((resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_AS, address_space)):
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        if soft == resource.RLIM_INFINITY or value < soft:
            resource.setrlimit(which, (value, hard))


def main() -> None:
    """Serve requests on stdin/stdout until the caller closes the channel."""
    # The caller handles Ctrl-C (and stops this process); a stray print cannot reach it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channel_in = Connection(os.dup(0), writable=False)
    channel_out = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    try:
        config = marshal.loads(channel_in.recv_bytes())
        _limit_resources(config["address_space"])
        worker = SqlWorker(config)
    except Exception as error:  # noqa: BLE001 - reported to the caller, which names it
        channel_out.send_bytes(marshal.dumps(("error", type(error).__name__, str(error), None)))
        return
    del config
    channel_out.send_bytes(marshal.dumps(("ok", os.getpid())))
    while True:
        try:
            request = marshal.loads(channel_in.recv_bytes())
        except EOFError:
            return
        channel_out.send_bytes(marshal.dumps(worker.handle(request)))


if __name__ == "__main__":
    main()
