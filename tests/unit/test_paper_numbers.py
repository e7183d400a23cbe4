"""The reported numbers are well-formed data: tagged, sourced, and kept as printed text."""

import json
from importlib import resources

import pytest

from recagents import paper_numbers

ALLOWED_TAGS = set(paper_numbers.TAGS)


def test_every_table_has_a_source_and_tagged_rows():
    assert paper_numbers.card_ids(), "no reported numbers at all"
    for card_id in paper_numbers.card_ids():
        table = paper_numbers.table(card_id)
        assert len(table) >= 1, card_id
        assert table.attrs["source"], card_id
        assert set(table["tag"]) <= ALLOWED_TAGS, f"{card_id}: unknown tag"


def test_values_are_text_exactly_as_printed():
    raw = json.loads(resources.files("recagents").joinpath(paper_numbers.DATA_FILE).read_text())
    for card_id in paper_numbers.card_ids():
        for row in raw[card_id]["rows"]:
            for key, value in row.items():
                assert isinstance(value, str), f"{card_id}.{key} must be text, got {value!r}"


def test_agentcf_main_table_keeps_the_reported_values():
    table = paper_numbers.table("AgentCF-T2").set_index(["subset", "method"])
    assert table.loc[("CDs-dense", "AgentCF_B+R"), "ndcg@10"] == "0.5405"
    assert table.loc[("Office-sparse", "AgentCF_B+H"), "ndcg@1"] == "unknown"
    assert (table["tag"] == "[note]").all()


def test_caption_names_the_source_and_the_tag_meaning():
    caption = paper_numbers.caption("AgentCF-T2")
    assert "Table 2" in caption and "[note]" in caption and "low confidence" in caption


def test_unknown_experiment_is_a_clear_error():
    with pytest.raises(KeyError, match="known: "):
        paper_numbers.table("AgentCF-T99")
