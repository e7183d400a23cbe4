"""REPRODUCTION.md and the HTML pages of the executed notebooks, both written by ``make reproduce``.

The report sets every claim the notebooks reproduce beside what the paper reports. It holds no
numbers of its own: :data:`CLAIMS` is data that says *where* each value lives — a cell of
``paper_numbers.json`` for the paper, a record of an executed notebook (written there by
:func:`recagents.notebook.record`) for ours — and how the two are compared. Every value is
read at run time; a notebook that has not been run, or a value a run did not record, is
reported as "not run", never filled in.

Verdict rules (:data:`VERDICT_RULES`, printed in the report):

* ``contains`` (the paper gives a value): **reproduced** when the paper's value lies in our 95%
  interval, **not reproduced** otherwise — also when that interval holds the mean of a random
  baseline recorded on the same candidates, since it then cannot tell the paper's result from
  chance; **not comparable** when the paper's cell holds no number or we recorded a point
  value without an interval.
* ``at_least``: **reproduced** when ours is not below the paper's value (the paper's value is at
  most our interval's upper end, or our point value when no interval is recorded).
* ``greater`` (the paper says A beats B): **reproduced** when our 95% intervals of A and B are
  disjoint with A above (a conservative stand-in for a paired test, which the records do not
  hold); **direction only** when A's mean is above B's but the intervals overlap or were not
  recorded; **not reproduced** when A's mean is not above B's.
* ``above``: as ``greater``, against a fixed threshold instead of a second value.
* ``no_amplification`` (the paper says a loop does not amplify a bias): **reproduced** when the
  notebook's test finds no amplification and the loop changed something; **not comparable**
  when the loop chose exactly what the single agent chose (a zero difference proves nothing);
  **not reproduced** when the test finds amplification.
* A claim without a paper number (Rec4Agentverse, the protocol checks of notebook 00) is **not
  comparable**; the outcome of the same rule on our values is given as our demonstration.

Command line (no side effects on import)::

    python -m recagents.report reproduction --build build --out REPRODUCTION.md
    python -m recagents.report html --build build --figures figures --out build/html
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import string
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "CLAIMS",
    "NOTEBOOKS",
    "VERDICTS",
    "VERDICT_RULES",
    "Claim",
    "Estimate",
    "NotebookInfo",
    "Outcome",
    "PaperRef",
    "PaperValue",
    "RecordRef",
    "Verdict",
    "build_reproduction",
    "cross_paper_section",
    "evaluate_claims",
    "judge_above",
    "judge_at_least",
    "judge_contains",
    "judge_greater",
    "judge_no_amplification",
    "main",
    "paper_value",
    "render_html",
    "write_reproduction",
]

REPRODUCED = "reproduced"
DIRECTION_ONLY = "direction only"
NOT_REPRODUCED = "not reproduced"
NOT_COMPARABLE = "not comparable"
NOT_RUN = "not run"
VERDICTS = (REPRODUCED, DIRECTION_ONLY, NOT_REPRODUCED, NOT_COMPARABLE, NOT_RUN)
"""Every verdict the report can give, in the order the summary counts them."""

VERDICT_RULES: dict[str, str] = {
    "contains": "**reproduced** when the paper's value lies in our 95% interval, **not "
    "reproduced** otherwise — also when the interval holds the mean of the random baseline "
    "recorded on the same candidates too, since it then cannot tell the paper's result from "
    "chance; **not comparable** when the paper's cell holds no number or we recorded a point "
    "value without an interval.",
    "at_least": "**reproduced** when ours is not below the paper's value (the paper's value is "
    "at most our interval's upper end, or our point value when no interval was recorded); "
    "**not reproduced** otherwise.",
    "greater": "the paper says A beats B. **reproduced** when our 95% intervals of A and B are "
    "disjoint with A above (a conservative stand-in for a paired test, which the records do "
    "not hold); **direction only** when A's mean is above B's but the intervals overlap or "
    "were not recorded; **not reproduced** when A's mean is not above B's.",
    "above": "as *greater*, against a fixed threshold instead of a second value.",
    "no_amplification": "the paper says the loop does not amplify a bias. **reproduced** when "
    "the notebook's paired test finds no amplification and the loop changed what was chosen; "
    "**not comparable** when the loop chose exactly what the single agent chose (a zero "
    "difference proves nothing); **not reproduced** when the test finds amplification.",
    "no paper number": "**not comparable**; the same rule applied to our values is reported as "
    "our demonstration.",
    "not run": "the notebook has not been executed into the build folder, it stopped with an "
    "error, or this run's profile did not record the value.",
}
"""How each comparison turns into a verdict; printed at the top of the report."""

PERSPECTIVE = "no number in the paper (perspective paper); our demonstration"
PROTOCOL_CHECK = "no paper number: the shared protocol check every later table relies on"


# --------------------------------------------------------------------------------------------
# The claims: data, not numbers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PaperRef:
    """Where the paper's value lives in ``paper_numbers.json``.

    Attributes:
        table: Table id, e.g. ``"AgentCF-T2"``.
        row: Column-to-text filters that select exactly one row; empty when the claim is stated
            in words for the whole table (then ``quote`` says what).
        column: The cell holding the value; ``None`` when the row holds a statement, not a number.
        scale: Multiplies the printed number (``0.01`` for a table printed in percent).
        versus_row: For a comparison, the row of the other arm (default: ``row``).
        versus_column: For a comparison, the column of the other arm (default: ``column``).
        quote: What the paper states when it gives no number for the claim.
    """

    table: str
    row: Mapping[str, str] = field(default_factory=dict)
    column: str | None = None
    scale: float = 1.0
    versus_row: Mapping[str, str] | None = None
    versus_column: str | None = None
    quote: str = ""

    @property
    def has_versus(self) -> bool:
        """Whether the reference names a second arm to compare with."""
        return self.versus_row is not None or self.versus_column is not None


@dataclass(frozen=True)
class RecordRef:
    """Where our value lives in a notebook's records.

    Attributes:
        key: The record name; ``{name}`` placeholders are filled from other records of the same
            notebook (e.g. ``"hr1/AFL ({max_rounds} rounds)"``).
        field: For a dict record, the entry holding the value (e.g. ``"hit"``, ``"rate"``).
        label: A short name for the value in the report (e.g. ``"B+R"``).
    """

    key: str
    field: str | None = None
    label: str = ""


@dataclass(frozen=True)
class Claim:
    """One claim a notebook reproduces, and how ours is compared with the paper's.

    Attributes:
        id: Stable id, e.g. ``"agentcf-br-ndcg10"``.
        notebook: The notebook's stem, e.g. ``"01_agentcf"``.
        description: What is claimed, in a few words.
        paper: Where the paper's value is; ``None`` where the paper has no number.
        ours: The record holding our value (A for ``greater``).
        rule: ``"contains"``, ``"at_least"``, ``"greater"``, ``"above"`` or
            ``"no_amplification"``.
        versus: For ``greater``: the record of B.
        threshold: For ``above``: the value ours must exceed.
        no_paper: Why there is no paper number (shown when ``paper`` is ``None``).
        context: Records shown beside ours (e.g. ``("n_sessions", "max_turns")``).
        note: A caveat specific to this claim.
        llm: Whether our value comes from the notebook's language model (``False`` for a
            baseline such as Random or Pop, which is then not credited to the model).
        chance: For ``contains``: the record of a random baseline on the same candidates. An
            interval that holds the paper's value *and* this baseline's mean cannot tell the
            paper's result from chance, so it is not counted as reproduced.
    """

    id: str
    notebook: str
    description: str
    paper: PaperRef | None
    ours: RecordRef
    rule: str = "contains"
    versus: RecordRef | None = None
    threshold: float | None = None
    no_paper: str = ""
    context: tuple[str, ...] = ()
    note: str = ""
    llm: bool = True
    chance: RecordRef | None = None

    def record_refs(self) -> list[RecordRef]:
        """The records this claim reads (ours, then the comparison's)."""
        return [self.ours, *([self.versus] if self.versus else [])]


@dataclass(frozen=True)
class NotebookInfo:
    """What the report says about one notebook besides its claims.

    Attributes:
        title: Fallback title when the executed notebook cannot be read.
        paper: The paper it reproduces, in a few words.
        deviations: The gist of the notebook's "What this shows" section: what differs from
            the paper, and what the embedded model can and cannot show.
    """

    title: str
    paper: str
    deviations: tuple[str, ...]


_PAPER_CLAIM_EMBEDDED = (
    "With the embedded SmolLM2-135M, choices follow position more than taste (README, 'What "
    "the embedded model can and cannot do': 52% on a two-way choice); expect 'not reproduced' "
    "here and the paper's effect sizes only "
    'from a capable endpoint with PROFILE="paper".'
)

NOTEBOOKS: dict[str, NotebookInfo] = {
    "00_data_and_baselines": NotebookInfo(
        title="00 · Data, protocol and classic baselines",
        paper="the shared protocol (no paper)",
        deviations=(
            "No paper numbers: the papers report their baselines on other datasets (Amazon "
            "CDs/Office, LastFM, Steam); this notebook checks the protocol every paper notebook "
            "relies on.",
            "SASRec is sized as AFL's tool model (1 block, 1 head, hidden 64, histories of at "
            "most 10 items); LightGCN trains with learning rate 0.01; early stopping on "
            "validation NDCG@10 within the profile's epoch budget; Pop counts training "
            "interactions exactly.",
            "The smoke profile (200 users, 2 epochs) checks the mechanics, not the claim.",
        ),
    ),
    "01_agentcf": NotebookInfo(
        title="01 · AgentCF",
        paper="AgentCF (Zhang et al., WWW 2024, arXiv 2310.09233)",
        deviations=(
            "MovieLens-100K with re-made dense and sparse subsets instead of the paper's Amazon "
            "CDs/Office subsets: the paper's values are a reference on other data.",
            "Our prompt wording; JSON replies that choose and rank by candidate number instead "
            "of fuzzy title matching; negatives exclude the user's history; malformed rankings "
            "are repaired (the official scorer is reported beside in the notebook).",
            "B+R retrieves with the local MiniLM embedder instead of ada-002 and falls back on "
            "the initial description when there is nothing to retrieve.",
            "Scale: the default profile trains 6 users of the dense subset for 2 of 5 steps, "
            "smoke 3 users for 1 step; the paper uses 100 users per subset and 5 steps, so "
            "claims on the sparse subset are not run below the paper profile.",
            _PAPER_CLAIM_EMBEDDED,
        ),
    ),
    "02_agent4rec": NotebookInfo(
        title="02 · Agent4Rec",
        paper="Agent4Rec (Zhang et al., SIGIR 2024, arXiv 2310.10108)",
        deviations=(
            "MovieLens-100K instead of ML-1M: all 703 eligible users train the recommenders and "
            "a handful browse as agents (default 6, the paper 1,000), so the intervals are wide.",
            "Items shown by title, year, average rating and genres instead of an LLM-written "
            "summary; our own prompts with JSON replies; memory retrieval with the local MiniLM "
            "embedder instead of OpenAI embeddings.",
            "Checkpoints are chosen on the validation split (the official code picks them on "
            "test); Pop is the plain popularity ranking (the official Pop shows 40 random items "
            "of the 600 most popular).",
            "Engagement is compared with the authors' released 1,000-agent LightGCN run "
            "([repo-out]); the paper's own Table 2 cells are mostly unknown.",
            "The rating distribution (agents rarely give 1 or 2 stars) is shown in the notebook "
            "but not recorded, so it is not judged here.",
            "With the embedded model the taste probe sits near chance and the recommender "
            "comparison mostly reflects positions and pages, not quality.",
        ),
    ),
    "03_afl": NotebookInfo(
        title="03 · AFL",
        paper="AFL (Cai et al., SIGIR 2025, arXiv 2410.20027)",
        deviations=(
            "MovieLens-100K, one of the paper's datasets, but with our chronological "
            "leave-one-out split (LLaRA's split is unknown); negatives exclude every item the "
            "user rated.",
            "Replies choose by candidate number under a JSON schema (the paper matches titles); "
            "SASRec is scored in eval mode; the in-loop user agent sees its memory (as the paper "
            "describes; the released code does not).",
            "The user simulation's reward model is trained without the held-out window; items "
            "it never saw get no score.",
            "The paper's +11.52% and +21.12% are averages over datasets and base models; we "
            "judge their direction on MovieLens only.",
            "Small profiles (default 16 samples, 2 simulated users, nested negatives) leave wide "
            "intervals; the user simulation records means only, so its claims reach 'direction "
            "only' at best.",
            "With the embedded model the user agent accepts nearly every first proposal, so the "
            "loop seldom reaches round 2 and AFL equals the single agent; the AFL user agent "
            "mostly says yes, so its F1 sits at the 'always yes' floor and a higher F1 is not "
            "better judgement.",
        ),
    ),
    "04_interecagent": NotebookInfo(
        title="04 · InteRecAgent",
        paper="InteRecAgent (Huang et al., arXiv 2308.16505; ACM TOIS 2025)",
        deviations=(
            "MovieLens-100K instead of ML-10M; our own prompts and 17 hand-written, validated "
            "demonstrations.",
            "Hits are judged by item id beside the paper's fuzzy title rule, and a conversation "
            "continues until both rules have hit.",
            "The ranker is RecBole's SASRec (the paper's UniRec model is not released); one-turn "
            "requests are the simulator's first message (the paper's GPT-4 dialogue generator "
            "is not released).",
            "Smaller profiles: few conversations, fewer turns than the paper's 5 (our hit rate "
            "is Hit@max_turns) and one reflection per turn instead of 3.",
            "The paper prints one-turn results in percent; they are divided by 100 here.",
            "With the embedded model the planner seldom writes a useful plan, so hits are rare "
            "for every method.",
        ),
    ),
    "05_rec4agentverse": NotebookInfo(
        title="05 · Rec4Agentverse",
        paper="Rec4Agentverse (Zhang et al., arXiv 2402.18240; CACM 2025)",
        deviations=(
            "A perspective paper with no code, data or numbers: every claim here is our own "
            "demonstration of its framework, so none can be 'reproduced'.",
            "MovieLens-100K films served by curator agent items over genre × era slices; hidden "
            "tastes from over-represented genres and eras; targets are each user's last two "
            "liked films; instructions come from the recommender's profile by rule; the "
            "adversary's reports are fixed text.",
            "The rule-based template agents and users are a named baseline, never LLM output.",
            "With the embedded model the LLM rows show the mechanism and the costs, not an "
            "effect; as LLM recommender it keeps the user with the agent named in its prompt in "
            "nearly every decision, so its manipulation rates say nothing about the channel.",
            "Manipulation rates are recorded without intervals.",
        ),
    ),
    "06_cross_paper": NotebookInfo(
        title="06 · Across the papers",
        paper="all five, on one protocol (no paper makes this comparison)",
        deviations=(
            "One ml-100k protocol for every method (chronological leave-one-out, the same "
            "users, the same saved 1 + 19 candidates) instead of each paper's own data, split "
            "and candidate count, so no row is a paper's number.",
            "AgentCF trains for the profile's steps on each user's last interactions; the AFL "
            "ranking puts its one proposal first and SASRec's order after it; InteRecAgent's "
            "ranking keeps display order around the target's rank, so its popularity row is "
            "not meaningful.",
            "Prices are the recorded tokens at a public per-token rate (`price_model`), an "
            "estimate that ignores prompt caching.",
            "Few users in the default profile (10), so the intervals are wide.",
        ),
    ),
}
"""Every notebook the report covers, in reading order."""


def _t2(subset: str, method: str, column: str) -> PaperRef:
    return PaperRef("AgentCF-T2", {"subset": subset, "method": method}, column)


def _taste(ratio: str, metric: str) -> Claim:
    return Claim(
        id=f"a4r-taste-{metric}-{ratio.replace(':', '-')}",
        notebook="02_agent4rec",
        description=f"Taste discrimination {metric} at 1 positive : {ratio.split(':')[1]} "
        "negatives (Table 1, MovieLens)",
        paper=PaperRef("A4R-T1", {"dataset": "MovieLens", "ratio": ratio}, metric),
        ours=RecordRef(f"taste/{ratio}/{metric}"),
        context=("n_agents",),
    )


def _engagement(metric: str, label: str) -> Claim:
    return Claim(
        id=f"a4r-lightgcn-{metric.replace('_', '-')}",
        notebook="02_agent4rec",
        description=f"LightGCN {label} (Table 2; the authors' released run)",
        paper=PaperRef("A4R-T2", {"recommender": "LightGCN (released run, 1,000 agents)"}, metric),
        ours=RecordRef(f"engagement/LightGCN/{metric}"),
        context=("n_agents",),
    )


def _one_turn(
    claim_id: str,
    method: str,
    paper_method: str,
    task: str,
    note: str = "",
    llm: bool = True,
    chance: bool = False,
) -> Claim:
    column = "Retrieval R@5 Movie" if task == "recall" else "Ranking N@20 Movie"
    what = "Recall@5 over all items" if task == "recall" else "NDCG over 1 + 19 candidates"
    return Claim(
        id=claim_id,
        notebook="04_interecagent",
        description=f"One-turn {what}: {method} (Table 5)",
        paper=PaperRef("IRA-T-oneturn", {"method": paper_method}, column, scale=0.01),
        ours=RecordRef(f"one_turn/{task}/{method}"),
        chance=RecordRef(f"one_turn/{task}/Random", label="Random") if chance else None,
        note=note,
        llm=llm,
    )


def _stage(claim_id: str, mode: str, metric: str, what: str, later: int = 2) -> Claim:
    return Claim(
        id=claim_id,
        notebook="05_rec4agentverse",
        description=f"Stage {later} above stage 1: {what} ({mode} agents)",
        paper=None,
        no_paper=PERSPECTIVE,
        ours=RecordRef(f"stages/{mode}/{later}/{metric}", label=f"stage {later}"),
        rule="greater",
        versus=RecordRef(f"stages/{mode}/1/{metric}", label="stage 1"),
        context=("n_users", "max_turns"),
    )


def _manipulation(claim_id: str, recommender: str, mode: str) -> Claim:
    return Claim(
        id=claim_id,
        notebook="05_rec4agentverse",
        description=f"A lying agent item sways the {recommender} recommender through a "
        f"{mode.replace('_', '-')} report (attack − honest routing rate)",
        paper=None,
        no_paper=PERSPECTIVE,
        ours=RecordRef(f"manipulation/{recommender}/{mode}/attack - honest", "rate"),
        rule="above",
        threshold=0.0,
    )


CLAIMS: tuple[Claim, ...] = (
    # 00 · the shared protocol
    Claim(
        id="base-lightgcn-vs-random",
        notebook="00_data_and_baselines",
        description="Trained LightGCN ranks 1 + 9 candidates above chance (NDCG@10)",
        paper=None,
        no_paper=PROTOCOL_CHECK,
        ours=RecordRef("ndcg@10/1+9/LightGCN", label="LightGCN"),
        rule="greater",
        versus=RecordRef("ndcg@10/1+9/Random", label="Random"),
        context=("n_test_users",),
    ),
    Claim(
        id="base-lightgcn-vs-pop",
        notebook="00_data_and_baselines",
        description="Trained LightGCN ranks 1 + 9 candidates above popularity (NDCG@10)",
        paper=None,
        no_paper=PROTOCOL_CHECK,
        ours=RecordRef("ndcg@10/1+9/LightGCN", label="LightGCN"),
        rule="greater",
        versus=RecordRef("ndcg@10/1+9/Pop", label="Pop"),
        context=("n_test_users",),
    ),
    # 01 · AgentCF
    Claim(
        id="agentcf-br-ndcg10",
        notebook="01_agentcf",
        description="AgentCF B+R, NDCG@10 on 1 + 9 candidates, dense subset (Table 2)",
        paper=_t2("CDs-dense", "AgentCF_B+R", "ndcg@10"),
        ours=RecordRef("ndcg@10/dense/AgentCF B+R"),
        chance=RecordRef("ndcg@10/dense/Random", label="Random"),
        context=("n_users", "steps"),
    ),
    Claim(
        id="agentcf-br-ndcg1",
        notebook="01_agentcf",
        description="AgentCF B+R, NDCG@1 on 1 + 9 candidates, dense subset (Table 2)",
        paper=_t2("CDs-dense", "AgentCF_B+R", "ndcg@1"),
        ours=RecordRef("ndcg@1/dense/AgentCF B+R"),
        chance=RecordRef("ndcg@1/dense/Random", label="Random"),
        context=("n_users", "steps"),
    ),
    Claim(
        id="agentcf-b-ndcg10",
        notebook="01_agentcf",
        description="AgentCF B, NDCG@10 on 1 + 9 candidates, dense subset (Table 2)",
        paper=_t2("Office-dense", "AgentCF_B", "ndcg@10"),
        ours=RecordRef("ndcg@10/dense/AgentCF B"),
        chance=RecordRef("ndcg@10/dense/Random", label="Random"),
        context=("n_users", "steps"),
    ),
    Claim(
        id="agentcf-bh-sparse-ndcg10",
        notebook="01_agentcf",
        description="AgentCF B+H, NDCG@10 on 1 + 9 candidates, sparse subset (Table 2)",
        paper=_t2("Office-sparse", "AgentCF_B+H", "ndcg@10"),
        ours=RecordRef("ndcg@10/sparse/AgentCF B+H"),
        chance=RecordRef("ndcg@10/sparse/Random", label="Random"),
        context=("n_users", "steps"),
    ),
    Claim(
        id="agentcf-br-vs-llmrank",
        notebook="01_agentcf",
        description="Trained AgentCF B+R ranks above the zero-shot LLMRank (NDCG@10, dense)",
        paper=PaperRef(
            "AgentCF-T2",
            quote="AgentCF beats the weak zero-shot LLMRank (third-party summary; LLMRank's "
            "numbers not recovered)",
        ),
        ours=RecordRef("ndcg@10/dense/AgentCF B+R", label="B+R"),
        rule="greater",
        versus=RecordRef("ndcg@10/dense/LLMRank (zero-shot)", label="LLMRank"),
    ),
    Claim(
        id="agentcf-ablation-item-agent",
        notebook="01_agentcf",
        description="Removing the item agent lowers NDCG@10 (Table 3 ablation, dense)",
        paper=PaperRef("AgentCF-T3", {"tag": "[note]"}, "claim"),
        ours=RecordRef("ablation/ndcg@10/dense/AgentCF B (full)", label="full"),
        rule="greater",
        versus=RecordRef("ablation/ndcg@10/dense/w/o item agent", label="w/o item agent"),
    ),
    Claim(
        id="agentcf-retest-accuracy",
        notebook="01_agentcf",
        description="Trained agents re-answer their training pairs correctly (Fig. 3; paper "
        "order, negative first)",
        paper=PaperRef("AgentCF-F3", {"metric": "pairwise re-test accuracy"}, "value"),
        ours=RecordRef("probe/dense/neg_first/accuracy"),
        rule="at_least",
        note="Read with probe/dense/neg_first/chose_first: an agent that always picks the first "
        "option scores 0 in this order.",
    ),
    # 02 · Agent4Rec
    _taste("1:1", "accuracy"),
    _taste("1:1", "f1"),
    _taste("1:3", "f1"),
    _taste("1:9", "accuracy"),
    _taste("1:9", "f1"),
    _engagement("p_view", "viewing ratio"),
    _engagement("p_like", "like ratio"),
    _engagement("satisfaction", "interview satisfaction (1-10)"),
    Claim(
        id="a4r-lightgcn-vs-mf-satisfaction",
        notebook="02_agent4rec",
        description="Agents are more satisfied with LightGCN than with MF (Table 2)",
        paper=PaperRef(
            "A4R-T2",
            {"recommender": "LightGCN"},
            "satisfaction",
            versus_row={"recommender": "MF"},
        ),
        ours=RecordRef("engagement/LightGCN/satisfaction", label="LightGCN"),
        rule="greater",
        versus=RecordRef("engagement/MF/satisfaction", label="MF"),
        context=("n_agents",),
    ),
    # 03 · AFL
    Claim(
        id="afl-loop-vs-single-hr1",
        notebook="03_afl",
        description="The feedback loop raises HR@1 over the single recommendation agent "
        "(1 + 19 candidates)",
        paper=PaperRef(
            "AFL-gains",
            {
                "claim": "over the single recommendation agent (HR@1, averaged over datasets "
                "and base models)"
            },
            "value",
        ),
        ours=RecordRef("hr1/AFL ({max_rounds} rounds)", label="AFL"),
        rule="greater",
        versus=RecordRef("hr1/Rec Agent (1 round)", label="single agent"),
        context=("n_samples", "max_rounds"),
    ),
    Claim(
        id="afl-hr1-movielens",
        notebook="03_afl",
        description="AFL HR@1 on MovieLens (Table 7, full AFL)",
        paper=PaperRef("AFL-Abl", {"variant": "full AFL"}, "HR@1"),
        ours=RecordRef("hr1/AFL ({max_rounds} rounds)"),
        context=("n_samples", "max_rounds"),
    ),
    Claim(
        id="afl-bias-popularity",
        notebook="03_afl",
        description="The loop does not amplify popularity bias (AFL vs the single agent)",
        paper=PaperRef("AFL-F-bias", {"tag": "[note]"}, "claim"),
        ours=RecordRef("bias/popularity percentile"),
        rule="no_amplification",
        note="The measure is ours (the paper's is not recovered).",
    ),
    Claim(
        id="afl-bias-position",
        notebook="03_afl",
        description="The loop does not amplify position bias (AFL vs the single agent)",
        paper=PaperRef("AFL-F-bias", {"tag": "[note]"}, "claim"),
        ours=RecordRef("bias/mean position"),
        rule="no_amplification",
        note="The measure is ours (the paper's is not recovered).",
    ),
    Claim(
        id="afl-user-sim-f1",
        notebook="03_afl",
        description="The AFL user agent simulates likes better than the single user agent "
        "(F1 at 1:1)",
        paper=PaperRef(
            "AFL-gains", {"claim": "over the single user agent (user simulation)"}, "value"
        ),
        ours=RecordRef("sim/1:1/AFL/f1", label="AFL user agent"),
        rule="greater",
        versus=RecordRef("sim/1:1/User Agent/f1", label="User Agent"),
        note="An 'always yes' simulator reaches F1 0.67 at 1:1 without any judgement.",
    ),
    # 04 · InteRecAgent
    Claim(
        id="ira-hit-fuzzy",
        notebook="04_interecagent",
        description="Hit rate of simulated conversations, the paper's fuzzy title rule "
        "(Table 2, MovieLens H@5)",
        paper=PaperRef("IRA-T-multiturn", {"method": "Ours (InteRecAgent)"}, "MovieLens H@5"),
        ours=RecordRef("sessions/InteRecAgent/fuzzy", "hit"),
        context=("n_sessions", "max_turns"),
    ),
    Claim(
        id="ira-hit-id",
        notebook="04_interecagent",
        description="Hit rate of simulated conversations, judged by item id (Table 2, "
        "MovieLens H@5)",
        paper=PaperRef("IRA-T-multiturn", {"method": "Ours (InteRecAgent)"}, "MovieLens H@5"),
        ours=RecordRef("sessions/InteRecAgent/id", "hit"),
        context=("n_sessions", "max_turns"),
    ),
    Claim(
        id="ira-vs-llm-only",
        notebook="04_interecagent",
        description="The agent with tools hits more often than the same LLM alone (fuzzy rule)",
        paper=PaperRef(
            "IRA-T-multiturn",
            {"method": "Ours (InteRecAgent)"},
            "MovieLens H@5",
            versus_row={"method": "GPT-4"},
        ),
        ours=RecordRef("sessions/InteRecAgent/fuzzy", "hit", label="InteRecAgent"),
        rule="greater",
        versus=RecordRef("sessions/LLM only/fuzzy", "hit", label="LLM only"),
        context=("n_sessions", "max_turns"),
    ),
    _one_turn("ira-one-turn-recall", "InteRecAgent", "Ours", "recall"),
    _one_turn("ira-one-turn-ndcg", "InteRecAgent", "Ours", "ndcg", chance=True),
    _one_turn(
        "ira-one-turn-ndcg-random",
        "Random",
        "Random",
        "ndcg",
        note="No model involved: a check of the candidate protocol.",
        llm=False,
    ),
    _one_turn(
        "ira-one-turn-ndcg-pop",
        "Pop",
        "Popularity",
        "ndcg",
        note="No model involved. With uniformly drawn negatives popularity is strong on "
        "MovieLens-100K (notebook 00); the paper's ML-10M candidates differ.",
        llm=False,
    ),
    Claim(
        id="ira-ablation-reflection",
        notebook="04_interecagent",
        description="Removing reflection lowers the hit rate (Fig. 5 ablation, by id)",
        paper=PaperRef(
            "IRA-Abl",
            {
                "claim": "Removing reflection hurts most; removing plan-first or dynamic "
                "demonstrations gives a slight decrease."
            },
            "claim",
        ),
        ours=RecordRef("sessions/InteRecAgent/id", "hit", label="full"),
        rule="greater",
        versus=RecordRef("sessions/no reflection/id", "hit", label="no reflection"),
        context=("n_sessions", "max_turns"),
    ),
    # 05 · Rec4Agentverse
    _stage("r4a-stage2-taste-template", "template", "pref_share", "films fitting the taste"),
    _stage("r4a-stage2-taste-llm", "llm", "pref_share", "films fitting the taste"),
    _stage(
        "r4a-stage2-profile-template", "template", "profile_jaccard", "profile matches the taste"
    ),
    _stage("r4a-stage3-taste-template", "template", "pref_share", "films fitting the taste", 3),
    _manipulation("r4a-manipulation-classic-schema", "classic", "schema"),
    _manipulation("r4a-manipulation-llm-free-text", "llm", "free_text"),
)
"""Every claim in the report, grouped by notebook in reading order."""


# --------------------------------------------------------------------------------------------
# Values: the paper's and ours
# --------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"[-+]?\d*\.?\d+")


@dataclass(frozen=True)
class PaperValue:
    """The paper's side of a claim, as read from ``paper_numbers.json``.

    Attributes:
        text: What to show (the printed cell, ``"A vs B"`` for a comparison, or the quote).
        number: The value for ``contains``/``at_least`` (scaled), or ``None``.
        tag: Confidence tag(s) of the row(s), e.g. ``"[note]"``.
        table: The table id.
        where: Which row and column, in words.
        source: The paper and the table's source line.
    """

    text: str
    number: float | None
    tag: str
    table: str
    where: str
    source: str


def _parse_number(text: str) -> float | None:
    """The one number printed in a cell (``"3.85*"`` -> 3.85), or ``None`` if none or several."""
    found = _NUMBER.findall(text.replace(",", ""))
    return float(found[0]) if len(found) == 1 else None


def _select_row(frame: Any, table_id: str, row: Mapping[str, str]) -> Any:
    """The one row of ``frame`` matching ``row``; a clear ``KeyError`` otherwise."""
    mask = None
    for column, value in row.items():
        if column not in frame.columns:
            raise KeyError(f"{table_id} has no column {column!r}; columns: {list(frame.columns)}")
        hit = frame[column] == value
        mask = hit if mask is None else mask & hit
    rows = frame if mask is None else frame[mask]
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} rows of {table_id} match {dict(row)}; expected exactly 1")
    return rows.iloc[0]


