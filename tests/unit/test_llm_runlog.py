"""The one call log and ask helpers every paper uses, against the scripted test server."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from scripted_server import ScriptedServer, reply, status
from scripted_server import scripted_server as scripted_server  # noqa: F401  (fixture)

from recagents.config import settings
from recagents.llm.client import LLMClient
from recagents.llm.runlog import CALL_COLUMNS, RunLog, ask_each, cost_table

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


def _client(url: str, tmp_path: Path) -> LLMClient:
    config = dataclasses.replace(
        settings(),
        cache_dir=tmp_path,
        llm_base_url=None,
        llm_model=None,
        llm_concurrency=1,
        llm_max_attempts=2,
        llm_max_reasks=0,
        llm_timeout_s=2.0,
    )
    return LLMClient(
        base_url=url,
        model="scripted",
        api_key="sk-test-not-a-real-key",
        config=config,
        cache=False,
        backoff_base_s=0.01,
        backoff_max_s=0.02,
    )


def test_ask_each_sends_one_request_per_agent_and_logs_every_call(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    scripted_server.script(reply(json.dumps({"ok": True})), status(400))
    log = RunLog()
    messages = [[{"role": "user", "content": f"agent {i}"}] for i in range(2)]
    results = ask_each(
        _client(scripted_server.url, tmp_path),
        log,
        "train",
        "forward",
        ["u1", "u2"],
        messages,
        SCHEMA,
        temperature=0.2,
        max_tokens=30,
        progress=False,
    )
    assert [r.tag for r in results] == ["u1", "u2"]
    assert [r.ok for r in results] == [True, False]
    bodies = scripted_server.chat_bodies()
    assert [b["temperature"] for b in bodies] == [0.2, 0.2]
    assert [b["max_tokens"] for b in bodies] == [30, 30]
    assert all(b["seed"] == 0 for b in bodies)  # the default seed, as ChatRequest's
    calls = log.calls_frame()
    assert list(calls.columns) == list(CALL_COLUMNS)
    assert calls["phase"].tolist() == ["train", "train"]
    assert calls["kind"].tolist() == ["forward", "forward"]
    assert calls["ok"].tolist() == [True, False]
    table = cost_table(calls)
    assert int(table.loc["total", "calls"]) == 2 and int(table.loc["total", "failed"]) == 1


def test_ask_each_takes_one_schema_per_request_and_nothing_to_ask(tmp_path: Path) -> None:
    with ScriptedServer(default=reply(json.dumps({"ok": False}))) as server:
        log = RunLog()
        other = {**SCHEMA, "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"}}}
        client = _client(server.url, tmp_path)
        results = ask_each(
            client,
            log,
            "p",
            "k",
            ["a", "b"],
            [[{"role": "user", "content": "x"}], [{"role": "user", "content": "y"}]],
            [SCHEMA, other],
            temperature=0.0,
            max_tokens=10,
            seed=7,
            progress=False,
        )
        assert all(r.ok for r in results)
        schemas = [b["response_format"]["json_schema"]["schema"] for b in server.chat_bodies()]
        assert schemas == [SCHEMA, other]
        assert {b["seed"] for b in server.chat_bodies()} == {7}
        empty = ask_each(client, log, "p", "k", [], [], SCHEMA, temperature=0.0, max_tokens=10)
        assert empty == [] and len(log.calls) == 2 and server.count() == 2
