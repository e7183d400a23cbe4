"""AgentCF's plug-in: notebook 01's experiment in one call, and its rankers on shared candidates.

:func:`run` is notebook 01's headline experiment (each subset drawn, its agents trained by
collaborative reflection, the LLM rankers and the classic models on 1 + 9 candidates, NDCG
with 95% bootstrap intervals): the notebook calls it and reads its tables. :func:`rank` puts
the zero-shot LLM ranker and AgentCF (trained on the shared users' windows) on candidates it
is given, for the cross-paper comparison.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from recagents.baselines import TrainConfig
from recagents.columns import USER
from recagents.data.datasets import Dataset, Split
from recagents.llm.runlog import RunLog
from recagents.metrics import summarize_methods
from recagents.papers.agentcf import pipeline
from recagents.papers.agentcf.agents import AgentState, item_titles
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.agentcf.evaluate import RankOutcome, rank_candidates
from recagents.papers.agentcf.subsets import shared_subset
from recagents.protocol import PaperRun, Ranking, RankTask, RunOptions, metric_rows

PAPER = "AgentCF"
NOTEBOOK = "01_agentcf"
#: The paper's own data: its released CDs-dense subset (the sparse subset of a run on it is
#: drawn from CDs-sparse, :func:`~recagents.papers.agentcf.pipeline.draw`).
DATASET = "cds-dense"

#: The LLM rankers :func:`run` compares (beside the config's classic models and Random).
METHODS = tuple(pipeline.LLM_RANKERS)

#: The zero-shot ranker of :func:`rank` (AgentCF's LLMRank prompt, no agents).
ZERO_SHOT = "Zero-shot LLM"

#: What :func:`rank` puts on shared candidates (the names on notebook 06's leaderboard).
RANKERS = (ZERO_SHOT, "AgentCF B", "AgentCF B+H", "AgentCF B+R")

#: The tables of :attr:`PaperRun.tables` returned by :func:`run`, each with a ``subset``
#: column (rankings, parses and per-user scores also a ``method`` column).
TABLES = (
    "windows", "candidates", "pairs", "rankings", "parses", "per_user", "summary", "events",
)  # fmt: skip

#: Notebook 01's sizes per profile: subsets (the paper's Table 2 reports both; the ablations
#: and the seeds run on the first), users per subset, training steps, batch size, the
#: classic models' epochs, the models trained on all users (on the CDs data: the release's
#: 100), the users of the memory-quality experiment and the seeds of the B+R - B comparison.
PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {"subsets": ["dense"], "n_users": 3, "steps": 1, "batch": 3, "epochs": 5,
              "full_data": ["Pop", "BPR"], "memory_users": 0, "seeds": 2},
    "default": {"subsets": ["dense"], "n_users": 8, "steps": 2, "batch": 8,
                "epochs": 100, "full_data": ["Pop", "BPR"], "memory_users": 10, "seeds": 2},
    "paper": {"subsets": ["dense", "sparse"], "n_users": 100, "steps": 5, "batch": 20,
              "epochs": 300, "full_data": ["Pop", "BPR", "SASRec", "LightGCN"],
              "memory_users": 100, "seeds": 5},
}  # fmt: skip


def default_config(profile: str = "default") -> AgentCFConfig:
    """The settings notebook 01 builds from its default parameters at ``profile``."""
    sizes = RunOptions(profile=profile).sizes(PROFILES)
    return AgentCFConfig(
        batch_size=sizes["batch"],
        steps=sizes["steps"],
        subsets=tuple(sizes["subsets"]),
        full_data_baselines=tuple(sizes["full_data"]),
    )


def sample_training(profile: str = "default") -> TrainConfig:
    """The classic models' training on a subset at ``profile`` (its ``epochs``)."""
    return TrainConfig(epochs=RunOptions(profile=profile).sizes(PROFILES)["epochs"])


