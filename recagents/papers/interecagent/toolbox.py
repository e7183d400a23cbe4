"""InteRecAgent's six tools and the context they share.

:class:`ToolContext` holds the item table, the candidate bus, ItemCF, the sequential ranker
and the embedding function; :func:`build_context` builds it for a dataset. The tools
(:func:`candidate_store`, :func:`lookup`, :func:`hard_filter`, :func:`soft_filter`,
:func:`rank`, :func:`map_titles`) each take the context and the input a planner wrote,
update the bus and return a short text observation; :func:`parse_rank_input` reads rank's
input. Plans that call them are in :mod:`~recagents.papers.interecagent.plans`. Everything
on this side runs without a language model, so the tool chain can be tested, traced and
scripted on its own.

Deviations from the released code, each deliberate and documented where it happens:

- The bus starts with *all* items (the paper's starts at ids 1..N-1 and never holds the last).
- A plan keeps its order and may repeat a tool (the paper turns a plan into a dict, so a tool
  runs at most once).
- Unknown columns are reported with the real ones (the paper maps them to the nearest column).
- The executor stops at the first failing step, as the paper's does; ``stop_on_error=False``
  runs the remaining steps instead.
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from recagents.data.datasets import Dataset
from recagents.llm.schemas import ReplyTooComplex, parse_json_bounded
from recagents.papers.interecagent.bus import CandidateBus
from recagents.papers.interecagent.catalogue import ItemTable, split_titles
from recagents.papers.interecagent.config import (
    BUS_CAP,
    OBSERVATION_CHARS,
    RANK_KEEP,
    RANK_SCHEMAS,
    TOP_RATIO_EVAL,
)
from recagents.papers.interecagent.itemcf import ItemCF
from recagents.papers.interecagent.sqllimits import LOOKUP_CHARS, ToolError, clip_text

if TYPE_CHECKING:
    from recagents.baselines import Baseline


@dataclass
class ToolContext:
    """What the tools share: the table, the bus and the models behind them.

    Attributes:
        table: The item table.
        bus: The candidate bus.
        itemcf: ItemCF similarities for :func:`soft_filter` (``None``: the embedding fallback).
        ranker: A trained sequential :class:`~recagents.baselines.Baseline` (SASRec) for the
            preference schema of :func:`rank`; ``None`` falls back to popularity.
        embed: Text-embedding function for the soft filter's fallback; ``None`` uses
            :func:`recagents.llm.embed.embed` (offline MiniLM, cached).
        top_ratio: Soft filter's share of the catalogue (0.1 eval, 0.05 app).
        lookup_chars: Character budget of a lookup or hard_filter observation.
        rank_keep: Candidates kept by :func:`rank`.
        map_n: Recommendations made by :func:`map_titles` when the plan does not say.
        title_min_score: Lowest fuzzy score accepted when mapping titles to ids.
    """

    table: ItemTable
    bus: CandidateBus
    itemcf: ItemCF | None = None
    ranker: Baseline | None = None
    embed: Callable[[Sequence[str]], np.ndarray] | None = None
    top_ratio: float = TOP_RATIO_EVAL
    lookup_chars: int = LOOKUP_CHARS
    rank_keep: int = RANK_KEEP
    map_n: int = 5
    title_min_score: float = 85.0
    _item_vectors: np.ndarray | None = field(default=None, init=False, repr=False)

    def item_vectors(self) -> np.ndarray:
        """Embeddings of :meth:`ItemTable.item_texts`, computed once."""
        if self._item_vectors is None:
            self._item_vectors = self.embed_texts(self.table.item_texts())
        return self._item_vectors

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts with ``embed`` (or the project's cached offline MiniLM)."""
        if self.embed is not None:
            return np.asarray(self.embed(texts))
        from recagents.llm.embed import embed

        return embed(texts)


