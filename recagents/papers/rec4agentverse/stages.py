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
from recagents.llm.runlog import RunLog
from recagents.papers.rec4agentverse.catalogue import AgentCard, Catalogue
from recagents.papers.rec4agentverse.config import (
    _AGENT_ROLE,
    _USER_ROLE,
    ERAS,
    STAGES,
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
    _demographic,
    _report_text,
    _revealed,
    adversarial_report,
    build_report,
    gate_report,
    render_report,
    validate_report,
)
from recagents.papers.rec4agentverse.session import (
    SessionRun,
    _agents_reply,
    _ask,
    _films_for_turn,
    _Recorder,
    _route,
    _Session,
    _users_react,
)
from recagents.papers.rec4agentverse.templates import template_opening, template_report
from recagents.papers.rec4agentverse.users import SimUser

__all__ = [
    "run_sessions",
    "run_stages",
]


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

    Taught in: not shown in a notebook (used by recagents.papers.rec4agentverse.stages.run_stages).

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
    rec = _Recorder(config)
    sessions = [_Session(user=u, stage=config.stage) for u in users]
    for turn in range(1, config.max_turns + 1):
        active = [s for s in sessions if s.open]
        if not active:
            break
        if turn == 1:
            _open_sessions(active, catalogue, config, client, log, phase, rec)
        films_of = {id(s): _films_for_turn(s, catalogue, config, rec, turn) for s in active}
        replies = _agents_reply(active, films_of, turn, catalogue, config, client, log, phase)
        verdicts = _users_react(active, replies, turn, catalogue, config, client, log, phase)
        for s in active:
            _record_turn(
                s,
                turn,
                replies[id(s)],
                verdicts.get(id(s)),
                films_of[id(s)],
                catalogue,
                config,
                rec,
            )
        writing = [s for s in active if replies[id(s)] is not None]
        notes = _write_reports(writing, turn, catalogue, config, client, log, phase)
        if config.stage == 1:
            _keep_notes(active, replies, notes, turn, rec)
        else:  # stages 2 and 3: reports, profile updates, instructions or switches
            _collaborate(active, replies, notes, turn, catalogue, config, client, log, phase, rec)
        for s in active:
            if s.open and turn == config.max_turns:
                s.open = False
    return _finish(sessions, catalogue, config, rec)


def _open_sessions(
    active: Sequence[_Session],
    catalogue: Catalogue,
    config: Rec4AConfig,
    client: LLMClient | None,
    log: RunLog,
    phase: str,
    rec: _Recorder,
) -> None:
    """Turn 1: the users' opening requests, the recommender's profile and first routing."""
    if config.agent_mode == "template":
        openings: list[str | None] = [template_opening(s.user) for s in active]
    else:
        assert client is not None
        prompts = [user_opening_messages(s.user, config) for s in active]
        schema = opening_schema(config)
        results = _ask(
            client,
            log,
            phase,
            "user",
            [s.user.user_id for s in active],
            prompts,
            [schema] * len(prompts),
            config,
            f"{phase}: openings",
        )
        openings = [parse_opening(r.data) if r.ok else None for r in results]
    requests = {}
    for k, (s, text) in enumerate(zip(active, openings, strict=True)):
        if text is None:
            s.user_failures += 1
            text = ""
        s.dialogue.append((_USER_ROLE, text))
        s.profile = profile_from_text(text)
        requests[k] = text
        rec.say(s, 1, "user", "recommender", "request", text or "(no usable message)")
    routed = _route(active, catalogue, config, client, log, phase, None, requests)
    for s, (agent, by_llm) in zip(active, routed, strict=True):
        s.agent = s.first_agent = agent
        how = "LLM" if by_llm else "classic scorer"
        rec.say(
            s,
            1,
            "recommender",
            "user",
            "route",
            f"routes the user to {agent} ({catalogue.card(agent).name}) [{how}; profile "
            f"{s.profile.text()}]",
        )


