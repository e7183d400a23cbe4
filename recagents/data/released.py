"""The papers' released data as named datasets: AgentCF's CDs, AFL's LastFM, Agent4Rec's ML-1M.

Every file comes through :func:`recagents.data.releases.fetch` (SHA-256 checked; the offline
mirror only when ``RECAGENTS_RELEASES_MIRROR`` names it) and every pickle through
:mod:`recagents.data.safepickle` with the allow-lists of :mod:`recagents.data.released_pickles`.

* ``cds-dense`` / ``cds-sparse`` (:func:`load_cds`): AgentCF's two 100-user Amazon CDs
  subsets with the released RecBole split kept (ids as released), titles HTML-unescaped,
  categories kept whole as the paper's loader reads them (``"Classic Rock; Album-Oriented
  Rock (AOR)"``, never split on spaces); plus the gpt-3.5 agents the authors trained:
  :func:`cds_user_memories` and :func:`cds_item_memory_versions`.
* ``lastfm`` (:func:`load_lastfm`): AFL's LastFM (LLaRA format) with artist names, the
  released test samples (not a re-split) and SASRec's released predictions on them;
  :func:`sasrec_hit_at_1` is SASRec alone, to check against the paper's LastFM row.
* ``agent4rec-ml1m`` (:func:`load_agent4rec_ml1m`): Agent4Rec's 1,000 ML-1M agents (ids
  ``"0"``..``"999"``) with their released split and movie details (title, mean rating,
  summary), but no ratings (the release has none); their personas and trait levels:
  :func:`agent4rec_personas`, :func:`agent4rec_traits`.

:func:`recagents.data.load_dataset` delegates these names to :func:`released_dataset`.
"""

from __future__ import annotations

import html
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from recagents.columns import GENRES, ITEM, TITLE, USER, YEAR
from recagents.data import releases
from recagents.data.atomic import DatasetError, read_atomic
from recagents.data.datasets import RELEASED_DATASETS, Dataset, Split
from recagents.data.released_pickles import TORCH_AS_NUMPY, load_frame, load_npy_object
from recagents.metrics import bootstrap_ci

#: The releases (names in ``recagents/resources/releases.json``) these datasets come from.
AGENTCF_RELEASE = "agentcf-cds"
AFL_RELEASE = "afl-lastfm"
AGENT4REC_RELEASE = "agent4rec-ml1m"
#: The name of Agent4Rec's released ML-1M agents as a dataset (the release's name).
AGENT4REC_ML1M = "agent4rec-ml1m"
#: The item id LLaRA's LastFM frames pad short sequences with (AFL's ``padding_item_id``).
LASTFM_PADDING = 4606
#: The seed and list size of AFL's released LastFM evaluation (``scripts/evaluate_rec.sh``).
LASTFM_SEED = 303
LASTFM_CANDIDATES = 20
#: AFL's loader keeps samples whose ``len_seq`` is at least this.
LASTFM_MIN_LENGTH = 3
#: The category the paper's loader gives a CD whose category field is empty.
CDS_NO_CATEGORY = "CDs"
_LASTFM = "data/lastfm"
_SASREC = "data/prior_lastfm/SASRec.csv"
_SAVED = "saved/1000"
_A4R_SIMULATION = "datasets/ml-1m/simulation"
_A4R_SPLIT = "datasets/ml-1m/cf_data"
_A4R_YEAR = re.compile(r"^(?P<title>.*\S)\s*\((?P<year>\d{4})\)$")


def _fetch(release: str, path: str) -> Path:
    """The local, verified copy of one released file."""
    return releases.fetch(release, [path], progress=False) / path


# --------------------------------------------------------------------------- AgentCF's CDs


def _cds_path(variant: str, name: str) -> str:
    if variant not in ("dense", "sparse"):
        raise DatasetError(f"variant must be 'dense' or 'sparse', got {variant!r}")
    return f"agentcf/dataset/CDs-100-user-{variant}/{name}"