def paper_value(ref: PaperRef) -> PaperValue:
    """Read the paper's side of a claim from ``paper_numbers.json``.

    Args:
        ref: Where the value is.

    Returns:
        The shown text, the number (scaled) when the cell holds exactly one, tag and source.

    Raises:
        KeyError: An unknown table, column, or a row filter that does not match exactly one row.
    """
    from recagents import paper_numbers

    frame = paper_numbers.table(ref.table)
    source = frame.attrs["source"]
    if not ref.row and ref.column is None:
        tags = " ".join(sorted(set(frame["tag"])))
        return PaperValue(ref.quote or "stated in words", None, tags, ref.table, "", source)
    row = _select_row(frame, ref.table, ref.row)
    column = ref.column or "claim"
    if column not in frame.columns:
        raise KeyError(f"{ref.table} has no column {column!r}; columns: {list(frame.columns)}")
    text = str(row[column])
    tags = {str(row["tag"])}
    hidden = ("tag", column)  # the shown text already says what the row is
    where = " · ".join(str(v) for k, v in ref.row.items() if k not in hidden)
    if ref.has_versus:
        other = _select_row(frame, ref.table, ref.versus_row or ref.row)
        other_column = ref.versus_column or column
        if other_column not in frame.columns:
            raise KeyError(f"{ref.table} has no column {other_column!r}")
        tags.add(str(other["tag"]))
        other_where = " · ".join(str(v) for v in (ref.versus_row or {}).values())
        text = f"{text} vs {other[other_column]}"
        where = f"{where} vs {other_where or other_column}"
        return PaperValue(text, None, " ".join(sorted(tags)), ref.table, where, source)
    number = _parse_number(text) if ref.column is not None else None
    if number is not None and ref.scale != 1.0:
        number = round(number * ref.scale, 6)
        text = f"{text} (= {number:.4f})"
    if column not in ("claim", "value"):
        where = f"{where} · {column}" if where else column
    if ref.quote:
        text = f"{text}: {ref.quote}"
    return PaperValue(text, number, " ".join(sorted(tags)), ref.table, where, source)


