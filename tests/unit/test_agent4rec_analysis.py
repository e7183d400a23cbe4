"""Tests for the Agent4Rec analyses (traits, engagement, bubble, causal, recorded).

Traits, engagement, ratings, ANOVA, the filter bubble and LiNGAM: hand-built inputs check
every function against values derived by hand; the authors' recorded runs, read from the
pinned release through the fetcher (the mirror named by ``$RECAGENTS_RELEASES_MIRROR`` or the
cache; skipped when neither holds it), check the oracle figures of the card.
"""

import math
import os
import pickle
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from recagents.data import load_dataset, safepickle  # noqa: E402
from recagents.data.datasets import Dataset
from recagents.data.releases import URL_ENV, ReleaseError
from recagents.papers.agent4rec.bubble import bubble_figure, genre_concentration  # noqa: E402
from recagents.papers.agent4rec.causal import (  # noqa: E402
    CAUSAL_COLUMNS,
    causal_discovery,
    causal_figure,
    item_causal_table,
)
from recagents.papers.agent4rec.config import TRAITS  # noqa: E402
from recagents.papers.agent4rec.engagement import (  # noqa: E402
    engagement,
    engagement_summary,
    rating_distribution,
    rating_figure,
    satisfaction_by,
)
from recagents.papers.agent4rec.frames import EXPOSURE_COLUMNS  # noqa: E402
from recagents.papers.agent4rec.prompts import TRAIT_SENTENCES  # noqa: E402
from recagents.papers.agent4rec.recorded import (  # noqa: E402
    RUNS,
    build_official_run,
    check_record,
    load_official_pickle,
    load_official_run,
    parse_satisfaction,
)
from recagents.papers.agent4rec.traits import (  # noqa: E402
    compute_traits,
    trait_anova,
    trait_behaviour,
    trait_figure,
)

# --------------------------------------------------------------------------- helpers


def _exposures(rows):
    """rows: (user, recommender, page, position, item, aligned, watched, rating)."""
    frame = pd.DataFrame(
        rows,
        columns=[
            "user_id",
            "recommender",
            "page",
            "position",
            "item_id",
            "aligned",
            "watched",
            "rating",
        ],
    )
    frame["aligned"] = frame["aligned"].astype("boolean")
    frame["rating"] = frame["rating"].astype(float)
    frame["feeling"] = ""
    return frame


def _sessions(rows):
    return pd.DataFrame(
        rows, columns=["user_id", "recommender", "exit_page", "exited", "satisfaction"]
    )


@pytest.fixture
def logs():
    nan = math.nan
    exposures = _exposures(
        [
            ("a", "R", 1, 0, "i1", True, True, 4),
            ("a", "R", 1, 1, "i2", True, True, 3),
            ("a", "R", 1, 2, "i3", False, False, nan),
            ("a", "R", 1, 3, "i4", None, False, nan),
            ("b", "R", 1, 0, "i1", True, True, 5),
            ("b", "R", 1, 1, "i3", False, False, nan),
            ("b", "R", 1, 2, "i4", False, False, nan),
            ("b", "R", 1, 3, "i5", False, False, nan),
            ("b", "R", 2, 0, "i6", True, True, 2),
            ("b", "R", 2, 1, "i7", False, False, nan),
            ("b", "R", 2, 2, "i8", False, False, nan),
            ("b", "R", 2, 3, "i9", False, False, nan),
        ]
    )
    sessions = _sessions([("a", "R", 1, True, 6.0), ("b", "R", 2, True, nan)])
    return exposures, sessions


