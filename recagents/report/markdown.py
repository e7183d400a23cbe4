"""REPRODUCTION.md: the claims judged on a build folder, and the cross-paper leaderboard.

:func:`build_reproduction` writes the Markdown (header, verdict rules, the notebooks, the
summary table, the one-protocol section of :func:`cross_paper_section`, the claims and
deviations per notebook, the sources of the paper values); :func:`write_reproduction` saves
it. Every value is read when the file is generated; none is typed in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from recagents.report.claims import NOT_RUN, VERDICTS, Claim
from recagents.report.evaluate import Outcome, RunInfo, evaluate_claims, read_run
from recagents.report.loading import load_notebooks, load_verdict_rules


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


def _power_cell(outcome: Outcome) -> str:
    """``n=6 · ±0.1875 (effect 0.05)``: the sample, what it resolves, and what the claim needs."""
    if outcome.verdict == NOT_RUN and outcome.ours == "—":
        return "—"
    n = f"n={outcome.n}" if outcome.n is not None else "n unknown"
    detectable = f"±{outcome.detectable:.4f}" if outcome.detectable is not None else "no interval"
    effect = f" (effect {outcome.effect:.4g})" if outcome.effect is not None else ""
    min_n = f" (needs n≥{outcome.claim.min_n})" if outcome.claim.min_n else ""
    return f"{n}{min_n} · {detectable}{effect}"


def _header_lines(
    build_dir: Path,
    profile_label: str,
    runs: Mapping[str, RunInfo],
    outcomes: Sequence[Outcome],
    now: datetime | None,
) -> list[str]:
    """The title, where the values come from, the models, what did not run, and the counts."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    counts = {v: sum(o.verdict == v for o in outcomes) for v in VERDICTS}
    models = sorted({r.model for r in runs.values() if r.status in ("ran", "failed")})
    not_run = [stem for stem, r in runs.items() if r.status != "ran"]
    return [
        "# Reproduction report",
        "",
        f"Generated by `make reproduce` (`python -m recagents.report reproduction`) on {stamp} "
        f"from the executed notebooks in `{build_dir}`, profile **{profile_label}**. Every "
        "value below is read when this file is generated: ours from the results each notebook "
        "records in its last cell (`recagents.notebook.record`), the papers' from "
        "`recagents/resources/paper_numbers.json` with their source and confidence tag. None "
        "is typed in by hand.",
        "",
        f"- Models: {', '.join(f'`{m}`' for m in models) if models else 'none (nothing ran)'} "
        "(per notebook below).",
        f"- Not run: {', '.join(f'`{s}`' for s in not_run) if not_run else 'none'}.",
        "- At a glance: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS) + ".",
        "",
        "Ours is a mean with its 95% bootstrap interval as recorded by the notebook. The "
        "embedded default model (SmolLM2-135M) chooses near chance and by position, so its "
        "rows are expected to come out *not reproduced* or, at the default profile's small "
        "samples, *inconclusive (underpowered)*: they show the mechanism, the protocol and the "
        'costs; the papers\' effect sizes need a capable endpoint and `PROFILE="paper"` (see '
        "the README).",
        "",
        "## How to read the verdicts",
        "",
    ] + [f"- *{rule}*: {text}" for rule, text in load_verdict_rules().items()]


def _notebook_lines(runs: Mapping[str, RunInfo], profile_label: str) -> list[str]:
    """The table of notebooks: status, profile (flagged when it differs), model, dataset."""
    rows = []
    for stem, run in runs.items():
        profile = run.profile if run.status in ("ran", "failed") else "—"
        if profile not in ("—", "?", profile_label):
            profile = f"{profile} (≠ {profile_label})"
        status = run.status if run.status == "ran" else f"{run.status}: {run.detail}"
        model = run.model if run.status in ("ran", "failed") else "—"
        dataset = str(run.records.get("dataset", "—"))
        rows.append([f"`{stem}`", status, profile, model, dataset, run.executed or "—"])
    header = ["notebook", "status", "profile", "model", "dataset", "executed"]
    return ["", "## Notebooks", "", *_table(header, rows)]


def _summary_lines(outcomes: Sequence[Outcome]) -> list[str]:
    """The summary table: one row per claim, with n and the detectable effect."""
    rows = [
        [
            f"{o.claim.description} (`{o.claim.id}`)",
            _paper_cell(o),
            _ours_cell(o),
            _power_cell(o),
            f"**{o.verdict}**: {o.reason}",
        ]
        for o in outcomes
    ]
    header = [
        "claim",
        "paper (source, confidence)",
        "ours [95% interval] (model, profile)",
        "n · detectable (effect)",
        "verdict",
    ]
    return ["", "## Summary", "", *_table(header, rows), ""]


