"""Rec4Agentverse's named steps, one at a time: slices, tastes, report evidence, instructions.

:func:`build_catalogue`, :func:`make_users` and the stage protocol are split into steps;
these tests drive each step directly on hand-made inputs (no dataset, no model), so that
each rule is pinned where it lives.
"""

from __future__ import annotations

from collections import Counter

import pytest

from recagents.papers.rec4agentverse import catalogue as C
from recagents.papers.rec4agentverse import prompts as P
from recagents.papers.rec4agentverse import reports, session, users
from recagents.papers.rec4agentverse.config import Rec4AConfig
from recagents.papers.rec4agentverse.recommender import Instruction


def _films() -> C.Catalogue:
    ids = [str(i) for i in range(1, 7)]
    return C.Catalogue(
        cards=(),
        slices={},
        titles={i: f"Film {i}" for i in ids},
        years={"1": 1995, "2": 1996, "3": 1975, "4": None, "5": 1997, "6": 1998},
        genres={
            "1": ("Comedy",),
            "2": ("Comedy",),
            "3": ("Comedy",),
            "4": ("Comedy",),
            "5": ("Drama",),
            "6": ("Comedy", "Drama"),
        },  # fmt: skip
        popularity={"1": 9, "2": 7, "3": 5, "4": 4, "5": 3, "6": 1},
    )


def _spec(style: str) -> C.AgentSpec:
    return C.AgentSpec("a1", "Fun", "Comedies.", ("Comedy",), (1990, 1999), style)  # type: ignore[arg-type]


def test_cut_slice_filters_genre_years_and_popularity_then_halves_by_style():
    films = _films()
    ordered = ["1", "2", "3", "4", "5", "6"]
    assert C.cut_slice(_spec("broad"), ordered, films, 2) == ("1", "2")
    assert C.cut_slice(_spec("broad"), ordered, films, 1) == ("1", "2", "6")
    assert C.cut_slice(_spec("mainstream"), ordered, films, 1) == ("1", "2")
    assert C.cut_slice(_spec("arthouse"), ordered, films, 1) == ("6",)
    with pytest.raises(ValueError, match="a1 \\(Fun\\) has an empty slice"):
        C.cut_slice(_spec("broad"), ordered, films, 100)


def test_card_describes_the_slice_and_its_eras():
    card = C.agent_card(_spec("broad"), ["1", "3", "6"], _films().years, 0.5)
    assert card.n_items == 3 and card.popularity == 0.5
    assert card.era_shares["late 1990s"] == pytest.approx(2 / 3)
    assert "3 films" in card.description and "mostly late 1990s" in card.description


def test_population_finds_over_represented_genres_era_and_dislikes():
    genres = {"1": ("Comedy",), "2": ("Comedy",), "3": ("Horror",), "4": ("Drama",)}
    years = {"1": 1975, "2": 1978, "3": 1996, "4": 1997}
    base = users.Population(
        genres=genres,
        years=years,
        genre_shares={"Comedy": 0.1, "Drama": 0.6, "Horror": 0.3},
        era_shares={"1970s-1980s": 0.1, "late 1990s": 0.9},
    )
    assert base.genre_counts(["1", "2", "3"]) == Counter({"Comedy": 2, "Horror": 1})
    assert base.favourites(["1", "2", "4"], 2) == ["Comedy", "Drama"], "topped up by frequency"
    assert base.era(["1", "2", "4"]) == "1970s-1980s"
    assert base.disliked(["3", "3", "3"], ["Comedy"]) == ("Horror",)
    assert base.disliked(["3", "3", "3"], ["Horror"]) == (), "never a favourite"
    assert base.disliked([], []) == ()


def test_demographics_keep_the_known_fields():
    info = {"age": "24", "gender": "M", "occupation": None, "zip_code": "60804"}
    assert users.read_demographics(info) == {"age": 24, "gender": "M", "zip": "60804"}


def test_report_evidence_reads_only_closed_vocabulary_fields():
    shared = {"agent_id": "a1", "liked_genres": ["Comedy"], "era": "late 1990s", "age": 30}
    evidence = reports.report_evidence(shared)
    assert (
        evidence.liked == ("Comedy",) and evidence.disliked == () and evidence.era == "late 1990s"
    )
    assert reports.report_evidence({"era": "the future"}).era is None


def test_reply_schemas_require_every_property_in_order():
    schema = P.object_schema(b={"type": "string"}, a={"type": "integer"})
    assert schema == {"type": "object", "properties": schema["properties"], "required": ["b", "a"]}
    assert P.reaction_schema(Rec4AConfig())["required"] == ["comment", "satisfied"]


def test_send_instruction_logs_the_message_and_each_field_it_carries():
    config = Rec4AConfig()
    rec = session.Recorder(config)
    run = session.RunState(config, _films(), rec)
    user = users.SimUser("7", ("Comedy",), (), "late 1990s", ("1",), ("2",))
    s = session.Session(user=user, stage=3, agent="a1")
    instruction = Instruction(("Comedy",), None)
    session.send_instruction(s, 2, run, ("a1", "recommender->agent"), instruction, "Comedy")
    assert [m["kind"] for m in rec.messages] == ["instruction"]
    assert rec.messages[0]["fields"] == ("genres",)
    assert [(e["boundary"], e["field"], e["value"]) for e in rec.exposure] == [
        ("recommender->agent", "genres", "Comedy")
    ]
    session.send_instruction(s, 2, run, ("a2", "recommender->consulted agent"), instruction, "x")
    assert rec.messages[-1]["kind"] == "consult" and rec.messages[-1]["receiver"] == "a2"