def _user_sequences(variant: str) -> dict[str, list[str]]:
    """Each user's whole sequence (train prefix and targets, valid, test), checked."""
    parts = {}
    for part in ("train", "valid", "test"):
        path = _fetch(AGENTCF_RELEASE, _cds_path(variant, f"CDs-100-user-{variant}.{part}.inter"))
        parts[part] = (path, read_atomic(path, (USER, "item_id_list", ITEM)))
    test = parts["test"][1]
    sequences = {row[USER]: [*row["item_id_list"].split(), row[ITEM]] for _, row in test.iterrows()}
    for part, (path, frame) in parts.items():
        rows = zip(frame[USER], frame["item_id_list"], frame[ITEM], strict=True)
        for line, (user, history, item) in enumerate(rows, start=2):
            seen = [*history.split(), item]
            full = sequences.get(user)
            if full is None or full[: len(seen)] != seen:
                raise DatasetError(f"{path}: line {line} is not a prefix of the user's test row")
            if part != "train" and len(seen) != len(full) - (part == "valid"):
                raise DatasetError(f"{path}: line {line} is not the user's {part} item")
    return sequences


def _cds_items(variant: str) -> pd.DataFrame:
    """``CDs.item`` with titles unescaped and categories kept whole, as the paper reads them."""
    raw = read_atomic(_fetch(AGENTCF_RELEASE, _cds_path(variant, "CDs.item")), (ITEM,))
    titles = raw["title"].map(html.unescape)
    category = raw["category"].map(html.unescape)
    genres = category.map(lambda text: tuple(p.strip() for p in text.split(";") if p.strip()))
    return pd.DataFrame(
        {
            ITEM: raw[ITEM],
            TITLE: titles,
            YEAR: pd.array([pd.NA] * len(raw), dtype="Int64"),
            GENRES: genres,
            "category": category.where(category.str.strip() != "", CDS_NO_CATEGORY),
        }
    )


def load_cds(variant: Literal["dense", "sparse"] = "dense") -> tuple[Dataset, Split]:
    """AgentCF's released CDs subset and its split, ids as released.

    Each user's 8 items, oldest first: the first is history only, the next five are the
    training targets, then one valid and one test item (checked across the three files).
    ``train`` holds the first six, as :func:`recagents.papers.agentcf.subsets.make_subset`
    does. Items are the whole ``CDs.item`` table: ``title`` HTML-unescaped (``"Tom Petty &
    The Heartbreakers"``), ``category`` the text the paper's prompts show (``"CDs"`` when
    empty, as its loader does) and ``genres`` its ``"; "``-separated parts.

    Raises:
        DatasetError: An unknown variant, or split files that disagree (naming the line).
        recagents.data.releases.ReleaseError: A file not in the cache, mirror or network.
    """
    sequences = _user_sequences(variant)
    rows = [(user, item) for user, items in sequences.items() for item in items]
    interactions = pd.DataFrame(rows, columns=[USER, ITEM])
    position = interactions.groupby(USER, sort=False).cumcount()
    length = interactions.groupby(USER, sort=False)[ITEM].transform("size")
    parts = {
        "train": interactions[position < length - 2],
        "valid": interactions[position == length - 2],
        "test": interactions[position == length - 1],
    }
    split = Split(
        **{part: frame.reset_index(drop=True) for part, frame in parts.items()},
        name=f"agentcf-{variant}",
    )
    folder = releases.fetch(AGENTCF_RELEASE, [_cds_path(variant, "CDs.item")], progress=False)
    dataset = Dataset(
        name=f"cds-{variant}",
        path=folder / _cds_path(variant, ""),
        interactions=interactions,
        items=_cds_items(variant),
        users=None,
        domain="CD",
    )
    return dataset, split


def cds_user_memories(variant: Literal["dense", "sparse"] = "dense") -> pd.DataFrame:
    """Every user agent's final memory after the authors' gpt-3.5 training.

    Returns:
        ``[user_id, memory]`` in file order (``saved/1000/user``), the padding user dropped.
    """
    path = _fetch(AGENTCF_RELEASE, _cds_path(variant, f"{_SAVED}/user"))
    raw = read_atomic(path, (USER, "user_description"))
    raw = raw[raw[USER] != "[PAD]"]
    return pd.DataFrame(
        {USER: raw[USER].to_numpy(), "memory": raw["user_description"].str.strip().to_numpy()}
    )


