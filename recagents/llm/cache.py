"""A persistent, multi-process cache of LLM replies, keyed by a hash of the request.

Why: every LLM request of the project goes through one client, which looks the request up
here first. A rerun of a notebook then costs nothing, and an interrupted run resumes where it
stopped. The cache is one SQLite file in WAL mode, so that several processes (``make -j``
runs notebooks in parallel) can read and write it at once; the first writer of a key wins.

A request is a plain dict, for example
``{"kind": "chat", "model": ..., "messages": [...], "sampling": {...}, "schema": None,
"sample": 0}`` or ``{"kind": "embed", "model": ..., "input": "text"}``. Its key is the
SHA-256 of its canonical JSON (:func:`request_key`). A request must never hold credentials:
both :func:`request_key` and :meth:`ResponseCache.put` refuse one that does.

With ``RECAGENTS_KEYLOG=path`` set, every key a cache serves or stores is appended to that
text file, one per line: the list of replies one run used, which
:func:`recagents.llm.bundle.export_bundle` can export from a cache shared by many runs.

Nothing happens at import time; a file is opened only by :class:`ResponseCache`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import sqlite3
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from recagents.config import ConfigError
from recagents.llm.secret_scan import env_secrets_in, is_credential_name

SCHEMA_VERSION = 1
"""Stored in the file's ``PRAGMA user_version``; a file of another version is refused."""

CREDENTIAL_KEYS: frozenset[str] = frozenset(
    {"api_key", "authorization", "password", "secret", "token"}
)
"""Dict key names (compared case-insensitively) that a request may never contain."""

KEYLOG_ENV = "RECAGENTS_KEYLOG"
"""Environment variable naming a file to which every key served or stored is appended."""

_GET_MANY_CHUNK = 500
_ABANDONED: list[sqlite3.Connection | None] = []  # connections inherited through fork
_LOCK_RETRIES = 8

# USD per 1M (input, output) tokens. EDITABLE ESTIMATES: public list prices as last seen,
# which change; check the provider's pricing page before quoting a cost. Local models are
# free (0.0), and so is any model not listed here (see price_for).
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
    "text-embedding-ada-002": (0.10, 0.0),
    # Local models run on our own hardware.
    "smollm2-135m-instruct": (0.0, 0.0),
}


def price_for(model: str) -> tuple[float, float]:
    """Return the (input, output) USD price per 1M tokens of ``model`` from :data:`PRICES`.

    Matching ignores case: an exact match first, else the longest listed name that prefixes
    ``model`` (so ``gpt-4o-mini-2024-07-18`` gets ``gpt-4o-mini``, not ``gpt-4o``), else free.

    Args:
        model: A model name as sent to the provider.

    Returns:
        ``(input_price, output_price)``; ``(0.0, 0.0)`` for unknown models.
    """
    name = model.lower()
    table = {k.lower(): v for k, v in PRICES.items()}
    if name in table:
        return table[name]
    prefixes = [k for k in table if name.startswith(k)]
    if prefixes:
        return table[max(prefixes, key=len)]
    return (0.0, 0.0)


# --------------------------------------------------------------------------- request keys


def _check_no_credentials(value: Any, path: str = "request") -> None:
    """Raise ValueError if any dict key, at any depth, is named like a credential.

    Named like a credential: one of :data:`CREDENTIAL_KEYS`, or any name that
    :func:`recagents.llm.secret_scan.is_credential_name` flags (``x-api-key``, ``apiKey``,
    ``access_token``, ...; case and separators ignored).
    """
    if isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str) and (k.lower() in CREDENTIAL_KEYS or is_credential_name(k)):
                raise ValueError(
                    f"{path} has a credential-like key {k!r}; requests are hashed and stored in "
                    "the reply cache and must never contain credentials"
                )
            _check_no_credentials(v, f"{path}[{k!r}]")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_no_credentials(v, f"{path}[{i}]")


