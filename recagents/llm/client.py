"""The only way any code talks to a language model: an OpenAI-compatible client.

Why a layer of our own: every experiment is thousands of calls. This client caches each
reply (reruns are free, interrupted runs resume), retries what is worth retrying with
capped exponential backoff (honouring ``Retry-After``), validates structured replies against
a JSON schema with a bounded number of re-asks, runs independent requests concurrently with
a progress bar, and turns whatever still fails into a *counted* :class:`ChatResult` with
``ok=False`` — never a hang, never a silent drop, never an exception in the middle of a
thousand-call loop. Keys come only from the environment and are never stored or printed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import threading
import time
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from recagents.config import Settings, check_endpoint_url, settings
from recagents.llm.cache import ResponseCache, price_for, request_key
from recagents.llm.redact import redact_http_logs, redact_url
from recagents.llm.schemas import ReplyTooComplex, validate_json
from recagents.llm.wire import (  # noqa: F401  (re-exported: the client's public names)
    GRAMMAR_MAX_LENGTH,
    MAX_RETRY_AFTER_S,
    MalformedReply,
    describe_error,
    error_retry_after,
    parse_json_reply,
    read_completion,
    response_format,
    retry_after_seconds,
)
from recagents.resources import import_jsonschema

_T = TypeVar("_T")


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion request; everything but ``tag`` is part of its cache key.

    Attributes:
        messages: OpenAI-style messages, ``[{"role": ..., "content": ...}, ...]``.
        schema: A JSON schema the reply must match (then the reply is parsed), or ``None``.
        temperature: Sampling temperature (0 = greedy, the default for experiments).
        max_tokens: Most tokens to generate.
        seed: Sampling seed sent to the backend (backends may ignore it).
        top_p: Nucleus sampling, or ``None`` for the backend default.
        stop: Stop sequences, or ``None``.
        sample: Index of a repeated sample of the same prompt (distinct cache entries).
        tag: Free label for the caller (e.g. a user id); not sent, not in the key.
    """

    messages: Sequence[dict[str, str]]
    schema: dict[str, Any] | None = None
    temperature: float = 0.0
    max_tokens: int = 256
    seed: int | None = 0
    top_p: float | None = None
    stop: Sequence[str] | None = None
    sample: int = 0
    tag: str = ""

    def sampling(self) -> dict[str, Any]:
        """The sampling parameters that are sent (``None`` values left out)."""
        params = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "top_p": self.top_p,
            "stop": list(self.stop) if self.stop else None,
        }
        return {k: v for k, v in params.items() if v is not None}


@dataclass(frozen=True)
class ChatResult:
    """What one request produced: the reply, or a recorded failure, and its cost.

    Attributes:
        ok: Whether a usable reply came back (and, with a schema, validated).
        text: The raw reply text of the last attempt (``None`` on transport failure).
        data: The parsed JSON reply when a schema was given and it validated.
        error: Why it failed (``None`` when ``ok``): a transport error or a schema mismatch.
        failure: ``None``, ``"transport"`` (endpoint errors after all retries) or
            ``"invalid"`` (reply never matched the schema within the re-asks).
        cached: Whether every completion it needed came from the cache.
        prompt_tokens: Prompt tokens over all attempts (cached ones included).
        completion_tokens: Completion tokens over all attempts.
        latency_s: Wall time the endpoint took originally (cached replies keep theirs).
        attempts: HTTP attempts made now (0 when fully cached).
        reasks: Re-asks after malformed structured replies.
        usage_unknown: Completions whose reported token usage was unusable (negative,
            fractional, non-finite or absurd): counted as 0 tokens, the reply still used.
        tag: The request's tag, copied for convenience.
    """

    ok: bool
    text: str | None = None
    data: Any = None
    error: str | None = None
    failure: Literal["transport", "invalid"] | None = None
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 0
    reasks: int = 0
    usage_unknown: int = 0
    tag: str = ""