def cds_item_memory_versions(
    item_id: str | int, variant: Literal["dense", "sparse"] = "dense"
) -> pd.DataFrame:
    """An item agent's description versions over training, oldest first, with embeddings.

    The file (``saved/1000/item_embeddings_<id>.npy``) is ``np.save`` of the agent's
    ``{description: ada-002 embedding}`` dict; it is read through
    :func:`recagents.data.released_pickles.load_npy_object` (torch tensors become numpy arrays).
    Only a sample of these files is in the manifest and the offline mirror (see its README).

    Returns:
        ``[version, description, embedding]``; ``version`` 0 is the initial description,
        ``embedding`` a float32 array or ``None``.

    Raises:
        recagents.data.releases.ReleaseError: The item's file is not in the manifest (the message
            names it and the items that are) or cannot be fetched.
    """
    path = _cds_path(variant, f"{_SAVED}/item_embeddings_{item_id}.npy")
    listed = {f.path for f in releases.manifest(AGENTCF_RELEASE).files}
    if path not in listed:
        prefix = _cds_path(variant, f"{_SAVED}/item_embeddings_")
        known = sorted(p[len(prefix) : -4] for p in listed if p.startswith(prefix))
        raise releases.ReleaseError(
            f"release {AGENTCF_RELEASE!r}: {path} is missing: the manifest lists only a sample "
            f"of the per-item memory files ({len(known)} for the {variant} subset"
            + (
                f": items {', '.join(known[:12])}{' ...' if len(known) > 12 else ''}"
                if known
                else ""
            )
            + "); the rest (about 400 MB) are on GitHub only"
        )
    memory = load_npy_object(_fetch(AGENTCF_RELEASE, path), TORCH_AS_NUMPY)
    if not isinstance(memory, dict) or not all(isinstance(k, str) for k in memory):
        raise DatasetError(f"{path}: not a {{description: embedding}} dict")
    return pd.DataFrame(
        {
            "version": np.arange(len(memory)),
            "description": list(memory),
            "embedding": list(memory.values()),
        }
    )


# --------------------------------------------------------------------------- AFL's LastFM


def _artist_names() -> pd.Series:
    """``id2name.txt``: ``id::name`` per line, as AFL reads it; indexed by item id (str)."""
    path = _fetch(AFL_RELEASE, f"{_LASTFM}/id2name.txt")
    names = {}
    for line, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        item, sep, name = text.partition("::")
        if not sep or not item.isdigit():
            raise DatasetError(f"{path}: line {line} is not 'id::name'")
        names[item] = name.strip()
    return pd.Series(names, name=TITLE)


def _unpadded(sequence: list[int]) -> tuple[str, ...]:
    return tuple(str(item) for item in sequence if item != LASTFM_PADDING)


def _training_users(frame: pd.DataFrame) -> pd.DataFrame:
    """Rebuild users from ``train_data.df``'s sliding windows: ``[user_id, item_id]``.

    Each row is (the last <= 10 items, the next); a row continues the previous user when
    its window is the end of that user's items so far, else it starts a new user.
    """
    rows: list[tuple[str, str]] = []
    items: list[str] = []
    user = -1
    for window, following in zip(frame["seq"], frame["next"], strict=True):
        window = list(_unpadded(window))
        if user < 0 or not window or window != items[-len(window) :]:
            user, items = user + 1, list(window)
            rows.extend((f"u{user}", item) for item in items)
        items.append(str(following))
        rows.append((f"u{user}", str(following)))
    return pd.DataFrame(rows, columns=[USER, ITEM])


