"""InteRecAgent's settings and constants: the paper's values as defaults, in one place.

- The tool chain's constants: the bus cap, what ``rank`` keeps, the observation budget, the
  soft filter's share of the catalogue, the title separator, the rank schemas, and the six
  tool names with the one-line description of each that prompts show.
- :class:`InteRecConfig`: every setting of the agent (plan-first or ReAct, demonstrations,
  reflection, summariser, bus, memory), with :data:`DEMO_MODES` and the :data:`APOLOGY` a
  failed turn replies with.
- :class:`SimulatorConfig`: the simulated user and the hit rules of the evaluation, with
  :data:`END` (the simulator's end marker) and :data:`METHODS` (the compared methods).
- :class:`ExperimentConfig`: the notebook's experiment (``entry.run``): agent, simulator and
  the sizes a profile does not fix.

Every other module of the package reads its settings from here; this one imports none of
them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from recagents.config import bounds, check_fields

# --------------------------------------------------------------------------- tools


#: Most candidates the bus holds after a tool writes to it (the paper's cap).
BUS_CAP = 1000
#: Candidates kept by :func:`rank` (the paper's top 100).
RANK_KEEP = 100
#: Longest observation or error text any tool returns (map_titles' list of 100 titles fits);
#: lookup and hard_filter keep to the smaller ``ToolContext.lookup_chars``.
OBSERVATION_CHARS = 4000
#: Soft filter's share of the catalogue: 0.1 in the paper's evaluation, 0.05 in its app.
TOP_RATIO_EVAL = 0.1
TOP_RATIO_APP = 0.05
#: Separator between titles in the input of candidate_store and soft_filter.
TITLE_SEPARATOR = ";;"
#: Ranking schemas the rank tool understands.
RANK_SCHEMAS = ("popularity", "similarity", "preference")
#: The tools a plan may call, in the order a typical plan uses them.
TOOL_NAMES = ("candidate_store", "lookup", "hard_filter", "soft_filter", "rank", "map_titles")
#: One line per tool for the planner prompt (the project's own words).
TOOL_DESCRIPTIONS = {
    "candidate_store": (
        "Input: the titles the user names, separated by ';;'. Makes exactly those items the "
        "candidates, e.g. when the user asks to choose among them."
    ),
    "lookup": (
        "Input: one SQL SELECT on the table items. Answers questions about items (year, "
        "genres, popularity); returns the rows. Does not change the candidates."
    ),
    "hard_filter": (
        "Input: one SQL SELECT on the table items that selects the id column, e.g. "
        "SELECT id FROM items WHERE tags LIKE '%Comedy%'. Keeps the candidates that match "
        "hard conditions (genre, year, popularity, rating)."
    ),
    "soft_filter": (
        "Input: seed titles separated by ';;'. Keeps the candidates most similar to the seeds "
        "(people who liked one liked the other), most similar first."
    ),
    "rank": (
        'Input: {"schema": "popularity" | "similarity" | "preference", "prefer": [titles the '
        'user likes], "unwanted": [titles to exclude]}. Orders the candidates and keeps the '
        "best 100."
    ),
    "map_titles": (
        "Input: how many items to recommend (default 5). Turns the first candidates into "
        "titles; always the last step."
    ),
}


# --------------------------------------------------------------------------- agent


#: How demonstrations are chosen.
DemoMode = Literal["dynamic", "fixed", "zero"]
DEMO_MODES: tuple[str, ...] = get_args(DemoMode)
#: What the agent says when its plan failed (``{domain}`` is filled in).
APOLOGY = (
    "Sorry, I could not work out how to find {domain}s for that. Could you say it another way?"
)


@dataclass(frozen=True)
class InteRecConfig:
    """Every setting of the InteRecAgent agent; the defaults are the paper's.

    Attributes:
        domain: The item noun used in prompts ("movie").
        plan_mode: ``"plan_first"`` (one LLM call writes the whole plan; the paper's agent)
            or ``"react"`` (one tool per call, at most ``react_max_iterations`` calls; the
            "w/o plan-first" ablation).
        demo_mode: ``"dynamic"`` (the ``num_demos`` demonstrations nearest to the request by
            text embedding), ``"fixed"`` (the first ``num_demos``) or ``"zero"`` (none).
        num_demos: Demonstrations per prompt. The paper's text says 3; its released code
            uses 5 in the multi-turn evaluation (and 3 one-turn).
        reflection: Whether the critic reviews each turn (actor-critic reflection).
        max_reflections: Most re-plans per turn after the critic said "no" (paper: 3).
        replan_on_failure: Feed an invalid or failing plan's problems back to the planner as
            advice (counts as a reflection, needs ``reflection``); ``False`` replies with
            :data:`APOLOGY` at once.
        planner_temperature: Sampling temperature of the planner and the ReAct steps (0).
        summariser: Whether a summariser writes the reply (paper's app: on; its simulator
            evaluation: off, the executor's output is the reply).
        summariser_temperature: Summariser temperature (paper: 1.0).
        critic_temperature: Critic temperature (paper: 0).
        llm_only_temperature: Temperature of the "LLM without tools" baseline (paper: 0.8).
        persistent_bus: Keep the candidates between turns (the paper resets the bus to all
            items every turn, so "from the list above" only works if re-stored).
        map_n: Recommendations per turn when the plan does not say (paper: 5).
        react_max_iterations: Most LLM steps of a ReAct turn (paper: 5).
        history_turns: Most recent dialogue turns (a user message and the agent's reply each)
            shown to the planner, critic and summariser; the paper keeps the full dialogue,
            which has at most 5 turns in its evaluation.
        message_chars: Each remembered message is cut to this many characters.
        answer_chars: Longest direct answer / summary the schema allows.
        advice_chars: Longest critic advice (the paper's critic writes at most 128 tokens).
        planner_max_tokens: Most generated tokens of a planner reply.
        react_max_tokens: Most generated tokens of one ReAct step.
        critic_max_tokens: Most generated tokens of a critic reply.
        summariser_max_tokens: Most generated tokens of a summary.
        llm_only_max_tokens: Most generated tokens of the LLM-only baseline's reply.
        profile_memory: Keep a profile of the titles the user says they like and dislike
            (one LLM extraction call per turn, before the planner), show it to the planner
            and the critic, and merge it into every rank step's ``prefer`` / ``unwanted``
            (the paper's optional long-term memory; off in its released code).
        profile_titles: Most titles per list of one extraction reply.
        profile_max_tokens: Most generated tokens of one extraction reply.
        seed: Sampling seed sent with every request.
    """

    domain: str = "movie"
    plan_mode: Literal["plan_first", "react"] = "plan_first"
    demo_mode: DemoMode = "dynamic"
    num_demos: int = field(default=3, metadata=bounds(0))
    reflection: bool = True
    max_reflections: int = field(default=3, metadata=bounds(0))
    replan_on_failure: bool = True
    planner_temperature: float = 0.0
    summariser: bool = False
    summariser_temperature: float = 1.0
    critic_temperature: float = 0.0
    llm_only_temperature: float = 0.8
    persistent_bus: bool = False
    map_n: int = field(default=5, metadata=bounds(1))
    react_max_iterations: int = field(default=5, metadata=bounds(1))
    history_turns: int = field(default=5, metadata=bounds(0))
    message_chars: int = field(default=500, metadata=bounds(1))
    answer_chars: int = field(default=600, metadata=bounds(1))
    advice_chars: int = 400
    planner_max_tokens: int = 400
    react_max_tokens: int = 200
    critic_max_tokens: int = 200
    summariser_max_tokens: int = 200
    llm_only_max_tokens: int = 200
    profile_memory: bool = False
    profile_titles: int = field(default=5, metadata=bounds(1))
    profile_max_tokens: int = 120
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self)


# --------------------------------------------------------------------------- evaluation


#: The marker a simulated user writes when it got its item.
END = "<END>"
#: Methods of the evaluation: the agent, the LLM without tools, and (one-turn only) baselines.
METHODS = ("InteRecAgent", "LLM only", "Random", "Pop")


@dataclass(frozen=True)
class SimulatorConfig:
    """The user simulator and the hit rules; the defaults are the paper's.

    Attributes:
        temperature: Simulator sampling temperature (paper: 0.8).
        sees_title: The simulator is told the target's title (paper: yes, which is why its
            messages can leak it); ``False`` gives it the attributes only.
        max_regenerations: Regenerations of a leaking message (paper: 5), then it is used.
        leak_threshold: Fuzzy partial ratio at or above which a message leaks (paper: 60).
        hit_threshold: Fuzzy partial ratio above which a reply hits (paper: 80).
        drop_leaking: End a conversation whose message still leaks after the regenerations
            and leave it out of :func:`conversation_metrics` (paper: keep it).
        stop_on: When a conversation ends early: ``"both"`` (both hit rules have hit; each
            rule's hit turn is then unaffected by the other), ``"either"``, ``"id"`` or
            ``"fuzzy"`` (the paper's).
        max_hints: Most hints per message the simulator is told to give (paper: about 2).
        message_chars: Longest simulator message the schema allows.
        max_tokens: Most generated tokens per simulator message.
        seed: Sampling seed; regeneration *r* uses ``seed + r`` and cache sample index *r*.
    """

    temperature: float = 0.8
    sees_title: bool = True
    max_regenerations: int = field(default=5, metadata=bounds(0))
    leak_threshold: float = 60.0
    hit_threshold: float = 80.0
    drop_leaking: bool = False
    stop_on: Literal["both", "either", "id", "fuzzy"] = "both"
    max_hints: int = 2
    message_chars: int = 400
    max_tokens: int = 120
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class ExperimentConfig:
    """The notebook's experiment (``entry.run``): the agent, the simulated user, the sizes.

    A size left ``None`` comes from the run's profile (``entry.PROFILES``), so ``None``
    everywhere is the experiment notebook 04 runs with its default parameters.

    Attributes:
        agent: The agent's settings; ``None``: the paper's, with ``max_reflections`` from the
            profile and this ``seed``.
        sim: The simulator's settings; ``None``: the paper's, with this ``seed``.
        max_turns: Most turns per conversation, the K of Hit@K and AT@K (``None``: the
            profile's; the paper: 5).
        n_one_turn: Users of the one-turn tasks (``None``: the profile's; the paper: 500).
        n_negatives: Negatives beside the target in the one-turn ranking (paper: 19).
        seed: Seeds the users, the candidates, the tools' context and the intervals.
    """

    agent: InteRecConfig | None = None
    sim: SimulatorConfig | None = None
    max_turns: int | None = field(default=None, metadata=bounds(1))
    n_one_turn: int | None = field(default=None, metadata=bounds(1))
    n_negatives: int = field(default=19, metadata=bounds(1))
    seed: int = 2023

    def __post_init__(self) -> None:
        check_fields(self)
