"""AgentCF's mechanism made visible: the skilled scripted policy swept, beside the recorded runs.

Why: with the embedded model the forward choice is the first option whatever it holds, so
training accuracy, re-test and NDCG say nothing about collaborative reflection. Here the
package's own loop runs with :class:`~.scripted.SkilledAgentCF` on the run's users, pairs and
candidates at each skill level (:func:`scripted_sweep`, several replicates per level, one
value per user); :func:`sweep_frames` summarises it with intervals over users;
:func:`authors_reference` feeds the authors' released gpt-3.5 memories through the same
scripted chooser and ranker; :func:`embedded_values` reads the embedded model's values from
the run; :func:`mechanism_figure` draws the three side by side.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from recagents.columns import USER
from recagents.llm.client import LLMClient
from recagents.metrics import ranking_metrics
from recagents.papers.agentcf.agents import AgentState, train
from recagents.papers.agentcf.config import STEP, AgentCFConfig
from recagents.papers.agentcf.evaluate import pairwise_probe, rank_candidates
from recagents.papers.agentcf.pipeline import held_out
from recagents.papers.agentcf.scripted import scripted_client, word_embed
from recagents.papers.agentcf.subsets import Subset
from recagents.skill import DEFAULT_LEVELS, describe_sweep, summarise_units, sweep

#: Runs of the scripted policy per skill level (seeds 0, 1, ...): each user's value is the
#: mean over them, so the policy's coin flips average out and the interval is over users.
REPLICATES = 10

#: The rankers compared: the self-description alone, and with the retrieved past version.
VARIANTS = ("B", "B+R")


def random_ndcg(n_candidates: int = 10, k: int = 10) -> float:
    """NDCG@k of a random order of ``n_candidates`` with one relevant item (0.454 for 10)."""
    return sum(1 / math.log2(r + 1) for r in range(1, min(k, n_candidates) + 1)) / n_candidates


def _client(skill: float, seed: int) -> LLMClient:
    """The scripted policy as the client the loop takes (it answers the same ``map`` calls)."""
    return cast(LLMClient, scripted_client(skill, seed))


@dataclass
class ScriptedRuns:
    """Per-user outcomes of the scripted policy at every skill level (means over replicates).

    Attributes:
        learning: ``[skill, user_id, step, round, accuracy]``: training choices.
        retest: ``[skill, user_id, accuracy]``: the training pairs asked again after
            training, in both orders (the paper's Fig. 3 measure).
        ndcg: ``[skill, variant, user_id, ndcg@10]``: the 1 + 9 test candidates.
    """

    learning: pd.DataFrame
    retest: pd.DataFrame
    ndcg: pd.DataFrame


def run_scripted(
    initial: AgentState,
    pairs: pd.DataFrame,
    subset: Subset,
    candidates: pd.DataFrame,
    titles: dict[str, str],
    config: AgentCFConfig,
    skill: float,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """One scripted run through AgentCF's own code: train, re-test, rank with B and B+R.

    Returns:
        ``(learning, retest, ndcg)`` per user, as in :class:`ScriptedRuns` without ``skill``.
    """
    client = _client(skill, seed)
    trained, log = train(initial, pairs, subset, titles, config, client=client, progress=False)
    events = log.events_frame()
    forward = events[events["kind"] == "forward"].astype({"correct": float})
    learning = forward.groupby([USER, STEP, "round"], as_index=False)["correct"].mean()
    probe = pairwise_probe(trained, pairs, titles, config, client=client).astype({"correct": float})
    retest = probe.groupby(USER, as_index=False)["correct"].mean()
    truth = held_out(candidates)
    scores = []
    for variant in VARIANTS:
        outcome = rank_candidates(
            trained, subset, candidates, titles, variant, config, client, embed=word_embed
        )
        per_user = ranking_metrics(outcome.ranked, truth, ks=(10,), metrics=("ndcg",))
        scores.append(per_user[[USER, "ndcg@10"]].assign(variant=variant))
    return (
        learning.rename(columns={"correct": "accuracy"}),
        retest.rename(columns={"correct": "accuracy"}),
        pd.concat(scores, ignore_index=True),
    )


def scripted_sweep(
    initial: AgentState,
    pairs: pd.DataFrame,
    subset: Subset,
    candidates: pd.DataFrame,
    titles: dict[str, str],
    config: AgentCFConfig,
    levels: Sequence[float] = DEFAULT_LEVELS,
    replicates: int = REPLICATES,
) -> ScriptedRuns:
    """:func:`run_scripted` at every level, ``replicates`` times; per-user means."""
    parts: dict[str, list[pd.DataFrame]] = {"learning": [], "retest": [], "ndcg": []}
    for level in levels:
        for seed in range(replicates):
            runs = run_scripted(initial, pairs, subset, candidates, titles, config, level, seed)
            for name, frame in zip(parts, runs, strict=True):
                parts[name].append(frame.assign(skill=float(level)))
    keys = {"learning": ["skill", USER, STEP, "round"], "retest": ["skill", USER],
            "ndcg": ["skill", "variant", USER]}  # fmt: skip
    means = {
        name: pd.concat(frames).groupby(keys[name], as_index=False).mean(numeric_only=True)
        for name, frames in parts.items()
    }
    return ScriptedRuns(means["learning"], means["retest"], means["ndcg"])


def sweep_frames(runs: ScriptedRuns, n_boot: int = 1000, seed: int = 0) -> dict[str, pd.DataFrame]:
    """The sweeps (``skill, estimate, low, high, n``): re-test accuracy, B, B+R and B+R − B.

    Every interval is a bootstrap over users; ``B+R - B`` is the paired per-user difference.
    """
    wide = runs.ndcg.pivot_table(index=["skill", USER], columns="variant", values="ndcg@10")
    per_user = {
        "retest": runs.retest.set_index(["skill", USER])["accuracy"],
        **{variant: wide[variant] for variant in VARIANTS},
        "B+R - B": wide["B+R"] - wide["B"],
    }
    levels = sorted(runs.retest["skill"].unique())
    return {
        name: sweep(_at_skill(values), levels, n_boot, seed=seed)
        for name, values in per_user.items()
    }


def _at_skill(values: pd.Series) -> Callable[[float], np.ndarray]:
    """The per-user values of one skill level, from a series indexed by (skill, user)."""
    return lambda skill: values.xs(skill, level="skill").to_numpy()


def authors_reference(
    authors: AgentState,
    pairs: pd.DataFrame,
    subset: Subset,
    candidates: pd.DataFrame,
    titles: dict[str, str],
    config: AgentCFConfig,
    replicates: int = REPLICATES,
) -> dict[str, float]:
    """The authors' trained gpt-3.5 memories through the scripted chooser and ranker (B).

    The chooser and the ranker only read memories, so no reflection runs; ties are broken
    by each replicate's seed and the values averaged.

    Returns:
        ``{"retest": mean accuracy over users, "B": mean NDCG@10 over users}``.
    """
    truth = held_out(candidates)
    retest, ndcg = [], []
    for seed in range(replicates):
        client = _client(0.0, seed)
        probe = pairwise_probe(authors, pairs, titles, config, client=client)
        retest.append(probe.astype({"correct": float}).groupby(USER)["correct"].mean().mean())
        outcome = rank_candidates(
            authors, subset, candidates, titles, "B", config, client, embed=word_embed
        )
        per_user = ranking_metrics(outcome.ranked, truth, ks=(10,), metrics=("ndcg",))
        ndcg.append(per_user["ndcg@10"].mean())
    return {"retest": float(np.mean(retest)), "B": float(np.mean(ndcg))}


def embedded_values(
    events: pd.DataFrame, probe: pd.DataFrame, per_user: dict[str, pd.DataFrame]
) -> dict[str, Any]:
    """The embedded model's values in this run, per user, on the sweep's outcomes.

    Args:
        events: The run's event log (its ``forward`` choices).
        probe: :func:`~.evaluate.pairwise_probe` of the trained agents (both orders).
        per_user: The run's per-user scores by method (``"AgentCF B"``, ``"AgentCF B+R"``).

    Returns:
        ``learning`` (``[step, round, estimate, low, high, n]``), and ``(mean, low, high, n)``
        for ``retest``, ``B`` and ``B+R``.
    """
    forward = events[(events["kind"] == "forward") & events["ok"]].astype({"correct": float})
    rows = []
    for (step, round_index), group in forward.groupby([STEP, "round"]):
        mean, low, high, n = summarise_units(group.groupby(USER)["correct"].mean())
        rows.append({STEP: step, "round": round_index, "estimate": mean, "low": low,
                     "high": high, "n": n})  # fmt: skip
    answered = probe[probe["ok"]].astype({"correct": float})
    return {
        "learning": pd.DataFrame(rows),
        "retest": summarise_units(answered.groupby(USER)["correct"].mean()),
        "B": summarise_units(per_user["AgentCF B"]["ndcg@10"]),
        "B+R": summarise_units(per_user["AgentCF B+R"]["ndcg@10"]),
    }


def mechanism_sentences(
    frames: dict[str, pd.DataFrame],
    embedded: dict[str, Any],
    reference: dict[str, float] | None = None,
    paper_retest: float | None = None,
    chance_ndcg: float = round(random_ndcg(), 3),
    model: str = "the embedded model",
) -> str:
    """What the sweep found, one bullet per outcome, in words made from its numbers."""
    retest_refs, ndcg_refs = {}, {}
    if reference is not None:
        retest_refs["The scripted chooser reading the authors' gpt-3.5 memories"] = reference[
            "retest"
        ]
        ndcg_refs["The scripted ranker reading the authors' gpt-3.5 memories"] = reference["B"]
    if paper_retest is not None:
        retest_refs["The paper's recorded re-test accuracy (gpt-3.5, a third-party summary)"] = (
            paper_retest
        )
    parts = [
        _describe(frames["retest"], "re-test accuracy of the scripted agents (both orders)",
                  null=0.5, null_label="chance", embedded=embedded["retest"],
                  reference=retest_refs),
        _describe(frames["B"], "NDCG@10 of the scripted B ranker", null=chance_ndcg,
                  null_label="a random order", embedded=embedded["B"], reference=ndcg_refs),
        _describe(frames["B+R - B"], "B+R minus B (paired, same users)", null=0.0,
                  null_label="no difference"),
    ]  # fmt: skip
    return "\n".join(f"- {part}".replace("The embedded model", model) for part in parts)


def _describe(frame: pd.DataFrame, what: str, **context: Any) -> str:
    """:func:`~recagents.skill.describe_sweep` with ``what`` kept as written (NDCG, B+R)."""
    text = describe_sweep(frame, what, **context)
    return text.replace(what.capitalize(), what[0].upper() + what[1:], 1)


def _learning_panel(
    ax: Any, runs: ScriptedRuns, embedded: pd.DataFrame, shown: Sequence[float], model: str
) -> None:
    """Training accuracy per step and round: scripted at a few skills, and the embedded model."""
    import seaborn as sns

    colors = sns.color_palette("crest", len(shown))
    labels: list[str] = []
    for color, skill in zip(colors, shown, strict=True):
        part = runs.learning[runs.learning["skill"] == skill]
        rows = []
        for (step, round_index), group in part.groupby([STEP, "round"]):
            mean, low, high, _ = summarise_units(group["accuracy"])
            rows.append((step, round_index, mean, low, high))
        x = np.arange(len(rows))
        labels = [f"step {s + 1}\nround {r}" for s, r, *_ in rows]
        ax.plot(x, [r[2] for r in rows], marker="o", color=color,
                label=f"scripted, skill {skill:g}")  # fmt: skip
        ax.fill_between(x, [r[3] for r in rows], [r[4] for r in rows], color=color, alpha=0.2,
                        linewidth=0)  # fmt: skip
    if not embedded.empty:
        ax.errorbar(
            np.arange(len(embedded)) + 0.08, embedded["estimate"],
            yerr=[embedded["estimate"] - embedded["low"], embedded["high"] - embedded["estimate"]],
            fmt="s--", color="#a50f15", capsize=3, label=model,
        )  # fmt: skip
    ax.axhline(0.5, color="0.5", linestyle=":", linewidth=1, label="chance: 0.5")
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set(ylim=(-0.03, 1.03), ylabel="pairwise accuracy (real item chosen)",
           title="Training choices, step by step")  # fmt: skip


def mechanism_figure(
    runs: ScriptedRuns,
    frames: dict[str, pd.DataFrame],
    embedded: dict[str, Any],
    reference: dict[str, float] | None = None,
    paper_retest: float | None = None,
    chance_ndcg: float = round(random_ndcg(), 3),
    model: str = "embedded model",
) -> Any:
    """Three panels: training choices by step, re-test accuracy and NDCG@10 against skill.

    Args:
        runs: :func:`scripted_sweep`.
        frames: :func:`sweep_frames` of it.
        embedded: :func:`embedded_values` of the run.
        reference: :func:`authors_reference` (``None``: the release was not at hand).
        paper_retest: The paper's re-test accuracy (Fig. 3), drawn as a second reference.
        chance_ndcg: NDCG@10 of a random order.
        model: The embedded model's name, for the labels.
    """
    import matplotlib.pyplot as plt

    from recagents.skill import plot_skill

    levels = sorted(runs.learning["skill"].unique())
    shown = [levels[0], levels[len(levels) // 2], levels[-1]]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    _learning_panel(axes[0], runs, embedded["learning"], shown, model)
    retest_refs = {}
    if reference is not None:
        retest_refs["authors' gpt-3.5 memories, same chooser"] = reference["retest"]
    if paper_retest is not None:
        retest_refs["paper re-test (gpt-3.5) [note]"] = paper_retest
    plot_skill(axes[1], frames["retest"], "scripted agents", null=0.5, null_label="chance",
               embedded=embedded["retest"], embedded_label=model,
               reference=retest_refs)  # fmt: skip
    axes[1].set(ylim=(-0.03, 1.03), ylabel="re-test accuracy, both orders",
                title="Training pairs asked again after training")  # fmt: skip
    ndcg_refs = None
    if reference is not None:
        ndcg_refs = {"authors' gpt-3.5 memories, same ranker (B)": reference["B"]}
    plot_skill(axes[2], frames["B"], "scripted B", null=chance_ndcg, null_label="random order",
               embedded=embedded["B"], embedded_label=f"{model}, B",
               reference=ndcg_refs)  # fmt: skip
    plot_skill(axes[2], frames["B+R"], "scripted B+R", color="#e66101", mark=False)
    axes[2].set(ylim=(-0.03, 1.03), ylabel="NDCG@10 of the held-out item (1 + 9)",
                title="Ranking the test candidates")  # fmt: skip
    for ax in axes[1:]:
        ax.set_xlabel("skill: probability that a reflection uses the true outcome")
    for ax in axes:
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    fig.tight_layout()
    return fig
