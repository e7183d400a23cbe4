"""Hardening of the LLM layer's edges (issue #34, items 6, 11 and 12).

- Item 6: credentials in an endpoint URL (user info, ``?api-key=``) never reach a message, a
  log, a repr or a bundle manifest (:func:`recagents.llm.redact.redact_url`).
- Item 11: a damaged reply cache stops every operation with a :class:`CacheError` that names
  the file and says what to do, instead of SQLite's bare "database disk image is malformed".
- Item 12: settings are checked when they are read (finite, in range), and a key log that
  cannot be written stops the client before its first request.

Every test runs in well under a second or two, against the scripted test server at most.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai  # noqa: F401  (imported up front so no test pays for the first import)
import pytest
from scripted_server import ScriptedServer, closed_port_url, status
from scripted_server import scripted_server as scripted_server  # noqa: F401  (fixture)

from recagents.config import ConfigError, Settings, settings
from recagents.llm import local
from recagents.llm.bundle import endpoint_host
from recagents.llm.cache import CacheError, ResponseCache, request_key
from recagents.llm.client import ChatRequest, EndpointUnreachableError, LLMClient
from recagents.llm.local import LocalConfigError, LocalServerError
from recagents.llm.redact import redact_url

SECRET = "PASSWORD-1f3a9c"


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _config(tmp_path: Path, **fields: Any) -> Settings:
    base = {"cache_dir": tmp_path, "llm_max_attempts": 2, "llm_timeout_s": 1.0, **fields}
    return dataclasses.replace(settings(), **base)


def _client(url: str, tmp_path: Path, **fields: Any) -> LLMClient:
    return LLMClient(
        base_url=url,
        model="scripted",
        api_key="not-the-secret",
        config=_config(tmp_path, **fields),
        cache=False,
        backoff_base_s=0.01,
        backoff_max_s=0.02,
    )


def _with_userinfo(url: str) -> str:
    return url.replace("http://", f"http://user:{SECRET}@")


# --------------------------------------------------------------------------- item 6


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://u:PASS@127.0.0.1:1/v1", "http://***@127.0.0.1:1/v1"),
        ("https://PASS@host/v1", "https://***@host/v1"),
        ("http://127.0.0.1:1/v1?api-key=PASS&x=1", "http://127.0.0.1:1/v1?api-key=***&x=1"),
        ("https://h/v1?key=PASS", "https://h/v1?key=***"),
        ("https://h/v1?Access_Token=PASS#sig=PASS", "https://h/v1?Access_Token=***#sig=***"),
        ("http://u:pa/ss@h/v1", "http://***@h/v1"),  # a raw "/" in the password
        ("u:PASS@h:1/v1", "***@h:1/v1"),  # no scheme
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("http://h/v1?model=m&deployment=d", "http://h/v1?model=m&deployment=d"),
        (None, ""),
    ],
)
def test_redact_url_masks_user_info_and_credential_parameters(
    url: str | None, expected: str
) -> None:
    assert redact_url(url) == expected


def test_redact_url_masks_every_url_inside_a_message() -> None:
    text = (
        f"Connection error at URL('http://u:{SECRET}@h:1/v1/chat') "
        f"(retrying https://h/v1?api_key={SECRET}); see https://docs.example/x."
    )
    clean = redact_url(text)
    assert SECRET not in clean
    assert "URL('http://***@h:1/v1/chat')" in clean
    assert "https://h/v1?api_key=***" in clean and "https://docs.example/x." in clean


@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_client_repr_and_failures_hide_url_credentials(tmp_path: Path, form: str) -> None:
    base = closed_port_url()
    url = _with_userinfo(base) if form == "userinfo" else f"{base}?api-key={SECRET}"
    client = _client(url, tmp_path)
    assert SECRET not in repr(client) and SECRET not in client.backend
    assert "127.0.0.1" in client.backend
    with pytest.raises(EndpointUnreachableError) as raised:
        client.chat(_user("hi"))
    assert SECRET not in str(raised.value) and "127.0.0.1" in str(raised.value)
    [result] = client.map([ChatRequest(messages=_user("hi"))], raise_unreachable=False)
    assert result.failure == "transport" and result.error
    assert SECRET not in result.error and "***" in result.error


def test_library_error_text_that_embeds_the_url_is_redacted(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    """A gateway's error body that echoes the request URL reaches ChatResult.error masked."""
    url = _with_userinfo(scripted_server.url)
    scripted_server.set_default(status(400, body=f"bad request to {url}/chat/completions"))
    result = _client(url, tmp_path).chat(_user("hi"))
    assert result.failure == "transport" and result.error and "400" in result.error
    assert SECRET not in result.error and "http://***@127.0.0.1" in result.error


