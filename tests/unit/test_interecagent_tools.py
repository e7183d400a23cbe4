"""Tests of InteRecAgent's tool side: item table, safe SQL, the bus, tools and plans.

No language model is involved anywhere. Tables are built from the tiny fixture (popularity
from the leave-one-out history) or by hand, so every expected value is either counted from
the data here or written out by hand. The preference ranker is a SASRec trained for two
epochs on the tiny fixture; its expected order comes from ``Baseline.sequence_scores``.
"""

from __future__ import annotations

import math
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
from rapidfuzz import fuzz

from recagents.baselines import Baseline, TrainConfig, train_baseline
from recagents.columns import ITEM, RATING, TIMESTAMP, USER
from recagents.data import load_dataset
from recagents.data.datasets import Split, leave_one_out
from recagents.papers.interecagent.bus import BusEvent, CandidateBus
from recagents.papers.interecagent.catalogue import ItemTable
from recagents.papers.interecagent.config import TOOL_NAMES
from recagents.papers.interecagent.itemcf import ItemCF
from recagents.papers.interecagent.plans import (
    PLAN_OBJECT_SCHEMA,
    PLAN_SCHEMA,
    PlanError,
    execute_plan,
    parse_plan,
    validate_plan,
)
from recagents.papers.interecagent.scoring import (
    fuzzy_hit,
    hit_at_k_and_at,
    hit_by_id,
    leaks,
    popular_recommend,
    random_recommend,
    ranking_ndcg,
    recall_at_k,
)
from recagents.papers.interecagent.sqllimits import COLUMNS, ToolError
from recagents.papers.interecagent.toolbox import (
    ToolContext,
    build_context,
    candidate_store,
    hard_filter,
    lookup,
    map_titles,
    parse_rank_input,
    rank,
    soft_filter,
)

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
QUICK = TrainConfig(epochs=2, stopping_step=2)


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def split() -> Split:
    return leave_one_out(load_dataset(TINY))


@pytest.fixture(scope="module")
def history(split) -> pd.DataFrame:
    return split.history("test")


@pytest.fixture
def ctx(history) -> ToolContext:
    """A fresh context on the tiny fixture (table, full bus, ItemCF; no ranker)."""
    return build_context(load_dataset(TINY), history)


@pytest.fixture(scope="module")
def sasrec(split, tmp_path_factory) -> Baseline:
    cache = tmp_path_factory.mktemp("sasrec-cache")
    return train_baseline("SASRec", split, QUICK, cache_dir=cache, progress=False)


def _snapshot(table: ItemTable) -> pd.DataFrame:
    """Every row as stored in SQLite, read the trusted way."""
    with table._trusted_block():
        rows = table._conn.execute("SELECT * FROM main.items ORDER BY id").fetchall()
    return pd.DataFrame(rows, columns=list(COLUMNS))


# Six items with made-up titles and a hand-countable interaction log for ItemCF.
#   N_a = 4 (u1 u2 u3 u5), N_b = 2, N_c = 2 (u3 u4), N_d = 1, N_e = 1, N_f = 0
#   C_ab = 2, C_ac = 1, C_ad = 1, C_ae = 1, C_de = 1
HAND_TITLES = {
    "a": "Alpha",
    "b": "Bravo",
    "c": "Charlie",
    "d": "Delta",
    "e": "Echo",
    "f": "Foxtrot",
}
HAND_LOG = [
    ("u1", "a"),
    ("u1", "b"),
    ("u2", "a"),
    ("u2", "b"),
    ("u3", "a"),
    ("u3", "c"),
    ("u4", "c"),
    ("u5", "a"),
    ("u5", "d"),
    ("u5", "e"),
    ("u5", "a"),  # a repeat: counted once
]
SIM = {
    ("a", "b"): 2 / math.sqrt(4 * 2),
    ("a", "c"): 1 / math.sqrt(4 * 2),
    ("a", "d"): 1 / math.sqrt(4 * 1),
    ("a", "e"): 1 / math.sqrt(4 * 1),
    ("d", "e"): 1 / math.sqrt(1 * 1),
    ("b", "c"): 0.0,
    ("a", "f"): 0.0,
}


@pytest.fixture
def hand_ctx() -> ToolContext:
    log = pd.DataFrame(HAND_LOG, columns=[USER, ITEM])
    counts = log.drop_duplicates()[ITEM].value_counts()
    frame = pd.DataFrame(
        {
            "id": list(HAND_TITLES),
            "title": list(HAND_TITLES.values()),
            "release_year": [1990, 1991, 1992, 1993, 1994, None],
            "tags": ["Drama", "Comedy", "Comedy, Drama", "Horror", None, "Western"],
            "visited_num": [int(counts.get(i, 0)) for i in HAND_TITLES],
        }
    )
    table = ItemTable.from_frame(frame)
    return ToolContext(
        table=table,
        bus=CandidateBus(table.ids),
        itemcf=ItemCF.from_interactions(log, table.ids),
    )


