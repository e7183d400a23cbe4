"""recagents.data.releases against a hostile manifest or server (issue #34, items 9 and 12).

Each server here is a loopback ``ThreadingHTTPServer`` on 127.0.0.1 whose handler loops a
bounded number of times and stops at teardown, so no test can hang or fill the disk.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from recagents.data import releases
from recagents.data.releases import DEADLINE_ENV, MIRROR_ENV, URL_ENV, ReleaseError, fetch
from recagents.resources import ResourceError

OWNER, REPO, COMMIT = "someone", "paper", "0123456789abcdef0123456789abcdef01234567"
CONTENT = b"hello, world!\n"  # 14 bytes
SHA = hashlib.sha256(CONTENT).hexdigest()


def _manifest(folder: Path, **fields: Any) -> Path:
    """A manifest of one release ``toy`` with the one file ``f.txt``; ``fields`` override."""
    entry: dict[str, Any] = {
        "owner": OWNER,
        "repo": REPO,
        "commit": COMMIT,
        "licence": "MIT",
        "files": [{"path": "f.txt", "sha256": SHA, "size": len(CONTENT)}],
    }
    entry.update(fields)
    path = folder / "releases.json"
    path.write_text(json.dumps({"releases": {"toy": entry}}), encoding="utf-8")
    return path


def _file(**fields: Any) -> dict[str, list[dict[str, Any]]]:
    return {"files": [{"path": "f.txt", "sha256": SHA, "size": len(CONTENT), **fields}]}


BAD_FIELDS = {
    "owner ..": ({"owner": ".."}, "owner"),
    "owner ../..": ({"owner": "../.."}, "owner"),
    "owner with slash": ({"owner": "a/b"}, "owner"),
    "owner leading dash": ({"owner": "-abc"}, "owner"),
    "owner 40 chars": ({"owner": "a" * 40}, "owner"),
    "owner trailing newline": ({"owner": "someone\n"}, "owner"),
    "repo ..": ({"repo": ".."}, "repo"),
    "repo .": ({"repo": "."}, "repo"),
    "repo with slash": ({"repo": "a/b"}, "repo"),
    "repo 101 chars": ({"repo": "r" * 101}, "repo"),
    "commit trailing newline": ({"commit": COMMIT + "\n"}, "commit"),
    "commit short": ({"commit": COMMIT[:39]}, "commit"),
    "path NUL": (_file(path="a\x00b"), "path"),
    "path newline": (_file(path="a\nb"), "path"),
    "path backslash": (_file(path="a\\b"), "path"),
    "path absolute": (_file(path="/etc/passwd"), "path"),
    "path dotdot": (_file(path="data/../../x"), "path"),
    "path dot": (_file(path="./f.txt"), "path"),
    "path empty part": (_file(path="data//f.txt"), "path"),
    "sha256 trailing newline": (_file(sha256=SHA + "\n"), "sha256"),
    "sha256 uppercase": (_file(sha256=SHA.upper()), "sha256"),
    "size float": (_file(size=14.0), "size"),
    "size negative": (_file(size=-1), "size"),
    "size bool": (_file(size=True), "size"),
}


@pytest.mark.parametrize("fields, name", BAD_FIELDS.values(), ids=BAD_FIELDS.keys())
def test_manifest_fields_that_become_paths_are_checked(
    tmp_path: Path, fields: dict[str, Any], name: str
) -> None:
    path = _manifest(tmp_path, **fields)
    with pytest.raises(ResourceError) as caught:
        releases.load_manifest(path)
    message = str(caught.value)
    assert str(path) in message and name in message, message


def test_good_github_names_are_accepted(tmp_path: Path) -> None:
    path = _manifest(tmp_path, owner="a" * 39, repo="My.repo_name-2" + "x" * 86)
    release = releases.load_manifest(path)["toy"]
    assert release.owner == "a" * 39 and len(release.repo) == 100


def test_owner_dotdot_cannot_write_outside_the_cache(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror = tmp_path / "outside" / "mirror"
    planted = mirror / ".." / REPO / COMMIT / "f.txt"  # what owner ".." would read
    planted.parent.mkdir(parents=True)
    planted.write_bytes(CONTENT)
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:9")
    with pytest.raises(ResourceError, match=r"releases\.toy\.owner"):
        fetch("toy", progress=False, manifest_file=_manifest(tmp_path, owner=".."))
    assert not (cache_dir / REPO).exists()  # releases/../paper/<commit>: outside releases/


# --------------------------------------------------------------------------- hostile servers


class _Server:
    """A loopback server whose GET handler is ``behaviour(handler, stop)``; records requests."""

    def __init__(self, behaviour: Callable[[BaseHTTPRequestHandler, threading.Event], None]):
        self.stop = threading.Event()
        self.ranges: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                outer.ranges.append(self.headers.get("Range"))
                try:
                    behaviour(self, outer.stop)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                """Quiet."""

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def serve(
    monkeypatch: pytest.MonkeyPatch, cache_dir: Path
) -> Iterator[Callable[[Callable[..., None]], _Server]]:
    """Start a server with a behaviour and point the download URL at it."""
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    servers: list[_Server] = []

    def start(behaviour: Callable[..., None]) -> _Server:
        server = _Server(behaviour)
        server.thread.start()
        servers.append(server)
        monkeypatch.setenv(URL_ENV, server.url)
        return server

    yield start
    for server in servers:
        server.close()


def _part(cache_dir: Path) -> Path:
    return cache_dir / "releases" / OWNER / REPO / COMMIT / "f.txt.part"


def _flood(length_header: bool) -> Callable[[BaseHTTPRequestHandler, threading.Event], None]:
    """Send 30 MiB (a bounded stand-in for an endless stream) for the 14-byte file."""

    def behaviour(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        if length_header:
            handler.send_header("Content-Length", str(30 << 20))
        handler.end_headers()
        block = b"x" * (1 << 20)
        for _ in range(30):
            if stop.is_set():
                return
            handler.wfile.write(block)

    return behaviour


def test_a_stream_longer_than_the_manifest_stops_at_size_plus_one(
    tmp_path: Path, cache_dir: Path, serve: Callable[..., _Server]
) -> None:
    serve(_flood(length_header=False))
    started = time.perf_counter()
    with pytest.raises(ReleaseError) as caught:
        fetch("toy", progress=False, manifest_file=_manifest(tmp_path), timeout=5)
    message = str(caught.value)
    assert "f.txt" in message and "/someone/paper/" in message
    assert "more than the manifest's 14 bytes" in message and "stopped at 15 bytes" in message
    assert not _part(cache_dir).exists()  # an oversize .part is never kept to resume
    assert time.perf_counter() - started < 5


def test_an_announced_oversize_body_is_refused_before_reading(
    tmp_path: Path, cache_dir: Path, serve: Callable[..., _Server]
) -> None:
    serve(_flood(length_header=True))
    with pytest.raises(ReleaseError, match=r"announces 31457280 bytes.*says 14; nothing"):
        fetch("toy", progress=False, manifest_file=_manifest(tmp_path), timeout=5)
    assert not _part(cache_dir).exists()


def test_an_oversize_part_file_is_not_resumed(
    tmp_path: Path, cache_dir: Path, serve: Callable[..., _Server]
) -> None:
    def honest(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(CONTENT)))
        handler.end_headers()
        handler.wfile.write(CONTENT)

    server = serve(honest)
    part = _part(cache_dir)
    part.parent.mkdir(parents=True)
    part.write_bytes(CONTENT + b"EXTRA")
    root = fetch("toy", progress=False, manifest_file=_manifest(tmp_path), timeout=5)
    assert (root / "f.txt").read_bytes() == CONTENT
    assert server.ranges == [None] and not part.exists()


def _drip_body(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
    """The right length announced, then one byte every 0.15 s (each read gets a byte)."""
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(CONTENT)))
    handler.end_headers()
    for byte in CONTENT:
        if stop.wait(0.15):
            return
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()


def test_a_dripping_server_cannot_defeat_the_total_deadline(
    tmp_path: Path, cache_dir: Path, serve: Callable[..., _Server]
) -> None:
    serve(_drip_body)
    started = time.perf_counter()
    with pytest.raises(ReleaseError) as caught:
        fetch("toy", progress=False, manifest_file=_manifest(tmp_path), timeout=2, deadline=0.7)
    elapsed = time.perf_counter() - started
    message = str(caught.value)
    assert "'toy'" in message and "f.txt from http://127.0.0.1:" in message
    assert "0.7 s deadline" in message and DEADLINE_ENV in message
    assert elapsed < 1.6, elapsed  # the per-read timeout (2 s) was never reached
    part = _part(cache_dir)
    assert part.is_file() and 0 < part.stat().st_size < len(CONTENT)  # kept to resume
    assert f"{part.stat().st_size} of 14 bytes kept" in message


def test_a_part_cut_by_the_deadline_resumes(
    tmp_path: Path, cache_dir: Path, serve: Callable[..., _Server]
) -> None:
    def ranged(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        start = int((handler.headers.get("Range") or "bytes=0-")[6:-1])
        handler.send_response(206 if start else 200)
        handler.send_header("Content-Length", str(len(CONTENT) - start))
        handler.end_headers()
        handler.wfile.write(CONTENT[start:])

    server = serve(ranged)
    part = _part(cache_dir)
    part.parent.mkdir(parents=True)
    part.write_bytes(CONTENT[:5])
    root = fetch("toy", progress=False, manifest_file=_manifest(tmp_path), deadline=5)
    assert (root / "f.txt").read_bytes() == CONTENT and server.ranges == ["bytes=5-"]


def test_dripped_headers_are_bounded_by_the_deadline_too(
    tmp_path: Path, cache_dir: Path, serve: Callable[..., _Server], monkeypatch: Any
) -> None:
    def drip_headers(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for _ in range(40):
            if stop.wait(0.1):
                return
            handler.wfile.write(b"X")
            handler.wfile.flush()

    serve(drip_headers)
    monkeypatch.setenv(DEADLINE_ENV, "0.5")
    started = time.perf_counter()
    with pytest.raises(ReleaseError, match=r"0\.5 s deadline .*nothing was written"):
        fetch("toy", progress=False, manifest_file=_manifest(tmp_path), timeout=2)
    assert time.perf_counter() - started < 1.5
    assert not _part(cache_dir).exists()


@pytest.mark.parametrize("value", ["soon", "0", "-3", "nan", "inf"])
def test_a_bad_deadline_setting_is_named(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(DEADLINE_ENV, value)
    monkeypatch.setenv(URL_ENV, "http://127.0.0.1:9")  # never the network, whatever happens
    with pytest.raises(ReleaseError, match=rf"{DEADLINE_ENV}='{value}'"):
        fetch("toy", progress=False, manifest_file=_manifest(tmp_path))


@pytest.mark.parametrize(
    "url, shown",
    [
        ("http://user:s3cret@127.0.0.1:9/raw/f.txt?token=t0ken#x", "http://127.0.0.1:9/raw/f.txt"),
        ("https://s3cret@example.org/a", "https://example.org/a"),
        ("http://[::1]:8080/a?s3cret", "http://[::1]:8080/a"),
    ],
)
def test_messages_show_urls_without_credentials(url: str, shown: str) -> None:
    assert releases._public_url(url) == shown
