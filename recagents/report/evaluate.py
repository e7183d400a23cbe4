"""Reading the build folder and judging each claim on it.

:func:`read_run` reads one executed notebook (its records, title, papermill's end time and
error state) into a :class:`RunInfo`; :func:`evaluate_claim` judges one claim on it with its
rule into an :class:`Outcome`, and :func:`evaluate_claims` does so for every notebook and
claim of a build folder. A missing notebook or value is "not run", never filled in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recagents.report.claims import (
    DIRECTION_ONLY,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_REPRODUCED,
    NOT_RUN,
    OURS_ONLY,
    REPRODUCED,
    Claim,
)
from recagents.report.loading import load_claims, load_notebooks
from recagents.report.values import (
    Estimate,
    MissingRecord,
    PaperValue,
    paper_value,
    read_estimate,
    read_ref,
)
from recagents.report.verdicts import (
    Verdict,
    judge_above,
    judge_at_least,
    judge_contains,
    judge_greater,
    judge_matches,
    judge_no_amplification,
    judge_sample_size,
)


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


def first_heading(cells: Sequence[Any]) -> str:
    """The text of the first Markdown heading of a notebook's cells (``""`` when none)."""
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
    info = RunInfo(stem, path, "ran", "", first_heading(nb.cells), records, executed)
    if papermill.get("exception"):
        info.status = "failed"
        info.detail = f"{path} stopped with an error (papermill recorded an exception)"
    elif not records:
        info.status = "failed"
        info.detail = f"{path} holds no records (its last cell did not run)"
    return info


@dataclass(frozen=True)
class Outcome:
    """One claim judged on one build folder.

    ``n`` is the sample size (``None``: the records do not say), ``detectable`` the
    half-width of the interval the verdict rests on, ``effect`` the size of the claimed effect.
    """

    claim: Claim
    paper: PaperValue | None
    ours: str
    verdict: str
    reason: str
    model: str = ""
    profile: str = ""
    n: int | None = None
    detectable: float | None = None
    effect: float | None = None


def _ours_text(label: str, estimate: Estimate) -> str:
    return f"{label} {estimate.text()}" if label else estimate.text()


def _sample_size(claim: Claim, records: Mapping[str, Any], *estimates: Estimate) -> int | None:
    """The smallest ``n`` our values carry, else the claim's ``n_record``, else ``None``."""
    known = [e.n for e in estimates if e.n is not None]
    if known:
        return min(known)
    value = records.get(claim.n_record) if claim.n_record else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _judge_no_amplification(
    claim: Claim, records: Mapping[str, Any]
) -> tuple[str, Verdict, int | None]:
    key, (value, _) = read_ref(claim.ours, records)
    if not isinstance(value, Mapping) or not {"diff", "amplifies"} <= set(value):
        raise ValueError(f"record {key!r}: expected {{'diff', 'amplifies'}}, got {value!r}")
    diff, amplifies = float(value["diff"]), bool(value["amplifies"])
    interval = None
    if {"low", "high"} <= set(value):
        interval = (float(value["low"]), float(value["high"]))
    ours = f"difference {diff:.4f}" + (
        f" [{interval[0]:.4f}, {interval[1]:.4f}]" if interval else " (no interval)"
    )
    ours += f", amplifies: {amplifies}"
    activity = []
    for ref in claim.activity:
        try:
            activity.append((ref.label or ref.key, read_estimate(ref, records)[1]))
        except MissingRecord:
            ours += f"; {ref.label or ref.key} not recorded"
    if activity:
        ours += "; " + ", ".join(f"{label} {e.mean:.4f}" for label, e in activity)
    idle = len(activity) == len(claim.activity) > 0 and all(e.is_zero for _, e in activity)
    verdict = judge_no_amplification(diff, amplifies, interval, claim.effect, idle)
    n = value.get("n") if isinstance(value.get("n"), int) else None
    return ours, verdict, n if n is not None else _sample_size(claim, records)


def _judge_greater(
    claim: Claim, paper: PaperValue | None, records: Mapping[str, Any], a: Estimate
) -> tuple[str, Verdict, int | None]:
    if claim.versus is None:
        raise ValueError(f"claim {claim.id}: rule 'greater' needs 'versus'")
    _, b = read_estimate(claim.versus, records)
    a_label, b_label = claim.ours.label or "A", claim.versus.label or "B"
    effect = claim.effect
    if effect is None and paper is not None and paper.difference is not None:
        effect = abs(paper.difference)
    ours = f"{_ours_text(a_label, a)} vs {_ours_text(b_label, b)}"
    verdict = judge_greater(a, b, a_label, b_label, effect)
    return ours, verdict, _sample_size(claim, records, a, b)


def _judge_contains(
    claim: Claim, paper: PaperValue | None, records: Mapping[str, Any], a: Estimate
) -> tuple[str, Verdict, int | None]:
    ours = _ours_text(claim.ours.label, a)
    chance = None
    if claim.chance is not None:
        try:
            _, baseline = read_estimate(claim.chance, records)
        except MissingRecord:
            ours += "; no random baseline recorded"
        else:
            chance = baseline.mean
            ours += f"; {claim.chance.label or 'random'} {baseline.mean:.4f}"
    verdict = judge_contains(paper.number if paper else None, a, chance, claim.effect)
    return ours, verdict, _sample_size(claim, records, a)


