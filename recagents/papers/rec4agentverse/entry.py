"""Rec4Agentverse's plug-in: the three stages on the same simulated users in one call.

:func:`run` is notebook 05's headline experiment (sections 1-4; our demonstration protocol,
the paper has none): the curator agent items, simulated users with hidden tastes
(:func:`setting`), then every stage's protocol on them, run by the configured agents and by
the template baseline beside them, with each session metric per stage and mode and its 95%
bootstrap interval (:func:`compare_stages`). The notebook calls the same two steps in the
same order. Rec4Agentverse recommends agent items, so it ranks no shared candidates.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence

import pandas as pd

from recagents.data.datasets import Dataset, leave_one_out
from recagents.llm.runlog import RunLog
from recagents.papers.rec4agentverse.analysis import stage_comparison
from recagents.papers.rec4agentverse.catalogue import Catalogue, build_catalogue
from recagents.papers.rec4agentverse.config import STAGES, Rec4AConfig
from recagents.papers.rec4agentverse.session import SessionRun
from recagents.papers.rec4agentverse.stages import run_stages
from recagents.papers.rec4agentverse.users import SimUser, make_users
from recagents.protocol import PaperRun, Ranking, RankTask, RunOptions, metric_rows

PAPER = "Rec4Agentverse"
NOTEBOOK = "05_rec4agentverse"
DATASET = "ml-100k"

#: The protocols :func:`run` compares: stage 1, stages 1+2, stages 1+2+3.
METHODS = tuple(f"stage {stage}" for stage in STAGES)

#: None: the items recommended are agents, not candidates of the shared protocol.
RANKERS: tuple[str, ...] = ()

#: The tables of :attr:`PaperRun.tables`: the agent cards, the users' hidden tastes, the
#: stage comparison (``[stage, mode, metric, mean, low, high, n]``) and the
#: :class:`~recagents.papers.rec4agentverse.session.SessionRun` frames of both modes.
TABLES = ("catalogue", "users", "comparison", "sessions", "turns", "messages", "exposure")

#: Sizes per profile: simulated users, most turns per session, films per agent shortlist.
PROFILES = {
    "smoke": {"users": 2, "turns": 1, "shortlist": 10},
    "default": {"users": 16, "turns": 2, "shortlist": 12},
    "paper": {"users": 300, "turns": 3, "shortlist": 20},
}

#: Notebook 05's seed: the simulated users, the bootstrap and every request.
SEED = 2024


def default_config(profile: str = "default") -> Rec4AConfig:
    """The settings notebook 05 builds from its default parameters at ``profile``.

    Raises:
        ValueError: An unknown profile.
    """
    sizes = RunOptions(profile=profile).sizes(PROFILES)
    return Rec4AConfig(max_turns=sizes["turns"], shortlist_size=sizes["shortlist"], seed=SEED)


def setting(dataset: Dataset, n_users: int, seed: int) -> tuple[Catalogue, list[SimUser]]:
    """The agent items and ``n_users`` simulated users (seeded by ``seed``).

    Leave-one-out on ratings >= 4: the agents serve the training part (the adversary
    included; sessions leave it out unless ``include_adversary``), the users' targets are
    their held-out films.
    """
    split = leave_one_out(dataset, min_rating=4)
    return build_catalogue(dataset, split.train), make_users(split, dataset, n_users, seed=seed)


def compare_stages(
    catalogue: Catalogue,
    users: Sequence[SimUser],
    config: Rec4AConfig,
    options: RunOptions | None = None,
) -> PaperRun:
    """Every chosen stage on the same users, by ``config``'s agents and the template baseline.

    An ``llm`` configuration runs the template agents and users beside it (the same
    recommender), so the tables and metrics hold both modes; a ``template`` one runs once.
    Each session metric is averaged per stage and mode with a 95% bootstrap interval
    (:func:`stage_comparison`, seeded by ``config.seed``).

    Args:
        catalogue: The agent items.
        users: The simulated users.
        config: The settings.
        options: ``methods`` are stages of :data:`METHODS` (default: all three), ``client``
            is resolved only when the configuration calls a model, ``n_boot`` sizes the
            intervals; ``progress`` and ``training`` are unused.

    Returns:
        :class:`~recagents.protocol.PaperRun` with :data:`TABLES` and
        ``<metric>/stage <s>/<mode>`` for every metric of
        :data:`recagents.papers.rec4agentverse.config.METRICS`.
    """
    started = time.perf_counter()
    options = options or RunOptions()
    chosen = options.chosen_methods(PAPER, METHODS)
    stages = tuple(STAGES[METHODS.index(m)] for m in chosen)
    modes = [config]
    if config.agent_mode != "template":
        modes.append(dataclasses.replace(config, agent_mode="template"))
    client = options.resolved_client() if config.uses_llm else options.client
    own = RunLog()
    runs = SessionRun.concat([run_stages(users, catalogue, c, stages, client, own) for c in modes])
    options.record(own)
    comparison = stage_comparison(runs.sessions, n_boot=options.n_boot, seed=config.seed)
    labelled = comparison.assign(stage=[f"stage {s}" for s in comparison["stage"]])
    tables = {
        "catalogue": catalogue.table(),
        "users": _user_table(users),
        "comparison": comparison,
        **runs.tables(),
    }
    wall = time.perf_counter() - started
    return PaperRun(PAPER, config, tables, metric_rows(labelled, ("stage", "mode")), own, wall)


def run(
    dataset: Dataset,
    config: Rec4AConfig | None = None,
    options: RunOptions | None = None,
) -> PaperRun:
    """Rec4Agentverse's stage comparison in one call: :func:`setting`, :func:`compare_stages`.

    Args:
        dataset: The dataset (with a ``.user`` file).
        config: The settings (default: :func:`default_config` of ``options.profile``).
        options: The shared arguments (:class:`~recagents.protocol.RunOptions`); ``n_users``
            defaults to the profile's ``users``; the rest as in :func:`compare_stages`.
    """
    started = time.perf_counter()
    options = options or RunOptions()
    config = default_config(options.profile) if config is None else config
    catalogue, users = setting(dataset, options.users(PROFILES, "users"), config.seed)
    result = compare_stages(catalogue, users, config, options)
    result.wall_seconds = time.perf_counter() - started
    return result


def rank(
    task: RankTask, config: Rec4AConfig | None = None, options: RunOptions | None = None
) -> dict[str, Ranking]:
    """Not available: Rec4Agentverse recommends agent items, not shared candidates."""
    raise NotImplementedError(
        "Rec4Agentverse recommends agent items, not candidates of the shared protocol"
    )


def _user_table(users: Sequence[SimUser]) -> pd.DataFrame:
    """One row per simulated user: hidden tastes and held-out films (for inspection)."""
    rows = [dataclasses.asdict(user) for user in users]
    frame = pd.DataFrame(rows, columns=[f.name for f in dataclasses.fields(SimUser)])
    return frame.drop(columns=["demographics", "history"])