def _check_no_secret_values(text: str) -> None:
    """Raise ValueError if ``text`` contains the value of a secret-named environment variable.

    Which variables, and how values are matched (raw and JSON-escaped), is
    :func:`recagents.llm.secret_scan.env_secrets_in`; the message names the variable, never
    its value. (The full scan for key shapes runs at bundle export, not on every request.)
    """
    names = env_secrets_in(text)
    if names:
        raise ValueError(
            f"request contains the value of the environment variable {names[0]}; requests are "
            "stored in the reply cache and must never contain credentials"
        )


def canonical_json(request: Mapping[str, Any]) -> str:
    """Return the canonical JSON text of a request, after refusing credentials.

    Canonical means sorted keys, no whitespace and unescaped Unicode, so that equal requests
    give equal text whatever the dict order.

    Args:
        request: A JSON-serialisable request dict.

    Returns:
        The canonical JSON text.

    Raises:
        ValueError: If the request holds a credential-like key (see :data:`CREDENTIAL_KEYS`)
            or the value of a secret environment variable.
        TypeError: If the request is not JSON-serialisable.
    """
    _check_no_credentials(request)
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    _check_no_secret_values(text)
    return text


def request_key(request: Mapping[str, Any]) -> str:
    """Return the cache key of a request: the SHA-256 hex digest of its canonical JSON.

    Args:
        request: A JSON-serialisable request dict without credentials.

    Returns:
        A 64-character lowercase hex string.

    Raises:
        ValueError: If the request holds credentials (see :func:`canonical_json`).
    """
    return hashlib.sha256(canonical_json(request).encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class CachedReply:
    """One stored reply.

    Attributes:
        key: The request key (see :func:`request_key`).
        reply: Whatever the client stored, e.g. ``{"text": ..., "finish_reason": ...}``.
        prompt_tokens: Input tokens billed for the original call.
        completion_tokens: Output tokens billed for the original call.
        latency_s: Wall time of the original (uncached) call, in seconds.
        model: The model that produced the reply.
        created: Unix time at which the reply was stored.
    """

    key: str
    reply: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    model: str
    created: float


@dataclass(frozen=True)
class CacheTotals:
    """Sums over stored replies, to report what a run cost (or would cost uncached).

    Attributes:
        rows: Number of stored replies.
        prompt_tokens: Total input tokens.
        completion_tokens: Total output tokens.
        latency_s: Total wall time of the original calls, in seconds.
    """

    rows: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float

    def cost(self, price_per_million: tuple[float, float]) -> float:
        """Return the USD cost of these tokens at ``(input, output)`` USD per 1M tokens."""
        price_in, price_out = price_per_million
        return (self.prompt_tokens * price_in + self.completion_tokens * price_out) / 1e6


class CacheError(RuntimeError):
    """The cache file cannot be used (not a cache, closed, damaged); the message says what to do."""


class CacheVersionError(CacheError):
    """The cache file was written with another schema version."""


class CacheLockedError(CacheError):
    """The cache file stayed locked by other processes for too long."""


# --------------------------------------------------------------------------- the cache

_T = TypeVar("_T")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS replies (
        key TEXT PRIMARY KEY NOT NULL,
        request TEXT NOT NULL,
        reply TEXT NOT NULL,
        model TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        latency_s REAL NOT NULL,
        created REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS replies_model ON replies (model)",
)

_COLUMNS = "key, reply, prompt_tokens, completion_tokens, latency_s, model, created"


def _usable_counts(prompt_tokens: float, completion_tokens: float, latency_s: float) -> bool:
    """Whether a row's numbers can be stored: finite and not negative.

    Why ``isfinite``: NaN passes every ``< 0`` check, and SQLite stores it as NULL, which the
    NOT NULL column then drops silently under ``INSERT OR IGNORE``.
    """
    return all(math.isfinite(n) and n >= 0 for n in (prompt_tokens, completion_tokens, latency_s))


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message


def _row_to_reply(row: tuple[Any, ...]) -> CachedReply:
    key, reply, prompt_tokens, completion_tokens, latency_s, model, created = row
    return CachedReply(
        key=key,
        reply=json.loads(reply),
        prompt_tokens=int(prompt_tokens),
        completion_tokens=int(completion_tokens),
        latency_s=float(latency_s),
        model=model,
        created=float(created),
    )


def _fetch_all(sql: str, params: Sequence[Any]) -> Callable[[sqlite3.Connection], list[Any]]:
    """A query for ``ResponseCache._run`` returning every row, bound now (as a loop needs)."""
    return lambda conn: conn.execute(sql, params).fetchall()


def _rows_to_replies(rows: Sequence[tuple[Any, ...]]) -> Callable[[], list[CachedReply]]:
    """The decoding of ``rows`` for ``ResponseCache._decode``, bound now (as a loop needs)."""
    return lambda: [_row_to_reply(row) for row in rows]


class ResponseCache:
    """A reply cache in one SQLite file, safe for many threads and processes at once.

    Each object holds one connection, shared by its threads under a lock (the async client
    calls it from worker threads). Processes coordinate through SQLite's WAL locking; a write
    that still finds the file locked after the busy timeout is retried a few times, then
    :class:`CacheLockedError` is raised. A child process created by ``fork`` opens its own
    connection on first use, and pickling a cache sends only its path.

    Args:
        path: The cache file; its parent folders are created.
        timeout_s: How long one statement waits for other processes' locks.
        keylog: A text file to which every key served (a hit) or stored is appended, one per
            line; ``None`` reads ``RECAGENTS_KEYLOG`` (unset: no log).

    Raises:
        CacheVersionError: If the file holds another schema version.
        CacheError: If the file is not an SQLite database or not a reply cache. Any method
            raises it too when SQLite finds the file damaged (a corrupt page, a row that
            does not parse) or cannot read or write it, naming the file and what to do.
        ConfigError: If the key log cannot be appended to (checked here, before any use).
    """

    def __init__(
        self, path: str | Path, timeout_s: float = 60.0, keylog: str | Path | None = None
    ) -> None:
        self.path = Path(path).expanduser().resolve()
        self.timeout_s = float(timeout_s)
        keylog = keylog if keylog is not None else os.environ.get(KEYLOG_ENV) or None
        self.keylog = Path(keylog).expanduser() if keylog else None
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._check_keylog()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._conn = self._open()

    def _check_keylog(self) -> None:
        """Refuse a key log that cannot be appended to, before any (paid) request is made.

        Raises:
            ConfigError: The key log is a folder, lies under a file, or is not writable.
        """
        if self.keylog is None:
            return
        try:
            self.keylog.parent.mkdir(parents=True, exist_ok=True)
            with open(self.keylog, "a", encoding="ascii"):
                pass
        except OSError as exc:
            raise ConfigError(
                f"{KEYLOG_ENV}={str(self.keylog)!r}: the key log cannot be appended to "
                f"({exc.strerror or exc}); point it at a file in a writable folder, or unset it"
            ) from None

    def _damaged(self, exc: Exception) -> CacheError:
        """The :class:`CacheError` for an SQLite error other than a lock, naming the file.

        Why: SQLite's own messages ("database disk image is malformed") name no file and
        say nothing of what to do; a run must stop with both.
        """
        name = str(getattr(exc, "sqlite_errorname", "") or "")
        if name.startswith("SQLITE_FULL"):
            advice = "the disk is full: free space and rerun"
        elif name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")):
            advice = "check that this process may write the file and its folder"
        elif name.startswith("SQLITE_IOERR"):
            advice = "the disk or filesystem failed a read or write; check it, then rerun"
        elif name.startswith("SQLITE_NOTADB"):
            advice = (
                "it is not an SQLite file, or its header is damaged: move it aside (or delete "
                "it) and rerun, or point the cache at another path (RECAGENTS_CACHE_DIR)"
            )
        else:
            advice = (
                "the file is damaged: move it and its -wal and -shm files aside (or delete "
                "them) and rerun, which starts a fresh cache and asks the model again for "
                "every reply it lacks (`python -m recagents.llm bundle import FILE` refills "
                "it from a bundle)"
            )
        return CacheError(f"{self.path} is not a usable reply cache ({exc}): {advice}")

    # -- connection handling

    def _open(self) -> sqlite3.Connection:
        """Open a connection, switch to WAL and check (or create) the schema."""
        conn = sqlite3.connect(
            self.path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout_s * 1000)}")
            mode = self._retry(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
            if str(mode).lower() != "wal":
                warnings.warn(
                    f"reply cache {self.path} could not switch to WAL mode (got {mode!r}); "
                    "parallel runs will be slower",
                    RuntimeWarning,
                    stacklevel=3,
                )
            conn.execute("PRAGMA synchronous=NORMAL")
            self._retry(lambda: self._ensure_schema(conn))
        except sqlite3.DatabaseError as exc:
            conn.close()
            if isinstance(exc, sqlite3.OperationalError) and _is_locked(exc):
                raise
            raise self._damaged(exc) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        """Create the table on a fresh file, or check the version of an existing one."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        if version != 0:
            raise CacheVersionError(self._version_message(version))
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                tables = {
                    r[0]
                    for r in conn.execute(
                        "SELECT name FROM sqlite_master WHERE type = 'table' "
                        "AND name NOT LIKE 'sqlite_%'"
                    )
                }
                if tables:
                    raise CacheError(
                        f"{self.path} is an SQLite file with tables {sorted(tables)} but no "
                        "reply-cache version; it is not a reply cache. Pick another path"
                    )
                for statement in _SCHEMA:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise CacheVersionError(self._version_message(version))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _version_message(self, version: int) -> str:
        return (
            f"reply cache {self.path} has schema version {version}, but this code reads "
            f"version {SCHEMA_VERSION}. Delete the file (and its -wal/-shm files) to start a "
            "fresh cache, or point the client at another path"
        )

    def _retry(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn``, retrying a bounded number of times while the file is locked."""
        for attempt in range(_LOCK_RETRIES):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_locked(exc):
                    raise
                if attempt == _LOCK_RETRIES - 1:
                    raise CacheLockedError(
                        f"reply cache {self.path} stayed locked after {_LOCK_RETRIES} attempts "
                        f"of up to {self.timeout_s:g} s each; another process may hold a long "
                        "transaction, or the file is on a filesystem without working locks "
                        "(e.g. NFS)"
                    ) from exc
                time.sleep(min(1.0, 0.02 * 2**attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")  # pragma: no cover

    def _run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``fn(connection)`` under the lock, with lock retries."""
        with self._lock:
            if self._closed:
                raise CacheError(f"reply cache {self.path} is closed")
            if self._pid != os.getpid():
                # Forked child: never use (or close) the parent's connection; keep it
                # referenced so that garbage collection does not close it either.
                _ABANDONED.append(self._conn)
                self._pid = os.getpid()
                self._conn = self._open()
            conn = self._conn
            assert conn is not None
            try:
                return self._retry(lambda: fn(conn))
            except sqlite3.DatabaseError as exc:  # corruption, I/O, full disk; not a lock
                raise self._damaged(exc) from exc

    def __reduce__(self) -> tuple[type[ResponseCache], tuple[Path, float, Path | None]]:
        """Pickle as (path, timeout, keylog): the receiving process opens its own connection."""
        return (self.__class__, (self.path, self.timeout_s, self.keylog))

    def _note(self, keys: Sequence[str]) -> None:
        """Append served or stored keys to the key log, if there is one.

        One ``write`` of whole lines to a file opened for appending, so that several processes
        logging at once do not interleave inside a line.
        """
        if self.keylog is None or not keys:
            return
        try:
            self.keylog.parent.mkdir(parents=True, exist_ok=True)
            with self._lock, open(self.keylog, "a", encoding="ascii") as log:
                log.write("".join(f"{key}\n" for key in keys))
        except OSError as exc:
            raise CacheError(
                f"key log {self.keylog} ({KEYLOG_ENV}) could not be appended to "
                f"({exc.strerror or exc}); free space or point {KEYLOG_ENV} elsewhere"
            ) from None

    def _decode(self, decode: Callable[[], _T]) -> _T:
        """Run ``decode`` on stored rows; a row that does not parse means a damaged file."""
        try:
            return decode()
        except (ValueError, TypeError) as exc:
            raise self._damaged(exc) from exc

    # -- reading

    def get(self, key: str) -> CachedReply | None:
        """Return the stored reply of ``key``, or None on a miss."""
        row = self._run(
            lambda c: c.execute(f"SELECT {_COLUMNS} FROM replies WHERE key = ?", (key,)).fetchone()
        )
        if row is None:
            return None
        reply = self._decode(lambda: _row_to_reply(row))
        self._note([key])
        return reply

    def get_many(self, keys: Sequence[str]) -> dict[str, CachedReply]:
        """Return the stored replies of many keys at once; misses are left out.

        Why: a warm replay of a whole notebook looks up thousands of keys; one query per
        500 keys is far faster than one per key.
        """
        unique = list(dict.fromkeys(keys))
        out: dict[str, CachedReply] = {}
        for start in range(0, len(unique), _GET_MANY_CHUNK):
            chunk = unique[start : start + _GET_MANY_CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT {_COLUMNS} FROM replies WHERE key IN ({marks})"
            rows = self._run(_fetch_all(sql, chunk))
            for reply in self._decode(_rows_to_replies(rows)):
                out[reply.key] = reply
        self._note(list(out))
        return out

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        sql = "SELECT 1 FROM replies WHERE key = ?"
        return self._run(lambda c: c.execute(sql, (key,)).fetchone()) is not None

    def __len__(self) -> int:
        return int(self._run(lambda c: c.execute("SELECT COUNT(*) FROM replies").fetchone()[0]))

    def __iter__(self) -> Iterator[str]:
        """Iterate over stored keys (a snapshot taken now)."""
        keys = self._run(lambda c: c.execute("SELECT key FROM replies ORDER BY key").fetchall())
        return iter([k for (k,) in keys])

    def entries(self, keys: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Return whole stored rows, request included, sorted by key; for exporting.

        Args:
            keys: Only these keys (unknown ones are left out); ``None`` for every row.

        Returns:
            One dict per row: ``key``, ``request`` (the parsed request), ``reply``, ``model``,
            ``prompt_tokens``, ``completion_tokens`` and ``latency_s``.
        """
        columns = "key, request, reply, model, prompt_tokens, completion_tokens, latency_s"
        if keys is None:
            sql = f"SELECT {columns} FROM replies ORDER BY key"
            rows = self._run(lambda c: c.execute(sql).fetchall())
        else:
            rows = []
            unique = sorted(set(keys))
            for start in range(0, len(unique), _GET_MANY_CHUNK):
                chunk = unique[start : start + _GET_MANY_CHUNK]
                sql = f"SELECT {columns} FROM replies WHERE key IN ({','.join('?' * len(chunk))})"
                rows += self._run(_fetch_all(sql, chunk))
            rows.sort()
        names = ("key", "request", "reply", "model", "prompt_tokens", "completion_tokens")

        def decode() -> list[dict[str, Any]]:
            out = []
            for row in rows:
                entry = dict(zip((*names, "latency_s"), row, strict=True))
                entry["request"] = json.loads(entry["request"])
                entry["reply"] = json.loads(entry["reply"])
                out.append(entry)
            return out

        return self._decode(decode)

    def totals(self, model: str | None = None) -> CacheTotals:
        """Sum rows, tokens and original latency over stored replies, optionally of one model."""
        sql = (
            "SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0), "
            "COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(latency_s), 0.0) FROM replies"
        )
        params: tuple[str, ...] = ()
        if model is not None:
            sql += " WHERE model = ?"
            params = (model,)
        rows, prompt, completion, latency = self._run(lambda c: c.execute(sql, params).fetchone())
        return CacheTotals(int(rows), int(prompt), int(completion), float(latency))

    # -- writing

    def put(
        self,
        key: str,
        request: Mapping[str, Any],
        reply: Mapping[str, Any],
        *,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency_s: float,
    ) -> None:
        """Store a reply unless ``key`` is already stored (the first writer wins).

        The canonical request JSON is stored beside the reply, for inspection.

        Args:
            key: The request key, normally ``request_key(request)``.
            request: The request; refused if it holds credentials.
            reply: A JSON-serialisable reply dict.
            model: The model that produced the reply.
            prompt_tokens: Input tokens billed.
            completion_tokens: Output tokens billed.
            latency_s: Wall time of the call, in seconds.

        Raises:
            ValueError: If the request holds credentials, or a count or latency is negative.
            TypeError: If the request or reply is not JSON-serialisable.
        """
        if not isinstance(key, str) or not key:
            raise ValueError(f"key must be a non-empty string, got {key!r}")
        if not _usable_counts(prompt_tokens, completion_tokens, latency_s):
            raise ValueError(
                "token counts and latency must be finite and >= 0, got "
                f"{prompt_tokens=}, {completion_tokens=}, {latency_s=}"
            )
        request_text = canonical_json(request)
        reply_text = json.dumps(dict(reply), ensure_ascii=False)
        params = (
            key,
            request_text,
            reply_text,
            str(model),
            int(prompt_tokens),
            int(completion_tokens),
            float(latency_s),
            time.time(),
        )
        sql = (
            "INSERT OR IGNORE INTO replies (key, request, reply, model, prompt_tokens, "
            "completion_tokens, latency_s, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        self._run(lambda c: c.execute(sql, params))
        self._note([key])

    def put_many(self, entries: Sequence[Mapping[str, Any]]) -> int:
        """Store many replies in one transaction (all or none); stored keys are kept.

        Why: importing a bundle of thousands of replies must either fill the cache or leave
        it as it was, never half-filled.

        Args:
            entries: Dicts with the fields of :meth:`entries`; each request is refused if it
                holds credentials.

        Returns:
            How many rows were new.

        Raises:
            ValueError: If a request holds credentials or a count or latency is negative.
        """
        now = time.time()
        rows = []
        for entry in entries:
            counts = (entry["prompt_tokens"], entry["completion_tokens"], entry["latency_s"])
            if not _usable_counts(*counts):
                raise ValueError(
                    f"entry {entry['key']}: token counts and latency must be finite and >= 0"
                )
            rows.append(
                (
                    str(entry["key"]),
                    canonical_json(entry["request"]),
                    json.dumps(dict(entry["reply"]), ensure_ascii=False),
                    str(entry["model"]),
                    int(counts[0]),
                    int(counts[1]),
                    float(counts[2]),
                    now,
                )
            )
        sql = (
            "INSERT OR IGNORE INTO replies (key, request, reply, model, prompt_tokens, "
            "completion_tokens, latency_s, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )

        def insert(conn: sqlite3.Connection) -> int:
            before = conn.total_changes
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sql, rows)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return conn.total_changes - before

        return int(self._run(insert))

    # -- lifetime

    def close(self) -> None:
        """Close the connection; later calls raise :class:`CacheError`. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                conn.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"ResponseCache({str(self.path)!r}, {state})"
