"""Tests of recagents.report.published: the stale-file and record checks of the published run."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from test_report import write_executed

from recagents.report import cli
from recagents.report.markdown import write_reproduction
from recagents.report.published import (
    collect_records,
    explain_stale,
    fingerprint,
    record_differences,
    stale_files,
    write_records,
)


def _repo(root: Path) -> Path:
    (root / "figures").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "replies").mkdir()
    (root / "notebooks").mkdir()
    (root / "notebooks" / "01_agentcf.ipynb").write_text("{}")
    (root / "figures" / "01_agentcf_ranking.png").write_bytes(b"png-1")
    (root / "figures" / "00_overview.png").write_bytes(b"png-0")
    (root / "docs" / "01_agentcf.html").write_text("<html>")
    (root / "REPRODUCTION.md").write_text("# Reproduction report\n")
    (root / "replies" / "default.bundle").write_bytes(b"zip")
    return root


def test_a_changed_figure_is_named_with_the_notebook_to_rerun(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    before = fingerprint(root)
    assert set(before) == {
        "figures/00_overview.png",
        "figures/01_agentcf_ranking.png",
        "docs/01_agentcf.html",
        "REPRODUCTION.md",
        "replies/default.bundle",
    }
    assert stale_files(before, fingerprint(root)) == []
    (root / "figures" / "01_agentcf_ranking.png").write_bytes(b"png-1 moved")
    (root / "figures" / "00_overview.png").unlink()
    after = fingerprint(root)
    changed = stale_files(before, after)
    assert changed == ["figures/00_overview.png", "figures/01_agentcf_ranking.png"]
    lines = explain_stale(changed, before, after, root / "notebooks")
    assert lines[0].startswith("figures/00_overview.png was not made: run `make reproduce`")
    assert lines[1].startswith("figures/01_agentcf_ranking.png differs from what the code makes")
    assert f"rerun {(root / 'notebooks' / '01_agentcf.ipynb').as_posix()}" in lines[1]


def test_stale_cli_fails_with_the_names_and_passes_when_nothing_moved(
    tmp_path: Path, capsys
) -> None:
    root = _repo(tmp_path)
    snap = tmp_path / "published.json"
    assert cli.main(["fingerprint", "--root", str(root), "--out", str(snap)]) == 0
    argv = ["stale", "--before", str(snap), "--root", str(root)]
    argv += ["--notebooks", str(root / "notebooks")]
    assert cli.main(argv) == 0
    (root / "figures" / "00_overview.png").write_bytes(b"png-0 moved")
    assert cli.main(argv) == 1
    assert "1 published file is stale" in capsys.readouterr().err
    (root / "figures" / "00_overview.png").write_bytes(b"png-0")
    (root / "replies" / "default.bundle").write_bytes(b"other replies")
    (root / "figures" / "01_agentcf_ranking.png").write_bytes(b"png-2")
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "2 published files are stale" in err
    assert "figures/01_agentcf_ranking.png differs" in err and "01_agentcf.ipynb" in err
    assert "replies/default.bundle differs" in err
    assert "other requests than the committed bundle" in err


def test_record_differences_name_the_notebook_the_record_and_both_values() -> None:
    committed = {"01_agentcf": {"ndcg": [0.5, 0.4, 0.6], "n": 20}, "02_agent4rec": {"x": 1}}
    assert record_differences(committed, json.loads(json.dumps(committed))) == []
    ran = {"01_agentcf": {"ndcg": [0.5, 0.4, 0.6001], "extra": True}, "03_afl": {}}
    assert record_differences(committed, ran) == [
        "01_agentcf: extra is new (true)",
        "01_agentcf: n was not recorded (committed: 20)",
        "01_agentcf: ndcg is [0.5, 0.4, 0.6001], committed [0.5, 0.4, 0.6]",
        "02_agent4rec: not run (its records are committed)",
        "03_afl: ran, but has no committed records",
    ]


def test_records_round_trip_through_the_cli(tmp_path: Path, capsys) -> None:
    build = tmp_path / "build"
    write_executed(build / "01_agentcf.ipynb", {"profile": "smoke", "ndcg": [0.5, 0.4, 0.6]})
    out = tmp_path / "smoke-records.json"
    assert cli.main(["records", "--build", str(build), "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == collect_records(build)
    assert cli.main(["records", "--build", str(build), "--check", str(out)]) == 0
    write_records({"01_agentcf": {"profile": "smoke", "ndcg": [0.5, 0.4, 0.7]}}, out)
    assert cli.main(["records", "--build", str(build), "--check", str(out)]) == 1
    assert "01_agentcf: ndcg is [0.5, 0.4, 0.6], committed [0.5, 0.4, 0.7]" in (
        capsys.readouterr().err
    )


def test_a_rerun_that_changes_only_the_date_leaves_reproduction_md_alone(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    out = write_reproduction(build, tmp_path / "REPRODUCTION.md", "default")
    text = out.read_text()
    dated = re.sub(r"on \d{4}-\d\d-\d\d \d\d:\d\d UTC", "on 2001-01-01 00:00 UTC", text)
    assert dated != text
    out.write_text(dated)
    os.utime(out, ns=(1, 1))
    write_reproduction(build, out, "default")
    assert out.stat().st_mtime_ns == 1  # same content up to the date: not rewritten
    assert out.read_text() == dated
    write_executed(build / "04_interecagent.ipynb", {"profile": "default"}, "04 · IRA")
    write_reproduction(build, out, "default")
    assert out.stat().st_mtime_ns != 1 and "2030-01-01T00:00:00+00:00" in out.read_text()
    # the same notebook run again later: only its run time moves, so the file stays
    rerun = json.loads((build / "04_interecagent.ipynb").read_text())
    rerun["metadata"]["papermill"]["end_time"] = "2031-05-06T07:08:09.123456+00:00"
    (build / "04_interecagent.ipynb").write_text(json.dumps(rerun))
    os.utime(out, ns=(2, 2))
    write_reproduction(build, out, "default")
    assert out.stat().st_mtime_ns == 2 and "2031-05-06" not in out.read_text()
    write_executed(build / "04_interecagent.ipynb", {"profile": "smoke"}, "04 · IRA")
    write_reproduction(build, out, "default")
    assert out.stat().st_mtime_ns != 2  # a changed value is written