def _judge(
    claim: Claim, paper: PaperValue | None, records: Mapping[str, Any]
) -> tuple[str, Verdict, int | None]:
    """Our shown value, the verdict of ``claim.rule`` and ``n``; raises ``MissingRecord``."""
    if claim.rule == "no_amplification":
        return _judge_no_amplification(claim, records)
    _, a = read_estimate(claim.ours, records)
    if claim.rule == "greater":
        return _judge_greater(claim, paper, records, a)
    if claim.rule == "contains":
        return _judge_contains(claim, paper, records, a)
    ours, n = _ours_text(claim.ours.label, a), _sample_size(claim, records, a)
    if claim.rule == "above":
        threshold = 0.0 if claim.threshold is None else claim.threshold
        return ours, judge_above(a, threshold, claim.ours.label or "ours", claim.effect), n
    if claim.rule == "at_least":
        return ours, judge_at_least(paper.number if paper else None, a), n
    if claim.rule == "matches":
        text = paper.text if paper else ""
        return ours, judge_matches(text, paper.number if paper else None, a), n
    raise ValueError(f"claim {claim.id}: unknown rule {claim.rule!r}")


def _context(claim: Claim, records: Mapping[str, Any]) -> str:
    shown = [f"{name}={records[name]}" for name in claim.context if name in records]
    return f"; {', '.join(shown)}" if shown else ""


_DEMONSTRATION = {
    REPRODUCED: "shown",
    DIRECTION_ONLY: "shown in direction only",
    INCONCLUSIVE: "not decidable at this sample size",
    NOT_REPRODUCED: "not shown",
}


def embedded_model() -> str:
    """The alias of the embedded default model (its module imports only the standard library)."""
    from recagents.llm.local import MODEL_ALIAS

    return MODEL_ALIAS


def _other_data(claim: Claim, ran_on: str) -> str:
    """Why a run on ``ran_on`` cannot be held against the paper, and what would make it so."""
    where = ", ".join(claim.datasets)
    if claim.unreleased:
        return (
            f"the paper's value is on {where}, which no release holds ({claim.unreleased}); "
            f"this run is on {ran_on}"
        )
    return (
        f"the paper's value is on {where}; this run is on {ran_on}, where the paper reports "
        f'none (run the notebook with DATASET="{claim.datasets[0]}" for a comparable row)'
    )


def evaluate_claim(claim: Claim, run: RunInfo) -> Outcome:
    """Judge one claim on one executed notebook (never raises for a missing value)."""
    paper = paper_value(claim.paper) if claim.paper is not None else None
    if run.status in ("not run", "unreadable"):
        return Outcome(claim, paper, "—", NOT_RUN, run.detail)
    try:
        ours, judged, n = _judge(claim, paper, run.records)
    except MissingRecord as error:
        ran_on = str(run.records.get("dataset", ""))
        if claim.unreleased and ran_on and ran_on not in claim.datasets:
            reason = _other_data(claim, ran_on)
            return Outcome(claim, paper, "—", NOT_COMPARABLE, reason, run.model, run.profile)
        reason = (
            f"{run.detail}; " if run.status == "failed" else ""
        ) + f"this run (profile {run.profile}) has no {error.args[0]}"
        return Outcome(claim, paper, "—", NOT_RUN, reason, run.model, run.profile)
    except ValueError as error:
        return Outcome(claim, paper, "—", NOT_COMPARABLE, str(error), run.model, run.profile)
    judged = judge_sample_size(judged, n, claim.min_n)
    verdict, reason = judged.verdict, judged.reason
    model = claim.model or (run.model if claim.llm else "no LLM")
    ours += _context(claim, run.records)
    ran_on = str(run.records.get("dataset", ""))
    if claim.paper is not None and claim.datasets and ran_on and ran_on not in claim.datasets:
        verdict, reason = NOT_COMPARABLE, _other_data(claim, ran_on)
    elif claim.paper is None:
        shown = _DEMONSTRATION.get(verdict, verdict)
        reason = f"{claim.no_paper or 'no paper number'}: {shown} ({reason})"
        verdict = OURS_ONLY
    elif (
        verdict == NOT_REPRODUCED
        and claim.llm
        and not claim.model
        and run.model == embedded_model()
    ):
        reason += f"; the embedded {run.model} answers near chance (see the caveats)"
    power = (n, judged.detectable, judged.effect)
    return Outcome(claim, paper, ours, verdict, reason, model, run.profile, *power)


def evaluate_claims(
    build_dir: Path, claims: Sequence[Claim] | None = None
) -> tuple[dict[str, RunInfo], list[Outcome]]:
    """Read every covered notebook in ``build_dir`` and judge every claim.

    Args:
        build_dir: Folder of the executed notebooks (``build`` or ``build/smoke``).
        claims: The claims to judge (default: :data:`~recagents.report.CLAIMS`).

    Returns:
        The run of each notebook by stem (:data:`~recagents.report.NOTEBOOKS` order, then
        any other notebook a claim names) and one outcome per claim.
    """
    claims = load_claims() if claims is None else claims
    notebooks = load_notebooks()
    stems = list(notebooks) + [c.notebook for c in claims if c.notebook not in notebooks]
    runs = {stem: read_run(Path(build_dir) / f"{stem}.ipynb") for stem in dict.fromkeys(stems)}
    return runs, [evaluate_claim(claim, runs[claim.notebook]) for claim in claims]
