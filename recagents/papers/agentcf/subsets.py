"""AgentCF's data construction: the dense and sparse subsets, candidates and training pairs.

The paper keeps 8 interactions per user (1 history-only prefix, 5 training targets, 1 valid,
1 test); :func:`make_subset` re-makes its dense and sparse samples on any dataset,
:func:`subset_candidates` draws the 1 + 9 test candidates, and :func:`training_pairs` and
:func:`schedule` pair each target with a popularity-weighted negative and batch the users
round-robin, as the official code does; :func:`candidates_in_history` counts the
candidates a user already had. :func:`shared_subset` keeps the windows of given users,
for candidates drawn elsewhere (the cross-paper comparison).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import ITEM, USER
from recagents.data.atomic import DatasetError
from recagents.data.datasets import Dataset, Split, candidate_sets, chronological_order
from recagents.papers.agentcf.config import BATCH, NEGATIVE, POSITIVE, ROLE, SLOT, STEP

#: What the official repository's two released subsets look like (Amazon CDs, 100 users each;
#: computed from the released files, see the paper card), to set beside ours.
RELEASED_SUBSETS = pd.DataFrame(
    [
        {
            "subset": "CDs-dense",
            "users": 100,
            "items": 269,
            "distinct_targets": 225,
            "test_items_trained": 81,
        },
        {
            "subset": "CDs-sparse",
            "users": 100,
            "items": 704,
            "distinct_targets": 450,
            "test_items_trained": 7,
        },
    ]
)


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Subset:
    """A sample of users, each reduced to their last ``window`` interactions.

    Attributes:
        name: ``"dense"`` or ``"sparse"``.
        windows: ``[user_id, item_id, ..., slot, role]``: ``slot`` 0..window-1 in time
            order; ``role`` is ``prefix``, ``target``, ``valid`` or ``test``.
        split: The same rows as a :class:`~recagents.data.Split` (train = prefix + targets),
            so baselines and candidate sampling work on it unchanged.
    """

    name: str
    windows: pd.DataFrame
    split: Split

    @property
    def users(self) -> list[str]:
        """The sampled users, sorted."""
        return sorted(self.windows[USER].unique())

    def targets(self) -> pd.DataFrame:
        """``[user_id, item_id, slot, step]``: the training targets, step 0 first."""
        targets = self.windows[self.windows[ROLE] == "target"][[USER, ITEM, SLOT]]
        step = targets.groupby(USER)[SLOT].rank(method="first").astype(int) - 1
        return targets.assign(**{STEP: step}).reset_index(drop=True)

    def history(self, user: str, before_slot: int) -> list[str]:
        """The user's items strictly before ``before_slot``, oldest first."""
        rows = self.windows[(self.windows[USER] == user) & (self.windows[SLOT] < before_slot)]
        return rows.sort_values(SLOT)[ITEM].tolist()

    def test_slot(self) -> int:
        """The slot of the test item (the last one)."""
        return int(self.windows[SLOT].max())


def make_subset(
    dataset: Dataset,
    kind: Literal["dense", "sparse"],
    n_users: int | None = 100,
    n_targets: int = 5,
    seed: int = 0,
    dense_pool: float = 0.25,
) -> Subset:
    """Sample users as the paper's dense or sparse subsets, re-made on any dataset.

    Every user keeps their last ``n_targets + 3`` interactions in time order (ties broken by
    file order, see :func:`recagents.data.chronological_order`). The paper does not say how
    its Amazon subsets were drawn, so on our data:

    - ``sparse``: ``n_users`` users drawn uniformly from those with a full window;
    - ``dense``: ``n_users`` drawn uniformly from the ``dense_pool`` share of those users
      whose windows hold the most popular items (mean interaction count of the window's
      items in the whole dataset), so that the sample's items overlap more.

    Args:
        dataset: The full dataset.
        kind: ``"dense"`` or ``"sparse"``.
        n_users: Users to sample (``None``: every eligible user).
        n_targets: Training targets per user (window = ``n_targets + 3``).
        seed: Seeds the draw.
        dense_pool: Share of eligible users, by window popularity, the dense draw uses.

    Raises:
        DatasetError: Too few users have a full window.
        ValueError: A bad ``kind``, ``n_users`` or ``dense_pool``.
    """
    if kind not in ("dense", "sparse"):
        raise ValueError(f"kind must be 'dense' or 'sparse', got {kind!r}")
    if not 0 < dense_pool <= 1:
        raise ValueError(f"dense_pool must be in (0, 1], got {dense_pool}")
    if n_users is not None and n_users < 1:
        raise ValueError(f"n_users must be positive, got {n_users}")
    if n_targets < 1:
        raise ValueError(f"n_targets must be at least 1, got {n_targets}")
    window = n_targets + 3
    ordered = chronological_order(dataset.interactions)
    from_end = ordered.groupby(USER, sort=False).cumcount(ascending=False)
    counts = ordered.groupby(USER, sort=False)[ITEM].transform("size")
    windows = ordered[(counts >= window) & (from_end < window)].copy()
    eligible = np.array(sorted(windows[USER].unique()))
    wanted = len(eligible) if n_users is None else n_users
    if len(eligible) < wanted:
        raise DatasetError(
            f"{dataset.name}: only {len(eligible)} users have at least {window} interactions; "
            f"asked for {wanted}"
        )
    rng = np.random.default_rng(seed)
    if kind == "sparse":
        chosen = rng.choice(eligible, size=wanted, replace=False)
    else:
        popularity = dataset.interactions[ITEM].value_counts()
        score = windows.assign(pop=windows[ITEM].map(popularity)).groupby(USER)["pop"].mean()
        pool_size = max(wanted, int(round(dense_pool * len(eligible))))
        pool = score.sort_values(ascending=False, kind="stable").index[:pool_size]
        chosen = rng.choice(np.array(sorted(pool)), size=wanted, replace=False)
    windows = windows[windows[USER].isin(set(chosen))]
    windows[SLOT] = windows.groupby(USER, sort=False).cumcount()
    roles = np.full(len(windows), "target", dtype=object)
    roles[windows[SLOT].to_numpy() == 0] = "prefix"
    roles[windows[SLOT].to_numpy() == window - 2] = "valid"
    roles[windows[SLOT].to_numpy() == window - 1] = "test"
    windows[ROLE] = roles
    windows = windows.sort_values([USER, SLOT], kind="stable").reset_index(drop=True)
    plain = windows.drop(columns=[SLOT, ROLE])
    split = Split(
        train=plain[windows[ROLE].isin(["prefix", "target"])].reset_index(drop=True),
        valid=plain[windows[ROLE] == "valid"].reset_index(drop=True),
        test=plain[windows[ROLE] == "test"].reset_index(drop=True),
        name=f"agentcf-{dataset.name}-{kind}-n{wanted}-w{window}-s{seed}",
    )
    return Subset(name=kind, windows=windows, split=split)


