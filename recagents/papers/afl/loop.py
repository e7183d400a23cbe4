"""AFL's feedback loop: the recommendation agent proposes, the user agent accepts or rejects.

:func:`feedback_loop` runs every sample's dialogue, batched by round so independent
dialogues' calls go out together; every call is accounted in a
:class:`~recagents.llm.runlog.RunLog`, and an unusable reply ends its dialogue (counted,
never retried forever).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from recagents.columns import ITEM, LABEL, USER
from recagents.data import POSITION
from recagents.llm.client import ChatResult, LLMClient
from recagents.llm.runlog import RunLog, ask_each
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

__all__ = ["feedback_loop"]


# --------------------------------------------------------------------------- the loop


def _present(value: Any) -> bool:
    """Whether a rounds-frame cell holds a value (``None`` and ``NaN`` do not)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _memories(rows: list[dict[str, Any]], titles: dict[str, str]) -> list[RoundMemory]:
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


def _ask(
    client: LLMClient,
    log: RunLog,
    phase: str,
    kind: str,
    users: Sequence[str],
    messages: Sequence[list[dict[str, str]]],
    schema: dict[str, Any],
    config: AFLConfig,
    desc: str,
) -> list[ChatResult]:
    """One structured request per user, run concurrently and accounted in the log."""
    return ask_each(
        client,
        log,
        phase,
        kind,
        users,
        messages,
        schema,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        desc=desc,
    )


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

    Round *r*: every open dialogue's recommendation agent proposes (requests run
    concurrently); then, unless the limit is 1 (the single recommendation agent), its user
    agent decides. A dialogue ends when the user agent accepts, at the round limit, or when a
    reply is unusable after the client's bounded re-asks (counted, never retried forever);
    a failed recommendation keeps the previous round's proposal as the prediction.

    Taught in: notebook 03, section 3 "The loop (Table 4, and the round-limit curve)".

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
    open_samples = list(samples)
    rec_schema = recommend_schema(config.n_candidates, config)
    user_schema = decision_schema(config)
    for round_number in range(1, limit + 1):
        if not open_samples:
            break
        texts = {s.user: [titles[i] for i in s.candidates] for s in open_samples}
        rec_messages = [
            recommend_messages(
                [titles[i] for i in s.history],
                texts[s.user],
                titles[s.prior],
                _memories(rounds[s.user], titles),
                config,
            )
            for s in open_samples
        ]
        results = _ask(
            client, log, phase, "rec", [s.user for s in open_samples], rec_messages, rec_schema,
            config, f"{phase} round {round_number}: recommend",
        )  # fmt: skip
        proposals = []
        for sample, messages, result in zip(open_samples, rec_messages, results, strict=True):
            index, reason = (
                parse_recommendation(result.data, texts[sample.user], config.faithful_parsing)
                if result.ok
                else (None, None)
            )
            row = {
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
            if sample.user in keep:
                row["rec_prompt"] = messages[-1]["content"]
                row["rec_reply"] = result.text
            rounds[sample.user].append(row)
            if index is None:
                row["stop"] = "rec_failed"
            elif limit == 1:
                row["stop"] = "limit"
            else:
                proposals.append((sample, row))
        if not proposals:
            open_samples = []
            break
        user_messages = [
            user_loop_messages(
                [titles[i] for i in s.history],
                texts[s.user],
                titles[row[ITEM]],
                row["rec_reason"] or "",
                titles[s.prior],
                [titles[i] for i in s.focus],
                s.scores.get(row[ITEM]),
                _memories(rounds[s.user][:-1], titles),
                config,
            )
            for s, row in proposals
        ]
        results = _ask(
            client, log, phase, "user", [s.user for s, _ in proposals], user_messages,
            user_schema, config, f"{phase} round {round_number}: user decides",
        )  # fmt: skip
        still_open = []
        for (sample, row), messages, result in zip(proposals, user_messages, results, strict=True):
            accepted, reason = parse_decision(result.data) if result.ok else (None, None)
            row["accepted"], row["user_reason"], row["user_ok"] = (
                accepted,
                reason,
                accepted is not None,
            )
            if sample.user in keep:
                row["user_prompt"] = messages[-1]["content"]
                row["user_reply"] = result.text
            if accepted is None:
                row["stop"] = "user_failed"
            elif accepted:
                row["stop"] = "accepted"
            elif round_number == limit:
                row["stop"] = "limit"
            else:
                still_open.append(sample)
        open_samples = still_open
    columns = [USER, ROUND, ITEM, POSITION, LABEL, "rec_reason", "rec_ok", "accepted"]
    columns += ["user_reason", "user_ok", "stop"]
    frame = pd.DataFrame([row for s in samples for row in rounds[s.user]])
    if frame.empty:
        return pd.DataFrame(columns=columns)
    return frame