def load_lastfm() -> tuple[Dataset, pd.DataFrame, pd.DataFrame]:
    """AFL's LastFM: the dataset, the released test samples and SASRec's predictions.

    The frames (``train_data.df``, ``Val_data.df``, ``Test_data.df``: ``seq`` padded with
    :data:`LASTFM_PADDING`, ``len_seq``, ``next``) are read through
    :func:`recagents.data.released_pickles.load_frame`. Interactions are the training windows
    joined back into users (``u0``, ``u1``, ...); items are ``id2name.txt``'s artists. The
    samples are ``Test_data.df``'s rows with ``len_seq >= 3`` numbered as AFL numbers them
    (``sample`` is its ``id``), and ``prior_lastfm/SASRec.csv`` is matched on that id.

    Returns:
        ``(dataset, samples, predictions)``: ``samples`` is ``[sample, user_id, history,
        target, target_name]`` (``user_id`` is ``test-<sample>``, ``history`` the unpadded
        item ids, oldest first); ``predictions`` is ``[sample, prior_name, target_name,
        prior, hit]``: SASRec's pick by name as released, its item id when the name is one
        artist's, and AFL's hit rule (names equal ignoring case and outer spaces).

    Raises:
        DatasetError: The prediction file does not line up with the samples.
    """
    names = _artist_names()
    frames = {
        part: load_frame(_fetch(AFL_RELEASE, f"{_LASTFM}/{part}_data.df"))
        for part in ("train", "Test")
    }
    test = frames["Test"][frames["Test"]["len_seq"] >= LASTFM_MIN_LENGTH].reset_index(drop=True)
    samples = pd.DataFrame(
        {
            "sample": np.arange(len(test)),
            USER: [f"test-{i}" for i in range(len(test))],
            "history": test["seq"].map(_unpadded).to_numpy(),
            "target": test["next"].astype(str).to_numpy(),
        }
    )
    samples["target_name"] = samples["target"].map(names)
    predictions = _sasrec_predictions(names, samples)
    items = pd.DataFrame(
        {
            ITEM: names.index.to_numpy(),
            TITLE: names.to_numpy(),
            YEAR: pd.array([pd.NA] * len(names), dtype="Int64"),
            GENRES: [() for _ in range(len(names))],
        }
    )
    folder = releases.fetch(AFL_RELEASE, [f"{_LASTFM}/id2name.txt"], progress=False)
    dataset = Dataset(
        name="lastfm",
        path=folder / _LASTFM,
        interactions=_training_users(frames["train"]),
        items=items,
        users=None,
        domain="artist",
    )
    return dataset, samples, predictions


def _sasrec_predictions(names: pd.Series, samples: pd.DataFrame) -> pd.DataFrame:
    """``SASRec.csv`` (``id, generate, real``) checked against the samples it belongs to."""
    path = _fetch(AFL_RELEASE, _SASREC)
    raw = pd.read_csv(path, dtype={"generate": str, "real": str}, keep_default_na=False)
    if list(raw.columns) != ["id", "generate", "real"] or len(raw) != len(samples):
        raise DatasetError(f"{path}: expected columns id, generate, real for {len(samples)} rows")
    raw = raw.sort_values("id").reset_index(drop=True)
    real = raw["real"].str.strip().str.lower()
    if (raw["id"].to_numpy() != samples["sample"].to_numpy()).any() or (
        real != samples["target_name"].str.strip().str.lower()
    ).any():
        raise DatasetError(f"{path}: ids or target names differ from Test_data.df's samples")
    lowered = names.str.lower()
    unique = lowered[~lowered.duplicated(keep=False)]
    id_of = pd.Series(unique.index, index=unique.to_numpy())
    generate = raw["generate"].str.strip().str.lower()
    return pd.DataFrame(
        {
            "sample": raw["id"].to_numpy(),
            "prior_name": raw["generate"].to_numpy(),
            "target_name": raw["real"].to_numpy(),
            "prior": generate.map(id_of).to_numpy(),
            "hit": (raw["generate"].str.lower() == real).to_numpy(),
        }
    )