def test_http_library_logs_hide_url_credentials(
    scripted_server: ScriptedServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx logs each request's full URL at INFO; the client masks it."""
    client = _client(_with_userinfo(scripted_server.url), tmp_path)
    with caplog.at_level(logging.DEBUG):
        assert client.chat(_user("hi")).ok
    assert "HTTP Request" in caplog.text  # the line that used to carry the password
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    "url",
    [
        f"http://u:{SECRET}@127.0.0.1:abc/v1",  # bad port: httpx.InvalidURL mid-batch before
        f"ftp://u:{SECRET}@127.0.0.1:1/v1",
        f"u:{SECRET}@127.0.0.1:1/v1",
        f"http://u:{SECRET}@[::1/v1",
    ],
)
def test_unusable_endpoint_url_is_a_config_error_without_the_secret(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="base_url=") as raised:
        _client(url, tmp_path)
    assert SECRET not in str(raised.value)
    monkeypatch.setenv("RECAGENTS_LLM_BASE_URL", url)
    with pytest.raises(ConfigError, match="RECAGENTS_LLM_BASE_URL") as raised:
        settings()
    assert SECRET not in str(raised.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"http://u:{SECRET}@127.0.0.1:8080/v1?key={SECRET}", "http://127.0.0.1:8080"),
        (f"http://u:{SECRET}@h:abc/v1", "unknown"),  # raised ValueError before
        (f"http://u:pa/{SECRET}@h/v1", "http://h"),  # leaked "u" and "pa" as host and port
        ("http://[::1", "unknown"),
        (None, "local"),
    ],
)
def test_endpoint_host_keeps_only_scheme_host_and_port(url: str | None, expected: str) -> None:
    assert endpoint_host(url) == expected


# --------------------------------------------------------------------------- item 11


def _filled_cache(path: Path, rows: int = 300) -> list[str]:
    """A checkpointed cache of ``rows`` replies of ~1 KB each; returns their keys."""
    requests = [{"kind": "chat", "i": i, "pad": "x" * 500} for i in range(rows)]
    keys = [request_key(request) for request in requests]
    entries = [
        {
            "key": key,
            "request": request,
            "reply": {"text": "y" * 500},
            "model": "m",
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "latency_s": 0.1,
        }
        for key, request in zip(keys, requests, strict=True)
    ]
    with ResponseCache(path, keylog="") as cache:
        cache.put_many(entries)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return keys


def _garble(path: Path, start: int, length: int) -> None:
    with open(path, "r+b") as file:
        file.seek(start)
        file.write(bytes((i * 151 + 7) % 256 for i in range(length)))


def _assert_names_file_and_remedy(error: CacheError, path: Path) -> None:
    message = str(error)
    assert str(path.resolve()) in message
    assert "move it" in message and "aside" in message and "malformed" in message


