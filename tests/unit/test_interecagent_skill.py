"""Positive and negative controls of InteRecAgent's mechanism, and its failure detectors.

The scripted players (``scripted.SkillPolicy``: simulated user, planner and critic, no LLM)
run through the package's own conversation loop on ml-100k's real item table. At skill 1
the user states the target's attributes and the planner turns them into a hard filter, so
Hit@K's interval must exclude 0 and the chance level; at skill 0 neither uses the target
and the interval must not exclude chance. The replay of each plan (``diagnose.target_fate``)
must agree with the hits the loop judged, and each failure detector is checked on made-up
planner replies (a hit and a miss each).
"""

from __future__ import annotations

import numpy as np
import pytest

from recagents import skill
from recagents.data import load_dataset
from recagents.data.datasets import leave_one_out
from recagents.failures import classify
from recagents.papers.interecagent import diagnose, scripted
from recagents.papers.interecagent.config import InteRecConfig, SimulatorConfig
from recagents.papers.interecagent.simulator import make_sessions
from recagents.papers.interecagent.toolbox import build_context

MAX_TURNS = 2
CONFIG = InteRecConfig(max_reflections=1, seed=7)
SIM = SimulatorConfig(seed=7)


@pytest.fixture(scope="module")
def bench():
    dataset = load_dataset("ml-100k")
    split = leave_one_out(dataset, min_rating=3)
    ctx = build_context(dataset, split.history("test"), seed=7)  # no SASRec: popularity ranks
    sessions = make_sessions(split, dataset, 24, seed=7, table=ctx.table)
    return ctx, sessions


@pytest.fixture(scope="module")
def swept(bench):
    ctx, sessions = bench
    runs: dict = {}
    outcome = scripted.hit_outcome(sessions, ctx, CONFIG, SIM, MAX_TURNS, seed=7, keep=runs)
    frame = skill.sweep(outcome, levels=(0.0, 1.0), n_boot=500, seed=7)
    return frame.set_index("skill"), runs


def _chance(ctx) -> float:
    return 1 - (1 - CONFIG.map_n / len(ctx.table)) ** MAX_TURNS


def test_full_skill_finds_the_target_beyond_chance(bench, swept):
    ctx, _ = bench
    frame, runs = swept
    top = frame.loc[1.0]
    assert top["low"] > _chance(ctx) > 0, frame
    assert top["estimate"] >= 0.6, frame
    assert runs[1.0].turns["plan_failures"].sum() == 0, "a scripted plan is always valid"


def test_zero_skill_does_not_detect_the_effect(bench, swept):
    ctx, _ = bench
    frame, _ = swept
    assert frame.loc[0.0]["low"] <= _chance(ctx), frame
    assert frame.loc[0.0]["estimate"] < frame.loc[1.0]["low"], frame
    assert skill.detectable_skill(frame.reset_index(), _chance(ctx)) == 1.0


def test_the_replay_agrees_with_the_loops_hits(swept):
    _, runs = swept
    for run in runs.values():
        fates = diagnose.turn_fates(run)
        merged = fates.merge(run.turns[["user_id", "turn", "hit_id"]], on=["user_id", "turn"])
        assert len(merged) == len(run.turns) == len(fates)
        assert ((merged["fate"] == diagnose.FATES[0]) == merged["hit_id"]).all()
    at_zero = diagnose.turn_fates(runs[0.0])["fate"]
    assert set(at_zero) <= set(diagnose.FATES[:5]), "every uninformed plan runs"


def test_the_scripted_client_is_named_and_every_reply_fits_the_schema(bench, swept):
    ctx, sessions = bench
    client = scripted.skill_client(list(sessions), ctx.table, 0.5)
    assert client.model == "scripted:interecagent-skill-0.5"
    _, runs = swept
    assert all(k in ("plan",) for k in runs[1.0].turns["kind"]), "no reply was refused"


