"""The generated "what you should see" paragraph follows the numbers it is given."""

import pytest

from recagents.notebook import expectation


def test_interval_holding_chance_says_it_cannot_tell():
    text = expectation("NDCG@10", (0.45, 0.30, 0.60), 6, "smollm2", chance=0.454)
    assert "n=6" in text and "cannot tell ours from a random method" in text
    assert "0.150" in text  # half the width


def test_paper_above_and_chance_below_are_named():
    text = expectation("HR@1", (0.30, 0.25, 0.35), 900, "gpt-x", chance=0.05, paper=0.40,
                       paper_source="Table 4, LastFM")  # fmt: skip
    assert "ours is above it" in text
    assert "The paper reports 0.400 (Table 4, LastFM), above our interval." in text


def test_recorded_and_why_are_appended():
    text = expectation("p_view", (0.5, 0.4, 0.6), 20, "m", recorded=0.52,
                       recorded_source="authors' gpt-3.5 run", why="Ours is tiny.")  # fmt: skip
    assert "0.520 (authors' gpt-3.5 run), inside our interval" in text
    assert text.endswith("Ours is tiny.")


def test_a_mean_outside_its_interval_is_refused():
    with pytest.raises(ValueError, match="not within"):
        expectation("x", (0.9, 0.1, 0.2), 3, "m")


def test_pick_profile_checks_name_and_keys():
    from recagents.notebook import pick_profile

    profiles = {"smoke": {"n": 1, "k": 2}, "default": {"n": 6, "k": 2}}
    assert pick_profile(profiles, "default") == {"n": 6, "k": 2}
    with pytest.raises(ValueError, match="must be one of"):
        pick_profile(profiles, "huge")
    with pytest.raises(ValueError, match="share their keys"):
        pick_profile({"a": {"n": 1}, "b": {"n": 1, "extra": 0}}, "a")


def test_show_source_returns_the_function_text():
    from recagents.notebook import pick_profile, show_source

    assert "def pick_profile" in show_source(pick_profile).data
