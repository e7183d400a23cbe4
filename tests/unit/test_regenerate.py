"""Tests of recagents.llm.regenerate and ``bundle verify --regenerate``: re-asking recorded
requests cold and counting the byte-identical replies.

The "model" is the scripted test server: its echo action is a deterministic function of the
request, so every re-asked reply repeats; switching its default reply makes them differ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripted_server import ScriptedServer, reply

from recagents.config import settings
from recagents.llm import __main__ as cli
from recagents.llm.bundle import export_bundle, read_bundle
from recagents.llm.cache import ResponseCache, request_key
from recagents.llm.client import ChatRequest, LLMClient, reset_client
from recagents.llm.regenerate import chat_request, regenerate, sample_chat_entries

SCHEMA = {
    "type": "object",
    "properties": {"choice": {"type": "integer", "enum": [1, 2]}},
    "required": ["choice"],
}


def _client(cache: ResponseCache | bool, url: str, model: str = "scripted") -> LLMClient:
    config = dataclasses.replace(
        settings(),
        llm_base_url=None,
        llm_model=None,
        llm_concurrency=4,
        llm_max_attempts=2,
        llm_max_reasks=1,
        llm_timeout_s=2.0,
        llm_structured="auto",
    )
    return LLMClient(
        base_url=url,
        model=model,
        config=config,
        cache=cache if isinstance(cache, ResponseCache) else False,
        backoff_base_s=0.01,
        backoff_max_s=0.02,
    )


@pytest.fixture
def bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Six plain chats, one structured reply and one that was re-asked, exported."""
    monkeypatch.delenv("RECAGENTS_REPLAY", raising=False)
    with ScriptedServer() as server:
        cache = ResponseCache(tmp_path / "run" / "llm-cache.sqlite")
        client = _client(cache, server.url)
        requests = [
            ChatRequest([{"role": "user", "content": f"films for user {u}"}], max_tokens=32)
            for u in range(6)
        ]
        assert all(r.ok for r in client.map(requests, progress=False))
        server.script(reply("not json"), reply('{"choice": 2}'))
        assert client.chat_json([{"role": "user", "content": "pick"}], SCHEMA).reasks == 1
        cache.close()
        path = tmp_path / "run.bundle"
        export_bundle(path, cache=tmp_path / "run")
        server.clear()
        yield {"path": path, "server": server, "entries": read_bundle(path)[1]}


def test_a_recorded_request_is_rebuilt_with_its_own_key(bundle: dict[str, Any]) -> None:
    client = _client(False, bundle["server"].url)
    for entry in bundle["entries"]:
        request = chat_request(entry["request"])
        assert request_key(client._key_request(request, request.messages)) == entry["key"]
    with pytest.raises(ValueError, match="not a chat request"):
        chat_request({"kind": "embed", "texts": ["a"]})


def test_deterministic_replies_all_repeat_and_each_is_asked_once(bundle: dict[str, Any]) -> None:
    server = bundle["server"]
    plain = [e for e in bundle["entries"] if not e["request"].get("schema")]
    report = regenerate(plain, _client(False, server.url))
    assert (report.asked, report.identical, report.differing, report.failed) == (6, 6, [], [])
    assert report.summary().startswith("6 of 6 replies byte-identical (100.0%)")
    # The structured pair: the invalid reply is compared as it is, never re-asked, so each
    # entry costs exactly one HTTP request.
    structured = [e for e in bundle["entries"] if e["request"].get("schema")]
    assert [e["reply"]["text"] for e in structured].count("not json") == 1
    server.clear()
    server.script(*[reply(e["reply"]["text"]) for e in structured])
    report = regenerate(structured, _client(False, server.url), concurrency=1)
    assert (report.asked, report.identical) == (2, 2)
    assert len(server.requests) == 2


def test_a_changed_reply_is_counted_with_where_it_differs(bundle: dict[str, Any]) -> None:
    server = bundle["server"]
    plain = [e for e in bundle["entries"] if not e["request"].get("schema")]
    first = plain[0]["reply"]["text"]
    server.set_default(reply(first[:3] + "#" + first[4:]))
    report = regenerate(plain, _client(False, server.url))
    assert (report.identical, len(report.differing), report.rate) == (0, 6, 0.0)
    assert dict(report.differing)[plain[0]["key"]] == 3  # the first changed character


def test_a_client_that_would_send_another_request_is_refused(bundle: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="would not send the recorded request"):
        regenerate(bundle["entries"], _client(False, bundle["server"].url, model="other"))


def test_the_sample_is_seeded_and_keeps_the_bundle_order(bundle: dict[str, Any]) -> None:
    entries = bundle["entries"]
    first, again = sample_chat_entries(entries, 3, seed=7), sample_chat_entries(entries, 3, 7)
    assert [e["key"] for e in first] == [e["key"] for e in again]
    order = [e["key"] for e in entries]
    assert [order.index(e["key"]) for e in first] == sorted(order.index(e["key"]) for e in first)
    assert len(sample_chat_entries(entries, 100)) == len(entries)


def test_cli_verify_regenerate_reports_and_exits_by_the_count(
    bundle: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = bundle["server"]
    monkeypatch.setenv("RECAGENTS_LLM_BASE_URL", server.url)
    monkeypatch.setenv("RECAGENTS_LLM_MODEL", "scripted")
    reset_client()
    server.set_default(reply("something else"))
    status = cli.main(["bundle", "verify", str(bundle["path"]), "--regenerate", "3"])
    out = capsys.readouterr().out
    assert status == 1
    assert "re-asking 3 chat requests (seed 0) uncached" in out
    assert "0 of 3 replies byte-identical" in out and "differs:" in out
    reset_client()
