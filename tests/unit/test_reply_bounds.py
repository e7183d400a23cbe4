"""Structured replies are parsed within bounds, and token usage is read without crashing.

Probes of the hardening issue: a structured reply of 1,000 nested ``[`` (or with a
5,000-digit number) raised ``RecursionError`` / ``ValueError`` out of ``LLMClient.map`` for
the whole batch, and was cached, so every rerun raised again without a request; a usage of
``-5``, ``1e400`` or ``10**30`` tokens aborted the batch and lost a paid-for reply. Here
such replies go through ``map`` against the scripted server: the first kind is re-asked,
counted and never cached, the second is kept and cached with its usage unknown.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from scripted_server import ScriptedServer, malformed_body, reply, sequential_client
from scripted_server import scripted_server as scripted_server  # noqa: F401  (fixture)

from recagents.llm.cache import ResponseCache, request_key
from recagents.llm.client import ChatRequest, LLMClient, parse_json_reply
from recagents.llm.schemas import (
    MAX_JSON_DEPTH,
    MAX_JSON_NUMBER_CHARS,
    ReplyTooComplex,
    parse_json_bounded,
)
from recagents.llm.wire import MAX_TOKEN_COUNT, read_completion

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
NESTED = "[" * 1000 + "]" * 1000
HUGE_INT = '{"n": ' + "9" * 5000 + "}"


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _completion_body(
    content: str, usage: str = '{"prompt_tokens": 3, "completion_tokens": 2}'
) -> str:
    """A chat completion as raw JSON text (so that usage may hold ``1e400``)."""
    message = {"role": "assistant", "content": content}
    choice = json.dumps({"index": 0, "message": message, "finish_reason": "stop"})
    return f'{{"object": "chat.completion", "choices": [{choice}], "usage": {usage}}}'


def _client(url: str, cache: ResponseCache | bool, tmp_path: Path, reasks: int = 1) -> LLMClient:
    return sequential_client(url, tmp_path, max_reasks=reasks, cache=cache)


# --------------------------------------------------------------------------- the parser


def test_deep_nesting_is_refused_before_decoding() -> None:
    with pytest.raises(ReplyTooComplex, match="deeper than 64"):
        parse_json_bounded(NESTED)
    deepest = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert parse_json_bounded(deepest) is not None
    with pytest.raises(ReplyTooComplex):
        parse_json_bounded("[" + deepest + "]")
    assert isinstance(ReplyTooComplex("x"), ValueError)


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"a": "[" * 500 + '\\"{' * 100, "b": ["]" * 3]})
    assert parse_json_bounded(text)["b"] == ["]]]"]
    # an unterminated string is a syntax error, not a nesting one
    with pytest.raises(json.JSONDecodeError):
        parse_json_bounded('{"a": "' + "[" * 500)


@pytest.mark.parametrize(
    "text",
    [
        HUGE_INT,
        '{"n": ' + "1" * (MAX_JSON_NUMBER_CHARS + 1) + "}",
        '{"n": 0.' + "5" * MAX_JSON_NUMBER_CHARS + "}",
        '{"n": 1e400}',
        '{"n": -1e400}',
        '{"n": NaN}',
        '{"n": Infinity}',
        '{"n": -Infinity}',
    ],
    ids=["5000-digits", "101-digits", "long-fraction", "1e400", "-1e400", "nan", "inf", "-inf"],
)
def test_absurd_numbers_are_refused(text: str) -> None:
    with pytest.raises(ReplyTooComplex):
        parse_json_bounded(text)


def test_ordinary_numbers_are_read() -> None:
    text = '{"a": -12, "b": 3.25, "c": 1e-400, "d": 6.02e23, "e": ' + "7" * 100 + "}"
    data = parse_json_bounded(text)
    assert data["a"] == -12 and data["b"] == 3.25 and data["c"] == 0.0 and data["d"] == 6.02e23
    assert data["e"] == int("7" * 100)


def test_size_bound() -> None:
    with pytest.raises(ReplyTooComplex, match="too long"):
        parse_json_bounded("[" + "1," * 50 + "1]", max_chars=100)


def test_parse_json_reply_is_bounded_and_cuts_a_fence_in_linear_time() -> None:
    with pytest.raises(ReplyTooComplex):
        parse_json_reply(f"```json\n{NESTED}\n```")
    assert parse_json_reply('```json\n{"n": 1}\n```') == {"n": 1}
    assert parse_json_reply('```{"n": 2}```') == {"n": 2}
    # a backtracking fence pattern took 4.5 s on 2,000 spaces (cubic); now microseconds
    started = time.perf_counter()
    with pytest.raises(json.JSONDecodeError):
        parse_json_reply("```" + " " * 200_000 + "x")
    assert time.perf_counter() - started < 1.0


def test_the_plan_and_rank_parsers_are_bounded() -> None:
    from recagents.papers.interecagent.plans import _structure
    from recagents.papers.interecagent.sqllimits import ToolError
    from recagents.papers.interecagent.toolbox import parse_rank_input

    for text in (NESTED, HUGE_INT):
        steps, problems = _structure(text)
        assert steps == [] and "not usable JSON" in problems[0]
        with pytest.raises(ToolError, match="not usable JSON"):
            parse_rank_input(text)


# --------------------------------------------------------------------------- through map


@pytest.mark.parametrize("bad", [NESTED, HUGE_INT], ids=["nested", "digits"])
def test_a_reply_outside_the_bounds_is_reasked_counted_and_never_cached(
    scripted_server: ScriptedServer, tmp_path: Path, bad: str
) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    requests = [
        ChatRequest(_user("structured"), schema=SCHEMA),
        ChatRequest(_user("plain one")),
        ChatRequest(_user("plain two")),
    ]
    try:
        scripted_server.script(malformed_body(_completion_body(bad)), reply('{"n": 1}'))
        client = _client(scripted_server.url, cache, tmp_path)
        first = client.map(requests, progress=False, order="given")
        assert first[0].ok and first[0].data == {"n": 1} and first[0].reasks == 1
        assert [r.ok for r in first[1:]] == [True, True], "the batch's other requests complete"
        assert client.usage.too_complex == 1 and client.usage.reasks == 1
        reask = scripted_server.chat_bodies()[1]["messages"][-1]
        assert reask["role"] == "user" and (
            "deeper" in reask["content"] or "number" in reask["content"]
        )
        # the bad reply was not cached: a rerun asks again (the re-ask's reply is cached)
        sent = scripted_server.count()
        scripted_server.script(malformed_body(_completion_body(bad)))
        again = _client(scripted_server.url, cache, tmp_path).map(
            requests, progress=False, order="given"
        )
        assert scripted_server.count() == sent + 1
        assert again[0].ok and again[0].data == {"n": 1}
        assert all(r.cached for r in again[1:])
    finally:
        cache.close()


def test_a_reply_always_outside_the_bounds_is_an_invalid_output(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    try:
        scripted_server.set_default(malformed_body(_completion_body(NESTED)))
        client = _client(scripted_server.url, cache, tmp_path, reasks=0)
        (result,) = client.map([ChatRequest(_user("q"), schema=SCHEMA)], progress=False)
        assert not result.ok and result.failure == "invalid"
        assert "deeper than" in (result.error or "")
        assert client.usage.invalid_outputs == 1 and client.usage.too_complex == 1
        assert len(cache) == 0
    finally:
        cache.close()


def test_a_poisoned_cached_reply_is_reasked_not_a_crash(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    """A reply outside the bounds that an older version cached is a malformed reply."""
    cache = ResponseCache(tmp_path / "c.sqlite")
    try:
        client = _client(scripted_server.url, cache, tmp_path)
        request = ChatRequest(_user("q"), schema=SCHEMA)
        key_request = client._key_request(request, request.messages)
        cache.put(
            request_key(key_request),
            key_request,
            {"text": NESTED, "finish_reason": "stop"},
            model="scripted",
            prompt_tokens=1,
            completion_tokens=1,
            latency_s=0.1,
        )
        scripted_server.script(reply('{"n": 5}'))
        (result,) = client.map([request], progress=False)
        assert result.ok and result.data == {"n": 5} and result.reasks == 1
        assert client.usage.too_complex == 1 and scripted_server.count() == 1
    finally:
        cache.close()


def test_a_completion_envelope_nested_too_deep_is_retried(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    envelope = _completion_body("hi")[:-1] + ', "x": ' + NESTED + "}"
    scripted_server.script(malformed_body(envelope), reply("fine"))
    client = _client(scripted_server.url, False, tmp_path)
    (result,) = client.map([ChatRequest(_user("q"))], progress=False)
    assert result.ok and result.text == "fine" and result.attempts == 2


# --------------------------------------------------------------------------- usage


@pytest.mark.parametrize(
    "usage",
    [
        '{"prompt_tokens": -5, "completion_tokens": 2}',
        '{"prompt_tokens": 1e400, "completion_tokens": 2}',
        '{"prompt_tokens": 1' + "0" * 30 + ', "completion_tokens": 2}',
        '{"prompt_tokens": NaN, "completion_tokens": 2}',
        '{"prompt_tokens": 2.5, "completion_tokens": 2}',
        '{"prompt_tokens": true, "completion_tokens": 2}',
        '{"prompt_tokens": "many", "completion_tokens": 2}',
    ],
    ids=["negative", "1e400", "10**30", "nan", "fraction", "bool", "text"],
)
def test_an_unusable_usage_is_unknown_and_the_reply_kept(
    scripted_server: ScriptedServer, tmp_path: Path, usage: str
) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    requests = [ChatRequest(_user("q"), schema=SCHEMA), ChatRequest(_user("other"))]
    try:
        scripted_server.script(malformed_body(_completion_body('{"n": 3}', usage)))
        client = _client(scripted_server.url, cache, tmp_path)
        first = client.map(requests, progress=False, order="given")
        assert all(r.ok for r in first) and first[0].data == {"n": 3}
        assert (first[0].prompt_tokens, first[0].completion_tokens) == (0, 2)
        assert first[0].usage_unknown == 1 and first[1].usage_unknown == 0
        assert client.usage.unknown_usage == 1
        assert client.usage.as_dict()["unknown_usage"] == 1
        # paid for, so kept: the rerun is served from the cache, still marked unknown
        sent = scripted_server.count()
        again = _client(scripted_server.url, cache, tmp_path)
        second = again.map(requests, progress=False, order="given")
        assert scripted_server.count() == sent and all(r.cached for r in second)
        assert second[0].usage_unknown == 1 and again.usage.unknown_usage == 1
    finally:
        cache.close()


def test_read_completion_sanitises_each_count() -> None:
    def read(usage: Any) -> tuple[dict[str, Any], int, int]:
        return read_completion({"choices": [{"message": {"content": "x"}}], "usage": usage})

    assert read({"prompt_tokens": 7, "completion_tokens": 2})[1:] == (7, 2)
    assert "usage_unknown" not in read({"prompt_tokens": 7})[0]  # absent: 0, as before
    assert read({"prompt_tokens": 7.0, "completion_tokens": "2"})[1:] == (7, 2)
    reply_, prompt, completion = read({"prompt_tokens": MAX_TOKEN_COUNT, "completion_tokens": -1})
    assert (prompt, completion) == (0, 0)
    assert reply_["usage_unknown"] == ["prompt_tokens", "completion_tokens"]
    assert read("garbage")[0]["usage_unknown"] == ["prompt_tokens", "completion_tokens"]
    assert "usage_unknown" not in read(None)[0]
