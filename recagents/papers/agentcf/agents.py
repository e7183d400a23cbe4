"""AgentCF's agents and their training: memories, and the collaborative reflection loop.

:class:`AgentState` holds every user's and item's text memory; :func:`initial_state` builds
the untrained agents. :func:`train` replays the scheduled pairs: the user agent chooses
between the real item and a negative, then user and items rewrite their memories, with the
paper's ablations as modes.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import GENRES, ITEM, TITLE, USER
from recagents.data.datasets import Dataset, readable_title
from recagents.llm.client import LLMClient, get_client
from recagents.llm.runlog import RunContext, RunLog
from recagents.papers.agentcf.config import (
    ABLATIONS,
    BATCH,
    NEGATIVE,
    POSITIVE,
    SLOT,
    STEP,
    AgentCFConfig,
)
from recagents.papers.agentcf.prompts import (
    choice_schema,
    domain_wording,
    forward_messages,
    item_reflection_messages,
    item_reflection_schema,
    parse_choice,
    text_field,
    user_reflection_messages,
    user_reflection_schema,
)
from recagents.papers.agentcf.subsets import Subset

# --------------------------------------------------------------------------- agents


@dataclass
class AgentState:
    """Every agent's memory at one moment of training.

    Attributes:
        user_memory: Short-term memory: the user's current self-description.
        user_versions: Long-term memory: the initial self-description, then one saved version
            per training batch the user took part in.
        item_memory: Each item's descriptions, oldest first; the last is current.
    """

    user_memory: dict[str, str]
    user_versions: dict[str, list[str]]
    item_memory: dict[str, list[str]]

    def copy(self) -> AgentState:
        """An independent copy (training never changes the state it was given)."""
        return copy.deepcopy(self)

    def item(self, item_id: str) -> str:
        """The item's current description."""
        return self.item_memory[item_id][-1]


_NO_OCCUPATION = {"", "none", "other", "nan"}
#: The items column with the paper's CD category text (:func:`recagents.data.released.load_cds`).
_CATEGORY = "category"


def initial_user_memory(features: dict[str, Any] | None, domain: str | None = "movie") -> str:
    """A user's first self-description, from gender and occupation when the data has them.

    Like the paper's branch for datasets with user features (MovieLens); a missing or
    "other" occupation becomes a domain enthusiast. Without features, one generic sentence
    for every user (as on CDs).
    """
    domain = domain_wording(domain).noun
    features = features or {}
    gender = {"M": "man", "F": "woman"}.get(str(features.get("gender", "")).upper(), "")
    occupation = str(features.get("occupation", "") or "").strip().lower()
    who = f"I am a {gender}" if gender else "I am a person"
    if occupation in _NO_OCCUPATION:
        who += f" with a keen interest in {domain}s."
    else:
        article = "an" if occupation[0] in "aeiou" else "a"
        who += f" and I work as {article} {occupation}."
    if not features:
        who = f"I enjoy {domain}s."
    return f"{who} I have not yet worked out which kinds of {domain}s I like and dislike."


def initial_item_memory(
    genres: Sequence[str],
    domain: str | None = "movie",
    title: str | None = None,
    category: str | None = None,
) -> str:
    """An item's first description: its categories (the title is always shown beside it).

    A domain with the paper's own first description (CDs: "The CD is called '...'. The
    category of this CD is: '...'.") uses it when the item has a title and a category;
    otherwise the genre sentence ("A movie of the genres ...").
    """
    words = domain_wording(domain)
    domain = words.noun
    if words.first_description is not None and _text(title) and _text(category):
        return words.first_description.format(noun=domain, title=title, category=category)
    genres = [g for g in genres if g and g.lower() != "unknown"]
    if not genres:
        return f"A {domain}."
    return f"A {domain} of the genres {', '.join(genres)}."


def _text(value: Any) -> bool:
    """Whether a table cell is a non-empty string (a missing one is NaN or ``None``)."""
    return isinstance(value, str) and bool(value.strip())


