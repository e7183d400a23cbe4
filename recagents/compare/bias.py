"""Bias of each method's ranking: popularity of what it puts on top, and position sensitivity.

:func:`popularity_bias` compares the popularity, coverage and Gini index (:func:`gini`) of
each method's top-k with the held-out targets; :func:`position_sensitivity` shows the same
candidates in another order (:func:`reorder_candidates`) and measures how much the ranking
changes, with :func:`shared_rankers` for adapters that run several methods at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import ITEM, RANK, USER
from recagents.compare.protocol import Protocol, Ranking
from recagents.data.datasets import POSITION

#: The orders :func:`position_sensitivity` knows.
ORDERS = ("given", "reversed", "shuffled")


def gini(counts: Sequence[float] | np.ndarray) -> float:
    """Gini index of exposure counts: 0 when every item is shown equally, near 1 for one.

    With ``x`` sorted ascending over ``n`` items,
    ``G = sum_i (2i - n - 1) x_i / (n sum_i x_i)`` (``i = 1..n``); 0 for no exposure.
    """
    x = np.sort(np.asarray(counts, dtype=float))
    n = len(x)
    if n == 0 or x.sum() == 0:
        return 0.0
    index = np.arange(1, n + 1)
    return float(np.sum((2 * index - n - 1) * x) / (n * x.sum()))


def _exposure(items: pd.Series, catalogue: pd.Index) -> dict[str, float]:
    counts = items.value_counts().reindex(catalogue, fill_value=0)
    return {"coverage": float((counts > 0).mean()), "gini": gini(counts.to_numpy())}


def popularity_bias(
    frames: Mapping[str, pd.DataFrame],
    train_interactions: pd.DataFrame,
    k: int = 10,
    truth: pd.DataFrame | None = None,
    catalogue: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Popularity of what each method puts in its top ``k``, against the ground truth.

    Popularity is an item's number of training interactions. Per method:

    - ``avg_pop``: mean popularity of the top-``k`` items over all users' lists;
    - ``pop_ratio``: ``avg_pop`` over the mean popularity of the truth's targets (1: as
      popular as what users actually chose next; > 1: a lean toward popular items);
    - ``coverage``: share of the catalogue that appears in some top-``k`` list;
    - ``gini``: :func:`gini` of how often each catalogue item appears in the top-``k`` lists.

    A ``Ground truth`` row gives the same numbers for the targets (one item per user).

    Args:
        frames: Method -> ``[user_id, item_id, score, rank]``.
        train_interactions: ``[user_id, item_id, ...]`` the popularity is counted on.
        k: Cut-off.
        truth: ``[user_id, item_id]`` of the targets (``None``: no truth row or ratio).
        catalogue: Items coverage and Gini are over (default: every item of
            ``train_interactions`` and of the frames).

    Returns:
        ``[method, k, avg_pop, pop_ratio, coverage, gini, n_users]``.
    """
    popularity = train_interactions[ITEM].value_counts()
    items = set(popularity.index)
    for frame in frames.values():
        items |= set(frame[ITEM])
    if truth is not None:
        items |= set(truth[ITEM])
    index = pd.Index(sorted(items) if catalogue is None else list(catalogue))
    truth_pop = None
    rows = []
    if truth is not None:
        truth_pop = float(truth[ITEM].map(popularity).fillna(0).mean())
        rows.append(
            {"method": "Ground truth", "k": 1, "avg_pop": truth_pop, "pop_ratio": 1.0,
             **_exposure(truth[ITEM], index), "n_users": truth[USER].nunique()}
        )  # fmt: skip
    for name, frame in frames.items():
        top = frame[frame[RANK] <= k]
        avg = float(top[ITEM].map(popularity).fillna(0).mean())
        ratio = avg / truth_pop if truth_pop else float("nan")
        rows.append(
            {"method": name, "k": k, "avg_pop": avg, "pop_ratio": ratio,
             **_exposure(top[ITEM], index), "n_users": top[USER].nunique()}
        )  # fmt: skip
    columns = ["method", "k", "avg_pop", "pop_ratio", "coverage", "gini", "n_users"]
    return pd.DataFrame(rows, columns=columns)


