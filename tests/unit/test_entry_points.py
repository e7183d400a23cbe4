"""Every paper's one entry point: the same signature, the same result shape (a PaperRun).

``recagents.papers.<paper>.entry.run`` is checked for its parameters (inspect.signature:
``(dataset, config, options)``, the shared arguments in one RunOptions) and run once per paper
at the smallest size. Model replies come from the scripted server
(tests/scripted_server.py), which only stands in for a model whose answers are unusable, so
the assertions are about the mechanics (documented tables, one metric row per method and
measure with its interval and n, every call accounted), never about a method's quality.
Rec4Agentverse runs with its template policies (no LLM at all).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import typing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scripted_server import ScriptedServer, reply, sequential_client

from recagents import baselines
from recagents.columns import USER
from recagents.data import datasets, load_dataset
from recagents.data.datasets import Dataset
from recagents.llm.runlog import RunLog
from recagents.papers import get, registry
from recagents.papers.afl.config import AFLConfig
from recagents.papers.agent4rec.config import Agent4RecConfig
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.interecagent.config import (
    ExperimentConfig,
    InteRecConfig,
    SimulatorConfig,
)
from recagents.papers.rec4agentverse.config import Rec4AConfig
from recagents.protocol import METRIC_COLUMNS, Paper, PaperRun, RankTask, RunOptions, metric_rows

ROOT = Path(__file__).resolve().parents[2]
PAPERS = registry()
QUICK = baselines.TrainConfig(epochs=1, stopping_step=1)


@pytest.fixture(scope="module")
def ml100k() -> Dataset:
    """MovieLens-100K (Agent4Rec's split and Rec4Agentverse's agent items need its size)."""
    return load_dataset("ml-100k")


# --------------------------------------------------------------------------- the shape


def _shape(function: object) -> list[tuple[str, inspect._ParameterKind]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]


def test_the_registry_finds_every_paper_in_notebook_order() -> None:
    assert list(PAPERS) == ["AgentCF", "Agent4Rec", "AFL", "InteRecAgent", "Rec4Agentverse"]
    assert get("AFL") is PAPERS["AFL"]
    with pytest.raises(KeyError, match="no paper 'X'; there are"):
        get("X")


@pytest.mark.parametrize("name", list(PAPERS))
def test_every_paper_keeps_the_contract(name: str) -> None:
    paper = PAPERS[name]
    assert isinstance(paper, Paper) and paper.PAPER == name
    assert (ROOT / "notebooks" / f"{paper.NOTEBOOK}.ipynb").is_file(), paper.NOTEBOOK
    assert paper.METHODS and paper.TABLES and isinstance(paper.RANKERS, tuple)
    # The notebook's profiles: the same three, with the same keys (pick_profile checks too).
    assert set(paper.PROFILES) == {"smoke", "default", "paper"}, name
    keys = {profile: set(sizes) for profile, sizes in paper.PROFILES.items()}
    assert keys["smoke"] == keys["default"] == keys["paper"], name
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    for function, first in ((paper.run, "dataset"), (paper.rank, "task")):
        expected = [(first, positional), ("config", positional), ("options", positional)]
        assert _shape(function) == expected, (name, function)
        signature = inspect.signature(function)
        assert signature.parameters["config"].default is None, name
        assert signature.parameters["options"].annotation == "RunOptions | None", name
    assert issubclass(typing.get_type_hints(paper.run)["return"], PaperRun), name
    assert inspect.signature(paper.rank).return_annotation == "dict[str, Ranking]", name


@pytest.mark.parametrize("name", [n for n, p in PAPERS.items() if not p.RANKERS])
def test_a_paper_without_rankers_says_so(name: str, tiny: Dataset) -> None:
    split = datasets.leave_one_out(tiny)
    task = RankTask(tiny, split, pd.DataFrame())
    with pytest.raises(NotImplementedError):
        PAPERS[name].rank(task)


def test_run_options_defaults_methods_and_log() -> None:
    options = RunOptions()
    sizes = {"default": {"n": 7}, "smoke": {"n": 2}}
    assert options.users(sizes, "n") == 7 and RunOptions(n_users=3).users(sizes, "n") == 3
    assert RunOptions(profile="smoke").users(sizes, "n") == 2
    with pytest.raises(ValueError, match="unknown profile"):
        RunOptions(profile="huge").users(sizes, "n")
    assert options.n_boot == 1000 and options.progress is False and options.training is None
    assert options.chosen_methods("X", ("a", "b")) == ("a", "b")
    assert options.chosen_methods("X", ("a", "b", "c"), ("b",)) == ("b",)
    assert RunOptions(methods=["c", "a"]).chosen_methods("X", ("a", "b", "c")) == ("c", "a")
    with pytest.raises(ValueError, match=r"methods: unknown X method\(s\) \['d'\]; choose from"):
        RunOptions(methods=("a", "d")).chosen_methods("X", ("a", "b"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.n_boot = 5  # type: ignore[misc]
    sentinel = object()
    assert RunOptions(client=sentinel).resolved_client() is sentinel  # type: ignore[arg-type]
    outer, own = RunLog(), RunLog()
    own.count("x")
    RunOptions(log=outer).record(own)
    RunOptions().record(own)  # no log given: nothing to hand over, no error
    assert outer.problems == {"x": 1}


def test_metric_rows_and_paper_run_checks() -> None:
    summary = pd.DataFrame(
        {"method": ["A", "B"], "metric": ["ndcg@10"] * 2, "mean": [0.5, 0.25],
         "low": [0.4, 0.1], "high": [0.6, 0.3], "n": [10, 10]}
    )  # fmt: skip
    rows = metric_rows(summary, ("method",))
    assert list(rows.columns) == list(METRIC_COLUMNS)
    assert rows["metric"].tolist() == ["ndcg@10/A", "ndcg@10/B"]
    assert rows["value"].tolist() == [0.5, 0.25] and rows["n"].tolist() == [10, 10]
    with pytest.raises(ValueError, match="missing column"):
        metric_rows(summary.drop(columns="low"))
    run = PaperRun("X", None, {"t": summary}, rows, RunLog(), 1.5)
    assert "ndcg@10/A: 0.500 [0.400, 0.600] (n=10)" in run.summary()
    with pytest.raises(KeyError, match="no table 'u'"):
        run.table("u")
    with pytest.raises(ValueError, match="PaperRun.metrics"):
        PaperRun("X", None, {}, summary, RunLog(), 0.0)


def test_compare_reaches_the_papers_through_the_registry_only() -> None:
    for path in (ROOT / "recagents" / "compare").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if (module or "").startswith("recagents.papers"):
                assert module == "recagents.papers", (path, module)


def _check(run: PaperRun, module: object, config: object) -> pd.DataFrame:
    """The common checks: the shape, the documented tables, sane intervals; the metrics."""
    assert isinstance(run, PaperRun) and run.paper == module.PAPER  # type: ignore[attr-defined]
    # AgentCF fills in the dataset's domain when the config leaves it open; nothing else changes.
    filled = {"domain": run.config.domain} if hasattr(config, "for_dataset") else {}
    assert run.config == dataclasses.replace(config, **filled)  # type: ignore[type-var]
    assert set(run.tables) == set(module.TABLES)  # type: ignore[attr-defined]
    assert all(isinstance(t, pd.DataFrame) for t in run.tables.values())
    assert list(run.metrics.columns) == list(METRIC_COLUMNS)
    assert not run.metrics.empty and run.metrics["metric"].is_unique
    known = run.metrics.dropna(subset=["value"])
    assert (known["low"] <= known["value"] + 1e-12).all()
    assert (known["value"] <= known["high"] + 1e-12).all()
    assert run.wall_seconds > 0
    return run.metrics.set_index("metric")


def _client(server: ScriptedServer, tmp_path: Path) -> object:
    return sequential_client(server.url, tmp_path / "llm")


# --------------------------------------------------------------------------- each paper


def test_agentcf_run(tiny: Dataset, tmp_path: Path, cache_dir: Path) -> None:
    config = AgentCFConfig(
        n_targets=3, steps=1, rounds=1, batch_size=3, subsets=("dense",), baselines=(),
        full_data_baselines=(),
    )  # fmt: skip
    outer = RunLog()
    methods = ("AgentCF B", "AgentCF B+H")
    with ScriptedServer(default=reply("not JSON")) as server:
        options = RunOptions(n_users=3, methods=methods, client=_client(server, tmp_path),
                             log=outer, n_boot=50)  # fmt: skip
        run = PAPERS["AgentCF"].run(tiny, config, options)
    metrics = _check(run, PAPERS["AgentCF"], config)
    named = (*methods, "Random")
    assert set(metrics.index) == {f"ndcg@{k}/dense/{m}" for k in (1, 5, 10) for m in named}
    assert (metrics["n"] == 3).all()
    calls = run.log.calls_frame()
    phases = {"train": 3, "rank AgentCF B": 3, "rank AgentCF B+H": 3}
    assert calls["phase"].value_counts().to_dict() == phases
    assert len(outer.calls) == len(calls)  # the caller's log receives the same calls
    assert set(run.table("rankings")["method"]) == set(named)
    assert (run.table("parses")["status"] == "failed").all()  # unusable replies, counted
    assert len(run.table("candidates")) == 3 * 10
    with pytest.raises(ValueError, match="methods: unknown AgentCF"):
        PAPERS["AgentCF"].run(tiny, config, RunOptions(methods=("C",)))


def test_afl_run(tiny: Dataset, tmp_path: Path, cache_dir: Path) -> None:
    config = AFLConfig(n_candidates=10, max_rounds=2)
    pick = json.dumps({"reason": "fits the history", "choice": 1})
    reject = json.dumps({"decision": "no", "reason": "not this one"})
    with ScriptedServer(default=reply("no JSON")) as server:
        # Round 1: the first user proposes candidate 1, the others fail; round 2: it is
        # rejected, and the second proposal fails (the first one stays the prediction).
        server.script(reply(pick), *[reply("x")] * 4, reply(reject))
        options = RunOptions(n_users=3, client=_client(server, tmp_path), n_boot=50,
                             training=QUICK)  # fmt: skip
        run = PAPERS["AFL"].run(tiny, config, options)
    metrics = _check(run, PAPERS["AFL"], config)
    names = ["HR@1/SASRec (tool alone)", "HR@1/Rec Agent", "HR@1/AFL"]
    assert list(metrics.index) == names and (metrics["n"] == 3).all()
    rounds = run.table("rounds")
    assert rounds[USER].nunique() == 3 and rounds["round"].max() <= 2
    hits = run.table("hits")
    assert metrics.loc["HR@1/AFL", "value"] == hits.loc[hits["limit"] == 2, "hit"].mean()
    assert len(run.table("rankings")) == 2 * 3 * 10  # two methods, every candidate ranked
    kinds = run.log.calls_frame()["kind"].value_counts().to_dict()
    assert kinds.get("user", 0) == 1  # only the one usable proposal met the user agent


def test_interecagent_run(tiny: Dataset, tmp_path: Path, cache_dir: Path) -> None:
    config = ExperimentConfig(
        agent=InteRecConfig(demo_mode="fixed", reflection=False), sim=SimulatorConfig(seed=2023),
        max_turns=5, n_one_turn=2, n_negatives=9,
    )  # fmt: skip
    ask = json.dumps({"message": "Something classic, please."})
    with ScriptedServer(default=reply("not a plan")) as server:
        server.script(reply(ask), reply(ask))
        options = RunOptions(n_users=2, methods=("InteRecAgent",),
                             client=_client(server, tmp_path), n_boot=50,
                             training=QUICK)  # fmt: skip
        run = PAPERS["InteRecAgent"].run(tiny, config, options)
    metrics = _check(run, PAPERS["InteRecAgent"], config)
    expected = {f"{m}@5/InteRecAgent/{rule}" for m in ("Hit", "AT") for rule in ("id", "fuzzy")}
    expected |= {
        f"{m}/{x}" for m in ("Recall@5", "NDCG") for x in ("InteRecAgent", "Random", "Pop")
    }
    assert set(metrics.index) == expected and (metrics["n"] == 2).all()
    assert metrics.loc["Hit@5/InteRecAgent/id", "value"] == 0.0  # no usable plan, no hit
    assert metrics.loc["AT@5/InteRecAgent/id", "value"] == 6.0  # a miss counts K + 1
    assert len(run.table("conversations")) == 2
    assert "simulator" in set(run.log.calls_frame()["kind"])


def test_rec4agentverse_run_without_a_model(ml100k: Dataset) -> None:
    config = Rec4AConfig(agent_mode="template", recommender="classic", max_turns=2)
    options = RunOptions(n_users=3, methods=("stage 1", "stage 2"), n_boot=50)
    run = PAPERS["Rec4Agentverse"].run(ml100k, config, options)
    metrics = _check(run, PAPERS["Rec4Agentverse"], config)
    assert run.log.calls == []  # template users and agents, classic recommender: no LLM
    sessions = run.table("sessions")
    assert sorted(sessions["stage"].unique()) == [1, 2] and len(sessions) == 2 * 3
    assert metrics.loc["hit/stage 1/template", "n"] == 3
    assert any(name.endswith("/stage 2/template") for name in metrics.index)
    assert not any("stage 3" in name for name in metrics.index)


def test_agent4rec_run(ml100k: Dataset, tmp_path: Path) -> None:
    config = Agent4RecConfig(max_pages=1, persona_items=5)
    with ScriptedServer(default=reply("not JSON")) as server:
        options = RunOptions(n_users=2, methods=("Random",), client=_client(server, tmp_path),
                             n_boot=50)  # fmt: skip
        run = PAPERS["Agent4Rec"].run(ml100k, config, options)
    metrics = _check(run, PAPERS["Agent4Rec"], config)
    assert {"p_view/Random", "satisfaction/Random"} <= set(metrics.index)
    assert metrics.loc["p_view/Random", "value"] == 0.0  # unusable pages: nothing watched
    assert metrics.loc["p_view/Random", "n"] == 2
    assert np.isnan(metrics.loc["satisfaction/Random", "value"])  # no usable interview
    problems = run.table("problems").set_index("problem")["count"]
    assert problems["page_unusable"] == 2
    calls = run.log.calls_frame()
    assert (calls["kind"] == calls["phase"]).all() and len(calls) > 0
    assert len(run.table("exposures")) == 2 * config.items_per_page
