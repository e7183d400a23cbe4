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
"""

from __future__ import annotations

import hashlib
import os
import shutil
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

__all__ = [
    "DEFAULT_URL",
    "MIRROR_ENV",
    "RELEASES_SCHEMA",
    "URL_ENV",
    "Release",
    "ReleaseError",
    "ReleaseFile",
    "fetch",
    "load_manifest",
    "manifest",
    "release_names",
]

#: The environment variable naming the offline mirror's root folder.
MIRROR_ENV = "RECAGENTS_RELEASES_MIRROR"
#: The environment variable that replaces :data:`DEFAULT_URL` (tests point it at loopback).
URL_ENV = "RECAGENTS_RELEASES_URL"
#: Where raw files of a repository at a commit are served.
DEFAULT_URL = "https://raw.githubusercontent.com"
#: Seconds a download waits for the server before giving up.
TIMEOUT_S = 60.0
_CHUNK = 1 << 20

_HEX40 = "^[0-9a-f]{40}$"
_HEX64 = "^[0-9a-f]{64}$"
_NAME = "^[A-Za-z0-9_.-]+$"

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
            "propertyNames": {"pattern": "^[a-z0-9][a-z0-9-]*$"},
            "additionalProperties": {
                "type": "object",
                "required": ["owner", "repo", "commit", "licence", "files"],
                "additionalProperties": False,
                "properties": {
                    "owner": {"type": "string", "pattern": _NAME},
                    "repo": {"type": "string", "pattern": _NAME},
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
    """Whether ``path`` is relative, POSIX, and stays inside its root."""
    parts = PurePosixPath(path).parts
    return (
        "\\" not in path
        and not path.startswith("/")
        and bool(parts)
        and all(part not in ("", ".", "..") for part in parts)
    )


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
        seen: set[str] = set()
        for index, item in enumerate(entry["files"]):
            where = f"{source}: releases.{name}.files[{index}].path"
            if not _safe_path(item["path"]):
                raise ResourceError(f"{where}: {item['path']!r} is not a relative POSIX path")
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


def _download(url: str, item: ReleaseFile, dest: Path, *, progress: bool, timeout: float) -> None:
    """Stream ``url`` to ``<dest>.part`` (resuming it), verify, rename to ``dest``.

    Raises:
        urllib.error.URLError, OSError: The server cannot be reached or fails.
        ReleaseError: The downloaded bytes do not match the manifest.
    """
    from tqdm.auto import tqdm

    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    if offset > item.size:
        part.unlink()
        offset = 0
    if offset < item.size:
        request = urllib.request.Request(url, headers={"User-Agent": "recagents"})
        if offset:
            request.add_header("Range", f"bytes={offset}-")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if offset and response.status != 206:  # the server ignored the range
                offset = 0
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
                while chunk := response.read(_CHUNK):
                    handle.write(chunk)
                    bar.update(len(chunk))
    problem = _mismatch(part, item)
    if problem:
        part.unlink(missing_ok=True)
        raise ReleaseError(f"checksum mismatch downloading {item.path} from {url}: {problem}")
    os.replace(part, dest)


def fetch(
    release: str,
    paths: Sequence[str] | None = None,
    *,
    progress: bool = True,
    manifest_file: Path | None = None,
    timeout: float = TIMEOUT_S,
) -> Path:
    """Make files of a release available locally, verified against the manifest.

    Args:
        release: A name from :func:`release_names`, e.g. ``"afl-lastfm"``.
        paths: Paths in the repository to fetch; all files of the release when None.
        progress: Show a progress bar over the bytes of each download.
        manifest_file: A manifest to read instead of the packaged one (tests).
        timeout: Seconds a download waits for the server.

    Returns:
        The local root folder: ``root / path`` is each requested file.

    Raises:
        ReleaseError: An unknown release or path; a cached file that no longer matches the
            manifest; a mirror file or download whose checksum does not match; files found
            nowhere (the message names the release, the paths, the mirror variable and the
            URL tried); or the release folder's lock not obtained in time.
    """
    from filelock import FileLock, Timeout

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
    root = config.cache_dir / "releases" / rel.owner / rel.repo / rel.commit
    root.parent.mkdir(parents=True, exist_ok=True)
    lock_path = root.parent / f"{rel.commit}.lock"
    try:
        with FileLock(str(lock_path), timeout=config.lock_timeout_s):
            _fill(rel, wanted, root, progress=progress, timeout=timeout)
    except Timeout:
        raise ReleaseError(
            f"release {release!r}: another process holds {lock_path} "
            f"for more than {config.lock_timeout_s:g} s (RECAGENTS_LOCK_TIMEOUT)"
        ) from None
    return root


def _fill(
    rel: Release, wanted: list[ReleaseFile], root: Path, *, progress: bool, timeout: float
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
            _download(url, item, root / item.path, progress=progress, timeout=timeout)
        except (urllib.error.URLError, OSError) as error:
            left = [entry.path for entry in missing[done:]]
            where = f"{MIRROR_ENV}={mirror_value}" if mirror_value else f"{MIRROR_ENV} is not set"
            reason = getattr(error, "reason", None) or error
            raise ReleaseError(
                f"release {rel.name!r} ({rel.owner}/{rel.repo} at {rel.commit}): "
                f"{len(left)} file(s) missing: {_listing(left)}. "
                f"Not in the cache ({root}), not in the offline mirror ({where}), "
                f"and the download failed: {url}: {reason}. "
                f"Set {MIRROR_ENV} to a folder laid out as <root>/<owner>/<repo>/<commit>/<path>, "
                f"or fetch with network access."
            ) from None
