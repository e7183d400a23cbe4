"""InteRecAgent's prompts: pure builders, reply schemas and parsers for every LLM role.

Planner (plan-first), step-by-step (ReAct) agent, critic, summariser, profile extractor and
the LLM-without-tools baseline each have a ``*_messages`` builder, a ``*_schema`` for
constrained decoding and a ``parse_*_reply``; :func:`merge_profile` adds the remembered
likes and dislikes to a plan's rank steps. Nothing here calls a model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from recagents.papers.interecagent.catalogue import ItemTable
from recagents.papers.interecagent.config import TOOL_DESCRIPTIONS, TOOL_NAMES, InteRecConfig
from recagents.papers.interecagent.demos import Demo
from recagents.papers.interecagent.plans import PLAN_SCHEMA, validate_plan
from recagents.papers.interecagent.sqllimits import ToolError
from recagents.papers.interecagent.toolbox import parse_rank_input


def _article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"


def _tool_lines(names: Sequence[str] = TOOL_NAMES) -> str:
    return "\n".join(f"- {name}: {TOOL_DESCRIPTIONS[name]}" for name in names)


def _dialogue_text(
    dialogue: Sequence[tuple[str, str]], turns: int, chars: int, user: str = "User"
) -> str:
    """The last ``turns`` turns (two messages each) as ``User: ... / Assistant: ...`` lines."""
    if turns <= 0 or not dialogue:
        return "(nothing yet; this is the first message)"
    kept = list(dialogue)[-2 * turns :]
    lines = []
    for speaker, text in kept:
        who = user if speaker == "user" else "Assistant"
        text = " ".join(str(text).split())
        lines.append(f"{who}: {text[:chars]}{'...' if len(text) > chars else ''}")
    return "\n".join(lines)


def _bus_rules(domain: str, persistent: bool) -> str:
    start = (
        f"At the start of a turn the candidates are the ones the previous turn ended with "
        f"(all {domain}s at the very start); candidate_store or filters change them."
        if persistent
        else f"At the start of every turn the candidates are all {domain}s of the table."
    )
    return "\n".join(
        [
            "Rules for plans:",
            f"- {start}",
            "- The tools pass the candidates to each other; you never see the list. Refer to "
            f"{domain}s by title, never by id.",
            "- candidate_store, if used, comes first; hard_filter comes before soft_filter.",
            f"- To recommend {domain}s, end the plan with rank and then map_titles.",
            "- lookup only answers questions and never changes the candidates.",
            "- Only lookup and map_titles show anything to the user.",
        ]
    )


def _planner_intro(table_description: str, config: InteRecConfig) -> list[str]:
    """Role, request types, conditions, table, tools and bus rules (stable; prompt-cache first)."""
    d = config.domain
    return [
        f"You are {_article(d)} {d} recommendation assistant chatting with a user. You can "
        f"answer yourself, or use tools that search a {d} table.",
        "First decide what the user's message is:",
        "1. Chit-chat (greetings, thanks, small talk): answer directly and kindly.",
        f"2. A question about particular {d}s (year, genres, popularity): use lookup.",
        f"3. A vague wish with nothing to search on: answer with one question about what they "
        f"like (a genre, an era, a {d} they enjoyed).",
        f"4. A request for {d}s with conditions: use tools to select and order candidates.",
        f"Conditions are hard or soft. Hard conditions are facts in the table (genre, release "
        f"year, popularity, rating): use hard_filter with SQL. Soft conditions compare with "
        f'{d}s the user names ("like Fargo"): use soft_filter with those titles. What the user '
        f"asks for now matters more than what they liked before: put titles they liked in "
        f"rank's prefer list and titles they turned down in its unwanted list.",
        "",
        table_description,
        "",
        "Tools:",
        _tool_lines(),
        "",
        _bus_rules(d, config.persistent_bus),
    ]


def _demo_lines(demos: Sequence[Demo], heading: str) -> list[str]:
    if not demos:
        return []
    lines = [heading]
    for demo in demos:
        lines.append(f"Request: {demo.request}")
        lines.append(f"Reply: {json.dumps(demo.reply, ensure_ascii=False)}")
    lines.append("")
    return lines


def _so_far(
    dialogue: Sequence[tuple[str, str]],
    config: InteRecConfig,
    heading: str = "Conversation so far:",
) -> list[str]:
    """The dialogue block a prompt's user message starts with (and a blank line)."""
    return [heading, _dialogue_text(dialogue, config.history_turns, config.message_chars), ""]


