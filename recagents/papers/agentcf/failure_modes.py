"""What went wrong with the embedded model in an AgentCF run: its failure modes, by code.

Why: with a 135M model the run's numbers sit at chance, which alone teaches nothing. The
replies show *how* it fails, and each way is a :class:`~recagents.failures.FailureMode`
counted over the run by :func:`~recagents.failures.classify`, with a real example:

- the user agents (one unit per user, training and re-test choices): :data:`AGENT_MODES`;
- the choices' explanations (one per forward reply): :data:`EXPLANATION_MODES`;
- the memory rewrites (every user and every stored item reflection): :data:`MEMORY_MODES`;
- the ranking replies (one per user and LLM ranker): :data:`RANKING_MODES`.

:func:`failure_reports` builds the units from a run's events, probe and rankings and returns
the four reports; :func:`failure_table` stacks their tables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from recagents.columns import ITEM, USER
from recagents.data.datasets import POSITION
from recagents.failures import FailureMode, FailureReport, classify, has_placeholder
from recagents.papers.agentcf.config import NEGATIVE, POSITIVE, STEP
from recagents.papers.agentcf.evaluate import RankOutcome
from recagents.papers.agentcf.scripted import content_words

Unit = dict[str, Any]

#: An option named by its number ("CD 2", "Cd 1", "movie 2", "option 1").
OPTION_NUMBER = re.compile(r"\b(?:cd|movie|option|item|product|book)'?s? ?#?[12]\b", re.I)
#: A stated preference for an option by number ("I prefer the CD 2 over ...").
PREFERS_NUMBER = re.compile(r"\bprefer(?:s|red)? (?:the )?(?:\w+ )?([12])\b", re.I)
#: Fewer words than this make a memory a bare label rather than a description.
BARE_WORDS = 4


def _one_position(unit: Unit) -> bool:
    """Every choice at one position, in both orders of the same pairs."""
    return len(set(unit["positions"])) == 1 and len(unit["orders"]) == 2


AGENT_MODES: tuple[FailureMode[Unit], ...] = (
    FailureMode(
        "one_position",
        "picks the same position in every choice, whichever item stands there",
        "a 135M model does not compare the two texts; its choice follows the layout of the "
        "prompt, so with the negative shown first (the paper's order) training accuracy is 0, "
        "and asked again in the other order it 'changes its mind'.",
        _one_position,
    ),
)


def _no_item_words(unit: Unit) -> bool:
    return not set(content_words(unit["text"])) & set(content_words(unit["pair"]))


def _prefers_other(unit: Unit) -> bool:
    stated = PREFERS_NUMBER.search(unit["text"])
    return stated is not None and int(stated.group(1)) != unit["chosen"]


EXPLANATION_MODES: tuple[FailureMode[Unit], ...] = (
    FailureMode(
        "no_item_words",
        "gives a reason that names nothing of either item (no title, artist or category)",
        "it continues the prompt's wording, or writes a bare number, instead of reasoning "
        "about the items: holding two descriptions and a self-description at once is beyond "
        "it.",
        _no_item_words,
    ),
    FailureMode(
        "prefers_other",
        "says it prefers the option it did not choose",
        "the reason is generated after the choice field and is not tied to it.",
        _prefers_other,
    ),
)


def _bare(unit: Unit) -> bool:
    return len(str(unit["after"]).split()) < BARE_WORDS


def _names_other(unit: Unit) -> bool:
    after, other, own = (str(unit[k]).lower() for k in ("after", "other_title", "own_title"))
    return unit["side"] == "item" and bool(other) and other in after and own not in after


MEMORY_MODES: tuple[FailureMode[Unit], ...] = (
    FailureMode(
        "option_number",
        'writes an option\'s number ("CD 2") into the memory',
        "it copies the prompt's labels; in the next prompt the numbers point at other items, "
        "so the memory says nothing.",
        lambda unit: bool(OPTION_NUMBER.search(str(unit["after"]))),
    ),
    FailureMode(
        "bare_label",
        f"shrinks the memory to fewer than {BARE_WORDS} words (a title, a label, one word)",
        "a short reply is the likeliest continuation for a small model; the category every "
        "later user read is lost.",
        _bare,
    ),
    FailureMode(
        "names_other_item",
        "writes the other item's title into this item's memory",
        "it does not keep the two options of the prompt apart.",
        _names_other,
    ),
    FailureMode(
        "unchanged",
        "returns the memory unchanged",
        "asked to rewrite a text, copying it is the most likely continuation.",
        lambda unit: str(unit["after"]).strip() == str(unit["before"]).strip(),
    ),
    FailureMode(
        "placeholder",
        'copies a template placeholder ("[Your Name]", "<...>")',
        "it has seen such templates in training and continues them.",
        lambda unit: has_placeholder(str(unit["after"])),
    ),
)


def _in_display_order(unit: Unit) -> bool:
    """The reply counts up through the shown numbers (1, 2, 3, ... possibly from another start)."""
    shown = unit["positions"][: max(1, len(unit["positions"]) - unit["missing"])]
    n = len(unit["positions"])
    return all((b - a) % n == 1 for a, b in zip(shown, shown[1:], strict=False))


RANKING_MODES: tuple[FailureMode[Unit], ...] = (
    FailureMode(
        "display_order",
        "lists the candidates in the order they were shown (1, 2, 3, ...)",
        "counting is the likeliest number sequence; the test item's place in the list, not "
        "its memory, decides its rank, so every ranker scores about a random order.",
        _in_display_order,
    ),
    FailureMode(
        "repeats_number",
        "repeats a number and leaves a candidate out",
        "it loses count of which numbers it has written.",
        lambda unit: unit["duplicates"] > 0 or unit["missing"] > 0,
    ),
)


def agent_units(events: pd.DataFrame, probe: pd.DataFrame) -> list[Unit]:
    """One unit per user agent: the position of every training and re-test choice."""
    forward = events[(events["kind"] == "forward") & events["ok"]]
    answered = probe[probe["ok"]]
    units = []
    for user in dict.fromkeys([*forward[USER], *answered[USER]]):
        mine, asked = forward[forward[USER] == user], answered[answered[USER] == user]
        retest = {
            order: [1 if first else 2 for first in group["chose_first"]]
            for order, group in asked.groupby("order", sort=True)
        }
        positions = [int(c) for c in mine["chosen"]] + sum(retest.values(), [])
        orders = {"pos_first" if p else "neg_first" for p in mine["positive_first"]} | set(retest)
        text = (
            f"user {user}: options chosen in training {[int(c) for c in mine['chosen']]}, "
            f"in the re-test by order {retest}"
        )
        units.append({"positions": positions, "orders": orders, "text": text})
    return units


def _pair_text(pairs: pd.DataFrame, titles: Mapping[str, str], text_of: Mapping[str, str]):
    """(user, step) -> both items' titles and first descriptions, as the explanation's context."""
    return {
        (row[USER], row[STEP]): (
            f"{titles[row[POSITIVE]]} {text_of.get(row[POSITIVE], '')} "
            f"{titles[row[NEGATIVE]]} {text_of.get(row[NEGATIVE], '')}"
        )
        for row in pairs.to_dict("records")
    }


def explanation_units(
    events: pd.DataFrame, pairs: pd.DataFrame, titles: Mapping[str, str], text_of: Mapping[str, str]
) -> list[Unit]:
    """One unit per answered forward reply: its explanation, choice and the pair's texts."""
    context = _pair_text(pairs, titles, text_of)
    forward = events[(events["kind"] == "forward") & events["ok"]]
    return [
        {"text": str(row["explanation"]), "chosen": int(row["chosen"]),
         "pair": context.get((row[USER], row[STEP]), "")}
        for row in forward.to_dict("records")
    ]  # fmt: skip


