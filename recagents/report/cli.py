"""The command line: ``python -m recagents.report reproduction|html`` (see ``make report``).

``reproduction`` writes REPRODUCTION.md from the notebooks executed in a build folder;
``html`` renders them and an index page of the figures. Nothing happens on import.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from recagents.report.claims import VERDICTS
from recagents.report.evaluate import evaluate_claims
from recagents.report.markdown import write_reproduction
from recagents.report.pages import render_html
from recagents.resources import import_jsonschema

__all__ = ["main"]


def _expected_notebooks(build_dir: Path, source_dir: Path | None) -> list[Path]:
    """The executed notebooks expected in ``build_dir``: one per source notebook."""
    if source_dir is not None and Path(source_dir).is_dir():
        stems = [p.stem for p in sorted(Path(source_dir).glob("[0-9][0-9]_*.ipynb"))]
    else:
        stems = []
    stems += [p.stem for p in sorted(build_dir.glob("[0-9][0-9]_*.ipynb"))]
    return [build_dir / f"{stem}.ipynb" for stem in dict.fromkeys(stems)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m recagents.report",
        description="Write REPRODUCTION.md or the HTML pages of the executed notebooks.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rep = commands.add_parser(
        "reproduction", help="write REPRODUCTION.md from the executed notebooks' records"
    )
    rep.add_argument("--build", type=Path, default=Path("build"), help="executed notebooks")
    rep.add_argument("--out", type=Path, default=Path("REPRODUCTION.md"), help="Markdown file")
    rep.add_argument(
        "--profile",
        default=None,
        help="the profile the build folder was made with (default: what the notebooks recorded)",
    )
    web = commands.add_parser("html", help="render the executed notebooks and an index page")
    web.add_argument("--build", type=Path, default=Path("build"), help="executed notebooks")
    web.add_argument("--figures", type=Path, default=Path("figures"), help="figures folder")
    web.add_argument("--out", type=Path, default=Path("docs"), help="output folder")
    web.add_argument(
        "--notebooks",
        type=Path,
        default=Path("notebooks"),
        help="source notebooks, to list the ones not run yet (default: notebooks)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for a usage error)."""
    parser = _parser()
    args = parser.parse_args(argv)
    import_jsonschema()  # before nbformat does, without the 2.5 s grammar (see its docstring)
    build = Path(args.build)
    if not build.is_dir():
        parser.error(
            f"build folder not found: {build} (run `make reproduce` or `make smoke` first, "
            "or pass --build)"
        )
    if args.command == "reproduction":
        out = write_reproduction(build, args.out, args.profile)
        _, outcomes = evaluate_claims(build)
        counts = ", ".join(f"{sum(o.verdict == v for o in outcomes)} {v}" for v in VERDICTS)
        print(f"wrote {out}: {len(outcomes)} claims ({counts})")
        return 0
    notebooks = _expected_notebooks(build, args.notebooks)
    if not notebooks:
        parser.error(f"no notebooks to render: none in {args.notebooks} or {build}")
    if not args.figures.is_dir():
        print(f"note: no figures folder at {args.figures}", file=sys.stderr)
    index = render_html(notebooks, args.figures, args.out)
    rendered = sum(p.is_file() for p in notebooks)
    print(f"wrote {index}: {rendered} of {len(notebooks)} notebooks rendered")
    return 0
