"""Scripted (no LLM) players for every side of InteRecAgent's loop, with a skill knob.

Why: the embedded 135M model seldom writes a plan that finds anything, so with it every hit
is 0 and the paper's mechanism (a planner turns the user's conditions into tool calls, the
tools narrow the catalogue to the wanted item) stays invisible. Here three short rules play
the model's roles through the package's own loop (:func:`conversations.run_sessions`: the
simulator prompt, the planner prompt, validation, plan-first execution on the candidate
bus, the critic), answering as a :class:`~recagents.llm.scripted.ScriptedClient` named
``scripted:interecagent-skill-<s>``; no reply is an LLM's.

- The simulated user (:func:`user_message`): with probability ``skill`` it describes the
  held-out target faithfully, giving the next ``max_hints`` of its attributes (year,
  genres, popularity, rating: what the LLM simulator is told); otherwise it asks vaguely
  for something like a movie it enjoyed.
- The planner (:func:`informed_plan`, :func:`uninformed_plan`): with probability ``skill``
  it reads every condition the user stated so far and writes the right plan (a hard filter
  with those conditions as SQL, the soft filter for a named movie, a ranking); otherwise a
  plausible plan that ignores the request (a random genre, ranked by popularity).
- The critic accepts every executed plan (no re-plans; the planner's skill is the knob).

Each decision draws its own generator from ``(seed, role, turn, user)``, so a skill level
gives the same conversations whatever the order of the requests.
"""

from __future__ import annotations

import dataclasses
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from recagents.llm.client import ChatRequest
from recagents.llm.runlog import RunLog
from recagents.llm.scripted import ScriptedClient
from recagents.papers.interecagent.catalogue import ItemTable
from recagents.papers.interecagent.config import END, InteRecConfig, SimulatorConfig
from recagents.papers.interecagent.conversations import (
    ConversationRun,
    conversation_metrics,
    run_sessions,
)
from recagents.papers.interecagent.evaluate import (
    one_turn_metrics,
    one_turn_ranking,
    one_turn_retrieval,
)
from recagents.papers.interecagent.simulator import SessionSet, SessionSpec
from recagents.papers.interecagent.toolbox import ToolContext
from recagents.skill import check_skill, uses_truth

#: The roles a request can be for, told apart by its reply schema.
ROLES = ("simulator", "planner", "critic")

_YEAR = re.compile(r"released in (\d{4})")
_GENRES = re.compile(r"genres: ([^;]+?)\s*(?:;|\.\s*$|$)")
_RATING = re.compile(r"average rating (\d(?:\.\d)?) of 5")
_POPULARITY = re.compile(r"\b(not very well known|fairly well known|popular)\b")
_LIKED = re.compile(r"I enjoyed (.+? \(\d{4}\))")


@dataclass(frozen=True)
class Hints:
    """The conditions a user's messages state about the wanted item (none: ``None``/empty)."""

    year: int | None = None
    genres: tuple[str, ...] = ()
    popularity: str | None = None
    rating: float | None = None
    liked: tuple[str, ...] = ()

    @property
    def hard(self) -> bool:
        """Whether any condition the table can check (a hard condition) is stated."""
        return any(v not in (None, ()) for v in (self.year, self.genres, self.popularity,
                                                self.rating))  # fmt: skip


def read_hints(texts: Sequence[str]) -> Hints:
    """Every condition stated in the user's messages (the latest value of each wins)."""
    year = rating = popularity = None
    genres: tuple[str, ...] = ()
    liked: list[str] = []
    for text in texts:
        if match := _YEAR.search(text):
            year = int(match.group(1))
        if match := _GENRES.search(text):
            genres = tuple(g.strip() for g in match.group(1).split(",") if g.strip())
        if match := _RATING.search(text):
            rating = float(match.group(1))
        if match := _POPULARITY.search(text):
            popularity = match.group(1)
        liked += [m for m in _LIKED.findall(text) if m not in liked]
    return Hints(year, genres, popularity, rating, tuple(liked))


def popularity_bands(table: ItemTable) -> dict[str, tuple[int, int]]:
    """``visited_num`` ranges (inclusive) of the simulator's popularity words.

    :func:`simulator.target_attributes` calls an item "popular" when at least 80% of the
    items are seen less often, "not very well known" below 50%; these are the same cuts.
    """
    counts = np.sort(table.popularity(table.ids))
    values = np.unique(counts)
    below = np.searchsorted(counts, values, side="left") / len(counts)
    popular = int(values[below >= 0.8].min()) if (below >= 0.8).any() else int(values.max()) + 1
    known = int(values[below >= 0.5].min()) if (below >= 0.5).any() else popular
    top = int(values.max())
    return {"not very well known": (0, known - 1), "fairly well known": (known, popular - 1),
            "popular": (popular, top)}  # fmt: skip


