"""The three stages as one protocol: :func:`run_sessions` (one stage) and :func:`run_stages`.

Stage 1 is user <-> agent item; stage 2 adds agent reports to the recommender, which
updates its profile and instructs or switches the agent; stage 3 adds consultations between
agents brokered by the recommender. The per-turn steps shared by all stages live in
:mod:`recagents.papers.rec4agentverse.session`; the report steps of stages 2-3 are here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pandas as pd

from recagents.columns import USER
from recagents.llm.client import LLMClient
from recagents.llm.runlog import RunContext, RunLog
from recagents.papers.rec4agentverse.catalogue import AgentCard, Catalogue
from recagents.papers.rec4agentverse.config import (
    AGENT_ROLE,
    STAGES,
    USER_ROLE,
    Rec4AConfig,
)
from recagents.papers.rec4agentverse.evaluate import (
    hit_at_k,
    preference_share,
    profile_match,
    turns_needed,
)
from recagents.papers.rec4agentverse.prompts import (
    AgentReply,
    opening_schema,
    parse_opening,
    parse_report_reply,
    report_messages,
    report_reply_schema,
    user_opening_messages,
)
from recagents.papers.rec4agentverse.recommender import (
    Profile,
    instruction_for,
    profile_from_text,
    update_profile,
)
from recagents.papers.rec4agentverse.reports import (
    adversarial_report,
    build_report,
    demographic_value,
    gate_report,
    render_report,
    report_evidence,
    report_text,
    revealed_fields,
    validate_report,
)
from recagents.papers.rec4agentverse.session import (
    Recorder,
    RunState,
    Session,
    SessionRun,
    agents_reply,
    films_for_turn,
    route,
    send_instruction,
    users_react,
)
from recagents.papers.rec4agentverse.templates import template_opening, template_report
from recagents.papers.rec4agentverse.users import SimUser


def run_sessions(
    users: Sequence[SimUser],
    catalogue: Catalogue,
    config: Rec4AConfig,
    client: LLMClient | None = None,
    log: RunLog | None = None,
) -> SessionRun:
    """Run one stage's protocol for every user, batched turn by turn.

    Turn *t*, for every open session: (turn 1) the user writes an opening request and the
    recommender routes them to an agent; in stage 3 the recommender brokers a consultation
    and the agent's shortlist merges the consulted agents' films; the agent replies with
    ``k`` films; the user reacts (satisfied or what they want instead); the agent notes
    what it learned, the reaction included. In stage 1 the notes stay with the agent. From
    stage 2 on they are its report, consent-gated and (in ``schema`` mode) validated before
    they reach the recommender; the recommender updates its profile and, if the session goes
    on, keeps the agent with an instruction (which reorders its shortlist) or switches to a
    better one. A session ends when the user is satisfied or after ``max_turns``. LLM
    requests of one step run in one ``client.map`` across users (kinds ``user``, ``agent``,
    ``report``, ``recommender`` in the log).

    Failures never stop a run: an unusable agent reply means no films that turn (the user
    is not asked, and the turn counts as unsatisfied); an unusable user reply counts as
    unsatisfied with no comment; an unusable report means no report that turn; an unusable
    routing reply falls back to the classic scorer. Each is counted in ``sessions``
    (``*_failures``) and in the run log.

    Args:
        users: The simulated users.
        catalogue: The agent items (with the adversary only if ``include_adversary``).
        config: The stage and every option.
        client: The LLM client (needed when ``config.uses_llm``).
        log: Receives one row per call (phase ``{config.phase} stage N``).

    Returns:
        The :class:`SessionRun`.
    """
    if config.uses_llm and client is None:
        raise ValueError("this configuration calls an LLM: pass a client")
    if len({u.user_id for u in users}) != len(users):
        raise ValueError("run_sessions: a user appears more than once")
    if not config.include_adversary and catalogue.adversary is not None:
        catalogue = catalogue.without_adversary()
    log = log if log is not None else RunLog()
    phase = f"{config.phase} stage {config.stage}"
    llm = RunContext(client, log, phase) if client is not None else None
    run = RunState(config, catalogue, Recorder(config), llm)
    sessions = [Session(user=u, stage=config.stage) for u in users]
    for turn in range(1, config.max_turns + 1):
        active = [s for s in sessions if s.open]
        if not active:
            break
        _run_turn(active, turn, run)
    return _finish(sessions, run)


def _run_turn(active: Sequence[Session], turn: int, run: RunState) -> None:
    """One turn of every open session: films, replies, reactions, then notes or reports."""
    if turn == 1:
        _open_sessions(active, run)
    films_of = {id(s): films_for_turn(s, run, turn) for s in active}
    replies = agents_reply(active, films_of, turn, run)
    verdicts = users_react(active, replies, turn, run)
    for s in active:
        _record_turn(s, turn, replies[id(s)], verdicts.get(id(s)), films_of[id(s)], run)
    writing = [s for s in active if replies[id(s)] is not None]
    notes = _write_reports(writing, turn, run)
    if run.config.stage == 1:
        _keep_notes(active, notes, turn, run)
    else:  # stages 2 and 3: reports, profile updates, instructions or switches
        rendered = _deliver_reports(active, notes, turn, run)
        going_on = [s for s in active if s.open and turn < run.config.max_turns]
        _reroute(going_on, rendered, turn, run)
    for s in active:
        if s.open and turn == run.config.max_turns:
            s.open = False


def _open_sessions(active: Sequence[Session], run: RunState) -> None:
    """Turn 1: the users' opening requests, the recommender's profile and first routing."""
    config, rec = run.config, run.rec
    if config.agent_mode == "template":
        openings: list[str | None] = [template_opening(s.user) for s in active]
    else:
        prompts = [user_opening_messages(s.user, config) for s in active]
        schema = opening_schema(config)
        results = run.ask("user", active, prompts, schema, f"{run.phase}: openings")
        openings = [parse_opening(r.data) if r.ok else None for r in results]
    requests = {}
    for k, (s, text) in enumerate(zip(active, openings, strict=True)):
        if text is None:
            s.user_failures += 1
            text = ""
        s.dialogue.append((USER_ROLE, text))
        s.profile = profile_from_text(text)
        requests[k] = text
        rec.say(s, 1, "user", "recommender", "request", text or "(no usable message)")
    routed = route(active, run, None, requests)
    for s, (agent, by_llm) in zip(active, routed, strict=True):
        s.agent = s.first_agent = agent
        how = "LLM" if by_llm else "classic scorer"
        name = run.catalogue.card(agent).name
        routes = f"routes the user to {agent} ({name}) [{how}; profile {s.profile.text()}]"
        rec.say(s, 1, "recommender", "user", "route", routes)


def _record_turn(
    s: Session,
    turn: int,
    reply: AgentReply | None,
    verdict: tuple[bool | None, str] | None,
    films: tuple[list[str], list[str]],
    run: RunState,
) -> None:
    """Update one session after the agent's reply and the user's reaction; log the turn."""
    s.turns = turn
    shortlist_films, sources = films
    source_of = dict(zip(shortlist_films, sources, strict=True))
    satisfied: bool | None = None
    if reply is None:
        s.agent_failures += 1
        run.rec.say(s, turn, s.agent, "user", "reply", "(no usable reply: no films this turn)")
        s.unsatisfied[s.agent] += 1
    else:
        satisfied = _record_reaction(s, turn, reply, verdict, source_of, run)
    picks = reply.picks if reply else ()
    user = s.user
    run.rec.turns.append(
        {
            USER: user.user_id,
            "stage": s.stage,
            "mode": run.config.agent_mode,
            "turn": turn,
            "agent_id": s.agent,
            "instruction": s.instruction.text() if s.instruction else "",
            "shortlist": tuple(shortlist_films),
            "consulted": tuple(sorted(set(sources) - {s.agent})),
            "items": picks,
            "sources": tuple(source_of[i] for i in picks),
            "agent_ok": reply is not None,
            "user_ok": satisfied is not None if reply else None,
            "satisfied": satisfied,
            "pref_share": preference_share(
                picks,
                user.favourite_genres,
                user.era,
                run.catalogue.genres,
                run.catalogue.years,
                run.config.k,
            ),  # fmt: skip
        }
    )


def _record_reaction(
    s: Session,
    turn: int,
    reply: AgentReply,
    verdict: tuple[bool | None, str] | None,
    source_of: dict[str, str],
    run: RunState,
) -> bool | None:
    """Log the agent's films and the user's reaction; close a satisfied session.

    Returns:
        Whether the user was satisfied (``None``: no usable reaction).
    """
    s.items = reply.picks
    s.sources = tuple(source_of[i] for i in reply.picks)
    listed = "; ".join(
        run.catalogue.titles[i] + (f" (via {source_of[i]})" if source_of[i] != s.agent else "")
        for i in reply.picks
    )
    run.rec.say(s, turn, s.agent, "user", "reply", f"{reply.message} Picks: {listed}")
    s.dialogue.append((AGENT_ROLE, f"suggested {len(reply.picks)} films"))
    satisfied, comment = verdict if verdict is not None else (None, "")
    if satisfied is None:
        s.user_failures += 1
    verdict_word = {True: "satisfied", False: "not satisfied", None: "no usable reply"}
    run.rec.say(s, turn, "user", s.agent, "reaction", f"[{verdict_word[satisfied]}] {comment}")
    if comment:
        s.dialogue.append((USER_ROLE, comment))
    if satisfied:
        s.satisfied_turn = turn
        s.open = False
    else:
        s.unsatisfied[s.agent] += 1
    return satisfied


def _schema_report(
    s: Session, turn: int, learned: Profile, card: AgentCard, run: RunState
) -> tuple[Profile, str] | None:
    """Gate and validate one schema-mode report; ``(evidence, rendering)`` or ``None``.

    The gate is the platform's, so it applies to the adversary's report too; a report that
    fails :func:`validate_report` is rejected, counted, logged, and changes nothing.
    """
    rec = run.rec
    if card.adversarial:
        draft = adversarial_report(card, "schema")
    else:
        draft = build_report(s.agent, learned, s.user)
    shared, crossed, withheld = gate_report(draft, run.config.share_fields)
    for key in withheld:
        rec.expose(s, turn, "agent->recommender", key, False, draft[key], "schema")
    problem = validate_report(shared, run.catalogue)
    if problem is not None:
        s.reports_rejected += 1
        rec.say(s, turn, s.agent, "recommender", "report", problem)
        for key in crossed:
            rec.expose(s, turn, "agent->recommender", key, False, shared[key], "schema (rejected)")
        return None
    s.reports_sent += 1
    for key in crossed:
        rec.expose(s, turn, "agent->recommender", key, True, shared[key], "schema")
    text = render_report(shared, "schema")
    rec.say(s, turn, s.agent, "recommender", "report", text, crossed)
    return report_evidence(shared), text


def _free_text_report(
    s: Session, learned: Profile, note: str, card: AgentCard, config: Rec4AConfig
) -> tuple[str, list[tuple[str, Any]]]:
    """A free-text report and the fields the consent gate withheld from it.

    The adversary writes its attack. A template agent writes out the gated report, so
    nothing withheld appears. An LLM agent's note is passed on as written (free text
    cannot be gated field by field: what it reveals is scanned and logged), followed by
    the consented account details the platform attaches.
    """
    if card.adversarial:
        return str(adversarial_report(card, "free_text")), []
    draft = build_report(s.agent, learned, s.user)
    shared, _, withheld = gate_report(draft, config.share_fields)
    kept = [(key, draft[key]) for key in withheld]
    if config.agent_mode == "template":
        return report_text(shared), kept
    account = [f"{k}: {shared[k]}" for k in ("age", "gender", "occupation", "zip") if k in shared]
    text = note + (f" Account: {'; '.join(account)}." if account else "")
    kept = [(key, value) for key, value in kept if key in ("age", "gender", "occupation", "zip")]
    return text.strip(), kept


def _free_report(
    s: Session, turn: int, learned: Profile, note: str, card: AgentCard, run: RunState
) -> tuple[Profile, str]:
    """One free-text report: what the recommender reads from it, and its rendering.

    Free text cannot be validated; what crosses is what can be read from it (genres and
    era by keywords, demographic details by :func:`detect_leaks`), logged as crossed
    whether consented or not.
    """
    rec = run.rec
    text, withheld = _free_text_report(s, learned, note, card, run.config)
    for key, value in withheld:
        rec.expose(s, turn, "agent->recommender", key, False, value, "free text")
    s.reports_sent += 1
    evidence = profile_from_text(text)
    read = [
        (key, value)
        for key, value in (
            ("liked_genres", list(evidence.liked)),
            ("disliked_genres", list(evidence.disliked)),
            ("era", evidence.era),
        )
        if value
    ]
    revealed = [(key, demographic_value(s.user, key)) for key in revealed_fields(text, s.user)]
    for key, value in [*read, *revealed]:
        rec.expose(s, turn, "agent->recommender", key, True, value, "free text")
    rendered = render_report(text, "free_text")
    rec.say(s, turn, s.agent, "recommender", "report", rendered, [k for k, _ in read + revealed])
    return evidence, rendered


def _write_reports(
    sessions: Sequence[Session], turn: int, run: RunState
) -> dict[int, tuple[Profile, str] | None]:
    """Each agent notes what it learned after the user's reaction: ``(evidence, note)``.

    Template agents read the whole conversation by keywords; LLM agents are asked in one
    batch (the adversary is not asked: its report is its fixed attack).
    """
    catalogue, config = run.catalogue, run.config
    out: dict[int, tuple[Profile, str] | None] = {}
    asked = []
    for s in sessions:
        if config.agent_mode == "template" or catalogue.card(s.agent).adversarial:
            out[id(s)] = template_report(s.dialogue)
        else:
            asked.append(s)
    if asked:
        prompts = [
            report_messages(catalogue.card(s.agent), s.user, s.dialogue, config) for s in asked
        ]
        schema = report_reply_schema(config)
        results = run.ask("report", asked, prompts, schema, f"{run.phase} turn {turn}: reports")
        for s, result in zip(asked, results, strict=True):
            out[id(s)] = parse_report_reply(result.data) if result.ok else None
    return out


def _notes_of(
    s: Session, notes: dict[int, tuple[Profile, str] | None], turn: int, run: RunState
) -> tuple[Profile, str] | None:
    """What the session's agent wrote this turn: ``(evidence, note)``, or ``None`` (logged).

    ``notes`` holds only the agents that replied this turn. In stage 1 the notes stay with
    the agent (a failed agent writes nothing, silently); from stage 2 they are its report
    to the recommender. Unusable notes are counted as a report failure.
    """
    own = run.config.stage == 1
    receiver, kind = ("(own notes)", "learned") if own else ("recommender", "report")
    if id(s) not in notes:
        if not own:
            run.rec.say(s, turn, s.agent, receiver, kind, "(no report: the agent failed)")
        return None
    written = notes[id(s)]
    if written is None:
        s.report_failures += 1
        what = "notes" if own else "report"
        run.rec.say(s, turn, s.agent, receiver, kind, f"(no usable {what} this turn)")
    return written


def _keep_notes(
    active: Sequence[Session],
    notes: dict[int, tuple[Profile, str] | None],
    turn: int,
    run: RunState,
) -> None:
    """Stage 1: what each agent learned stays in its own notes (logged, never sent)."""
    for s in active:
        written = _notes_of(s, notes, turn, run)
        if written is not None:
            learned, note = written
            run.rec.say(s, turn, s.agent, "(own notes)", "learned", note or learned.text())


def _reroute(
    going_on: Sequence[Session], rendered: dict[int, str], turn: int, run: RunState
) -> None:
    """Stages 2-3: route each going-on session again (keep or switch), then instruct its agent.

    The LLM recommender reads the report it received this turn (``rendered``, by ``id`` of
    the session).
    """
    reports = {k: rendered[id(s)] for k, s in enumerate(going_on) if id(s) in rendered}
    routed = route(going_on, run, reports, None)
    for s, (agent, by_llm) in zip(going_on, routed, strict=True):
        if agent != s.agent:
            s.switches += 1
            how = "LLM" if by_llm else "classic scorer"
            name = run.catalogue.card(agent).name
            run.rec.say(s, turn, "recommender", "user", "switch",
                        f"switches the user from {s.agent} to {agent} ({name})"
                        f" [{how}; profile {s.profile.text()}]")  # fmt: skip
            s.agent = agent
        s.instruction = instruction_for(s.profile)
        text = s.instruction.text() or "(nothing known yet)"
        send_instruction(s, turn, run, (s.agent, "recommender->agent"), s.instruction, text)


def _deliver_reports(
    active: Sequence[Session],
    notes: dict[int, tuple[Profile, str] | None],
    turn: int,
    run: RunState,
) -> dict[int, str]:
    """Send each agent's report (schema or free text) and update the recommender's profile.

    Returns:
        The rendering of each report the recommender received, by ``id`` of the session.
    """
    rendered: dict[int, str] = {}
    for s in active:
        written = _notes_of(s, notes, turn, run)
        if written is None:
            continue
        learned, note = written
        card = run.catalogue.card(s.agent)
        if run.config.message_mode == "schema":
            received = _schema_report(s, turn, learned, card, run)
        else:
            received = _free_report(s, turn, learned, note, card, run)
        if received is None:
            continue
        evidence, text = received
        s.profile = update_profile(s.profile, evidence)
        rendered[id(s)] = text
    return rendered


#: The columns of :attr:`SessionRun.messages` and :attr:`SessionRun.exposure`.
_MESSAGE_COLUMNS = [USER, "stage", "mode", "turn", "sender", "receiver", "kind", "content",
                    "fields"]  # fmt: skip
_EXPOSURE_COLUMNS = [USER, "stage", "mode", "turn", "boundary", "field", "group", "crossed",
                     "consented", "sensitive", "channel", "value"]  # fmt: skip


def _session_row(s: Session, run: RunState) -> dict[str, Any]:
    """One session's row of :attr:`SessionRun.sessions`: its final list and every metric."""
    u, config, catalogue = s.user, run.config, run.catalogue
    jac, era_ok = profile_match(s.profile, u)
    share = preference_share(
        s.items, u.favourite_genres, u.era, catalogue.genres, catalogue.years, config.k
    )
    flags = [t["satisfied"] for t in run.rec.turns if t[USER] == u.user_id]
    return {
        USER: u.user_id, "stage": s.stage, "mode": config.agent_mode,
        "recommender": config.recommender, "message_mode": config.message_mode,
        "first_agent": s.first_agent, "final_agent": s.agent, "n_turns": s.turns,
        "items": s.items, "sources": s.sources, "hit": hit_at_k(s.items, u.targets, config.k),
        "pref_share": share, "pref_satisfied": float(share >= config.satisfy_share),
        "user_satisfied": float(s.satisfied_turn is not None),
        "turns_needed": turns_needed(flags, config.max_turns),
        "profile_liked": s.profile.liked, "profile_era": s.profile.era,
        "profile_jaccard": jac, "era_match": era_ok,
        "reports_sent": s.reports_sent, "reports_rejected": s.reports_rejected,
        "switches": s.switches, "agent_failures": s.agent_failures,
        "user_failures": s.user_failures, "router_failures": s.router_failures,
        "report_failures": s.report_failures,
    }  # fmt: skip


def _finish(sessions: Sequence[Session], run: RunState) -> SessionRun:
    """The run's frames: one row per session, per turn, per message, per exposure."""
    return SessionRun(
        sessions=pd.DataFrame([_session_row(s, run) for s in sessions]),
        turns=pd.DataFrame(run.rec.turns),
        messages=pd.DataFrame(run.rec.messages, columns=_MESSAGE_COLUMNS),
        exposure=pd.DataFrame(run.rec.exposure, columns=_EXPOSURE_COLUMNS),
    )


def run_stages(
    users: Sequence[SimUser],
    catalogue: Catalogue,
    config: Rec4AConfig,
    stages: Sequence[int] = STAGES,
    client: LLMClient | None = None,
    log: RunLog | None = None,
) -> SessionRun:
    """Run the same users through each stage's protocol (``config.stage`` is overridden)."""
    log = log if log is not None else RunLog()
    runs = [
        run_sessions(users, catalogue, dataclasses.replace(config, stage=stage), client, log)
        for stage in stages
    ]
    return SessionRun.concat(runs)