def test_faithful_messages_state_the_target_and_its_filter_keeps_it(bench):
    ctx, sessions = bench
    bands = scripted.popularity_bands(ctx.table)
    rng = np.random.default_rng(0)
    for spec in list(sessions)[:10]:
        first = scripted.user_message(spec, [], True, rng, max_hints=2)
        second = scripted.user_message(spec, [first], True, rng, max_hints=2)
        hints = scripted.read_hints([first, second])
        row = ctx.table.rows[spec.target]
        assert hints.year == row.release_year
        assert set(hints.genres) == {g.strip() for g in (row.tags or "").split(",") if g.strip()}
        low, high = bands[hints.popularity]
        assert low <= row.visited_num <= high
        sql = scripted.hard_filter_sql(hints, bands)
        assert spec.target in ctx.table.select_ids(sql, within=list(ctx.table.ids)).ids
        vague = scripted.user_message(spec, [], False, rng)
        assert not scripted.read_hints([vague]).hard and scripted.read_hints([vague]).liked


def test_target_fate_names_the_losing_step(bench):
    ctx, sessions = bench
    spec = list(sessions)[0]
    row = ctx.table.rows[spec.target]
    other_year = (row.release_year or 1990) - 30
    sql_out = [{"tool_name": "hard_filter",
                "input": f"SELECT id FROM items WHERE release_year = {other_year}"}]  # fmt: skip
    assert diagnose.target_fate(sql_out, ctx, spec.target) == (diagnose.FATES[4], 1)
    unwanted = [{"tool_name": "rank",
                 "input": {"schema": "popularity", "unwanted": [row.display]}}]  # fmt: skip
    assert diagnose.target_fate(unwanted, ctx, spec.target) == (diagnose.FATES[2], 1)
    only = [{"tool_name": "hard_filter", "input": f"SELECT id FROM items WHERE id = '{row.id}'"}]
    assert diagnose.target_fate(only, ctx, spec.target) == (diagnose.FATES[0], 0)
    popular = [{"tool_name": "rank", "input": {"schema": "popularity"}}]
    counts = ctx.table.popularity(ctx.table.ids)
    place = int((counts > ctx.table.rows[spec.target].visited_num).sum())  # items ranked above
    expected = ((diagnose.FATES[0], 0) if place < CONFIG.map_n else (diagnose.FATES[1], 2)
                if place < ctx.rank_keep else (diagnose.FATES[2], 1))  # fmt: skip
    assert diagnose.target_fate(popular, ctx, spec.target) == expected


def _reply(kind="plan", text="[]", problems=(), llm_failure=None, recommended=5):
    return diagnose.PlannerReply("u1", 1, kind, text, tuple(problems), llm_failure, recommended)


MADE_UP = {
    "placeholder": (_reply("answer", "<response to the request>", recommended=0),
                    _reply("answer", "Try Fargo (1996).", recommended=0)),
    "invalid_plan": (_reply("failed", "", ("the plan has no steps",), recommended=0),
                     _reply("plan", '[{"tool_name": "rank"}]')),
    "unknown_tool": (_reply("failed", "", ("step 1: unknown tool 'web'; valid tools: ...",), 0),
                     _reply("failed", "", ("the plan has no steps",), recommended=0)),
    "sql_fails": (_reply("failed", "", ("step 1 (hard_filter): the SQL is incomplete",), 0),
                  _reply("failed", "", ("step 2 (rank): rank schema 'x' is unknown",), 0)),
    "no_candidates": (_reply("plan", "[...]", recommended=0), _reply("plan", "[...]")),
    "copies_demo": (_reply("answer", next(d.reply["answer"] for d in diagnose.DEMOS
                                          if d.reply["kind"] == "answer"), recommended=0),
                    _reply("answer", "Something of my own.", recommended=0)),
    "no_tools": (_reply("answer", "Hello!", recommended=0), _reply("plan", "[...]")),
}  # fmt: skip


@pytest.mark.parametrize("mode", diagnose.PLANNER_FAILURES, ids=lambda m: m.name)
def test_each_failure_detector_hits_and_misses(mode):
    hit, miss = MADE_UP[mode.name]
    assert mode.detect(hit), f"{mode.name} missed {hit}"
    assert not mode.detect(miss), f"{mode.name} fired on {miss}"


def test_classify_counts_the_made_up_replies():
    units = [pair[0] for pair in MADE_UP.values()]
    report = classify(units, diagnose.PLANNER_FAILURES, "planner replies", diagnose.reply_example)
    counts = {c.name: c.count for c in report.counts}
    assert all(counts[name] >= 1 for name in MADE_UP)
    assert report.n == len(units) and "planner replies" in report.markdown()
