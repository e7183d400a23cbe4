"""Hardening of reply bundles (issue #34 items 5, 7 and 10).

- Reading is streamed and bounded: a decompression bomb, a blank-line flood, an overlong line
  or a zip that lies about its sizes is refused at once, in bounded memory.
- Every entry is checked before it is trusted: what replay and the cache need (a chat reply's
  ``text``, whole token counts, finite bounded numbers), with one ``BundleError`` naming the
  file, the line and the field; the CLI prints it on one line.
- Export refuses every credential the issue found exported: fields named like credentials,
  ``Bearer`` tokens, Groq and GitHub fine-grained keys, the value of any secret-named variable
  (raw or JSON-escaped); and refuses nothing in ordinary prompts and replies.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import struct
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from recagents.llm import __main__ as cli
from recagents.llm import bundle as bundles
from recagents.llm.bundle import BundleError, export_bundle, import_bundle, read_bundle
from recagents.llm.cache import ResponseCache, request_key
from recagents.llm.secret_scan import env_secrets_in, find_secrets, is_credential_name

FIELDS = ("key", "request", "reply", "model", "prompt_tokens", "completion_tokens", "latency_s")
SAMPLING = {"temperature": 0.0, "max_tokens": 256, "seed": 0}


@pytest.fixture(autouse=True)
def _no_secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No secret-named variable of the machine running the tests takes part."""
    for name, value in list(os.environ.items()):
        if env_secrets_in(value, {name: value}):
            monkeypatch.delenv(name)
    monkeypatch.delenv("RECAGENTS_REPLAY", raising=False)


def _chat(content: str, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "chat",
        "model": "m",
        "messages": [{"role": "user", "content": content}],
        "sampling": SAMPLING,
        "schema": None,
        "structured": None,
        "sample": 0,
        **extra,
    }


def _cache(folder: Path, requests: list[dict[str, Any]], replies: list[Any] | None = None) -> Path:
    """A cache holding ``requests`` with their replies, written past the cache's own checks.

    Rows go in with SQL, as an old cache (or one made on another machine) could hold them.
    """
    with ResponseCache(folder / "llm-cache.sqlite", keylog=""):
        pass
    with sqlite3.connect(folder / "llm-cache.sqlite") as conn:
        for i, request in enumerate(requests):
            text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            reply = replies[i] if replies else {"text": f"answer {i}", "finish_reason": "stop"}
            conn.execute(
                "INSERT INTO replies VALUES (?, ?, ?, 'm', 10, 3, 0.5, 0)",
                (hashlib.sha256(text.encode()).hexdigest(), text, json.dumps(reply)),
            )
    return folder


@pytest.fixture
def good(tmp_path: Path) -> Path:
    """A valid bundle of five chat replies."""
    folder = _cache(tmp_path / "run", [_chat(f"rank the films for user {u}") for u in range(5)])
    export_bundle(tmp_path / "good.bundle", cache=folder)
    return tmp_path / "good.bundle"


def _digest(entry: dict[str, Any]) -> str:
    body = {name: entry[name] for name in FIELDS}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _forge(
    source: Path,
    out: Path,
    edit: Callable[[list[dict[str, Any]], dict[str, Any]], None] | None = None,
    data: bytes | None = None,
) -> Path:
    """Copy a bundle with ``edit(entries, manifest)`` applied and EVERY checksum recomputed.

    A forged bundle passes the checksums; only the checks of the entries can refuse it.
    ``data`` replaces ``entries.jsonl`` outright.
    """
    with zipfile.ZipFile(source) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        entries = [json.loads(line) for line in archive.read("entries.jsonl").splitlines()]
    if data is None:
        if edit is not None:
            edit(entries, manifest)
        for entry in entries:
            if all(name in entry for name in FIELDS):
                entry["sha256"] = _digest(entry)
        data = "".join(json.dumps(e, sort_keys=True) + "\n" for e in entries).encode()
        manifest["entries"] = len(entries)
    manifest["entries_sha256"] = hashlib.sha256(data).hexdigest()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps(manifest))
        archive.writestr("entries.jsonl", data)
    return out