@dataclass(frozen=True)
class Estimate:
    """Our value: a mean with its 95% interval, or a point value.

    Attributes:
        mean: The mean (or the point value).
        low: Lower end of the 95% interval, ``None`` for a point value.
        high: Upper end of the 95% interval, ``None`` for a point value.
        n: Sample size when the record holds one.
    """

    mean: float
    low: float | None = None
    high: float | None = None
    n: int | None = None

    @property
    def has_interval(self) -> bool:
        """Whether a 95% interval was recorded."""
        return self.low is not None and self.high is not None

    def text(self) -> str:
        """``"0.4356 [0.2891, 0.6309]"``, or ``"0.4356 (no interval)"``, plus ``n`` if known."""
        body = (
            f"{self.mean:.4f} [{self.low:.4f}, {self.high:.4f}]"
            if self.has_interval
            else f"{self.mean:.4f} (no interval)"
        )
        return f"{body}, n={self.n}" if self.n is not None else body

    @classmethod
    def from_value(cls, value: Any, n: int | None = None) -> Estimate:
        """Turn a recorded value (``[mean, low, high]`` or a number) into an estimate.

        Raises:
            ValueError: The value is neither.
        """
        if isinstance(value, bool):
            raise ValueError(f"expected a number or [mean, low, high], got {value!r}")
        if isinstance(value, int | float):
            return cls(float(value), n=n)
        if (
            isinstance(value, list | tuple)
            and len(value) == 3
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        ):
            mean, low, high = (float(v) for v in value)
            return cls(mean, low, high, n=n)
        raise ValueError(f"expected a number or [mean, low, high], got {value!r}")