def _chat(system: str, user_lines: Sequence[str]) -> list[dict[str, str]]:
    """A system message and a user message of ``user_lines``, one per line."""
    user = "\n".join(user_lines)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _context_lines(
    request: str,
    dialogue: Sequence[tuple[str, str]],
    advice: str | None,
    notes: str | None,
    config: InteRecConfig,
    profile: str | None = None,
) -> list[str]:
    lines = _so_far(dialogue, config)
    if profile:
        lines += [profile, ""]
    if advice:
        lines += [f"A reviewer read your previous attempt at this message and advises: {advice}"]
        lines.append("")
    if notes:
        lines += [notes, ""]
    lines.append(f"The user's new message: {request}")
    return lines


def planner_schema(config: InteRecConfig | None = None) -> dict[str, Any]:
    """The planner's reply: ``{"kind": "answer" | "plan", "answer": str, "plan": [steps]}``.

    The steps are those of :data:`~recagents.papers.interecagent.plans.PLAN_SCHEMA` (known tools
    only); an answer leaves ``plan`` empty and a plan leaves ``answer`` empty.
    """
    config = config or InteRecConfig()
    return {
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": ["answer", "plan"]},
            "answer": {"type": "string", "maxLength": config.answer_chars},
            "plan": {
                "type": "array",
                "minItems": 0,
                "maxItems": PLAN_SCHEMA["maxItems"],
                "items": PLAN_SCHEMA["items"],
            },
        },
        "required": ["kind", "answer", "plan"],
        "additionalProperties": False,
    }


def planner_messages(
    request: str,
    table_description: str,
    config: InteRecConfig,
    demos: Sequence[Demo] = (),
    dialogue: Sequence[tuple[str, str]] = (),
    advice: str | None = None,
    notes: str | None = None,
    profile: str | None = None,
) -> list[dict[str, str]]:
    """The plan-first planner's prompt for one user message.

    The system message (role, request types, hard vs soft conditions, the table, the tools,
    the bus rules and the reply format) is the same for every request, so a local server
    reuses its KV cache; the demonstrations, the dialogue, the advice and the message follow.

    Args:
        request: The user's new message.
        table_description: :meth:`ItemTable.describe`.
        config: Domain, bus mode and memory size.
        demos: Demonstrations (see :func:`select_demos`).
        dialogue: Earlier messages as ``(speaker, text)``, speaker ``"user"`` or ``"agent"``.
        advice: The critic's advice on the previous attempt at this message, if any.
        notes: Extra instructions for this request (e.g. the one-turn ranking task).
        profile: The remembered likes and dislikes (:meth:`AgentSession.profile_text`).
    """
    system = _planner_intro(table_description, config) + [
        "",
        'Reply with one JSON object. To answer directly: {"kind": "answer", "answer": '
        '"<your message to the user>", "plan": []}. To use tools: {"kind": "plan", "answer": '
        '"", "plan": [{"tool_name": "<tool>", "input": <its input>}, ...]}.',
    ]
    user = _demo_lines(demos, "Examples of messages and good replies:")
    user += _context_lines(request, dialogue, advice, notes, config, profile)
    user.append("Your reply (JSON):")
    return _chat("\n".join(system), user)


@dataclass(frozen=True)
class PlannerReply:
    """A planner reply, read and checked.

    Attributes:
        kind: ``"answer"``, ``"plan"`` or ``"failed"``.
        answer: The direct answer (kind ``answer``).
        plan: The validated steps as ``{tool_name, input}`` dicts (kind ``plan``).
        problems: Why the reply failed, one line each (kind ``failed``).
    """

    kind: Literal["answer", "plan", "failed"]
    answer: str = ""
    plan: tuple[dict[str, Any], ...] = ()
    problems: tuple[str, ...] = ()


