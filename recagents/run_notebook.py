"""``python -m recagents.run_notebook ARGS``: papermill's command line, started faster.

Why: papermill imports nbformat, which imports jsonschema, and Jupyter's jsonschema extras
compile an IRI grammar on import: 2.5 of the 3.3 s papermill takes to start on two cores
(2026-12-07), paid once per notebook by ``make reproduce`` and ``make smoke``. This entry
point imports jsonschema without it (:func:`recagents.resources.import_jsonschema`; notebook
validation never checks a ``format``) and then hands every argument to papermill unchanged.
"""

from __future__ import annotations


def main() -> None:
    """Run papermill's command line (``sys.argv``), with jsonschema imported lightly first."""
    from recagents.resources import import_jsonschema

    import_jsonschema()
    from papermill.cli import papermill

    papermill(prog_name="papermill")


if __name__ == "__main__":
    main()