class MissingRecord(KeyError):
    """A record the claim needs is not in this run's records."""


def resolve_key(template: str, records: Mapping[str, Any]) -> str:
    """Fill ``{name}`` placeholders of a record key from the notebook's other records.

    Raises:
        MissingRecord: A placeholder names a record this run did not write.
    """
    names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    missing = [name for name in names if name not in records]
    if missing:
        raise MissingRecord(f"record {missing[0]!r} (needed to name {template!r})")
    return template.format(**{name: records[name] for name in names})


def _read_ref(ref: RecordRef, records: Mapping[str, Any]) -> tuple[str, Any]:
    key = resolve_key(ref.key, records)
    if key not in records:
        raise MissingRecord(f"record {key!r}")
    value = records[key]
    if ref.field is not None:
        if not isinstance(value, Mapping) or ref.field not in value:
            raise MissingRecord(f"field {ref.field!r} of record {key!r}")
        n = value.get("n") if isinstance(value.get("n"), int) else None
        return key, (value[ref.field], n)
    return key, (value, None)


def _estimate(ref: RecordRef, records: Mapping[str, Any]) -> tuple[str, Estimate]:
    key, (value, n) = _read_ref(ref, records)
    try:
        return key, Estimate.from_value(value, n)
    except ValueError as error:
        raise ValueError(f"record {key!r}: {error}") from None


