"""Agent4Rec's plug-in: the recommender comparison by generative agents, in four steps.

:func:`run` is notebook 02's headline experiment (sections 1 and 3, the paper's Table 2):
:func:`population` (the split, every user's traits, the item lines and the agents' users),
:func:`make_agents` (their personas), :func:`browse` (each recommender's list browsed page by
page) and :func:`summarize` (engagement per recommender with 95% bootstrap intervals). On
:data:`DATASET`, ``agent4rec-ml1m``, the world is the authors' own: their 1,000 ML-1M agents
with the released split, trait levels, personas and movie summaries; on any other dataset
(``ml-100k``, an atomic dataset with ratings) it is built as the paper describes. The
notebook calls the same four steps in the same order, with its teaching sections between
them. Agent4Rec simulates users; it ranks no shared candidates.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from recagents import baselines
from recagents.columns import USER
from recagents.data import released
from recagents.data.datasets import Dataset, Split
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunLog
from recagents.papers.agent4rec.agents import (
    Agent,
    agents_from_released,
    build_agents,
    item_lines,
    random_split,
    released_agents,
)
from recagents.papers.agent4rec.config import RECOMMENDERS, TRAITS, Agent4RecConfig
from recagents.papers.agent4rec.engagement import engagement, engagement_summary
from recagents.papers.agent4rec.evaluate import rank_for_agents
from recagents.papers.agent4rec.loop import simulate
from recagents.papers.agent4rec.prompts import TRAIT_SENTENCES
from recagents.papers.agent4rec.released_prompts import ItemFacts, item_facts
from recagents.papers.agent4rec.traits import compute_traits
from recagents.protocol import PaperRun, Ranking, RankTask, RunOptions, metric_rows

PAPER = "Agent4Rec"
NOTEBOOK = "02_agent4rec"
DATASET = released.AGENT4REC_ML1M

#: The recommenders :func:`run` compares (the paper's five).
METHODS = tuple(RECOMMENDERS)

#: Agent4Rec simulates users; it ranks no shared candidates.
RANKERS: tuple[str, ...] = ()

#: The tables of :attr:`PaperRun.tables` returned by :func:`run`.
TABLES = ("agents", "rankings", "exposures", "sessions", "engagement", "summary", "problems")

#: Sizes per profile, read by notebook 02 and by :func:`run`: agents, pages, recommenders,
#: taste-probe ratios, feedback kinds, bubble rounds, causal-discovery threshold, training
#: epochs and recorded agents replayed per run (-1: all). The paper: 1,000 agents.
PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {"agents": 2, "pages": 1, "recommenders": ["Random", "Pop"], "ratios": [1, 9],
              "feedback": ["viewed"], "rounds": 1, "min_exposures": 1, "epochs": 3, "replay": 60},
    "default": {"agents": 8, "pages": 5, "recommenders": ["Random", "Pop", "MF",
                "MultVAE", "LightGCN"], "ratios": [1, 2, 3, 9], "feedback": ["viewed", "unviewed"],
                "rounds": 2, "min_exposures": 2, "epochs": 30, "replay": -1},
    "paper": {"agents": 1000, "pages": 5, "recommenders": ["Random", "Pop", "MF",
              "MultVAE", "LightGCN"], "ratios": [1, 2, 3, 9], "feedback": ["viewed", "unviewed",
              "random"], "rounds": 5, "min_exposures": 10, "epochs": 300,
              "replay": -1},
}  # fmt: skip


def train_config(profile: Mapping[str, Any]) -> baselines.TrainConfig:
    """The recommenders' training settings at a profile: its epochs, early stopping after 10."""
    return baselines.TrainConfig(epochs=int(profile["epochs"]), stopping_step=10, seed=2020)


