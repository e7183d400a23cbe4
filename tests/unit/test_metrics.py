import math
import time

import numpy as np
import pandas as pd
import pytest

from recagents import metrics
from recagents.columns import ITEM, RANK, SCORE, USER
from recagents.metrics import (
    PairedBootstrapResult,
    bootstrap_ci,
    classification_ci,
    classification_metrics,
    paired_bootstrap,
    rank_by_score,
    ranking_metrics,
    summarize,
)


def _ranked(rows: dict[object, list[object]]) -> pd.DataFrame:
    """Build a ranked frame from {user: [item at rank 1, item at rank 2, ...]}."""
    records = [
        {USER: u, ITEM: item, SCORE: -float(r), RANK: r}
        for u, items in rows.items()
        for r, item in enumerate(items, start=1)
    ]
    return pd.DataFrame.from_records(records)


def _truth(rows: dict[object, list[object]]) -> pd.DataFrame:
    return pd.DataFrame([{USER: u, ITEM: i} for u, items in rows.items() for i in items])


def _row(frame: pd.DataFrame, user: object) -> pd.Series:
    return frame.set_index(USER).loc[user]


# --------------------------------------------------------------------------- hand-computed


def test_single_positive_at_rank_3_of_10() -> None:
    ranked = _ranked({1: list(range(100, 110))})
    truth = _truth({1: [102]})  # third item
    row = _row(ranking_metrics(ranked, truth), 1)
    assert row["hr@1"] == 0
    assert row["hr@5"] == 1
    assert row["hr@10"] == 1
    assert row["ndcg@1"] == 0
    assert row["ndcg@5"] == pytest.approx(0.5)  # 1 / log2(4)
    assert row["ndcg@10"] == pytest.approx(0.5)
    assert row["mrr"] == pytest.approx(1 / 3)
    assert row["recall@1"] == 0
    assert row["recall@5"] == 1
    assert row["precision@5"] == pytest.approx(0.2)
    assert row["precision@10"] == pytest.approx(0.1)


def test_column_names_and_order() -> None:
    ranked = _ranked({1: [10, 11]})
    truth = _truth({1: [10]})
    out = ranking_metrics(ranked, truth, ks=(10, 1), metrics=("ndcg", "mrr", "hr"))
    assert list(out.columns) == [USER, "ndcg@10", "ndcg@1", "mrr", "hr@10", "hr@1"]
    default = ranking_metrics(ranked, truth)
    expected = [USER] + [
        name
        for m in ("hr", "ndcg", "mrr", "recall", "precision")
        for name in ([m] if m == "mrr" else [f"{m}@{k}" for k in (1, 5, 10)])
    ]
    assert list(default.columns) == expected
    assert out.index.equals(pd.RangeIndex(len(out)))


def test_multi_relevant_ndcg_recall_precision() -> None:
    # Relevant: 'a' at rank 1, 'd' at rank 4, 'z' never ranked -> |R| = 3.
    ranked = _ranked({"u": ["a", "b", "c", "d", "e", "f"]})
    truth = _truth({"u": ["a", "d", "z"]})
    row = _row(ranking_metrics(ranked, truth, ks=(1, 2, 5)), "u")
    idcg5 = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert row["ndcg@5"] == pytest.approx((1 + 1 / math.log2(5)) / idcg5)
    assert row["ndcg@1"] == pytest.approx(1.0)  # IDCG@1 uses min(|R|, 1) = 1 position
    assert row["ndcg@2"] == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert row["recall@5"] == pytest.approx(2 / 3)
    assert row["recall@1"] == pytest.approx(1 / 3)
    assert row["precision@5"] == pytest.approx(2 / 5)
    assert row["precision@2"] == pytest.approx(1 / 2)
    assert row["hr@1"] == 1
    assert row["mrr"] == 1


