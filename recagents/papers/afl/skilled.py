"""Skilled scripted agents on both sides of AFL's loop: the mechanism with a knob on the truth.

Why: with the embedded 135M model every dialogue ends in round 1 and, when a scripted user
keeps it going, the model's recommendation agent re-proposes items already rejected, so
HR@1 never moves with the round limit. Here *both* agents are rules written in Python (named
``scripted:afl-skill-<s>``, never an LLM result), answering the paper's own prompts through
:func:`~recagents.papers.afl.loop.feedback_loop` via a
:class:`~recagents.llm.scripted.ScriptedClient`:

* the **recommendation agent** (:func:`skilled_recommender_policy`) proposes the tool's
  (SASRec's) best-ranked candidate it has not proposed yet, so it never re-proposes a
  rejected item; with probability ``skill`` it also reads the user's last stated reason and
  moves to the best-ranked candidate of the genres that reason asks for;
* the **user agent** (:func:`skilled_user_policy`) with probability ``skill`` judges by the
  held-out target (accepts only the target; a rejection names the target's genres, the true
  signal), otherwise it accepts or rejects with a fair coin and gives a reason from its
  history's genres (no information about the target).

``skill`` 0 is "no information" (a coin-flipping user, a recommender that walks down the
tool's ranking), 1 "knows the user's held-out taste". :func:`skill_hits` runs the loop at one
skill, :func:`round_gain` is the per-user outcome of the sweep (HR@1 at the last round limit
minus at limit 1), and :func:`mechanism_figure` draws it beside the embedded model.

Every random draw comes from a generator seeded by ``(seed, user, item or round)``, so a
reply does not depend on batching, and all skill levels share their draws (a decision that
uses the truth at skill 0.5 also uses it at 0.75).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np
import pandas as pd

from recagents.columns import USER
from recagents.llm.client import ChatRequest
from recagents.llm.runlog import RunLog
from recagents.llm.scripted import PASS, ScriptedClient
from recagents.papers.afl.config import AFLConfig
from recagents.papers.afl.evaluate import hit_rate_table, hits_by_round
from recagents.papers.afl.loop import feedback_loop
from recagents.papers.afl.samples import Sample
from recagents.papers.afl.scripted import genre_reason, proposed_item
from recagents.skill import uses_truth

#: The phrase of a skilled rejection that names the target's genres (the true signal).
WANTED = "I want a {domain} of these genres: "

#: Probability that a user agent without information accepts a proposal (a fair coin).
COIN = 0.5

_WANTED_GENRES = re.compile(r"of these genres: ([^.;]*)\.")


def _rng(seed: int, *keys: str) -> np.random.Generator:
    """A generator fixed by ``seed`` and the keys (user, item, round, role), not by call order."""
    return np.random.default_rng([seed, *(zlib.crc32(k.encode()) for k in keys)])


def tool_ranking(sample: Sample) -> list[str]:
    """The candidates as the tool ranks them: its pick first, then by score, ties by position.

    An item the tool has no score for (``NaN`` or missing) comes after every scored one.
    """
    position = {item: k for k, item in enumerate(sample.candidates)}

    def key(item: str) -> tuple[int, int, float, int]:
        score = sample.scores.get(item, float("nan"))
        known = bool(np.isfinite(score))
        return (item != sample.prior, not known, -score if known else 0.0, position[item])

    return sorted(sample.candidates, key=key)


def proposed_before(prompt: str, sample: Sample, titles: Mapping[str, str]) -> set[str]:
    """The candidates the recommendation agent's memory lists as its earlier proposals.

    Reads the lines "Round r: you recommended <title> because ..." of
    :func:`~recagents.papers.afl.prompts.recommend_messages`; every candidate whose text is
    the one named counts (two candidates with one text look the same to the user).
    """
    found: set[str] = set()
    for line in prompt.splitlines():
        match = re.match(r"Round \d+: you recommended ", line)
        if not match:
            continue
        rest = line[match.end() :]
        found.update(c for c in sample.candidates if rest.startswith(f"{titles[c]} because "))
    return found


def wanted_genres(prompt: str) -> tuple[str, ...]:
    """The genres the user's most recent stated reason asks for (empty if none does)."""
    named = _WANTED_GENRES.findall(prompt)
    if not named:
        return ()
    return tuple(g.strip() for g in named[-1].split(",") if g.strip())


def _by_user(samples: Sequence[Sample]) -> dict[str, Sample]:
    return {s.user: s for s in samples}


