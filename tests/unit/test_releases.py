"""recagents.data.releases: manifest, cache, offline mirror and loopback download (no network)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from recagents.data import releases
from recagents.data.releases import MIRROR_ENV, URL_ENV, ReleaseError, fetch
from recagents.resources import ResourceError

OWNER, REPO, COMMIT = "someone", "paper", "0123456789abcdef0123456789abcdef01234567"
SLUG = f"{OWNER}/{REPO}/{COMMIT}"
FILES = {
    "data/a.txt": b"alpha\n" * 10,
    "data/sub/b.bin": bytes(range(256)) * 40,
    "c.csv": b"x,y\n1,2\n",
}
REAL_MIRROR = Path(__file__).resolve().parents[3] / "shared" / "mirror"


def _entry(path: str, content: bytes) -> dict[str, Any]:
    return {"path": path, "sha256": hashlib.sha256(content).hexdigest(), "size": len(content)}


@pytest.fixture
def manifest_file(tmp_path: Path) -> Path:
    """A manifest of one release, ``toy``, with the three files of FILES."""
    data = {
        "releases": {
            "toy": {
                "owner": OWNER,
                "repo": REPO,
                "commit": COMMIT,
                "licence": "MIT",
                "files": [_entry(path, content) for path, content in FILES.items()],
            }
        }
    }
    path = tmp_path / "releases.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def mirror(tmp_path: Path) -> Path:
    """A synthetic offline mirror holding FILES under owner/repo/commit."""
    root = tmp_path / "mirror"
    for path, content in FILES.items():
        target = root / SLUG / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return root


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> Path:
    """No mirror, and a download URL nobody listens on; returns the cache folder."""
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:9")
    return cache_dir


class _Handler(BaseHTTPRequestHandler):
    """Serves ``server.folder`` with ``Range: bytes=N-`` support; logs each Range header."""

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        server: Any = self.server
        path = server.folder / self.path.lstrip("/")
        server.ranges.append(self.headers.get("Range"))
        if not path.is_file():
            self.send_error(404)
            return
        body = path.read_bytes()
        start = 0
        header = self.headers.get("Range")
        if header and header.startswith("bytes=") and header.endswith("-"):
            start = int(header[len("bytes=") : -1])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        self.wfile.write(body[start:])

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet."""


@pytest.fixture
def http_server(mirror: Path) -> Iterator[Any]:
    """A loopback server over the synthetic mirror (URLs are owner/repo/commit/path)."""
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.folder = mirror
    server.ranges = []
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _cache_root(cache_dir: Path) -> Path:
    return cache_dir / "releases" / OWNER / REPO / COMMIT


def test_packaged_manifest_loads() -> None:
    assert releases.release_names() == ["afl-lastfm", "agent4rec-ml1m", "agentcf-cds"]
    a4r = releases.manifest("agent4rec-ml1m")
    paths = {item.path for item in a4r.files}
    for run, agents in (("LightGCN/lgn_1000_5_4_1009", 1000), ("MF/mf_100_5_4", 100)):
        for kind, suffix in (("behavior", "pkl"), ("running_logs", "txt")):
            listed = {p for p in paths if p.startswith(f"storage/ml-1m/{run}/{kind}/")}
            assert listed == {f"storage/ml-1m/{run}/{kind}/{k}.{suffix}" for k in range(agents)}
        assert f"storage/ml-1m/{run}/metrics.txt" in paths
    afl = releases.manifest("afl-lastfm")
    assert (afl.owner, afl.repo, afl.licence) == ("Lanyu0303", "AFL", "MIT")
    assert "data/lastfm/train_data.df" in {item.path for item in afl.files}
    with pytest.raises(ReleaseError, match="unknown release 'nope'"):
        releases.manifest("nope")


