"""The authors' Agent4Rec running logs, split into the calls their agents made.

Why: every prompt the released gpt-3.5 run sent and every raw reply it got is in
``running_logs/<agent>.txt``; read back as calls they let us check our reply parsers and
our prompts against the authors' (:mod:`.fidelity`). The log has no separator between a
prompt and its reply, so the reader uses the templates of :mod:`.released_prompts` (read
from the same release): a call starts where a prompt's fixed first words start a line, the
prompt is the template matched in full (system, a blank line, user), and the reply is what
follows up to the next call or page banner. A stretch of log that matches no template is
kept as a call of kind ``unmatched``, never dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from recagents.data import releases
from recagents.papers.agent4rec.recorded import RUNS, behaviour_paths, load_official_pickle
from recagents.papers.agent4rec.released_prompts import (
    RELEASE,
    ReleasedPrompts,
    Template,
    released_prompts,
)

Run = Literal["lightgcn", "mf"]
#: The call kinds a running log holds (reflections are not written to it: the authors'
#: memory module sends them without logging), plus ``unmatched`` log text.
LOGGED_KINDS = ("page", "exit", "interview")


@dataclass(frozen=True)
class LoggedCall:
    """One model call read from a running log.

    Attributes:
        agent: The agent's id (as text).
        page: The page it belongs to (the interview: the last page browsed; 0 before any).
        kind: ``page``, ``exit``, ``interview`` or ``unmatched`` (log text no template fits).
        system: The system message.
        user: The user message.
        reply: The raw reply (for ``unmatched``: the whole stretch of log).
        slots: The template's slot values in this call (e.g. the memories, the page's items).
    """

    agent: str
    page: int
    kind: str
    system: str
    user: str
    reply: str
    slots: Mapping[str, str] = field(default_factory=dict)


def _line_pattern(template: Template) -> str:
    """A log line's pattern without the newline the authors' code writes before it."""
    return template.pattern().removeprefix(re.escape("\n")).removeprefix("\n")


@dataclass(frozen=True)
class _Grammar:
    """The compiled patterns of one release's running logs."""

    anchor: re.Pattern[str]
    banner: re.Pattern[str]
    calls: dict[str, tuple[re.Pattern[str], list[str]]]


def _grammar(prompts: ReleasedPrompts) -> _Grammar:
    heads = {system.head for kind, (system, _) in prompts.chats.items()
             if kind in LOGGED_KINDS and system is not None}  # fmt: skip
    banner = _line_pattern(prompts.log_lines["page_banner"])
    anchor = re.compile("^(?:" + "|".join([*map(re.escape, sorted(heads)), banner]) + ")", re.M)
    calls = {}
    for kind in LOGGED_KINDS:
        system, user = prompts.chats[kind]
        assert system is not None
        system_pattern = system.pattern()
        user_pattern = re.sub(r"\(\?P<s(\d+)>", lambda m: f"(?P<u{m.group(1)}>", user.pattern())
        whole = f"(?P<system>{system_pattern})\n\n(?P<user>{user_pattern})\n\n(?P<reply>.*)"
        names = [f"s{k}" for k in range(1, len(system.slot_order()) + 1)]
        names += [f"u{k}" for k in range(1, len(user.slot_order()) + 1)]
        calls[kind] = (re.compile(whole, re.S), [*system.slot_order(), *user.slot_order()])
        calls[kind] = (
            calls[kind][0],
            [f"{g}={n}" for g, n in zip(names, calls[kind][1], strict=True)],
        )
    return _Grammar(anchor, re.compile(banner), calls)


