"""Tests for recagents.report: claims resolve, verdict rules, REPRODUCTION.md and the HTML pages.

The executed notebooks here are tiny synthetic ``.ipynb`` files whose outputs carry records in
the exact form :func:`recagents.notebook.record` writes them (a ``display_data`` output with
``RECORD_MIME`` and a ``text/plain`` line); nothing is executed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nbformat
import pytest

from recagents.notebook import RECORD_MIME, read_records
from recagents.report import loading
from recagents.report.claims import (
    DIRECTION_ONLY,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_REPRODUCED,
    NOT_RUN,
    OURS_ONLY,
    PERSPECTIVE,
    REPRODUCED,
)
from recagents.report.cli import main
from recagents.report.evaluate import Outcome, embedded_model, evaluate_claims, read_run
from recagents.report.loading import load_claims, load_verdict_rules
from recagents.report.markdown import CROSS_PAPER, build_reproduction, cross_paper_section
from recagents.report.pages import render_html
from recagents.report.values import Estimate, paper_value
from recagents.report.verdicts import (
    judge_above,
    judge_at_least,
    judge_contains,
    judge_greater,
    judge_matches,
    judge_no_amplification,
)

CLAIMS = loading.load_claims()
NOTEBOOKS = loading.load_notebooks()

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2030, 1, 2, 3, 4, tzinfo=UTC)
RULES = {"contains", "at_least", "greater", "above", "no_amplification", "matches"}

# --------------------------------------------------------------------------------------------
# Synthetic executed notebooks
# --------------------------------------------------------------------------------------------


def _record_output(name: str, value: Any) -> nbformat.NotebookNode:
    """The output recagents.notebook.record() displays inside a kernel."""
    text = f"{name} = {json.dumps(value, sort_keys=True)}"
    return nbformat.v4.new_output(
        "display_data", data={RECORD_MIME: {"name": name, "value": value}, "text/plain": text}
    )


def write_executed(
    path: Path,
    records: dict[str, Any],
    title: str = "99 · A tiny notebook",
    exception: bool = False,
) -> Path:
    """A small executed notebook: a heading, one code cell, and a last cell of records."""
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("x = 1\nx", execution_count=1)
    code.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "1"})]
    last = nbformat.v4.new_code_cell("record(...)", execution_count=2)
    last.outputs = [_record_output(name, value) for name, value in records.items()]
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\nIntro."), code, last]
    nb.metadata["papermill"] = {
        "end_time": "2030-01-01T00:00:00+00:00",
        "exception": exception or None,
        "parameters": {"PROFILE": records.get("profile", "default")},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def _ira_records(
    hit: list[float], model: str = "my-model", n: int = 60, dataset: str = "ml-latest"
) -> dict[str, Any]:
    """A constructed InteRecAgent run on the paper's own data (its claims name ml-latest)."""
    return {
        "profile": "default",
        "dataset": dataset,
        "model": model,
        "n_sessions": n,
        "max_turns": 5,
        "Hit@5/InteRecAgent/id": hit,
        "Hit@5/InteRecAgent/fuzzy": hit,
        "Hit@5/LLM only/fuzzy": [0.2, 0.1, 0.3],
        "sessions/no reflection/id": {"hit": [0.7, 0.55, 0.8], "at": 3.0, "n": n},
        "Recall@5/InteRecAgent": [0.5, 0.4, 0.6],
        "Recall@5/Random": [0.001, 0.0, 0.002],
        "NDCG/InteRecAgent": [0.6, 0.5, 0.7],
        "NDCG/Random": [0.33, 0.3, 0.36],
        "NDCG/Pop": [0.35, 0.3, 0.4],
    }


def _outcomes_by_id(build: Path) -> dict[str, Outcome]:
    _, outcomes = evaluate_claims(build)
    return {o.claim.id: o for o in outcomes}


def test_synthetic_notebooks_carry_records_like_record_does(tmp_path):
    records = {"model": "m", "a/b": [0.1, 0.0, 0.2], "d": {"hit": [1, 0, 1], "n": 3}}
    path = write_executed(tmp_path / "nb.ipynb", records)
    assert read_records(path) == records


# --------------------------------------------------------------------------------------------
# Verdict rules on hand-made values
# --------------------------------------------------------------------------------------------


def test_contains_reproduced_when_the_paper_value_is_inside_bounds_included():
    assert judge_contains(0.5, Estimate(0.45, 0.3, 0.6)).verdict == REPRODUCED
    assert judge_contains(0.6, Estimate(0.45, 0.3, 0.6)).verdict == REPRODUCED


@pytest.mark.parametrize(("paper", "side"), [(0.85, "above"), (0.1, "below")])
def test_contains_not_reproduced_outside_the_interval(paper, side):
    verdict = judge_contains(paper, Estimate(0.45, 0.3, 0.6))
    assert verdict.verdict == NOT_REPRODUCED
    assert side in verdict.reason and "[0.3, 0.6]" in verdict.reason


