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
import contextlib
import email.utils
import json
import math
import random
import re
import threading
import time
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from recagents.config import Settings, settings
from recagents.llm.cache import ResponseCache, price_for, request_key

_T = TypeVar("_T")

#: Most seconds one ``Retry-After`` may make us wait.
MAX_RETRY_AFTER_S = 60.0

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


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
    tag: str = ""


@dataclass
class Usage:
    """Counters since the client was made (or :meth:`LLMClient.reset_usage`)."""

    requests: int = 0
    cache_hits: int = 0
    http_calls: int = 0
    transport_failures: int = 0
    invalid_outputs: int = 0
    reasks: int = 0
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


class _MalformedReply(Exception):
    """The endpoint answered 200 with something that is not a chat completion."""


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


def _read_completion(response: Any) -> tuple[dict[str, Any], int, int]:
    """Reply text, finish reason and token counts of a chat completion given as JSON.

    Raises:
        _MalformedReply: The endpoint answered with something else (e.g. a proxy's page).
    """
    try:
        choices = response["choices"]
        if not isinstance(choices, list):
            raise TypeError("choices is not a list")
        if not choices:
            raise _MalformedReply("the completion has no choices")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            shape = "a legacy text completion" if "text" in choice else "no message"
            raise _MalformedReply(f"the completion's first choice has {shape}")
        text = message.get("content")
        if not isinstance(text, str):
            raise _MalformedReply(f"the completion's message content is {type(text).__name__}")
        usage = response.get("usage") or {}
        reply = {"text": text, "finish_reason": choice.get("finish_reason")}
        return reply, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as error:
        raise _MalformedReply(f"reply is not a chat completion: {str(response)[:80]}") from error


def parse_json_reply(text: str) -> Any:
    """Parse a reply that should be JSON, tolerating a code fence and raw control characters.

    Small models under a llama.cpp grammar sometimes put a raw newline inside a string,
    which strict JSON forbids; the text is still unambiguous, so it is accepted.
    """
    match = _FENCE.match(text)
    return json.loads(match.group(1) if match else text, strict=False)


def response_format(schema: dict[str, Any], mode: str) -> dict[str, Any]:
    """Translate a JSON schema into the ``response_format`` a backend accepts.

    llama-cpp-python's server takes ``{"type": "json_object", "schema": ...}`` and rejects
    ``json_schema``; OpenAI and vLLM take ``{"type": "json_schema", "json_schema": ...}``.
    """
    if mode == "json_object":
        return {"type": "json_object", "schema": _clamp_max_length(schema)}
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    raise ValueError(f"unknown structured-output mode {mode!r}")


#: Longest string cap sent to a llama.cpp grammar. Measured: llama-cpp-python 0.3.36's server
#: answers a string ``maxLength`` up to 1,000 but drops the connection at 1,100 and above.
GRAMMAR_MAX_LENGTH = 1000


def _clamp_max_length(schema: Any) -> Any:
    """A copy of ``schema`` whose string ``maxLength`` caps are at most GRAMMAR_MAX_LENGTH.

    Only what is sent to a llama.cpp server is clamped; replies are still validated against
    the caller's schema, which the clamped one can only tighten.
    """
    if isinstance(schema, dict):
        clamped = {key: _clamp_max_length(value) for key, value in schema.items()}
        if isinstance(clamped.get("maxLength"), int):
            clamped["maxLength"] = min(clamped["maxLength"], GRAMMAR_MAX_LENGTH)
        return clamped
    if isinstance(schema, list):
        return [_clamp_max_length(value) for value in schema]
    return schema


def retry_after_seconds(headers: Any, now: float | None = None) -> float | None:
    """Seconds a server asked us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` is either a number of seconds or an HTTP date (RFC 9110, section
    10.2.3); both are read, the date with the standard library's RFC 5322 date parser,
    as the openai SDK does. The result is clamped to ``[0, MAX_RETRY_AFTER_S]``.

    Args:
        headers: The response headers (any mapping with case-insensitive ``get``).
        now: The current POSIX time (for tests); default ``time.time()``.
    """
    if not hasattr(headers, "get"):
        return None
    seconds: float | None = None
    milliseconds = headers.get("retry-after-ms")
    value = headers.get("retry-after")
    with contextlib.suppress(TypeError, ValueError):
        if milliseconds is not None:
            seconds = float(milliseconds) / 1000.0
    if seconds is None and value is not None:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            with contextlib.suppress(TypeError, ValueError, IndexError, OverflowError):
                when = email.utils.parsedate_to_datetime(str(value))
                seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _retry_after(error: Exception) -> float | None:
    response = getattr(error, "response", None)
    return retry_after_seconds(getattr(response, "headers", None) or {})


