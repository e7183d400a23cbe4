"""Tests of recagents.llm.cache: request keys, the SQLite reply cache, prices."""

from __future__ import annotations

import copy
import multiprocessing as mp
import os
import pickle
import sqlite3
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from recagents.llm.cache import (
    PRICES,
    CachedReply,
    CacheError,
    CacheTotals,
    CacheVersionError,
    ResponseCache,
    canonical_json,
    price_for,
    request_key,
)


def _chat(**overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "kind": "chat",
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a movie recommender."},
            {"role": "user", "content": "Rank: Alien, Heat, Up. — café ✓"},
        ],
        "sampling": {"temperature": 0.7, "top_p": 1.0, "max_tokens": 64, "seed": 0},
        "schema": {"type": "object", "properties": {"ranking": {"type": "array"}}},
        "sample": 0,
    }
    request.update(overrides)
    return request


def _put(cache: ResponseCache, request: dict[str, Any], text: str, **kw: Any) -> str:
    key = request_key(request)
    args = {"model": request["model"], "prompt_tokens": 10, "completion_tokens": 5}
    args["latency_s"] = 0.25
    args.update(kw)
    cache.put(key, request, {"text": text, "finish_reason": "stop"}, **args)
    return key


@pytest.fixture
def cache(tmp_path: Path) -> ResponseCache:
    with ResponseCache(tmp_path / "sub" / "replies.sqlite") as c:
        yield c


# --------------------------------------------------------------------------- keys


def test_key_is_sha256_hex_and_stable_across_dict_order() -> None:
    a = _chat()
    b = {k: a[k] for k in reversed(list(a))}
    b["sampling"] = dict(reversed(list(a["sampling"].items())))
    b["messages"] = [dict(reversed(list(m.items()))) for m in a["messages"]]
    assert request_key(a) == request_key(b)
    assert len(request_key(a)) == 64
    int(request_key(a), 16)
    assert canonical_json(a) == canonical_json(b)
    assert "café ✓" in canonical_json(a)  # ensure_ascii=False
    assert " " not in canonical_json({"a": [1, 2], "b": {"c": None}})


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.update(model="gpt-4o"),
        lambda r: r["messages"][1].update(content="Rank: Alien, Heat."),
        lambda r: r["messages"].append({"role": "assistant", "content": "x"}),
        lambda r: r["sampling"].update(temperature=0.0),
        lambda r: r["sampling"].update(seed=1),
        lambda r: r["sampling"].pop("top_p"),
        lambda r: r.update(schema=None),
        lambda r: r["schema"]["properties"].update(score={"type": "number"}),
        lambda r: r.update(sample=1),
        lambda r: r.update(kind="chat2"),
    ],
)
def test_key_changes_with_every_field(change: Any) -> None:
    base = _chat()
    changed = copy.deepcopy(base)
    change(changed)
    assert request_key(changed) != request_key(base)


def test_embed_key() -> None:
    a = {"kind": "embed", "model": "text-embedding-3-small", "input": "Alien (1979)"}
    assert request_key(a) != request_key({**a, "input": "Heat (1995)"})
    assert request_key(a) == request_key(dict(reversed(list(a.items()))))


@pytest.mark.parametrize("name", ["api_key", "API_KEY", "Authorization", "password", "Secret"])
@pytest.mark.parametrize("nested", [False, True])
def test_credentials_are_refused(tmp_path: Path, name: str, nested: bool) -> None:
    request = _chat()
    if nested:
        request["extra"] = {"headers": [{name: "hunter2"}]}
    else:
        request[name] = "hunter2"
    with pytest.raises(ValueError, match="credential"):
        request_key(request)
    with ResponseCache(tmp_path / "c.sqlite") as c:
        with pytest.raises(ValueError, match="credential"):
            c.put(
                "k",
                request,
                {"text": "x"},
                model="m",
                prompt_tokens=1,
                completion_tokens=1,
                latency_s=0.1,
            )
        assert len(c) == 0