def test_multi_relevant_no_top_hit() -> None:
    ranked = _ranked({7: [1, 2, 3, 4, 5]})
    truth = _truth({7: [2, 3]})
    row = _row(ranking_metrics(ranked, truth, ks=(1, 5)), 7)
    assert row["ndcg@1"] == 0
    assert row["ndcg@5"] == pytest.approx(
        (1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    )
    assert row["mrr"] == pytest.approx(0.5)
    assert row["recall@5"] == 1
    assert row["precision@5"] == pytest.approx(0.4)


def test_perfect_ranking_scores_one() -> None:
    ranked = _ranked({1: [5, 6, 7, 8]})
    truth = _truth({1: [5, 6]})
    row = _row(ranking_metrics(ranked, truth, ks=(1, 2, 10)), 1)
    for k in (1, 2, 10):
        assert row[f"ndcg@{k}"] == pytest.approx(1.0)
    assert row["recall@2"] == 1
    assert row["precision@2"] == 1
    assert row["precision@10"] == pytest.approx(0.2)  # denominator is K, not list length


def test_missing_user_scores_zero_and_extra_users_ignored() -> None:
    ranked = _ranked({1: [10, 11, 12], 3: [30, 31], 99: [1, 2]})
    truth = _truth({3: [31], 2: [20], 1: [10]})
    out = ranking_metrics(ranked, truth)
    assert out[USER].tolist() == [1, 2, 3]  # sorted, user 2 kept, user 99 dropped
    metric_cols = [c for c in out.columns if c != USER]
    assert (_row(out, 2)[metric_cols] == 0).all()
    assert _row(out, 1)["hr@1"] == 1
    assert _row(out, 3)["mrr"] == pytest.approx(0.5)


def test_relevant_item_outside_list_and_duplicate_truth_rows() -> None:
    ranked = _ranked({1: [10, 11, 12]})
    truth = pd.DataFrame({USER: [1, 1, 1], ITEM: [11, 11, 50]})
    row = _row(ranking_metrics(ranked, truth, ks=(5,)), 1)
    assert row["recall@5"] == pytest.approx(0.5)  # |R| = 2 after de-duplication
    assert row["mrr"] == pytest.approx(0.5)


def test_unsorted_rows_and_float_integral_ranks_accepted() -> None:
    ranked = _ranked({1: [10, 11, 12, 13], 2: [20, 21]}).sample(frac=1.0, random_state=0)
    truth = _truth({1: [12], 2: [20]})
    expected = ranking_metrics(ranked, truth)
    as_float = ranked.assign(**{RANK: ranked[RANK].astype(float)})
    pd.testing.assert_frame_equal(ranking_metrics(as_float, truth), expected)
    assert _row(expected, 1)["mrr"] == pytest.approx(1 / 3)


def test_empty_ranked_frame_gives_zeros() -> None:
    ranked = pd.DataFrame(
        {USER: pd.Series(dtype=int), ITEM: pd.Series(dtype=int), RANK: pd.Series(dtype=int)}
    )
    out = ranking_metrics(ranked, _truth({1: [1], 2: [2]}))
    assert len(out) == 2
    assert (out.drop(columns=USER).to_numpy() == 0).all()


@pytest.mark.parametrize(
    ("ranks", "message"),
    [
        ([1, 2, 2.5], "integers"),
        ([0, 1, 2], ">= 1"),
        ([-1, 1, 2], ">= 1"),
        ([1, 2, np.nan], "missing"),
        (["1", "2", "3"], "integers"),
        ([True, False, True], "integers"),
        ([1, 2, 2], "same rank"),
    ],
)
def test_bad_ranks_raise(ranks: list[object], message: str) -> None:
    ranked = pd.DataFrame({USER: [1, 1, 1], ITEM: [1, 2, 3], RANK: ranks})
    with pytest.raises(ValueError, match=message):
        ranking_metrics(ranked, _truth({1: [1]}))


def test_duplicate_pairs_and_bad_arguments_raise() -> None:
    dup = pd.DataFrame({USER: [1, 1], ITEM: [5, 5], RANK: [1, 2]})
    with pytest.raises(ValueError, match="duplicate"):
        ranking_metrics(dup, _truth({1: [5]}))
    ok = _ranked({1: [5, 6]})
    with pytest.raises(ValueError, match="missing column"):
        ranking_metrics(ok.drop(columns=RANK), _truth({1: [5]}))
    with pytest.raises(ValueError, match="missing column"):
        ranking_metrics(ok, pd.DataFrame({USER: [1]}))
    with pytest.raises(ValueError, match="unknown metric"):
        ranking_metrics(ok, _truth({1: [5]}), metrics=("auc",))
    with pytest.raises(ValueError, match="cutoff"):
        ranking_metrics(ok, _truth({1: [5]}), ks=(0,))


# --------------------------------------------------------------------------- RecBole


def _random_case(
    rng: np.random.Generator, n_users: int, n_items: int
) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray, np.ndarray]:
    """Random full rankings plus RecBole's (pos_index, pos_len) view of them."""
    users = np.arange(1000, 1000 + n_users)
    ranked_parts, truth_parts = [], []
    pos_index = np.zeros((n_users, n_items), dtype=bool)
    pos_len = np.zeros(n_users, dtype=np.int64)
    for row, user in enumerate(users):
        order = rng.permutation(n_items)  # order[j] is the item at rank j + 1
        relevant = rng.choice(n_items, size=rng.integers(1, 4), replace=False)
        ranked_parts.append(
            pd.DataFrame({USER: user, ITEM: order, RANK: np.arange(1, n_items + 1)})
        )
        truth_parts.append(pd.DataFrame({USER: user, ITEM: relevant}))
        pos_index[row] = np.isin(order, relevant)
        pos_len[row] = relevant.size
    return pd.concat(ranked_parts), pd.concat(truth_parts), pos_index, pos_len


