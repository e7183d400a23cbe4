"""A tampered model cache never runs code, and a cache lock never waits without limit.

Files are planted where the cache keeps (or RecBole would read) pickles; loading through
:func:`recagents.baselines.train_baseline` must warn, rebuild and never run them.
"""

import os
import pickle
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from recagents import baselines, locks
from recagents.columns import SCORE
from recagents.data import datasets, load_dataset

TINY_PATH = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"


class _Touch:
    """Unpickling this runs ``touch <marker>``: what a planted cache file would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def split():
    return datasets.leave_one_out(load_dataset(TINY_PATH))


@pytest.fixture(scope="module")
def quick():
    return baselines.TrainConfig(epochs=1, stopping_step=1)


def _workdir(cache, model):
    (workdir,) = [p for p in cache.glob(f"recbole/models/{model}-*") if p.is_dir()]
    return workdir


def _scores(model, split):
    return model.score(datasets.sample_candidates(split, 9, seed=0))[SCORE].tolist()


def test_training_writes_no_pickles(split, quick, tmp_path):
    baselines.train_baseline("BPR", split, quick, cache_dir=tmp_path, progress=False)
    workdir = _workdir(tmp_path, "BPR")
    assert sorted(p.name for p in workdir.iterdir() if p.is_file()) == ["meta.json", "weights.pt"]
    state = torch.load(workdir / "weights.pt", weights_only=True)  # plain data only
    assert set(state) == {"state_dict", "other_parameter"}


@pytest.mark.parametrize("how", ["pickle", "pickle protocol 2", "torch.save"])
def test_planted_weights_are_refused_and_retrained(split, quick, tmp_path, how):
    first = baselines.train_baseline("LightGCN", split, quick, cache_dir=tmp_path, progress=False)
    weights = _workdir(tmp_path, "LightGCN") / "weights.pt"
    marker = tmp_path / "pwned"
    if how == "torch.save":
        torch.save({"state_dict": _Touch(marker)}, weights)
    else:
        weights.write_bytes(pickle.dumps(_Touch(marker), protocol=2 if "2" in how else None))
    with pytest.warns(UserWarning, match=r"refused cached weights .*weights\.pt \(Unpickl") as got:
        again = baselines.train_baseline("LightGCN", split, quick, cache_dir=tmp_path)
    assert not marker.exists(), "the planted pickle ran"
    if how != "pickle":  # protocol 4 fails earlier, on an opcode torch does not read
        assert "system" in str(got[0].message)
    assert not again.from_cache
    assert _scores(again, split) == _scores(first, split)
    third = baselines.train_baseline("LightGCN", split, quick, cache_dir=tmp_path)
    assert third.from_cache, "the retrained weights are cached again"


def test_weights_that_do_not_fit_the_model_are_retrained(split, quick, tmp_path):
    baselines.train_baseline("Pop", split, quick, cache_dir=tmp_path)
    weights = _workdir(tmp_path, "Pop") / "weights.pt"
    state = torch.load(weights, weights_only=True)
    for tampered, why in (
        ({**state, "other_parameter": {"forward": torch.zeros(1)}}, "other_parameter"),
        ({**state, "state_dict": {}}, "parameters"),
        ("not a checkpoint", "parameters"),
    ):
        torch.save(tampered, weights)
        with pytest.warns(UserWarning, match=f"refused cached weights.*{why}"):
            model = baselines.train_baseline("Pop", split, quick, cache_dir=tmp_path)
        assert not model.from_cache and callable(model.model.forward)
    weights.write_bytes(weights.read_bytes()[:100])  # an interrupted write
    with pytest.warns(UserWarning, match="refused cached weights"):
        assert not baselines.train_baseline("Pop", split, quick, cache_dir=tmp_path).from_cache


def test_planted_dataset_and_dataloader_pickles_are_never_read(split, quick, tmp_path):
    first = baselines.train_baseline("BPR", split, quick, cache_dir=tmp_path, progress=False)
    workdir = _workdir(tmp_path, "BPR")
    markers = [tmp_path / "dataset-ran", tmp_path / "dataloader-ran"]
    # The files RecBole's create_dataset and data_preparation would unpickle.
    (workdir / "data-Dataset.pth").write_bytes(pickle.dumps(_Touch(markers[0])))
    (workdir / "data-for-BPR-dataloader.pth").write_bytes(pickle.dumps(_Touch(markers[1])))
    with pytest.warns(UserWarning) as caught:
        again = baselines.train_baseline("BPR", split, quick, cache_dir=tmp_path)
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2
    assert all("unread" in m for m in messages)
    assert "data-Dataset.pth" in messages[0] and "data-for-BPR-dataloader.pth" in messages[1]
    assert not any(marker.exists() for marker in markers), "a planted pickle ran"
    assert again.from_cache, "the weights were fine; only the dataset is rebuilt"
    assert _scores(again, split) == _scores(first, split)
    assert not list(workdir.glob("*.pth"))


def test_recbole_save_paths_outside_the_cache_are_never_read(split, quick, tmp_path):
    # Even when RecBole is pointed at pickles elsewhere, nothing unpickles them.
    markers = [tmp_path / "dataset-ran", tmp_path / "dataloader-ran"]
    paths = [tmp_path / "dataset.pth", tmp_path / "dataloaders.pth"]
    for path, marker in zip(paths, markers, strict=True):
        path.write_bytes(pickle.dumps(_Touch(marker)))
    params = {"dataset_save_path": str(paths[0]), "dataloaders_save_path": str(paths[1])}
    model = baselines.train_baseline("Pop", split, quick, params=params, cache_dir=tmp_path)
    assert not any(marker.exists() for marker in markers), "a planted pickle ran"
    assert len(model.recommend(k=3)) > 0


# --------------------------------------------------------------------------- lock timeout

_HOLD = """
import sys
from pathlib import Path
from recagents.locks import cache_lock
with cache_lock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def held_lock(tmp_path):
    """A cache entry whose lock another process holds until the test ends."""
    entry = tmp_path / "models" / "BPR-0123"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_HOLD), str(entry)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield entry, holder.pid
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_a_lock_held_too_long_fails_naming_file_and_holder(held_lock):
    entry, pid = held_lock
    started = time.perf_counter()
    with pytest.raises(locks.CacheLockTimeout) as caught:
        with locks.cache_lock(entry, timeout=0.5):
            pytest.fail("the lock was taken while another process held it")
    assert 0.4 < time.perf_counter() - started < 10
    message = str(caught.value)
    assert f"{entry}.lock" in message
    assert f"pid {pid}" in message and "still running" in message
    assert isinstance(caught.value, TimeoutError)


def test_the_lock_timeout_comes_from_the_environment(held_lock, monkeypatch):
    entry, pid = held_lock
    monkeypatch.setenv("RECAGENTS_LOCK_TIMEOUT", "0.3")
    with pytest.raises(locks.CacheLockTimeout, match=f"0.3 s .*pid {pid}"):
        with locks.cache_lock(entry):
            pass


def test_a_stale_holder_record_is_reported_as_such(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **_OUT)
    dead = int(done.stdout)
    record = tmp_path / "x.lock.holder"
    record.write_text(f'{{"pid": {dead}, "host": "{socket.gethostname()}", "since": "then"}}')
    assert "no such process runs now" in locks._lock_holder(record)
    record.write_text("{")
    assert "unknown" in locks._lock_holder(record)


def test_the_lock_is_free_again_and_its_record_gone_after_use(tmp_path):
    entry = tmp_path / "entry"
    with locks.cache_lock(entry, timeout=1):
        assert f'"pid": {os.getpid()}' in (tmp_path / "entry.lock.holder").read_text()
    assert not (tmp_path / "entry.lock.holder").exists()
    with locks.cache_lock(entry, timeout=0):
        pass


_OUT = {"capture_output": True, "text": True, "check": True}
