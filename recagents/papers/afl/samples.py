"""AFL's recommendation tasks: one :class:`Sample` per test user, with the tool model's view.

Each sample holds the user's recent history, 20 candidates with the held-out target among
them, and the sequential tool model's (SASRec's) top pick, focus list and raw scores, which
both agents are shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from recagents.columns import ITEM, LABEL, USER
from recagents.data.datasets import POSITION, Split, candidate_sets, chronological_order
from recagents.papers.afl.config import AFLConfig

# --------------------------------------------------------------------------- samples


@dataclass(frozen=True)
class Sample:
    """One recommendation task: a user, the history, the candidates and the tool's view.

    Attributes:
        user: The user id.
        history: The most recent items, oldest first.
        candidates: The candidates in display order (the target among them).
        target: The held-out next item.
        prior: The tool model's top pick among the candidates.
        focus: The tool's top ``focus_size`` candidates, best first.
        scores: The tool's raw score of each candidate (a logit; can be negative).
    """

    user: str
    history: tuple[str, ...]
    candidates: tuple[str, ...]
    target: str
    prior: str
    focus: tuple[str, ...]
    scores: dict[str, float] = field(default_factory=dict)


def recent_histories(
    interactions: pd.DataFrame, users: Sequence[str], length: int
) -> dict[str, tuple[str, ...]]:
    """Each user's last ``length`` items in time order (ties in file order), oldest first."""
    wanted = set(users)
    ordered = chronological_order(interactions[interactions[USER].isin(wanted)])
    recent = ordered.groupby(USER, sort=False).tail(length)
    histories = recent.groupby(USER, sort=False)[ITEM].agg(tuple).to_dict()
    missing = [u for u in users if u not in histories]
    if missing:
        raise ValueError(f"{len(missing)} user(s) have no history, e.g. {missing[:3]}")
    return {u: histories[u] for u in users}


def tool_scores(
    model: Any, candidates: pd.DataFrame, histories: dict[str, tuple[str, ...]]
) -> pd.DataFrame:
    """The tool model's raw score of every candidate after the user's history.

    Args:
        model: A trained sequential :class:`recagents.baselines.Baseline` (SASRec), always
            scored in eval mode (the released code leaves dropout on; see the paper card).
        candidates: ``[user_id, item_id, ...]``.
        histories: The history each user's agents see, oldest first.

    Returns:
        ``candidates`` with a ``score`` column; ``NaN`` for an item the tool model never saw
        in training (it has no score for it, and the agents are told so).
    """
    users = list(dict.fromkeys(candidates[USER]))
    matrix = model.sequence_scores([list(histories[u]) for u in users])
    row_of = {u: i for i, u in enumerate(users)}
    columns = model.item_index(candidates[ITEM].tolist(), unknown=-1)
    frame = candidates.copy()
    scores = matrix[candidates[USER].map(row_of).to_numpy(), np.maximum(columns, 0)]
    frame["score"] = np.where(columns >= 0, scores, np.nan)
    return frame


def make_samples(
    scored: pd.DataFrame, histories: dict[str, tuple[str, ...]], focus_size: int
) -> list[Sample]:
    """Samples from scored candidates ``[user_id, item_id, label, position, score]``.

    Every user needs exactly one positive. Ties in the tool's score go to the earlier
    display position, so the prior and focus list are deterministic.
    """
    samples = []
    for user, rows in scored.groupby(USER, sort=True):
        rows = rows.sort_values(POSITION, kind="stable")
        positives = rows.loc[rows[LABEL] == 1, ITEM].tolist()
        if len(positives) != 1:
            raise ValueError(f"user {user} has {len(positives)} positives; exactly one is needed")
        ranked = rows.sort_values("score", ascending=False, kind="stable")[ITEM].tolist()
        samples.append(
            Sample(
                user=str(user),
                history=tuple(histories[user]),
                candidates=tuple(rows[ITEM].tolist()),
                target=positives[0],
                prior=ranked[0],
                focus=tuple(ranked[:focus_size]),
                scores=dict(zip(rows[ITEM], rows["score"].astype(float), strict=True)),
            )
        )
    return samples


def scored_samples(
    tool: Any, split: Split, candidates: pd.DataFrame, config: AFLConfig
) -> tuple[pd.DataFrame, list[Sample]]:
    """The tool model's scores of ``candidates`` and the samples made of them.

    Each user's history is their last ``config.history_length`` items before the test item
    (:func:`recent_histories`); the tool scores every candidate after it in one batch
    (:func:`tool_scores`) and :func:`make_samples` takes its top pick and focus list.

    Returns:
        ``(scored, samples)``: ``candidates`` with a ``score`` column, and one sample per user
        in user order.
    """
    users = list(dict.fromkeys(candidates[USER]))
    histories = recent_histories(split.history("test"), users, config.history_length)
    scored = tool_scores(tool, candidates, histories)
    return scored, make_samples(scored, histories, config.focus_size)


def all_test_samples(
    split: Split, tool: Any, config: AFLConfig, seed: int
) -> tuple[pd.DataFrame, list[Sample]]:
    """Every test user's sample under ``seed``: the target and ``n_candidates - 1`` negatives.

    The candidates are drawn (and saved) once per seed for every test user
    (:func:`recagents.data.datasets.candidate_sets`), so every method and every sample size
    sees the same lists; :func:`scored_samples` scores them all.
    """
    candidates = candidate_sets(split, config.n_candidates - 1, seed=seed, phase="test")
    return scored_samples(tool, split, candidates, config)


def released_samples(
    samples: pd.DataFrame,
    candidates: pd.DataFrame,
    predictions: pd.DataFrame,
    titles: dict[str, str],
) -> list[Sample]:
    """Samples of AFL's released LastFM evaluation, with the authors' SASRec pick as the tool.

    The release holds the tool's *pick* per sample (``prior_lastfm/SASRec.csv``), not its
    ranking or scores, and the released pipeline shows the agents only that pick: so
    ``prior`` is the candidate named as the pick, ``focus`` is that one item and ``scores``
    is empty (run with ``user_signal="hint"``). A pick that names no candidate is an error.

    Args:
        samples: ``recagents.data.released.load_lastfm``'s samples (``history`` oldest first).
        candidates: ``recagents.data.released.lastfm_candidates`` of those samples.
        predictions: ``load_lastfm``'s predictions (``sample``, ``prior_name``).
        titles: Artist name by item id.

    Raises:
        ValueError: A released pick is not one of its sample's candidates.
    """
    picks = predictions.set_index("sample")["prior_name"]
    lists = candidates.sort_values(["sample", "position"]).groupby("sample")[ITEM].agg(tuple)
    out = []
    for row in samples.itertuples(index=False):
        shown = lists[row.sample]
        wanted = str(picks[row.sample]).strip().casefold()
        named = [i for i in shown if titles[i].strip().casefold() == wanted]
        if not named:
            raise ValueError(
                f"sample {row.sample}: SASRec's released pick {picks[row.sample]!r} is not "
                "among its candidates (were they drawn with the released seed?)"
            )
        out.append(
            Sample(
                user=str(getattr(row, USER)),
                history=tuple(row.history),
                candidates=shown,
                target=str(row.target),
                prior=named[0],
                focus=(named[0],),
            )
        )
    return out