def build_context(
    dataset: Dataset,
    interactions: pd.DataFrame,
    ranker: Baseline | None = None,
    cap: int = BUS_CAP,
    seed: int = 0,
    top_ratio: float = TOP_RATIO_EVAL,
    domain: str = "movie",
) -> ToolContext:
    """Build the table, bus and ItemCF of a dataset in one call.

    Args:
        dataset: The dataset.
        interactions: Known interactions (train + valid for the test phase): popularity,
            ratings and ItemCF come from them only.
        ranker: A trained SASRec :class:`~recagents.baselines.Baseline`, or ``None``.
        cap: Bus cap.
        seed: Seed of the bus's random cap.
        top_ratio: Soft filter's share of the catalogue.
        domain: Noun for the items.
    """
    table = ItemTable.from_dataset(dataset, interactions, domain=domain)
    return ToolContext(
        table=table,
        bus=CandidateBus(table.ids, cap=cap, seed=seed),
        itemcf=ItemCF.from_interactions(interactions, table.ids),
        ranker=ranker,
        top_ratio=top_ratio,
    )


def _matched(ctx: ToolContext, titles: str | Sequence[str]) -> tuple[list[str], list[str]]:
    """Ids of the titles that matched (in order, once each) and notes on the rest."""
    ids: list[str] = []
    notes: list[str] = []
    unmatched = []
    for match in ctx.table.match_titles(titles, ctx.title_min_score):
        if match.item_id is None:
            unmatched.append(match.query)
            continue
        if match.note:
            notes.append(match.note)
        if match.item_id not in ids:
            ids.append(match.item_id)
    if unmatched:
        notes.append("not found: " + "; ".join(repr(t) for t in unmatched))
    return ids, notes


def _sentence(parts: Iterable[str]) -> str:
    """Join observation parts as sentences (first letter up, full stop at the end)."""
    out = []
    for part in parts:
        if part:
            part = part[0].upper() + part[1:]
            out.append(part if part.endswith(".") else part + ".")
    return " ".join(out)


def candidate_store(ctx: ToolContext, titles: str | Sequence[str]) -> str:
    """Make the titles the user names the candidates (e.g. "which of these should I watch").

    Titles are fuzzy-matched to ids (year in brackets disambiguates duplicates). When no
    title matches, the bus is left as it was, and the observation says so.

    Args:
        ctx: The tool context.
        titles: ``;;``-separated titles (or a list).

    Returns:
        How many titles were stored, and which were not found.
    """
    parts = split_titles(titles)
    if not parts:
        raise ToolError("candidate_store needs at least one title (separate titles with ';;')")
    ids, notes = _matched(ctx, parts)
    if not ids:
        head = f"No title matched; the candidates are unchanged ({len(ctx.bus):,} items)"
        return clip_text(_sentence([head, *notes]), OBSERVATION_CHARS)
    cap_note = ctx.bus.set(ids, "candidate_store", ordered=True)
    stored = ", ".join(ctx.table.display_title(i) for i in ids[:10])
    head = f"Stored {len(ids)} of {len(parts)} titles as the candidates: {stored}"
    return clip_text(_sentence([head, *notes, cap_note]), OBSERVATION_CHARS)


#: What SQLite, or converting its values, may raise on a planner's SQL.
_SQL_TOOL_FAILURES = (
    sqlite3.Error,
    sqlite3.Warning,
    MemoryError,
    OverflowError,
    UnicodeError,
    RecursionError,
)


def _sql_tool(tool: Callable[[ToolContext, str], str]) -> Callable[[ToolContext, str], str]:
    """Turn any failure a planner's SQL can cause inside ``tool`` into a :class:`ToolError`.

    :class:`ItemTable` already does so for SQLite's own work; this boundary also covers
    whatever the tool does with the rows, so that a failed query ends one step (which the
    planner sees and can retry), never the whole run. Programming errors (``TypeError``,
    ``KeyError``, ...) are not caught.
    """

    @functools.wraps(tool)
    def guarded(ctx: ToolContext, sql: str) -> str:
        try:
            return tool(ctx, sql)
        except _SQL_TOOL_FAILURES as error:
            kind = "ran out of memory" if isinstance(error, MemoryError) else "failed"
            detail = clip_text(f"{type(error).__name__}: {error}", 200)
            raise ToolError(f"the SQL {kind} ({detail}); simplify the query") from error

    return guarded


