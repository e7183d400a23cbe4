"""AgentCF: user and item agents that learn by collaborative reflection.

Zhang et al., *AgentCF: Collaborative Learning with Autonomous Language Agents for
Recommender Systems*, WWW 2024 (arXiv 2310.09233). Users *and* items are LLM agents whose
only parameters are text memories. Training replays real interactions as pairwise choices:
the user agent picks between the real next item and a popularity-sampled negative and says
why; then both sides rewrite their memories ("collaborative reflection"). Item memories are
shared, so what one user teaches an item reaches every later user of it. At test time a user
agent ranks 1 + 9 candidates, each shown with its item memory.

What is here, in the order a run uses it:

- :func:`make_subset`: the paper's data construction (8 items per user: 1 history-only
  prefix, 5 training targets, 1 valid, 1 test) as a dense or a sparse sample of users.
- :func:`training_pairs` and :func:`schedule`: one popularity-weighted negative per target,
  users interleaved round-robin in batches.
- :class:`AgentState` and :func:`initial_state`: the agents' memories.
- Pure prompt builders (``*_messages``) and parsers (:func:`parse_choice`,
  :func:`parse_ranking`); every structured reply chooses items by index.
- :func:`train`: the batched forward / reflection loop, with the paper's ablations as modes.
- :func:`pairwise_probe` and :func:`rank_candidates`: re-test, position bias, and the
  B / B+H / B+R rankings (plus the LLMRank-style and verbalised-history rankers).
- :func:`cost_table`: calls, tokens and endpoint time per phase.

Every quirk of the official code is an option whose default is the paper's behaviour; the
module docstrings of the options say what the fix would be.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import GENRES, ITEM, LABEL, TITLE, USER
from recagents.data import (
    POSITION,
    Dataset,
    DatasetError,
    Split,
    candidate_sets,
    chronological_order,
)
from recagents.data import readable_title as _readable_title
from recagents.llm.client import ChatRequest, LLMClient, get_client
from recagents.llm.runlog import RunLog, cost_table
from recagents.metrics import format_interval
from recagents.protocol import (
    FAITHFUL_MISSING_RANK,
    RankingParse,
    parse_ranking,
    ranking_frame,
    ranking_schema,
)

__all__ = [
    "ABLATIONS",
    "RELEASED_SUBSETS",
    "VARIANTS",
    "AgentCFConfig",
    "AgentCFRun",
    "AgentState",
    "apply_item_reflection",
    "apply_user_reflection",
    "RankingParse",
    "RankOutcome",
    "RunLog",
    "Subset",
    "choice_schema",
    "cost_table",
    "forward_accuracy",
    "learning_figure",
    "forward_messages",
    "item_trace",
    "item_titles",
    "paper_side_by_side",
    "user_trace",
    "PAPER_METHOD",
    "FAITHFUL_MISSING_RANK",
    "labelled",
    "initial_item_memory",
    "initial_state",
    "initial_user_memory",
    "item_reflection_messages",
    "item_reflection_schema",
    "llmrank_messages",
    "make_subset",
    "pairwise_probe",
    "parse_choice",
    "parse_ranking",
    "order_consistency",
    "probe_summary",
    "rank_candidates",
    "ranking_frame",
    "ranking_messages",
    "ranking_schema",
    "reflecting_pairs",
    "retrieve_version",
    "run",
    "schedule",
    "subset_candidates",
    "subset_stats",
    "train",
    "training_pairs",
    "user_reflection_messages",
    "user_reflection_schema",
    "verbalised_history",
]

#: Ranking variants: the paper's three, plus two rankers that need no trained user agent.
VARIANTS = ("B", "B+H", "B+R", "LLMRank", "history-user")

#: Training modes: the full method and the paper's three ablations (Table 3).
ABLATIONS = ("full", "no_autonomy", "no_item_agent", "no_user_agent")

#: What the official repository's two released subsets look like (Amazon CDs, 100 users each;
#: computed from the released files, see the paper card), to set beside ours.
RELEASED_SUBSETS = pd.DataFrame(
    [
        {
            "subset": "CDs-dense",
            "users": 100,
            "items": 269,
            "distinct_targets": 225,
            "test_items_trained": 81,
        },
        {
            "subset": "CDs-sparse",
            "users": 100,
            "items": 704,
            "distinct_targets": 450,
            "test_items_trained": 7,
        },
    ]
)

ROLE = "role"
SLOT = "slot"
STEP = "step"
BATCH = "batch"
POSITIVE = "positive"
NEGATIVE = "negative"


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class AgentCFConfig:
    """Settings of one AgentCF run; the defaults are the paper's (official code's) settings.

    Attributes:
        domain: The noun the prompts use for an item ("movie", "CD", "office product").
        n_targets: Training targets per user (the paper: 5, in time order).
        batch_size: Distinct users per batch; all calls of a batch see one memory state.
            ``1`` makes every update sequential (the fix for "last write wins").
        rounds: Forward/reflection rounds per batch (the paper: 2).
        steps: Train on the first ``steps`` targets of every user only (``None``: all, as the
            paper); fewer is a documented deviation that saves calls.
        pair_order: Order of the pair in the forward prompt. The paper always shows the
            negative first (``"neg_first"``); ``"random"`` shuffles with ``seed``.
        update_negative: Also store the negative item's rewritten description (the paper
            stores only the positive's).
        exclude_future_negatives: Never draw the user's valid or test item as a training
            negative (the paper's sampler can).
        user_words: Word limit the prompt asks of a self-description (the paper: 180).
        item_words: Word limit the prompt asks of an item description (the paper: 50).
        temperature: Sampling temperature of training calls (the official code: 0.2).
        eval_temperature: Sampling temperature of ranking and probe calls (the official code
            uses 0.2 although its config says 0).
        history_len: Most history items shown to B+H and the history-based rankers.
        history_as_memories: B+H shows the history items' memories instead of titles only
            (the paper passes titles).
        seed: Seeds negatives, pair order and tie-breaks (RecBole's default seed).
    """

    domain: str = "movie"
    n_targets: int = 5
    batch_size: int = 20
    rounds: int = 2
    steps: int | None = None
    pair_order: Literal["neg_first", "pos_first", "random"] = "neg_first"
    update_negative: bool = False
    exclude_future_negatives: bool = False
    user_words: int = 180
    item_words: int = 50
    temperature: float = 0.2
    eval_temperature: float = 0.2
    history_len: int = 20
    history_as_memories: bool = False
    seed: int = 2020

    def __post_init__(self) -> None:
        checks = {
            "n_targets": self.n_targets >= 1,
            "batch_size": self.batch_size >= 1,
            "rounds": self.rounds >= 1,
            "steps": self.steps is None or 1 <= self.steps <= self.n_targets,
            "pair_order": self.pair_order in ("neg_first", "pos_first", "random"),
            "user_words": self.user_words >= 10,
            "item_words": self.item_words >= 5,
            "history_len": self.history_len >= 1,
            "temperature": 0 <= self.temperature <= 2,
            "eval_temperature": 0 <= self.eval_temperature <= 2,
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            values = {name: getattr(self, name) for name in bad}
            raise ValueError(f"invalid AgentCF settings: {values}")

    @property
    def window(self) -> int:
        """Interactions per user: one history-only prefix, the targets, valid and test."""
        return self.n_targets + 3

    @property
    def n_steps(self) -> int:
        """Targets actually trained on per user."""
        return self.steps or self.n_targets


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Subset:
    """A sample of users, each reduced to their last ``window`` interactions.

    Attributes:
        name: ``"dense"`` or ``"sparse"``.
        windows: ``[user_id, item_id, ..., slot, role]``: ``slot`` 0..window-1 in time
            order; ``role`` is ``prefix``, ``target``, ``valid`` or ``test``.
        split: The same rows as a :class:`~recagents.data.Split` (train = prefix + targets),
            so baselines and candidate sampling work on it unchanged.
    """

    name: str
    windows: pd.DataFrame
    split: Split

    @property
    def users(self) -> list[str]:
        """The sampled users, sorted."""
        return sorted(self.windows[USER].unique())

    def targets(self) -> pd.DataFrame:
        """``[user_id, item_id, slot, step]``: the training targets, step 0 first."""
        targets = self.windows[self.windows[ROLE] == "target"][[USER, ITEM, SLOT]]
        step = targets.groupby(USER)[SLOT].rank(method="first").astype(int) - 1
        return targets.assign(**{STEP: step}).reset_index(drop=True)

    def history(self, user: str, before_slot: int) -> list[str]:
        """The user's items strictly before ``before_slot``, oldest first."""
        rows = self.windows[(self.windows[USER] == user) & (self.windows[SLOT] < before_slot)]
        return rows.sort_values(SLOT)[ITEM].tolist()

    def test_slot(self) -> int:
        """The slot of the test item (the last one)."""
        return int(self.windows[SLOT].max())


def make_subset(
    dataset: Dataset,
    kind: Literal["dense", "sparse"],
    n_users: int | None = 100,
    n_targets: int = 5,
    seed: int = 0,
    dense_pool: float = 0.25,
) -> Subset:
    """Sample users as the paper's dense or sparse subsets, re-made on any dataset.

    Every user keeps their last ``n_targets + 3`` interactions in time order (ties broken by
    file order, see :func:`recagents.data.chronological_order`). The paper does not say how
    its Amazon subsets were drawn, so on our data:

    - ``sparse``: ``n_users`` users drawn uniformly from those with a full window;
    - ``dense``: ``n_users`` drawn uniformly from the ``dense_pool`` share of those users
      whose windows hold the most popular items (mean interaction count of the window's
      items in the whole dataset), so that the sample's items overlap more.

    Args:
        dataset: The full dataset.
        kind: ``"dense"`` or ``"sparse"``.
        n_users: Users to sample (``None``: every eligible user).
        n_targets: Training targets per user (window = ``n_targets + 3``).
        seed: Seeds the draw.
        dense_pool: Share of eligible users, by window popularity, the dense draw uses.

    Raises:
        DatasetError: Too few users have a full window.
        ValueError: A bad ``kind``, ``n_users`` or ``dense_pool``.
    """
    if kind not in ("dense", "sparse"):
        raise ValueError(f"kind must be 'dense' or 'sparse', got {kind!r}")
    if not 0 < dense_pool <= 1:
        raise ValueError(f"dense_pool must be in (0, 1], got {dense_pool}")
    if n_users is not None and n_users < 1:
        raise ValueError(f"n_users must be positive, got {n_users}")
    if n_targets < 1:
        raise ValueError(f"n_targets must be at least 1, got {n_targets}")
    window = n_targets + 3
    ordered = chronological_order(dataset.interactions)
    from_end = ordered.groupby(USER, sort=False).cumcount(ascending=False)
    counts = ordered.groupby(USER, sort=False)[ITEM].transform("size")
    windows = ordered[(counts >= window) & (from_end < window)].copy()
    eligible = np.array(sorted(windows[USER].unique()))
    wanted = len(eligible) if n_users is None else n_users
    if len(eligible) < wanted:
        raise DatasetError(
            f"{dataset.name}: only {len(eligible)} users have at least {window} interactions; "
            f"asked for {wanted}"
        )
    rng = np.random.default_rng(seed)
    if kind == "sparse":
        chosen = rng.choice(eligible, size=wanted, replace=False)
    else:
        popularity = dataset.interactions[ITEM].value_counts()
        score = windows.assign(pop=windows[ITEM].map(popularity)).groupby(USER)["pop"].mean()
        pool_size = max(wanted, int(round(dense_pool * len(eligible))))
        pool = score.sort_values(ascending=False, kind="stable").index[:pool_size]
        chosen = rng.choice(np.array(sorted(pool)), size=wanted, replace=False)
    windows = windows[windows[USER].isin(set(chosen))]
    windows[SLOT] = windows.groupby(USER, sort=False).cumcount()
    roles = np.full(len(windows), "target", dtype=object)
    roles[windows[SLOT].to_numpy() == 0] = "prefix"
    roles[windows[SLOT].to_numpy() == window - 2] = "valid"
    roles[windows[SLOT].to_numpy() == window - 1] = "test"
    windows[ROLE] = roles
    windows = windows.sort_values([USER, SLOT], kind="stable").reset_index(drop=True)
    plain = windows.drop(columns=[SLOT, ROLE])
    split = Split(
        train=plain[windows[ROLE].isin(["prefix", "target"])].reset_index(drop=True),
        valid=plain[windows[ROLE] == "valid"].reset_index(drop=True),
        test=plain[windows[ROLE] == "test"].reset_index(drop=True),
        name=f"agentcf-{dataset.name}-{kind}-n{wanted}-w{window}-s{seed}",
    )
    return Subset(name=kind, windows=windows, split=split)


def subset_stats(subset: Subset, n_negatives: int = 9) -> dict[str, Any]:
    """Numbers that say how dense a subset is, comparable to :data:`RELEASED_SUBSETS`.

    ``paper_draw_history_hits`` is the expected number of the user's own history items per
    candidate list if negatives were drawn as the official code draws them (from the whole
    pool, without filtering the history); our candidates exclude the history instead.
    """
    windows = subset.windows
    pool = windows[ITEM].nunique()
    targets = set(windows.loc[windows[ROLE] == "target", ITEM])
    trained_seen = set(windows.loc[windows[ROLE].isin(["prefix", "target"]), ITEM])
    test = windows[windows[ROLE] == "test"]
    history_per_user = len(windows) / max(1, windows[USER].nunique()) - 1
    return {
        "subset": subset.name,
        "users": int(windows[USER].nunique()),
        "items": int(pool),
        "distinct_targets": len(targets),
        "test_items_trained": int(test[ITEM].isin(targets).sum()),
        "test_items_in_train": int(test[ITEM].isin(trained_seen).sum()),
        "paper_draw_history_hits": round(n_negatives * history_per_user / max(1, pool - 1), 3),
    }


def subset_candidates(
    subset: Subset,
    dataset: Dataset,
    n_negatives: int = 9,
    seed: int = 0,
    pool: Literal["subset", "dataset"] = "subset",
) -> pd.DataFrame:
    """The test candidates: each user's test item and ``n_negatives`` items they never had.

    ``pool="subset"`` draws the negatives uniformly from the subset's own items, as the
    paper does (but, unlike its code, never from the user's history). A subset of a handful
    of users may hold too few items; ``pool="dataset"`` then draws from every item of the
    dataset, excluding everything the user ever interacted with. Either way the lists are
    seeded and saved (see :func:`recagents.data.candidate_sets`).

    Returns:
        ``[user_id, item_id, label, position]``.
    """
    if pool == "subset":
        split = subset.split
    elif pool == "dataset":
        ordered = chronological_order(dataset.interactions)
        from_end = ordered.groupby(USER, sort=False).cumcount(ascending=False)
        held_out = ordered[USER].isin(set(subset.users)) & (from_end < 2)
        split = Split(
            train=ordered[~held_out].reset_index(drop=True),
            valid=subset.split.valid,
            test=subset.split.test,
            name=f"{subset.split.name}-datasetpool",
        )
    else:
        raise ValueError(f"pool must be 'subset' or 'dataset', got {pool!r}")
    try:
        return candidate_sets(split, n_negatives, seed=seed)
    except ValueError as error:
        raise DatasetError(
            f"{error}: the {subset.name} subset of {len(subset.users)} users is too small "
            f"for 1 + {n_negatives} candidates; use more users or pool='dataset'"
        ) from error


def training_pairs(
    subset: Subset,
    seed: int = 2020,
    exclude_future: bool = False,
) -> pd.DataFrame:
    """One popularity-weighted negative per training target, as RecBole's sampler draws it.

    Weights are the items' interaction counts in the subset's training rows; a user's own
    training items are never drawn. With ``exclude_future`` the user's valid and test items
    are excluded too (the paper's sampler may draw them).

    Returns:
        ``[user_id, step, slot, positive, negative]``, sorted by step then user.
    """
    train = subset.split.train
    counts = train[ITEM].value_counts().sort_index()
    items = counts.index.to_numpy()
    weights = counts.to_numpy(dtype=float)
    index_of = {item: i for i, item in enumerate(items)}
    seen = train.groupby(USER)[ITEM].agg(set)
    future = (
        pd.concat([subset.split.valid, subset.split.test]).groupby(USER)[ITEM].agg(set)
        if exclude_future
        else pd.Series(dtype=object)
    )
    rng = np.random.default_rng(seed)
    rows = []
    targets = subset.targets().sort_values([USER, STEP], kind="stable")
    for user, positive, slot, step in targets[[USER, ITEM, SLOT, STEP]].itertuples(index=False):
        mask = np.ones(len(items), bool)
        banned = seen.get(user, set()) | future.get(user, set())
        mask[[index_of[i] for i in banned if i in index_of]] = False
        if not mask.any():
            raise DatasetError(f"user {user}: no item is left to draw a negative from")
        p = np.where(mask, weights, 0.0)
        negative = items[rng.choice(len(items), p=p / p.sum())]
        rows.append((user, int(step), int(slot), positive, negative))
    frame = pd.DataFrame(rows, columns=[USER, STEP, SLOT, POSITIVE, NEGATIVE])
    return frame.sort_values([STEP, USER], kind="stable").reset_index(drop=True)


def schedule(pairs: pd.DataFrame, batch_size: int, steps: int | None = None) -> pd.DataFrame:
    """Round-robin batches: step t holds every user's t-th target, cut into batches.

    Each batch has at most ``batch_size`` distinct users; batches run step by step, so every
    user's first target is trained before anyone's second (the paper's schedule).

    Returns:
        ``pairs`` restricted to the first ``steps`` steps, with a ``batch`` column, in order.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    frame = pairs if steps is None else pairs[pairs[STEP] < steps]
    frame = frame.sort_values([STEP, USER], kind="stable").reset_index(drop=True)
    within = frame.groupby(STEP).cumcount() // batch_size
    per_step = within.groupby(frame[STEP]).max() + 1
    offsets = per_step.cumsum() - per_step
    return frame.assign(**{BATCH: (frame[STEP].map(offsets) + within).astype(int)})


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


def initial_user_memory(features: dict[str, Any] | None, domain: str = "movie") -> str:
    """A user's first self-description, from gender and occupation when the data has them.

    Like the paper's MovieLens branch; a missing or "other" occupation becomes a
    domain enthusiast. Without features, one generic sentence for every user (as on CDs).
    """
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


def initial_item_memory(genres: Sequence[str], domain: str = "movie") -> str:
    """An item's first description: its categories (the title is always shown beside it)."""
    genres = [g for g in genres if g and g.lower() != "unknown"]
    if not genres:
        return f"A {domain}."
    return f"A {domain} of the genres {', '.join(genres)}."


def item_titles(dataset: Dataset, move_article: bool = True) -> dict[str, str]:
    """Readable titles by item id; an item without a title is called by its id."""
    items = dataset.items
    titles: dict[str, str] = {}
    if items is not None and TITLE in items:
        for item_id, title in items[[ITEM, TITLE]].itertuples(index=False):
            titles[item_id] = _readable_title(str(title), move_article)
    for item_id in dataset.interactions[ITEM].unique():
        titles.setdefault(item_id, f"item {item_id}")
    return titles


def initial_state(dataset: Dataset, subset: Subset, domain: str = "movie") -> AgentState:
    """Untrained agents: every user of the subset, and every item of the dataset.

    Items outside the subset never train, but a candidate list drawn from the whole dataset
    (``pool="dataset"``) still shows them with their initial description.
    """
    users = dataset.users.set_index(USER) if dataset.users is not None else None
    user_memory = {}
    for user in subset.users:
        features = None
        if users is not None and user in users.index:
            features = users.loc[user].to_dict()
        user_memory[user] = initial_user_memory(features, domain)
    genres: dict[str, tuple[str, ...]] = {}
    if dataset.items is not None and GENRES in dataset.items:
        genres = dict(zip(dataset.items[ITEM], dataset.items[GENRES], strict=True))
    item_memory = {
        item: [initial_item_memory(genres.get(item, ()), domain)]
        for item in sorted(set(dataset.interactions[ITEM]) | set(subset.windows[ITEM]))
    }
    return AgentState(
        user_memory=user_memory,
        user_versions={u: [m] for u, m in user_memory.items()},
        item_memory=item_memory,
    )


def verbalised_history(titles: Sequence[str], domain: str = "movie") -> str:
    """A user described by their history alone (the "without user agent" ablation)."""
    if not titles:
        return f"I have not watched any {domain}s yet."
    return f"These are the {domain}s I chose recently, oldest first: " + "; ".join(titles) + "."


# --------------------------------------------------------------------------- prompts


def _words_to_chars(words: int) -> int:
    """A character cap that lets ``words`` words through (about 6 characters per word)."""
    return 8 * words


def choice_schema(explanation_chars: int = 600) -> dict[str, Any]:
    """The forward call's reply: which of the two items (1 or 2), and why."""
    return {
        "type": "object",
        "properties": {
            "choice": {"type": "integer", "enum": [1, 2]},
            "explanation": {"type": "string", "maxLength": explanation_chars},
        },
        "required": ["choice", "explanation"],
    }


def user_reflection_schema(words: int = 180) -> dict[str, Any]:
    """The user reflection's reply: a new self-description."""
    return {
        "type": "object",
        "properties": {"self_description": {"type": "string", "maxLength": _words_to_chars(words)}},
        "required": ["self_description"],
    }


def item_reflection_schema(words: int = 50) -> dict[str, Any]:
    """The item reflection's reply: new descriptions of the preferred and the other item."""
    text = {"type": "string", "maxLength": _words_to_chars(words)}
    return {
        "type": "object",
        "properties": {"preferred": text, "other": text},
        "required": ["preferred", "other"],
    }


def _pair_lines(first: str, second: str) -> str:
    return f"1. {first}\n2. {second}"


def forward_messages(user_memory: str, first: str, second: str, domain: str = "movie") -> list:
    """The user agent chooses one of two items and explains the choice.

    Stable content (the role and the self-description) comes first so that a local server
    can reuse its cache across a user's calls; the pair comes last.
    """
    system = (
        f"You are a {domain} enthusiast choosing what to watch. This is how you describe "
        f"your own taste:\n{user_memory}"
    )
    user = (
        f"You are offered two {domain}s:\n{_pair_lines(first, second)}\n"
        f"Pick exactly one of them. Decide only from the likes and dislikes in your "
        f"self-description and do not invent new ones; if it does not settle the choice, "
        f"fall back on common knowledge, such as how popular or well regarded each {domain} "
        f'is. Reply in JSON: "choice" is 1 or 2, "explanation" says in detail why you '
        f"prefer it to the other."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def user_reflection_messages(
    user_memory: str,
    first: str,
    second: str,
    preferred: int,
    chosen: int | None = None,
    explanation: str | None = None,
    domain: str = "movie",
    words: int = 180,
) -> list:
    """The user agent rewrites its self-description after a choice.

    Three cases: a wrong choice (the agent learns it actually preferred the other item), a
    right one (it reinforces what worked), or, without a choice (the "without autonomous
    interaction" ablation), the real preference alone.

    Args:
        user_memory: The current self-description.
        first: Text of item 1 as shown.
        second: Text of item 2 as shown.
        preferred: Which one (1 or 2) the real user chose.
        chosen: Which one the agent chose, or ``None`` without a forward step.
        explanation: The agent's explanation of its choice.
        domain: Item noun.
        words: Word limit of the new self-description.
    """
    other = 3 - preferred
    system = (
        f"You are a {domain} enthusiast who keeps a short self-description of your taste, "
        f"so that it helps you choose {domain}s well. Your current self-description:\n"
        f"{user_memory}"
    )
    lines = [f"You were offered two {domain}s:\n{_pair_lines(first, second)}"]
    if chosen is None:
        lines.append(f"You really preferred {domain} {preferred} to {domain} {other}.")
    else:
        lines.append(f'You chose {domain} {chosen} and explained: "{explanation or ""}"')
        if chosen == preferred:
            lines.append(
                "That was the right choice. Keep in your self-description what led you to it, "
                "and sharpen it."
            )
        else:
            lines.append(
                f"But in fact you preferred {domain} {preferred}, not {domain} {chosen}: your "
                f"self-description misled you. Think about what appeals to you in {domain} "
                f"{preferred} and what puts you off {domain} {other}."
            )
    lines.append(
        f"Write your updated self-description in at most {words} words: first the new likes "
        f"you found, then the earlier likes that still hold, then your dislikes. Leave out "
        f"anything that conflicts with this preference and do not mention this choice itself. "
        f'Reply in JSON with the key "self_description".'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def item_reflection_messages(
    user_memory: str,
    first: str,
    second: str,
    preferred: int,
    chosen: int | None = None,
    explanation: str | None = None,
    domain: str = "movie",
    words: int = 50,
) -> list:
    """The two items rewrite their descriptions after a user's choice.

    The descriptions should speak of the *groups of users* each item suits, sharpen the
    contrast between the two, keep what was useful and stay true to the item. The user text
    is the self-description *after* that user's own reflection, as in the paper.
    """
    other = 3 - preferred
    system = (
        f"You keep the descriptions of {domain}s in a recommender system. A good description "
        f"says which kinds of users enjoy the {domain}, so that each user can pick the "
        f"{domain}s that suit them."
    )
    lines = [
        f"A user describes their taste like this:\n{user_memory}",
        f"They were offered two {domain}s:\n{_pair_lines(first, second)}",
    ]
    if chosen is None:
        lines.append(f"They really preferred {domain} {preferred}.")
    else:
        lines.append(f'They chose {domain} {chosen} and explained: "{explanation or ""}"')
        if chosen == preferred:
            lines.append("That was their real preference.")
        else:
            lines.append(
                f"But they really preferred {domain} {preferred}: the descriptions misled them."
            )
    lines.append(
        f"Rewrite both descriptions, at most {words} words each. Say which users would enjoy "
        f'each {domain} (for example "users who like ..."), make clear what sets the two '
        f"apart, keep what was useful in the old descriptions and stay true to each {domain}. "
        f'Reply in JSON: "preferred" for {domain} {preferred}, "other" for {domain} {other}.'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]


def ranking_messages(
    user_memory: str,
    candidates: Sequence[str],
    domain: str = "movie",
    history: Sequence[str] | None = None,
    retrieved: str | None = None,
) -> list:
    """The user agent's memory ranks numbered candidates (variants B, B+H and B+R).

    Args:
        user_memory: The self-description (B).
        candidates: One line of text per candidate, in display order.
        domain: Item noun.
        history: Recent history items, oldest first (B+H).
        retrieved: A past self-description retrieved for these candidates (B+R).
    """
    system = (
        f"You are a {domain} recommender system. You rank candidate {domain}s for one user, "
        f"using what the user says about their own taste."
    )
    parts = [f"The user describes their taste like this:\n{user_memory}"]
    if retrieved is not None:
        parts.append(f"Earlier, the user described it like this:\n{retrieved}")
    if history:
        parts.append(f"The {domain}s the user chose recently, oldest first:\n" + "\n".join(history))
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n".join(parts) + "\n" + _rank_request(candidates, domain)},
    ]


def llmrank_messages(
    history: Sequence[str], candidates: Sequence[str], domain: str = "movie"
) -> list:
    """A zero-shot ranker given the user's history titles (LLMRank-style, no agents)."""
    system = f"You are a {domain} recommender system."
    listed = "\n".join(history) if history else "(none)"
    user = f"A user chose these {domain}s, oldest first:\n{listed}\n" + _rank_request(
        candidates, domain
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _rank_request(candidates: Sequence[str], domain: str) -> str:
    n = len(candidates)
    numbered = "\n".join(f"{k}. {text}" for k, text in enumerate(candidates, start=1))
    return (
        f"Candidate {domain}s:\n{numbered}\n"
        f"Rank all {n} candidates, from the one this user would like most to the one they "
        f'would like least. Reply in JSON: "ranking" lists the {n} candidate numbers in that '
        f"order, each number exactly once."
    )


# --------------------------------------------------------------------------- parsers


def parse_choice(data: Any) -> int | None:
    """The chosen index (1 or 2) of a forward reply, or ``None`` when it has none."""
    if not isinstance(data, dict):
        return None
    choice = data.get("choice")
    if isinstance(choice, bool):
        return None
    if isinstance(choice, str) and choice.strip() in ("1", "2"):
        return int(choice.strip())
    return choice if choice in (1, 2) else None


def _text_field(data: Any, key: str) -> str | None:
    """A non-empty string field of a JSON reply, stripped, or ``None``."""
    if not isinstance(data, dict):
        return None
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()


# --------------------------------------------------------------------------- training


def _pair_texts(
    state: AgentState, titles: dict[str, str], positive: str, negative: str, positive_first: bool
) -> tuple[str, str, int]:
    """The two lines shown, and which of them (1 or 2) is the positive."""
    pos = f"{titles[positive]}: {state.item(positive)}"
    neg = f"{titles[negative]}: {state.item(negative)}"
    return (pos, neg, 1) if positive_first else (neg, pos, 2)


def _positive_first(config: AgentCFConfig, rng: np.random.Generator) -> bool:
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
    client = client or get_client()
    state = state.copy()
    log = RunLog()
    rng = np.random.default_rng(config.seed)
    batches = list(pairs.groupby(BATCH, sort=True))
    bar = tqdm(batches, desc=f"AgentCF {mode}", disable=not progress)
    for batch_id, batch in bar:
        rows = batch.to_dict("records")
        for row in rows:
            row["positive_first"] = _positive_first(config, rng)
        rounds = 1 if mode == "no_autonomy" else config.rounds
        for round_index in range(rounds):
            context = {"batch": int(batch_id), "round": round_index}
            outcomes = _forward(
                state, rows, subset, titles, config, mode, client, log, phase, context
            )
            users_reflect, items_reflect = reflecting_pairs(outcomes, round_index, mode)
            _reflect_users(state, users_reflect, config, client, log, phase, context)
            _reflect_items(state, items_reflect, config, client, log, phase, context)
        for user in dict.fromkeys(r[USER] for r in rows):
            state.user_versions[user].append(state.user_memory[user])
        if progress:
            forward = [e for e in log.events if e["kind"] == "forward" and e["correct"] is not None]
            if forward:
                bar.set_postfix(pair_acc=f"{np.mean([e['correct'] for e in forward]):.2f}")
    return state, log


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
    after = _text_field(data, "self_description")
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
        after = _text_field(data, key)
        stored = after is not None and store
        if stored:
            state.item_memory[item].append(after)
        records.append(
            {ITEM: item, "role": role, "before": before, "after": after, "stored": stored}
        )
    return records


def _user_text(state: AgentState, subset: Subset, titles: dict, row: dict, mode: str, domain):
    if mode == "no_user_agent":
        history = subset.history(row[USER], row[SLOT])
        return verbalised_history([titles[i] for i in history], domain)
    return state.user_memory[row[USER]]


def _forward(state, rows, subset, titles, config, mode, client, log, phase, context) -> list:
    """Run the forward choices of one round; return one outcome per pair that succeeded."""
    outcomes = []
    for row in rows:
        first, second, preferred = _pair_texts(
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
                "user_text": _user_text(state, subset, titles, row, mode, config.domain),
            }
        )
    if mode == "no_autonomy":
        return outcomes
    requests = [
        ChatRequest(
            messages=forward_messages(o["user_text"], o["first"], o["second"], config.domain),
            schema=choice_schema(),
            temperature=config.temperature,
            max_tokens=220,
            tag=o[USER],
        )
        for o in outcomes
    ]
    results = client.map(requests, progress=False, desc="forward")
    log.add_calls(phase, "forward", results)
    kept = []
    for outcome, result in zip(outcomes, results, strict=True):
        chosen = parse_choice(result.data) if result.ok else None
        if chosen is not None:
            outcome["chosen"] = chosen
            outcome["explanation"] = _text_field(result.data, "explanation") or ""
            outcome["correct"] = chosen == outcome["preferred"]
            kept.append(outcome)
        log.events.append(
            {
                **context,
                "kind": "forward",
                USER: outcome[USER],
                STEP: outcome[STEP],
                POSITIVE: outcome[POSITIVE],
                NEGATIVE: outcome[NEGATIVE],
                "positive_first": outcome["positive_first"],
                "chosen": outcome["chosen"],
                "correct": outcome["correct"],
                "explanation": outcome["explanation"],
                "ok": chosen is not None,
            }
        )
    return kept


def _reflection_texts(outcome: dict[str, Any], user_text: str) -> tuple:
    """The arguments both reflection prompts share, in their order."""
    return (
        user_text,
        outcome["first"],
        outcome["second"],
        outcome["preferred"],
        outcome["chosen"],
        outcome["explanation"],
    )


def _ask(client, log, phase, kind, outcomes, messages, schema, max_tokens, config) -> list:
    """One reflection request per outcome, run concurrently, accounted in the log."""
    requests = [
        ChatRequest(
            messages=m,
            schema=schema,
            temperature=config.temperature,
            max_tokens=max_tokens,
            tag=o[USER],
        )
        for o, m in zip(outcomes, messages, strict=True)
    ]
    results = client.map(requests, progress=False, desc=kind.replace("_", " "))
    log.add_calls(phase, kind, results)
    return results


def _reflect_users(state, outcomes, config, client, log, phase, context) -> None:
    if not outcomes:
        return
    messages = [
        user_reflection_messages(
            *_reflection_texts(o, state.user_memory[o[USER]]), config.domain, config.user_words
        )
        for o in outcomes
    ]
    schema = user_reflection_schema(config.user_words)
    results = _ask(
        client,
        log,
        phase,
        "user_reflection",
        outcomes,
        messages,
        schema,
        2 * config.user_words + 60,
        config,
    )
    for outcome, result in zip(outcomes, results, strict=True):
        before, after = apply_user_reflection(state, outcome[USER], result.data)
        if after is not None:
            outcome["user_text"] = after
        log.events.append(
            {
                **context,
                "kind": "user_reflection",
                USER: outcome[USER],
                STEP: outcome[STEP],
                "correct": outcome["correct"],
                "before": before,
                "after": after or before,
                "ok": after is not None,
            }
        )


def _reflect_items(state, outcomes, config, client, log, phase, context) -> None:
    if not outcomes:
        return
    messages = [
        item_reflection_messages(
            *_reflection_texts(o, o["user_text"]), config.domain, config.item_words
        )
        for o in outcomes
    ]
    schema = item_reflection_schema(config.item_words)
    results = _ask(
        client,
        log,
        phase,
        "item_reflection",
        outcomes,
        messages,
        schema,
        4 * config.item_words + 60,
        config,
    )
    for outcome, result in zip(outcomes, results, strict=True):
        records = apply_item_reflection(
            state, outcome[POSITIVE], outcome[NEGATIVE], result.data, config.update_negative
        )
        for record in records:
            log.events.append(
                {
                    **context,
                    "kind": "item_reflection",
                    USER: outcome[USER],
                    STEP: outcome[STEP],
                    "correct": outcome["correct"],
                    **record,
                    "after": record["after"] or record["before"],
                    "ok": record["after"] is not None,
                }
            )


# --------------------------------------------------------------------------- probes


def pairwise_probe(
    state: AgentState,
    pairs: pd.DataFrame,
    titles: dict[str, str],
    config: AgentCFConfig | None = None,
    orders: Sequence[str] = ("neg_first", "pos_first"),
    client: LLMClient | None = None,
    log: RunLog | None = None,
    phase: str = "probe",
) -> pd.DataFrame:
    """Ask the (trained) user agents the training pairs again, in each order given.

    The paper's re-test accuracy is the ``neg_first`` rows; the two orders side by side are
    the position-bias probe (an unbiased agent answers the same pair the same way).

    Returns:
        ``[user_id, step, positive, negative, order, ok, chose_first, correct]``.
    """
    config = config or AgentCFConfig()
    client = client or get_client()
    rows, requests = [], []
    for row in pairs.to_dict("records"):
        for order in orders:
            positive_first = order == "pos_first"
            first, second, preferred = _pair_texts(
                state, titles, row[POSITIVE], row[NEGATIVE], positive_first
            )
            rows.append(
                {
                    USER: row[USER],
                    STEP: row[STEP],
                    POSITIVE: row[POSITIVE],
                    NEGATIVE: row[NEGATIVE],
                    "order": order,
                    "preferred": preferred,
                }
            )
            requests.append(
                ChatRequest(
                    messages=forward_messages(
                        state.user_memory[row[USER]], first, second, config.domain
                    ),
                    schema=choice_schema(),
                    temperature=config.eval_temperature,
                    max_tokens=220,
                    tag=row[USER],
                )
            )
    results = client.map(requests, desc="pairwise probe")
    if log is not None:
        log.add_calls(phase, "probe", results)
    for row, result in zip(rows, results, strict=True):
        chosen = parse_choice(result.data) if result.ok else None
        row["ok"] = chosen is not None
        row["chose_first"] = chosen == 1 if chosen is not None else None
        row["correct"] = chosen == row.pop("preferred") if chosen is not None else None
    return pd.DataFrame(rows)


def probe_summary(probe: pd.DataFrame) -> pd.DataFrame:
    """Per order: pairs asked, pairs answered, accuracy and the share of first-option picks."""
    answered = probe[probe["ok"]]
    table = probe.groupby("order").agg(pairs=("ok", "size"), answered=("ok", "sum"))
    table["accuracy"] = answered.groupby("order")["correct"].mean().astype(float)
    table["chose_first"] = answered.groupby("order")["chose_first"].mean().astype(float)
    return table.reset_index()


def order_consistency(probe: pd.DataFrame) -> float:
    """Share of pairs answered in both orders for which the agent chose the same item.

    An agent that reads the items, not their positions, scores 1; one that always picks
    the first option scores 0.
    """
    answered = probe[probe["ok"]]
    wide = answered.pivot_table(
        index=[USER, STEP], columns="order", values="correct", aggfunc="first"
    ).dropna()
    if wide.shape[1] != 2 or wide.empty:
        return float("nan")
    return float((wide.iloc[:, 0] == wide.iloc[:, 1]).mean())


# --------------------------------------------------------------------------- ranking


def retrieve_version(
    versions: Sequence[str], query: str, embed: Any | None = None
) -> tuple[str, bool]:
    """B+R: the past self-description nearest to ``query`` by cosine similarity.

    The pool is the long-term versions without the first (initial) and the last (current),
    as in the paper. When that pool is empty the official code crashes; we fall back on the
    initial description and say so (the second value is ``True`` then).
    """
    pool = list(versions[1:-1])
    if not pool:
        return versions[0], True
    if embed is None:
        from recagents.llm import embed as embed_texts

        embed = embed_texts
    vectors = embed([query, *pool])
    similarity = vectors[1:] @ vectors[0]
    return pool[int(np.argmax(similarity))], False


@dataclass
class RankOutcome:
    """The rankings of one variant, under both scorers, and how the replies parsed.

    Attributes:
        ranked: ``[user_id, item_id, score, rank]`` with the repaired scorer.
        faithful: The same with the official code's scorer.
        parses: ``[user_id, status, missing, duplicates, out_of_range, fallback]``.
    """

    ranked: pd.DataFrame
    faithful: pd.DataFrame
    parses: pd.DataFrame

    def repair_counts(self) -> dict[str, int]:
        """How many replies were complete, repaired or failed, and what was repaired."""
        counts = self.parses["status"].value_counts()
        return {
            "users": len(self.parses),
            "complete": int(counts.get("complete", 0)),
            "repaired": int(counts.get("repaired", 0)),
            "failed": int(counts.get("failed", 0)),
            "missing_candidates": int(self.parses["missing"].sum()),
            "duplicates": int(self.parses["duplicates"].sum()),
            "retrieval_fallbacks": int(self.parses["fallback"].sum()),
        }


def rank_candidates(
    state: AgentState,
    subset: Subset,
    candidates: pd.DataFrame,
    titles: dict[str, str],
    variant: str = "B",
    config: AgentCFConfig | None = None,
    client: LLMClient | None = None,
    log: RunLog | None = None,
    phase: str | None = None,
    embed: Any | None = None,
) -> RankOutcome:
    """Rank every user's candidates with one variant.

    Variants (:data:`VARIANTS`): ``B`` (the self-description), ``B+H`` (plus the last
    ``history_len`` history titles), ``B+R`` (plus a retrieved past self-description),
    ``LLMRank`` (no agents: history titles and candidate titles only) and ``history-user``
    (the user is their verbalised history; candidates carry the item memories, the "without
    user agent" ranking). Candidates are shown in ``position`` order as
    "k. title: description".

    Args:
        state: Agent memories to rank with.
        subset: The subset (for histories).
        candidates: ``[user_id, item_id, label, position]``.
        titles: Item titles by id.
        variant: Which ranker.
        config: Settings.
        client: LLM client.
        log: Where to account the calls.
        phase: Log label (default ``rank:<variant>``).
        embed: Embedding function for B+R (default: :func:`recagents.llm.embed`).
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    config = config or AgentCFConfig()
    client = client or get_client()
    test_slot = subset.test_slot()
    users, item_lists, requests, fallbacks = [], [], [], []
    for user, group in candidates.sort_values([USER, POSITION]).groupby(USER, sort=True):
        items = group[ITEM].tolist()
        history = subset.history(user, test_slot)[-config.history_len :]
        if variant == "LLMRank":
            messages = llmrank_messages(
                [titles[i] for i in history], [titles[i] for i in items], config.domain
            )
            fallback = False
        else:
            lines = [f"{titles[i]}: {_item_text(state, i)}" for i in items]
            memory = state.user_memory.get(user, "")
            shown_history, retrieved, fallback = None, None, False
            if variant == "history-user":
                memory = verbalised_history([titles[i] for i in history], config.domain)
            if variant == "B+H":
                shown_history = [
                    f"{titles[i]}: {_item_text(state, i)}"
                    if config.history_as_memories
                    else titles[i]
                    for i in history
                ]
            if variant == "B+R":
                retrieved, fallback = retrieve_version(
                    state.user_versions[user], "\n".join(lines), embed
                )
            messages = ranking_messages(memory, lines, config.domain, shown_history, retrieved)
        users.append(user)
        item_lists.append(items)
        fallbacks.append(fallback)
        requests.append(
            ChatRequest(
                messages=messages,
                schema=ranking_schema(len(items)),
                temperature=config.eval_temperature,
                max_tokens=8 * len(items) + 40,
                tag=user,
            )
        )
    results = client.map(requests, desc=f"rank {variant}")
    if log is not None:
        log.add_calls(phase or f"rank:{variant}", "rank", results)
    ranked, faithful, parses = [], [], []
    for index, (user, items, result) in enumerate(zip(users, item_lists, results, strict=True)):
        parse = parse_ranking(result.data if result.ok else None, len(items))
        ranked.append(ranking_frame(user, items, parse, "repaired", seed=config.seed + index))
        faithful.append(ranking_frame(user, items, parse, "faithful"))
        parses.append(
            {
                USER: user,
                "status": parse.status,
                "missing": len(parse.missing),
                "duplicates": parse.duplicates,
                "out_of_range": parse.out_of_range,
                "fallback": fallbacks[index],
                "failure": result.failure,
            }
        )
    return RankOutcome(
        ranked=pd.concat(ranked, ignore_index=True),
        faithful=pd.concat(faithful, ignore_index=True),
        parses=pd.DataFrame(parses),
    )


def _item_text(state: AgentState, item: str) -> str:
    memory = state.item_memory.get(item)
    return memory[-1] if memory else ""


# --------------------------------------------------------------------------- cost


def labelled(ranked: pd.DataFrame, candidates: pd.DataFrame) -> pd.DataFrame:
    """Attach the candidates' ``label`` to a ranking frame (for per-user inspection)."""
    return ranked.merge(candidates[[USER, ITEM, LABEL]], on=[USER, ITEM], how="left")


# --------------------------------------------------------------------------- reading a run


def forward_accuracy(events: pd.DataFrame) -> pd.DataFrame:
    """Pairwise accuracy of the forward choices per training step and round.

    The learning curve of a run: round 0 of a step is asked before any reflection on that
    step's pairs, round 1 after one.

    Returns:
        ``[step, round, pairs, answered, accuracy]``.
    """
    forward = events[events["kind"] == "forward"]
    if forward.empty:
        return pd.DataFrame(columns=[STEP, "round", "pairs", "answered", "accuracy"])
    answered = forward[forward["ok"]]
    table = forward.groupby([STEP, "round"]).agg(pairs=("ok", "size"), answered=("ok", "sum"))
    table["accuracy"] = answered.groupby([STEP, "round"])["correct"].mean().astype(float)
    return table.reset_index()


def _short(text: str | None, width: int) -> str:
    import textwrap

    return textwrap.fill(str(text or ""), width=width, initial_indent="    ",
                         subsequent_indent="    ")  # fmt: skip


def user_trace(events: pd.DataFrame, user: str, titles: dict[str, str], width: int = 96) -> str:
    """One user's training as readable text: each choice, then the memory it led to."""
    rows = events[events[USER] == user]
    lines = [f"User {user}"]
    for row in rows.itertuples(index=False):
        row = row._asdict()
        head = f"[step {row[STEP]} round {row['round']}]"
        if row["kind"] == "forward":
            if not row["ok"]:
                lines.append(f"{head} choice failed (recorded, no reflection)")
                continue
            pos, neg = titles[row[POSITIVE]], titles[row[NEGATIVE]]
            chose = pos if row["correct"] else neg
            verdict = "RIGHT" if row["correct"] else "WRONG"
            lines.append(f"{head} {pos!r} (real) vs {neg!r}: chose {chose!r} -> {verdict}")
            lines.append(_short(f"because: {row['explanation']}", width))
        elif row["kind"] == "user_reflection":
            changed = "rewrote" if row["ok"] else "reflection failed, kept"
            lines.append(f"{head} self-description {changed}:")
            lines.append(_short(f"before: {row['before']}", width))
            lines.append(_short(f"after:  {row['after']}", width))
    return "\n".join(lines)


def item_trace(events: pd.DataFrame, item: str, titles: dict[str, str], width: int = 96) -> str:
    """One item's memory as readable text: every rewrite, who caused it and whether it stuck."""
    rows = events[(events["kind"] == "item_reflection") & (events.get(ITEM) == item)]
    lines = [f"Item {item}: {titles[item]}"]
    for row in rows.itertuples(index=False):
        row = row._asdict()
        role = "the real choice" if row["role"] == POSITIVE else "the negative"
        if not row["ok"]:
            status = "reflection failed"
        else:
            status = "stored" if row["stored"] else "not stored (only the positive is)"
        lines.append(
            f"[step {row[STEP]} round {row['round']}] user {row[USER]}, as {role}: {status}"
        )
        lines.append(_short(f"before: {row['before']}", width))
        if row["ok"]:
            lines.append(_short(f"after:  {row['after']}", width))
    return "\n".join(lines)


#: Which reported AgentCF row each of our methods sits beside.
PAPER_METHOD = {"AgentCF B": "AgentCF_B", "AgentCF B+H": "AgentCF_B+H",
                "AgentCF B+R": "AgentCF_B+R"}  # fmt: skip


def paper_side_by_side(summary: pd.DataFrame, reported: pd.DataFrame) -> pd.DataFrame:
    """Our NDCG@1/5/10 (mean [95% CI]) per subset beside what the paper reports per method.

    Args:
        summary: ``[subset, method, metric, mean, low, high]`` for our runs.
        reported: :func:`recagents.paper_numbers.table` of ``"AgentCF-T2"``.

    Returns:
        One row per method; our columns per subset and metric, then ``paper`` (the reported
        values with their subset and tag, or ``"not reported"``).
    """
    shown = summary[summary["metric"].isin(["ndcg@1", "ndcg@5", "ndcg@10"])]
    shown = shown.assign(value=format_interval(shown))
    table = shown.pivot_table(
        index="method", columns=["subset", "metric"], values="value", aggfunc="first", sort=False
    )
    table.columns = [f"ours {subset} {metric}" for subset, metric in table.columns]
    paper = []
    for method in table.index:
        rows = reported[reported["method"] == PAPER_METHOD.get(method, "")]
        cells = [
            f"{r['subset']}: {r['ndcg@1']} / {r['ndcg@5']} / {r['ndcg@10']} {r['tag']}"
            for r in rows.to_dict("records")
        ]
        paper.append("; ".join(cells) or "not reported")
    table["paper N@1 / N@5 / N@10 (Amazon, gpt-3.5)"] = paper
    return table


def learning_figure(learning: pd.DataFrame, probe: pd.DataFrame) -> Any:
    """Pairwise accuracy over training (per step and round) and at the re-test, per order.

    Args:
        learning: :func:`forward_accuracy` rows with a ``subset`` column.
        probe: :func:`probe_summary` rows with a ``subset`` column.
    """
    import matplotlib.pyplot as plt
    import seaborn as sns

    subsets = list(dict.fromkeys([*learning.get("subset", []), *probe.get("subset", [])]))
    colors = dict(zip(subsets, sns.color_palette("colorblind", len(subsets)), strict=True))
    fig, ax = plt.subplots(figsize=(7, 4))
    labels: list[str] = []
    for subset in subsets:
        part = learning[learning["subset"] == subset].sort_values([STEP, "round"])
        labels = [
            f"step {s + 1}\nround {r}" for s, r in zip(part[STEP], part["round"], strict=True)
        ]
        ax.plot(
            range(len(part)),
            part["accuracy"],
            marker="o",
            color=colors[subset],
            label=f"{subset}: during training",
        )
    x_retest = len(labels)
    markers = {"neg_first": "v", "pos_first": "^"}
    for row in probe.to_dict("records"):
        ax.scatter(
            x_retest,
            row["accuracy"],
            marker=markers.get(row["order"], "s"),
            s=60,
            color=colors[row["subset"]],
            label=f"{row['subset']}: re-test, {row['order']}",
        )
    ax.axhline(0.5, color="grey", linestyle=":", linewidth=1, label="chance")
    ax.set_xticks(range(x_retest + 1), [*labels, "after\ntraining"])
    ax.set(ylim=(-0.05, 1.05), ylabel="pairwise accuracy", title="Choosing the real item")
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- one call


@dataclass
class AgentCFRun:
    """Everything :func:`run` produced.

    Attributes:
        initial: The untrained agents.
        trained: The agents after collaborative reflection.
        pairs: The scheduled training pairs.
        log: Every call and memory event.
        rankings: Variant -> its rankings of the candidates.
    """

    initial: AgentState
    trained: AgentState
    pairs: pd.DataFrame
    log: RunLog
    rankings: dict[str, RankOutcome]


def run(
    dataset: Dataset,
    subset: Subset,
    candidates: pd.DataFrame,
    config: AgentCFConfig | None = None,
    variants: Sequence[str] = ("B", "B+H", "B+R"),
    client: LLMClient | None = None,
    progress: bool = True,
) -> AgentCFRun:
    """Train AgentCF on a subset and rank the candidates with each variant, in one call.

    The notebook walks through these steps one by one; other notebooks (e.g. the
    cross-paper comparison) call this.

    Args:
        dataset: The dataset the subset was drawn from (titles, genres, user features).
        subset: From :func:`make_subset`.
        candidates: ``[user_id, item_id, label, position]`` for the subset's users.
        config: Settings (default: the paper's).
        variants: Rankers to run (:data:`VARIANTS`).
        client: LLM client (default: the process-wide one).
        progress: Show progress bars.
    """
    config = config or AgentCFConfig()
    client = client or get_client()
    titles = item_titles(dataset)
    initial = initial_state(dataset, subset, config.domain)
    pairs = schedule(
        training_pairs(subset, config.seed, config.exclude_future_negatives),
        config.batch_size,
        config.steps,
    )
    trained, log = train(initial, pairs, subset, titles, config, client=client, progress=progress)
    rankings = {
        variant: rank_candidates(trained, subset, candidates, titles, variant, config, client, log)
        for variant in variants
    }
    return AgentCFRun(initial, trained, pairs, log, rankings)