def item_titles(dataset: Dataset, move_article: bool = True) -> dict[str, str]:
    """Readable titles by item id; an item without a title is called by its id."""
    items = dataset.items
    titles: dict[str, str] = {}
    if items is not None and TITLE in items:
        for item_id, title in items[[ITEM, TITLE]].itertuples(index=False):
            titles[item_id] = readable_title(str(title), move_article)
    for item_id in dataset.interactions[ITEM].unique():
        titles.setdefault(item_id, f"item {item_id}")
    return titles


def initial_state(dataset: Dataset, subset: Subset, domain: str | None = None) -> AgentState:
    """Untrained agents: every user of the subset, and every item of the dataset.

    ``domain`` names the items in the memories (``None``: ``dataset.domain``). Items outside
    the subset never train, but a candidate list drawn from the whole dataset
    (``pool="dataset"``) still shows them with their initial description.
    """
    domain = domain or dataset.domain
    users = dataset.users.set_index(USER) if dataset.users is not None else None
    user_memory = {}
    for user in subset.users:
        features = None
        if users is not None and user in users.index:
            features = users.loc[user].to_dict()
        user_memory[user] = initial_user_memory(features, domain)
    genres, raw_titles, categories = _item_columns(dataset)
    item_memory = {
        item: [
            initial_item_memory(
                genres.get(item, ()), domain, raw_titles.get(item), categories.get(item)
            )
        ]
        for item in sorted(set(dataset.interactions[ITEM]) | set(subset.windows[ITEM]))
    }
    return AgentState(
        user_memory=user_memory,
        user_versions={u: [m] for u, m in user_memory.items()},
        item_memory=item_memory,
    )


def _item_columns(dataset: Dataset) -> tuple[dict, dict, dict]:
    """Genres, titles (as stored) and categories by item id, each empty when absent."""
    items = dataset.items
    columns = []
    for column in (GENRES, TITLE, _CATEGORY):
        if items is not None and column in items:
            columns.append(dict(zip(items[ITEM], items[column], strict=True)))
        else:
            columns.append({})
    return columns[0], columns[1], columns[2]


def verbalised_history(titles: Sequence[str], domain: str | None = "movie") -> str:
    """A user described by their history alone (the "without user agent" ablation)."""
    words = domain_wording(domain)
    domain = words.noun
    if not titles:
        return f"I have not {words.past} any {domain}s yet."
    return f"These are the {domain}s I chose recently, oldest first: " + "; ".join(titles) + "."


# --------------------------------------------------------------------------- training


def pair_texts(
    state: AgentState, titles: dict[str, str], positive: str, negative: str, positive_first: bool
) -> tuple[str, str, int]:
    """The two lines shown, and which of them (1 or 2) is the positive."""
    pos = f"{titles[positive]}: {state.item(positive)}"
    neg = f"{titles[negative]}: {state.item(negative)}"
    return (pos, neg, 1) if positive_first else (neg, pos, 2)


def positive_first(config: AgentCFConfig, rng: np.random.Generator) -> bool:
    """Whether a pair shows the real item first (``pair_order``; ``random`` draws from ``rng``)."""
    if config.pair_order == "neg_first":
        return False
    if config.pair_order == "pos_first":
        return True
    return bool(rng.integers(2))


