"""Skilled scripted policies on every side of a Rec4Agentverse session: demonstrations only.

Why: with the embedded 135M model the simulated user says "satisfied" to everything and the
agent items pick films close to at random, so the stage effects (the agent item talking back
improves the match to the user's hidden taste) never show. Here every LLM role of the loop
is played by a few readable rules with one knob, ``skill``: each decision uses the true
signal with probability ``skill`` (:func:`recagents.skill.uses_truth`), otherwise it acts
without it.

- The simulated user (:func:`user_opening`, :func:`user_reaction`): informed, it speaks and
  judges from its hidden taste (the template user's rules); uninformed, it names a random
  genre and says yes or no by a coin flip.
- The agent item (:func:`agent_picks`, :func:`agent_report`): informed, it reads the user's
  words (the template agent's rules) for its picks and its report; uninformed, it shows the
  first ``k`` films of its list as given and reports that it learned nothing.
- The recommender stays the loop's classic scorer (rules already, no LLM).
- The adversary (:func:`attacker`): with probability ``skill`` it sends its crafted lie
  (:func:`~recagents.papers.rec4agentverse.reports.adversarial_report`), else an honest report.

:func:`skilled_client` wraps the user and agent policies in a
:class:`~recagents.llm.scripted.ScriptedClient` (model ``scripted:rec4a-skilled``), so the
package's own loop (:func:`~recagents.papers.rec4agentverse.stages.run_stages`) runs
unchanged; :func:`stage_effects` and :func:`manipulation_effect` give one value per user for a
skill sweep, and :func:`scripted_sessions` every session metric at one skill (notebook 05
draws skill 0, no information, beside the stage comparison). No request reaches a model.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from functools import partial
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from recagents.columns import USER
from recagents.llm.client import ChatRequest, LLMClient
from recagents.llm.runlog import RunLog
from recagents.llm.scripted import PASS, ScriptedClient
from recagents.papers.rec4agentverse.catalogue import AgentCard, Catalogue
from recagents.papers.rec4agentverse.config import (
    AGENT_ROLE,
    GENRE_NAMES,
    METRICS,
    STAGES,
    UNKNOWN_ERA,
    USER_ROLE,
    Rec4AConfig,
)
from recagents.papers.rec4agentverse.manipulation import Attack, manipulation_experiment
from recagents.papers.rec4agentverse.reports import adversarial_report, honest_report
from recagents.papers.rec4agentverse.stages import run_stages
from recagents.papers.rec4agentverse.templates import (
    template_agent_reply,
    template_opening,
    template_reaction,
    template_report,
)
from recagents.papers.rec4agentverse.users import SimUser
from recagents.skill import DEFAULT_LEVELS, sweep, uses_truth

#: The scripted policy's name (its client's model is ``scripted:rec4a-skilled``).
SCRIPTED_NAME = "rec4a-skilled"

#: Runs of the scripted policy averaged per user at each skill level.
REPLICATES = 4

Dialogue = list[tuple[str, str]]

# --------------------------------------------------------------------------- the policies


def user_opening(user: SimUser, informed: bool, rng: np.random.Generator) -> str:
    """The user's first message: its first favourite genre if informed, else a random one."""
    if informed:
        return template_opening(user)
    return f"Hi! I'm in the mood for a good {rng.choice(GENRE_NAMES)} film tonight."


def user_reaction(
    user: SimUser,
    films: Sequence[str],
    catalogue: Catalogue,
    config: Rec4AConfig,
    informed: bool,
    rng: np.random.Generator,
) -> tuple[bool, str]:
    """The user's verdict: by its hidden taste if informed, else a coin flip and a random wish."""
    if informed:
        return template_reaction(user, films, catalogue, config)
    return bool(rng.random() < 0.5), f"I'd like more {rng.choice(GENRE_NAMES)} films."


def agent_picks(
    card: AgentCard,
    films: Sequence[str],
    dialogue: Dialogue,
    catalogue: Catalogue,
    config: Rec4AConfig,
    informed: bool,
) -> tuple[str, ...]:
    """The agent's ``k`` films: ranked by what the user said if informed, else its first ``k``."""
    if informed:
        return template_agent_reply(card, films, dialogue, catalogue, config).picks
    return tuple(films[: config.k])


def agent_report(dialogue: Dialogue, informed: bool) -> dict[str, Any]:
    """The agent's report fields: what the user's words say if informed, else nothing learned."""
    if not informed:
        return {"liked_genres": [], "disliked_genres": [], "era": UNKNOWN_ERA}
    learned, _ = template_report(dialogue)
    return {
        "liked_genres": list(learned.liked[:3]),
        "disliked_genres": list(learned.disliked[:2]),
        "era": learned.era or UNKNOWN_ERA,
    }


