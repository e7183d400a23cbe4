"""AgentCF on the paper's own data: subsets drawn from the CDs releases, released candidates.

ml-100k's subsets and candidates are pinned at seed 0 (the values the code gave before the
released path existed), so the MovieLens option keeps its behaviour.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from recagents.columns import ITEM, LABEL, USER
from recagents.config import ConfigError
from recagents.data import load_dataset
from recagents.data.datasets import Dataset
from recagents.data.releases import MIRROR_ENV, URL_ENV, ReleaseError
from recagents.llm.client import ChatRequest
from recagents.llm.scripted import ScriptedClient
from recagents.papers.agentcf import entry, pipeline
from recagents.papers.agentcf.config import AgentCFConfig
from recagents.papers.agentcf.released_agents import (
    Variant,
    draw_released,
    released_candidates,
    released_random_lists,
    released_subset,
)
from recagents.papers.agentcf.subsets import (
    Subset,
    candidates_in_history,
    make_subset,
    subset_candidates,
)

KINDS: tuple[Variant, ...] = ("dense", "sparse")

#: ml-100k at seed 0, 5 targets: (kind, users) -> (users, sha256 of the windows' CSV,
#: sha256 of the candidates' CSV, the first user's candidates in display order).
ML100K_PINNED = {
    ("dense", 8): (
        ["12", "139", "165", "333", "369", "547", "633", "781"],
        "154db766692c544f2b6d3d5081b055e92f8b37ddbbffa592e9623f50922764f6",
        "e945a22059cc4a6f036e3402af1383755c1df52384832cc4be4976e5916d1a35",
        ["676", "100", "196", "566", "403", "114", "328", "483", "238", "372"],
    ),
    ("sparse", 8): (
        ["112", "133", "162", "327", "36", "530", "636", "816"],
        "a4d793ea99bd5599f38a14b7bf952f256d8a37f5e27ea72e15ecf5a1770eaa31",
        "a0b7f6af7a1c0ee3fa4b3b749e310af7322affee675486da36163f4dbf7f6300",
        ["878", "1025", "15", "529", "342", "106", "294", "419", "903", "322"],
    ),
    ("dense", 3): (
        ["55", "636", "791"],
        "35939f57d8c464912b6647fad6ccb1061b4b5794e4170a3f2cb862dc19ac539b",
        "7ff45cd9312d8b22fa1b04ed1febbe964ac634dda63fa87be063f1a1ac6bf14b",
        ["740", "275", "332", "235", "760", "322", "106", "50", "9", "79"],
    ),
}


def _digest(frame: pd.DataFrame) -> str:
    return hashlib.sha256(frame.to_csv(index=False).encode()).hexdigest()


@pytest.mark.parametrize(("kind", "n_users"), list(ML100K_PINNED))
def test_ml100k_subsets_and_candidates_are_unchanged(
    kind: Variant, n_users: int, cache_dir: Path
) -> None:
    users, windows_sha, candidates_sha, first = ML100K_PINNED[(kind, n_users)]
    dataset = load_dataset("ml-100k")
    subset = make_subset(dataset, kind, n_users, 5, seed=0)
    candidates = subset_candidates(subset, dataset, 9, seed=0, pool="subset")
    assert subset.users == users
    assert _digest(subset.windows) == windows_sha
    assert _digest(candidates) == candidates_sha
    shown = candidates[candidates[USER] == users[0]].sort_values("position")
    assert shown[ITEM].tolist() == first
    # the run's draw gives exactly these on MovieLens (the dataset itself, re-made subsets)
    data, drawn, drawn_candidates = pipeline.draw(
        dataset,
        kind,
        n_users,
        AgentCFConfig(),
        seed=0,
    )
    assert data is dataset and AgentCFConfig().pool_for(dataset) == "subset"
    assert _digest(drawn.windows) == windows_sha
    assert _digest(drawn_candidates) == candidates_sha


def test_the_notebooks_default_data_is_the_papers() -> None:
    assert entry.DATASET == "cds-dense"
    assert entry.default_config("paper").subsets == ("dense", "sparse")
    assert entry.PROFILES["paper"]["n_users"] == 100  # every user of each release
    assert entry.default_config("smoke").subsets == ("dense",)


# --------------------------------------------------------------------------- the releases


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The CDs releases from the mirror named by the environment (or the cache), no network.

    Skips when neither holds them.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(URL_ENV, "http://127.0.0.1:9")
        if os.environ.get(MIRROR_ENV, "").strip():
            patch.setenv("RECAGENTS_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        try:
            released_random_lists("dense")
            released_random_lists("sparse")
        except ReleaseError as error:
            pytest.skip(f"the AgentCF release is not at hand: {error}")
        yield


@pytest.fixture(scope="module")
def dense(release: None) -> tuple[Dataset, Subset]:
    return released_subset("dense")


def test_a_draw_keeps_release_users_and_their_windows(dense: tuple[Dataset, Subset]) -> None:
    _, whole = dense
    data, drawn = draw_released("dense", 8, seed=0)
    assert data.name == "cds-dense" and len(drawn.users) == 8
    assert set(drawn.users) < set(whole.users)
    released_rows = whole.windows[whole.windows[USER].isin(drawn.users)].reset_index(drop=True)
    pd.testing.assert_frame_equal(drawn.windows, released_rows)
    assert draw_released("dense", 8, seed=0)[1].users == drawn.users  # seeded
    assert draw_released("dense", 8, seed=1)[1].users != drawn.users
    assert draw_released("dense", 100, seed=3)[1].users == whole.users  # the whole release
    with pytest.raises(ValueError, match="n_users"):
        draw_released("dense", 0)


@pytest.mark.parametrize("variant", KINDS)
def test_released_candidates_are_the_papers_lists(release: None, variant: Variant) -> None:
    _, subset = released_subset(variant)
    lists = released_random_lists(variant)
    frame = released_candidates(subset, variant)
    truth = subset.split.test.set_index(USER)[ITEM]
    assert sorted(frame[USER].unique()) == subset.users
    positive_inside = 0
    for user, group in frame.groupby(USER):
        assert group["position"].tolist() == list(range(10))
        assert group[ITEM].is_unique and len(group) == 10
        assert group.loc[group[LABEL] == 1, ITEM].tolist() == [truth[user]]
        expected = [item for item in lists[user] if item != truth[user]][:9]
        assert sorted(group.loc[group[LABEL] == 0, ITEM]) == sorted(expected)
        positive_inside += truth[user] in lists[user][:9]
    if variant == "dense":
        assert positive_inside == 2  # then the 10th id of the list is a candidate
    assert frame.equals(released_candidates(subset, variant))
    other = released_candidates(subset, variant, seed=7)
    assert not frame.equals(other)  # the shuffle follows the seed ...
    pairs = {(user, item) for user, item in frame[[USER, ITEM]].itertuples(index=False)}
    assert pairs == set(other[[USER, ITEM]].itertuples(index=False, name=None))  # ... only


def test_a_users_list_does_not_depend_on_who_else_was_drawn(
    dense: tuple[Dataset, Subset],
) -> None:
    _, whole = dense
    _, drawn = draw_released("dense", 5, seed=2)
    alone = released_candidates(drawn, "dense")
    everyone = released_candidates(whole, "dense")
    mine = everyone[everyone[USER].isin(drawn.users)].reset_index(drop=True)
    pd.testing.assert_frame_equal(alone, mine)


def test_history_items_among_the_papers_candidates(release: None) -> None:
    for variant, expected in zip(KINDS, (26, 0), strict=True):  # the card: 0.26 per user
        _, subset = released_subset(variant)
        counts = candidates_in_history(subset, released_candidates(subset, variant))
        assert len(counts) == 100 and int(counts.sum()) == expected


def test_draw_on_a_release_takes_each_kind_from_its_release(dense: tuple[Dataset, Subset]) -> None:
    dataset, whole = dense
    config = AgentCFConfig()
    assert config.pool_for(dataset) == "released"
    for kind in KINDS:
        data, subset, candidates = pipeline.draw(dataset, kind, 4, config, seed=0)
        assert data.name == f"cds-{kind}" and subset.name == kind
        assert subset.users == draw_released(kind, 4, seed=0)[1].users
        pd.testing.assert_frame_equal(candidates, released_candidates(subset, kind))
    # our own negatives on the release: from the drawn users' items, never their history
    _, subset, ours = pipeline.draw(
        dataset, "dense", 8, AgentCFConfig(candidate_pool="subset"), seed=0
    )
    assert set(ours[ITEM]) <= set(subset.windows[ITEM])
    assert int(candidates_in_history(subset, ours).sum()) == 0


def test_the_released_pool_is_only_for_the_releases(dense: tuple[Dataset, Subset]) -> None:
    dataset, _ = dense
    with pytest.raises(ConfigError, match="needs a released CDs subset"):
        AgentCFConfig(candidate_pool="released").pool_for(load_dataset("ml-100k"))
    with pytest.raises(ConfigError, match="windows are the released 8 items"):
        AgentCFConfig(n_targets=4).pool_for(dataset)


def _scripted(request: ChatRequest) -> dict[str, object]:
    """Schema-valid replies: the first option, short memories, rank as shown."""
    assert request.schema is not None
    required = set(request.schema["required"])
    if "choice" in required:
        return {"choice": 1, "explanation": "the first one"}
    if "self_description" in required:
        return {"self_description": "I like what I chose."}
    if "preferred" in required:
        return {"preferred": "liked", "other": "not chosen"}
    return {"ranking": list(range(1, request.schema["properties"]["ranking"]["minItems"] + 1))}


def test_run_subset_on_the_sparse_release(dense: tuple[Dataset, Subset], cache_dir: Path) -> None:
    dataset, _ = dense
    config = AgentCFConfig(steps=1, batch_size=3, rounds=1)
    client = ScriptedClient(_scripted, "agentcf")
    part = pipeline.run_subset(
        dataset,
        "sparse",
        3,
        config,
        client,  # type: ignore[arg-type]
        ("AgentCF B",),
        seed=0,
    )
    assert part.dataset.name == "cds-sparse" and len(part.subset.users) == 3
    assert part.candidates.groupby(USER).size().eq(10).all()
    assert "CD" in part.initial.user_memory[part.subset.users[0]]
    phases = part.log.calls_frame()["phase"].value_counts().to_dict()
    assert phases == {"train": 9, "rank AgentCF B": 3}
