"""recagents.failures: counts, examples and sentences made from a run's replies."""

import pytest

from recagents.failures import FailureMode, classify, has_placeholder

MODES = [
    FailureMode("placeholder", "copies a template placeholder", "it imitates the template.",
                has_placeholder),
    FailureMode("empty", "answers with nothing", "it stops at once.", lambda t: not t.strip()),
]  # fmt: skip


def test_placeholders_are_found_and_plain_text_is_not():
    assert has_placeholder("Best, [Your Name]")
    assert has_placeholder("<response to the request>")
    assert not has_placeholder("I liked Toy Story (1995) a lot")
    assert not has_placeholder("rating 4 < 5")


def test_counts_examples_and_clean_units():
    replies = ["Dear user, [Your Name]", "", "A fine answer", "<reason here>"]
    report = classify(replies, MODES, what="replies")
    frame = report.frame()
    assert report.n == 4 and report.clean == 1
    assert frame.loc[frame["failure"] == "copies a template placeholder", "count"].item() == 2
    assert frame.loc[frame["failure"] == "copies a template placeholder", "example"].item() == (
        "Dear user, [Your Name]"
    )
    sentences = report.sentences()
    assert sentences[0].startswith("In 2 of 4 replies (50%) the model copies a template")
    assert sentences[-1].startswith("1 of 4 replies (25%) show none")
    assert report.records()["modes"]["empty"]["count"] == 1


def test_nothing_to_classify_and_nothing_wrong_are_said():
    assert classify([], MODES).sentences() == ["No replies to classify in this run."]
    assert "None of the 1 replies" in classify(["fine"], MODES).sentences()[0]


def test_duplicate_names_are_refused():
    with pytest.raises(ValueError, match="unique"):
        classify(["x"], [MODES[0], MODES[0]])