def skilled_recommender_policy(
    samples: Sequence[Sample],
    titles: Mapping[str, str],
    genres: Mapping[str, tuple[str, ...]],
    skill: float,
    seed: int = 0,
) -> Callable[[ChatRequest], Any]:
    """The scripted recommendation agent: the tool's best unproposed candidate, or the genre asked.

    Answers requests with the recommendation schema (a ``choice``) for one of ``samples``'
    users; everything else is :data:`~recagents.llm.scripted.PASS`. It never proposes an item
    its memory lists; with probability ``skill`` per round it prefers the candidates that have
    every genre the user's last reason asks for (:func:`wanted_genres`), when any is left.
    """
    by_user = _by_user(samples)

    def policy(request: ChatRequest) -> Any:
        properties = (request.schema or {}).get("properties", {})
        sample = by_user.get(request.tag)
        if "choice" not in properties or sample is None:
            return PASS
        prompt = request.messages[-1]["content"]
        done = proposed_before(prompt, sample, titles)
        left = [c for c in tool_ranking(sample) if c not in done] or tool_ranking(sample)
        round_key = str(prompt.count("\nRound ") + 1)
        asked = wanted_genres(prompt)
        reason = f"the tool ranks it best among the {len(left)} candidates not yet proposed"
        if asked and uses_truth(_rng(seed, sample.user, round_key, "rec"), skill):
            fitting = [c for c in left if set(asked) <= set(genres.get(c, ()))]
            if fitting:
                left = fitting
                reason = (f"the user asked for {', '.join(asked)}, and the tool ranks it best "
                          f"of the {len(fitting)} such candidates left")  # fmt: skip
        return {"reason": reason, "choice": sample.candidates.index(left[0]) + 1}

    return policy


def skilled_user_policy(
    samples: Sequence[Sample],
    titles: Mapping[str, str],
    genres: Mapping[str, tuple[str, ...]],
    config: AFLConfig,
    skill: float,
    seed: int = 0,
) -> Callable[[ChatRequest], Any]:
    """The scripted user agent: with probability ``skill`` it knows the target, else a coin.

    Answers in-loop user requests (a ``decision`` naming one of the sample's candidates);
    everything else is :data:`~recagents.llm.scripted.PASS`. Knowing the target, it accepts
    only the target and rejects others saying the target's genres (:data:`WANTED`); without,
    it accepts with probability :data:`COIN` and rejects with its history's genres
    (:func:`~recagents.papers.afl.scripted.genre_reason`), which say nothing of the target.
    """
    by_user = _by_user(samples)
    wanted = WANTED.format(domain=config.domain)

    def policy(request: ChatRequest) -> Any:
        properties = (request.schema or {}).get("properties", {})
        sample = by_user.get(request.tag)
        if "decision" not in properties or sample is None:
            return PASS
        item = proposed_item(request, sample, titles)
        if item is None:
            return PASS
        rng = _rng(seed, sample.user, item, "user")
        if uses_truth(rng, skill):
            yes = item == sample.target
            target_genres = ", ".join(genres.get(sample.target, ())) or "none known"
            reason = (f"{titles[item]} is the {config.domain} I want next." if yes else
                      f"{wanted}{target_genres}. {titles[item]} is not it.")  # fmt: skip
        else:
            yes = bool(rng.random() < COIN)
            history = sample.history
            reason = (f"{titles[item]} will do." if yes else
                      genre_reason(item, history, titles, genres, config.domain))  # fmt: skip
        return {"reason": reason[: config.reason_chars], "decision": "yes" if yes else "no"}

    return policy


def skilled_client(
    samples: Sequence[Sample],
    titles: Mapping[str, str],
    genres: Mapping[str, tuple[str, ...]],
    config: AFLConfig,
    skill: float,
    seed: int = 0,
) -> ScriptedClient:
    """Both agents scripted at ``skill``, named ``scripted:afl-skill-<skill>`` (no fallback)."""
    recommend = skilled_recommender_policy(samples, titles, genres, skill, seed)
    judge = skilled_user_policy(samples, titles, genres, config, skill, seed)

    def policy(request: ChatRequest) -> Any:
        reply = recommend(request)
        return judge(request) if reply is PASS else reply

    return ScriptedClient(policy, f"afl-skill-{skill:g}")


def skill_hits(
    samples: Sequence[Sample],
    titles: Mapping[str, str],
    genres: Mapping[str, tuple[str, ...]],
    config: AFLConfig,
    skill: float,
    seed: int = 0,
) -> pd.DataFrame:
    """HR@1 hits per user at every round limit 1..``config.max_rounds``, both agents skilled.

    Runs :func:`~recagents.papers.afl.loop.feedback_loop` with :func:`skilled_client` (its
    calls go to a log of their own, not the notebook's cost table).

    Returns:
        :func:`~recagents.papers.afl.evaluate.hits_by_round`'s ``[user_id, limit, hit]``.
    """
    client = skilled_client(samples, titles, genres, config, skill, seed)
    # A ScriptedClient has the one method the loop uses (map); the loop is typed for LLMClient.
    rounds = feedback_loop(
        samples, dict(titles), config, cast(Any, client), RunLog(), phase="skill sweep"
    )
    return hits_by_round(rounds, config.max_rounds)


