"""AFL's settings: :class:`AFLConfig`, whose defaults are the paper's, and shared constants.

Every place where the paper and its released code disagree is an option here, so a run says
which reading it follows; the column names and the ways a dialogue can end are shared by the
loop, the user simulation and the evaluation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from recagents.config import ConfigError, bounds, check_fields

#: How a dialogue ended.
STOPS = ("accepted", "limit", "rec_failed", "user_failed")

ROUND = "round"
RATIO = "ratio"
AGENT = "agent"


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class AFLConfig:
    """Every setting of an AFL run; the defaults are the paper's.

    Attributes:
        domain: The item noun used in prompts (the paper's LastFM prompts say "music artist").
        n_candidates: Candidates per sample, the target included (paper: 20).
        history_length: Most recent items shown as the history (paper: 10).
        max_rounds: Round limit of the recommendation loop (paper: 5; 1 = single agent).
        user_rounds: Round limit of the user-simulation step 1 loop (paper's code: 4).
        ratios: Positives:negatives of the user-simulation sets (paper: 1:1, 1:3, 1:9).
        window: Held-out items per user in user simulation (paper: the last 10).
        seed: Seeds the candidates and the user-simulation sets (the paper's scripts: 303).
        temperature: Sampling temperature of both agents (paper: 0.0).
        focus_share: Share of the candidates in the user agent's focus list (paper's code:
            the tool's top quarter, 5 of 20).
        user_memory_in_loop: The in-loop user agent sees the earlier rounds. The paper
            describes it; the released code builds the memory-less prompt in both branches.
        user_signal: What the in-loop user agent gets from the tool: ``"hint"`` (the code:
            the tool's top pick and the focus list) or ``"score"`` (the paper's f_u: the raw
            tool score of the recommended item).
        prior_every_round: Show the tool's pick in every round (the code: only round 1).
        feedback_text: The recommendation agent's memory holds the user's stated reasons
            (``False`` is the ablation "without feedback text": rejected items only).
        faithful_parsing: Parse the paper's way: the reply names an item by its title and
            only an exact (case-insensitive) title match counts. Default: a schema-enforced
            index into the candidates.
        nest_negatives: User simulation draws one set of negatives per user and takes the
            first 10, 15 or 18 of it for 1:1, 1:3, 1:9 (every judgement asked once and
            shared between ratios). The paper draws each ratio's negatives afresh (``False``).
        reason_chars: Cap on the length of every stated reason (keeps replies short).
        max_tokens: Most tokens per reply.
    """

    domain: str = "movie"
    n_candidates: int = field(default=20, metadata=bounds(2))
    history_length: int = field(default=10, metadata=bounds(1))
    max_rounds: int = field(default=5, metadata=bounds(1))
    user_rounds: int = field(default=4, metadata=bounds(1))
    ratios: tuple[tuple[int, int], ...] = ((1, 1), (1, 3), (1, 9))
    window: int = field(default=10, metadata=bounds(1))
    seed: int = 303
    temperature: float = field(default=0.0, metadata=bounds(0))
    focus_share: float = field(default=0.25, metadata=bounds(high=1, above=0))
    user_memory_in_loop: bool = True
    user_signal: Literal["hint", "score"] = "hint"
    prior_every_round: bool = False
    feedback_text: bool = True
    faithful_parsing: bool = False
    nest_negatives: bool = False
    reason_chars: int = field(default=400, metadata=bounds(1))
    max_tokens: int = field(default=200, metadata=bounds(1))

    def __post_init__(self) -> None:
        check_fields(self)
        for positives, negatives in self.ratios:
            if positives < 1 or negatives < 1:
                raise ConfigError(
                    f"AFLConfig.ratios={self.ratios!r}: a ratio needs positives and negatives, "
                    f"got {positives}:{negatives}"
                )
            if self.positives_for((positives, negatives)) > self.window:
                raise ConfigError(
                    f"AFLConfig.ratios={self.ratios!r}: ratio {positives}:{negatives} needs "
                    f"more positives than the window of {self.window} holds"
                )

    @property
    def focus_size(self) -> int:
        """Items in the user agent's focus list (5 of 20 with the paper's settings)."""
        return max(1, math.ceil(self.focus_share * self.n_candidates))

    def positives_for(self, ratio: tuple[int, int]) -> int:
        """Positives in a set of ``n_candidates`` at ``ratio`` (10, 5, 2 of 20)."""
        positives, negatives = ratio
        return max(1, self.n_candidates * positives // (positives + negatives))


def ratio_name(ratio: tuple[int, int]) -> str:
    """``(1, 3)`` → ``"1:3"``."""
    return f"{ratio[0]}:{ratio[1]}"
