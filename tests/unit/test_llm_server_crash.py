"""A server process that dies on a chat request is reported as such, never as a bare error.

A stand-in for ``llama_cpp.server`` (a few lines of standard-library HTTP, started through
:class:`LocalServer` with its command swapped) lists the model like the real server and then
kills itself with SIGSEGV on the Nth chat request, as the AMX build of llama.cpp did on the
first one. No model is loaded, so these tests take seconds.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from recagents.config import settings
from recagents.llm import local
from recagents.llm.client import EndpointUnreachableError, LLMClient
from recagents.llm.local import MODEL_ALIAS, LocalServer, LocalServerError

FAKE_SERVER = """
import json, os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

port, survive = int(sys.argv[1]), int(sys.argv[2])
answered = 0

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send({"data": [{"id": "MODEL_ALIAS"}]})

    def do_POST(self):
        global answered
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if answered >= survive:
            print("fake llama server: ggml_backend_amx_mul_mat about to fault", flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        answered += 1
        self._send({"choices": [{"message": {"content": "OK"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1}})

HTTPServer(("127.0.0.1", port), Handler).serve_forever()
""".replace("MODEL_ALIAS", MODEL_ALIAS)


@dataclasses.dataclass
class CrashingServer(LocalServer):
    """A :class:`LocalServer` whose process answers ``survive`` chat requests, then segfaults."""

    survive: int = 0

    def command(self) -> list[str]:
        return [sys.executable, "-c", FAKE_SERVER, str(self.port), str(self.survive)]


def _server(tmp_path: Path, survive: int) -> CrashingServer:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"not a model")
    return CrashingServer(
        model_path=model,
        log_path=tmp_path / "server.log",
        startup_timeout_s=20,
        survive=survive,
        runtime="llama-cpp-python",  # the stand-in speaks llama_cpp.server's pages
    )


def test_a_server_that_dies_on_its_first_request_fails_the_start_with_the_signal(
    tmp_path: Path,
) -> None:
    server = _server(tmp_path, survive=0)
    with pytest.raises(LocalServerError) as caught:
        server.start()
    message = str(caught.value)
    assert "died with signal SIGSEGV" in message
    assert "self-test" in message
    assert f"http://127.0.0.1:{server.port}/v1" in message
    assert "ggml_backend_amx_mul_mat about to fault" in message  # the log's last lines
    assert server.pid is None


@pytest.fixture
def crash_after_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalServer]:
    """The process-wide embedded server, answering the self-test and then dying."""
    server = _server(tmp_path, survive=1).start()
    monkeypatch.setattr(local, "_SINGLETON", server)
    yield server
    server.stop()


def test_a_request_that_kills_the_server_is_reported_that_way(
    crash_after_one: LocalServer, tmp_path: Path
) -> None:
    config = dataclasses.replace(
        settings(), cache_dir=tmp_path, llm_base_url=None, llm_model=None, llm_max_attempts=3
    )
    client = LLMClient(config=config, cache=False, backoff_base_s=0.01, backoff_max_s=0.05)
    url = crash_after_one.base_url
    with pytest.raises(EndpointUnreachableError) as caught:
        client.chat([{"role": "user", "content": "Recommend a film."}])
    message = str(caught.value)
    assert "died with signal SIGSEGV" in message
    assert url in message
    assert "about to fault" in message
    assert "Connection error" not in message.split(":")[0]
    # a dead server is not retried: one HTTP call, then the failure
    assert client.usage.http_calls == 1


def test_a_dead_server_gives_counted_failures_when_asked_not_to_raise(
    crash_after_one: LocalServer, tmp_path: Path
) -> None:
    from recagents.llm.client import ChatRequest

    config = dataclasses.replace(settings(), cache_dir=tmp_path, llm_base_url=None, llm_model=None)
    client = LLMClient(config=config, cache=False, backoff_base_s=0.01, backoff_max_s=0.05)
    requests = [ChatRequest([{"role": "user", "content": f"q{i}"}]) for i in range(3)]
    results = client.map(requests, progress=False, raise_unreachable=False)
    assert [r.failure for r in results] == ["transport"] * 3
    assert all("died with signal SIGSEGV" in (r.error or "") for r in results)