def _slots(match: re.Match[str], names: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in names:
        group, name = entry.split("=", 1)
        value = match.group(group)
        if value is not None:
            out.setdefault(name, value)
    return out


def read_running_log(
    text: str, agent: str, prompts: ReleasedPrompts | None = None
) -> list[LoggedCall]:
    """Split one agent's running log into its calls, in order.

    Args:
        text: The log's text.
        agent: The agent's id.
        prompts: The templates (default: :func:`~.released_prompts.released_prompts`).

    Returns:
        One :class:`LoggedCall` per call; text before the first call other than the start
        line and the page banners, and any stretch no template matches, is a call of kind
        ``unmatched``.
    """
    prompts = prompts or released_prompts()
    grammar = _grammar_for(prompts)
    starts = [m.start() for m in grammar.anchor.finditer(text)]
    start_line = re.compile(_line_pattern(prompts.log_lines["start"]) + r"\Z")
    calls: list[LoggedCall] = []
    lead = text[: starts[0] if starts else len(text)].strip("\n")
    if lead and not start_line.match(lead):
        calls.append(LoggedCall(agent, 0, "unmatched", "", "", lead))
    page = 0
    for begin, end in zip(starts, [*starts[1:], len(text)], strict=True):
        segment = text[begin:end]
        banner = grammar.banner.match(segment)
        if banner:
            page = int(banner.group("s1"))
            continue
        for kind, (pattern, names) in grammar.calls.items():
            found = pattern.fullmatch(segment)
            if found:
                calls.append(LoggedCall(
                    agent, page, kind, found["system"], found["user"],
                    found["reply"].strip("\n"), _slots(found, names),
                ))  # fmt: skip
                break
        else:
            calls.append(LoggedCall(agent, page, "unmatched", "", "", segment.strip("\n")))
    return calls


_GRAMMARS: dict[int, _Grammar] = {}


def _grammar_for(prompts: ReleasedPrompts) -> _Grammar:
    """The compiled grammar of ``prompts`` (compiled once per templates object)."""
    key = id(prompts)
    if key not in _GRAMMARS:
        _GRAMMARS[key] = _grammar(prompts)
    return _GRAMMARS[key]


def _agents(run: Run, agents: Sequence[str] | None) -> list[str]:
    """``agents`` as ids, or every agent of the run (:func:`.recorded.behaviour_paths`)."""
    every = behaviour_paths(run)
    return [str(a) for a in agents] if agents is not None else list(every)


def read_run_logs(run: Run, agents: Sequence[str] | None = None) -> list[LoggedCall]:
    """Every call of the released ``run`` (``"lightgcn"``: 1,000 agents, ``"mf"``: 100).

    Args:
        run: Which released run.
        agents: Agent ids to read (default: all of the run).
    """
    users = _agents(run, agents)
    folder = RUNS[run][1]
    paths = [f"{folder}/running_logs/{a}.txt" for a in users]
    root = releases.fetch(RELEASE, paths, progress=False)
    prompts = released_prompts()
    calls: list[LoggedCall] = []
    for user, path in zip(users, paths, strict=True):
        calls += read_running_log((root / path).read_text(encoding="utf-8"), user, prompts)
    return calls


def read_run_behaviour(run: Run, agents: Sequence[str] | None = None) -> dict[str, Any]:
    """The authors' parsed decisions of ``run``: agent -> its ``behavior/<agent>.pkl``.

    Each pickle maps page -> that page's record (``recommended_id``, ``watch_id``,
    ``rating``, ``align_id``, ``like_id``, ...) and ``"interview"`` -> the interview,
    read with the restricted unpickler (:func:`.recorded.load_official_pickle`).
    """
    users = _agents(run, agents)
    folder = RUNS[run][1]
    paths = [f"{folder}/behavior/{a}.pkl" for a in users]
    root = releases.fetch(RELEASE, paths, progress=False)
    return {
        u: load_official_pickle(root / p, plain=True) for u, p in zip(users, paths, strict=True)
    }


def calls_frame(calls: Sequence[LoggedCall]) -> pd.DataFrame:
    """One row per call: ``agent, page, kind, system_chars, user_chars, reply_chars``."""
    return pd.DataFrame(
        [(c.agent, c.page, c.kind, len(c.system), len(c.user), len(c.reply)) for c in calls],
        columns=["agent", "page", "kind", "system_chars", "user_chars", "reply_chars"],
    )


def log_census(calls: Sequence[LoggedCall], behaviour: Mapping[str, Any]) -> pd.DataFrame:
    """Calls per kind against what the pickles imply, with every mismatch counted.

    Per agent the pickle's pages ``P`` imply ``P`` page calls, ``P`` exit calls and one
    interview. Returns one row per kind: ``calls`` (in the logs), ``expected`` (from the
    pickles), ``agents_off`` (agents whose count differs) and ``unmatched`` text stretches.
    """
    frame = calls_frame(calls)
    counts = frame.groupby(["agent", "kind"]).size().unstack(fill_value=0)
    for kind in (*LOGGED_KINDS, "unmatched"):
        if kind not in counts:
            counts[kind] = 0
    pages = pd.Series({a: sum(isinstance(k, int) for k in b) for a, b in behaviour.items()})
    counts = counts.reindex(pages.index, fill_value=0)
    expected = {"page": pages, "exit": pages, "interview": pages * 0 + 1}
    rows = [
        {"kind": kind, "calls": int(counts[kind].sum()), "expected": int(expected[kind].sum()),
         "agents_off": int((counts[kind] != expected[kind]).sum())}
        for kind in LOGGED_KINDS
    ]  # fmt: skip
    rows.append({"kind": "unmatched", "calls": int(counts["unmatched"].sum()), "expected": 0,
                 "agents_off": int((counts["unmatched"] > 0).sum())})  # fmt: skip
    return pd.DataFrame(rows)