def test_token_key_refused_but_similar_names_allowed() -> None:
    with pytest.raises(ValueError):
        request_key(_chat(sampling={"TOKEN": "x"}))
    # Only exact names are refused: these are ordinary request fields.
    request_key(_chat(sampling={"max_tokens": 5, "key": "a", "tokens": 1, "api": "x"}))


def test_request_not_json_serialisable() -> None:
    with pytest.raises(TypeError):
        request_key(_chat(sample=object()))


# --------------------------------------------------------------------------- cache


def test_put_get_round_trip(cache: ResponseCache) -> None:
    request = _chat()
    before = time.time()
    key = _put(
        cache, request, "Alien, Up, Heat", prompt_tokens=12, completion_tokens=3, latency_s=1.5
    )
    got = cache.get(key)
    assert isinstance(got, CachedReply)
    assert got.key == key
    assert got.reply == {"text": "Alien, Up, Heat", "finish_reason": "stop"}
    assert (got.prompt_tokens, got.completion_tokens, got.latency_s) == (12, 3, 1.5)
    assert got.model == "gpt-4o-mini"
    assert before - 1 <= got.created <= time.time() + 1
    assert cache.get("0" * 64) is None
    # The canonical request is stored for inspection.
    raw = sqlite3.connect(cache.path).execute("SELECT request FROM replies").fetchone()[0]
    assert raw == canonical_json(request)


def test_embedding_reply_round_trip(cache: ResponseCache) -> None:
    request = {"kind": "embed", "model": "text-embedding-3-small", "input": "Heat"}
    vector = [0.1, -2.5e-8, 3.0, 0.0]
    key = request_key(request)
    cache.put(
        key,
        request,
        {"embedding": vector},
        model=request["model"],
        prompt_tokens=2,
        completion_tokens=0,
        latency_s=0.01,
    )
    assert cache.get(key).reply == {"embedding": vector}


def test_first_writer_wins(cache: ResponseCache) -> None:
    request = _chat()
    key = _put(cache, request, "first", prompt_tokens=1)
    _put(cache, request, "second", prompt_tokens=99)
    got = cache.get(key)
    assert got.reply["text"] == "first"
    assert got.prompt_tokens == 1
    assert len(cache) == 1


def test_get_many_len_contains(cache: ResponseCache) -> None:
    keys = [_put(cache, _chat(sample=i), f"reply {i}") for i in range(1200)]
    assert len(cache) == 1200
    assert keys[0] in cache and keys[-1] in cache
    assert "missing" not in cache and 3 not in cache
    wanted = keys[::2] + ["missing-a", "missing-b"] + keys[:10]  # > 500: several chunks
    got = cache.get_many(wanted)
    assert set(got) == set(keys[::2]) | set(keys[:10])
    assert got[keys[4]].reply["text"] == "reply 4"
    assert cache.get_many([]) == {}


def test_put_validates_arguments(cache: ResponseCache) -> None:
    with pytest.raises(ValueError):
        _put(cache, _chat(), "x", prompt_tokens=-1)
    with pytest.raises(ValueError):
        cache.put("", _chat(), {}, model="m", prompt_tokens=0, completion_tokens=0, latency_s=0.0)
    with pytest.raises(TypeError):
        cache.put(
            "k",
            _chat(),
            {"x": object()},
            model="m",
            prompt_tokens=0,
            completion_tokens=0,
            latency_s=0.0,
        )
    assert len(cache) == 0


