"""The LLM layer: every model call in the project goes through here.

``chat``, ``chat_json`` and ``map`` use one process-wide :class:`LLMClient` built from the
environment (see :mod:`recagents.config`): with nothing set, the embedded SmolLM2-135M behind
a local llama.cpp server; with ``RECAGENTS_LLM_BASE_URL`` and ``RECAGENTS_LLM_MODEL``, any
OpenAI-compatible endpoint; with ``RECAGENTS_REPLAY`` naming a reply bundle, no endpoint at
all (see :mod:`recagents.llm.bundle`). ``embed`` gives cached text embeddings. Importing this
package starts nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recagents.llm.bundle import (
    BundleError,
    ReplayMissError,
    export_bundle,
    import_bundle,
    read_bundle,
)
from recagents.llm.client import (
    ChatRequest,
    ChatResult,
    EndpointUnreachableError,
    LLMClient,
    Usage,
    get_client,
    reset_client,
)
from recagents.llm.embed import Embedder, embed

__all__ = [
    "BundleError",
    "ChatRequest",
    "ChatResult",
    "Embedder",
    "EndpointUnreachableError",
    "LLMClient",
    "ReplayMissError",
    "Usage",
    "chat",
    "chat_json",
    "embed",
    "export_bundle",
    "get_client",
    "import_bundle",
    "map",
    "read_bundle",
    "reset_client",
]


def chat(messages: Sequence[dict[str, str]], **sampling: Any) -> ChatResult:
    """One chat request through the process-wide client (see :meth:`LLMClient.chat`)."""
    return get_client().chat(messages, **sampling)


def chat_json(
    messages: Sequence[dict[str, str]], schema: dict[str, Any], **sampling: Any
) -> ChatResult:
    """One schema-constrained request (see :meth:`LLMClient.chat_json`)."""
    return get_client().chat_json(messages, schema, **sampling)


def map(requests: Sequence[ChatRequest], **options: Any) -> list[ChatResult]:  # noqa: A001
    """Many requests, concurrently, results in order (see :meth:`LLMClient.map`)."""
    return get_client().map(requests, **options)
