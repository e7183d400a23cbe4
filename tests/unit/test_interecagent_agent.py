"""Tests for InteRecAgent's prompts, parsers, demonstrations, sessions and metrics.

No language model is involved: every function here is pure or runs tools without one. The
demonstrations are validated and executed on the real ml-100k item table (the paper ships
noisy demonstrations, pitfall 7). Dynamic demonstration selection is checked both with a
hand-made embedding (its ordering logic) and with the offline MiniLM embedder.
"""

from __future__ import annotations

import dataclasses
import math

import jsonschema
import numpy as np
import pandas as pd
import pytest

from recagents.columns import ITEM, USER
from recagents.config import ConfigError
from recagents.data import load_dataset
from recagents.data.datasets import candidate_sets, chronological_order, leave_one_out
from recagents.llm.embed import Embedder
from recagents.papers.interecagent import evaluate as E
from recagents.papers.interecagent.config import (
    END,
    TOOL_DESCRIPTIONS,
    TOOL_NAMES,
    ExperimentConfig,
    InteRecConfig,
    SimulatorConfig,
)
from recagents.papers.interecagent.conversations import conversation_metrics
from recagents.papers.interecagent.demos import DEMOS, select_demos
from recagents.papers.interecagent.plans import (
    ExecutionTrack,
    PlanStep,
    execute_plan,
    execute_step,
    validate_plan,
)
from recagents.papers.interecagent.prompts import (
    PlannerReply,
    critic_messages,
    critic_schema,
    llm_only_messages,
    llm_only_schema,
    parse_critic_reply,
    parse_llm_only_reply,
    parse_planner_reply,
    parse_react_reply,
    planner_messages,
    planner_schema,
    react_messages,
    react_schema,
    summariser_messages,
)
from recagents.papers.interecagent.scoring import popular_recommend
from recagents.papers.interecagent.session import AgentSession, TurnResult
from recagents.papers.interecagent.simulator import (
    make_sessions,
    parse_simulator_reply,
    simulator_messages,
    simulator_schema,
)
from recagents.papers.interecagent.toolbox import build_context

# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def ml100k():
    return load_dataset("ml-100k")


@pytest.fixture(scope="module")
def split(ml100k):
    return leave_one_out(ml100k, min_rating=3)


@pytest.fixture(scope="module")
def ctx(ml100k, split):
    return build_context(ml100k, split.history("test"))


@pytest.fixture(scope="module")
def table(ctx):
    return ctx.table


# ------------------------------------------------------------------------------ config


def test_config_defaults_are_the_papers_and_bad_values_are_refused():
    config = InteRecConfig()
    assert config.plan_mode == "plan_first" and config.demo_mode == "dynamic"
    assert config.num_demos == 3 and config.reflection and config.max_reflections == 3
    assert config.planner_temperature == 0.0 and config.critic_temperature == 0.0
    assert config.summariser is False and config.summariser_temperature == 1.0
    assert config.persistent_bus is False and config.map_n == 5
    assert config.react_max_iterations == 5 and config.llm_only_temperature == 0.8
    with pytest.raises(ConfigError, match=r"InteRecConfig.plan_mode='plan-first' is not one"):
        InteRecConfig(plan_mode="plan-first")
    with pytest.raises(ConfigError, match=r"InteRecConfig.demo_mode='random' is not one"):
        InteRecConfig(demo_mode="random")
    with pytest.raises(ConfigError, match=r"InteRecConfig.max_reflections=-1 is out of range"):
        InteRecConfig(max_reflections=-1)
    with pytest.raises(ConfigError, match=r"InteRecConfig.map_n=0 is out of range"):
        InteRecConfig(map_n=0)
    with pytest.raises(ConfigError, match=r"SimulatorConfig.stop_on='never' is not one"):
        SimulatorConfig(stop_on="never")
    with pytest.raises(ConfigError, match=r"ExperimentConfig.max_turns=0 is out of range"):
        ExperimentConfig(max_turns=0)


# ------------------------------------------------------------------------------ demonstrations