def lastfm_candidates(
    samples: pd.DataFrame, seed: int = LASTFM_SEED, n_candidates: int = LASTFM_CANDIDATES
) -> pd.DataFrame:
    """The candidate lists of AFL's released LastFM evaluation, drawn again as its code draws.

    The lists themselves were not released, but the procedure was: AFL's ``evaluate_rec.py``
    seeds Python's ``random`` with 303, then, sample by sample in order, draws
    ``n_candidates - 1`` negatives with ``random.sample`` from the artists of ``id2name.txt``
    (file order) outside the history and the target, appends the target and shuffles. The
    same draws from the same generator give the same lists. The check: SASRec's released
    pick, which the authors' tool chose *from* its list, lies in every list drawn here
    (notebook 03 counts it; 122 of 122).

    Args:
        samples: :func:`load_lastfm`'s samples, in their order (``sample``, ``user_id``,
            ``history``, ``target``).
        seed: The seed of the released script.
        n_candidates: List size, the target included.

    Returns:
        ``[sample, user_id, item_id, position]``: each list in display order.
    """
    order = list(_artist_names().index)
    draw = random.Random(seed)  # the same generator as random.seed(seed) + random.sample
    rows = []
    for sample in samples.itertuples(index=False):
        seen = set(sample.history) | {sample.target}
        pool = [item for item in order if item not in seen]
        shown = draw.sample(pool, n_candidates - 1) + [sample.target]
        draw.shuffle(shown)
        rows += [(sample.sample, sample.user_id, item, k) for k, item in enumerate(shown)]
    return pd.DataFrame(rows, columns=["sample", USER, ITEM, "position"])


def lastfm_picks_listed(
    candidates: pd.DataFrame, predictions: pd.DataFrame, titles: pd.Series
) -> int:
    """How many samples' lists hold SASRec's released pick (AFL's rule: names ignoring case).

    The check of :func:`lastfm_candidates`: the authors' SASRec chose its pick *from* each of
    their lists, so lists drawn as theirs hold every pick; other lists hold only the hits
    (the pick is the target) and chance.

    Args:
        candidates: :func:`lastfm_candidates` (``sample``, ``item_id``).
        predictions: :func:`load_lastfm`'s predictions (``sample``, ``prior_name``).
        titles: Artist name by item id.
    """
    names = candidates.groupby("sample")[ITEM].agg(
        lambda items: {str(titles[i]).strip().casefold() for i in items}
    )
    picks = predictions.set_index("sample")["prior_name"].astype(str).str.strip().str.casefold()
    return int(sum(picks[k] in names[k] for k in names.index if k in picks.index))


def sasrec_hit_at_1(
    predictions: pd.DataFrame, n_boot: int = 1000, seed: int = 0
) -> dict[str, float]:
    """SASRec alone on the released test samples: HR@1 with its 95% bootstrap interval.

    Args:
        predictions: The third item of :func:`load_lastfm`.
        n_boot: Bootstrap resamples (:func:`recagents.metrics.bootstrap_ci`).
        seed: Seed of the resampling.

    Returns:
        ``{"hr@1", "low", "high", "n", "hits"}``.
    """
    hits = predictions["hit"].astype(float).to_numpy()
    mean, low, high = bootstrap_ci(hits, n_boot=n_boot, seed=seed)
    return {"hr@1": mean, "low": low, "high": high, "n": len(hits), "hits": int(hits.sum())}


# --------------------------------------------------------------------------- Agent4Rec's ML-1M


def read_release_csv(
    path: Path, columns: Sequence[str], numeric: Sequence[str] = (), **read_options: Any
) -> pd.DataFrame:
    """One released CSV file, checked: readable, with ``columns``, numbers numeric.

    Why: pandas' own errors name neither the file nor the row, and a non-numeric rating
    would otherwise surface as a bare ``ValueError`` far from the file that holds it.

    Args:
        path: The file.
        columns: Columns it must have.
        numeric: Columns whose every non-empty value must be a finite number.
        read_options: Passed to :func:`pandas.read_csv`.

    Raises:
        DatasetError: Naming the file, and for a bad value its line (the header is line 1)
            and column.
    """
    try:
        frame = pd.read_csv(path, **read_options)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise DatasetError(f"{path}: not a readable CSV file ({error})") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise DatasetError(f"{path}: missing column(s) {missing}; it has {list(frame.columns)}")
    for column in numeric:
        text = frame[column].astype(str).str.strip()
        values = pd.to_numeric(text.where(text != "", "nan"), errors="coerce")
        bad = (values.isna() & (text != "") & (text.str.lower() != "nan")) | values.abs().eq(
            float("inf")
        )
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raise DatasetError(
                f"{path}: line {row + 2}, column {column}: {frame[column].iloc[row]!r} is not "
                "a finite number"
            )
    return frame


def _a4r_file(name: str) -> Path:
    return _fetch(AGENT4REC_RELEASE, name)