def _bomb(source: Path, out: Path, chunk: bytes, megabytes: int) -> Path:
    """``source``'s manifest with an ``entries.jsonl`` of ``megabytes`` MiB of ``chunk``."""
    with zipfile.ZipFile(source) as archive:
        manifest = archive.read("manifest.json")
    block = chunk * ((1 << 20) // len(chunk))
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", manifest)
        with archive.open("entries.jsonl", "w", force_zip64=True) as stream:
            for _ in range(megabytes):
                stream.write(block)
    return out


# --------------------------------------------------------------------------- 5: bounded reading


def test_a_blank_line_flood_is_refused_at_once_in_bounded_memory(
    good: Path, tmp_path: Path
) -> None:
    bomb = _bomb(good, tmp_path / "bomb.bundle", b"\n", 32)  # 32 MiB of newlines, 32 KB zipped
    assert bomb.stat().st_size < 100_000
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(BundleError, match=r"entries.jsonl line 1 is empty"):
            read_bundle(bomb)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 2.0 and peak < 16, peak


def test_an_overlong_line_is_refused_at_the_cap(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundles, "MAX_ENTRY_BYTES", 64 * 1024)
    bomb = _bomb(good, tmp_path / "line.bundle", b"x", 8)  # one 8 MiB line, no newline
    tracemalloc.start()
    try:
        with pytest.raises(BundleError, match=r"line 1 is longer than MAX_ENTRY_BYTES=65,536"):
            read_bundle(bomb)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    assert peak < 4, peak
    # A line exactly at the cap is read (and then judged on its content).
    exact = _forge(good, tmp_path / "exact.bundle", data=b"y" * (64 * 1024) + b"\n")
    with pytest.raises(BundleError, match="line 1 is not a JSON object"):
        read_bundle(exact)


def test_a_declared_size_over_the_cap_is_refused_before_reading(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundles, "MAX_BUNDLE_BYTES", 1 << 20)
    bomb = _bomb(good, tmp_path / "big.bundle", b"\n", 2)
    with pytest.raises(BundleError, match=r"declares 2,097,152 bytes, more than the 1,048,576"):
        read_bundle(bomb)


def test_a_zip_that_understates_its_size_is_refused(good: Path, tmp_path: Path) -> None:
    """The central directory says 100 bytes; 4 MiB follow. Only 100 are read, then refused."""
    bomb = _bomb(good, tmp_path / "liar.bundle", b"\n", 4)
    raw = bytearray(bomb.read_bytes())
    # The uncompressed size of entries.jsonl in its central-directory record (the last one).
    record = raw.rfind(b"PK\x01\x02")
    assert struct.unpack_from("<I", raw, record + 24)[0] == 4 << 20
    struct.pack_into("<I", raw, record + 24, 100)
    bomb.write_bytes(bytes(raw))
    assert zipfile.ZipFile(bomb).getinfo("entries.jsonl").file_size == 100
    started = time.perf_counter()
    with pytest.raises(BundleError) as raised:
        read_bundle(bomb)
    assert time.perf_counter() - started < 1.0
    assert "line 1 is empty" in str(raised.value) or "not a readable" in str(raised.value)


def test_lines_beyond_the_manifests_count_stop_at_once(good: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(good) as archive:
        lines = archive.read("entries.jsonl").splitlines(keepends=True)
    flood = b"".join(lines) + b'{"x": 1}\n' * 200_000
    bad = _forge(good, tmp_path / "more.bundle", data=flood)
    started = time.perf_counter()
    with pytest.raises(BundleError, match=r"line 6: the bundle holds more entries than the 5"):
        read_bundle(bad)
    assert time.perf_counter() - started < 1.0


def test_a_manifest_over_its_cap_is_refused(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundles, "MAX_MANIFEST_BYTES", 100)
    with pytest.raises(BundleError, match=r"manifest.json declares \d[\d,]* bytes"):
        read_bundle(good)


# --------------------------------------------------------------------------- 10: odd entries


def _set(field: str, value: Any, line: int = 0) -> Callable[[list[dict[str, Any]], Any], None]:
    """An edit setting ``field`` (``reply`` or ``reply.text``) of one entry to ``value``."""

    def edit(entries: list[dict[str, Any]], manifest: dict[str, Any]) -> None:
        target = entries[line]
        *parents, name = field.split(".")
        for parent in parents:
            target = target[parent]
        target[name] = value

    return edit


ODD = [
    ("reply", {}, r"field reply.text: missing"),
    ("reply.text", 7, r"field reply.text: not a string"),
    ("latency_s", math.nan, r"field latency_s: nan is not a finite number"),
    ("latency_s", math.inf, r"field latency_s: inf is not a finite number"),
    ("latency_s", 1e30, r"field latency_s: 1e\+30 is not a number from 0 to 1e\+06"),
    ("latency_s", "abc", r"field latency_s: 'abc' is not a number"),
    ("prompt_tokens", 1e30, r"field prompt_tokens: 1e\+30 is not a whole number"),
    ("prompt_tokens", 10**30, r"field prompt_tokens: \d+ is not a whole number"),
    ("completion_tokens", "abc", r"field completion_tokens: 'abc' is not a whole number"),
    ("completion_tokens", -1, r"field completion_tokens: -1 is not a whole number"),
    ("completion_tokens", True, r"field completion_tokens: True is not a whole number"),
    ("model", "", r"field model: '' is not a model name"),
    ("request.kind", "image", r"field request.kind: 'image' is not 'chat' or 'embed'"),
    ("request.messages", "hi", r"field request.messages: not a list of messages"),
    ("request.structured", [1], r"field request.structured: not a string or null"),
    ("reply.finish_reason", 3, r"field reply.finish_reason: not a string or null"),
]


@pytest.mark.parametrize(("field", "value", "message"), ODD, ids=[f"{f}={v!r}" for f, v, _ in ODD])
def test_an_odd_entry_is_refused_naming_file_line_and_field(
    good: Path, tmp_path: Path, field: str, value: Any, message: str
) -> None:
    bad = _forge(good, tmp_path / "odd.bundle", _set(field, value, line=2))
    with pytest.raises(BundleError, match=message) as raised:
        read_bundle(bad)
    assert str(bad) in str(raised.value) and "entries.jsonl line 3 (key " in str(raised.value)
    target = tmp_path / "target"
    with pytest.raises(BundleError):
        import_bundle(bad, target)
    with ResponseCache(target / "llm-cache.sqlite") as cache:
        assert len(cache) == 0  # nothing is written, nothing dropped silently


@pytest.mark.parametrize("action", ["verify", "import", "show"])
@pytest.mark.parametrize(("field", "value"), [("prompt_tokens", 1e30), ("latency_s", "abc")])
def test_the_cli_prints_one_line_and_exits_1_on_odd_numbers(
    good: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    action: str,
    field: str,
    value: Any,
) -> None:
    bad = _forge(good, tmp_path / "odd.bundle", _set(field, value))
    argv = ["bundle", action, str(bad)]
    assert cli.main(argv + (["--cache", str(tmp_path / "c")] if action == "import" else [])) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("error: bundle ") and f"field {field}:" in captured.err


def test_a_reply_without_text_never_reaches_replay(good: Path, tmp_path: Path) -> None:
    """Before: ``verify`` passed it, and replay raised ``KeyError: 'text'``."""
    from recagents.config import settings
    from recagents.llm.client import LLMClient

    bad = _forge(good, tmp_path / "empty-reply.bundle", _set("reply", {}))
    config = settings()
    with pytest.raises(BundleError, match="field reply.text: missing"):
        LLMClient(config=config, cache=ResponseCache(tmp_path / "r" / "c.sqlite"), replay=bad)


def test_embedding_entries_need_a_vector_of_numbers(tmp_path: Path) -> None:
    request = {"kind": "embed", "model": "e", "input": "Toy Story (1995)"}
    folder = _cache(tmp_path / "run", [request], [{"embedding": [0.25, -0.5, 1.0]}])
    good = tmp_path / "embed.bundle"
    export_bundle(good, cache=folder)
    assert read_bundle(good)[1][0]["reply"]["embedding"] == [0.25, -0.5, 1.0]
    for value, message in [
        (["0.1", 0.2], r"field reply.embedding\[0\]: '0.1' is not a number"),
        ([], "field reply.embedding: not a non-empty list of numbers"),
        ([0.1, math.nan], r"field reply.embedding\[1\]: nan is not a finite number"),
    ]:
        bad = _forge(good, tmp_path / "bad.bundle", _set("reply.embedding", value))
        with pytest.raises(BundleError, match=message):
            read_bundle(bad)


def test_duplicate_keys_extra_fields_and_deep_nesting_are_refused(
    good: Path, tmp_path: Path
) -> None:
    def duplicate(entries: list[dict[str, Any]], manifest: dict[str, Any]) -> None:
        entries.append(dict(entries[0]))

    with pytest.raises(BundleError, match=r"line 6: key [0-9a-f]{64} is already on line 1"):
        read_bundle(_forge(good, tmp_path / "dup.bundle", duplicate))
    with pytest.raises(BundleError, match="field extra: not a field of a bundle entry"):
        read_bundle(_forge(good, tmp_path / "extra.bundle", _set("extra", 1)))
    deep = b'{"request": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    with pytest.raises(BundleError, match=r"line 1 is not a JSON object \(maximum recursion"):
        read_bundle(_forge(good, tmp_path / "deep.bundle", data=deep * 5))
    with pytest.raises(BundleError, match=r"line 1 .*nested deeper than MAX_DEPTH=64"):
        shallow: Any = 1
        for _ in range(80):
            shallow = [shallow]
        read_bundle(_forge(good, tmp_path / "deep2.bundle", _set("request.schema", shallow)))
    huge = b'{"key": ' + b"9" * 5000 + b"}\n"
    with pytest.raises(BundleError, match="line 1 is not a JSON object"):
        read_bundle(_forge(good, tmp_path / "digits.bundle", data=huge * 5))


def test_the_manifest_is_checked_against_its_entries(good: Path, tmp_path: Path) -> None:
    def other_model(entries: list[dict[str, Any]], manifest: dict[str, Any]) -> None:
        manifest["chat_models"] = ["gpt-4o"]

    def bad_sampling(entries: list[dict[str, Any]], manifest: dict[str, Any]) -> None:
        manifest["sampling"] = [{"x": 1}]

    def bad_count(entries: list[dict[str, Any]], manifest: dict[str, Any]) -> None:
        manifest["entries"] = 1e30

    with pytest.raises(BundleError, match=r"manifest field chat_models is \['gpt-4o'\]"):
        read_bundle(_forge(good, tmp_path / "a.bundle", other_model))
    with pytest.raises(BundleError, match=r"manifest.json: field sampling\[0\].sampling: missing"):
        read_bundle(_forge(good, tmp_path / "b.bundle", bad_sampling))

    bad = _forge(good, tmp_path / "c.bundle")
    with zipfile.ZipFile(bad) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        data = archive.read("entries.jsonl")
    bad_count([], manifest)
    with zipfile.ZipFile(bad, "w") as archive:
        archive.writestr("manifest.json", json.dumps(manifest))
        archive.writestr("entries.jsonl", data)
    with pytest.raises(BundleError, match="manifest.json: field entries: 1e"):
        read_bundle(bad)


def test_export_refuses_a_row_that_would_not_read_back(tmp_path: Path) -> None:
    folder = _cache(tmp_path / "run", [_chat("hello")], [{}])
    out = tmp_path / "out.bundle"
    with pytest.raises(BundleError, match="cannot be exported .*field reply.text: missing"):
        export_bundle(out, cache=folder)
    assert not out.exists()


# --------------------------------------------------------------------------- 7: secrets

HEX32 = "3f9a1c0be2d47a8e9b6c5d4e3f2a1b0c"
EXPORTED_BEFORE = {
    "field x-api-key": (_chat("hi", headers={"x-api-key": "abc123"}), "key 'x-api-key'"),
    "field api-key": (_chat("hi", **{"api-key": "abc123"}), "credential-like key 'api-key'"),
    "field apiKey": (_chat("hi", extra={"apiKey": "abc123"}), "credential-like key 'apiKey'"),
    "field access_token": (_chat("hi", access_token="abc123"), "'access_token'"),
    "Bearer hex": (_chat(f"send Authorization: Bearer {HEX32}"), r"\(Bearer token\)"),
    "gsk_": (_chat("groq gsk_" + "Qw8eRt5y" * 6 + "abcd"), r"\(Groq key\)"),
    "github_pat_": (_chat("pat github_pat_11ABCDEFG0" + "x1Y2" * 15), "GitHub fine-grained"),
}


@pytest.mark.parametrize("case", list(EXPORTED_BEFORE))
def test_export_refuses_credentials_it_used_to_export(tmp_path: Path, case: str) -> None:
    request, message = EXPORTED_BEFORE[case]
    folder = _cache(tmp_path / "run", [request])
    out = tmp_path / "out.bundle"
    with pytest.raises(BundleError, match=message) as raised:
        export_bundle(out, cache=folder)
    assert not out.exists()
    for secret in ("abc123", HEX32, "Qw8eRt5y", "x1Y2x1Y2"):
        assert secret not in str(raised.value)


def test_a_credential_field_in_a_reply_is_refused(tmp_path: Path) -> None:
    folder = _cache(tmp_path / "run", [_chat("hi")], [{"text": "ok", "Authorization": "x"}])
    with pytest.raises(BundleError, match="a field named 'Authorization'"):
        export_bundle(tmp_path / "out.bundle", cache=folder)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("AZURE_OPENAI_KEY", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
        ("OPENAI_API_KEY", 'Zq"81-quoted-secret-99'),  # JSON-escaped in the bundle: \"
        ("MY_SERVICE_PASSWORD", "back\\slash-pw-123"),
        ("GITHUB_PAT", "plain-but-long-value-7"),
    ],
)
def test_the_value_of_any_secret_named_variable_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, secret: str
) -> None:
    folder = _cache(tmp_path / "run", [_chat(f"my key is {secret}, keep it")])
    monkeypatch.setenv(name, secret)
    with pytest.raises(BundleError, match=name) as raised:
        export_bundle(tmp_path / "out.bundle", cache=folder)
    assert secret not in str(raised.value) and json.dumps(secret) not in str(raised.value)
    # The cache refuses such a request too, raw or escaped.
    with pytest.raises(ValueError, match=name):
        request_key(_chat(f"again {secret}"))


