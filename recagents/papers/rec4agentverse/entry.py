"""Rec4Agentverse's entry point: the three stages on the same simulated users in one call.

:func:`run` is the one entry point every paper has, of the same shape
(``run(dataset, config, options)`` -> :class:`~recagents.protocol.PaperRun`, the shared
arguments in one :class:`~recagents.protocol.RunOptions`): the curator agent items,
``n_users`` simulated users with hidden tastes, every stage's protocol on them, and each
session metric per stage with 95% bootstrap intervals (notebook 05, sections 1-4; our
demonstration protocol, the paper has none). Rec4Agentverse ranks no shared candidates, so
it has no ``rank``. Everything here composes the package's public functions; nothing changes
their behaviour.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import pandas as pd

from recagents.data.datasets import Dataset, leave_one_out
from recagents.llm.runlog import RunLog
from recagents.papers.rec4agentverse.analysis import stage_comparison
from recagents.papers.rec4agentverse.catalogue import build_catalogue
from recagents.papers.rec4agentverse.config import STAGES, Rec4AConfig
from recagents.papers.rec4agentverse.stages import run_stages
from recagents.papers.rec4agentverse.users import SimUser, make_users
from recagents.protocol import PaperRun, RunOptions, metric_rows

PAPER = "Rec4Agentverse"

#: The protocols :func:`run` compares: stage 1, stages 1+2, stages 1+2+3.
METHODS = tuple(f"stage {stage}" for stage in STAGES)

#: Simulated users when :attr:`RunOptions.n_users` is ``None`` (notebook 05's default
#: profile).
DEFAULT_USERS = 8

#: The tables of :attr:`PaperRun.tables` returned by :func:`run`.
TABLES = ("catalogue", "users", "sessions", "turns", "messages", "exposure")


def run(
    dataset: Dataset,
    config: Rec4AConfig | None = None,
    options: RunOptions | None = None,
) -> PaperRun:
    """Rec4Agentverse's stage comparison in one call: the same users through every stage.

    Leave-one-out on ratings >= 4; the agent items (:func:`build_catalogue` on the training
    part, the adversary included as in notebook 05); ``options.n_users`` simulated users
    (:func:`make_users`, seeded by ``config.seed``);
    every chosen stage's protocol (:func:`run_stages`); each session metric per stage and
    mode (:func:`stage_comparison`). A ``template`` configuration with the ``classic``
    recommender makes no LLM call and needs no client.

    Args:
        dataset: The dataset (with a ``.user`` file).
        config: The settings (default: ours; the paper gives none).
        options: The shared arguments (:class:`~recagents.protocol.RunOptions`); here
            ``n_users`` defaults to :data:`DEFAULT_USERS`, ``methods`` are stages of
            :data:`METHODS` (default: all three), ``client`` is resolved only when the
            configuration calls a model, and ``progress`` and ``training`` are unused.

    Returns:
        :class:`~recagents.protocol.PaperRun` with :data:`TABLES` and
        ``<metric>/stage <s>/<mode>`` for every metric of
        :data:`recagents.papers.rec4agentverse.config.METRICS`.
    """
    started = time.perf_counter()
    config = config or Rec4AConfig()
    options = options or RunOptions()
    chosen = options.chosen_methods(PAPER, METHODS)
    stages = tuple(STAGES[METHODS.index(m)] for m in chosen)
    client = options.resolved_client() if config.uses_llm else options.client
    split = leave_one_out(dataset, min_rating=4)
    catalogue = build_catalogue(dataset, split.train)
    users = make_users(
        split,
        dataset,
        (DEFAULT_USERS if options.n_users is None else options.n_users),
        seed=config.seed,
    )
    own = RunLog()
    result = run_stages(users, catalogue, config, stages, client, own)
    options.record(own)
    comparison = stage_comparison(result.sessions, n_boot=options.n_boot, seed=config.seed)
    comparison = comparison.assign(stage=[f"stage {s}" for s in comparison["stage"]])
    tables = {
        "catalogue": catalogue.table(),
        "users": _user_table(users),
        **{name: getattr(result, name) for name in ("sessions", "turns", "messages", "exposure")},
    }
    wall = time.perf_counter() - started
    return PaperRun(PAPER, config, tables, metric_rows(comparison, ("stage", "mode")), own, wall)


def _user_table(users: Sequence[SimUser]) -> pd.DataFrame:
    """One row per simulated user: hidden tastes and held-out films (for inspection)."""
    rows = [dataclasses.asdict(user) for user in users]
    frame = pd.DataFrame(rows, columns=[f.name for f in dataclasses.fields(SimUser)])
    return frame.drop(columns=["demographics", "history"])