@dataclass
class Usage:
    """Counters since the client was made (or :meth:`LLMClient.reset_usage`).

    Two count warnings rather than failures: ``too_complex`` structured replies outside the
    parsing bounds of :func:`recagents.llm.schemas.parse_json_bounded` (re-asked, never
    cached), and ``unknown_usage`` completions whose token counts were unusable (counted
    as 0; the reply is kept and cached).
    """

    requests: int = 0
    cache_hits: int = 0
    http_calls: int = 0
    transport_failures: int = 0
    invalid_outputs: int = 0
    reasks: int = 0
    too_complex: int = 0
    unknown_usage: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    model: str = ""

    @property
    def hit_rate(self) -> float:
        """Share of requests answered entirely from the cache."""
        return self.cache_hits / self.requests if self.requests else 0.0

    @property
    def cost_usd(self) -> float:
        """Estimated price of all tokens (cached included) at the model's listed rate."""
        price_in, price_out = price_for(self.model)
        return (self.prompt_tokens * price_in + self.completion_tokens * price_out) / 1e6

    def as_dict(self) -> dict[str, Any]:
        """Plain values for a table or :func:`recagents.notebook.record`."""
        return {
            "model": self.model,
            "requests": self.requests,
            "cache_hits": self.cache_hits,
            "hit_rate": round(self.hit_rate, 4),
            "http_calls": self.http_calls,
            "transport_failures": self.transport_failures,
            "invalid_outputs": self.invalid_outputs,
            "reasks": self.reasks,
            "too_complex": self.too_complex,
            "unknown_usage": self.unknown_usage,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "wall_s": round(self.wall_s, 3),
            "cost_usd": round(self.cost_usd, 6),
        }


class _LoopThread:
    """A private event loop in a daemon thread.

    Sync callers (and Jupyter, whose own loop is already running) can then run the async
    client without nesting event loops.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise


class _TransportFailure(Exception):
    """A request that failed through all its attempts; carries how many were made."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class _EndpointDown(Exception):
    """The endpoint refused connections through every retry; later requests fail fast."""


#: HTTP statuses that mean the configuration is wrong (key, permission, model or URL).
_CONFIGURATION_STATUSES = frozenset({401, 403, 404})


class EndpointUnreachableError(RuntimeError):
    """No request of a batch got through: the endpoint is down, refuses us or lacks the model.

    Raised by :meth:`LLMClient.map` so that a notebook stops at the model call with the
    reason, instead of analysing a run in which every call failed. Replies that did come
    back before are in the cache, so a rerun resumes.
    """


@dataclass
class _Tries:
    """What the HTTP attempts at one completion met so far (see ``LLMClient._attempt``)."""

    last_error: Exception | None = None
    delay: float | None = None  # a server's Retry-After, if it sent one
    refused: int = 0  # connection errors (not timeouts)
    stop: bool = False  # a status that retrying cannot fix


@dataclass
class _Progress:
    """Totals over the completions of one request so far, re-asks included."""

    tag: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 0
    cached: bool = True
    text: str | None = None
    reasks: int = 0
    usage_unknown: int = 0

    def add(self, reply: dict[str, Any]) -> None:
        """Count one completion (from the cache or the endpoint)."""
        self.usage_unknown += bool(reply.get("usage_unknown"))
        self.prompt_tokens += reply["prompt_tokens"]
        self.completion_tokens += reply["completion_tokens"]
        self.latency_s += reply["latency_s"]
        self.attempts += reply["attempts"]
        self.cached = self.cached and reply["cached"]
        self.text = reply["text"]

    def result(self, ok: bool, **outcome: Any) -> ChatResult:
        """The :class:`ChatResult` so far; ``outcome`` sets data, error, failure or cached."""
        return ChatResult(ok=ok, **{**dataclasses.asdict(self), **outcome})