def _record_turn(
    s: _Session,
    turn: int,
    reply: AgentReply | None,
    verdict: tuple[bool | None, str] | None,
    films: tuple[list[str], list[str]],
    catalogue: Catalogue,
    config: Rec4AConfig,
    rec: _Recorder,
) -> None:
    """Update one session after the agent's reply and the user's reaction."""
    s.turns = turn
    shortlist_films, sources = films
    source_of = dict(zip(shortlist_films, sources, strict=True))
    satisfied: bool | None = None
    comment = ""
    if reply is None:
        s.agent_failures += 1
        rec.say(s, turn, s.agent, "user", "reply", "(no usable reply: no films this turn)")
        s.unsatisfied[s.agent] += 1
    else:
        s.items = reply.picks
        s.sources = tuple(source_of[i] for i in reply.picks)
        listed = "; ".join(
            catalogue.titles[i] + (f" (via {source_of[i]})" if source_of[i] != s.agent else "")
            for i in reply.picks
        )
        rec.say(s, turn, s.agent, "user", "reply", f"{reply.message} Picks: {listed}")
        s.dialogue.append((_AGENT_ROLE, f"suggested {len(reply.picks)} films"))
        satisfied, comment = verdict if verdict is not None else (None, "")
        if satisfied is None:
            s.user_failures += 1
        verdict_word = {True: "satisfied", False: "not satisfied", None: "no usable reply"}
        rec.say(s, turn, "user", s.agent, "reaction", f"[{verdict_word[satisfied]}] {comment}")
        if comment:
            s.dialogue.append((_USER_ROLE, comment))
        if satisfied:
            s.satisfied_turn = turn
            s.open = False
        else:
            s.unsatisfied[s.agent] += 1
    rec.turns.append(
        {
            USER: s.user.user_id,
            "stage": s.stage,
            "turn": turn,
            "agent_id": s.agent,
            "instruction": s.instruction.text() if s.instruction else "",
            "shortlist": tuple(shortlist_films),
            "consulted": tuple(sorted(set(sources) - {s.agent})),
            "items": reply.picks if reply else (),
            "sources": tuple(source_of[i] for i in reply.picks) if reply else (),
            "agent_ok": reply is not None,
            "user_ok": satisfied is not None if reply else None,
            "satisfied": satisfied,
            "pref_share": preference_share(
                reply.picks if reply else (),
                s.user.favourite_genres,
                s.user.era,
                catalogue.genres,
                catalogue.years,
                config.k,
            ),
        }
    )


def _schema_report(
    s: _Session,
    turn: int,
    learned: Profile,
    card: AgentCard,
    catalogue: Catalogue,
    config: Rec4AConfig,
    rec: _Recorder,
) -> tuple[Profile, str] | None:
    """Gate and validate one schema-mode report; ``(evidence, rendering)`` or ``None``.

    The gate is the platform's, so it applies to the adversary's report too; a report that
    fails :func:`validate_report` is rejected, counted, logged, and changes nothing.
    """
    if card.adversarial:
        draft = adversarial_report(card, "schema")
    else:
        draft = build_report(s.agent, learned, s.user)
    shared, crossed, withheld = gate_report(draft, config.share_fields)
    for key in withheld:
        rec.expose(s, turn, "agent->recommender", key, False, draft[key], "schema")
    problem = validate_report(shared, catalogue)
    if problem is not None:
        s.reports_rejected += 1
        rec.say(s, turn, s.agent, "recommender", "report", problem)
        for key in crossed:
            rec.expose(s, turn, "agent->recommender", key, False, shared[key], "schema (rejected)")
        return None
    s.reports_sent += 1
    for key in crossed:
        rec.expose(s, turn, "agent->recommender", key, True, shared[key], "schema")
    era = shared.get("era")
    evidence = Profile(
        tuple(shared.get("liked_genres", ())),
        tuple(shared.get("disliked_genres", ())),
        era if era in ERAS else None,
    )
    text = render_report(shared, "schema")
    rec.say(s, turn, s.agent, "recommender", "report", text, crossed)
    return evidence, text


