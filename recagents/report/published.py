"""The published run, checked: its files are what the code makes from its committed replies.

Why: the repository publishes ``figures/``, ``docs/`` and ``REPRODUCTION.md`` beside the
reply bundle they were made from (``replies/default.bundle``). A change of code that moves a
figure must regenerate it in the same commit; CI reruns the published run from the bundle
and fails, naming the file and the notebook to rerun, when anything comes out different.
The smoke profile's recorded values (``replies/smoke-records.json``) are checked the same
way, value by value.

- :func:`fingerprint` hashes every published file; :func:`stale_files` compares two
  fingerprints and :func:`explain_stale` says, for each changed file, which notebook makes it.
- :func:`collect_records` reads every notebook's records from a build folder;
  :func:`record_differences` lists each record that differs from the committed ones.

Nothing happens at import time.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from recagents.notebook import read_records

PUBLISHED = ("figures", "docs", "REPRODUCTION.md", "replies/default.bundle")
"""What ``make reproduce`` publishes, relative to the repository root."""

_NOTEBOOK_PREFIX = re.compile(r"^(\d\d)_")


def fingerprint(root: Path, published: Sequence[str] = PUBLISHED) -> dict[str, str]:
    """SHA-256 of every published file under ``root``, by path relative to it."""
    root = Path(root)
    hashes: dict[str, str] = {}
    for name in published:
        path = root / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if file.is_file():
                hashes[file.relative_to(root).as_posix()] = _sha256(file)
    return hashes


def _sha256(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB chunks (a published file of any size, bounded memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(2**20):
            digest.update(chunk)
    return digest.hexdigest()


def stale_files(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """Paths whose content differs between two fingerprints, or that one of them lacks."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def _notebook_of(path: str, notebooks_dir: Path) -> str | None:
    """The source notebook whose number starts the file name of ``path``, if there is one."""
    found = _NOTEBOOK_PREFIX.match(Path(path).name)
    if found is None:
        return None
    matches = sorted(Path(notebooks_dir).glob(f"{found.group(1)}_*.ipynb"))
    return matches[0].as_posix() if matches else None


def explain_stale(
    paths: Sequence[str],
    before: Mapping[str, str],
    after: Mapping[str, str],
    notebooks_dir: Path = Path("notebooks"),
) -> list[str]:
    """One line per changed published file: what changed and which notebook to rerun."""
    lines = []
    for path in paths:
        what = (
            "is new"
            if path not in before
            else ("was not made" if path not in after else "differs from what the code makes")
        )
        notebook = _notebook_of(path, notebooks_dir)
        if path.startswith("replies/"):
            why = (
                "the run used other requests than the committed bundle holds (a prompt, a "
                "parameter or the model changed): run `make reproduce`, which asks the model "
                "for the new replies, and commit the bundle with the figures"
            )
        elif notebook is not None:
            why = f"rerun {notebook} (`make reproduce`) and commit what it writes"
        else:
            why = "run `make reproduce` and commit figures/, docs/ and REPRODUCTION.md"
        lines.append(f"{path} {what}: {why}")
    return lines


def collect_records(build_dir: Path, stems: Sequence[str] | None = None) -> dict[str, Any]:
    """Every executed notebook's records in ``build_dir``, by notebook name, names sorted."""
    build_dir = Path(build_dir)
    if stems is None:
        stems = [p.stem for p in sorted(build_dir.glob("[0-9][0-9]_*.ipynb"))]
    return {stem: read_records(build_dir / f"{stem}.ipynb") for stem in stems}


def write_records(records: Mapping[str, Any], out_path: Path) -> Path:
    """Write records as stable, readable JSON (sorted names, one value per line)."""
    text = json.dumps(records, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    Path(out_path).write_text(text, encoding="utf-8")
    return Path(out_path)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def record_differences(
    expected: Mapping[str, Mapping[str, Any]], actual: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """One line per record that differs: absent, new, or with another value (compared exactly).

    Records are rounded when they are recorded, so the same replies give the same values;
    nothing is compared with a tolerance.
    """
    lines = []
    for stem in sorted(set(expected) | set(actual)):
        if stem not in actual:
            lines.append(f"{stem}: not run (its records are committed)")
            continue
        if stem not in expected:
            lines.append(f"{stem}: ran, but has no committed records")
            continue
        want, got = expected[stem], actual[stem]
        for name in sorted(set(want) | set(got)):
            if name not in got:
                lines.append(f"{stem}: {name} was not recorded (committed: {_short(want[name])})")
            elif name not in want:
                lines.append(f"{stem}: {name} is new ({_short(got[name])})")
            elif _canonical(want[name]) != _canonical(got[name]):
                lines.append(
                    f"{stem}: {name} is {_short(got[name])}, committed {_short(want[name])}"
                )
    return lines


def _short(value: Any, limit: int = 120) -> str:
    text = _canonical(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
