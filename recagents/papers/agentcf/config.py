"""AgentCF's settings and constants: the run config whose defaults are the paper's settings.

:class:`AgentCFConfig` holds every knob of a run (each quirk of the official code is an option
whose default is the paper's behaviour); :data:`VARIANTS` and :data:`ABLATIONS` name the
rankers and training modes, and the column names below are shared by the other modules.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

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
            paper); fewer is a documented deviation that saves calls.
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
    """

    domain: str | None = None
    n_targets: int = 5
    batch_size: int = 20
    rounds: int = 2
    steps: int | None = None
    pair_order: Literal["neg_first", "pos_first", "random"] = "neg_first"
    update_negative: bool = False
    exclude_future_negatives: bool = False
    user_words: int = 180
    item_words: int = 50
    temperature: float = 0.2
    eval_temperature: float = 0.2
    history_len: int = 20
    history_as_memories: bool = False
    seed: int = 2020

    def __post_init__(self) -> None:
        checks = {
            "n_targets": self.n_targets >= 1,
            "batch_size": self.batch_size >= 1,
            "rounds": self.rounds >= 1,
            "steps": self.steps is None or 1 <= self.steps <= self.n_targets,
            "pair_order": self.pair_order in ("neg_first", "pos_first", "random"),
            "user_words": self.user_words >= 10,
            "item_words": self.item_words >= 5,
            "history_len": self.history_len >= 1,
            "temperature": 0 <= self.temperature <= 2,
            "eval_temperature": 0 <= self.eval_temperature <= 2,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            values = {name: getattr(self, name) for name in bad}
            raise ValueError(f"invalid AgentCF settings: {values}")

    def for_dataset(self, dataset: Dataset) -> AgentCFConfig:
        """These settings with ``domain`` taken from the dataset when none was given."""
        if self.domain is not None:
            return self
        return dataclasses.replace(self, domain=getattr(dataset, "domain", None) or "movie")

    @property
    def window(self) -> int:
        """Interactions per user: one history-only prefix, the targets, valid and test."""
        return self.n_targets + 3

    @property
    def n_steps(self) -> int:
        """Targets actually trained on per user."""
        return self.steps or self.n_targets