def parse_planner_reply(data: Any, table: ItemTable) -> PlannerReply:
    """Read a planner reply: a direct answer, a valid plan, or a failure with its problems.

    A plan is checked with :func:`~recagents.papers.interecagent.plans.validate_plan` (known tools,
    inputs, read-only SQL that prepares on ``table``, bus order); any problem makes the whole
    reply a failure, as a failing plan recommends nothing in the paper.
    """
    if not isinstance(data, dict):
        return PlannerReply("failed", problems=("the reply is not a JSON object",))
    kind = data.get("kind")
    if kind == "answer":
        answer = data.get("answer")
        if not isinstance(answer, str) or not answer.strip():
            return PlannerReply("failed", problems=('kind is "answer" but the answer is empty',))
        return PlannerReply("answer", answer=answer.strip())
    if kind == "plan":
        plan = data.get("plan")
        problems = validate_plan(plan, table)
        if problems:
            return PlannerReply("failed", problems=tuple(problems))
        steps = tuple({"tool_name": s["tool_name"], "input": s["input"]} for s in plan or ())
        return PlannerReply("plan", plan=steps)
    return PlannerReply("failed", problems=(f'kind must be "answer" or "plan", got {kind!r}',))


def critic_schema(config: InteRecConfig | None = None) -> dict[str, Any]:
    """The critic's reply: ``{"verdict": "yes" | "no", "advice": str}``."""
    config = config or InteRecConfig()
    return {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": ["yes", "no"]},
            "advice": {"type": "string", "maxLength": config.advice_chars},
        },
        "required": ["verdict", "advice"],
        "additionalProperties": False,
    }


def critic_messages(
    request: str,
    track_text: str,
    reply: str,
    dialogue: Sequence[tuple[str, str]] = (),
    config: InteRecConfig | None = None,
    profile: str | None = None,
) -> list[dict[str, str]]:
    """The critic's prompt: did the agent's tool use and reply serve the user's message?

    Following the paper's critic, it sees the tools, the dialogue, the request, the tool
    execution track and the reply, and checks the tool inputs (too strict or too loose SQL,
    wrong seed titles, wrong ``prefer`` / ``unwanted``), missing or needless tools, and
    whether enough matching items came back. With profile memory it also sees the
    remembered likes and dislikes.
    """
    config = config or InteRecConfig()
    d = config.domain
    system = "\n".join(
        [
            f"You review the work of {_article(d)} {d} recommendation assistant. It answers a "
            f"user either directly or by running tools over a {d} table. Its tools:",
            _tool_lines(),
            "",
            "Check:",
            f"- the kind of reply: a direct answer suits chit-chat and vague wishes; questions "
            f"about {d}s and requests with conditions need tools;",
            "- the tool inputs: SQL that is too strict or too loose, wrong seed titles for "
            "soft_filter, wrong prefer or unwanted titles for rank;",
            "- a tool that is missing or not needed;",
            f"- whether enough {d}s that match the request came back.",
            'Reply with JSON: "verdict" is "yes" if the reply serves the user well, otherwise '
            '"no"; "advice" tells the assistant in one or two sentences what to change ("" '
            'when the verdict is "yes").',
        ]
    )
    return _chat(
        system,
        [
            *_so_far(dialogue, config, "Conversation before this message:"),
            *([profile, ""] if profile else []),
            f"The user's message: {request}",
            "",
            track_text,
            "",
            f"The assistant's reply: {reply}",
            "Your review (JSON):",
        ],
    )


def parse_critic_reply(data: Any) -> tuple[bool | None, str]:
    """``(accepted, advice)``; ``accepted`` is ``None`` unless the verdict is yes or no."""
    if not isinstance(data, dict):
        return None, ""
    verdict = data.get("verdict")
    advice = data.get("advice")
    advice = " ".join(advice.split()) if isinstance(advice, str) else ""
    if not isinstance(verdict, str) or verdict.strip().lower() not in ("yes", "no"):
        return None, advice
    return verdict.strip().lower() == "yes", advice


def summariser_schema(config: InteRecConfig | None = None) -> dict[str, Any]:
    """The summariser's reply: ``{"reply": str}``."""
    config = config or InteRecConfig()
    return {
        "type": "object",
        "properties": {"reply": {"type": "string", "maxLength": config.answer_chars}},
        "required": ["reply"],
        "additionalProperties": False,
    }


