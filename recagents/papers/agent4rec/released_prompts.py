"""The authors' Agent4Rec prompts, read from their release as data, and our reply parsers.

Why: to hold our implementation against the authors' recorded run we need their exact
prompts, and to run our loop with them (``Agent4RecConfig(prompts="released")``) we need to
read their free-text replies. The prompt text is never copied into this package: it is read
at run time from the pinned release (``simulation/avatar.py``, ``arena.py``, ``memory.py``,
through :func:`recagents.data.releases.fetch`) with :mod:`ast`. Nothing in those files is
executed: only string literals, f-strings and ``+`` chains of them become a
:class:`Template` (literal pieces and named slots); the trait descriptions are dict literals
read with :func:`ast.literal_eval`. Anything else where a template is expected raises
:class:`TemplateError`.

The reply parsers (:func:`parse_page_reply`, :func:`parse_exit_reply`,
:func:`parse_interview_reply`) are ours: they read the three reply formats the prompts ask
for, match titles to the items shown, and name every problem they meet instead of guessing
silently.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import NamedTuple

import pandas as pd
from rapidfuzz import fuzz

from recagents.columns import ITEM, TITLE, YEAR
from recagents.data import releases
from recagents.data.datasets import Dataset
from recagents.papers.agent4rec.agents import item_mean_ratings

RELEASE = "agent4rec-ml1m"
"""The pinned Agent4Rec release the templates are read from."""

SOURCES = {
    "avatar": "simulation/avatar.py",
    "arena": "simulation/arena.py",
    "memory": "simulation/memory.py",
}
"""The authors' source files read (never executed), by short name."""

#: The chat kinds the released mode sends, in the order a visit uses them.
CHAT_KINDS = ("page", "exit", "reflection", "interview")


class TemplateError(ValueError):
    """Source text that cannot be read as a prompt template (the message says where)."""


# --------------------------------------------------------------------------- templates


@dataclass(frozen=True)
class Slot:
    """A named hole in a template: the f-string expression it came from, ``self.`` dropped."""

    name: str


Piece = str | Slot


@dataclass(frozen=True)
class Template:
    """Literal text and named slots, in order; ``optional`` is appended only when filled.

    ``optional`` mirrors a guarded ``x = x + ...`` in the source (the memory block of the
    page prompt, added only when the agent has memories): it is rendered when every slot in
    it has a non-empty value.
    """

    pieces: tuple[Piece, ...]
    optional: tuple[Piece, ...] = ()

    @property
    def slots(self) -> list[str]:
        """The slot names, in order of first appearance."""
        names = [p.name for p in (*self.pieces, *self.optional) if isinstance(p, Slot)]
        return list(dict.fromkeys(names))

    @property
    def head(self) -> str:
        """The literal text before the first slot (how a logged prompt of this kind starts)."""
        return self.pieces[0] if self.pieces and isinstance(self.pieces[0], str) else ""

    def render(self, slots: Mapping[str, str]) -> str:
        """The text with every slot filled.

        Raises:
            KeyError: A slot of the main part has no value.
        """
        text = "".join(p if isinstance(p, str) else str(slots[p.name]) for p in self.pieces)
        names = [p.name for p in self.optional if isinstance(p, Slot)]
        if self.optional and all(slots.get(n) for n in names):
            text += "".join(p if isinstance(p, str) else str(slots[p.name]) for p in self.optional)
        return text

    def pattern(self) -> str:
        """A regular expression matching a rendering; slot ``k`` is the group ``s<k>``."""
        parts, index = [], 0

        def piece_pattern(piece: Piece) -> str:
            nonlocal index
            if isinstance(piece, str):
                return re.escape(piece)
            index += 1
            return f"(?P<s{index}>.*?)"

        parts = [piece_pattern(p) for p in self.pieces]
        if self.optional:
            parts.append("(?:" + "".join(piece_pattern(p) for p in self.optional) + ")?")
        return "".join(parts)

    def slot_order(self) -> list[str]:
        """Slot name of each regex group ``s1, s2, ...`` of :meth:`pattern`."""
        return [p.name for p in (*self.pieces, *self.optional) if isinstance(p, Slot)]