def _completion(reply: dict[str, Any], *counts: float) -> dict[str, Any]:
    """A completion as ``LLMClient._complete`` returns it.

    ``counts`` are prompt tokens, completion tokens, latency and attempts (0: from the cache).
    """
    names = ("prompt_tokens", "completion_tokens", "latency_s", "attempts")
    return {**reply, "cached": counts[3] == 0, **dict(zip(names, counts, strict=True))}


def _validate(text: str, schema: dict[str, Any]) -> tuple[Any, str | None, bool]:
    """Parse a structured reply and check it against ``schema``.

    Returns:
        ``(data, None, False)``, or ``(None, problem, too_complex)`` where ``too_complex``
        says the reply was outside the parsing bounds (see :func:`parse_json_reply`).
    """
    jsonschema = import_jsonschema()  # here: it takes a while, and plain chat never needs it
    try:
        data = parse_json_reply(text)
        validate_json(data, schema)
    except ReplyTooComplex as error:
        return None, str(error)[:200], True
    except (json.JSONDecodeError, jsonschema.ValidationError) as error:
        problem = error.msg if isinstance(error, json.JSONDecodeError) else error.message
        return None, problem[:200], False
    return data, None, False


def _storable(text: str, schema: dict[str, Any] | None) -> bool:
    """Whether a fresh reply may be cached: not a structured one outside the parsing bounds.

    Why: a cached reply is served again on every rerun, so one that can never be parsed
    would fail the request forever without a call; left out, a rerun asks anew.
    """
    if schema is None:
        return True
    try:
        parse_json_reply(text)
    except ReplyTooComplex:
        return False
    except ValueError:  # not JSON: cached like any invalid reply, and re-asked
        pass
    return True


#: Most characters of a reply outside the parsing bounds that a re-ask quotes back.
REASK_QUOTE_CHARS = 2000