def train(
    state: AgentState,
    pairs: pd.DataFrame,
    subset: Subset,
    titles: dict[str, str],
    config: AgentCFConfig | None = None,
    mode: Literal["full", "no_autonomy", "no_item_agent", "no_user_agent"] = "full",
    client: LLMClient | None = None,
    phase: str = "train",
    progress: bool = True,
) -> tuple[AgentState, RunLog]:
    """Collaborative reflection over scheduled pairs; returns the trained copy and its log.

    Per batch (all calls of a batch see the same memory state and run concurrently):

    - round 0: every user agent chooses; every user reflects (the "right" or "wrong"
      variant), then the items reflect on the *updated* user text;
    - later rounds: every user chooses again; wrong pairs reflect on both sides, right
      pairs on the item side only;
    - end of batch: each user's self-description is saved as a long-term version.

    When an item occurs twice in a batch, the later pair's rewrite wins (as in the paper;
    ``batch_size=1`` makes updates sequential). Failed calls are counted in the log and
    leave memories unchanged.

    Modes (the paper's ablations):

    - ``no_autonomy``: no forward choice; each pair gets one user and one item reflection
      told the real preference only;
    - ``no_item_agent``: items keep their first description; users reflect;
    - ``no_user_agent``: the user is their verbalised history and never reflects; items do.

    Args:
        state: Memories to start from (not modified).
        pairs: Output of :func:`schedule`.
        subset: The subset the pairs come from (for histories).
        titles: Item titles by id.
        config: Settings (default: the paper's).
        mode: One of :data:`ABLATIONS`.
        client: LLM client (default: the process-wide one).
        phase: Label of these calls in the log (for :func:`cost_table`).
        progress: Show a progress bar over batches.
    """
    from tqdm.auto import tqdm

    if mode not in ABLATIONS:
        raise ValueError(f"mode must be one of {ABLATIONS}, got {mode!r}")
    config = config or AgentCFConfig()
    ctx = RunContext(client or get_client(), RunLog(), phase)
    state = state.copy()
    rng = np.random.default_rng(config.seed)
    batches = list(pairs.groupby(BATCH, sort=True))
    bar = tqdm(batches, desc=f"AgentCF {mode}", disable=not progress)
    for batch_id, batch in bar:
        rows = batch.to_dict("records")
        for row in rows:
            row["positive_first"] = positive_first(config, rng)
        train_batch(ctx, state, rows, int(batch_id), subset, titles, config, mode)
        if progress:
            forward = [
                e for e in ctx.log.events if e["kind"] == "forward" and e["correct"] is not None
            ]
            if forward:
                bar.set_postfix(pair_acc=f"{np.mean([e['correct'] for e in forward]):.2f}")
    return state, ctx.log


def train_batch(
    ctx: RunContext,
    state: AgentState,
    rows: list[dict[str, Any]],
    batch_id: int,
    subset: Subset,
    titles: dict[str, str],
    config: AgentCFConfig,
    mode: str = "full",
) -> None:
    """One batch of collaborative reflection, in place: rounds of choice and reflection.

    Each round: the pairs' outcomes (:func:`pair_outcomes`), the user agents' choices
    (:func:`forward_choices`, skipped by ``no_autonomy``), then the reflections of the users
    and items :func:`reflecting_pairs` selects (:func:`reflect_users`, :func:`reflect_items`).
    At the end every user of the batch saves its self-description as a long-term version.

    Args:
        ctx: Client, log and phase of the calls.
        state: The memories, changed in place.
        rows: The batch's pairs, each with its ``positive_first`` drawn.
        batch_id: The batch's number (stamped on every event).
        subset: The subset (for histories).
        titles: Item titles by id.
        config: Settings.
        mode: One of :data:`ABLATIONS`.
    """
    rounds = 1 if mode == "no_autonomy" else config.rounds
    for round_index in range(rounds):
        where = {"batch": batch_id, "round": round_index}
        outcomes = pair_outcomes(state, rows, subset, titles, mode, config.domain)
        if mode != "no_autonomy":
            outcomes = forward_choices(ctx, outcomes, config, where)
        users_reflect, items_reflect = reflecting_pairs(outcomes, round_index, mode)
        reflect_users(ctx, state, users_reflect, config, where)
        reflect_items(ctx, state, items_reflect, config, where)
    for user in dict.fromkeys(r[USER] for r in rows):
        state.user_versions[user].append(state.user_memory[user])