def _synthetic_table(n: int) -> ItemTable:
    """``n`` items; visited_num = index, so ORDER BY visited_num DESC is known."""
    frame = pd.DataFrame(
        {
            "id": [f"i{k:05d}" for k in range(n)],
            "title": [f"Synthetic Film Number {k}" for k in range(n)],
            "release_year": [1950 + k % 50 for k in range(n)],
            "tags": ["Drama" if k % 2 else "Comedy" for k in range(n)],
            "visited_num": list(range(n)),
        }
    )
    return ItemTable.from_frame(frame)


# ------------------------------------------------------------------------------ item table


def test_item_table_columns_and_values_come_from_the_item_file_and_the_history(ctx, history):
    table = ctx.table
    dataset = load_dataset(TINY)
    assert table.ids == tuple(dataset.items[ITEM])  # every catalogue item, file order
    result = table.run_select("SELECT * FROM items", max_rows=None)
    assert result.columns == COLUMNS
    rows = {row[0]: dict(zip(COLUMNS, row, strict=True)) for row in result.rows}
    assert rows["001"]["title"] == "The Usual Suspects"  # trailing ", The" moved
    assert rows["004"]["title"] == "A Few Good Men"
    assert rows["008"]["release_year"] is None  # "Lost Reel" has no year
    assert rows["009"]["tags"] is None  # "Untitled Short" has no genre
    assert rows["010"]["tags"] == "Animation, Children's, Comedy"
    counts = history.groupby(ITEM).size()
    means = history.groupby(ITEM)[RATING].mean()
    for item, row in rows.items():
        assert row["visited_num"] == int(counts.get(item, 0))
        if item in means:
            assert row["avg_rating"] == pytest.approx(means[item])
    assert rows["060"]["visited_num"] == 0 and rows["060"]["avg_rating"] is None
    assert table.display_title("007") == "Hamlet (1948)"


def test_test_interactions_do_not_leak_into_popularity(split, history):
    table = ItemTable.from_dataset(load_dataset(TINY), split.train)
    with_valid = ItemTable.from_dataset(load_dataset(TINY), history)
    item = split.valid[ITEM].iloc[0]
    assert with_valid.rows[item].visited_num == table.rows[item].visited_num + int(
        (split.valid[ITEM] == item).sum()
    )


def test_describe_gives_types_numeric_summaries_and_tag_examples(ctx):
    text = ctx.table.describe()
    for column in COLUMNS:
        assert f"- {column} (" in text
    years = load_dataset(TINY).items["year"].dropna().astype(int)
    year_line = next(line for line in text.splitlines() if line.startswith("- release_year"))
    assert f"min {years.min()}, max {years.max()}" in year_line
    assert f"median {years.median():.0f}" in year_line
    tags_line = next(line for line in text.splitlines() if line.startswith("- tags"))
    examples = tags_line.split("Values include: ")[1].rstrip(".").split(", ")
    assert len(examples) == 10
    all_genres = {g for genres in load_dataset(TINY).items["genres"] for g in genres}
    assert set(examples) <= all_genres
    assert "60 rows" in text


def test_duplicate_ids_are_refused():
    with pytest.raises(ValueError, match="'x' is listed more than once"):
        ItemTable.from_frame(pd.DataFrame({"id": ["x", "y", "x"]}))


# ------------------------------------------------------------------------------ read-only SQL


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("INSERT INTO items (id, title, visited_num) VALUES ('z', 'Z', 0)", "INSERT"),
        ("UPDATE items SET visited_num = 0", "UPDATE"),
        ("DELETE FROM items", "DELETE"),
        ("DROP TABLE items", "DROP"),
        ("CREATE TABLE other (x)", "CREATE"),
        ("ALTER TABLE items ADD COLUMN x", "ALTER"),
        ("REPLACE INTO items (id, title, visited_num) VALUES ('001', 'X', 0)", "REPLACE"),
        ("ATTACH DATABASE ':memory:' AS other", "ATTACH"),
        ("PRAGMA writable_schema = ON", "PRAGMA"),
        ("SELECT id FROM items; DROP TABLE items", "2 statements"),
        ("SELECT 1; SELECT 2;", "2 statements"),
        # Starts like a read: only the authorizer can refuse it.
        ("WITH x AS (SELECT 1) DELETE FROM items", "only a read-only SELECT"),
        (
            "WITH x AS (SELECT 1) INSERT INTO items (id, title, visited_num) VALUES ('z', 'Z', 0)",
            "only a read-only SELECT",
        ),
        ("SELECT 'unterminated FROM items", "incomplete"),
        ("", "empty"),
    ],
)
def test_anything_but_one_select_is_refused_and_the_table_is_unchanged(ctx, sql, message):
    before = _snapshot(ctx.table)
    with pytest.raises(ToolError, match=message):
        ctx.table.run_select(sql)
    with pytest.raises(ToolError):
        ctx.table.check_select(sql)
    pd.testing.assert_frame_equal(_snapshot(ctx.table), before)
    assert ctx.table.count_rows() == 60