@pytest.mark.parametrize("list_len", [30, 10])
def test_matches_recbole(monkeypatch: pytest.MonkeyPatch, list_len: int) -> None:
    rb = pytest.importorskip("recbole.evaluator.metrics")
    # RecBole 1.2.1's MRR/NDCG still use np.float, removed in numpy 1.24.
    monkeypatch.setattr(np, "float", float, raising=False)

    rng = np.random.default_rng(42)
    ranked, truth, pos_index, pos_len = _random_case(rng, n_users=50, n_items=30)
    # list_len=10 simulates a top-10 list: some relevant items are never ranked.
    ranked = ranked[ranked[RANK] <= list_len]
    pos_index = pos_index[:, :list_len]

    ks = (1, 5, 10)
    ours = ranking_metrics(ranked, truth, ks=ks)
    config = {"topk": list(ks), "metric_decimal_place": 4}
    theirs = {
        "hr": rb.Hit(config).metric_info(pos_index),
        "ndcg": rb.NDCG(config).metric_info(pos_index, pos_len),
        "mrr": rb.MRR(config).metric_info(pos_index),
        "recall": rb.Recall(config).metric_info(pos_index, pos_len),
        "precision": rb.Precision(config).metric_info(pos_index),
    }
    assert ours[USER].tolist() == list(range(1000, 1050))  # same row order as pos_index
    for metric in ("hr", "ndcg", "recall", "precision"):
        for k in ks:
            np.testing.assert_allclose(
                ours[f"{metric}@{k}"].to_numpy(), theirs[metric][:, k - 1], err_msg=metric
            )
    # RecBole's MRR@K is truncated at K; ours is over the whole list = RecBole at K = len.
    np.testing.assert_allclose(ours["mrr"].to_numpy(), theirs["mrr"][:, -1])
    assert (theirs["hr"][:, 0] != theirs["hr"][:, -1]).any()  # the case is not degenerate


