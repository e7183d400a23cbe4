"""Random's offline accuracy excludes what a model's list excludes (train and valid), not test."""

import pandas as pd

from recagents.columns import ITEM, USER
from recagents.data.datasets import Split
from recagents.papers.agent4rec.evaluate import offline_accuracy, random_ranking


def _split() -> Split:
    rows = lambda pairs: pd.DataFrame(pairs, columns=[USER, ITEM])  # noqa: E731
    train = rows([("u1", "a"), ("u1", "b"), ("u2", "c"), ("u2", "d"), ("u3", "t"), ("u3", "v")])
    valid = rows([("u1", "c"), ("u2", "a")])
    test = rows([("u1", "t"), ("u2", "v")])
    return Split(train, valid, test, name="tiny")


def test_random_offline_list_can_hold_the_test_item():
    split = _split()
    # The catalogue is {a, b, c, d, t, v}; after excluding train and valid, u1 has {d, t, v} and
    # u2 {b, t, v} left: a list of 3 holds the test item, so recall@3 is 1 for both users.
    table = offline_accuracy(None, split, ["u1", "u2"], k=3, n_boot=50).set_index("metric")
    assert table.loc["recall@3", "mean"] == 1.0


def test_the_simulation_random_list_still_hides_the_test_item():
    ranked = random_ranking(_split(), ["u1", "u2"], k=6, seed=0)
    shown = set(zip(ranked[USER], ranked[ITEM], strict=True))
    assert ("u1", "t") not in shown and ("u2", "v") not in shown
