"""InteRecAgent's language-model side: planner, critic, step-by-step agent, summariser, memory.

Huang et al., *Recommender AI Agent: Integrating Large Language Models for Interactive
Recommendations* (arXiv 2308.16505). The LLM is the "brain" and the recommender components of
:mod:`recagents.interecagent.tools` are its tools. One agent turn, as the paper's code runs it:

1. *Planner* (T=0): reads the role, the request types, the item table's description, the
   tools, the candidate-bus rules, a few demonstrations, the dialogue so far, any reviewer's
   advice and the user's message; replies with a direct answer or a whole tool plan
   ("plan-first"). Our reply is one JSON object (:func:`planner_schema`) so that a small model
   can be constrained; an invalid plan is a counted *plan failure*, with its problems kept.
2. *Executor* (no LLM): :func:`~recagents.interecagent.tools.execute_plan` runs the plan on
   the session's candidate bus.
3. *Critic* (reflection, T=0): judges the request, the execution track and the reply; on
   "no" its advice goes back to the planner, at most ``max_reflections`` times.
4. *Summariser* (optional, T=1.0): writes the user-facing reply from the track. Off by
   default, as in the paper's simulator evaluation, where the executor's output is the reply.

``plan_mode="react"`` replaces 1-2 by a step-by-step loop (one tool per LLM call, at most five
calls), the paper's "w/o plan-first" ablation. :func:`run_turns` runs one turn for many
sessions at once, stage by stage (all planners in one :meth:`LLMClient.map`, then execution,
then all critics, then the re-plans...), and :func:`llm_only_turns` is the "LLM without tools"
baseline that names five titles and grounds them to ids.

Deviations from the released code, each deliberate:

- Replies are JSON under a schema instead of ``Final Answer:`` / ``Action: ToolExecutor`` text.
- A plan that fails validation (or stops at a tool error) is fed back to the planner with the
  validator's messages as advice (no critic call; it counts as a reflection), when
  ``replan_on_failure`` and reflection are on. The paper's critic sees such failures only
  through the track.
- The critic judges the executor's reply, before any summariser rewrites it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from recagents.interecagent.tools import (
    PLAN_SCHEMA,
    TOOL_DESCRIPTIONS,
    TOOL_NAMES,
    CandidateBus,
    ExecutionTrack,
    ItemTable,
    PlanStep,
    StepRecord,
    ToolContext,
    ToolError,
    execute_plan,
    execute_step,
    parse_rank_input,
    validate_plan,
)
from recagents.llm.client import ChatRequest, ChatResult, LLMClient
from recagents.llm.runlog import RunLog, ask

__all__ = [
    "APOLOGY",
    "DEMOS",
    "PLAN_MODES",
    "DEMO_MODES",
    "AgentSession",
    "Attempt",
    "Demo",
    "InteRecConfig",
    "PlannerReply",
    "TurnResult",
    "critic_messages",
    "critic_schema",
    "llm_only_messages",
    "llm_only_schema",
    "llm_only_turns",
    "ProfileUpdate",
    "merge_profile",
    "parse_critic_reply",
    "parse_profile_reply",
    "parse_llm_only_reply",
    "parse_planner_reply",
    "parse_react_reply",
    "planner_messages",
    "planner_schema",
    "profile_messages",
    "profile_schema",
    "react_messages",
    "react_schema",
    "run_turns",
    "select_demos",
    "summariser_messages",
    "summariser_schema",
]

#: Ways to plan a turn: the whole plan at once, or one tool per call.
PLAN_MODES = ("plan_first", "react")
#: How demonstrations are chosen.
DEMO_MODES = ("dynamic", "fixed", "zero")
#: What the agent says when its plan failed (``{domain}`` is filled in).
APOLOGY = (
    "Sorry, I could not work out how to find {domain}s for that. Could you say it another way?"
)


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class InteRecConfig:
    """Every setting of the InteRecAgent agent; the defaults are the paper's.

    Attributes:
        domain: The item noun used in prompts ("movie").
        plan_mode: ``"plan_first"`` (one LLM call writes the whole plan; the paper's agent)
            or ``"react"`` (one tool per call, at most ``react_max_iterations`` calls; the
            "w/o plan-first" ablation).
        demo_mode: ``"dynamic"`` (the ``num_demos`` demonstrations nearest to the request by
            text embedding), ``"fixed"`` (the first ``num_demos``) or ``"zero"`` (none).
        num_demos: Demonstrations per prompt. The paper's text says 3; its released code
            uses 5 in the multi-turn evaluation (and 3 one-turn).
        reflection: Whether the critic reviews each turn (actor-critic reflection).
        max_reflections: Most re-plans per turn after the critic said "no" (paper: 3).
        replan_on_failure: Feed an invalid or failing plan's problems back to the planner as
            advice (counts as a reflection, needs ``reflection``); ``False`` replies with
            :data:`APOLOGY` at once.
        planner_temperature: Sampling temperature of the planner and the ReAct steps (0).
        summariser: Whether a summariser writes the reply (paper's app: on; its simulator
            evaluation: off, the executor's output is the reply).
        summariser_temperature: Summariser temperature (paper: 1.0).
        critic_temperature: Critic temperature (paper: 0).
        llm_only_temperature: Temperature of the "LLM without tools" baseline (paper: 0.8).
        persistent_bus: Keep the candidates between turns (the paper resets the bus to all
            items every turn, so "from the list above" only works if re-stored).
        map_n: Recommendations per turn when the plan does not say (paper: 5).
        react_max_iterations: Most LLM steps of a ReAct turn (paper: 5).
        history_turns: Most recent dialogue turns (a user message and the agent's reply each)
            shown to the planner, critic and summariser; the paper keeps the full dialogue,
            which has at most 5 turns in its evaluation.
        message_chars: Each remembered message is cut to this many characters.
        answer_chars: Longest direct answer / summary the schema allows.
        advice_chars: Longest critic advice (the paper's critic writes at most 128 tokens).
        planner_max_tokens: Most generated tokens of a planner reply.
        react_max_tokens: Most generated tokens of one ReAct step.
        critic_max_tokens: Most generated tokens of a critic reply.
        summariser_max_tokens: Most generated tokens of a summary.
        llm_only_max_tokens: Most generated tokens of the LLM-only baseline's reply.
        profile_memory: Keep a profile of the titles the user says they like and dislike
            (one LLM extraction call per turn, before the planner), show it to the planner
            and the critic, and merge it into every rank step's ``prefer`` / ``unwanted``
            (the paper's optional long-term memory; off in its released code).
        profile_titles: Most titles per list of one extraction reply.
        profile_max_tokens: Most generated tokens of one extraction reply.
        seed: Sampling seed sent with every request.
    """

    domain: str = "movie"
    plan_mode: Literal["plan_first", "react"] = "plan_first"
    demo_mode: Literal["dynamic", "fixed", "zero"] = "dynamic"
    num_demos: int = 3
    reflection: bool = True
    max_reflections: int = 3
    replan_on_failure: bool = True
    planner_temperature: float = 0.0
    summariser: bool = False
    summariser_temperature: float = 1.0
    critic_temperature: float = 0.0
    llm_only_temperature: float = 0.8
    persistent_bus: bool = False
    map_n: int = 5
    react_max_iterations: int = 5
    history_turns: int = 5
    message_chars: int = 500
    answer_chars: int = 600
    advice_chars: int = 400
    planner_max_tokens: int = 400
    react_max_tokens: int = 200
    critic_max_tokens: int = 200
    summariser_max_tokens: int = 200
    llm_only_max_tokens: int = 200
    profile_memory: bool = False
    profile_titles: int = 5
    profile_max_tokens: int = 120
    seed: int = 0

    def __post_init__(self) -> None:
        if self.plan_mode not in PLAN_MODES:
            raise ValueError(f"plan_mode must be one of {PLAN_MODES}, got {self.plan_mode!r}")
        if self.demo_mode not in DEMO_MODES:
            raise ValueError(f"demo_mode must be one of {DEMO_MODES}, got {self.demo_mode!r}")
        for name in ("num_demos", "max_reflections", "history_turns"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be non-negative, got {getattr(self, name)}")
        for name in (
            "map_n",
            "react_max_iterations",
            "message_chars",
            "answer_chars",
            "profile_titles",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")


# --------------------------------------------------------------------------- demonstrations


@dataclass(frozen=True)
class Demo:
    """One demonstration: a user request and the planner reply it should get.

    Attributes:
        request: What the user writes.
        reply: ``{"kind": "answer" | "plan", "answer": str, "plan": [steps]}``, exactly the
            shape of :func:`planner_schema`.
    """

    request: str
    reply: dict[str, Any]

    @property
    def is_plan(self) -> bool:
        """Whether the demonstration uses tools."""
        return self.reply["kind"] == "plan"


def _answer(text: str) -> dict[str, Any]:
    return {"kind": "answer", "answer": text, "plan": []}


def _plan(*steps: tuple[str, Any]) -> dict[str, Any]:
    return {"kind": "plan", "answer": "", "plan": [{"tool_name": t, "input": i} for t, i in steps]}


def _rank(schema: str = "popularity", prefer: Sequence[str] = (), unwanted: Sequence[str] = ()):
    return ("rank", {"schema": schema, "prefer": list(prefer), "unwanted": list(unwanted)})


#: Hand-written demonstrations (the project's own words): general ones first, then movie
#: requests covering every tool. Each plan is validated and run on ml-100k by the tests.
DEMOS: tuple[Demo, ...] = (
    Demo(
        "Hi! How are you doing today?",
        _answer("Hi, I'm great, thanks! What kind of movie would you like to watch?"),
    ),
    Demo(
        "I'm bored and want to watch something.",
        _answer(
            "Happy to help! What are you in the mood for: a genre, an era, or a movie you "
            "enjoyed lately that I could match?"
        ),
    ),
    Demo(
        "Thanks, that's all I needed.",
        _answer("You're welcome, enjoy the film! Come back whenever you want more ideas."),
    ),
    Demo(
        "When was Fargo released?",
        _plan(("lookup", "SELECT title, release_year FROM items WHERE title LIKE '%Fargo%'")),
    ),
    Demo(
        "What genres does Jurassic Park have?",
        _plan(("lookup", "SELECT title, tags FROM items WHERE title LIKE '%Jurassic Park%'")),
    ),
    Demo(
        "Can you suggest some comedies from the nineties?",
        _plan(
            (
                "hard_filter",
                "SELECT id FROM items WHERE tags LIKE '%Comedy%' "
                "AND release_year BETWEEN 1990 AND 1999",
            ),
            _rank("popularity"),
            ("map_titles", 5),
        ),
    ),
    Demo(
        "I loved Star Wars. Anything similar?",
        _plan(("soft_filter", "Star Wars"), _rank("similarity"), ("map_titles", 5)),
    ),
    Demo(
        "I want a thriller made after 1990, something like The Silence of the Lambs.",
        _plan(
            (
                "hard_filter",
                "SELECT id FROM items WHERE tags LIKE '%Thriller%' AND release_year > 1990",
            ),
            ("soft_filter", "The Silence of the Lambs"),
            _rank("similarity"),
            ("map_titles", 5),
        ),
    ),
    Demo(
        "I really enjoyed Toy Story and Babe. What should I watch next?",
        _plan(_rank("preference", prefer=["Toy Story", "Babe"]), ("map_titles", 5)),
    ),
    Demo(
        "Give me popular action movies, but not Die Hard, I've seen it.",
        _plan(
            ("hard_filter", "SELECT id FROM items WHERE tags LIKE '%Action%'"),
            _rank("popularity", unwanted=["Die Hard"]),
            ("map_titles", 5),
        ),
    ),
    Demo(
        "Which one of Heat, Casino and Braveheart should I watch tonight?",
        _plan(
            ("candidate_store", "Heat;;Casino;;Braveheart"),
            _rank("popularity"),
            ("map_titles", 1),
        ),
    ),
    Demo(
        "Show me the best rated dramas.",
        _plan(
            (
                "hard_filter",
                "SELECT id FROM items WHERE tags LIKE '%Drama%' AND avg_rating >= 4 "
                "ORDER BY avg_rating DESC",
            ),
            ("map_titles", 5),
        ),
    ),
    Demo(
        "How many horror movies do you have?",
        _plan(("lookup", "SELECT COUNT(*) AS horror_movies FROM items WHERE tags LIKE '%Horror%'")),
    ),
    Demo(
        "Something for my kids, like The Lion King.",
        _plan(
            ("hard_filter", "SELECT id FROM items WHERE tags LIKE '%Children%'"),
            ("soft_filter", "The Lion King"),
            _rank("similarity"),
            ("map_titles", 5),
        ),
    ),
    Demo(
        "I'd like an old classic from before 1960.",
        _plan(
            ("hard_filter", "SELECT id FROM items WHERE release_year < 1960"),
            _rank("popularity"),
            ("map_titles", 5),
        ),
    ),
    Demo(
        "Three science fiction films like Twelve Monkeys, please.",
        _plan(
            ("hard_filter", "SELECT id FROM items WHERE tags LIKE '%Sci-Fi%'"),
            ("soft_filter", "Twelve Monkeys"),
            _rank("similarity"),
            ("map_titles", 3),
        ),
    ),
    Demo(
        "I liked Pulp Fiction and Fargo; I'd like a crime film, not Casino though.",
        _plan(
            ("hard_filter", "SELECT id FROM items WHERE tags LIKE '%Crime%'"),
            _rank("preference", prefer=["Pulp Fiction", "Fargo"], unwanted=["Casino"]),
            ("map_titles", 5),
        ),
    ),
)


def select_demos(
    request: str,
    k: int,
    mode: Literal["dynamic", "fixed", "zero"] = "dynamic",
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
    demos: Sequence[Demo] = DEMOS,
) -> list[Demo]:
    """Pick the demonstrations shown to the planner for one request.

    Args:
        request: The user's message.
        k: How many.
        mode: ``dynamic``: the ``k`` whose requests are nearest to ``request`` by cosine
            similarity of text embeddings, nearest first (ties in list order); ``fixed``: the
            first ``k``; ``zero``: none.
        embed: Embedding function (rows L2-normalised or not); ``None`` uses
            :func:`recagents.llm.embed.embed` (offline MiniLM, cached).
        demos: The pool.
    """
    return _select_many([request], k, mode, embed, demos)[0]


def _select_many(
    requests: Sequence[str],
    k: int,
    mode: str,
    embed: Callable[[Sequence[str]], np.ndarray] | None,
    demos: Sequence[Demo],
) -> list[list[Demo]]:
    """:func:`select_demos` for many requests with one embedding call."""
    if mode not in DEMO_MODES:
        raise ValueError(f"demo mode must be one of {DEMO_MODES}, got {mode!r}")
    if k < 0:
        raise ValueError(f"k must be non-negative, got {k}")
    if mode == "zero" or k == 0 or not demos:
        return [[] for _ in requests]
    if mode == "fixed":
        return [list(demos[:k]) for _ in requests]
    if embed is None:
        from recagents.llm.embed import embed as default_embed

        embed = default_embed
    if not requests:
        return []
    vectors = np.asarray(embed([d.request for d in demos] + list(requests)), dtype=float)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1.0, norms)
    pool, asked = vectors[: len(demos)], vectors[len(demos) :]
    chosen = []
    for row in asked @ pool.T:
        order = np.argsort(-row, kind="stable")[:k]
        chosen.append([demos[int(j)] for j in order])
    return chosen


# --------------------------------------------------------------------------- prompts


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


def _context_lines(
    request: str,
    dialogue: Sequence[tuple[str, str]],
    advice: str | None,
    notes: str | None,
    config: InteRecConfig,
    profile: str | None = None,
) -> list[str]:
    lines = [
        "Conversation so far:",
        _dialogue_text(dialogue, config.history_turns, config.message_chars),
        "",
    ]
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

    The steps are those of :data:`~recagents.interecagent.tools.PLAN_SCHEMA` (known tools
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
    return [
        {"role": "system", "content": "\n".join(system)},
        {"role": "user", "content": "\n".join(user)},
    ]


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

    A plan is checked with :func:`~recagents.interecagent.tools.validate_plan` (known tools,
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
        steps = tuple({"tool_name": s["tool_name"], "input": s["input"]} for s in plan)
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
    user = "\n".join(
        [
            "Conversation before this message:",
            _dialogue_text(dialogue, config.history_turns, config.message_chars),
            "",
            *([profile, ""] if profile else []),
            f"The user's message: {request}",
            "",
            track_text,
            "",
            f"The assistant's reply: {reply}",
            "Your review (JSON):",
        ]
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


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
    user = "\n".join(
        [
            "Conversation so far:",
            _dialogue_text(dialogue, config.history_turns, config.message_chars),
            "",
            f"The user's message: {request}",
            "",
            "What your search found:",
            track_text,
            "Your reply (JSON):",
        ]
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


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
    return [
        {"role": "system", "content": "\n".join(system)},
        {"role": "user", "content": "\n".join(user)},
    ]


def parse_react_reply(data: Any) -> tuple[str | None, Any, str]:
    """``(action, input, thought)`` of a ReAct step; ``action`` is ``None`` when unusable."""
    if not isinstance(data, dict):
        return None, None, ""
    action = data.get("action")
    thought = data.get("thought") if isinstance(data.get("thought"), str) else ""
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
    user = "\n".join(
        [
            "Conversation so far:",
            _dialogue_text(dialogue, config.history_turns, config.message_chars),
            "",
            f"The user's new message: {request}",
            "Your reply (JSON):",
        ]
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


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
    user = [
        "Conversation so far:",
        _dialogue_text(dialogue, config.history_turns, config.message_chars),
        "",
    ]
    if profile:
        user += [profile, ""]
    user += [f"The user's newest message: {request}", "Your notes (JSON):"]
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(user)}]


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


# --------------------------------------------------------------------------- sessions


@dataclass
class Attempt:
    """One try at a turn: the planner's reply, what ran, and the critic's verdict.

    Attributes:
        kind: ``"answer"``, ``"plan"`` or ``"failed"``.
        reply: What the agent would say (the answer, the executor's output or the apology).
        plan: The steps that ran (``None`` for an answer).
        problems: Why it failed (validation problems, a tool error, an unusable LLM reply).
        track: The execution track (plan or ReAct steps), or ``None``.
        llm_failure: The client's error when the planner's reply was unusable.
        advice_in: The advice this attempt was planned with.
        verdict: The critic's verdict (``None``: not reviewed, or an unusable review).
        advice: The critic's advice, or the validator's when the plan failed.
        bus_after: Candidate ids on the bus after the plan ran (before it is cleared).
        thoughts: ReAct thoughts, one per step.
    """

    kind: Literal["answer", "plan", "failed"]
    reply: str = ""
    plan: list[dict[str, Any]] | None = None
    problems: list[str] = field(default_factory=list)
    track: ExecutionTrack | None = None
    llm_failure: str | None = None
    advice_in: str | None = None
    verdict: bool | None = None
    advice: str | None = None
    bus_after: list[str] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)


@dataclass
class TurnResult:
    """What one agent turn did.

    Attributes:
        session_id: The session.
        user_text: The user's message.
        reply: The agent's reply to the user.
        kind: ``"answer"``, ``"plan"``, ``"failed"`` (apology) or ``"llm_only"``.
        plan: The final plan's steps (``None`` without one).
        recommended_ids: Ids recommended this turn (map_titles, or the grounded titles).
        n_calls: LLM requests made for this turn (planner, critic, summariser, ReAct steps).
        plan_failures: Plans (or ReAct steps) that were invalid, failed, or unusable replies.
        reflections: Re-plans after a critic's "no" or a failed plan.
        critic_failures: Critic replies that could not be used (the attempt was kept).
        attempts: Every :class:`Attempt`, in order; the last is the final one.
        unmatched: LLM-only titles that matched no item.
        titles: LLM-only titles as written.
        prompts: Kept ``(role, prompt, reply)`` triples for a teaching trace.
        profile_failures: Profile extraction replies that could not be used (the profile
            stayed as it was).
        profile_update: What this turn's message added to the profile (profile memory).
    """

    session_id: str
    user_text: str
    reply: str
    kind: Literal["answer", "plan", "failed", "llm_only"]
    plan: list[dict[str, Any]] | None = None
    recommended_ids: list[str] = field(default_factory=list)
    n_calls: int = 0
    plan_failures: int = 0
    reflections: int = 0
    critic_failures: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    unmatched: int = 0
    titles: list[str] = field(default_factory=list)
    prompts: list[tuple[str, str, str]] = field(default_factory=list)
    profile_failures: int = 0
    profile_update: ProfileUpdate | None = None

    @property
    def tracks(self) -> list[ExecutionTrack]:
        """The execution tracks of every attempt that ran tools."""
        return [a.track for a in self.attempts if a.track is not None]

    @property
    def track(self) -> ExecutionTrack | None:
        """The final attempt's track, or ``None``."""
        return self.attempts[-1].track if self.attempts else None

    @property
    def bus_after(self) -> list[str]:
        """Candidates left after the final plan ran (empty without one)."""
        return self.attempts[-1].bus_after if self.attempts else []


@dataclass(frozen=True)
class ProfileUpdate:
    """What one message changed in the remembered profile.

    Attributes:
        likes: Ids newly remembered as liked.
        dislikes: Ids newly remembered as not wanted.
        unmatched: Titles the extractor wrote that matched no item (not remembered).
    """

    likes: tuple[str, ...] = ()
    dislikes: tuple[str, ...] = ()
    unmatched: tuple[str, ...] = ()


@dataclass
class AgentSession:
    """One conversation's agent state: its own candidate bus and its dialogue memory.

    Attributes:
        session_id: A label (e.g. the user id).
        ctx: The tool context; its bus belongs to this session (the table, ItemCF and
            ranker are shared with every other session).
        dialogue: ``(speaker, text)`` messages so far, speaker ``"user"`` or ``"agent"``.
        turns: The :class:`TurnResult` of every turn.
        likes: Ids the user said they like, oldest first (profile memory).
        dislikes: Ids the user said they do not want, oldest first (profile memory).
    """

    session_id: str
    ctx: ToolContext
    dialogue: list[tuple[str, str]] = field(default_factory=list)
    turns: list[TurnResult] = field(default_factory=list)
    likes: list[str] = field(default_factory=list)
    dislikes: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, session_id: str, ctx: ToolContext, map_n: int | None = None) -> AgentSession:
        """A new session on a copy of ``ctx`` with a fresh bus of all items.

        Args:
            session_id: The label.
            ctx: The shared context (table, ItemCF, ranker, embedding function).
            map_n: Recommendations per turn when a plan does not say (default ``ctx.map_n``).
        """
        bus = CandidateBus(ctx.table.ids, cap=ctx.bus.cap, seed=ctx.bus.seed)
        own = ToolContext(
            table=ctx.table,
            bus=bus,
            itemcf=ctx.itemcf,
            ranker=ctx.ranker,
            embed=ctx.embed,
            top_ratio=ctx.top_ratio,
            lookup_chars=ctx.lookup_chars,
            rank_keep=ctx.rank_keep,
            map_n=ctx.map_n if map_n is None else map_n,
            title_min_score=ctx.title_min_score,
        )
        own._item_vectors = ctx._item_vectors
        return cls(session_id=session_id, ctx=own)

    def remember(self, result: TurnResult) -> None:
        """Add a finished turn to the dialogue memory and the turn list."""
        self.dialogue += [("user", result.user_text), ("agent", result.reply)]
        self.turns.append(result)

    def update_profile(self, likes: Sequence[str], dislikes: Sequence[str]) -> ProfileUpdate:
        """Ground stated likes and dislikes to item ids and remember them.

        Titles are matched with :meth:`ItemTable.match_titles` (the context's threshold);
        what matches nothing is reported, not remembered. The latest statement wins: a
        title liked now leaves the dislikes, and the other way round.
        """
        added: dict[str, list[str]] = {"likes": [], "dislikes": []}
        unmatched: list[str] = []
        for key, titles, other in (
            ("likes", likes, self.dislikes),
            ("dislikes", dislikes, self.likes),
        ):
            kept: list[str] = getattr(self, key)
            for match in self.ctx.table.match_titles(list(titles), self.ctx.title_min_score):
                if match.item_id is None:
                    unmatched.append(match.query)
                    continue
                if match.item_id in other:
                    other.remove(match.item_id)
                if match.item_id not in kept:
                    kept.append(match.item_id)
                    added[key].append(match.item_id)
        return ProfileUpdate(tuple(added["likes"]), tuple(added["dislikes"]), tuple(unmatched))

    def profile_titles(self) -> tuple[list[str], list[str]]:
        """The remembered likes and dislikes as display titles (``"Fargo (1996)"``)."""
        table = self.ctx.table
        return (
            [table.display_title(i) for i in self.likes],
            [table.display_title(i) for i in self.dislikes],
        )

    def profile_text(self) -> str | None:
        """The profile as prompt lines, or ``None`` while it is empty."""
        likes, dislikes = self.profile_titles()
        if not likes and not dislikes:
            return None
        lines = ["What the user has said about their taste so far:"]
        lines.append("- likes: " + ("; ".join(likes) if likes else "(nothing named)"))
        lines.append("- does not want: " + ("; ".join(dislikes) if dislikes else "(nothing named)"))
        return "\n".join(lines)


class _Turn:
    """The working state of one session's turn inside :func:`run_turns`."""

    def __init__(
        self, session: AgentSession, text: str, demos: list[Demo], keep: bool, persistent: bool
    ) -> None:
        self.session = session
        self.text = text
        self.demos = demos
        self.keep = keep
        self.advice: str | None = None
        self.attempts: list[Attempt] = []
        self.calls = 0
        self.plan_failures = 0
        self.reflections = 0
        self.critic_failures = 0
        self.prompts: list[tuple[str, str, str]] = []
        self.bus_start = copy.deepcopy(session.ctx.bus) if persistent else None
        self.memory = list(session.dialogue)
        self.profile: str | None = None
        self.profile_failures = 0
        self.profile_update: ProfileUpdate | None = None

    def with_profile(self, plan: Sequence[dict[str, Any]], config: InteRecConfig) -> list[dict]:
        """The plan with the session's remembered profile merged in (profile memory only)."""
        if not config.profile_memory:
            return [dict(step) for step in plan]
        likes, dislikes = self.session.profile_titles()
        return merge_profile(plan, likes, dislikes)

    @property
    def ctx(self) -> ToolContext:
        return self.session.ctx

    def restore_bus(self, persistent: bool) -> None:
        """Start an attempt from the turn's bus: all items, or the kept one."""
        if persistent:
            self.session.ctx.bus = copy.deepcopy(self.bus_start)
        else:
            self.session.ctx.bus.reset()

    def record(self, role: str, request: ChatRequest, result: ChatResult) -> None:
        self.calls += 1
        if self.keep:
            prompt = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in request.messages)
            self.prompts.append((role, prompt, result.text or f"(no reply: {result.error})"))


def _executor_reply(track: ExecutionTrack) -> str:
    """The reply without a summariser: lookup results, then map_titles' text."""
    parts = [s.observation for s in track.steps if s.tool == "lookup" and s.observation is not None]
    if track.reply:
        parts.append(track.reply)
    elif not parts:
        parts.append("No candidate is left to recommend.")
    return "\n".join(parts)


def _track_for_critic(attempt: Attempt) -> str:
    if attempt.track is None:
        return "No tools were used; the assistant answered directly."
    return attempt.track.as_text()


@dataclass(frozen=True)
class _Stage:
    """Where one stage's calls go: the client, the log and the phase label."""

    config: InteRecConfig
    client: LLMClient
    log: RunLog
    phase: str

    def ask(
        self,
        kind: str,
        turns: Sequence[_Turn],
        messages: Sequence[list[dict[str, str]]],
        schema: dict[str, Any],
        temperature: float,
        max_tokens: int,
    ) -> list[ChatResult]:
        """Send one request per turn in one batch; log every call and keep it on its turn."""
        requests = [
            ChatRequest(
                messages=m,
                schema=schema,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=self.config.seed,
                tag=t.session.session_id,
            )
            for t, m in zip(turns, messages, strict=True)
        ]
        results = ask(self.client, self.log, self.phase, kind, requests, f"{self.phase}: {kind}")
        for turn, request, result in zip(turns, requests, results, strict=True):
            turn.record(kind, request, result)
        return results


def _describer() -> Callable[[ItemTable], str]:
    """:meth:`ItemTable.describe`, computed once per table within one stage."""
    seen: dict[int, str] = {}

    def describe(table: ItemTable) -> str:
        if id(table) not in seen:
            seen[id(table)] = table.describe()
        return seen[id(table)]

    return describe


def _plan_first_round(turns: Sequence[_Turn], notes: dict[str, str], stage: _Stage) -> None:
    """One planner call per turn (one batch), then each plan runs on its session's bus."""
    config = stage.config
    describe = _describer()
    messages = [
        planner_messages(
            t.text,
            describe(t.ctx.table),
            config,
            t.demos,
            t.memory,
            t.advice,
            notes.get(t.session.session_id),
            t.profile,
        )
        for t in turns
    ]
    results = stage.ask("planner", turns, messages, planner_schema(config),
                        config.planner_temperature, config.planner_max_tokens)  # fmt: skip
    for turn, result in zip(turns, results, strict=True):
        if not result.ok:
            turn.plan_failures += 1
            turn.attempts.append(
                Attempt(
                    "failed",
                    problems=[f"unusable planner reply: {result.error}"],
                    llm_failure=result.error,
                    advice_in=turn.advice,
                )
            )
            continue
        parsed = parse_planner_reply(result.data, turn.ctx.table)
        if parsed.kind == "answer":
            turn.attempts.append(Attempt("answer", reply=parsed.answer, advice_in=turn.advice))
            continue
        if parsed.kind == "failed":
            turn.plan_failures += 1
            turn.attempts.append(
                Attempt("failed", problems=list(parsed.problems), advice_in=turn.advice)
            )
            continue
        turn.restore_bus(config.persistent_bus)
        plan = turn.with_profile(parsed.plan, config)
        track = execute_plan(plan, turn.ctx, reset_bus=False)
        attempt = Attempt("plan", plan=plan, track=track, advice_in=turn.advice)
        attempt.bus_after = list(turn.ctx.bus.ids)
        if track.stopped:
            turn.plan_failures += 1
            attempt.kind = "failed"
            attempt.problems = [
                f"step {n} ({s.tool}): {s.error}"
                for n, s in enumerate(track.steps, 1)
                if s.error is not None
            ]
        else:
            attempt.reply = _executor_reply(track)
        turn.attempts.append(attempt)


def _react_round(turns: Sequence[_Turn], notes: dict[str, str], stage: _Stage) -> None:
    """Step-by-step attempts for every turn, one batched LLM call per iteration.

    Each step is validated with the steps before it (an invalid one is not run; its problems
    are the observation) and run on the bus as it is. A turn ends at ``finish``, after
    map_titles, on an unusable reply or after ``react_max_iterations`` steps. When tools ran,
    the reply is their output (map_titles is added if missing), as in plan-first mode;
    otherwise the ``finish`` text is a direct answer. With profile memory, the remembered
    likes and dislikes join every rank step's input before it is checked and run.
    """
    config = stage.config
    schema = react_schema(config)
    state: dict[int, dict[str, Any]] = {}
    for turn in turns:
        turn.restore_bus(config.persistent_bus)
        state[id(turn)] = {"track": ExecutionTrack(), "steps": [], "seen": [], "thoughts": [],
                           "answer": None, "failure": None}  # fmt: skip
    active = list(turns)
    describe = _describer()
    for _ in range(config.react_max_iterations):
        if not active:
            break
        messages = [
            react_messages(
                t.text,
                describe(t.ctx.table),
                config,
                state[id(t)]["seen"],
                t.demos,
                t.memory,
                t.advice,
                notes.get(t.session.session_id),
                t.profile,
            )
            for t in active
        ]
        results = stage.ask("react", active, messages, schema, config.planner_temperature,
                            config.react_max_tokens)  # fmt: skip
        still = []
        for turn, result in zip(active, results, strict=True):
            run = state[id(turn)]
            if not result.ok:
                turn.plan_failures += 1
                run["failure"] = result.error
                continue
            action, value, thought = parse_react_reply(result.data)
            run["thoughts"].append(thought)
            if action is None:
                turn.plan_failures += 1
                run["failure"] = "the step names no known action"
                continue
            if action == "finish":
                run["answer"] = value if isinstance(value, str) else json.dumps(value)
                continue
            step = turn.with_profile([{"tool_name": action, "input": value}], config)[0]
            action, value = step["tool_name"], step["input"]
            number = len(run["steps"]) + 1
            problems = [
                p
                for p in validate_plan([*run["steps"], step], turn.ctx.table)
                if p.startswith(f"step {number} ")
            ]
            track: ExecutionTrack = run["track"]
            if problems:
                turn.plan_failures += 1
                size = len(turn.ctx.bus)
                track.steps.append(StepRecord(action, value, size, size, error="; ".join(problems)))
                run["seen"].append((step, "ERROR: " + "; ".join(problems)))
                still.append(turn)
                continue
            record = execute_step(turn.ctx, PlanStep(action, value), track)
            if record.error is not None:
                turn.plan_failures += 1
                run["seen"].append((step, "ERROR: " + record.error))
            else:
                run["steps"].append(step)
                run["seen"].append((step, record.observation))
                if action == "map_titles":
                    continue
            still.append(turn)
        active = still
    for turn in turns:
        run = state[id(turn)]
        track = run["track"]
        ran = [s for s in track.steps if s.error is None]
        if ran:
            if not any(s.tool == "map_titles" for s in ran):
                record = execute_step(turn.ctx, PlanStep("map_titles", turn.ctx.map_n), track)
                record.added = True
                track.map_added = True
            attempt = Attempt("plan", plan=list(run["steps"]), track=track,
                              reply=_executor_reply(track), advice_in=turn.advice)  # fmt: skip
            attempt.bus_after = list(turn.ctx.bus.ids)
        elif run["answer"] is not None and run["answer"].strip():
            attempt = Attempt("answer", reply=run["answer"].strip(), advice_in=turn.advice)
            if track.steps:
                attempt.track = track
        else:
            problems = [f"unusable step: {run['failure']}"] if run["failure"] else []
            problems += [f"{s.tool}: {s.error}" for s in track.steps if s.error]
            if not problems:
                limit = config.react_max_iterations
                problems = [f"no tool ran and no answer came in {limit} steps"]
            if run["failure"] is None and not track.steps:
                turn.plan_failures += 1
            attempt = Attempt("failed", problems=problems, llm_failure=run["failure"],
                              track=track if track.steps else None,
                              advice_in=turn.advice)  # fmt: skip
        attempt.thoughts = list(run["thoughts"])
        turn.attempts.append(attempt)


def _critic_round(turns: Sequence[_Turn], stage: _Stage) -> list[_Turn]:
    """Review every turn's latest attempt in one batch; return those the critic rejected."""
    if not turns:
        return []
    config = stage.config
    messages = [
        critic_messages(
            t.text,
            _track_for_critic(t.attempts[-1]),
            t.attempts[-1].reply,
            t.memory,
            config,
            t.profile,
        )  # fmt: skip
        for t in turns
    ]
    results = stage.ask("critic", turns, messages, critic_schema(config),
                        config.critic_temperature, config.critic_max_tokens)  # fmt: skip
    rejected = []
    for turn, result in zip(turns, results, strict=True):
        attempt = turn.attempts[-1]
        verdict, advice = parse_critic_reply(result.data) if result.ok else (None, "")
        attempt.verdict, attempt.advice = verdict, advice or None
        if verdict is None:
            turn.critic_failures += 1
        elif not verdict:
            turn.advice = advice or "The reply does not serve the request; try a different plan."
            turn.reflections += 1
            rejected.append(turn)
    return rejected


def _summarise(turns: Sequence[_Turn], stage: _Stage) -> None:
    chosen = [t for t in turns if t.attempts[-1].kind == "plan"]
    if not chosen:
        return
    config = stage.config
    messages = [
        summariser_messages(t.text, t.attempts[-1].track.as_text(), t.memory, config)
        for t in chosen
    ]
    results = stage.ask("summariser", chosen, messages, summariser_schema(config),
                        config.summariser_temperature, config.summariser_max_tokens)  # fmt: skip
    for turn, result in zip(chosen, results, strict=True):
        reply = result.data.get("reply") if result.ok and isinstance(result.data, dict) else None
        if isinstance(reply, str) and reply.strip():
            turn.attempts[-1].reply = reply.strip()


def _profile_round(turns: Sequence[_Turn], stage: _Stage) -> None:
    """One profile extraction per turn (one batch) before planning; update each session.

    An unusable reply is a counted profile failure and leaves the profile as it was; the
    turn goes on with what was remembered before.
    """
    config = stage.config
    messages = [profile_messages(t.text, t.memory, t.session.profile_text(), config) for t in turns]
    results = stage.ask("profile", turns, messages, profile_schema(config), 0.0,
                        config.profile_max_tokens)  # fmt: skip
    for turn, result in zip(turns, results, strict=True):
        parsed = parse_profile_reply(result.data) if result.ok else None
        if parsed is None:
            turn.profile_failures += 1
        else:
            turn.profile_update = turn.session.update_profile(*parsed)
        turn.profile = turn.session.profile_text()


def _keep_set(keep_prompts: bool | Collection[str]) -> Callable[[str], bool]:
    if isinstance(keep_prompts, bool):
        return lambda _: keep_prompts
    wanted = set(keep_prompts)
    return lambda session_id: session_id in wanted


def run_turns(
    sessions: Sequence[AgentSession],
    user_texts: Sequence[str],
    config: InteRecConfig,
    client: LLMClient,
    log: RunLog,
    phase: str = "InteRecAgent",
    keep_prompts: bool | Collection[str] = False,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
    notes: dict[str, str] | None = None,
) -> list[TurnResult]:
    """One agent turn for many sessions at once, stage by stage.

    Stages: all planners in one :meth:`LLMClient.map` (or, in ReAct mode, one map per
    step), execution without an LLM, all critics in one map, then the re-plans of the
    sessions the critic rejected (or whose plan failed), and so on, at most
    ``config.max_reflections`` times; then the summaries. With ``config.profile_memory`` a
    profile extraction batch comes first. A planner reply that cannot be used
    even after the client's bounded re-asks is a counted plan failure and the turn replies
    with :data:`APOLOGY`; an unusable critic reply keeps the attempt. Every call is added to
    ``log`` (kinds ``profile``, ``planner``, ``react``, ``critic``, ``summariser``) and each
    session's dialogue memory gets the message and the reply.

    Args:
        sessions: The sessions (each with its own bus; see :meth:`AgentSession.start`).
        user_texts: Each session's new user message.
        config: The agent's settings.
        client: The LLM client.
        log: Receives one row per call.
        phase: Label of these calls in the log.
        keep_prompts: ``True`` (all), ``False`` (none) or the session ids whose prompts and
            replies are kept in :attr:`TurnResult.prompts`.
        embed: Embedding function for dynamic demonstrations (default: offline MiniLM).
        notes: Extra planner instructions per session id (e.g. the one-turn ranking task).

    Returns:
        One :class:`TurnResult` per session, in order.
    """
    if len(sessions) != len(user_texts):
        raise ValueError(f"{len(sessions)} sessions but {len(user_texts)} user messages")
    ids = [s.session_id for s in sessions]
    if len(set(ids)) != len(ids):
        raise ValueError("run_turns: a session appears more than once")
    keep = _keep_set(keep_prompts)
    notes = dict(notes or {})
    texts = [str(t) for t in user_texts]
    demos = _select_many(texts, config.num_demos, config.demo_mode, embed, DEMOS)
    turns = [
        _Turn(s, t, d, keep(s.session_id), config.persistent_bus)
        for s, t, d in zip(sessions, texts, demos, strict=True)
    ]
    stage = _Stage(config, client, log, phase)
    if config.profile_memory:
        _profile_round(turns, stage)
    planning = _react_round if config.plan_mode == "react" else _plan_first_round
    pending = list(turns)
    while pending:
        planning(pending, notes, stage)
        rerun, review = [], []
        for turn in pending:
            attempt = turn.attempts[-1]
            can_retry = config.reflection and turn.reflections < config.max_reflections
            if attempt.kind == "failed":
                if can_retry and config.replan_on_failure and attempt.llm_failure is None:
                    attempt.advice = "Your last plan could not be run: " + "; ".join(
                        attempt.problems
                    )
                    turn.advice = attempt.advice[: config.advice_chars]
                    turn.reflections += 1
                    rerun.append(turn)
            elif can_retry:
                review.append(turn)
        rerun += _critic_round(review, stage)
        pending = [t for t in turns if t in rerun]
    if config.summariser:
        _summarise(turns, stage)
    results = []
    for turn in turns:
        final = turn.attempts[-1]
        if final.kind == "failed":
            final.reply = APOLOGY.format(domain=config.domain)
        if config.persistent_bus and final.kind != "plan":
            turn.session.ctx.bus = copy.deepcopy(turn.bus_start)
        elif not config.persistent_bus:
            turn.session.ctx.bus.reset()
        result = TurnResult(
            session_id=turn.session.session_id,
            user_text=turn.text,
            reply=final.reply,
            kind=final.kind,
            plan=final.plan if final.kind == "plan" else None,
            recommended_ids=list(final.track.recommended_ids)
            if final.kind == "plan" and final.track is not None
            else [],
            n_calls=turn.calls,
            plan_failures=turn.plan_failures,
            reflections=turn.reflections,
            critic_failures=turn.critic_failures,
            attempts=turn.attempts,
            prompts=turn.prompts,
            profile_failures=turn.profile_failures,
            profile_update=turn.profile_update,
        )
        turn.session.remember(result)
        results.append(result)
    return results


def llm_only_turns(
    sessions: Sequence[AgentSession],
    user_texts: Sequence[str],
    config: InteRecConfig,
    client: LLMClient,
    log: RunLog,
    phase: str = "LLM only",
    keep_prompts: bool | Collection[str] = False,
    n: int | None = None,
) -> list[TurnResult]:
    """The "LLM without tools" baseline: the same LLM names ``n`` titles, grounded to ids.

    Each title is matched with :meth:`ItemTable.match_title`; titles that match nothing are
    counted in :attr:`TurnResult.unmatched`. The reply is the titles as the model wrote them
    (so the paper's fuzzy rule judges the model's own words). Temperature:
    ``config.llm_only_temperature`` (the paper's 0.8).
    """
    if len(sessions) != len(user_texts):
        raise ValueError(f"{len(sessions)} sessions but {len(user_texts)} user messages")
    count = config.map_n if n is None else n
    keep = _keep_set(keep_prompts)
    schema = llm_only_schema(count)
    requests = [
        ChatRequest(
            messages=llm_only_messages(text, s.dialogue, config, count),
            schema=schema,
            temperature=config.llm_only_temperature,
            max_tokens=config.llm_only_max_tokens,
            seed=config.seed,
            tag=s.session_id,
        )
        for s, text in zip(sessions, user_texts, strict=True)
    ]
    results = ask(client, log, phase, "llm_only", requests, desc=f"{phase}: recommend")
    out = []
    for session, text, request, result in zip(sessions, user_texts, requests, results,
                                              strict=True):  # fmt: skip
        titles = parse_llm_only_reply(result.data) if result.ok else None
        ids: list[str] = []
        unmatched = 0
        for title in titles or []:
            match = session.ctx.table.match_title(title, session.ctx.title_min_score)
            if match.item_id is None:
                unmatched += 1
            elif match.item_id not in ids:
                ids.append(match.item_id)
        if titles:
            reply = "Here are recommendations: " + "; ".join(
                f"{k}. {t}" for k, t in enumerate(titles, 1)
            )
        else:
            reply = APOLOGY.format(domain=config.domain)
        turn = TurnResult(
            session_id=session.session_id,
            user_text=str(text),
            reply=reply,
            kind="llm_only",
            recommended_ids=ids,
            n_calls=1,
            plan_failures=0 if titles else 1,
            unmatched=unmatched,
            titles=list(titles or []),
        )
        if keep(session.session_id):
            prompt = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in request.messages)
            turn.prompts.append(("llm_only", prompt, result.text or f"(no reply: {result.error})"))
        session.remember(turn)
        out.append(turn)
    return out