def round_gain(hits: pd.DataFrame, last: int, first: int = 1) -> np.ndarray:
    """Each user's hit at round limit ``last`` minus at limit ``first`` (users in order)."""
    table = hits.pivot(index=USER, columns="limit", values="hit")
    return (table[last] - table[first]).to_numpy(dtype=float)


def limit_curve(hits: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """HR@1 with its interval at every round limit: ``[limit, mean, low, high, n]``."""
    limits = sorted(hits["limit"].unique())
    table = hit_rate_table(
        {str(k): hits.loc[hits["limit"] == k, "hit"].to_numpy() for k in limits},
        n_boot=n_boot, seed=seed,
    )  # fmt: skip
    return table.assign(limit=[int(k) for k in limits])[["limit", "mean", "low", "high", "n"]]


def curve_sentence(label: str, curve: pd.DataFrame) -> str:
    """What one HR@1-by-round-limit curve did, in words made from its first and last limits."""
    ordered = curve.sort_values("limit")
    first, last = ordered.iloc[0], ordered.iloc[-1]

    def at(row: Any) -> str:
        return (
            f"{row['mean']:.3f} [{row['low']:.3f}, {row['high']:.3f}] at limit {int(row['limit'])}"
        )

    if np.isclose(first["mean"], last["mean"]):
        return f"{label}: HR@1 stays at {at(first)} and {at(last)}."
    verb = "rises" if last["mean"] > first["mean"] else "falls"
    return f"{label}: HR@1 {verb} from {at(first)} to {at(last)}."


def mechanism_figure(
    curves: Mapping[str, pd.DataFrame],
    contrasts: Mapping[str, pd.DataFrame],
    gains: pd.DataFrame,
    embedded_gain: tuple[float, float, float, int],
    tool_hr1: float,
    n_candidates: int,
    title: str = "",
) -> Any:
    """AFL's mechanism: HR@1 against the round limit, and its gain against skill.

    Left: HR@1 by round limit for each skilled scripted pair (``curves``, label → a
    :func:`limit_curve` frame, drawn with interval bands) and each run of the embedded model
    (``contrasts``, drawn as points with error bars), the tool alone as a dashed line. Right:
    the gain from round limit 1 to the last against skill (``gains``, a
    :func:`recagents.skill.sweep` frame) with the detectable skill marked and the embedded
    model's gain as the contrast point. Chance (1 / ``n_candidates``) is a dotted line.
    """
    import matplotlib.pyplot as plt

    from recagents.plotting import fixed_scale, integer_axis
    from recagents.skill import plot_skill

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.6))
    palette = plt.get_cmap("viridis")
    for k, (label, curve) in enumerate(curves.items()):
        colour = palette(0.85 * k / max(1, len(curves) - 1))
        x = curve["limit"].to_numpy(dtype=float)
        left.plot(x, curve["mean"], marker="o", color=colour, label=label, zorder=3)
        left.fill_between(x, curve["low"], curve["high"], color=colour, alpha=0.15, linewidth=0)
    markers = ("s", "D", "^")
    for k, (label, curve) in enumerate(contrasts.items()):
        x = curve["limit"].to_numpy(dtype=float) + 0.08 * (k + 1)
        y = curve["mean"].to_numpy(dtype=float)
        left.errorbar(x, y, yerr=[y - curve["low"].to_numpy(), curve["high"].to_numpy() - y],
                      fmt=markers[k % len(markers)], linestyle=":", capsize=3,
                      color=("#a50f15", "0.45", "#e6550d")[k % 3], label=label)  # fmt: skip
    left.axhline(tool_hr1, linestyle="--", color="C1", label=f"SASRec alone: {tool_hr1:.3g}")
    left.axhline(1 / n_candidates, linestyle=":", color="0.4",
                 label=f"chance (1/{n_candidates}): {1 / n_candidates:.3g}")  # fmt: skip
    fixed_scale(left, 0.0, 1.0)
    integer_axis(left, "x")
    left.set_xlabel("maximum rounds (1 = single recommendation agent)")
    left.set_ylabel(f"HR@1 over {n_candidates} candidates")
    left.set_title("HR@1 by round limit (95% CI over users)")
    left.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)
    last = int(max(c["limit"].max() for c in curves.values()))
    plot_skill(right, gains, f"scripted on both sides: HR@1 at limit {last} − limit 1",
               null=0.0, null_label="no gain", embedded=embedded_gain,
               embedded_label="embedded model on both sides")  # fmt: skip
    right.set_ylabel(f"HR@1 gain, limit {last} − limit 1")
    right.set_title("What the loop adds, against skill (95% CI over users)")
    right.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
