"""AgentCF's paper values are compared only with ours on the same dataset."""

from __future__ import annotations

import pandas as pd

from recagents import paper_numbers
from recagents.papers.agentcf.analysis import paper_side_by_side, paper_values


def _summary() -> pd.DataFrame:
    rows = [
        {"subset": "dense", "method": method, "metric": metric, "mean": 0.4, "low": 0.3,
         "high": 0.5}
        for method in ("AgentCF B", "AgentCF B+R", "Random")
        for metric in ("ndcg@1", "ndcg@5", "ndcg@10")
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_no_paper_value_is_borrowed_from_another_dataset():
    reported = paper_numbers.table("AgentCF-T2")
    assert paper_values(reported, "ml-100k") == {}
    table = paper_side_by_side(_summary(), reported, "ml-100k")
    paper = table.iloc[:, -1]
    assert paper["AgentCF B+R"].startswith("no value for ml-100k (reported on CDs-dense")
    assert paper["AgentCF B"].startswith("no value for ml-100k (reported on Office-dense")
    assert paper["Random"] == "not reported"


def test_the_paper_value_on_the_same_dataset_is_shown():
    reported = paper_numbers.table("AgentCF-T2")
    assert paper_values(reported, "cds-dense") == {("AgentCF B+R", "dense"): 0.5405}
    table = paper_side_by_side(_summary(), reported, "cds-dense")
    paper = table.iloc[:, -1]
    assert paper["AgentCF B+R"].startswith("CDs-dense: 0.2333 / 0.4142 / 0.5405")
    assert paper["AgentCF B"].startswith("no value for cds-dense (reported on Office-dense")


def test_each_subset_is_held_against_the_papers_subset_of_its_data():
    reported = paper_numbers.table("AgentCF-T2")
    both = {"dense": "cds-dense", "sparse": "cds-sparse"}  # a run on the two releases
    assert paper_values(reported, both) == {("AgentCF B+R", "dense"): 0.5405}
    # a sparse subset re-made from CDs-dense is not the paper's CDs-sparse: only dense applies
    assert paper_values(reported, {"dense": "cds-dense", "sparse": "cds-dense"}) == {
        ("AgentCF B+R", "dense"): 0.5405
    }
    assert paper_values(reported, {"dense": "ml-100k", "sparse": "cds-sparse"}) == {}
    summary = pd.concat([_summary(), _summary().assign(subset="sparse")], ignore_index=True)
    paper = paper_side_by_side(summary, reported, both).iloc[:, -1]
    assert paper["AgentCF B+R"].startswith("CDs-dense: 0.2333 / 0.4142 / 0.5405")
    assert paper["AgentCF B"].startswith("no value for cds-dense, cds-sparse (reported on Office")
