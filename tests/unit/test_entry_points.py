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
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scripted_server import ScriptedServer, reply, sequential_client

from recagents import baselines
from recagents.columns import USER
from recagents.data import load_dataset
from recagents.data.datasets import Dataset
from recagents.llm.runlog import RunLog
from recagents.papers.afl import AFLConfig
from recagents.papers.afl import entry as afl_entry
from recagents.papers.agent4rec import Agent4RecConfig
from recagents.papers.agent4rec import entry as agent4rec_entry
from recagents.papers.agentcf import AgentCFConfig
from recagents.papers.agentcf import entry as agentcf_entry
from recagents.papers.interecagent import InteRecConfig
from recagents.papers.interecagent import entry as interecagent_entry
from recagents.papers.rec4agentverse import Rec4AConfig
from recagents.papers.rec4agentverse import entry as rec4agentverse_entry
from recagents.protocol import METRIC_COLUMNS, PaperRun, RunOptions, metric_rows

ENTRIES = {
    "AgentCF": agentcf_entry,
    "Agent4Rec": agent4rec_entry,
    "AFL": afl_entry,
    "InteRecAgent": interecagent_entry,
    "Rec4Agentverse": rec4agentverse_entry,
}
QUICK = baselines.TrainConfig(epochs=1, stopping_step=1)


@pytest.fixture(scope="module")
def ml100k() -> Dataset:
    """MovieLens-100K (Agent4Rec's split and Rec4Agentverse's agent items need its size)."""
    return load_dataset("ml-100k")


# --------------------------------------------------------------------------- the shape


def _shape(function: object) -> list[tuple[str, inspect._ParameterKind]]:
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()]


def test_every_run_has_the_same_parameters() -> None:
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    expected = [("dataset", positional), ("config", positional), ("options", positional)]
    for paper, module in ENTRIES.items():
        assert _shape(module.run) == expected, paper
        signature = inspect.signature(module.run)
        assert signature.parameters["config"].default is None, paper
        assert signature.parameters["options"].default is None, paper
        assert signature.parameters["options"].annotation == "RunOptions | None", paper
        assert signature.return_annotation == "PaperRun", paper
        assert module.PAPER == paper and module.TABLES and module.METHODS
        assert isinstance(module.DEFAULT_USERS, int) and module.DEFAULT_USERS > 0, paper


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


def test_rankers_take_plain_shared_objects() -> None:
    for module in (agentcf_entry, afl_entry, interecagent_entry):
        names = list(inspect.signature(module.rank).parameters)
        assert names[:4] == ["dataset", "split", "candidates", "config"], module.PAPER
    assert not hasattr(agent4rec_entry, "rank") and not hasattr(rec4agentverse_entry, "rank")


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


PACKAGE = Path(__file__).resolve().parents[2] / "recagents"


def _paper_imports(path: Path) -> list[tuple[str, str]]:
    """``(module, name)`` of every import of ``recagents.papers...`` in a source file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("recagents.papers"):
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.startswith("recagents.papers")]
    return found


def test_no_paper_imports_another_and_compare_uses_public_names_only() -> None:
    for paper_dir in sorted((PACKAGE / "papers").iterdir()):
        if not paper_dir.is_dir() or paper_dir.name.startswith("_"):
            continue
        for path in paper_dir.glob("*.py"):
            for module, _ in _paper_imports(path):
                parts = module.split(".")
                assert len(parts) < 3 or parts[2] == paper_dir.name, (path, module)
    for path in (PACKAGE / "compare").glob("*.py"):
        for module, name in _paper_imports(path):
            private = [p for p in [*module.split("."), name] if p.startswith("_")]
            assert not private, (path, module, name)
            # Only a paper's package or its entry module, never its other modules.
            assert len(module.split(".")) <= 3 or module.endswith(".entry"), (path, module)


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
    config = AgentCFConfig(n_targets=3, steps=1, rounds=1, batch_size=3)
    outer = RunLog()
    with ScriptedServer(default=reply("not JSON")) as server:
        options = RunOptions(n_users=3, methods=("B", "B+H"), client=_client(server, tmp_path),
                             log=outer, n_boot=50)  # fmt: skip
        run = agentcf_entry.run(tiny, config, options)
    metrics = _check(run, agentcf_entry, config)
    assert set(metrics.index) == {f"ndcg@{k}/AgentCF {v}" for k in (1, 5, 10) for v in ("B", "B+H")}
    assert (metrics["n"] == 3).all()
    calls = run.log.calls_frame()
    assert calls["phase"].value_counts().to_dict() == {"train": 3, "rank:B": 3, "rank:B+H": 3}
    assert len(outer.calls) == len(calls)  # the caller's log receives the same calls
    assert set(run.table("rankings")["method"]) == {"AgentCF B", "AgentCF B+H"}
    assert (run.table("parses")["status"] == "failed").all()  # unusable replies, counted
    assert len(run.table("candidates")) == 3 * 10
    with pytest.raises(ValueError, match="methods: unknown AgentCF"):
        agentcf_entry.run(tiny, config, RunOptions(methods=("C",)))


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
        run = afl_entry.run(tiny, config, options)
    metrics = _check(run, afl_entry, config)
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
    config = InteRecConfig(demo_mode="fixed", reflection=False)
    ask = json.dumps({"message": "Something classic, please."})
    with ScriptedServer(default=reply("not a plan")) as server:
        server.script(reply(ask), reply(ask))
        options = RunOptions(n_users=2, methods=("InteRecAgent",),
                             client=_client(server, tmp_path), n_boot=50,
                             training=QUICK)  # fmt: skip
        run = interecagent_entry.run(tiny, config, options)
    metrics = _check(run, interecagent_entry, config)
    expected = {f"{m}@5/InteRecAgent/{rule}" for m in ("Hit", "AT") for rule in ("id", "fuzzy")}
    assert set(metrics.index) == expected and (metrics["n"] == 2).all()
    assert metrics.loc["Hit@5/InteRecAgent/id", "value"] == 0.0  # no usable plan, no hit
    assert metrics.loc["AT@5/InteRecAgent/id", "value"] == 6.0  # a miss counts K + 1
    assert len(run.table("conversations")) == 2
    assert "simulator" in set(run.log.calls_frame()["kind"])


def test_rec4agentverse_run_without_a_model(ml100k: Dataset) -> None:
    config = Rec4AConfig(agent_mode="template", recommender="classic", max_turns=2)
    options = RunOptions(n_users=3, methods=("stage 1", "stage 2"), n_boot=50)
    run = rec4agentverse_entry.run(ml100k, config, options)
    metrics = _check(run, rec4agentverse_entry, config)
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
        run = agent4rec_entry.run(ml100k, config, options)
    metrics = _check(run, agent4rec_entry, config)
    assert {"p_view/Random", "satisfaction/Random"} <= set(metrics.index)
    assert metrics.loc["p_view/Random", "value"] == 0.0  # unusable pages: nothing watched
    assert metrics.loc["p_view/Random", "n"] == 2
    assert np.isnan(metrics.loc["satisfaction/Random", "value"])  # no usable interview
    problems = run.table("problems").set_index("problem")["count"]
    assert problems["page_unusable"] == 2
    calls = run.log.calls_frame()
    assert (calls["kind"] == calls["phase"]).all() and len(calls) > 0
    assert len(run.table("exposures")) == 2 * config.items_per_page