def test_manifest_rejects_bad_fields(tmp_path: Path, manifest_file: Path) -> None:
    data = json.loads(manifest_file.read_text(encoding="utf-8"))
    data["releases"]["toy"]["commit"] = "abc123"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ResourceError, match=r"releases\.toy\.commit"):
        releases.load_manifest(bad)
    data["releases"]["toy"]["commit"] = COMMIT
    data["releases"]["toy"]["files"][0]["path"] = "../escape.txt"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ResourceError, match="not a relative POSIX path"):
        releases.load_manifest(bad)


def test_fetch_from_mirror_into_cache(
    monkeypatch: pytest.MonkeyPatch, offline: Path, mirror: Path, manifest_file: Path
) -> None:
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    root = fetch("toy", progress=False, manifest_file=manifest_file)
    assert root == _cache_root(offline)
    for path, content in FILES.items():
        assert (root / path).read_bytes() == content
    assert not list(root.rglob("*.copy")) and not list(root.rglob("*.part"))


def test_fetch_subset_and_unknown_path(
    monkeypatch: pytest.MonkeyPatch, offline: Path, mirror: Path, manifest_file: Path
) -> None:
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    root = fetch("toy", ["c.csv"], progress=False, manifest_file=manifest_file)
    assert (root / "c.csv").is_file() and not (root / "data").exists()
    with pytest.raises(ReleaseError, match="has no file nope.txt"):
        fetch("toy", ["nope.txt"], progress=False, manifest_file=manifest_file)


def test_cached_files_reused_without_mirror(
    monkeypatch: pytest.MonkeyPatch, offline: Path, mirror: Path, manifest_file: Path
) -> None:
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    fetch("toy", progress=False, manifest_file=manifest_file)
    monkeypatch.delenv(MIRROR_ENV)
    root = fetch("toy", progress=False, manifest_file=manifest_file)
    assert (root / "data/a.txt").read_bytes() == FILES["data/a.txt"]


def test_corrupted_cached_file_is_an_error(
    monkeypatch: pytest.MonkeyPatch, offline: Path, mirror: Path, manifest_file: Path
) -> None:
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    root = fetch("toy", progress=False, manifest_file=manifest_file)
    target = root / "data/sub/b.bin"
    target.write_bytes(b"X" + FILES["data/sub/b.bin"][1:])  # same size, other bytes
    with pytest.raises(ReleaseError, match=r"cached file .*data/sub/b\.bin.*sha256"):
        fetch("toy", progress=False, manifest_file=manifest_file)
    assert target.read_bytes()[:1] == b"X"  # never silently replaced


def test_corrupted_mirror_file_leaves_nothing_cached(
    monkeypatch: pytest.MonkeyPatch, offline: Path, mirror: Path, manifest_file: Path
) -> None:
    (mirror / SLUG / "c.csv").write_bytes(b"x,y\n1,3\n")
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    with pytest.raises(ReleaseError, match=r"checksum mismatch .*c\.csv"):
        fetch("toy", ["c.csv"], progress=False, manifest_file=manifest_file)
    root = _cache_root(offline)
    assert not root.exists() or not [p for p in root.rglob("*") if p.is_file()]


def test_missing_offline_gives_one_clear_message(
    monkeypatch: pytest.MonkeyPatch, offline: Path, tmp_path: Path, manifest_file: Path
) -> None:
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    monkeypatch.setenv(MIRROR_ENV, str(empty))
    with pytest.raises(ReleaseError) as caught:
        fetch("toy", progress=False, manifest_file=manifest_file, timeout=5)
    message = str(caught.value)
    assert "'toy'" in message and "3 file(s) missing" in message
    assert "data/a.txt" in message and "c.csv" in message
    assert MIRROR_ENV in message and f"http://127.0.0.1:9/{SLUG}/" in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_missing_list_is_capped(
    monkeypatch: pytest.MonkeyPatch, offline: Path, tmp_path: Path
) -> None:
    data = {
        "releases": {
            "many": {
                "owner": OWNER,
                "repo": REPO,
                "commit": COMMIT,
                "licence": "MIT",
                "files": [_entry(f"f{i:02d}.txt", b"%d" % i) for i in range(13)],
            }
        }
    }
    path = tmp_path / "many.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ReleaseError, match=r"13 file\(s\) missing: .*f09\.txt \.\.\. and 3 more"):
        fetch("many", progress=False, manifest_file=path, timeout=5)