@pytest.mark.parametrize(
    "request_",
    [
        _chat("hi", headers={"X-Api-Key": "k"}),
        _chat("hi", nested=[{"apiKey": "k"}]),
        _chat("hi", access_token="k"),
        _chat("hi", **{"Ocp-Apim-Subscription-Key": "k"}),
    ],
)
def test_the_cache_refuses_requests_with_credential_fields(request_: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="credential-like key"):
        request_key(request_)


def test_key_shapes_refused_before_are_still_refused(tmp_path: Path) -> None:
    for text in ("sk-proj-" + "Ab3x" * 12, "sk-ant-api03-" + "xY9_" * 12, "hf_" + "aB1c" * 9):
        folder = _cache(tmp_path / text[:6], [_chat(f"key {text}")])
        with pytest.raises(BundleError, match="shaped like an API key"):
            export_bundle(tmp_path / "out.bundle", cache=folder)


TITLES = [
    "Toy Story (1995)",
    "Jumanji (1995)",
    "Heat (1995)",
    "Sabrina (1995)",
    "GoldenEye (1995)",
    "Se7en (a.k.a. Seven) (1995)",
    "Twelve Monkeys (a.k.a. 12 Monkeys) (1995)",
    "Star Wars: Episode IV - A New Hope (1977)",
    "Wallace & Gromit: The Best of Aardman Animation (1996)",
    "Dr. Strangelove or: How I Learned to Stop Worrying and Love the Bomb (1963)",
]


