"""recagents.plotting.flat_panels: a panel that shows no difference is found, and so is its note.

The published census (at most 3 figures with a flat panel, each saying why on its face) is
read from the PNGs in figures/, where :func:`recagents.plotting.savefig` writes it.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from recagents import plotting

FIGURES = Path(__file__).resolve().parents[2] / "figures"


def test_a_flat_curve_is_found_and_a_varying_one_is_not():
    fig, (flat, varying, noted) = plt.subplots(1, 3)
    flat.plot([1, 2, 3], [0.2, 0.2, 0.2])
    flat.set_title("flat")
    flat.axhline(0.5)  # a reference line is not data
    varying.plot([1, 2, 3], [0.2, 0.3, 0.2])
    varying.axhline(0.2)
    noted.errorbar([0.4, 0.4], [0, 1], xerr=0.1, fmt="o")
    plotting.note_if_degenerate(noted, [0.4, 0.4], axis="x")
    found = plotting.flat_panels(fig)
    plt.close(fig)
    assert found == [{"panel": "flat", "noted": False}, {"panel": "panel 3", "noted": True}]


def test_equal_estimates_with_intervals_are_flat():
    fig, ax = plt.subplots()
    ax.errorbar([1, 2, 3], [0.2, 0.2, 0.2], yerr=0.1, capsize=3, marker="o")
    assert plotting.flat_panels(fig) == [{"panel": "panel 1", "noted": False}]
    ax.errorbar([1, 2, 3], [0.2, 0.3, 0.2], yerr=0.1, capsize=3, marker="o")
    assert plotting.flat_panels(fig) == []
    plt.close(fig)


def test_bars_of_one_height_are_flat():
    fig, ax = plt.subplots()
    ax.bar(["a", "b", "c"], [2, 2, 2])
    assert plotting.flat_panels(fig) == [{"panel": "panel 1", "noted": False}]
    plt.close(fig)


def test_savefig_writes_the_census_into_the_png(tmp_path, monkeypatch):
    monkeypatch.setenv(plotting.FIGURES_DIR_ENV, str(tmp_path))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [3, 3])
    path = plotting.savefig(fig, "census")
    plt.close(fig)
    assert plotting.read_flat_panels(path) == [{"panel": "panel 1", "noted": False}]


@pytest.mark.skipif(not FIGURES.is_dir(), reason="no figures/ in this checkout")
def test_published_figures_have_at_most_three_flat_ones_each_saying_why():
    census = {png.name: plotting.read_flat_panels(png) for png in sorted(FIGURES.glob("*.png"))}
    unrecorded = [name for name, panels in census.items() if panels is None]
    assert not unrecorded, f"figures not written by plotting.savefig: {unrecorded}"
    flat = {name: panels for name, panels in census.items() if panels}
    assert len(flat) <= 3, f"{len(flat)} figures have a flat panel: {flat}"
    silent = {name: p for name, panels in flat.items() for p in panels if not p["noted"]}
    assert not silent, f"flat panels that do not say why on their face: {silent}"
