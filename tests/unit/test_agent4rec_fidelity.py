"""Parser and prompt fidelity of our Agent4Rec against the authors' recorded run."""

from __future__ import annotations

import os

import matplotlib
import pandas as pd
import pytest

from recagents.config import settings
from recagents.data.releases import MIRROR_ENV, manifest
from recagents.papers.agent4rec.fidelity import (
    DELIBERATE_DIFFERENCES,
    agreement_table,
    differing_spans,
    disagreement_classes,
    field_positions,
    inventory_status,
    normalised_distance,
)

matplotlib.use("Agg")


def _cached(path: str) -> bool:
    rel = manifest("agent4rec-ml1m")
    return (settings().cache_dir / "releases" / rel.owner / rel.repo / rel.commit / path).is_file()


needs_release = pytest.mark.skipif(
    not os.environ.get(MIRROR_ENV) and not _cached("simulation/avatar.py"),
    reason="Agent4Rec release not here",
)

#: Lowest agreement of our parser with the authors' parse, per field (measured on both runs,
#: issue #37: watched 0.998, ratings, liked, aligned and interview 1.000, exit 0.997).
THRESHOLDS = {"watched": 0.99, "ratings": 0.99, "liked": 0.99, "aligned": 0.99,
              "exit decision": 0.99, "interview rating": 0.99}  # fmt: skip


def test_normalised_distance_and_spans():
    assert normalised_distance("a  b\nc", "a b c") == 0.0
    assert normalised_distance("a  b", "a b", whitespace=True) > 0.0
    assert normalised_distance("abc", "xyz") == 1.0
    assert differing_spans("the red cat sat", "the blue cat sat") == [("red", "blue")]


def test_inventory_status_names_absent_extra_and_order():
    logged = {"traits": 0, "tastes": 10, "memories": None, "page": 20}
    other = {"traits": 30, "tastes": 10, "memories": 5, "page": None}
    status = inventory_status(logged, other)
    assert status == {"traits": "out of order", "tastes": "out of order",
                      "memories": "extra", "page": "absent"}  # fmt: skip
    same = inventory_status(logged, {"traits": 1, "tastes": 2, "memories": None, "page": 3})
    assert same == {"traits": "present", "tastes": "present", "memories": "absent in both",
                    "page": "present"}  # fmt: skip


def test_field_positions_case_insensitive_first_form():
    markers = {"title": ["Lion King, The", "the lion"], "page": ["page 2"]}
    found = field_positions("Page 2: The Lion King", markers, ["title", "page", "x"])
    assert found == {"title": 8, "page": 0, "x": None}


def test_agreement_table_and_classes():
    fields = pd.DataFrame({
        "run": "r", "agent": ["1", "1", "2", "2"], "page": 1, "field": "watched",
        "agree": [True, False, True, True], "ours": "a", "authors": "b",
        "why": ["", "ours: title unmatched", "", ""],
    })  # fmt: skip
    table = agreement_table(fields).iloc[0]
    assert (table["n"], table["agents"], table["agreement"]) == (4, 2, 0.75)
    assert table["mean"] == 0.75 and table["low"] <= 0.75 <= table["high"]
    classes = disagreement_classes(fields)
    assert classes["count"].tolist() == [1] and "agent 1 page 1" in classes["example"].iloc[0]


def test_deliberate_differences_are_data_with_reasons():
    assert list(DELIBERATE_DIFFERENCES.columns) == ["kind", "aspect", "ours", "authors", "reason"]
    assert DELIBERATE_DIFFERENCES["reason"].str.len().min() > 10
    assert DELIBERATE_DIFFERENCES["aspect"].str.contains("reply format").any()


@pytest.fixture(scope="module")
def parsed():
    from recagents.papers.agent4rec.fidelity import parser_fidelity

    return parser_fidelity()


@needs_release
def test_our_parser_agrees_with_the_authors(parsed):
    table = agreement_table(parsed.fields)
    for row in table.itertuples():
        if row.field in THRESHOLDS:
            assert row.agreement >= THRESHOLDS[row.field], (row.run, row.field, row.agreement)
    assert set(table["n"][table["field"] == "interview rating"]) == {1000, 100}


@needs_release
def test_every_disagreement_is_classed(parsed):
    classes = disagreement_classes(parsed.fields)
    assert (classes["why"] != "").all()
    ids = classes[classes["field"] == "watched ids"]
    assert ids["why"].str.contains("line rank").all(), "the authors' ids follow line rank"
    assert classes[classes["field"] != "watched ids"]["count"].sum() < 40


@needs_release
def test_released_prompts_reproduce_the_logged_ones_and_ours_carry_the_fields():
    from recagents.papers.agent4rec.fidelity import distance_table, prompt_fidelity

    result = prompt_fidelity("lightgcn", [str(k) for k in range(20)])
    released = result.distances[result.distances["source"] == "released"]
    assert set(released["kind"]) == {"page", "exit", "interview"}
    assert released["distance"].max() == 0.0, "identical up to whitespace"
    assert released["raw_distance"].max() < 0.01
    table = distance_table(result.distances).set_index(["kind", "source"])
    assert (table.xs("ours", level="source")["mean"] > 0.5).all(), "our own words"
    ours = result.inventory[(result.inventory["source"] == "ours")]
    missing = ours[ours["status"] == "absent"]
    assert missing.empty, f"ours lacks a field the authors send: {missing.to_dict('records')}"
    assert result.examples["page"]["released"] == []


@needs_release
def test_figures_draw(parsed):
    from recagents.papers.agent4rec.fidelity import (
        distance_table,
        parser_agreement_figure,
        prompt_fidelity,
        prompt_fidelity_figure,
    )

    assert parser_agreement_figure(agreement_table(parsed.fields)).axes
    result = prompt_fidelity("lightgcn", ["0", "1"])
    assert len(prompt_fidelity_figure(distance_table(result.distances), result.inventory).axes) >= 2
