"""A skilled scripted Agent4Rec agent and a taste-aware recommender: the mechanism with a knob.

Why: with the embedded 135M model every agent leaves on page 1 with the same satisfaction for
every recommender, so the paper's mechanism (agents that watch what they like, stay longer
and are more satisfied on a better recommender) never shows. Here both sides of the loop are
transparent rules, never an LLM:

* the **agent** (:func:`skilled_client`, model ``scripted:taste-agent``): with probability
  ``skill`` each decision uses the agent's true held-out taste (its own ``valid`` and ``test``
  items of the authors' split, which no recommender trained on); otherwise it flips a coin
  (watch, exit, reflection) or draws uniformly (rating 1-5, satisfaction 1-10);
* the **recommender** (:func:`taste_aware_ranking`): the paper's Random list with each slot
  replaced, with probability ``skill``, by one of the agent's held-out items.

The agent runs through the paper's own page loop (:func:`.loop.simulate`) unchanged.
:func:`run_sweep` plays every skill level on the same agents, and :func:`per_agent_outcomes`
reads the outcomes the figure sweeps. Each agent draws from its own random stream, seeded by
its id only, so at skill 0 an agent makes the same choices on every recommender.
"""

from __future__ import annotations

import copy
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from recagents.columns import ITEM, USER
from recagents.data.datasets import Split
from recagents.llm.client import ChatRequest, LLMClient
from recagents.llm.runlog import RunLog
from recagents.llm.scripted import PASS, ScriptedClient
from recagents.papers.agent4rec.agents import Agent
from recagents.papers.agent4rec.config import Agent4RecConfig
from recagents.papers.agent4rec.loop import simulate
from recagents.papers.agent4rec.prompts import TRAIT_SENTENCES
from recagents.papers.agent4rec.scripted import _LISTED, request_kind
from recagents.skill import DEFAULT_LEVELS, check_skill, uses_truth

#: The name of the skilled agent (its client's model is ``scripted:<name>``).
SKILLED_NAME = "taste-agent"


def held_out_items(split: Split) -> dict[str, set[str]]:
    """Each user's held-out items (``valid`` and ``test``): the true taste no model saw."""
    held = pd.concat([split.valid[[USER, ITEM]], split.test[[USER, ITEM]]])
    return {str(u): set(map(str, items)) for u, items in held.groupby(USER)[ITEM]}


def items_by_line(lines: Mapping[str, str]) -> dict[str, set[str]]:
    """The item ids behind each line an agent is shown (a line names one item, rarely more)."""
    out: dict[str, set[str]] = {}
    for item, line in lines.items():
        out.setdefault(line, set()).add(str(item))
    return out


def agent_rng(seed: int, user: str) -> np.random.Generator:
    """One agent's random stream, from the seed and its id only (not from the recommender)."""
    return np.random.default_rng([seed, zlib.crc32(str(user).encode())])


@dataclass
class _Visit:
    """What the skilled agent keeps of one visit: its random stream and what it saw."""

    rng: np.random.Generator
    shown: int = 0
    shown_taste: int = 0
    page_taste: int = 0
    watched_taste: int = 0
    ratings: list[int] = field(default_factory=list)