def test_the_authorizer_refuses_writes_even_past_the_text_checks(ctx):
    """The connection itself refuses: the text checks are not the only guard."""
    import sqlite3

    for statement in ("DELETE FROM items", "DROP TABLE items", "PRAGMA table_info(items)"):
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            ctx.table._conn.execute(statement)
    with pytest.raises(sqlite3.DatabaseError, match="sqlite_master.type is prohibited"):
        ctx.table._conn.execute("SELECT type FROM sqlite_master")
    assert ctx.table.count_rows() == 60


def test_table_names_are_grounded_to_items_and_reported(ctx):
    result = ctx.table.run_select("SELECT title FROM movies WHERE id = '001'")
    assert result.rows == [("The Usual Suspects",)]
    assert any("'movies'" in note and "'items'" in note for note in result.notes)
    joined = ctx.table.run_select(
        "SELECT a.id FROM movie_table AS a JOIN films b ON a.id = b.id WHERE a.id = '002'"
    )
    assert joined.rows == [("002",)]
    assert len(joined.notes) == 2
    qualified = ctx.table.run_select("SELECT COUNT(*) FROM main.items")
    assert qualified.rows == [(60,)] and qualified.notes


def test_grounding_leaves_strings_ctes_and_subqueries_alone(ctx):
    plain = ctx.table.run_select("SELECT id FROM items WHERE title = 'from movies'")
    assert plain.rows == [] and plain.notes == ()
    cte = ctx.table.run_select(
        "WITH old AS (SELECT id, release_year FROM items WHERE release_year < 1935) "
        "SELECT id FROM old ORDER BY id"
    )
    assert cte.notes == ()
    assert [r[0] for r in cte.rows] == ["020", "033", "034", "047", "059"]
    sub = ctx.table.run_select("SELECT COUNT(*) FROM (SELECT id FROM items WHERE tags IS NULL)")
    assert sub.rows == [(1,)] and sub.notes == ()


def test_unknown_column_lists_the_real_columns(ctx):
    with pytest.raises(ToolError) as error:
        ctx.table.run_select("SELECT genre FROM items")
    message = str(error.value)
    assert "unknown column 'genre'" in message
    for column in COLUMNS:
        assert column in message
    with pytest.raises(ToolError, match="Did you mean 'release_year'"):
        ctx.table.check_select("SELECT id FROM items WHERE releaseyear > 1990")


def test_rows_are_capped_with_a_note(ctx):
    result = ctx.table.run_select("SELECT id FROM items ORDER BY id", max_rows=7)
    assert [r[0] for r in result.rows] == [f"{k:03d}" for k in range(1, 8)]
    assert result.trimmed
    assert any("more than 7 rows" in note for note in result.notes)
    assert not ctx.table.run_select("SELECT id FROM items", max_rows=60).trimmed


def test_check_select_prepares_without_running(ctx):
    """A query that fails only when executed passes validation: EXPLAIN never runs it."""
    sql = "SELECT id FROM items WHERE abs(-9223372036854775808) > 0"
    assert ctx.table.check_select(sql) == []
    with pytest.raises(ToolError, match="integer overflow"):
        ctx.table.run_select(sql)


# ------------------------------------------------------------------------------ bus


def test_bus_starts_with_every_item_including_the_last(ctx):
    assert ctx.bus.ids == list(ctx.table.ids)
    assert "060" in ctx.bus  # the paper's bus (ids 1..N-1) would miss the last item
    assert len(ctx.bus) == 60 and ctx.bus.history == []


def test_cap_keeps_the_first_thousand_under_order_by():
    table = _synthetic_table(1500)
    ctx = ToolContext(table=table, bus=CandidateBus(table.ids, seed=3))
    text = hard_filter(ctx, "SELECT id FROM items ORDER BY visited_num DESC")
    expected = [f"i{k:05d}" for k in range(1499, 499, -1)]
    assert ctx.bus.ids == expected
    assert "1,500 items matched" in text and "first 1,000" in text
    assert ctx.bus.history == [BusEvent("hard_filter", 1500, 1000)]


def test_cap_without_order_by_keeps_a_seeded_random_thousand():
    table = _synthetic_table(1500)
    kept = []
    for seed in (3, 3, 4):
        ctx = ToolContext(table=table, bus=CandidateBus(table.ids, seed=seed))
        text = hard_filter(ctx, "SELECT id FROM items WHERE visited_num >= 0")
        assert len(ctx.bus) == 1000 and "random 1,000" in text
        assert ctx.bus.ids == sorted(ctx.bus.ids)  # incoming (table) order kept
        kept.append(ctx.bus.ids)
    assert kept[0] == kept[1], "same seed, same sample"
    assert kept[0] != kept[2], "another seed, another sample"
    assert kept[0] != [f"i{k:05d}" for k in range(1000)], "not simply the first 1,000"


