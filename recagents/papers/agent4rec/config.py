"""Agent4Rec's settings: the simulation config, whose defaults are the paper's, and constants.

The page geometry, the three social traits and their percentile cuts, and the recommenders
the paper compares are fixed by the paper; the simulator, the evaluation and the analyses all
read them from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from recagents.config import bounds, check_fields

TRAITS: tuple[str, ...] = ("activity", "conformity", "diversity")
"""The three social traits, in the order the paper lists them."""

TRAIT_CUTS: dict[str, tuple[float, float]] = {
    "activity": (60.0, 90.0),
    "conformity": (25.0, 80.0),
    "diversity": (33.0, 66.0),
}
"""Percentiles (over all users of the dataset) that cut each trait statistic into 3 levels."""


@dataclass(frozen=True)
class Agent4RecConfig:
    """Settings of a simulation; the defaults are the paper's (the released runs').

    Attributes:
        items_per_page: Items on one page (4).
        max_pages: Most pages an agent sees (5).
        like_threshold: A watched item counts as liked when rated above this (3).
        persona_items: Most training ratings the persona is written from (25).
        memory_top_k: Memories retrieved into each page and exit prompt (5).
        reflect_after: Pages after which the agent condenses its memory into a
            satisfaction sentence (the official code: every 4 memory writes, i.e. after
            pages 2 and 4).
        temperature: Sampling temperature of every call (0.2).
        domain: The noun prompts use for an item.
        seed: Seeds sampling (the official code uses 101).
        prompts: ``"ours"`` (our prompts in our own words, JSON replies) or ``"released"``
            (the authors' prompt text, read from their release at run time, and free-text
            replies parsed by our parser).
    """

    items_per_page: int = field(default=4, metadata=bounds(1))
    max_pages: int = field(default=5, metadata=bounds(1))
    like_threshold: float = 3.0
    persona_items: int = field(default=25, metadata=bounds(1))
    memory_top_k: int = field(default=5, metadata=bounds(0))
    reflect_after: tuple[int, ...] = (2, 4)
    temperature: float = field(default=0.2, metadata=bounds(0, 2))
    domain: str = "movie"
    seed: int = 101
    prompts: Literal["ours", "released"] = "ours"

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def list_length(self) -> int:
        """Items a recommender must rank per agent (pages x items per page)."""
        return self.items_per_page * self.max_pages


#: The recommenders the paper compares, by our name -> RecBole model (None: no training).
RECOMMENDERS = {
    "Random": None,
    "Pop": "Pop",
    "MF": "BPR",
    "MultVAE": "MultiVAE",
    "LightGCN": "LightGCN",
}
