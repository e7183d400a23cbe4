"""REPRODUCTION.md and the HTML pages of the executed notebooks, both written by ``make reproduce``.

The report sets every claim the notebooks reproduce beside what the paper reports. It holds no
numbers of its own: the claims are data (``recagents/resources/claims.json``) that says
*where* each value lives — a cell of ``paper_numbers.json`` for the paper, a record of an
executed notebook (written there by :func:`recagents.notebook.record`) for ours — and how the
two are compared. Every value is read at run time; a notebook that has not been run, or a
value a run did not record, is reported as "not run", never filled in.

The verdict rules are data too (``recagents/resources/verdict_rules.json``), printed at the
top of REPRODUCTION.md and implemented once in :mod:`recagents.report.verdicts`: every row
shows ``n`` and the half-width its verdict rests on beside the effect the claim is about, and
a sample that cannot decide is *inconclusive (underpowered)*.

Command line (no side effects on import)::

    python -m recagents.report reproduction --build build --out REPRODUCTION.md
    python -m recagents.report html --build build --figures figures --out build/html

Its modules, one line each, are in MODULES.md (generated from their docstrings).
"""