def _pieces(node: ast.expr, where: str) -> list[Piece]:
    """Literal and slot pieces of a string literal, an f-string or a ``+`` chain of them."""
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, str):
            raise TemplateError(f"{where}: a non-string constant {node.value!r}")
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        out: list[Piece] = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append(value.value)
            elif isinstance(value, ast.FormattedValue):
                if value.format_spec is not None or value.conversion != -1:
                    raise TemplateError(f"{where}: a formatted slot (spec or conversion)")
                out.append(Slot(_slot_name(value.value)))
            else:
                raise TemplateError(f"{where}: an f-string part of type {type(value).__name__}")
        return out
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, ast.Add):
            raise TemplateError(f"{where}: the operator {type(node.op).__name__} (only + reads)")
        return _pieces(node.left, where) + _pieces(node.right, where)
    if isinstance(node, ast.Name | ast.Attribute | ast.Call):
        return [Slot(_slot_name(node))]
    raise TemplateError(f"{where}: a {type(node).__name__} where a template was expected")


def _slot_name(node: ast.expr) -> str:
    """The slot's name: its source expression with ``self.`` dropped."""
    return ast.unparse(node).replace("self.", "")


def _merge(pieces: Sequence[Piece]) -> tuple[Piece, ...]:
    """Adjacent literals joined into one (so a template's literal runs are whole)."""
    out: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, str) and out and isinstance(out[-1], str):
            out[-1] = out[-1] + piece
        elif piece != "":
            out.append(piece)
    return tuple(out)


