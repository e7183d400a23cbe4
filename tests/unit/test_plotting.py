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
