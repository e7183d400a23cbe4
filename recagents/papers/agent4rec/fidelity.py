"""Our Agent4Rec implementation held against the authors' recorded gpt-3.5 run.

Why: a reproduction is only as faithful as the prompts it sends and the way it reads the
replies. Two checks, both on the released running logs (:mod:`.logs`):

* **Parser fidelity** (:func:`parser_fidelity`): our free-text parsers
  (:mod:`.released_prompts`) read every raw reply of both runs, and each field (watched
  items, their ratings, liked and aligned items, the exit decision, the interview rating) is
  compared with the authors' parsed decisions in the behaviour pickles; every class of
  disagreement is counted with one example.
* **Prompt fidelity** (:func:`prompt_fidelity`): for logged calls, our prompt and the
  released-mode prompt are built for the same agent and page state and compared with the
  logged prompt: a normalised edit distance and an inventory of the information fields
  (present, absent, out of order). :data:`DELIBERATE_DIFFERENCES` lists, as data, every way
  our prompts still differ from the authors' on purpose, and why.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from rapidfuzz.distance import Levenshtein

from recagents.metrics import bootstrap_ci
from recagents.papers.agent4rec.logs import (
    LoggedCall,
    Run,
    read_run_behaviour,
    read_run_logs,
)
from recagents.papers.agent4rec.recorded import parse_satisfaction
from recagents.papers.agent4rec.released_prompts import (
    ItemFacts,
    PageReading,
    agent_slots,
    match_title,
    page_items_text,
    parse_exit_reply,
    parse_interview_reply,
    parse_page_reply,
    released_prompts,
    render_released,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from recagents.papers.agent4rec.agents import Agent

#: The pages of a released visit: the last page is always left (no decision recorded there).
MAX_PAGES = 5

#: Every way our prompts differ from the authors' on purpose: what, and why (shown by the
#: notebook beside the prompt-fidelity results).
DELIBERATE_DIFFERENCES = pd.DataFrame(
    [
        ("all", "reply format", "JSON, constrained by a schema", "free text, KEY: value lines",
         "the embedded 135M model only answers usably under constrained decoding"),
        ("all", "wording", "our own sentences", "the authors' sentences",
         "we do not copy the authors' text; the released mode sends theirs verbatim"),
        ("all", "item reference", "items numbered on the page, the reply in page order",
         "the reply names each title", "a small model misspells titles; order cannot be"),
        ("page, interview", "trait wording", "one behaviour sentence per trait level",
         "a persona label and a description per trait, then what the traits measure",
         "same levels and meaning, in fewer tokens for a small context window"),
        ("page, interview", "taste reasons", "each taste with its reason",
         "tastes only", "our persona prompt writes the reasons; they ground the taste"),
        ("interview", "rating tendency", "included (part of our persona)", "not included",
         "the persona is one block in every prompt that has it"),
        ("page", "titles", "article first (The Lion King)", "catalogue form (Lion King, The)",
         "how our item lines write every title (readable_title)"),
        ("page", "unwatched items", "rating 1 and an empty feeling", "not rated",
         "a fixed-length JSON list needs a value for every item"),
        ("exit", "fatigue", "a sentence for the page reached (a little tired on 3-4, very "
         "tired from 5)", "the rule for all pages (above 2 a little, above 4 very tired)",
         "same grading, stated for the page at hand"),
        ("page, exit", "memories", "nearest to the page by MiniLM embeddings, in memory order",
         "recency, importance and OpenAI-embedding relevance, best first",
         "no OpenAI embeddings offline; same number of memories (5)"),
        ("memory", "memory sentences", "what was shown and watched, with ratings",
         "shown, watched with ratings, disliked", "our words; the released mode writes theirs"),
        ("reflection", "trigger", "after pages 2 and 4, for agents still browsing",
         "every 4th memory, also for an agent that has just left",
         "the released mode reflects as the authors do"),
    ],
    columns=["kind", "aspect", "ours", "authors", "reason"],
)  # fmt: skip


# --------------------------------------------------------------------------- parser fidelity

#: The released parser's strict rating line: one space after each colon, ``; `` between.
_STRICT_RATING = re.compile(r"MOVIE: (.+?); RATING: (\d+); FEELING: ")
_STRICT_ALIGN = re.compile(r"MOVIE: (.+?); ALIGN: (.+?); REASON: ")


@dataclass(frozen=True)
class ParserFidelity:
    """Our reading of every reply against the authors' parsed decisions.

    Attributes:
        fields: One row per compared value: ``run, agent, page, field, agree, ours, authors,
            why`` (``why`` the disagreement class, ``""`` when they agree).
        problems: Our parsers' problems per reply kind: ``run, kind, problem, count``.
    """

    fields: pd.DataFrame
    problems: pd.DataFrame


def _page_why(reply: str, reading: PageReading, record: Mapping[str, Any]) -> str:
    """The first disagreement class that fits a page (see :func:`parser_fidelity`)."""
    ids = list(record["recommended_id"])
    if set(record["watch_id"]) - set(ids) or set(record["align_id"]) - set(ids):
        return "authors took a title that is not on the page"
    for problem in ("title_unmatched", "duplicate_rating", "duplicate_align", "rating_invalid"):
        if problem in reading.problems:
            return f"ours: {problem.replace('_', ' ')}"
    if len(_STRICT_RATING.findall(reply)) < len(reading.rated_in_order):
        return "authors missed a rating line not in their exact spacing"
    if len(_STRICT_ALIGN.findall(reply)) < sum(i["aligned"] is not None for i in reading.items):
        return "authors missed an align line not in their exact spacing"
    if len(record["watch_id"]) < len(record["rating"]) or len(record["align_id"]) < sum(
        i["aligned"] is True for i in reading.items
    ):
        return "authors dropped a title written otherwise than the catalogue"
    answers = [str(v).strip(";") for _, v in _STRICT_ALIGN.findall(reply)]
    if any(v.lower().startswith("yes") and v not in ("Yes", "yes") for v in answers):
        return "align answer not exactly yes/Yes (authors count it as no)"
    if "watched_unrated" in reading.problems:
        return "ours: watched by the WATCH line only"
    return "other"


def _page_rows(call: LoggedCall, record: Mapping[str, Any]) -> tuple[list[dict], PageReading]:
    titles = list(record["recommended"])
    ids = list(record["recommended_id"])
    reading = parse_page_reply(call.reply, titles)
    watched = {ids[i] for i, item in enumerate(reading.items) if item["watched"]}
    # The authors' watched titles are as the reply wrote them: put each on its shown title.
    written = [str(t).strip() for t in record["watched"]]
    their_watched = [titles[k] if (k := match_title(t, titles)) is not None else t for t in written]
    ours = {
        "watched": sorted(titles[i] for i, item in enumerate(reading.items) if item["watched"]),
        "ratings": [r for _, r in reading.rated_in_order],
        "liked": sorted(titles[i] for i, r in reading.rated_in_order if r == 5),
        "aligned": sorted(ids[i] for i, item in enumerate(reading.items) if item["aligned"]),
        "watched ids": sorted(watched),
    }
    authors = {
        "watched": sorted(set(their_watched)),
        "ratings": list(record["rating"]),
        "liked": sorted(
            {t for t, r in zip(their_watched, record["rating"], strict=False) if r == 5}
        ),
        "aligned": sorted(set(record["align_id"])),
        "watched ids": sorted(set(record["watch_id"])),
    }
    by_rank = set(record["watch_id"]) == set(ids[: len(record["rating"])])
    rows = []
    for name in ours:
        agree = ours[name] == authors[name]
        why = "" if agree else _page_why(call.reply, reading, record)
        if not agree and name == "watched ids" and by_rank:
            why = "authors' ids are the page's first k items (line rank, not the title)"
        rows.append({"field": name, "agree": agree, "ours": str(ours[name]),
                     "authors": str(authors[name]), "why": why})  # fmt: skip
    return rows, reading


def _exit_row(call: LoggedCall, last_page: int) -> dict[str, Any] | None:
    """Our decision against the one the pickle implies (none on the forced last page)."""
    if call.page >= MAX_PAGES:
        return None
    implied = "next" if call.page < last_page else "exit"
    reading = parse_exit_reply(call.reply)
    agree = reading.decision == implied
    why = ""
    if not agree:
        tokens = re.findall(r"\[(?:EXIT|exit)\]", call.reply)
        why = (
            f"ours: {reading.problems[0].replace('_', ' ')}" if reading.problems
            else "authors saw an exit token we read as next" if tokens
            else "other"
        )  # fmt: skip
    return {"field": "exit decision", "agree": agree, "ours": str(reading.decision),
            "authors": implied, "why": why}  # fmt: skip


def _interview_row(call: LoggedCall, record: Any) -> dict[str, Any]:
    reading = parse_interview_reply(call.reply)
    theirs = parse_satisfaction(record)
    ours = math.nan if reading.rating is None else float(reading.rating)
    agree = (math.isnan(ours) and math.isnan(theirs)) or ours == theirs
    why = "" if agree else (
        f"ours: {reading.problems[0].replace('_', ' ')}" if reading.problems else "other"
    )  # fmt: skip
    return {"field": "interview rating", "agree": agree, "ours": str(ours),
            "authors": str(theirs), "why": why}  # fmt: skip


def parser_fidelity(runs: Sequence[Run] = ("lightgcn", "mf")) -> ParserFidelity:
    """Read every logged reply with our parsers and compare with the authors' decisions.

    Per page: ``watched`` (the set of titles; the authors': the titles of their rating
    lines), ``ratings`` (in reply order), ``liked`` (rated 5), ``aligned`` (item ids),
    ``watched ids`` (the pickle's ``watch_id``: their code takes the id of the k-th page
    position for the k-th rating line, which we name as its own class); per exit call
    before the last page: the decision the pickle implies (``next`` before the last page
    browsed, ``exit`` on it when it is before page 5); per agent: the interview rating. A
    disagreement's ``why`` is the first class that fits: the authors took a title that is
    not on the page; one of our problems; the authors' exact-spacing regex missed a line;
    the authors dropped a title written otherwise than their catalogue; an align answer not
    exactly yes; ``other``.
    """
    rows: list[dict[str, Any]] = []
    problems: dict[tuple[str, str, str], int] = {}
    for run in runs:
        behaviour = read_run_behaviour(run)
        for call in read_run_logs(run):
            record = behaviour[call.agent]
            base = {"run": run, "agent": call.agent, "page": call.page}
            if call.kind == "page":
                page_rows, reading = _page_rows(call, record[call.page])
                rows += [{**base, **row} for row in page_rows]
                found = reading.problems
            elif call.kind == "exit":
                last = max(k for k in record if isinstance(k, int))
                row = _exit_row(call, last)
                rows += [{**base, **row}] if row else []
                found = list(parse_exit_reply(call.reply).problems)
            elif call.kind == "interview":
                rows.append({**base, **_interview_row(call, record.get("interview"))})
                found = list(parse_interview_reply(call.reply).problems)
            else:
                found = ["log_text_unmatched"]
            for problem in found:
                key = (run, call.kind, problem)
                problems[key] = problems.get(key, 0) + 1
    problem_frame = pd.DataFrame(
        [(*k, v) for k, v in sorted(problems.items())], columns=["run", "kind", "problem", "count"]
    )
    return ParserFidelity(pd.DataFrame(rows), problem_frame)


def agreement_table(fields: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Agreement per run and field, with a 95% bootstrap interval over agents.

    Columns ``run, field, n`` (values), ``agents``, ``agreement`` (share of values) and
    ``mean, low, high`` (each agent's share of agreeing values, resampled by agent).
    """
    rows = []
    for (run, name), part in fields.groupby(["run", "field"], sort=False):
        per_agent = part.groupby("agent")["agree"].mean().to_numpy(dtype=float)
        mean, low, high = bootstrap_ci(per_agent, seed=seed)
        rows.append({"run": run, "field": name, "n": len(part), "agents": len(per_agent),
                     "agreement": part["agree"].mean(), "mean": mean, "low": low,
                     "high": high})  # fmt: skip
    return pd.DataFrame(rows)


