"""Tests of recagents.compare: the shared protocol, adapters, leaderboard, bias and cost.

The pure parts run on hand-made frames with known answers. The LLM adapters run against the
scripted server (tests/scripted_server.py) ONLY to inject unusable replies and check that
they are counted, never dropped, and that every frame still covers the shared candidates.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scripted_server import ScriptedServer, reply, sequential_client

from recagents.baselines import TrainConfig
from recagents.columns import ITEM, LABEL, RANK, SCORE, USER
from recagents.compare.adapters import run_baseline, run_paper
from recagents.compare.bias import (
    ORDERS,
    gini,
    popularity_bias,
    position_sensitivity,
    reorder_candidates,
    shared_rankers,
)
from recagents.compare.cost import (
    COST_QUANTITIES,
    cost_per_user,
    cost_scaling,
    scaling_figure,
    scaling_runner,
)
from recagents.compare.leaderboard import leaderboard
from recagents.compare.protocol import Protocol, check_frame, shared_protocol, status_table
from recagents.data.datasets import POSITION, Dataset
from recagents.llm.runlog import RunLog
from recagents.papers.afl.entry import afl_frame
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.agentcf.subsets import shared_subset
from recagents.papers.interecagent.entry import target_rank_frame
from recagents.protocol import Ranking, RunOptions

QUICK = TrainConfig(epochs=1, stopping_step=1)

# --------------------------------------------------------------------------- helpers


def _frame(orders: dict[str, list[str]]) -> pd.DataFrame:
    """A ranking frame from each user's items, best first."""
    rows = []
    for user, items in orders.items():
        for rank, item in enumerate(items, start=1):
            rows.append((user, item, float(len(items) - rank + 1), rank))
    return pd.DataFrame(rows, columns=[USER, ITEM, SCORE, RANK])


def _candidates(lists: dict[str, list[str]], targets: dict[str, str]) -> pd.DataFrame:
    rows = []
    for user, items in lists.items():
        for position, item in enumerate(items):
            rows.append((user, item, int(item == targets[user]), position))
    return pd.DataFrame(rows, columns=[USER, ITEM, LABEL, POSITION])


def _calls(rows: list[tuple[str, bool, int, int, float]]) -> pd.DataFrame:
    log = RunLog()
    for phase, ok, prompt, completion, latency in rows:
        log.calls.append(
            {"phase": phase, "kind": "rank", "ok": ok, "failure": None if ok else "bad",
             "cached": False, "prompt_tokens": prompt, "completion_tokens": completion,
             "latency_s": latency, "reasks": 0}
        )  # fmt: skip
    return log.calls_frame()


USERS = ["u1", "u2", "u3", "u4"]
TRUTH = pd.DataFrame({USER: USERS, ITEM: ["t"] * 4})


# --------------------------------------------------------------------------- leaderboard


def test_leaderboard_known_means_and_paired_test() -> None:
    first = _frame({u: ["t", "a", "b"] for u in USERS})  # target always first
    second = _frame({u: ["a", "t", "b"] for u in USERS})  # always second
    table = leaderboard({"Pop": first, "LLM": second}, TRUTH, ks=(1, 2), n_boot=200, seed=0)
    means = table.set_index(["method", "metric"])["mean"]
    assert means[("Pop", "ndcg@1")] == 1.0
    assert means[("LLM", "ndcg@1")] == 0.0
    assert means[("LLM", "ndcg@2")] == pytest.approx(1 / math.log2(3))
    assert means[("LLM", "hr@2")] == 1.0
    assert set(table["reference"]) == {"Pop"}  # the best classic baseline
    llm = table[(table["method"] == "LLM") & (table["metric"] == "ndcg@1")].iloc[0]
    assert llm["diff"] == -1.0
    assert llm["diff_low"] == llm["diff_high"] == -1.0  # every user loses 1
    assert llm["p_value"] == pytest.approx(1 / 200)  # no resample reaches 0: the floor 1/n_boot
    same = table[(table["method"] == "LLM") & (table["metric"] == "hr@2")].iloc[0]
    assert same["diff"] == 0.0 and same["p_value"] == 1.0
    assert table[table["method"] == "Pop"]["p_value"].isna().all()


