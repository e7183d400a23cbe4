"""The paper's released CDs data as AgentCF runs it, and memory quality apart from the ranker.

On a released CDs subset the paper's subsets *are* the releases: :func:`draw_released` draws
a run's users uniformly from a release, windows as released, and :func:`released_candidates`
builds the paper's own test lists from the release's pre-drawn ``.random`` lists.

Memory quality, why: AgentCF's ranking quality mixes two things, the memories training wrote
and the model that reads them at test time. The authors released the memories gpt-3.5 wrote
on their CDs subsets (:mod:`recagents.data.released`), so we can hold the ranker fixed (our
model, variant ``B``) and swap only the memories: untrained (the first descriptions), the
authors' trained ones, and ours. A difference between the rows is then the memories' doing,
not the ranker's.

The release holds every user agent's final memory (dense and sparse) but the item agents'
description versions only for a sample (:func:`released_item_ids`; about 400 MB of the rest
are on GitHub without checksums in our manifest), so two designs are offered:

- ``items=False``: authors' *user* memories, every item at its first description, for as many
  of the 100 users as wanted (the user memories' effect alone);
- ``items=True`` on :func:`fully_released_users`: the users whose every item has released
  versions, with negatives drawn from those users' items, so every candidate shows the
  authors' description (users *and* items, the mirror's sample of users).
"""

from __future__ import annotations

import hashlib
import html
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents import metrics
from recagents.columns import ITEM, LABEL, USER
from recagents.data import released, releases
from recagents.data.atomic import DatasetError
from recagents.data.datasets import POSITION, Dataset, Split
from recagents.llm.runlog import RunLog
from recagents.papers.agentcf.agents import AgentState, initial_state
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.agentcf.evaluate import rank_candidates
from recagents.papers.agentcf.reading import paired_interval
from recagents.papers.agentcf.subsets import Subset, make_subset

Variant = Literal["dense", "sparse"]
#: The name of the untrained memories, the row every other is compared with.
UNTRAINED = "untrained"


def released_subset(variant: Variant = "dense") -> tuple[Dataset, Subset]:
    """AgentCF's released CDs subset as a :class:`Subset`, every user, the release's split.

    Each released user has exactly 8 items, so :func:`make_subset` with every user keeps the
    release's windows; the test items are checked equal to the released test file.

    Raises:
        DatasetError: The windows disagree with the released split.
    """
    dataset, split = released.load_cds(variant)
    subset = make_subset(dataset, variant, None, 5, seed=0)
    ours = subset.split.test.sort_values(USER)[[USER, ITEM]].reset_index(drop=True)
    theirs = split.test.sort_values(USER)[[USER, ITEM]].reset_index(drop=True)
    if not ours.equals(theirs):
        raise DatasetError(f"cds-{variant}: our windows' test items differ from the release's")
    return dataset, subset