def test_demos_cover_every_kind_and_tool():
    assert 13 <= len(DEMOS) <= 20
    requests = [d.request for d in DEMOS]
    assert len(set(requests)) == len(requests), "no request twice"
    kinds = {d.reply["kind"] for d in DEMOS}
    assert kinds == {"answer", "plan"}
    used = {s["tool_name"] for d in DEMOS for s in d.reply["plan"]}
    assert used == set(TOOL_NAMES), f"tools without a demonstration: {set(TOOL_NAMES) - used}"
    schema = planner_schema()
    for demo in DEMOS:
        jsonschema.validate(demo.reply, schema)
        if demo.is_plan:
            assert demo.reply["answer"] == "" and demo.reply["plan"]
        else:
            assert demo.reply["plan"] == [] and demo.reply["answer"].strip()


@pytest.mark.parametrize("demo", DEMOS, ids=lambda d: d.request[:40])
def test_every_demo_is_valid_and_runs_on_ml100k(demo, ctx, table):
    parsed = parse_planner_reply(demo.reply, table)
    assert parsed.kind == demo.reply["kind"], parsed.problems
    if not demo.is_plan:
        assert parsed.answer == demo.reply["answer"]
        return
    assert validate_plan(demo.reply["plan"], table) == []
    track = execute_plan(demo.reply["plan"], ctx)
    assert not track.stopped and not track.failed, track.as_text()
    assert len(ctx.bus) == len(table), "the executor resets the bus"
    for step in track.steps:
        assert step.observation and step.observation != "No rows.", track.as_text()
        assert "not found" not in step.observation, f"a demo title is not in ml-100k: {step}"
    assert track.recommended_ids, "every plan ends in a recommendation (map_titles)"
    assert all(i in table.rows for i in track.recommended_ids)
    wanted = [s["input"] for s in demo.reply["plan"] if s["tool_name"] == "map_titles"]
    if wanted:
        assert len(track.recommended_ids) == wanted[-1]


def _keyword_embed(texts):
    """A transparent embedding: one axis per keyword (not a model; tests the selection)."""
    words = ["comed", "star wars", "kids", "year", "hi", "genres"]
    rows = [[float(w in t.lower()) for w in words] + [0.01] for t in texts]
    return np.asarray(rows)


def test_select_demos_modes():
    assert select_demos("anything", 3, "zero") == []
    assert select_demos("anything", 3, "fixed") == list(DEMOS[:3])
    assert select_demos("anything", 0, "dynamic", embed=_keyword_embed) == []
    picked = select_demos("Any comedies for tonight?", 2, "dynamic", embed=_keyword_embed)
    assert len(picked) == 2
    assert "comedies" in picked[0].request, [d.request for d in picked]
    star = select_demos("more like star wars please", 1, "dynamic", embed=_keyword_embed)
    assert star[0].request == "I loved Star Wars. Anything similar?"
    with pytest.raises(ValueError, match="demo mode"):
        select_demos("x", 2, "nearest")


def test_dynamic_demos_with_minilm_pick_the_nearest(tmp_path):
    embed = Embedder(cache=False).embed
    picked = select_demos("Could you recommend a few comedies from the 1990s?", 3,
                            "dynamic", embed=embed)  # fmt: skip
    assert len(picked) == 3 and len({d.request for d in picked}) == 3
    assert picked[0].request == "Can you suggest some comedies from the nineties?"
    hello = select_demos("Hello there, how is your day going?", 1, "dynamic", embed=embed)
    assert not hello[0].is_plan


# ------------------------------------------------------------------------------ prompts