# --------------------------------------------------------------------------------------------
# Verdict rules (pure functions of values)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """A verdict and the one-line reason for it."""

    verdict: str
    reason: str


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def judge_contains(paper: float | None, ours: Estimate, chance: float | None = None) -> Verdict:
    """Reproduced when the paper's value lies in our 95% interval (bounds included).

    Args:
        paper: The paper's value (``None``: its cell holds no single number).
        ours: Our estimate.
        chance: A random baseline's value on the same candidates, if recorded: an interval
            that holds both the paper's value and this one cannot tell them apart, so it is
            not counted as reproduced.
    """
    if paper is None:
        return Verdict(NOT_COMPARABLE, "the paper's cell holds no single number")
    if not ours.has_interval:
        return Verdict(NOT_COMPARABLE, "we recorded a point value without an interval")
    assert ours.low is not None and ours.high is not None
    interval = f"[{_fmt(ours.low)}, {_fmt(ours.high)}]"
    if ours.low <= paper <= ours.high:
        if chance is not None and ours.low <= chance <= ours.high:
            return Verdict(
                NOT_REPRODUCED,
                f"our interval {interval} holds the paper's {_fmt(paper)} but also the random "
                f"baseline's {_fmt(chance)}: it cannot tell the paper's result from chance",
            )
        return Verdict(REPRODUCED, f"paper {_fmt(paper)} lies in our interval {interval}")
    side = "above" if paper > ours.high else "below"
    return Verdict(NOT_REPRODUCED, f"paper {_fmt(paper)} is {side} our interval {interval}")


def judge_at_least(paper: float | None, ours: Estimate) -> Verdict:
    """Reproduced when ours is not below the paper's value."""
    if paper is None:
        return Verdict(NOT_COMPARABLE, "the paper's cell holds no single number")
    top = ours.high if ours.has_interval else ours.mean
    assert top is not None
    what = "our interval's upper end" if ours.has_interval else "our value"
    if top >= paper:
        return Verdict(REPRODUCED, f"{what} {_fmt(top)} reaches the paper's {_fmt(paper)}")
    return Verdict(NOT_REPRODUCED, f"{what} {_fmt(top)} is below the paper's {_fmt(paper)}")


def judge_greater(a: Estimate, b: Estimate, a_label: str = "A", b_label: str = "B") -> Verdict:
    """A above B: reproduced with disjoint intervals, direction only with overlapping ones."""
    if a.mean <= b.mean:
        relation = "equals" if a.mean == b.mean else "is below"
        return Verdict(
            NOT_REPRODUCED,
            f"{a_label} {_fmt(a.mean)} {relation} {b_label} {_fmt(b.mean)}",
        )
    if a.has_interval and b.has_interval:
        assert a.low is not None and b.high is not None
        if a.low > b.high:
            return Verdict(
                REPRODUCED,
                f"{a_label} above {b_label}, 95% intervals disjoint "
                f"({_fmt(a.low)} > {_fmt(b.high)})",
            )
        return Verdict(
            DIRECTION_ONLY,
            f"{a_label} {_fmt(a.mean)} > {b_label} {_fmt(b.mean)} but the intervals overlap",
        )
    return Verdict(
        DIRECTION_ONLY,
        f"{a_label} {_fmt(a.mean)} > {b_label} {_fmt(b.mean)}; no intervals recorded",
    )


def judge_above(ours: Estimate, threshold: float, label: str = "ours") -> Verdict:
    """Ours above a fixed threshold: as :func:`judge_greater` against a constant."""
    if ours.mean <= threshold:
        relation = "equals" if ours.mean == threshold else "is below"
        return Verdict(NOT_REPRODUCED, f"{label} {_fmt(ours.mean)} {relation} {_fmt(threshold)}")
    if ours.has_interval:
        assert ours.low is not None
        if ours.low > threshold:
            return Verdict(
                REPRODUCED,
                f"{label}'s 95% interval lies above {_fmt(threshold)} (low end {_fmt(ours.low)})",
            )
        return Verdict(
            DIRECTION_ONLY,
            f"{label} {_fmt(ours.mean)} > {_fmt(threshold)} but the interval reaches it",
        )
    return Verdict(
        DIRECTION_ONLY, f"{label} {_fmt(ours.mean)} > {_fmt(threshold)}; no interval recorded"
    )


def judge_no_amplification(diff: float, amplifies: bool) -> Verdict:
    """The loop does not amplify the bias (the notebook's paired test decides ``amplifies``)."""
    if amplifies:
        return Verdict(NOT_REPRODUCED, f"the loop amplifies it (difference {_fmt(diff)})")
    if diff == 0:
        return Verdict(
            NOT_COMPARABLE,
            "the loop chose exactly what the single agent chose (difference 0): nothing to test",
        )
    return Verdict(REPRODUCED, f"no amplification (difference {_fmt(diff)}, interval not biased)")


# --------------------------------------------------------------------------------------------
# Reading the build folder and judging each claim
# --------------------------------------------------------------------------------------------