def _free_text_report(
    s: _Session, learned: Profile, note: str, card: AgentCard, config: Rec4AConfig
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
        return _report_text(shared), kept
    account = [f"{k}: {shared[k]}" for k in ("age", "gender", "occupation", "zip") if k in shared]
    text = note + (f" Account: {'; '.join(account)}." if account else "")
    kept = [(key, value) for key, value in kept if key in ("age", "gender", "occupation", "zip")]
    return text.strip(), kept


def _free_report(
    s: _Session,
    turn: int,
    learned: Profile,
    note: str,
    card: AgentCard,
    config: Rec4AConfig,
    rec: _Recorder,
) -> tuple[Profile, str]:
    """One free-text report: what the recommender reads from it, and its rendering.

    Free text cannot be validated; what crosses is what can be read from it (genres and
    era by keywords, demographic details by :func:`detect_leaks`), logged as crossed
    whether consented or not.
    """
    text, withheld = _free_text_report(s, learned, note, card, config)
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
    revealed = [(key, _demographic(s.user, key)) for key in _revealed(text, s.user)]
    for key, value in [*read, *revealed]:
        rec.expose(s, turn, "agent->recommender", key, True, value, "free text")
    rendered = render_report(text, "free_text")
    rec.say(s, turn, s.agent, "recommender", "report", rendered, [k for k, _ in read + revealed])
    return evidence, rendered


def _write_reports(
    sessions: Sequence[_Session],
    turn: int,
    catalogue: Catalogue,
    config: Rec4AConfig,
    client: LLMClient | None,
    log: RunLog,
    phase: str,
) -> dict[int, tuple[Profile, str] | None]:
    """Each agent notes what it learned after the user's reaction: ``(evidence, note)``.

    Template agents read the whole conversation by keywords; LLM agents are asked in one
    batch (the adversary is not asked: its report is its fixed attack).
    """
    out: dict[int, tuple[Profile, str] | None] = {}
    asked = []
    for s in sessions:
        if config.agent_mode == "template" or catalogue.card(s.agent).adversarial:
            out[id(s)] = template_report(s.dialogue)
        else:
            asked.append(s)
    if asked:
        assert client is not None
        prompts = [
            report_messages(catalogue.card(s.agent), s.user, s.dialogue, config) for s in asked
        ]
        schema = report_reply_schema(config)
        results = _ask(
            client,
            log,
            phase,
            "report",
            [s.user.user_id for s in asked],
            prompts,
            [schema] * len(prompts),
            config,
            f"{phase} turn {turn}: reports",
        )
        for s, result in zip(asked, results, strict=True):
            out[id(s)] = parse_report_reply(result.data) if result.ok else None
    return out


def _keep_notes(
    active: Sequence[_Session],
    replies: dict[int, AgentReply | None],
    notes: dict[int, tuple[Profile, str] | None],
    turn: int,
    rec: _Recorder,
) -> None:
    """Stage 1: what each agent learned stays in its own notes (logged, never sent)."""
    for s in active:
        if replies[id(s)] is None:
            continue
        written = notes[id(s)]
        if written is None:
            s.report_failures += 1
            rec.say(s, turn, s.agent, "(own notes)", "learned", "(no usable notes this turn)")
            continue
        learned, note = written
        rec.say(s, turn, s.agent, "(own notes)", "learned", note or learned.text())


def _collaborate(
    active: Sequence[_Session],
    replies: dict[int, AgentReply | None],
    notes: dict[int, tuple[Profile, str] | None],
    turn: int,
    catalogue: Catalogue,
    config: Rec4AConfig,
    client: LLMClient | None,
    log: RunLog,
    phase: str,
    rec: _Recorder,
) -> None:
    """Stages 2-3 after a turn: reports, profile updates, then instructions or switches."""
    rendered: dict[int, str] = {}
    for s in active:
        if replies[id(s)] is None:
            rec.say(s, turn, s.agent, "recommender", "report", "(no report: the agent failed)")
            continue
        card = catalogue.card(s.agent)
        written = notes[id(s)]
        if written is None:
            s.report_failures += 1
            rec.say(s, turn, s.agent, "recommender", "report", "(no usable report this turn)")
            continue
        learned, note = written
        if config.message_mode == "schema":
            received = _schema_report(s, turn, learned, card, catalogue, config, rec)
        else:
            received = _free_report(s, turn, learned, note, card, config, rec)
        if received is None:
            continue
        evidence, text = received
        s.profile = update_profile(s.profile, evidence)
        rendered[id(s)] = text
    going_on = [s for s in active if s.open and turn < config.max_turns]
    reports = {k: rendered[id(s)] for k, s in enumerate(going_on) if id(s) in rendered}
    routed = _route(going_on, catalogue, config, client, log, phase, reports, None)
    for s, (agent, by_llm) in zip(going_on, routed, strict=True):
        how = "LLM" if by_llm else "classic scorer"
        if agent != s.agent:
            s.switches += 1
            rec.say(
                s,
                turn,
                "recommender",
                "user",
                "switch",
                f"switches the user from {s.agent} to {agent} ({catalogue.card(agent).name})"
                f" [{how}; profile {s.profile.text()}]",
            )
            s.agent = agent
        s.instruction = instruction_for(s.profile)
        sent = [
            key
            for key, value in (("genres", s.instruction.genres), ("era", s.instruction.era))
            if value
        ]
        rec.say(
            s,
            turn,
            "recommender",
            s.agent,
            "instruction",
            s.instruction.text() or "(nothing known yet)",
            sent,
        )
        for key in sent:
            value = s.instruction.genres if key == "genres" else s.instruction.era
            rec.expose(
                s,
                turn,
                "recommender->agent",
                key,
                True,
                list(value) if isinstance(value, tuple) else value,
                "instruction",
            )


def _finish(
    sessions: Sequence[_Session], catalogue: Catalogue, config: Rec4AConfig, rec: _Recorder
) -> SessionRun:
    rows = []
    for s in sessions:
        u = s.user
        jac, era_ok = profile_match(s.profile, u)
        share = preference_share(
            s.items, u.favourite_genres, u.era, catalogue.genres, catalogue.years, config.k
        )
        flags = [t["satisfied"] for t in rec.turns if t[USER] == u.user_id]
        rows.append(
            {
                USER: u.user_id,
                "stage": s.stage,
                "mode": config.agent_mode,
                "recommender": config.recommender,
                "message_mode": config.message_mode,
                "first_agent": s.first_agent,
                "final_agent": s.agent,
                "n_turns": s.turns,
                "items": s.items,
                "sources": s.sources,
                "hit": hit_at_k(s.items, u.targets, config.k),
                "pref_share": share,
                "pref_satisfied": float(share >= config.satisfy_share),
                "user_satisfied": float(s.satisfied_turn is not None),
                "turns_needed": turns_needed(flags, config.max_turns),
                "profile_liked": s.profile.liked,
                "profile_era": s.profile.era,
                "profile_jaccard": jac,
                "era_match": era_ok,
                "reports_sent": s.reports_sent,
                "reports_rejected": s.reports_rejected,
                "switches": s.switches,
                "agent_failures": s.agent_failures,
                "user_failures": s.user_failures,
                "router_failures": s.router_failures,
                "report_failures": s.report_failures,
            }
        )
    exposure_columns = [
        USER,
        "stage",
        "turn",
        "boundary",
        "field",
        "group",
        "crossed",
        "consented",
        "sensitive",
        "channel",
        "value",
    ]
    message_columns = [USER, "stage", "turn", "sender", "receiver", "kind", "content", "fields"]
    return SessionRun(
        sessions=pd.DataFrame(rows),
        turns=pd.DataFrame(rec.turns),
        messages=pd.DataFrame(rec.messages, columns=message_columns),
        exposure=pd.DataFrame(rec.exposure, columns=exposure_columns),
    )


def run_stages(
    users: Sequence[SimUser],
    catalogue: Catalogue,
    config: Rec4AConfig,
    stages: Sequence[int] = STAGES,
    client: LLMClient | None = None,
    log: RunLog | None = None,
) -> SessionRun:
    """Run the same users through each stage's protocol (``config.stage`` is overridden).

    Taught in: notebook 05, section 3 "The three stages, on the same users".
    """
    log = log if log is not None else RunLog()
    runs = [
        run_sessions(users, catalogue, dataclasses.replace(config, stage=stage), client, log)
        for stage in stages
    ]
    return SessionRun.concat(runs)