def _claim_line(outcome: Outcome) -> str:
    claim = outcome.claim
    note = f" {claim.note}" if claim.note else ""
    basis = f" Effect: {claim.effect_basis}." if claim.effect_basis else ""
    return (
        f"- `{claim.id}` — {claim.description}: **{outcome.verdict}** ({outcome.reason}; "
        f"{_power_cell(outcome)}).{note}{basis}"
    )


def _per_notebook_lines(runs: Mapping[str, RunInfo], outcomes: Sequence[Outcome]) -> list[str]:
    """Per notebook: its title and paper, its status, its claims, its deviations."""
    lines = ["## Per notebook", ""]
    notebooks = load_notebooks()
    for stem, run in runs.items():
        info = notebooks.get(stem)
        lines += [f"### {run.title or (info.title if info else stem)}", ""]
        if info:
            lines += [f"Paper: {info.paper}. Notebook: `notebooks/{stem}.ipynb`.", ""]
        if run.status != "ran":
            lines += [f"**{run.status}**: {run.detail}.", ""]
        mine = [o for o in outcomes if o.claim.notebook == stem]
        if mine:
            lines += ["Claims:", "", *[_claim_line(o) for o in mine], ""]
        if info and info.deviations:
            lines += ["Deviations and caveats:", "", *[f"- {d}" for d in info.deviations], ""]
    return lines


def _sources_lines(outcomes: Sequence[Outcome]) -> list[str]:
    """Where each paper table comes from, and what the confidence tags mean."""
    from recagents import paper_numbers

    from_tables = sorted({o.paper.table for o in outcomes if o.paper is not None})
    tags = "; ".join(f"{tag} = {meaning}" for tag, meaning in paper_numbers.TAGS.items())
    return [
        "## Sources of the paper values",
        "",
        *[f"- `{t}`: {paper_numbers.caption(t)}" for t in from_tables],
        "",
        f"Tags: {tags}.",
        "",
    ]


def build_reproduction(
    build_dir: Path,
    profile_label: str,
    *,
    claims: Sequence[Claim] | None = None,
    now: datetime | None = None,
) -> str:
    """The text of REPRODUCTION.md for the executed notebooks in ``build_dir``.

    Args:
        build_dir: Folder of the executed notebooks.
        profile_label: The profile the folder was built with (``"default"``, ``"smoke"``);
            a notebook that recorded another profile is flagged.
        claims: The claims to report (default: :data:`~recagents.report.CLAIMS`).
        now: The generation time to print (default: now, UTC).

    Returns:
        Markdown: header, verdict rules, the notebooks, the summary table (with n and the
        detectable effect of every row), the cross-paper section, the claims and deviations
        per notebook, and the sources of the paper values.
    """
    build_dir = Path(build_dir)
    runs, outcomes = evaluate_claims(build_dir, claims)
    lines = _header_lines(build_dir, profile_label, runs, outcomes, now)
    lines += _notebook_lines(runs, profile_label)
    lines += _summary_lines(outcomes)
    lines += cross_paper_section(runs[CROSS_PAPER])
    lines += _per_notebook_lines(runs, outcomes)
    lines += _sources_lines(outcomes)
    return "\n".join(lines)


def _infer_profile(build_dir: Path) -> str:
    profiles = {
        str(run.records["profile"])
        for run in (read_run(Path(build_dir) / f"{stem}.ipynb") for stem in load_notebooks())
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
    try:
        unchanged = _undated(out_path.read_text(encoding="utf-8")) == _undated(text)
    except (OSError, UnicodeDecodeError):  # none yet, or unreadable: write it
        unchanged = False
    if not unchanged:  # a rerun that changes nothing but the date leaves the file as it is
        out_path.write_text(text, encoding="utf-8")
    return out_path


_DATE_STAMP = re.compile(r"\bon \d{4}-\d\d-\d\d \d\d:\d\d UTC\b")
_RUN_TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?")


def _undated(text: str) -> str:
    """``text`` without the generation date of its header and the notebooks' run times."""
    return _RUN_TIME.sub("<time>", _DATE_STAMP.sub("on <date>", text, count=1))