_KEY_LIKE = re.compile(r"\b(sk|key|token)-[A-Za-z0-9_\-*.]{4,}", re.IGNORECASE)


def _describe(error: Exception, secret: str | None = None) -> str:
    """One line naming the error class and status, with anything key-like masked."""
    status = getattr(error, "status_code", None)
    message = str(getattr(error, "message", "") or error)
    if secret:
        message = message.replace(secret, "***")
    message = _KEY_LIKE.sub(r"\1-***", message)
    message = (message.splitlines() or [""])[0][:200]
    return f"{type(error).__name__}{f' {status}' if status else ''}: {message}"


class LLMClient:
    """Cached, retrying, concurrent access to one OpenAI-compatible chat endpoint.

    Args:
        base_url: Endpoint URL; ``None`` uses the embedded local llama.cpp server.
        model: Model name; ``None`` uses the embedded model's alias.
        api_key: Credential; ``None`` reads ``OPENAI_API_KEY`` via the settings.
        config: Settings to use (default: read from the environment now).
        cache: Response cache (default: the settings' cache file); ``False`` disables it.
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
    ) -> None:
        self.config = config or settings()
        self._explicit_url = base_url or self.config.llm_base_url
        self.local = self._explicit_url is None
        self._model = model or self.config.llm_model
        self._api_key = api_key or self.config.api_key
        if cache is None:
            cache = ResponseCache(self.config.llm_cache_path)
        self.cache: ResponseCache | None = None if cache is False else cache
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        mode = self.config.llm_structured
        self.structured_mode = (
            ("json_object" if self.local else "json_schema") if mode == "auto" else mode
        )
        self.usage = Usage(model=self.model)
        self._runner: _LoopThread | None = None
        self._async_client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LLMClient(backend={self.backend!r}, model={self.model!r})"

    @property
    def model(self) -> str:
        """The model name sent with each request."""
        if self._model:
            return self._model
        if self.local:
            from recagents.llm.local import MODEL_ALIAS

            return MODEL_ALIAS
        raise ValueError("RECAGENTS_LLM_MODEL must be set together with RECAGENTS_LLM_BASE_URL")

    @property
    def backend(self) -> str:
        """``local`` for the embedded server, else the endpoint URL."""
        return "local" if self.local else str(self._explicit_url)

    @property
    def default_concurrency(self) -> int:
        """Requests in flight: 1 against the single-slot local server, else 8 (or configured)."""
        return self.config.llm_concurrency or (1 if self.local else 8)

    def base_url(self) -> str:
        """The endpoint URL, starting the embedded server if it is the backend."""
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

    async def _complete(
        self,
        request: ChatRequest,
        messages: Sequence[dict[str, str]],
        state: dict[str, Any],
        first_key: str | None = None,
    ) -> dict[str, Any]:
        """One completion through the cache, retrying transport errors; raises on failure."""
        key_request = self._key_request(request, messages)
        key = first_key if first_key and messages is request.messages else request_key(key_request)
        if self.cache is not None:
            hit = state["prefetched"].get(key)
            if hit is None and key not in state["prefetched"]:
                hit = await asyncio.to_thread(self.cache.get, key)
            if hit is not None:
                return {
                    **hit.reply,
                    "cached": True,
                    "prompt_tokens": hit.prompt_tokens,
                    "completion_tokens": hit.completion_tokens,
                    "latency_s": hit.latency_s,
                    "attempts": 0,
                }
        if state.get("down"):
            raise _EndpointDown(state["down"])
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            **request.sampling(),
        }
        if request.schema is not None:
            kwargs["response_format"] = response_format(request.schema, self.structured_mode)
        from openai import APIConnectionError, APIStatusError, APITimeoutError

        last_error: Exception | None = None
        refused = 0
        for attempt in range(1, self.config.llm_max_attempts + 1):
            started = time.perf_counter()
            self.usage.http_calls += 1
            try:
                client = self._client(state["url"])
                # The SDK's typed ``chat.completions.create`` re-walks every message through
                # its TypedDict transform and builds pydantic models of the reply (a third of
                # the client's CPU per request); the body is plain JSON already, so it is
                # posted as is and the reply read as plain JSON.
                response = await client.post("/chat/completions", body=kwargs, cast_to=dict)
                reply, prompt_tokens, completion_tokens = _read_completion(response)
            except APIStatusError as error:
                last_error = error
                if error.status_code != 429 and error.status_code < 500:
                    if error.status_code in _CONFIGURATION_STATUSES:
                        state["fatal"] = _describe(error, self._api_key)
                    break  # 400/401/404...: retrying cannot help
                delay = _retry_after(error)
            except (APITimeoutError, APIConnectionError) as error:
                last_error = error
                delay = None
                refused += not isinstance(error, APITimeoutError)
                dead = self._local_failure()
                if dead:  # retrying a dead embedded server cannot help; the next batch restarts it
                    state["down"] = dead
                    raise _TransportFailure(dead, attempt) from error
            except (_MalformedReply, ValueError) as error:  # e.g. a gateway's HTML page
                last_error = error
                delay = None
            else:
                latency = time.perf_counter() - started
                if self.cache is not None:
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
                return {
                    **reply,
                    "cached": False,
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "latency_s": latency,
                    "attempts": attempt,
                }
            if attempt < self.config.llm_max_attempts:
                backoff = random.uniform(
                    0, min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
                )
                await asyncio.sleep(max(backoff, delay or 0.0))
        message = _describe(last_error, self._api_key) if last_error else "no attempt made"
        message = f"{message} (endpoint {state['url'] or self.backend})"
        if refused == self.config.llm_max_attempts:
            state["down"] = f"endpoint unreachable: {message}"
        raise _TransportFailure(message, attempt)

    def _local_failure(self) -> str | None:
        """Why the embedded server died, when it is the backend and it did; else ``None``."""
        if not self.local:
            return None
        from recagents.llm.local import local_server_failure

        return local_server_failure()

    async def _one(
        self, request: ChatRequest, state: dict[str, Any], key: str | None = None
    ) -> ChatResult:
        """A whole request: completion, then (with a schema) parse, validate and re-ask."""
        messages = request.messages
        totals = {"prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0, "attempts": 0}
        cached, text, reasks = True, None, 0
        for round_ in range(self.config.llm_max_reasks + 1 if request.schema else 1):
            try:
                reply = await self._complete(request, messages, state, key)
            except (_TransportFailure, _EndpointDown) as error:
                totals["attempts"] += getattr(error, "attempts", 0)
                return ChatResult(
                    ok=False,
                    text=text,
                    error=str(error),
                    failure="transport",
                    cached=False,
                    reasks=reasks,
                    tag=request.tag,
                    **totals,
                )
            for name in totals:
                totals[name] += reply[name]
            cached = cached and reply["cached"]
            text = reply["text"]
            if request.schema is None:
                return ChatResult(ok=True, text=text, cached=cached, tag=request.tag, **totals)
            import jsonschema  # imported here: it takes seconds, and plain chat never needs it

            try:
                data = parse_json_reply(text)
                jsonschema.validate(data, request.schema)
            except (json.JSONDecodeError, jsonschema.ValidationError) as error:
                problem = (error.msg if isinstance(error, json.JSONDecodeError) else error.message)[
                    :200
                ]
                if round_ == self.config.llm_max_reasks:
                    return ChatResult(
                        ok=False,
                        text=text,
                        error=f"invalid output: {problem}",
                        failure="invalid",
                        cached=cached,
                        reasks=reasks,
                        tag=request.tag,
                        **totals,
                    )
                reasks += 1
                messages = [
                    *messages,
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": _reask_message(problem)},
                ]
                continue
            return ChatResult(
                ok=True,
                text=text,
                data=data,
                cached=cached,
                reasks=reasks,
                tag=request.tag,
                **totals,
            )
        raise AssertionError("unreachable")

    def _account(self, results: Iterable[ChatResult], wall_s: float) -> None:
        for result in results:
            self.usage.requests += 1
            self.usage.cache_hits += result.cached and result.ok
            self.usage.transport_failures += result.failure == "transport"
            self.usage.invalid_outputs += result.failure == "invalid"
            self.usage.reasks += result.reasks
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
        url = self.base_url() if len(prefetched) < len(set(keys)) else ""
        bar = tqdm(total=len(requests), desc=desc, disable=not progress or len(requests) < 2)
        started = time.perf_counter()

        state: dict[str, Any] = {"url": url, "prefetched": prefetched}

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
                f"no reply from the model at {state['url'] or self.backend}: {reason}. All "
                f"{len(done)} requests of this batch failed; replies already received are "
                "cached, so a rerun resumes."
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