def subset_stats(subset: Subset, n_negatives: int = 9) -> dict[str, Any]:
    """Numbers that say how dense a subset is, comparable to :data:`RELEASED_SUBSETS`.

    ``paper_draw_history_hits`` is the expected number of the user's own history items per
    candidate list if negatives were drawn as the official code draws them (from the whole
    pool, without filtering the history); our candidates exclude the history instead.
    """
    windows = subset.windows
    pool = windows[ITEM].nunique()
    targets = set(windows.loc[windows[ROLE] == "target", ITEM])
    trained_seen = set(windows.loc[windows[ROLE].isin(["prefix", "target"]), ITEM])
    test = windows[windows[ROLE] == "test"]
    history_per_user = len(windows) / max(1, windows[USER].nunique()) - 1
    return {
        "subset": subset.name,
        "users": int(windows[USER].nunique()),
        "items": int(pool),
        "distinct_targets": len(targets),
        "test_items_trained": int(test[ITEM].isin(targets).sum()),
        "test_items_in_train": int(test[ITEM].isin(trained_seen).sum()),
        "paper_draw_history_hits": round(n_negatives * history_per_user / max(1, pool - 1), 3),
    }


def subset_candidates(
    subset: Subset,
    dataset: Dataset,
    n_negatives: int = 9,
    seed: int = 0,
    pool: Literal["subset", "dataset"] = "subset",
) -> pd.DataFrame:
    """The test candidates: each user's test item and ``n_negatives`` items they never had.

    ``pool="subset"`` draws the negatives uniformly from the subset's own items, as the
    paper does (but, unlike its code, never from the user's history). A subset of a handful
    of users may hold too few items; ``pool="dataset"`` then draws from every item of the
    dataset, excluding everything the user ever interacted with. Either way the lists are
    seeded and saved (see :func:`recagents.data.candidate_sets`).

    Returns:
        ``[user_id, item_id, label, position]``.
    """
    if pool == "subset":
        split = subset.split
    elif pool == "dataset":
        ordered = chronological_order(dataset.interactions)
        from_end = ordered.groupby(USER, sort=False).cumcount(ascending=False)
        held_out = ordered[USER].isin(set(subset.users)) & (from_end < 2)
        split = Split(
            train=ordered[~held_out].reset_index(drop=True),
            valid=subset.split.valid,
            test=subset.split.test,
            name=f"{subset.split.name}-datasetpool",
        )
    else:
        raise ValueError(f"pool must be 'subset' or 'dataset', got {pool!r}")
    try:
        return candidate_sets(split, n_negatives, seed=seed)
    except ValueError as error:
        raise DatasetError(
            f"{error}: the {subset.name} subset of {len(subset.users)} users is too small "
            f"for 1 + {n_negatives} candidates; use more users or pool='dataset'"
        ) from error


