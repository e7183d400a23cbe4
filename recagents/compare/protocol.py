"""The one protocol every method ranks, and the record of one method's run on it.

:func:`shared_protocol` makes the single leave-one-out split, saved candidate sets and user
sample (:class:`Protocol`); a :class:`~recagents.protocol.Ranking` holds one method's ranking
of those candidates with its calls, wall time and per-user reply status; :func:`check_frame` and
:func:`status_table` check and count them. Every other module of :mod:`recagents.compare`
builds on these.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from recagents import baselines as baselines_module
from recagents.columns import ITEM, RANK, USER
from recagents.data.datasets import (
    POSITION,
    Dataset,
    Split,
    candidate_sets,
    leave_one_out,
    subsample_users,
)
from recagents.protocol import STATUSES, Ranking, RankTask

#: The classic baselines: ``Random`` needs no training, the rest are RecBole models.
CLASSIC = ("Random", *baselines_module.MODELS)


# --------------------------------------------------------------------------- protocol


@dataclass(frozen=True)
class Protocol:
    """The one evaluation protocol every method ranks.

    Attributes:
        dataset: The full dataset (titles, genres, user features).
        split: Chronological leave-one-out split of every user.
        users: The sampled test users, sorted.
        candidates: ``[user_id, item_id, label, position]`` of those users, 1 target and
            ``n_negatives`` unseen items each, sorted by user then display position.
        seed: Seed of the user sample and the candidates.
        n_negatives: Negatives per user.
        cache_dir: Where the candidate sets are saved (``None``: the settings' cache).
    """

    dataset: Dataset
    split: Split
    users: list[str]
    candidates: pd.DataFrame
    seed: int
    n_negatives: int
    cache_dir: Path | None = None

    @property
    def truth(self) -> pd.DataFrame:
        """``[user_id, item_id]`` of the held-out test items of :attr:`users`."""
        truth = self.split.truth("test")
        return truth[truth[USER].isin(set(self.users))].sort_values(USER).reset_index(drop=True)

    @property
    def task(self) -> RankTask:
        """What a paper's ``rank`` takes: the dataset, split, candidates and seed."""
        return RankTask(self.dataset, self.split, self.candidates, self.seed)

    def with_candidates(self, candidates: pd.DataFrame) -> Protocol:
        """The same protocol with the candidates shown in another order (same items)."""
        return dataclasses.replace(self, candidates=candidates)

    def for_users(self, users: Sequence[str]) -> Protocol:
        """The same protocol restricted to ``users`` (some of :attr:`users`), e.g. for a probe.

        Raises:
            ValueError: If a user is not one of :attr:`users`, or none is given.
        """
        keep = sorted(set(users))
        unknown = set(keep) - set(self.users)
        if not keep or unknown:
            raise ValueError(f"for_users needs some of the protocol's users; unknown: {unknown}")
        shown = self.candidates[self.candidates[USER].isin(keep)].reset_index(drop=True)
        return dataclasses.replace(self, users=keep, candidates=shown)


def shared_protocol(
    dataset: Dataset,
    seed: int = 0,
    n_users: int | None = 50,
    n_negatives: int = 19,
    cache_dir: Path | None = None,
) -> Protocol:
    """One leave-one-out split, one saved candidate-set frame and one user sample.

    The candidates are :func:`candidate_sets` of the whole split (saved under
    ``cache_dir``, keyed by the split's fingerprint, size and seed), so InteRecAgent's
    one-turn evaluation, which draws them the same way, ranks the very same lists.

    Args:
        dataset: The dataset.
        seed: Seeds the user sample and the candidates.
        n_users: Test users to sample (``None``: all).
        n_negatives: Negatives per user (19: 1 + 19 candidates).
        cache_dir: Where the candidate sets are saved.

    Returns:
        The :class:`Protocol`; a deterministic function of ``(dataset, seed, n_users,
        n_negatives)``.
    """
    split = leave_one_out(dataset)
    users = subsample_users(split, n_users, seed=seed)
    frame = candidate_sets(split, n_negatives, seed=seed, cache_dir=cache_dir)
    frame = frame[frame[USER].isin(set(users))]
    frame = frame.sort_values([USER, POSITION], kind="stable").reset_index(drop=True)
    return Protocol(dataset, split, users, frame, seed, n_negatives, cache_dir)


# --------------------------------------------------------------------------- method runs


def status_table(runs: Mapping[str, Ranking]) -> pd.DataFrame:
    """Users per reply status and method: how many replies were unusable, beside the note.

    Returns:
        ``[method, ok, complete, repaired, failed, failed_share, note]``.
    """
    rows = []
    for name, run in runs.items():
        counts = run.status_counts()
        users = max(1, sum(counts.values()))
        rows.append({"method": name, **counts, "failed_share": counts["failed"] / users,
                     "note": run.note})  # fmt: skip
    return pd.DataFrame(rows, columns=["method", *STATUSES, "failed_share", "note"])


def check_frame(frame: pd.DataFrame, candidates: pd.DataFrame) -> None:
    """Raise unless ``frame`` ranks exactly the candidates, 1..n per user with no ties.

    Raises:
        ValueError: An extra or a missing (user, item) pair, or ranks that are not 1..n.
    """
    got = set(zip(frame[USER], frame[ITEM], strict=True))
    want = set(zip(candidates[USER], candidates[ITEM], strict=True))
    if got != want or len(frame) != len(candidates):
        raise ValueError(
            f"the frame does not cover the candidates: {len(got - want)} extra, "
            f"{len(want - got)} missing, {len(frame)} rows for {len(candidates)} candidates"
        )
    ranks = frame.groupby(USER)[RANK].apply(lambda r: sorted(r) == list(range(1, len(r) + 1)))
    if not ranks.all():
        raise ValueError(f"ranks are not 1..n for users {ranks[~ranks].index[:3].tolist()}")


def all_ok(candidates: pd.DataFrame) -> pd.DataFrame:
    """Every user of ``candidates`` with status ``ok`` (a model's scores, no reply to fail)."""
    return pd.DataFrame({USER: sorted(candidates[USER].unique()), "status": "ok"})
