"""Tests for recagents.plotting: figures directory resolution and reproducible PNGs."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from recagents import plotting  # noqa: E402
from recagents.plotting import figures_dir, savefig, set_theme  # noqa: E402


@pytest.fixture
def fig():
    set_theme()
    figure, ax = plt.subplots()
    ax.plot([0, 1, 2], [3, 1, 2], label="line")
    ax.set_title("title")
    ax.legend()
    yield figure
    plt.close(figure)


@pytest.fixture
def figs_env(tmp_path, monkeypatch):
    out = tmp_path / "figs"
    monkeypatch.setenv(plotting.FIGURES_DIR_ENV, str(out))
    monkeypatch.delenv(plotting.SAVEFIG_ENV, raising=False)
    return out


def test_savefig_writes_png_to_env_dir(fig, figs_env):
    path = savefig(fig, "00_test_figure")
    assert path == figs_env / "00_test_figure.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_savefig_is_byte_reproducible_and_has_no_version(fig, figs_env):
    first = savefig(fig, "a").read_bytes()
    second = savefig(fig, "a").read_bytes()
    assert first == second
    assert b"Matplotlib" not in first
    assert b"Software" not in first


def test_savefig_same_bytes_for_freshly_drawn_figure(figs_env):
    def draw():
        set_theme()
        figure, ax = plt.subplots()
        ax.bar(["x", "y"], [1, 2])
        return figure

    f1, f2 = draw(), draw()
    try:
        assert savefig(f1, "one").read_bytes() == savefig(f2, "two").read_bytes()
    finally:
        plt.close(f1)
        plt.close(f2)


@pytest.mark.parametrize("bad", ["a/b", "a\\b", "fig.png", "fig.pdf", "", ".", ".."])
def test_savefig_rejects_bad_names(fig, figs_env, bad):
    with pytest.raises(ValueError):
        savefig(fig, bad)
    assert not figs_env.exists() or not any(figs_env.iterdir())


def test_savefig_disabled_writes_nothing(fig, figs_env, monkeypatch):
    monkeypatch.setenv(plotting.SAVEFIG_ENV, "0")
    path = savefig(fig, "skipped")
    assert path == figs_env / "skipped.png"
    assert not path.exists()


def test_figures_dir_walks_up_to_pyproject(tmp_path, monkeypatch):
    monkeypatch.delenv(plotting.FIGURES_DIR_ENV, raising=False)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    sub = tmp_path / "notebooks" / "deeper"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    d = figures_dir()
    assert d == (tmp_path / "figures").resolve()
    assert d.is_dir()


def test_figures_dir_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv(plotting.FIGURES_DIR_ENV, str(tmp_path / "x" / "y"))
    assert figures_dir() == tmp_path / "x" / "y"
    assert (tmp_path / "x" / "y").is_dir()


def test_set_theme_is_idempotent():
    set_theme()
    first = dict(matplotlib.rcParams)
    set_theme()
    assert dict(matplotlib.rcParams) == first
    assert matplotlib.rcParams["axes.labelsize"] == 12


def test_import_does_not_touch_rcparams():
    import importlib
    import subprocess
    import sys

    code = (
        "import matplotlib as mpl; before = dict(mpl.rcParams); "
        "import recagents.plotting; assert dict(mpl.rcParams) == before"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert importlib.import_module("recagents.plotting") is plotting


# --------------------------------------------------------------------------- honest figures


def _notes(figure):
    """Texts written by note_if_degenerate (and the causal graph's empty note)."""
    return [
        t.get_text() for ax in figure.axes for t in ax.texts if t.get_gid() == plotting.NOTE_GID
    ]


def _summary(means, lows=None, highs=None, methods=None):
    import pandas as pd

    methods = methods or [f"m{k}" for k in range(len(means))]
    return pd.DataFrame(
        {"method": methods, "mean": means, "low": lows or means, "high": highs or means}
    )


def test_flat_interval_panel_gets_a_note_and_the_natural_range():
    figure = plotting.interval_plot(
        _summary([1.0] * 5), xlabel="satisfaction", scale="satisfaction"
    )
    try:
        notes = _notes(figure)
        assert len(notes) == 1 and "all 5 methods are 1" in notes[0].replace("\n", " ")
        low, high = figure.axes[0].get_xlim()
        assert low < 1.0 < 10.0 < high and high - low < 10.0, "pinned to 1-10, not autoscaled"
    finally:
        plt.close(figure)


def test_all_zero_panel_says_so_and_is_pinned_to_zero_one_without_a_scale():
    figure = plotting.curves_plot({"a": [0.0, 0.0, 0.0], "b": [0.0, 0.0]}, ylabel="NDCG@10")
    try:
        assert _notes(figure) == ["every value is 0 (5 points)"]
        low, high = figure.axes[0].get_ylim()
        assert low <= 0.0 and 1.0 <= high < 1.1
    finally:
        plt.close(figure)


def test_non_degenerate_panel_gets_no_note_and_keeps_autoscale():
    summary = _summary([0.2, 0.5, 0.4], [0.1, 0.3, 0.2], [0.3, 0.7, 0.6])
    figure = plotting.interval_plot(summary, xlabel="HR@1")
    try:
        assert _notes(figure) == []
        assert figure.axes[0].get_xlabel() == "HR@1"
        low, high = figure.axes[0].get_xlim()
        assert 0.0 < low and high < 1.0, "no scale asked for: autoscaled to the data"
    finally:
        plt.close(figure)
    _, ax = plt.subplots()
    try:
        assert plotting.note_if_degenerate(ax, [0.1, 0.2]) is None and not ax.texts
        assert plotting.note_if_degenerate(ax, [0.3]) is None, "one value is not a flat panel"
    finally:
        plt.close(ax.figure)


def test_identical_rows_and_a_flat_hue_group_are_named_under_the_axis():
    import pandas as pd

    rows = _summary([0.4, 0.4, 0.4, 0.3, 0.3], [0.3, 0.3, 0.3, 0.2, 0.2], [0.5, 0.5, 0.5, 0.4, 0.4])
    figure = plotting.interval_plot(rows, xlabel="NDCG@10")
    try:
        label = figure.axes[0].get_xlabel().replace("\n", " ")
        assert "3 identical, 0.4 [0.3, 0.5]: m0, m1, m2" in label and _notes(figure) == []
        assert "m3" not in label, "two equal rows are not worth a caption"
    finally:
        plt.close(figure)
    both = pd.concat(
        [_summary([0.0, 0.0]).assign(task="recall"),
         _summary([0.2, 0.6], [0.1, 0.4], [0.3, 0.8]).assign(task="ndcg")]
    )  # fmt: skip
    figure = plotting.interval_plot(both, hue="task", xlabel="score")
    try:
        assert "recall: all 2 methods are 0" in figure.axes[0].get_xlabel()
    finally:
        plt.close(figure)


def test_integer_axis_ticks_are_integers():
    _, ax = plt.subplots()
    try:
        ax.plot([0, 1, 2], [16.05, 16.51, 15.82])
        plotting.integer_axis(ax, "x")
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)
        with pytest.raises(ValueError, match="axis"):
            plotting.integer_axis(ax, "z")
    finally:
        plt.close(ax.figure)
    figure = plotting.curves_plot({"a": [0.1, 0.2, 0.25]})
    try:
        assert all(float(t).is_integer() for t in figure.axes[0].get_xticks())
    finally:
        plt.close(figure)


