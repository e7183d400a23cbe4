"""The one call log and ask helpers every paper uses, against the scripted test server."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from scripted_server import ScriptedServer, reply, status
from scripted_server import scripted_server as scripted_server  # noqa: F401  (fixture)

from recagents.config import settings
from recagents.llm.client import ChatResult, LLMClient
from recagents.llm.runlog import CALL_COLUMNS, RunContext, RunLog, cost_table

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


def test_context_ask_sends_one_request_per_agent_and_logs_every_call(
    scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    scripted_server.script(reply(json.dumps({"ok": True})), status(400))
    log = RunLog()
    messages = [[{"role": "user", "content": f"agent {i}"}] for i in range(2)]
    results = RunContext(_client(scripted_server.url, tmp_path), log, "train").ask(
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


def test_context_ask_takes_one_schema_per_request_and_nothing_to_ask(tmp_path: Path) -> None:
    with ScriptedServer(default=reply(json.dumps({"ok": False}))) as server:
        log = RunLog()
        other = {**SCHEMA, "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"}}}
        client = _client(server.url, tmp_path)
        results = RunContext(client, log, "p").ask(
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
        empty = RunContext(client, log, "p").ask(
            "k", [], [], SCHEMA, temperature=0.0, max_tokens=10
        )
        assert empty == [] and len(log.calls) == 2 and server.count() == 2


def test_context_ask_takes_one_token_limit_per_request(tmp_path: Path) -> None:
    with ScriptedServer(default=reply(json.dumps({"ok": True}))) as server:
        client = _client(server.url, tmp_path)
        messages = [[{"role": "user", "content": c}] for c in ("x", "y", "z")]
        RunContext(client, RunLog(), "p").ask("k", ["a", "b", "c"], messages, SCHEMA,
                 temperature=0.0, max_tokens=[10, 25, 40], progress=False)  # fmt: skip
        assert [b["max_tokens"] for b in server.chat_bodies()] == [10, 25, 40]
        with pytest.raises(ValueError):
            RunContext(client, RunLog(), "p").ask("k", ["a", "b", "c"], messages, SCHEMA,
                     temperature=0.0, max_tokens=[10, 25], progress=False)  # fmt: skip
        assert server.count() == 3, "a limit list of the wrong length sends nothing"


def test_run_context_asks_under_its_phase_and_derives_others(tmp_path: Path) -> None:
    with ScriptedServer(default=reply(json.dumps({"ok": True}))) as server:
        log = RunLog()
        ctx = RunContext(_client(server.url, tmp_path), log, "train")
        one = [[{"role": "user", "content": "x"}]]
        ctx.ask("forward", ["u1"], one, SCHEMA, temperature=0.3, max_tokens=12, progress=False)
        evaluation = ctx.at("eval")
        assert evaluation.phase == "eval" and ctx.phase == "train"
        assert evaluation.log is log and evaluation.client is ctx.client
        evaluation.ask("rank", ["u2"], one, SCHEMA, temperature=0.3, max_tokens=12,
                       progress=False)  # fmt: skip
        calls = log.calls_frame()
        assert calls[["phase", "kind"]].values.tolist() == [["train", "forward"], ["eval", "rank"]]
        bodies = server.chat_bodies()
        assert [b["temperature"] for b in bodies] == [0.3, 0.3]
        assert [b["seed"] for b in bodies] == [0, 0]
        with pytest.raises(dataclasses.FrozenInstanceError):
            ctx.phase = "other"  # type: ignore[misc]


def test_run_log_counts_problems_and_extend_adds_them() -> None:
    log = RunLog()
    assert log.problems == {}
    log.count("page_unusable")
    log.count("page_unusable", 2)
    other = RunLog()
    other.count("page_unusable")
    other.count("exit_unusable", 4)
    other.add_calls("exit", "exit", [ChatResult(ok=False, failure="invalid")])
    other.events.append({"kind": "note"})
    log.extend(other)
    assert log.problems == {"page_unusable": 4, "exit_unusable": 4}
    assert other.problems == {"page_unusable": 1, "exit_unusable": 4}, "the source is unchanged"
    assert len(log.calls) == 1 and log.calls[0]["phase"] == "exit"
    assert log.events == [{"kind": "note"}]
    assert RunLog().problems == {}, "logs do not share their counts"