def skilled_policy(
    held_out: Mapping[str, set[str]],
    line_items: Mapping[str, set[str]],
    skill: float,
    seed: int = 0,
) -> Any:
    """The skilled agent: each decision uses the held-out taste with probability ``skill``.

    * **page**, per item: "mine" = the item is one of the agent's held-out items. Knowing,
      it watches (and calls aligned) exactly its own items; else a coin. Rating, knowing:
      5 for its own item, 2 for another; else uniform 1-5. Skipped: rating 1, no feeling.
    * **exit**: knowing, it turns the page only when the page held one of its items; else a
      coin.
    * **reflection**: knowing, satisfied when it has watched one of its items; else a coin.
    * **interview**: knowing, ``1 + round(9 * share of shown items that were its own)``;
      else uniform 1-10.

    Every decision draws the same numbers whatever it decides, so the stream stays aligned.
    """
    skill = check_skill(skill)
    visits: dict[str, _Visit] = {}

    def policy(request: ChatRequest) -> Any:
        kind = request_kind(request)
        if kind is None:
            return PASS
        user = str(request.tag)
        state = visits.setdefault(user, _Visit(agent_rng(seed, user)))
        rng, taste = state.rng, held_out.get(user, set())
        if kind == "page":
            text = "\n".join(m["content"] for m in request.messages if m.get("role") == "user")
            state.page_taste, items = 0, []
            for _, line in _LISTED.findall(text):
                mine = bool(line_items.get(line, set()) & taste)
                knows, coin = uses_truth(rng, skill), bool(rng.random() < 0.5)
                knows_rating, guess = uses_truth(rng, skill), int(rng.integers(1, 6))
                watch = mine if knows else coin
                rating = (5 if mine else 2) if knows_rating else guess
                state.shown += 1
                state.shown_taste += mine
                state.page_taste += mine
                if watch:
                    state.watched_taste += mine
                    state.ratings.append(rating)
                    feeling = "Scripted: one of mine." if mine else "Scripted: not my taste."
                    items.append({"aligned": True, "watch": True, "rating": rating,
                                  "feeling": feeling})  # fmt: skip
                else:
                    items.append({"aligned": False, "watch": False, "rating": 1, "feeling": ""})
            return {"items": items}
        if kind == "exit":
            knows, coin = uses_truth(rng, skill), bool(rng.random() < 0.5)
            stay = state.page_taste > 0 if knows else coin
            return {
                "feeling": "positive" if stay else "negative",
                "decision": "next" if stay else "exit",
                "reason": f"Scripted: {state.page_taste} of my items on this page.",
            }
        if kind == "reflection":
            knows, coin = uses_truth(rng, skill), bool(rng.random() < 0.5)
            satisfied = state.watched_taste > 0 if knows else coin
            word = "satisfied" if satisfied else "unsatisfied"
            return {"sentence": f"I am {word}: scripted reflection."}
        if kind == "interview":
            knows, guess = uses_truth(rng, skill), int(rng.integers(1, 11))
            share = state.shown_taste / state.shown if state.shown else 0.0
            score = 1 + round(9 * share) if knows else guess
            return {"satisfaction": score, "reason": f"Scripted: {share:.0%} of it was mine."}
        return PASS

    return policy


def skilled_client(
    held_out: Mapping[str, set[str]],
    line_items: Mapping[str, set[str]],
    skill: float,
    seed: int = 0,
    fallback: Any | None = None,
) -> ScriptedClient:
    """A :class:`~recagents.llm.scripted.ScriptedClient` playing the skilled agent."""
    policy = skilled_policy(held_out, line_items, skill, seed)
    return ScriptedClient(policy, SKILLED_NAME, fallback)


def taste_aware_ranking(
    base: pd.DataFrame, held_out: Mapping[str, set[str]], skill: float, seed: int = 0
) -> pd.DataFrame:
    """The scripted recommender: ``base`` with each slot, with prob. ``skill``, one held-out item.

    At skill 0 it is ``base`` (the paper's Random list); at skill 1 every slot holds one of
    the user's held-out items while any remain. Returns ``[user_id, item_id, rank]``.
    """
    skill = check_skill(skill)
    rows = []
    for user, group in base.sort_values([USER, "rank"]).groupby(USER):
        rng = agent_rng(seed, str(user))
        own = sorted(held_out.get(str(user), set()))
        own = [own[i] for i in rng.permutation(len(own))]
        others = [i for i in group[ITEM].astype(str) if i not in held_out.get(str(user), set())]
        listed: list[str] = []
        for _ in range(len(group)):
            pick_own = uses_truth(rng, skill) and bool(own)
            source = own if pick_own or not others else others
            if source:
                listed.append(source.pop(0))
        rows += [{USER: user, ITEM: item, "rank": k} for k, item in enumerate(listed, start=1)]
    return pd.DataFrame(rows, columns=[USER, ITEM, "rank"])


def _constant_embed(texts: list[str]) -> np.ndarray:
    """A stand-in embedding: the skilled agent reads no recalled memory, so any will do."""
    return np.ones((len(texts), 1))


def run_sweep(
    agents: Mapping[str, Agent],
    rankings: Mapping[str, pd.DataFrame],
    lines: dict[str, str],
    held_out: Mapping[str, set[str]],
    config: Agent4RecConfig,
    levels: Sequence[float] = DEFAULT_LEVELS,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame, RunLog]:
    """Every skill level of the agent on every recommender's lists, through ``loop.simulate``.

    The agents are copied, so the caller's memories stay as they were.

    Returns:
        ``(exposures, sessions, log)`` with a ``skill`` column; ``recommender`` is the key of
        ``rankings``; ``log`` holds every scripted call and any unusable reply.
    """
    line_items = items_by_line(lines)
    exposures, sessions, log = [], [], RunLog()
    for level in levels:
        for name, ranked in rankings.items():
            client = skilled_client(held_out, line_items, level, seed)
            shown, visits = simulate(
                copy.deepcopy(dict(agents)), ranked, lines, TRAIT_SENTENCES, name, config,
                cast(LLMClient, client), log, _constant_embed,
            )  # fmt: skip
            exposures.append(shown.assign(skill=float(level)))
            sessions.append(visits.assign(skill=float(level)))
    return pd.concat(exposures, ignore_index=True), pd.concat(sessions, ignore_index=True), log