def test_paper_reference_is_drawn_on_the_same_axis():
    _, ax = plt.subplots()
    try:
        line = plotting.reference_line(ax, 0.377, "paper AFL", style="paper")
        assert line.get_label() == "paper AFL: 0.377" and line.get_gid() == "reference:paper"
        assert list(line.get_ydata()) == [0.377, 0.377]
        with pytest.raises(ValueError, match="style"):
            plotting.reference_line(ax, 1.0, "x", style="dotted")
    finally:
        plt.close(ax.figure)
    summary = _summary([1.0, 1.0, 1.0], methods=["LightGCN", "MF", "Pop"])
    figure = plotting.interval_plot(
        summary, scale="satisfaction", paper={"LightGCN": 3.85}, recorded={"MF": 3.8}
    )
    try:
        ax = figure.axes[0]
        marks = {c.get_gid(): c.get_offsets().tolist() for c in ax.collections if c.get_gid()}
        assert marks["reference:paper"] == [[3.85, 0.0]]
        assert marks["reference:recorded"] == [[3.8, 1.0]]
        assert "paper" in ax.get_legend_handles_labels()[1]
    finally:
        plt.close(figure)
    figure = plotting.interval_plot(_summary([0.1, 0.3]), paper=0.9)
    try:
        assert figure.axes[0].get_xlim()[1] > 0.9, "the paper's value stays on the axis"
    finally:
        plt.close(figure)
    with pytest.raises(ValueError, match="no such row"):
        plotting.interval_plot(summary, paper={"BPR": 0.5})


def test_scales_resolve_by_metric_name():
    assert plotting.resolve_scale("NDCG@10") == (0.0, 1.0)
    assert plotting.resolve_scale("satisfaction") == (1.0, 10.0)
    assert plotting.resolve_scale((2, 3)) == (2.0, 3.0)
    with pytest.raises(ValueError, match="names no known metric"):
        plotting.resolve_scale("rating_mse")
    with pytest.raises(ValueError, match="low < high"):
        plotting.resolve_scale((1, 1))


# --------------------------------------------------------------------------- paper figures