def _load(run: str = "lightgcn") -> object:
    """A recorded run from the release (no network), or skip when it is not available."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(URL_ENV, "http://127.0.0.1:9")
        try:
            return load_official_run(run)  # type: ignore[arg-type]
        except ReleaseError as error:
            pytest.skip(f"the Agent4Rec release is neither mirrored nor cached ({error})"[:200])


@pytest.fixture(scope="module")
def run():
    return _load("lightgcn")


def _close(fig):
    assert isinstance(fig, Figure)
    plt.close(fig)


# --------------------------------------------------------------------------- traits


@pytest.fixture
def hand_dataset():
    # Item means: i1 (5,3,4) -> 4, i2 (3,5) -> 4, i3 (4,4) -> 4, i4 -> 2, i5 -> 1,
    # i6..i10 rated only by u4 (mean = own rating, deviation 0).
    rows = [
        ("u1", "i1", 5),
        ("u1", "i2", 3),
        ("u2", "i1", 3),
        ("u2", "i3", 4),
        ("u2", "i4", 2),
        ("u3", "i1", 4),
        ("u3", "i2", 5),
        ("u3", "i3", 4),
        ("u3", "i5", 1),
    ] + [("u4", f"i{k}", 3) for k in range(6, 11)]
    inter = pd.DataFrame(rows, columns=["user_id", "item_id", "rating"])
    inter["rating"] = inter["rating"].astype(float)
    genres = {
        "i1": ("A",),
        "i2": ("A", "B"),
        "i3": ("C",),
        "i4": ("D",),
        "i5": ("B",),
        "i6": ("E",),
        "i7": ("F",),
        "i8": ("G",),
        "i9": ("H",),
        "i10": ("I",),
    }
    items = pd.DataFrame({"item_id": list(genres), "genres": list(genres.values())})
    items["title"] = items["item_id"]
    return Dataset(name="hand", path=Path("."), interactions=inter, items=items, users=None)


def test_compute_traits_raw_statistics_by_hand(hand_dataset):
    traits = compute_traits(hand_dataset).set_index("user_id")
    assert list(traits.index) == ["u1", "u2", "u3", "u4"]
    assert traits["n_ratings"].tolist() == [2, 3, 4, 5]
    # u1: (5-4)^2, (3-4)^2 -> 1; u2: 1, 0, 0 -> 1/3; u3: 0, 1, 0, 0 -> 1/4; u4: 0.
    assert traits["conformity_mse"].to_numpy() == pytest.approx([1.0, 1 / 3, 0.25, 0.0])
    # u1: A 2/3, B -> 1 genre; u2: thirds -> 2; u3: A .4, B .4 (cum exactly .8 counts), C;
    # u4: five genres of .2 each -> 4.
    assert traits["n_top_genres"].tolist() == [1, 2, 2, 4]


def test_compute_traits_levels_by_hand(hand_dataset):
    traits = compute_traits(hand_dataset).set_index("user_id")
    # n_ratings [2,3,4,5]: P60 = 3.8, P90 = 4.7.
    assert traits["activity"].tolist() == [1, 1, 2, 3]
    # mse sorted [0, .25, 1/3, 1]: P25 = .1875, P80 = .6.
    assert traits["conformity"].tolist() == [3, 2, 2, 1]
    # n_top sorted [1,2,2,4]: P33 = 1.99, P66 = 2.0; value 2 equals the high cut.
    assert traits["diversity"].tolist() == [1, 2, 2, 3]
    upper = compute_traits(hand_dataset, ties="upper").set_index("user_id")
    assert upper["diversity"].tolist() == [1, 3, 3, 3]
    assert upper["activity"].tolist() == [1, 1, 2, 3]


def test_compute_traits_ml100k_level_shares():
    traits = compute_traits(load_dataset("ml-100k"))
    assert len(traits) == 943
    assert set(traits.columns) >= {"activity", "conformity", "diversity", "n_top_genres"}
    share = {t: traits[t].value_counts(normalize=True) for t in TRAITS}
    # Cuts at P60/P90, P25/P80: ties can move a few users, not the shape.
    assert share["activity"][1] == pytest.approx(0.60, abs=0.03)
    assert share["activity"][3] == pytest.approx(0.10, abs=0.03)
    assert share["conformity"][1] == pytest.approx(0.25, abs=0.02)
    assert share["conformity"][3] == pytest.approx(0.20, abs=0.02)
    assert set(traits["diversity"]) == {1, 2, 3}
    assert (traits["n_top_genres"] >= 1).all()


def test_compute_traits_errors(hand_dataset):
    with pytest.raises(ValueError, match="top_share"):
        compute_traits(hand_dataset, top_share=0)
    with pytest.raises(ValueError, match="ties"):
        compute_traits(hand_dataset, ties="middle")
    no_items = Dataset("x", Path("."), hand_dataset.interactions, None, None)
    with pytest.raises(ValueError, match="item table"):
        compute_traits(no_items)
    no_rating = Dataset(
        "x", Path("."), hand_dataset.interactions.drop(columns="rating"), hand_dataset.items, None
    )
    with pytest.raises(ValueError, match="rating"):
        compute_traits(no_rating)


def test_trait_sentences_complete_and_our_own():
    assert set(TRAIT_SENTENCES) == set(TRAITS)
    for trait, levels in TRAIT_SENTENCES.items():
        assert set(levels) == {1, 2, 3}, trait
        for sentence in levels.values():
            assert isinstance(sentence, str) and len(sentence) > 20
            # The official code's labels (they show up in the recorded interviews).
            for label in ("Elusive", "Occasional Viewer", "Dedicated Follower", "Enthusiast"):
                assert label not in sentence


# --------------------------------------------------------------------------- engagement


def test_engagement_by_hand(logs):
    exposures, sessions = logs
    per = engagement(exposures, sessions).set_index("user_id")
    # a: 2 of 4 watched, ratings 4 and 3 -> one like (> 3); b: 2 of 8 watched, 5 and 2.
    assert per.loc["a", "p_view"] == pytest.approx(0.5)
    assert per.loc["a", "n_like"] == 1
    assert per.loc["a", "p_like"] == pytest.approx(0.25)
    assert per.loc["b", "p_view"] == pytest.approx(0.25)
    assert per.loc["b", "n_like"] == 1
    assert per.loc["b", "p_like"] == pytest.approx(0.125)
    assert per["exit_page"].tolist() == [1, 2]
    assert per.loc["a", "satisfaction"] == 6 and math.isnan(per.loc["b", "satisfaction"])
    strict = engagement(exposures, sessions, like_threshold=4).set_index("user_id")
    assert strict["n_like"].tolist() == [0, 1]
    loose = engagement(exposures, sessions, like_threshold=2.5).set_index("user_id")
    assert loose["n_like"].tolist() == [2, 1]


def test_engagement_errors(logs):
    exposures, sessions = logs
    with pytest.raises(ValueError, match="watched"):
        engagement(exposures.drop(columns="watched"), sessions)
    with pytest.raises(ValueError, match="satisfaction"):
        engagement(exposures, sessions.drop(columns="satisfaction"))
    with pytest.raises(ValueError, match="like_threshold"):
        engagement(exposures, sessions, like_threshold=math.nan)
    with pytest.raises(ValueError, match="several rows"):
        engagement(exposures, pd.concat([sessions, sessions]))


def test_engagement_summary(logs):
    exposures, sessions = logs
    other = exposures.assign(recommender="S", watched=False, rating=math.nan)
    per = engagement(
        pd.concat([exposures, other]), pd.concat([sessions, sessions.assign(recommender="S")])
    )
    table = engagement_summary(per, n_boot=200)
    assert list(table.columns) == ["recommender", "metric", "mean", "low", "high", "n"]
    assert len(table) == 2 * 5
    row = table.set_index(["recommender", "metric"])
    assert row.loc[("R", "p_view"), "mean"] == pytest.approx(0.375)
    assert row.loc[("S", "p_view"), "mean"] == 0
    assert row.loc[("R", "satisfaction"), "n"] == 1
    assert row.loc[("R", "satisfaction"), "low"] == row.loc[("R", "satisfaction"), "high"] == 6
    assert (table["low"] <= table["mean"] + 1e-12).all()
    assert (table["mean"] <= table["high"] + 1e-12).all()
    with pytest.raises(ValueError, match="n_boot"):
        engagement_summary(per, n_boot=0)


def test_satisfaction_by(logs):
    exposures, sessions = logs
    sessions = sessions.assign(satisfaction=[6.0, 2.0])
    per = engagement(exposures, sessions)
    traits = pd.DataFrame({"user_id": ["a", "b"], "activity": [1, 3], "conformity": [2, 2]})
    table = satisfaction_by(per, traits, n_boot=100)
    assert table["level"].tolist() == [1, 3]
    assert table["mean"].tolist() == [6.0, 2.0]
    assert (table["trait"] == "activity").all()
    both = satisfaction_by(per, traits, trait="conformity", metrics=None, n_boot=100)
    pooled = both.set_index("metric")
    assert pooled.loc["satisfaction", "mean"] == pytest.approx(4.0)
    assert pooled.loc["p_view", "n"] == 2
    with pytest.raises(ValueError, match="trait"):
        satisfaction_by(per, traits, trait="mood")
    with pytest.raises(ValueError, match="diversity"):
        satisfaction_by(per, traits, trait="diversity")


# --------------------------------------------------------------------------- ratings


def test_rating_distribution_by_hand(logs):
    exposures, _ = logs
    table = rating_distribution(exposures, real_ratings=[1, 2, 2, 5])
    agents = table[table["source"] == "agents"].set_index("rating")
    real = table[table["source"] == "real"].set_index("rating")
    # Agents rated 4, 3, 5, 2.
    assert agents["count"].tolist() == [0, 1, 1, 1, 1]
    assert agents["share"].tolist() == [0, 0.25, 0.25, 0.25, 0.25]
    assert real["share"].tolist() == [0.25, 0.5, 0, 0, 0.25]
    only = rating_distribution(exposures)
    assert set(only["source"]) == {"agents"}
    with pytest.raises(ValueError, match="1-5"):
        rating_distribution(exposures, real_ratings=[0, 3])
    with pytest.raises(ValueError, match="no ratings"):
        rating_distribution(exposures.assign(watched=False))
    fig = rating_figure(table)
    assert len(fig.axes[0].patches) == 10
    _close(fig)


# --------------------------------------------------------------------------- trait behaviour


def test_trait_behaviour_by_hand(logs):
    exposures, sessions = logs
    means = pd.Series({f"i{k}": 3.0 for k in range(1, 10)})
    genres = pd.Series({f"i{k}": ("X",) for k in range(1, 10)} | {"i1": ("X", "Y"), "i6": ("Z",)})
    traits = pd.DataFrame(
        {"user_id": ["a", "b"], "activity": [1, 2], "conformity": [1, 3], "diversity": [2, 2]}
    )
    out = trait_behaviour(exposures, sessions, traits, means, genres).set_index("user_id")
    assert out["n_watched"].tolist() == [2, 2]
    # a: (4-3)^2, (3-3)^2 -> .5; b: (5-3)^2, (2-3)^2 -> 2.5.
    assert out["rating_mse"].tolist() == pytest.approx([0.5, 2.5])
    # a watched i1 (X, Y) and i2 (X); b watched i1 (X, Y) and i6 (Z).
    assert out["n_genres_watched"].tolist() == [2, 3]
    assert out["exit_page"].tolist() == [1, 2]
    assert out["conformity"].tolist() == [1, 3]
    with pytest.raises(ValueError, match="item_mean_rating"):
        trait_behaviour(exposures, sessions, traits, means.drop("i6"), genres)
    with pytest.raises(ValueError, match="traits"):
        trait_behaviour(exposures, sessions, traits.drop(columns="diversity"), means, genres)


def _behaviour(levels, values):
    frame = pd.DataFrame({"activity": levels, "conformity": levels, "diversity": levels})
    for measure in ("exit_page", "n_watched", "rating_mse", "n_genres_watched"):
        frame[measure] = values
    return frame


def test_trait_anova_by_hand():
    # Levels 1: [1,2,3], 2: [4,5,6]: SSB = 13.5, SSW = 4, df 1 and 4 -> F = 13.5.
    table = trait_anova(_behaviour([1, 1, 1, 2, 2, 2], [1, 2, 3, 4, 5, 6]))
    assert len(table) == 4
    assert table["f_stat"].to_numpy() == pytest.approx([13.5] * 4)
    assert table["mean_1"].tolist() == [2.0] * 4 and table["mean_2"].tolist() == [5.0] * 4
    assert ((table["p_value"] > 0.01) & (table["p_value"] < 0.05)).all()
    # A level with one agent is reported but left out of the test.
    single = trait_anova(_behaviour([1, 1, 1, 2, 2, 2, 3], [1, 2, 3, 4, 5, 6, 100]))
    assert single["f_stat"].to_numpy() == pytest.approx([13.5] * 4)
    assert single["mean_3"].tolist() == [100.0] * 4 and single["n_3"].tolist() == [1] * 4
    # Fewer than two testable levels -> NaN.
    lone = trait_anova(_behaviour([1, 1, 2], [1.0, 2.0, 3.0]))
    assert lone["f_stat"].isna().all() and lone["p_value"].isna().all()
    with pytest.raises(ValueError, match="rating_mse"):
        trait_anova(_behaviour([1, 2], [1, 2]).drop(columns="rating_mse"))
    with pytest.raises(ValueError, match="min_group"):
        trait_anova(_behaviour([1, 2], [1, 2]), min_group=1)


def test_trait_figure():
    fig = trait_figure(_behaviour([1, 1, 2, 2, 3, 3], [1, 2, 3, 4, 5, 6]), n_boot=50)
    assert len(fig.axes) == 4
    _close(fig)


# --------------------------------------------------------------------------- filter bubble


def test_genre_concentration_by_hand():
    genres = pd.Series({"i1": ("A", "B"), "i2": ("A",), "i3": ("C",)})
    recommended = pd.DataFrame(
        {
            "user_id": ["u", "u", "v", "u", "v", "w"],
            "item_id": ["i1", "i2", "i3", "i1", "i2", "i2"],
            "round": [0, 0, 0, 1, 1, 1],
        }
    )
    table = genre_concentration(recommended, genres).set_index("round")
    # Round 0: labels A, B, A, C -> A 2/4, carried by 2 of 3 items, 3 genres.
    assert table.loc[0, "top_genre"] == "A"
    assert table.loc[0, "top_share"] == pytest.approx(0.5)
    assert table.loc[0, "items_with_top"] == pytest.approx(2 / 3)
    assert table.loc[0, "n_genres"] == 3
    # Round 1: A, B, A, A -> A 3/4, on every item, 2 genres.
    assert table.loc[1, "top_share"] == pytest.approx(0.75)
    assert table.loc[1, "items_with_top"] == pytest.approx(1.0)
    assert table.loc[1, "n_genres"] == 2
    with pytest.raises(ValueError, match="round"):
        genre_concentration(recommended.drop(columns="round"), genres)
    with pytest.raises(ValueError, match="item_genres"):
        genre_concentration(recommended, genres.drop("i3"))
    fig = bubble_figure(table.reset_index())
    assert len(fig.axes) == 2
    _close(fig)


# --------------------------------------------------------------------------- causal discovery


def _chain(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    u = lambda: rng.uniform(-1, 1, n)  # noqa: E731
    a = u()
    b = 0.9 * a + u()
    c = -0.8 * b + u()
    return pd.DataFrame({"a": a, "b": b, "c": c})


def test_causal_discovery_finds_known_chain_without_prior():
    data = _chain()[["c", "a", "b"]]  # column order must not give the answer away
    adj = causal_discovery(data, prior_order=None, columns=["c", "a", "b"])
    assert adj.shape == (3, 3)
    assert adj.loc["b", "a"] > 0.3
    assert adj.loc["c", "b"] < -0.3
    assert abs(adj.loc["c", "a"]) < 0.05
    assert abs(adj.loc["a", "b"]) < 0.05 and abs(adj.loc["b", "c"]) < 0.05
    assert adj.attrs["causal_order"] == ["a", "b", "c"]


def test_causal_discovery_prior_forbids_backward_edges():
    data = _chain(seed=1)
    # A wrong order puts c first: no edge may point from a later to an earlier variable.
    adj = causal_discovery(data, prior_order=("c", "b", "a"))
    assert adj.attrs["causal_order"] == ["c", "b", "a"]
    order = ["c", "b", "a"]
    for i, effect in enumerate(order):
        for cause in order[i:]:
            assert adj.loc[effect, cause] == 0
    right = causal_discovery(data, prior_order=("a", "b", "c"))
    assert right.loc["b", "a"] > 0.3 and right.loc["c", "b"] < -0.3


def test_causal_discovery_errors():
    data = _chain(n=50)
    with pytest.raises(ValueError, match="prior_order"):
        causal_discovery(data, prior_order=("a", "b"), columns=["a", "b", "c"])
    with pytest.raises(ValueError, match="constant"):
        causal_discovery(data.assign(c=1.0), prior_order=("a", "b", "c"))
    with pytest.raises(ValueError, match="rows"):
        causal_discovery(data.head(3), prior_order=("a", "b", "c"))
    with pytest.raises(ValueError, match="missing"):
        causal_discovery(data)  # default variables are the item table's


def test_item_causal_table_by_hand(logs):
    exposures, _ = logs
    means = pd.Series({f"i{k}": float(k) for k in range(1, 10)})
    popularity = pd.Series({"i1": 7, "i3": 2})
    table = item_causal_table(exposures, means, popularity, min_exposures=2)
    # Shown twice: i1 (watched twice, rated 4 and 5), i3 and i4 (never watched).
    assert table["item_id"].tolist() == ["i1", "i3", "i4"]
    assert table["exposure"].tolist() == [2, 2, 2]
    assert table["views"].tolist() == [2, 0, 0]
    assert table["rating"].iloc[0] == 4.5 and table["rating"].iloc[1:].isna().all()
    assert table["popularity"].tolist() == [7, 2, 0]
    assert table["quality"].tolist() == [1.0, 3.0, 4.0]
    assert len(item_causal_table(exposures, means, popularity, min_exposures=1)) == 9
    with pytest.raises(ValueError, match="min_exposures"):
        item_causal_table(exposures, means, popularity, min_exposures=0)


def test_causal_figure_draws_only_strong_edges():
    adj = pd.DataFrame(
        [[0, 0, 0], [0.5, 0, 0], [0.01, -0.7, 0]], index=list("abc"), columns=list("abc")
    )
    fig = causal_figure(adj, threshold=0.05)
    ax = fig.axes[0]
    assert len(ax.patches) == 2
    labels = {t.get_text() for t in ax.texts}
    assert {"a", "b", "c", "+0.50", "-0.70"} <= labels and "+0.01" not in labels
    _close(fig)
    with pytest.raises(ValueError, match="square"):
        causal_figure(adj.iloc[:, :2])


# --------------------------------------------------------------------------- official format


def test_parse_satisfaction():
    assert parse_satisfaction([" 3", " because"]) == 3
    assert parse_satisfaction([" 7; REASON: I liked 2 movies"]) == 7
    assert parse_satisfaction(" 8/10; REASON: fine") == 8
    assert parse_satisfaction(["Rating: 6"]) == 6
    assert parse_satisfaction(5) == 5
    for bad in (["REASON: 4 films were bad"], "eleven", " 11", [], None, ["", "x"]):
        assert math.isnan(parse_satisfaction(bad)), bad


def _constructed_run():
    """Three agents as the authors' pickles store them (page keys from 1, "interview")."""
    page = {"page": 1, "recommended_id": [10, 11, 12, 13], "align_id": [10, 12],
            "watch_id": [10, 12], "rating_id": [10, 12], "rating": [4, 5],
            "feeling": ["good", "great"]}  # fmt: skip
    empty = {"recommended_id": [], "align_id": [], "watch_id": [], "rating_id": [], "rating": [],
             "feeling": []}  # fmt: skip
    raw = {
        "0": {1: page, "interview": [" 6", " reason"]},
        "1": {**{p: {**empty, "page": p, "recommended_id": [20 + p, 30 + p, 40 + p, 50 + p]}
                 for p in range(1, 6)}, "interview": [" 2; REASON: nothing fit"]},
        "2": {"interview": ["no score given"]},
    }  # fmt: skip
    records = {user: check_record(record, f"{user}.pkl") for user, record in raw.items()}
    traits = pd.DataFrame(
        {"user_id": [0, 1, 2, 3], "activity": [1, 3, 2, 1], "conformity": [3, 2, 2, 1],
         "diversity": [2, 1, 2, 1], "n_ratings": [30, 500, 60, 9]}
    )  # fmt: skip
    items = pd.DataFrame(
        {"item_id": ["10", "11"], "title": ["Toy Story (1995)", "Heat (1995)"],
         "genres": [("Animation",), ("Action", "Crime")], "mean_rating": [4.1, 3.9],
         "summary": ["Toys.", "Cops."], "popularity": [2, 1]}
    )  # fmt: skip
    return build_official_run("lightgcn", "LightGCN", records, traits, items)