def _quoted(text: str) -> str:
    return text.replace("'", "''")


def hard_filter_sql(hints: Hints, bands: Mapping[str, tuple[int, int]]) -> str | None:
    """The SELECT that keeps exactly the items meeting the stated hard conditions."""
    where = []
    if hints.year is not None:
        where.append(f"release_year = {hints.year}")
    where += [f"tags LIKE '%{_quoted(g)}%'" for g in hints.genres]
    if hints.popularity is not None and hints.popularity in bands:
        low, high = bands[hints.popularity]
        where.append(f"visited_num BETWEEN {low} AND {high}")
    if hints.rating is not None:
        where.append(f"avg_rating BETWEEN {hints.rating - 0.05:.2f} AND {hints.rating + 0.05:.2f}")
    return "SELECT id FROM items WHERE " + " AND ".join(where) if where else None


def informed_plan(hints: Hints, bands: Mapping[str, tuple[int, int]], k: int) -> list[dict]:
    """The right plan for what the user said: conditions as SQL, named movies as seeds, rank.

    Hard conditions become one hard_filter; with none, a named movie seeds the soft filter;
    the rank step prefers the named movies (SASRec reads them) or else orders by popularity.
    """
    plan: list[dict[str, Any]] = []
    sql = hard_filter_sql(hints, bands)
    if sql is not None:
        plan.append({"tool_name": "hard_filter", "input": sql})
    elif hints.liked:
        plan.append({"tool_name": "soft_filter", "input": ";;".join(hints.liked)})
    schema = "preference" if hints.liked else "popularity"
    plan.append(
        {
            "tool_name": "rank",
            "input": {"schema": schema, "prefer": list(hints.liked), "unwanted": []},
        }
    )
    plan.append({"tool_name": "map_titles", "input": k})
    return plan  # fmt: skip


def uninformed_plan(rng: np.random.Generator, genres: Sequence[str], k: int) -> list[dict]:
    """A plausible plan that ignores the request: one random genre, ranked by popularity."""
    genre = str(rng.choice(list(genres)))
    return [
        {"tool_name": "hard_filter", "input": f"SELECT id FROM items WHERE tags LIKE "
                                              f"'%{_quoted(genre)}%'"},
        {"tool_name": "rank", "input": {"schema": "popularity", "prefer": [], "unwanted": []}},
        {"tool_name": "map_titles", "input": k},
    ]  # fmt: skip


def user_message(
    spec: SessionSpec, said: Sequence[str], faithful: bool, rng: np.random.Generator,
    max_hints: int = 2,
) -> str:  # fmt: skip
    """The simulated user's next message: the next unstated attributes, or a vague wish.

    Faithful: the first ``max_hints`` attributes of the target (``spec.target_attributes``,
    in the order year, genres, popularity, rating) that its earlier messages ``said`` have
    not stated yet (all again once every one is stated). Vague: a wish for something like
    one movie of its history, which says nothing about the target.
    """
    attributes = [a.strip() for a in spec.target_attributes.split(";") if a.strip()]
    stated = read_hints(said)
    told = dataclasses.asdict(stated)
    fresh = [a for a in attributes if told[_attribute_key(a)] in (None, ())] or attributes
    if faithful:
        opening = "I'm looking for a movie" if not said else "Not what I want. More about it"
        return f"{opening}: {'; '.join(fresh[:max_hints])}."
    liked = str(rng.choice(list(spec.history_titles))) if spec.history_titles else ""
    ask = "Can you recommend a good movie?" if not said else "Not what I want. Anything else?"
    return f"{ask} I enjoyed {liked}." if liked else ask


def _attribute_key(attribute: str) -> str:
    """Which :class:`Hints` field one phrase of ``target_attributes`` states."""
    if attribute.startswith("released"):
        return "year"
    if attribute.startswith("genres"):
        return "genres"
    if attribute.startswith("average rating"):
        return "rating"
    return "popularity"


def _role(request: ChatRequest) -> str:
    keys = set((request.schema or {}).get("properties", {}))
    if "message" in keys:
        return "simulator"
    if "plan" in keys:
        return "planner"
    if "verdict" in keys:
        return "critic"
    raise ValueError(f"the scripted InteRecAgent answers {ROLES}, not a request with {keys}")


def _prompt_lines(request: ChatRequest) -> list[str]:
    return [line for m in request.messages if m["role"] == "user"
            for line in m["content"].splitlines()]  # fmt: skip


