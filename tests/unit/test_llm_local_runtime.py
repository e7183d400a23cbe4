"""Choosing the embedded server program: llama-cpp-python's server or llama.cpp's llama-server.

No model is loaded: these tests check the settings, the command line, the environment the
child sees, and the bootstrap that runs the llama-server binary (with a sleeping Python
process standing in for it).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recagents.config import settings
from recagents.llm import local, runtime_build
from recagents.llm.client import LLMClient
from recagents.llm.local import MODEL_ALIAS, LocalServer, LocalServerError


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (local.RUNTIME_ENV, local.SLOTS_ENV):
        monkeypatch.delenv(name, raising=False)


def test_the_runtime_defaults_to_llama_server_where_built_and_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = tmp_path / "llama-server"
    monkeypatch.setattr(runtime_build, "recorded_build", lambda: {"server": str(binary)})
    assert local.local_runtime() == "llama-cpp-python"  # recorded, but the file is gone
    binary.write_bytes(b"")
    assert local.local_runtime() == "llama-server"
    monkeypatch.setattr(runtime_build, "recorded_build", lambda: None)
    assert local.local_runtime() == "llama-cpp-python"  # never built: the fallback
    monkeypatch.setenv(local.RUNTIME_ENV, "llama-server")
    assert local.local_runtime() == "llama-server"
    monkeypatch.setenv(local.RUNTIME_ENV, "vllm")
    with pytest.raises(LocalServerError, match="must be one of llama-cpp-python, llama-server"):
        local.local_runtime()


def test_llama_server_takes_every_core_and_llama_cpp_python_half(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(local.THREADS_ENV, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3}, raising=False)
    assert local._default_threads("llama-server") == 4
    assert local._default_threads("llama-cpp-python") == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(32)), raising=False)
    assert local._default_threads("llama-server") == 8  # a 135M model gains little from more
    monkeypatch.setenv(local.THREADS_ENV, "1")
    assert local._default_threads("llama-server") == 1
    monkeypatch.setenv(local.THREADS_ENV, "none")
    with pytest.raises(LocalServerError, match="must be a positive integer"):
        local._default_threads("llama-server")


def test_slots_are_one_for_llama_cpp_python_and_checked_for_llama_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(local.SLOTS_ENV, "6")
    assert local.local_slots("llama-cpp-python") == 1
    assert local.local_slots("llama-server") == 6
    monkeypatch.delenv(local.SLOTS_ENV)
    assert local.local_slots("llama-server") == local.DEFAULT_SLOTS
    for bad in ("0", "many", "65"):
        monkeypatch.setenv(local.SLOTS_ENV, bad)
        with pytest.raises(LocalServerError, match="integer from 1 to 64"):
            local.local_slots("llama-server")


def test_llama_server_command_shares_one_kv_pool_between_its_slots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = tmp_path / "llama-server"
    monkeypatch.setattr(local, "server_binary", lambda: binary)
    server = LocalServer(
        model_path=tmp_path / "m.gguf", runtime="llama-server", slots=3, n_ctx=2048, n_threads=1
    )
    command = server.command()
    assert command[2] == local._BINARY_BOOTSTRAP and command[4] == str(binary)
    flags = dict(zip(command[5::2], command[6::2], strict=False))
    assert flags["--parallel"] == "3" and flags["--ctx-size"] == str(3 * 2048)
    assert flags["--alias"] == MODEL_ALIAS and flags["--threads"] == "1"
    assert "--no-webui" in command
    assert server.n_slots == 3
    python = LocalServer(model_path=tmp_path / "m.gguf", runtime="llama-cpp-python", slots=3)
    assert python.n_slots == 1 and "llama_cpp.server" in python.command()[2]


def test_a_missing_llama_server_build_says_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime_build, "recorded_build", lambda: {"server": str(tmp_path / "x")})
    with pytest.raises(LocalServerError, match=r"is gone\): run `python recagents/llm/runtime"):
        local.server_binary()
    monkeypatch.setattr(runtime_build, "recorded_build", lambda: None)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"gguf")
    with pytest.raises(LocalServerError, match="llama-server needs llama.cpp's server built"):
        LocalServer(model_path=model, runtime="llama-server").start()


def test_the_child_never_sees_llama_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """LLAMA_API_KEY would lock the client out; LLAMA_ARG_* would override our flags."""
    monkeypatch.setenv("LLAMA_API_KEY", "secret")
    monkeypatch.setenv("LLAMA_ARG_THREADS", "64")
    monkeypatch.setenv("N_CTX", "5")
    env = local._child_env()
    assert "LLAMA_API_KEY" not in env and "LLAMA_ARG_THREADS" not in env and "N_CTX" not in env
    assert env["PATH"] == os.environ["PATH"]


def test_the_client_keeps_as_many_requests_in_flight_as_there_are_slots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = dataclasses.replace(settings(), llm_base_url=None, llm_model=None)
    client = LLMClient(config=config, cache=False)
    monkeypatch.setenv(local.RUNTIME_ENV, "llama-cpp-python")
    assert client.default_concurrency == 1
    monkeypatch.setenv(local.RUNTIME_ENV, "llama-server")
    monkeypatch.setenv(local.SLOTS_ENV, "3")
    assert client.default_concurrency == 3
    configured = LLMClient(config=dataclasses.replace(config, llm_concurrency=2), cache=False)
    assert configured.default_concurrency == 2


def _bootstrap(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """The binary bootstrap running a sleeping Python process; returns it and the child's pid."""
    pid_file = tmp_path / "child.pid"
    child = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    process = subprocess.Popen(
        [sys.executable, "-c", local._BINARY_BOOTSTRAP, str(os.getpid()), sys.executable, "-c",
         child]
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the bootstrap did not start its child"
        time.sleep(0.05)
    return process, int(pid_file.read_text())


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_the_bootstrap_dies_of_the_signal_that_killed_the_server(tmp_path: Path) -> None:
    """So death_report names SIGSEGV for a crashed llama-server, as for the Python server."""
    process, child = _bootstrap(tmp_path)
    os.kill(child, signal.SIGSEGV)
    assert process.wait(timeout=20) == -signal.SIGSEGV


def test_the_server_ends_with_its_bootstrap_even_when_that_is_killed(tmp_path: Path) -> None:
    process, child = _bootstrap(tmp_path)
    process.terminate()
    assert process.wait(timeout=20) == -signal.SIGTERM and _gone(child)
    process, child = _bootstrap(tmp_path)
    process.kill()  # no handler runs: PR_SET_PDEATHSIG ends the child
    process.wait(timeout=20)
    assert _gone(child)


def test_the_fallback_runtime_is_announced_only_when_chosen_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime_build, "recorded_build", lambda: None)
    notice = local.fallback_notice()
    assert notice is not None and "make setup-server" in notice
    assert local.FALLBACK_RUNTIME in notice
    monkeypatch.setenv(local.RUNTIME_ENV, "llama-cpp-python")  # chosen on purpose: no notice
    assert local.fallback_notice() is None
    monkeypatch.delenv(local.RUNTIME_ENV)
    binary = tmp_path / "llama-server"
    binary.write_bytes(b"")
    monkeypatch.setattr(runtime_build, "recorded_build", lambda: {"server": str(binary)})
    assert local.fallback_notice() is None