def test_a_round_curve_that_never_moves_says_so():
    import matplotlib.pyplot as plt
    import pandas as pd

    from recagents.papers.afl.analysis import rounds_curve_figure

    flat = pd.DataFrame({"limit": [1, 2, 3], "mean": 0.2, "low": 0.1, "high": 0.4})
    moving = flat.assign(mean=[0.2, 0.25, 0.25])
    figures = [rounds_curve_figure(curve, {"SASRec": 0.5}) for curve in (flat, moving)]
    try:
        assert [" ".join(note.split()) for note in _notes(figures[0])] == [
            "the same HR@1 at every round limit, 0.2 [0.1, 0.4]: no extra round changed a hit"
        ]
        assert not _notes(figures[1])
    finally:
        for fig in figures:
            plt.close(fig)


def test_paper_figures_flag_flat_panels():
    import pandas as pd

    from recagents.papers.afl.analysis import rounds_curve_figure
    from recagents.papers.rec4agentverse.analysis import stage_figure

    curve = pd.DataFrame({"limit": [1, 2, 3], "mean": 0.0, "low": 0.0, "high": 0.0})
    figures = [rounds_curve_figure(curve, {"SASRec": 0.3}, paper={"paper AFL": 0.377})]
    comparison = pd.DataFrame(
        {"stage": [1, 2, 1, 2], "mode": "llm", "metric": ["hit", "hit", "pref_share", "pref_share"],
         "mean": [0.0, 0.0, 0.2, 0.6], "low": [0.0, 0.0, 0.1, 0.4], "high": [0.0, 0.0, 0.3, 0.8]}
    )  # fmt: skip
    figures.append(stage_figure(comparison, max_turns=3))
    try:
        assert _notes(figures[0]) == ["every value is 0 (3 round limits)"]
        labels = figures[0].axes[0].get_legend_handles_labels()[1]
        assert "paper AFL: 0.377" in labels and figures[0].axes[0].get_ylim()[1] >= 1.0
        hit, share = figures[1].axes[:2]
        assert [t.get_gid() for t in hit.texts] == [plotting.NOTE_GID] and not share.texts
        assert share.get_ylim()[0] < 0.0 and share.get_ylim()[1] > 1.0, "shares on 0-1"
        never = pd.DataFrame(
            {"stage": [1, 2], "mode": "template", "metric": "turns_needed",
             "mean": [2.6, 1.5], "low": [2.0, 1.0], "high": [3.0, 2.0]}
        )  # fmt: skip
        figures.append(stage_figure(never, max_turns=2))  # 3 = never satisfied within 2 turns
        low, high = figures[2].axes[0].get_ylim()
        assert low < 1.0 and high > 3.0, "turns from 1 to max_turns + 1 stay on the axis"
    finally:
        for figure in figures:
            plt.close(figure)


def test_agent4rec_figures_titles_rounds_and_scales():
    import numpy as np
    import pandas as pd

    from recagents.papers.agent4rec.bubble import bubble_figure
    from recagents.papers.agent4rec.causal import causal_figure
    from recagents.papers.agent4rec.traits import trait_figure

    rng = np.random.default_rng(0)
    levels = np.tile([1, 2, 3], 6)
    behaviour = pd.DataFrame(
        {"exit_page": 1.0, "n_watched": rng.integers(0, 5, 18), "rating_mse": rng.random(18),
         "n_genres_watched": rng.integers(0, 6, 18), "activity": levels, "conformity": levels,
         "diversity": levels}
    )  # fmt: skip
    figure = trait_figure(behaviour, n_boot=20, recorded={"exit_page": [2.67, 3.74, 4.37]})
    try:
        titles = [ax.get_title() for ax in figure.axes]
        assert len(set(titles)) == len(titles) == 4 and titles[0] == "activity: exit page"
        assert len(_notes(figure)) == 1 and figure.axes[0].get_ylim()[1] > 4.37
    finally:
        plt.close(figure)
    table = pd.DataFrame(
        {"round": [0, 1, 2], "n_genres": [16, 17, 17], "top_share": [0.1605, 0.1651, 0.1582]}
    )
    figure = bubble_figure(table, n_genres_total=18)
    try:
        share, genres = figure.axes
        assert all(float(t).is_integer() for t in share.get_xticks())
        assert share.get_ylim()[0] <= 0 and share.get_ylim()[1] >= 100, "no zoom on a wobble"
        assert genres.get_ylim()[0] <= 0 and genres.get_ylim()[1] >= 18 and not _notes(figure)
    finally:
        plt.close(figure)
    names = ["a", "b", "c"]
    figure = causal_figure(pd.DataFrame(np.zeros((3, 3)), index=names, columns=names))
    try:
        assert _notes(figure) == ["no edge with |weight| > 0.05"]
    finally:
        plt.close(figure)


def test_interval_plot_names_rows_that_are_all_identical():
    """Three memories giving the same estimate and interval: said under the axis."""
    import pandas as pd

    from recagents import plotting

    summary = pd.DataFrame(
        {"method": ["a", "b", "c"], "mean": [0.35] * 3, "low": [0.3] * 3, "high": [0.41] * 3}
    )
    fig = plotting.interval_plot(summary, xlabel="NDCG@10")
    label = fig.axes[0].get_xlabel()
    assert "all 3 methods identical, 0.35 [0.3, 0.41]" in label
