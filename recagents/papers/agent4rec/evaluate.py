"""Agent4Rec's evaluations: the taste probe, the recommenders agents browse, their feedback.

The taste probe (Table 1) asks agents which of their probe items they would watch; the
recommender side ranks the lists agents browse (Table 2), measures them offline, feeds the
simulated feedback back into training (Table 3) and runs the filter-bubble loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import ITEM, USER
from recagents.data.datasets import Dataset, Split
from recagents.llm.client import LLMClient, get_client
from recagents.llm.runlog import RunContext, RunLog
from recagents.papers.agent4rec.agents import Agent
from recagents.papers.agent4rec.config import RECOMMENDERS, Agent4RecConfig
from recagents.papers.agent4rec.loop import simulate
from recagents.papers.agent4rec.prompts import taste_messages, taste_schema

# --------------------------------------------------------------------------- taste probe


def taste_probe_sets(
    split: Split,
    dataset: Dataset,
    ratio: int,
    total: int = 20,
    seed: int = 101,
    users: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Items each agent judges at 1:``ratio``: ``total // (ratio + 1)`` positives, the rest not.

    Positives come from the user's valid and test items (any rating), negatives from items
    the user never rated (as the official code draws them: 10+10, 6+12, 5+15, 2+18), among
    the split's training items. ``users`` restricts the probe to some users (default: all).

    Returns:
        ``[user_id, item_id, label, position]`` with a seeded shuffled order.
    """
    if ratio < 1:
        raise ValueError(f"ratio must be at least 1, got {ratio}")
    rng = np.random.default_rng(seed + ratio)
    held_out = pd.concat([split.valid, split.test]).groupby(USER)[ITEM].agg(list)
    rated = dataset.interactions.groupby(USER)[ITEM].agg(set)
    catalogue = np.array(sorted(set(split.train[ITEM])))
    rows = []
    for user in sorted(users if users is not None else split.train[USER].unique()):
        pool = sorted(set(held_out.get(user, [])))
        n_pos = min(len(pool), total // (ratio + 1))
        if n_pos == 0:
            continue
        positives = list(rng.choice(pool, size=n_pos, replace=False))
        unseen = catalogue[~np.isin(catalogue, list(rated.get(user, set())))]
        negatives = list(rng.choice(unseen, size=ratio * n_pos, replace=False))
        items = positives + negatives
        labels = [1] * n_pos + [0] * len(negatives)
        for position, index in enumerate(rng.permutation(len(items))):
            rows.append((user, items[index], labels[index], position))
    return pd.DataFrame(rows, columns=[USER, ITEM, "label", "position"])


def taste_probe(
    agents: dict[str, Agent],
    probe: pd.DataFrame,
    lines: dict[str, str],
    config: Agent4RecConfig | None = None,
    client: LLMClient | None = None,
    log: RunLog | None = None,
    phase: str = "taste",
) -> pd.DataFrame:
    """Ask each agent, from its persona alone, which of its probe items it would watch.

    Returns:
        ``probe`` with a ``predicted`` column (1 watch, 0 not, NA when the reply failed).
    """
    config = config or Agent4RecConfig()
    ctx = RunContext(client or get_client(), log if log is not None else RunLog(), phase)
    users, messages, sizes = [], [], []
    for user, group in probe.sort_values([USER, "position"]).groupby(USER):
        users.append(user)
        messages.append(
            taste_messages(agents[user], [lines[i] for i in group[ITEM]], config.domain)
        )
        sizes.append(len(group))
    results = ctx.ask(
        "taste", users, messages, [taste_schema(n) for n in sizes],
        temperature=config.temperature, max_tokens=[8 * n + 30 for n in sizes],
        desc=f"taste probe ({phase})",
    )  # fmt: skip
    answers = {}
    for user, result in zip(users, results, strict=True):
        watch = result.data.get("watch") if result.ok else None
        answers[user] = watch if isinstance(watch, list) else None
        if answers[user] is None:
            ctx.log.count("taste_unusable")
    out = probe.sort_values([USER, "position"]).reset_index(drop=True)
    rank_in_user = out.groupby(USER).cumcount()
    out["predicted"] = pd.array(
        [
            int(bool(watch[k])) if (watch := answers[u]) is not None and k < len(watch) else None
            for u, k in zip(out[USER], rank_in_user, strict=True)
        ],
        dtype="Int64",
    )
    return out


# --------------------------------------------------------------------------- recommenders


def exposure_mask(split: Split) -> pd.DataFrame:
    """What a recommender must not show: each user's train and test items.

    Valid items stay eligible: they are the ground truth the paper's simulation uses.
    """
    return pd.concat([split.train, split.test])[[USER, ITEM]].drop_duplicates()


def random_ranking(
    split: Split,
    users: Sequence[str],
    k: int,
    seed: int = 101,
    exclude: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The Random recommender: ``k`` items per user, uniformly among the eligible ones.

    Eligible: the training catalogue minus the user's rows of ``exclude`` (default
    :func:`exposure_mask`, what the simulation must not show: train and test items).
    """
    rng = np.random.default_rng(seed)
    catalogue = np.array(sorted(set(split.train[ITEM])))
    banned = (exposure_mask(split) if exclude is None else exclude).groupby(USER)[ITEM].agg(set)
    frames = []
    for user in users:
        allowed = catalogue[~np.isin(catalogue, list(banned.get(user, set())))]
        picked = rng.choice(allowed, size=min(k, len(allowed)), replace=False)
        frames.append(
            pd.DataFrame(
                {USER: user, ITEM: picked, "score": 0.0, "rank": np.arange(1, len(picked) + 1)}
            )
        )
    return pd.concat(frames, ignore_index=True)


def rank_for_agents(
    name: str,
    split: Split,
    users: Sequence[str],
    k: int,
    train: Any = None,
    seed: int = 101,
) -> tuple[pd.DataFrame, Any]:
    """The ranked list each agent will browse, from one of :data:`RECOMMENDERS`.

    Models are trained (or loaded from the cache) by :func:`recagents.baselines.train_baseline`
    on ``split`` with early stopping on *valid* (the official code selects the checkpoint on
    the test split; that quirk is not reproduced).

    Returns:
        ``(ranked, model)``; ``model`` is ``None`` for Random.
    """
    from recagents import baselines

    if name not in RECOMMENDERS:
        raise ValueError(f"recommender must be one of {list(RECOMMENDERS)}, got {name!r}")
    recbole = RECOMMENDERS[name]
    if recbole is None:
        return random_ranking(split, users, k, seed), None
    model = baselines.train_baseline(recbole, split, train, progress=False)
    return model.top_k(list(users), k, exclude=exposure_mask(split), seed=seed), model


def feedback_interactions(
    exposures: pd.DataFrame, kind: str = "viewed", seed: int = 101
) -> pd.DataFrame:
    """Simulated feedback to add to the training data (page-by-page enhancement).

    ``viewed``: items the agents watched (what the released run fed back); ``unviewed``:
    items shown but not watched; ``random``: as many shown items as were viewed, drawn at
    random. Returns ``[user_id, item_id]``.
    """
    if kind == "viewed":
        chosen = exposures[exposures["watched"]]
    elif kind == "unviewed":
        chosen = exposures[~exposures["watched"]]
    elif kind == "random":
        n = int(exposures["watched"].sum())
        chosen = exposures.sample(n=min(n, len(exposures)), random_state=seed)
    else:
        raise ValueError(f"kind must be 'viewed', 'unviewed' or 'random', got {kind!r}")
    return chosen[[USER, ITEM]].drop_duplicates().reset_index(drop=True)


def with_feedback(split: Split, feedback: pd.DataFrame, label: str) -> Split:
    """``split`` with ``feedback`` appended to train (valid and test unchanged)."""
    added = feedback.assign(**{c: np.nan for c in split.train.columns if c not in feedback})
    train = pd.concat([split.train, added[split.train.columns]], ignore_index=True)
    train = train.drop_duplicates([USER, ITEM], keep="first").reset_index(drop=True)
    return Split(train=train, valid=split.valid, test=split.test, name=f"{split.name}+{label}")


def offline_accuracy(
    model: Any,
    split: Split,
    users: Sequence[str],
    k: int = 20,
    seed: int = 101,
    n_boot: int = 1000,
) -> pd.DataFrame:
    """Recall@k and NDCG@k of a recommender on the test split (the paper's offline check).

    Each user's list excludes their train and valid items; ``model=None`` is Random.

    Returns:
        ``[metric, mean, low, high, n]`` with 95% bootstrap intervals over users.
    """
    from recagents import metrics

    seen = pd.concat([split.train, split.valid])[[USER, ITEM]]
    if model is None:  # the same exclusion as a model's list: the test item stays eligible
        ranked = random_ranking(split, users, k, seed=seed, exclude=seen)
    else:
        ranked = model.top_k(list(users), k, exclude=seen, seed=seed)
    per_user = metrics.ranking_metrics(
        ranked, split.test[[USER, ITEM]], ks=(k,), metrics=("recall", "ndcg")
    )
    return metrics.summarize(per_user, n_boot=n_boot, seed=seed)


def feedback_rounds(
    name: str,
    split: Split,
    agents: dict[str, Agent],
    exposures: pd.DataFrame,
    ranked: pd.DataFrame,
    rounds: int,
    lines: dict[str, str],
    sentences: dict[str, dict[int, str]],
    config: Agent4RecConfig | None = None,
    client: LLMClient | None = None,
    log: RunLog | None = None,
    train: Any = None,
) -> pd.DataFrame:
    """The filter-bubble loop: add what the agents viewed, retrain, recommend, simulate again.

    Args:
        name: The recommender (one of :data:`RECOMMENDERS`).
        split: The original split.
        agents: The agents.
        exposures: Round 0's exposures of this recommender.
        ranked: Round 0's lists.
        rounds: Retraining rounds after round 0.
        lines: Item text by id.
        sentences: Trait sentences.
        config: Settings.
        client: LLM client.
        log: Where calls are counted.
        train: Training settings of the recommender.

    Returns:
        Every round's lists, ``[user_id, item_id, score, rank, round]``.
    """
    config = config or Agent4RecConfig()
    users = sorted(ranked[USER].unique())
    recommended = [ranked.assign(round=0)]
    current, shown = split, exposures
    for round_index in range(1, rounds + 1):
        extra = feedback_interactions(shown, "viewed", seed=config.seed)
        current = with_feedback(current, extra, f"bubble{round_index}")
        lists, _ = rank_for_agents(name, current, users, config.list_length, train, config.seed)
        recommended.append(lists.assign(round=round_index))
        if round_index < rounds:
            shown, _ = simulate(
                agents, lists, lines, sentences, f"{name} round {round_index}", config, client, log
            )
    return pd.concat(recommended, ignore_index=True)
