"""llama.cpp's own server (``RECAGENTS_LOCAL_RUNTIME=llama-server``) with the real model.

The same contract as the Python server: lists the model under our alias, answers the
client's JSON-schema requests, is probed without waiting on a generation, and a killed
process is reported with its signal. Plus what only it has: several requests decoded at
once, each of which must still come back whole and valid.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from recagents.config import settings
from recagents.llm.client import ChatRequest, LLMClient
from recagents.llm.local import (
    MODEL_ALIAS,
    LocalServer,
    LocalServerError,
    default_model_path,
    server_binary,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "choice": {"type": "integer", "enum": [1, 2]},
        "why": {"type": "string", "maxLength": 60},
    },
    "required": ["choice", "why"],
}


@pytest.fixture(scope="module")
def built() -> Path:
    """This environment's llama-server, the default runtime (`make setup` builds it)."""
    try:
        return server_binary()
    except LocalServerError as error:
        pytest.skip(f"llama-server is not built for this environment: {error}")


@pytest.fixture(scope="module")
def server(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    running = LocalServer(
        model_path=default_model_path(), runtime="llama-server", slots=2, n_threads=1,
        log_path=log,
    )  # fmt: skip
    with running:
        yield running


def _client(server: LocalServer, concurrency: int) -> LLMClient:
    config = dataclasses.replace(
        settings(),
        llm_base_url=server.base_url,
        llm_model=MODEL_ALIAS,
        llm_structured="json_object",
        llm_concurrency=concurrency,
        api_key=None,
    )
    return LLMClient(config=config, cache=False)


def test_llama_server_lists_the_model_with_one_context_per_slot(server: LocalServer) -> None:
    with urllib.request.urlopen(f"{server.base_url}/models", timeout=10) as response:
        models = json.loads(response.read())["data"]
    assert [m["id"] for m in models] == [MODEL_ALIAS]
    assert models[0]["meta"]["n_ctx"] == server.n_ctx
    assert server.is_alive()


def test_concurrent_structured_requests_all_come_back_valid(server: LocalServer) -> None:
    """Four requests on two slots: every reply whole, parsed and within the schema."""
    requests = [
        ChatRequest(
            [{"role": "user", "content": f"Film {i} or film {i + 1}? Answer 1 or 2, say why."}],
            schema=SCHEMA,
            max_tokens=64,
        )
        for i in range(4)
    ]
    results = _client(server, 2).map(requests, progress=False)
    assert all(r.ok for r in results), [r.error for r in results]
    assert all(r.data["choice"] in (1, 2) for r in results)
    assert all(r.prompt_tokens > 0 and r.completion_tokens > 0 for r in results)


def test_a_killed_llama_server_is_reported_with_its_signal(built: Path, tmp_path: Path) -> None:
    server = LocalServer(
        model_path=default_model_path(), runtime="llama-server", slots=1, n_threads=1,
        log_path=tmp_path / "s.log",
    )  # fmt: skip
    with server:
        bootstrap = server._process
        assert bootstrap is not None
        children = Path(f"/proc/{bootstrap.pid}/task/{bootstrap.pid}/children")
        (binary_pid,) = map(int, children.read_text().split())
        os.kill(binary_pid, signal.SIGKILL)
        report = server.death_report(wait_s=15)
        assert report is not None and "SIGKILL" in report
        assert not server.is_alive()
