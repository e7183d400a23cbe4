"""An inter-process lock on one cache entry that names its holder when it gives up.

Why: notebooks run in parallel (``make -j``) share trained models and released files in one
cache; two processes must never write the same entry at once, and a process that waits too
long must say who holds the lock instead of hanging. :func:`cache_lock` wraps ``filelock``
and records the holder's pid, host and start time beside the lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from recagents.config import settings


class CacheLockTimeout(TimeoutError):
    """A cache entry stayed locked by another process past the lock timeout; names the holder."""


def _lock_holder(holder: Path) -> str:
    """Who holds a lock, from the record its holder wrote, and whether that process runs."""
    try:
        record = json.loads(holder.read_text())
        pid, host, since = int(record["pid"]), str(record["host"]), str(record["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"its holder is unknown ({holder} is missing or unreadable)"
    who = f"held by pid {pid} on host {host} since {since}"
    if host != socket.gethostname():
        return f"{who} (another host: whether it still runs is unknown here)"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"{who}, but no such process runs now (a stale record; the holder is unknown)"
    except PermissionError:
        pass
    return f"{who}, a process that is still running"


@contextlib.contextmanager
def cache_lock(path: Path, timeout: float | None = None) -> Iterator[None]:
    """An inter-process lock on one cache entry (the file ``<path>.lock`` beside it).

    Held while a model is trained or loaded, so that notebooks run in parallel never write
    the same files at once; released when the process ends, whatever happens. While held,
    ``<path>.lock.holder`` records the holder's pid, host and start time, for the error
    of a process that gives up waiting.

    Args:
        path: The cache entry (file or folder).
        timeout: Seconds to wait; default ``RECAGENTS_LOCK_TIMEOUT`` (30 minutes).

    Raises:
        CacheLockTimeout: Another process held the lock for longer than ``timeout``.
    """
    from filelock import FileLock, Timeout

    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = Path(str(path) + ".lock")
    holder = Path(str(lock_path) + ".holder")
    limit = settings().lock_timeout_s if timeout is None else timeout
    lock = FileLock(str(lock_path), timeout=limit)
    try:
        lock.acquire()
    except Timeout:
        raise CacheLockTimeout(
            f"gave up after {limit:g} s waiting for the cache lock {lock_path}: "
            f"{_lock_holder(holder)}. Let it finish or stop it (set RECAGENTS_LOCK_TIMEOUT "
            "to wait longer)"
        ) from None
    try:
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        tmp = Path(f"{holder}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(holder)
        yield
    finally:
        holder.unlink(missing_ok=True)  # before releasing: the next holder writes its own
        lock.release()