def test_large_input_is_fast() -> None:
    rng = np.random.default_rng(0)
    n_users, n_items = 943, 1682
    ranks = np.argsort(rng.random((n_users, n_items)), axis=1) + 1
    ranked = pd.DataFrame(
        {
            USER: np.repeat(np.arange(n_users), n_items),
            ITEM: np.tile(np.arange(n_items), n_users),
            RANK: ranks.ravel(),
        }
    )
    truth = pd.DataFrame({USER: np.arange(n_users), ITEM: rng.integers(0, n_items, n_users)})
    start = time.perf_counter()
    out = ranking_metrics(ranked, truth, ks=(1, 5, 10, 100))
    elapsed = time.perf_counter() - start
    assert len(out) == n_users
    assert elapsed < 5.0
    # Each positive's rank is uniform on 1..n_items: MRR = H(n_items) / n_items on average.
    expected_mrr = np.sum(1 / np.arange(1, n_items + 1)) / n_items
    assert out["mrr"].mean() == pytest.approx(expected_mrr, rel=0.5)
    assert out["hr@100"].mean() == pytest.approx(100 / n_items, abs=0.03)


# --------------------------------------------------------------------------- rank_by_score


def test_rank_by_score_orders_scores() -> None:
    frame = pd.DataFrame(
        {
            USER: [2, 2, 2, 1, 1],
            ITEM: [20, 21, 22, 10, 11],
            SCORE: [0.1, 0.9, 0.5, 3.0, np.nan],
        }
    )
    out = rank_by_score(frame)
    assert out[RANK].dtype == np.int64
    assert out[[USER, ITEM, RANK]].values.tolist() == [
        [1, 10, 1],
        [1, 11, 2],
        [2, 21, 1],
        [2, 22, 2],
        [2, 20, 3],
    ]  # NaN ranked last
    asc = rank_by_score(frame, ascending=True)
    assert asc[asc[USER] == 2][ITEM].tolist() == [20, 22, 21]
    assert asc[asc[USER] == 1][ITEM].tolist() == [10, 11]


def test_rank_by_score_replaces_rank_and_rejects_duplicates() -> None:
    frame = pd.DataFrame({USER: [1, 1], ITEM: [1, 2], SCORE: [0.0, 1.0], RANK: [1, 2]})
    assert rank_by_score(frame)[ITEM].tolist() == [2, 1]
    with pytest.raises(ValueError, match="duplicate"):
        rank_by_score(pd.DataFrame({USER: [1, 1], ITEM: [1, 1], SCORE: [0.0, 1.0]}))
    with pytest.raises(ValueError, match="missing column"):
        rank_by_score(pd.DataFrame({USER: [1], ITEM: [1]}))


def _tied_candidates(n_users: int = 1, n_items: int = 10) -> pd.DataFrame:
    # Positive item (0) listed first, as a naively built candidate list would have it.
    return pd.DataFrame(
        {
            USER: np.repeat(np.arange(n_users), n_items),
            ITEM: np.tile(np.arange(n_items), n_users),
            SCORE: 1.0,
        }
    )


def test_rank_by_score_ties_without_seed_follow_row_order() -> None:
    out = rank_by_score(_tied_candidates())
    assert out[ITEM].tolist() == list(range(10))
    assert out[RANK].tolist() == list(range(1, 11))


def test_rank_by_score_seeded_ties_do_not_favour_the_positive() -> None:
    frame = _tied_candidates()
    positive_ranks = []
    for seed in range(50):
        out = rank_by_score(frame, seed=seed)
        positive_ranks.append(int(out.loc[out[ITEM] == 0, RANK].iloc[0]))
        pd.testing.assert_frame_equal(out, rank_by_score(frame, seed=seed))
    assert len(set(positive_ranks)) > 3
    assert positive_ranks.count(1) < 25