def test_reset_restores_everything(ctx):
    hard_filter(ctx, "SELECT id FROM items WHERE tags LIKE '%Drama%'")
    soft_filter(ctx, "Hamlet (1948)")
    assert len(ctx.bus) < 60 and ctx.bus.scores is not None and len(ctx.bus.history) == 2
    ctx.bus.reset()
    assert ctx.bus.ids == list(ctx.table.ids)
    assert ctx.bus.scores is None and ctx.bus.history == []


# ------------------------------------------------------------------------------ tools


def test_candidate_store_fuzzy_matches_and_disambiguates_by_year(ctx, history):
    text = candidate_store(ctx, "usual suspects;; Hamlet (1996) ;;TOY STORY;;No Such Film")
    assert ctx.bus.ids == ["001", "006", "010"]
    assert "Not found: 'No Such Film'" in text
    assert ctx.bus.history == [BusEvent("candidate_store", 60, 3)]
    # Without a year the more visited Hamlet wins, and the note says it was a guess.
    counts = history[ITEM].value_counts()
    assert counts["007"] > counts["006"]
    text = candidate_store(ctx, "Hamlet")
    assert ctx.bus.ids == ["007"] and "ambiguous" in text
    candidate_store(ctx, ["Hamlet 1996"])
    assert ctx.bus.ids == ["006"]


def test_candidate_store_keeps_the_bus_when_nothing_matches(ctx):
    text = candidate_store(ctx, "Completely Unknown;;Another One")
    assert len(ctx.bus) == 60 and "unchanged" in text and ctx.bus.history == []
    with pytest.raises(ToolError, match="at least one title"):
        candidate_store(ctx, " ;; ")


def test_title_matching_refuses_partial_and_sequel_lookalikes(ctx):
    table = ctx.table
    assert table.match_title("Toy Story 2").item_id is None  # numbers must agree
    assert table.match_title("Hamle").item_id == "007"  # a typo still matches
    assert table.match_title("Story").item_id is None  # no partial matches
    assert table.match_title("the good the bad and the ugly").item_id == "005"


def test_lookup_returns_rows_and_leaves_the_bus_alone(ctx):
    text = lookup(ctx, "SELECT id, title, release_year FROM items WHERE id IN ('003', '004')")
    lines = text.splitlines()
    assert lines[0] == "id | title | release_year"
    assert lines[1:] == ["003 | An American in Paris | 1951", "004 | A Few Good Men | 1992"]
    assert len(ctx.bus) == 60 and ctx.bus.history == []


def test_lookup_is_trimmed_to_the_character_budget(ctx):
    ctx.lookup_chars = 300
    text = lookup(ctx, "SELECT * FROM items")
    table_part = text.split("\n... (")[0]
    assert len(table_part) <= 300
    shown = len(table_part.splitlines()) - 1
    assert f"({60 - shown} more rows not shown)" in text


def test_hard_filter_runs_over_the_bus_only(ctx, history):
    candidate_store(ctx, "The Usual Suspects;;Hamlet (1996);;Toy Story")
    text = hard_filter(ctx, "SELECT id FROM items ORDER BY visited_num DESC LIMIT 2")
    counts = history[ITEM].value_counts()
    expected = sorted(["001", "006", "010"], key=lambda i: -counts.get(i, 0))[:2]
    assert ctx.bus.ids == expected  # the top 2 *of the bus*, not of the catalogue
    assert "2 of 3" in text
    assert ctx.table.run_select("SELECT COUNT(*) FROM items").rows == [(60,)]  # view is gone


def test_hard_filter_keeps_bus_order_without_order_by(ctx):
    candidate_store(ctx, "Toy Story;;The Usual Suspects;;A Few Good Men")
    hard_filter(ctx, "SELECT id FROM items WHERE tags LIKE '%Crime%' OR tags LIKE '%Comedy%'")
    assert ctx.bus.ids == ["010", "001", "004"]
    hard_filter(ctx, "SELECT id FROM items WHERE tags LIKE '%Crime%'")
    assert ctx.bus.ids == ["001", "004"]


def test_hard_filter_needs_the_id_column_and_may_empty_the_bus(ctx):
    with pytest.raises(ToolError, match="must select the id column"):
        hard_filter(ctx, "SELECT title FROM items")
    with pytest.raises(ToolError, match="DELETE"):
        hard_filter(ctx, "DELETE FROM items")
    assert len(ctx.bus) == 60
    text = hard_filter(ctx, "SELECT id FROM items WHERE release_year > 3000")
    assert ctx.bus.ids == [] and "no candidate is left" in text