def disagreement_classes(fields: pd.DataFrame) -> pd.DataFrame:
    """Every class of disagreement per field with its count and one example (first seen)."""
    wrong = fields[~fields["agree"]]
    if wrong.empty:
        return pd.DataFrame(columns=["field", "why", "count", "example"])
    grouped = wrong.groupby(["field", "why"], sort=False)
    first = grouped.first()
    table = grouped.size().rename("count").to_frame()
    table["example"] = [
        f"{r.run} agent {r.agent} page {r.page}: ours {r.ours} vs authors {r.authors}"
        for r in first.itertuples()
    ]
    return table.reset_index().sort_values(["field", "count"], ascending=[True, False])


def parser_agreement_figure(table: pd.DataFrame) -> Figure:
    """Agreement of our parser with the authors' per field: bars with 95% intervals."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from recagents.plotting import PALETTE, fixed_scale

    runs = list(dict.fromkeys(table["run"]))
    fields = list(dict.fromkeys(table["field"]))
    colors = sns.color_palette(PALETTE, len(runs))
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    width = 0.8 / len(runs)
    for k, (run, color) in enumerate(zip(runs, colors, strict=True)):
        part = table[table["run"] == run].set_index("field").reindex(fields)
        x = np.arange(len(fields)) + (k - (len(runs) - 1) / 2) * width
        errors = np.vstack([part["mean"] - part["low"], part["high"] - part["mean"]])
        ax.bar(x, part["mean"], width, color=color, label=f"{run} run", yerr=errors, capsize=3)
    ax.set_xticks(range(len(fields)), fields, rotation=20, ha="right")
    fixed_scale(ax, 0.0, 1.0)
    ax.set(ylabel="share agreeing\n(mean over agents, 95% CI)",
           title="Our free-text parser against the authors' parsed decisions")  # fmt: skip
    if "watched ids" in fields:
        ax.annotate("their code gives the k-th rated\ntitle the id of the page's k-th item",
                    (fields.index("watched ids"), 0.78), ha="center", fontsize=8)  # fmt: skip
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=len(runs), frameon=False)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- prompt fidelity

#: The information fields whose presence and order the inventory checks, per prompt kind.
INVENTORY_FIELDS = {
    "page": ("activity trait", "conformity trait", "diversity trait", "tastes",
             "rating tendency", "memories", "page number", "item title", "item mean rating",
             "item summary"),
    "exit": ("activity trait", "memories", "page number"),
    "interview": ("activity trait", "conformity trait", "diversity trait", "tastes",
                  "rating tendency", "memories"),
}  # fmt: skip


@dataclass(frozen=True)
class CallState:
    """What one logged call's agent knew: the state both prompts are built from.

    ``shown`` is the page's items (page prompts); ``previous`` the items whose memory the
    prompt should carry (the page before; for an exit, this page; for the interview, page 1).
    """

    call: LoggedCall
    traits: dict[str, int]
    tastes: list[str]
    rates_high: str
    shown: list[ItemFacts]
    previous: list[ItemFacts]


def prompt_text(messages: Sequence[Mapping[str, str]]) -> str:
    """A chat as one text (system, a blank line, user), as the running log writes it."""
    return "\n\n".join(m["content"] for m in messages)


def normalised_distance(a: str, b: str, whitespace: bool = False) -> float:
    """Levenshtein distance over the longer length (0 identical, 1 nothing shared).

    ``whitespace=False`` first collapses every whitespace run to one space.
    """
    if not whitespace:
        a, b = " ".join(a.split()), " ".join(b.split())
    return float(Levenshtein.normalized_distance(a, b))


def differing_spans(a: str, b: str, limit: int = 6) -> list[tuple[str, str]]:
    """Up to ``limit`` word spans that differ between two prompts: ``(in a, in b)``."""
    words_a, words_b = a.split(), b.split()
    spans = []
    matcher = difflib.SequenceMatcher(None, words_a, words_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            spans.append((" ".join(words_a[i1:i2])[:160], " ".join(words_b[j1:j2])[:160]))
    return spans[:limit]


def _markers(kind: str, state: CallState, ours: bool, agent_lines: Mapping[str, str]) -> dict:
    """The text each inventory field shows in one prompt (several forms allowed)."""
    from recagents.data.datasets import readable_title
    from recagents.papers.agent4rec.prompts import TRAIT_SENTENCES

    table = released_prompts().traits
    out: dict[str, list[str]] = {}
    for trait in ("activity", "conformity", "diversity"):
        level = state.traits[trait]
        out[f"{trait} trait"] = [(TRAIT_SENTENCES if ours else table)[trait][level][:40]]
    out["tastes"] = [re.sub(r"^I ", "", state.tastes[0].strip())[:30]] if state.tastes else []
    out["rating tendency"] = [state.rates_high.strip()[:30]] if state.rates_high else []
    first = state.previous[:1]
    out["memories"] = [
        form
        for f in first
        for form in (f.title, readable_title(f.title), re.sub(r" \(\d{4}\)$", "", f.title))
    ]
    out["page number"] = [f"page {state.call.page}"]
    if state.shown:
        item = state.shown[0]
        out["item title"] = [item.title, readable_title(item.title)]
        out["item mean rating"] = [str(round(item.rating, 2)), f"{item.rating:.2f}"]
        out["item summary"] = [item.summary[:30]] if item.summary else []
    return out


def field_positions(text: str, markers: Mapping[str, Sequence[str]], fields: Sequence[str]) -> dict:
    """Each field's first position in ``text`` (case-insensitive), or ``None`` when absent."""
    low = text.lower()
    found: dict[str, int | None] = {}
    for name in fields:
        hits = [low.find(m.lower()) for m in markers.get(name, []) if m]
        hits = [h for h in hits if h >= 0]
        found[name] = min(hits) if hits else None
    return found