class LLMClient:
    """Cached, retrying, concurrent access to one OpenAI-compatible chat endpoint.

    Args:
        base_url: Endpoint URL; ``None`` uses the embedded local llama.cpp server.
        model: Model name; ``None`` uses the embedded model's alias.
        api_key: Credential; ``None`` reads ``OPENAI_API_KEY`` via the settings.
        config: Settings to use (default: read from the environment now).
        cache: Response cache (default: the settings' cache file); ``False`` disables it.
        replay: A reply bundle to replay with no endpoint (default: ``RECAGENTS_REPLAY``);
            see :mod:`recagents.llm.bundle`. Its model and structured mode become defaults.
        backoff_base_s: First retry delay; doubles per attempt, with full jitter.
        backoff_max_s: Cap on one retry delay (a ``Retry-After`` may ask for more).
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        config: Settings | None = None,
        cache: ResponseCache | Literal[False] | None = None,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 20.0,
        replay: str | os.PathLike[str] | None = None,
    ) -> None:
        self.config = config or settings()  # checked: finite and in range, else ConfigError
        redact_http_logs()  # httpx logs each request's URL, credentials included
        if base_url:
            check_endpoint_url("base_url", base_url)
        if cache is None:
            cache = ResponseCache(self.config.llm_cache_path)
        self.cache: ResponseCache | None = None if cache is False else cache
        self.replay = _start_replay(replay or os.environ.get("RECAGENTS_REPLAY"), self.cache)
        self._explicit_url = base_url or self.config.llm_base_url
        self.local = self._explicit_url is None and self.replay is None
        self._model = model or self.config.llm_model or (self.replay and self.replay.model)
        self._api_key = api_key or self.config.api_key
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        mode = self.config.llm_structured
        if mode == "auto" and self.replay is not None:
            mode = self.replay.structured or mode
        self.structured_mode = (
            ("json_object" if self.local else "json_schema") if mode == "auto" else mode
        )
        self.usage = Usage(model=self.model)
        self._runner: _LoopThread | None = None
        self._async_client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        # ``backend`` masks the credentials an endpoint URL may carry.
        return f"LLMClient(backend={self.backend!r}, model={self.model!r})"

    @property
    def model(self) -> str:
        """The model name sent with each request."""
        if self._model:
            return self._model
        if self.local:
            from recagents.llm.local import MODEL_ALIAS

            return MODEL_ALIAS
        if self.replay is not None:
            models = self.replay.manifest.get("chat_models")
            raise ValueError(
                f"{self.backend} holds several models {models}: set RECAGENTS_LLM_MODEL"
            )
        raise ValueError("RECAGENTS_LLM_MODEL must be set together with RECAGENTS_LLM_BASE_URL")

    @property
    def backend(self) -> str:
        """``local``, ``replay <bundle>``, else the endpoint URL with credentials masked.

        For showing only (messages, reprs, the ``check`` command): user info and key-like
        query parameters read ``***`` (see :func:`recagents.llm.redact.redact_url`).
        """
        if self.replay is not None:
            return f"replay {self.replay.path}"
        return "local" if self.local else redact_url(str(self._explicit_url))

    @property
    def default_concurrency(self) -> int:
        """Requests in flight: the configured number, else the embedded server's slots, else 8.

        The embedded server has one slot unless it runs llama-server.
        """
        if self.config.llm_concurrency:
            return self.config.llm_concurrency
        if self.local:
            from recagents.llm.local import local_slots

            return local_slots()
        return 8

    def base_url(self) -> str:
        """The endpoint URL, starting the embedded server if it is the backend.

        The URL as given, credentials included, for connecting only: show :attr:`backend`
        (or pass this through :func:`recagents.llm.redact.redact_url`) instead.
        """
        if self.replay is not None:
            raise RuntimeError(f"{self.backend}: replay-only mode never contacts an endpoint")
        if self.local:
            from recagents.llm.local import get_local_server

            return get_local_server().base_url
        return str(self._explicit_url)

    def reset_usage(self) -> None:
        """Start the counters afresh (e.g. at the start of one experiment)."""
        self.usage = Usage(model=self.model)

    # ------------------------------------------------------------------ plumbing

    def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        with self._lock:
            if self._runner is None:
                self._runner = _LoopThread()
        return self._runner.run(coro)

    def _client(self, url: str) -> Any:
        """The async OpenAI client for ``url`` (re-made if the URL changed)."""
        from openai import AsyncOpenAI

        url = url.rstrip("/")
        if self._async_client is None or str(self._async_client.base_url).rstrip("/") != url:
            self._async_client = AsyncOpenAI(
                base_url=url,
                # The embedded server needs no key: never hand it the user's real one.
                api_key="not-needed" if self.local else (self._api_key or "not-needed"),
                timeout=self.config.llm_timeout_s,
                max_retries=0,
            )
        return self._async_client

    def _key_request(self, request: ChatRequest, messages: Sequence[dict[str, str]]) -> dict:
        return {
            "kind": "chat",
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "sampling": request.sampling(),
            "schema": request.schema,
            "structured": self.structured_mode if request.schema else None,
            "sample": request.sample,
        }

    async def _cached(self, key: str, state: dict[str, Any]) -> dict[str, Any] | None:
        """The stored reply of ``key`` as a completion (prefetched or looked up), or ``None``."""
        if self.cache is None:
            return None
        hit = state["prefetched"].get(key)
        if hit is None and key not in state["prefetched"]:
            hit = await asyncio.to_thread(self.cache.get, key)
        if hit is None:
            return None
        return _completion(hit.reply, hit.prompt_tokens, hit.completion_tokens, hit.latency_s, 0)

    def _body(self, request: ChatRequest, messages: Sequence[dict[str, str]]) -> dict[str, Any]:
        """The JSON body posted to ``/chat/completions``."""
        body: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        body.update(request.sampling())
        if request.schema is not None:
            body["response_format"] = response_format(request.schema, self.structured_mode)
        return body

    async def _attempt(
        self, state: dict[str, Any], body: dict[str, Any], attempt: int, tries: _Tries
    ) -> tuple[dict[str, Any], int, int] | None:
        """One HTTP attempt: the reply and token counts, or ``None`` with ``tries`` updated.

        Raises:
            _TransportFailure: The embedded server died; retrying it cannot help.
        """
        from openai import APIConnectionError, APIStatusError, APITimeoutError

        try:
            client = self._client(state["url"])
            # Posted as plain JSON: the SDK's typed ``chat.completions.create`` re-walks every
            # message and builds pydantic models of the reply (a third of our CPU per request).
            response = await client.post("/chat/completions", body=body, cast_to=dict)
            return read_completion(response)
        except APIStatusError as error:
            tries.last_error, tries.delay = error, error_retry_after(error)
            if error.status_code != 429 and error.status_code < 500:
                if error.status_code in _CONFIGURATION_STATUSES:
                    state["fatal"] = describe_error(error, self._api_key)
                tries.stop = True  # 400/401/404...: retrying cannot help
        except (APITimeoutError, APIConnectionError) as error:
            tries.last_error, tries.delay = error, None
            tries.refused += not isinstance(error, APITimeoutError)
            dead = self._local_failure()
            if dead:  # retrying a dead embedded server cannot help; the next batch restarts it
                state["down"] = dead
                raise _TransportFailure(dead, attempt) from error
        # e.g. a gateway's HTML page, or a body nested too deep for the SDK's JSON decoder
        except (MalformedReply, ValueError, RecursionError) as error:
            tries.last_error, tries.delay = error, None
        return None

    def _give_up(self, state: dict[str, Any], tries: _Tries, attempts: int) -> _TransportFailure:
        """The failure after the last attempt; marks the endpoint down if it always refused."""
        error = tries.last_error
        message = describe_error(error, self._api_key) if error else "no attempt made"
        # The libraries' texts may embed the request URL: mask it with the endpoint's.
        message = redact_url(f"{message} (endpoint {state['url'] or self.backend})")
        if tries.refused == self.config.llm_max_attempts:
            state["down"] = f"endpoint unreachable: {message}"
        return _TransportFailure(message, attempts)

    async def _complete(
        self,
        request: ChatRequest,
        messages: Sequence[dict[str, str]],
        state: dict[str, Any],
        first_key: str | None = None,
    ) -> dict[str, Any]:
        """One completion through the cache, retrying transport errors; raises on failure.

        Steps: the cache; in replay-only mode, a miss stops here; then up to
        ``llm_max_attempts`` HTTP attempts with capped, jittered backoff; a reply is cached.
        """
        key_request = self._key_request(request, messages)
        key = first_key if first_key and messages is request.messages else request_key(key_request)
        hit = await self._cached(key, state)
        if hit is not None:
            return hit
        if self.replay is not None:
            raise self.replay.miss(key_request, key, tag=request.tag, batch=state.get("desc", ""))
        if state.get("down"):
            raise _EndpointDown(state["down"])
        if not state["url"]:  # the batch was all cached, but a cached reply needs a re-ask
            state["url"] = await asyncio.to_thread(self.base_url)
        body, tries = self._body(request, messages), _Tries()
        for attempt in range(1, self.config.llm_max_attempts + 1):
            started = time.perf_counter()
            self.usage.http_calls += 1
            completion = await self._attempt(state, body, attempt, tries)
            if completion is not None:
                latency = time.perf_counter() - started
                reply, prompt_tokens, completion_tokens = completion
                if self.cache is not None and _storable(reply["text"], request.schema):
                    await asyncio.to_thread(
                        self.cache.put,
                        key,
                        key_request,
                        reply,
                        model=self.model,
                        prompt_tokens=prompt_tokens,
                        completion_tokens=completion_tokens,
                        latency_s=latency,
                    )
                return _completion(reply, prompt_tokens, completion_tokens, latency, attempt)
            if tries.stop:
                break
            if attempt < self.config.llm_max_attempts:
                cap = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
                await asyncio.sleep(max(random.uniform(0, cap), tries.delay or 0.0))
        raise self._give_up(state, tries, attempt)

    def _local_failure(self) -> str | None:
        """Why the embedded server died, when it is the backend and it did; else ``None``."""
        if not self.local:
            return None
        from recagents.llm.local import local_server_failure

        failure = local_server_failure()
        return redact_url(failure) if failure else None

    async def _one(
        self, request: ChatRequest, state: dict[str, Any], key: str | None = None
    ) -> ChatResult:
        """A whole request: completion, then (with a schema) parse, validate and re-ask.

        Each round adds its completion to a :class:`_Progress`; a transport failure, a plain
        reply, a valid reply or the last invalid one ends the request.
        """
        messages, progress = request.messages, _Progress(tag=request.tag)
        for round_ in range(self.config.llm_max_reasks + 1 if request.schema else 1):
            try:
                reply = await self._complete(request, messages, state, key)
            except (_TransportFailure, _EndpointDown) as error:
                progress.attempts += getattr(error, "attempts", 0)
                error_text = redact_url(str(error))
                return progress.result(False, error=error_text, failure="transport", cached=False)
            progress.add(reply)
            if request.schema is None:
                return progress.result(True)
            data, problem, too_complex = _validate(reply["text"], request.schema)
            if problem is None:
                return progress.result(True, data=data)
            self.usage.too_complex += too_complex
            if round_ == self.config.llm_max_reasks:
                return progress.result(False, error=f"invalid output: {problem}", failure="invalid")
            progress.reasks += 1
            quoted = reply["text"][:REASK_QUOTE_CHARS] if too_complex else reply["text"]
            messages = [
                *messages,
                {"role": "assistant", "content": quoted},
                {"role": "user", "content": _reask_message(problem)},
            ]
        raise AssertionError("unreachable")

    def _account(self, results: Iterable[ChatResult], wall_s: float) -> None:
        for result in results:
            self.usage.requests += 1
            self.usage.cache_hits += result.cached and result.ok
            self.usage.transport_failures += result.failure == "transport"
            self.usage.invalid_outputs += result.failure == "invalid"
            self.usage.reasks += result.reasks
            self.usage.unknown_usage += result.usage_unknown
            self.usage.prompt_tokens += result.prompt_tokens
            self.usage.completion_tokens += result.completion_tokens
        self.usage.wall_s += wall_s

    # ------------------------------------------------------------------ public API

    def chat(self, messages: Sequence[dict[str, str]], **sampling: Any) -> ChatResult:
        """Send one chat request (see :class:`ChatRequest` for the sampling options)."""
        return self.map([ChatRequest(messages=messages, **sampling)], progress=False)[0]

    def chat_json(
        self, messages: Sequence[dict[str, str]], schema: dict[str, Any], **sampling: Any
    ) -> ChatResult:
        """Send one request whose reply must be JSON matching ``schema``.

        The backend is asked to constrain its output to the schema; the reply is still
        validated here, re-asked at most ``RECAGENTS_LLM_MAX_REASKS`` times, and otherwise
        returned with ``ok=False, failure="invalid"``.
        """
        return self.map(
            [ChatRequest(messages=messages, schema=schema, **sampling)], progress=False
        )[0]

    def map(
        self,
        requests: Sequence[ChatRequest],
        concurrency: int | None = None,
        progress: bool = True,
        desc: str = "LLM",
        order: Literal["given", "prefix"] | None = None,
        raise_unreachable: bool = True,
    ) -> list[ChatResult]:
        """Run many requests concurrently; results come back in the order given.

        Args:
            requests: The requests.
            concurrency: Requests in flight (default: :attr:`default_concurrency`).
            progress: Show a progress bar.
            desc: Progress-bar label.
            order: Scheduling order. ``prefix`` sends requests that share a prompt prefix
                back to back, which lets a single-slot llama.cpp server reuse its KV cache
                (default for the embedded server); ``given`` keeps the caller's order.
            raise_unreachable: Raise :class:`EndpointUnreachableError` when no request got a
                reply and the endpoint refused connections (or the embedded server died);
                ``False`` returns the counted failures instead.

        Returns:
            One :class:`ChatResult` per request; failures are results, not exceptions.

        Raises:
            EndpointUnreachableError: See ``raise_unreachable``.
        """
        from tqdm.auto import tqdm

        requests = list(requests)
        limit = concurrency or self.default_concurrency
        order = order or ("prefix" if self.local else "given")
        schedule = list(range(len(requests)))
        if order == "prefix":
            schedule.sort(key=lambda i: json.dumps(requests[i].messages, sort_keys=True))
        results: list[ChatResult | None] = [None] * len(requests)
        # Resolved once per batch: a local server that dies mid-batch is restarted by the next
        # batch, which then resumes from the cache, rather than silently in the middle.
        keys = [request_key(self._key_request(r, r.messages)) for r in requests]
        prefetched: dict[str, Any] = self.cache.get_many(keys) if self.cache is not None else {}
        missing = [i for i, key in enumerate(keys) if key not in prefetched]
        if missing and self.replay is not None:  # replay-only: stop before anything is done
            first = requests[missing[0]]
            key_request = self._key_request(first, first.messages)
            raise self.replay.miss(
                key_request, keys[missing[0]], tag=first.tag, batch=desc, missing=len(missing)
            )
        url = self.base_url() if missing else ""
        bar = tqdm(total=len(requests), desc=desc, disable=not progress or len(requests) < 2)
        started = time.perf_counter()

        state: dict[str, Any] = {"url": url, "prefetched": prefetched, "desc": desc}

        async def run_all() -> None:
            semaphore = asyncio.Semaphore(limit)

            async def run_one(index: int) -> None:
                async with semaphore:
                    results[index] = await self._one(requests[index], state, keys[index])
                bar.update(1)

            await asyncio.gather(*(run_one(i) for i in schedule))

        try:
            self._run(run_all())
        finally:
            bar.close()
            done = [r for r in results if r is not None]
            self._account(done, time.perf_counter() - started)
        reason = state.get("down") or state.get("fatal")
        if raise_unreachable and done and reason and not any(r.ok for r in done):
            raise EndpointUnreachableError(
                redact_url(
                    f"no reply from the model at {state['url'] or self.backend}: {reason}. All "
                    f"{len(done)} requests of this batch failed; replies already received are "
                    "cached, so a rerun resumes."
                )
            )
        return done

    def totals(self) -> dict[str, Any]:
        """Totals over everything stored in the cache for this model (all runs)."""
        if self.cache is None:
            return {}
        totals = self.cache.totals(model=self.model)
        return {
            "model": self.model,
            "cached_replies": totals.rows,
            "prompt_tokens": totals.prompt_tokens,
            "completion_tokens": totals.completion_tokens,
            "endpoint_seconds": round(totals.latency_s, 3),
            "cost_usd": round(totals.cost(price_for(self.model)), 6),
        }


def _reask_message(problem: str) -> str:
    return (
        f"That reply could not be used ({problem}). Answer again with only a JSON object "
        "that matches the required schema, and nothing else."
    )


def _start_replay(bundle: Any, cache: ResponseCache | None) -> Any:
    """The :class:`recagents.llm.bundle.Replay` of ``bundle`` (imported into ``cache``), or None."""
    if not bundle:
        return None
    from recagents.llm.bundle import start_replay

    return start_replay(bundle, cache)


_DEFAULT: LLMClient | None = None
_DEFAULT_LOCK = threading.Lock()


def get_client() -> LLMClient:
    """The process-wide client built from the environment (made on first use)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = LLMClient()
        return _DEFAULT


def reset_client() -> None:
    """Forget the process-wide client (e.g. after changing environment variables)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        _DEFAULT = None