@dataclass
class RunInfo:
    """What one executed notebook holds, or why it has not been run."""

    stem: str
    path: Path
    status: str  # "ran", "not run", "failed", "unreadable"
    detail: str = ""
    title: str = ""
    records: dict[str, Any] = field(default_factory=dict)
    executed: str = ""

    @property
    def model(self) -> str:
        """The model recorded by the notebook, or ``"no LLM"`` when it records none."""
        model = self.records.get("model")
        return str(model) if model else "no LLM"

    @property
    def profile(self) -> str:
        """The profile recorded by the notebook, or ``"?"``."""
        return str(self.records.get("profile", "?"))


def _first_heading(cells: Sequence[Any]) -> str:
    for cell in cells:
        if cell.get("cell_type") != "markdown":
            continue
        for line in str(cell.get("source", "")).splitlines():
            match = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
            if match:
                return match.group(1).strip()
    return ""


def read_run(path: Path) -> RunInfo:
    """Read one executed notebook: records, title, papermill's end time and error state."""
    import nbformat

    from recagents.notebook import read_records

    stem = path.stem
    if not path.is_file():
        return RunInfo(stem, path, "not run", f"{path} does not exist")
    try:
        nb = nbformat.read(path, as_version=4)
        records = read_records(path)
    except Exception as error:  # a truncated or foreign file must not stop the report
        return RunInfo(stem, path, "unreadable", f"{path}: {type(error).__name__}: {error}")
    papermill = nb.metadata.get("papermill", {}) or {}
    executed = str(papermill.get("end_time") or "")
    info = RunInfo(stem, path, "ran", "", _first_heading(nb.cells), records, executed)
    if papermill.get("exception"):
        info.status = "failed"
        info.detail = f"{path} stopped with an error (papermill recorded an exception)"
    elif not records:
        info.status = "failed"
        info.detail = f"{path} holds no records (its last cell did not run)"
    return info


@dataclass(frozen=True)
class Outcome:
    """One claim judged on one build folder."""

    claim: Claim
    paper: PaperValue | None
    ours: str
    verdict: str
    reason: str
    model: str = ""
    profile: str = ""


def _ours_text(label: str, estimate: Estimate) -> str:
    return f"{label} {estimate.text()}" if label else estimate.text()


def _judge(
    claim: Claim, paper: PaperValue | None, records: Mapping[str, Any]
) -> tuple[str, Verdict]:
    """Our shown value and the verdict of ``claim.rule``; raises ``MissingRecord``."""
    if claim.rule == "no_amplification":
        key, (value, _) = _read_ref(claim.ours, records)
        if not isinstance(value, Mapping) or not {"diff", "amplifies"} <= set(value):
            raise ValueError(f"record {key!r}: expected {{'diff', 'amplifies'}}, got {value!r}")
        verdict = judge_no_amplification(float(value["diff"]), bool(value["amplifies"]))
        ours = f"difference {float(value['diff']):.4f}, amplifies: {bool(value['amplifies'])}"
        return ours, verdict
    _, a = _estimate(claim.ours, records)
    if claim.rule == "greater":
        if claim.versus is None:
            raise ValueError(f"claim {claim.id}: rule 'greater' needs 'versus'")
        _, b = _estimate(claim.versus, records)
        a_label, b_label = claim.ours.label or "A", claim.versus.label or "B"
        ours = f"{_ours_text(a_label, a)} vs {_ours_text(b_label, b)}"
        verdict = judge_greater(a, b, a_label, b_label)
    elif claim.rule == "above":
        threshold = 0.0 if claim.threshold is None else claim.threshold
        ours = _ours_text(claim.ours.label, a)
        verdict = judge_above(a, threshold, claim.ours.label or "ours")
    elif claim.rule == "contains":
        ours = _ours_text(claim.ours.label, a)
        chance = None
        if claim.chance is not None:
            try:
                _, baseline = _estimate(claim.chance, records)
            except MissingRecord:
                ours += "; no random baseline recorded"
            else:
                chance = baseline.mean
                ours += f"; {claim.chance.label or 'random'} {baseline.mean:.4f}"
        verdict = judge_contains(paper.number if paper else None, a, chance)
    elif claim.rule == "at_least":
        ours = _ours_text(claim.ours.label, a)
        verdict = judge_at_least(paper.number if paper else None, a)
    else:
        raise ValueError(f"claim {claim.id}: unknown rule {claim.rule!r}")
    return ours, verdict


def _context(claim: Claim, records: Mapping[str, Any]) -> str:
    shown = [f"{name}={records[name]}" for name in claim.context if name in records]
    return f"; {', '.join(shown)}" if shown else ""


_DEMONSTRATION = {
    REPRODUCED: "shown",
    DIRECTION_ONLY: "shown in direction only",
    NOT_REPRODUCED: "not shown",
}


def _embedded_model() -> str:
    """The alias of the embedded default model (its module imports only the standard library)."""
    from recagents.llm.local import MODEL_ALIAS

    return MODEL_ALIAS


def evaluate_claim(claim: Claim, run: RunInfo) -> Outcome:
    """Judge one claim on one executed notebook (never raises for a missing value)."""
    paper = paper_value(claim.paper) if claim.paper is not None else None
    if run.status in ("not run", "unreadable"):
        return Outcome(claim, paper, "—", NOT_RUN, run.detail)
    try:
        ours, judged = _judge(claim, paper, run.records)
    except MissingRecord as error:
        reason = (
            f"{run.detail}; " if run.status == "failed" else ""
        ) + f"this run (profile {run.profile}) has no {error.args[0]}"
        return Outcome(claim, paper, "—", NOT_RUN, reason, run.model, run.profile)
    except ValueError as error:
        return Outcome(claim, paper, "—", NOT_COMPARABLE, str(error), run.model, run.profile)
    verdict, reason = judged.verdict, judged.reason
    model = run.model if claim.llm else "no LLM"
    ours += _context(claim, run.records)
    if claim.paper is None:
        shown = _DEMONSTRATION.get(verdict, verdict)
        reason = f"{claim.no_paper or 'no paper number'}: {shown} ({reason})"
        verdict = NOT_COMPARABLE
    elif verdict == NOT_REPRODUCED and claim.llm and run.model == _embedded_model():
        reason += f"; the embedded {run.model} answers near chance (see the caveats)"
    return Outcome(claim, paper, ours, verdict, reason, model, run.profile)


def evaluate_claims(
    build_dir: Path, claims: Sequence[Claim] = CLAIMS
) -> tuple[dict[str, RunInfo], list[Outcome]]:
    """Read every covered notebook in ``build_dir`` and judge every claim.

    Args:
        build_dir: Folder of the executed notebooks (``build`` or ``build/smoke``).
        claims: The claims to judge.

    Returns:
        The run of each notebook by stem (:data:`NOTEBOOKS` order, then any other notebook
        a claim names) and one outcome per claim.
    """
    stems = list(NOTEBOOKS) + [c.notebook for c in claims if c.notebook not in NOTEBOOKS]
    runs = {stem: read_run(Path(build_dir) / f"{stem}.ipynb") for stem in dict.fromkeys(stems)}
    return runs, [evaluate_claim(claim, runs[claim.notebook]) for claim in claims]


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _paper_cell(outcome: Outcome) -> str:
    claim, paper = outcome.claim, outcome.paper
    if paper is None:
        return f"— ({claim.no_paper or 'no paper number'})"
    where = f": {paper.where}" if paper.where else ""
    return f"{paper.text} — `{paper.table}`{where} {paper.tag}"


def _ours_cell(outcome: Outcome) -> str:
    if outcome.verdict == NOT_RUN and outcome.ours == "—":
        return "—"
    return f"{outcome.ours} ({outcome.model}, {outcome.profile})"


CROSS_PAPER = "06_cross_paper"
"""The notebook whose records make the cross-paper section of the report."""


def _interval_text(value: Any) -> str:
    """``mean [low, high]`` of a recorded ``[mean, low, high]``, or ``—``."""
    if isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 3:
        mean, low, high = (float(v) for v in value)
        return f"{mean:.3f} [{low:.3f}, {high:.3f}]"
    return "—"


def _paired_text(value: Any) -> str:
    """``diff [low, high], p`` of a recorded paired test, or ``—`` (the reference itself)."""
    if not isinstance(value, Mapping) or "diff" not in value:
        return "—"
    return (
        f"{float(value['diff']):+.3f} [{float(value['diff_low']):+.3f}, "
        f"{float(value['diff_high']):+.3f}], p = {float(value['p_value']):.3f}"
    )


