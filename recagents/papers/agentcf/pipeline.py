"""AgentCF's experiment on one subset, step by step: draw, train, rank, score.

:func:`run_subset` is what notebook 01 runs on each subset (through
:func:`recagents.papers.agentcf.entry.run`): draw the users and their 1 + 9 candidates
(:func:`draw`: from the paper's release on its CDs data, re-made on any other), build
the agents and train them by collaborative reflection (:func:`train_agents`), rank with each
LLM ranker of :data:`LLM_RANKERS`, then the classic models (:func:`classic_rankings`), and
score every ranking per user. The same steps serve the seeds comparison
(:mod:`~recagents.papers.agentcf.seeds`) and :func:`~recagents.papers.agentcf.entry.rank`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from recagents.baselines import TrainConfig, random_scores, train_baseline
from recagents.columns import ITEM, LABEL, USER
from recagents.data.datasets import Dataset, leave_one_out
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunLog
from recagents.metrics import ranking_metrics
from recagents.papers.agentcf.agents import AgentState, initial_state, item_titles, train
from recagents.papers.agentcf.config import AgentCFConfig, on_release
from recagents.papers.agentcf.evaluate import RankOutcome, rank_candidates
from recagents.papers.agentcf.released_agents import draw_released, released_candidates
from recagents.papers.agentcf.subsets import (
    Subset,
    make_subset,
    schedule,
    subset_candidates,
    training_pairs,
)

#: The LLM rankers of a run, by method name: which agents rank, with which variant of
#: :func:`~recagents.papers.agentcf.evaluate.rank_candidates`.
LLM_RANKERS: dict[str, tuple[Literal["initial", "trained"], str]] = {
    "AgentCF untrained": ("initial", "B"),
    "LLMRank (zero-shot)": ("initial", "LLMRank"),
    "AgentCF B": ("trained", "B"),
    "AgentCF B+H": ("trained", "B+H"),
    "AgentCF B+R": ("trained", "B+R"),
}

#: RecBole hyper-parameters of the classic models (SASRec reads windows of 8 items).
MODEL_PARAMS = {"SASRec": {"MAX_ITEM_LIST_LENGTH": 10}}

#: Training of the models on every user's data: notebook 00's default profile, so that its
#: trained models are reused.
FULL_TRAINING = TrainConfig(epochs=30, stopping_step=5)

#: NDCG cut-offs of the per-user scores (the paper's Table 2).
KS = (1, 5, 10)


@dataclass
class SubsetRun:
    """One subset's experiment: its data, the agents before and after training, the rankings.

    Attributes:
        dataset: The data the subset was drawn from (on the CDs releases, the release of the
            subset's kind).
        subset: The users' windows (:func:`draw`).
        candidates: ``[user_id, item_id, label, position]``: test item and 9 negatives each.
        initial: The untrained agents.
        pairs: The scheduled training pairs.
        trained: The agents after collaborative reflection.
        log: Every call (training and ranking) and every memory event.
        outcomes: Each LLM ranker's rankings under both scorers and how its replies parsed.
        rankings: Every method's ``[user_id, item_id, score, rank]``: the LLM rankers, then
            the classic models and Random.
        per_user: Every method's NDCG@1/5/10 per user.
    """

    dataset: Dataset
    subset: Subset
    candidates: pd.DataFrame
    initial: AgentState
    pairs: pd.DataFrame
    trained: AgentState
    log: RunLog
    outcomes: dict[str, RankOutcome]
    rankings: dict[str, pd.DataFrame]
    per_user: dict[str, pd.DataFrame]

    @property
    def truth(self) -> pd.DataFrame:
        """``[user_id, item_id]``: each user's held-out test item."""
        return held_out(self.candidates)


def held_out(candidates: pd.DataFrame) -> pd.DataFrame:
    """``[user_id, item_id]`` of the candidates labelled 1 (each user's test item)."""
    return candidates.loc[candidates[LABEL] == 1, [USER, ITEM]]


def draw(
    dataset: Dataset,
    kind: Literal["dense", "sparse"],
    n_users: int | None,
    config: AgentCFConfig,
    seed: int = 0,
) -> tuple[Dataset, Subset, pd.DataFrame]:
    """A subset's data, users and 1 + 9 test candidates, seeded by ``seed``.

    On one of the paper's released CDs subsets (``cds-dense`` or ``cds-sparse``) the subset
    of ``kind`` is the release of that kind: ``n_users`` drawn uniformly from its users,
    windows as released (:func:`~recagents.papers.agentcf.released_agents.draw_released`);
    a sparse subset of a ``cds-dense`` run comes from ``cds-sparse``. On any other data it
    is re-made (:func:`~recagents.papers.agentcf.subsets.make_subset`). Candidates follow
    :meth:`AgentCFConfig.pool_for`: the paper's lists on a release (shuffled with
    ``config.seed``), else 9 negatives drawn with ``seed``.

    Returns:
        ``(data, subset, candidates)``: ``data`` is the release of ``kind`` on the CDs data,
        else ``dataset``.
    """
    pool = config.pool_for(dataset)
    if on_release(dataset):
        dataset, subset = draw_released(kind, n_users, seed)
    else:
        subset = make_subset(dataset, kind, n_users, config.n_targets, seed=seed)
    if pool == "released":
        candidates = released_candidates(subset, kind, 9, seed=config.seed)
    else:
        candidates = subset_candidates(subset, dataset, 9, seed=seed, pool=pool)
    return dataset, subset, candidates


def train_agents(
    dataset: Dataset,
    subset: Subset,
    titles: dict[str, str],
    config: AgentCFConfig,
    client: LLMClient,
    progress: bool = False,
) -> tuple[AgentState, pd.DataFrame, AgentState, RunLog]:
    """The initial agents, their scheduled pairs, and the agents after training on them.

    ``config.steps == 0`` trains nothing: the trained agents are the initial ones.

    Returns:
        ``(initial, pairs, trained, log)``.
    """
    initial = initial_state(dataset, subset, config.domain)
    if config.n_steps == 0:
        return initial, pd.DataFrame(), initial, RunLog()
    pairs = schedule(
        training_pairs(subset, config.seed, config.exclude_future_negatives),
        config.batch_size,
        config.steps,
    )
    trained, log = train(initial, pairs, subset, titles, config, client=client, progress=progress)
    return initial, pairs, trained, log


def classic_rankings(
    dataset: Dataset,
    subset: Subset,
    candidates: pd.DataFrame,
    config: AgentCFConfig,
    training: TrainConfig,
) -> dict[str, pd.DataFrame]:
    """The classic models' and Random's rankings of the candidates.

    ``config.baselines`` are trained on the subset (with ``training``; none when some
    candidate is no item of the subset, e.g. negatives from the whole dataset or the paper's
    lists on fewer users than the release), ``config.full_data_baselines`` on every user of
    ``dataset`` (with :data:`FULL_TRAINING`; on a CDs release, its 100 users); every model is
    cached, so a rerun loads its weights.
    """
    rankings = {}
    covered = set(candidates[ITEM]) <= set(subset.windows[ITEM])
    sample = config.baselines if covered else ()
    for name in sample:
        model = train_baseline(name, subset.split, training, MODEL_PARAMS.get(name), progress=False)
        rankings[f"{name} (same sample)"] = model.score(candidates, seed=config.sample_seed)
    if config.full_data_baselines:
        full_split = leave_one_out(dataset)
        for name in config.full_data_baselines:
            model = train_baseline(name, full_split, FULL_TRAINING, MODEL_PARAMS.get(name),
                                   progress=False)  # fmt: skip
            rankings[f"{name} (all users)"] = model.score(candidates, seed=config.sample_seed)
    rankings["Random"] = random_scores(candidates, seed=config.sample_seed)
    return rankings


def run_subset(
    dataset: Dataset,
    kind: Literal["dense", "sparse"],
    n_users: int,
    config: AgentCFConfig,
    client: LLMClient,
    methods: Sequence[str] = tuple(LLM_RANKERS),
    seed: int = 0,
    training: TrainConfig | None = None,
    progress: bool = False,
) -> SubsetRun:
    """One subset's experiment: draw, train, rank with ``methods``, then the classic models.

    The users and their candidates are drawn with ``seed`` (:func:`draw`: on the CDs data
    from the release of ``kind``); the agents are trained only when a method of ``methods``
    ranks with trained agents.

    Args:
        dataset: The dataset (titles, genres, user features); on a CDs release, either one.
        kind: ``"dense"`` or ``"sparse"``.
        n_users: Users in the subset.
        config: Settings (without a ``domain``: the dataset's).
        client: LLM client.
        methods: LLM rankers of :data:`LLM_RANKERS`, in the order they rank.
        seed: Seeds the users and the candidates.
        training: The classic models' training on the subset; ``None``: no classic models
            and no Random (the LLM rankers only).
        progress: Show a progress bar over training batches.
    """
    config = config.for_dataset(dataset)
    dataset, subset, candidates = draw(dataset, kind, n_users, config, seed)
    titles = item_titles(dataset)
    if not any(LLM_RANKERS[method][0] == "trained" for method in methods):
        config = dataclasses.replace(config, steps=0)
    initial, pairs, trained, log = train_agents(dataset, subset, titles, config, client, progress)
    states = {"initial": initial, "trained": trained}
    outcomes = {}
    for method in methods:
        agents, variant = LLM_RANKERS[method]
        outcomes[method] = rank_candidates(
            states[agents], subset, candidates, titles, variant, config, client, log,
            phase=f"rank {method}",
        )  # fmt: skip
    rankings = {method: outcome.ranked for method, outcome in outcomes.items()}
    if training is not None:
        rankings.update(classic_rankings(dataset, subset, candidates, config, training))
    truth = held_out(candidates)
    per_user = {
        method: ranking_metrics(ranked, truth, ks=KS, metrics=("ndcg",))
        for method, ranked in rankings.items()
    }
    return SubsetRun(
        dataset, subset, candidates, initial, pairs, trained, log, outcomes, rankings, per_user
    )