def template_of(node: ast.expr, where: str) -> Template:
    """A :class:`Template` from one expression node (see :func:`_pieces` for what reads).

    The node must be text: a string literal, an f-string or a ``+`` chain; a name, an
    attribute or a call reads only as one operand of a chain (a slot), never as a whole.
    """
    if not isinstance(node, ast.Constant | ast.JoinedStr | ast.BinOp):
        raise TemplateError(f"{where}: a {type(node).__name__} where a template was expected")
    return Template(_merge(_pieces(node, where)))


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The one function or method called ``name`` anywhere in ``tree``."""
    found = [
        n for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name
    ]  # fmt: skip
    if len(found) != 1:
        raise TemplateError(f"expected one function {name!r}, found {len(found)}")
    return found[0]


def _assigned(func: ast.AST, target: str) -> list[ast.Assign]:
    """Assignments to the name ``target`` inside ``func``, in source order."""
    nodes = [
        n for n in ast.walk(func)
        if isinstance(n, ast.Assign) and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name) and n.targets[0].id == target
    ]  # fmt: skip
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))


def _chat_template(func: ast.AST, target: str, where: str) -> Template:
    """The template assigned to ``target``; a later ``target = target + ...`` is optional."""
    assigns = _assigned(func, target)
    if not assigns:
        raise TemplateError(f"{where}: nothing is assigned to {target!r}")
    main = template_of(assigns[0].value, where)
    optional: tuple[Piece, ...] = ()
    for extra in assigns[1:]:
        value = extra.value
        if not (
            isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)
            and isinstance(value.left, ast.Name) and value.left.id == target and not optional
        ):  # fmt: skip
            raise TemplateError(f"{where}: {target!r} is reassigned in a way not read")
        optional = template_of(value.right, where).pieces
    return Template(main.pieces, optional)


def _calls(func: ast.AST, method: str) -> list[ast.Call]:
    """Calls of ``<something>.method(...)`` inside ``func``, in source order."""
    nodes = [
        n for n in ast.walk(func)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == method
    ]  # fmt: skip
    return sorted(nodes, key=lambda n: (n.lineno, n.col_offset))


def _dict_literal(func: ast.AST, target: str, where: str) -> dict[int, str]:
    """A ``{int: str}`` literal assigned to ``target`` (read with :func:`ast.literal_eval`)."""
    assigns = _assigned(func, target)
    if len(assigns) != 1 or not isinstance(assigns[0].value, ast.Dict):
        raise TemplateError(f"{where}: {target!r} is not one dict literal")
    value = ast.literal_eval(assigns[0].value)
    if not all(isinstance(k, int) and isinstance(v, str) for k, v in value.items()):
        raise TemplateError(f"{where}: {target!r} is not a dict of int -> str")
    return dict(value)


@dataclass(frozen=True)
class ReleasedPrompts:
    """Everything the released mode and the log reader take from the authors' source.

    Attributes:
        chats: Kind -> ``(system, user)`` templates; ``system`` is ``None`` for a call
            sent as one user message (the reflection).
        traits: Trait -> level (1-3) -> description.
        item_line: How one item is shown on a page.
        memories: ``page`` (what the page did), ``exit`` and ``next`` (the decision).
        log_lines: The running log's own lines: ``start``, ``page_banner``,
            ``item_truth`` and ``item`` (the logged page), ``page_end``, ``response``.
    """

    chats: dict[str, tuple[Template | None, Template]]
    traits: dict[str, dict[int, str]]
    item_line: Template
    memories: dict[str, Template]
    log_lines: dict[str, Template] = field(default_factory=dict)


def read_released_prompts(avatar: str, arena: str, memory: str) -> ReleasedPrompts:
    """Parse the authors' three source files (as text) into :class:`ReleasedPrompts`.

    Raises:
        TemplateError: A prompt, trait table or log line is missing or not a template.
        SyntaxError: A file is not Python.
    """
    avatar_tree, arena_tree, memory_tree = (ast.parse(t) for t in (avatar, arena, memory))
    chats: dict[str, tuple[Template | None, Template]] = {}
    for kind, method in (
        ("page", "reaction_to_recommended_items"),
        ("exit", "make_next_decision"),
        ("interview", "response_to_question"),
    ):
        func = _function(avatar_tree, method)
        where = f"avatar.py:{method}"
        chats[kind] = (
            _chat_template(func, "sys_prompt", where),
            _chat_template(func, "prompt", where),
        )
    simulate = _function(arena_tree, "async_simulate_one_avatar")
    question = [c for c in _calls(simulate, "response_to_question") if c.args]
    if len(question) != 1:
        raise TemplateError("arena.py: expected one interview question")
    asked = template_of(question[0].args[0], "arena.py:interview question")
    system, user = chats["interview"]
    filled = [q for p in user.pieces for q in (asked.pieces if p == Slot("question") else (p,))]
    chats["interview"] = (system, Template(_merge(filled)))
    reflect = _function(memory_tree, "_user_satisfaction_reflection")
    chats["reflection"] = (None, _placeholder_template(reflect, "memory.py:reflection"))
    stats = _function(avatar_tree, "parse_init_statistic")
    traits = {
        trait: _dict_literal(stats, f"{trait}_dict", "avatar.py:parse_init_statistic")
        for trait in ("activity", "conformity", "diversity")
    }
    return ReleasedPrompts(
        chats=chats,
        traits=traits,
        item_line=_item_line(simulate),
        memories=_memory_templates(_function(avatar_tree, "reaction_to_recommended_items")),
        log_lines=_log_lines(simulate),
    )


def _placeholder_template(func: ast.AST, where: str) -> Template:
    """A ``prompt.replace("<X>", name)`` template: the placeholder becomes the slot ``name``."""
    literal = _chat_template(func, "prompt", where)
    replaces = [c for c in _calls(func, "replace") if len(c.args) == 2]
    if len(literal.pieces) != 1 or len(replaces) != 1 or not isinstance(literal.pieces[0], str):
        raise TemplateError(f"{where}: expected one literal prompt and one placeholder")
    mark, name = replaces[0].args
    if not isinstance(mark, ast.Constant) or not isinstance(mark.value, str):
        raise TemplateError(f"{where}: the placeholder is not a string literal")
    before, sep, after = literal.pieces[0].partition(mark.value)
    if not sep:
        raise TemplateError(f"{where}: the placeholder {mark.value!r} is not in the prompt")
    return Template(_merge([before, Slot(_slot_name(name)), after]))


def _item_line(simulate: ast.AST) -> Template:
    """The per-item line of a page: the list comprehension assigned to the page's items."""
    assigns = [
        a for a in _assigned(simulate, "recommended_items") if isinstance(a.value, ast.ListComp)
    ]
    if len(assigns) != 1:
        raise TemplateError("arena.py: expected one list of item lines")
    comp = assigns[0].value
    assert isinstance(comp, ast.ListComp)
    return template_of(comp.elt, "arena.py:item line")


