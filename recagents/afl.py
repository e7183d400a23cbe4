"""AFL: a recommendation agent and a user agent in a feedback loop.

Cai et al., *Agentic Feedback Loop Modeling Improves Recommendation and User Simulation*,
SIGIR 2025 (arXiv 2410.20027). A recommendation agent sees a user's recent history and 20
candidates (plus, in the first round, a sequential recommender's top pick) and proposes one
item with a reason. A user agent, playing that user, accepts it or rejects it with a reason.
Each rejection goes into both agents' memories and the recommendation agent tries again,
until the user agent accepts or a round limit is reached; the prediction is the last
proposal. One round alone is the *single recommendation agent*. The dialogue memory also
makes the user agent a better *user simulator* (like / dislike judgements).

What is here, in the order a run uses it:

- :class:`AFLConfig`: every setting, the paper's as defaults; the places where the paper and
  its code disagree are options.
- :func:`recent_histories`, :func:`tool_scores`, :func:`make_samples`: 20 candidates per
  test user with the tool model's (SASRec's) top pick, focus list and raw scores.
- :func:`user_sim_split` and :func:`user_sim_sets`: the user-simulation protocol (a
  held-out window of 10 items per user; positives and negatives at 1:1, 1:3 and 1:9).
- Pure prompt builders (``*_messages``), schemas and parsers; every choice is an index into
  the candidate list (or, with ``faithful_parsing``, the paper's exact-title match).
- :func:`feedback_loop`: the loop itself, batched over samples, every call accounted.
- :func:`hits_by_round`, :func:`simulate_users`, :func:`simulation_metrics`,
  :func:`chosen_items`, :func:`bias_measures`, :func:`bias_tests`, :func:`bias_figure`,
  :func:`dialogue_trace`: what the notebook reports.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import ITEM, LABEL, USER
from recagents.data import POSITION, Dataset, Split, chronological_order, leave_one_out
from recagents.llm.client import ChatRequest, ChatResult, LLMClient
from recagents.llm.runlog import RunLog, ask
from recagents.metrics import bootstrap_ci, classification_ci, paired_bootstrap

__all__ = [
    "STOPS",
    "AFLConfig",
    "RoundMemory",
    "always_yes_metrics",
    "Sample",
    "UserSimSets",
    "bias_figure",
    "bias_measures",
    "bias_tests",
    "chosen_items",
    "decision_schema",
    "dialogue_memory",
    "dialogue_trace",
    "feedback_loop",
    "hit_rate_table",
    "hits_by_round",
    "judge_history",
    "judge_messages",
    "make_samples",
    "parse_decision",
    "parse_recommendation",
    "predictions",
    "recent_histories",
    "recommend_messages",
    "recommend_schema",
    "relative_gain",
    "rounds_curve_figure",
    "simulate_users",
    "simulation_metrics",
    "step1_candidates",
    "stop_counts",
    "tool_scores",
    "user_loop_messages",
    "user_sim_sets",
    "user_sim_split",
]

#: How a dialogue ended.
STOPS = ("accepted", "limit", "rec_failed", "user_failed")

ROUND = "round"
RATIO = "ratio"
AGENT = "agent"


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class AFLConfig:
    """Every setting of an AFL run; the defaults are the paper's.

    Attributes:
        domain: The item noun used in prompts (the paper's LastFM prompts say "music artist").
        n_candidates: Candidates per sample, the target included (paper: 20).
        history_length: Most recent items shown as the history (paper: 10).
        max_rounds: Round limit of the recommendation loop (paper: 5; 1 = single agent).
        user_rounds: Round limit of the user-simulation step 1 loop (paper's code: 4).
        ratios: Positives:negatives of the user-simulation sets (paper: 1:1, 1:3, 1:9).
        window: Held-out items per user in user simulation (paper: the last 10).
        seed: Seeds the candidates and the user-simulation sets (the paper's scripts: 303).
        temperature: Sampling temperature of both agents (paper: 0.0).
        focus_share: Share of the candidates in the user agent's focus list (paper's code:
            the tool's top quarter, 5 of 20).
        user_memory_in_loop: The in-loop user agent sees the earlier rounds. The paper
            describes it; the released code builds the memory-less prompt in both branches.
        user_signal: What the in-loop user agent gets from the tool: ``"hint"`` (the code:
            the tool's top pick and the focus list) or ``"score"`` (the paper's f_u: the raw
            tool score of the recommended item).
        prior_every_round: Show the tool's pick in every round (the code: only round 1).
        feedback_text: The recommendation agent's memory holds the user's stated reasons
            (``False`` is the ablation "without feedback text": rejected items only).
        faithful_parsing: Parse the paper's way: the reply names an item by its title and
            only an exact (case-insensitive) title match counts. Default: a schema-enforced
            index into the candidates.
        nest_negatives: User simulation draws one set of negatives per user and takes the
            first 10, 15 or 18 of it for 1:1, 1:3, 1:9 (every judgement asked once and
            shared between ratios). The paper draws each ratio's negatives afresh (``False``).
        reason_chars: Cap on the length of every stated reason (keeps replies short).
        max_tokens: Most tokens per reply.
    """

    domain: str = "movie"
    n_candidates: int = 20
    history_length: int = 10
    max_rounds: int = 5
    user_rounds: int = 4
    ratios: tuple[tuple[int, int], ...] = ((1, 1), (1, 3), (1, 9))
    window: int = 10
    seed: int = 303
    temperature: float = 0.0
    focus_share: float = 0.25
    user_memory_in_loop: bool = True
    user_signal: Literal["hint", "score"] = "hint"
    prior_every_round: bool = False
    feedback_text: bool = True
    faithful_parsing: bool = False
    nest_negatives: bool = False
    reason_chars: int = 400
    max_tokens: int = 200

    def __post_init__(self) -> None:
        if self.n_candidates < 2:
            raise ValueError(f"n_candidates must be at least 2, got {self.n_candidates}")
        if self.history_length < 1:
            raise ValueError(f"history_length must be at least 1, got {self.history_length}")
        if self.max_rounds < 1 or self.user_rounds < 1:
            raise ValueError("max_rounds and user_rounds must be at least 1")
        if self.user_signal not in ("hint", "score"):
            raise ValueError(f"user_signal must be 'hint' or 'score', got {self.user_signal!r}")
        if not 0 < self.focus_share <= 1:
            raise ValueError(f"focus_share must be in (0, 1], got {self.focus_share}")
        for positives, negatives in self.ratios:
            if positives < 1 or negatives < 1:
                raise ValueError(
                    f"a ratio needs positives and negatives, got {positives}:{negatives}"
                )
            if self.positives_for((positives, negatives)) > self.window:
                raise ValueError(
                    f"ratio {positives}:{negatives} needs more positives than the window of "
                    f"{self.window} holds"
                )

    @property
    def focus_size(self) -> int:
        """Items in the user agent's focus list (5 of 20 with the paper's settings)."""
        return max(1, math.ceil(self.focus_share * self.n_candidates))

    def positives_for(self, ratio: tuple[int, int]) -> int:
        """Positives in a set of ``n_candidates`` at ``ratio`` (10, 5, 2 of 20)."""
        positives, negatives = ratio
        return max(1, self.n_candidates * positives // (positives + negatives))


def ratio_name(ratio: tuple[int, int]) -> str:
    """``(1, 3)`` → ``"1:3"``."""
    return f"{ratio[0]}:{ratio[1]}"


# --------------------------------------------------------------------------- samples


@dataclass(frozen=True)
class Sample:
    """One recommendation task: a user, the history, the candidates and the tool's view.

    Attributes:
        user: The user id.
        history: The most recent items, oldest first.
        candidates: The candidates in display order (the target among them).
        target: The held-out next item.
        prior: The tool model's top pick among the candidates.
        focus: The tool's top ``focus_size`` candidates, best first.
        scores: The tool's raw score of each candidate (a logit; can be negative).
    """

    user: str
    history: tuple[str, ...]
    candidates: tuple[str, ...]
    target: str
    prior: str
    focus: tuple[str, ...]
    scores: dict[str, float] = field(default_factory=dict)


def recent_histories(
    interactions: pd.DataFrame, users: Sequence[str], length: int
) -> dict[str, tuple[str, ...]]:
    """Each user's last ``length`` items in time order (ties in file order), oldest first."""
    wanted = set(users)
    ordered = chronological_order(interactions[interactions[USER].isin(wanted)])
    recent = ordered.groupby(USER, sort=False).tail(length)
    histories = recent.groupby(USER, sort=False)[ITEM].agg(tuple).to_dict()
    missing = [u for u in users if u not in histories]
    if missing:
        raise ValueError(f"{len(missing)} user(s) have no history, e.g. {missing[:3]}")
    return {u: histories[u] for u in users}


def tool_scores(
    model: Any, candidates: pd.DataFrame, histories: dict[str, tuple[str, ...]]
) -> pd.DataFrame:
    """The tool model's raw score of every candidate after the user's history.

    Args:
        model: A trained sequential :class:`recagents.baselines.Baseline` (SASRec), always
            scored in eval mode (the released code leaves dropout on; see the paper card).
        candidates: ``[user_id, item_id, ...]``.
        histories: The history each user's agents see, oldest first.

    Returns:
        ``candidates`` with a ``score`` column; ``NaN`` for an item the tool model never saw
        in training (it has no score for it, and the agents are told so).
    """
    users = list(dict.fromkeys(candidates[USER]))
    matrix = model.sequence_scores([list(histories[u]) for u in users])
    row_of = {u: i for i, u in enumerate(users)}
    columns = model.item_index(candidates[ITEM].tolist(), unknown=-1)
    frame = candidates.copy()
    scores = matrix[candidates[USER].map(row_of).to_numpy(), np.maximum(columns, 0)]
    frame["score"] = np.where(columns >= 0, scores, np.nan)
    return frame


def make_samples(
    scored: pd.DataFrame, histories: dict[str, tuple[str, ...]], focus_size: int
) -> list[Sample]:
    """Samples from scored candidates ``[user_id, item_id, label, position, score]``.

    Every user needs exactly one positive. Ties in the tool's score go to the earlier
    display position, so the prior and focus list are deterministic.
    """
    samples = []
    for user, rows in scored.groupby(USER, sort=True):
        rows = rows.sort_values(POSITION, kind="stable")
        positives = rows.loc[rows[LABEL] == 1, ITEM].tolist()
        if len(positives) != 1:
            raise ValueError(f"user {user} has {len(positives)} positives; exactly one is needed")
        ranked = rows.sort_values("score", ascending=False, kind="stable")[ITEM].tolist()
        samples.append(
            Sample(
                user=str(user),
                history=tuple(histories[user]),
                candidates=tuple(rows[ITEM].tolist()),
                target=positives[0],
                prior=ranked[0],
                focus=tuple(ranked[:focus_size]),
                scores=dict(zip(rows[ITEM], rows["score"].astype(float), strict=True)),
            )
        )
    return samples


def user_sim_split(dataset: Dataset | pd.DataFrame, window: int = 10) -> tuple[Split, pd.DataFrame]:
    """The user-simulation data: each user's last ``window`` items held out.

    The rest (``init``) is split leave-one-out, so its last item is step 1's target and the
    tool model trained on this split never sees the held-out window (whose items become the
    positives of the simulation sets).

    Returns:
        ``(split of init, window)``; ``window`` is ``[user_id, item_id]`` in time order.
        Users with fewer than ``window + 3`` interactions are left out.
    """
    frame = dataset.interactions if isinstance(dataset, Dataset) else dataset
    ordered = chronological_order(frame)
    from_end = ordered.groupby(USER, sort=False).cumcount(ascending=False)
    counts = ordered.groupby(USER, sort=False)[ITEM].transform("size")
    eligible = counts >= window + 3
    held = ordered[eligible & (from_end < window)]
    init = ordered[eligible & (from_end >= window)]
    split = leave_one_out(init)
    split = Split(split.train, split.valid, split.test, name=f"afl-sim-w{window}")
    return split, held[[USER, ITEM]].reset_index(drop=True)


def _draw(rng: np.random.Generator, pool: np.ndarray, excluded: set[str], n: int) -> list[str]:
    allowed = np.array([item for item in pool if item not in excluded])
    if len(allowed) < n:
        raise ValueError(f"only {len(allowed)} items are left to draw {n} negatives from")
    return rng.choice(allowed, size=n, replace=False).tolist()


@dataclass(frozen=True)
class UserSimSets:
    """The user-simulation protocol's data.

    Attributes:
        step1: Per user, the loop sample whose dialogue the AFL user agent remembers
            (history = init[:-1], target = init[-1], candidates outside the user's list).
        judged: ``[user_id, ratio, item_id, label]``: the items each user agent judges.
    """

    step1: list[Sample]
    judged: pd.DataFrame


def user_sim_sets(
    split: Split,
    window: pd.DataFrame,
    step1_scores: pd.DataFrame | None,
    users: Sequence[str],
    config: AFLConfig,
) -> UserSimSets:
    """Draw step 1's candidates and the judged sets of every ratio, seeded by ``config.seed``.

    Step 1: the target (init's last item) and ``n_candidates - 1`` random items the user
    never interacted with (window included). Step 2, per ratio: the window's first *p*
    items as positives and random items outside the user's list and outside step 1's
    candidates as negatives (afresh per ratio, or nested with ``config.nest_negatives``).

    Args:
        split: From :func:`user_sim_split`.
        window: From :func:`user_sim_split`.
        step1_scores: The tool's score of each step-1 candidate, ``[user_id, item_id,
            score]`` (computed by the caller with :func:`tool_scores`), or ``None`` to draw
            the candidates only (to be scored); then every score is 0, so the prior and the
            focus list are just the first displayed candidates.
        users: The simulated users.
        config: Sizes, ratios and the seed.
    """
    everything = pd.concat([split.train, split.valid, split.test, window], ignore_index=True)
    pool = np.array(sorted(everything[ITEM].astype(str).unique()))
    seen = everything.groupby(USER)[ITEM].agg(set)
    held = window.groupby(USER, sort=False)[ITEM].agg(list)
    histories = recent_histories(split.history("test"), users, config.history_length)
    target_of = split.test.set_index(USER)[ITEM]
    rng = np.random.default_rng(config.seed)
    candidate_rows, judged_rows = [], []
    for user in sorted(users):
        target = target_of[user]
        negatives = _draw(rng, pool, seen[user], config.n_candidates - 1)
        items = [target, *negatives]
        order = rng.permutation(len(items))
        for position, index in enumerate(order):
            candidate_rows.append((user, items[index], int(index == 0), position))
        excluded = seen[user] | set(items)
        nested = None
        for ratio in config.ratios:
            n_pos = config.positives_for(ratio)
            n_neg = config.n_candidates - n_pos
            if config.nest_negatives:
                if nested is None:
                    most = max(config.n_candidates - config.positives_for(r) for r in config.ratios)
                    nested = _draw(rng, pool, excluded, most)
                drawn = nested[:n_neg]
            else:
                drawn = _draw(rng, pool, excluded, n_neg)
            for item in held[user][:n_pos]:
                judged_rows.append((user, ratio_name(ratio), item, 1))
            for item in drawn:
                judged_rows.append((user, ratio_name(ratio), item, 0))
    candidates = pd.DataFrame(candidate_rows, columns=[USER, ITEM, LABEL, POSITION])
    if step1_scores is not None and len(step1_scores):
        scored = candidates.merge(step1_scores[[USER, ITEM, "score"]], on=[USER, ITEM], how="left")
    else:
        scored = candidates.assign(score=0.0)
    step1 = make_samples(scored, histories, config.focus_size)
    judged = pd.DataFrame(judged_rows, columns=[USER, RATIO, ITEM, LABEL])
    return UserSimSets(step1=step1, judged=judged)


def step1_candidates(sets_without_scores: UserSimSets) -> pd.DataFrame:
    """Step 1's candidates as ``[user_id, item_id]``, to be scored by the tool model."""
    rows = [(s.user, item) for s in sets_without_scores.step1 for item in s.candidates]
    return pd.DataFrame(rows, columns=[USER, ITEM])


# --------------------------------------------------------------------------- prompts


@dataclass(frozen=True)
class RoundMemory:
    """One earlier round as the agents remember it.

    Attributes:
        round: 1-based round number.
        item: The recommended item's text.
        rec_reason: Why the recommendation agent chose it.
        user_reason: Why the user agent rejected (or accepted) it; ``None`` when withheld.
        accepted: Whether the user agent accepted it.
    """

    round: int
    item: str
    rec_reason: str
    user_reason: str | None
    accepted: bool = False


def _score_text(score: float | None, domain: str) -> str:
    """How a tool score is worded; an item the tool model never saw has none."""
    if score is None or not np.isfinite(score):
        return f"The reward model has no score for this {domain} (it has never seen it)."
    return f"Reward model score: {score:.3f}."


def _numbered(texts: Sequence[str]) -> str:
    return "\n".join(f"{i}. {text}" for i, text in enumerate(texts, start=1))


def _history_line(history: Sequence[str]) -> str:
    return "; ".join(history) if history else "(nothing yet)"


def recommend_messages(
    history: Sequence[str],
    candidates: Sequence[str],
    prior: str | None,
    memory: Sequence[RoundMemory],
    config: AFLConfig,
) -> list[dict[str, str]]:
    """The recommendation agent's prompt for one round.

    Round 1 shows the tool model's pick ("another recommender suggests ..."); later rounds
    (``memory`` not empty) say that the user turned the last pick down and list each earlier
    round: the item, the agent's own reason and, with ``feedback_text``, the user's reason.
    What is stable for a sample (role, history, candidates) comes first, for the local
    server's prompt cache.
    """
    d = config.domain
    pick = "the number of one candidate" if not config.faithful_parsing else "the exact title"
    system = (
        f"You are a {d} recommender. From a user's history, predict which one of the "
        f"candidate {d}s the user will choose next. Another recommender system may suggest a "
        f"candidate; you can follow its suggestion or not. First think about the user's "
        f"interests and give your reason, then choose exactly one {d} from the candidates."
    )
    lines = [
        f"The user's history, oldest first: {_history_line(history)}.",
        f"Candidates:\n{_numbered(candidates)}",
    ]
    if memory:
        lines.append(f"The user did not find your last recommendation the best {d} for them.")
        lines.append("Your earlier recommendations and the user's answers:")
        for entry in memory:
            answer = (
                f"the user said: {entry.user_reason}"
                if config.feedback_text and entry.user_reason
                else "the user rejected it"
            )
            lines.append(
                f"Round {entry.round}: you recommended {entry.item} because {entry.rec_reason}; "
                f"{answer}."
            )
    if prior is not None and (not memory or config.prior_every_round):
        lines.append(f"The other recommender system suggests: {prior}.")
    lines.append(
        f'Reply in JSON: "reason" explains your choice in a few sentences, "choice" is {pick}.'
        if not config.faithful_parsing
        else f'Reply in JSON: "reason" explains your choice in a few sentences, "item" is {pick} '
        f"of one candidate, written exactly as listed."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def recommend_schema(n_candidates: int, config: AFLConfig) -> dict[str, Any]:
    """The recommendation agent's reply: a reason, then a candidate number (or a title)."""
    reason = {"type": "string", "maxLength": config.reason_chars}
    choice: dict[str, Any] = (
        {"type": "string", "maxLength": 200}
        if config.faithful_parsing
        else {"type": "integer", "enum": list(range(1, n_candidates + 1))}
    )
    key = "item" if config.faithful_parsing else "choice"
    return {
        "type": "object",
        "properties": {"reason": reason, key: choice},
        "required": ["reason", key],
    }


def _normalise_title(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def parse_recommendation(
    data: Any, candidates: Sequence[str], faithful: bool = False
) -> tuple[int | None, str | None]:
    """The chosen candidate's 0-based position and the reason, or ``None`` if unusable.

    Default: ``choice`` must be an integer from 1 to ``len(candidates)``. With ``faithful``
    (the paper's parser): ``item`` must equal a candidate's text, ignoring case and runs of
    spaces; a decorated title (bold, quotes) is a miss, as in the paper's code.
    """
    if not isinstance(data, dict):
        return None, None
    reason = data.get("reason")
    reason = str(reason).strip() if isinstance(reason, str) else None
    if faithful:
        named = data.get("item")
        if not isinstance(named, str):
            return None, reason
        wanted = _normalise_title(named)
        for index, text in enumerate(candidates):
            if _normalise_title(text) == wanted:
                return index, reason
        return None, reason
    choice = data.get("choice")
    if isinstance(choice, bool) or not isinstance(choice, int):
        return None, reason
    if not 1 <= choice <= len(candidates):
        return None, reason
    return choice - 1, reason


def user_loop_messages(
    history: Sequence[str],
    candidates: Sequence[str],
    recommended: str,
    rec_reason: str,
    hint: str | None,
    focus: Sequence[str],
    score: float | None,
    memory: Sequence[RoundMemory],
    config: AFLConfig,
) -> list[dict[str, str]]:
    """The in-loop user agent's prompt: is the recommended item my favourite candidate?

    With ``user_signal="hint"`` (the code) the agent is told the tool's pick and sees its
    focus list; with ``"score"`` (the paper's f_u) it sees the tool's raw score of the
    recommended item. With ``user_memory_in_loop`` it also sees the earlier rounds.
    """
    d = config.domain
    system = (
        f"You are a user who enjoys {d}s. The {d}s in your history, oldest first: "
        f"{_history_line(history)}. "
    )
    if config.user_signal == "hint" and hint is not None:
        system += f"A recommender system thinks you might like: {hint}. "
    system += (
        f"A recommendation agent proposes one {d} from a list of candidates. Decide whether "
        f"it is the {d} you would most like next among all the candidates. First "
        f"sum up your interests and give your reason, then decide."
    )
    lines = [f"Candidates:\n{_numbered(candidates)}"]
    if config.user_signal == "hint" and focus:
        lines.append(f"The recommender system ranks these highest for you: {'; '.join(focus)}.")
    if config.user_memory_in_loop and memory:
        lines.append("Earlier rounds of this conversation:")
        for entry in memory:
            lines.append(
                f"Round {entry.round}: the agent recommended {entry.item} because "
                f"{entry.rec_reason}; you rejected it because {entry.user_reason or 'no reason'}."
            )
    lines.append(f"Now the agent recommends: {recommended}. Its reason: {rec_reason}")
    if config.user_signal == "score":
        lines.append(
            f"{_score_text(score, d)} The score can be negative and higher means a better "
            f"match; do not trust it blindly."
        )
    lines.append(
        'Reply in JSON: "reason" gives your reason in a few sentences, "decision" is "yes" if '
        f'it is the {d} you would most like next, otherwise "no".'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def judge_messages(
    history: Sequence[str],
    item: str,
    score: float | None,
    dialogue: tuple[Sequence[str], Sequence[RoundMemory]] | None,
    config: AFLConfig,
) -> list[dict[str, str]]:
    """The user-simulation prompt: would I like this one item?

    The single user agent sees its history, the item and the tool's raw score (a "reward
    model" with the paper's caveats). The AFL user agent (``dialogue`` given: step 1's
    candidates and rounds) also sees its earlier conversation with the recommendation agent.
    The judged item and its score come last, so one user's judgements share a prompt prefix.
    """
    d = config.domain
    system = (
        f"You are a user who enjoys {d}s. The {d}s in your history, oldest first: "
        f"{_history_line(history)}. You will be shown one {d} and asked whether you would "
        f"like it. A reward model gives a score with it: the score can be negative, higher "
        f"means a better match, and it can be wrong, so do not trust it blindly."
    )
    lines = []
    if dialogue is not None:
        step_candidates, rounds = dialogue
        lines.append(
            f"Earlier, a recommendation agent offered you {d}s from these candidates: "
            f"{'; '.join(step_candidates)}."
        )
        lines.append("What was said:")
        for entry in rounds:
            verdict = "you accepted it" if entry.accepted else "you rejected it"
            lines.append(
                f"Round {entry.round}: it recommended {entry.item} because {entry.rec_reason}; "
                f"{verdict} because {entry.user_reason or 'no reason'}."
            )
    lines.append(f"The {d}: {item}. {_score_text(score, d)}")
    lines.append(
        'Reply in JSON: "reason" gives your reason in a few sentences, "decision" is "yes" if '
        f'you would like this {d}, otherwise "no".'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def decision_schema(config: AFLConfig) -> dict[str, Any]:
    """The user agent's reply: a reason, then yes or no."""
    return {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "maxLength": config.reason_chars},
            "decision": {"type": "string", "enum": ["yes", "no"]},
        },
        "required": ["reason", "decision"],
    }


def parse_decision(data: Any) -> tuple[bool | None, str | None]:
    """``(accepted, reason)``; ``accepted`` is ``None`` unless the decision is yes or no."""
    if not isinstance(data, dict):
        return None, None
    reason = data.get("reason")
    reason = str(reason).strip() if isinstance(reason, str) else None
    decision = data.get("decision")
    if not isinstance(decision, str):
        return None, reason
    word = decision.strip().casefold()
    if word in ("yes", "no"):
        return word == "yes", reason
    return None, reason


# --------------------------------------------------------------------------- the loop


def _present(value: Any) -> bool:
    """Whether a rounds-frame cell holds a value (``None`` and ``NaN`` do not)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _memories(rows: list[dict[str, Any]], titles: dict[str, str]) -> list[RoundMemory]:
    """The finished rounds of one dialogue as both agents remember them."""
    return [
        RoundMemory(
            round=row[ROUND],
            item=titles[row[ITEM]],
            rec_reason=row["rec_reason"] if _present(row["rec_reason"]) else "",
            user_reason=row["user_reason"] if _present(row["user_reason"]) else None,
            accepted=bool(row["accepted"]),
        )
        for row in rows
        if _present(row[ITEM]) and _present(row["accepted"])
    ]


def _ask(
    client: LLMClient,
    log: RunLog,
    phase: str,
    kind: str,
    users: Sequence[str],
    messages: Sequence[list[dict[str, str]]],
    schema: dict[str, Any],
    config: AFLConfig,
    desc: str,
) -> list[ChatResult]:
    """One structured request per user, run concurrently and accounted in the log."""
    requests = [
        ChatRequest(
            messages=m,
            schema=schema,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            tag=user,
        )
        for user, m in zip(users, messages, strict=True)
    ]
    return ask(client, log, phase, kind, requests, desc=desc)


def feedback_loop(
    samples: Sequence[Sample],
    titles: dict[str, str],
    config: AFLConfig,
    client: LLMClient,
    log: RunLog,
    max_rounds: int | None = None,
    phase: str = "afl",
    keep_prompts: Sequence[str] = (),
) -> pd.DataFrame:
    """Run the recommendation / user agent dialogue for every sample, batched by round.

    Round *r*: every open dialogue's recommendation agent proposes (requests run
    concurrently); then, unless the limit is 1 (the single recommendation agent), its user
    agent decides. A dialogue ends when the user agent accepts, at the round limit, or when a
    reply is unusable after the client's bounded re-asks (counted, never retried forever);
    a failed recommendation keeps the previous round's proposal as the prediction.

    Args:
        samples: The tasks.
        titles: Item id → the text shown in prompts.
        config: Prompts and options.
        client: The LLM client.
        log: Receives one row per call (``phase``, kind ``rec`` or ``user``).
        max_rounds: Round limit (default ``config.max_rounds``).
        phase: Label of these calls in the log and the cost table.
        keep_prompts: Users whose prompts and replies are kept for a teaching trace.

    Returns:
        One row per round held: ``[user_id, round, item_id, position, label, rec_reason,
        rec_ok, accepted, user_reason, user_ok, stop]``; ``stop`` is set on a dialogue's last
        row (one of :data:`STOPS`). Kept prompts are in ``rec_prompt`` / ``user_prompt``.
    """
    limit = config.max_rounds if max_rounds is None else max_rounds
    if limit < 1:
        raise ValueError(f"max_rounds must be at least 1, got {limit}")
    keep = set(keep_prompts)
    rounds: dict[str, list[dict[str, Any]]] = {s.user: [] for s in samples}
    if len(rounds) != len(samples):
        raise ValueError("feedback_loop: a user appears in more than one sample")
    open_samples = list(samples)
    rec_schema = recommend_schema(config.n_candidates, config)
    user_schema = decision_schema(config)
    for round_number in range(1, limit + 1):
        if not open_samples:
            break
        texts = {s.user: [titles[i] for i in s.candidates] for s in open_samples}
        rec_messages = [
            recommend_messages(
                [titles[i] for i in s.history],
                texts[s.user],
                titles[s.prior],
                _memories(rounds[s.user], titles),
                config,
            )
            for s in open_samples
        ]
        results = _ask(
            client, log, phase, "rec", [s.user for s in open_samples], rec_messages, rec_schema,
            config, f"{phase} round {round_number}: recommend",
        )  # fmt: skip
        proposals = []
        for sample, messages, result in zip(open_samples, rec_messages, results, strict=True):
            index, reason = (
                parse_recommendation(result.data, texts[sample.user], config.faithful_parsing)
                if result.ok
                else (None, None)
            )
            row = {
                USER: sample.user,
                ROUND: round_number,
                ITEM: None if index is None else sample.candidates[index],
                POSITION: index,
                LABEL: None if index is None else int(sample.candidates[index] == sample.target),
                "rec_reason": reason,
                "rec_ok": index is not None,
                "accepted": None,
                "user_reason": None,
                "user_ok": None,
                "stop": None,
            }
            if sample.user in keep:
                row["rec_prompt"] = messages[-1]["content"]
                row["rec_reply"] = result.text
            rounds[sample.user].append(row)
            if index is None:
                row["stop"] = "rec_failed"
            elif limit == 1:
                row["stop"] = "limit"
            else:
                proposals.append((sample, row))
        if not proposals:
            open_samples = []
            break
        user_messages = [
            user_loop_messages(
                [titles[i] for i in s.history],
                texts[s.user],
                titles[row[ITEM]],
                row["rec_reason"] or "",
                titles[s.prior],
                [titles[i] for i in s.focus],
                s.scores.get(row[ITEM]),
                _memories(rounds[s.user][:-1], titles),
                config,
            )
            for s, row in proposals
        ]
        results = _ask(
            client, log, phase, "user", [s.user for s, _ in proposals], user_messages,
            user_schema, config, f"{phase} round {round_number}: user decides",
        )  # fmt: skip
        still_open = []
        for (sample, row), messages, result in zip(proposals, user_messages, results, strict=True):
            accepted, reason = parse_decision(result.data) if result.ok else (None, None)
            row["accepted"], row["user_reason"], row["user_ok"] = (
                accepted,
                reason,
                accepted is not None,
            )
            if sample.user in keep:
                row["user_prompt"] = messages[-1]["content"]
                row["user_reply"] = result.text
            if accepted is None:
                row["stop"] = "user_failed"
            elif accepted:
                row["stop"] = "accepted"
            elif round_number == limit:
                row["stop"] = "limit"
            else:
                still_open.append(sample)
        open_samples = still_open
    columns = [USER, ROUND, ITEM, POSITION, LABEL, "rec_reason", "rec_ok", "accepted"]
    columns += ["user_reason", "user_ok", "stop"]
    frame = pd.DataFrame([row for s in samples for row in rounds[s.user]])
    if frame.empty:
        return pd.DataFrame(columns=columns)
    return frame


def predictions(rounds: pd.DataFrame, limit: int) -> pd.DataFrame:
    """Each dialogue's prediction under round limit ``limit``: its last usable proposal.

    A limit-*L* loop is the same dialogue stopped after round *L*, so one run at the largest
    limit answers every smaller one. A dialogue with no usable proposal predicts nothing.

    Returns:
        ``[user_id, item_id, position, hit]`` (``item_id`` ``None`` and ``hit`` 0 when none).
    """
    upto = rounds[(rounds[ROUND] <= limit)]
    rows = []
    for user, group in upto.groupby(USER, sort=False):
        usable = group[group[ITEM].notna()]
        if usable.empty:
            rows.append((user, None, None, 0))
        else:
            last = usable.iloc[-1]
            rows.append((user, last[ITEM], int(last[POSITION]), int(last[LABEL])))
    return pd.DataFrame(rows, columns=[USER, ITEM, POSITION, "hit"])


def hits_by_round(rounds: pd.DataFrame, max_rounds: int) -> pd.DataFrame:
    """HR@1 hits per user for every round limit 1..``max_rounds``: ``[user_id, limit, hit]``."""
    parts = [
        predictions(rounds, limit).assign(limit=limit)[[USER, "limit", "hit"]]
        for limit in range(1, max_rounds + 1)
    ]
    return pd.concat(parts, ignore_index=True)


def hit_rate_table(
    hits: dict[str, Sequence[float]], n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> pd.DataFrame:
    """HR@1 with a bootstrap interval per method: ``[method, metric, mean, low, high, n]``."""
    rows = []
    for method, values in hits.items():
        values = np.asarray(values, dtype=float)
        mean, low, high = bootstrap_ci(values, n_boot=n_boot, ci=ci, seed=seed)
        rows.append(
            {"method": method, "metric": "HR@1", "mean": mean, "low": low, "high": high,
             "n": len(values)}
        )  # fmt: skip
    return pd.DataFrame(rows)


def stop_counts(rounds: pd.DataFrame) -> pd.Series:
    """How the dialogues ended (accepted, at the limit, or on an unusable reply)."""
    ended = rounds["stop"].dropna()
    return ended.value_counts().reindex(list(STOPS), fill_value=0)


# --------------------------------------------------------------------------- user simulation


def dialogue_memory(rounds: pd.DataFrame, titles: dict[str, str]) -> dict[str, list[RoundMemory]]:
    """Each user's finished rounds of a dialogue, as the AFL user agent remembers them."""
    memory: dict[str, list[RoundMemory]] = {}
    for user, group in rounds.groupby(USER, sort=False):
        memory[str(user)] = _memories(group.to_dict("records"), titles)
    return memory


def judge_history(sample: Sample, config: AFLConfig) -> tuple[str, ...]:
    """The history both simulated users judge with: init's last items, step 1's target too.

    The step 1 dialogue happened before the held-out window, so init ends with its target.
    """
    return (*sample.history, sample.target)[-config.history_length :]


def simulate_users(
    sets: UserSimSets,
    judged_scores: pd.DataFrame,
    step1_rounds: pd.DataFrame,
    titles: dict[str, str],
    config: AFLConfig,
    client: LLMClient,
    log: RunLog,
    agents: Sequence[str] = ("User Agent", "AFL"),
) -> pd.DataFrame:
    """Every user agent judges every item of its sets: like it or not.

    ``User Agent`` sees the history, the item and the tool's score; ``AFL`` also sees step
    1's candidates and dialogue. Each distinct (user, item) prompt is asked once, even when
    the item is in several ratios' sets. An unusable reply is ``predicted = None`` (counted,
    see :func:`simulation_metrics`).

    Args:
        sets: From :func:`user_sim_sets`.
        judged_scores: The tool's score of every judged item, ``[user_id, item_id, score]``.
        step1_rounds: :func:`feedback_loop`'s rounds on ``sets.step1``.
        titles: Item id → text.
        config: Prompts.
        client: The LLM client.
        log: Receives the calls (phase ``user-sim``, kind = the agent).
        agents: Which agents judge.

    Returns:
        ``sets.judged`` with ``agent``, ``score``, ``predicted`` and ``reason``, one row per
        (agent, user, ratio, item).
    """
    unknown = set(agents) - {"User Agent", "AFL"}
    if unknown:
        raise ValueError(f"unknown agents {sorted(unknown)}; use 'User Agent' and/or 'AFL'")
    step1 = {s.user: s for s in sets.step1}
    memory = dialogue_memory(step1_rounds, titles)
    distinct = (
        sets.judged[[USER, ITEM]]
        .drop_duplicates()
        .merge(
            judged_scores[[USER, ITEM, "score"]].drop_duplicates([USER, ITEM]),
            on=[USER, ITEM],
            how="left",
            indicator=True,
        )
    )
    if (distinct.pop("_merge") != "both").any():
        raise ValueError("judged_scores has no row for some judged item; score them all first")
    schema = decision_schema(config)
    parts = []
    for agent in agents:
        users, messages = [], []
        for user, item, score in distinct[[USER, ITEM, "score"]].itertuples(index=False):
            sample = step1[user]
            dialogue = None
            if agent == "AFL":
                dialogue = ([titles[i] for i in sample.candidates], memory.get(user, []))
            users.append(user)
            messages.append(
                judge_messages(
                    [titles[i] for i in judge_history(sample, config)],
                    titles[item],
                    float(score),
                    dialogue,
                    config,
                )
            )
        results = _ask(
            client, log, "user-sim", agent, users, messages, schema, config,
            f"user simulation: {agent}",
        )  # fmt: skip
        decided = [parse_decision(r.data) if r.ok else (None, None) for r in results]
        parts.append(
            distinct.assign(
                **{AGENT: agent},
                predicted=[d[0] for d in decided],
                reason=[d[1] for d in decided],
            )
        )
    answers = pd.concat(parts, ignore_index=True)
    return sets.judged.merge(answers, on=[USER, ITEM], how="left")[
        [AGENT, USER, RATIO, ITEM, LABEL, "score", "predicted", "reason"]
    ]


def simulation_metrics(
    judgements: pd.DataFrame,
    n_boot: int = 1000,
    seed: int = 0,
    failures_as_wrong: bool = False,
) -> pd.DataFrame:
    """Accuracy, precision, recall and F1 per agent and ratio, with bootstrap intervals.

    Micro-averaged over all judgements of a ratio. Unusable replies are left out and
    counted in ``unanswered``; with ``failures_as_wrong`` they count as the wrong label
    instead (the paper's code, after its retries).

    Returns:
        ``[agent, ratio, metric, mean, low, high, n, unanswered]``.
    """
    rows = []
    for (agent, ratio), group in judgements.groupby([AGENT, RATIO], sort=False):
        missing = group["predicted"].isna()
        if failures_as_wrong:
            predicted = group["predicted"].where(~missing, group[LABEL] == 0).astype(bool)
            labels = group[LABEL]
        else:
            predicted = group.loc[~missing, "predicted"].astype(bool)
            labels = group.loc[~missing, LABEL]
        if len(labels) == 0:
            continue
        table = classification_ci(labels.to_numpy(), predicted.to_numpy(), n_boot=n_boot, seed=seed)
        rows.append(table.assign(agent=agent, ratio=ratio, unanswered=int(missing.sum())))
    if not rows:
        return pd.DataFrame(
            columns=[AGENT, RATIO, "metric", "mean", "low", "high", "n", "unanswered"]
        )
    frame = pd.concat(rows, ignore_index=True)
    return frame[[AGENT, RATIO, "metric", "mean", "low", "high", "n", "unanswered"]]


def always_yes_metrics(judgements: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """The metrics of a simulator that likes everything, per ratio: the floor to beat.

    Recall is 1 and precision the share of positives (0.5, 0.25, 0.1 at 1:1, 1:3, 1:9), so
    F1 is 0.67, 0.4, 0.18 without any judgement; an agent near these numbers says yes to
    nearly everything. Same columns as :func:`simulation_metrics`, agent ``Always yes``.
    """
    one_agent = judgements[judgements[AGENT] == judgements[AGENT].iloc[0]]
    return simulation_metrics(
        one_agent.assign(**{AGENT: "Always yes"}, predicted=True), n_boot=n_boot, seed=seed
    )


def relative_gain(better: Sequence[float], base: Sequence[float]) -> float:
    """Mean relative gain (%) of ``better`` over ``base``, pair by pair.

    The paper's headline numbers are such averages (+11.52%, +21.12%); how it averages is
    not stated, so this is the plain mean of the per-pair relative gains, leaving out pairs
    whose base is 0 (``nan`` when none is left).
    """
    a, b = np.asarray(better, dtype=float), np.asarray(base, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"better and base differ in length: {a.size} vs {b.size}")
    keep = b > 0
    if not keep.any():
        return float("nan")
    return float(np.mean((a[keep] - b[keep]) / b[keep]) * 100)


# --------------------------------------------------------------------------- bias


def chosen_items(samples: Sequence[Sample], methods: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """What each method chose per sample, with the display position, beside the truth.

    Args:
        samples: The recommendation samples.
        methods: Method name → ``[user_id, item_id]`` of its choice (``None`` = nothing).

    Returns:
        ``[method, user_id, item_id, position]``; ``Ground truth`` (the target) and
        ``Tool (SASRec)`` (the prior) are added; position is 1-based.
    """
    position_of = {s.user: {item: i + 1 for i, item in enumerate(s.candidates)} for s in samples}
    rows = []
    for s in samples:
        rows.append(("Ground truth", s.user, s.target, position_of[s.user][s.target]))
        rows.append(("Tool (SASRec)", s.user, s.prior, position_of[s.user][s.prior]))
    for method, frame in methods.items():
        for user, item in frame[[USER, ITEM]].itertuples(index=False):
            if item is None or pd.isna(item):
                continue
            rows.append((method, user, item, position_of[user][item]))
    return pd.DataFrame(rows, columns=["method", USER, ITEM, "position"])


def bias_measures(chosen: pd.DataFrame, popularity: pd.Series, n_items: int) -> pd.DataFrame:
    """Add each chosen item's training popularity and its popularity percentile.

    Args:
        chosen: From :func:`chosen_items`.
        popularity: Training interactions per item id.
        n_items: Catalogue size (items never interacted with have popularity 0).

    Returns:
        ``chosen`` with ``popularity`` (count) and ``pop_percentile`` (share of the
        catalogue strictly less popular, 0-100).
    """
    counts = popularity.astype(float)
    sorted_counts = np.sort(
        np.concatenate([counts.to_numpy(), np.zeros(max(0, n_items - len(counts)))])
    )
    frame = chosen.copy()
    frame["popularity"] = frame[ITEM].map(counts).fillna(0.0)
    below = np.searchsorted(sorted_counts, frame["popularity"].to_numpy(), side="left")
    frame["pop_percentile"] = 100.0 * below / len(sorted_counts)
    return frame


def bias_tests(
    measures: pd.DataFrame, loop: str, single: str, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Does the loop amplify bias? Paired differences ``loop - single`` per measure.

    Measures: mean popularity percentile of the chosen item, mean display position, and the
    share of choices at position 1. "Amplifies" means the 95% interval of the difference
    lies entirely on the biased side (more popular; earlier positions).

    Returns:
        ``[measure, loop, single, diff, low, high, p_value, amplifies]``.
    """
    both = measures[measures["method"].isin([loop, single])]
    wide = both.pivot_table(index=USER, columns="method", values=["pop_percentile", "position"])
    wide = wide.dropna()
    rows = []
    specs = [
        ("popularity percentile", "pop_percentile", lambda v: v, 1.0),
        ("mean position", "position", lambda v: v, -1.0),
        ("share at position 1", "position", lambda v: (v == 1).astype(float), 1.0),
    ]
    for name, column, transform, biased_sign in specs:
        a = transform(wide[(column, loop)].to_numpy(float))
        b = transform(wide[(column, single)].to_numpy(float))
        if len(a) == 0:
            continue
        result = paired_bootstrap(a, b, n_boot=n_boot, seed=seed)
        low, high = result.low, result.high
        amplifies = (low > 0) if biased_sign > 0 else (high < 0)
        rows.append(
            {"measure": name, "loop": float(a.mean()), "single": float(b.mean()),
             "diff": result.diff, "low": low, "high": high, "p_value": result.p_value,
             "amplifies": bool(amplifies), "n": len(a)}
        )  # fmt: skip
    return pd.DataFrame(rows)


def bias_figure(measures: pd.DataFrame, n_candidates: int, title: str = "") -> Any:
    """Two panels: popularity percentile of the chosen items, and their display positions."""
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(measures["method"]))
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    data = [measures.loc[measures["method"] == m, "pop_percentile"].to_numpy() for m in methods]
    left.boxplot(data, vert=False, tick_labels=methods, showmeans=True)
    left.set_xlabel("popularity percentile of the chosen item (training counts)")
    left.set_xlim(0, 100)
    left.set_title("Popularity bias")
    positions = np.arange(1, n_candidates + 1)
    width = 0.8 / max(1, len(methods))
    for k, method in enumerate(methods):
        picked = measures.loc[measures["method"] == method, "position"]
        share = picked.value_counts(normalize=True).reindex(positions, fill_value=0.0)
        right.bar(positions + (k - (len(methods) - 1) / 2) * width, share.to_numpy(), width,
                  label=method)  # fmt: skip
    right.axhline(1 / n_candidates, color="grey", linestyle=":", linewidth=1, label="uniform")
    right.set_xlabel("position of the chosen candidate in the displayed list")
    right.set_ylabel("share of samples")
    right.set_xticks(positions)
    right.set_title("Position bias")
    right.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def rounds_curve_figure(
    curve: pd.DataFrame, reference: dict[str, float] | None = None, n_candidates: int = 20
) -> Any:
    """HR@1 against the round limit, with intervals, and horizontal reference lines.

    Args:
        curve: ``[limit, mean, low, high]``.
        reference: Label → HR@1 drawn as a dashed line (e.g. the tool model alone).
        n_candidates: Candidates per sample, for the axis label.
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    x = curve["limit"].to_numpy()
    y = curve["mean"].to_numpy()
    ax.errorbar(x, y, yerr=[y - curve["low"].to_numpy(), curve["high"].to_numpy() - y],
                marker="o", capsize=4, label="AFL (round limit)")  # fmt: skip
    for k, (label, value) in enumerate((reference or {}).items()):
        ax.axhline(value, linestyle="--", color=f"C{k + 1}", label=label)
    ax.set_xticks(x)
    ax.set_xlabel("maximum rounds (1 = single recommendation agent)")
    ax.set_ylabel(f"HR@1 over {n_candidates} candidates")
    ax.set_title("HR@1 by round limit (95% CI)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- teaching


def _wrap(text: Any, width: int) -> str:
    return textwrap.fill(str(text or ""), width=width, initial_indent="    ",
                         subsequent_indent="    ")  # fmt: skip


def _without_candidates(prompt: str) -> str:
    """A prompt without its numbered candidate lines (shown once, in round 1)."""
    return "\n".join(line for line in prompt.splitlines() if not re.match(r"\d+\. ", line))


def dialogue_trace(rounds: pd.DataFrame, user: str, titles: dict[str, str], width: int = 96) -> str:
    """One dialogue round by round: the prompts (when kept), proposals, verdicts, reasons."""
    rows = rounds[rounds[USER] == user].sort_values(ROUND)
    if rows.empty:
        raise KeyError(f"no dialogue for user {user!r}")
    out = []
    for row in rows.to_dict("records"):
        out.append(f"=== round {row[ROUND]}")
        if isinstance(row.get("rec_prompt"), str):
            first = row[ROUND] == 1
            out.append("  recommendation agent was asked" + (":" if first else " (no candidates):"))
            prompt = row["rec_prompt"] if first else _without_candidates(row["rec_prompt"])
            out.append(textwrap.indent(prompt, "    | "))
        if row[ITEM] is None or pd.isna(row[ITEM]):
            out.append(f"  recommendation agent: no usable reply ({row.get('rec_reply')!r})")
        else:
            mark = "TARGET" if row[LABEL] == 1 else "not the target"
            out.append(f"  recommends #{int(row[POSITION]) + 1} {titles[row[ITEM]]} [{mark}]")
            out.append(_wrap(f"because: {row['rec_reason']}", width))
        if isinstance(row.get("user_prompt"), str):
            out.append("  user agent was asked (candidates left out):")
            out.append(textwrap.indent(_without_candidates(row["user_prompt"]), "    | "))
        if row["accepted"] is not None and not pd.isna(row["accepted"]):
            verdict = "ACCEPTS" if row["accepted"] else "rejects"
            out.append(f"  user agent {verdict}")
            out.append(_wrap(f"because: {row['user_reason']}", width))
        if isinstance(row["stop"], str):
            out.append(f"  -> dialogue ends: {row['stop']}")
    return "\n".join(out)
