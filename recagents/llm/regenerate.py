"""Ask a bundle's requests again, uncached, and count the replies that come back byte-identical.

Why: a published run is its code plus its replies (a reply bundle). Whether the model behind
the run can give those replies again, cold, is a property of the model *and* its server
(greedy decoding on llama.cpp is repeatable only when the floating-point order of each
request's computation does not depend on what else is in flight or cached). This module
measures it: :func:`regenerate` re-sends a seeded sample of a bundle's chat requests through
an :class:`~recagents.llm.client.LLMClient` with no cache and no re-asks, so that each
request gets exactly one completion, and compares each text with the recorded one.

``python -m recagents.llm bundle verify FILE --regenerate N`` runs it against the configured
backend (the embedded model by default); ``bench/cold_repeat.py`` runs it against fresh
embedded servers of several configurations.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recagents.llm.cache import request_key
from recagents.llm.client import ChatRequest, LLMClient

#: Fields of a cached chat request's ``sampling`` that :class:`ChatRequest` takes back.
_SAMPLING_FIELDS = ("temperature", "max_tokens", "seed", "top_p", "stop")


@dataclass
class Regeneration:
    """What re-asking a sample of recorded requests gave.

    Attributes:
        asked: Requests re-sent.
        identical: Replies byte-identical to the recorded ones.
        failed: Requests that got no reply (transport failures), by key.
        differing: ``(key, index of the first differing character)`` per differing reply.
        wall_s: Wall time of the re-asking.
        replies: The text each re-asked request got, by key (``None``: no reply).
    """

    asked: int = 0
    identical: int = 0
    failed: list[str] = field(default_factory=list)
    differing: list[tuple[str, int]] = field(default_factory=list)
    wall_s: float = 0.0
    replies: dict[str, str | None] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        """Share of the re-sent requests whose reply repeated exactly (0 when none was sent)."""
        return self.identical / self.asked if self.asked else 0.0

    def summary(self) -> str:
        """One line: ``23 of 24 replies byte-identical (95.8%); 1 differ, 0 failed; 41.2 s``."""
        return (
            f"{self.identical} of {self.asked} replies byte-identical ({self.rate:.1%}); "
            f"{len(self.differing)} differ, {len(self.failed)} failed; {self.wall_s:.1f} s"
        )


def chat_request(request: Mapping[str, Any]) -> ChatRequest:
    """The :class:`ChatRequest` whose cache key is ``request`` (a cached chat request).

    Raises:
        ValueError: ``request`` is not a chat request.
    """
    if request.get("kind") != "chat":
        raise ValueError(f"not a chat request (kind {request.get('kind')!r})")
    sampling = request.get("sampling") or {}
    options = {name: sampling[name] for name in _SAMPLING_FIELDS if name in sampling}
    if "seed" not in options:
        options["seed"] = None  # the recorded request sent none
    return ChatRequest(
        messages=[dict(m) for m in request["messages"]],
        schema=request.get("schema"),
        sample=int(request.get("sample") or 0),
        **options,
    )


def _first_difference(a: str, b: str) -> int:
    """Index of the first character where ``a`` and ``b`` differ (the shorter's length if none)."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


def sample_chat_entries(
    entries: Sequence[Mapping[str, Any]], n: int, seed: int = 0
) -> list[Mapping[str, Any]]:
    """``n`` chat entries drawn with ``seed`` (all of them if fewer), in the bundle's order.

    Why seeded: two people who re-ask "20 requests of this bundle" re-ask the same 20.
    """
    chats = [e for e in entries if e["request"].get("kind") == "chat"]
    if n >= len(chats):
        return chats
    picked = sorted(random.Random(seed).sample(range(len(chats)), n))
    return [chats[i] for i in picked]


def regenerate(
    entries: Sequence[Mapping[str, Any]],
    client: LLMClient,
    *,
    concurrency: int | None = None,
    progress: bool = False,
) -> Regeneration:
    """Re-send each chat entry's request once, uncached, and compare the reply texts.

    Args:
        entries: Bundle entries (``read_bundle``'s second value, or a sample of it).
        client: The client to ask. Its cache and re-asks are switched off here (a copy with
            ``cache=False``, ``llm_max_reasks=0`` is made), so each request gets exactly one
            fresh completion, like the one recorded under its key.
        concurrency: Requests in flight (default: the client's).
        progress: Show a progress bar.

    Returns:
        The counts; a transport failure is counted, never raised.

    Raises:
        ValueError: ``client`` is in replay-only mode, or would not send an entry's request
            exactly as recorded (another model or structured-output mode).
    """
    if client.replay is not None:
        raise ValueError(f"{client.backend}: replay-only mode cannot ask a model anew")
    chats = [e for e in entries if e["request"].get("kind") == "chat"]
    config = dataclasses.replace(
        client.config, llm_max_reasks=0, llm_structured=client.structured_mode
    )
    fresh = LLMClient(
        base_url=client._explicit_url,  # the same endpoint, credentials kept
        model=client.model,
        api_key=client._api_key,
        config=config,
        cache=False,
    )
    requests = [chat_request(e["request"]) for e in chats]
    for entry, request in zip(chats, requests, strict=True):
        if request_key(fresh._key_request(request, request.messages)) != entry["key"]:
            raise ValueError(
                f"entry {entry['key'][:12]}: this client would not send the recorded request "
                f"(recorded for model {entry['request'].get('model')!r}, structured "
                f"{entry['request'].get('structured')!r}; this client: {fresh.model!r}, "
                f"{fresh.structured_mode!r}); set RECAGENTS_LLM_MODEL / RECAGENTS_LLM_STRUCTURED"
            )
    started = time.perf_counter()
    results = fresh.map(
        requests,
        concurrency=concurrency,
        progress=progress,
        desc="regenerate",
        order="given",
        raise_unreachable=False,
    )
    report = Regeneration(asked=len(chats), wall_s=time.perf_counter() - started)
    for entry, result in zip(chats, results, strict=True):
        recorded = entry["reply"]["text"]
        report.replies[entry["key"]] = result.text
        if result.text is None:
            report.failed.append(entry["key"])
        elif result.text == recorded:
            report.identical += 1
        else:
            report.differing.append((entry["key"], _first_difference(result.text, recorded)))
    return report
