"""Notebook 03's generated sentences and its user-level intervals (issue #39).

The sentences must follow the numbers they are given (a zero-width interval is "no spread",
never precision), and the user simulation's intervals must resample users, not judgements.
"""

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest

from recagents.columns import ITEM, LABEL, USER
from recagents.metrics import PairedBootstrapResult, paired_bootstrap
from recagents.papers.afl import narrate
from recagents.papers.afl.analysis import rounds_curve_figure
from recagents.papers.afl.evaluate import always_yes_metrics, simulation_metrics, user_bootstrap
from recagents.papers.afl.samples import Sample
from recagents.papers.afl.seeds import seeds_text


def _judged(per_user: dict[str, list[tuple[int, bool]]], agent: str = "AFL") -> pd.DataFrame:
    rows = [
        (agent, user, "1:1", f"{user}-{k}", label, predicted)
        for user, pairs in per_user.items()
        for k, (label, predicted) in enumerate(pairs)
    ]
    return pd.DataFrame(rows, columns=["agent", USER, "ratio", ITEM, LABEL, "predicted"])


def test_user_bootstrap_resamples_users_not_judgements():
    # Two users: one judged perfectly, one always wrong; 10 judgements each.
    good = [(1, True)] * 5 + [(0, False)] * 5
    bad = [(1, False)] * 5 + [(0, True)] * 5
    table = simulation_metrics(_judged({"u1": good, "u2": bad}), n_boot=400, resample="users")
    accuracy = table.set_index("metric").loc["accuracy"]
    assert accuracy["mean"] == pytest.approx(0.5)
    assert accuracy["n"] == 2 and accuracy["judgements"] == 20
    # Resampling two users gives accuracy 0, 0.5 or 1: the interval spans the two users.
    assert accuracy["low"] == pytest.approx(0.0) and accuracy["high"] == pytest.approx(1.0)
    # Resampling the 20 judgements as if independent gives a far narrower, wrong interval.
    naive = simulation_metrics(_judged({"u1": good, "u2": bad}), n_boot=400)
    naive_acc = naive.set_index("metric").loc["accuracy"]
    assert naive_acc["n"] == 20 and naive_acc["high"] - naive_acc["low"] < 0.6


def test_user_bootstrap_has_no_spread_when_every_user_agrees():
    same = [(1, True), (0, True)]
    table = user_bootstrap([1, 0, 1, 0], [True, True, True, True], ["a", "a", "b", "b"], n_boot=50)
    f1 = table.set_index("metric").loc["f1"]
    assert f1["mean"] == pytest.approx(2 / 3) and f1["low"] == f1["high"] == f1["mean"]
    floor = always_yes_metrics(_judged({"a": same, "b": same}), n_boot=50, resample="users")
    assert set(floor["n"]) == {2} and (floor["high"] - floor["low"]).abs().max() == 0
    with pytest.raises(ValueError, match="resample"):
        simulation_metrics(_judged({"a": same}), resample="items")


def test_interval_and_paired_text_say_no_spread_for_zero_width():
    assert narrate.interval(0.5, 0.5, 0.5, 2, "users") == "0.500 (no spread at n = 2 users)"
    assert narrate.interval(0.5, 0.4, 0.6, 24) == "0.500 [0.400, 0.600] (n = 24)"
    zero = paired_bootstrap([1, 0, 1], [1, 0, 1], n_boot=50)
    text = narrate.paired_text("AFL − Rec Agent", zero, 3)
    assert "no spread at n = 3 samples" in text and "no pair differs" in text
    moved = paired_bootstrap([1, 1, 1, 0, 1, 1], [0, 0, 1, 0, 0, 1], n_boot=200)
    text = narrate.paired_text("AFL − Rec Agent", moved, 6)
    assert "no spread" not in text and f"p = {moved.p_value:.3f}" in text
    assert "same paired bootstrap" in text


def test_expectation_text_says_no_spread_instead_of_a_half_width():
    text = narrate.expectation_text("HR@1", (0.0, 0.0, 0.0), 3, "m", chance=0.05)
    assert "no spread at n = 3" in text and "Half the interval" not in text
    wide = narrate.expectation_text("HR@1", (0.2, 0.1, 0.3), 24, "m", chance=0.05)
    assert "Half the interval's width is 0.100" in wide


def test_seeds_text_says_no_spread():
    summary = {"diff": 0.0, "low": 0.0, "high": 0.0, "n": 48, "n_seeds": 2, "mde": 0.0}
    text = seeds_text(summary, "m")
    assert "no spread at n = 48" in text and "[+0.000, +0.000]" not in text


def _sample(user: str, target: str, prior: str) -> Sample:
    return Sample(user, ("h",), ("a", "b", "c", "d"), target, prior, (prior,))


def test_tool_gap_text_counts_what_the_agent_did_with_the_tools_pick():
    samples = [_sample("u1", "a", "a"), _sample("u2", "b", "a"), _sample("u3", "c", "a")]
    single = pd.DataFrame({USER: ["u1", "u2", "u3"], ITEM: ["b", "b", "d"]})
    text = narrate.tool_gap_text(samples, single, tool_hr1=1 / 3, agent_hr1=1 / 3, n_candidates=4)
    assert "at least as high as SASRec alone" in text
    assert "proposed that pick in 0 of 3 samples" in text
    assert "other 3 proposals hit the target 1 time " in text


def test_bias_text_reads_the_positions_it_is_given():
    measures = pd.DataFrame(
        {
            "method": ["Rec Agent"] * 4,
            USER: ["u1", "u2", "u3", "u4"],
            ITEM: ["a", "b", "c", "d"],
            "position": [2, 2, 20, 1],
            "pop_percentile": [10.0, 20.0, 30.0, 40.0],
        }
    )
    result = PairedBootstrapResult(0.0, 0.0, 0.0, 1.0)
    tests = pd.DataFrame(
        [{"measure": "mean position", "diff": 0.0, "low": 0.0, "high": 0.0,
          "p_value": result.p_value, "n": 4}]
    )  # fmt: skip
    text = narrate.bias_text(measures, tests, n_candidates=20)
    assert "position 1 in 25%" in text and "position 2 in 50%" in text
    assert "mean popularity percentile 25" in text and "no spread at n = 4" in text


def test_simulation_text_names_the_floor_and_the_users():
    judged = pd.concat(
        [
            _judged({"a": [(1, True), (0, True)], "b": [(1, True), (0, True)]}, "AFL"),
            _judged({"a": [(1, True), (0, False)], "b": [(1, True), (0, True)]}, "User Agent"),
        ],
        ignore_index=True,
    )
    table = simulation_metrics(judged, n_boot=50, resample="users")
    floor = always_yes_metrics(judged, n_boot=50, resample="users")
    text = narrate.simulation_text(table, floor, judged, relative=12.5)
    assert "(n = 2 users, 4 judgements per agent)" in text
    assert "AFL says yes to 100%" in text and "the floor's" in text
    assert "User Agent says yes to 75%" in text and "+12.5%" in text


def test_rounds_figure_draws_chance():
    import matplotlib.pyplot as plt

    curve = pd.DataFrame(
        {"limit": [1, 2], "mean": [0.2, 0.3], "low": [0.1, 0.2], "high": [0.3, 0.4]}
    )
    fig = rounds_curve_figure(curve, {"SASRec": 0.5}, n_candidates=20, chance=0.05)
    try:
        labels = fig.axes[0].get_legend_handles_labels()[1]
        assert "chance (1/20): 0.05" in labels
    finally:
        plt.close(fig)