def test_leaderboard_reference_choice() -> None:
    good = _frame({u: ["t", "a"] for u in USERS})
    bad = _frame({u: ["a", "t"] for u in USERS})
    # No classic baseline: the best method is the reference.
    table = leaderboard({"X": bad, "Y": good}, TRUTH, ks=(1,), n_boot=50)
    assert set(table["reference"]) == {"Y"}
    # A classic baseline is preferred to a better LLM method, and an explicit one wins.
    table = leaderboard({"LLM": good, "Random": bad}, TRUTH, ks=(1,), n_boot=50)
    assert set(table["reference"]) == {"Random"}
    table = leaderboard({"LLM": good, "Random": bad}, TRUTH, ks=(1,), n_boot=50, reference="LLM")
    assert set(table["reference"]) == {"LLM"}


# --------------------------------------------------------------------------- bias


def test_gini() -> None:
    assert gini([3, 3, 3, 3]) == 0.0
    assert gini([0, 0, 0, 8]) == pytest.approx(3 / 4)
    assert gini([]) == 0.0 and gini([0, 0]) == 0.0


def test_popularity_bias_toy() -> None:
    train = pd.DataFrame({USER: ["x"] * 6, ITEM: ["p"] * 4 + ["q"] * 2})  # p: 4, q: 2, r: 0
    truth = pd.DataFrame({USER: ["u1", "u2"], ITEM: ["q", "r"]})
    frames = {
        "Pop": _frame({"u1": ["p", "q", "r"], "u2": ["p", "q", "r"]}),
        "Niche": _frame({"u1": ["r", "q", "p"], "u2": ["r", "p", "q"]}),
    }
    table = popularity_bias(frames, train, k=1, truth=truth).set_index("method")
    assert table.loc["Ground truth", "avg_pop"] == 1.0  # (2 + 0) / 2
    assert table.loc["Pop", "avg_pop"] == 4.0
    assert table.loc["Pop", "pop_ratio"] == 4.0
    assert table.loc["Niche", "avg_pop"] == 0.0
    assert table.loc["Pop", "coverage"] == pytest.approx(1 / 3)
    assert table.loc["Ground truth", "coverage"] == pytest.approx(2 / 3)
    assert table.loc["Pop", "gini"] == pytest.approx(gini([2, 0, 0]))
    assert table.loc["Ground truth", "gini"] == pytest.approx(gini([0, 1, 1]))
    two = popularity_bias(frames, train, k=2).set_index("method")
    assert "Ground truth" not in two.index and np.isnan(two.loc["Pop", "pop_ratio"])
    assert two.loc["Pop", "avg_pop"] == 3.0


def _toy_candidates(n_users: int = 3, n: int = 6) -> pd.DataFrame:
    lists = {f"u{k}": [f"i{(k + j) % 9}" for j in range(n)] for k in range(n_users)}
    return _candidates(lists, {u: items[0] for u, items in lists.items()})


def _by_id_ranker(candidates: pd.DataFrame) -> pd.DataFrame:
    """Order-invariant: rank by item id, whatever the display order."""
    frame = candidates[[USER, ITEM]].copy()
    frame[SCORE] = -frame[ITEM].str[1:].astype(float)
    frame[RANK] = frame.groupby(USER)[SCORE].rank(ascending=False, method="first").astype(int)
    return frame


def _first_shown_ranker(candidates: pd.DataFrame) -> pd.DataFrame:
    """Maximally order-sensitive: the rank is the display position."""
    frame = candidates[[USER, ITEM]].copy()
    frame[RANK] = candidates[POSITION].to_numpy() + 1
    frame[SCORE] = -frame[RANK].astype(float)
    return frame