def test_ordinary_prompts_replies_and_ids_are_not_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")  # placeholders of local servers
    monkeypatch.setenv("RECAGENTS_LLM_API_KEY", "not-needed")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    requests, replies = [], []
    for u in range(40):
        ids = [hashlib.sha256(f"{u}-{t}".encode()).hexdigest() for t in TITLES]
        listing = "\n".join(
            f"{j + 1}. [{i[:12]}] {t}" for j, (i, t) in enumerate(zip(ids, TITLES, strict=True))
        )
        prompt = (
            f"You are user {u}, a fan of Comedy|Drama who rated 4 of 5 stars. Cache key "
            f"{ids[0]}. Rank these movies:\n{listing}\nReply in JSON with your password-free "
            f"reasoning; the bearer of good news is {TITLES[u % 10]}. Task-2024-01-15-report."
        )
        schema = {"type": "object", "properties": {"ranking": {"type": "array"}}}
        requests.append(_chat(prompt, schema=schema, max_tokens_hint=30))
        ranking = {"ranking": list(range(1, 11)), "reason": f"I like {TITLES[u % 10]}"}
        replies.append({"text": json.dumps(ranking), "finish_reason": "stop"})
    requests.append({"kind": "embed", "model": "all-minilm-l6-v2", "input": TITLES[0]})
    replies.append({"embedding": [((i * 7919) % 1000) / 1000 - 0.5 for i in range(384)]})
    folder = _cache(tmp_path / "run", requests, replies)
    manifest = export_bundle(tmp_path / "ok.bundle", cache=folder, endpoint="http://10.1.2.3:8080")
    assert manifest["entries"] == 41
    assert find_secrets("\n".join(TITLES)) == []
    assert find_secrets(json.dumps({"key": hashlib.sha256(b"x").hexdigest()})) == []