def agent4rec_items() -> pd.DataFrame:
    """``movie_detail.csv``: the 3,292 items the authors' agents were shown.

    Returns:
        ``[item_id, title, year, genres, mean_rating, summary]``: ``title`` without the
        ``(year)`` that ends it in the file, ``mean_rating`` the ML-1M mean rating the authors'
        pages show as the "history rating", ``summary`` their one-sentence LLM-written summary
        (whitespace runs made one space, so an item stays one line).
    """
    path = _a4r_file(f"{_A4R_SIMULATION}/movie_detail.csv")
    raw = read_release_csv(
        path, ["movie_id", "title", "genres", "rating", "summary"], numeric=["rating"],
        keep_default_na=False, dtype={"movie_id": str, "title": str, "genres": str},
    )  # fmt: skip
    parts = raw["title"].str.strip().str.extract(_A4R_YEAR)
    return pd.DataFrame(
        {
            ITEM: raw["movie_id"].str.strip(),
            TITLE: parts["title"].fillna(raw["title"].str.strip()),
            YEAR: pd.to_numeric(parts["year"], errors="coerce").astype("Int64"),
            GENRES: raw["genres"].map(lambda g: tuple(x for x in g.split("|") if x)),
            "mean_rating": pd.to_numeric(raw["rating"], errors="coerce").astype(float),
            "summary": raw["summary"].astype(str).str.split().str.join(" "),
        }
    )


def _a4r_lines(part: str) -> dict[str, list[str]]:
    """``cf_data/<part>.txt``: each agent's items (one line: the agent id, then item ids)."""
    path = _a4r_file(f"{_A4R_SPLIT}/{part}.txt")
    lists: dict[str, list[str]] = {}
    for line, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        fields = text.split()
        if not fields:
            continue
        if not all(field.isdigit() for field in fields):
            raise DatasetError(f"{path}: line {line} is not an agent id and item ids")
        if fields[0] in lists:
            raise DatasetError(f"{path}: line {line} repeats agent {fields[0]}")
        lists[fields[0]] = fields[1:]
    return lists


def agent4rec_popularity() -> pd.Series:
    """Training interactions per item of ``cf_data/train.txt``, by item id.

    These are the agents' own training items, before any simulation (a run's ``train.txt``
    adds what its agents watched), the popularity an analysis of a run starts from.
    """
    counts = pd.Series([i for items in _a4r_lines("train").values() for i in items])
    return counts.value_counts().rename("popularity").rename_axis(ITEM)


def load_agent4rec_ml1m() -> tuple[Dataset, Split]:
    """Agent4Rec's 1,000 ML-1M agents and their split, exactly as released.

    Users are the agents, ids ``"0"``..``"999"`` as in the release (not ML-1M's user ids);
    ``train``, ``valid`` and ``test`` are ``cf_data/{train,valid,test}.txt`` (the authors'
    random 40/30/30 split; ``valid`` holds the items their simulation counts as ground
    truth); interactions are the three together; items are :func:`agent4rec_items`.

    There are no ratings: ``ratings.dat`` is not in the release, so the interactions have
    no ``rating`` column (what needs one, such as comparing the agents' ratings with the
    real ones or computing traits from ratings, is not available on this dataset; the
    authors' trait levels are :func:`agent4rec_traits`).

    Raises:
        DatasetError: A split file that is not ``id item ...`` per line, or an agent missing
            from the training file.
        recagents.data.releases.ReleaseError: A file not in the cache, mirror or network.
    """
    parts = {part: _a4r_lines(part) for part in ("train", "valid", "test")}
    strays = sorted((set(parts["valid"]) | set(parts["test"])) - set(parts["train"]), key=int)
    if strays:
        raise DatasetError(f"cf_data: agents {strays[:5]} have held-out items but no training")
    frames = {
        part: pd.DataFrame(
            [(user, item) for user in sorted(lists, key=int) for item in lists[user]],
            columns=[USER, ITEM],
        )
        for part, lists in parts.items()
    }
    split = Split(**frames, name="agent4rec-ml1m-released")
    folder = releases.fetch(AGENT4REC_RELEASE, [f"{_A4R_SPLIT}/train.txt"], progress=False)
    dataset = Dataset(
        name=AGENT4REC_ML1M,
        path=folder / "datasets/ml-1m",
        interactions=pd.concat(frames.values(), ignore_index=True),
        items=agent4rec_items(),
        users=None,
        domain="movie",
    )
    return dataset, split


