"""The papers' released files at pinned commits: fetched, checked by SHA-256, cached.

The manifest is package data, ``recagents/resources/releases.json``: per release (a short
name such as ``afl-lastfm``) the GitHub ``owner``/``repo``, the full 40-hex ``commit``, the
licence, and every file's ``path`` in the repository with its ``sha256`` and ``size``.

:func:`fetch` returns a local folder ``root`` where ``root / path`` is each requested file,
verified. Files come from, in order:

1. the cache, ``settings().cache_dir / "releases" / owner / repo / commit``; a cached file is
   re-verified on every call, and one that no longer matches the manifest is an error naming
   it (never silently fetched again);
2. the offline mirror named by ``RECAGENTS_RELEASES_MIRROR`` (laid out as
   ``<root>/<owner>/<repo>/<commit>/<path>``), copied into the cache once verified;
3. a download from ``https://raw.githubusercontent.com/<owner>/<repo>/<commit>/<path>`` (the
   base URL can be changed with ``RECAGENTS_RELEASES_URL``), streamed to ``<file>.part`` and
   resumed with an HTTP Range request, verified, then renamed into place.

Writes happen under an inter-process lock per release folder. Nothing reads a mirror
implicitly: without ``RECAGENTS_RELEASES_MIRROR`` the mirror step is skipped.

Every download is bounded, because the server is not trusted: it stops as soon as the
server sends more than the manifest's size (at most ``size + 1`` bytes reach the disk, and
that ``.part`` is deleted, never resumed), each read waits at most ``timeout`` seconds, and
the whole file must arrive within a total deadline (:data:`DEADLINE_S`, or
``RECAGENTS_RELEASES_DEADLINE`` seconds), so a server that drips a byte at a time cannot
hold a run forever; a ``.part`` cut short by the deadline is kept and resumed next time.
Every manifest field that becomes part of a path or a URL is checked first (owner and
repository names as GitHub allows them, 40-hex commits, relative POSIX paths without
``..``, backslashes or control characters), so a manifest cannot write outside the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import math
import os
import re
import shutil
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath
from typing import Any

from recagents.config import settings
from recagents.resources import ResourceError, read_resource, resource

#: The environment variable naming the offline mirror's root folder.
MIRROR_ENV = "RECAGENTS_RELEASES_MIRROR"
#: The environment variable that replaces :data:`DEFAULT_URL` (tests point it at loopback).
URL_ENV = "RECAGENTS_RELEASES_URL"
#: Where raw files of a repository at a commit are served.
DEFAULT_URL = "https://raw.githubusercontent.com"
#: Seconds one read of a download waits for the server before giving up.
TIMEOUT_S = 60.0
#: Seconds one file's whole download may take (a slow-drip server cannot defeat it).
DEADLINE_S = 600.0
#: The environment variable that replaces :data:`DEADLINE_S`.
DEADLINE_ENV = "RECAGENTS_RELEASES_DEADLINE"
_CHUNK = 1 << 20

# JSON-schema patterns (documentation and a first check); load_manifest re-checks each value
# with re.fullmatch, because a schema's ``$`` also matches before a trailing newline.
_HEX40 = "^[0-9a-f]{40}$"
_HEX64 = "^[0-9a-f]{64}$"
_OWNER = "^[A-Za-z0-9][A-Za-z0-9-]{0,38}$"  # a GitHub user or organisation
_REPO = "^[A-Za-z0-9._-]{1,100}$"  # a GitHub repository, but not "." or ".."
_RELEASE = "^[a-z0-9][a-z0-9-]*$"
_FULL = {
    "owner": re.compile(_OWNER[1:-1]),
    "repo": re.compile(_REPO[1:-1]),
    "commit": re.compile(_HEX40[1:-1]),
}
_SHA256 = re.compile(_HEX64[1:-1])
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

#: The JSON schema of ``releases.json``.
RELEASES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["releases"],
    "additionalProperties": False,
    "properties": {
        "_comment": {"type": "string"},
        "releases": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": _RELEASE},
            "additionalProperties": {
                "type": "object",
                "required": ["owner", "repo", "commit", "licence", "files"],
                "additionalProperties": False,
                "properties": {
                    "owner": {"type": "string", "pattern": _OWNER},
                    "repo": {"type": "string", "pattern": _REPO},
                    "commit": {"type": "string", "pattern": _HEX40},
                    "licence": {"type": "string", "minLength": 1},
                    "description": {"type": "string"},
                    "files": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "required": ["path", "sha256", "size"],
                            "additionalProperties": False,
                            "properties": {
                                "path": {"type": "string", "minLength": 1},
                                "sha256": {"type": "string", "pattern": _HEX64},
                                "size": {"type": "integer", "minimum": 0},
                            },
                        },
                    },
                },
            },
        },
    },
}


class ReleaseError(RuntimeError):
    """A released file that cannot be found, fetched or verified."""


@dataclass(frozen=True)
class ReleaseFile:
    """One file of a release: its path in the repository, SHA-256 (hex) and size in bytes."""

    path: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Release:
    """A repository at a pinned commit and the files of it the project uses."""

    name: str
    owner: str
    repo: str
    commit: str
    licence: str
    description: str
    files: tuple[ReleaseFile, ...]

    @property
    def slug(self) -> str:
        """``owner/repo/commit``, the layout of the cache, the mirror and the raw URL."""
        return f"{self.owner}/{self.repo}/{self.commit}"


def _safe_path(path: str) -> bool:
    """Whether ``path`` is relative, POSIX, free of control characters and inside its root."""
    return (
        "\\" not in path
        and not path.startswith("/")
        and not _CONTROL.search(path)
        and all(part not in ("", ".", "..") for part in path.split("/"))
    )


def _check_entry(source: object, name: str, entry: dict[str, Any]) -> None:
    """Re-check the fields of one release that become paths and URLs, strictly.

    Raises:
        ResourceError: naming the file, the field and what is wrong with its value.
    """
    where = f"{source}: releases.{name}"
    if not re.fullmatch(_RELEASE[1:-1], name):
        raise ResourceError(f"{where}: the release name {name!r} is not {_RELEASE}")
    for field, pattern in _FULL.items():
        value = entry[field]
        if not pattern.fullmatch(value) or value in (".", ".."):
            rule = {
                "owner": "a GitHub owner (letters, digits, '-'; 1-39 characters)",
                "repo": "a GitHub repository name (letters, digits, '.', '_', '-'; "
                "1-100 characters; not '.' or '..')",
                "commit": "a full 40-hex commit (lowercase)",
            }[field]
            raise ResourceError(f"{where}.{field}: {value!r} is not {rule}")
    for index, item in enumerate(entry["files"]):
        at = f"{where}.files[{index}]"
        if not _safe_path(item["path"]):
            raise ResourceError(
                f"{at}.path: {item['path']!r} is not a relative POSIX path (no leading '/', "
                "no '\\', no '.', '..' or empty parts, no control characters)"
            )
        if not _SHA256.fullmatch(item["sha256"]):
            raise ResourceError(f"{at}.sha256: {item['sha256']!r} is not 64 lowercase hex digits")
        size = item["size"]
        if type(size) is not int or size < 0:  # JSON 14.0 passes the schema's "integer"
            raise ResourceError(f"{at}.size: {size!r} is not a whole number of bytes >= 0")


def load_manifest(path: Path | Traversable | None = None) -> dict[str, Release]:
    """Read and validate a releases manifest (the packaged one when ``path`` is None).

    Raises:
        ResourceError: The file does not match :data:`RELEASES_SCHEMA`, a path is absolute
            or leaves its root, or a release lists a path twice.
    """
    if path is None:
        return _packaged()
    source = path
    data = read_resource(source, RELEASES_SCHEMA)
    releases: dict[str, Release] = {}
    for name, entry in data["releases"].items():
        _check_entry(source, name, entry)
        seen: set[str] = set()
        for index, item in enumerate(entry["files"]):
            where = f"{source}: releases.{name}.files[{index}].path"
            if item["path"] in seen:
                raise ResourceError(f"{where}: {item['path']!r} is listed twice")
            seen.add(item["path"])
        releases[name] = Release(
            name=name,
            owner=entry["owner"],
            repo=entry["repo"],
            commit=entry["commit"],
            licence=entry["licence"],
            description=entry.get("description", ""),
            files=tuple(ReleaseFile(f["path"], f["sha256"], f["size"]) for f in entry["files"]),
        )
    return releases


@cache
def _packaged() -> dict[str, Release]:
    return load_manifest(resource("releases.json"))


def release_names(manifest_file: Path | None = None) -> list[str]:
    """The names of the releases in the manifest, sorted."""
    return sorted(load_manifest(manifest_file))


def manifest(release: str, manifest_file: Path | None = None) -> Release:
    """One release of the manifest (the packaged one unless ``manifest_file`` is given).

    Raises:
        ReleaseError: No release has that name (the message lists the known ones).
    """
    releases = load_manifest(manifest_file)
    if release not in releases:
        raise ReleaseError(f"unknown release {release!r}; known: {sorted(releases)}")
    return releases[release]


def _digest(path: Path) -> tuple[int, str]:
    """Size and SHA-256 hex digest of a file, read in chunks."""
    sha = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()


def _mismatch(path: Path, expected: ReleaseFile) -> str | None:
    """What differs between ``path`` and the manifest entry, or None if it matches."""
    size = path.stat().st_size
    if size != expected.size:
        return f"size {size} bytes, expected {expected.size}"
    _, sha = _digest(path)
    if sha != expected.sha256:
        return f"sha256 {sha}, expected {expected.sha256}"
    return None


def _listing(paths: Sequence[str]) -> str:
    more = f" ... and {len(paths) - 10} more" if len(paths) > 10 else ""
    return ", ".join(paths[:10]) + more


def _from_mirror(rel: Release, item: ReleaseFile, mirror: Path, dest: Path) -> bool:
    """Copy ``item`` from the mirror into ``dest`` once verified; False if it is not there."""
    source = mirror / rel.slug / item.path
    if not source.is_file():
        return False
    problem = _mismatch(source, item)
    if problem:
        raise ReleaseError(
            f"release {rel.name!r}: checksum mismatch in the offline mirror ({MIRROR_ENV}): "
            f"{source}: {problem}; the mirror file is not the released one"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".copy")
    try:
        shutil.copyfile(source, tmp)
        problem = _mismatch(tmp, item)
        if problem:
            raise ReleaseError(f"release {rel.name!r}: {source} changed while copied: {problem}")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return True


def _public_url(url: str) -> str:
    """``url`` without user info, query or fragment: messages must not carry credentials."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class _Watch:
    """Shuts a download's socket down at its deadline, whatever read it is blocked in.

    A per-read timeout cannot bound a server that sends one byte just before each timeout
    (in the headers or the body); shutting the socket down wakes any blocked read at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.expired = False

    def attach(self, sock: socket.socket) -> None:
        """Watch ``sock`` (the newest connection, after any redirect)."""
        with self._lock:
            self._sock = sock
            if self.expired:
                self._shut()

    def expire(self) -> None:
        """The deadline passed: stop the transfer."""
        with self._lock:
            self.expired = True
            self._shut()

    def _shut(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def connection(
        self, base: type[http.client.HTTPConnection]
    ) -> type[http.client.HTTPConnection]:
        """A subclass of ``base`` whose sockets this watch can shut down."""
        watch = self

        class Watched(base):  # type: ignore[valid-type,misc]
            def connect(self) -> None:
                super().connect()
                watch.attach(self.sock)

        return Watched


def _opener(watch: _Watch) -> urllib.request.OpenerDirector:
    """An opener like urllib's, with HTTP(S) connections that ``watch`` can shut down."""

    class HTTP(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(watch.connection(http.client.HTTPConnection), req)

    class HTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(watch.connection(http.client.HTTPSConnection), req)

    return urllib.request.build_opener(HTTP, HTTPS)


def _download(
    url: str, item: ReleaseFile, dest: Path, *, progress: bool, timeout: float, deadline: float
) -> None:
    """Stream ``url`` to ``<dest>.part`` (resuming it), verify, rename to ``dest``.

    At most ``item.size + 1`` bytes are ever written (one more proves the server sends too
    much; that ``.part`` is deleted), one read waits at most ``timeout`` seconds and the
    whole transfer at most ``deadline`` seconds (a ``.part`` cut short is kept to resume).

    Raises:
        urllib.error.URLError, OSError, http.client.HTTPException: The server cannot be
            reached or fails.
        ReleaseError: The server sends more than the manifest's size, takes longer than
            ``deadline``, or the downloaded bytes do not match the manifest.
    """
    from tqdm.auto import tqdm

    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    if offset > item.size:  # never resume a file already larger than the release's
        part.unlink()
        offset = 0
    where = f"{item.path} from {_public_url(url)}"
    if offset < item.size or not part.exists():
        watch = _Watch()
        timer = threading.Timer(deadline, watch.expire)
        timer.daemon = True
        timer.start()
        written = offset
        try:
            request = urllib.request.Request(url, headers={"User-Agent": "recagents"})
            if offset:
                request.add_header("Range", f"bytes={offset}-")
            with _opener(watch).open(request, timeout=min(timeout, deadline)) as response:
                if watch.expired:  # the headers took the whole deadline: write nothing
                    raise TimeoutError
                if offset and response.status != 206:  # the server ignored the range
                    offset = written = 0
                length = response.headers.get("Content-Length", "")
                if length.isascii() and length.isdigit() and offset + int(length) > item.size:
                    raise ReleaseError(
                        f"downloading {where}: the server announces {offset + int(length)} "
                        f"bytes, but the manifest says {item.size}; nothing was written"
                    )
                with (
                    part.open("ab" if offset else "wb") as handle,
                    tqdm(
                        total=item.size,
                        initial=offset,
                        unit="B",
                        unit_scale=True,
                        desc=PurePosixPath(item.path).name,
                        disable=not progress,
                    ) as bar,
                ):
                    while written <= item.size and not watch.expired:
                        chunk = response.read1(min(_CHUNK, item.size + 1 - written))
                        if not chunk:
                            break
                        handle.write(chunk)
                        written += len(chunk)
                        bar.update(len(chunk))
        except (OSError, http.client.HTTPException):
            if not watch.expired:
                raise
        finally:
            timer.cancel()
        if written > item.size:
            part.unlink(missing_ok=True)
            raise ReleaseError(
                f"downloading {where}: the server sent more than the manifest's {item.size} "
                f"bytes; stopped at {written} bytes and deleted the partial file"
            )
        if watch.expired and (written < item.size or not part.exists()):
            if part.exists() and not part.stat().st_size:
                part.unlink()
            kept = (
                f"{written} of {item.size} bytes kept in {part} to resume"
                if part.exists()
                else "nothing was written"
            )
            raise ReleaseError(
                f"downloading {where}: not done within the {deadline:g} s deadline "
                f"({DEADLINE_ENV}; raise it for a slow connection); {kept}"
            )
    problem = _mismatch(part, item)
    if problem:
        part.unlink(missing_ok=True)
        raise ReleaseError(f"checksum mismatch downloading {where}: {problem}")
    os.replace(part, dest)


def _deadline(value: float | None) -> float:
    """The per-file download deadline: ``value``, else ``$RECAGENTS_RELEASES_DEADLINE``."""
    if value is None:
        raw = os.environ.get(DEADLINE_ENV, "").strip()
        if not raw:
            return DEADLINE_S
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise ReleaseError(f"{DEADLINE_ENV}={raw!r}: give the seconds a file may take, > 0")
    elif not (math.isfinite(value) and value > 0):
        raise ReleaseError(f"deadline={value!r}: give the seconds a file may take, > 0")
    return float(value)


def fetch(
    release: str,
    paths: Sequence[str] | None = None,
    *,
    progress: bool = True,
    manifest_file: Path | None = None,
    timeout: float = TIMEOUT_S,
    deadline: float | None = None,
) -> Path:
    """Make files of a release available locally, verified against the manifest.

    Args:
        release: A name from :func:`release_names`, e.g. ``"afl-lastfm"``.
        paths: Paths in the repository to fetch; all files of the release when None.
        progress: Show a progress bar over the bytes of each download.
        manifest_file: A manifest to read instead of the packaged one (tests).
        timeout: Seconds one read of a download waits for the server.
        deadline: Seconds one file's whole download may take; ``None`` reads
            ``$RECAGENTS_RELEASES_DEADLINE`` (:data:`DEADLINE_ENV`), else :data:`DEADLINE_S`.

    Returns:
        The local root folder: ``root / path`` is each requested file.

    Raises:
        ReleaseError: An unknown release or path; a cached file that no longer matches the
            manifest; a mirror file or download whose checksum does not match; files found
            nowhere (the message names the release, the paths, the mirror variable and the
            URL tried); a server that sends more than a file's size or misses the deadline;
            or the release folder's lock not obtained in time.
    """
    from filelock import FileLock, Timeout

    seconds = _deadline(deadline)
    rel = manifest(release, manifest_file)
    by_path = {item.path: item for item in rel.files}
    if paths is None:
        wanted = list(rel.files)
    else:
        unknown = [path for path in paths if path not in by_path]
        if unknown:
            raise ReleaseError(
                f"release {release!r} has no file {_listing(unknown)} "
                f"({len(unknown)} unknown of {len(paths)} requested)"
            )
        wanted = [by_path[path] for path in dict.fromkeys(paths)]
    config = settings()
    cache = config.cache_dir / "releases"
    root = cache / rel.owner / rel.repo / rel.commit
    if not all(_inside(root / item.path, cache) for item in wanted):  # load_manifest ensures it
        raise ReleaseError(f"release {release!r}: its files would lie outside {cache}")
    root.parent.mkdir(parents=True, exist_ok=True)
    lock_path = root.parent / f"{rel.commit}.lock"
    try:
        with FileLock(str(lock_path), timeout=config.lock_timeout_s):
            _fill(rel, wanted, root, progress=progress, timeout=timeout, deadline=seconds)
    except Timeout:
        raise ReleaseError(
            f"release {release!r}: another process holds {lock_path} "
            f"for more than {config.lock_timeout_s:g} s (RECAGENTS_LOCK_TIMEOUT)"
        ) from None
    return root


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` lies under ``folder`` once ``.`` and ``..`` are resolved (lexically)."""
    return Path(os.path.normpath(path)).is_relative_to(os.path.normpath(folder))


def _fill(
    rel: Release,
    wanted: list[ReleaseFile],
    root: Path,
    *,
    progress: bool,
    timeout: float,
    deadline: float,
) -> None:
    """Verify cached files and bring the missing ones from the mirror or the network."""
    missing: list[ReleaseFile] = []
    for item in wanted:
        dest = root / item.path
        if dest.is_file():
            problem = _mismatch(dest, item)
            if problem:
                raise ReleaseError(
                    f"release {rel.name!r}: cached file {dest} does not match the manifest "
                    f"({problem}); delete it to fetch it again"
                )
        else:
            missing.append(item)
    mirror_value = os.environ.get(MIRROR_ENV, "").strip()
    if mirror_value:
        mirror = Path(mirror_value).expanduser()
        missing = [
            item for item in missing if not _from_mirror(rel, item, mirror, root / item.path)
        ]
    base = (os.environ.get(URL_ENV, "").strip() or DEFAULT_URL).rstrip("/")
    for done, item in enumerate(missing):
        url = f"{base}/{rel.slug}/{urllib.parse.quote(item.path)}"
        try:
            _download(
                url, item, root / item.path, progress=progress, timeout=timeout, deadline=deadline
            )
        except ReleaseError as error:
            raise ReleaseError(f"release {rel.name!r}: {error}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            left = [entry.path for entry in missing[done:]]
            where = f"{MIRROR_ENV}={mirror_value}" if mirror_value else f"{MIRROR_ENV} is not set"
            reason = getattr(error, "reason", None) or error
            raise ReleaseError(
                f"release {rel.name!r} ({rel.owner}/{rel.repo} at {rel.commit}): "
                f"{len(left)} file(s) missing: {_listing(left)}. "
                f"Not in the cache ({root}), not in the offline mirror ({where}), "
                f"and the download failed: {_public_url(url)}: {reason}. "
                f"Set {MIRROR_ENV} to a folder laid out as <root>/<owner>/<repo>/<commit>/<path>, "
                f"or fetch with network access."
            ) from None