def reflecting_pairs(
    outcomes: list[dict[str, Any]], round_index: int, mode: str = "full"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Which pairs' user agents and item agents reflect after a round (the paper's cases).

    Round 0: every answered pair reflects on both sides. Later rounds: wrong pairs on both
    sides, right pairs on the item side only. ``no_user_agent`` drops the user side,
    ``no_item_agent`` the item side.

    Returns:
        ``(user_side, item_side)``, each a sub-list of ``outcomes`` in order.
    """
    users = [o for o in outcomes if round_index == 0 or o["correct"] is False]
    items = list(outcomes)
    if mode == "no_user_agent":
        users = []
    if mode == "no_item_agent":
        items = []
    return users, items


def apply_user_reflection(state: AgentState, user: str, data: Any) -> tuple[str, str | None]:
    """Store a user reflection's new self-description; a reply without one changes nothing.

    Returns:
        ``(before, after)``, ``after`` being ``None`` when the reply was unusable.
    """
    before = state.user_memory[user]
    after = text_field(data, "self_description")
    if after is not None:
        state.user_memory[user] = after
    return before, after


def apply_item_reflection(
    state: AgentState, positive: str, negative: str, data: Any, update_negative: bool = False
) -> list[dict[str, Any]]:
    """Store an item reflection: the positive's new description, the negative's if asked.

    The reply holds both rewrites; the paper stores only the positive's. An unusable reply
    changes nothing.

    Returns:
        One record per item: ``item_id, role, before, after, stored``.
    """
    records = []
    for role, item, key, store in (
        (POSITIVE, positive, "preferred", True),
        (NEGATIVE, negative, "other", update_negative),
    ):
        before = state.item(item)
        after = text_field(data, key)
        if after is not None and store:
            state.item_memory[item].append(after)
        stored = after is not None and store
        records.append(
            {ITEM: item, "role": role, "before": before, "after": after, "stored": stored}
        )
    return records


def _user_text(state: AgentState, subset: Subset, titles: dict, row: dict, mode: str, domain):
    if mode == "no_user_agent":
        history = subset.history(row[USER], row[SLOT])
        return verbalised_history([titles[i] for i in history], domain)
    return state.user_memory[row[USER]]


def pair_outcomes(
    state: AgentState,
    rows: Sequence[dict[str, Any]],
    subset: Subset,
    titles: dict[str, str],
    mode: str = "full",
    domain: str | None = "movie",
) -> list[dict[str, Any]]:
    """What a round starts from: per pair, the two lines shown and the user as it stands.

    Returns:
        One outcome per row: the row, ``first``, ``second``, ``preferred`` (1 or 2),
        ``user_text``, and ``chosen``, ``explanation``, ``correct`` still ``None``.
    """
    outcomes = []
    for row in rows:
        first, second, preferred = pair_texts(
            state, titles, row[POSITIVE], row[NEGATIVE], row["positive_first"]
        )
        outcomes.append(
            {
                **row,
                "first": first,
                "second": second,
                "preferred": preferred,
                "chosen": None,
                "explanation": None,
                "correct": None,
                "user_text": _user_text(state, subset, titles, row, mode, domain),
            }
        )
    return outcomes


def forward_choices(
    ctx: RunContext,
    outcomes: list[dict[str, Any]],
    config: AgentCFConfig,
    where: dict[str, int],
) -> list[dict[str, Any]]:
    """The forward step: every user agent chooses between its pair's two items.

    The requests run as one batch (kind ``forward``); each choice is written into its
    outcome and logged as a ``forward`` event stamped with ``where`` (batch and round).

    Returns:
        The outcomes whose reply named an option, in order (the others reflect on nothing).
    """
    messages = [
        forward_messages(o["user_text"], o["first"], o["second"], config.domain) for o in outcomes
    ]
    results = ctx.ask(
        "forward", [o[USER] for o in outcomes], messages, choice_schema(),
        temperature=config.temperature, max_tokens=220, progress=False,
    )  # fmt: skip
    kept = []
    for outcome, result in zip(outcomes, results, strict=True):
        chosen = parse_choice(result.data) if result.ok else None
        if chosen is not None:
            outcome["chosen"] = chosen
            outcome["explanation"] = text_field(result.data, "explanation") or ""
            outcome["correct"] = chosen == outcome["preferred"]
            kept.append(outcome)
        ctx.log.events.append(_forward_event(outcome, where, chosen is not None))
    return kept


def _forward_event(outcome: dict[str, Any], where: dict[str, int], ok: bool) -> dict[str, Any]:
    """The teaching-trace row of one forward choice."""
    return {
        **where,
        "kind": "forward",
        USER: outcome[USER],
        STEP: outcome[STEP],
        POSITIVE: outcome[POSITIVE],
        NEGATIVE: outcome[NEGATIVE],
        "positive_first": outcome["positive_first"],
        "chosen": outcome["chosen"],
        "correct": outcome["correct"],
        "explanation": outcome["explanation"],
        "ok": ok,
    }


def _reflection_texts(
    outcome: dict[str, Any], user_text: str
) -> tuple[str, str, str, int, int | None, str | None]:
    """The arguments both reflection prompts share, in their order."""
    return (
        user_text,
        outcome["first"],
        outcome["second"],
        outcome["preferred"],
        outcome["chosen"],
        outcome["explanation"],
    )


def reflect_users(
    ctx: RunContext,
    state: AgentState,
    outcomes: list[dict[str, Any]],
    config: AgentCFConfig,
    where: dict[str, int],
) -> None:
    """User agents rewrite their self-descriptions after their pairs (in place).

    One request per outcome (kind ``user_reflection``); a usable reply replaces the user's
    memory and the outcome's ``user_text`` (which the item reflections then read); every
    memory before and after is logged as an event stamped with ``where``.
    """
    if not outcomes:
        return
    messages = [
        user_reflection_messages(
            *_reflection_texts(o, state.user_memory[o[USER]]), config.domain, config.user_words
        )
        for o in outcomes
    ]
    results = ctx.ask(
        "user_reflection", [o[USER] for o in outcomes], messages,
        user_reflection_schema(config.user_words), temperature=config.temperature,
        max_tokens=2 * config.user_words + 60, progress=False,
    )  # fmt: skip
    for outcome, result in zip(outcomes, results, strict=True):
        before, after = apply_user_reflection(state, outcome[USER], result.data)
        if after is not None:
            outcome["user_text"] = after
        ctx.log.events.append(
            {
                **where,
                "kind": "user_reflection",
                USER: outcome[USER],
                STEP: outcome[STEP],
                "correct": outcome["correct"],
                "before": before,
                "after": after or before,
                "ok": after is not None,
            }
        )


def reflect_items(
    ctx: RunContext,
    state: AgentState,
    outcomes: list[dict[str, Any]],
    config: AgentCFConfig,
    where: dict[str, int],
) -> None:
    """Item agents rewrite their descriptions from the user's (updated) text (in place).

    One request per outcome (kind ``item_reflection``) holding both items' rewrites; what is
    stored follows :func:`apply_item_reflection`; each item's before and after is logged.
    """
    if not outcomes:
        return
    messages = [
        item_reflection_messages(
            *_reflection_texts(o, o["user_text"]), config.domain, config.item_words
        )
        for o in outcomes
    ]
    results = ctx.ask(
        "item_reflection", [o[USER] for o in outcomes], messages,
        item_reflection_schema(config.item_words), temperature=config.temperature,
        max_tokens=4 * config.item_words + 60, progress=False,
    )  # fmt: skip
    for outcome, result in zip(outcomes, results, strict=True):
        records = apply_item_reflection(
            state, outcome[POSITIVE], outcome[NEGATIVE], result.data, config.update_negative
        )
        for record in records:
            ctx.log.events.append(
                {
                    **where,
                    "kind": "item_reflection",
                    USER: outcome[USER],
                    STEP: outcome[STEP],
                    "correct": outcome["correct"],
                    **record,
                    "after": record["after"] or record["before"],
                    "ok": record["after"] is not None,
                }
            )