def test_itemcf_matches_the_hand_computed_similarities(hand_ctx):
    cf = hand_ctx.itemcf
    for (a, b), value in SIM.items():
        assert cf.similarity(a, b) == pytest.approx(value)
        assert cf.similarity(b, a) == pytest.approx(value)
    assert cf.similarity("a", "a") == 0.0  # no self-similarity
    assert cf.scores(["b", "e"], ["a", "d"]) == pytest.approx(
        [(SIM["a", "b"] + 0) / 2, (SIM["a", "e"] + SIM["d", "e"]) / 2]
    )


@pytest.mark.parametrize(
    ("seeds", "ratio", "kept"),
    [
        # k = ceil(0.3 * 6) = 2: the 2nd best score is 0.5, shared by d and e (ties kept).
        ("Alpha", 0.3, ["b", "d", "e"]),
        # k = ceil(0.7 * 6) = 5: the 5th best is f's 0; zero similarity is never kept.
        ("Alpha", 0.7, ["b", "d", "e", "c"]),
        # Two seeds: means e 0.75, b 0.354, c 0.177, f 0; k = 3.
        ("Alpha;;Delta", 0.5, ["e", "b", "c"]),
        # k = 1: only the best.
        ("Alpha;;Delta", 0.1, ["e"]),
    ],
)
def test_soft_filter_keeps_the_top_ratio_by_mean_itemcf(hand_ctx, seeds, ratio, kept):
    text = soft_filter(hand_ctx, seeds, top_ratio=ratio)
    assert hand_ctx.bus.ids == kept
    assert hand_ctx.bus.score_kind == "similarity"
    seed_ids = [i for i, t in HAND_TITLES.items() if t in seeds.split(";;")]
    expected = hand_ctx.itemcf.scores(kept, seed_ids)
    assert [hand_ctx.bus.scores[i] for i in kept] == pytest.approx(list(expected))
    assert f"{len(kept)} of 6" in text


def test_soft_filter_runs_over_the_current_bus_and_reports_missing_seeds(hand_ctx):
    candidate_store(hand_ctx, "Charlie;;Delta;;Echo;;Foxtrot")
    text = soft_filter(hand_ctx, "Alpha;;Zulu", top_ratio=1.0)
    assert hand_ctx.bus.ids == ["d", "e", "c"]  # b is not on the bus; f scores 0
    assert "Not found: 'Zulu'" in text


def test_soft_filter_falls_back_to_text_embeddings(ctx, tmp_path):
    """No seed is a title: the request text is embedded (real offline MiniLM, temp cache)."""
    import dataclasses

    from recagents.config import settings
    from recagents.llm.cache import ResponseCache
    from recagents.llm.embed import Embedder

    config = dataclasses.replace(settings(), cache_dir=tmp_path, embed_model=None)
    embedder = Embedder(config=config, cache=ResponseCache(tmp_path / "embed.sqlite"))
    ctx.embed = embedder.embed
    request = "an animated comedy for children"
    text = soft_filter(ctx, request)
    assert "no seed title matched" in text and "text similarity" in text
    query = embedder.embed([request])[0]
    vectors = embedder.embed(ctx.table.item_texts())
    cosine = dict(zip(ctx.table.ids, vectors @ query, strict=True))
    k = math.ceil(0.1 * 60)
    best = sorted(cosine, key=lambda i: -cosine[i])[:k]
    assert ctx.bus.ids == best  # no ties in float cosines
    assert ctx.bus.scores[best[0]] == pytest.approx(cosine[best[0]], abs=1e-5)
    assert "010" in ctx.bus.ids  # Toy Story: Animation, Children's, Comedy


def test_rank_by_popularity_truncates_and_removes_unwanted(ctx, history):
    ctx.rank_keep = 10
    text = rank(ctx, "popularity", unwanted=["Hamlet (1948)"])
    counts = history[ITEM].value_counts()
    pool = [i for i in ctx.table.ids if i != "007"]
    expected = sorted(pool, key=lambda i: -counts.get(i, 0))[:10]  # stable: ties in table order
    assert ctx.bus.ids == expected
    assert "007" not in ctx.bus
    assert "Removed 1 unwanted" in text and "kept 10" in text
    assert ctx.bus.scores[expected[0]] == pytest.approx(np.log1p(counts[expected[0]]))


def test_rank_by_similarity_uses_soft_filter_scores_or_falls_back(hand_ctx):
    text = rank(hand_ctx, "similarity")
    assert "ranked by popularity instead" in text
    assert hand_ctx.bus.ids == ["a", "b", "c", "d", "e", "f"]  # visits 4, 2, 2, 1, 1, 0
    hand_ctx.bus.reset()
    soft_filter(hand_ctx, "Alpha;;Delta", top_ratio=0.5)
    rank(hand_ctx, "similarity", unwanted=["Bravo"])
    assert hand_ctx.bus.ids == ["e", "c"]