def test_rank_by_score_seeded_ties_give_chance_level_metrics() -> None:
    frame = _tied_candidates(n_users=500, n_items=10)
    truth = pd.DataFrame({USER: np.arange(500), ITEM: 0})
    seeded = ranking_metrics(rank_by_score(frame, seed=1), truth, ks=(1,))
    assert seeded["hr@1"].mean() == pytest.approx(0.1, abs=0.04)
    unseeded = ranking_metrics(rank_by_score(frame), truth, ks=(1,))
    assert unseeded["hr@1"].mean() == 1.0  # row order puts the positive first


def test_rank_by_score_seed_never_overrides_scores() -> None:
    frame = pd.DataFrame({USER: 1, ITEM: np.arange(6), SCORE: [1, 1, 2, 2, 0, 0]})
    for seed in range(10):
        out = rank_by_score(frame, seed=seed)
        assert set(out[ITEM].iloc[:2]) == {2, 3}
        assert set(out[ITEM].iloc[4:]) == {4, 5}


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_ci_contains_mean_and_is_deterministic() -> None:
    values = np.random.default_rng(0).random(200)
    mean, low, high = bootstrap_ci(values, n_boot=500, seed=3)
    assert mean == pytest.approx(values.mean())
    assert low < mean < high
    assert bootstrap_ci(values, n_boot=500, seed=3) == (mean, low, high)
    assert bootstrap_ci(values, n_boot=500, seed=4) != (mean, low, high)
    _, low90, high90 = bootstrap_ci(values, n_boot=500, ci=0.5, seed=3)
    assert high90 - low90 < high - low


def test_bootstrap_ci_narrows_with_more_samples() -> None:
    rng = np.random.default_rng(1)
    _, low_small, high_small = bootstrap_ci(rng.random(50), n_boot=500)
    _, low_big, high_big = bootstrap_ci(rng.random(5000), n_boot=500)
    assert high_big - low_big < (high_small - low_small) / 3


def test_bootstrap_ci_edge_cases() -> None:
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)
    assert bootstrap_ci([1.0]) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="empty"):
        bootstrap_ci([])
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_ci([1.0, np.nan])
    with pytest.raises(ValueError, match="ci"):
        bootstrap_ci([1.0, 2.0], ci=1.5)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_ci([1.0, 2.0], n_boot=0)


def test_paired_bootstrap_identical_arrays() -> None:
    a = np.random.default_rng(2).random(100)
    result = paired_bootstrap(a, a.copy(), n_boot=500)
    assert isinstance(result, PairedBootstrapResult)
    assert result.diff == 0
    assert result.low == 0 and result.high == 0
    assert result.p_value == pytest.approx(1.0)


def test_paired_bootstrap_clear_difference() -> None:
    rng = np.random.default_rng(3)
    b = rng.random(300)
    a = b + 0.2 + rng.normal(0, 0.1, size=300)
    diff, low, high, p_value = paired_bootstrap(a, b, n_boot=1000, seed=0)
    assert diff == pytest.approx((a - b).mean())
    assert 0 < low < diff < high
    assert p_value < 0.01
    reverse = paired_bootstrap(b, a, n_boot=1000, seed=0)
    assert reverse.diff == pytest.approx(-diff)
    assert reverse.high < 0


def test_paired_bootstrap_no_difference_is_not_significant() -> None:
    rng = np.random.default_rng(4)
    b = rng.random(300)
    noise = rng.normal(0, 1, 300)
    a = b + noise - noise.mean() + 0.01  # true mean difference 0.01, standard error ~0.06
    result = paired_bootstrap(a, b, n_boot=1000, seed=0)
    assert result.low < 0 < result.high
    assert result.diff == pytest.approx(0.01)
    assert result.p_value > 0.5
    assert paired_bootstrap(a, b, n_boot=1000, seed=0) == result
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap(a, b[:-1])


