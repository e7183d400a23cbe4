"""Temporary storage of InteRecAgent's SQL, and SQL that cannot starve other SQLite users.

Issue #34, item 8. Before the fix, a cross join sorted, grouped or windowed through
``hard_filter`` wrote SQLite temporary files until the time limit stopped it (1.6 / 2.6 /
2.3 GB in 5 s on the issue's machine; 390-520 MB on a loaded 2-core one), and the heap cap
that stops prepare-time blow-ups was process-wide, so reply-cache writes in another thread
failed with ``MemoryError`` while one ran (740 of 4,000). The planner's SQL now runs in a
separate worker process whose SQLite keeps every temporary structure on its capped heap.
"""

from __future__ import annotations

import gc
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from recagents.llm.cache import ResponseCache
from recagents.papers.interecagent import sqlguard
from recagents.papers.interecagent.bus import CandidateBus
from recagents.papers.interecagent.catalogue import ItemTable
from recagents.papers.interecagent.sqllimits import SQL_HEAP_LIMIT_BYTES, ToolError
from recagents.papers.interecagent.toolbox import ToolContext, hard_filter, lookup

MB = 2**20

BOMBS = {
    "order": "SELECT a.id FROM items a, items b, items c ORDER BY a.title||b.title||c.title",
    "group": "SELECT a.id FROM items a, items b, items c GROUP BY a.title||b.title||c.title",
    "window": (
        "SELECT a.id, row_number() OVER (ORDER BY a.title||b.title||c.title) AS r "
        "FROM items a, items b, items c"
    ),
}

# Nested CTEs that SQLite flattens into an expression of 2**23 leaves while it prepares the
# statement: only a heap cap stops it (see test_interecagent_sql_limits).
_CTES = ["c0 AS (SELECT title AS t FROM items)"] + [
    f"c{i} AS (SELECT t || t AS t FROM c{i - 1})" for i in range(1, 24)
]
PREPARE_BOMB = "WITH " + ", ".join(_CTES) + " SELECT length(t) FROM c23"


def _table(n: int = 1000) -> ItemTable:
    frame = pd.DataFrame(
        {
            "id": [f"i{k:05d}" for k in range(n)],
            "title": [f"Synthetic Film Number {k}" for k in range(n)],
            "release_year": [1950 + k % 50 for k in range(n)],
            "tags": ["Drama" if k % 2 else "Comedy" for k in range(n)],
            "visited_num": list(range(n)),
        }
    )
    return ItemTable.from_frame(frame)


def _written(pid: int) -> int:
    """Bytes process ``pid`` has written (``wchar``: files and pipes), or 0 if unknown."""
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return 0
    fields = dict(line.split(": ") for line in text.splitlines())
    return int(fields["wchar"])