def test_build_official_run_on_constructed_records():
    run = _constructed_run()
    e, s = run.exposures, run.sessions
    assert list(e.columns) == list(EXPOSURE_COLUMNS)
    assert len(e) == 4 + 20
    first = e[e["user_id"] == "0"].set_index("item_id")
    assert first["aligned"].tolist() == [True, False, True, False]
    assert first["watched"].tolist() == [True, False, True, False]
    assert first.loc["10", "rating"] == 4 and first.loc["12", "rating"] == 5
    assert first["rating"].isna().sum() == 2
    assert first.loc["12", "feeling"] == "great" and first.loc["11", "feeling"] == ""
    assert (e["recommender"] == "LightGCN").all()
    assert e.loc[e["user_id"] == "1", "page"].max() == 5
    sess = s.set_index("user_id")
    assert sess["exit_page"].tolist() == [1, 5, 0]
    assert sess["exited"].tolist() == [True, False, True]
    assert sess.loc["0", "satisfaction"] == 6 and sess.loc["1", "satisfaction"] == 2
    assert math.isnan(sess.loc["2", "satisfaction"]) and run.n_unparsed_interviews == 1
    # Traits are kept for the run's agents only, ids as strings.
    assert run.traits["user_id"].tolist() == ["0", "1", "2"]
    assert run.traits.set_index("user_id").loc["1", "n_ratings"] == 500
    assert run.metrics_txt == {} and sorted(run.records) == ["0", "1", "2"]


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_restricted_unpickler_refuses_code(tmp_path):
    for name, payload in {
        "system": pickle.dumps(os.system),
        "reduce": pickle.dumps(_Evil()),
        "eval": pickle.dumps(eval),
    }.items():
        path = tmp_path / f"{name}.pkl"
        path.write_bytes(payload)
        with pytest.raises(safepickle.UnsafePickleError, match="refusing"):
            load_official_pickle(path)
    fine = tmp_path / "fine.pkl"
    fine.write_bytes(pickle.dumps({1: [np.int64(3), np.arange(3)], "x": {2.5, 1.5}}))
    assert load_official_pickle(fine, plain=True) == {1: [3, [0, 1, 2]], "x": {1.5, 2.5}}