def test_garbage_page_in_the_middle_of_the_cache_is_a_cache_error(tmp_path: Path) -> None:
    """The probe: 4 KB of garbage mid-file; the cache opens, then the first lookup fails."""
    path = tmp_path / "c.sqlite"
    keys = _filled_cache(path)
    _garble(path, path.stat().st_size // 2 // 4096 * 4096, 4096)
    with ResponseCache(path, keylog="") as cache:
        with pytest.raises(CacheError) as raised:
            cache.get_many(keys)
        _assert_names_file_and_remedy(raised.value, path)
        with pytest.raises(CacheError):
            for key in keys:
                cache.get(key)


_OPERATIONS: dict[str, Callable[[ResponseCache, list[str]], Any]] = {
    "get": lambda cache, keys: cache.get(keys[0]),
    "get_many": lambda cache, keys: cache.get_many(keys),
    "put": lambda cache, keys: cache.put(
        "k", {"kind": "x"}, {"t": 1}, model="m", prompt_tokens=0, completion_tokens=0, latency_s=0
    ),
    "put_many": lambda cache, keys: cache.put_many(
        [
            {
                "key": f"k{i}",
                "request": {"i": i},
                "reply": {"t": "z" * 3000},
                "model": "m",
                "prompt_tokens": 1,
                "completion_tokens": 1,
                "latency_s": 0.0,
            }
            for i in range(50)
        ]
    ),
    "totals": lambda cache, keys: cache.totals(),
    "entries": lambda cache, keys: cache.entries(),
    "entries_of_keys": lambda cache, keys: cache.entries(keys),
    "iteration": lambda cache, keys: list(cache),
    "len": lambda cache, keys: len(cache),
    "contains": lambda cache, keys: keys[0] in cache,
}


@pytest.mark.parametrize("operation", sorted(_OPERATIONS))
def test_every_cache_operation_turns_corruption_into_a_cache_error(
    tmp_path: Path, operation: str
) -> None:
    """Every page but the header and schema garbled: each operation hits a damaged page."""
    path = tmp_path / "c.sqlite"
    keys = _filled_cache(path)
    _garble(path, 4096, path.stat().st_size - 4096)
    with ResponseCache(path, keylog="") as cache:
        with pytest.raises(CacheError) as raised:
            _OPERATIONS[operation](cache, keys)
    _assert_names_file_and_remedy(raised.value, path)


def test_garbage_header_is_a_cache_error_at_open(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    _filled_cache(path, rows=5)
    _garble(path, 0, 4096)
    with pytest.raises(CacheError) as raised:
        ResponseCache(path, keylog="")
    assert str(path.resolve()) in str(raised.value) and "aside" in str(raised.value)


def test_a_stored_row_that_does_not_parse_is_a_cache_error(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    keys = _filled_cache(path, rows=3)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE replies SET reply = '{not json' WHERE key = ?", (keys[0],))
    conn.commit()
    conn.close()
    with ResponseCache(path, keylog="") as cache:
        for read in (lambda: cache.get(keys[0]), lambda: cache.get_many(keys), cache.entries):
            with pytest.raises(CacheError, match="aside") as raised:
                read()
            assert str(path.resolve()) in str(raised.value)
        assert cache.get(keys[1]) is not None  # undamaged rows still read


# --------------------------------------------------------------------------- item 12


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RECAGENTS_LLM_TIMEOUT", "nan"),
        ("RECAGENTS_LLM_TIMEOUT", "inf"),
        ("RECAGENTS_LLM_TIMEOUT", "1e9"),
        ("RECAGENTS_LOCK_TIMEOUT", "nan"),
        ("RECAGENTS_LOCK_TIMEOUT", "-1"),
        ("RECAGENTS_LLM_CONCURRENCY", "1000000000"),
        ("RECAGENTS_LLM_CONCURRENCY", "1e9"),
        ("RECAGENTS_LLM_MAX_ATTEMPTS", "100000"),
        ("RECAGENTS_LLM_MAX_ATTEMPTS", "0"),
        ("RECAGENTS_LLM_MAX_REASKS", "100000"),
    ],
)
def test_settings_refuse_non_finite_or_absurd_numbers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str, value: str
) -> None:
    monkeypatch.setenv("RECAGENTS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as raised:
        settings()
    message = str(raised.value)
    assert f"{variable}={value!r}" in message and " from " in message and " to " in message
    with pytest.raises(ConfigError, match=variable):
        LLMClient(cache=False)  # the client stops at start, before any request


def test_settings_accept_the_bounds_and_blank_values(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RECAGENTS_CACHE_DIR", str(tmp_path))
    bounded = [f for f in dataclasses.fields(Settings) if "low" in f.metadata]
    assert len(bounded) == 5
    for spec in bounded:
        variable, low, high = spec.metadata["env"], spec.metadata["low"], spec.metadata["high"]
        whole = isinstance(spec.default, int) or spec.default is None
        for value in (low, high):
            monkeypatch.setenv(variable, str(int(value) if whole else value))
            assert getattr(settings(), spec.name) == value
        monkeypatch.setenv(variable, " ")
        settings()


def test_settings_built_in_code_are_checked_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"llm_timeout_s \(RECAGENTS_LLM_TIMEOUT\)=nan"):
        _config(tmp_path, llm_timeout_s=float("nan"))
    with pytest.raises(ConfigError, match="RECAGENTS_LLM_CONCURRENCY"):
        _config(tmp_path, llm_concurrency=10**9)


def test_lock_timeout_nan_stops_before_the_file_lock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """It used to reach filelock, which raised a bare ValueError."""
    from recagents.locks import cache_lock

    monkeypatch.setenv("RECAGENTS_LOCK_TIMEOUT", "nan")
    with pytest.raises(ConfigError, match="RECAGENTS_LOCK_TIMEOUT='nan'"):
        with cache_lock(tmp_path / "entry"):
            pass


@pytest.mark.parametrize("value", ["100000", "0", "1e3", "nan"])
def test_local_threads_are_bounded(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(local.THREADS_ENV, value)
    with pytest.raises(LocalConfigError, match=local.THREADS_ENV) as raised:
        local._default_threads("llama-server")
    assert isinstance(raised.value, ConfigError) and isinstance(raised.value, LocalServerError)
    assert f"at most {min(256, 4 * (os.cpu_count() or 1))}" in str(raised.value)


@pytest.fixture
def keylog_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], None]]:
    def set_keylog(path: Path) -> None:
        monkeypatch.setenv("RECAGENTS_KEYLOG", str(path))

    yield set_keylog