def taste_discrimination(exposures: pd.DataFrame, held_out: Mapping[str, set[str]]) -> pd.Series:
    """Per agent: P(watch | one of its held-out items) - P(watch | another item), over shown.

    Agents shown no item of one kind have no value (dropped). 0 is a taste-blind watcher.
    """
    mine = [
        i in held_out.get(u, set()) for u, i in zip(exposures[USER], exposures[ITEM], strict=True)
    ]
    frame = exposures.assign(mine=mine, watched=exposures["watched"].astype(float))
    rates = frame.groupby([USER, "mine"])["watched"].mean().unstack("mine")
    if True not in rates or False not in rates:
        return pd.Series(dtype=float, name="discrimination")
    return (rates[True] - rates[False]).dropna().rename("discrimination")


def per_agent_outcomes(
    exposures: pd.DataFrame, sessions: pd.DataFrame, held_out: Mapping[str, set[str]]
) -> pd.DataFrame:
    """Per skill, recommender and agent: taste discrimination, exit page, satisfaction.

    Also the watch rate (watched / shown) and the mean rating of what it watched.
    """
    keys = ["skill", "recommender"]
    rows = []
    for (skill, name), shown in exposures.groupby(keys):
        watched = shown.groupby(USER)["watched"].mean().rename("p_view")
        rating = shown[shown["watched"]].groupby(USER)["rating"].mean().rename("rating")
        both = pd.concat([watched, rating, taste_discrimination(shown, held_out)], axis=1)
        rows.append(both.rename_axis(USER).reset_index().assign(skill=skill, recommender=name))
    table = pd.concat(rows, ignore_index=True)
    visits = sessions[[*keys, USER, "exit_page", "satisfaction"]]
    return visits.merge(table, on=[*keys, USER], how="left")


def paired_difference(outcomes: pd.DataFrame, metric: str, better: str, worse: str) -> pd.DataFrame:
    """Per skill and agent: ``metric`` on ``better`` minus on ``worse`` (same agent)."""
    wide = outcomes.pivot_table(index=["skill", USER], columns="recommender", values=metric)
    return (wide[better] - wide[worse]).dropna().rename(metric).reset_index()


@dataclass(frozen=True)
class SkillPanel:
    """One panel of :func:`mechanism_figure`: sweeps against skill and their context.

    Attributes:
        title: The panel's title.
        ylabel: What the y axis shows.
        curves: Sweep frames (:func:`recagents.skill.sweep`) by label.
        null: The no-effect value of the first curve (drawn, and used for its mark).
        null_label: Its name.
        mark: A detectable skill to mark instead (e.g. of a paired difference), with
            ``mark_label`` saying of what.
        mark_label: What the mark detects.
        reference: Recorded capable-model values by label.
        embedded: The embedded model's ``(mean, low, high, n)``, or None.
        embedded_label: Its label.
    """

    title: str
    ylabel: str
    curves: Mapping[str, pd.DataFrame]
    null: float | None = None
    null_label: str = "no effect"
    mark: float | None = None
    mark_label: str = ""
    reference: Mapping[str, float] | None = None
    embedded: tuple[float, float, float, int] | None = None
    embedded_label: str = "embedded model"


def mechanism_figure(panels: Sequence[SkillPanel], title: str = "") -> Any:
    """The panels side by side: each sweep with its band, references and the embedded point.

    A panel whose values are all equal says so on its face (``note_if_degenerate``).
    """
    import matplotlib.pyplot as plt

    from recagents.plotting import note_if_degenerate
    from recagents.skill import plot_skill

    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 5.2), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        values: list[float] = []
        for k, (label, frame) in enumerate(panel.curves.items()):
            plot_skill(
                ax, frame, label, null=panel.null if k == 0 else None,
                null_label=panel.null_label, embedded=panel.embedded if k == 0 else None,
                embedded_label=panel.embedded_label,
                reference=panel.reference if k == 0 else None, mark=panel.mark is None,
            )  # fmt: skip
            values += [*frame["low"], *frame["high"]]
        if panel.mark is not None:
            ax.axvline(panel.mark, color="0.3", linestyle="--", linewidth=0.8)
            ax.annotate(
                f"{panel.mark_label}\ndetectable from skill {panel.mark:g}", (panel.mark, 1.0),
                xycoords=ax.get_xaxis_transform(), xytext=(3, -3), textcoords="offset points",
                ha="left", va="top", fontsize=8, color="0.3",
            )  # fmt: skip
        note_if_degenerate(
            ax, values, what="values", include=list((panel.reference or {}).values())
        )
        ax.set_title(panel.title, fontsize=11)
        ax.set_ylabel(panel.ylabel)
        ax.set_xlabel("skill of the scripted agent\n(probability of using its held-out taste)")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25))
    if title:
        fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    return fig