def test_reorder_candidates() -> None:
    candidates = _toy_candidates()
    for order in ORDERS:
        shown = reorder_candidates(candidates, order, seed=1)
        merged = shown.merge(candidates, on=[USER, ITEM, LABEL], suffixes=("", "_given"))
        assert len(merged) == len(candidates)
        assert all(sorted(g) == list(range(6)) for _, g in shown.groupby(USER)[POSITION])
    reversed_ = reorder_candidates(candidates, "reversed")
    merged = reversed_.merge(candidates, on=[USER, ITEM], suffixes=("", "_given"))
    assert (merged[POSITION] == 5 - merged[f"{POSITION}_given"]).all()
    with pytest.raises(ValueError, match="order"):
        reorder_candidates(candidates, "sideways")  # type: ignore[arg-type]


def test_position_sensitivity_invariant_and_first_shown() -> None:
    candidates = _toy_candidates()
    invariant = position_sensitivity(_by_id_ranker, candidates, k=3).set_index("order")
    assert invariant["kendall_tau"].tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert (invariant["overlap@3"] == 1.0).all()
    assert (invariant["top1_changed"] == 0.0).all()
    assert list(invariant.index) == list(ORDERS)
    sensitive = position_sensitivity(_first_shown_ranker, candidates, k=3).set_index("order")
    assert sensitive.loc["given", "kendall_tau"] == pytest.approx(1.0)
    assert sensitive.loc["reversed", "kendall_tau"] == pytest.approx(-1.0)
    assert sensitive.loc["reversed", "overlap@3"] == 0.0
    assert sensitive.loc["reversed", "top1_changed"] == 1.0
    per_user = position_sensitivity(
        _first_shown_ranker, candidates, orders=("reversed",), per_user=True
    )
    assert len(per_user) == 3 and set(per_user["order"]) == {"reversed"}


def _toy_protocol(n_users: int = 3) -> Protocol:
    candidates = _toy_candidates(n_users)
    users = sorted(candidates[USER].unique())
    return Protocol(None, None, users, candidates, seed=0, n_negatives=5)  # type: ignore[arg-type]


def test_for_users_keeps_only_their_candidates() -> None:
    protocol = _toy_protocol()
    two = protocol.for_users(["u2", "u0"])
    assert two.users == ["u0", "u2"]
    assert set(two.candidates[USER]) == {"u0", "u2"} and len(two.candidates) == 12
    with pytest.raises(ValueError, match="unknown"):
        protocol.for_users(["u0", "nobody"])
    with pytest.raises(ValueError, match="some of"):
        protocol.for_users([])


def test_shared_rankers_run_the_adapter_once_per_order_for_all_its_methods() -> None:
    protocol = _toy_protocol()
    seen: list[list[str]] = []

    def adapter(p: Protocol) -> dict[str, Ranking]:
        seen.append(p.candidates[ITEM].tolist())
        status = pd.DataFrame({USER: p.users, "status": "ok"})
        return {
            name: Ranking(name, ranker(p.candidates), status, RunLog(), 0.0)
            for name, ranker in (("by id", _by_id_ranker), ("first shown", _first_shown_ranker))
        }

    rankers = shared_rankers(adapter, protocol, ["by id", "first shown"])
    table = pd.concat(
        [position_sensitivity(rank, protocol.candidates, k=3).assign(method=name)
         for name, rank in rankers.items()]
    ).set_index(["method", "order"])  # fmt: skip
    assert len(seen) == len(ORDERS)  # one adapter run per order, shared by both methods
    assert table.loc[("by id", "reversed"), "kendall_tau"] == pytest.approx(1.0)
    assert table.loc[("first shown", "reversed"), "kendall_tau"] == pytest.approx(-1.0)
    with pytest.raises(KeyError, match="not 'other'"):
        shared_rankers(adapter, protocol, ["other"])["other"](protocol.candidates)