def test_prefer_switches_to_preference_and_falls_back_without_a_model(ctx, history):
    text = rank(ctx, "popularity", prefer=["Toy Story"])
    assert "became preference" in text and "No preference model" in text
    counts = history[ITEM].value_counts()
    pool = [i for i in ctx.table.ids if i != "010"]  # liked items are not ranked back
    assert ctx.bus.ids == sorted(pool, key=lambda i: -counts.get(i, 0))[: len(pool)]


def test_preference_ranking_follows_sequence_scores(ctx, sasrec):
    ctx.ranker = sasrec
    hard_filter(ctx, "SELECT id FROM items WHERE id <> '019'")
    text = rank(ctx, "preference", prefer=["Hamlet (1948)", "The Usual Suspects"])
    assert "preference (SASRec reading 2 liked item(s))" in text
    scores = sasrec.sequence_scores([["007", "001"]])[0]
    pool = [i for i in ctx.table.ids if i not in {"019", "007", "001"}]
    columns = sasrec.item_index(pool, unknown=0)
    expected = [pool[j] for j in np.argsort(-scores[columns], kind="stable")]
    assert ctx.bus.ids == expected
    assert ctx.bus.ids[-1] == "060"  # never interacted: unknown to the model, ranked last
    assert ctx.bus.score_kind == "preference"


def test_preference_falls_back_when_no_liked_item_can_be_read(ctx, sasrec):
    ctx.ranker = sasrec
    text = rank(ctx, "preference", prefer=["Lost Reel 2"])
    assert "Not found: 'Lost Reel 2'" in text and "No prefer title matched" in text
    assert ctx.bus.score_kind == "popularity"
    ctx.bus.reset()
    # Item 060 exists but was never interacted with, so the model cannot read it.
    text = rank(ctx, "preference", prefer=["Velvet Copper 60"])
    assert "No preferred title is known to the model" in text
    assert ctx.bus.score_kind == "popularity" and "060" not in ctx.bus
    ctx.bus.reset()
    text = rank(ctx, "preference")
    assert "needs liked titles" in text


def test_rank_input_parsing():
    assert parse_rank_input("similarity") == {"schema": "similarity", "prefer": [], "unwanted": []}
    assert parse_rank_input('{"schema": "preference", "prefer": "A;;B"}')["prefer"] == ["A", "B"]
    with pytest.raises(ToolError, match="not one of popularity, similarity, preference"):
        parse_rank_input({"schema": "rating"})
    with pytest.raises(ToolError, match="JSON object"):
        parse_rank_input("rank them well")
    with pytest.raises(ToolError, match="unknown key"):
        parse_rank_input({"schema": "popularity", "top": 3})


def test_map_titles_returns_ids_and_text(ctx):
    candidate_store(ctx, "Hamlet (1948);;Toy Story;;The Usual Suspects")
    ids, text = map_titles(ctx, 2)
    assert ids == ["007", "010"]
    assert text == "Here are recommendations: 1. Hamlet (1948); 2. Toy Story (1995)"
    assert map_titles(ctx, "10")[0] == ["007", "010", "001"]
    with pytest.raises(ToolError, match="number"):
        map_titles(ctx, "five")
    ctx.bus.set([], "test")
    assert map_titles(ctx) == ([], "No candidate is left to recommend.")


# ------------------------------------------------------------------------------ plans


GOOD_PLAN = [
    {"tool_name": "hard_filter", "input": "SELECT id FROM items WHERE tags LIKE '%Drama%'"},
    {"tool_name": "soft_filter", "input": "Hamlet (1948)"},
    {"tool_name": "rank", "input": {"schema": "similarity", "prefer": [], "unwanted": []}},
    {"tool_name": "map_titles", "input": 3},
]


def test_plan_schema_accepts_plans_and_rejects_unknown_tools():
    jsonschema.validate(GOOD_PLAN, PLAN_SCHEMA)
    jsonschema.validate({"plan": GOOD_PLAN}, PLAN_OBJECT_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{"tool_name": "search_web", "input": "x"}], PLAN_SCHEMA)
    assert PLAN_SCHEMA["items"]["properties"]["tool_name"]["enum"] == list(TOOL_NAMES)


def test_a_good_plan_has_no_problems_and_repeats_are_allowed(ctx):
    assert validate_plan(GOOD_PLAN, ctx.table) == []
    repeated = [GOOD_PLAN[0], {"tool_name": "hard_filter", "input": "SELECT * FROM items"}]
    assert validate_plan(repeated, ctx.table) == []


def test_unknown_tool_lists_the_valid_ones(ctx):
    problems = validate_plan('[{"tool_name": "web_search", "input": "x"}]', ctx.table)
    assert len(problems) == 1
    assert "unknown tool 'web_search'" in problems[0]
    for name in TOOL_NAMES:
        assert name in problems[0]
    with pytest.raises(PlanError, match="web_search") as error:
        parse_plan([{"tool_name": "web_search", "input": "x"}])
    assert error.value.problems == problems