@_sql_tool
def lookup(ctx: ToolContext, sql: str) -> str:
    """Answer a question about items with one read-only SELECT over the whole table.

    Args:
        ctx: The tool context.
        sql: One SELECT statement on ``items``.

    Returns:
        The rows as compact text, at most ``ctx.lookup_chars`` characters however wide the
        rows (each value cut to ``CELL_CHARS``, cuts marked); the bus is unchanged.
    """
    result = ctx.table.run_select(sql, max_rows=100)
    notes = clip_text(_sentence(result.notes), max(ctx.lookup_chars // 4, 80))
    room = ctx.lookup_chars - (len(notes) + 3 if notes else 0)
    text = result.as_text(room)
    return clip_text(f"{text}\n({notes})" if notes else text, ctx.lookup_chars)


@_sql_tool
def hard_filter(ctx: ToolContext, sql: str) -> str:
    """Keep the candidates that satisfy hard conditions, written as one SELECT.

    The query runs over the current candidates only (``items`` is restricted to the bus while
    it runs) and must select the ``id`` column. A hard filter only narrows: its result is
    intersected with the current candidates whatever the SQL says (``main.items`` reaches the
    whole catalogue). With an ORDER BY the kept ids follow the query's order (and a cap keeps
    the first 1,000); without one they keep the bus's order (and a cap keeps a random 1,000).

    Args:
        ctx: The tool context.
        sql: One SELECT statement on ``items`` selecting ``id``.

    Returns:
        How many candidates are left.
    """
    candidates = list(ctx.bus.ids)
    selection = ctx.table.select_ids(sql, within=candidates)
    # select_ids keeps only candidates already; intersecting here too keeps the rule local.
    current = set(candidates)
    if selection.ordered:
        kept = [i for i in selection.ids if i in current]
    else:
        wanted = set(selection.ids)
        kept = [i for i in candidates if i in wanted]
    cap_note = ctx.bus.set(kept, "hard_filter", ordered=selection.ordered)
    head = f"Hard filter: {len(kept):,} of {len(candidates):,} candidates match"
    if not kept:
        head += "; no candidate is left (the conditions may be too strict)"
    return clip_text(_sentence([head, *selection.notes, cap_note]), ctx.lookup_chars)


def soft_filter(
    ctx: ToolContext, seeds: str | Sequence[str], top_ratio: float | None = None
) -> str:
    """Keep the candidates most similar to seed items, most similar first.

    Each candidate's score is its mean ItemCF similarity to the matched seeds. With
    ``k = ceil(top_ratio * len(table))``, candidates scoring at least the k-th best score
    among the candidates (ties kept) and above zero are kept; the seeds themselves are not.
    When no seed title matches (the planner wrote a description, not titles), the scores are
    the cosine similarities between the text embedding of the whole input and those of the
    item texts ("Title (year) - tags"), through ``ctx.embed`` (offline MiniLM by default).
    The scores are stored on the bus for ``rank(schema="similarity")``.

    Args:
        ctx: The tool context.
        seeds: ``;;``-separated seed titles (or a list).
        top_ratio: Share of the catalogue to keep (``None``: ``ctx.top_ratio``).

    Returns:
        How many candidates are left, from which seeds, and what was not found.
    """
    ratio = ctx.top_ratio if top_ratio is None else top_ratio
    if not 0 < ratio <= 1:
        raise ToolError(f"top_ratio must lie in (0, 1], got {ratio}")
    parts = split_titles(seeds)
    if not parts:
        raise ToolError("soft_filter needs at least one seed title (separate titles with ';;')")
    seed_ids, notes = _matched(ctx, parts)
    seed_set = set(seed_ids)
    candidates = [i for i in ctx.bus.ids if i not in seed_set]
    before = len(ctx.bus)
    if seed_ids and ctx.itemcf is not None:
        values = ctx.itemcf.scores(candidates, seed_ids)
        how = "ItemCF similarity to " + ", ".join(ctx.table.display_title(i) for i in seed_ids)
    else:
        request = ", ".join(parts)
        try:
            query = ctx.embed_texts([request])[0]
            vectors = ctx.item_vectors()
        except RuntimeError as error:  # EmbeddingError and friends
            raise ToolError(f"soft_filter's embedding fallback failed: {error}") from error
        rows = [ctx.table.position[i] for i in candidates]
        values = vectors[rows] @ query if rows else np.zeros(0)
        why = "no ItemCF model" if seed_ids else "no seed title matched"
        how = f"text similarity to {request!r} ({why})"
    k = math.ceil(ratio * len(ctx.table))
    if len(values):
        order = np.argsort(-values, kind="stable")
        threshold = values[order[min(k, len(values)) - 1]]
        keep = [int(j) for j in order if values[j] >= threshold and values[j] > 0]
    else:
        keep = []
    kept = [candidates[j] for j in keep]
    scores = {candidates[j]: float(values[j]) for j in keep}
    cap_note = ctx.bus.set(
        kept, "soft_filter", ordered=True, scores=scores, score_kind="similarity"
    )
    head = f"Soft filter ({how}): {len(kept):,} of {before:,} candidates kept"
    return clip_text(_sentence([head, *notes, cap_note]), OBSERVATION_CHARS)


def parse_rank_input(value: Any) -> dict[str, Any]:
    """Turn the planner's rank input into ``{"schema", "prefer", "unwanted"}``.

    Accepts a mapping, a JSON object string, or a bare schema name. ``prefer`` and
    ``unwanted`` may be lists of titles or ``;;``-separated strings.

    Raises:
        ToolError: Not an object, an unknown key, or a schema outside :data:`RANK_SCHEMAS`.
    """
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in RANK_SCHEMAS:
            value = {"schema": text.lower()}
        else:
            try:
                value = parse_json_bounded(text)  # the planner's text: bounded, never a crash
            except ReplyTooComplex as error:
                raise ToolError(f"rank input is not usable JSON ({error})") from error
            except json.JSONDecodeError as error:
                raise ToolError(
                    'rank needs a JSON object like {"schema": "popularity", "prefer": [], '
                    f'"unwanted": []}}, got {value!r}'
                ) from error
    if not isinstance(value, Mapping):
        raise ToolError(f"rank needs a JSON object, got {type(value).__name__}")
    extra = set(value) - {"schema", "prefer", "unwanted"}
    if extra:
        raise ToolError(
            f"rank got unknown key(s) {sorted(extra)}; it takes schema, prefer, unwanted"
        )
    schema = str(value.get("schema", "popularity")).strip().lower()
    if schema not in RANK_SCHEMAS:
        raise ToolError(f"rank schema {schema!r} is not one of {', '.join(RANK_SCHEMAS)}")
    out: dict[str, Any] = {"schema": schema}
    for key in ("prefer", "unwanted"):
        titles = value.get(key) or []
        out[key] = split_titles(titles)
    return out


def rank(
    ctx: ToolContext,
    schema: str = "popularity",
    prefer: Sequence[str] = (),
    unwanted: Sequence[str] = (),
) -> str:
    """Order the candidates, drop unwanted ones and keep the best ``ctx.rank_keep``.

    - ``popularity``: ``log(visited_num + 1)``.
    - ``similarity``: the soft filter's scores on the bus (popularity when there are none).
    - ``preference``: the sequential ranker scores every candidate after the ``prefer`` items
      as a pseudo-history (``Baseline.sequence_scores``); items the model never saw come
      last. Popularity when there is no ranker or no ``prefer`` title matches. A non-empty
      ``prefer`` switches any schema to preference, as the paper does. The sigmoid the paper
      applies is left out: it does not change the order.

    ``prefer`` items act as the user's history and are never ranked back to them; ``unwanted``
    items are removed.

    Args:
        ctx: The tool context.
        schema: One of :data:`RANK_SCHEMAS`.
        prefer: Titles the user likes.
        unwanted: Titles the user does not want.

    Returns:
        What the ranking used and how many candidates are left.
    """
    if schema not in RANK_SCHEMAS:
        raise ToolError(f"rank schema {schema!r} is not one of {', '.join(RANK_SCHEMAS)}")
    notes: list[str] = []
    prefer_ids, prefer_notes = _matched(ctx, prefer) if prefer else ([], [])
    unwanted_ids, unwanted_notes = _matched(ctx, unwanted) if unwanted else ([], [])
    notes += prefer_notes + unwanted_notes
    used = schema
    if prefer and schema != "preference":
        notes.append(f"prefer is not empty, so {schema} became preference")
        used = "preference"
    unwanted_set = set(unwanted_ids)
    drop = unwanted_set | set(prefer_ids)
    removed = sum(1 for i in ctx.bus.ids if i in unwanted_set)
    candidates = [i for i in ctx.bus.ids if i not in drop]
    before = len(ctx.bus)
    values, used, how = _rank_scores(ctx, used, candidates, prefer, prefer_ids, notes)
    if candidates:
        order = np.argsort(-np.asarray(values), kind="stable")[: ctx.rank_keep]
        ranked = [candidates[j] for j in order]
        scores = {candidates[j]: float(values[j]) for j in order}
    else:
        ranked, scores = [], {}
    ctx.bus.set(ranked, "rank", ordered=True, scores=scores, score_kind=used)
    head = f"Ranked {len(candidates):,} of {before:,} candidates by {how}; kept {len(ranked):,}"
    if removed:
        notes.insert(0, f"removed {removed} unwanted item(s)")
    return clip_text(_sentence([head, *notes]), OBSERVATION_CHARS)


def _rank_scores(
    ctx: ToolContext,
    used: str,
    candidates: Sequence[str],
    prefer: Sequence[str],
    prefer_ids: Sequence[str],
    notes: list[str],
) -> tuple[np.ndarray, str, str]:
    """The candidates' scores under ``used``: ``(scores, schema used, how, for the text)``.

    Preference and similarity fall back to popularity, with a note, when they cannot rank.
    """
    values = np.zeros(0)
    how = used
    if used == "preference":
        values, used, how = _preference_scores(ctx, candidates, prefer, prefer_ids, notes)
    if used == "similarity":
        if ctx.bus.score_kind == "similarity" and ctx.bus.scores is not None:
            values = np.array([ctx.bus.scores.get(i, -np.inf) for i in candidates], dtype=float)
            how = "similarity (the soft filter's scores)"
        else:
            notes.append("no soft-filter scores on the candidates; ranked by popularity instead")
            used = "popularity"
    if used == "popularity":
        values = np.log1p(ctx.table.popularity(candidates).astype(float))
        how = "popularity"
    return values, used, how


def _preference_scores(
    ctx: ToolContext,
    candidates: Sequence[str],
    prefer: Sequence[str],
    prefer_ids: Sequence[str],
    notes: list[str],
) -> tuple[np.ndarray, str, str]:
    """The sequential ranker's scores after the liked items, or ``"popularity"`` and why not."""
    history: list[str] = []
    if ctx.ranker is not None:
        columns = ctx.ranker.item_index(list(prefer_ids), unknown=-1)
        history = [i for i, c in zip(prefer_ids, columns, strict=True) if c >= 0]
    if ctx.ranker is None:
        notes.append("no preference model is loaded; ranked by popularity instead")
    elif not prefer:
        notes.append("preference needs liked titles in prefer; ranked by popularity instead")
    elif not prefer_ids:
        notes.append("no prefer title matched an item; ranked by popularity instead")
    elif not history:
        notes.append("no preferred title is known to the model; ranked by popularity instead")
    else:
        full = ctx.ranker.sequence_scores([history])[0]
        values = full[ctx.ranker.item_index(list(candidates), unknown=0)]
        how = f"preference ({ctx.ranker.name} reading {len(history)} liked item(s))"
        return values, "preference", how
    return np.zeros(0), "popularity", "popularity"


def map_titles(ctx: ToolContext, n: int | str | None = None) -> tuple[list[str], str]:
    """Turn the first ``n`` candidates into titles: the recommendation of this turn.

    The executor clears the bus afterwards (a new turn starts with all items).

    Args:
        ctx: The tool context.
        n: How many (``None``: ``ctx.map_n``); a numeric string is accepted.

    Returns:
        ``(ids, text)`` with text ``"Here are recommendations: 1. Title (year); ..."``.
    """
    count = ctx.map_n if n is None or n == "" else n
    try:
        count = int(count)
    except (TypeError, ValueError) as error:
        raise ToolError(f"map_titles needs a number of items, got {n!r}") from error
    if count < 1:
        raise ToolError(f"map_titles needs at least 1 item, got {count}")
    ids = list(ctx.bus.ids[:count])
    if not ids:
        return [], "No candidate is left to recommend."
    listed = "; ".join(f"{k}. {ctx.table.display_title(i)}" for k, i in enumerate(ids, 1))
    return ids, clip_text(f"Here are recommendations: {listed}", OBSERVATION_CHARS)