def test_shared_rankers_in_context_rerun_only_the_probed_users_order() -> None:
    protocol = _toy_protocol()
    probe = protocol.for_users(protocol.users[:2])
    shown_to_adapter: list[pd.DataFrame] = []

    def adapter(p: Protocol) -> dict[str, Ranking]:
        shown_to_adapter.append(p.candidates)
        status = pd.DataFrame({USER: p.users, "status": "ok"})
        frame = _first_shown_ranker(p.candidates)
        return {"first shown": Ranking("first shown", frame, status, RunLog(), 0.0)}

    rank = shared_rankers(adapter, probe, ["first shown"], context=protocol)["first shown"]
    given = rank(reorder_candidates(probe.candidates, "given"))
    reversed_ = rank(reorder_candidates(probe.candidates, "reversed"))
    # the adapter saw every user of the context, the others always in their saved order
    saved, first, second = protocol.candidates, *shown_to_adapter
    assert first[[USER, ITEM]].equals(saved[[USER, ITEM]])  # "given" is the main run itself
    others = ~second[USER].isin(probe.users)
    assert (
        second[others][[USER, ITEM]]
        .reset_index(drop=True)
        .equals(saved[~saved[USER].isin(probe.users)][[USER, ITEM]].reset_index(drop=True))
    )
    assert pd.unique(second[USER]).tolist() == pd.unique(saved[USER]).tolist()
    # only the probed users come back, and their order was really reversed
    assert set(given[USER]) == set(reversed_[USER]) == set(probe.users)
    for user in probe.users:
        top_given = given[(given[USER] == user) & (given[RANK] == 1)][ITEM].item()
        top_reversed = reversed_[(reversed_[USER] == user) & (reversed_[RANK] == 1)][ITEM].item()
        assert top_given != top_reversed
    with pytest.raises(ValueError, match="every user"):
        shared_rankers(adapter, protocol, ["first shown"], context=probe)


# --------------------------------------------------------------------------- cost


def test_cost_per_user_arithmetic() -> None:
    calls = _calls([("rank", True, 1000, 100, 1.5), ("rank", False, 500, 50, 0.5)])
    table = cost_per_user(
        {"LLM": calls, "Pop": RunLog().calls_frame()},
        n_users=2,
        price_model="gpt-4o-mini",
        wall_s={"LLM": 4.0, "Pop": 1.0},
    ).set_index("method")
    llm = table.loc["LLM"]
    assert llm["calls"] == 2 and llm["failed"] == 1
    assert llm["prompt_tokens"] == 1500 and llm["completion_tokens"] == 150
    assert llm["endpoint_s"] == pytest.approx(2.0)
    usd = (1500 * 0.15 + 150 * 0.60) / 1e6
    assert llm["usd"] == pytest.approx(usd)
    assert llm["usd_per_user"] == pytest.approx(usd / 2)
    assert llm["calls_per_user"] == 1.0 and llm["wall_s_per_user"] == 2.0
    assert table.loc["Pop", "calls"] == 0 and table.loc["Pop", "usd"] == 0.0
    per_method = cost_per_user({"LLM": calls}, n_users={"LLM": 4})
    assert per_method["prompt_tokens_per_user"].iloc[0] == 375
    with pytest.raises(ValueError, match="price"):
        cost_per_user({"LLM": calls}, 2, price_model="no-such-model")


def _measured(n_users: int, n_candidates: int) -> dict[str, Ranking]:
    """Hand-made runs whose cost grows as users x candidates (no model involved)."""
    log = RunLog()
    log.calls.extend(
        _calls([("rank", True, 10 * n_candidates, 5, 0.1)] * n_users).to_dict("records")
    )
    status = pd.DataFrame({USER: [f"u{k}" for k in range(n_users)], "status": "complete"})
    return {"LLM": Ranking("LLM", pd.DataFrame(), status, log, 0.5 * n_users)}


