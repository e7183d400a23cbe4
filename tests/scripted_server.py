"""A scripted OpenAI-compatible test server, for testing and benchmarking the LLM client.

It exists only to inject faults, malformed replies and latency into
:class:`recagents.llm.client.LLMClient`; it is never a stand-in for a model in an
experiment. Its "replies" are canned text or a deterministic echo of the prompt.

Standard library only: a :class:`http.server.ThreadingHTTPServer` on ``127.0.0.1`` (port 0,
so the OS picks a free one) in a daemon thread. It serves

- ``POST /v1/chat/completions``: consumes one scripted *action* per request from a queue,
  or uses the default action when the queue is empty;
- ``GET /v1/models``: the one model name.

Actions (build them with the functions below):

- :func:`reply` -- a proper ``chat.completion`` with the given text and usage;
- :func:`echo` -- a reply whose text is :func:`echo_text` of the request (the last user
  message reversed), after a fixed (optionally jittered) delay;
- :func:`status` -- an error status (429 with ``Retry-After``, 5xx, 400, and 401, whose
  default message echoes the key from the ``Authorization`` header as some providers do);
- :func:`malformed_body` -- 200 with a body that is not JSON;
- :func:`sleep` -- hang (past the client's timeout), then answer with another action;
- :func:`drop` -- close the connection without sending any response;
- :func:`body` -- 200 with any JSON body (no choices, null content, a legacy text shape);
- :func:`crash` -- drop the connection and stop listening, like a killed server.

Every request is recorded (method, path, headers, parsed JSON body, action) in a
thread-safe log, so that tests can count HTTP calls and inspect what was sent.

Example::

    with ScriptedServer(default=echo()) as server:
        server.script(status(429, retry_after=0.3), reply("hello"))
        client = LLMClient(base_url=server.url, model="scripted", ...)
"""

from __future__ import annotations

import hashlib
import json
import random
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = [
    "Action",
    "RecordedRequest",
    "ScriptedServer",
    "body",
    "closed_port_url",
    "crash",
    "drop",
    "echo",
    "echo_text",
    "malformed_body",
    "reply",
    "scripted_server",
    "sequential_client",
    "sleep",
    "status",
]

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Action:
    """One scripted answer to one request: a kind and its parameters."""

    kind: str
    params: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{self.kind}({args})"


def reply(
    text: str, prompt_tokens: int = 10, completion_tokens: int = 5, delay_s: float = 0.0
) -> Action:
    """A well-formed ``chat.completion`` whose assistant message is ``text``."""
    return Action(
        "reply",
        {
            "text": text,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "delay_s": delay_s,
        },
    )


def echo(
    delay_s: float = 0.0,
    jitter_s: float = 0.0,
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
) -> Action:
    """A reply whose text is :func:`echo_text` of the request, after ``delay_s``.

    ``jitter_s`` adds a uniform random extra delay in ``[0, jitter_s)`` (drawn from the
    server's seeded generator), e.g. to make concurrent replies finish out of order.
    """
    return Action(
        "echo",
        {
            "delay_s": delay_s,
            "jitter_s": jitter_s,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
        },
    )


def status(code: int, retry_after: float | str | None = None, body: Any = None) -> Action:
    """An HTTP error ``code``, with a ``Retry-After`` header if given.

    ``body`` (a JSON-serialisable value, or ``str``/``bytes`` sent as is) defaults to an
    OpenAI-style ``{"error": {...}}``; for 401 its message echoes the API key from the
    ``Authorization`` header ("Incorrect API key provided: <key>"), as some providers do.
    """
    return Action("status", {"code": code, "retry_after": retry_after, "body": body})


def malformed_body(
    body: str = "<html><body>502 Bad Gateway</body></html>",
    content_type: str = "application/json",
) -> Action:
    """Status 200 with a body that is not JSON (under a JSON content type by default)."""
    return Action("malformed_body", {"body": body, "content_type": content_type})


def sleep(seconds: float, then: Action | None = None) -> Action:
    """Hang for ``seconds`` (meant to outlast the client's timeout), then run ``then``.

    ``then`` defaults to ``reply("too late")``; a client that timed out has closed the
    connection by then, which the server ignores.
    """
    return Action("sleep", {"seconds": seconds, "then": then or reply("too late")})


def drop() -> Action:
    """Close the connection after reading the request, without sending any response."""
    return Action("drop")


def body(payload: Any) -> Action:
    """Status 200 with ``payload`` as its JSON body (e.g. a completion with no choices)."""
    return Action("body", {"payload": payload})


def crash() -> Action:
    """Drop the connection and stop listening, as a killed server does (``start`` revives it)."""
    return Action("crash")