def test_download_from_loopback(
    monkeypatch: pytest.MonkeyPatch, offline: Path, http_server: Any, manifest_file: Path
) -> None:
    monkeypatch.setenv(URL_ENV, f"http://127.0.0.1:{http_server.server_address[1]}/")
    root = fetch("toy", progress=False, manifest_file=manifest_file)
    for path, content in FILES.items():
        assert (root / path).read_bytes() == content
    assert http_server.ranges == [None, None, None]
    assert not list(root.rglob("*.part"))


def test_download_resumes_a_part_file(
    monkeypatch: pytest.MonkeyPatch, offline: Path, http_server: Any, manifest_file: Path
) -> None:
    monkeypatch.setenv(URL_ENV, f"http://127.0.0.1:{http_server.server_address[1]}")
    content = FILES["data/sub/b.bin"]
    part = _cache_root(offline) / "data/sub/b.bin.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(content[:1000])
    root = fetch("toy", ["data/sub/b.bin"], progress=True, manifest_file=manifest_file)
    assert (root / "data/sub/b.bin").read_bytes() == content
    assert http_server.ranges == ["bytes=1000-"]
    assert not part.exists()


def test_download_checksum_mismatch(
    monkeypatch: pytest.MonkeyPatch,
    offline: Path,
    http_server: Any,
    mirror: Path,
    manifest_file: Path,
) -> None:
    (mirror / SLUG / "c.csv").write_bytes(b"x,y\n9,9\n")  # what the server now serves
    monkeypatch.setenv(URL_ENV, f"http://127.0.0.1:{http_server.server_address[1]}")
    with pytest.raises(ReleaseError, match=r"checksum mismatch downloading c\.csv"):
        fetch("toy", ["c.csv"], progress=False, manifest_file=manifest_file)
    root = _cache_root(offline)
    assert not (root / "c.csv").exists() and not (root / "c.csv.part").exists()


@pytest.mark.skipif(not REAL_MIRROR.is_dir(), reason="no offline mirror of the releases here")
def test_real_manifest_matches_real_mirror() -> None:
    problems = []
    for name in releases.release_names():
        rel = releases.manifest(name)
        for item in rel.files:
            path = REAL_MIRROR / rel.slug / item.path
            data = path.read_bytes() if path.is_file() else b""
            if len(data) != item.size or hashlib.sha256(data).hexdigest() != item.sha256:
                problems.append(f"{name}: {item.path}")
    assert not problems


@pytest.mark.skipif(not REAL_MIRROR.is_dir(), reason="no offline mirror of the releases here")
def test_fetch_afl_from_real_mirror(monkeypatch: pytest.MonkeyPatch, offline: Path) -> None:
    monkeypatch.setenv(MIRROR_ENV, str(REAL_MIRROR))
    root = fetch("afl-lastfm", progress=False)
    assert root.is_relative_to(offline)
    assert (root / "data/lastfm/train_data.df").stat().st_size > 0
    assert (root / "data/prior_lastfm/SASRec.csv").is_file()


def test_lock_held_elsewhere_times_out(
    monkeypatch: pytest.MonkeyPatch, offline: Path, mirror: Path, manifest_file: Path
) -> None:
    from filelock import FileLock

    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    monkeypatch.setenv("RECAGENTS_LOCK_TIMEOUT", "0.2")
    lock_path = _cache_root(offline).parent / f"{COMMIT}.lock"
    lock_path.parent.mkdir(parents=True)
    with FileLock(str(lock_path)), pytest.raises(ReleaseError, match=r"another process holds"):
        fetch("toy", progress=False, manifest_file=manifest_file)
    assert not _cache_root(offline).exists()