def test_cost_scaling_and_figure() -> None:
    frame = cost_scaling(_measured, [(2, 10), (4, 10), (4, 20)])
    assert set(frame["quantity"]) == {*COST_QUANTITIES, "usd"}
    tokens = frame[frame["quantity"] == "prompt_tokens"].set_index(["n_users", "n_candidates"])
    assert tokens.loc[(2, 10), "total"] == 200 and tokens.loc[(4, 10), "total"] == 400
    assert tokens.loc[(4, 20), "per_user"] == 200
    wall = frame[frame["quantity"] == "wall_s"].set_index(["n_users", "n_candidates"])
    assert wall.loc[(4, 20), "per_user"] == 0.5
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = scaling_figure(frame)
    assert len(fig.axes) == 4
    plt.close(fig)
    with pytest.raises(ValueError, match="none of"):
        scaling_figure(frame, quantities=("nothing",))


# --------------------------------------------------------------------------- frame builders


def test_afl_frame_proposal_first_then_tool_order() -> None:
    scored = pd.DataFrame(
        {USER: ["u1"] * 4 + ["u2"] * 4, ITEM: ["a", "b", "c", "d"] * 2,
         POSITION: [0, 1, 2, 3] * 2, SCORE: [0.1, 0.9, np.nan, 0.5] * 2}
    )  # fmt: skip
    rounds = pd.DataFrame(
        {USER: ["u1", "u1", "u2"], "round": [1, 2, 1], ITEM: ["c", "a", None],
         POSITION: [2, 0, None], LABEL: [0, 1, None]}
    )  # fmt: skip
    single = afl_frame(rounds, scored, limit=1)
    order = single.sort_values([USER, RANK]).groupby(USER)[ITEM].agg(list)
    assert order["u1"] == ["c", "b", "d", "a"]  # proposal, then by score, unscored last
    assert order["u2"] == ["b", "d", "a", "c"]  # no usable proposal: the tool's order
    loop = afl_frame(rounds, scored, limit=2)
    assert loop.sort_values([USER, RANK]).groupby(USER)[ITEM].agg(list)["u1"][0] == "a"
    check_frame(single, scored)


def test_target_rank_frame() -> None:
    candidates = _candidates({"u1": ["a", "t", "b"], "u2": ["t", "c", "d"]}, {"u1": "t", "u2": "t"})
    frame = target_rank_frame(candidates, {"u1": 3, "u2": None}, seed=0)
    check_frame(frame, candidates)
    order = frame.sort_values([USER, RANK]).groupby(USER)[ITEM].agg(list)
    assert order["u1"] == ["a", "b", "t"]
    assert "t" in order["u2"]
    with pytest.raises(ValueError, match="outside"):
        target_rank_frame(candidates, {"u1": 4, "u2": 1})


def test_check_frame_rejects_missing_and_extra() -> None:
    candidates = _candidates({"u1": ["a", "t"]}, {"u1": "t"})
    check_frame(_frame({"u1": ["t", "a"]}), candidates)
    with pytest.raises(ValueError, match="does not cover"):
        check_frame(_frame({"u1": ["t", "z"]}), candidates)
    bad = _frame({"u1": ["t", "a"]}).assign(**{RANK: [1, 1]})
    with pytest.raises(ValueError, match="1..n"):
        check_frame(bad, candidates)


# --------------------------------------------------------------------------- protocol


def test_shared_protocol_is_deterministic(tiny: Dataset, tmp_path: Path) -> None:
    one = shared_protocol(tiny, seed=3, n_users=6, cache_dir=tmp_path / "a")
    two = shared_protocol(tiny, seed=3, n_users=6, cache_dir=tmp_path / "b")
    pd.testing.assert_frame_equal(one.candidates, two.candidates)
    assert one.users == two.users and len(one.users) == 6
    sizes = one.candidates.groupby(USER).agg(n=(ITEM, "size"), positives=(LABEL, "sum"))
    assert (sizes["n"] == 20).all() and (sizes["positives"] == 1).all()
    targets = one.candidates[one.candidates[LABEL] == 1].set_index(USER)[ITEM].sort_index()
    assert targets.to_dict() == one.truth.set_index(USER)[ITEM].to_dict()
    other = shared_protocol(tiny, seed=4, n_users=6, cache_dir=tmp_path / "a")
    assert not (other.users == one.users and other.candidates.equals(one.candidates))


