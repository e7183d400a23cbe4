"""recagents.skill: sweeps summarise per-unit values, and the detectable skill is honest."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from recagents import skill


def _coin_hits(level: float, n: int = 60, seed: int = 0) -> np.ndarray:
    """One value per user: 1 when a policy of this skill finds the target among 2 options."""
    rng = np.random.default_rng(seed)
    return np.array(
        [1.0 if skill.uses_truth(rng, level) else float(rng.random() < 0.5) for _ in range(n)]
    )


def test_sweep_summarises_each_level_over_units():
    frame = skill.sweep(_coin_hits)
    assert list(frame.columns) == list(skill.SWEEP_COLUMNS)
    assert frame["skill"].tolist() == list(skill.DEFAULT_LEVELS)
    assert (frame["n"] == 60).all()
    assert (frame["low"] <= frame["estimate"]).all() and (frame["estimate"] <= frame["high"]).all()
    assert frame["estimate"].iloc[-1] == 1.0


def test_full_skill_is_detected_and_no_skill_is_not():
    frame = skill.sweep(_coin_hits)
    mark = skill.detectable_skill(frame, null=0.5)
    assert mark is not None and 0.25 <= mark <= 1.0
    flat = skill.sweep(lambda level: _coin_hits(0.0, seed=int(level * 100)))
    assert skill.detectable_skill(flat, null=0.5) is None


def test_detectable_skill_needs_every_higher_level():
    frame = pd.DataFrame(
        {"skill": [0, 0.5, 1], "estimate": [0.9, 0.5, 0.9], "low": [0.8, 0.4, 0.8],
         "high": [1, 0.6, 1], "n": [10, 10, 10]}
    )  # fmt: skip
    assert skill.detectable_skill(frame, null=0.5) == 1.0


def test_bad_skill_is_refused():
    with pytest.raises(ValueError, match="skill must be in"):
        skill.sweep(_coin_hits, levels=(0.0, 1.5))
    with pytest.raises(ValueError, match="no per-unit values"):
        skill.sweep(lambda level: [], levels=(0.0,))


def test_description_is_made_from_the_numbers():
    frame = skill.sweep(_coin_hits)
    text = skill.describe_sweep(
        frame, "hit rate", null=0.5, null_label="chance", embedded=(0.5, 0.5, 0.5, 8),
        reference={"authors' run": 0.8},
    )  # fmt: skip
    assert f"{frame['estimate'].iloc[0]:.3g}" in text
    assert "no spread at n = 8" in text and "Authors' run reaches 0.8" in text
    flat = skill.sweep(lambda level: np.full(5, 0.5))
    assert "cannot show the effect" in skill.describe_sweep(flat, "hit rate", null=0.5)


def test_plot_draws_curve_reference_embedded_and_mark():
    frame = skill.sweep(_coin_hits)
    fig, ax = plt.subplots()
    found = skill.plot_skill(
        ax, frame, "scripted", null=0.5, embedded=(0.4, 0.3, 0.5, 8), reference={"ref": 0.7}
    )
    labels = ax.get_legend_handles_labels()[1]
    plt.close(fig)
    assert found == skill.detectable_skill(frame, 0.5)
    assert any(label.startswith("ref: 0.7") for label in labels)
    assert any("embedded model (n = 8)" in label for label in labels)
    records = skill.sweep_records(frame, null=0.5)
    assert len(records["rows"]) == 5 and records["detectable_skill"] == found