def test_planner_prompt_holds_every_part_in_a_cache_friendly_order(table):
    config = InteRecConfig()
    dialogue = [("user", "hello"), ("agent", "Hi! What would you like?")]
    demos = DEMOS[5:7]
    messages = planner_messages("Funny movies from the 80s?", table.describe(), config,
                                  demos, dialogue, "Use hard_filter for the decade.")  # fmt: skip
    system, user = messages[0]["content"], messages[1]["content"]
    assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
    assert table.describe() in system
    for name in TOOL_NAMES:
        assert f"- {name}: {TOOL_DESCRIPTIONS[name]}" in system
    for phrase in ("Chit-chat", "vague", "Hard conditions", "Soft conditions",
                   "hard_filter comes before soft_filter", "end the plan with rank and then "
                   "map_titles", "all movies of the table", '"kind": "plan"'):  # fmt: skip
        assert phrase in system, phrase
    for demo in demos:
        assert f"Request: {demo.request}" in user
    assert "User: hello" in user and "Assistant: Hi! What would you like?" in user
    assert "advises: Use hard_filter for the decade." in user
    assert user.index("Request:") < user.index("Conversation so far") < user.index("advises")
    assert user.rstrip().endswith("The user's new message: Funny movies from the 80s?\n"
                                  "Your reply (JSON):")  # fmt: skip
    other = planner_messages("hi", table.describe(), config)
    assert other[0] == messages[0], "the system prompt does not depend on the request"
    assert "Examples" not in other[1]["content"] and "advises" not in other[1]["content"]
    kept = planner_messages("hi", table.describe(), dataclasses.replace(config,
                              persistent_bus=True))  # fmt: skip
    assert "previous turn ended with" in kept[0]["content"]


def test_memory_is_trimmed_to_history_turns(table):
    dialogue = []
    for k in range(1, 8):
        dialogue += [("user", f"question {k}"), ("agent", f"answer {k}")]
    config = InteRecConfig(history_turns=2)
    user = planner_messages("now", table.describe(), config, dialogue=dialogue)[1]["content"]
    assert "question 6" in user and "answer 7" in user
    assert "question 5" not in user and "answer 5" not in user
    config = InteRecConfig(history_turns=2, message_chars=8)
    long = [("user", "x" * 50), ("agent", "ok")]
    text = planner_messages("now", table.describe(), config, dialogue=long)[1]["content"]
    assert "User: xxxxxxxx..." in text and "x" * 9 not in text
    none = planner_messages("now", table.describe(), InteRecConfig(history_turns=0),
                              dialogue=dialogue)[1]["content"]  # fmt: skip
    assert "question" not in none


def test_critic_summariser_and_react_prompts(table):
    config = InteRecConfig()
    messages = critic_messages("Comedies please", "Tool execution track (1 steps): ...",
                                 "Here are recommendations: 1. Clueless (1995)",
                                 [("user", "hi"), ("agent", "hello")], config)  # fmt: skip
    system, user = messages[0]["content"], messages[1]["content"]
    assert all(name in system for name in TOOL_NAMES)
    assert "too strict" in system and "prefer or unwanted" in system and '"verdict"' in system
    assert "The user's message: Comedies please" in user
    assert "Tool execution track (1 steps)" in user and "Clueless (1995)" in user
    assert "User: hi" in user
    schema = critic_schema(config)
    jsonschema.validate({"verdict": "no", "advice": "use soft_filter"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"verdict": "maybe", "advice": ""}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"verdict": "no", "advice": "x" * 401}, schema)

    summary = summariser_messages("Comedies please", "TRACK TEXT", config=config)
    assert "Never mention tools" in summary[0]["content"]
    assert "TRACK TEXT" in summary[1]["content"]

    steps = [({"tool_name": "hard_filter", "input": "SELECT id FROM items"}, "Hard filter: ok.")]
    react = react_messages("Comedies", table.describe(), config, steps)
    assert "at most 5 steps" in react[0]["content"]
    assert '1. hard_filter("SELECT id FROM items") -> Hard filter: ok.' in react[1]["content"]
    assert react_messages("x", table.describe(), config)[1]["content"].count("(none yet)") == 1
    jsonschema.validate({"thought": "t", "action": "finish", "input": "Hello!"},
                        react_schema())  # fmt: skip
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"thought": "t", "action": "search", "input": "x"}, react_schema())


def test_llm_only_prompt_and_parser():
    messages = llm_only_messages("A space adventure", [("user", "hi"), ("agent", "hey")], n=4)
    assert "exactly 4 real movies" in messages[0]["content"]
    assert "The user's new message: A space adventure" in messages[1]["content"]
    schema = llm_only_schema(4)
    jsonschema.validate({"titles": ["a", "b", "c", "d"]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"titles": ["a", "b"]}, schema)
    assert parse_llm_only_reply({"titles": [" Fargo ", "", "Heat"]}) == ["Fargo", "Heat"]
    assert parse_llm_only_reply({"names": []}) is None


