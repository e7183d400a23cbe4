"""Agent4Rec's call log: every call of a simulation (for cost) and every counted problem.

:class:`SimulationLog` is the simulator's own log, older than
:class:`recagents.llm.runlog.RunLog`: its call rows carry the same fields (the call kind in
``phase``, no ``kind`` column), so :func:`recagents.llm.runlog.cost_table` reads them, and it
also counts unusable replies by kind (the invalid-output rate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from recagents.llm.client import ChatResult

__all__ = ["SimulationLog"]


@dataclass
class SimulationLog:
    """Every call (for cost) and every counted problem (for the invalid-output rate).

    Taught in: notebook 02, section 0 "Setup".
    """

    calls: list[dict[str, Any]] = field(default_factory=list)
    problems: dict[str, int] = field(default_factory=dict)

    def add_calls(self, phase: str, results: Sequence[ChatResult]) -> None:
        """Account for one batch of results."""
        for r in results:
            self.calls.append(
                {
                    "phase": phase,
                    "ok": r.ok,
                    "failure": r.failure,
                    "cached": r.cached,
                    "prompt_tokens": r.prompt_tokens,
                    "completion_tokens": r.completion_tokens,
                    "latency_s": r.latency_s,
                    "reasks": r.reasks,
                }
            )

    def count(self, problem: str, n: int = 1) -> None:
        """Count a problem (e.g. an unusable page reply)."""
        self.problems[problem] = self.problems.get(problem, 0) + n

    def calls_frame(self) -> pd.DataFrame:
        """The calls as a frame (the columns :func:`recagents.llm.runlog.cost_table` reads)."""
        return pd.DataFrame(self.calls)