def inventory_status(logged: Mapping[str, int | None], other: Mapping[str, int | None]) -> dict:
    """Per field: ``present``, ``absent``, ``extra`` or ``out of order``.

    ``out of order``: another field common to both prompts comes before it in one and after
    it in the other.
    """
    common = [f for f in logged if logged[f] is not None and other.get(f) is not None]
    status = {}
    for name in logged:
        if other.get(name) is None:
            status[name] = "absent" if logged[name] is not None else "absent in both"
        elif logged[name] is None:
            status[name] = "extra"
        else:
            before_logged = {f for f in common if logged[f] < logged[name]}  # type: ignore[operator]
            before_other = {f for f in common if other[f] < other[name]}  # type: ignore[operator]
            status[name] = "present" if before_logged == before_other else "out of order"
    return status


@dataclass(frozen=True)
class PromptFidelity:
    """Ours and the released-mode prompt against the logged one.

    Attributes:
        distances: ``agent, page, kind, source, distance, raw_distance`` (``source``:
            ``ours`` or ``released``; ``distance`` with whitespace runs collapsed).
        inventory: ``kind, source, field, status, calls`` (calls with that status).
        examples: ``kind -> source -> [(logged span, built span), ...]`` for the first call.
    """

    distances: pd.DataFrame
    inventory: pd.DataFrame
    examples: dict[str, dict[str, list[tuple[str, str]]]]