def test_totals_and_cost(cache: ResponseCache) -> None:
    assert cache.totals() == CacheTotals(0, 0, 0, 0.0)
    _put(cache, _chat(sample=0), "a", prompt_tokens=1000, completion_tokens=200, latency_s=1.0)
    _put(cache, _chat(sample=1), "b", prompt_tokens=3000, completion_tokens=800, latency_s=2.0)
    _put(
        cache,
        _chat(model="gpt-4o"),
        "c",
        prompt_tokens=500_000,
        completion_tokens=100_000,
        latency_s=4.0,
    )
    total = cache.totals()
    assert total == CacheTotals(3, 504_000, 101_000, 7.0)
    mini = cache.totals("gpt-4o-mini")
    assert mini == CacheTotals(2, 4000, 1000, 3.0)
    assert mini.cost((0.15, 0.60)) == pytest.approx((4000 * 0.15 + 1000 * 0.60) / 1e6)
    big = cache.totals("gpt-4o")
    assert big.cost(price_for("gpt-4o")) == pytest.approx(0.5 * 2.50 + 0.1 * 10.00)
    assert cache.totals("nobody") == CacheTotals(0, 0, 0, 0.0)


def test_threads_share_one_cache(cache: ResponseCache) -> None:
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(100):
                key = _put(cache, _chat(sample=t * 1000 + i), f"{t}-{i}")
                assert cache.get(key).reply["text"] == f"{t}-{i}"
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert len(cache) == 800


def test_persistence_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "c.sqlite"
    with ResponseCache(path) as c:
        key = _put(c, _chat(), "kept")
    assert path.exists()
    with ResponseCache(str(path)) as c:
        assert c.get(key).reply["text"] == "kept"
        assert len(c) == 1
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.close()


def test_closed_cache_raises(tmp_path: Path) -> None:
    c = ResponseCache(tmp_path / "c.sqlite")
    c.close()
    c.close()  # idempotent
    with pytest.raises(CacheError, match="closed"):
        c.get("k")


