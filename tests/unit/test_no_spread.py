"""A zero-width interval is said as "no spread at n = ...", never shown as precision (#39)."""

import pandas as pd

from recagents.metrics import format_interval
from recagents.notebook import expectation


def test_an_interval_without_width_is_said_as_no_spread():
    summary = pd.DataFrame({"mean": [2.0, 0.5], "low": [2.0, 0.4], "high": [2.0, 0.6], "n": 8})
    assert format_interval(summary).tolist() == [
        "2.000 (no spread at n = 8)",
        "0.500 [0.400, 0.600]",
    ]
    text = expectation("satisfaction", (2.0, 2.0, 2.0), 8, "m")
    assert "2.000 (no spread at n = 8)" in text and "[2.000, 2.000]" not in text
    assert "says nothing about precision" in text and "not visible at this n" not in text
