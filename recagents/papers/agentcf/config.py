"""AgentCF's settings and constants: the run config whose defaults are the paper's settings.

:class:`AgentCFConfig` holds every knob of a run (each quirk of the official code is an option
whose default is the paper's behaviour); :data:`VARIANTS` and :data:`ABLATIONS` name the
rankers and training modes, and the column names below are shared by the other modules.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from recagents.config import ConfigError, bounds, check_fields

if TYPE_CHECKING:
    from recagents.data.datasets import Dataset


#: Column names of the schedule, the training log and the probes.
ROLE = "role"
SLOT = "slot"
STEP = "step"
BATCH = "batch"
POSITIVE = "positive"
NEGATIVE = "negative"

#: Ranking variants: the paper's three, plus two rankers that need no trained user agent.
VARIANTS = ("B", "B+H", "B+R", "LLMRank", "history-user")

#: Training modes: the full method and the paper's three ablations (Table 3).
ABLATIONS = ("full", "no_autonomy", "no_item_agent", "no_user_agent")

#: The paper's subsets as released (:func:`recagents.data.load_dataset` names), by kind: on
#: either, a subset of that kind is drawn from its release, not re-made.
RELEASED_DATASETS = {"dense": "cds-dense", "sparse": "cds-sparse"}

#: Where the 9 test negatives come from (see :attr:`AgentCFConfig.candidate_pool`).
CandidatePool = Literal["subset", "dataset", "released"]


def on_release(dataset: Dataset) -> bool:
    """Whether ``dataset`` is one of the paper's released CDs subsets."""
    return dataset.name in RELEASED_DATASETS.values()


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class AgentCFConfig:
    """Settings of one AgentCF run; the defaults are the paper's (official code's) settings.

    Attributes:
        domain: The noun the prompts use for an item ("movie", "CD", "office product");
            ``None`` (the default): the dataset's (:meth:`for_dataset`), and "movie" where no
            dataset is at hand. The verb and first item description follow it
            (:data:`recagents.papers.agentcf.prompts.DOMAIN_WORDING`).
        n_targets: Training targets per user (the paper: 5, in time order).
        batch_size: Distinct users per batch; all calls of a batch see one memory state.
            ``1`` makes every update sequential (the fix for "last write wins").
        rounds: Forward/reflection rounds per batch (the paper: 2).
        steps: Train on the first ``steps`` targets of every user only (``None``: all, as the
            paper); fewer is a documented deviation that saves calls, and ``0`` trains
            nothing (the untrained agents rank: a cheap smoke setting, not AgentCF).
        pair_order: Order of the pair in the forward prompt. The paper always shows the
            negative first (``"neg_first"``); ``"random"`` shuffles with ``seed``.
        update_negative: Also store the negative item's rewritten description (the paper
            stores only the positive's).
        exclude_future_negatives: Never draw the user's valid or test item as a training
            negative (the paper's sampler can).
        user_words: Word limit the prompt asks of a self-description (the paper: 180).
        item_words: Word limit the prompt asks of an item description (the paper: 50).
        temperature: Sampling temperature of training calls (the official code: 0.2).
        eval_temperature: Sampling temperature of ranking and probe calls (the official code
            uses 0.2 although its config says 0).
        history_len: Most history items shown to B+H and the history-based rankers.
        history_as_memories: B+H shows the history items' memories instead of titles only
            (the paper passes titles).
        seed: Seeds negatives, pair order and tie-breaks (RecBole's default seed).
        zero_shot_history_len: History titles the zero-shot LLM ranker of
            :func:`~recagents.papers.agentcf.entry.rank` shows (on shared candidates).
        subsets: The subsets :func:`~recagents.papers.agentcf.entry.run` trains agents on,
            each drawn anew (the paper: both).
        candidate_pool: Where ``run``'s 9 test negatives come from: ``"released"``, the
            paper's own lists (the first 9 of each user's pre-drawn ``.random`` list, only on
            a released CDs subset); the ``"subset"``'s items, drawn as the paper does but
            never from the user's history; or the whole ``"dataset"`` (for a subset too small
            for 1 + 9). ``None`` (the default): :meth:`pool_for` the dataset, ``"released"``
            on the CDs releases and ``"subset"`` elsewhere.
        baselines: Classic models ``run`` trains on each subset (the paper's "sampled"
            rows); only when the subset holds every candidate: they cannot score unseen
            items.
        full_data_baselines: Classic models ``run`` trains on every user's data (the
            paper's "full" rows).
        sample_seed: Seeds ``run``'s user sample, test candidates, classic tie-breaks and
            bootstrap intervals (notebook 01's ``SEED``).
    """

    domain: str | None = None
    n_targets: int = field(default=5, metadata=bounds(1))
    batch_size: int = field(default=20, metadata=bounds(1))
    rounds: int = field(default=2, metadata=bounds(1))
    steps: int | None = field(default=None, metadata=bounds(0))
    pair_order: Literal["neg_first", "pos_first", "random"] = "neg_first"
    update_negative: bool = False
    exclude_future_negatives: bool = False
    user_words: int = field(default=180, metadata=bounds(10))
    item_words: int = field(default=50, metadata=bounds(5))
    temperature: float = field(default=0.2, metadata=bounds(0, 2))
    eval_temperature: float = field(default=0.2, metadata=bounds(0, 2))
    history_len: int = field(default=20, metadata=bounds(1))
    history_as_memories: bool = False
    seed: int = 2020
    zero_shot_history_len: int = field(default=10, metadata=bounds(1))
    subsets: tuple[Literal["dense", "sparse"], ...] = ("dense", "sparse")
    candidate_pool: CandidatePool | None = None
    baselines: tuple[str, ...] = ("Pop", "BPR", "SASRec", "LightGCN")
    full_data_baselines: tuple[str, ...] = ("Pop", "BPR", "SASRec", "LightGCN")
    sample_seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self)
        if self.steps is not None and self.steps > self.n_targets:
            raise ConfigError(
                f"AgentCFConfig.steps={self.steps} is more than n_targets={self.n_targets}"
            )
        if not self.subsets:
            raise ConfigError("AgentCFConfig.subsets=() names no subset: use dense and/or sparse")

    def for_dataset(self, dataset: Dataset) -> AgentCFConfig:
        """These settings with ``domain`` taken from the dataset when none was given."""
        if self.domain is not None:
            return self
        return dataclasses.replace(self, domain=getattr(dataset, "domain", None) or "movie")

    def pool_for(self, dataset: Dataset) -> CandidatePool:
        """The candidate pool used on ``dataset``: :attr:`candidate_pool` or the dataset's.

        Raises:
            ConfigError: ``"released"`` on data other than the CDs releases, or a window other
                than the released 8 items on them.
        """
        released = on_release(dataset)
        if released and self.n_targets != 5:
            raise ConfigError(
                f"AgentCFConfig.n_targets={self.n_targets}: {dataset.name}'s windows are "
                "the released 8 items (5 targets)"
            )
        if self.candidate_pool is None:
            return "released" if released else "subset"
        if self.candidate_pool == "released" and not released:
            raise ConfigError(
                f"AgentCFConfig.candidate_pool='released' needs a released CDs subset "
                f"({', '.join(RELEASED_DATASETS.values())}), not {dataset.name}"
            )
        return self.candidate_pool

    @property
    def window(self) -> int:
        """Interactions per user: one history-only prefix, the targets, valid and test."""
        return self.n_targets + 3

    @property
    def n_steps(self) -> int:
        """Targets actually trained on per user."""
        return self.n_targets if self.steps is None else self.steps
