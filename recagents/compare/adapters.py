"""Adapters: every method ranks one :class:`~recagents.compare.protocol.Protocol`.

:func:`run_baseline` runs a classic RecBole baseline (or Random); :func:`run_paper` runs a
paper's rankers, found in the registry (:func:`recagents.papers.get`), through the one
plug-in call every paper has, ``rank(task, config, options)``. Each returns
:class:`~recagents.protocol.Ranking` objects over exactly the protocol's candidates; the
comparison never reaches into a paper's internals, and a new paper needs nothing here. The
deviations each method makes are documented at its paper's ``rank``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from recagents import baselines as baselines_module
from recagents.columns import ITEM, RANK, SCORE, USER
from recagents.compare.protocol import CLASSIC, Protocol, all_ok
from recagents.llm.runlog import RunLog
from recagents.papers import get
from recagents.protocol import Ranking, RunOptions

# --------------------------------------------------------------------------- classic baselines


def run_baseline(
    protocol: Protocol,
    model: str,
    train: baselines_module.TrainConfig | None = None,
    params: dict[str, Any] | None = None,
    seed: int = 0,
    cache_dir: Path | None = None,
) -> Ranking:
    """A classic baseline's scores of the protocol's candidates.

    ``Random`` is :func:`recagents.baselines.random_scores`; every other model is trained on
    the protocol's split with :func:`recagents.baselines.train_baseline` (cached) and scores
    the candidates with :meth:`~recagents.baselines.Baseline.score` (ties broken by a seeded
    shuffle). Wall time includes training (zero-ish when the weights come from the cache).

    Args:
        protocol: The shared protocol.
        model: ``"Random"`` or one of :data:`recagents.baselines.MODELS`.
        train: Training settings.
        params: RecBole hyper-parameters.
        seed: Seeds the tie-break (and Random's scores).
        cache_dir: Where RecBole's files and weights are kept.
    """
    if model not in CLASSIC:
        raise ValueError(f"unknown baseline {model!r}; choose from {CLASSIC}")
    started = time.perf_counter()
    note = ""
    if model == "Random":
        frame = baselines_module.random_scores(protocol.candidates, seed=seed)
    else:
        fitted = baselines_module.train_baseline(
            model, protocol.split, train, params, cache_dir=cache_dir, progress=False
        )
        frame = fitted.score(protocol.candidates, seed=seed)
        # What the model is, never whether this run found its weights cached: a published
        # page must read the same on a fresh clone (training) and on a rerun (the cache).
        note = f"best epoch {fitted.best_epoch}" if fitted.valid_curve else "no training epochs"
    frame = frame[[USER, ITEM, SCORE, RANK]].reset_index(drop=True)
    wall = time.perf_counter() - started
    return Ranking(model, frame, all_ok(protocol.candidates), RunLog(), wall, note)


# --------------------------------------------------------------------------- the papers' rankers


def run_paper(
    protocol: Protocol, paper: str, config: Any = None, options: RunOptions | None = None
) -> dict[str, Ranking]:
    """A paper's rankers on the protocol's candidates, by method name.

    ``get(paper).rank(protocol.task, config, options)``: ``options.methods`` picks some of the
    paper's ``RANKERS`` (default: all); ``config`` is the paper's settings (default: the
    paper's own).

    Raises:
        KeyError: No paper of that name.
        NotImplementedError: The paper ranks no shared candidates (its ``RANKERS`` is empty).
    """
    return get(paper).rank(protocol.task, config, options)
