"""InteRecAgent's turn, step by step: the named steps of plan -> execute -> critic -> re-plan.

The turn loop (:func:`run_turns`) is split into steps that each act on one session's turn;
these tests drive each step directly with hand-made replies (no model, no server) on the
tiny fixture dataset, so that each rule of the loop is pinned where it lives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from recagents.data import load_dataset
from recagents.data.datasets import leave_one_out
from recagents.llm.client import ChatResult
from recagents.papers.interecagent import agent as A
from recagents.papers.interecagent import sqlguard
from recagents.papers.interecagent.config import APOLOGY, InteRecConfig
from recagents.papers.interecagent.session import AgentSession, Attempt
from recagents.papers.interecagent.toolbox import build_context

TINY_PATH = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
CONFIG = InteRecConfig(demo_mode="fixed")


@pytest.fixture(scope="module")
def ctx():
    dataset = load_dataset(TINY_PATH)
    split = leave_one_out(dataset, min_rating=3)
    return build_context(dataset, split.history("test"))


def _turn(ctx, keep: bool = False) -> A._Turn:
    return A._Turn(AgentSession.start("s0", ctx), "something fun", [], keep, False)


def _ok(data) -> ChatResult:
    return ChatResult(ok=True, text="{}", data=data)


def test_plan_attempt_answers_runs_or_fails(ctx):
    turn = _turn(ctx)
    answer = A._plan_attempt(turn, _ok({"kind": "answer", "answer": "Hi!", "plan": []}), CONFIG)
    assert answer.kind == "answer" and answer.reply == "Hi!" and turn.plan_failures == 0
    plan = {"kind": "plan", "answer": "", "plan": [{"tool_name": "map_titles", "input": 3}]}
    ran = A._plan_attempt(turn, _ok(plan), CONFIG)
    assert ran.kind == "plan" and ran.track is not None and len(ran.track.recommended_ids) == 3
    assert ran.reply and turn.plan_failures == 0
    broken = ChatResult(ok=False, error="timeout", failure="transport")
    failed = A._plan_attempt(turn, broken, CONFIG)
    assert failed.kind == "failed" and failed.llm_failure == "timeout"
    assert turn.plan_failures == 1


def test_react_step_runs_a_step_and_ends_at_map_titles(ctx):
    turn = _turn(ctx)
    turn.restore_bus()
    run = A._ReactRun()
    step = {"thought": "t", "action": "lookup", "input": "SELECT title FROM items LIMIT 1"}
    assert A._react_step(turn, run, _ok(step), CONFIG) is True
    assert run.steps and run.seen[-1][1] and not run.seen[-1][1].startswith("ERROR")
    invalid = {"thought": "t", "action": "hard_filter", "input": "SELECT title FROM items"}
    assert A._react_step(turn, run, _ok(invalid), CONFIG) is True, "an invalid step is shown"
    assert run.seen[-1][1].startswith("ERROR: ") and turn.plan_failures == 1
    mapping = {"thought": "t", "action": "map_titles", "input": 2}
    assert A._react_step(turn, run, _ok(mapping), CONFIG) is False, "map_titles ends the turn"
    attempt = A._react_attempt(turn, run, CONFIG)
    assert attempt.kind == "plan" and len(attempt.track.recommended_ids) == 2
    assert attempt.thoughts == ["t", "t", "t"]


def test_react_attempt_adds_map_titles_or_answers(ctx):
    turn = _turn(ctx)
    turn.restore_bus()
    run = A._ReactRun()
    step = {"thought": "", "action": "hard_filter", "input": "SELECT id FROM items"}
    A._react_step(turn, run, _ok(step), CONFIG)
    attempt = A._react_attempt(turn, run, CONFIG)
    assert attempt.kind == "plan" and attempt.track.map_added
    assert attempt.track.steps[-1].tool == "map_titles" and attempt.track.steps[-1].added
    quiet = A._ReactRun(answer="  Which genre?  ")
    assert A._react_attempt(_turn(ctx), quiet, CONFIG).reply == "Which genre?"
    nothing = A._react_attempt(_turn(ctx), A._ReactRun(), CONFIG)
    assert nothing.kind == "failed" and "no tool ran" in nothing.problems[0]


def test_triage_replans_failures_and_reviews_the_rest_within_the_budget(ctx):
    failed, answered, spent = _turn(ctx), _turn(ctx), _turn(ctx)
    failed.attempts.append(Attempt("failed", problems=["step 1 (lookup): bad"]))
    answered.attempts.append(Attempt("answer", reply="Hi"))
    spent.attempts.append(Attempt("answer", reply="Hi"))
    spent.reflections = CONFIG.max_reflections
    rerun, review = A._triage([failed, answered, spent], CONFIG)
    assert rerun == [failed] and review == [answered]
    assert failed.reflections == 1 and failed.advice.startswith("Your last plan could not be run")
    transport = _turn(ctx)
    transport.attempts.append(Attempt("failed", problems=["x"], llm_failure="timeout"))
    assert A._triage([transport], CONFIG) == ([], []), "an unusable reply is not re-planned"


def test_finish_turn_apologises_for_a_failure_and_remembers_the_turn(ctx):
    turn = _turn(ctx)
    turn.attempts.append(Attempt("failed", problems=["x"]))
    result = A._finish_turn(turn, CONFIG)
    assert result.reply == APOLOGY.format(domain=CONFIG.domain) and result.recommended_ids == []
    assert turn.session.turns == [result] and turn.session.dialogue


def test_sql_error_messages_name_the_problem():
    assert "Did you mean 'title'" in sqlguard._unknown_name("no such column: titel")
    assert "the only table is 'items'" in sqlguard._unknown_name("no such table: films")
    assert sqlguard._unknown_name("syntax error") is None
    assert "out of range" in sqlguard._value_problem(OverflowError("big"), "big")
    assert sqlguard._value_problem(ValueError("x"), "x") is None