def test_summarize() -> None:
    rng = np.random.default_rng(5)
    per_user = pd.DataFrame(
        {
            USER: np.arange(100),
            "hr@10": rng.integers(0, 2, 100).astype(float),
            "mrr": rng.random(100),
        }
    )
    per_user.loc[0, "mrr"] = np.nan
    out = summarize(per_user, n_boot=200, seed=1)
    assert list(out.columns) == ["metric", "mean", "low", "high", "n"]
    assert out["metric"].tolist() == ["hr@10", "mrr"]
    assert out["n"].tolist() == [100, 99]
    assert out.loc[0, "mean"] == pytest.approx(per_user["hr@10"].mean())
    assert out.loc[1, "mean"] == pytest.approx(per_user["mrr"].mean())
    assert ((out["low"] <= out["mean"]) & (out["mean"] <= out["high"])).all()
    assert out.loc[0, ["mean", "low", "high"]].tolist() == list(
        bootstrap_ci(per_user["hr@10"], n_boot=200, seed=1)
    )


def test_summarize_of_ranking_metrics() -> None:
    ranked = _ranked({1: [1, 2, 3], 2: [4, 5, 6]})
    per_user = ranking_metrics(ranked, _truth({1: [1], 2: [6]}), ks=(1,))
    out = summarize(per_user, n_boot=50).set_index("metric")
    assert out.loc["hr@1", "mean"] == pytest.approx(0.5)
    assert out.loc["mrr", "mean"] == pytest.approx((1 + 1 / 3) / 2)


# --------------------------------------------------------------------------- classification


@pytest.mark.parametrize("seed", range(5))
def test_classification_metrics_match_sklearn(seed: int) -> None:
    skm = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 2, 200)
    y_pred = rng.integers(0, 2, 200)
    ours = classification_metrics(y_true, y_pred)
    assert ours["accuracy"] == pytest.approx(skm.accuracy_score(y_true, y_pred))
    assert ours["precision"] == pytest.approx(skm.precision_score(y_true, y_pred))
    assert ours["recall"] == pytest.approx(skm.recall_score(y_true, y_pred))
    assert ours["f1"] == pytest.approx(skm.f1_score(y_true, y_pred))
    assert classification_metrics(y_true.astype(bool), list(y_pred.astype(bool))) == ours


def test_classification_metrics_zero_division_is_zero() -> None:
    skm = pytest.importorskip("sklearn.metrics")
    cases = [
        ([1, 0, 1, 0], [0, 0, 0, 0]),  # nothing predicted positive: precision 0/0
        ([0, 0, 0, 0], [0, 0, 0, 0]),  # no positives at all: precision and recall 0/0
        ([0, 0, 0], [1, 1, 0]),  # no true positives: recall 0/0
    ]
    for y_true, y_pred in cases:
        ours = classification_metrics(y_true, y_pred)
        for name, fn in [
            ("precision", skm.precision_score),
            ("recall", skm.recall_score),
            ("f1", skm.f1_score),
        ]:
            assert ours[name] == fn(y_true, y_pred, zero_division=0.0), (name, y_true, y_pred)
    assert classification_metrics([0, 0, 0, 0], [0, 0, 0, 0]) == {
        "accuracy": 1.0,
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
    }