def echo_text(messages: Sequence[dict[str, Any]]) -> str:
    """The text :func:`echo` answers: the content of the last user message, reversed."""
    users = [m for m in messages if m.get("role") == "user"]
    content = users[-1].get("content", "") if users else ""
    if not isinstance(content, str):
        content = json.dumps(content, sort_keys=True)
    return content[::-1]


# --------------------------------------------------------------------------- the server


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received.

    Attributes:
        method: ``GET`` or ``POST``.
        path: The request path, e.g. ``/v1/chat/completions``.
        headers: Header names (lower case) to values.
        body: The parsed JSON body (``None`` if empty or not JSON).
        action: The action that answered it (``None`` for non-chat paths).
        received: ``time.perf_counter()`` when it arrived.
        peer: The client's ``(host, port)``: one port per TCP connection, so that tests can
            see whether a client reuses its connections (with ``keep_alive=True``).
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    action: Action | None
    received: float
    peer: tuple[str, int]


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256  # the default of 5 drops SYNs under 32 concurrent connects
    allow_reuse_address = True

    scripted: ScriptedServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # answers go out in one write, and without Nagle's delay on kept-alive connections
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.scripted._opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.scripted._closed(self.connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Stay silent (tests capture stderr)."""

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return None

    def do_GET(self) -> None:  # noqa: N802
        scripted = self.server.scripted
        scripted._record(self, None, None)
        if self.path.rstrip("/") == MODELS_PATH:
            payload = {
                "object": "list",
                "data": [{"id": scripted.model, "object": "model", "owned_by": "scripted"}],
            }
            self._send(200, json.dumps(payload).encode())
        else:
            self._send(404, json.dumps({"error": {"message": "not found"}}).encode())

    def do_POST(self) -> None:  # noqa: N802
        scripted = self.server.scripted
        body = self._read_body()
        if self.path.rstrip("/") != CHAT_PATH:
            scripted._record(self, body, None)
            self._send(404, json.dumps({"error": {"message": "not found"}}).encode())
            return
        action = scripted._next_action()
        scripted._record(self, body, action)
        scripted._enter()
        try:
            self._perform(action, body if isinstance(body, dict) else {})
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass  # the client gave up (timed out) before we answered
        finally:
            scripted._leave()

    def _perform(self, action: Action, body: dict[str, Any]) -> None:
        scripted = self.server.scripted
        p = action.params
        if action.kind == "reply":
            scripted._wait(p["delay_s"])
            self._completion(body, p["text"], p["prompt_tokens"], p["completion_tokens"])
        elif action.kind == "echo":
            delay = p["delay_s"] + (scripted._uniform(p["jitter_s"]) if p["jitter_s"] else 0.0)
            scripted._wait(delay)
            text = echo_text(body.get("messages") or [])
            self._completion(body, text, p["prompt_tokens"], p["completion_tokens"])
        elif action.kind == "status":
            self._status(p["code"], p["retry_after"], p["body"])
        elif action.kind == "malformed_body":
            self._send(200, p["body"].encode(), content_type=p["content_type"])
        elif action.kind == "sleep":
            if scripted._wait(p["seconds"]):
                self._perform(p["then"], body)
            else:
                self._drop()  # the server is stopping
        elif action.kind == "drop":
            self._drop()
        elif action.kind == "body":
            self._send(200, json.dumps(p["payload"]).encode())
        elif action.kind == "crash":
            self._drop()
            threading.Thread(target=scripted.stop, daemon=True).start()
        else:  # pragma: no cover - a typo in a test
            raise ValueError(f"unknown action {action!r}")

    def _completion(
        self, body: dict[str, Any], text: str, prompt_tokens: int, completion_tokens: int
    ) -> None:
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
        payload = {
            "id": f"chatcmpl-{digest}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.server.scripted.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        self._send(200, json.dumps(payload).encode())

    def _status(self, code: int, retry_after: float | str | None, body: Any) -> None:
        if body is None:
            message = {
                400: "Bad request: invalid parameter",
                401: "Incorrect API key provided: {key}",
                404: "Not found",
                429: "Rate limit reached, please retry later",
            }.get(code, "The server had an error while processing your request")
            if "{key}" in message:
                auth = self.headers.get("Authorization") or ""
                key = auth[len("Bearer ") :] if auth.startswith("Bearer ") else auth
                message = message.format(key=key)
            body = {"error": {"message": message, "type": "scripted_error", "code": code}}
        if isinstance(body, bytes):
            raw = body
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = json.dumps(body).encode()
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        self._send(code, raw, headers=headers)

    def _send(
        self,
        code: int,
        raw: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        keep_alive = self.server.scripted.keep_alive
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(raw)))
        if not keep_alive:
            self.send_header("Connection", "close")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self._headers_buffer.append(b"\r\n")
        self.wfile.write(b"".join(self._headers_buffer) + raw)  # headers and body in one write
        self._headers_buffer = []
        self.wfile.flush()
        if not keep_alive:
            self.close_connection = True

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class ScriptedServer:
    """A scripted OpenAI-compatible test server (see the module docstring).

    Args:
        default: Action used when the script queue is empty (default: ``echo()``).
        model: Model name listed by ``GET /v1/models`` and echoed in replies.
        seed: Seed of the generator behind ``echo(jitter_s=...)``.
        keep_alive: Keep connections open between requests, as real endpoints do. The
            default (``False``) answers every request with ``Connection: close``, so that
            each HTTP call has its own connection and no test depends on connection reuse.
    """

    def __init__(
        self,
        default: Action | None = None,
        model: str = "scripted",
        seed: int = 0,
        keep_alive: bool = False,
    ):
        self.model = model
        self.keep_alive = keep_alive
        self._connections: set[socket.socket] = set()
        self._default = default or echo()
        self._queue: deque[Action] = deque()
        self._log: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._stopping = threading.Event()
        self._in_flight = 0
        self.max_in_flight = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifetime

    def start(self, port: int = 0) -> ScriptedServer:
        """Bind 127.0.0.1 (on a free port, or ``port`` to restart where it was) and serve."""
        if self._httpd is not None:
            return self
        httpd = _HTTPServer(("127.0.0.1", port), _Handler)
        httpd.scripted = self
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; hanging ``sleep`` actions are woken and drop their connection."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:  # wake handler threads waiting on kept-alive connections
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port."""
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The base URL a client takes, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting

    def script(self, *actions: Action) -> ScriptedServer:
        """Append actions to the queue; each answers one chat request, in arrival order."""
        with self._lock:
            self._queue.extend(actions)
        return self

    def set_default(self, action: Action) -> None:
        """The action for chat requests that arrive when the queue is empty."""
        with self._lock:
            self._default = action

    def pending(self) -> int:
        """Scripted actions not consumed yet."""
        with self._lock:
            return len(self._queue)

    # -- inspection

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._log)

    def chat_requests(self) -> list[RecordedRequest]:
        """The recorded ``POST /v1/chat/completions`` requests."""
        return [r for r in self.requests if r.path.rstrip("/") == CHAT_PATH]

    def chat_bodies(self) -> list[Any]:
        """The parsed JSON bodies of the chat requests."""
        return [r.body for r in self.chat_requests()]

    def count(self) -> int:
        """Number of chat-completion HTTP requests received so far."""
        return len(self.chat_requests())

    def clear(self) -> None:
        """Forget recorded requests (the script queue and default are kept)."""
        with self._lock:
            self._log.clear()
            self.max_in_flight = 0

    # -- used by the handler

    def _next_action(self) -> Action:
        with self._lock:
            return self._queue.popleft() if self._queue else self._default

    def _record(self, handler: BaseHTTPRequestHandler, body: Any, action: Action | None) -> None:
        entry = RecordedRequest(
            method=handler.command,
            path=handler.path,
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=body,
            action=action,
            received=time.perf_counter(),
            peer=(str(handler.client_address[0]), int(handler.client_address[1])),
        )
        with self._lock:
            self._log.append(entry)

    def _opened(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)

    def _closed(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.discard(conn)

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _uniform(self, upper: float) -> float:
        with self._lock:
            return self._rng.uniform(0.0, upper)

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the server stops first; True if it did not stop."""
        if seconds <= 0:
            return not self._stopping.is_set()
        return not self._stopping.wait(seconds)


def closed_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def sequential_client(
    url: str, cache_dir: Any, max_attempts: int = 2, max_reasks: int = 1, cache: Any = False
) -> Any:
    """An :class:`~recagents.llm.client.LLMClient` for the scripted server, one request at once.

    Used by the tests of the agents' loops: with concurrency 1 and no cache, the scripted
    replies are consumed in exactly the order the stages ask; retries, re-asks and backoff
    are small so that a fault costs milliseconds. ``cache``: a ``ResponseCache`` to use
    (default ``False``: none).
    """
    import dataclasses

    from recagents.config import settings
    from recagents.llm.client import LLMClient

    config = dataclasses.replace(
        settings(),
        cache_dir=cache_dir,
        llm_base_url=None,
        llm_model=None,
        llm_concurrency=1,
        llm_max_attempts=max_attempts,
        llm_max_reasks=max_reasks,
        llm_timeout_s=2.0,
        llm_structured="auto",
    )
    return LLMClient(
        base_url=url,
        model="scripted",
        api_key="sk-test-not-a-real-key",
        config=config,
        cache=cache,
        backoff_base_s=0.01,
        backoff_max_s=0.02,
    )


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    """A started :class:`ScriptedServer` (default action ``echo()``), stopped afterwards."""
    with ScriptedServer() as server:
        yield server