def attacker(catalogue: Catalogue, skill: float, seed: int = 0) -> Attack:
    """The scripted adversary: its crafted lie with probability ``skill``, else an honest report.

    The lie is :func:`adversarial_report` (it claims the user loves exactly the genres it
    serves, which is what the recommender's score rewards); the honest report is what the
    turn revealed (:func:`honest_report`).
    """
    adversary = catalogue.adversary
    if adversary is None:
        raise ValueError("the catalogue has no adversarial agent (build it with_adversary)")
    card, rng = catalogue.card(adversary), np.random.default_rng(seed)

    def attack(user: SimUser, mode: str) -> Any:
        if uses_truth(rng, skill):
            return adversarial_report(card, mode)  # type: ignore[arg-type]
        return honest_report(adversary, user)

    return attack


# --------------------------------------------------------------------------- the client


_NUMBERED = re.compile(r"^\d+\. (.+)$", re.M)
_SPOKEN = re.compile(rf"^({USER_ROLE}|{AGENT_ROLE}): (.*)$", re.M)
_AGENT_NAME = re.compile(r'^You are "([^"]+)"')


class SkilledPolicy:
    """Answers every user and agent-item request of the loop with the scripted policies.

    It reads a request as the model would: the user from its tag, the films from the
    numbered lines of the prompt, the conversation from its ``User:``/``You:`` lines, the
    agent from its persona. Routing requests (an LLM recommender) are passed on.
    """

    def __init__(
        self,
        users: Sequence[SimUser],
        catalogue: Catalogue,
        config: Rec4AConfig,
        skill: float,
        seed: int = 0,
    ) -> None:
        self.users = {u.user_id: u for u in users}
        self.catalogue, self.config, self.skill = catalogue, config, skill
        self.rng = np.random.default_rng(seed)
        self.film_of_line: dict[str, str] = {}
        for item in sorted(catalogue.titles):
            self.film_of_line.setdefault(catalogue.line(item), item)
        self.card_of_name = {c.name: c for c in catalogue.cards}

    def informed(self) -> bool:
        """One decision's draw: whether it uses the true signal."""
        return uses_truth(self.rng, self.skill)

    def __call__(self, request: ChatRequest) -> Any:
        """The reply to one request, by the fields its schema asks for."""
        asked = tuple((request.schema or {}).get("properties", {}))
        system, prompt = request.messages[0]["content"], request.messages[-1]["content"]
        user = self.users.get(request.tag)
        if user is None or asked == ("agent",):
            return PASS
        if asked == ("message",):
            return {"message": user_opening(user, self.informed(), self.rng)}
        films = [self.film_of_line[line] for line in _NUMBERED.findall(prompt)]
        dialogue: Dialogue = [(who, text) for who, text in _SPOKEN.findall(prompt)]
        if asked == ("comment", "satisfied"):
            ok, comment = user_reaction(
                user, films, self.catalogue, self.config, self.informed(), self.rng
            )
            return {"comment": comment, "satisfied": "yes" if ok else "no"}
        name = _AGENT_NAME.match(system)
        card = self.card_of_name[name.group(1)] if name else None
        if asked == ("message", "picks") and card is not None:
            picks = agent_picks(card, films, dialogue, self.catalogue, self.config, self.informed())
            return {"message": f"Here are {len(picks)} picks.",
                    "picks": [films.index(i) + 1 for i in picks]}  # fmt: skip
        report = agent_report(dialogue, self.informed())
        if asked == ("note",):
            liked = ", ".join(report["liked_genres"])
            return {"note": f"The user likes {liked} films." if liked else "I learned nothing."}
        return report


def skilled_client(
    users: Sequence[SimUser], catalogue: Catalogue, config: Rec4AConfig, skill: float, seed: int
) -> ScriptedClient:
    """A client whose user and agent-item replies come from :class:`SkilledPolicy`."""
    policy = SkilledPolicy(users, catalogue, config, skill, seed)
    return ScriptedClient(policy, SCRIPTED_NAME)


# --------------------------------------------------------------------------- per-user outcomes


def scripted_config(config: Rec4AConfig) -> Rec4AConfig:
    """The sweep's settings: the scripted policy plays the LLM roles, the classic scorer routes."""
    return dataclasses.replace(config, agent_mode="llm", recommender="classic")


def stage_gain(
    sessions: pd.DataFrame, later: int = 3, earlier: int = 1, metric: str = "pref_share"
) -> npt.NDArray[np.float64]:
    """Per user: ``metric`` at stage ``later`` minus at stage ``earlier`` (sorted by user)."""
    table = sessions.pivot_table(index=USER, columns="stage", values=metric, aggfunc="mean")
    return (table[later] - table[earlier]).dropna().sort_index().to_numpy(float)


def scripted_mode(skill: float) -> str:
    """The ``mode`` label of the scripted policy's sessions at ``skill`` (never an LLM's)."""
    return f"scripted, skill {skill:g}"


