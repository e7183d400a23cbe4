"""REPRODUCTION.md and the HTML pages of the executed notebooks, both written by ``make reproduce``.

The report sets every claim the notebooks reproduce beside what the paper reports. It holds no
numbers of its own: :data:`CLAIMS` is data (``recagents/resources/claims.json``) that says
*where* each value lives — a cell of ``paper_numbers.json`` for the paper, a record of an
executed notebook (written there by :func:`recagents.notebook.record`) for ours — and how the
two are compared. Every value is
read at run time; a notebook that has not been run, or a value a run did not record, is
reported as "not run", never filled in.

Verdict rules (:data:`VERDICT_RULES`, ``recagents/resources/verdict_rules.json``, printed in
the report):

* Every row shows ``n`` and the half-width of the interval its verdict rests on (what the sample
  can detect) beside the size of the effect the claim is about (``effect`` in ``claims.json``,
  or the distance to a recorded random baseline, or the paper's own difference). A sample that
  cannot decide is **inconclusive (underpowered)**: its interval is wider than that effect,
  its ``n`` is below the claim's ``min_n``, or a no-difference claim rests on methods that
  both did nothing.
* ``contains`` (the paper gives a value): **reproduced** when the paper's value lies in our 95%
  interval and the interval resolves the claim's effect; **inconclusive** when it lies in a
  wider interval or one that also holds the random baseline's mean; **not reproduced** when it
  lies outside; **not comparable** when the paper's cell holds no number or we recorded a
  point value without an interval.
* ``at_least``: **reproduced** when ours is not below the paper's value (the paper's value is at
  most our interval's upper end, or our point value when no interval is recorded).
* ``greater`` (the paper says A beats B): **reproduced** when our 95% intervals of A and B are
  disjoint with A above (a conservative stand-in for a paired test, which the records do not
  hold); **inconclusive** when the intervals overlap and the difference's half-width exceeds
  the claimed difference; **direction only** when A's mean is above B's but the intervals
  overlap or were not recorded; **not reproduced** when A's mean is not above B's.
* ``above``: as ``greater``, against a fixed threshold instead of a second value.
* ``matches`` (a total recomputed from released records, no sampling): **reproduced** when
  ours equals the released number to half a unit of its last printed digit.
* ``no_amplification`` (the paper says a loop does not amplify a bias): **reproduced** when the
  notebook's test finds no amplification on an interval of the difference narrower than the
  claim's effect; **inconclusive** when both methods did nothing, chose exactly the same, or
  the interval is missing or too wide; **not reproduced** when the test finds amplification.
* A claim without a paper number (Rec4Agentverse, the protocol checks of notebook 00) is **not
  comparable**; the outcome of the same rule on our values is given as our demonstration.

Command line (no side effects on import)::

    python -m recagents.report reproduction --build build --out REPRODUCTION.md
    python -m recagents.report html --build build --figures figures --out build/html

Modules:

- ``claims``: the verdict names and what a claim is (:class:`PaperRef`, :class:`RecordRef`,
  :class:`Claim`, :class:`NotebookInfo`).
- ``loading``: :data:`CLAIMS`, :data:`NOTEBOOKS` and :data:`VERDICT_RULES`, read from
  ``recagents/resources/{claims,notebooks,verdict_rules}.json`` on first use and validated
  against their JSON schemas (:class:`~recagents.report.loading.ResourceError` names the file
  and the field at fault).
- ``values``: the paper's value (:func:`paper_value`) and ours (:class:`Estimate`).
- ``verdicts``: the rules, pure functions of the values (``judge_*``), each returning the
  half-width and effect it rests on.
- ``evaluate``: reading an executed notebook (:func:`read_run`) and judging every claim on a
  build folder (:func:`evaluate_claims`).
- ``markdown``: REPRODUCTION.md (:func:`build_reproduction`, :func:`write_reproduction`,
  :func:`cross_paper_section`).
- ``pages``: the HTML pages and the index of figures (:func:`render_html`).
- ``cli``: the command line (:func:`main`); ``__main__`` runs it.
"""

from typing import Any

from recagents.report.claims import (
    DIRECTION_ONLY,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_REPRODUCED,
    NOT_RUN,
    PERSPECTIVE,
    PROTOCOL_CHECK,
    REPRODUCED,
    VERDICTS,
    Claim,
    NotebookInfo,
    PaperRef,
    RecordRef,
)
from recagents.report.cli import main
from recagents.report.evaluate import (
    Outcome,
    RunInfo,
    evaluate_claim,
    evaluate_claims,
    read_run,
)
from recagents.report.evaluate import (
    _embedded_model as _embedded_model,  # the tests' handle on the embedded model
)
from recagents.report.loading import (
    ResourceError,
    load_claims,
    load_notebooks,
    load_verdict_rules,
)
from recagents.report.markdown import (
    CROSS_PAPER,
    build_reproduction,
    cross_paper_section,
    write_reproduction,
)
from recagents.report.pages import FIGURE_SUFFIXES, render_html
from recagents.report.values import (
    Estimate,
    MissingRecord,
    PaperValue,
    paper_value,
    resolve_key,
)
from recagents.report.verdicts import (
    Verdict,
    difference_half_width,
    judge_above,
    judge_at_least,
    judge_contains,
    judge_greater,
    judge_matches,
    judge_no_amplification,
    judge_sample_size,
)

__all__ = [
    "CLAIMS",
    "CROSS_PAPER",
    "DIRECTION_ONLY",
    "FIGURE_SUFFIXES",
    "INCONCLUSIVE",
    "NOTEBOOKS",
    "NOT_COMPARABLE",
    "NOT_REPRODUCED",
    "NOT_RUN",
    "PERSPECTIVE",
    "PROTOCOL_CHECK",
    "REPRODUCED",
    "VERDICTS",
    "VERDICT_RULES",
    "Claim",
    "Estimate",
    "MissingRecord",
    "NotebookInfo",
    "Outcome",
    "PaperRef",
    "PaperValue",
    "RecordRef",
    "ResourceError",
    "RunInfo",
    "Verdict",
    "build_reproduction",
    "cross_paper_section",
    "difference_half_width",
    "evaluate_claim",
    "evaluate_claims",
    "judge_above",
    "judge_at_least",
    "judge_matches",
    "judge_contains",
    "judge_greater",
    "judge_no_amplification",
    "judge_sample_size",
    "load_claims",
    "load_notebooks",
    "load_verdict_rules",
    "main",
    "paper_value",
    "read_run",
    "render_html",
    "resolve_key",
    "write_reproduction",
]

# The tables are package data, read and validated on first use, not on import.
_TABLES = {
    "CLAIMS": load_claims,
    "NOTEBOOKS": load_notebooks,
    "VERDICT_RULES": load_verdict_rules,
}


def __getattr__(name: str) -> Any:
    """:data:`CLAIMS`, :data:`NOTEBOOKS` and :data:`VERDICT_RULES`, loaded on first access."""
    if name in _TABLES:
        return _TABLES[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_TABLES])