@dataclass
class AgentCFRun(PaperRun):
    """:class:`~recagents.protocol.PaperRun` plus each subset's objects, for inspection.

    Attributes:
        parts: Subset kind -> its :class:`~recagents.papers.agentcf.pipeline.SubsetRun`
            (the agents before and after training, the ranking outcomes, per-user scores).
    """

    parts: dict[str, pipeline.SubsetRun] = field(default_factory=dict)


def run(
    dataset: Dataset,
    config: AgentCFConfig | None = None,
    options: RunOptions | None = None,
) -> AgentCFRun:
    """Notebook 01's experiment: per subset, train the agents, rank 1 + 9 candidates, score.

    For each of ``config.subsets``: :func:`~recagents.papers.agentcf.pipeline.run_subset`
    (users and candidates drawn with ``config.sample_seed``, on the CDs data from the release
    of the subset's kind with the paper's candidate lists; agents trained, each method ranks,
    then the classic models and Random), and NDCG@1/5/10 per method with 95% bootstrap
    intervals over users.

    Args:
        dataset: The dataset (titles, genres, user features); ``cds-dense`` or
            ``cds-sparse`` runs every subset on its release.
        config: The settings (default: notebook 01's at ``options.profile``,
            :func:`default_config`).
        options: The shared arguments (:class:`~recagents.protocol.RunOptions`): ``n_users``
            per subset (default: the profile's), ``methods`` of :data:`METHODS`, ``training``
            of the classic models on a subset (default: :func:`sample_training`).

    Returns:
        :class:`AgentCFRun` with :data:`TABLES` and the metrics
        ``ndcg@K/<subset>/<method>`` (e.g. ``ndcg@10/dense/AgentCF B+R``).
    """
    started = time.perf_counter()
    options = options or RunOptions()
    config = (config or default_config(options.profile)).for_dataset(dataset)
    methods = options.chosen_methods(PAPER, METHODS)
    n_users = options.users(PROFILES, "n_users")
    training = options.training or sample_training(options.profile)
    client = options.resolved_client()
    parts: dict[str, pipeline.SubsetRun] = {
        kind: pipeline.run_subset(
            dataset, kind, n_users, config, client, methods, config.sample_seed, training,
            options.progress,
        )
        for kind in config.subsets
    }  # fmt: skip
    log = RunLog()
    for part in parts.values():
        log.extend(part.log)
    options.record(log)
    summary = _stacked(
        {
            kind: summarize_methods(part.per_user, n_boot=options.n_boot, seed=config.sample_seed)
            for kind, part in parts.items()
        }
    )
    tables = {
        "windows": _stacked({k: p.subset.windows for k, p in parts.items()}),
        "candidates": _stacked({k: p.candidates for k, p in parts.items()}),
        "pairs": _stacked({k: p.pairs for k, p in parts.items()}),
        "rankings": _stacked({k: _stacked(p.rankings, "method") for k, p in parts.items()}),
        "parses": _stacked(
            {
                k: _stacked({m: o.parses for m, o in p.outcomes.items()}, "method")
                for k, p in parts.items()
            }
        ),
        "per_user": _stacked({k: _stacked(p.per_user, "method") for k, p in parts.items()}),
        "summary": summary,
        "events": _stacked({k: p.log.events_frame() for k, p in parts.items()}),
    }
    metrics = metric_rows(summary, ("subset", "method"))
    wall = time.perf_counter() - started
    return AgentCFRun(PAPER, config, tables, metrics, log, wall, parts)


def _stacked(frames: dict[str, pd.DataFrame], label: str = "subset") -> pd.DataFrame:
    """One frame per name, stacked with a leading ``label`` column (the name)."""
    whole = pd.concat([f.assign(**{label: name}) for name, f in frames.items()], ignore_index=True)
    return whole[[label, *[c for c in whole.columns if c != label]]]


# --------------------------------------------------------------------------- shared candidates