@dataclass(frozen=True)
class Population:
    """The simulated world: the split, every user's traits, the items, the agents' users.

    Attributes:
        split: The released split (``agent4rec-ml1m``), else :func:`random_split` of every
            eligible user (the recommenders train on all).
        traits: The released trait levels, else :func:`compute_traits` of every user.
        lines: Item text by id, as an agent sees it (:func:`item_lines`: with the authors'
            summaries on ``agent4rec-ml1m``, else with genres).
        users: The eligible users, sorted.
        agent_users: The users drawn to become agents, sorted.
        personas: The authors' agents (:func:`released_agents`) on ``agent4rec-ml1m``, whose
            personas :func:`make_agents` uses as they are; ``None`` elsewhere (the LLM
            writes them).
        facts: Title, mean rating and summary by item, which the released prompts show
            (``config.prompts == "released"``); ``None`` with our prompts.
    """

    split: Split
    traits: pd.DataFrame
    lines: dict[str, str]
    users: list[str]
    agent_users: list[str]
    personas: pd.DataFrame | None = None
    facts: dict[str, ItemFacts] | None = None


def population(dataset: Dataset, config: Agent4RecConfig, n_agents: int) -> Population:
    """Step 1: the split, the traits, the item lines and ``n_agents`` users drawn, all seeded.

    On ``agent4rec-ml1m`` all of it is the authors' release: the split as released, their
    trait levels and personas, items with their summaries; otherwise the paper's random
    split of the dataset's ratings, traits computed from them, items with their genres.
    """
    personas = None
    if dataset.name == released.AGENT4REC_ML1M:
        _, split = released.load_agent4rec_ml1m()
        traits, personas = released.agent4rec_traits(), released_agents()
        lines = item_lines(dataset, split, describe="summary")
    else:
        split = random_split(dataset, n_users=None, seed=config.seed)
        traits, lines = compute_traits(dataset), item_lines(dataset, split)
    users = sorted(split.train[USER].unique())
    drawn = np.random.default_rng(config.seed).choice(users, n_agents, replace=False)
    facts = item_facts(dataset) if config.prompts == "released" else None
    return Population(split, traits, lines, users, sorted(drawn), personas, facts)


def make_agents(
    world: Population, config: Agent4RecConfig, client: LLMClient, log: RunLog
) -> dict[str, Agent]:
    """Step 2: one agent per drawn user.

    With the authors' agents (``world.personas``) their released persona and traits, no LLM
    call; otherwise a persona the LLM writes from the user's training ratings only.
    """
    if world.personas is not None:
        return agents_from_released(world.agent_users, world.personas)
    keep = set(world.agent_users)
    split = world.split
    own = Split(
        train=split.train[split.train[USER].isin(keep)],
        valid=split.valid[split.valid[USER].isin(keep)],
        test=split.test[split.test[USER].isin(keep)],
        name=split.name,
    )
    return build_agents(own, world.traits, world.lines, config, client, log)


@dataclass
class Browsed:
    """What the agents did with each recommender's list.

    Attributes:
        rankings: Each recommender's lists, ``[user_id, item_id, score, rank]``.
        models: Each recommender's trained model (``None``: Random), for retraining.
        exposures: Every item shown (:mod:`~recagents.papers.agent4rec.frames`).
        sessions: Every agent session.
    """

    rankings: dict[str, pd.DataFrame]
    models: dict[str, Any]
    exposures: pd.DataFrame
    sessions: pd.DataFrame


def browse(
    world: Population,
    agents: dict[str, Agent],
    recommenders: Sequence[str],
    config: Agent4RecConfig,
    client: LLMClient,
    log: RunLog,
    training: baselines.TrainConfig,
) -> Browsed:
    """Step 3: each recommender's list for the agents, browsed page by page.

    Each recommender ranks for the agents (:func:`rank_for_agents`, trained with ``training``)
    and every agent browses its list (:func:`simulate`); calls and problems go to ``log``.
    """
    rankings, models, exposures, sessions = {}, {}, [], []
    for name in recommenders:
        ranked, model = rank_for_agents(
            name, world.split, world.agent_users, config.list_length, training, seed=config.seed
        )
        rankings[name], models[name] = ranked, model
        shown, visits = simulate(agents, ranked, world.lines, TRAIT_SENTENCES, name, config,
                                 client, log, facts=world.facts)  # fmt: skip
        exposures.append(shown)
        sessions.append(visits)
    return Browsed(rankings, models, pd.concat(exposures, ignore_index=True),
                   pd.concat(sessions, ignore_index=True))  # fmt: skip