def test_classic_adapters_cover_the_candidates(
    tiny: Dataset, tmp_path: Path, cache_dir: Path
) -> None:
    protocol = shared_protocol(tiny, seed=0, n_users=8, cache_dir=tmp_path)
    runs = [run_baseline(protocol, name, cache_dir=cache_dir) for name in ("Random", "Pop")]
    for run in runs:
        check_frame(run.frame, protocol.candidates)
        assert run.calls.empty and run.status_counts()["ok"] == 8 and run.wall_seconds >= 0
    # the note reads the same whether the weights were trained now or loaded (published pages)
    again = run_baseline(protocol, "Pop", cache_dir=cache_dir)
    assert runs[1].note == again.note == "no training epochs"
    with pytest.raises(ValueError, match="unknown baseline"):
        run_baseline(protocol, "ItemKNN")


def test_agentcf_subset_matches_the_split(tiny: Dataset, tmp_path: Path) -> None:
    protocol = shared_protocol(tiny, seed=0, n_users=5, cache_dir=tmp_path)
    subset = shared_subset(protocol.dataset, protocol.truth, n_targets=3, seed=protocol.seed)
    assert subset.users == protocol.users
    assert (subset.windows.groupby(USER).size() == 6).all()


# --------------------------------------------------------------------------- LLM adapters


def _ranking(n: int) -> str:
    return json.dumps({"ranking": list(range(n, 0, -1))})


def test_llm_ranker_counts_unusable_replies(tiny: Dataset, tmp_path: Path) -> None:
    protocol = shared_protocol(tiny, seed=0, n_users=4, cache_dir=tmp_path)
    with ScriptedServer(default=reply("this is not JSON")) as server:
        server.script(reply(_ranking(20)))  # only the first user gets a usable ranking
        client = sequential_client(server.url, tmp_path / "llm")
        config = AgentCFConfig(zero_shot_history_len=5)
        options = RunOptions(methods=("Zero-shot LLM",), client=client)
        run = run_paper(protocol, "AgentCF", config, options)["Zero-shot LLM"]
    check_frame(run.frame, protocol.candidates)
    assert run.status_counts()["complete"] == 1
    assert run.status_counts()["failed"] == 3  # counted, and still ranked
    first = protocol.users[0]
    shown = protocol.candidates[protocol.candidates[USER] == first][ITEM].tolist()
    ranked = run.frame[run.frame[USER] == first].sort_values(RANK)[ITEM].tolist()
    assert ranked == shown[::-1]
    assert len(run.calls) == 4 and (~run.calls["ok"]).sum() == 3
    cost = cost_per_user({run.method: run.calls}, len(protocol.users))
    assert cost["failed"].iloc[0] == 3


def test_agentcf_adapter_without_training_counts_failures(tiny: Dataset, tmp_path: Path) -> None:
    protocol = shared_protocol(tiny, seed=0, n_users=3, cache_dir=tmp_path)
    with ScriptedServer(default=reply('{"ranking": "first"}')) as server:
        client = sequential_client(server.url, tmp_path / "llm")
        options = RunOptions(methods=("AgentCF B", "AgentCF B+H"), client=client)
        runs = run_paper(protocol, "AgentCF", AgentCFConfig(steps=0), options)
    assert set(runs) == {"AgentCF B", "AgentCF B+H"}
    for run in runs.values():
        check_frame(run.frame, protocol.candidates)
        assert run.status_counts()["failed"] == 3
        assert len(run.calls) == 3 and run.note == "no training"


