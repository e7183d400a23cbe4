"""The OpenAI wire format, as the client reads and writes it.

Why a module of its own: :mod:`recagents.llm.client` decides *when* to call, retry, re-ask
and cache; this module only knows *what* goes over the wire: the ``response_format`` each
backend accepts, how a chat completion (or what claims to be one) is read, how a
``Retry-After`` header is read, and how an error is described without leaking a key.
Nothing happens at import time.
"""

from __future__ import annotations

import contextlib
import email.utils
import math
import re
import time
from typing import Any

from recagents.llm.schemas import parse_json_bounded

#: Most seconds one ``Retry-After`` may make us wait.
MAX_RETRY_AFTER_S = 60.0


class MalformedReply(Exception):
    """The endpoint answered 200 with something that is not a chat completion."""


#: Largest token count one completion may report; more (or a negative, fractional or
#: non-finite count) is recorded as unknown. No context window comes near it.
MAX_TOKEN_COUNT = 10**9


def _token_count(value: Any) -> int | None:
    """A reported token count as a non-negative int below MAX_TOKEN_COUNT, else ``None``.

    Absent (``None``) is 0, as before: some backends report no usage at all.
    """
    if value is None:
        return 0
    if isinstance(value, str) and value.isascii() and value.isdecimal() and len(value) < 10:
        value = int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_TOKEN_COUNT:
        return value
    return None


def read_completion(response: Any) -> tuple[dict[str, Any], int, int]:
    """Reply text, finish reason and token counts of a chat completion given as JSON.

    A token count that is negative, fractional, non-finite or absurd (see
    :data:`MAX_TOKEN_COUNT`) does not make a paid-for reply unusable: it counts as 0 and the
    reply lists it under ``usage_unknown``.

    Raises:
        MalformedReply: The endpoint answered with something else (e.g. a proxy's page).
    """
    try:
        choices = response["choices"]
        if not isinstance(choices, list):
            raise TypeError("choices is not a list")
        if not choices:
            raise MalformedReply("the completion has no choices")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            shape = "a legacy text completion" if "text" in choice else "no message"
            raise MalformedReply(f"the completion's first choice has {shape}")
        text = message.get("content")
        if not isinstance(text, str):
            raise MalformedReply(f"the completion's message content is {type(text).__name__}")
        reply = {"text": text, "finish_reason": choice.get("finish_reason")}
        usage = response.get("usage") or {}
        counts = {  # a usage that is not an object (e.g. a string) leaves both unknown
            name: _token_count(usage.get(name)) if isinstance(usage, dict) else None
            for name in ("prompt_tokens", "completion_tokens")
        }
        unknown = [name for name, count in counts.items() if count is None]
        if unknown:  # paid for and usable: kept, its count recorded as unknown (0)
            reply["usage_unknown"] = unknown
        return reply, counts["prompt_tokens"] or 0, counts["completion_tokens"] or 0
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as error:
        raise MalformedReply(f"reply is not a chat completion: {str(response)[:80]}") from error


def parse_json_reply(text: str) -> Any:
    """Parse a reply that should be JSON, tolerating a code fence and raw control characters.

    Small models under a llama.cpp grammar sometimes put a raw newline inside a string,
    which strict JSON forbids; the text is still unambiguous, so it is accepted. Parsed
    within the bounds of :func:`recagents.llm.schemas.parse_json_bounded`; the fence is cut
    off with string operations, not a backtracking pattern (``"```"`` and a long run of
    spaces took a regular expression seconds per thousand characters).

    Raises:
        recagents.llm.schemas.ReplyTooComplex: Outside the bounds (too deep, long, big).
        json.JSONDecodeError: Not JSON.
    """
    body = text.strip()
    if len(body) >= 6 and body.startswith("```") and body.endswith("```"):
        body = body[3:-3]
        body = body[4:] if body.startswith("json") else body
    return parse_json_bounded(body.strip(), strict=False)


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


def error_retry_after(error: Exception) -> float | None:
    """The seconds an HTTP error's ``Retry-After`` header asks for, if it has one."""
    response = getattr(error, "response", None)
    return retry_after_seconds(getattr(response, "headers", None) or {})


_KEY_LIKE = re.compile(r"\b(sk|key|token)-[A-Za-z0-9_\-*.]{4,}", re.IGNORECASE)


def describe_error(error: Exception, secret: str | None = None) -> str:
    """One line naming the error class and status, with anything key-like masked."""
    status = getattr(error, "status_code", None)
    message = str(getattr(error, "message", "") or error)
    if secret:
        message = message.replace(secret, "***")
    message = _KEY_LIKE.sub(r"\1-***", message)
    message = (message.splitlines() or [""])[0][:200]
    return f"{type(error).__name__}{f' {status}' if status else ''}: {message}"
