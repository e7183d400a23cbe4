"""AFL's feedback loop: the recommendation agent proposes, the user agent accepts or rejects.

:func:`feedback_loop` runs every sample's dialogue, batched by round so independent
dialogues' calls go out together; every call is accounted in a
:class:`~recagents.llm.runlog.RunLog`, and an unusable reply ends its dialogue (counted,
never retried forever). A round is two steps, each callable by hand: :func:`propose` (the
recommendation agent), then :func:`user_verdicts` (the user agent; its verdict is the
memory both agents read next round), with :func:`awaiting_verdict` between them.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

import pandas as pd

from recagents.columns import ITEM, LABEL, USER
from recagents.data.datasets import POSITION
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunContext, RunLog
from recagents.papers.afl.config import ROUND, AFLConfig
from recagents.papers.afl.prompts import (
    RoundMemory,
    decision_schema,
    parse_decision,
    parse_recommendation,
    recommend_messages,
    recommend_schema,
    user_loop_messages,
)
from recagents.papers.afl.samples import Sample

# --------------------------------------------------------------------------- the loop


def _present(value: Any) -> bool:
    """Whether a rounds-frame cell holds a value (``None`` and ``NaN`` do not)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def memories(rows: list[dict[str, Any]], titles: dict[str, str]) -> list[RoundMemory]:
    """The finished rounds of one dialogue as both agents remember them."""
    return [
        RoundMemory(
            round=row[ROUND],
            item=titles[row[ITEM]],
            rec_reason=row["rec_reason"] if _present(row["rec_reason"]) else "",
            user_reason=row["user_reason"] if _present(row["user_reason"]) else None,
            accepted=bool(row["accepted"]),
        )
        for row in rows
        if _present(row[ITEM]) and _present(row["accepted"])
    ]


def _round_row(sample: Sample, round_number: int, index: int | None, reason: str | None) -> dict:
    """One round of one dialogue as proposed (the user's verdict still empty)."""
    return {
        USER: sample.user,
        ROUND: round_number,
        ITEM: None if index is None else sample.candidates[index],
        POSITION: index,
        LABEL: None if index is None else int(sample.candidates[index] == sample.target),
        "rec_reason": reason,
        "rec_ok": index is not None,
        "accepted": None,
        "user_reason": None,
        "user_ok": None,
        "stop": None,
    }


def propose(
    ctx: RunContext,
    samples: Sequence[Sample],
    rounds: dict[str, list[dict[str, Any]]],
    titles: dict[str, str],
    config: AFLConfig,
    round_number: int,
    keep: Collection[str] = (),
) -> list[dict[str, Any]]:
    """Step 1 of a round: each open dialogue's recommendation agent proposes one candidate.

    The agent sees the history, the candidates, the tool's pick and the earlier rounds of
    its dialogue (``rounds``, as :func:`memories` remembers them); the requests run as one
    batch, accounted in ``ctx`` as kind ``rec``.

    Returns:
        One new row per sample, in order (not yet added to ``rounds``); a reply that names
        no candidate leaves ``item_id`` and ``position`` empty and ``rec_ok`` false. For
        users in ``keep``, ``rec_prompt`` and ``rec_reply`` hold the exchange.
    """
    texts = [[titles[i] for i in s.candidates] for s in samples]
    messages = [
        recommend_messages(
            [titles[i] for i in s.history],
            shown,
            titles[s.prior],
            memories(rounds[s.user], titles),
            config,
        )
        for s, shown in zip(samples, texts, strict=True)
    ]
    results = ctx.ask(
        "rec", [s.user for s in samples], messages, recommend_schema(config.n_candidates, config),
        temperature=config.temperature, max_tokens=config.max_tokens,
        desc=f"{ctx.phase} round {round_number}: recommend",
    )  # fmt: skip
    rows = []
    for sample, shown, asked, result in zip(samples, texts, messages, results, strict=True):
        index, reason = (
            parse_recommendation(result.data, shown, config.faithful_parsing)
            if result.ok
            else (None, None)
        )
        row = _round_row(sample, round_number, index, reason)
        if sample.user in keep:
            row["rec_prompt"] = asked[-1]["content"]
            row["rec_reply"] = result.text
        rows.append(row)
    return rows


def awaiting_verdict(
    samples: Sequence[Sample], rows: Sequence[dict[str, Any]], limit: int
) -> list[tuple[Sample, dict[str, Any]]]:
    """Between the steps: end the dialogues that cannot go on, keep those awaiting a verdict.

    A failed proposal ends its dialogue (``rec_failed``, the previous proposal stays the
    prediction); with a limit of 1 (the single recommendation agent) every proposal is final.
    """
    waiting = []
    for sample, row in zip(samples, rows, strict=True):
        if row[POSITION] is None:
            row["stop"] = "rec_failed"
        elif limit == 1:
            row["stop"] = "limit"
        else:
            waiting.append((sample, row))
    return waiting