def _field(value: Any, name: str, fmt: str) -> str:
    if isinstance(value, Mapping) and value.get(name) is not None:
        return format(float(value[name]), fmt)
    return "—"


def cross_paper_section(run: RunInfo, metric: str = "ndcg@10") -> list[str]:
    """The Markdown lines of the one-protocol leaderboard, from notebook 06's records.

    Every method of that run in one table: ``metric`` and HR@1 with their intervals, the
    paired difference to the best classic baseline, the popularity ratio of its top 5, how
    much reversing the candidates changes its ranking (for the methods probed), calls and
    price per user, and failed replies. Values are read, never typed in; a notebook that has
    not run gives one line saying so.
    """
    lines = ["## Across the papers: one protocol", ""]
    if run.status != "ran":
        return lines + [f"**{run.status}**: {run.detail}.", ""]
    records = run.records
    methods = [str(m) for m in records.get("methods", [])]
    references = {
        str(records[f"paired/{metric}/{m}"].get("reference"))
        for m in methods
        if isinstance(records.get(f"paired/{metric}/{m}"), Mapping)
    }
    reference = references.pop() if len(references) == 1 else "the best classic baseline"
    price = records.get("price_model", "a public rate")
    lines += [
        f"Every method ranks the same 1 + 19 candidates for the same {records.get('n_users', '?')} "
        f"users (`notebooks/{CROSS_PAPER}.ipynb`, model `{run.model}`, profile {run.profile}). "
        f"Means with 95% bootstrap intervals; *vs {reference}* is the paired bootstrap "
        f"difference in {metric.upper()} with its interval and p-value; *pop. ratio* is the "
        "mean popularity of the top 5 over that of the held-out targets (1 = as popular as "
        "what users chose); *tau reversed* is Kendall's tau between the rankings of the saved "
        "and the reversed candidate order (1 = order-blind; only the methods probed); price "
        f"per user at `{price}`'s per-token rate.",
        "",
    ]
    failures = records.get("failures", {})
    rows = []
    for method in methods:
        cost = records.get(f"cost/{method}", {})
        rows.append(
            [
                method,
                _interval_text(records.get(f"{metric}/{method}")),
                _interval_text(records.get(f"hr@1/{method}")),
                _paired_text(records.get(f"paired/{metric}/{method}")),
                _field(records.get(f"popularity/{method}"), "pop_ratio", ".2f"),
                _field(records.get(f"position/{method}/reversed"), "kendall_tau", ".2f"),
                _field(cost, "calls", ".1f"),
                _field(cost, "prompt_tokens", ",.0f"),
                _field(cost, "usd", ".5f"),
                str(failures.get(method, "—")) if isinstance(failures, Mapping) else "—",
            ]
        )
    header = [
        "method",
        metric.upper(),
        "HR@1",
        f"vs {reference}",
        "pop. ratio",
        "tau reversed",
        "calls / user",
        "prompt tokens / user",
        "USD / user",
        "failed",
    ]
    return lines + _table(header, rows) + [""]


def build_reproduction(
    build_dir: Path,
    profile_label: str,
    *,
    claims: Sequence[Claim] = CLAIMS,
    now: datetime | None = None,
) -> str:
    """The text of REPRODUCTION.md for the executed notebooks in ``build_dir``.

    Args:
        build_dir: Folder of the executed notebooks.
        profile_label: The profile the folder was built with (``"default"``, ``"smoke"``);
            a notebook that recorded another profile is flagged.
        claims: The claims to report (default: :data:`CLAIMS`).
        now: The generation time to print (default: now, UTC).

    Returns:
        Markdown: header, verdict rules, the notebooks, the summary table, the claims and
        deviations per notebook, and the sources of the paper values.
    """
    build_dir = Path(build_dir)
    runs, outcomes = evaluate_claims(build_dir, claims)
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    counts = {v: sum(o.verdict == v for o in outcomes) for v in VERDICTS}
    models = sorted({r.model for r in runs.values() if r.status in ("ran", "failed")})
    not_run = [stem for stem, r in runs.items() if r.status != "ran"]

    lines = [
        "# Reproduction report",
        "",
        f"Generated by `make reproduce` (`python -m recagents.report reproduction`) on {stamp} "
        f"from the executed notebooks in `{build_dir}`, profile **{profile_label}**. Every "
        "value below is read when this file is generated: ours from the results each notebook "
        "records in its last cell (`recagents.notebook.record`), the papers' from "
        "`recagents/paper_numbers.json` with their source and confidence tag. None is typed "
        "in by hand.",
        "",
        f"- Models: {', '.join(f'`{m}`' for m in models) if models else 'none (nothing ran)'} "
        "(per notebook below).",
        f"- Not run: {', '.join(f'`{s}`' for s in not_run) if not_run else 'none'}.",
        "- At a glance: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS) + ".",
        "",
        "Ours is a mean with its 95% bootstrap interval as recorded by the notebook. The "
        "embedded default model (SmolLM2-135M) chooses near chance and by position, so its "
        "rows are expected to come out *not reproduced*: they show the mechanism, the protocol "
        "and the costs; the papers' effect sizes need a capable endpoint and "
        '`PROFILE="paper"` (see the README).',
        "",
        "## How to read the verdicts",
        "",
    ]
    lines += [f"- *{rule}*: {text}" for rule, text in VERDICT_RULES.items()]
    lines += ["", "## Notebooks", ""]
    rows = []
    for stem, run in runs.items():
        profile = run.profile if run.status in ("ran", "failed") else "—"
        if profile not in ("—", "?", profile_label):
            profile = f"{profile} (≠ {profile_label})"
        status = run.status if run.status == "ran" else f"{run.status}: {run.detail}"
        rows.append(
            [
                f"`{stem}`",
                status,
                profile,
                run.model if run.status in ("ran", "failed") else "—",
                str(run.records.get("dataset", "—")),
                run.executed or "—",
            ]
        )
    lines += _table(["notebook", "status", "profile", "model", "dataset", "executed"], rows)
    lines += ["", "## Summary", ""]
    rows = [
        [
            f"{o.claim.description} (`{o.claim.id}`)",
            _paper_cell(o),
            _ours_cell(o),
            f"**{o.verdict}**: {o.reason}",
        ]
        for o in outcomes
    ]
    lines += _table(
        [
            "claim",
            "paper (source, confidence)",
            "ours [95% interval] (model, profile)",
            "verdict",
        ],
        rows,
    )
    lines += [""] + cross_paper_section(runs[CROSS_PAPER])
    lines += ["## Per notebook", ""]
    for stem, run in runs.items():
        info = NOTEBOOKS.get(stem)
        title = run.title or (info.title if info else stem)
        lines += [f"### {title}", ""]
        if info:
            lines += [f"Paper: {info.paper}. Notebook: `notebooks/{stem}.ipynb`.", ""]
        if run.status != "ran":
            lines += [f"**{run.status}**: {run.detail}.", ""]
        mine = [o for o in outcomes if o.claim.notebook == stem]
        if mine:
            lines += ["Claims:", ""]
            for o in mine:
                note = f" {o.claim.note}" if o.claim.note else ""
                lines.append(f"- `{o.claim.id}` — {o.claim.description}: **{o.verdict}** "
                             f"({o.reason}).{note}")  # fmt: skip
            lines.append("")
        if info and info.deviations:
            lines += ["Deviations and caveats:", ""]
            lines += [f"- {d}" for d in info.deviations]
            lines.append("")
    lines += ["## Sources of the paper values", ""]
    from recagents import paper_numbers

    from_tables = sorted({o.paper.table for o in outcomes if o.paper is not None})
    lines += [f"- `{t}`: {paper_numbers.caption(t)}" for t in from_tables]
    lines += [
        "",
        "Tags: "
        + "; ".join(f"{tag} = {meaning}" for tag, meaning in paper_numbers.TAGS.items())
        + ".",
        "",
    ]
    return "\n".join(lines)


def _infer_profile(build_dir: Path) -> str:
    profiles = {
        str(run.records["profile"])
        for run in (read_run(Path(build_dir) / f"{stem}.ipynb") for stem in NOTEBOOKS)
        if "profile" in run.records
    }
    return profiles.pop() if len(profiles) == 1 else ("mixed" if profiles else "unknown")


