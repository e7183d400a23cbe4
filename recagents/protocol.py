"""The shared ranking contract: how an LLM ranks numbered candidates, and how we read it.

Every method that asks a model to rank a candidate list (AgentCF's rankers, the zero-shot
LLM ranker, InteRecAgent's one-turn evaluation, the cross-paper comparison) uses the same
JSON schema (:func:`ranking_schema`), the same checked parse with a stated repair policy
(:func:`parse_ranking`, :class:`RankingParse`) and the same long frame
``[user_id, item_id, score, rank]`` (:func:`ranking_frame`), so one evaluation serves them
all. Notebook 01, section "Ranking the candidates", teaches it.

It also holds the plug-in contract every paper's ``recagents.papers.<paper>.entry`` module
keeps (:class:`Paper`): ``run`` takes :class:`RunOptions` and returns a :class:`PaperRun`,
``rank`` takes a :class:`RankTask` and returns :class:`Ranking` objects, so the cross-paper
comparison, the benchmarks and the tests read any paper without touching its internals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from recagents.columns import ITEM, RANK, SCORE, USER
from recagents.data.datasets import Dataset, Split
from recagents.llm.client import LLMClient, get_client
from recagents.llm.runlog import RunLog

#: First rank given to the candidates the model left out, under the paper's ("faithful")
#: scorer: the official code scores them -10000, tied with every item outside the candidate
#: list, so they rank beyond any cut-off; they take ranks from here on in candidate order
#: (distinct ranks, which the metrics require; no cut-off reaches them, so the order among
#: them changes no metric but MRR, by less than 1e-6).
FAITHFUL_MISSING_RANK = 1_000_000


def ranking_schema(n: int) -> dict[str, Any]:
    """A ranking of ``n`` numbered candidates: exactly ``n`` numbers from 1 to ``n``.

    Backends cannot enforce "each number once"; :func:`parse_ranking` checks and repairs.
    """
    return {
        "type": "object",
        "properties": {
            "ranking": {
                "type": "array",
                "items": {"type": "integer", "enum": list(range(1, n + 1))},
                "minItems": n,
                "maxItems": n,
            }
        },
        "required": ["ranking"],
    }


@dataclass(frozen=True)
class RankingParse:
    """A ranking reply checked against the candidates, and how it was repaired.

    Attributes:
        order: The valid candidate indices (0-based) in the order given, duplicates dropped.
        missing: Candidate indices the reply left out (0-based, display order).
        duplicates: Numbers that appeared more than once (extra copies dropped).
        out_of_range: Entries that were not a candidate number (dropped).
        status: ``complete`` (a permutation), ``repaired`` or ``failed`` (nothing usable).
    """

    order: tuple[int, ...]
    missing: tuple[int, ...]
    duplicates: int
    out_of_range: int
    status: Literal["complete", "repaired", "failed"]


def parse_ranking(data: Any, n: int) -> RankingParse:
    """Validate a ranking reply as a permutation of candidates ``1..n``.

    The repair policy: duplicates keep their first position, entries that are not a
    candidate number are dropped, and candidates left out are reported as ``missing``
    (:func:`ranking_frame` places them after every ranked one, in random order).
    """
    raw = data.get("ranking") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        return RankingParse((), tuple(range(n)), 0, 0, "failed")
    order: list[int] = []
    duplicates = out_of_range = 0
    for entry in raw:
        number = int(entry) if isinstance(entry, int) and not isinstance(entry, bool) else None
        if isinstance(entry, str) and entry.strip().isascii() and entry.strip().isdecimal():
            number = int(entry.strip())
        if number is None or not 1 <= number <= n:
            out_of_range += 1
        elif number - 1 in order:
            duplicates += 1
        else:
            order.append(number - 1)
    missing = tuple(i for i in range(n) if i not in order)
    if not order:
        status: Literal["complete", "repaired", "failed"] = "failed"
    elif missing or duplicates or out_of_range:
        status = "repaired"
    else:
        status = "complete"
    return RankingParse(tuple(order), missing, duplicates, out_of_range, status)


def ranking_frame(
    user: str,
    items: Sequence[str],
    parse: RankingParse,
    scorer: Literal["repaired", "faithful"] = "repaired",
    seed: int = 0,
) -> pd.DataFrame:
    """One user's ``[user_id, item_id, score, rank]`` from a checked ranking reply.

    Ranked candidates come first, in the order given (score ``n - position``). Candidates
    the reply left out:

    - ``repaired`` (ours): placed after all ranked ones in a seeded random order, so leaving
      the positive out costs what a random placement among the rest would;
    - ``faithful`` (the official code): scored -10000 and tied with every item outside the
      list, i.e. ranked beyond any cut-off (from :data:`FAITHFUL_MISSING_RANK` on).
    """
    n = len(items)
    rank = np.zeros(n, dtype=np.int64)
    score = np.zeros(n, dtype=float)
    for position, index in enumerate(parse.order):
        rank[index] = position + 1
        score[index] = n - position
    missing = np.array(parse.missing, dtype=int)
    if len(missing):
        if scorer == "faithful":
            rank[missing] = FAITHFUL_MISSING_RANK + np.arange(len(missing))
            score[missing] = -10000.0
        else:
            shuffled = np.random.default_rng(seed).permutation(missing)
            rank[shuffled] = len(parse.order) + 1 + np.arange(len(shuffled))
            score[shuffled] = -np.arange(1, len(shuffled) + 1, dtype=float)
    return pd.DataFrame({USER: user, ITEM: list(items), SCORE: score, RANK: rank})


def ordered_frame(user: str, order: Sequence[str]) -> pd.DataFrame:
    """One user's ranking in the long format: ``order`` first to last, scores descending.

    For methods whose output is an order rather than scores (AFL's proposal then its tool's
    order, InteRecAgent's target rank): rank ``1..n`` and score ``n..1``.
    """
    n = len(order)
    return pd.DataFrame(
        {USER: user, ITEM: list(order), SCORE: np.arange(n, 0, -1, dtype=float),
         RANK: np.arange(1, n + 1, dtype=np.int64)}
    )  # fmt: skip


# --------------------------------------------------------------------------- entry points

#: The columns of :attr:`PaperRun.metrics`: a headline number, its 95% interval and its n.
METRIC_COLUMNS = ("metric", "value", "low", "high", "n")


def metric_rows(summary: pd.DataFrame, labels: Sequence[str] = ()) -> pd.DataFrame:
    """Headline rows ``[metric, value, low, high, n]`` from an interval summary.

    ``summary`` is what :func:`recagents.metrics.summarize` and the papers' summaries return
    (``[*labels, metric, mean, low, high, n]``); each row's name becomes
    ``"<metric>/<label>/..."`` (e.g. ``"ndcg@10/AgentCF B"``), so one frame holds every
    method's numbers.

    Raises:
        ValueError: ``summary`` lacks one of the columns named above.
    """
    needed = [*labels, "metric", "mean", "low", "high", "n"]
    missing = [c for c in needed if c not in summary.columns]
    if missing:
        raise ValueError(f"metric_rows: summary is missing column(s) {missing}")
    names = summary["metric"].astype(str)
    for label in labels:
        names = names + "/" + summary[label].astype(str)
    return pd.DataFrame(
        {"metric": names.to_numpy(), "value": summary["mean"].to_numpy(dtype=float),
         "low": summary["low"].to_numpy(dtype=float), "high": summary["high"].to_numpy(dtype=float),
         "n": summary["n"].to_numpy(dtype=np.int64)},
        columns=list(METRIC_COLUMNS),
    )  # fmt: skip


@dataclass(frozen=True)
class RunOptions:
    """What every paper's ``run`` and ``rank`` take besides the data and the paper's settings.

    One object for the five papers, so the shared arguments are documented once and checked
    the same way: ``run(dataset, config, RunOptions(profile="smoke", n_boot=50))``.

    Attributes:
        profile: Which of the paper's ``PROFILES`` sizes the run (``smoke``, ``default``,
            ``paper``); the notebook of the paper reads the same table.
        n_users: Users (agents, simulated users) of the run; ``None``: the profile's.
        methods: Methods to compare, of the paper's ``METHODS`` (``rank``: its ``RANKERS``);
            ``None`` or empty: all of them.
        client: LLM client (``None``: the process-wide one, :func:`get_client`).
        log: Also receives every call of the run (the run's own log is in ``PaperRun.log``).
        progress: Show progress bars, where the paper's steps have them.
        n_boot: Bootstrap resamples of the 95% intervals.
        training: The classic model's training settings
            (:class:`~recagents.baselines.TrainConfig`) where the paper trains one; ``None``:
            the profile's.
    """

    profile: str = "default"
    n_users: int | None = None
    methods: Sequence[str] | None = None
    client: LLMClient | None = None
    log: RunLog | None = None
    progress: bool = False
    n_boot: int = 1000
    training: Any | None = None

    def sizes(self, profiles: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any]:
        """The chosen profile's sizes from a paper's ``PROFILES``.

        Raises:
            ValueError: An unknown profile (the message lists the known ones).
        """
        if self.profile not in profiles:
            raise ValueError(f"unknown profile {self.profile!r}; choose from {sorted(profiles)}")
        return profiles[self.profile]

    def users(self, profiles: Mapping[str, Mapping[str, Any]], key: str) -> int:
        """``n_users``, or the profile's size ``key`` when it is ``None``."""
        return int(self.sizes(profiles)[key]) if self.n_users is None else self.n_users

    def chosen_methods(
        self, paper: str, choices: Sequence[str], default: Sequence[str] | None = None
    ) -> tuple[str, ...]:
        """``methods`` (default: ``default``, else ``choices``), each checked against ``choices``.

        Raises:
            ValueError: A method not in ``choices`` (the message names them and the choices).
        """
        chosen = tuple(self.methods or (choices if default is None else default))
        unknown = [m for m in chosen if m not in choices]
        if unknown:
            raise ValueError(
                f"methods: unknown {paper} method(s) {unknown}; choose from {tuple(choices)}"
            )
        return chosen

    def resolved_client(self) -> LLMClient:
        """``client``, or the process-wide one (:func:`recagents.llm.client.get_client`)."""
        return self.client or get_client()

    def record(self, own: RunLog) -> None:
        """Hand the run's own calls to the caller's ``log``, when one was given."""
        if self.log is not None:
            self.log.extend(own)


@dataclass
class PaperRun:
    """One paper's experiment, as every paper's ``entry.run`` returns it.

    The same shape for all five papers, so a reader (the cross-paper notebook, the report,
    a test) needs no paper's internals: the named tables are documented in each entry
    module's ``TABLES``, the headline numbers share one layout (:data:`METRIC_COLUMNS`).

    Attributes:
        paper: The paper's name (e.g. ``"AgentCF"``).
        config: The paper's settings dataclass the run used.
        tables: The run's tidy outputs by name (the entry module's ``TABLES``).
        metrics: ``[metric, value, low, high, n]``: headline numbers, 95% bootstrap interval.
        log: Every LLM call of the run (empty when it made none).
        wall_seconds: Wall time of the whole run, training included.
    """

    paper: str
    config: Any
    tables: dict[str, pd.DataFrame]
    metrics: pd.DataFrame
    log: RunLog
    wall_seconds: float

    def __post_init__(self) -> None:
        if list(self.metrics.columns) != list(METRIC_COLUMNS):
            raise ValueError(
                f"PaperRun.metrics must have columns {list(METRIC_COLUMNS)}, "
                f"got {list(self.metrics.columns)}"
            )

    def table(self, name: str) -> pd.DataFrame:
        """One table by name.

        Raises:
            KeyError: No table of that name (the message lists the ones there are).
        """
        if name not in self.tables:
            raise KeyError(f"{self.paper} has no table {name!r}; it has {sorted(self.tables)}")
        return self.tables[name]

    def summary(self) -> str:
        """The headline numbers as text, one line each, then calls and wall time."""
        lines = [f"{self.paper}:"]
        for row in self.metrics.itertuples(index=False):
            lines.append(
                f"  {row.metric}: {row.value:.3f} [{row.low:.3f}, {row.high:.3f}] (n={row.n})"
            )
        lines.append(f"  {len(self.log.calls)} LLM calls, {self.wall_seconds:.1f} s")
        return "\n".join(lines)


#: Per-user status of a method's ranking: ``ok`` (a model score), ``complete`` (a full reply),
#: ``repaired`` (a partial reply, completed), ``failed`` (an unusable reply, ranked by the
#: documented fallback and counted).
STATUSES = ("ok", "complete", "repaired", "failed")


@dataclass
class Ranking:
    """One method's ranking of shared candidates: what every ``rank`` returns, per method.

    Attributes:
        method: The method's name (on the cross-paper leaderboard).
        frame: ``[user_id, item_id, score, rank]`` over exactly the candidates given.
        status: ``[user_id, status]`` per user, one of :data:`STATUSES`.
        log: Every LLM call it made (training included, where the method trains).
        wall_seconds: Wall time, training included.
        note: How the frame was made, where it differs from the method's own output.
        extra: The method's own outputs (e.g. AFL's rounds), for inspection.
    """

    method: str
    frame: pd.DataFrame
    status: pd.DataFrame
    log: RunLog
    wall_seconds: float
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def calls(self) -> pd.DataFrame:
        """The log's calls as a frame (one row per call)."""
        return self.log.calls_frame()

    def status_counts(self) -> dict[str, int]:
        """Users per status; ``failed`` are unusable replies, counted and still ranked."""
        counts = self.status["status"].value_counts()
        return {name: int(counts.get(name, 0)) for name in STATUSES}


@dataclass(frozen=True)
class RankTask:
    """The shared candidates a paper's ``rank`` orders: the cross-paper protocol's plain parts.

    Attributes:
        dataset: The full dataset (titles, genres, user features).
        split: The leave-one-out split the candidates come from.
        candidates: ``[user_id, item_id, label, position]``: one target and the same negatives
            for every method, in display order.
        seed: Seeds every draw a method makes.
    """

    dataset: Dataset
    split: Split
    candidates: pd.DataFrame
    seed: int = 0


# --------------------------------------------------------------------------- the plug-in contract


@runtime_checkable
class Paper(Protocol):
    """What a paper's ``recagents.papers.<name>.entry`` module provides: the plug-in contract.

    The entry module itself satisfies this protocol (module attributes and functions);
    :func:`recagents.papers.registry` finds every paper's and checks it. The cross-paper
    comparison, the benchmarks, the report and the tests use only these names.

    Attributes:
        PAPER: The paper's name, e.g. ``"AFL"``.
        NOTEBOOK: Its notebook's stem, e.g. ``"03_afl"``.
        DATASET: The dataset its notebook runs by default (a :func:`recagents.data.load_dataset`
            name).
        METHODS: The methods ``run`` compares.
        RANKERS: The methods ``rank`` can put on shared candidates (empty: none).
        TABLES: The tables of :attr:`PaperRun.tables` that ``run`` returns.
        PROFILES: Sizes per profile (``smoke``, ``default``, ``paper``), read by the notebook
            and by ``run`` alike.
    """

    PAPER: str
    NOTEBOOK: str
    DATASET: str
    METHODS: tuple[str, ...]
    RANKERS: tuple[str, ...]
    TABLES: tuple[str, ...]
    PROFILES: Mapping[str, Mapping[str, Any]]

    def run(
        self, dataset: Dataset, config: Any = None, options: RunOptions | None = None
    ) -> PaperRun:
        """The paper's experiment in one call, as its notebook runs it."""
        ...

    def rank(
        self, task: RankTask, config: Any = None, options: RunOptions | None = None
    ) -> dict[str, Ranking]:
        """``options.methods`` of :attr:`RANKERS` on the shared candidates, by method name."""
        ...