def candidates_in_history(subset: Subset, candidates: pd.DataFrame) -> pd.Series:
    """Per user, how many of their candidates are items they had before the test item.

    Zero for lists drawn by :func:`subset_candidates` (they exclude the history); the paper's
    released lists are not filtered (its code then scores such items -inf, so its list
    shrinks; our rankers rank them like any other candidate).
    """
    before = subset.windows[subset.windows[SLOT] < subset.test_slot()]
    seen = set(zip(before[USER], before[ITEM], strict=True))
    pairs = zip(candidates[USER], candidates[ITEM], strict=True)
    hits = [(user, item) in seen for user, item in pairs]
    return pd.Series(hits, index=candidates.index).groupby(candidates[USER]).sum().astype(int)


def shared_subset(
    dataset: Dataset, truth: pd.DataFrame, n_targets: int = 5, seed: int = 0
) -> Subset:
    """AgentCF's data for given users (shared candidates): each user's last ``n_targets + 3``.

    :func:`make_subset` over every eligible user (``sparse``, seeded), kept to the users of
    ``truth``, so each user's test item is the shared split's test item (both use
    :func:`recagents.data.datasets.chronological_order`) and shared candidates apply unchanged.

    Args:
        dataset: The full dataset.
        truth: ``[user_id, item_id]``: the users and their held-out test items.
        n_targets: Training targets per user.
        seed: Seeds the (unused beyond ordering) subset draw.

    Raises:
        DatasetError: A user has fewer than ``n_targets + 3`` interactions, or the
            subset's test item differs from ``truth``'s.
    """
    full = make_subset(dataset, "sparse", None, n_targets, seed=seed)
    wanted = set(truth[USER])
    missing = wanted - set(full.windows[USER])
    if missing:
        raise DatasetError(
            f"{len(missing)} protocol user(s) have fewer than {n_targets + 3} interactions, "
            f"e.g. {sorted(missing)[:3]}; lower n_targets"
        )

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[frame[USER].isin(wanted)].reset_index(drop=True)

    split = Split(
        keep(full.split.train),
        keep(full.split.valid),
        keep(full.split.test),
        name=f"{full.split.name}-crosspaper-{len(wanted)}",
    )
    subset = Subset(full.name, keep(full.windows), split)
    ours = split.test.set_index(USER)[ITEM].sort_index()
    theirs = truth.set_index(USER)[ITEM].sort_index()
    if ours.to_dict() != theirs.to_dict():
        raise DatasetError("AgentCF's test items differ from the shared split's")
    return subset


def training_pairs(
    subset: Subset,
    seed: int = 2020,
    exclude_future: bool = False,
) -> pd.DataFrame:
    """One popularity-weighted negative per training target, as RecBole's sampler draws it.

    Weights are the items' interaction counts in the subset's training rows; a user's own
    training items are never drawn. With ``exclude_future`` the user's valid and test items
    are excluded too (the paper's sampler may draw them).

    Returns:
        ``[user_id, step, slot, positive, negative]``, sorted by step then user.
    """
    train = subset.split.train
    counts = train[ITEM].value_counts().sort_index()
    items = counts.index.to_numpy()
    weights = counts.to_numpy(dtype=float)
    index_of = {item: i for i, item in enumerate(items)}
    seen = train.groupby(USER)[ITEM].agg(set)
    future = (
        pd.concat([subset.split.valid, subset.split.test]).groupby(USER)[ITEM].agg(set)
        if exclude_future
        else pd.Series(dtype=object)
    )
    rng = np.random.default_rng(seed)
    rows = []
    targets = subset.targets().sort_values([USER, STEP], kind="stable")
    for user, positive, slot, step in targets[[USER, ITEM, SLOT, STEP]].itertuples(index=False):
        mask = np.ones(len(items), bool)
        banned = seen.get(user, set()) | future.get(user, set())
        mask[[index_of[i] for i in banned if i in index_of]] = False
        if not mask.any():
            raise DatasetError(f"user {user}: no item is left to draw a negative from")
        p = np.where(mask, weights, 0.0)
        negative = items[rng.choice(len(items), p=p / p.sum())]
        rows.append((user, int(step), int(slot), positive, negative))
    frame = pd.DataFrame(rows, columns=[USER, STEP, SLOT, POSITIVE, NEGATIVE])
    return frame.sort_values([STEP, USER], kind="stable").reset_index(drop=True)


def schedule(pairs: pd.DataFrame, batch_size: int, steps: int | None = None) -> pd.DataFrame:
    """Round-robin batches: step t holds every user's t-th target, cut into batches.

    Each batch has at most ``batch_size`` distinct users; batches run step by step, so every
    user's first target is trained before anyone's second (the paper's schedule).

    Returns:
        ``pairs`` restricted to the first ``steps`` steps, with a ``batch`` column, in order.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    frame = pairs if steps is None else pairs[pairs[STEP] < steps]
    frame = frame.sort_values([STEP, USER], kind="stable").reset_index(drop=True)
    within = frame.groupby(STEP).cumcount() // batch_size
    per_step = within.groupby(frame[STEP]).max() + 1
    offsets = per_step.cumsum() - per_step
    return frame.assign(**{BATCH: (frame[STEP].map(offsets) + within).astype(int)})