def test_contains_near_chance_interval_is_inconclusive():
    verdict = judge_contains(0.54, Estimate(0.44, 0.29, 0.63), chance=0.454)
    assert verdict.verdict == INCONCLUSIVE
    assert "chance" in verdict.reason


def test_contains_without_a_number_or_an_interval_is_not_comparable():
    assert judge_contains(None, Estimate(0.5, 0.4, 0.6)).verdict == NOT_COMPARABLE
    assert judge_contains(0.5, Estimate(0.5)).verdict == NOT_COMPARABLE


def test_at_least_uses_the_upper_end_or_the_point_value():
    assert judge_at_least(0.95, Estimate(0.9, 0.8, 0.96)).verdict == REPRODUCED
    assert judge_at_least(0.95, Estimate(0.9, 0.8, 0.94)).verdict == NOT_REPRODUCED
    assert judge_at_least(0.95, Estimate(0.97)).verdict == REPRODUCED
    assert judge_at_least(0.95, Estimate(0.0)).verdict == NOT_REPRODUCED


def test_matches_judges_a_recomputed_total_by_the_printed_digits():
    """A deterministic recomputation must equal the released total as printed."""
    assert judge_matches("3.234", 3.234, Estimate(3.2340000001)).verdict == REPRODUCED
    assert judge_matches("3.234", 3.234, Estimate(3.2344)).verdict == REPRODUCED
    assert judge_matches("3.234", 3.234, Estimate(3.2346)).verdict == NOT_REPRODUCED
    long = "0.5028244830590806"
    assert judge_matches(long, float(long), Estimate(0.5028244830590806)).verdict == (REPRODUCED)
    assert judge_matches(long, float(long), Estimate(0.502824)).verdict == NOT_REPRODUCED
    assert judge_matches("n/a", None, Estimate(0.5)).verdict == NOT_COMPARABLE
    # A sampled estimate has an interval: it cannot match a total digit by digit.
    sampled = judge_matches("0.5", 0.5, Estimate(0.5, 0.4, 0.6))
    assert sampled.verdict == NOT_COMPARABLE


def test_greater_direction_rules():
    high, low = Estimate(0.8, 0.7, 0.9), Estimate(0.4, 0.3, 0.5)
    overlapping = Estimate(0.65, 0.5, 0.8)
    assert judge_greater(high, low).verdict == REPRODUCED
    assert judge_greater(overlapping, low).verdict == DIRECTION_ONLY
    assert judge_greater(low, high).verdict == NOT_REPRODUCED
    assert judge_greater(low, low).verdict == NOT_REPRODUCED
    assert judge_greater(Estimate(0.7), Estimate(0.6)).verdict == DIRECTION_ONLY
    assert "intervals overlap" in judge_greater(overlapping, low, "AFL", "single").reason


def test_above_and_no_amplification():
    assert judge_above(Estimate(0.5, 0.2, 0.8), 0.0).verdict == REPRODUCED
    assert judge_above(Estimate(0.5, -0.1, 0.8), 0.0).verdict == DIRECTION_ONLY
    assert judge_above(Estimate(0.0), 0.0).verdict == NOT_REPRODUCED
    assert judge_above(Estimate(0.5), 0.0).reason == "ours 0.5 > 0; no intervals recorded"
    narrow = judge_no_amplification(-0.02, False, (-0.5, 0.4), effect=1.0)
    assert narrow.verdict == REPRODUCED and narrow.detectable == pytest.approx(0.45)
    assert judge_no_amplification(-0.02, False).verdict == INCONCLUSIVE  # no interval
    assert judge_no_amplification(0.0, False).verdict == INCONCLUSIVE  # same choices
    assert judge_no_amplification(0.2, True).verdict == NOT_REPRODUCED


def test_estimate_from_recorded_values():
    assert Estimate.from_value([0.1, 0.0, 0.2]) == Estimate(0.1, 0.0, 0.2)
    assert Estimate.from_value(3) == Estimate(3.0)
    assert "[0.0000, 0.2000]" in Estimate(0.1, 0.0, 0.2).text()
    for bad in (True, "x", [1, 2], {"a": 1}):
        with pytest.raises(ValueError):
            Estimate.from_value(bad)


# --------------------------------------------------------------------------------------------
# The claims are well formed against the real paper numbers and notebook sources
# --------------------------------------------------------------------------------------------


