"""One call log, one run context and one ask helper for every paper's agents.

Why: every experiment is many batches of model calls, and every notebook reports what they
cost per phase. :class:`RunLog` keeps one row per call (phase, kind, outcome, tokens,
endpoint time), one row per teaching event (a memory before and after, a message) and a
count of every unusable reply by problem; :class:`RunContext` is what every step of a paper
passes down (the client, the log, the phase its calls are accounted under); :func:`ask` runs
one batch through the client and accounts for it; :func:`cost_table` turns the calls into
the per-phase table every notebook shows (notebook 01, section "What it cost", introduces
it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from recagents.llm.cache import PRICES
from recagents.llm.client import ChatRequest, ChatResult, LLMClient

#: The columns of :meth:`RunLog.calls_frame`.
CALL_COLUMNS = (
    "phase",
    "kind",
    "ok",
    "failure",
    "cached",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "reasks",
)


@dataclass
class RunLog:
    """Everything a run did: one row per model call, one per memory event, counted problems.

    ``calls`` feed :func:`cost_table`; ``events`` are the teaching trace (every forward
    choice, and every memory before and after each reflection); ``problems`` counts the
    replies a paper could not use, by what was wrong (e.g. ``page_unusable``: Agent4Rec's
    invalid-output rate), beyond the failures the client itself records per call.
    """

    calls: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    problems: dict[str, int] = field(default_factory=dict)

    def add_calls(self, phase: str, kind: str, results: Sequence[ChatResult]) -> None:
        """Account for a batch of results of one phase and call kind."""
        for result in results:
            self.calls.append(
                {
                    "phase": phase,
                    "kind": kind,
                    "ok": result.ok,
                    "failure": result.failure,
                    "cached": result.cached,
                    "prompt_tokens": result.prompt_tokens,
                    "completion_tokens": result.completion_tokens,
                    "latency_s": result.latency_s,
                    "reasks": result.reasks,
                }
            )

    def count(self, problem: str, n: int = 1) -> None:
        """Count ``n`` occurrences of a problem (e.g. an unusable page reply)."""
        self.problems[problem] = self.problems.get(problem, 0) + n

    def extend(self, other: RunLog) -> None:
        """Append another log's rows and add its problem counts to this one's."""
        self.calls.extend(other.calls)
        self.events.extend(other.events)
        for problem, n in other.problems.items():
            self.count(problem, n)

    def calls_frame(self) -> pd.DataFrame:
        """The calls as a frame."""
        return pd.DataFrame(self.calls, columns=list(CALL_COLUMNS))

    def events_frame(self) -> pd.DataFrame:
        """The events as a frame, in the order they happened."""
        return pd.DataFrame(self.events)


def ask(
    client: LLMClient,
    log: RunLog,
    phase: str,
    kind: str,
    requests: Sequence[ChatRequest],
    desc: str | None = None,
    progress: bool = True,
) -> list[ChatResult]:
    """Run one batch of requests concurrently and account for it in ``log``.

    Args:
        client: The LLM client.
        log: Where the calls are recorded.
        phase: The experiment phase (a row of :func:`cost_table`).
        kind: The kind of call (e.g. ``forward``, ``user_reflection``).
        requests: The requests.
        desc: Progress-bar label (default: ``kind``).
        progress: Show a progress bar.

    Returns:
        One result per request, in order.
    """
    results = client.map(requests, progress=progress, desc=desc or kind.replace("_", " "))
    log.add_calls(phase, kind, results)
    return results


@dataclass(frozen=True)
class RunContext:
    """What every step of a paper's agents passes down: the client, the log and the phase.

    One small value instead of the same three arguments on every call: a step asks through
    :meth:`ask`, which accounts the batch in ``log`` under ``phase``; :meth:`at` derives the
    context of another phase (the log stays shared, so one run keeps one log).

    Attributes:
        client: The LLM client.
        log: Where every call (and every counted problem) is recorded.
        phase: The experiment phase the calls are accounted under (a row of
            :func:`cost_table`).
    """

    client: LLMClient
    log: RunLog
    phase: str

    def at(self, phase: str) -> RunContext:
        """The same client and log, accounting under ``phase``."""
        return replace(self, phase=phase)

    def ask(
        self,
        kind: str,
        tags: Sequence[str],
        messages: Sequence[list[dict[str, str]]],
        schema: dict[str, Any] | Sequence[dict[str, Any]],
        *,
        temperature: float,
        max_tokens: int | Sequence[int],
        seed: int | None = 0,
        desc: str | None = None,
        progress: bool = True,
    ) -> list[ChatResult]:
        """One structured request per agent (``tags[i]`` asks ``messages[i]``), run as one batch.

        The request every paper's agents send: the same sampling for the whole batch, one
        schema and one token limit for all (or one per request, e.g. for lists of different
        lengths), the agent's id as the request's tag; accounted under :attr:`phase`.

        Returns:
            One result per request, in order (empty when there is nothing to ask).
        """
        schemas = [schema] * len(messages) if isinstance(schema, dict) else list(schema)
        limits = [max_tokens] * len(messages) if isinstance(max_tokens, int) else list(max_tokens)
        requests = [
            ChatRequest(
                messages=m, schema=s, temperature=temperature, max_tokens=limit, seed=seed, tag=tag
            )
            for tag, m, s, limit in zip(tags, messages, schemas, limits, strict=True)
        ]
        if not requests:
            return []
        return ask(self.client, self.log, self.phase, kind, requests, desc=desc, progress=progress)


def cost_table(calls: pd.DataFrame, price_model: str = "gpt-3.5-turbo") -> pd.DataFrame:
    """Calls, failures, tokens and endpoint time per phase, plus an estimated price.

    Token counts and endpoint seconds are those stored with each reply in the cache, so a
    warm rerun reports what the cold run spent. The price is what the same tokens would
    cost at ``price_model``'s listed per-token rate (the paper used gpt-3.5-turbo).
    """
    if calls.empty:
        return pd.DataFrame()
    price_in, price_out = PRICES[price_model]
    table = calls.groupby("phase", sort=False).agg(
        calls=("ok", "size"),
        failed=("ok", lambda s: int((~s).sum())),
        reasks=("reasks", "sum"),
        from_cache=("cached", "sum"),
        prompt_tokens=("prompt_tokens", "sum"),
        completion_tokens=("completion_tokens", "sum"),
        endpoint_s=("latency_s", "sum"),
    )
    table.loc["total"] = table.sum()
    table["endpoint_s"] = table["endpoint_s"].round(1)
    table[f"usd_at_{price_model}"] = (
        (table["prompt_tokens"] * price_in + table["completion_tokens"] * price_out) / 1e6
    ).round(4)
    counts = ("calls", "failed", "reasks", "from_cache", "prompt_tokens", "completion_tokens")
    return table.astype({column: int for column in counts})
