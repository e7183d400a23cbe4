"""InteRecAgent's profile memory: stated likes and dislikes, remembered and used by rank.

The pure parts (schema, prompt, parser, grounding, merge) are tested directly. The loop is
tested against the scripted OpenAI-compatible test server (tests/scripted_server.py), used
here ONLY to inject fixed extraction replies and faults (malformed JSON, a server error) in
the order the stages ask; nothing here measures recommendation quality. The tools run for
real on the tiny fixture dataset.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from scripted_server import ScriptedServer, malformed_body, reply, sequential_client, status

from recagents.data import load_dataset
from recagents.data.datasets import leave_one_out
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunLog
from recagents.papers.interecagent import agent as A
from recagents.papers.interecagent import analysis
from recagents.papers.interecagent.config import InteRecConfig
from recagents.papers.interecagent.prompts import (
    critic_messages,
    merge_profile,
    parse_profile_reply,
    planner_messages,
    profile_messages,
    profile_schema,
    react_messages,
)
from recagents.papers.interecagent.session import AgentSession, ProfileUpdate, TurnResult
from recagents.papers.interecagent.toolbox import build_context, parse_rank_input

TINY_PATH = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"

MEMORY = InteRecConfig(demo_mode="fixed", reflection=False, profile_memory=True)
NO_MEMORY = dataclasses.replace(MEMORY, profile_memory=False)
EVERYTHING = 60  # map_titles count that shows every item of the tiny table


def _plan(*steps) -> str:
    return json.dumps(
        {"kind": "plan", "answer": "", "plan": [{"tool_name": t, "input": i} for t, i in steps]}
    )


RANK_PLAN = _plan(("rank", {"schema": "popularity", "prefer": [], "unwanted": []}),
                  ("map_titles", EVERYTHING))  # fmt: skip
STATED = json.dumps({"likes": ["The Usual Suspects"], "dislikes": ["Toy Story"]})
NOTHING = json.dumps({"likes": [], "dislikes": []})


@pytest.fixture(scope="module")
def ctx():
    dataset = load_dataset(TINY_PATH)
    split = leave_one_out(dataset, min_rating=3)
    return build_context(dataset, split.history("test"))


def _client(url: str, tmp_path) -> LLMClient:
    return sequential_client(url, tmp_path)


def _user_prompt(body) -> str:
    return body["messages"][-1]["content"]


# ------------------------------------------------------------------------------ pure parts


def test_profile_schema_and_parser():
    schema = profile_schema(dataclasses.replace(MEMORY, profile_titles=3))
    assert schema["required"] == ["likes", "dislikes"]
    assert schema["properties"]["likes"]["maxItems"] == 3
    assert schema["additionalProperties"] is False
    assert parse_profile_reply({"likes": [" Fargo ", "", 3], "dislikes": []}) == (["Fargo"], [])
    assert parse_profile_reply({"likes": ["Fargo"]}) is None, "a missing list is unusable"
    assert parse_profile_reply({"likes": "Fargo", "dislikes": []}) is None
    assert parse_profile_reply(["Fargo"]) is None
    with pytest.raises(ValueError, match=r"InteRecConfig.profile_titles=0 is out of range"):
        InteRecConfig(profile_titles=0)


def test_profile_prompt_shows_the_dialogue_the_profile_and_the_new_message():
    dialogue = [("user", "hi there"), ("agent", "Which genre do you like?")]
    messages = profile_messages("I loved Fargo", dialogue, "KNOWN PROFILE LINE", MEMORY)
    system, user = messages[0]["content"], messages[1]["content"]
    assert "Only" in system and "titles the user names" in system
    assert "User: hi there" in user and "Assistant: Which genre" in user
    assert "KNOWN PROFILE LINE" in user
    assert user.rstrip().endswith("Your notes (JSON):")
    assert "The user's newest message: I loved Fargo" in user
    first = profile_messages("I loved Fargo", (), None, MEMORY)[1]["content"]
    assert "nothing yet" in first and "KNOWN PROFILE LINE" not in first


def test_update_profile_grounds_titles_and_the_latest_statement_wins(ctx):
    session = AgentSession.start("u", ctx)
    assert session.profile_text() is None
    update = session.update_profile(["The Usual Suspects", "No Such Film Ever"], ["Toy Story"])
    assert update.likes == ("001",) and update.dislikes == ("010",)
    assert update.unmatched == ("No Such Film Ever",)
    assert session.likes == ["001"] and session.dislikes == ["010"]
    text = session.profile_text()
    assert "likes: Usual Suspects, The (1995)" in text or "likes: The Usual Suspects" in text
    assert "does not want: Toy Story (1995)" in text

    again = session.update_profile(["usual suspects"], [])
    assert again.likes == () and session.likes == ["001"], "remembered once"
    changed = session.update_profile(["Toy Story"], ["The Usual Suspects"])
    assert changed.likes == ("010",) and changed.dislikes == ("001",)
    assert session.likes == ["010"] and session.dislikes == ["001"]
    likes, dislikes = session.profile_titles()
    assert [ctx.table.match_title(t).item_id for t in likes + dislikes] == ["010", "001"], (
        "display titles ground back to the same items, so rank can use them"
    )


def test_merge_profile_adds_to_rank_only_and_never_twice():
    plan = [
        {"tool_name": "hard_filter", "input": "SELECT id FROM items"},
        {"tool_name": "rank", "input": {"schema": "popularity", "prefer": ["Fargo (1996)"]}},
        {"tool_name": "map_titles", "input": 5},
    ]
    merged = merge_profile(plan, ["fargo (1996)", "Heat (1995)"], ["Toy Story (1995)"])
    assert merged[0] == plan[0] and merged[2] == plan[2]
    assert merged[1]["input"] == {
        "schema": "popularity",
        "prefer": ["Fargo (1996)", "Heat (1995)"],
        "unwanted": ["Toy Story (1995)"],
    }
    assert plan[1]["input"] == {"schema": "popularity", "prefer": ["Fargo (1996)"]}, "no mutation"
    assert merge_profile(plan, [], []) == plan
    broken = [{"tool_name": "rank", "input": {"schema": "loudness"}}]
    assert merge_profile(broken, ["Heat"], []) == broken, "the executor reports it instead"
    as_text = [{"tool_name": "rank", "input": "preference"}]
    assert parse_rank_input(merge_profile(as_text, ["Heat"], [])[0]["input"])["prefer"] == ["Heat"]


def test_planner_and_critic_prompts_show_the_profile_only_when_given(ctx):
    describe = ctx.table.describe()
    line = "What the user has said about their taste so far:\n- likes: Heat (1995)"
    with_profile = planner_messages("more please", describe, MEMORY, profile=line)
    assert line in with_profile[1]["content"]
    assert "taste so far" not in planner_messages("more", describe, MEMORY)[1]["content"]
    react = react_messages("more please", describe, MEMORY, profile=line)
    assert line in react[1]["content"]
    critic = critic_messages("more please", "track", "reply", (), MEMORY, line)
    assert line in critic[1]["content"]


# ------------------------------------------------------------------------------ the loop


def _run(server, tmp_path, ctx, texts, config, sessions=None):
    client = _client(server.url, tmp_path)
    sessions = sessions or [AgentSession.start(f"s{k}", ctx) for k in range(len(texts))]
    log = RunLog()
    results = A.run_turns(sessions, texts, config, client, log)
    return results, log.calls_frame(), server.chat_bodies(), sessions


def test_stated_likes_and_dislikes_reach_rank_and_the_recommendations(tmp_path, ctx):
    text = "I loved The Usual Suspects but I hate Toy Story. What else?"
    with ScriptedServer(default=reply(RANK_PLAN)) as server:
        (plain,), calls, _, _ = _run(server, tmp_path, ctx, [text], NO_MEMORY)
    assert calls["kind"].tolist() == ["planner"], "profile memory is off by default"
    assert {"001", "010"} <= set(plain.recommended_ids), "both are shown without memory"

    with ScriptedServer(default=reply(RANK_PLAN)) as server:
        server.script(reply(STATED))
        (result,), calls, bodies, (session,) = _run(server, tmp_path, ctx, [text], MEMORY)
    assert calls["kind"].tolist() == ["profile", "planner"]
    assert "I loved The Usual Suspects" in _user_prompt(bodies[0])
    assert "does not want: Toy Story (1995)" in _user_prompt(bodies[1]), "the planner sees it"
    assert result.profile_update == ProfileUpdate(("001",), ("010",), ())
    assert result.profile_failures == 0 and result.n_calls == 2
    rank_input = result.plan[0]["input"]
    assert rank_input["unwanted"] == ["Toy Story (1995)"] and len(rank_input["prefer"]) == 1
    assert "001" not in result.recommended_ids and "010" not in result.recommended_ids
    assert len(result.recommended_ids) == len(plain.recommended_ids) - 2
    assert session.likes == ["001"] and session.dislikes == ["010"]


def test_the_profile_is_kept_across_turns(tmp_path, ctx):
    with ScriptedServer(default=reply(RANK_PLAN)) as server:
        server.script(reply(STATED), reply(RANK_PLAN), reply(NOTHING))
        _, _, _, sessions = _run(server, tmp_path, ctx, ["first"], MEMORY)
        (second,), calls, bodies, _ = _run(server, tmp_path, ctx, ["and now?"], MEMORY, sessions)
    assert calls["kind"].tolist() == ["profile", "planner"]
    assert "does not want: Toy Story (1995)" in _user_prompt(bodies[2]), "extractor sees it"
    assert "does not want: Toy Story (1995)" in _user_prompt(bodies[3]), "planner sees it"
    assert second.profile_update == ProfileUpdate()
    assert "010" not in second.recommended_ids


@pytest.mark.parametrize("fault", [malformed_body(), status(500), reply("not json at all")])
def test_an_unusable_extraction_is_counted_and_the_turn_goes_on(tmp_path, ctx, fault):
    with ScriptedServer(default=reply(RANK_PLAN)) as server:
        server.script(fault, fault)  # two attempts, or one reply and one re-ask
        (result,), calls, _, (session,) = _run(server, tmp_path, ctx, ["hello"], MEMORY)
        assert server.pending() == 0
    assert calls["kind"].tolist() == ["profile", "planner"]
    assert calls["ok"].tolist() == [False, True]
    assert result.profile_failures == 1 and result.profile_update is None
    assert result.kind == "plan" and len(result.recommended_ids) == len(ctx.table)
    assert session.likes == [] and session.dislikes == []


def test_react_steps_get_the_profile_too(tmp_path, ctx):
    step = json.dumps({"thought": "order", "action": "rank", "input": {"schema": "popularity"}})
    finish = json.dumps({"thought": "show", "action": "map_titles", "input": EVERYTHING})
    config = dataclasses.replace(MEMORY, plan_mode="react")
    with ScriptedServer(default=reply(finish)) as server:
        server.script(reply(STATED), reply(step), reply(finish))
        (result,), calls, bodies, _ = _run(server, tmp_path, ctx, ["hm"], config)
    assert calls["kind"].tolist() == ["profile", "react", "react"]
    assert "does not want: Toy Story (1995)" in _user_prompt(bodies[1])
    assert result.plan[0]["input"]["unwanted"] == ["Toy Story (1995)"]
    assert "010" not in result.recommended_ids and "001" not in result.recommended_ids


def test_the_trace_line_says_what_was_remembered(ctx):
    session = AgentSession.start("u", ctx)
    update = session.update_profile(["Toy Story", "Nothing Like It"], ["Hamlet (1948)"])
    turn = TurnResult("u", "hi", "reply", "answer", profile_update=update)
    line = analysis._profile_line(turn, ctx.table)
    assert line == (
        "+ likes Toy Story (1995), + does not want Hamlet (1948), not found: Nothing Like It"
    )
    failed = TurnResult("u", "hi", "reply", "answer", profile_failures=1)
    assert "failed" in analysis._profile_line(failed, ctx.table)