def test_claims_are_well_formed():
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids)), "claim ids must be unique"
    for claim in CLAIMS:
        assert claim.notebook in NOTEBOOKS, claim.id
        assert (ROOT / "notebooks" / f"{claim.notebook}.ipynb").is_file(), claim.id
        assert claim.rule in RULES, claim.id
        if claim.rule == "greater":
            assert claim.versus is not None, claim.id
        if claim.paper is None:
            assert claim.no_paper, f"{claim.id}: say why there is no paper number"
    papers = set(NOTEBOOKS) - {CROSS_PAPER}  # 06 has its own section, no paper claim
    assert {c.notebook for c in CLAIMS} == papers, "every paper notebook has a claim"


@pytest.mark.parametrize("claim", [c for c in CLAIMS if c.paper is not None], ids=lambda c: c.id)
def test_every_paper_reference_resolves(claim):
    from recagents import paper_numbers

    ref = claim.paper
    assert ref.table in paper_numbers.card_ids()
    frame = paper_numbers.table(ref.table)
    for row in (ref.row, ref.versus_row):
        if row:
            mask = (frame[list(row)] == list(row.values())).all(axis=1)
            assert mask.sum() == 1, f"{claim.id}: {row} matches {mask.sum()} rows"
    for column in (ref.column, ref.versus_column):
        if column:
            assert column in frame.columns, f"{claim.id}: no column {column!r}"
    value = paper_value(ref)
    assert value.text and value.tag and value.source
    if claim.rule in ("contains", "at_least"):
        assert value.number is not None, f"{claim.id}: the paper cell must hold one number"


def test_percent_tables_are_scaled():
    claim = next(c for c in CLAIMS if c.id == "ira-one-turn-recall")
    assert paper_value(claim.paper).number == pytest.approx(0.5202)


def _sources(stem: str) -> tuple[str, str]:
    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    record_cells = [c.source for c in nb.cells if c.cell_type == "code" and "record(" in c.source]
    assert record_cells, f"{stem} has no record cell"
    return record_cells[-1], "\n".join(c.source for c in nb.cells)


PACKAGE_SOURCE = "\n".join(p.read_text() for p in sorted((ROOT / "recagents").rglob("*.py")))


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_record_key_appears_in_the_notebook_source(claim):
    """The record cell writes the key's first segment (as an f-string prefix, or a literal in
    the loop that builds the key); the rest comes from the notebook or the package code that
    names methods and metrics (dynamic keys are f-strings)."""
    record_cell, notebook = _sources(claim.notebook)
    refs = [claim.ours, claim.versus, claim.chance, *claim.activity]
    for ref in (r for r in refs if r is not None):
        head, *rest = ref.key.split("/")
        written = f'f"{head}/' in record_cell or f'"{head}"' in record_cell
        # record_run(run) writes the metric names the paper's package gives its metrics.
        written = written or ("record_run(" in record_cell and f'"{head}' in PACKAGE_SOURCE)
        assert written, f"{claim.id}: {head!r} is not written by the record cell"
        for segment in rest:
            quoted = f'"{segment}"' in PACKAGE_SOURCE or f"'{segment}'" in PACKAGE_SOURCE
            assert segment in notebook or quoted, f"{claim.id}: {segment!r} of {ref.key!r}"
        for name in re.findall(r"\{(\w+)\}", ref.key):
            assert f'record("{name}"' in record_cell, f"{claim.id}: placeholder {name}"
        if ref.field:
            assert f'"{ref.field}"' in record_cell, f"{claim.id}: field {ref.field!r}"
    # f-strings of the record cell that start with a literal: "replay/{name}/n_agents"
    templates = [
        re.compile(re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(t)))
        for t in re.findall(r'record\(\s*f"([^"{][^"]*)"', record_cell)
    ]
    for name in (*claim.context, *([claim.n_record] if claim.n_record else [])):
        if "record_run(" in record_cell and name.endswith("/n"):
            continue  # record_run writes "<metric>/n" beside every headline metric
        by_template = any(t.fullmatch(name) for t in templates)
        assert by_template or f'record("{name}"' in record_cell, f"{claim.id}: context {name}"


# --------------------------------------------------------------------------------------------
# Evaluating a build folder
# --------------------------------------------------------------------------------------------