def summariser_messages(
    request: str,
    track_text: str,
    dialogue: Sequence[tuple[str, str]] = (),
    config: InteRecConfig | None = None,
) -> list[dict[str, str]]:
    """The summariser's prompt: write the user-facing reply from the execution track."""
    config = config or InteRecConfig()
    d = config.domain
    system = (
        f"You are a friendly {d} recommendation assistant. Write your reply to the user from "
        f"the results of your search below. Name every recommended {d} exactly as listed and "
        f"answer any question with the facts found. Never mention tools, SQL, candidates or "
        f'plans. At most 80 words. Reply with JSON: {{"reply": "<your message>"}}.'
    )
    return _chat(
        system,
        [
            *_so_far(dialogue, config),
            f"The user's message: {request}",
            "",
            "What your search found:",
            track_text,
            "Your reply (JSON):",
        ],
    )


def react_schema(config: InteRecConfig | None = None) -> dict[str, Any]:
    """One ReAct step: ``{"thought": str, "action": tool | "finish", "input": ...}``."""
    config = config or InteRecConfig()
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string", "maxLength": 300},
            "action": {"type": "string", "enum": [*TOOL_NAMES, "finish"]},
            "input": PLAN_SCHEMA["items"]["properties"]["input"],
        },
        "required": ["thought", "action", "input"],
        "additionalProperties": False,
    }


def react_messages(
    request: str,
    table_description: str,
    config: InteRecConfig,
    steps: Sequence[tuple[dict[str, Any], str]] = (),
    demos: Sequence[Demo] = (),
    dialogue: Sequence[tuple[str, str]] = (),
    advice: str | None = None,
    notes: str | None = None,
    profile: str | None = None,
) -> list[dict[str, str]]:
    """The step-by-step agent's prompt: choose the next tool (or finish) after ``steps``.

    Args:
        request: The user's message.
        table_description: :meth:`ItemTable.describe`.
        config: Domain, bus mode, memory size and the iteration limit.
        steps: The steps taken so far: ``({"tool_name", "input"}, observation)``.
        demos: Demonstrations, shown as complete plans.
        dialogue: Earlier messages as ``(speaker, text)``.
        advice: The critic's advice on the previous attempt, if any.
        notes: Extra instructions for this request.
        profile: The remembered likes and dislikes (:meth:`AgentSession.profile_text`).
    """
    system = _planner_intro(table_description, config) + [
        "",
        f"Work one step at a time: choose one tool and its input, read what it returns, then "
        f"choose the next. You have at most {config.react_max_iterations} steps. map_titles "
        f"ends the turn. Reply with one JSON object: "
        f'{{"thought": "<why>", "action": "<tool>", "input": <its input>}}, or '
        f'{{"thought": "<why>", "action": "finish", "input": "<your message to the user>"}} '
        f"to answer without tools.",
    ]
    user = _demo_lines(demos, "Examples of messages and the steps that serve them:")
    user += _context_lines(request, dialogue, advice, notes, config, profile)
    user.append("")
    user.append("Steps so far:")
    if not steps:
        user.append("(none yet)")
    for number, (step, observation) in enumerate(steps, 1):
        shown = json.dumps(step["input"], ensure_ascii=False)
        user.append(f"{number}. {step['tool_name']}({shown}) -> {observation}")
    user.append("Your next step (JSON):")
    return _chat("\n".join(system), user)


def parse_react_reply(data: Any) -> tuple[str | None, Any, str]:
    """``(action, input, thought)`` of a ReAct step; ``action`` is ``None`` when unusable."""
    if not isinstance(data, dict):
        return None, None, ""
    action = data.get("action")
    thought = data.get("thought")
    thought = thought if isinstance(thought, str) else ""
    if action not in (*TOOL_NAMES, "finish") or "input" not in data:
        return None, None, thought
    return action, data["input"], thought


def llm_only_schema(n: int = 5) -> dict[str, Any]:
    """The LLM-only baseline's reply: exactly ``n`` titles."""
    return {
        "type": "object",
        "properties": {
            "titles": {
                "type": "array",
                "items": {"type": "string", "maxLength": 120},
                "minItems": n,
                "maxItems": n,
            }
        },
        "required": ["titles"],
        "additionalProperties": False,
    }