def _judged(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A page of the pickle as our loop records a page: aligned, watched, rating, feeling."""
    ratings = dict(zip(record["rating_id"], record["rating"], strict=False))
    return [
        {"aligned": i in record["align_id"], "watched": i in record["watch_id"],
         "rating": float(ratings[i]) if i in ratings and i in record["watch_id"] else None,
         "feeling": ""}
        for i in record["recommended_id"]
    ]  # fmt: skip


def _our_memories(
    agent: Agent, record: Mapping[Any, Any], lines: Mapping[str, str], upto: int, decided: int
) -> list[str]:
    """Our loop's memories after pages ``1..upto``, decisions written for pages ``<= decided``.

    Reflections are left out: their sentences come from the model, and the authors' are not
    in the log.
    """
    from recagents.papers.agent4rec.config import Agent4RecConfig
    from recagents.papers.agent4rec.loop import Visit, _remember_page, decision_note
    from recagents.papers.agent4rec.prompts import TRAIT_SENTENCES

    agent.memory = []
    visit = Visit({agent.user_id: agent}, {}, dict(lines), TRAIT_SENTENCES, "", Agent4RecConfig(),
                  None)  # fmt: skip
    pages = [k for k in record if isinstance(k, int)]
    for page in range(1, upto + 1):
        items = [str(i) for i in record[page]["recommended_id"]]
        _remember_page(visit, agent.user_id, page, items, _judged(record[page]))
        if page <= decided:
            agent.memory[-1] += decision_note(page == max(pages) or page == MAX_PAGES)
    return agent.memory


def prompt_fidelity(
    run: Run = "lightgcn", agents: Sequence[str] | None = None, memory_top_k: int = 5
) -> PromptFidelity:
    """Build ours and the released-mode prompt for logged calls and compare with the logged.

    The state is the logged one: the agent's released traits and persona
    (:func:`~recagents.data.released.agent4rec_personas`), the items shown (the pickle), and
    for the released mode the memories the log shows (the authors' retrieval used OpenAI
    embeddings, which we do not call). Ours gets the memories our loop would have written
    from the pickle's decisions, its most recent ``memory_top_k`` (our retrieval by
    embeddings would pick among the same; reflections are left out).

    Args:
        run: Which released run.
        agents: Agent ids (default: the first 50 of the run).
        memory_top_k: Memories in our page and exit prompts.
    """
    from recagents.data import released
    from recagents.papers.agent4rec.agents import agents_from_released, item_lines
    from recagents.papers.agent4rec.prompts import (
        TRAIT_SENTENCES,
        exit_messages,
        interview_messages,
        page_messages,
    )
    from recagents.papers.agent4rec.released_prompts import item_facts

    users = list(agents) if agents is not None else [str(k) for k in range(50)]
    dataset, split = released.load_agent4rec_ml1m()
    facts = item_facts(dataset)
    lines = item_lines(dataset, split, describe="summary")
    personas = released.agent4rec_personas()
    traits = released.agent4rec_traits().set_index("user_id")
    ours_agents = agents_from_released(users, _released_agents_frame())
    behaviour = read_run_behaviour(run, users)
    rows, statuses, examples = [], [], {}  # type: ignore[var-annotated]
    for call in read_run_logs(run, users):
        if call.kind not in INVENTORY_FIELDS:
            continue
        record = behaviour[call.agent]
        level = {t: int(traits.loc[call.agent, t]) for t in ("activity", "conformity", "diversity")}
        persona = personas.loc[call.agent]
        page_ids = (
            [str(i) for i in record[call.page]["recommended_id"]] if call.kind == "page" else []
        )
        shown = [facts[i] for i in page_ids]
        if call.kind == "exit":
            shown_before = [facts[str(i)] for i in record[call.page]["recommended_id"]]
        else:
            first = record.get(1 if call.kind == "interview" else call.page - 1)
            shown_before = [facts[str(i)] for i in first["recommended_id"]] if first else []
        state = CallState(call, level, list(persona["tastes"]), str(persona["high_rating"]),
                          shown, shown_before)  # fmt: skip
        slots = {
            **agent_slots(level, state.tastes, state.rates_high, call.agent),
            "current_page": str(call.page),
            "formated_relevant_memories": call.slots.get("formated_relevant_memories", ""),
        }
        if call.kind == "page":
            slots["recommended_items_str"] = page_items_text(shown)
        built = {"released": prompt_text(render_released(call.kind, slots))}
        agent = ours_agents[call.agent]
        if call.kind == "page":
            memories = _our_memories(agent, record, lines, call.page - 1, call.page - 1)
            built["ours"] = prompt_text(page_messages(
                agent, call.page, [lines[i] for i in page_ids], memories[-memory_top_k:],
                TRAIT_SENTENCES))  # fmt: skip
        elif call.kind == "exit":
            memories = _our_memories(agent, record, lines, call.page, call.page - 1)
            built["ours"] = prompt_text(exit_messages(agent, call.page, memories[-memory_top_k:],
                                                      TRAIT_SENTENCES))  # fmt: skip
        else:
            last = max(k for k in record if isinstance(k, int))
            _our_memories(agent, record, lines, last, last)
            built["ours"] = prompt_text(interview_messages(agent, TRAIT_SENTENCES))
        logged = prompt_text([{"content": call.system}, {"content": call.user}])
        fields = INVENTORY_FIELDS[call.kind]
        logged_at = field_positions(logged, _markers(call.kind, state, False, lines), fields)
        for source, text in built.items():
            rows.append(
                {
                    "agent": call.agent,
                    "page": call.page,
                    "kind": call.kind,
                    "source": source,
                    "distance": normalised_distance(logged, text),
                    "raw_distance": normalised_distance(logged, text, whitespace=True),
                }
            )
            at = field_positions(text, _markers(call.kind, state, source == "ours", lines), fields)
            for name, status in inventory_status(logged_at, at).items():
                statuses.append((call.kind, source, name, status))
            examples.setdefault(call.kind, {}).setdefault(source, differing_spans(logged, text))
    inventory = (
        pd.DataFrame(statuses, columns=["kind", "source", "field", "status"])
        .value_counts().rename("calls").reset_index()
        .sort_values(["kind", "source", "field", "calls"], ascending=[True, True, True, False])
    )  # fmt: skip
    return PromptFidelity(pd.DataFrame(rows), inventory.reset_index(drop=True), examples)


def _released_agents_frame() -> pd.DataFrame:
    from recagents.papers.agent4rec.agents import released_agents

    return released_agents()


def distance_table(distances: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Mean normalised edit distance per kind and source, with a 95% interval over agents."""
    rows = []
    for (kind, source), part in distances.groupby(["kind", "source"], sort=False):
        per_agent = part.groupby("agent")["distance"].mean().to_numpy(dtype=float)
        mean, low, high = bootstrap_ci(per_agent, seed=seed)
        rows.append({"kind": kind, "source": source, "calls": len(part), "mean": mean,
                     "low": low, "high": high, "max": part["distance"].max()})  # fmt: skip
    return pd.DataFrame(rows)


