"""Tests of recagents.llm.client.LLMClient against the scripted OpenAI-compatible test server.

The scripted server (tests/scripted_server.py) injects faults, malformed replies and latency;
it never stands in for a model. Every test bounds its own wall time, and the whole file runs
in well under a minute.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai  # noqa: F401  (imported up front so no test pays for the first import)
import pytest
from scripted_server import (
    ScriptedServer,
    closed_port_url,
    drop,
    echo,
    echo_text,
    malformed_body,
    reply,
    sleep,
    status,
)
from scripted_server import scripted_server as scripted_server  # noqa: F401  (fixture)

from recagents.config import settings
from recagents.llm import client as client_module
from recagents.llm.cache import ResponseCache
from recagents.llm.client import (
    GRAMMAR_MAX_LENGTH,
    ChatRequest,
    LLMClient,
    parse_json_reply,
    response_format,
)

SENTINEL = "sk-SENTINEL-4f9a2c71e0"
MAX_ATTEMPTS = 3
MAX_REASKS = 2
TIMEOUT_S = 1.0
BACKOFF_BASE_S = 0.05
BACKOFF_MAX_S = 0.2

SCHEMA = {
    "type": "object",
    "properties": {"choice": {"type": "integer", "enum": [1, 2]}},
    "required": ["choice"],
    "additionalProperties": False,
}


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@contextmanager
def bounded(seconds: float) -> Iterator[Callable[[], float]]:
    """Assert that the block takes less than ``seconds``; yields a clock of elapsed time."""
    started = time.perf_counter()
    yield lambda: time.perf_counter() - started
    elapsed = time.perf_counter() - started
    assert elapsed < seconds, f"took {elapsed:.2f} s, bound {seconds} s"


MakeClient = Callable[..., LLMClient]


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator[MakeClient]:
    """Build clients with explicit, fast settings; caches are closed afterwards.

    ``cache`` is ``True`` (the shared ``tmp_path/c.sqlite``), ``False`` (none) or a path.
    """
    caches: list[ResponseCache] = []

    def make(
        base_url: str,
        *,
        cache: bool | Path = True,
        api_key: str | None = SENTINEL,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        **config: Any,
    ) -> LLMClient:
        fields: dict[str, Any] = {
            "cache_dir": tmp_path,
            "llm_base_url": None,
            "llm_model": None,
            "llm_concurrency": None,
            "llm_max_attempts": MAX_ATTEMPTS,
            "llm_max_reasks": MAX_REASKS,
            "llm_timeout_s": TIMEOUT_S,
            "llm_structured": "auto",
            **config,
        }
        response_cache: ResponseCache | bool = False
        if cache:
            response_cache = ResponseCache(tmp_path / "c.sqlite" if cache is True else cache)
            caches.append(response_cache)
        return LLMClient(
            base_url=base_url,
            model="scripted",
            api_key=api_key,
            config=dataclasses.replace(settings(), **fields),
            cache=response_cache,  # type: ignore[arg-type]
            backoff_base_s=backoff_base_s,
            backoff_max_s=backoff_max_s,
        )

    yield make
    for response_cache in caches:
        response_cache.close()


# --------------------------------------------------------------------------- the test server


def _post(url: str, body: dict[str, Any], key: str = SENTINEL) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        url + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_scripted_server_speaks_the_openai_format(scripted_server: ScriptedServer) -> None:
    with bounded(5.0):
        with urllib.request.urlopen(scripted_server.url + "/models", timeout=5) as response:
            assert json.loads(response.read())["data"][0]["id"] == "scripted"
        scripted_server.script(
            reply("hello", prompt_tokens=7, completion_tokens=2),
            echo(),
            status(429, retry_after=0.3),
            status(401),
            malformed_body(),
        )
        body = {"model": "scripted", "messages": _user("abc")}
        code, _, raw = _post(scripted_server.url, body)
        completion = json.loads(raw)
        assert code == 200 and completion["object"] == "chat.completion"
        assert completion["choices"][0]["message"] == {"role": "assistant", "content": "hello"}
        assert completion["choices"][0]["finish_reason"] == "stop"
        assert completion["usage"] == {
            "prompt_tokens": 7,
            "completion_tokens": 2,
            "total_tokens": 9,
        }
        assert {"id", "created", "model"} <= completion.keys()
        code, _, raw = _post(scripted_server.url, body)
        assert (
            json.loads(raw)["choices"][0]["message"]["content"] == "cba" == echo_text(_user("abc"))
        )
        code, headers, _ = _post(scripted_server.url, body)
        assert code == 429 and headers["Retry-After"] == "0.3"
        code, _, raw = _post(scripted_server.url, body, key="sk-echoed-1234")
        assert code == 401 and "Incorrect API key provided: sk-echoed-1234" in raw.decode()
        code, _, raw = _post(scripted_server.url, body)
        assert code == 200
        with pytest.raises(ValueError):
            json.loads(raw)
        assert scripted_server.count() == 5 and scripted_server.pending() == 0
        assert scripted_server.chat_bodies()[0] == body
        assert [r.action.kind for r in scripted_server.chat_requests() if r.action] == [
            "reply",
            "echo",
            "status",
            "status",
            "malformed_body",
        ]


@pytest.mark.parametrize("keep_alive", [False, True])
def test_scripted_server_serves_32_at_a_time(
    tmp_path: Path, make_client: MakeClient, keep_alive: bool
) -> None:
    with ScriptedServer(default=echo(delay_s=0.25), keep_alive=keep_alive) as server:
        client = make_client(server.url, cache=False)
        requests = [ChatRequest(messages=_user(f"slot {i}")) for i in range(32)]
        with bounded(2.0):
            results = client.map(requests, concurrency=32, progress=False)
        assert [r.text for r in results] == [echo_text(r.messages) for r in requests]
        assert server.max_in_flight == 32


@pytest.mark.parametrize("suffix", ["", "/"])
def test_connections_are_reused_across_calls(make_client: MakeClient, suffix: str) -> None:
    with ScriptedServer(keep_alive=True) as server, bounded(5.0):
        client = make_client(server.url + suffix, cache=False)
        for i in range(5):
            assert client.chat(_user(f"call {i}")).ok
        assert len({r.peer for r in server.chat_requests()}) == 1


# --------------------------------------------------------------------------- cache


def test_chat_round_trip_then_cache_hit(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    with bounded(5.0):
        scripted_server.script(reply("Heat", prompt_tokens=12, completion_tokens=3))
        client = make_client(scripted_server.url)
        first = client.chat(_user("Pick one: Alien or Heat?"))
        assert first.ok and first.text == "Heat" and first.error is None
        assert not first.cached and first.attempts == 1
        assert (first.prompt_tokens, first.completion_tokens) == (12, 3)
        assert scripted_server.count() == 1
        body = scripted_server.chat_bodies()[0]
        assert body["model"] == "scripted"
        assert body["messages"] == _user("Pick one: Alien or Heat?")
        assert body["temperature"] == 0.0 and body["seed"] == 0
        assert "response_format" not in body

        second = client.chat(_user("Pick one: Alien or Heat?"))
        assert scripted_server.count() == 1, "a cache hit must not reach the endpoint"
        assert second.ok and second.cached and second.text == "Heat"
        assert second.attempts == 0
        assert (second.prompt_tokens, second.completion_tokens) == (12, 3)
        assert client.usage.requests == 2
        assert client.usage.cache_hits == 1
        assert client.usage.http_calls == 1
        assert client.usage.hit_rate == 0.5


def test_sampling_changes_make_distinct_cache_entries(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    with bounded(5.0):
        client = make_client(scripted_server.url)
        assert client.cache is not None
        messages = _user("Recommend a film")
        variants: list[dict[str, Any]] = [
            {},
            {"temperature": 0.7},
            {"seed": 1},
            {"sample": 1},
            {"max_tokens": 32},
        ]
        for i, sampling in enumerate(variants, start=1):
            result = client.chat(messages, **sampling)
            assert result.ok and not result.cached, sampling
            assert scripted_server.count() == i
            assert len(client.cache) == i
        # each variant is now a hit
        for sampling in variants:
            assert client.chat(messages, **sampling).cached, sampling
        assert scripted_server.count() == len(variants)
        assert client.usage.cache_hits == len(variants)
        # the tag is neither sent nor part of the key
        tagged = client.chat(messages, tag="user-7")
        assert tagged.cached and tagged.tag == "user-7"
        sent = scripted_server.chat_bodies()
        assert [b.get("temperature") for b in sent] == [0.0, 0.7, 0.0, 0.0, 0.0]
        assert [b.get("seed") for b in sent] == [0, 0, 1, 0, 0]
        assert all("tag" not in b and "sample" not in b for b in sent)


# --------------------------------------------------------------------------- structured


def test_chat_json_sends_json_schema_and_validates(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    with bounded(5.0):
        scripted_server.script(reply('{"choice": 2}'))
        client = make_client(scripted_server.url)
        assert client.structured_mode == "json_schema"
        result = client.chat_json(_user("1 or 2?"), SCHEMA)
        assert result.ok and result.data == {"choice": 2} and result.reasks == 0
        (body,) = scripted_server.chat_bodies()
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "reply", "schema": SCHEMA},
        }


def test_chat_json_object_mode_for_llama_cpp(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    with bounded(5.0):
        scripted_server.script(reply('{"choice": 1}'))
        client = make_client(scripted_server.url, llm_structured="json_object")
        result = client.chat_json(_user("1 or 2?"), SCHEMA)
        assert result.ok and result.data == {"choice": 1}
        (body,) = scripted_server.chat_bodies()
        assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}


def test_raw_control_characters_inside_strings_are_accepted() -> None:
    assert parse_json_reply('{"a": "two\nlines\tand a tab"}') == {"a": "two\nlines\tand a tab"}
    with pytest.raises(json.JSONDecodeError):
        parse_json_reply('{"a": "unterminated')


def test_long_string_caps_are_clamped_for_llama_cpp_grammars() -> None:
    """The embedded server drops the connection on a string maxLength above ~1,000."""
    schema = {
        "type": "object",
        "properties": {
            "long": {"type": "string", "maxLength": 1440},
            "short": {"type": "string", "maxLength": 50},
            "list": {"type": "array", "items": {"type": "string", "maxLength": 5000}},
        },
    }
    sent = response_format(schema, "json_object")["schema"]
    assert sent["properties"]["long"]["maxLength"] == GRAMMAR_MAX_LENGTH
    assert sent["properties"]["short"]["maxLength"] == 50
    assert sent["properties"]["list"]["items"]["maxLength"] == GRAMMAR_MAX_LENGTH
    assert schema["properties"]["long"]["maxLength"] == 1440, "the caller's schema is untouched"
    remote = response_format(schema, "json_schema")["json_schema"]["schema"]
    assert remote["properties"]["long"]["maxLength"] == 1440


def test_chat_json_accepts_a_fenced_reply(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    with bounded(5.0):
        scripted_server.script(reply('```json\n{"choice": 1}\n```'))
        client = make_client(scripted_server.url)
        result = client.chat_json(_user("1 or 2?"), SCHEMA)
        assert result.ok and result.data == {"choice": 1} and result.reasks == 0
        assert scripted_server.count() == 1


def test_chat_json_reasks_after_an_invalid_reply(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    with bounded(5.0):
        scripted_server.script(reply('{"choice": 3}'), reply('{"choice": 2}'))
        client = make_client(scripted_server.url)
        result = client.chat_json(_user("1 or 2?"), SCHEMA)
        assert result.ok and result.data == {"choice": 2}
        assert result.reasks == 1 and result.failure is None
        assert scripted_server.count() == 2
        assert (result.prompt_tokens, result.completion_tokens) == (20, 10)
        first, second = scripted_server.chat_bodies()
        assert second["messages"][: len(first["messages"])] == first["messages"]
        assert second["messages"][-2] == {"role": "assistant", "content": '{"choice": 3}'}
        assert second["messages"][-1]["role"] == "user"
        assert client.usage.reasks == 1 and client.usage.invalid_outputs == 0
        # the whole exchange, re-ask included, replays from the cache
        again = client.chat_json(_user("1 or 2?"), SCHEMA)
        assert again.ok and again.cached and again.reasks == 1
        assert scripted_server.count() == 2


def test_chat_json_always_invalid_is_counted(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    with bounded(5.0):
        scripted_server.set_default(reply("I think the answer is 2."))
        client = make_client(scripted_server.url)
        result = client.chat_json(_user("1 or 2?"), SCHEMA)
        assert not result.ok
        assert result.failure == "invalid"
        assert result.error is not None and result.error.startswith("invalid output")
        assert result.reasks == MAX_REASKS
        assert result.text == "I think the answer is 2." and result.data is None
        assert scripted_server.count() == MAX_REASKS + 1
        assert client.usage.invalid_outputs == 1
        assert client.usage.transport_failures == 0
        assert client.usage.reasks == MAX_REASKS


# --------------------------------------------------------------------------- retries


def test_429_retry_after_is_honoured(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    with bounded(3.0) as elapsed:
        scripted_server.script(status(429, retry_after=0.3), reply("ok"))
        client = make_client(scripted_server.url)
        result = client.chat(_user("hi"))
        assert result.ok and result.text == "ok" and result.attempts == 2
        assert scripted_server.count() == 2
        assert elapsed() >= 0.29, "Retry-After: 0.3 was not honoured"
        first, second = scripted_server.chat_requests()
        assert second.received - first.received >= 0.29
        assert elapsed() < 0.3 + BACKOFF_MAX_S + 1.0


def test_retry_after_is_capped(
    scripted_server: ScriptedServer, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from recagents.llm import wire  # the Retry-After reader lives in the wire-format module

    monkeypatch.setattr(wire, "MAX_RETRY_AFTER_S", 0.2)
    with bounded(2.0):
        scripted_server.script(status(429, retry_after=3600), reply("ok"))
        result = make_client(scripted_server.url).chat(_user("hi"))
        assert result.ok and result.attempts == 2


def test_500_is_retried_until_attempts_run_out(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    with bounded(3.0):
        scripted_server.set_default(status(500))
        client = make_client(scripted_server.url)
        result = client.chat(_user("hi"))
        assert not result.ok and result.failure == "transport"
        assert result.error is not None and "500" in result.error
        assert scripted_server.count() == MAX_ATTEMPTS
        assert client.usage.http_calls == MAX_ATTEMPTS
        assert client.usage.transport_failures == 1
        # nothing was cached: the next run asks again
        assert client.cache is not None and len(client.cache) == 0


def test_500_then_success(scripted_server: ScriptedServer, make_client: MakeClient) -> None:
    with bounded(3.0):
        scripted_server.script(status(500), status(503), reply("ok"))
        result = make_client(scripted_server.url).chat(_user("hi"))
        assert result.ok and result.text == "ok" and result.attempts == 3
        assert scripted_server.count() == 3


@pytest.mark.parametrize("code", [400, 401, 404])
def test_client_errors_are_not_retried(
    scripted_server: ScriptedServer, make_client: MakeClient, code: int
) -> None:
    with bounded(3.0):
        scripted_server.set_default(status(code))
        client = make_client(scripted_server.url)
        request = ChatRequest(messages=_user("hi"))
        result = client.map([request], progress=False, raise_unreachable=False)[0]
        assert not result.ok and result.failure == "transport"
        assert result.error is not None and str(code) in result.error
        assert scripted_server.count() == 1
        if code in (401, 404):  # a wrong key, model or URL: the batch stops with one message
            with pytest.raises(client_module.EndpointUnreachableError, match=str(code)):
                client.chat(_user("hi"))


def test_timeout_is_retried_then_a_transport_failure(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    timeout = 0.5
    bound = MAX_ATTEMPTS * (timeout + BACKOFF_MAX_S) + 1.0
    with bounded(bound) as elapsed:
        scripted_server.set_default(sleep(10.0))
        client = make_client(scripted_server.url, llm_timeout_s=timeout)
        result = client.chat(_user("hi"))
        assert not result.ok and result.failure == "transport"
        assert result.error is not None and "Timeout" in result.error
        assert scripted_server.count() == MAX_ATTEMPTS
        assert elapsed() >= MAX_ATTEMPTS * timeout * 0.9


def test_timeout_then_success(scripted_server: ScriptedServer, make_client: MakeClient) -> None:
    with bounded(3.0) as elapsed:
        scripted_server.script(sleep(10.0))
        scripted_server.set_default(reply("finally"))
        result = make_client(scripted_server.url, llm_timeout_s=0.5).chat(_user("hi"))
        assert result.ok and result.text == "finally" and result.attempts == 2
        assert elapsed() >= 0.45


def test_dropped_connection_is_retried(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    with bounded(3.0):
        scripted_server.script(drop())
        scripted_server.set_default(reply("ok"))
        client = make_client(scripted_server.url)
        result = client.chat(_user("hi"))
        assert result.ok and result.text == "ok" and result.attempts == 2
        assert scripted_server.count() == 2

        scripted_server.set_default(drop())
        scripted_server.clear()
        again = ChatRequest(messages=_user("again"))
        failed = client.map([again], progress=False, raise_unreachable=False)[0]
        assert not failed.ok and failed.failure == "transport"
        assert scripted_server.count() == MAX_ATTEMPTS
        with pytest.raises(client_module.EndpointUnreachableError):  # no reply at all: stop
            client.chat(_user("again"))


@pytest.mark.parametrize("content_type", ["application/json", "text/html"])
def test_malformed_body_is_a_counted_failure(
    scripted_server: ScriptedServer, make_client: MakeClient, content_type: str
) -> None:
    with bounded(5.0):
        scripted_server.set_default(malformed_body(content_type=content_type))
        client = make_client(scripted_server.url)
        requests = [ChatRequest(messages=_user(f"q{i}")) for i in range(3)]
        results = client.map(requests, progress=False)  # must not raise
        assert len(results) == 3
        assert all(not r.ok and r.failure == "transport" for r in results)
        assert all(r.error for r in results)
        assert client.usage.transport_failures == 3
        assert scripted_server.count() <= 3 * MAX_ATTEMPTS


def test_closed_port_fails_fast(scripted_server: ScriptedServer, make_client: MakeClient) -> None:
    with bounded(10.0) as elapsed:
        # five replies are cached first: they must still be served while the endpoint is down
        warm = [ChatRequest(messages=_user(f"cached {i}")) for i in range(5)]
        assert all(r.ok for r in make_client(scripted_server.url).map(warm, progress=False))
        cold = [ChatRequest(messages=_user(f"new {i}")) for i in range(20)]

        url = closed_port_url()
        client = make_client(url)
        started = elapsed()
        results = client.map(cold, progress=False, raise_unreachable=False)
        took = elapsed() - started
        assert len(results) == 20
        assert all(not r.ok and r.failure == "transport" for r in results)
        assert client.usage.transport_failures == 20
        # only the first wave (concurrency 8) spends its attempts; the rest fail fast
        assert client.usage.http_calls <= client.default_concurrency * MAX_ATTEMPTS
        assert sum("endpoint unreachable" in (r.error or "") for r in results) >= 20 - 8
        assert took < 5.0
        # by default a batch that got no reply at all stops with one message naming the URL
        with pytest.raises(client_module.EndpointUnreachableError, match=url):
            client.map(cold, progress=False)

        mixed = client.map(warm + cold, progress=False)
        assert [r.ok for r in mixed] == [True] * 5 + [False] * 20
        assert all(r.cached for r in mixed[:5])


def test_map_keeps_input_order_under_random_delays(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    with bounded(8.0):
        scripted_server.set_default(echo(jitter_s=0.15))
        client = make_client(scripted_server.url, cache=False)
        prompts = [f"prompt number {i:02d}" for i in range(40)]
        requests = [ChatRequest(messages=_user(p), tag=str(i)) for i, p in enumerate(prompts)]
        results = client.map(requests, concurrency=8, progress=False)
        assert [r.text for r in results] == [echo_text(_user(p)) for p in prompts]
        assert [r.tag for r in results] == [str(i) for i in range(40)]
        assert scripted_server.count() == 40
        assert 2 <= scripted_server.max_in_flight <= 8
        sent = [b["messages"][-1]["content"] for b in scripted_server.chat_bodies()]
        assert sorted(sent) == prompts  # each request sent exactly once


def test_interrupted_map_resumes_from_the_cache(tmp_path: Path, make_client: MakeClient) -> None:
    prompts = [f"user {i:02d}: rank these films" for i in range(40)]
    requests = [ChatRequest(messages=_user(p)) for p in prompts]
    path = tmp_path / "resume.sqlite"
    with bounded(10.0):
        with ScriptedServer(default=drop()) as failing:
            failing.script(*[echo() for _ in range(20)])
            first = make_client(failing.url, cache=path).map(requests, progress=False)
        assert sum(r.ok for r in first) == 20
        assert sum(r.failure == "transport" for r in first) == 20
        done = {i for i, r in enumerate(first) if r.ok}
        assert all(first[i].text == echo_text(_user(prompts[i])) for i in done)

        with ScriptedServer(default=echo()) as healthy:
            client = make_client(healthy.url, cache=path)
            second = client.map(requests, progress=False)
            assert healthy.count() == 20, "only the unfinished requests may be sent again"
        assert all(r.ok for r in second)
        assert [r.text for r in second] == [echo_text(_user(p)) for p in prompts]
        assert {i for i, r in enumerate(second) if r.cached} == done
        assert client.usage.cache_hits == 20
        sent = {b["messages"][-1]["content"] for b in healthy.chat_bodies()}
        assert sent == {prompts[i] for i in range(40) if i not in done}


# --------------------------------------------------------------------------- secrets


def test_the_api_key_never_leaks(
    tmp_path: Path,
    scripted_server: ScriptedServer,
    make_client: MakeClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    caplog.set_level(logging.DEBUG)
    for name in ("openai", "httpx", "httpx2", "httpcore", "recagents", "asyncio"):
        caplog.set_level(logging.DEBUG, logger=name)
    with bounded(10.0):
        scripted_server.script(
            reply("fine"),
            reply('{"choice": 1}'),
            status(401),
            status(429, retry_after=0.05),
            drop(),
            reply("recovered"),
        )
        scripted_server.set_default(status(401))
        explicit = make_client(scripted_server.url, api_key=SENTINEL)
        from_env = make_client(scripted_server.url, api_key=None)
        results = [
            explicit.chat(_user("one")),
            explicit.chat_json(_user("two"), SCHEMA),
            *explicit.map(  # 401 echoing the key
                [ChatRequest(messages=_user("three"))], progress=False, raise_unreachable=False
            ),
            explicit.chat(_user("four")),  # 429, a dropped connection, then a reply
            explicit.chat(_user("one")),  # cached
            *explicit.map(
                [ChatRequest(messages=_user(f"m{i}")) for i in range(4)], raise_unreachable=False
            ),
            *from_env.map(  # 401 again, key from OPENAI_API_KEY
                [ChatRequest(messages=_user("five"))], progress=False, raise_unreachable=False
            ),
        ]
        assert [r.ok for r in results] == [True, True, False, True, True] + [False] * 5
        # the server really did see the key, and echoed it back in the 401 bodies
        assert all(
            r.headers.get("authorization") == f"Bearer {SENTINEL}"
            for r in scripted_server.chat_requests()
        )
        assert results[2].error is not None and "401" in results[2].error
        assert "Incorrect API key provided" in results[2].error

        haystacks: dict[str, str] = {}
        for i, r in enumerate(results):
            haystacks[f"result {i}"] = repr(r)
        for r in scripted_server.chat_requests():
            haystacks[f"body of {r.path}"] = json.dumps(r.body)
        captured = capsys.readouterr()
        haystacks["stdout"] = captured.out
        haystacks["stderr"] = captured.err
        haystacks["log text"] = caplog.text
        haystacks["log records"] = "\n".join(
            f"{rec.getMessage()} {rec.args!r} {rec.exc_text or ''}" for rec in caplog.records
        )
        haystacks["repr(client)"] = repr(explicit) + repr(from_env)
        haystacks["repr(settings())"] = repr(settings()) + str(settings())
        haystacks["repr(config)"] = repr(explicit.config) + repr(from_env.config)
        haystacks["usage"] = repr(explicit.usage) + json.dumps(explicit.usage.as_dict())
        haystacks["totals"] = json.dumps(explicit.totals())
        files = sorted(tmp_path.glob("c.sqlite*"))
        assert tmp_path / "c.sqlite" in files
        for file in files:
            haystacks[file.name] = file.read_bytes().decode("latin-1")
        leaked = [where for where, text in haystacks.items() if SENTINEL in text]
        assert leaked == []
        assert caplog.records, "DEBUG logging was not captured; the log check is void"


def test_a_key_echoed_at_the_truncation_point_is_still_masked(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    key = "SENTINELX4f9a2c71e0b5d3"  # a key format without an sk- prefix
    client = make_client(scripted_server.url, api_key=key, cache=False)
    leaks = []
    with bounded(5.0):
        # slide the echoed key across the 200-character cut of the error message
        for pad in range(100, 200, 4):
            message = "p" * pad + " Incorrect API key provided: " + key
            scripted_server.script(status(401, body={"error": {"message": message}}))
            request = ChatRequest(messages=_user(f"pad {pad}"))
            result = client.map([request], progress=False, raise_unreachable=False)[0]
            assert not result.ok and result.error is not None
            if key[:6] in result.error:
                leaks.append(f"pad {pad}: ...{result.error[-30:]}")
            scripted_server.script(status(401, body={"error": {"message": message}}))
            with pytest.raises(client_module.EndpointUnreachableError) as raised:
                client.chat(_user(f"pad {pad}"))
            if key[:6] in str(raised.value):
                leaks.append(f"pad {pad} (raised): ...{str(raised.value)[-60:]}")
    assert leaks == []


def test_a_transport_failure_reports_its_attempts(
    scripted_server: ScriptedServer, make_client: MakeClient
) -> None:
    with bounded(3.0):
        scripted_server.set_default(status(500))
        result = make_client(scripted_server.url).chat(_user("hi"))
        assert not result.ok
        assert result.attempts == MAX_ATTEMPTS


# Regression: LLMClient once did `self.cache = cache or None`; ResponseCache has __len__, so a
# fresh (empty) cache was falsy and caching was silently off for good.
@pytest.mark.parametrize("how", ["explicit", "default path"])
def test_an_empty_cache_is_used(scripted_server: ScriptedServer, tmp_path: Path, how: str) -> None:
    config = dataclasses.replace(
        settings(), cache_dir=tmp_path, llm_max_attempts=MAX_ATTEMPTS, llm_timeout_s=TIMEOUT_S
    )
    cache = ResponseCache(tmp_path / "fresh.sqlite") if how == "explicit" else None
    with bounded(5.0):
        client = LLMClient(
            base_url=scripted_server.url,
            model="scripted",
            api_key=SENTINEL,
            config=config,
            cache=cache,
        )
        try:
            first = client.chat(_user("hello"))
            second = client.chat(_user("hello"))
            assert first.ok and second.ok
            assert client.cache is not None, "the empty cache was dropped"
            assert second.cached and scripted_server.count() == 1
        finally:
            if client.cache is not None:
                client.cache.close()
            if cache is not None:
                cache.close()


@pytest.mark.parametrize(
    "body", [{"choices": ["text"]}, {"choices": None}, {"choices": [{"message": "x"}]}, []]
)
def test_odd_completion_shapes_are_malformed_replies(body: Any) -> None:
    from recagents.llm.client import MalformedReply, read_completion

    with pytest.raises(MalformedReply):
        read_completion(body)


def test_a_well_formed_completion_is_read() -> None:
    from recagents.llm.client import read_completion

    body = {
        "choices": [{"message": {"content": "Heat"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2},
    }
    assert read_completion(body) == ({"text": "Heat", "finish_reason": "stop"}, 7, 2)