def _memory_templates(func: ast.AST) -> dict[str, Template]:
    """The three memory sentences a page writes: what happened, then exit or next."""
    added = [c for c in _calls(func, "add_memory") if c.args]
    if len(added) != 3:
        raise TemplateError(f"avatar.py: expected 3 memory sentences per page, found {len(added)}")
    names = ("page", "exit", "next")
    return {
        n: template_of(c.args[0], f"avatar.py:memory {n}")
        for n, c in zip(names, added, strict=True)
    }


def _log_lines(simulate: ast.AST) -> dict[str, Template]:
    """The running log's f-string lines, in the order the simulation writes them."""
    written = [c for c in _calls(simulate, "write_log") if c.args]
    names = ("start", "page_banner", "item_truth", "item", "page_end", "response")
    if len(written) != len(names):
        raise TemplateError(f"arena.py: expected {len(names)} log lines, found {len(written)}")
    return {
        n: template_of(c.args[0], f"arena.py:log {n}") for n, c in zip(names, written, strict=True)
    }


@cache
def released_prompts() -> ReleasedPrompts:
    """The templates of the pinned release (fetched once, verified, then parsed)."""
    root = releases.fetch(RELEASE, list(SOURCES.values()), progress=False)
    text = {name: (root / path).read_text(encoding="utf-8") for name, path in SOURCES.items()}
    return read_released_prompts(text["avatar"], text["arena"], text["memory"])


def render_released(
    kind: str, slots: Mapping[str, str], prompts: ReleasedPrompts | None = None
) -> list[dict[str, str]]:
    """The chat messages of one released prompt kind with its slots filled.

    Args:
        kind: One of :data:`CHAT_KINDS`.
        slots: Slot name -> text (see :attr:`Template.slots`).
        prompts: The templates (default: :func:`released_prompts`).

    Raises:
        KeyError: An unknown kind, or a slot without a value.
    """
    system, user = (prompts or released_prompts()).chats[kind]
    messages = [] if system is None else [{"role": "system", "content": system.render(slots)}]
    return [*messages, {"role": "user", "content": user.render(slots)}]


# --------------------------------------------------------------------------- slot values


class ItemFacts(NamedTuple):
    """What the released page shows of an item: its title, mean rating and summary."""

    title: str
    rating: float
    summary: str


def item_facts(dataset: Dataset) -> dict[str, ItemFacts]:
    """Every item's released-page facts, by id: title, mean rating, summary.

    The title is ``Title (year)`` as the catalogue writes it; the summary is the items'
    ``summary`` column where they have one (else empty).
    """
    if dataset.items is None:
        raise ValueError(f"{dataset.name}: the released prompts need item titles")
    mean = item_mean_ratings(dataset)
    facts = {}
    for row in dataset.items.to_dict("records"):
        year = row.get(YEAR)
        title = str(row[TITLE]) + (f" ({int(year)})" if year is not None and pd.notna(year) else "")
        summary = row.get("summary")
        facts[row[ITEM]] = ItemFacts(
            title,
            float(mean.get(row[ITEM], float("nan"))),
            summary if isinstance(summary, str) else "",
        )
    return facts


def item_slots(item: ItemFacts) -> dict[str, str]:
    """The item line's slots, formatted as the authors' code formats them (2-decimal round)."""
    return {"item.title": item.title, "str(round(item.rating, 2))": str(round(item.rating, 2)),
            "item.summary": item.summary}  # fmt: skip


def page_items_text(items: Sequence[ItemFacts], prompts: ReleasedPrompts | None = None) -> str:
    """All item lines of one page, as one block."""
    line = (prompts or released_prompts()).item_line
    return "".join(line.render(item_slots(item)) for item in items)


def memory_block(memories: Sequence[str]) -> str:
    """Recalled memories as the released prompts list them: one ``- `` line each."""
    return "\n".join(f"- {m.strip()}" for m in memories)


