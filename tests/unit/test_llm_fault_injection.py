"""Fault injection: every kind of broken answer, a server killed mid-run and a restart.

Counted at the scripted server: no completed call is lost (every request ends with a reply)
and none is repeated (each request is answered successfully exactly once over both runs).
Also the single probes of the hardening issue: broken completions are never cached,
Retry-After is read in both forms, and an unreachable endpoint is named.
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from scripted_server import (
    ScriptedServer,
    body,
    closed_port_url,
    crash,
    echo,
    echo_text,
    reply,
    status,
)
from scripted_server import scripted_server as scripted_server  # noqa: F401  (fixture)

from recagents.config import settings
from recagents.llm.cache import ResponseCache
from recagents.llm.client import (
    ChatRequest,
    EndpointUnreachableError,
    LLMClient,
    retry_after_seconds,
)

EMPTY_CHOICES = {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 0}}
NULL_CONTENT = {"choices": [{"message": {"role": "assistant", "content": None}}]}
LEGACY_TEXT = {"choices": [{"text": "a legacy completion", "finish_reason": "stop"}]}


def _client(url: str, cache: ResponseCache | bool, tmp_path: Path, **config: Any) -> LLMClient:
    fields: dict[str, Any] = {
        "cache_dir": tmp_path,
        "llm_base_url": None,
        "llm_model": None,
        "llm_concurrency": 1,
        "llm_max_attempts": 4,
        "llm_max_reasks": 0,
        "llm_timeout_s": 2.0,
        "llm_structured": "auto",
        **config,
    }
    return LLMClient(
        base_url=url,
        model="scripted",
        api_key="sk-test-not-a-real-key",
        config=dataclasses.replace(settings(), **fields),
        cache=cache,  # type: ignore[arg-type]
        backoff_base_s=0.01,
        backoff_max_s=0.05,
    )


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("payload", [EMPTY_CHOICES, NULL_CONTENT, LEGACY_TEXT])
def test_a_completion_without_a_message_is_retried_and_never_cached(
    scripted_server: ScriptedServer, tmp_path: Path, payload: dict[str, Any]
) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    try:
        scripted_server.script(body(payload), reply("usable"))
        client = _client(scripted_server.url, cache, tmp_path)
        result = client.chat(_user("hello"))
        assert result.ok and result.text == "usable" and result.attempts == 2
        # always broken: a counted transport failure, and nothing stored
        scripted_server.set_default(body(payload))
        broken = client.chat(_user("another"))
        assert not broken.ok and broken.failure == "transport"
        assert client.totals()["cached_replies"] == 1
    finally:
        cache.close()


def test_retry_after_seconds_reads_both_forms() -> None:
    now = 1_800_000_000.0
    assert retry_after_seconds({"retry-after": "2.5"}, now) == 2.5
    date = email.utils.formatdate(now + 7, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now) == pytest.approx(7.0)
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert retry_after_seconds({"retry-after": past}, now) == 0.0
    assert retry_after_seconds({"retry-after-ms": "250"}, now) == 0.25
    assert retry_after_seconds({"retry-after": "3600"}, now) == 60.0
    assert retry_after_seconds({"retry-after": "soon"}, now) is None
    assert retry_after_seconds({"retry-after": "nan"}, now) is None
    assert retry_after_seconds({}, now) is None


def test_an_http_date_retry_after_is_waited_for(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    when = email.utils.formatdate(time.time() + 2.0, usegmt=True)  # whole seconds: waits 1-2 s
    scripted_server.script(status(429, retry_after=when), reply("after the wait"))
    client = _client(scripted_server.url, False, tmp_path)
    result = client.chat(_user("rate limited"))
    assert result.ok and result.text == "after the wait"
    first, second = scripted_server.chat_requests()
    assert second.received - first.received >= 0.9


def test_an_unreachable_endpoint_is_named(tmp_path: Path) -> None:
    url = closed_port_url()
    client = _client(url, False, tmp_path, llm_max_attempts=2)
    with pytest.raises(EndpointUnreachableError, match=url.replace(".", r"\.")):
        client.map([ChatRequest(_user("q"))], progress=False)
    results = client.map([ChatRequest(_user("q"))], progress=False, raise_unreachable=False)
    assert url in (results[0].error or "")


def test_a_bad_key_stops_the_batch_with_one_message(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    scripted_server.set_default(status(401))
    client = _client(scripted_server.url, False, tmp_path)
    with pytest.raises(EndpointUnreachableError) as caught:
        client.map([ChatRequest(_user(f"q{i}")) for i in range(3)], progress=False)
    assert "401" in str(caught.value)
    assert "sk-test-not-a-real-key" not in str(caught.value)


def test_fault_injection_run_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    """Forty requests through 500s, 429s (seconds and date), broken bodies, a crash, a restart."""
    server = ScriptedServer(default=echo()).start()
    port, url = server.port, server.url
    soon = email.utils.formatdate(time.time() + 1.0, usegmt=True)
    server.script(
        status(500),
        echo(),
        status(429, retry_after="0.05"),
        echo(),
        body(EMPTY_CHOICES),
        echo(),
        status(429, retry_after=soon),
        body(NULL_CONTENT),
        echo(),
        status(503),
        status(502),
        echo(),
        body(LEGACY_TEXT),
        *[echo()] * 8,
        crash(),  # the 22nd action: the server dies while answering
    )
    cache = ResponseCache(tmp_path / "c.sqlite")
    requests = [ChatRequest(_user(f"request {i:02d}")) for i in range(40)]
    try:
        client = _client(url, cache, tmp_path)
        first = client.map(requests, progress=False)
        answered_first = [r for r in first if r.ok]
        assert 0 < len(answered_first) < 40
        failed = [r for r in first if not r.ok]
        assert all(r.failure == "transport" for r in failed)
        assert all(url in (r.error or "") for r in failed)

        server.start(port=port)  # the restart, same address
        second = _client(url, cache, tmp_path).map(requests, progress=False)
    finally:
        server.stop()
        cache.close()

    # nothing lost: every request has its reply, and it is the reply to that request
    assert all(r.ok for r in second)
    assert [r.text for r in second] == [echo_text(q.messages) for q in requests]
    # nothing repeated: the replies of the first run came from the cache in the second
    assert sum(r.cached for r in second) == len(answered_first)
    served = Counter(
        json.dumps(r.body["messages"])
        for r in server.chat_requests()
        if r.action is not None and r.action.kind == "echo"
    )
    assert len(served) == 40 and set(served.values()) == {1}, served.most_common(3)
