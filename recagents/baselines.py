"""Classic recommenders (Pop, BPR, LightGCN, MultiVAE, SASRec) trained through RecBole.

One entry point, :func:`train_baseline`, trains a RecBole model on *our* split (written
as RecBole "benchmark" files, so RecBole never re-splits the data) with early stopping
on the validation users, and returns a :class:`Baseline` that scores any candidate
frame or recommends from the full catalogue, always as the project's long
``[user_id, item_id, score, rank]`` frame.

Every RecBole compatibility shim lives in this module:

- RecBole's ``Config`` reads ``sys.argv``; under pytest or papermill that would inject
  foreign options, so it is built with a clean ``argv``.
- RecBole writes ``log_tensorboard/`` into the working directory; training runs inside
  the model's cache folder instead.
- Nothing in the cache is unpickled, so a file planted there cannot run code. RecBole's
  trainer checkpoint pickles its ``Config``; it is never written (the best epoch's weights
  stay in memory). The cached weights are plain data (state dict and RecBole's "other
  parameters", tensors or ``None``) read with ``torch.load(weights_only=True)`` and checked
  against the model. RecBole's processed dataset is rebuilt from the benchmark files on
  every load, not pickled (``create_dataset`` would unpickle any file at its save path, and
  ``data_preparation`` any saved dataloaders; both lookups are bypassed). A restricted
  unpickler is no alternative: RecBole pickles the whole ``Dataset`` with its ``Config``
  (the model class, a YAML loader class), pandas frames and a logger, none of it plain data.
  Rebuilding makes loading a cached model on ml-100k slower: SASRec 2.0 s against 1.5 s,
  BPR 0.5 s against 0.16 s (medians of 5, two busy cores). A ``.pth`` file in a model's
  folder (an older cache's dataset pickle, or a planted file) is deleted unread, and
  weights that do not load or fit are retrained, each with a warning naming the file.
- RecBole's ``Pop`` counts every training row, so it is trained without negatives; and its
  counter (``item_cnt[item] += 1`` on a batch) adds 1 once per batch however often an item
  occurs in it, so its counts saturate at the number of batches. Pop's counts are set
  exactly from the training interactions instead.

The benchmark files of a split are cached under ``<cache_dir>/recbole/data/`` with the
SHA-256 of each (``SHA256SUMS.json``, written last); they are reused only when every file
still matches, and are otherwise written again from the split with a warning, so a file
edited by hand cannot change what a model learns or how cached weights map to items.

Trained weights are cached under ``<cache_dir>/models/`` keyed by (model, split,
seed, configuration), so a rerun of a notebook does not retrain. Each cache entry is written
under an inter-process lock (:func:`cache_lock`) that gives up after
``RECAGENTS_LOCK_TIMEOUT`` seconds (default 30 minutes) with an error naming its holder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import ITEM, RANK, SCORE, USER
from recagents.config import bounds, check_fields, settings
from recagents.data.datasets import Split
from recagents.locks import cache_lock
from recagents.metrics import rank_by_score

#: The RecBole models this module knows how to train; "Random" needs no training.
MODELS = ("Pop", "BPR", "LightGCN", "MultiVAE", "SASRec")

#: Hyper-parameters per model on top of RecBole's own defaults. SASRec is sized as in
#: AFL's tool model (1 block, 1 head, hidden 64, histories of at most 10 items): RecBole's
#: default (2 blocks, length 50) takes minutes per epoch on two CPU cores.
MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "Pop": {"train_neg_sample_args": None, "epochs": 1},
    "BPR": {"embedding_size": 64},
    # RecBole's learning rate (1e-3) leaves LightGCN at its popularity-like first epoch within
    # our epoch budget (early stopping fires at epoch 1 on ml-100k); 1e-2 trains it.
    "LightGCN": {"embedding_size": 64, "n_layers": 2, "reg_weight": 1e-5, "learning_rate": 1e-2},
    "MultiVAE": {"train_neg_sample_args": None, "mlp_hidden_size": [600], "latent_dimension": 128},
    "SASRec": {
        "train_neg_sample_args": None,
        "loss_type": "CE",
        "n_layers": 1,
        "n_heads": 1,
        "hidden_size": 64,
        "inner_size": 256,
        "hidden_dropout_prob": 0.1,
        "attn_dropout_prob": 0.1,
        "MAX_ITEM_LIST_LENGTH": 10,
    },
}

SEQUENTIAL = {"SASRec"}

#: Bumped whenever a change here alters what a cached model would contain.
CACHE_VERSION = 2


class BaselineError(ValueError):
    """A baseline that cannot be trained or scored as asked, with the reason."""


@dataclass(frozen=True)
class TrainConfig:
    """Training settings shared by all RecBole baselines.

    Attributes:
        epochs: Most training epochs (early stopping usually ends sooner).
        stopping_step: Epochs without a better validation NDCG@10 before stopping.
        learning_rate: Adam learning rate (RecBole's default); a ``learning_rate`` in
            :data:`MODEL_DEFAULTS` or in ``params`` of :func:`train_baseline` wins.
        train_batch_size: Training batch size (RecBole's default).
        seed: Seed for RecBole's initialisation and sampling.
    """

    epochs: int = field(default=100, metadata=bounds(0))
    stopping_step: int = field(default=10, metadata=bounds(1))
    learning_rate: float = field(default=1e-3, metadata=bounds(above=0))
    train_batch_size: int = field(default=2048, metadata=bounds(1))
    seed: int = 2020

    def __post_init__(self) -> None:
        check_fields(self)


@contextlib.contextmanager
def _recbole_sandbox(workdir: Path) -> Iterator[None]:
    """Run RecBole with a clean ``argv``, inside ``workdir``, with its chatter silenced."""
    saved_argv = sys.argv
    sys.argv = [saved_argv[0] if saved_argv else "recagents"]
    root = logging.getLogger()
    saved_level = root.level
    root.setLevel(logging.ERROR)
    workdir.mkdir(parents=True, exist_ok=True)
    _never_load_saved_dataloaders()
    try:
        with contextlib.chdir(workdir), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        sys.argv = saved_argv
        root.setLevel(saved_level)


def _never_load_saved_dataloaders() -> None:
    """Stop ``data_preparation`` unpickling a dataloader file found in the cache folder."""
    import recbole.data.utils

    recbole.data.utils.load_split_dataloaders = lambda config: None


def _create_dataset(config: Any, workdir: Path) -> tuple[Any, list[str]]:
    """RecBole's dataset, built from the benchmark files (never unpickled; see the module doc).

    Returns:
        The dataset, and one note per ``.pth`` file found in ``workdir``: such a file (an
        older cache's dataset pickle, or a planted one) is deleted without being read.
    """
    import importlib

    from recbole.utils import ModelType

    notes = []
    for stale in sorted(workdir.glob("*.pth")):
        stale.unlink()
        notes.append(
            f"deleted {stale} unread: pickled RecBole files can run code when loaded, so "
            "the dataset is rebuilt from the atomic files"
        )
    module = importlib.import_module("recbole.data.dataset")
    name = config["model"] + "Dataset"
    if not hasattr(module, name):
        sequential = config["MODEL_TYPE"] == ModelType.SEQUENTIAL
        name = "SequentialDataset" if sequential else "Dataset"
    return getattr(module, name)(config), notes


def _write_atomic(frame: pd.DataFrame, path: Path, header: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    frame.to_csv(tmp, sep="\t", index=False, header=header)
    tmp.replace(path)


def _check_tokens(split: Split) -> None:
    for part in (split.train, split.valid, split.test):
        for column in (USER, ITEM):
            if part[column].astype(str).str.contains(r"\s").any():
                raise BaselineError(
                    f"{column} values contain whitespace, which RecBole's atomic format "
                    "cannot hold; rename them first"
                )


#: The record of the benchmark files' SHA-256, written beside them after them.
BENCHMARK_SUMS = "SHA256SUMS.json"
_PARTS = ("train", "valid", "test")


def _file_sha256(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def _benchmark_problem(data_dir: Path) -> str | None:
    """Why the benchmark files in ``data_dir`` cannot be reused, or None if they can.

    Reused only when each ``data.<part>.inter`` has the SHA-256 recorded in
    :data:`BENCHMARK_SUMS` when it was written, so a file edited by hand (or cut short)
    never silently changes what a model learns or how its cached weights map to items.
    """
    sums_path = data_dir / BENCHMARK_SUMS
    if not sums_path.is_file():
        return "absent"
    try:
        sums = json.loads(sums_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return f"{sums_path} is not a checksum record"
    for part in _PARTS:
        path = data_dir / f"data.{part}.inter"
        if not path.is_file():
            return f"{path} is missing"
        if not isinstance(sums, dict) or _file_sha256(path) != sums.get(path.name):
            return f"{path} differs from the file written from the split (SHA-256 mismatch)"
    return None


def write_benchmark_files(split: Split, folder: Path, max_seq_len: int | None) -> Path:
    """Write ``split`` as RecBole benchmark files ``data.{train,valid,test}.inter``.

    For sequential models (``max_seq_len`` set) every row also carries
    ``item_id_list``: the user's previous items (at most ``max_seq_len``), so RecBole
    trains on each training prefix and evaluates valid/test on the full past.

    Files already in ``folder`` are reused only if their SHA-256 matches the record
    (:data:`BENCHMARK_SUMS`) written with them; otherwise they are written again from the
    split, with a warning naming the file that differed (see :func:`_benchmark_problem`).
    """
    _check_tokens(split)
    data_dir = folder / "data"
    problem = _benchmark_problem(data_dir)
    if problem is None:
        return folder
    if problem != "absent":
        warnings.warn(f"{problem}; writing the benchmark files again from the split", stacklevel=3)
    (data_dir / BENCHMARK_SUMS).unlink(missing_ok=True)
    for part, (frame, header) in _benchmark_frames(split, max_seq_len).items():
        _write_atomic(frame, data_dir / f"data.{part}.inter", header)
    sums = {f"data.{part}.inter": _file_sha256(data_dir / f"data.{part}.inter") for part in _PARTS}
    tmp = data_dir / f"{BENCHMARK_SUMS}.tmp"
    tmp.write_text(json.dumps(sums, indent=1), encoding="utf-8")
    tmp.replace(data_dir / BENCHMARK_SUMS)
    return folder


def _benchmark_frames(
    split: Split, max_seq_len: int | None
) -> dict[str, tuple[pd.DataFrame, list[str]]]:
    """The frame and header of each benchmark file (see :func:`write_benchmark_files`)."""
    if max_seq_len is None:
        header = ["user_id:token", "item_id:token"]
        return {part: (getattr(split, part)[[USER, ITEM]], header) for part in _PARTS}
    if split.valid[USER].duplicated().any() or split.test[USER].duplicated().any():
        raise BaselineError(
            "sequential models need at most one valid and one test item per user "
            "(a leave-one-out split); this split has several"
        )
    sequences = split.train.groupby(USER, sort=False)[ITEM].agg(list)
    valid_items = split.valid.set_index(USER)[ITEM]
    rows: dict[str, list[tuple[str, str, str]]] = {"train": [], "valid": [], "test": []}
    for user, items in sequences.items():
        for t in range(1, len(items)):
            rows["train"].append((user, items[t], " ".join(items[max(0, t - max_seq_len) : t])))
    for part, frame in (("valid", split.valid), ("test", split.test)):
        for user, item in frame[[USER, ITEM]].itertuples(index=False):
            past = list(sequences.get(user, []))
            if part == "test" and user in valid_items.index:
                past.append(valid_items[user])
            rows[part].append((user, item, " ".join(past[-max_seq_len:])))
    header = ["user_id:token", "item_id:token", "item_id_list:token_seq"]
    return {part: (pd.DataFrame(part_rows), header) for part, part_rows in rows.items()}


def _recbole_config(
    model: str, data_root: Path, train: TrainConfig, params: dict[str, Any], workdir: Path
) -> Any:
    import torch
    from recbole.config import Config

    load_col = ["user_id", "item_id"] + (["item_id_list"] if model in SEQUENTIAL else [])
    config_dict = {
        "data_path": str(data_root),
        "dataset": "data",
        "benchmark_filename": ["train", "valid", "test"],
        "load_col": {"inter": load_col},
        # One id space for targets and histories; without it RecBole remaps the lists alone.
        "alias_of_item_id": ["item_id_list"] if model in SEQUENTIAL else None,
        "USER_ID_FIELD": "user_id",
        "ITEM_ID_FIELD": "item_id",
        "eval_args": {"group_by": "user", "order": "TO", "mode": "full"},
        "metrics": ["NDCG", "Hit"],
        "topk": [10],
        "valid_metric": "NDCG@10",
        "epochs": train.epochs,
        "stopping_step": train.stopping_step,
        "learning_rate": train.learning_rate,
        "train_batch_size": train.train_batch_size,
        "eval_batch_size": 4096,
        "seed": train.seed,
        "reproducibility": True,
        "use_gpu": torch.cuda.is_available(),
        "checkpoint_dir": str(workdir),
        "show_progress": False,
        # Neither is pickled: a pickle in the cache could run code (see the module doc).
        "save_dataset": False,
        "save_dataloaders": False,
        "log_wandb": False,
        **params,
    }
    return Config(model=model, config_dict=config_dict)


@dataclass
class Baseline:
    """A trained RecBole model that scores candidates and recommends, by our ids.

    Attributes:
        name: The RecBole model name.
        split: The split it was trained on.
        valid_curve: Validation NDCG@10 after each evaluated epoch.
        best_epoch: The epoch whose weights were kept (early stopping).
        train_seconds: Wall time of training (0 when loaded from the cache).
        from_cache: Whether the weights came from the cache.
    """

    name: str
    split: Split
    model: Any
    dataset: Any
    phase_data: dict[str, Any]
    valid_curve: list[float]
    best_epoch: int
    train_seconds: float
    from_cache: bool

    def _user_rows(self, phase: str, users: list[str]) -> tuple[Any, np.ndarray]:
        """The RecBole interactions of ``users`` in ``phase`` and their row order."""
        data = self.phase_data[phase]
        uid_field = self.dataset.uid_field
        tokens = self.dataset.id2token(uid_field, data.inter_feat[uid_field].numpy())
        index = pd.Index(tokens)
        if not index.is_unique:
            raise BaselineError(f"{phase} holds several rows for one user")
        missing = [u for u in users if u not in index]
        if missing:
            raise BaselineError(
                f"{len(missing)} user(s) have no {phase} interaction, e.g. {missing[:3]}"
            )
        rows = index.get_indexer(users)
        return data.inter_feat[rows], rows

    def full_scores(
        self,
        users: list[str],
        phase: Literal["valid", "test"] = "test",
        batch_size: int = 512,
    ) -> np.ndarray:
        """Scores of every item (RecBole's internal order) for ``users``: shape (users, items).

        Column 0 is RecBole's padding item and is always ``-inf``.
        """
        import torch

        inter, _ = self._user_rows(phase, users)
        n_items = self.dataset.item_num
        out = np.empty((len(users), n_items), dtype=np.float64)
        self.model.eval()
        with torch.no_grad():
            for start in range(0, len(users), batch_size):
                batch = inter[start : start + batch_size].to(self.model.device)
                scores = self.model.full_sort_predict(batch).view(-1, n_items)
                out[start : start + batch_size] = scores.double().cpu().numpy()
        out[:, 0] = -np.inf
        return out

    def user_scores(self, users: list[str], batch_size: int = 512) -> np.ndarray:
        """Scores of every item (RecBole's internal order) from the user id alone.

        Unlike :meth:`full_scores` it needs no held-out row per user, so it serves splits
        with many validation or test items per user (Agent4Rec's random 40/30/30 split).
        General models only: a sequential model needs a history, not just an id.

        Raises:
            BaselineError: A sequential model, or a user the model never saw.
        """
        import torch
        from recbole.data.interaction import Interaction

        if self.name in SEQUENTIAL:
            raise BaselineError(f"{self.name} scores histories, not user ids; use full_scores")
        uid_field = self.dataset.uid_field
        known = self.dataset.field2token_id[uid_field]
        missing = [u for u in users if u not in known]
        if missing:
            raise BaselineError(f"{len(missing)} user(s) unknown to the model, e.g. {missing[:3]}")
        ids = torch.tensor([known[u] for u in users], dtype=torch.long)
        n_items = self.dataset.item_num
        out = np.empty((len(users), n_items), dtype=np.float64)
        self.model.eval()
        with torch.no_grad():
            for start in range(0, len(users), batch_size):
                batch = Interaction({uid_field: ids[start : start + batch_size]})
                scores = self.model.full_sort_predict(batch.to(self.model.device))
                out[start : start + batch_size] = scores.view(-1, n_items).double().cpu().numpy()
        out[:, 0] = -np.inf
        return out

    def sequence_scores(self, histories: list[list[str]], batch_size: int = 512) -> np.ndarray:
        """Scores of every item (RecBole's internal order) after each given item history.

        A sequential model scores any history, not only the rows of its own split: AFL's
        tool model scores the history each agent sees. Histories are oldest first; only the
        last ``MAX_ITEM_LIST_LENGTH`` items count, as in training.

        Raises:
            BaselineError: A general model, an empty history, or an item the model never saw.
        """
        import torch
        from recbole.data.interaction import Interaction

        if self.name not in SEQUENTIAL:
            raise BaselineError(f"{self.name} scores user ids, not histories; use user_scores")
        token2id = self.dataset.field2token_id[self.dataset.iid_field]
        max_len = int(self.model.max_seq_length)
        ids = np.zeros((len(histories), max_len), dtype=np.int64)
        lengths = np.zeros(len(histories), dtype=np.int64)
        for row, history in enumerate(histories):
            if not history:
                raise BaselineError(f"history {row} is empty; a sequential model needs one item")
            unknown = [item for item in history if item not in token2id]
            if unknown:
                raise BaselineError(f"history {row} holds items the model never saw: {unknown[:3]}")
            recent = [token2id[item] for item in history][-max_len:]
            # RecBole keeps histories left-aligned, padded with 0 at the end.
            ids[row, : len(recent)] = recent
            lengths[row] = len(recent)
        n_items = self.dataset.item_num
        out = np.empty((len(histories), n_items), dtype=np.float64)
        self.model.eval()
        with torch.no_grad():
            for start in range(0, len(histories), batch_size):
                batch = Interaction(
                    {
                        self.model.ITEM_SEQ: torch.from_numpy(ids[start : start + batch_size]),
                        self.model.ITEM_SEQ_LEN: torch.from_numpy(
                            lengths[start : start + batch_size]
                        ),
                    }
                )
                scores = self.model.full_sort_predict(batch.to(self.model.device))
                out[start : start + batch_size] = scores.view(-1, n_items).double().cpu().numpy()
        out[:, 0] = -np.inf
        return out

    def item_index(self, items: list[str], unknown: int | None = None) -> np.ndarray:
        """Column of each item in the score matrices (RecBole's internal ids).

        Args:
            items: Item ids.
            unknown: Column given to an item the model never saw; ``None`` raises instead.
        """
        if unknown is None:
            return self._item_ids(pd.Series(items, dtype=object))
        token2id = self.dataset.field2token_id[self.dataset.iid_field]
        return np.array([token2id.get(item, unknown) for item in items], dtype=np.int64)

    def top_k(
        self, users: list[str], k: int, exclude: pd.DataFrame | None = None, seed: int = 0
    ) -> pd.DataFrame:
        """Each user's ``k`` best items by :meth:`user_scores`, never one in ``exclude``.

        Args:
            users: Users to recommend to.
            k: List length.
            exclude: ``[user_id, item_id]`` pairs that must not be recommended.
            seed: Seeds the tie-break (Pop gives many items the same score).

        Returns:
            ``[user_id, item_id, score, rank]``, rank 1 first; shorter than ``k`` for a user
            with fewer eligible items.

        Raises:
            BaselineError: A user listed twice, or unknown to the model.
        """
        if len(set(users)) != len(users):
            raise BaselineError("top_k: a user is listed more than once")
        scores = self.user_scores(users)
        if exclude is not None and len(exclude):
            row_of = {u: i for i, u in enumerate(users)}
            mask = exclude[exclude[USER].isin(row_of)]
            token2id = self.dataset.field2token_id[self.dataset.iid_field]
            item_ids = mask[ITEM].map(token2id)
            keep = item_ids.notna().to_numpy()
            rows = mask[USER].map(row_of).to_numpy()[keep]
            scores[rows, item_ids.to_numpy()[keep].astype(np.int64)] = -np.inf
        ties = np.random.default_rng(seed).random(scores.shape)
        tokens = self.dataset.field2id_token[self.dataset.iid_field]
        frames = []
        for i, user in enumerate(users):
            # Best score first; equal scores in a seeded random order; never an excluded item.
            order = np.lexsort((ties[i], -scores[i]))
            order = order[np.isfinite(scores[i, order])][:k]
            frames.append(
                pd.DataFrame(
                    {
                        USER: user,
                        ITEM: tokens[order].astype(str),
                        SCORE: scores[i, order],
                        RANK: np.arange(1, len(order) + 1, dtype=np.int64),
                    }
                )
            )
        return pd.concat(frames, ignore_index=True)

    def score(
        self,
        candidates: pd.DataFrame,
        phase: Literal["valid", "test"] = "test",
        seed: int = 0,
    ) -> pd.DataFrame:
        """Score candidates ``[user_id, item_id, ...]`` into ``[user_id, item_id, score, rank]``.

        Ties (e.g. Pop's equal counts) are broken by a seeded shuffle, never in favour of
        the held-out item.
        """
        users = sorted(candidates[USER].unique())
        scores = self.full_scores(users, phase)
        user_row = {u: i for i, u in enumerate(users)}
        item_ids = self._item_ids(candidates[ITEM])
        rows = candidates[USER].map(user_row).to_numpy()
        frame = candidates[[USER, ITEM]].copy()
        frame[SCORE] = scores[rows, item_ids]
        return rank_by_score(frame, seed=seed)

    def recommend(
        self,
        k: int = 100,
        phase: Literal["valid", "test"] = "test",
        users: list[str] | None = None,
        seed: int = 0,
    ) -> pd.DataFrame:
        """Top-``k`` items from the whole catalogue, the user's history excluded.

        History = train for ``valid``; train + valid for ``test``.
        """
        truth = self.split.truth(phase)
        users = sorted(truth[USER].unique()) if users is None else sorted(users)
        scores = self.full_scores(users, phase)
        history = self.split.history(phase)
        history = history[history[USER].isin(set(users))]
        user_row = {u: i for i, u in enumerate(users)}
        scores[history[USER].map(user_row).to_numpy(), self._item_ids(history[ITEM])] = -np.inf
        rng = np.random.default_rng(seed)
        jitter = rng.random(scores.shape) * 1e-9 * (np.abs(scores[np.isfinite(scores)]).max() + 1)
        top = np.argsort(-(scores + jitter), axis=1)[:, :k]
        tokens = self.dataset.id2token(self.dataset.iid_field, top.ravel())
        frame = pd.DataFrame(
            {
                USER: np.repeat(users, top.shape[1]),
                ITEM: tokens,
                SCORE: np.take_along_axis(scores, top, axis=1).ravel(),
                RANK: np.tile(np.arange(1, top.shape[1] + 1), len(users)),
            }
        )
        return frame[np.isfinite(frame[SCORE])].reset_index(drop=True)

    def _item_ids(self, items: pd.Series) -> np.ndarray:
        token2id = self.dataset.field2token_id[self.dataset.iid_field]
        ids = items.map(token2id)
        if ids.isna().any():
            unknown = items[ids.isna()].unique()[:3].tolist()
            raise BaselineError(f"items unknown to the model, e.g. {unknown}")
        return ids.to_numpy(dtype=np.int64)


def _cache_key(model: str, split: Split, train: TrainConfig, params: dict[str, Any]) -> str:
    import recbole

    blob = json.dumps(
        {
            "model": model,
            "split": split.fingerprint,
            "train": asdict(train),
            "params": params,
            "recbole": recbole.__version__,
            "version": CACHE_VERSION,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def train_baseline(
    model: str,
    split: Split,
    train: TrainConfig | None = None,
    params: dict[str, Any] | None = None,
    cache_dir: Path | None = None,
    progress: bool = True,
) -> Baseline:
    """Train (or load from the cache) one RecBole model on ``split``.

    Args:
        model: One of :data:`MODELS`.
        split: The split from :mod:`recagents.data`; valid drives early stopping.
        train: Training settings; the defaults are RecBole's, with early stopping.
        params: RecBole hyper-parameters of this model, overriding :data:`MODEL_DEFAULTS`
            (e.g. ``{"MAX_ITEM_LIST_LENGTH": 50}`` for SASRec).
        cache_dir: Where data files and weights are kept (default: settings' cache).
        progress: Show a progress bar over epochs.

    Returns:
        The trained :class:`Baseline`.
    """
    if model not in MODELS:
        raise BaselineError(f"unknown baseline {model!r}; choose from {', '.join(MODELS)}")
    if split.valid.empty or split.test.empty:
        raise BaselineError("the split has no valid or test interactions to train against")
    from recbole.data import data_preparation
    from recbole.utils import get_model, init_seed

    train = train or TrainConfig()
    root = Path(cache_dir or settings().cache_dir) / "recbole"
    params = {**MODEL_DEFAULTS[model], **(params or {})}
    seq_len = params.get("MAX_ITEM_LIST_LENGTH") if model in SEQUENTIAL else None
    folder = root / "data" / f"{split.fingerprint}-{'seq' + str(seq_len) if seq_len else 'general'}"
    with cache_lock(folder):
        data_root = write_benchmark_files(split, folder, seq_len)
    workdir = root / "models" / f"{model}-{_cache_key(model, split, train, params)}"
    weights, meta_path = workdir / "weights.pt", workdir / "meta.json"
    # Under `make -j2` two notebooks may need the same model: the second waits for the first
    # to finish training and then loads its weights, instead of training it again beside it.
    with cache_lock(workdir), _recbole_sandbox(workdir):
        config = _recbole_config(model, data_root, train, params, workdir)
        init_seed(config["seed"], config["reproducibility"])
        dataset, notes = _create_dataset(config, workdir)
        train_data, valid_data, test_data = data_preparation(config, dataset)

        def fresh_network() -> Any:
            init_seed(config["seed"], config["reproducibility"])
            return get_model(config["model"])(config, train_data.dataset).to(config["device"])

        network, meta, seconds = fresh_network(), None, 0.0
        if weights.is_file() and meta_path.is_file():
            meta, refused = _load_cached(network, weights, meta_path, config["device"])
            if meta is None:
                notes.append(refused)
                network = fresh_network()  # a failed load may have set some weights
        from_cache = meta is not None
        if meta is None:
            if model == "Pop":
                meta = _fit_pop(network, train_data.dataset)
            else:
                meta, seconds = _fit(config, network, train_data, valid_data, progress)
            _save_cached(network, meta, weights, meta_path)
    for note in notes:  # RecBole's warnings are silenced inside the sandbox, not these
        warnings.warn(f"{model}: {note}", stacklevel=2)
    network.eval()
    return Baseline(
        name=model,
        split=split,
        model=network,
        dataset=dataset,
        phase_data={"valid": valid_data.dataset, "test": test_data.dataset},
        valid_curve=meta["valid_curve"],
        best_epoch=meta["best_epoch"],
        train_seconds=seconds,
        from_cache=from_cache,
    )


def _plain_checkpoint(network: Any) -> dict[str, Any]:
    """A copy of the weights as plain data: ``{"state_dict": ..., "other_parameter": ...}``.

    RecBole's "other parameters" (Pop's counts, LightGCN's cached embeddings) are tensors or
    ``None``, so the whole checkpoint loads with ``torch.load(weights_only=True)``.
    """
    import torch

    def copy(value: Any) -> Any:
        return value.detach().clone() if isinstance(value, torch.Tensor) else value

    return {
        "state_dict": {key: copy(value) for key, value in network.state_dict().items()},
        "other_parameter": {key: copy(value) for key, value in network.other_parameter().items()},
    }


def _load_cached(
    network: Any, weights: Path, meta_path: Path, device: Any
) -> tuple[dict[str, Any] | None, str]:
    """Load cached weights into ``network``, reading plain data only and checking it first.

    Only tensors of exactly ``network``'s parameters are loaded, and "other parameters" only
    under the names the model declares (they are set as attributes).

    Returns:
        The training record, or ``None`` and why the cache was refused (for a warning).
    """
    import torch

    try:
        state = torch.load(weights, map_location=device, weights_only=True)
        expected = network.state_dict()
        given = state.get("state_dict") if isinstance(state, dict) else None
        if not isinstance(given, dict) or set(given) != set(expected):
            raise ValueError("its parameters are not the model's")
        for key, value in given.items():
            if not isinstance(value, torch.Tensor) or value.shape != expected[key].shape:
                raise ValueError(f"{key} is not a tensor of shape {tuple(expected[key].shape)}")
        other = state.get("other_parameter") or {}
        names = set(getattr(network, "other_parameter_name", ()))
        if not (isinstance(other, dict) and set(other) <= names) or not all(
            value is None or isinstance(value, torch.Tensor) for value in other.values()
        ):
            raise ValueError(f"other_parameter holds more than tensors named {sorted(names)}")
        meta = json.loads(meta_path.read_text())
        if not isinstance(meta, dict) or not {"valid_curve", "best_epoch"} <= set(meta):
            raise ValueError(f"{meta_path.name} is not a training record")
        network.load_state_dict(given)
        network.load_other_parameter(other)
    except Exception as error:  # whatever the file holds, it is retrained, never trusted
        boilerplate = ("Weights only load failed", "Please file an issue", "Check the doc")
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        why = next((line for line in lines if not line.startswith(boilerplate)), "")
        return None, f"refused cached weights {weights} ({type(error).__name__}: {why}); retraining"
    return meta, ""


def _save_cached(network: Any, meta: dict[str, Any], weights: Path, meta_path: Path) -> None:
    """Write the weights as plain data and the training record, each atomically."""
    import torch

    tmp = weights.with_name(weights.name + ".tmp")
    torch.save(_plain_checkpoint(network), tmp)
    tmp.replace(weights)
    tmp = meta_path.with_name(meta_path.name + ".tmp")
    tmp.write_text(json.dumps(meta))
    tmp.replace(meta_path)


def _fit(
    config: Any, network: Any, train_data: Any, valid_data: Any, progress: bool
) -> tuple[dict[str, Any], float]:
    """Run RecBole's trainer with early stopping and restore the best epoch's weights."""
    from recbole.utils import get_trainer
    from tqdm.auto import tqdm

    trainer = get_trainer(config["MODEL_TYPE"], config["model"])(config, network)
    best: dict[str, Any] = {"epoch": -1, "checkpoint": None}

    def keep_best(epoch: int, verbose: bool = True, **kwargs: Any) -> None:
        # Replaces RecBole's checkpoint file, which pickles its Config (see the module doc).
        best["epoch"], best["checkpoint"] = epoch, _plain_checkpoint(network)

    trainer._save_checkpoint = keep_best
    curve: list[float] = []
    bar = tqdm(total=config["epochs"], desc=f"train {config['model']}", disable=not progress)

    def on_epoch(epoch: int, valid_score: float) -> None:
        curve.append(float(valid_score))
        bar.update(1)
        bar.set_postfix(ndcg10=f"{valid_score:.4f}")

    started = time.perf_counter()
    try:
        trainer.fit(train_data, valid_data, verbose=False, saved=True, callback_fn=on_epoch)
    finally:
        bar.close()
    seconds = time.perf_counter() - started
    if best["checkpoint"] is not None:
        network.load_state_dict(best["checkpoint"]["state_dict"])
        network.load_other_parameter(best["checkpoint"]["other_parameter"])
    return {"valid_curve": curve, "best_epoch": int(best["epoch"])}, seconds


def _fit_pop(network: Any, train_dataset: Any) -> dict[str, Any]:
    """Set RecBole Pop's item counts exactly (its own counter saturates; see the module doc)."""
    import torch

    items = train_dataset.inter_feat[train_dataset.iid_field]
    counts = torch.bincount(items, minlength=network.n_items).to(network.item_cnt)
    network.item_cnt = counts.view(-1, 1)
    network.max_cnt = counts.max().view(1)
    return {"valid_curve": [], "best_epoch": 0}


def random_scores(candidates: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The Random baseline: uniform scores, seeded; ranks a candidate frame by chance."""
    rng = np.random.default_rng(seed)
    frame = candidates[[USER, ITEM]].copy()
    frame[SCORE] = rng.random(len(frame))
    return rank_by_score(frame, seed=seed)