def test_validator_refuses_modifying_sql_without_running_it(ctx):
    before = _snapshot(ctx.table)
    plan = [
        {"tool_name": "lookup", "input": "SELECT 1; DELETE FROM items"},
        {"tool_name": "hard_filter", "input": "DROP TABLE items"},
        {"tool_name": "hard_filter", "input": "WITH x AS (SELECT 1) DELETE FROM items"},
        {"tool_name": "hard_filter", "input": "SELECT title FROM items"},
        {"tool_name": "lookup", "input": "SELECT rating FROM items"},
    ]
    problems = validate_plan(plan, ctx.table)
    assert len(problems) == 5
    assert "step 1 (lookup)" in problems[0] and "2 statements" in problems[0]
    assert "step 2 (hard_filter)" in problems[1] and "DROP" in problems[1]
    assert "only a read-only SELECT" in problems[2]
    assert "id column" in problems[3]
    assert "unknown column 'rating'" in problems[4]
    pd.testing.assert_frame_equal(_snapshot(ctx.table), before)


def test_validator_reports_bus_order_problems(ctx):
    hard = {"tool_name": "hard_filter", "input": "SELECT id FROM items"}
    soft = {"tool_name": "soft_filter", "input": "Toy Story"}
    store = {"tool_name": "candidate_store", "input": "Toy Story;;Hamlet"}
    rank_step = {"tool_name": "rank", "input": {"schema": "popularity"}}
    mapping = {"tool_name": "map_titles", "input": 5}
    assert "before the soft filter" in " ".join(validate_plan([soft, hard], ctx.table))
    assert "store titles first" in " ".join(validate_plan([hard, store], ctx.table))
    after_map = validate_plan([mapping, rank_step], ctx.table)
    assert len(after_map) == 1 and "step 2 (rank) comes after map_titles" in after_map[0]
    lookup_after_map = [mapping, {"tool_name": "lookup", "input": "SELECT id FROM items"}]
    assert validate_plan(lookup_after_map, ctx.table) == []  # lookup does not use the bus


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ("not json", "not JSON"),
        ("{}", "JSON list"),
        ([], "no steps"),
        ([{"tool": "rank"}], "tool_name and input"),
        ([{"tool_name": "rank", "input": {"schema": "stars"}}], "not one of"),
        ([{"tool_name": "map_titles", "input": 0}], "positive number"),
        ([{"tool_name": "soft_filter", "input": ""}], "at least one title"),
    ],
)
def test_validator_reports_malformed_steps(ctx, plan, message):
    problems = validate_plan(plan, ctx.table)
    assert len(problems) == 1 and message in problems[0]


def test_executor_adds_map_and_records_sizes(ctx):
    plan = GOOD_PLAN[:3]
    track = execute_plan({"plan": plan}, ctx)
    assert [s.tool for s in track.steps] == ["hard_filter", "soft_filter", "rank", "map_titles"]
    assert track.map_added and track.steps[-1].added and not track.steps[0].added
    drama = ctx.table.run_select("SELECT COUNT(*) FROM items WHERE tags LIKE '%Drama%'").rows
    assert (track.steps[0].size_before, track.steps[0].size_after) == (60, drama[0][0])
    for previous, step in zip(track.steps, track.steps[1:], strict=False):
        assert step.size_before == previous.size_after
    assert track.recommended_ids and len(track.recommended_ids) == 5
    assert track.reply.startswith("Here are recommendations: 1. ")
    assert len(ctx.bus) == 60, "the executor clears the bus when the plan ends"
    text = track.as_text()
    assert "[added by the executor]" in text and f"60 -> {drama[0][0]}" in text


def test_executor_stops_at_the_first_error_by_default(ctx):
    plan = [
        {"tool_name": "hard_filter", "input": "SELECT id FROM items WHERE genre = 'Drama'"},
        {"tool_name": "rank", "input": "popularity"},
    ]
    track = execute_plan(plan, ctx)
    assert track.stopped and track.failed
    assert [s.tool for s in track.steps] == ["hard_filter"]
    assert "unknown column 'genre'" in track.steps[0].error
    assert track.steps[0].size_after == 60 and track.recommended_ids == []
    assert "ERROR: unknown column" in track.as_text()


def test_executor_can_continue_after_an_error(ctx):
    plan = [
        {"tool_name": "hard_filter", "input": "SELECT id FROM items WHERE genre = 'Drama'"},
        {"tool_name": "candidate_store", "input": "Toy Story;;Hamlet (1996)"},
    ]
    track = execute_plan(plan, ctx, stop_on_error=False)
    assert not track.stopped and track.failed
    assert [s.tool for s in track.steps] == ["hard_filter", "candidate_store", "map_titles"]
    assert track.recommended_ids == ["010", "006"]


