"""Replay the authors' recorded Agent4Rec decisions through our page loop.

Why: the authors released what their gpt-3.5 agents *did* on every page of their two runs
(LightGCN, 1,000 agents; MF, 100 agents: which items aligned with their taste, which they
watched, each rating and feeling, where they left, the interview score). Replaying those
decisions through :func:`recagents.papers.agent4rec.loop.simulate` unchanged, on the
authors' own pages, checks our loop and our analysis against theirs: if both are the same
procedure, the replay gives back the recorded behaviour agent by agent and the totals of
each run's own ``metrics.txt``. Every difference is a finding about one loop or the other,
listed with its cause.

The replies come from :func:`recorded_client`, a :class:`~recagents.llm.scripted.ScriptedClient`
named :data:`RECORDED_NAME`: the authors' recorded decisions, never an LLM result of ours.
What the records do not hold is not invented: reflections are not replayed
(``reflect_after=()``), and memory retrieval uses a cheap stand-in embedding, because neither
can change a recorded decision.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
import pandas as pd

from recagents.columns import ITEM, USER
from recagents.llm.client import ChatRequest, LLMClient
from recagents.llm.runlog import RunLog
from recagents.llm.scripted import ScriptedClient
from recagents.papers.agent4rec.agents import Agent, item_line
from recagents.papers.agent4rec.config import TRAITS, Agent4RecConfig
from recagents.papers.agent4rec.prompts import TRAIT_SENTENCES
from recagents.papers.agent4rec.recorded import (
    METRICS_TXT_KEYS,
    OfficialRun,
    RunName,
    load_official_run,
    parse_satisfaction,
)
from recagents.papers.agent4rec.scripted import request_kind

#: The name of the replayed policy (its client's model is ``scripted:<name>``).
RECORDED_NAME = "recorded-gpt-3.5-turbo-decisions"

_FEELING_MAX = 200  # our page schema's cap on a feeling (prompts.page_schema)
_REASON_MAX = 400  # our interview schema's cap on a reason (prompts.interview_schema)


@dataclass(frozen=True)
class RecordedVisit:
    """One recorded agent's visit, as the authors' code stored it.

    Attributes:
        user: The agent's id.
        pages: The stored per-page records (``recommended_id``, ``align_id``, ``watch_id``,
            ``rating_id``, ``rating``, ``feeling``, ``ground_truth``, ...), ids as strings.
        satisfaction: The interview score (NaN when it cannot be read).
        reason: The interview's reason text ("" when none was stored).
    """

    user: str
    pages: list[dict[str, Any]]
    satisfaction: float
    reason: str


def _interview_reason(interview: Any) -> str:
    if isinstance(interview, list | tuple):
        return str(interview[1]).strip() if len(interview) > 1 else ""
    if isinstance(interview, str) and "REASON:" in interview:
        return interview.split("REASON:", 1)[1].strip()
    return ""


def recorded_visits(official: OfficialRun, n_agents: int | None = None) -> dict[str, RecordedVisit]:
    """The recorded visits of a run (:attr:`OfficialRun.records`), the first ``n_agents`` by id."""
    visits = {
        user: RecordedVisit(
            user,
            record["pages"],
            parse_satisfaction(record.get("interview")),
            _interview_reason(record.get("interview")),
        )
        for user, record in official.records.items()
    }
    ordered = sorted(visits, key=lambda u: (len(u), u))
    return {u: visits[u] for u in ordered[:n_agents]}


def recorded_client(visits: dict[str, RecordedVisit], max_pages: int = 5) -> ScriptedClient:
    """A client that answers each step of our loop with the authors' recorded decision.

    * **page** (the n-th page request of an agent is its page n): per shown item, in page
      order, ``aligned`` from ``align_id``, ``watch`` from ``watch_id``, the recorded rating
      and feeling of a watched item (a feeling longer than our schema allows is cut to
      its 200 characters; :class:`ReplayResult` counts them);
    * **exit**: ``next`` before the agent's last recorded page, ``exit`` on it, unless that
      is page ``max_pages``: an agent that saw every page ran out of pages (the records do
      not say what it would have decided), and the loop ends the visit there by itself;
    * **interview**: the recorded score and reason (an unreadable score is replied as
      0, out of schema, so the loop counts it unusable, as it would a model's).

    Any other request (reflections, personas) is refused: the records hold no reply for it.
    """
    seen: dict[tuple[str, str], int] = defaultdict(int)

    def policy(request: ChatRequest) -> Any:
        kind = request_kind(request)
        visit = visits.get(str(request.tag))
        if visit is None or kind not in ("page", "exit", "interview"):
            what = kind or "free-text"
            raise KeyError(f"no recorded reply for a {what} request of {request.tag}")
        seen[(visit.user, kind)] += 1
        page_no = seen[(visit.user, kind)]
        if kind == "interview":
            score = visit.satisfaction
            valid = not math.isnan(score) and float(score).is_integer()
            return {
                "satisfaction": int(score) if valid else 0,
                "reason": visit.reason[:_REASON_MAX],
            }
        page = visit.pages[page_no - 1]
        if kind == "exit":
            last = page_no >= len(visit.pages) and page_no < max_pages
            return {
                "feeling": "positive",
                "decision": "exit" if last else "next",
                "reason": "recorded: the authors' agent left here" if last else "recorded",
            }
        rated = dict(zip(page["rating_id"], page.get("rating", []), strict=False))
        felt = dict(zip(page["rating_id"], page.get("feeling", []), strict=False))
        items = []
        for item in page["recommended_id"]:
            watched = item in page["watch_id"]
            items.append(
                {
                    "aligned": item in page["align_id"],
                    "watch": watched,
                    "rating": int(rated.get(item, 1)) if watched else 1,
                    "feeling": str(felt.get(item, ""))[:_FEELING_MAX] if watched else "",
                }
            )
        return {"items": items}

    return ScriptedClient(policy, RECORDED_NAME)


def _hash_embed(texts: list[str]) -> np.ndarray:
    """A cheap, deterministic stand-in embedding (retrieval cannot change a recorded reply)."""
    out = np.zeros((len(texts), 64))
    for row, text in enumerate(texts):
        for word in text.lower().split():
            out[row, hashlib.blake2b(word.encode(), digest_size=2).digest()[0] % 64] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1.0, norms)


def official_metrics(
    exposures: pd.DataFrame,
    sessions: pd.DataFrame,
    ground_truth: dict[tuple[str, int], list[str]],
    max_pages: int = 5,
    items_per_page: int = 4,
    likes: str = "watched",
) -> dict[str, float]:
    """The five behaviour totals of the released code's ``metrics.txt``, by its definitions.

    Read from the released ``simulation/arena.py``: *click rate* is an agent's watched
    items over all ``max_pages x items_per_page`` slots (not over the items it saw),
    averaged over agents; *number of likes* is the mean per page of the agent's liked items,
    averaged over agents; *precision* and *recall* compare those liked items with the page's
    ground truth (the agent's held-out items shown on it), summed over an agent's pages, then
    averaged; *exit page* is the mean of the last page seen.

    Which items are "liked" differs between the run and the code: the released ``arena.py``
    counts the items the agent said align with its taste (``likes="aligned"``), but the
    run's own ``metrics.txt`` is reproduced only by the items it *watched*
    (``likes="watched"``, the default): it was written by an earlier version of the code.

    Args:
        exposures: One row per shown item (``aligned``, ``watched``, ``page``).
        sessions: One row per agent (``exit_page``).
        ground_truth: The held-out items shown, by ``(agent, page)``.
        max_pages: Pages of a full visit (the click rate's denominator).
        items_per_page: Items per page (the click rate's denominator).
        likes: ``"watched"`` (as the run's ``metrics.txt``) or ``"aligned"`` (as ``arena.py``).
    """
    if likes not in ("watched", "aligned"):
        raise ValueError(f"likes must be 'watched' or 'aligned', got {likes!r}")
    shown = exposures[[USER, "page", ITEM]].assign(
        user=exposures[USER].astype(str), page=exposures["page"].astype(int),
        watched=exposures["watched"].fillna(False).astype(bool),
        chosen=exposures[likes].fillna(False).astype(bool),
    )  # fmt: skip
    pages = shown[["user", "page"]].drop_duplicates()
    liked = shown.loc[shown["chosen"], ["user", "page", ITEM]].drop_duplicates()
    truth = pd.DataFrame(
        [(u, p, str(i)) for u, p in pages.itertuples(index=False)
         for i in set(ground_truth.get((u, p), []))],
        columns=["user", "page", ITEM],
    )  # fmt: skip
    liked = liked.assign(**{ITEM: liked[ITEM].astype(str)})
    hit_rows = liked.merge(truth, on=["user", "page", ITEM])
    per_page = liked.groupby(["user", "page"]).size()
    per_page = per_page.reindex(pd.MultiIndex.from_frame(pages), fill_value=0)
    # One value per agent in the order of its id (as a groupby of the exposures), each mean
    # taken as np.mean of per-agent values, so the totals are the same floats as page by page.
    users = shown.groupby(USER, sort=True)["user"].first().tolist()
    clicks = shown.groupby("user")["watched"].sum()
    hits = hit_rows.groupby("user").size()
    n_truth = truth.groupby("user").size()
    by_user = {u: group.to_numpy() for u, group in per_page.groupby(level="user")}
    slots = max_pages * items_per_page
    return {
        "recall": float(np.mean([hits.get(u, 0) / max(n_truth.get(u, 0), 1) for u in users])),
        "precision": float(
            np.mean([hits.get(u, 0) / max(int(by_user[u].sum()), 1) for u in users])
        ),
        "click_rate": float(np.mean([int(clicks[u]) / slots for u in users])),
        "n_likes": float(np.mean([float(np.mean(by_user[u])) for u in users])),
        "exit_page": float(sessions["exit_page"].mean()),
    }


@dataclass(frozen=True)
class ReplayResult:
    """What replaying the recorded decisions through our loop gave back.

    Attributes:
        exposures: Our loop's exposures (one row per shown item).
        sessions: Our loop's sessions (one row per agent).
        agreement: One row per agent: ``pages_match``, ``exposures_match``,
            ``exit_match``, ``satisfaction_match`` and ``agrees`` (all four).
        disagreements: One row per differing field: agent, page, item, field, recorded,
            replayed, cause.
        metrics: ``metric, metrics_txt, from_records, from_replay`` (``metrics_txt`` is NaN
            unless the whole run was replayed: a sample has no total).
        truncated_feelings: Recorded feelings longer than our page schema allows (cut).
        log: The run log (calls and problems of the replay).
    """

    exposures: pd.DataFrame
    sessions: pd.DataFrame
    agreement: pd.DataFrame
    disagreements: pd.DataFrame
    metrics: pd.DataFrame
    truncated_feelings: int
    log: RunLog

    @property
    def agreement_rate(self) -> float:
        """Share of agents whose every recorded behaviour the replay gave back."""
        return float(self.agreement["agrees"].mean()) if len(self.agreement) else math.nan


_CAUSES = {
    "watched": "our parser or loop read the watch decision differently",
    "aligned": "our parser or loop read the taste-alignment answer differently",
    "rating": "our parser keeps a rating only for a watched item, 1-5",
    "feeling": "our page schema caps a feeling at 200 characters",
    "exit_page": "our loop left on another page than the recorded agent",
    "exited": "our loop's 'chose to leave' differs from 'left before page 5'",
    "satisfaction": "our interview takes only an integer score 1-10",
}


def _compare(
    recorded: pd.DataFrame, replayed: pd.DataFrame, keys: list[str], fields: list[str]
) -> list[dict[str, Any]]:
    """Rows where a field of the replay differs from the records (NaN equals NaN)."""
    merged = recorded.merge(replayed, on=keys, how="outer", suffixes=("_rec", "_rep"),
                            indicator=True)  # fmt: skip
    rows = []
    for row in merged.to_dict("records"):
        where = {k: row[k] for k in keys}
        if row["_merge"] != "both":
            side = "only in the records" if row["_merge"] == "left_only" else "only in the replay"
            rows.append({**where, "field": "row", "recorded": side, "replayed": "",
                         "cause": "our loop showed other items or pages"})  # fmt: skip
            continue
        for name in fields:
            a, b = row[f"{name}_rec"], row[f"{name}_rep"]
            same = (pd.isna(a) and pd.isna(b)) if (pd.isna(a) or pd.isna(b)) else a == b
            if not same:
                rows.append({**where, "field": name, "recorded": a, "replayed": b,
                             "cause": _CAUSES[name]})  # fmt: skip
    return rows


def _agreement(users: list[str], disagreements: pd.DataFrame) -> pd.DataFrame:
    """Per agent: which recorded behaviours the replay gave back."""
    by_field = disagreements.groupby("field")[USER].agg(set).to_dict()

    def clean(*fields: str) -> list[bool]:
        failing = set().union(*(by_field.get(f, set()) for f in fields))
        return [u not in failing for u in users]

    agreement = pd.DataFrame({USER: users})
    agreement["pages_match"] = clean("row")
    agreement["exposures_match"] = clean("aligned", "watched", "rating", "feeling")
    agreement["exit_match"] = clean("exit_page", "exited")
    agreement["satisfaction_match"] = clean("satisfaction")
    checks = ["pages_match", "exposures_match", "exit_match", "satisfaction_match"]
    agreement["agrees"] = agreement[checks].all(axis=1)
    return agreement


def _lines(items: pd.DataFrame) -> dict[str, str]:
    """How our agent sees a released item: title, mean rating and the authors' summary."""
    return {
        str(row.item_id): item_line(
            str(row.title), float(row.mean_rating), row.genres, str(row.summary), "summary"
        )
        for row in items.itertuples(index=False)
    }


def replay_official(
    run: RunName = "lightgcn",
    n_agents: int | None = None,
    config: Agent4RecConfig | None = None,
) -> ReplayResult:
    """Replay one of the authors' recorded runs (``"lightgcn"`` or ``"mf"``) from the release.

    :func:`~recagents.papers.agent4rec.recorded.load_official_run` of the first ``n_agents``
    agents by id (``None``: all), then :func:`replay_run`; the whole run is compared with its
    own ``metrics.txt``.
    """
    return replay_run(load_official_run(run, agents=n_agents), config=config)


def replay_run(
    official: OfficialRun,
    n_agents: int | None = None,
    config: Agent4RecConfig | None = None,
) -> ReplayResult:
    """Drive :func:`~recagents.papers.agent4rec.loop.simulate` with the recorded decisions.

    Each recorded agent is shown the pages the authors' agent saw (its recorded
    ``recommended_id`` lists, in order, as one static ranking cut into pages) and answers
    through :func:`recorded_client`. The replay's exposures and sessions are compared with
    the records field by field, and :func:`official_metrics` of both with the run's
    ``metrics.txt`` when every agent the file counts (its ``n_avatars``) was replayed.

    Args:
        official: The run (:func:`~recagents.papers.agent4rec.recorded.load_official_run`).
        n_agents: Replay the first ``n_agents`` agents by id (``None``: all of ``official``).
        config: Loop settings (default: the paper's; reflections are always off here).
    """
    from recagents.papers.agent4rec.loop import simulate

    visits = recorded_visits(official, n_agents)
    config = replace(config or Agent4RecConfig(), reflect_after=())
    traits = official.traits.set_index(USER)
    agents = {
        user: Agent(
            user_id=user,
            traits={t: int(traits.loc[user, t]) if user in traits.index else 2 for t in TRAITS},
            persona="(the replay answers from the records; it does not read the persona)",
        )
        for user in visits
    }
    ranked = pd.DataFrame(
        [
            (user, item, rank)
            for user, visit in visits.items()
            for rank, item in enumerate(
                (i for page in visit.pages for i in page["recommended_id"]), 1
            )
        ],
        columns=[USER, ITEM, "rank"],
    )
    log = RunLog()
    client = recorded_client(visits, config.max_pages)
    # A ScriptedClient answers the same batched requests as an LLMClient (duck-typed).
    exposures, sessions = simulate(
        agents, ranked, _lines(official.items), TRAIT_SENTENCES, official.recommender, config,
        cast(LLMClient, client), log, _hash_embed,
    )  # fmt: skip
    truncated = sum(
        len(str(f)) > _FEELING_MAX for v in visits.values() for p in v.pages for f in p["feeling"]
    )
    recorded_exp = official.exposures[official.exposures[USER].isin(visits)].copy()
    recorded_exp["feeling"] = recorded_exp["feeling"].str.slice(0, _FEELING_MAX)
    recorded_ses = official.sessions[official.sessions[USER].isin(visits)]
    keys = [USER, "page", "position", ITEM]
    fields = ["aligned", "watched", "rating", "feeling"]
    exposure_rows = _compare(recorded_exp[keys + fields], exposures[keys + fields], keys, fields)
    session_fields = ["exit_page", "exited", "satisfaction"]
    session_rows = _compare(recorded_ses[[USER, *session_fields]],
                            sessions[[USER, *session_fields]], [USER], session_fields)  # fmt: skip
    disagreements = pd.DataFrame(
        exposure_rows + session_rows,
        columns=[USER, "page", "position", ITEM, "field", "recorded", "replayed", "cause"],
    )
    agreement = _agreement(list(visits), disagreements)
    truth = {(u, int(p.get("page") or k)): p["ground_truth"]
             for u, v in visits.items() for k, p in enumerate(v.pages, 1)}  # fmt: skip
    whole = len(visits) == official.metrics_txt.get("n_agents")
    geometry = (config.max_pages, config.items_per_page)
    rows = []
    for likes, suffix in (("watched", ""), ("aligned", " (aligned, as arena.py)")):
        ours = official_metrics(exposures, sessions, truth, *geometry, likes=likes)
        theirs = official_metrics(recorded_exp, recorded_ses, truth, *geometry, likes=likes)
        for m in METRICS_TXT_KEYS.values():
            if suffix and m not in ("n_likes", "precision", "recall"):
                continue
            total = official.metrics_txt.get(m, math.nan) if whole and not suffix else math.nan
            rows.append({"metric": m + suffix, "metrics_txt": total,
                         "from_records": theirs[m], "from_replay": ours[m]})  # fmt: skip
    metrics = pd.DataFrame(rows)
    return ReplayResult(exposures, sessions, agreement, disagreements, metrics, truncated, log)
