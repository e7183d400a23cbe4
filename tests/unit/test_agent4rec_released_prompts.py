"""Agent4Rec's released prompts: the ast reader, our reply parsers, the released loop mode,
and today's requests of our own prompts pinned byte for byte."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from recagents.config import settings
from recagents.data.releases import MIRROR_ENV, manifest
from recagents.llm.runlog import RunLog
from recagents.llm.scripted import ScriptedClient
from recagents.papers.agent4rec import prompts as ours
from recagents.papers.agent4rec.agents import Agent
from recagents.papers.agent4rec.config import Agent4RecConfig
from recagents.papers.agent4rec.loop import simulate
from recagents.papers.agent4rec.released_prompts import (
    REPLY_KEYS,
    SOURCES,
    ItemFacts,
    Slot,
    Template,
    TemplateError,
    match_title,
    parse_exit_reply,
    parse_interview_reply,
    parse_page_reply,
    persona_parts,
    read_released_prompts,
    render_released,
    template_of,
)

TITLES = ["Lion King, The (1994)", "Toy Story (1995)", "Terminator, The (1984)",
          "Terminator 2: Judgment Day (1991)"]  # fmt: skip


def _release_available() -> bool:
    """The release's source files are reachable offline (the mirror, or already cached)."""
    if os.environ.get(MIRROR_ENV):
        return True
    rel = manifest("agent4rec-ml1m")
    root = settings().cache_dir / "releases" / rel.owner / rel.repo / rel.commit
    return all((root / path).is_file() for path in SOURCES.values())


needs_release = pytest.mark.skipif(not _release_available(), reason="Agent4Rec release not here")


# --------------------------------------------------------------------------- the ast reader


def _parse(expression: str) -> Template:
    import ast

    node = ast.parse(expression, mode="eval").body
    return template_of(node, "test")


def test_template_reads_literals_fstrings_and_plus_chains():
    template = _parse('"Hi " + f"{self.name}, page {page}" + "\\n"')
    assert template.pieces == ("Hi ", Slot("name"), ", page ", Slot("page"), "\n")
    assert template.render({"name": "Ann", "page": "2"}) == "Hi Ann, page 2\n"
    assert template.slots == ["name", "page"]


def test_template_pattern_finds_the_slots_back():
    import re

    template = _parse('f"A {x} B {y} C"')
    found = re.fullmatch(template.pattern(), "A one B two C")
    assert found is not None and (found["s1"], found["s2"]) == ("one", "two")


@pytest.mark.parametrize(
    "expression",
    [
        '"a" * 3',
        "3",
        'f"{x:>10}"',
        'f"{x!r}"',
        '"a" - "b"',
        "[1, 2]",
        "lambda: 1",
        "__import__('os').system('x')",
        "name",
    ],
)
def test_template_refuses_what_it_cannot_read(expression):
    with pytest.raises(TemplateError):
        _parse(expression)


def test_reader_never_executes_the_source(tmp_path: Path):
    marker = tmp_path / "ran"
    evil = f"open({str(marker)!r}, 'w').write('x')\n"
    source = evil + "class A:\n    def reaction_to_recommended_items(self):\n"
    source += f"        sys_prompt = __import__('os').system('touch {marker}')\n"
    with pytest.raises(TemplateError, match="Call where a template"):
        read_released_prompts(source, "", "")
    assert not marker.exists()


def test_template_optional_part_only_when_filled():
    template = Template(("A",), ("\nmem:", Slot("m")))
    assert template.render({"m": ""}) == "A"
    assert template.render({"m": "- x"}) == "A\nmem:- x"


# --------------------------------------------------------------------------- reply parsers


def test_match_title_forms():
    assert match_title("The Lion King (1994)", TITLES) == 0
    assert match_title("Toy Story", TITLES) == 1
    assert match_title("Terminator, The", TITLES) == 2  # the year tells it from the sequel
    assert match_title("N/A", TITLES) is None
    assert match_title("Casablanca (1942)", TITLES) is None