def taste_text(tastes: Sequence[str]) -> str:
    """The tastes slot: the taste phrases joined by ``; `` with the leading ``I `` dropped."""
    return "; ".join(tastes).replace("I ", "")


def persona_parts(persona: str) -> tuple[list[str], str]:
    """``(tastes, rates highly)`` from a persona in our format (:func:`.prompts.persona_text`).

    Our persona lists one ``- taste (reason)`` line per taste and ``I rate highly: ...``; the
    released prompt takes the taste phrases (reasons left out) and the rating tendency.
    """
    tastes, high = [], ""
    for line in persona.splitlines():
        if line.startswith("- "):
            tastes.append(re.sub(r"\s*\([^()]*\)\s*$", "", line[2:]).strip())
        elif line.startswith("I rate highly:"):
            high = line.split(":", 1)[1].strip()
    return tastes, high


def agent_slots(
    traits: Mapping[str, int], tastes: Sequence[str], rates_high: str, avatar_id: str,
    prompts: ReleasedPrompts | None = None,
) -> dict[str, str]:  # fmt: skip
    """The slots every released prompt of one agent shares: traits, tastes, rating tendency."""
    table = (prompts or released_prompts()).traits
    return {
        "activity_dsc": table["activity"][traits["activity"]],
        "conformity_dsc": table["conformity"][traits["conformity"]],
        "diversity_dsc": table["diversity"][traits["diversity"]],
        "'; '.join(taste).replace('I ', '')": taste_text(tastes),
        "high_rating": rates_high.replace("You are", ""),
        "avatar_id": avatar_id,
    }


def page_memory_slots(page: int, titles: Sequence[str], reading: PageReading) -> dict[str, str]:
    """The slots of the released page memory, from our reading of the page reply.

    What was watched and its rating in reply order; "disliked" is every item rated below 4,
    then every item judged not aligned (the released code's rule, duplicates kept).
    """
    rated = [(titles[i], r) for i, r in reading.rated_in_order]
    disliked = [t for t, r in rated if r < 4]
    disliked += [titles[i] for i, item in enumerate(reading.items) if item["aligned"] is False]
    return {
        "current_page": str(page),
        "all_movies": ", ".join(titles),
        "watched_movies": str([t for t, _ in rated]),
        "watched_movies_ratings": str([str(r) for _, r in rated]),
        "dislike_movies": str(disliked),
        "current_page + 1": str(page + 1),
    }


# --------------------------------------------------------------------------- reply parsers

#: The field keys of the three released reply formats (``KEY: value;``).
REPLY_KEYS = ("MOVIE", "ALIGN", "REASON", "NUM", "WATCH", "RATING", "FEELING")
_KEY = re.compile(r"\b(" + "|".join(REPLY_KEYS) + r")\s*:\s*")
_BULLET = re.compile(r"^[\s>*#\-•]*(?:\d+[.)]\s*)?")
_ARTICLES = {"the", "a", "an"}
#: Lowest rapidfuzz ratio at which a written title is taken for a shown one.
FUZZY_MIN = 85.0


def _fields(line: str) -> dict[str, str]:
    """``KEY: value`` fields of one reply line (first occurrence of each key kept)."""
    line = _BULLET.sub("", line).replace("**", "")
    marks = list(_KEY.finditer(line))
    out: dict[str, str] = {}
    for mark, after in zip(marks, [*marks[1:], None], strict=False):
        value = line[mark.end() : after.start() if after else len(line)]
        out.setdefault(mark.group(1), value.strip().rstrip(";").strip().strip("[]\"'").strip())
    return out


def _words(title: str, drop_articles: bool = False) -> str:
    words = re.findall(r"[a-z0-9]+", title.lower())
    return " ".join(w for w in words if not (drop_articles and w in _ARTICLES))


def _no_year(title: str) -> str:
    return re.sub(r"\s*\(\d{4}\)\s*$", "", title)


