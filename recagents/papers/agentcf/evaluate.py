"""AgentCF's evaluation: the pairwise re-test and position-bias probe, and the rankers.

:func:`pairwise_probe` asks the trained user agents their training pairs again, in both
orders; :func:`rank_candidates` ranks each user's 1 + 9 candidates with one variant (B, B+H,
B+R, LLMRank-style or history-user), under the repaired and the official code's scorer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import ITEM, USER
from recagents.data.datasets import POSITION
from recagents.llm.client import ChatResult, LLMClient, get_client
from recagents.llm.runlog import RunContext, RunLog
from recagents.papers.agentcf.agents import AgentState, pair_texts, verbalised_history
from recagents.papers.agentcf.config import NEGATIVE, POSITIVE, STEP, VARIANTS, AgentCFConfig
from recagents.papers.agentcf.prompts import (
    choice_schema,
    forward_messages,
    llmrank_messages,
    parse_choice,
    ranking_messages,
)
from recagents.papers.agentcf.subsets import Subset
from recagents.protocol import parse_ranking, ranking_frame, ranking_schema

# --------------------------------------------------------------------------- probes


def pairwise_probe(
    state: AgentState,
    pairs: pd.DataFrame,
    titles: dict[str, str],
    config: AgentCFConfig | None = None,
    orders: Sequence[str] = ("neg_first", "pos_first"),
    client: LLMClient | None = None,
    log: RunLog | None = None,
    phase: str = "probe",
) -> pd.DataFrame:
    """Ask the (trained) user agents the training pairs again, in each order given.

    The paper's re-test accuracy is the ``neg_first`` rows; the two orders side by side are
    the position-bias probe (an unbiased agent answers the same pair the same way).

    Returns:
        ``[user_id, step, positive, negative, order, ok, chose_first, correct]``.
    """
    config = config or AgentCFConfig()
    ctx = RunContext(client or get_client(), log if log is not None else RunLog(), phase)
    rows, messages = [], []
    for row in pairs.to_dict("records"):
        for order in orders:
            positive_first = order == "pos_first"
            first, second, preferred = pair_texts(
                state, titles, row[POSITIVE], row[NEGATIVE], positive_first
            )
            rows.append(
                {
                    USER: row[USER],
                    STEP: row[STEP],
                    POSITIVE: row[POSITIVE],
                    NEGATIVE: row[NEGATIVE],
                    "order": order,
                    "preferred": preferred,
                }
            )
            messages.append(
                forward_messages(state.user_memory[row[USER]], first, second, config.domain)
            )
    results = ctx.ask(
        "probe", [row[USER] for row in rows], messages, choice_schema(),
        temperature=config.eval_temperature, max_tokens=220, desc="pairwise probe",
    )  # fmt: skip
    for row, result in zip(rows, results, strict=True):
        chosen = parse_choice(result.data) if result.ok else None
        row["ok"] = chosen is not None
        row["chose_first"] = chosen == 1 if chosen is not None else None
        row["correct"] = chosen == row.pop("preferred") if chosen is not None else None
    return pd.DataFrame(rows)


def probe_summary(probe: pd.DataFrame) -> pd.DataFrame:
    """Per order: pairs asked, pairs answered, accuracy and the share of first-option picks."""
    answered = probe[probe["ok"]]
    table = probe.groupby("order").agg(pairs=("ok", "size"), answered=("ok", "sum"))
    table["accuracy"] = answered.groupby("order")["correct"].mean().astype(float)
    table["chose_first"] = answered.groupby("order")["chose_first"].mean().astype(float)
    return table.reset_index()


def order_consistency(probe: pd.DataFrame) -> float:
    """Share of pairs answered in both orders for which the agent chose the same item.

    An agent that reads the items, not their positions, scores 1; one that always picks
    the first option scores 0.
    """
    answered = probe[probe["ok"]]
    wide = answered.pivot_table(
        index=[USER, STEP], columns="order", values="correct", aggfunc="first"
    ).dropna()
    if wide.shape[1] != 2 or wide.empty:
        return float("nan")
    return float((wide.iloc[:, 0] == wide.iloc[:, 1]).mean())


# --------------------------------------------------------------------------- ranking


def retrieve_version(
    versions: Sequence[str], query: str, embed: Any | None = None
) -> tuple[str, bool]:
    """B+R: the past self-description nearest to ``query`` by cosine similarity.

    The pool is the long-term versions without the first (initial) and the last (current),
    as in the paper. When that pool is empty the official code crashes; we fall back on the
    initial description and say so (the second value is ``True`` then).
    """
    pool = list(versions[1:-1])
    if not pool:
        return versions[0], True
    if embed is None:
        from recagents.llm.embed import embed as embed_texts

        embed = embed_texts
    vectors = embed([query, *pool])
    similarity = vectors[1:] @ vectors[0]
    return pool[int(np.argmax(similarity))], False


@dataclass
class RankOutcome:
    """The rankings of one variant, under both scorers, and how the replies parsed.

    Attributes:
        ranked: ``[user_id, item_id, score, rank]`` with the repaired scorer.
        faithful: The same with the official code's scorer.
        parses: ``[user_id, status, missing, duplicates, out_of_range, fallback]``.
    """

    ranked: pd.DataFrame
    faithful: pd.DataFrame
    parses: pd.DataFrame

    def repair_counts(self) -> dict[str, int]:
        """How many replies were complete, repaired or failed, and what was repaired."""
        counts = self.parses["status"].value_counts()
        return {
            "users": len(self.parses),
            "complete": int(counts.get("complete", 0)),
            "repaired": int(counts.get("repaired", 0)),
            "failed": int(counts.get("failed", 0)),
            "missing_candidates": int(self.parses["missing"].sum()),
            "duplicates": int(self.parses["duplicates"].sum()),
            "retrieval_fallbacks": int(self.parses["fallback"].sum()),
        }


def rank_candidates(
    state: AgentState,
    subset: Subset,
    candidates: pd.DataFrame,
    titles: dict[str, str],
    variant: str = "B",
    config: AgentCFConfig | None = None,
    client: LLMClient | None = None,
    log: RunLog | None = None,
    phase: str | None = None,
    embed: Any | None = None,
) -> RankOutcome:
    """Rank every user's candidates with one variant.

    Variants (:data:`VARIANTS`): ``B`` (the self-description), ``B+H`` (plus the last
    ``history_len`` history titles), ``B+R`` (plus a retrieved past self-description),
    ``LLMRank`` (no agents: history titles and candidate titles only) and ``history-user``
    (the user is their verbalised history; candidates carry the item memories, the "without
    user agent" ranking). Candidates are shown in ``position`` order as
    "k. title: description".

    Args:
        state: Agent memories to rank with.
        subset: The subset (for histories).
        candidates: ``[user_id, item_id, label, position]``.
        titles: Item titles by id.
        variant: Which ranker.
        config: Settings.
        client: LLM client.
        log: Where to account the calls.
        phase: Log label (default ``rank:<variant>``).
        embed: Embedding function for B+R (default: :func:`recagents.llm.embed.embed`).
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    config = config or AgentCFConfig()
    ctx = RunContext(
        client or get_client(), log if log is not None else RunLog(), phase or f"rank:{variant}"
    )
    test_slot = subset.test_slot()
    users, item_lists, messages, fallbacks = [], [], [], []
    for user, group in candidates.sort_values([USER, POSITION]).groupby(USER, sort=True):
        items = group[ITEM].tolist()
        history = subset.history(user, test_slot)[-config.history_len :]
        prompt, fallback = ranking_prompt(
            state, user, items, history, titles, variant, config, embed
        )
        users.append(user)
        item_lists.append(items)
        messages.append(prompt)
        fallbacks.append(fallback)
    results = ctx.ask(
        "rank", users, messages, [ranking_schema(len(items)) for items in item_lists],
        temperature=config.eval_temperature,
        max_tokens=[8 * len(items) + 40 for items in item_lists], desc=f"rank {variant}",
    )  # fmt: skip
    return _rank_outcome(users, item_lists, results, fallbacks, config.seed)


def ranking_prompt(
    state: AgentState,
    user: str,
    items: Sequence[str],
    history: Sequence[str],
    titles: dict[str, str],
    variant: str,
    config: AgentCFConfig,
    embed: Any | None = None,
) -> tuple[list[dict[str, str]], bool]:
    """What one ranker asks about one user's candidates (``items``, in display order).

    ``history`` is the user's last items before the test slot (at most ``history_len``);
    the variants are those of :func:`rank_candidates`.

    Returns:
        ``(messages, fallback)``: ``fallback`` is ``True`` when B+R had no past version to
        retrieve and fell back on the initial one.
    """
    if variant == "LLMRank":
        names = [titles[i] for i in history], [titles[i] for i in items]
        return llmrank_messages(*names, config.domain), False
    lines = [f"{titles[i]}: {_item_text(state, i)}" for i in items]
    memory = state.user_memory.get(user, "")
    shown_history, retrieved, fallback = None, None, False
    if variant == "history-user":
        memory = verbalised_history([titles[i] for i in history], config.domain)
    if variant == "B+H":
        shown_history = [
            f"{titles[i]}: {_item_text(state, i)}" if config.history_as_memories else titles[i]
            for i in history
        ]
    if variant == "B+R":
        retrieved, fallback = retrieve_version(state.user_versions[user], "\n".join(lines), embed)
    return ranking_messages(memory, lines, config.domain, shown_history, retrieved), fallback


def _rank_outcome(
    users: Sequence[str],
    item_lists: Sequence[Sequence[str]],
    results: Sequence[ChatResult],
    fallbacks: Sequence[bool],
    seed: int,
) -> RankOutcome:
    """Parse every user's reply into rankings under both scorers, and how each parsed."""
    ranked, faithful, parses = [], [], []
    for index, (user, items, result) in enumerate(zip(users, item_lists, results, strict=True)):
        parse = parse_ranking(result.data if result.ok else None, len(items))
        ranked.append(ranking_frame(user, items, parse, "repaired", seed=seed + index))
        faithful.append(ranking_frame(user, items, parse, "faithful"))
        parses.append(
            {
                USER: user,
                "status": parse.status,
                "missing": len(parse.missing),
                "duplicates": parse.duplicates,
                "out_of_range": parse.out_of_range,
                "fallback": fallbacks[index],
                "failure": result.failure,
            }
        )
    return RankOutcome(
        ranked=pd.concat(ranked, ignore_index=True),
        faithful=pd.concat(faithful, ignore_index=True),
        parses=pd.DataFrame(parses),
    )


def _item_text(state: AgentState, item: str) -> str:
    memory = state.item_memory.get(item)
    return memory[-1] if memory else ""