def test_parse_page_reply_reads_every_field():
    reply = (
        "MOVIE: Lion King, The (1994); ALIGN: Yes; REASON: fun\n"
        "MOVIE: Toy Story (1995); ALIGN: yes; REASON: toys\n"
        "MOVIE: Terminator, The (1984); ALIGN: No; REASON: violent\n"
        "MOVIE: Terminator 2: Judgment Day (1991); ALIGN: No; REASON: same\n\n"
        "NUM: 2; WATCH: Lion King, The (1994), Toy Story (1995); REASON: both\n\n"
        "MOVIE:[Toy Story (1995)]; RATING: 5; FEELING: lovely\n"
        "MOVIE: Lion King, The (1994); RATING: [3]; FEELING: fine\n"
    )
    reading = parse_page_reply(reply, TITLES)
    assert [i["aligned"] for i in reading.items] == [True, True, False, False]
    assert [i["watched"] for i in reading.items] == [True, True, False, False]
    assert [i["rating"] for i in reading.items] == [3, 5, None, None]
    assert reading.items[1]["feeling"] == "lovely"
    assert reading.rated_in_order == [(1, 5), (0, 3)]
    assert reading.num_watched == 2 and reading.problems == []


def test_parse_page_reply_names_malformed_parts():
    reply = (
        "MOVIE: Casablanca; ALIGN: Yes; REASON: ?\n"
        "MOVIE: Toy Story; ALIGN: Yes; REASON: a\nMOVIE: Toy Story; ALIGN: No; REASON: b\n"
        "NUM: 3; WATCH: Toy Story (1995)\n"
        "MOVIE: Toy Story; RATING: 7; FEELING: x\nMOVIE: Toy Story; RATING: 4; FEELING: y\n"
    )
    reading = parse_page_reply(reply, TITLES)
    for problem in ("title_unmatched", "duplicate_align", "rating_invalid", "duplicate_rating",
                    "num_differs"):  # fmt: skip
        assert problem in reading.problems
    assert reading.items[1]["watched"] and reading.items[1]["rating"] is None


def test_parse_page_reply_watch_line_only_and_nothing():
    only = parse_page_reply("NUM: 1; WATCH: Toy Story (1995); REASON: r", TITLES)
    assert [i["watched"] for i in only.items] == [False, True, False, False]
    assert "watched_unrated" in only.problems and "no_align" in only.problems
    empty = parse_page_reply("I cannot help with that.", TITLES)
    assert not any(i["watched"] for i in empty.items) and empty.problems == ["no_align"]


@pytest.mark.parametrize(
    ("reply", "decision", "feeling", "problem"),
    [
        ("POSITIVE: nice\n[NEXT]; Reason: more", "next", "positive", None),
        ("NEGATIVE: bad\nDecision: [exit]; Reason: tired", "exit", "negative", None),
        ("POSITIVE: ok\n[NEXT] or [EXIT]? [EXIT]; Reason: x", "exit", "positive", "both_decisions"),
        ("Positive: ok\nNext; Reason: curious", "next", "positive", "decision_unbracketed"),
        ("NEGATIVE: meh\nI will exit the recommendation system now.", "exit", "negative",
         "decision_in_words"),
        ("Hmm.", None, None, "no_decision"),
    ],
)  # fmt: skip
def test_parse_exit_reply(reply, decision, feeling, problem):
    reading = parse_exit_reply(reply)
    assert (reading.decision, reading.feeling) == (decision, feeling)
    assert (problem in reading.problems) if problem else reading.problems == ()


@pytest.mark.parametrize(
    ("reply", "rating", "problem"),
    [
        ("RATING: 7; REASON: good", 7, None),
        ("RATING: [10]\nREASON: great", 10, None),
        ("RATING: 7.5; REASON: x", None, "rating_not_integer"),
        ("RATING: 11; REASON: x", None, "rating_out_of_range"),
        ("I liked it.", None, "no_rating"),
    ],
)
def test_parse_interview_reply(reply, rating, problem):
    reading = parse_interview_reply(reply)
    assert reading.rating == rating
    assert (problem in reading.problems) if problem else reading.problems == ()