def summarize(
    agents: dict[str, Agent],
    browsed: Browsed,
    config: Agent4RecConfig,
    log: RunLog,
    n_boot: int,
    started: float,
) -> PaperRun:
    """Step 4: the engagement per recommender with 95% intervals, as a PaperRun.

    View, like, exit page and satisfaction per agent (:func:`engagement`), summarised per
    recommender (:func:`engagement_summary`). ``log`` holds the run's calls; ``started`` is
    the run's ``time.perf_counter()`` at its start.
    """
    per_agent = engagement(browsed.exposures, browsed.sessions,
                           like_threshold=config.like_threshold)  # fmt: skip
    summary = engagement_summary(per_agent, n_boot=n_boot, seed=config.seed)
    agent_rows = [
        {USER: user, **{t: agent.traits.get(t) for t in TRAITS}, "persona": agent.persona,
         "memories": len(agent.memory)}
        for user, agent in sorted(agents.items())
    ]  # fmt: skip
    tables = {
        "agents": pd.DataFrame(agent_rows, columns=[USER, *TRAITS, "persona", "memories"]),
        "rankings": pd.concat(
            [ranked.assign(recommender=name) for name, ranked in browsed.rankings.items()],
            ignore_index=True,
        ),
        "exposures": browsed.exposures,
        "sessions": browsed.sessions,
        "engagement": per_agent,
        "summary": summary,
        "problems": pd.DataFrame(sorted(log.problems.items()), columns=["problem", "count"]),
    }
    metrics = metric_rows(summary, ("recommender",))
    return PaperRun(PAPER, config, tables, metrics, log, time.perf_counter() - started)


def run(
    dataset: Dataset,
    config: Agent4RecConfig | None = None,
    options: RunOptions | None = None,
) -> PaperRun:
    """Agent4Rec's recommender comparison in one call (the paper's Table 2), as notebook 02.

    :func:`population`, :func:`make_agents`, :func:`browse`, :func:`summarize`.

    Args:
        dataset: ``agent4rec-ml1m`` (the authors' agents), or a dataset with ratings.
        config: The simulation's settings (default: the paper's, with the profile's pages).
        options: The shared arguments (:class:`~recagents.protocol.RunOptions`): ``n_users``
            (agents) and ``methods`` (recommenders of :data:`METHODS`) default to the
            profile's, ``training`` (the recommenders') to :func:`train_config` of the
            profile; ``progress`` is unused (the simulator shows the client's progress).

    Returns:
        :class:`~recagents.protocol.PaperRun` with :data:`TABLES` and
        ``<measure>/<recommender>`` for ``p_view``, ``n_like``, ``p_like``, ``exit_page``
        and ``satisfaction``. Unusable replies are counted in the ``problems`` table.
    """
    started = time.perf_counter()
    options = options or RunOptions()
    profile = options.sizes(PROFILES)
    config = config or Agent4RecConfig(max_pages=int(profile["pages"]))
    recommenders = options.chosen_methods(PAPER, METHODS, profile["recommenders"])
    training = options.training or train_config(profile)
    client, own = options.resolved_client(), RunLog()
    world = population(dataset, config, options.users(PROFILES, "agents"))
    agents = make_agents(world, config, client, own)
    browsed = browse(world, agents, recommenders, config, client, own, training)
    options.record(own)
    return summarize(agents, browsed, config, own, options.n_boot, started)


def rank(
    task: RankTask, config: Any = None, options: RunOptions | None = None
) -> dict[str, Ranking]:
    """Not available: Agent4Rec simulates users; it ranks no shared candidates.

    Raises:
        NotImplementedError: Always.
    """
    raise NotImplementedError("Agent4Rec simulates users; it ranks no shared candidates")