class SkillPolicy:
    """The scripted simulator, planner and critic of one skill level (see the module text).

    Args:
        specs: The simulated users (their held-out targets), by user id.
        table: The item table (the planner's popularity cuts and genre list).
        skill: Probability that one decision uses the true signal, in [0, 1].
        seed: Seeds every decision.
        max_hints: Attributes per faithful user message (``SimulatorConfig.max_hints``).
        k: Items per recommendation (``InteRecConfig.map_n``).
    """

    def __init__(
        self, specs: Sequence[SessionSpec], table: ItemTable, skill: float, seed: int = 0,
        max_hints: int = 2, k: int = 5,
    ) -> None:  # fmt: skip
        self.specs = {s.user: s for s in specs}
        self.skill = check_skill(skill)
        self.seed, self.max_hints, self.k = seed, max_hints, k
        self.bands = popularity_bands(table)
        frame = table.frame()
        self.genres = sorted({g.strip() for t in frame["tags"].dropna() for g in t.split(",")
                              if g.strip()})  # fmt: skip

    def _rng(self, role: str, turn: int, user: str) -> np.random.Generator:
        key = zlib.crc32(user.encode())
        return np.random.default_rng([self.seed, ROLES.index(role), turn, key])

    def __call__(self, request: ChatRequest) -> Any:
        """The reply to one request of the loop: the simulator's, the planner's or the critic's."""
        role, lines = _role(request), _prompt_lines(request)
        if role == "simulator":
            return {"message": self.user_says(self.specs[request.tag], lines)}
        if role == "planner":
            return {"kind": "plan", "answer": "", "plan": self.plan(request.tag, lines)}
        return {"verdict": "yes", "advice": ""}  # the critic accepts every executed plan

    def user_says(self, spec: SessionSpec, lines: Sequence[str]) -> str:
        """The simulated user: thanks once its target is shown, else a faithful or vague hint."""
        said = [line.removeprefix("You: ") for line in lines if line.startswith("You: ")]
        shown = [line for line in lines if line.startswith("Assistant: ")][-1:]
        if shown and spec.target_display in shown[0]:
            return f"Thank you, that is the one. {END}"
        rng = self._rng("simulator", len(said) + 1, spec.user)
        return user_message(spec, said, uses_truth(rng, self.skill), rng, self.max_hints)

    def plan(self, user: str, lines: Sequence[str]) -> list[dict]:
        """The planner: the right plan for every condition stated so far, or an uninformed one."""
        texts = [line.removeprefix("User: ") for line in lines if line.startswith("User: ")]
        texts += [line.split(": ", 1)[1] for line in lines
                  if line.startswith("The user's new message: ")]  # fmt: skip
        rng = self._rng("planner", len(texts), user)
        if uses_truth(rng, self.skill):
            return informed_plan(read_hints(texts), self.bands, self.k)
        return uninformed_plan(rng, self.genres, self.k)


def skill_client(
    specs: Sequence[SessionSpec], table: ItemTable, skill: float, seed: int = 0,
    max_hints: int = 2, k: int = 5,
) -> ScriptedClient:  # fmt: skip
    """A :class:`ScriptedClient` (``scripted:interecagent-skill-<s>``) of :class:`SkillPolicy`."""
    policy = SkillPolicy(specs, table, skill, seed, max_hints, k)
    return ScriptedClient(policy, f"interecagent-skill-{policy.skill:g}")


def skilled_conversations(
    sessions: Sequence[SessionSpec],
    ctx: ToolContext,
    config: InteRecConfig,
    sim: SimulatorConfig,
    skill: float,
    max_turns: int,
    seed: int = 0,
) -> ConversationRun:
    """The notebook's conversations with scripted players of one skill (no LLM call).

    The same users, tools, plan-first loop and hit rules as the embedded model's run; the
    agent reads no demonstrations (``demo_mode="zero"``: a script has no use for them, and
    retrieving them would embed every message).
    """
    specs = list(sessions)
    client = skill_client(specs, ctx.table, skill, seed, sim.max_hints, config.map_n)
    scripted = dataclasses.replace(config, demo_mode="zero", plan_mode="plan_first")
    return run_sessions(specs, ctx, scripted, client, RunLog(), max_turns=max_turns,  # type: ignore[arg-type]
                        method="InteRecAgent", sim=sim)  # fmt: skip