def reorder_candidates(
    candidates: pd.DataFrame, order: Literal["given", "reversed", "shuffled"], seed: int = 0
) -> pd.DataFrame:
    """The same candidates with display positions given, reversed or shuffled per user.

    Returns:
        ``candidates`` with new ``position`` values, sorted by user then position.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    frame = candidates.sort_values([USER, POSITION], kind="stable").reset_index(drop=True)
    if order == "reversed":
        size = frame.groupby(USER)[POSITION].transform("size")
        frame[POSITION] = size - 1 - frame.groupby(USER).cumcount()
    elif order == "shuffled":
        rng = np.random.default_rng(seed)
        positions = []
        for _, group in frame.groupby(USER, sort=False):
            positions.extend(rng.permutation(len(group)).tolist())
        frame[POSITION] = positions
    return frame.sort_values([USER, POSITION], kind="stable").reset_index(drop=True)


def _kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import kendalltau

    if len(a) < 2:
        return 1.0
    return float(kendalltau(a, b).statistic)


def position_sensitivity(
    rank_fn: Callable[[pd.DataFrame], pd.DataFrame],
    candidates: pd.DataFrame,
    orders: Sequence[str] = ORDERS,
    k: int = 5,
    seed: int = 0,
    per_user: bool = False,
) -> pd.DataFrame:
    """How much a ranking changes when the same candidates are shown in another order.

    ``rank_fn`` receives the candidates with their display ``position`` (the order a method
    shows them in) and returns ``[user_id, item_id, score, rank]``; for an adapter, e.g.
    ``lambda c: run_paper(protocol.with_candidates(c), "AFL")["AFL loop"].frame``. Each order's
    ranking is compared per user with the ranking under ``"given"``: Kendall's tau of the
    ranks (1: the same ranking), overlap@k (share of the top-k in common) and whether the
    top-1 item changed. An order-invariant ranker scores 1, 1, 0.

    Args:
        rank_fn: The ranker.
        candidates: ``[user_id, item_id, label, position]``.
        orders: Orders to present (``"given"`` is always run, as the comparison point).
        k: Cut-off of the overlap.
        seed: Seeds the shuffle.
        per_user: Return one row per order and user instead of the means.

    Returns:
        ``[order, kendall_tau, overlap@k, top1_changed, n_users]`` (means over users), or
        with ``per_user`` ``[order, user_id, kendall_tau, overlap@k, top1_changed]``.
    """
    unknown = set(orders) - set(ORDERS)
    if unknown:
        raise ValueError(f"unknown orders {sorted(unknown)}; use {ORDERS}")
    rankings = {}
    for order in dict.fromkeys(["given", *orders]):
        shown = reorder_candidates(candidates, order, seed=seed)  # type: ignore[arg-type]
        rankings[order] = rank_fn(shown)
    base = rankings["given"].set_index([USER, ITEM])[RANK]
    rows = []
    for order in orders:
        other = rankings[order].set_index([USER, ITEM])[RANK].reindex(base.index)
        if other.isna().any():
            raise ValueError(f"the {order!r} ranking does not cover the same candidates")
        for user in base.index.get_level_values(USER).unique():
            a = base.loc[user].sort_index()
            b = other.loc[user].reindex(a.index)
            top_a = set(a[a <= k].index)
            top_b = set(b[b <= k].index)
            rows.append(
                {"order": order, USER: user,
                 "kendall_tau": _kendall_tau(a.to_numpy(), b.to_numpy()),
                 f"overlap@{k}": len(top_a & top_b) / max(1, min(k, len(a))),
                 "top1_changed": float(a.idxmin() != b.idxmin())}
            )  # fmt: skip
    table = pd.DataFrame(rows)
    if per_user:
        return table
    summary = table.groupby("order", sort=False).agg(
        kendall_tau=("kendall_tau", "mean"),
        overlap=(f"overlap@{k}", "mean"),
        top1_changed=("top1_changed", "mean"),
        n_users=(USER, "nunique"),
    )
    return summary.rename(columns={"overlap": f"overlap@{k}"}).reset_index()


def shared_rankers(
    run_methods: Callable[[Protocol], Mapping[str, Ranking]],
    protocol: Protocol,
    methods: Sequence[str],
    context: Protocol | None = None,
) -> dict[str, Callable[[pd.DataFrame], pd.DataFrame]]:
    """Rank functions for :func:`position_sensitivity` from an adapter that runs several methods.

    AgentCF's variants share one training and AFL's single agent and loop share the tool
    model's scores, so their adapters return several methods at once. Each function here
    shows the candidates in the order it is given to ``run_methods`` (through
    :meth:`Protocol.with_candidates`), runs the adapter once per distinct order for all
    ``methods`` together, and returns its own method's frame.

    With ``context`` (the protocol ``protocol`` was cut from with :meth:`Protocol.for_users`)
    the adapter runs on all of the context's users: the probed users' candidates in the order
    given, everyone else's as saved. A method that learns from its users, as AgentCF trains
    its agents, then learns exactly what it learnt in the main run (its cached replies), and
    only the probed users' rankings are new; the frames returned keep the probed users only.

    Args:
        run_methods: An adapter bound to its settings, e.g.
            ``lambda p: run_paper(p, "AgentCF", config, options)``.
        protocol: The protocol whose candidates are re-presented.
        methods: The methods of the adapter to probe.
        context: The full protocol to run the adapter on (default: ``protocol`` alone).

    Returns:
        Method -> ``rank(candidates) -> [user_id, item_id, score, rank]``.

    Raises:
        KeyError: When called, if the adapter did not return the method.
        ValueError: ``context`` lacks some of the probed users.
    """
    if context is not None and not set(protocol.users) <= set(context.users):
        raise ValueError("context must hold every user of the probed protocol")
    runs_by_order: dict[tuple[Any, ...], Mapping[str, Ranking]] = {}

    def ranker(method: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
        def rank(candidates: pd.DataFrame) -> pd.DataFrame:
            shown = candidates.sort_values([USER, POSITION], kind="stable")
            key = tuple(zip(shown[USER], shown[ITEM], strict=True))
            if key not in runs_by_order:
                base = protocol if context is None else context
                runs_by_order[key] = run_methods(base.with_candidates(_within(shown, context)))
            runs = runs_by_order[key]
            if method not in runs:
                raise KeyError(f"the adapter returned {sorted(runs)}, not {method!r}")
            frame = runs[method].frame
            if context is None:
                return frame
            return frame[frame[USER].isin(set(shown[USER]))].reset_index(drop=True)

        return rank

    return {method: ranker(method) for method in methods}


def _within(shown: pd.DataFrame, context: Protocol | None) -> pd.DataFrame:
    """``shown`` in place of its users' rows of the context's candidates (users in saved order)."""
    if context is None:
        return shown
    saved = context.candidates
    rest = saved[~saved[USER].isin(set(shown[USER]))]
    merged = pd.concat([rest, shown[saved.columns]], ignore_index=True)
    order = {user: index for index, user in enumerate(pd.unique(saved[USER]))}
    return merged.sort_values(USER, key=lambda users: users.map(order), kind="stable").reset_index(
        drop=True
    )