def test_classification_metrics_validation() -> None:
    with pytest.raises(ValueError, match="binary"):
        classification_metrics([0, 1, 2], [0, 1, 1])
    with pytest.raises(ValueError, match="binary"):
        classification_metrics(["yes", "no"], [1, 0])
    with pytest.raises(ValueError, match="length"):
        classification_metrics([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="empty"):
        classification_metrics([], [])


def test_classification_ci() -> None:
    rng = np.random.default_rng(6)
    y_true = rng.integers(0, 2, 300)
    y_pred = np.where(rng.random(300) < 0.8, y_true, 1 - y_true)
    out = classification_ci(y_true, y_pred, n_boot=300, seed=2)
    assert out["metric"].tolist() == ["accuracy", "precision", "recall", "f1"]
    point = classification_metrics(y_true, y_pred)
    assert out.set_index("metric")["mean"].to_dict() == pytest.approx(point)
    assert ((out["low"] < out["mean"]) & (out["mean"] < out["high"])).all()
    assert (out["n"] == 300).all()
    pd.testing.assert_frame_equal(out, classification_ci(y_true, y_pred, n_boot=300, seed=2))
    # The bootstrap statistic is the metric itself, so check one replicate by hand.
    idx = np.random.default_rng(2).integers(0, 300, size=(300, 300))
    accs = (y_true[idx] == y_pred[idx]).mean(axis=1)
    assert out.loc[0, "low"] == pytest.approx(np.quantile(accs, 0.025))


def test_summarize_methods_stacks_summaries_in_order():
    rng = np.random.default_rng(0)
    users = [f"u{i}" for i in range(40)]
    per_user = {
        name: pd.DataFrame({USER: users, "hr@1": rng.integers(0, 2, 40).astype(float)})
        for name in ("b", "a")
    }
    table = metrics.summarize_methods(per_user, n_boot=200, seed=1)
    assert list(table.columns) == ["method", "metric", "mean", "low", "high", "n"]
    assert table["method"].tolist() == ["b", "a"]
    expected = metrics.summarize(per_user["a"], n_boot=200, seed=1)
    assert table.iloc[1]["mean"] == expected.iloc[0]["mean"]
    assert table.iloc[1]["low"] == expected.iloc[0]["low"]


def test_format_interval_renders_mean_and_bounds():
    summary = pd.DataFrame({"mean": [0.5], "low": [0.41234], "high": [0.6]})
    assert metrics.format_interval(summary).tolist() == ["0.500 [0.412, 0.600]"]
    assert metrics.format_interval(summary, digits=1).tolist() == ["0.5 [0.4, 0.6]"]


def test_compare_to_reference_is_paired_and_aligned_by_user():
    users = [f"u{i}" for i in range(50)]
    reference = pd.DataFrame({USER: users, "ndcg@10": np.linspace(0, 1, 50)})
    better = pd.DataFrame({USER: users[::-1], "ndcg@10": np.linspace(0, 1, 50)[::-1] + 0.1})
    table = metrics.compare_to_reference(
        {"ref": reference, "better": better, "same": reference.copy()},
        "ref",
        "ndcg@10",
        n_boot=300,
        seed=0,
    )
    assert table["method"].tolist() == ["better", "same"]
    row = table.set_index("method").loc["better"]
    assert row["diff"] == pytest.approx(0.1)
    assert row["low"] == pytest.approx(0.1) and row["p_value"] < 0.01
    assert table.set_index("method").loc["same", "diff"] == 0.0
    with pytest.raises(KeyError):
        metrics.compare_to_reference({"a": reference}, "missing", "ndcg@10")
    with pytest.raises(ValueError, match="different users"):
        metrics.compare_to_reference({"ref": reference, "x": reference.iloc[:10]}, "ref", "ndcg@10")


def test_pick_interval_selects_exactly_one_row():
    summary = pd.DataFrame(
        {
            "method": ["Pop", "Pop", "BPR"],
            "metric": ["ndcg@10"] * 3,
            "protocol": ["1+9", "1+19", "1+9"],
            "mean": [0.61234, 0.5, 0.7],
            "low": [0.6, 0.4, 0.65],
            "high": [0.62, 0.6, 0.75],
        }
    )
    assert metrics.pick_interval(summary, "Pop", "ndcg@10", protocol="1+9") == [0.6123, 0.6, 0.62]
    with pytest.raises(KeyError, match="2 rows"):
        metrics.pick_interval(summary, "Pop", "ndcg@10")
    with pytest.raises(KeyError, match="0 rows"):
        metrics.pick_interval(summary, "SASRec", "ndcg@10")


# --------------------------------------------------------------------------- power (hand-computed)

# z_0.975 + z_0.8 = 1.959964 + 0.841621
_FACTOR = 2.801585


def test_min_detectable_effect_matches_the_formula_by_hand():
    assert metrics.min_detectable_effect(100, 1.0) == pytest.approx(_FACTOR / 10, abs=1e-6)
    # a proportion of 0.5 has sd 0.5: 2.801585 * 0.5 / 5
    assert metrics.min_detectable_effect(25, proportion=0.5) == pytest.approx(0.280158, abs=1e-6)
    # p = 0.1: sd 0.3, n = 36: 2.801585 * 0.3 / 6
    assert metrics.min_detectable_effect(36, proportion=0.1) == pytest.approx(0.140079, abs=1e-6)
    # alpha 0.01, power 0.9: (2.575829 + 1.281552) * 2 / 4
    assert metrics.min_detectable_effect(16, 2.0, alpha=0.01, power=0.9) == pytest.approx(
        1.928691, abs=1e-6
    )
    # quadrupling n halves the MDE
    assert metrics.min_detectable_effect(400, 1.0) == pytest.approx(
        metrics.min_detectable_effect(100, 1.0) / 2
    )


def test_paired_min_detectable_effect_uses_the_spread_of_the_differences():
    # d = [1, 0, 1, -1]: sd (ddof=1) = sqrt(2.75 / 3) = 0.957427; 2.801585 * 0.957427 / 2
    mde = metrics.paired_min_detectable_effect([1, 2, 3, 4], [0, 2, 2, 5])
    assert mde == pytest.approx(1.341152, abs=1e-5)
    # a constant shift has no spread: any true difference is detectable
    assert metrics.paired_min_detectable_effect([1, 2, 3], [0, 1, 2]) == 0.0
    assert metrics.paired_min_detectable_effect([1.0], [0.0]) == math.inf


def test_interval_half_width_and_its_mde():
    assert metrics.interval_half_width(0.2, 0.6) == pytest.approx(0.2)
    # se = 0.2 / 1.959964; MDE = 2.801585 * se = 1.429406 * 0.2
    assert metrics.interval_min_detectable_effect(0.2, 0.6) == pytest.approx(0.285881, abs=1e-6)
    assert metrics.interval_min_detectable_effect(0.5, 0.5) == 0.0
    assert metrics.power_fields(0.2, 0.6, 10) == {"n": 10, "half_width": 0.2, "mde": 0.2859}


def test_all_equal_min_n_is_the_rule_of_three():
    # ln(0.05) / ln(0.5) = 4.32 -> 5; ln(0.05) / ln(0.95) = 58.4 -> 59
    assert metrics.all_equal_min_n(0.5) == 5
    assert metrics.all_equal_min_n(0.05) == 59
    assert metrics.all_equal_min_n(0.01) == 299  # about 3 / 0.01
    # at that n, an all-zero sample is less likely than alpha under the effect; one fewer is not
    n = metrics.all_equal_min_n(0.2333)
    assert (1 - 0.2333) ** n <= 0.05 < (1 - 0.2333) ** (n - 1)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: metrics.min_detectable_effect(0, 1.0), "n must be at least 1"),
        (lambda: metrics.min_detectable_effect(5, 1.0, proportion=0.5), "exactly one"),
        (lambda: metrics.min_detectable_effect(5), "exactly one"),
        (lambda: metrics.min_detectable_effect(5, -1.0), "sd must be non-negative"),
        (lambda: metrics.min_detectable_effect(5, proportion=1.5), r"proportion must be in"),
        (lambda: metrics.min_detectable_effect(5, 1.0, alpha=1.0), "alpha must be in"),
        (lambda: metrics.min_detectable_effect(5, 1.0, power=0.0), "power must be in"),
        (lambda: metrics.paired_min_detectable_effect([1, 2], [1]), "same length"),
        (lambda: metrics.interval_half_width(0.6, 0.2), "below its lower end"),
        (lambda: metrics.all_equal_min_n(1.0), "effect must be in"),
        (lambda: metrics.power_fields(0.1, 0.2, 0), "n must be at least 1"),
    ],
)
def test_power_helpers_reject_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()