def test_simulator_prompt_and_parser():
    history = ["Star Wars (1977)", "Fargo (1996)"]
    attrs = "released in 1995; genres: Comedy"
    seen = simulator_messages(history, "Clueless", attrs, [])
    system = seen[0]["content"]
    assert "Clueless" in system and attrs in system and "Star Wars (1977); Fargo (1996)" in system
    assert "Never write its title" in system and "at most 2 hints" in system and END in system
    assert "first message" in seen[1]["content"]
    blind = simulator_messages(history, "Clueless", attrs, [], sees_title=False, max_hints=1)
    assert "Clueless" not in blind[0]["content"] and "at most 1 hints" in blind[0]["content"]
    later = simulator_messages(
        history, "Clueless", attrs, [("user", "A 90s comedy?"), ("agent", "Try Heat (1995)")]
    )
    assert "You: A 90s comedy?\nAssistant: Try Heat (1995)" in later[1]["content"]
    assert parse_simulator_reply({"message": "Yes, that one! <END>"}) == ("Yes, that one!", True)
    assert parse_simulator_reply({"message": "A comedy  please"}) == ("A comedy please", False)
    assert parse_simulator_reply({"text": "x"}) == (None, False)
    jsonschema.validate({"message": "hi"}, simulator_schema())


# ------------------------------------------------------------------------------ parsing


def test_parse_planner_reply_answer_plan_and_failures(table):
    answer = parse_planner_reply({"kind": "answer", "answer": " Hello! ", "plan": []}, table)
    assert answer == PlannerReply("answer", answer="Hello!")
    plan = [{"tool_name": "hard_filter", "input": "SELECT id FROM items WHERE tags LIKE "
             "'%Comedy%'"}, {"tool_name": "map_titles", "input": 3}]  # fmt: skip
    ok = parse_planner_reply({"kind": "plan", "answer": "", "plan": plan}, table)
    assert ok.kind == "plan" and list(ok.plan) == plan and ok.problems == ()

    no_id = [{"tool_name": "hard_filter", "input": "SELECT title FROM items"}]
    bad = parse_planner_reply({"kind": "plan", "answer": "", "plan": no_id}, table)
    assert bad.kind == "failed" and bad.plan == ()
    assert any("must select the id column" in p for p in bad.problems), bad.problems

    unknown = [{"tool_name": "recommend", "input": "x"}]
    refused = parse_planner_reply({"kind": "plan", "answer": "", "plan": unknown}, table)
    assert refused.kind == "failed"
    assert refused.problems == (
        "step 1: unknown tool 'recommend'; valid tools: " + ", ".join(TOOL_NAMES),
    )
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"kind": "plan", "answer": "", "plan": unknown}, planner_schema())

    delete = [{"tool_name": "lookup", "input": "DELETE FROM items"}]
    modifying = parse_planner_reply({"kind": "plan", "answer": "", "plan": delete}, table)
    assert modifying.kind == "failed"
    assert "refused: a DELETE statement deletes rows" in modifying.problems[0]
    assert table.count_rows() == len(table), "nothing was deleted"

    order = [{"tool_name": "soft_filter", "input": "Fargo"},
             {"tool_name": "hard_filter", "input": "SELECT id FROM items"}]  # fmt: skip
    late = parse_planner_reply({"kind": "plan", "answer": "", "plan": order}, table)
    assert late.kind == "failed" and "hard filters before the soft filter" in late.problems[0]

    empty_plan = parse_planner_reply({"kind": "plan", "answer": "", "plan": []}, table)
    assert empty_plan.problems == ("the plan has no steps",)
    empty = parse_planner_reply({"kind": "answer", "answer": "  ", "plan": []}, table)
    assert empty.kind == "failed" and "answer is empty" in empty.problems[0]
    assert parse_planner_reply({"kind": "tools"}, table).kind == "failed"
    assert parse_planner_reply(["not", "an", "object"], table).problems == (
        "the reply is not a JSON object",
    )