def test_secret_names_and_fields() -> None:
    for name in ("x-api-key", "apiKey", "API_KEY", "access_token", "Authorization", "password"):
        assert is_credential_name(name), name
    for name in ("max_tokens", "prompt_tokens", "key", "keywords", "monkey", "sampling"):
        assert not is_credential_name(name), name
    env = {
        "AZURE_OPENAI_KEY": "secret-value-1",
        "HF_TOKEN": "secret-value-2",
        "DB_PASSWORD": "secret-value-3",
        "TOKENIZERS_PARALLELISM_X": "secret-value-4",
        "PWD": "secret-value-5",
        "SHORT_KEY": "abc1234",
    }
    text = " ".join(env.values())
    assert env_secrets_in(text, env) == ["AZURE_OPENAI_KEY", "DB_PASSWORD", "HF_TOKEN"]


def test_the_same_replies_export_to_the_same_bytes_with_source_date_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ResponseCache(tmp_path / "c" / "llm-cache.sqlite")
    keys = []
    for n in range(5):
        request = {"kind": "chat", "model": "m", "messages": [{"role": "user", "content": f"{n}"}]}
        keys.append(request_key(request))
        cache.put(
            keys[-1], request, {"text": f"reply {n}"}, model="m", prompt_tokens=3,
            completion_tokens=2, latency_s=0.5,
        )  # fmt: skip
    cache.close()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1765065600")
    first, second = tmp_path / "a.bundle", tmp_path / "b.bundle"
    manifest = export_bundle(first, cache=tmp_path / "c", keys=keys)
    export_bundle(second, cache=tmp_path / "c", keys=keys[::-1])  # logged in another order
    assert first.read_bytes() == second.read_bytes()
    assert manifest["created_at"] == "2025-12-07T00:00:00+00:00"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(BundleError, match="SOURCE_DATE_EPOCH"):
        export_bundle(tmp_path / "c.bundle", cache=tmp_path / "c")