def user_verdicts(
    ctx: RunContext,
    proposals: Sequence[tuple[Sample, dict[str, Any]]],
    rounds: dict[str, list[dict[str, Any]]],
    titles: dict[str, str],
    config: AFLConfig,
    round_number: int,
    limit: int,
    keep: Collection[str] = (),
) -> list[Sample]:
    """Step 2 of a round: each user agent accepts or rejects the proposal it was made.

    The user agent sees the history, the candidates, the proposal and its reason, the tool's
    hint or score and the earlier rounds (``rounds`` already holds this round's row, last);
    the requests run as one batch, accounted in ``ctx`` as kind ``user``. The verdict is
    written into each proposal's row: the memory both agents read in the next round.

    Returns:
        The samples whose dialogue goes on (rejected before the round limit).
    """
    messages = [
        user_loop_messages(
            [titles[i] for i in s.history],
            [titles[i] for i in s.candidates],
            titles[row[ITEM]],
            row["rec_reason"] or "",
            titles[s.prior],
            [titles[i] for i in s.focus],
            s.scores.get(row[ITEM]),
            memories(rounds[s.user][:-1], titles),
            config,
        )
        for s, row in proposals
    ]
    results = ctx.ask(
        "user", [s.user for s, _ in proposals], messages, decision_schema(config),
        temperature=config.temperature, max_tokens=config.max_tokens,
        desc=f"{ctx.phase} round {round_number}: user decides",
    )  # fmt: skip
    still_open = []
    for (sample, row), asked, result in zip(proposals, messages, results, strict=True):
        accepted, reason = parse_decision(result.data) if result.ok else (None, None)
        row["accepted"], row["user_reason"], row["user_ok"] = accepted, reason, accepted is not None
        if sample.user in keep:
            row["user_prompt"] = asked[-1]["content"]
            row["user_reply"] = result.text
        if accepted is None:
            row["stop"] = "user_failed"
        elif accepted:
            row["stop"] = "accepted"
        elif round_number == limit:
            row["stop"] = "limit"
        else:
            still_open.append(sample)
    return still_open


def feedback_loop(
    samples: Sequence[Sample],
    titles: dict[str, str],
    config: AFLConfig,
    client: LLMClient,
    log: RunLog,
    max_rounds: int | None = None,
    phase: str = "afl",
    keep_prompts: Sequence[str] = (),
) -> pd.DataFrame:
    """Run the recommendation / user agent dialogue for every sample, batched by round.

    Round *r*: every open dialogue's recommendation agent proposes (:func:`propose`, the
    requests run concurrently); then, unless the limit is 1 (the single recommendation
    agent), its user agent decides (:func:`user_verdicts`). A dialogue ends when the user
    agent accepts, at the round limit, or when a reply is unusable after the client's bounded
    re-asks (counted, never retried forever); a failed recommendation keeps the previous
    round's proposal as the prediction.

    Args:
        samples: The tasks.
        titles: Item id → the text shown in prompts.
        config: Prompts and options.
        client: The LLM client.
        log: Receives one row per call (``phase``, kind ``rec`` or ``user``).
        max_rounds: Round limit (default ``config.max_rounds``).
        phase: Label of these calls in the log and the cost table.
        keep_prompts: Users whose prompts and replies are kept for a teaching trace.

    Returns:
        One row per round held: ``[user_id, round, item_id, position, label, rec_reason,
        rec_ok, accepted, user_reason, user_ok, stop]``; ``stop`` is set on a dialogue's last
        row (one of :data:`STOPS`). Kept prompts are in ``rec_prompt`` / ``user_prompt``.
    """
    limit = config.max_rounds if max_rounds is None else max_rounds
    if limit < 1:
        raise ValueError(f"max_rounds must be at least 1, got {limit}")
    keep = set(keep_prompts)
    rounds: dict[str, list[dict[str, Any]]] = {s.user: [] for s in samples}
    if len(rounds) != len(samples):
        raise ValueError("feedback_loop: a user appears in more than one sample")
    ctx = RunContext(client, log, phase)
    open_samples = list(samples)
    for round_number in range(1, limit + 1):
        if not open_samples:
            break
        rows = propose(ctx, open_samples, rounds, titles, config, round_number, keep)
        for sample, row in zip(open_samples, rows, strict=True):
            rounds[sample.user].append(row)
        proposals = awaiting_verdict(open_samples, rows, limit)
        if not proposals:
            break
        open_samples = user_verdicts(
            ctx, proposals, rounds, titles, config, round_number, limit, keep
        )
    frame = pd.DataFrame([row for s in samples for row in rounds[s.user]])
    if frame.empty:
        columns = [USER, ROUND, ITEM, POSITION, LABEL, "rec_reason", "rec_ok", "accepted"]
        return pd.DataFrame(columns=[*columns, "user_reason", "user_ok", "stop"])
    return frame
