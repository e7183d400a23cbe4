"""The mechanism figure of notebook 05: skilled scripted policies beside the embedded model.

Two panels on the same simulated users, one value per user: (a) the stage gain, how much
more of the final films fit the hidden taste in stage 2 (and 3) than in stage 1, against the
skill of the scripted user and agent items (:func:`~recagents.papers.rec4agentverse.scripted.
stage_sweeps`); (b) the manipulation gain, how much more often the classic recommender routes
to the adversary after its report than after an honest one, against the skill of the
scripted adversary. The embedded model's value from the same run is the contrast point of
each panel. No capable model's run of Rec4Agentverse was released (the paper has no code and
no data), so there is no recorded reference.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from recagents.papers.rec4agentverse.scripted import attack_gain, stage_gain
from recagents.skill import describe_sweep, plot_skill, summarise_units

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: What a summary of per-user values is: ``(mean, low, high, n)``.
Summary = tuple[float, float, float, int]

#: Said on the figure and in the text: why there is no reference curve.
NO_REFERENCE = "no capable-model run of Rec4Agentverse was released (no code, no data)"

#: Colours of the stage 2 and stage 3 curves.
_COLOURS = {2: "#1f77b4", 3: "#ff7f0e"}


def embedded_stage_gains(sessions: pd.DataFrame, seed: int = 0) -> dict[int, Summary]:
    """The embedded model's stage 2 and stage 3 gains over stage 1 (its ``llm`` sessions)."""
    llm = sessions[sessions["mode"] == "llm"]
    return {later: summarise_units(stage_gain(llm, later, 1), seed=seed) for later in (2, 3)}


def embedded_attack_gain(
    decisions: pd.DataFrame, mode: str = "schema", seed: int = 0
) -> Summary | None:
    """The embedded LLM recommender's attack-minus-honest gain in ``mode`` (None if absent)."""
    part = decisions[(decisions["recommender"] == "llm") & (decisions["mode"] == mode)]
    if part.empty:
        return None
    gains = attack_gain(part)
    return summarise_units(gains, seed=seed) if len(gains) else None


def mechanism_figure(
    stage_frames: dict[int, pd.DataFrame],
    attack_frame: pd.DataFrame,
    embedded_stages: dict[int, Summary],
    embedded_attack: Summary | None,
) -> Figure:
    """The two panels: stage gains and the manipulation gain against skill, with the contrast."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12.5, 4.6))
    plot_skill(left, stage_frames[2], "scripted, stage 2 − stage 1", null=0.0,
               embedded=embedded_stages[2], embedded_label="embedded model, stage 2 − 1",
               color=_COLOURS[2])  # fmt: skip
    plot_skill(left, stage_frames[3], "scripted, stage 3 − stage 1", color=_COLOURS[3],
               mark=False)  # fmt: skip
    mean, low, high, n = embedded_stages[3]
    left.errorbar([-0.11], [mean], yerr=[[mean - low], [high - mean]], fmt="D",
                  color="#a50f15", mfc="white", capsize=3,
                  label=f"embedded model, stage 3 − 1 (n = {n})", zorder=4)  # fmt: skip
    left.set_ylabel("gain in share of final films fitting the hidden taste")
    left.set_title("(a) stage effect: the agent item talks back", fontsize=11)
    plot_skill(right, attack_frame, "scripted adversary vs classic recommender", null=0.0,
               embedded=embedded_attack,
               embedded_label="embedded model as LLM recommender, full attack",
               color="#2ca02c")  # fmt: skip
    right.set_xlabel("skill of the scripted adversary (probability it sends its crafted lie)")
    right.set_ylabel("adversary chosen: attack − honest report")
    right.set_title("(b) manipulation effect (schema channel)", fontsize=11)
    for ax in (left, right):
        ax.set_ylim(-1.05, 1.05)
        ax.legend(fontsize=7.5, loc="lower right")
    fig.suptitle(f"Rec4Agentverse's mechanism, per user with 95% intervals; {NO_REFERENCE}",
                 fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


def describe_mechanism(
    stage_frames: dict[int, pd.DataFrame],
    attack_frame: pd.DataFrame,
    embedded_stages: dict[int, Summary],
    embedded_attack: Summary | None,
) -> str:
    """What the two panels show, in sentences made from their numbers."""
    parts = [
        "**(a)** "
        + describe_sweep(
            stage_frames[2],
            "the stage 2 gain in films fitting the hidden taste",
            null_label="no gain",
            embedded=embedded_stages[2],
        ),
        describe_sweep(
            stage_frames[3],
            "the stage 3 gain",
            null_label="no gain",
            embedded=embedded_stages[3],
        ),
        "**(b)** "
        + describe_sweep(
            attack_frame,
            "the adversary's gain in selection (attack − honest)",
            null_label="no gain",
            embedded=embedded_attack,
        )
        + " (The embedded model here is the LLM recommender facing the full attack.)",
        f"There is no reference curve: {NO_REFERENCE}.",
    ]
    return "\n\n".join(parts)