def test_parse_critic_and_react_replies():
    assert parse_critic_reply({"verdict": "Yes", "advice": ""}) == (True, "")
    assert parse_critic_reply({"verdict": "no", "advice": " use  soft_filter "}) == (
        False,
        "use soft_filter",
    )
    assert parse_critic_reply({"verdict": "perhaps", "advice": "x"}) == (None, "x")
    assert parse_critic_reply("no") == (None, "")
    assert parse_react_reply({"thought": "t", "action": "rank", "input": "popularity"}) == (
        "rank",
        "popularity",
        "t",
    )
    assert parse_react_reply({"thought": "t", "action": "jump", "input": 1})[0] is None
    assert parse_react_reply({"thought": "t", "action": "finish"})[0] is None


# ------------------------------------------------------------------------------ sessions


def test_agent_sessions_share_the_table_but_not_the_bus(ctx):
    a = AgentSession.start("a", ctx, map_n=7)
    b = AgentSession.start("b", ctx)
    assert a.ctx.table is ctx.table and a.ctx.itemcf is ctx.itemcf
    assert a.ctx.bus is not b.ctx.bus and a.ctx.bus is not ctx.bus
    assert a.ctx.map_n == 7 and b.ctx.map_n == ctx.map_n
    a.ctx.bus.set(["1", "2"], "test")
    assert len(a.ctx.bus) == 2 and len(b.ctx.bus) == len(ctx.table) == len(ctx.bus)
    result = TurnResult("a", "hello", "hi there", "answer")
    a.remember(result)
    assert a.dialogue == [("user", "hello"), ("agent", "hi there")] and a.turns == [result]


def test_execute_step_keeps_the_bus_and_records_errors(ctx):
    session = AgentSession.start("s", ctx)
    track = ExecutionTrack()
    record = execute_step(session.ctx, PlanStep("candidate_store", "Fargo;;Heat"), track)
    assert record.error is None and (record.size_before, record.size_after) == (len(ctx.table), 2)
    failed = execute_step(session.ctx, PlanStep("hard_filter", "SELECT title FROM items"), track)
    assert failed.error and "id column" in failed.error and len(session.ctx.bus) == 2
    mapped = execute_step(session.ctx, PlanStep("map_titles", 5), track)
    assert mapped.error is None and track.recommended_ids == ["100", "273"]
    assert len(track.steps) == 3 and len(session.ctx.bus) == 2, "no reset, no added map"


def test_make_sessions_targets_and_histories(ml100k, split, table):
    users = ["1", "13", "405"]
    sessions = make_sessions(split, ml100k, users, table=table)
    assert sessions.users == users and len(sessions) == 3
    known = chronological_order(split.history("test"))
    for spec in sessions:
        assert spec.target == split.test.set_index(USER).loc[spec.user, ITEM]
        expected = known[known[USER] == spec.user][ITEM].tolist()[-10:]
        assert list(spec.history) == expected and len(spec.history) == 10
        assert list(spec.history_titles) == [table.display_title(i) for i in expected]
        assert spec.target_title == table.rows[spec.target].title
        assert spec.target_display == table.display_title(spec.target)
        assert str(table.rows[spec.target].release_year) in spec.target_attributes
        assert spec.target not in spec.history
    valid = split.valid.set_index(USER)[ITEM]
    assert all(spec.history[-1] == valid[spec.user] for spec in sessions)
    train_only = make_sessions(split, ml100k, users, include_valid=False, table=table)
    train = chronological_order(split.train)
    for spec in train_only:
        assert list(spec.history) == train[train[USER] == spec.user][ITEM].tolist()[-10:]
    sampled = make_sessions(split, ml100k, 5, seed=3, table=table)
    assert len(sampled) == 5 and sampled.users == sorted(sampled.users)
    assert sampled.users == make_sessions(split, ml100k, 5, seed=3, table=table).users
    assert len(sampled.frame()) == 5
    with pytest.raises(ValueError, match="no test item"):
        make_sessions(split, ml100k, ["no-such-user"], table=table)


# ------------------------------------------------------------------------------ metrics