def restrict_subset(subset: Subset, users: Sequence[str]) -> Subset:
    """The same subset with only ``users`` (their windows unchanged).

    The split's name carries a digest of the users, so saved candidate lists of different
    user sets never collide.

    Raises:
        ValueError: A user not in the subset, or no users.
    """
    wanted = sorted(set(users))
    unknown = sorted(set(wanted) - set(subset.users))
    if not wanted or unknown:
        raise ValueError(f"users not in the {subset.name} subset: {unknown or 'none given'}")
    digest = hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:10]
    keep = set(wanted)

    def only(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[frame[USER].isin(keep)].reset_index(drop=True)

    split = Split(
        train=only(subset.split.train),
        valid=only(subset.split.valid),
        test=only(subset.split.test),
        name=f"{subset.split.name}-u{len(wanted)}-{digest}",
    )
    return Subset(name=subset.name, windows=only(subset.windows), split=split)


def draw_released(variant: Variant, n_users: int | None, seed: int = 0) -> tuple[Dataset, Subset]:
    """``n_users`` users drawn uniformly (seeded) from a CDs release, windows as released.

    The paper's dense and sparse subsets are the two releases, so a smaller run draws from
    the release instead of re-making a subset (a "dense" draw of the dense release would be
    a dense subset of a dense subset). ``None`` or 100 or more: every released user.

    Raises:
        ValueError: ``n_users`` below 1.
    """
    dataset, subset = released_subset(variant)
    if n_users is not None and n_users < 1:
        raise ValueError(f"n_users must be positive, got {n_users}")
    if n_users is None or n_users >= len(subset.users):
        return dataset, subset
    rng = np.random.default_rng(seed)
    chosen = rng.choice(subset.users, n_users, replace=False)
    return dataset, restrict_subset(subset, [str(user) for user in chosen])


def released_random_lists(variant: Variant = "dense") -> dict[str, list[str]]:
    """Each user's pre-drawn list of 100 items (``<subset>.random``), as released.

    Raises:
        DatasetError: A line that is not ``user<TAB>items``.
    """
    name = f"CDs-100-user-{variant}"
    path = f"agentcf/dataset/{name}/{name}.random"
    file = releases.fetch(released.AGENTCF_RELEASE, [path], progress=False) / path
    lists = {}
    for line, text in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        user, sep, items = text.strip().partition("\t")
        if not sep or not items.split():
            raise DatasetError(f"{file}: line {line} is not 'user<TAB>items'")
        lists[user] = items.split()
    return lists


def released_candidates(
    subset: Subset, variant: Variant, n_negatives: int = 9, seed: int = 2020
) -> pd.DataFrame:
    """The paper's test candidates: the test item and the first 9 of the user's ``.random``.

    As the official code builds them: the test item is removed from the user's pre-drawn
    list, the first ``n_negatives`` ids are kept (never filtered against the history: a
    negative may be an item the user had), the test item is added and the 10 are shuffled.
    The official shuffle draws from RecBole's global generator; ours is seeded per user
    (``seed`` and the user id), so a user's list never depends on who else was drawn.

    Returns:
        ``[user_id, item_id, label, position]``, users sorted, rows in display order.

    Raises:
        DatasetError: A user without a released list, or one whose first ids repeat.
    """
    lists = released_random_lists(variant)
    truth = subset.split.test.set_index(USER)[ITEM]
    frames = []
    for user in subset.users:
        if user not in lists:
            raise DatasetError(f"cds-{variant}: user {user} has no pre-drawn candidate list")
        negatives = [item for item in lists[user] if item != truth[user]][:n_negatives]
        if len(set(negatives)) != n_negatives:
            raise DatasetError(
                f"cds-{variant}: user {user}'s list has fewer than {n_negatives} distinct ids"
            )
        items = np.array([*negatives, truth[user]])
        labels = np.r_[np.zeros(n_negatives, int), 1]
        order = np.random.default_rng([seed, zlib.crc32(user.encode())]).permutation(len(items))
        frames.append(
            pd.DataFrame(
                {USER: user, ITEM: items[order], LABEL: labels[order], POSITION: range(len(items))}
            )
        )
    return pd.concat(frames, ignore_index=True)


def released_item_ids(variant: Variant = "dense") -> list[str]:
    """Items whose released description versions our manifest lists (a sample)."""
    prefix = f"agentcf/dataset/CDs-100-user-{variant}/saved/1000/item_embeddings_"
    paths = [f.path for f in releases.manifest(released.AGENTCF_RELEASE).files]
    ids = [p[len(prefix) : -len(".npy")] for p in paths if p.startswith(prefix)]
    return sorted(i for i in ids if i != "[PAD]")


def fully_released_users(subset: Subset, variant: Variant = "dense") -> list[str]:
    """Users of ``subset`` every one of whose window items has released versions."""
    have = set(released_item_ids(variant))
    items = subset.windows.groupby(USER)[ITEM].apply(set)
    return sorted(user for user, its in items.items() if its <= have)


@dataclass
class ReleasedAgents:
    """The authors' trained agents as an :class:`AgentState`, with what came from where.

    Attributes:
        state: Released user memories (long-term memory: the first description, then the
            released one) and, where released, item description versions; the rest untrained.
        users_released: Users whose memory is the authors'.
        users_untrained: Users of the subset the release has no memory for.
        items_released: Items whose versions are the authors'.
        items_untrained: How many items of the state keep their first description.
    """

    state: AgentState
    users_released: list[str]
    users_untrained: list[str]
    items_released: list[str] = field(default_factory=list)
    items_untrained: int = 0

    def counts(self) -> dict[str, int]:
        """How many users and items are the authors' and how many are untrained."""
        return {
            "users_released": len(self.users_released),
            "users_untrained": len(self.users_untrained),
            "items_released": len(self.items_released),
            "items_untrained": self.items_untrained,
        }


def released_state(
    dataset: Dataset, subset: Subset, variant: Variant = "dense", items: bool = True
) -> ReleasedAgents:
    """The authors' gpt-3.5 agents for the users (and, with ``items``, items) of ``subset``."""
    state = initial_state(dataset, subset)
    memories = released.cds_user_memories(variant).set_index(USER)["memory"]
    users_released, users_untrained = [], []
    for user in subset.users:
        if user in memories.index:
            state.user_memory[user] = str(memories[user])
            state.user_versions[user] = [state.user_versions[user][0], str(memories[user])]
            users_released.append(user)
        else:
            users_untrained.append(user)
    items_released: list[str] = []
    if items:
        for item in released_item_ids(variant):
            if item in state.item_memory:
                versions = released.cds_item_memory_versions(item, variant)["description"]
                state.item_memory[item] = [str(text) for text in versions]
                items_released.append(item)
    return ReleasedAgents(
        state=state,
        users_released=users_released,
        users_untrained=users_untrained,
        items_released=items_released,
        items_untrained=len(state.item_memory) - len(items_released),
    )


def first_description_check(untrained: AgentState, agents: ReleasedAgents) -> pd.DataFrame:
    """Whether each released item's first version is our first description of it.

    Both sides must start from the same text, or the comparison measures the seed text. The
    authors' texts keep the HTML entities of ``CDs.item`` (``&amp;``, ``&quot;``), which our
    titles unescape as the paper's loader does for display; ``equal_unescaped`` compares
    after unescaping theirs. Their texts are kept byte for byte in the state.

    Returns:
        ``[item_id, ours, theirs, equal, equal_unescaped]``.
    """
    rows = [
        {
            ITEM: item,
            "ours": untrained.item_memory[item][0],
            "theirs": agents.state.item_memory[item][0],
        }
        for item in agents.items_released
    ]
    frame = pd.DataFrame(rows, columns=[ITEM, "ours", "theirs"])
    return frame.assign(
        equal=frame["ours"] == frame["theirs"],
        equal_unescaped=frame["ours"] == frame["theirs"].map(html.unescape),
    )


@dataclass
class MemoryQuality:
    """One ranker on the same candidates with several sets of memories.

    Attributes:
        per_user: ``[memories, user_id, ndcg@10, hr@1, ..., status]`` (status: how the
            ranking reply parsed).
        summary: Per set of memories: mean NDCG@10 with its bootstrap interval and ``n``,
            and the paired difference from the untrained memories with its interval,
            p-value (from the same resamples, ``reading.paired_interval``) and paired
            minimum detectable effect (``mde``; NaN when every user's
            difference is the same, e.g. all zero: then no spread to size it from).
    """

    per_user: pd.DataFrame
    summary: pd.DataFrame


def memory_quality(
    states: Mapping[str, AgentState],
    subset: Subset,
    candidates: pd.DataFrame,
    titles: dict[str, str],
    config: AgentCFConfig,
    client: Any,
    log: RunLog | None = None,
    variant: str = "B",
    metric: str = "ndcg@10",
    n_boot: int = 1000,
    seed: int = 0,
) -> MemoryQuality:
    """Rank the same candidates with the same ranker and each set of memories in ``states``.

    ``states`` must hold :data:`UNTRAINED`; every other set is compared with it user by user
    (paired bootstrap), so the difference is the memories' effect with the ranker held fixed.

    Raises:
        ValueError: ``states`` has no untrained memories.
    """
    if UNTRAINED not in states:
        raise ValueError(f"states must include {UNTRAINED!r}, got {list(states)}")
    truth = candidates[candidates[LABEL] == 1][[USER, ITEM]]
    frames = []
    for name, state in states.items():
        outcome = rank_candidates(
            state, subset, candidates, titles, variant, config, client, log,
            phase=f"memory:{name}",
        )  # fmt: skip
        scores = metrics.ranking_metrics(outcome.ranked, truth, ks=(1, 5, 10))
        status = outcome.parses.set_index(USER)["status"]
        frames.append(scores.assign(memories=name, status=scores[USER].map(status)))
    per_user = pd.concat(frames, ignore_index=True)
    per_user = per_user[["memories", *[c for c in per_user.columns if c != "memories"]]]
    return MemoryQuality(per_user=per_user, summary=_summary(per_user, metric, n_boot, seed))


def _summary(per_user: pd.DataFrame, metric: str, n_boot: int, seed: int) -> pd.DataFrame:
    """Each set's mean with its interval, and its paired difference from the untrained."""
    wide = per_user.pivot(index=USER, columns="memories", values=metric)
    base = wide[UNTRAINED].to_numpy()
    rows = []
    for name in per_user["memories"].unique():
        values = wide[name].to_numpy()
        mean, low, high = metrics.bootstrap_ci(values, n_boot=n_boot, seed=seed)
        row = {"memories": name, "metric": metric, "mean": mean, "low": low, "high": high}
        row["n"] = len(values)
        if name != UNTRAINED:
            # interval and p-value from the same resampled means (they cannot disagree)
            paired = paired_interval(values, base, n_boot=n_boot, seed=seed)
            row.update(
                diff=paired.diff,
                diff_low=paired.low,
                diff_high=paired.high,
                p_value=paired.p_value,
                # no spread in the differences (the ranker ignored the memories): undefined
                mde=float("nan")
                if np.ptp(values - base) == 0
                else metrics.paired_min_detectable_effect(values, base),
            )
        rows.append(row)
    return pd.DataFrame(rows)
