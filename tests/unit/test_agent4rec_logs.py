"""Agent4Rec's running logs read back as calls: on hand-made logs, and on both released runs."""

from __future__ import annotations

import os
import time

import pytest

from recagents.config import settings
from recagents.data.releases import MIRROR_ENV, manifest
from recagents.papers.agent4rec.logs import LoggedCall, log_census, read_running_log
from recagents.papers.agent4rec.released_prompts import ReleasedPrompts, Slot, Template


def _cached(path: str) -> bool:
    rel = manifest("agent4rec-ml1m")
    return (settings().cache_dir / "releases" / rel.owner / rel.repo / rel.commit / path).is_file()


#: The released runs are read offline: from the mirror, or a cache that holds them.
needs_release = pytest.mark.skipif(
    not os.environ.get(MIRROR_ENV) and not _cached("simulation/avatar.py"),
    reason="Agent4Rec release not here",
)


def _prompts() -> ReleasedPrompts:
    """Tiny templates in the released layout (our own words), to test the reader alone."""
    page_system = Template(("Role play. Traits: ", Slot("activity_dsc")),
                           ("\nMemory:", Slot("formated_relevant_memories")))  # fmt: skip
    page_user = Template(("LIST PAGE ", Slot("current_page"), "\n", Slot("recommended_items_str"),
                          "\nAnswer in lines. Stop."))  # fmt: skip
    exit_system = Template(("Role play. Traits: ", Slot("activity_dsc"), "\nNow on page ",
                            Slot("current_page"), "\nMemory:\n",
                            Slot("formated_relevant_memories")))  # fmt: skip
    exit_user = Template(("Say [NEXT] or [EXIT].",))
    interview_system = Template(("Role play as user ", Slot("avatar_id"), ". Done."))
    interview_user = Template(("\n  Memory:\n  ", Slot("formated_relevant_memories"),
                               "\n  Rate 1-10.\n  "))  # fmt: skip
    line = Template(("<- ", Slot("item.title"), " ->\n"))
    logs = {
        "start": Template(("Simulating ", Slot("avatar_id"))),
        "page_banner": Template(
            (
                "\n=== Page ",
                Slot("i"),
                " ===",
            )
        ),
        "item_truth": Template(("== (v) ", Slot("movie.title"))),
        "item": Template(("== ", Slot("movie.title"))),
        "page_end": Template(("=== End ", Slot("i"), " ===\n")),
        "response": Template(("\n=== Agent ", Slot("a"), " Response ", Slot("i"), " ===")),
    }
    return ReleasedPrompts(
        chats={"page": (page_system, page_user), "exit": (exit_system, exit_user),
               "interview": (interview_system, interview_user),
               "reflection": (None, Template(("Reflect: ", Slot("observation_str"))))},
        traits={}, item_line=line, memories={}, log_lines=logs,
    )  # fmt: skip


def _log(page_reply: str = "MOVIE: A; ALIGN: yes") -> str:
    """A two-page log as the authors' code writes it (each write: text plus a newline)."""
    writes = ["Simulating 7"]
    for page, memory in ((1, ""), (2, "- saw A")):
        writes += [f"\n=== Page {page} ===", "== A", f"=== End {page} ===\n",
                   f"\n=== Agent 7 Response {page} ==="]  # fmt: skip
        system = "Role play. Traits: lazy" + (f"\nMemory:{memory}" if memory else "")
        writes += ["\n" + system, f"\nLIST PAGE {page}\n<- A ->\n\nAnswer in lines. Stop.",
                   "\n" + page_reply]  # fmt: skip
        writes += [f"\nRole play. Traits: lazy\nNow on page {page}\nMemory:\n- saw A",
                   "\nSay [NEXT] or [EXIT].", "\nPOSITIVE: ok\n[NEXT]; Reason: more"]  # fmt: skip
    writes += ["\nRole play as user 7. Done.", "\n\n  Memory:\n  - saw A\n  Rate 1-10.\n  ",
               "\nRATING: 6; REASON: fine"]  # fmt: skip
    return "".join(w + "\n" for w in writes)


def test_read_running_log_splits_every_call():
    calls = read_running_log(_log(), "7", _prompts())
    assert [(c.page, c.kind) for c in calls] == [
        (1, "page"), (1, "exit"), (2, "page"), (2, "exit"), (2, "interview")
    ]  # fmt: skip
    first, second = calls[0], calls[2]
    assert first.reply == "MOVIE: A; ALIGN: yes"
    assert first.user.startswith("LIST PAGE 1") and first.slots["current_page"] == "1"
    assert "formated_relevant_memories" not in first.slots
    assert second.slots["formated_relevant_memories"] == "- saw A"
    assert calls[1].reply == "POSITIVE: ok\n[NEXT]; Reason: more"
    assert calls[-1].reply == "RATING: 6; REASON: fine" and calls[-1].slots["avatar_id"] == "7"


def test_a_reply_that_spans_lines_and_blank_lines_is_kept_whole():
    reply = "MOVIE: A; ALIGN: yes\n\nNUM: 1; WATCH: A\n\nMOVIE: A; RATING: 4; FEELING: ok"
    calls = read_running_log(_log(reply), "7", _prompts())
    assert calls[0].reply == reply and calls[2].reply == reply


def test_text_no_template_fits_is_kept_as_unmatched():
    broken = _log().replace("Answer in lines. Stop.", "Answer as you like.", 1)
    calls = read_running_log("garbage first\n" + broken, "7", _prompts())
    kinds = [c.kind for c in calls]
    assert kinds.count("unmatched") == 2, "the stray lead and the changed prompt, not dropped"
    assert any("Answer as you like." in c.reply for c in calls if c.kind == "unmatched")


def test_log_census_counts_against_the_pickles():
    calls = read_running_log(_log(), "7", _prompts())
    census = log_census(calls, {"7": {1: {}, 2: {}, "interview": []}}).set_index("kind")
    assert census.loc["page", "calls"] == census.loc["page", "expected"] == 2
    assert census.loc["interview", "agents_off"] == 0
    short = log_census(calls, {"7": {1: {}, "interview": []}}).set_index("kind")
    assert short.loc["page", "agents_off"] == 1


@needs_release
@pytest.mark.parametrize(("run", "agents", "pages"), [("lightgcn", 1000, 3234), ("mf", 100, 317)])
def test_every_released_log_parses_and_matches_its_pickle(run, agents, pages):
    """Measured: one page and one exit call per page the pickle records, one interview per
    agent, nothing unmatched (lightgcn 3,234 pages of 1,000 agents; mf 317 of 100)."""
    from recagents.papers.agent4rec.logs import read_run_behaviour, read_run_logs

    started = time.perf_counter()
    calls = read_run_logs(run)
    elapsed = time.perf_counter() - started
    census = log_census(calls, read_run_behaviour(run)).set_index("kind")
    assert census.loc["page", "calls"] == census.loc["exit", "calls"] == pages
    assert census.loc["interview", "calls"] == agents
    assert (census["agents_off"] == 0).all() and census.loc["unmatched", "calls"] == 0
    assert all(isinstance(c, LoggedCall) and c.reply for c in calls)
    assert elapsed < 60, f"read_run_logs({run!r}) took {elapsed:.1f} s"