def test_missing_notebooks_are_reported_as_not_run(tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    text = build_reproduction(build, "default", now=NOW)
    _, outcomes = evaluate_claims(build)
    assert {o.verdict for o in outcomes} == {NOT_RUN}
    for stem in NOTEBOOKS:
        assert f"{build / stem}.ipynb does not exist" in text
    assert "2030-01-02 03:04 UTC" in text and "**default**" in text


def test_markdown_names_the_source_the_model_and_the_verdict(tmp_path):
    build = tmp_path / "build"
    write_executed(build / "04_interecagent.ipynb", _ira_records([0.84, 0.78, 0.9]), "04 · IRA")
    text = build_reproduction(build, "default", now=NOW)
    outcomes = _outcomes_by_id(build)

    assert outcomes["ira-hit-fuzzy"].verdict == REPRODUCED  # 0.85 in [0.78, 0.9]
    assert outcomes["ira-vs-llm-only"].verdict == REPRODUCED  # [0.78, 0.9] > [0.1, 0.3]
    assert outcomes["ira-one-turn-recall"].verdict == REPRODUCED  # 0.5202 in [0.4, 0.6]
    assert outcomes["ira-ablation-reflection"].verdict == DIRECTION_ONLY  # overlap
    assert outcomes["ira-one-turn-ndcg-pop"].model == "no LLM"
    assert outcomes["agentcf-br-ndcg10"].verdict == NOT_RUN

    assert "`my-model`" in text and "(my-model, default)" in text
    assert "InteRecAgent (arXiv 2308.16505)" in text  # the table's source line
    assert "`IRA-T-multiturn`" in text and "[paper-copy]" in text
    assert "0.8400 [0.7800, 0.9000]" in text
    assert "n=60 (needs n≥19) · ±0.0600 (effect 0.085)" in text  # n · detectable (effect)
    assert "### 04 · IRA" in text  # the title comes from the notebook's first heading
    assert "Hits are judged by item id" in text  # the notebook's deviations
    summary = text.split("## Summary", 1)[1].split("## Across the papers", 1)[0]
    assert summary.count("\n| ") == len(CLAIMS) + 1  # header + one row per claim


def test_a_run_on_other_data_than_the_papers_is_not_comparable(tmp_path):
    build = tmp_path / "build"
    write_executed(
        build / "04_interecagent.ipynb", _ira_records([0.6, 0.5, 0.7], dataset="ml-100k")
    )
    outcome = _outcomes_by_id(build)["ira-hit-fuzzy"]
    assert outcome.verdict == NOT_COMPARABLE
    assert "on ml-10m, ml-latest, which no release holds (" in outcome.reason
    assert outcome.reason.endswith("; this run is on ml-100k")


def test_other_data_that_a_release_holds_names_the_dataset_to_run(tmp_path):
    build = tmp_path / "build"
    claim = next(c for c in load_claims() if c.id == "agentcf-br-ndcg10")
    assert claim.datasets == ("cds-dense",) and not claim.unreleased
    refs = [claim.ours, *([claim.chance] if claim.chance else [])]
    records = {"model": "m", "dataset": "ml-100k", **{r.key: [0.5, 0.4, 0.6] for r in refs}}
    write_executed(build / f"{claim.notebook}.ipynb", records)
    outcome = _outcomes_by_id(build)[claim.id]
    assert outcome.verdict == NOT_COMPARABLE
    assert (
        "this run is on ml-100k, where the paper reports none (run the notebook with "
        'DATASET="cds-dense"' in outcome.reason
    )
    records["dataset"] = "cds-dense"
    write_executed(build / f"{claim.notebook}.ipynb", records)
    assert _outcomes_by_id(build)[claim.id].verdict != NOT_COMPARABLE


def test_only_the_papers_unreleased_data_is_named_missing():
    unreleased = {c.id: c.unreleased for c in load_claims() if c.unreleased}
    assert unreleased and all("release" in why for why in unreleased.values())
    for claim in load_claims():
        if claim.id in unreleased:
            assert set(claim.datasets) <= {"office-dense", "office-sparse", "ml-10m", "ml-latest"}


def test_embedded_model_near_chance_is_not_reproduced_with_the_reason(tmp_path):
    build = tmp_path / "build"
    records = _ira_records([0.0, 0.0, 0.0], model=embedded_model(), n=40)
    write_executed(build / "04_interecagent.ipynb", records)
    outcome = _outcomes_by_id(build)["ira-hit-fuzzy"]
    assert outcome.verdict == NOT_REPRODUCED
    assert "above our interval" in outcome.reason and "near chance" in outcome.reason


def test_a_value_the_profile_did_not_record_is_not_run(tmp_path):
    build = tmp_path / "build"
    write_executed(
        build / "01_agentcf.ipynb",
        {"profile": "smoke", "model": "m", "ndcg@10/dense/AgentCF B+R": [0.5, 0.4, 0.6]},
    )
    outcomes = _outcomes_by_id(build)
    sparse = outcomes["agentcf-bh-sparse-ndcg10"]
    assert sparse.verdict == NOT_RUN
    assert "has no record 'ndcg@10/sparse/AgentCF B+H'" in sparse.reason
    # without the Random record the chance guard is skipped, and said so
    assert outcomes["agentcf-br-ndcg10"].verdict == REPRODUCED
    assert "no random baseline recorded" in outcomes["agentcf-br-ndcg10"].ours
    text = build_reproduction(build, "default", now=NOW)
    assert "smoke (≠ default)" in text


def test_afl_claims_read_the_runs_metrics(tmp_path):
    build = tmp_path / "build"
    records = {
        "model": "m",
        "max_rounds": 4,
        "HR@1/AFL": [0.5, 0.4, 0.6],
        "HR@1/AFL/n": 100,
        "HR@1/Rec Agent": [0.2, 0.1, 0.3],
        "bias/popularity percentile": {
            "diff": -0.01,
            "amplifies": False,
            "low": -2.0,
            "high": 1.9,
            "n": 100,
        },
        "bias/mean position": {"diff": 0.0, "amplifies": False},
    }
    write_executed(build / "03_afl.ipynb", records)
    outcomes = _outcomes_by_id(build)
    assert outcomes["afl-loop-vs-single-hr1"].verdict == REPRODUCED
    assert outcomes["afl-hr1-movielens"].verdict == REPRODUCED  # 0.4316 in [0.4, 0.6]
    assert outcomes["afl-bias-popularity"].verdict == REPRODUCED  # ±1.95 < 5 points
    assert outcomes["afl-bias-popularity"].n == 100
    assert outcomes["afl-bias-position"].verdict == INCONCLUSIVE  # the same choices
    assert outcomes["afl-user-sim-f1"].verdict == NOT_RUN


def test_a_paper_without_numbers_is_ours_only_and_our_result_is_shown(tmp_path):
    build = tmp_path / "build"
    records = {
        "model": "m",
        "pref_share/stage 1/template": [0.4, 0.3, 0.5],
        "pref_share/stage 2/template": [0.8, 0.7, 0.9],
    }
    write_executed(build / "05_rec4agentverse.ipynb", records)
    outcome = _outcomes_by_id(build)["r4a-stage2-taste-template"]
    assert outcome.verdict == OURS_ONLY
    assert outcome.reason.startswith(PERSPECTIVE) and "shown" in outcome.reason


def test_a_failed_or_unreadable_notebook_is_said_so(tmp_path):
    build = tmp_path / "build"
    write_executed(build / "02_agent4rec.ipynb", {"profile": "default"}, exception=True)
    (build / "03_afl.ipynb").write_text("{not json")
    runs, outcomes = evaluate_claims(build)
    assert runs["02_agent4rec"].status == "failed"
    assert runs["03_afl"].status == "unreadable"
    by_id = {o.claim.id: o for o in outcomes}
    assert by_id["a4r-taste-f1-1-1"].verdict == NOT_RUN
    assert "stopped with an error" in by_id["a4r-taste-f1-1-1"].reason
    assert by_id["afl-hr1-movielens"].verdict == NOT_RUN


# --------------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------------


def _cross_paper_records() -> dict[str, Any]:
    """What notebook 06's last cell records, for two methods and a reference."""
    paired = {"diff": -0.2, "diff_low": -0.35, "diff_high": -0.05, "p_value": 0.01}
    return {
        "profile": "default",
        "dataset": "ml-100k",
        "model": "my-model",
        "n_users": 10,
        "methods": ["SASRec", "Zero-shot LLM"],
        "ndcg@10/SASRec": [0.6, 0.5, 0.7],
        "ndcg@10/Zero-shot LLM": [0.4, 0.3, 0.5],
        "hr@1/SASRec": [0.3, 0.1, 0.5],
        "hr@1/Zero-shot LLM": [0.1, 0.0, 0.3],
        "paired/ndcg@10/Zero-shot LLM": paired | {"reference": "SASRec"},
        "popularity/SASRec": {"k": 5, "avg_pop": 120.0, "pop_ratio": 1.5},
        "popularity/Zero-shot LLM": {"k": 5, "avg_pop": 80.0, "pop_ratio": 1.0},
        "position/Zero-shot LLM/reversed": {"kendall_tau": -0.72, "top1_changed": 1.0},
        "failures": {"SASRec": 0, "Zero-shot LLM": 1},
        "cost/SASRec": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "usd": 0},
        "cost/Zero-shot LLM": {
            "calls": 1.0,
            "prompt_tokens": 812.0,
            "completion_tokens": 60.0,
            "usd": 0.000158,
        },
        "price_model": "gpt-4o-mini",
    }