def test_pickle_reopens(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c.sqlite") as c:
        key = _put(c, _chat(), "x")
        with pickle.loads(pickle.dumps(c)) as d:
            assert d.path == c.path
            assert d.get(key).reply["text"] == "x"


def test_wrong_version_raises(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    ResponseCache(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    with pytest.raises(CacheVersionError) as info:
        ResponseCache(path)
    message = str(info.value)
    assert str(path) in message and "version 7" in message and "Delete" in message


def test_foreign_files_raise(tmp_path: Path) -> None:
    text = tmp_path / "notes.sqlite"
    text.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(CacheError, match="not a usable reply cache"):
        ResponseCache(text)
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE users (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(CacheError, match="not a reply cache"):
        ResponseCache(other)


# --------------------------------------------------------------------------- processes

N_PROCS = 4
N_OWN = 300
N_SHARED = 50


def _writer(path: str, proc: int, start: Any, errors: Any) -> None:
    """Child process: write N_OWN own rows and N_SHARED shared rows, interleaved with reads."""
    try:
        start.wait(timeout=60)
        with ResponseCache(path) as c:
            for i in range(N_OWN):
                key = _put(c, _chat(sample=proc * 100_000 + i), f"own {proc} {i}")
                if i % 6 == 0:
                    shared = i // 6
                    _put(c, _chat(sample=-1 - shared), f"shared {shared} by {proc}")
                if i % 10 == 0:
                    assert c.get(key).reply["text"] == f"own {proc} {i}"
                    assert len(c) >= i + 1
    except BaseException:  # noqa: BLE001
        errors.put(f"process {proc}:\n{traceback.format_exc()}")
        raise


def test_four_processes_write_one_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    errors = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(path), p, start, errors)) for p in range(4)]
    for p in procs:
        p.start()
    start.set()  # all four open the (not yet existing) file at about the same time
    for p in procs:
        p.join(timeout=120)
    messages = []
    while not errors.empty():
        messages.append(errors.get())
    assert not messages, "\n".join(messages)
    assert [p.exitcode for p in procs] == [0] * N_PROCS

    with ResponseCache(path) as c:
        assert len(c) == N_PROCS * N_OWN + N_SHARED
        keys = {
            request_key(_chat(sample=p * 100_000 + i)): f"own {p} {i}"
            for p in range(N_PROCS)
            for i in range(N_OWN)
        }
        got = c.get_many(list(keys))
        assert {k: r.reply["text"] for k, r in got.items()} == keys
        for s in range(N_SHARED):
            reply = c.get(request_key(_chat(sample=-1 - s)))
            assert reply.reply["text"] in {f"shared {s} by {p}" for p in range(N_PROCS)}
        assert c.totals() == CacheTotals(1250, 12_500, 6_250, pytest.approx(312.5))
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


# --------------------------------------------------------------------------- secrets


def test_sentinel_secret_never_reaches_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sentinel = "sk-SENTINEL-9f8e7d6c5b4a-do-not-store"
    monkeypatch.setenv("OPENAI_API_KEY", sentinel)
    path = tmp_path / "c.sqlite"
    with ResponseCache(path) as c:
        key = _put(c, _chat(), "reply")
        # A secret smuggled into an innocent-looking field is refused too.
        leaky = _chat(messages=[{"role": "user", "content": f"my key is {sentinel}"}])
        with pytest.raises(ValueError, match="OPENAI_API_KEY") as info:
            _put(c, leaky, "never stored")
        assert sentinel not in str(info.value)
        with pytest.raises(ValueError):
            request_key(leaky)
        assert c.get(key) is not None
        files = [p for p in tmp_path.iterdir() if p.name.startswith("c.sqlite")]
        assert any(p.name.endswith("-wal") for p in files)
        for p in files:
            assert sentinel.encode() not in p.read_bytes(), p
    for p in tmp_path.iterdir():
        assert sentinel.encode() not in p.read_bytes(), p


def test_short_placeholder_keys_do_not_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    request_key(_chat(messages=[{"role": "user", "content": "EMPTY shelves"}]))
    monkeypatch.setenv("TOKENIZERS_PARALLELISM_LONG_NAME", "a value longer than twelve")
    request_key(_chat(messages=[{"role": "user", "content": "a value longer than twelve"}]))


# --------------------------------------------------------------------------- prices


def test_price_for() -> None:
    assert price_for("gpt-4o-mini") == (0.15, 0.60)
    assert price_for("gpt-4o-mini-2024-07-18") == (0.15, 0.60)  # longest prefix
    assert price_for("gpt-4o-2024-08-06") == (2.50, 10.00)
    assert price_for("GPT-3.5-Turbo-0125") == (0.50, 1.50)
    assert price_for("smollm2-135m-instruct") == (0.0, 0.0)
    assert price_for("some-local-model") == (0.0, 0.0)
    assert all(len(v) == 2 and min(v) >= 0 for v in PRICES.values())


def test_import_has_no_side_effects(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = "import os, recagents.llm.cache; print(sorted(os.listdir('.')))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ},
    )
    assert out.stdout.strip() == "[]"


def test_put_many_writes_all_or_nothing_and_entries_read_back(tmp_path: Path) -> None:
    good = _chat()
    rows = [
        {
            "key": request_key(good),
            "request": good,
            "reply": {"text": "Heat"},
            "model": "gpt-4o-mini",
            "prompt_tokens": 3,
            "completion_tokens": 1,
            "latency_s": 0.5,
        }
    ]
    bad = {**rows[0], "key": "b" * 64, "request": _chat(api_key="x")}
    with ResponseCache(tmp_path / "c.sqlite", keylog=tmp_path / "keys.log") as cache:
        with pytest.raises(ValueError, match="credential-like key 'api_key'"):
            cache.put_many([*rows, bad])
        assert len(cache) == 0
        assert cache.put_many(rows) == 1 and cache.put_many(rows) == 0
        assert cache.entries() == rows and cache.entries(["nope"]) == []
        assert cache.get(rows[0]["key"]) is not None and cache.get("nope") is None
        with pickle.loads(pickle.dumps(cache)) as copy:
            assert copy.keylog == tmp_path / "keys.log"
    assert (tmp_path / "keys.log").read_text().split() == [rows[0]["key"]]