def _split_list(text: Any) -> list[str]:
    """A ``|``-separated persona field as its stripped, non-empty parts."""
    if not isinstance(text, str):
        return []
    return [part.strip() for part in text.split("|") if part.strip()]


def _text_or_empty(text: Any) -> str:
    return text.strip() if isinstance(text, str) else ""


def agent4rec_personas() -> pd.DataFrame:
    """``all_personas_like_modify.csv``: the personas the authors' runs gave the agents.

    The file has one row per agent in id order and no id column (the authors' code reads row
    ``k`` for agent ``k``). The personas were written by the authors' LLM from each user's
    ratings.

    Returns:
        Indexed by ``user_id`` (``"0"``..): ``tastes`` and ``reasons`` (lists, one reason per
        taste, from the ``|``-separated fields), ``high_rating`` and ``low_rating`` (text,
        ``""`` where the file has none).
    """
    path = _a4r_file(f"{_A4R_SIMULATION}/all_personas_like_modify.csv")
    raw = read_release_csv(path, ["taste", "reason", "high_rating", "low_rating"])
    out = pd.DataFrame(
        {
            "tastes": raw["taste"].map(_split_list),
            "reasons": raw["reason"].map(_split_list),
            "high_rating": raw["high_rating"].map(_text_or_empty),
            "low_rating": raw["low_rating"].map(_text_or_empty),
        }
    )
    out.index = pd.Index([str(k) for k in range(len(raw))], name=USER)
    empty = out.index[out["tastes"].map(len) == 0].tolist()
    if empty:
        raise DatasetError(f"{path}: agent(s) {empty[:5]} have no taste")
    return out


def agent4rec_traits() -> pd.DataFrame:
    """The agents' trait levels (``user_statistic.csv``) and raw statistics (``_num.csv``).

    Returns:
        ``[user_id, activity, conformity, diversity, n_ratings, conformity_mse,
        n_top_genres]`` (levels 1-3; the raw ``activity_num``, ``deviation`` and
        ``diversity_num`` renamed as our own trait computation names them), by agent id.
    """
    traits = ["activity", "conformity", "diversity"]
    levels = read_release_csv(
        _a4r_file(f"{_A4R_SIMULATION}/user_statistic.csv"), [USER, *traits], numeric=traits
    )
    counts = ["activity_num", "diversity_num", "deviation"]
    raw = read_release_csv(
        _a4r_file(f"{_A4R_SIMULATION}/user_statistic_num.csv"), [USER, *counts], numeric=counts
    )
    raw = raw.rename(
        columns={"activity_num": "n_ratings", "deviation": "conformity_mse",
                 "diversity_num": "n_top_genres"}
    )  # fmt: skip
    out = levels.merge(raw, on=USER, how="outer")
    out[USER] = out[USER].astype(str)
    bad = out[traits].isna().any(axis=1) | ~out[traits].isin([1, 2, 3]).all(axis=1)
    if bad.any():
        raise DatasetError(
            f"user_statistic.csv: agent {out.loc[bad, USER].iloc[0]} has no trait level 1-3"
        )
    out[traits] = out[traits].astype(int)
    ordered = [USER, *traits, "n_ratings", "conformity_mse", "n_top_genres"]
    return out[ordered].sort_values(USER, key=lambda s: s.astype(int)).reset_index(drop=True)


# --------------------------------------------------------------------------- named datasets


def released_dataset(name: str) -> Dataset:
    """The :class:`~recagents.data.datasets.Dataset` of a name in ``RELEASED_DATASETS``."""
    if name == "lastfm":
        return load_lastfm()[0]
    if name == AGENT4REC_ML1M:
        return load_agent4rec_ml1m()[0]
    if name in RELEASED_DATASETS:
        return load_cds(name.removeprefix("cds-"))[0]  # type: ignore[arg-type]
    raise DatasetError(f"unknown released dataset {name!r}; known: {', '.join(RELEASED_DATASETS)}")
