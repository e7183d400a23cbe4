"""The scripted client: schema-checked replies, pass-through to a fallback, a clear name."""

import pytest

from recagents.llm.client import ChatRequest, ChatResult
from recagents.llm.scripted import PASS, ScriptedClient

SCHEMA = {
    "type": "object",
    "properties": {"decision": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["decision"],
}


def _request(tag: str, schema=SCHEMA) -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "user", "content": f"about {tag}"}], schema=schema, tag=tag
    )


class _Fallback:
    def __init__(self):
        self.seen = []

    def map(self, requests, **kwargs):
        self.seen.extend(r.tag for r in requests)
        return [ChatResult(ok=True, data={"decision": "no"}, tag=r.tag) for r in requests]


def test_replies_follow_the_policy_and_are_schema_checked():
    client = ScriptedClient(lambda r: {"decision": "yes" if r.tag == "a" else "maybe"}, "judge")
    good, bad = client.map([_request("a"), _request("b")])
    assert client.model == "scripted:judge"
    assert good.ok and good.data == {"decision": "yes"} and good.tag == "a"
    assert not bad.ok and bad.failure == "invalid" and "schema" in bad.error
    assert client.usage.requests == 2 and client.usage.invalid_outputs == 1


def test_passed_requests_go_to_the_fallback_in_order():
    fallback = _Fallback()
    client = ScriptedClient(lambda r: PASS if r.tag in {"b", "d"} else {"decision": "yes"}, "half",
                            fallback=fallback)  # fmt: skip
    results = client.map([_request(t) for t in "abcd"])
    assert [r.tag for r in results] == list("abcd")
    assert [r.data["decision"] for r in results] == ["yes", "no", "yes", "no"]
    assert fallback.seen == ["b", "d"]


def test_passing_without_a_fallback_is_an_error():
    client = ScriptedClient(lambda r: PASS, "none")
    with pytest.raises(ValueError, match="no fallback"):
        client.map([_request("a")], desc="verdicts")


def test_plain_text_requests_get_the_text():
    client = ScriptedClient(lambda r: "hello", "greeter")
    (result,) = client.map([_request("a", schema=None)])
    assert result.ok and result.text == "hello" and result.data is None