def test_persona_parts_from_our_persona():
    persona = ours.persona_text({"tastes": [{"taste": "I enjoy noir.", "reason": "rated it 5"}],
                                 "rates_high": "Dark films."})  # fmt: skip
    assert persona_parts(persona) == (["I enjoy noir."], "Dark films.")


# --------------------------------------------------------------------------- released templates


@needs_release
def test_released_templates_have_the_slots_the_code_fills():
    from recagents.papers.agent4rec.released_prompts import released_prompts

    prompts = released_prompts()
    system, user = prompts.chats["page"]
    assert system is not None
    assert {"activity_dsc", "conformity_dsc", "diversity_dsc", "high_rating"} <= set(system.slots)
    assert set(user.slots) == {"current_page", "recommended_items_str"}
    assert system.optional and Slot("formated_relevant_memories") in system.optional
    assert prompts.chats["reflection"][0] is None
    assert set(prompts.memories) == {"page", "exit", "next"}
    assert all(set(levels) == {1, 2, 3} for levels in prompts.traits.values())
    format_text = user.render({"current_page": "1", "recommended_items_str": ""})
    used = {key for key in REPLY_KEYS if f"{key}:" in format_text}
    assert used == set(REPLY_KEYS), "our parser reads exactly the keys the prompt asks for"


@needs_release
def test_released_page_prompt_of_agent_0_page_1_is_the_logged_one():
    from recagents.data import released
    from recagents.papers.agent4rec.logs import read_run_logs
    from recagents.papers.agent4rec.released_prompts import agent_slots, item_facts, page_items_text

    call = next(c for c in read_run_logs("lightgcn", ["0"]) if c.kind == "page" and c.page == 1)
    dataset, _ = released.load_agent4rec_ml1m()
    persona = released.agent4rec_personas().loc["0"]
    levels = released.agent4rec_traits().set_index("user_id").loc["0"]
    behaviour = __import__("recagents.papers.agent4rec.logs", fromlist=["x"]).read_run_behaviour(
        "lightgcn", ["0"])["0"]  # fmt: skip
    facts = item_facts(dataset)
    shown = [facts[str(i)] for i in behaviour[1]["recommended_id"]]
    slots = {
        **agent_slots({t: int(levels[t]) for t in ("activity", "conformity", "diversity")},
                      list(persona["tastes"]), persona["high_rating"], "0"),
        "current_page": "1", "recommended_items_str": page_items_text(shown),
        "formated_relevant_memories": "",
    }  # fmt: skip
    system, user = render_released("page", slots)
    assert " ".join(system["content"].split()) == " ".join(call.system.split())
    assert user["content"] == call.user


# --------------------------------------------------------------------------- the loop


def _agent(user: str = "u1") -> Agent:
    persona = ours.persona_text({"tastes": [{"taste": "I enjoy dramas.", "reason": "r"}],
                                 "rates_high": "Dramas."})  # fmt: skip
    return Agent(user, {"activity": 2, "conformity": 2, "diversity": 2}, persona or "")