def test_cross_paper_section_reads_every_column_from_the_records(tmp_path):
    build = tmp_path / "build"
    write_executed(build / "06_cross_paper.ipynb", _cross_paper_records(), "06 · Across")
    text = build_reproduction(build, "default", now=NOW)
    section = text.split("## Across the papers", 1)[1].split("## Per notebook", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert len(rows) == 3  # header + one row per method
    assert "vs SASRec" in rows[0] and "`gpt-4o-mini`" in section and "10 users" in section
    llm = rows[2]
    assert "0.400 [0.300, 0.500]" in llm and "0.100 [0.000, 0.300]" in llm
    assert "-0.200 [-0.350, -0.050], p = 0.010" in llm
    assert (
        "| -0.72 |" in llm and "| 812 |" in llm and "| 0.00016 |" in llm and llm.endswith("| 1 |")
    )
    assert "| — |" in rows[1]  # the reference has no paired test and no position probe
    assert "### 06 · Across" in text and "One ml-100k protocol for every method" in text


def test_cross_paper_section_says_when_the_notebook_did_not_run(tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    section = cross_paper_section(read_run(build / "06_cross_paper.ipynb"))
    assert section[0] == "## Across the papers: one protocol"
    assert "**not run**" in section[2] and "06_cross_paper.ipynb does not exist" in section[2]


def test_cross_paper_record_keys_are_written_by_notebook_06():
    source = (ROOT / "notebooks" / "06_cross_paper.ipynb").read_text(encoding="utf-8")
    for key in ("paired/", "popularity/", "position/", "cost/", "price_model", "failures",
                "methods", "n_users"):  # fmt: skip
        assert key in source, key


def test_render_html_writes_pages_and_an_index_of_notebooks_and_figures(tmp_path):
    build, figures, out = tmp_path / "build", tmp_path / "figures", tmp_path / "html"
    ran = write_executed(build / "01_tiny.ipynb", {"model": "m"}, title="01 · Tiny & <odd>")
    missing = build / "02_missing.ipynb"
    figures.mkdir()
    (figures / "01_tiny_plot.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (figures / "notes.txt").write_text("not a figure")

    index = render_html([ran, missing], figures, out)

    assert index == out / "index.html"
    page = (out / "01_tiny.html").read_text()
    assert "<html" in page and "01 · Tiny" in page
    text = index.read_text()
    assert 'href="01_tiny.html"' in text and "01 · Tiny &amp; &lt;odd&gt;" in text
    assert "02_missing.ipynb: not run" in text
    # Figures are linked where they lie (the committed figures/), not copied.
    assert 'href="../figures/01_tiny_plot.png"' in text
    assert 'src="../figures/01_tiny_plot.png"' in text
    assert not (out / "figures").exists()
    assert "notes.txt" not in text


def test_published_pages_drop_progress_bars_and_survive_an_unchanged_rerun(tmp_path):
    """A rerun that differs only in timings leaves the pages byte for byte as they were."""
    build, out = tmp_path / "build", tmp_path / "docs"
    path = write_executed(build / "01_tiny.ipynb", {"model": "m"}, title="01 · Tiny")

    def executed(seconds: float) -> None:
        """One run: its timings, its random injected-cell id, its own split of one stream."""
        nb = nbformat.read(path, as_version=4)
        pieces = ["trained in ", f"{seconds} s\n"] if seconds < 2 else [f"trained in {seconds} s\n"]
        nb.cells[1].outputs = [
            nbformat.v4.new_output("stream", name="stderr", text="epoch 3: 40%|####  | 2/5\r"),
            *(nbformat.v4.new_output("stream", name="stdout", text=p) for p in pieces),
        ]
        nb.cells[1].metadata["execution"] = {"iopub.status.busy": f"2030-01-01T00:00:{seconds}"}
        injected = nbformat.v4.new_code_cell("PROFILE = 'default'")
        injected.metadata["tags"] = ["injected-parameters"]
        nb.cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
        nb.cells.insert(1, injected)  # papermill gives it a new random id every run
        nbformat.write(nb, path)

    executed(1.5)
    render_html([path], None, out)
    page = (out / "01_tiny.html").read_text()
    assert "trained in 1.5 s" in page and "40%|" not in page and "iopub" not in page
    # nbconvert's CSS is written once and linked, not inlined in every page.
    (sheet,) = out.glob("nbconvert-*.css")
    head = page.split("</head>")[0]
    assert f'href="{sheet.name}"' in head and "<style" not in head and sheet.stat().st_size > 1000
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    executed(2.7)
    render_html([path], None, out)
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before
    # A real change is written.
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].outputs.append(nbformat.v4.new_output("stream", name="stdout", text="HR 0.4\n"))
    nbformat.write(nb, path)
    render_html([path], None, out)
    assert "HR 0.4" in (out / "01_tiny.html").read_text()


def test_an_unchanged_notebook_is_not_rendered_again(tmp_path, monkeypatch):
    from nbconvert import HTMLExporter

    from recagents.report import pages

    build, out = tmp_path / "build", tmp_path / "docs"
    path = write_executed(build / "01_tiny.ipynb", {"model": "m"}, title="01 · Tiny")
    render_html([path], None, out)
    page = (out / "01_tiny.html").read_text()
    assert '<meta name="recagents-source" content="' in page.split("</head>")[0]
    rendered: list[str] = []
    original = HTMLExporter.from_notebook_node

    def counted(self, nb, resources=None, **kw):
        rendered.append(resources["metadata"]["name"])
        return original(self, nb, resources=resources, **kw)

    monkeypatch.setattr(HTMLExporter, "from_notebook_node", counted)
    nb = nbformat.read(path, as_version=4)
    nb.metadata["papermill"] = {"end_time": "2030-01-01T00:00:09"}  # a rerun: new metadata only
    nbformat.write(nb, path)
    index = render_html([path], None, out)
    assert rendered == [] and (out / "01_tiny.html").read_text() == page
    assert 'href="01_tiny.html"' in index.read_text() and list(out.glob("nbconvert-*.css"))
    (out / "01_tiny.html").write_bytes(b"\xff\xfe not a page")  # an unreadable page is redone
    render_html([path], None, out)
    assert rendered == ["01 · Tiny"] and (out / "01_tiny.html").read_text() == page
    rendered.clear()
    for sheet in out.glob("nbconvert-*.css"):  # a page whose style sheet is gone is redone
        sheet.unlink()
    render_html([path], None, out)
    assert rendered == ["01 · Tiny"] and list(out.glob("nbconvert-*.css"))
    nb.cells[1].outputs.append(nbformat.v4.new_output("stream", name="stdout", text="HR 0.4\n"))
    nbformat.write(nb, path)  # a real change is rendered
    render_html([path], None, out)
    assert len(rendered) == 2 and "HR 0.4" in (out / "01_tiny.html").read_text()
    stamp = pages._stamp(nbformat.writes(pages.publishable(nb)), "01 · Tiny")
    monkeypatch.setattr(pages, "__file__", str(tmp_path / "other_renderer.py"))
    (tmp_path / "other_renderer.py").write_text("# another way to make a page\n")
    assert pages._stamp(nbformat.writes(pages.publishable(nb)), "01 · Tiny") != stamp
    render_html([path], None, out)  # so a changed renderer renders every page again
    assert len(rendered) == 3


def test_render_html_without_a_figures_folder(tmp_path):
    index = render_html([tmp_path / "00_x.ipynb"], tmp_path / "nope", tmp_path / "html")
    text = index.read_text()
    assert "No figures folder" in text and "00_x.ipynb: not run" in text


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def test_cli_writes_the_report_and_the_html(tmp_path, capsys):
    build = tmp_path / "build"
    write_executed(build / "04_interecagent.ipynb", _ira_records([0.8, 0.7, 0.9]))
    out = tmp_path / "REPRODUCTION.md"
    assert main(["reproduction", "--build", str(build), "--out", str(out)]) == 0
    assert "profile **default**" in out.read_text()  # inferred from the records
    html_dir = tmp_path / "html"
    args = ["html", "--build", str(build), "--figures", str(tmp_path / "nofig")]
    args += ["--out", str(html_dir), "--notebooks", str(ROOT / "notebooks")]
    assert main(args) == 0
    index = (html_dir / "index.html").read_text()
    assert 'href="04_interecagent.html"' in index and "01_agentcf.ipynb: not run" in index
    assert "wrote" in capsys.readouterr().out


def test_cli_missing_build_folder_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["reproduction", "--build", str(tmp_path / "nope"), "--out", "x.md"])
    assert exit_info.value.code == 2
    assert "build folder not found" in capsys.readouterr().err


def test_import_has_no_side_effects():
    """Neither nbconvert nor the tables (and jsonschema, which validates them) load on import."""
    code = (
        "import sys, recagents.report; from recagents.report import loading; "
        "print('nbconvert' in sys.modules, 'jsonschema' in sys.modules, "
        "loading.load_claims.cache_info().currsize)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "False False 0"


def test_python_m_recagents_report_runs_the_command_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "recagents.report", "reproduction", "--build", str(tmp_path / "x")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "build folder not found" in result.stderr


# --------------------------------------------------------------------------------------------
# The tables are JSON package data, validated on load
# --------------------------------------------------------------------------------------------


def test_packaged_tables_match_their_schemas():
    import jsonschema

    for schema in (loading.CLAIMS_SCHEMA, loading.NOTEBOOKS_SCHEMA, loading.VERDICT_RULES_SCHEMA):
        jsonschema.Draft202012Validator.check_schema(schema)
    assert loading.resource("claims.json").is_file()
    assert load_claims() is loading.load_claims() and len(CLAIMS) > 30
    assert list(NOTEBOOKS) == sorted(NOTEBOOKS) and NOTEBOOKS["01_agentcf"].deviations
    assert set(loading.CLAIM_RULES) <= set(load_verdict_rules())
    assert {c.rule for c in CLAIMS} <= set(loading.CLAIM_RULES)


def _claims_file(tmp_path: Path, change) -> Path:
    """The packaged claims.json with ``change(data)`` applied, written to ``tmp_path``."""
    data = json.loads(loading.resource("claims.json").read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_packaged_claims_round_trip(tmp_path):
    assert loading.load_claims(_claims_file(tmp_path, lambda data: None)) == CLAIMS


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (lambda d: d["claims"][3]["ours"].pop("key"), "claims[3].ours.key", "missing"),
        (lambda d: d["claims"][2].pop("paper"), "claims[2].paper", "missing"),
        (lambda d: d["claims"][5].update(context="n_users"), "claims[5].context", "not of type"),
        (lambda d: d["claims"][0].update(llm="no"), "claims[0].llm", "not of type 'boolean'"),
        (lambda d: d["claims"][4].update(rule="beats"), "claims[4].rule", "is not one of"),
        (lambda d: d["claims"][6]["paper"].update(colum="x"), "claims[6].paper", "colum"),
        (lambda d: d["claims"][0].pop("versus"), "claims[0].versus", "missing"),
        (lambda d: d["claims"][0].pop("no_paper"), "claims[0].no_paper", "missing"),
    ],
    ids=["missing", "missing-paper", "list", "bool", "rule", "unknown", "versus", "no-paper"],
)
def test_a_bad_claims_file_names_the_file_and_the_field(tmp_path, change, field, problem):
    path = _claims_file(tmp_path, change)
    with pytest.raises(loading.ResourceError) as error:
        loading.load_claims(path)
    message = str(error.value)
    assert str(path) in message
    assert any(line.strip().startswith(f"{field}:") and problem in line for line in
               message.splitlines()), message  # fmt: skip


def test_duplicate_claim_ids_and_broken_json_are_clear_errors(tmp_path):
    path = _claims_file(tmp_path, lambda d: d["claims"][1].update(id=d["claims"][0]["id"]))
    with pytest.raises(loading.ResourceError, match=r"claims\[1\]\.id: .* claims\[0\]"):
        loading.load_claims(path)
    path.write_text('{"claims": [}', encoding="utf-8")
    with pytest.raises(loading.ResourceError, match="not valid JSON at line 1, column 13"):
        loading.load_claims(path)


def test_bad_notebooks_and_verdict_rules_files_name_the_field(tmp_path):
    notebooks = tmp_path / "notebooks.json"
    notebooks.write_text(json.dumps({"notebooks": {"01_x": {"title": "t", "paper": "p"}}}))
    with pytest.raises(loading.ResourceError, match=r"notebooks\.01_x\.deviations: missing"):
        loading.load_notebooks(notebooks)
    rules = tmp_path / "verdict_rules.json"
    rules.write_text(json.dumps({"rules": {rule: "text" for rule in loading.CLAIM_RULES[1:]}}))
    with pytest.raises(loading.ResourceError, match=r"rules\.contains: missing"):
        loading.load_verdict_rules(rules)


# --------------------------------------------------------------------------------------------
# The real build folder, when a default-profile run exists
# --------------------------------------------------------------------------------------------

REAL = ROOT / "build" / "04_interecagent.ipynb"


@pytest.mark.skipif(not REAL.is_file(), reason="build/04_interecagent.ipynb not executed")
def test_report_on_the_real_interecagent_run():
    records = read_records(REAL)
    runs, outcomes = evaluate_claims(REAL.parent)
    assert runs["04_interecagent"].status == "ran"
    mine = [o for o in outcomes if o.claim.notebook == "04_interecagent"]
    assert mine and all(o.verdict != NOT_RUN for o in mine), [o.reason for o in mine]
    text = build_reproduction(REAL.parent, str(records.get("profile", "default")), now=NOW)
    assert f"`{records['model']}`" in text
    assert "IRA-T-multiturn" in text and "InteRecAgent (arXiv 2308.16505)" in text


def test_the_module_map_is_generated_and_current():
    """MODULES.md is what `make report` writes from the docstrings (regenerate it if not)."""
    from recagents.report.modules import module_map

    committed = (ROOT / "MODULES.md").read_text(encoding="utf-8")
    assert committed == module_map(), "MODULES.md is stale: run `make report` and commit it"
    assert "- `recagents.papers.afl.entry`:" in committed and "(no docstring)" not in committed


def test_a_claim_on_unreleased_data_is_not_comparable_even_when_not_recorded(tmp_path):
    build = tmp_path / "build"
    claim = next(c for c in load_claims() if c.id == "agentcf-bh-sparse-ndcg10")
    write_executed(build / f"{claim.notebook}.ipynb", {"model": "m", "dataset": "cds-dense"})
    outcome = _outcomes_by_id(build)[claim.id]
    assert outcome.verdict == NOT_COMPARABLE
    assert "which no release holds" in outcome.reason and "Office" in outcome.reason
