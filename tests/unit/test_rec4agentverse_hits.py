"""Rec4Agentverse's Hit@k panel: why it is what it is, and the skill-0 scripted rows beside it.

On made-up users and turns, :func:`held_out_reach` counts the shortlists that held a held-out
film and :func:`describe_hits` says only what the numbers support; the stage figure's Hit@k
panel states its reason when every value is 0 and is not flat once a varying series is
drawn. On the notebook's default setting, :func:`scripted.scripted_sessions` at skill 1 is the
template baseline (the same rules), run through the loop.
"""

from __future__ import annotations

import dataclasses

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from recagents import plotting
from recagents.columns import USER
from recagents.data import load_dataset
from recagents.llm.runlog import RunLog
from recagents.papers.rec4agentverse import analysis, entry, scripted
from recagents.papers.rec4agentverse.catalogue import Catalogue
from recagents.papers.rec4agentverse.stages import run_stages
from recagents.papers.rec4agentverse.users import SimUser

USERS = [
    SimUser("u1", ("Comedy",), (), "late 1990s", ("f1", "f2"), ()),
    SimUser("u2", ("Drama",), (), "pre-1970", ("f3", "f4"), ()),
]
CATALOGUE = Catalogue(
    cards=(),
    slices={},
    titles={f: f for f in ("f1", "f2", "f3", "f4", "f5")},
    years={"f1": 1997, "f2": 1960, "f3": 1950, "f4": 1996, "f5": 1997},
    genres={"f1": ("Comedy",), "f2": ("Comedy",), "f3": ("Drama",), "f4": ("War",),
            "f5": ("Comedy",)},
    popularity={},
)  # fmt: skip


def _turns(shortlists: dict[tuple[str, str], tuple[str, ...]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{USER: user, "mode": mode, "shortlist": films}
         for (user, mode), films in shortlists.items()]
    )  # fmt: skip


def _hits(values: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"stage": stage, "mode": mode, "metric": "hit", "mean": v, "low": 0.0,
          "high": min(1.0, 2 * v), "n": 2}
         for mode, per_stage in values.items() for stage, v in enumerate(per_stage, start=1)]
    )  # fmt: skip


def test_reach_counts_the_shortlists_that_held_a_held_out_film():
    turns = _turns({("u1", "llm"): ("f5", "f2"), ("u2", "llm"): ("f5",),
                    ("u1", "template"): ("f5",), ("u2", "template"): ("f1",)})  # fmt: skip
    reach = analysis.held_out_reach(turns, USERS).set_index("mode")
    assert reach.loc["llm"].tolist() == [2, 1]  # u1's f2 is a target; u2's f5 is not
    assert reach.loc["template"].tolist() == [2, 0]  # f1 is u1's target, not u2's
    assert analysis.hit_reason(turns, USERS) == "a held-out film was on 1 of 4 shortlists"


def test_fitting_targets_need_a_favourite_genre_and_the_era():
    # f1 fits u1 (Comedy, 1997); f2 is Comedy but 1960; f3 fits u2; f4 is neither
    assert analysis.targets_fitting_taste(USERS, CATALOGUE) == (2, 4)


def test_the_hit_sentences_follow_the_numbers():
    unreachable = _turns({("u1", "template"): ("f5",), ("u2", "template"): ("f5",)})
    text = analysis.describe_hits(
        _hits({"template": [0, 0, 0], "scripted, skill 0": [0.5, 0, 0]}),
        unreachable, USERS, CATALOGUE,
    )  # fmt: skip
    assert "0 of the 2 turns of the template (baseline)" in text
    assert "2 of the 4 held-out films fit" in text
    assert "no final list of these runs could contain one" in text
    assert "at best 0.50 [0.00, 1.00], stage 1" in text
    assert "does not reward following the hidden taste" in text
    reachable = _turns({("u1", "template"): ("f1",)})
    text = analysis.describe_hits(
        _hits({"template": [0.5, 0, 0], "scripted, skill 0": [0.5, 0, 0]}),
        reachable, USERS, CATALOGUE,
    )  # fmt: skip
    assert "could contain one" not in text and "more often" not in text


def test_the_hit_panel_says_why_it_is_flat_and_is_not_flat_beside_a_varying_series():
    flat = _hits({"llm": [0, 0, 0], "template": [0, 0, 0]}).assign(high=0.0)
    fig = analysis.stage_figure(flat, why_flat={"hit": "a held-out film was on 0 of 9 shortlists"})
    notes = [t.get_text() for ax in fig.get_axes() for t in ax.texts]
    assert plotting.flat_panels(fig) == [{"panel": "Hit@k (held-out films)", "noted": True}]
    assert any("0 of 9" in " ".join(note.split()) for note in notes)
    plt.close(fig)
    fig = analysis.stage_figure(
        pd.concat([flat, _hits({"scripted, skill 0": [0.25, 0.0, 0.0]})], ignore_index=True)
    )
    assert plotting.flat_panels(fig) == []
    plt.close(fig)


@pytest.fixture(scope="module")
def setting():
    config = entry.default_config("default")
    catalogue, users = entry.setting(load_dataset("ml-100k"), 16, config.seed)
    return catalogue, users, config


def test_scripted_sessions_at_skill_one_are_the_template_baseline(setting):
    catalogue, users, config = setting
    skilled = scripted.scripted_sessions(users, catalogue, config, 1.0, seed=3, replicates=1)
    assert len(skilled) == 3 * len(users) and set(skilled["mode"]) == {"scripted, skill 1"}
    template = run_stages(users, catalogue, dataclasses.replace(config, agent_mode="template"),
                          (1, 2, 3), None, RunLog()).sessions  # fmt: skip
    columns = [USER, "stage", "pref_share", "profile_jaccard", "era_match"]
    expected = template[columns].sort_values([USER, "stage"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(skilled[columns], expected, check_dtype=False)
    blind = scripted.scripted_sessions(users, catalogue, config, 0.0, seed=3, replicates=2)
    assert blind["pref_share"].mean() < expected["pref_share"].mean()