def match_title(written: str, titles: Sequence[str]) -> int | None:
    """The position of the shown title a reply names, or ``None`` when it is not clear.

    Exact after lower-casing and dropping punctuation; then with articles dropped (``The
    Lion King`` = ``Lion King, The``); then both without the ``(year)``; then a title whose
    words contain the written ones as a run (or the reverse); then the best rapidfuzz ratio
    of at least :data:`FUZZY_MIN`. Each step must single out one title.
    """
    steps = (
        lambda t: _words(t),
        lambda t: _words(t, True),
        lambda t: _words(_no_year(t), True),
    )
    for words in steps:
        key = words(written)
        hits = [i for i, t in enumerate(titles) if key and words(t) == key]
        if len(hits) == 1:
            return hits[0]
    key = _words(written, True)
    if len(key) >= 3:
        padded = f" {key} "
        hits = [
            i for i, t in enumerate(titles)
            if padded in f" {_words(t, True)} " or f" {_words(t, True)} " in padded
        ]  # fmt: skip
        if len(hits) == 1:
            return hits[0]
    scores = [fuzz.ratio(key, _words(t, True)) for t in titles]
    best = max(range(len(titles)), key=scores.__getitem__, default=None)
    if best is None or scores[best] < FUZZY_MIN or scores.count(scores[best]) > 1:
        return None
    return best


def _named_in(text: str, titles: Sequence[str]) -> list[int]:
    """Positions of the shown titles that occur in a free list such as a WATCH line."""
    key = f" {_words(text, True)} "
    forms = [{_words(t, True), _words(_no_year(t), True)} - {""} for t in titles]
    return [i for i, found in enumerate(forms) if any(f" {f} " in key for f in found)]