def test_agentcf_adapter_training_calls_are_in_every_variant(tiny: Dataset, tmp_path: Path) -> None:
    protocol = shared_protocol(tiny, seed=0, n_users=2, cache_dir=tmp_path)
    with ScriptedServer(default=reply("garbage")) as server:
        client = sequential_client(server.url, tmp_path / "llm")
        config = AgentCFConfig(rounds=1, steps=1)
        options = RunOptions(methods=("AgentCF B",), client=client)
        runs = run_paper(protocol, "AgentCF", config, options)
    run = runs["AgentCF B"]
    check_frame(run.frame, protocol.candidates)
    phases = run.calls["phase"].value_counts()
    assert phases["train"] == 2  # one forward choice per user, both unusable, no reflection
    assert phases["rank:B"] == 2 and not run.calls["ok"].any()


def test_interecagent_adapter_counts_failed_plans(tiny: Dataset, tmp_path: Path) -> None:
    from recagents.papers.interecagent.config import ExperimentConfig, InteRecConfig

    protocol = shared_protocol(tiny, seed=0, n_users=2, cache_dir=tmp_path)
    config = ExperimentConfig(agent=InteRecConfig(demo_mode="fixed", reflection=False))
    ask = json.dumps({"message": "Something classic, please."})
    with ScriptedServer(default=reply("not a plan")) as server:
        server.script(reply(ask), reply(ask))  # the simulator's first messages
        client = sequential_client(server.url, tmp_path / "llm")
        options = RunOptions(client=client, training=QUICK)
        run = run_paper(protocol, "InteRecAgent", config, options)["InteRecAgent"]
    check_frame(run.frame, protocol.candidates)
    assert run.status_counts()["failed"] == 2
    assert len(run.calls) >= 4 and "simulator" in " ".join(run.calls["kind"].astype(str))


def test_status_table() -> None:
    status = pd.DataFrame({USER: ["a", "b", "c", "d"], "status": ["complete", "failed"] * 2})
    run = Ranking("LLM", pd.DataFrame(), status, RunLog(), 1.0, note="n")
    table = status_table({"LLM": run}).set_index("method")
    assert table.loc["LLM", "failed"] == 2 and table.loc["LLM", "failed_share"] == 0.5
    assert table.loc["LLM", "ok"] == 0 and table.loc["LLM", "note"] == "n"


def test_scaling_runner_builds_a_protocol_per_size(tiny: Dataset, tmp_path: Path) -> None:
    def random(protocol: Protocol) -> Ranking:
        return run_baseline(protocol, "Random")

    def both(protocol: Protocol) -> dict[str, Ranking]:
        return {"R1": random(protocol), "R2": random(protocol)}

    measure = scaling_runner(tiny, {"Random": random, "pair": both}, cache_dir=tmp_path)
    runs = measure(3, 10)
    assert set(runs) == {"Random", "R1", "R2"}
    assert len(runs["Random"].frame) == 30
    frame = cost_scaling(measure, [(2, 5), (3, 10)])
    calls = frame[(frame["quantity"] == "calls") & (frame["method"] == "Random")]
    assert calls["total"].tolist() == [0.0, 0.0] and calls["n_users"].tolist() == [2, 3]


def test_scaling_runner_within_a_protocol_reuses_its_users_and_candidates(
    tiny: Dataset, tmp_path: Path
) -> None:
    main = shared_protocol(tiny, seed=3, n_users=4, n_negatives=9, cache_dir=tmp_path)
    seen: list[Protocol] = []

    def record(protocol: Protocol) -> Ranking:
        seen.append(protocol)
        return run_baseline(protocol, "Random")

    measure = scaling_runner(tiny, {"Random": record}, seed=3, cache_dir=tmp_path, within=main)
    measure(2, 10)  # the main run's candidate count: its first two users, its saved lists
    assert seen[-1].users == main.users[:2]
    expected = main.candidates[main.candidates[USER].isin(main.users[:2])]
    pd.testing.assert_frame_equal(
        seen[-1].candidates.reset_index(drop=True), expected.reset_index(drop=True)
    )
    measure(4, 5)  # another candidate count: a fresh protocol of the same seed
    assert seen[-1].n_negatives == 4 and seen[-1].users == main.users
    measure(6, 10)  # more users than the main run: a fresh protocol too
    assert len(seen[-1].users) == 6
