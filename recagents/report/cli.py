"""The command line: ``python -m recagents.report reproduction|html|modules|fingerprint|...``.

``reproduction`` writes REPRODUCTION.md from the notebooks executed in a build folder;
``html`` renders them and an index page of the figures, ``modules`` writes MODULES.md (see
``make report``).
``fingerprint`` and ``stale`` check that a rerun of the published run changed none of its
files, naming each that did and the notebook to rerun; ``records`` writes or checks the
recorded values of a build folder (see ``make check-published`` and
:mod:`recagents.report.published`). Nothing happens on import.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from recagents.report.claims import VERDICTS
from recagents.report.evaluate import evaluate_claims
from recagents.report.markdown import write_reproduction
from recagents.report.modules import module_map
from recagents.report.pages import render_html
from recagents.report.published import (
    collect_records,
    explain_stale,
    fingerprint,
    record_differences,
    stale_files,
    write_records,
)
from recagents.resources import import_jsonschema


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
    snap = commands.add_parser("fingerprint", help="hash every published file into a JSON file")
    snap.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    snap.add_argument("--root", type=Path, default=Path("."), help="repository root")
    stale = commands.add_parser(
        "stale", help="fail, naming each file and its notebook, if a published file changed"
    )
    stale.add_argument("--before", type=Path, required=True, help="the `fingerprint` file")
    stale.add_argument("--root", type=Path, default=Path("."), help="repository root")
    stale.add_argument("--notebooks", type=Path, default=Path("notebooks"), help="sources")
    mods = commands.add_parser("modules", help="write the module map (MODULES.md)")
    mods.add_argument("--out", type=Path, default=Path("MODULES.md"), help="Markdown file")
    recs = commands.add_parser("records", help="write or check a build folder's records")
    recs.add_argument("--build", type=Path, required=True, help="executed notebooks")
    recs.add_argument(
        "--notebooks",
        type=Path,
        default=Path("notebooks"),
        help="source notebooks: only their executed copies count (a test's extra run, e.g. "
        "01_agentcf_tiny, left in --build is not a record of the profile)",
    )
    target = recs.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", type=Path, help="write the records to this JSON file")
    target.add_argument("--check", type=Path, help="fail unless they equal this JSON file's")
    return parser


def _published(args: argparse.Namespace) -> int:
    """``fingerprint`` and ``stale``: 1 with one line per changed file, else 0."""
    if args.command == "fingerprint":
        hashes = fingerprint(args.root)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n", "utf-8")
        print(f"wrote {args.out}: {len(hashes)} published files")
        return 0
    before = json.loads(args.before.read_text("utf-8"))
    after = fingerprint(args.root)
    changed = stale_files(before, after)
    if not changed:
        print(f"the {len(after)} published files are what the code makes from its replies")
        return 0
    noun = "published file is" if len(changed) == 1 else "published files are"
    print(f"{len(changed)} {noun} stale:", file=sys.stderr)
    for line in explain_stale(changed, before, after, args.notebooks):
        print(f"  {line}", file=sys.stderr)
    return 1


def _records(args: argparse.Namespace) -> int:
    """``records``: write them, or 1 with one line per differing record."""
    records = collect_records(args.build)
    if args.notebooks.is_dir():
        sources = {path.stem for path in args.notebooks.glob("*.ipynb")}
        records = {stem: values for stem, values in records.items() if stem in sources}
    if args.out is not None:
        write_records(records, args.out)
        print(f"wrote {args.out}: {sum(map(len, records.values()))} records of {len(records)}")
        return 0
    expected = json.loads(args.check.read_text("utf-8"))
    differences = record_differences(expected, records)
    if not differences:
        count = sum(map(len, records.values()))
        print(f"all {count} records of {args.build} equal {args.check}")
        return 0
    print(f"{len(differences)} records of {args.build} differ from {args.check}:", file=sys.stderr)
    for line in differences:
        print(f"  {line}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for a usage error)."""
    parser = _parser()
    args = parser.parse_args(argv)
    import_jsonschema()  # before nbformat does, without the 2.5 s grammar (see its docstring)
    if args.command in ("fingerprint", "stale"):
        return _published(args)
    if args.command == "modules":
        args.out.write_text(module_map(), encoding="utf-8")
        print(f"wrote {args.out}")
        return 0
    build = Path(args.build)
    if not build.is_dir():
        parser.error(
            f"build folder not found: {build} (run `make reproduce` or `make smoke` first, "
            "or pass --build)"
        )
    if args.command == "records":
        return _records(args)
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