@needs_release
def test_released_mode_sends_the_released_prompts_and_reads_free_text():
    ranked = pd.DataFrame({"user_id": "u1", "item_id": ["a", "b"], "rank": [1, 2]})
    facts = {"a": ItemFacts("Alpha (1990)", 3.5, "An alpha."),
             "b": ItemFacts("Beta (1991)", 4.0, "A beta.")}  # fmt: skip
    replies = {
        "page": "MOVIE: Alpha (1990); ALIGN: Yes; REASON: r\nMOVIE: Beta (1991); ALIGN: No; "
        "REASON: r\nNUM: 1; WATCH: Alpha (1990)\nMOVIE: Alpha (1990); RATING: 5; FEELING: good",
        "exit": "POSITIVE: fine\n[EXIT]; Reason: done",
        "interview": "RATING: 8; REASON: fine",
    }
    seen: list = []

    def reply(request):
        seen.append(request)
        text = "\n".join(m["content"] for m in request.messages)
        kind = ("interview" if "RATING: [integer between 1 and 10]" in text
                else "page" if "ALIGN" in text else "exit")  # fmt: skip
        return replies[kind]

    config = Agent4RecConfig(items_per_page=2, max_pages=1, prompts="released")
    log = RunLog()
    exposures, sessions = simulate(
        {"u1": _agent()}, ranked, {"a": "A", "b": "B"}, ours.TRAIT_SENTENCES, "R", config,
        client=ScriptedClient(reply, "h2"), log=log, embed=lambda texts: None, facts=facts,
    )  # fmt: skip
    assert all(r.schema is None for r in seen)
    assert (
        "<- Alpha (1990) -> <- History ratings: 3.5 -> <- Summary: An alpha. ->"
        in (seen[0].messages[1]["content"])
    )
    assert exposures["watched"].tolist() == [True, False]
    assert exposures["rating"].tolist()[0] == 5.0
    assert sessions["satisfaction"].tolist() == [8.0]
    assert not log.problems


def test_released_mode_needs_item_facts():
    ranked = pd.DataFrame({"user_id": "u1", "item_id": ["a"], "rank": [1]})
    config = Agent4RecConfig(items_per_page=1, max_pages=1, prompts="released")
    with pytest.raises(ValueError, match="item facts"):
        simulate({"u1": _agent()}, ranked, {"a": "A"}, ours.TRAIT_SENTENCES, "R", config,
                 client=ScriptedClient(lambda r: "", "h2"), embed=lambda t: None)  # fmt: skip


# --------------------------------------------------------------------------- ours, pinned

_PINNED_AGENT = Agent(
    "u1", {"activity": 1, "conformity": 2, "diversity": 3},
    "My tastes:\n- quiet dramas (rated them 5)\nI rate highly: dramas",
    ["On page 1 I was shown: A; B.", "I watched: A (rated 4). I turned the page."],
)  # fmt: skip
_LINES = ["A (1990); rated 3.50 on average; x", "B (1991); rated 4.00 on average; y"]


def _our_requests() -> dict[str, list]:
    s, a = ours.TRAIT_SENTENCES, _PINNED_AGENT
    return {
        "page": ours.page_messages(a, 2, _LINES, a.memory, s),
        "exit": ours.exit_messages(a, 4, a.memory, s),
        "interview": ours.interview_messages(a, s),
        "reflection": ours.reflection_messages(a),
        "taste": ours.taste_messages(a, ["A (1990)", "B (1991)"]),
        "persona": ours.persona_messages([("A (1990)", 5.0), ("B (1991)", 3.0)]),
    }