def _peak_rss(pid: int) -> int | None:
    """Peak resident memory of process ``pid`` in bytes (``VmHWM``), or ``None``."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


@pytest.fixture(scope="module")
def table() -> ItemTable:
    return _table(1000)


# ------------------------------------------------------------------ temporary storage


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_queries_that_would_spill_stop_quickly_without_writing_files(table, name):
    """Before: 5.1 s, 345-522 MB of temp files written, then the time-limit message."""
    ctx = ToolContext(table=table, bus=CandidateBus(table.ids))
    lookup(ctx, "SELECT id FROM items LIMIT 1")  # the worker is up; its start is not timed
    worker = table._worker_status()["pid"]
    before = {pid: _written(pid) for pid in {os.getpid(), worker}}
    started = time.perf_counter()
    with pytest.raises(ToolError, match="needs more memory than a tool may use") as error:
        hard_filter(ctx, BOMBS[name])
    seconds = time.perf_counter() - started
    written = sum(_written(pid) - count for pid, count in before.items())
    assert "sort, group or join fewer rows" in str(error.value)
    assert seconds < 3.0  # loose: a loaded 2-core CI machine (about 0.8 s)
    assert written < MB  # no temporary file: only the request and the reply
    peak = _peak_rss(table._worker_status()["pid"])
    assert peak is None or peak < SQL_HEAP_LIMIT_BYTES + 100 * MB
    assert len(ctx.bus) == 1000 and ctx.bus.history == []
    # The worker is still usable after the failure, and the bus restriction was dropped.
    assert table.run_select("SELECT count(*) FROM items").rows == [(1000,)]


def test_the_worker_keeps_temporary_data_on_its_capped_heap_and_writes_no_file(table):
    status = table._worker_status()
    assert status["pid"] != os.getpid()
    assert status["temp_store"] == 2  # MEMORY: sorts and temporary b-trees on the heap
    assert SQL_HEAP_LIMIT_BYTES <= status["heap_bytes"] < SQL_HEAP_LIMIT_BYTES + 8 * MB
    if "RLIMIT_FSIZE" in status["rlimits"]:
        assert status["rlimits"]["RLIMIT_FSIZE"] == 0  # any file write fails
        assert status["rlimits"]["RLIMIT_AS"] > status["heap_bytes"]


def test_this_process_gets_no_sqlite_heap_limit(table):
    lookup(ToolContext(table=table, bus=CandidateBus(table.ids)), "SELECT id FROM items")
    probe = sqlite3.connect(":memory:")
    try:
        assert probe.execute("PRAGMA hard_heap_limit").fetchone()[0] == 0
    finally:
        probe.close()


def test_legitimate_sorts_groups_and_windows_still_run(table):
    ctx = ToolContext(table=table, bus=CandidateBus(table.ids))
    ctx.bus.set([f"i{k:05d}" for k in range(10)], "candidate_store")
    text = hard_filter(
        ctx,
        "SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY tags ORDER BY title) AS r "
        "FROM items) WHERE r <= 2 ORDER BY id DESC",
    )
    assert "4 of 10 candidates match" in text
    assert ctx.bus.ids == ["i00003", "i00002", "i00001", "i00000"]
    rows = table.run_select("SELECT tags, count(*) FROM items GROUP BY tags ORDER BY 1").rows
    assert rows == [("Comedy", 500), ("Drama", 500)]
    joined = table.run_select(
        "SELECT a.id, b.id FROM items a JOIN items b ON a.visited_num + 1 = b.visited_num "
        "ORDER BY a.title DESC LIMIT 2"
    )
    assert joined.rows == [("i00998", "i00999"), ("i00997", "i00998")]


# ------------------------------------------------------------------ the reply cache


def test_reply_cache_writes_succeed_while_sql_bombs_run_in_another_thread(tmp_path):
    """Before: 740 of 4,000 cache writes failed with MemoryError during a prepare bomb."""
    stop = threading.Event()
    outcomes: list[str] = []

    def bombs() -> None:
        local = _table(200)  # a table belongs to the thread that made it
        ctx = ToolContext(table=local, bus=CandidateBus(local.ids))
        while not stop.is_set():
            for sql in (PREPARE_BOMB, BOMBS["order"]):
                try:
                    lookup(ctx, sql)
                    outcomes.append("ran")
                except ToolError as error:
                    outcomes.append(str(error)[:40])

    thread = threading.Thread(target=bombs, daemon=True)
    thread.start()
    failures = writes = 0
    with ResponseCache(tmp_path / "cache.sqlite") as cache:
        deadline = time.monotonic() + 30
        while (writes < 1000 or len(outcomes) < 2) and time.monotonic() < deadline:
            try:
                cache.put(
                    f"k{writes}",
                    {"kind": "chat", "n": writes, "text": "x" * 2000},
                    {"text": "y" * 4000},
                    model="m",
                    prompt_tokens=1,
                    completion_tokens=1,
                    latency_s=0.1,
                )
            except Exception:  # noqa: BLE001 - counted: any failure is what the test rules out
                failures += 1
            writes += 1
        stop.set()
        thread.join(timeout=30)
        stored = len(cache)
    assert writes >= 1000 and failures == 0 and stored == writes
    assert len(outcomes) >= 2 and all(o.startswith("the query needs more memory") for o in outcomes)


# ------------------------------------------------------------------ the worker itself


def test_a_stuck_worker_is_stopped_at_the_deadline_and_replaced(monkeypatch):
    """A worker that stops answering (here: SIGSTOP) is killed after the time limit."""
    monkeypatch.setattr(sqlguard, "WORKER_GRACE_S", 0.3)
    local = _table(50)
    local.timeout_s = 0.2
    first = local._worker_status()["pid"]
    os.kill(first, signal.SIGSTOP)
    started = time.perf_counter()
    with pytest.raises(ToolError, match="longer than 0.2 s"):
        local.run_select("SELECT count(*) FROM items")
    assert time.perf_counter() - started < 2.0
    assert local.run_select("SELECT count(*) FROM items").rows == [(50,)]
    assert local._worker_status()["pid"] != first


def _wait_dead(pid: int) -> None:
    """Wait until ``pid`` has exited (a zombie until its parent reaps it)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] in "ZX":
                return
        except (OSError, IndexError):
            return
        time.sleep(0.01)


def test_a_worker_that_died_between_queries_is_replaced_silently():
    local = _table(50)
    first = local._worker_status()["pid"]
    os.kill(first, signal.SIGKILL)
    _wait_dead(first)
    assert local.run_select("SELECT count(*) FROM items").rows == [(50,)]
    assert local._worker_status()["pid"] != first


def test_a_worker_that_dies_during_a_query_is_a_tool_error_and_replaced():
    local = _table(1000)
    first = local._worker_status()["pid"]
    timer = threading.Timer(0.2, os.kill, (first, signal.SIGKILL))
    timer.start()
    try:
        with pytest.raises(ToolError, match="SQL worker process stopped"):
            local.run_select(BOMBS["order"])
    finally:
        timer.cancel()
    assert local.run_select("SELECT count(*) FROM items").rows == [(1000,)]
    assert local._worker_status()["pid"] != first


def _wait_gone(pid: int) -> bool:
    """Whether process ``pid`` is gone (or a zombie) within 5 s."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if Path(f"/proc/{pid}/stat").exists():
            if Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] in "ZX":
                return True
        time.sleep(0.02)
    return False


def test_the_worker_ends_with_its_table():
    local = _table(20)
    pid = local._worker_status()["pid"]
    local.close()
    assert _wait_gone(pid)
    other = _table(20)
    pid = other._worker_status()["pid"]
    del other
    gc.collect()
    assert _wait_gone(pid)
