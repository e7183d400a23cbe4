"""AFL's user-simulation protocol: the data, and the user agents' like / dislike judgements.

A held-out window of 10 items per user gives the positives; step 1 is one loop dialogue per
user, which the AFL user agent remembers; step 2 asks the single user agent and the AFL user
agent whether they like each item of the 1:1, 1:3 and 1:9 sets.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from recagents.columns import ITEM, LABEL, USER
from recagents.data.datasets import POSITION, Dataset, Split, chronological_order, leave_one_out
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunContext, RunLog
from recagents.papers.afl.config import AGENT, RATIO, AFLConfig, ratio_name
from recagents.papers.afl.loop import memories
from recagents.papers.afl.prompts import (
    RoundMemory,
    decision_schema,
    judge_messages,
    parse_decision,
)
from recagents.papers.afl.samples import Sample, make_samples, recent_histories


def user_sim_split(dataset: Dataset | pd.DataFrame, window: int = 10) -> tuple[Split, pd.DataFrame]:
    """The user-simulation data: each user's last ``window`` items held out.

    The rest (``init``) is split leave-one-out, so its last item is step 1's target and the
    tool model trained on this split never sees the held-out window (whose items become the
    positives of the simulation sets).

    Returns:
        ``(split of init, window)``; ``window`` is ``[user_id, item_id]`` in time order.
        Users with fewer than ``window + 3`` interactions are left out.
    """
    frame = dataset.interactions if isinstance(dataset, Dataset) else dataset
    ordered = chronological_order(frame)
    from_end = ordered.groupby(USER, sort=False).cumcount(ascending=False)
    counts = ordered.groupby(USER, sort=False)[ITEM].transform("size")
    eligible = counts >= window + 3
    held = ordered[eligible & (from_end < window)]
    init = ordered[eligible & (from_end >= window)]
    split = leave_one_out(init)
    split = Split(split.train, split.valid, split.test, name=f"afl-sim-w{window}")
    return split, held[[USER, ITEM]].reset_index(drop=True)


def _draw(rng: np.random.Generator, pool: np.ndarray, excluded: set[str], n: int) -> list[str]:
    allowed = np.array([item for item in pool if item not in excluded])
    if len(allowed) < n:
        raise ValueError(f"only {len(allowed)} items are left to draw {n} negatives from")
    return rng.choice(allowed, size=n, replace=False).tolist()


@dataclass(frozen=True)
class UserSimSets:
    """The user-simulation protocol's data.

    Attributes:
        step1: Per user, the loop sample whose dialogue the AFL user agent remembers
            (history = init[:-1], target = init[-1], candidates outside the user's list).
        judged: ``[user_id, ratio, item_id, label]``: the items each user agent judges.
    """

    step1: list[Sample]
    judged: pd.DataFrame


def user_sim_sets(
    split: Split,
    window: pd.DataFrame,
    step1_scores: pd.DataFrame | None,
    users: Sequence[str],
    config: AFLConfig,
) -> UserSimSets:
    """Draw step 1's candidates and the judged sets of every ratio, seeded by ``config.seed``.

    Step 1: the target (init's last item) and ``n_candidates - 1`` random items the user
    never interacted with (window included). Step 2, per ratio: the window's first *p*
    items as positives and random items outside the user's list and outside step 1's
    candidates as negatives (afresh per ratio, or nested with ``config.nest_negatives``).

    Args:
        split: From :func:`user_sim_split`.
        window: From :func:`user_sim_split`.
        step1_scores: The tool's score of each step-1 candidate, ``[user_id, item_id,
            score]`` (computed by the caller with :func:`tool_scores`), or ``None`` to draw
            the candidates only (to be scored); then every score is 0, so the prior and the
            focus list are just the first displayed candidates.
        users: The simulated users.
        config: Sizes, ratios and the seed.
    """
    everything = pd.concat([split.train, split.valid, split.test, window], ignore_index=True)
    pool = np.array(sorted(everything[ITEM].astype(str).unique()))
    seen = everything.groupby(USER)[ITEM].agg(set)
    held = window.groupby(USER, sort=False)[ITEM].agg(list)
    histories = recent_histories(split.history("test"), users, config.history_length)
    target_of = split.test.set_index(USER)[ITEM]
    rng = np.random.default_rng(config.seed)
    candidate_rows, judged_rows = [], []
    for user in sorted(users):
        target = target_of[user]
        negatives = _draw(rng, pool, seen[user], config.n_candidates - 1)
        items = [target, *negatives]
        order = rng.permutation(len(items))
        for position, index in enumerate(order):
            candidate_rows.append((user, items[index], int(index == 0), position))
        excluded = seen[user] | set(items)
        nested = None
        for ratio in config.ratios:
            n_pos = config.positives_for(ratio)
            n_neg = config.n_candidates - n_pos
            if config.nest_negatives:
                if nested is None:
                    most = max(config.n_candidates - config.positives_for(r) for r in config.ratios)
                    nested = _draw(rng, pool, excluded, most)
                drawn = nested[:n_neg]
            else:
                drawn = _draw(rng, pool, excluded, n_neg)
            for item in held[user][:n_pos]:
                judged_rows.append((user, ratio_name(ratio), item, 1))
            for item in drawn:
                judged_rows.append((user, ratio_name(ratio), item, 0))
    candidates = pd.DataFrame(candidate_rows, columns=[USER, ITEM, LABEL, POSITION])
    if step1_scores is not None and len(step1_scores):
        scored = candidates.merge(step1_scores[[USER, ITEM, "score"]], on=[USER, ITEM], how="left")
    else:
        scored = candidates.assign(score=0.0)
    step1 = make_samples(scored, histories, config.focus_size)
    judged = pd.DataFrame(judged_rows, columns=[USER, RATIO, ITEM, LABEL])
    return UserSimSets(step1=step1, judged=judged)


def step1_candidates(sets_without_scores: UserSimSets) -> pd.DataFrame:
    """Step 1's candidates as ``[user_id, item_id]``, to be scored by the tool model."""
    rows = [(s.user, item) for s in sets_without_scores.step1 for item in s.candidates]
    return pd.DataFrame(rows, columns=[USER, ITEM])


# --------------------------------------------------------------------------- user simulation


def dialogue_memory(rounds: pd.DataFrame, titles: dict[str, str]) -> dict[str, list[RoundMemory]]:
    """Each user's finished rounds of a dialogue, as the AFL user agent remembers them."""
    memory: dict[str, list[RoundMemory]] = {}
    for user, group in rounds.groupby(USER, sort=False):
        memory[str(user)] = memories(group.to_dict("records"), titles)
    return memory


def judge_history(sample: Sample, config: AFLConfig) -> tuple[str, ...]:
    """The history both simulated users judge with: init's last items, step 1's target too.

    The step 1 dialogue happened before the held-out window, so init ends with its target.
    """
    return (*sample.history, sample.target)[-config.history_length :]


def simulate_users(
    sets: UserSimSets,
    judged_scores: pd.DataFrame,
    step1_rounds: pd.DataFrame,
    titles: dict[str, str],
    config: AFLConfig,
    client: LLMClient,
    log: RunLog,
    agents: Sequence[str] = ("User Agent", "AFL"),
) -> pd.DataFrame:
    """Every user agent judges every item of its sets: like it or not.

    ``User Agent`` sees the history, the item and the tool's score; ``AFL`` also sees step
    1's candidates and dialogue. Each distinct (user, item) prompt is asked once, even when
    the item is in several ratios' sets. An unusable reply is ``predicted = None`` (counted,
    see :func:`simulation_metrics`).

    Args:
        sets: From :func:`user_sim_sets`.
        judged_scores: The tool's score of every judged item, ``[user_id, item_id, score]``.
        step1_rounds: :func:`feedback_loop`'s rounds on ``sets.step1``.
        titles: Item id → text.
        config: Prompts.
        client: The LLM client.
        log: Receives the calls (phase ``user-sim``, kind = the agent).
        agents: Which agents judge.

    Returns:
        ``sets.judged`` with ``agent``, ``score``, ``predicted`` and ``reason``, one row per
        (agent, user, ratio, item).
    """
    unknown = set(agents) - {"User Agent", "AFL"}
    if unknown:
        raise ValueError(f"unknown agents {sorted(unknown)}; use 'User Agent' and/or 'AFL'")
    distinct = _distinct_judged(sets, judged_scores)
    memory = dialogue_memory(step1_rounds, titles)
    ctx = RunContext(client, log, "user-sim")
    parts = [judge_items(ctx, agent, sets, distinct, memory, titles, config) for agent in agents]
    answers = pd.concat(parts, ignore_index=True)
    return sets.judged.merge(answers, on=[USER, ITEM], how="left")[
        [AGENT, USER, RATIO, ITEM, LABEL, "score", "predicted", "reason"]
    ]


def _distinct_judged(sets: UserSimSets, judged_scores: pd.DataFrame) -> pd.DataFrame:
    """Each distinct judged ``[user_id, item_id]`` with its tool ``score``, checked complete."""
    distinct = (
        sets.judged[[USER, ITEM]]
        .drop_duplicates()
        .merge(
            judged_scores[[USER, ITEM, "score"]].drop_duplicates([USER, ITEM]),
            on=[USER, ITEM],
            how="left",
            indicator=True,
        )
    )
    if (distinct.pop("_merge") != "both").any():
        raise ValueError("judged_scores has no row for some judged item; score them all first")
    return distinct


def judge_items(
    ctx: RunContext,
    agent: str,
    sets: UserSimSets,
    distinct: pd.DataFrame,
    memory: dict[str, list[RoundMemory]],
    titles: dict[str, str],
    config: AFLConfig,
) -> pd.DataFrame:
    """One simulated user agent says, for each distinct judged item, whether it likes it.

    ``User Agent`` sees the history, the item and the tool's score; ``AFL`` also sees step
    1's candidates and its dialogue (``memory``, from :func:`dialogue_memory`). The requests
    run as one batch, accounted in ``ctx`` with the agent as the call kind.

    Returns:
        ``distinct`` (``[user_id, item_id, score]``) with ``agent``, ``predicted`` (``None``
        for an unusable reply) and ``reason``.
    """
    step1 = {s.user: s for s in sets.step1}
    users, messages = [], []
    for user, item, score in distinct[[USER, ITEM, "score"]].itertuples(index=False):
        sample = step1[user]
        dialogue = None
        if agent == "AFL":
            dialogue = ([titles[i] for i in sample.candidates], memory.get(user, []))
        users.append(user)
        messages.append(
            judge_messages(
                [titles[i] for i in judge_history(sample, config)],
                titles[item],
                float(score),
                dialogue,
                config,
            )
        )
    results = ctx.ask(
        agent, users, messages, decision_schema(config), temperature=config.temperature,
        max_tokens=config.max_tokens, desc=f"user simulation: {agent}",
    )  # fmt: skip
    decided = [parse_decision(r.data) if r.ok else (None, None) for r in results]
    return distinct.assign(
        **{AGENT: agent},
        predicted=[d[0] for d in decided],
        reason=[d[1] for d in decided],
    )