def test_executor_runs_repeats_in_order_and_can_keep_the_bus(ctx):
    plan = [
        {"tool_name": "hard_filter", "input": "SELECT id FROM items WHERE tags LIKE '%Drama%'"},
        {"tool_name": "hard_filter", "input": "SELECT id FROM items WHERE release_year < 1950"},
        {"tool_name": "map_titles", "input": 50},
    ]
    track = execute_plan(plan, ctx, reset_bus=False)
    expected = ctx.table.run_select(
        "SELECT id FROM items WHERE tags LIKE '%Drama%' AND release_year < 1950", max_rows=None
    ).rows
    assert track.recommended_ids == [r[0] for r in expected]
    assert ctx.bus.ids == track.recommended_ids  # persistent bus
    assert not track.map_added
    assert track.steps[1].size_before == track.steps[0].size_after > track.steps[1].size_after


def test_executor_refuses_a_malformed_plan_before_running(ctx):
    with pytest.raises(PlanError, match="unknown tool"):
        execute_plan([GOOD_PLAN[0], {"tool_name": "delete_all", "input": ""}], ctx)
    assert len(ctx.bus) == 60 and ctx.bus.history == []


# ------------------------------------------------------------------------------ metrics


def test_hit_by_id_finds_the_first_turn():
    assert hit_by_id([["a", "b"], ["c", "t"], ["t"]], "t") == (True, 2)
    assert hit_by_id([["a"], []], "t") == (False, None)


def test_hit_and_average_turns_count_misses_as_six():
    sessions = [1, None, 3, 7, (True, 2)]  # 7 > 5 turns: a miss
    metrics = hit_at_k_and_at(sessions, max_turns=5)
    assert metrics.hit == pytest.approx(3 / 5)
    assert metrics.at == pytest.approx((1 + 6 + 3 + 6 + 2) / 5)
    assert metrics.n == 5
    assert metrics.hit_low <= metrics.hit <= metrics.hit_high
    assert metrics.at_low <= metrics.at <= metrics.at_high < 6.0 + 1e-9
    assert hit_at_k_and_at([None, None]).at == 6.0
    with pytest.raises(ValueError, match=">= 1"):
        hit_at_k_and_at([0])


def test_fuzzy_hit_follows_the_papers_rule_and_its_pitfall():
    reply = "Here are recommendations: 1. Toy Story (1995); 2. Heat (1995)"
    assert fuzzy_hit(reply, "Toy Story")
    assert fuzzy_hit("TOY-STORY!!", "toy story")  # case and punctuation ignored
    assert not fuzzy_hit(reply, "Fargo")
    # Pitfall: a short title matches inside another one.
    assert fuzzy_hit("Here are recommendations: 1. Titanic (1997)", "It")
    # Thresholds: the hit rule is strict (>), the leak rule is not (>=).
    text, title = "Something like a toyshop story?", "Toy Story"
    score = fuzz.partial_ratio("toystory", "somethinglikeatoyshopstory")
    assert 60 <= score <= 80
    assert leaks(text, title) and not fuzzy_hit(text, title)
    assert not fuzzy_hit(text, title, threshold=score) and leaks(text, title, threshold=score)
    assert not leaks("a film about spaceships", "Toy Story")


def test_one_turn_metrics():
    assert recall_at_k(["a", "b", "t"], "t", k=3) == 1.0
    assert recall_at_k(["a", "b", "t"], "t", k=2) == 0.0
    assert ranking_ndcg(1) == 1.0
    assert ranking_ndcg(3) == pytest.approx(0.5)
    assert ranking_ndcg(7) == pytest.approx(1 / 3)
    assert ranking_ndcg(None) == 0.0
    with pytest.raises(ValueError):
        ranking_ndcg(0)


# ------------------------------------------------------------------------------ baselines


def test_popular_and_random_recommenders(hand_ctx):
    table = hand_ctx.table
    assert popular_recommend(table, 3) == ["a", "b", "c"]
    assert popular_recommend(table, 3, exclude={"a", "c"}) == ["b", "d", "e"]
    first = random_recommend(table, 4, seed=1, exclude=["a"])
    assert first == random_recommend(table, 4, seed=1, exclude=["a"])
    assert len(set(first)) == 4 and "a" not in first
    draws = {tuple(random_recommend(table, 2, seed=s)) for s in range(10)}
    assert len(draws) > 1
    assert sorted(random_recommend(table, 99, seed=0)) == sorted(table.ids)


def test_build_context_uses_only_the_given_interactions(split):
    train_only = build_context(load_dataset(TINY), split.train)
    counts = split.train[ITEM].value_counts()
    top = popular_recommend(train_only.table, 1)[0]
    assert train_only.table.rows[top].visited_num == counts.max()
    assert TIMESTAMP in split.train  # the frame carries more columns; they are ignored