def llm_only_messages(
    request: str,
    dialogue: Sequence[tuple[str, str]] = (),
    config: InteRecConfig | None = None,
    n: int = 5,
) -> list[dict[str, str]]:
    """The "LLM without tools" prompt: recommend ``n`` titles by name from the dialogue alone."""
    config = config or InteRecConfig()
    d = config.domain
    system = (
        f"You are {_article(d)} {d} recommendation assistant chatting with a user. Recommend "
        f"exactly {n} real {d}s that fit what the user wants, best first. Write each title as "
        f'it is usually written, with the year in brackets. Reply with JSON: {{"titles": '
        f'["<title (year)>", ...]}}.'
    )
    return _chat(
        system,
        [*_so_far(dialogue, config), f"The user's new message: {request}", "Your reply (JSON):"],
    )


def parse_llm_only_reply(data: Any) -> list[str] | None:
    """The titles of an LLM-only reply (empty strings dropped), or ``None`` if unusable."""
    if not isinstance(data, dict) or not isinstance(data.get("titles"), list):
        return None
    return [t.strip() for t in data["titles"] if isinstance(t, str) and t.strip()]


def profile_schema(config: InteRecConfig | None = None) -> dict[str, Any]:
    """The profile extractor's reply: ``{"likes": [titles], "dislikes": [titles]}``."""
    config = config or InteRecConfig()
    titles = {
        "type": "array",
        "items": {"type": "string", "maxLength": 120},
        "maxItems": config.profile_titles,
    }
    return {
        "type": "object",
        "properties": {"likes": titles, "dislikes": titles},
        "required": ["likes", "dislikes"],
        "additionalProperties": False,
    }


def profile_messages(
    request: str,
    dialogue: Sequence[tuple[str, str]] = (),
    profile: str | None = None,
    config: InteRecConfig | None = None,
) -> list[dict[str, str]]:
    """The profile extractor's prompt: which titles does the newest message like or reject?

    Following the paper's optional user-profile memory, an LLM reads the dialogue and the
    new message and lists the items the user states a liking or a dislike for; only titles
    the user names count (genres and the assistant's suggestions do not).
    """
    config = config or InteRecConfig()
    d = config.domain
    system = (
        f"You keep notes on the taste of a user of {_article(d)} {d} recommendation "
        f"assistant. From the user's newest message, list the {d}s the user says they like, "
        f"loved or enjoyed, and the {d}s the user says they dislike or do not want. Only "
        f"titles the user names in that message count: no genres, and not the assistant's "
        f"suggestions unless the user accepts or rejects them by name. Leave a list empty "
        f'when there is nothing for it. Reply with JSON: {{"likes": ["<title>", ...], '
        f'"dislikes": ["<title>", ...]}}.'
    )
    user = _so_far(dialogue, config)
    if profile:
        user += [profile, ""]
    user += [f"The user's newest message: {request}", "Your notes (JSON):"]
    return _chat(system, user)


def parse_profile_reply(data: Any) -> tuple[list[str], list[str]] | None:
    """``(likes, dislikes)`` titles of an extraction reply, or ``None`` if unusable."""
    if not isinstance(data, dict):
        return None
    lists = []
    for key in ("likes", "dislikes"):
        value = data.get(key)
        if not isinstance(value, list):
            return None
        lists.append([t.strip() for t in value if isinstance(t, str) and t.strip()])
    return lists[0], lists[1]


def merge_profile(
    plan: Sequence[dict[str, Any]],
    likes: Sequence[str],
    dislikes: Sequence[str],
) -> list[dict[str, Any]]:
    """The plan with the remembered titles added to every rank step's prefer / unwanted.

    As in the paper's profile memory, what the user said earlier joins what the planner
    wrote for this turn (the planner's titles first, no title twice); a rank input that
    cannot be read is left as it is, so the executor reports it. Steps other than rank are
    unchanged.

    Args:
        plan: Validated steps ``{tool_name, input}``.
        likes: Titles the user said they like (go to ``prefer``).
        dislikes: Titles the user said they do not want (go to ``unwanted``).
    """
    merged = []
    for step in plan:
        step = dict(step)
        if step.get("tool_name") == "rank" and (likes or dislikes):
            try:
                value = parse_rank_input(step.get("input"))
            except ToolError:
                merged.append(step)
                continue
            for key, extra in (("prefer", likes), ("unwanted", dislikes)):
                seen = {t.casefold() for t in value[key]}
                value[key] = list(value[key]) + [t for t in extra if t.casefold() not in seen]
            step["input"] = value
        merged.append(step)
    return merged
