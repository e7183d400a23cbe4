"""One pipeline per paper: a notebook's headline numbers are its paper's ``run``.

Each paper's ``entry.run`` is called here with the smoke profile on the notebook's default
dataset, answered from ``replies/smoke.bundle`` alone (replay-only: a request the notebook
did not make stops the run, named). Every metric it returns must equal the record the
notebook wrote with :func:`recagents.notebook.record_run` in the committed smoke run
(``replies/smoke-records.json``), so the numbers a reader sees in a notebook and the
numbers ``compare/``, ``bench/`` and the tests get come from one code path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recagents.data import load_dataset
from recagents.llm.cache import ResponseCache
from recagents.llm.client import LLMClient
from recagents.notebook import run_records
from recagents.papers import registry
from recagents.protocol import Paper, RunOptions

ROOT = Path(__file__).resolve().parents[2]
SMOKE_REPLIES = ROOT / "replies" / "smoke.bundle"
SMOKE_RECORDS = ROOT / "replies" / "smoke-records.json"
PAPERS = registry()


@pytest.fixture(scope="module")
def replay_client(tmp_path_factory: pytest.TempPathFactory) -> LLMClient:
    """A client that answers only from the committed smoke replies (no model server).

    Its reply cache is a file of its own, so no reply another run cached can answer.
    """
    cache = ResponseCache(tmp_path_factory.mktemp("replay") / "replies.sqlite")
    return LLMClient(replay=SMOKE_REPLIES, cache=cache)


@pytest.mark.parametrize("name", sorted(PAPERS))
def test_notebook_records_are_its_papers_run(name: str, replay_client: LLMClient) -> None:
    paper: Paper = PAPERS[name]
    committed = json.loads(SMOKE_RECORDS.read_text(encoding="utf-8"))
    records = committed.get(paper.NOTEBOOK)
    assert records is not None, f"{SMOKE_RECORDS.name} has no records of {paper.NOTEBOOK}"
    options = RunOptions(profile="smoke", client=replay_client)
    run = paper.run(load_dataset(paper.DATASET), None, options)
    expected = run_records(run)
    assert expected, f"{name}.run returned no metrics"
    missing = sorted(set(expected) - set(records))
    assert not missing, f"{paper.NOTEBOOK} records none of {missing}: does it call record_run?"
    differ = {k: (records[k], v) for k, v in expected.items() if records[k] != v}
    assert not differ, f"{paper.NOTEBOOK} recorded (notebook, run) {differ}"