# --------------------------------------------------------------------------- official run


def test_the_released_pickles_hold_numpy_values_read_back_plain():
    from recagents.data import releases

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(URL_ENV, "http://127.0.0.1:9")
        path = f"{RUNS['lightgcn'][1]}/behavior/0.pkl"
        try:
            root = releases.fetch("agent4rec-ml1m", [path], progress=False)
        except ReleaseError:
            pytest.skip("the Agent4Rec release is neither mirrored nor cached")
    raw = load_official_pickle(root / path)
    assert any(isinstance(v, np.generic | np.ndarray) for v in _leaves(raw))
    plain = load_official_pickle(root / path, plain=True)
    assert not any(isinstance(v, np.generic | np.ndarray) for v in _leaves(plain))
    record = check_record(plain, path)
    assert len(record["pages"]) == len([k for k in plain if k != "interview"])
    assert all(isinstance(i, str) for p in record["pages"] for i in p["recommended_id"])


def _leaves(obj):
    if isinstance(obj, dict):
        for value in obj.values():
            yield from _leaves(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _leaves(value)
    else:
        yield obj


def test_official_rating_oracle(run):
    table = rating_distribution(run.exposures).set_index("rating")
    assert table["count"].sum() == 6512
    assert table.loc[1, "count"] == 0 and table.loc[2, "count"] == 0
    shares = (table["share"] * 100).round(1)
    assert shares.loc[3] == 7.8 and shares.loc[4] == 75.2 and shares.loc[5] == 16.9


def test_official_session_oracles(run):
    s = run.sessions
    assert len(s) == 1000 and run.n_unparsed_interviews == 0
    assert round(s["exit_page"].mean(), 3) == 3.234
    assert round(s["satisfaction"].mean(), 3) == 3.945
    assert (s["exited"] == (s["exit_page"] < 5)).all()
    assert len(run.exposures) == 4 * s["exit_page"].sum()
    assert len(run.items) == 3292 and len(run.traits) == 1000


def test_official_engagement_matches_card(run):
    per = engagement(run.exposures, run.sessions)
    means = per[["p_view", "n_like", "p_like", "exit_page", "satisfaction"]].mean().round(3)
    assert means.tolist() == [0.493, 6.003, 0.453, 3.234, 3.945]
    table = engagement_summary(per, n_boot=200)
    sat = table.set_index("metric").loc["satisfaction"]
    assert sat["low"] < 3.945 < sat["high"] and sat["n"] == 1000
    by = satisfaction_by(per, run.traits, n_boot=200)
    # Satisfaction rises with activity (the outside critique's point).
    assert by["mean"].is_monotonic_increasing and len(by) == 3


def test_official_trait_behaviour_oracles(run):
    items = run.items.set_index("item_id")
    behaviour = trait_behaviour(
        run.exposures, run.sessions, run.traits, items["mean_rating"], items["genres"]
    )
    assert len(behaviour) == 1000
    table = trait_anova(behaviour).set_index("measure")
    means = lambda m: table.loc[m, ["mean_1", "mean_2", "mean_3"]].astype(float)  # noqa: E731
    assert means("exit_page").round(2).tolist() == [2.67, 3.74, 4.37]
    assert means("n_watched").round(2).tolist() == [4.88, 7.47, 11.48]
    assert means("rating_mse").round(3).tolist() == [0.253, 0.323, 0.477]
    assert means("n_genres_watched").round(2).tolist() == [5.40, 6.89, 8.33]
    assert (table["p_value"] < 1e-10).all()
    fig = trait_figure(behaviour, n_boot=100)
    _close(fig)


def test_the_mf_run_through_the_same_analyses():
    mf = _load("mf")
    assert mf.recommender == "MF" and len(mf.sessions) == 100 and len(mf.traits) == 100
    assert mf.n_unparsed_interviews == 0 and round(mf.sessions["exit_page"].mean(), 2) == 3.17
    assert set(mf.traits["user_id"]) == set(mf.sessions["user_id"])
    per = engagement(mf.exposures, mf.sessions)
    assert (per["recommender"] == "MF").all() and len(per) == 100
    assert round(per["satisfaction"].mean(), 3) == 3.8
    items = mf.items.set_index("item_id")
    behaviour = trait_behaviour(
        mf.exposures, mf.sessions, mf.traits, items["mean_rating"], items["genres"]
    )
    assert len(behaviour) == 100


def test_official_causal_discovery(run):
    items = run.items.set_index("item_id")
    table = item_causal_table(run.exposures, items["mean_rating"], items["popularity"])
    assert (table["exposure"] >= 10).all() and len(table) > 100
    adj = causal_discovery(table)
    assert adj.shape == (5, 5)
    assert list(adj.index) == list(adj.columns) == list(CAUSAL_COLUMNS)
    upper = np.triu(adj.to_numpy())  # cause later than effect in the prior order
    assert (upper == 0).all()
    # The card's qualitative reading: quality and popularity drive ratings,
    # popularity -> exposure -> views.
    assert adj.loc["rating", "quality"] > 0.05 and adj.loc["rating", "popularity"] > 0.05
    assert adj.loc["exposure", "popularity"] > 0.05 and adj.loc["views", "exposure"] > 0.05
    _close(causal_figure(adj))