def prompt_fidelity_figure(table: pd.DataFrame, inventory: pd.DataFrame) -> Figure:
    """Ours and the released-mode prompt against the logged ones.

    Left: edit distance to the logged prompt per kind. Right: the field inventory, the share
    of calls where each field is as in the logged prompt (present in its order, or absent
    in both).
    """
    import matplotlib.pyplot as plt
    import seaborn as sns

    from recagents.plotting import PALETTE, fixed_scale

    kinds = list(dict.fromkeys(table["kind"]))
    sources = ["released", "ours"]
    colors = sns.color_palette(PALETTE, len(sources))
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6), width_ratios=[1, 1.4])
    for k, (source, color) in enumerate(zip(sources, colors, strict=True)):
        part = table[table["source"] == source].set_index("kind").reindex(kinds)
        x = np.arange(len(kinds)) + (k - 0.5) * 0.4
        errors = np.vstack([part["mean"] - part["low"], part["high"] - part["mean"]])
        bars = left.bar(x, part["mean"], 0.4, color=color, yerr=errors, capsize=3,
                        label=f"{source} prompt")  # fmt: skip
        left.bar_label(bars, fmt="%.3f", padding=4, fontsize=8)
    left.set_xticks(range(len(kinds)), kinds)
    fixed_scale(left, 0.0, 1.0)
    left.set(ylabel="edit distance to the logged prompt\n(0 = identical; 95% CI)",
             title="Distance to the authors' logged prompts")  # fmt: skip
    left.legend(loc="upper left")
    same = inventory["status"].isin(["present", "absent in both"])
    share = inventory.assign(ok=same * inventory["calls"])
    grid = share.groupby(["field", "kind", "source"])[["ok", "calls"]].sum()
    grid = (grid["ok"] / grid["calls"]).unstack(["kind", "source"])
    sns.heatmap(grid, ax=right, vmin=0, vmax=1, cmap="viridis", annot=True, fmt=".2f",
                cbar_kws={"label": "share of calls as in the logged prompt\n"
                                   "(present in its order, or absent in both)"})  # fmt: skip
    right.set(title="Information fields against the logged prompt", xlabel="", ylabel="")
    fig.tight_layout()
    return fig