def _shared_truth(split: Split, candidates: pd.DataFrame) -> pd.DataFrame:
    """``[user_id, item_id]`` of the held-out test items of the candidates' users, sorted."""
    truth = split.truth("test")
    users = set(candidates[USER])
    return truth[truth[USER].isin(users)].sort_values(USER).reset_index(drop=True)


def _status(outcome: RankOutcome) -> pd.DataFrame:
    return outcome.parses[[USER, "status"]].reset_index(drop=True)


def rank(
    task: RankTask,
    config: AgentCFConfig | None = None,
    options: RunOptions | None = None,
) -> dict[str, Ranking]:
    """The zero-shot LLM ranker and AgentCF's variants on shared candidates.

    ``Zero-shot LLM``: each user's last ``config.zero_shot_history_len`` titles before the
    test item and the candidates in display order, AgentCF's LLMRank prompt, no agents.
    ``AgentCF <variant>``: the agents trained once by collaborative reflection on each user's
    window (:func:`~recagents.papers.agentcf.subsets.shared_subset`; ``config.steps``: ``None``
    trains every target, as the paper, ``0`` none), then each variant ranks; each variant's
    ranking carries the shared training calls and time *plus* its own ranking, so a cost table
    shows what one variant costs. Replies are checked with
    :func:`recagents.protocol.parse_ranking` and completed by the ``repaired`` scorer; an
    unusable reply is ``failed`` in the status and its user ranked at random.

    Args:
        task: The shared candidates (``task.seed`` seeds the subsets).
        config: AgentCF settings (default: the paper's); the prompts use the dataset's domain.
        options: ``methods`` of :data:`RANKERS` (default: all), ``client``, ``log``,
            ``progress``.

    Returns:
        Method -> its ranking; AgentCF's note says ``"no training"`` or ``"<n> training
        step(s)"``.
    """
    options = options or RunOptions()
    config = (config or AgentCFConfig()).for_dataset(task.dataset)
    methods = options.chosen_methods(PAPER, RANKERS)
    client = options.resolved_client()
    truth = _shared_truth(task.split, task.candidates)
    titles = item_titles(task.dataset)
    rankings: dict[str, Ranking] = {}
    whole = RunLog()
    if ZERO_SHOT in methods:
        started = time.perf_counter()
        history = config.zero_shot_history_len
        subset = shared_subset(task.dataset, truth, max(1, history - 2), task.seed)
        log = RunLog()
        outcome = rank_candidates(
            AgentState({}, {}, {}), subset, task.candidates, titles, "LLMRank",
            dataclasses.replace(config, history_len=history), client, log, phase=ZERO_SHOT,
        )  # fmt: skip
        wall = time.perf_counter() - started
        rankings[ZERO_SHOT] = Ranking(ZERO_SHOT, outcome.ranked, _status(outcome), log, wall)
        whole.extend(log)
    variants = [method.removeprefix("AgentCF ") for method in methods if method != ZERO_SHOT]
    if variants:
        started = time.perf_counter()
        subset = shared_subset(task.dataset, truth, config.n_targets, task.seed)
        _, _, state, train_log = pipeline.train_agents(
            task.dataset, subset, titles, config, client, options.progress
        )
        whole.extend(train_log)
        train_wall = time.perf_counter() - started
        note = "no training" if config.n_steps == 0 else f"{config.n_steps} training step(s)"
        for variant in variants:
            began = time.perf_counter()
            own = RunLog()
            outcome = rank_candidates(state, subset, task.candidates, titles, variant, config,
                                      client, own)  # fmt: skip
            whole.extend(own)
            log = RunLog()
            log.extend(train_log)
            log.extend(own)
            wall = train_wall + time.perf_counter() - began
            rankings[f"AgentCF {variant}"] = Ranking(
                f"AgentCF {variant}", outcome.ranked, _status(outcome), log, wall, note,
                extra={"outcome": outcome, "state": state},
            )  # fmt: skip
    options.record(whole)
    return {method: rankings[method] for method in methods}