def memory_units(
    events: pd.DataFrame, pairs: pd.DataFrame, titles: Mapping[str, str]
) -> list[Unit]:
    """One unit per usable memory rewrite: every user reflection, every stored item one."""
    negative_of = {(r[USER], r[STEP]): r[NEGATIVE] for r in pairs.to_dict("records")}
    units = []
    for row in events[events["kind"].isin(["user_reflection", "item_reflection"])].to_dict(
        "records"
    ):
        if not row["ok"] or (row["kind"] == "item_reflection" and not row["stored"]):
            continue
        side = "user" if row["kind"] == "user_reflection" else "item"
        own = titles.get(row.get(ITEM), "") if side == "item" else ""
        other = (
            titles.get(negative_of.get((row[USER], row[STEP]), ""), "") if side == "item" else ""
        )
        who = f"user {row[USER]}" if side == "user" else f"item {own!r}"
        units.append({"side": side, "before": row["before"], "after": row["after"],
                      "own_title": own, "other_title": other,
                      "text": f"{who}: {row['after']}"})  # fmt: skip
    return units


def ranking_units(outcomes: Mapping[str, RankOutcome], candidates: pd.DataFrame) -> list[Unit]:
    """One unit per user and LLM ranker: the shown positions in the order ranked."""
    position = candidates.set_index([USER, ITEM])[POSITION]
    units = []
    for method, outcome in outcomes.items():
        parses = outcome.parses.set_index(USER)
        for user, group in outcome.ranked.sort_values([USER, "rank"]).groupby(USER):
            positions = [int(position[(user, item)]) for item in group[ITEM]]
            units.append({
                "positions": positions,
                "missing": int(parses.loc[user, "missing"]),
                "duplicates": int(parses.loc[user, "duplicates"]),
                "text": f"{method}, user {user}: shown numbers in the order ranked "
                        f"{[p + 1 for p in positions]} (left-out ones appended by the repair)",
            })  # fmt: skip
    return units


def failure_reports(
    events: pd.DataFrame,
    probe: pd.DataFrame,
    pairs: pd.DataFrame,
    outcomes: Mapping[str, RankOutcome],
    candidates: pd.DataFrame,
    titles: Mapping[str, str],
    first_text: Mapping[str, str],
) -> dict[str, FailureReport]:
    """The four reports of one run (keys ``agents``, ``explanations``, ``memories``, ``rankings``).

    Args:
        events: The run's event log (forward choices and reflections).
        probe: The re-test of the trained agents, in both orders.
        pairs: The scheduled training pairs.
        outcomes: The LLM rankers' outcomes by name.
        candidates: The test candidates (their display positions).
        titles: Item titles by id.
        first_text: Each item's first description (the explanation's context).
    """
    units_and_modes: dict[str, tuple[str, Sequence[Unit], Sequence[FailureMode[Unit]]]] = {
        "agents": ("user agents", agent_units(events, probe), AGENT_MODES),
        "explanations": (
            "choice explanations",
            explanation_units(events, pairs, titles, first_text),
            EXPLANATION_MODES,
        ),
        "memories": ("memory rewrites", memory_units(events, pairs, titles), MEMORY_MODES),
        "rankings": ("ranking replies", ranking_units(outcomes, candidates), RANKING_MODES),
    }
    return {
        key: classify(units, modes, what, text=lambda unit: unit["text"])
        for key, (what, units, modes) in units_and_modes.items()
    }


def failure_table(reports: Mapping[str, FailureReport]) -> pd.DataFrame:
    """The reports' tables stacked, each row labelled with the kind of reply it counts."""
    return pd.concat(
        [report.frame().assign(replies=report.what) for report in reports.values()],
        ignore_index=True,
    ).set_index(["replies", "failure"])