def replicate_sessions(
    users: Sequence[SimUser],
    catalogue: Catalogue,
    config: Rec4AConfig,
    skill: float,
    seed: int = 0,
    replicates: int = REPLICATES,
) -> list[pd.DataFrame]:
    """``SessionRun.sessions`` of ``replicates`` runs of every stage, the policy at ``skill``.

    Each run goes through the package's loop (:func:`run_stages`, classic recommender) with
    the policy seeded ``seed``, ``seed + 1``, ...
    """
    runs = []
    for replicate in range(replicates):
        client = skilled_client(users, catalogue, config, skill, seed + replicate)
        # A ScriptedClient answers the same batched requests as an LLMClient (duck-typed).
        llm = cast(LLMClient, client)
        run = run_stages(users, catalogue, scripted_config(config), STAGES, llm, RunLog())
        runs.append(run.sessions)
    return runs


def scripted_sessions(
    users: Sequence[SimUser],
    catalogue: Catalogue,
    config: Rec4AConfig,
    skill: float,
    seed: int = 0,
    replicates: int = REPLICATES,
    metrics: Sequence[str] = METRICS,
) -> pd.DataFrame:
    """Each user's session ``metrics`` per stage, the scripted policy at ``skill`` everywhere.

    A user's value is the mean of :func:`replicate_sessions`, so an interval over users
    reflects the users more than one run's coin flips.

    Returns:
        ``[user, stage, *metrics, mode]``, one row per user and stage, ``mode`` being
        :func:`scripted_mode`.
    """
    runs = replicate_sessions(users, catalogue, config, skill, seed, replicates)
    sessions = pd.concat(runs, ignore_index=True)
    means = sessions.groupby([USER, "stage"], sort=True)[list(metrics)].mean().reset_index()
    return means.assign(mode=scripted_mode(skill))


def stage_effects(
    users: Sequence[SimUser],
    catalogue: Catalogue,
    config: Rec4AConfig,
    skill: float,
    seed: int = 0,
    replicates: int = REPLICATES,
    metric: str = "pref_share",
) -> dict[int, npt.NDArray[np.float64]]:
    """Per user, stage 2 and stage 3 minus stage 1 of ``metric``, the scripted policy everywhere.

    Each user's value is the mean over ``replicates`` runs of the policy
    (:func:`replicate_sessions`), so the interval over users reflects the users more than
    one run's coin flips.
    """
    runs = replicate_sessions(users, catalogue, config, skill, seed, replicates)
    return {
        later: np.mean([stage_gain(run, later, 1, metric) for run in runs], axis=0)
        for later in (2, 3)
    }


def stage_sweeps(
    users: Sequence[SimUser],
    catalogue: Catalogue,
    config: Rec4AConfig,
    levels: Sequence[float] = DEFAULT_LEVELS,
    seed: int = 0,
    replicates: int = REPLICATES,
) -> dict[int, pd.DataFrame]:
    """The skill sweeps of the stage 2 and stage 3 gains (one run of the loop per level)."""
    effects = {
        level: stage_effects(users, catalogue, config, level, seed, replicates) for level in levels
    }
    frames = {}
    for later in (2, 3):
        frames[later] = sweep(partial(_gain_at, effects, later), levels, seed=seed)
    return frames


def _gain_at(
    effects: dict[float, dict[int, npt.NDArray[np.float64]]], later: int, level: float
) -> npt.NDArray[np.float64]:
    """The per-user gain of stage ``later`` at one skill level of a finished sweep."""
    return effects[level][later]


def attack_gain(decisions: pd.DataFrame) -> npt.NDArray[np.float64]:
    """Per user: adversary chosen under attack minus under the honest report (usable pairs)."""
    table = decisions.pivot_table(
        index=USER, columns="condition", values="adversary_chosen", aggfunc="mean"
    )
    return (table["attack"] - table["honest"]).dropna().sort_index().to_numpy(float)


def manipulation_effect(
    users: Sequence[SimUser],
    catalogue: Catalogue,
    config: Rec4AConfig,
    skill: float,
    seed: int = 0,
    replicates: int = REPLICATES,
    mode: str = "schema",
) -> npt.NDArray[np.float64]:
    """Per user, how much the scripted adversary of this ``skill`` raises its selection.

    The classic recommender routes; each user's value is the mean over ``replicates``
    draws of the attacker.
    """
    gains = []
    for replicate in range(replicates):
        decisions = manipulation_experiment(
            users, catalogue, scripted_config(config), modes=(mode,),
            attack=attacker(catalogue, skill, seed + replicate),
        )  # fmt: skip
        gains.append(attack_gain(decisions))
    return np.mean(gains, axis=0)


def manipulation_sweep(
    users: Sequence[SimUser],
    catalogue: Catalogue,
    config: Rec4AConfig,
    levels: Sequence[float] = DEFAULT_LEVELS,
    seed: int = 0,
    replicates: int = REPLICATES,
) -> pd.DataFrame:
    """The skill sweep of the scripted adversary's gain in selection (schema channel)."""
    return sweep(
        lambda level: manipulation_effect(users, catalogue, config, level, seed, replicates),
        levels,
        seed=seed,
    )
