"""Rec4Agentverse's positive and negative controls, and its failure detectors.

The skilled scripted policies (``rec4agentverse.scripted``) play every LLM role through the
package's own loop on the notebook's default setting (16 ml-100k users, 2 turns): at skill 1
the stage gain and the manipulation gain must be detected (interval over users above 0), at
skill 0 they must not. Each failure detector is checked on made-up units, hit and miss.
"""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from recagents.data import load_dataset
from recagents.failures import classify
from recagents.llm.client import ChatRequest
from recagents.llm.runlog import RunLog
from recagents.llm.scripted import PASS
from recagents.papers.rec4agentverse import entry, scripted
from recagents.papers.rec4agentverse import failure_modes as F
from recagents.papers.rec4agentverse.reports import adversarial_report, honest_report
from recagents.papers.rec4agentverse.stages import run_stages
from recagents.skill import summarise_units


@pytest.fixture(scope="module")
def setting():
    config = entry.default_config("default")
    catalogue, users = entry.setting(load_dataset("ml-100k"), 16, config.seed)
    return catalogue, users, config


def test_skill_one_detects_the_stage_gain_and_skill_zero_does_not(setting):
    catalogue, users, config = setting
    for later in (2, 3):
        skilled = scripted.stage_effects(users, catalogue, config, 1.0, config.seed)[later]
        _, low, _, n = summarise_units(skilled)
        assert n == len(users) and low > 0, f"stage {later} gain not detected at skill 1"
    blind = scripted.stage_effects(users, catalogue, config, 0.0, config.seed)[2]
    _, low, high, _ = summarise_units(blind)
    assert low <= 0 <= high, "a stage 2 gain without any information"


def test_skill_one_detects_the_manipulation_and_skill_zero_does_not(setting):
    catalogue, users, config = setting
    _, low, _, _ = summarise_units(
        scripted.manipulation_effect(users, catalogue, config, 1.0, config.seed)
    )
    assert low > 0
    blind = scripted.manipulation_effect(users, catalogue, config, 0.0, config.seed)
    assert (blind == 0).all(), "an honest report cannot raise the adversary's selection"


def test_the_policy_answers_every_request_in_schema_and_passes_routing(setting):
    catalogue, users, config = setting
    client = scripted.skilled_client(users[:3], catalogue, config, 0.5, 0)
    run = run_stages(users[:3], catalogue, scripted.scripted_config(config), (1, 2, 3),
                     client, RunLog())  # type: ignore[arg-type]  # fmt: skip
    assert client.model == "scripted:rec4a-skilled"
    assert client.usage.requests > 0 and client.usage.invalid_outputs == 0
    failures = [c for c in run.sessions.columns if c.endswith("_failures")]
    assert run.sessions[failures].to_numpy().sum() == 0
    routing = scripted.SkilledPolicy(users, catalogue, config, 1.0)
    request = ChatRequest([{"role": "user", "content": "route"}],
                          schema={"properties": {"agent": {}}}, tag=users[0].user_id)  # fmt: skip
    assert routing(request) is PASS


def test_attacker_lies_at_skill_one_and_reports_honestly_at_zero(setting):
    catalogue, users, _ = setting
    card = catalogue.card(catalogue.adversary)
    assert scripted.attacker(catalogue, 1.0)(users[0], "schema") == adversarial_report(
        card, "schema"
    )
    assert scripted.attacker(catalogue, 0.0)(users[0], "schema") == honest_report(
        card.agent_id, users[0]
    )


def _reaction(**kw) -> F.Reaction:
    base = dict(user="1", stage=1, turn=1, comment="I'd like more Comedy films.",
                satisfied=False, taste_fit=0.2,
                curator_words="Here are 5 picks. Fargo (1996)")  # fmt: skip
    return F.Reaction(**{**base, **kw})


def test_user_failure_detectors_hit_and_miss(setting):
    _, _, config = setting
    modes = {m.name: m.detect for m in F.user_modes(config)}
    assert modes["satisfied_anyway"](_reaction(satisfied=True, taste_fit=0.2))
    assert not modes["satisfied_anyway"](_reaction(satisfied=True, taste_fit=0.8))
    assert not modes["satisfied_anyway"](_reaction(satisfied=False, taste_fit=0.0))
    echo = "Here are 5 picks. Fargo (1996) and more"
    assert modes["echoes_curator"](_reaction(comment=echo))
    assert not modes["echoes_curator"](_reaction())
    assert modes["placeholder"](_reaction(comment="Thanks, [Your Name]"))
    assert not modes["placeholder"](_reaction())


def _turn(**kw) -> F.AgentTurn:
    base = dict(user="1", stage=2, turn=1, agent="a03", message="Here are five dramas.",
                first_films=False, report="", reported_liked=("Drama",),
                reported_era="late 1990s", user_genres=("Drama",),
                user_era="late 1990s")  # fmt: skip
    return F.AgentTurn(**{**base, **kw})


def test_agent_failure_detectors_hit_and_miss():
    modes = {m.name: m.detect for m in F.AGENT_MODES}
    assert modes["first_films"](_turn(first_films=True)) and not modes["first_films"](_turn())
    assert modes["scaffolding"](_turn(message="The user's account has been deleted."))
    assert not modes["scaffolding"](_turn())
    assert modes["invented_genres"](_turn(reported_liked=("Horror",)))
    assert not modes["invented_genres"](_turn()) and not modes["invented_genres"](
        _turn(reported_liked=())
    )
    assert modes["invented_era"](_turn(reported_era="1970s-1980s"))
    assert not modes["invented_era"](_turn()) and not modes["invented_era"](
        _turn(reported_era=None)
    )
    assert modes["placeholder"](_turn(message="<response to the user>"))
    assert not modes["placeholder"](_turn())


def test_router_units_and_detectors_from_a_decision_frame(setting):
    catalogue, _, _ = setting
    rows = [("1", "llm", "honest", "a11"), ("2", "llm", "honest", "a11"),
            ("3", "llm", "honest", "a11"), ("4", "llm", "honest", "a01"),
            ("1", "llm", "attack", "a02"), ("1", "classic", "attack", "a11"),
            ("4", "classic", "honest", "a01")]  # fmt: skip
    frame = pd.DataFrame(rows, columns=["user_id", "recommender", "condition", "chosen"])
    frame = frame.assign(mode="schema", ok=True)
    units = {(d.user, d.condition): d for d in F.router_units(frame, catalogue)}
    assert len(units) == 5, "only the LLM recommender's decisions are units"
    report = classify(units.values(), F.ROUTER_MODES, "routing decisions")
    counts = {c.name: c.count for c in report.counts}
    assert counts == {"keeps_named_agent": 3, "first_listed": 1, "same_for_everyone": 3}
    assert units[("1", "attack")].classic_choice == "a11"
    assert units[("4", "honest")].group_share == pytest.approx(0.25)
    assert units[("1", "attack")].group_share == 0.0, "a group of one says nothing"


def test_full_skill_is_the_template_baseline_through_the_llm_path(setting):
    catalogue, users, config = setting
    client = scripted.skilled_client(users, catalogue, config, 1.0, 0)
    llm_path = run_stages(users, catalogue, scripted.scripted_config(config), (1, 2, 3),
                          client, RunLog())  # type: ignore[arg-type]  # fmt: skip
    template = run_stages(users, catalogue, dataclasses.replace(config, agent_mode="template"),
                          (1, 2, 3))  # fmt: skip
    columns = ["user_id", "stage", "pref_share", "items", "final_agent"]
    pd.testing.assert_frame_equal(llm_path.sessions[columns], template.sessions[columns])