def hit_outcome(
    sessions: Sequence[SessionSpec],
    ctx: ToolContext,
    config: InteRecConfig,
    sim: SimulatorConfig,
    max_turns: int,
    seed: int = 0,
    keep: dict[float, ConversationRun] | None = None,
) -> Callable[[float], np.ndarray]:
    """``outcome(skill)`` for :func:`recagents.skill.sweep`: each user's hit by id within K.

    Each level's :class:`ConversationRun` is kept in ``keep`` (by skill) when given, so the
    same conversations can be traced afterwards (:func:`diagnose.turn_fates`).
    """

    def outcome(skill: float) -> np.ndarray:
        run = _kept_conversations(sessions, ctx, config, sim, skill, max_turns, seed, keep)
        return run.sessions["hit_id"].astype(float).to_numpy()

    return outcome


def _kept_conversations(
    sessions: Sequence[SessionSpec],
    ctx: ToolContext,
    config: InteRecConfig,
    sim: SimulatorConfig,
    skill: float,
    max_turns: int,
    seed: int,
    keep: dict[float, ConversationRun] | None,
) -> ConversationRun:
    """The run of one skill level from ``keep`` when it is there, else run (and keep) it.

    Why: the notebook shows skill 0 and 1 beside the embedded model (section 5) before the
    sweep (section 6); the conversations are deterministic, so they are run once.
    """
    level = check_skill(skill)
    if keep is not None and level in keep:
        return keep[level]
    run = skilled_conversations(sessions, ctx, config, sim, level, max_turns, seed)
    if keep is not None:
        keep[level] = run
    return run


def scripted_label(skill: float) -> str:
    """The method name of the scripted players of one skill in tables and figures."""
    return f"scripted, skill {check_skill(skill):g}"


def skilled_hits(
    sessions: Sequence[SessionSpec],
    ctx: ToolContext,
    config: InteRecConfig,
    sim: SimulatorConfig,
    max_turns: int,
    levels: Sequence[float] = (1.0, 0.0),
    seed: int = 0,
    n_boot: int = 1000,
    keep: dict[float, ConversationRun] | None = None,
) -> pd.DataFrame:
    """Hit@K and AT@K of the scripted players at each level, as rows beside the LLM's methods.

    The same users, loop and metric (:func:`conversations.conversation_metrics`, bootstrap
    seeded by ``seed``, which also seeds the players) as the embedded model's rows; the
    method is :func:`scripted_label`. Runs already in ``keep`` are reused, new ones kept.
    """
    frames = [
        _kept_conversations(sessions, ctx, config, sim, level, max_turns, seed, keep)
        .sessions.assign(method=scripted_label(level))
        for level in levels
    ]  # fmt: skip
    frame = pd.concat(frames, ignore_index=True)
    return conversation_metrics(frame, max_turns=max_turns, n_boot=n_boot, seed=seed)


def skilled_one_turn(
    users: SessionSet,
    candidates: pd.DataFrame,
    ctx: ToolContext,
    config: InteRecConfig,
    sim: SimulatorConfig,
    levels: Sequence[float] = (1.0, 0.0),
    seed: int = 0,
    n_boot: int = 1000,
    keep: dict[str, pd.DataFrame] | None = None,
) -> pd.DataFrame:
    """The one-turn tasks (Recall@5, ranking NDCG) played by the scripted players.

    Each level runs :func:`evaluate.one_turn_retrieval` and :func:`evaluate.one_turn_ranking`
    for the agent (``"InteRecAgent"``) with the scripted client as both the simulated user
    (its opening message is the request) and the planner, on the same users and saved
    ``candidates`` as the LLM's rows; no demonstrations (see :func:`skilled_conversations`).

    ``keep``, when given, receives each level's per-user ranking rows under its label (with
    ``method`` set to the label), so a notebook can explain the rows from their users.

    Returns:
        :func:`evaluate.one_turn_metrics` rows ``[method, metric, mean, low, high, n]``, the
        method being :func:`scripted_label`.
    """
    specs = list(users)
    scripted = dataclasses.replace(config, demo_mode="zero", plan_mode="plan_first")
    parts = []
    for level in levels:
        client = skill_client(specs, ctx.table, level, seed, sim.max_hints, config.map_n)
        answering: Any = client  # a ScriptedClient answers as an LLMClient does
        log, agent = RunLog(), ("InteRecAgent",)
        retrieval = one_turn_retrieval(users, ctx, scripted, answering, log, agent, sim)
        ranking = one_turn_ranking(users, candidates, ctx, scripted, answering, log, agent, sim,
                                   seed=seed)  # fmt: skip
        label = scripted_label(level)
        if keep is not None:
            keep[label] = ranking.assign(method=label)
        parts += [
            one_turn_metrics(retrieval, "recall", n_boot=n_boot, seed=seed).assign(method=label),
            one_turn_metrics(ranking, "ndcg", n_boot=n_boot, seed=seed).assign(method=label),
        ]
    return pd.concat(parts, ignore_index=True)