@pytest.mark.parametrize("where", ["folder", "under_a_file"])
def test_unwritable_keylog_stops_the_client_before_its_first_request(
    scripted_server: ScriptedServer,
    tmp_path: Path,
    keylog_env: Callable[[Path], None],
    where: str,
) -> None:
    target = tmp_path / "logs"
    if where == "folder":
        target.mkdir()
    else:
        target.write_text("a file\n")
        target = target / "keys.txt"
    keylog_env(target)
    with pytest.raises(ConfigError, match="RECAGENTS_KEYLOG") as raised:
        LLMClient(base_url=scripted_server.url, model="m", config=_config(tmp_path))
    assert str(target) in str(raised.value)
    assert scripted_server.count() == 0


def test_writable_keylog_still_logs_keys(
    scripted_server: ScriptedServer, tmp_path: Path, keylog_env: Callable[[Path], None]
) -> None:
    keylog = tmp_path / "new" / "keys.txt"
    keylog_env(keylog)
    client = LLMClient(base_url=scripted_server.url, model="m", config=_config(tmp_path))
    try:
        assert client.chat(_user("hi")).ok
    finally:
        assert client.cache is not None
        client.cache.close()
    assert len(keylog.read_text().split()) == 1
    assert json.dumps(client.usage.as_dict())  # the run itself is unaffected


@pytest.mark.parametrize("latency", [float("nan"), float("inf"), -1.0])
def test_a_row_with_an_unusable_latency_is_refused_not_dropped(
    tmp_path: Path, latency: float
) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    request = {"kind": "chat", "model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(ValueError, match="finite and >= 0"):
        cache.put(
            request_key(request),
            request,
            {"text": "x"},
            model="m",
            prompt_tokens=1,
            completion_tokens=1,
            latency_s=latency,
        )
    entry = {
        "key": request_key(request),
        "request": request,
        "reply": {"text": "x"},
        "model": "m",
        "prompt_tokens": 1,
        "completion_tokens": 1,
        "latency_s": latency,
    }
    with pytest.raises(ValueError, match="finite and >= 0"):
        cache.put_many([entry])
    assert len(cache) == 0
    cache.close()