def write_reproduction(build_dir: Path, out_path: Path, profile_label: str | None = None) -> Path:
    """Write REPRODUCTION.md for ``build_dir``.

    Args:
        build_dir: Folder of the executed notebooks.
        out_path: The Markdown file to write.
        profile_label: The folder's profile; by default the profile the notebooks recorded
            (``"mixed"`` when they disagree, ``"unknown"`` when none did).

    Returns:
        ``out_path``.
    """
    build_dir, out_path = Path(build_dir), Path(out_path)
    label = profile_label or _infer_profile(build_dir)
    text = build_reproduction(build_dir, label)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(text, encoding="utf-8")
    return out_path


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------

FIGURE_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".gif")

_INDEX_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; }
h1 { margin-bottom: .2em; } .muted { color: #666; }
ul.notebooks li { margin: .3em 0; } .notrun { color: #a33; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; }
.figures figure { margin: 0; width: 260px; }
.figures img { width: 260px; border: 1px solid #ddd; }
.figures figcaption { font-size: .85em; word-break: break-all; }
"""


def render_html(notebooks: Sequence[Path], figures_dir: Path | None, out_dir: Path) -> Path:
    """Render executed notebooks to HTML and write an index page with every figure.

    Each notebook that exists becomes ``out_dir/NAME.html`` (nbconvert's ``HTMLExporter``,
    outputs and embedded images included); each figure in ``figures_dir`` is copied to
    ``out_dir/figures/``; ``out_dir/index.html`` links every notebook (titled by its first
    heading; missing ones listed as "not run") and shows every figure as a linked thumbnail,
    grouped by the notebook number its name starts with.

    Args:
        notebooks: The executed notebooks expected (e.g. ``build/00_...ipynb`` ...).
        figures_dir: Folder of the figures; ``None`` or a missing folder gives an index that
            says so.
        out_dir: Output folder (created).

    Returns:
        The path of ``index.html``.
    """
    import nbformat
    from nbconvert import HTMLExporter

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter()
    entries: list[tuple[str, str, str]] = []  # (stem, title, html link or "")
    problems: dict[str, str] = {}
    for path in (Path(p) for p in notebooks):
        if not path.is_file():
            entries.append((path.stem, "", ""))
            continue
        try:
            nb = nbformat.read(path, as_version=4)
            title = _first_heading(nb.cells) or path.stem
            body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
        except Exception as error:  # one broken notebook must not hide the others
            entries.append((path.stem, "", ""))
            problems[path.stem] = f"could not be rendered: {type(error).__name__}: {error}"
            continue
        target = out_dir / f"{path.stem}.html"
        target.write_text(body, encoding="utf-8")
        entries.append((path.stem, title, target.name))

    figures: list[str] = []
    figures_note = ""
    if figures_dir is not None and Path(figures_dir).is_dir():
        copied = out_dir / "figures"
        copied.mkdir(exist_ok=True)
        for figure in sorted(Path(figures_dir).iterdir()):
            if figure.is_file() and figure.suffix.lower() in FIGURE_SUFFIXES:
                shutil.copy2(figure, copied / figure.name)
                figures.append(figure.name)
    else:
        figures_note = f"No figures folder at {figures_dir}." if figures_dir else "No figures."

    index = out_dir / "index.html"
    index.write_text(_index_html(entries, problems, figures, figures_note), encoding="utf-8")
    return index


def _figure_html(name: str) -> str:
    href = "figures/" + html.escape(name, quote=True)
    return (
        f'<figure><a href="{href}"><img src="{href}" alt="{html.escape(name)}" '
        f'loading="lazy"></a><figcaption>{html.escape(name)}</figcaption></figure>'
    )


def _index_html(
    entries: Sequence[tuple[str, str, str]],
    problems: Mapping[str, str],
    figures: Sequence[str],
    figures_note: str,
) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>recagents: executed notebooks and figures</title>",
        f"<style>{_INDEX_STYLE}</style></head><body>",
        "<h1>recagents: executed notebooks and figures</h1>",
        f'<p class="muted">Written by <code>make reproduce</code> '
        f"(<code>python -m recagents.report html</code>) on "
        f"{html.escape(datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC'))}.</p>",
        "<h2>Notebooks</h2>",
        '<ul class="notebooks">',
    ]
    for stem, title, link in entries:
        if link:
            parts.append(
                f'<li><a href="{html.escape(link, quote=True)}">{html.escape(title)}</a> '
                f'<span class="muted">({html.escape(stem)}.ipynb)</span></li>'
            )
        else:
            why = problems.get(stem, "not run")
            parts.append(f'<li class="notrun">{html.escape(stem)}.ipynb: {html.escape(why)}</li>')
    parts.append("</ul>")
    parts.append("<h2>Figures</h2>")
    parts.append(
        '<p class="muted">The figures as each notebook last wrote them; a notebook not run in '
        "this build keeps the figures of its previous run.</p>"
    )
    if figures_note:
        parts.append(f'<p class="muted">{html.escape(figures_note)}</p>')
    groups: dict[str, list[str]] = {}
    for name in figures:
        prefix = name[:2] if name[:2].isdigit() else ""
        groups.setdefault(prefix, []).append(name)
    titles = {
        stem[:2]: title or (NOTEBOOKS[stem].title if stem in NOTEBOOKS else stem)
        for stem, title, _ in entries
    }
    for prefix in sorted(groups, key=lambda p: (p == "", p)):
        heading = titles.get(prefix, f"Notebook {prefix}") if prefix else "Other figures"
        parts.append(f"<h3>{html.escape(heading)}</h3>")
        parts.append('<div class="figures">')
        parts += [_figure_html(name) for name in groups[prefix]]
        parts.append("</div>")
    if not figures and not figures_note:
        parts.append('<p class="muted">The figures folder holds no figures.</p>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _expected_notebooks(build_dir: Path, source_dir: Path | None) -> list[Path]:
    """The executed notebooks expected in ``build_dir``: one per source notebook."""
    if source_dir is not None and Path(source_dir).is_dir():
        stems = [p.stem for p in sorted(Path(source_dir).glob("[0-9][0-9]_*.ipynb"))]
    else:
        stems = []
    stems += [p.stem for p in sorted(build_dir.glob("[0-9][0-9]_*.ipynb"))]
    return [build_dir / f"{stem}.ipynb" for stem in dict.fromkeys(stems)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m recagents.report",
        description="Write REPRODUCTION.md or the HTML pages of the executed notebooks.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rep = commands.add_parser(
        "reproduction", help="write REPRODUCTION.md from the executed notebooks' records"
    )
    rep.add_argument("--build", type=Path, default=Path("build"), help="executed notebooks")
    rep.add_argument("--out", type=Path, default=Path("REPRODUCTION.md"), help="Markdown file")
    rep.add_argument(
        "--profile",
        default=None,
        help="the profile the build folder was made with (default: what the notebooks recorded)",
    )
    web = commands.add_parser("html", help="render the executed notebooks and an index page")
    web.add_argument("--build", type=Path, default=Path("build"), help="executed notebooks")
    web.add_argument("--figures", type=Path, default=Path("figures"), help="figures folder")
    web.add_argument("--out", type=Path, default=Path("build/html"), help="output folder")
    web.add_argument(
        "--notebooks",
        type=Path,
        default=Path("notebooks"),
        help="source notebooks, to list the ones not run yet (default: notebooks)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for a usage error)."""
    parser = _parser()
    args = parser.parse_args(argv)
    build = Path(args.build)
    if not build.is_dir():
        parser.error(
            f"build folder not found: {build} (run `make reproduce` or `make smoke` first, "
            "or pass --build)"
        )
    if args.command == "reproduction":
        out = write_reproduction(build, args.out, args.profile)
        _, outcomes = evaluate_claims(build)
        counts = ", ".join(f"{sum(o.verdict == v for o in outcomes)} {v}" for v in VERDICTS)
        print(f"wrote {out}: {len(outcomes)} claims ({counts})")
        return 0
    notebooks = _expected_notebooks(build, args.notebooks)
    if not notebooks:
        parser.error(f"no notebooks to render: none in {args.notebooks} or {build}")
    if not args.figures.is_dir():
        print(f"note: no figures folder at {args.figures}", file=sys.stderr)
    index = render_html(notebooks, args.figures, args.out)
    rendered = sum(p.is_file() for p in notebooks)
    print(f"wrote {index}: {rendered} of {len(notebooks)} notebooks rendered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