@dataclass
class PageReading:
    """Our reading of one page reply.

    Attributes:
        items: Per shown item, in page order: ``aligned`` (bool or None), ``watched``,
            ``rating`` (1-5 or None) and ``feeling``.
        num_watched: The number the reply says it watches (None when absent).
        rated_in_order: ``(position, rating)`` of each rating line, in reply order.
        problems: Every problem met, one name per occurrence.
    """

    items: list[dict[str, object]]
    num_watched: int | None = None
    rated_in_order: list[tuple[int, int]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse_page_reply(reply: str, titles: Sequence[str]) -> PageReading:
    """Read a page reply: per item aligned / watched / rating / feeling, and the NUM line.

    An item is watched when the reply rates it; when no item is rated, the items the
    ``WATCH`` line names are watched without a rating. Problems are named: ``no_align``
    (no alignment line), ``title_unmatched`` (a line names no shown title),
    ``duplicate_align`` / ``duplicate_rating``, ``rating_invalid`` (not an integer 1-5),
    ``watched_unrated`` (watched by the WATCH line only), ``watch_list_differs`` (the WATCH
    line names other items than those rated), ``num_differs`` (NUM is not the number
    watched).
    """
    n = len(titles)
    reading = PageReading([{"aligned": None, "watched": False, "rating": None, "feeling": ""}
                           for _ in range(n)])  # fmt: skip
    problems = reading.problems
    aligned_seen: set[int] = set()
    listed: list[int] | None = None
    for line in reply.splitlines():
        fields = _fields(line)
        if "NUM" in fields or ("WATCH" in fields and "MOVIE" not in fields):
            number = re.match(r"\d+", fields.get("NUM", ""))
            if number and reading.num_watched is None:
                reading.num_watched = int(number.group())
            if "WATCH" in fields and listed is None:
                listed = _named_in(fields["WATCH"], titles)
            continue
        if "MOVIE" not in fields or not ({"ALIGN", "RATING"} & fields.keys()):
            continue
        position = match_title(fields["MOVIE"], titles)
        if position is None:
            problems.append("title_unmatched")
            continue
        item = reading.items[position]
        if "ALIGN" in fields:
            if position in aligned_seen:
                problems.append("duplicate_align")
                continue
            aligned_seen.add(position)
            answer = fields["ALIGN"].lower()
            item["aligned"] = (
                True if answer.startswith("yes") else False if answer.startswith("no") else None
            )
            continue
        if item["watched"]:
            problems.append("duplicate_rating")
            continue
        rating = re.match(r"\d+", fields["RATING"])
        item["watched"] = True
        item["feeling"] = fields.get("FEELING", "")
        if rating and 1 <= int(rating.group()) <= 5:
            item["rating"] = int(rating.group())
            reading.rated_in_order.append((position, int(rating.group())))
        else:
            problems.append("rating_invalid")
    if not aligned_seen:
        problems.append("no_align")
    rated = {i for i, item in enumerate(reading.items) if item["watched"]}
    if listed and not rated:
        for i in listed:
            reading.items[i]["watched"] = True
        problems.append("watched_unrated")
    elif listed is not None and set(listed) != rated and rated:
        problems.append("watch_list_differs")
    watched = sum(bool(item["watched"]) for item in reading.items)
    if reading.num_watched is not None and reading.num_watched != watched:
        problems.append("num_differs")
    return reading


class ExitReading(NamedTuple):
    """Our reading of one exit reply: feeling, decision, and the problems met."""

    feeling: str | None
    decision: str | None
    problems: tuple[str, ...]


#: Phrases that state a decision in words, when no token does.
_DECISION_WORDS = {
    "next": re.compile(r"\b(?:continue|keep) browsing\b", re.IGNORECASE),
    "exit": re.compile(r"\b(?:exit|leave) the (?:recommend|system|website)", re.IGNORECASE),
}


def _decision_in_words(reply: str) -> str | None:
    """``next`` or ``exit`` when the reply's last sentence-level statement says only one."""
    said = {
        d
        for d, phrase in _DECISION_WORDS.items()
        if phrase.search(reply.splitlines()[-1] if reply.strip() else "")
    }
    return said.pop() if len(said) == 1 else None


def parse_exit_reply(reply: str) -> ExitReading:
    """Read an exit reply: ``positive``/``negative`` and ``next``/``exit``.

    The decision is the bracketed token (``[NEXT]`` / ``[EXIT]``, any case). Both present:
    the last one counts (``both_decisions``); none: a bare word after ``Decision:`` or at
    the start of a line counts (``decision_unbracketed``); else a last line that says only
    one of "continue browsing" or "exit/leave the system" (``decision_in_words``); else
    ``None`` (``no_decision``).
    The feeling is the first line that starts with ``POSITIVE`` or ``NEGATIVE``
    (``no_feeling`` when none does).
    """
    problems = []
    tokens = re.findall(r"\[\s*(next|exit)\s*\]", reply, flags=re.IGNORECASE)
    decision = tokens[-1].lower() if tokens else None
    if len({t.lower() for t in tokens}) > 1:
        problems.append("both_decisions")
    if decision is None:
        bare = re.search(
            r"(?:decision\W*|^\W*)(next|exit)\b", reply, flags=re.IGNORECASE | re.MULTILINE
        )
        decision = bare.group(1).lower() if bare else _decision_in_words(reply)
        problems.append(
            "decision_unbracketed" if bare else "decision_in_words" if decision else "no_decision"
        )
    feeling = re.search(r"^\W*(positive|negative)\b", reply, flags=re.IGNORECASE | re.MULTILINE)
    if feeling is None:
        problems.append("no_feeling")
    return ExitReading(feeling.group(1).lower() if feeling else None, decision, tuple(problems))


class InterviewReading(NamedTuple):
    """Our reading of one interview reply: the 1-10 rating, the reason, the problems met."""

    rating: int | None
    reason: str
    problems: tuple[str, ...]


def parse_interview_reply(reply: str) -> InterviewReading:
    """Read an interview reply: the integer after ``RATING:`` (1-10) and the ``REASON``.

    ``no_rating`` when no ``RATING:`` carries a number, ``rating_out_of_range`` outside
    1-10, ``rating_not_integer`` for a fraction such as 7.5 (kept as missing).
    """
    problems = []
    found = re.search(r"RATING\W*?:?\s*\[?\s*(\d+(?:\.\d+)?)", reply, flags=re.IGNORECASE)
    rating = None
    if found is None:
        problems.append("no_rating")
    elif "." in found.group(1):
        problems.append("rating_not_integer")
    elif not 1 <= int(found.group(1)) <= 10:
        problems.append("rating_out_of_range")
    else:
        rating = int(found.group(1))
    reason = re.search(r"REASON\s*:\s*(.*)", reply, flags=re.IGNORECASE | re.DOTALL)
    return InterviewReading(rating, reason.group(1).strip() if reason else "", tuple(problems))