PINNED: dict[str, list[dict[str, str]]] = {
    "page": [
        {
            "role": "system",
            "content": "You play a user of a movie recommendation website. Stay in character.\n"
            "Your habits: You seldom watch anything, and one disappointing page is "
            "enough to make you close the site. You look at a title's average score, "
            "but your own impression can push your rating somewhat above or below "
            "it. Your viewing ranges widely across genres; you enjoy trying "
            "something different.\n"
            "My tastes:\n"
            "- quiet dramas (rated them 5)\n"
            "I rate highly: dramas\n"
            "What you remember of this visit:\n"
            "- On page 1 I was shown: A; B.\n"
            "- I watched: A (rated 4). I turned the page.",
        },
        {
            "role": "user",
            "content": "Page 2 of your recommendations:\n"
            "1. A (1990); rated 3.50 on average; x\n"
            "2. B (1991); rated 4.00 on average; y\n"
            "For every movie, in this order: say whether it matches your taste "
            "(aligned), whether you watch it (watch) — pick only among those that "
            "match your taste, as many as your habits say — and, if you watch it, "
            "rate it 1-5 as if seeing it for the first time, in the way your habits "
            "say you rate, with a one-sentence feeling. For a movie you do not "
            'watch, give rating 1 and an empty feeling. Reply in JSON: "items", one '
            "object per movie.",
        },
    ],
    "exit": [
        {
            "role": "system",
            "content": "You play a user of a movie recommendation website. You seldom watch "
            "anything, and one disappointing page is enough to make you close the "
            "site.\n"
            "What you remember of this visit:\n"
            "- On page 1 I was shown: A; B.\n"
            "- I watched: A (rated 4). I turned the page.",
        },
        {
            "role": "user",
            "content": "You have just looked at page 4 of recommendations. You are getting a "
            "little tired. How do you feel about the recommendations so far, and do "
            "you turn to the next page or leave? You leave when you feel negative or "
            "have had enough, the sooner the less active you are. Reply in JSON: "
            '"feeling" (positive or negative), "decision" (next or exit), '
            '"reason".',
        },
    ],
    "interview": [
        {
            "role": "system",
            "content": "You play a user of a movie recommendation website. Stay in "
            "character.\n"
            "Your habits: You seldom watch anything, and one disappointing page "
            "is enough to make you close the site. You look at a title's "
            "average score, but your own impression can push your rating "
            "somewhat above or below it. Your viewing ranges widely across "
            "genres; you enjoy trying something different.\n"
            "My tastes:\n"
            "- quiet dramas (rated them 5)\n"
            "I rate highly: dramas\n"
            "What you remember of this visit:\n"
            "- On page 1 I was shown: A; B.\n"
            "- I watched: A (rated 4). I turned the page.",
        },
        {
            "role": "user",
            "content": "You have left the website. How satisfied are you with its "
            "recommendations, from 1 (not at all) to 10 (completely)? Reply in "
            'JSON: "satisfaction" and "reason".',
        },
    ],
    "reflection": [
        {"role": "system", "content": "You play a user of a movie recommendation website."},
        {
            "role": "user",
            "content": "What happened in your visit so far:\n"
            "- On page 1 I was shown: A; B.\n"
            "- I watched: A (rated 4). I turned the page.\n"
            "In one sentence, are you satisfied or unsatisfied with the "
            'recommendations, and why? JSON key "sentence".',
        },
    ],
    "taste": [
        {
            "role": "system",
            "content": "You are a movie viewer.\n"
            "My tastes:\n"
            "- quiet dramas (rated them 5)\n"
            "I rate highly: dramas",
        },
        {
            "role": "user",
            "content": "Movies:\n"
            "1. A (1990)\n"
            "2. B (1991)\n"
            "For each one, in order, would you watch it given your taste? Reply in "
            'JSON: "watch", one true or false per movie.',
        },
    ],
    "persona": [
        {
            "role": "system",
            "content": "You describe a viewer's taste in movies from their ratings.",
        },
        {
            "role": "user",
            "content": "A viewer rated these movies:\n"
            "Rated 5/5: A (1990)\n"
            "Rated 3/5: B (1991)\n"
            "Describe their taste in up to four short points, each with the "
            "reason the ratings suggest, then say in one sentence which movies "
            "they rate highly and in one which they rate low. Reply in JSON with "
            '"tastes" (a list of {"taste", "reason"}), "rates_high" and '
            '"rates_low".',
        },
    ],
}


@pytest.mark.parametrize("kind", ["page", "exit", "interview", "reflection", "taste", "persona"])
def test_our_requests_are_pinned(kind):
    """Our requests, byte for byte (page and exit changed on purpose in issue #37: the watch
    choice among aligned items, the authors' fatigue grading and their leaving rule)."""
    assert _our_requests()[kind] == PINNED[kind]