def _sessions_frame():
    rows = [
        ("agent", "u1", 1, 1, False),
        ("agent", "u2", 3, None, False),
        ("agent", "u3", None, 2, False),
        ("agent", "u4", None, None, False),
        ("agent", "u5", 1, 1, True),
        ("llm", "u1", None, None, False),
        ("llm", "u2", 2, 2, False),
    ]
    frame = pd.DataFrame(rows, columns=["method", USER, "turn_id", "turn_fuzzy", "dropped"])
    return frame.astype({"turn_id": "Int64", "turn_fuzzy": "Int64"})


def test_conversation_metrics_by_both_rules():
    table = conversation_metrics(_sessions_frame(), n_boot=200).set_index(["method", "rule"])
    agent_id, agent_fz = table.loc[("agent", "id")], table.loc[("agent", "fuzzy")]
    assert agent_id["n"] == 4 and agent_id["dropped"] == 1, "the dropped session is left out"
    assert agent_id["hit"] == pytest.approx(0.5)
    assert agent_id["at"] == pytest.approx((1 + 3 + 6 + 6) / 4)
    assert agent_fz["hit"] == pytest.approx(0.5)
    assert agent_fz["at"] == pytest.approx((1 + 6 + 2 + 6) / 4)
    assert agent_id["hit_low"] <= agent_id["hit"] <= agent_id["hit_high"]
    assert agent_id["at_low"] <= agent_id["at"] <= agent_id["at_high"]
    llm = table.loc[("llm", "id")]
    assert llm["hit"] == 0.5 and llm["at"] == pytest.approx((6 + 2) / 2) and llm["n"] == 2
    three = conversation_metrics(_sessions_frame(), max_turns=2, n_boot=50)
    row = three.set_index(["method", "rule"]).loc[("agent", "id")]
    assert row["hit"] == pytest.approx(0.25), "a hit after K turns is a miss"
    assert row["at"] == pytest.approx((1 + 3 + 3 + 3) / 4)


def test_one_turn_metrics():
    frame = pd.DataFrame({"method": ["a", "a", "b"], "ndcg": [1.0, 0.0, 0.5]})
    table = E.one_turn_metrics(frame, "ndcg", n_boot=100).set_index("method")
    assert table.loc["a", "mean"] == 0.5 and table.loc["b", "mean"] == 0.5
    assert table.loc["a", "n"] == 2 and table.loc["a", "metric"] == "ndcg"


def test_one_turn_baselines_without_an_llm(ml100k, split, table, ctx, tmp_path):
    sessions = make_sessions(split, ml100k, 6, seed=1, table=table)
    retrieval = E.one_turn_retrieval(sessions, ctx, InteRecConfig(), client=None, log=None,
                                     methods=("Random", "Pop"))  # fmt: skip
    assert len(retrieval) == 12 and set(retrieval["recall"]) <= {0.0, 1.0}
    known = split.history("test")
    for spec in sessions:
        seen = set(known[known[USER] == spec.user][ITEM])
        top = popular_recommend(table, 5, exclude=seen)
        got = retrieval.query("method == 'Pop' and user_id == @spec.user")["recall"].item()
        assert got == float(spec.target in top)

    frame = candidate_sets(split, 19, seed=0, cache_dir=tmp_path)
    ranking = E.one_turn_ranking(sessions, frame, ctx, InteRecConfig(), client=None, log=None,
                                 methods=("Random", "Pop"))  # fmt: skip
    assert len(ranking) == 12 and (ranking["status"] == "complete").all()
    assert ranking["rank"].between(1, 20).all()
    for value, rank in zip(ranking["ndcg"], ranking["rank"], strict=True):
        assert value == pytest.approx(1 / math.log2(rank + 1))
    pop = ranking[ranking["method"] == "Pop"].set_index(USER)["rank"]
    for spec in sessions:
        mine = frame[frame[USER] == spec.user].sort_values("position")
        counts = table.popularity(mine[ITEM].tolist())
        order = np.argsort(-counts, kind="stable")
        expected = int(np.flatnonzero(mine[ITEM].to_numpy()[order] == spec.target)[0]) + 1
        assert pop[spec.user] == expected
