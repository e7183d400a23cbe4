"""Reply bundles: the model replies of a run, exported as one portable file and replayed offline.

Why: a run at the papers' sizes (``PROFILE=paper``) needs a capable endpoint and a key; its
replies, once cached, are all a rerun needs. A teacher exports them once; a class imports
the bundle and replays the run with no key, no endpoint and no local server, in minutes.

A bundle is a zip file (no pickles) of two members:

- ``manifest.json``: the format and its version, when it was made, the model names, the
  endpoint's scheme and host only (never credentials, paths or query strings), the profile
  and notebooks it came from, the sampling settings and structured-output modes of its
  requests, token totals, the number of entries and the SHA-256 of ``entries.jsonl``;
- ``entries.jsonl``: one JSON object per reply: its cache ``key``, the ``request``, the
  ``reply``, ``model``, token counts, the original latency and the entry's own ``sha256``.

Keys never enter a bundle: every request passes the reply cache's credential checks again
at export, and the requests, replies and manifest are scanned for the values of secret
environment variables and for well-known key shapes; any hit refuses the export.

Replay-only mode (``RECAGENTS_REPLAY=path/to/bundle``): the client imports the bundle into
its reply cache, never contacts an endpoint, and stops a batch with :class:`ReplayMissError`
naming the first request the bundle does not hold, before anything else is done.

Nothing happens at import time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import zipfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from recagents.llm.cache import ResponseCache, _check_no_secret_values, request_key

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "REPLAY_ENV",
    "BundleError",
    "Replay",
    "ReplayMissError",
    "describe_bundle",
    "endpoint_host",
    "export_bundle",
    "import_bundle",
    "read_bundle",
    "start_replay",
]

FORMAT = "recagents-reply-bundle"
"""The ``format`` field of every manifest."""

FORMAT_VERSION = 1
"""The bundle layout this code writes and reads; a bundle of another version is refused."""

REPLAY_ENV = "RECAGENTS_REPLAY"
"""Environment variable that names a bundle and switches the client to replay-only mode."""

_MANIFEST = "manifest.json"
_ENTRIES = "entries.jsonl"
_ENTRY_FIELDS = (
    "key",
    "request",
    "reply",
    "model",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
)
# Shapes of well-known credentials (OpenAI, Anthropic, Hugging Face, AWS, GitHub, Google):
# refused even when no environment variable holds them (e.g. a cache made on another machine).
_KEY_SHAPES = re.compile(
    r"\b(sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{20,}|hf_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|AIza[0-9A-Za-z_\-]{35})"
)
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_IMPORTED: dict[tuple[str, int, int, str], dict[str, Any]] = {}


class BundleError(ValueError):
    """A bundle cannot be written or read; the message names the file and the entry."""


class ReplayMissError(RuntimeError):
    """Replay-only mode met a request whose reply the bundle does not hold.

    Taught in: not shown in a notebook (raised by recagents.llm.client.LLMClient.map).
    """


# --------------------------------------------------------------------------- helpers


def endpoint_host(url: str | None) -> str:
    """Return only the scheme, host and port of an endpoint URL, for a manifest.

    User names, passwords, paths and query strings are dropped: some providers put keys in
    them. ``None`` (the embedded server) gives ``"local"``.

    Taught in: not shown in a notebook (used by recagents.llm.bundle.export_bundle).

    Args:
        url: The endpoint URL, or ``None``.

    Returns:
        For example ``"https://api.openai.com"``.
    """
    if not url:
        return "local"
    parts = urlsplit(url)
    host = parts.hostname or "unknown"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme or 'http'}://{host}{port}"


def _digest(entry: Mapping[str, Any]) -> str:
    """SHA-256 of an entry's canonical JSON, its own ``sha256`` field left out."""
    body = {name: entry[name] for name in _ENTRY_FIELDS}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _refuse_secrets(text: str, where: str) -> None:
    """Raise BundleError if ``text`` holds a secret environment value or a key-shaped string."""
    try:
        _check_no_secret_values(text)
    except ValueError as error:
        raise BundleError(f"{where}: {error}; nothing was written") from None
    match = _KEY_SHAPES.search(text)
    if match:
        raise BundleError(
            f"{where} holds a string shaped like an API key ({match.group(0)[:6]}...); bundles "
            "must never carry credentials; nothing was written"
        )


def _open_cache(cache: ResponseCache | str | Path) -> tuple[ResponseCache, bool]:
    """The cache object, and whether this module opened it (and must close it)."""
    if isinstance(cache, ResponseCache):
        return cache, False
    path = Path(cache).expanduser()
    if path.is_dir():
        path = path / "llm-cache.sqlite"
    if not path.is_file():
        raise BundleError(f"no reply cache at {path}; give the RECAGENTS_CACHE_DIR of the run")
    return ResponseCache(path, keylog=""), True


def _read_keylogs(keylogs: Iterable[str | Path]) -> list[str]:
    """Every key listed in the key logs (see ``RECAGENTS_KEYLOG``), first occurrence first."""
    keys: list[str] = []
    for log in keylogs:
        path = Path(log).expanduser()
        if not path.is_file():
            raise BundleError(f"key log {path} does not exist")
        keys += [line.strip() for line in path.read_text(encoding="ascii").splitlines()]
    return list(dict.fromkeys(k for k in keys if k))


# --------------------------------------------------------------------------- export


def _checked_entries(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with their digests, after the credential checks; raises BundleError."""
    entries = []
    for row in rows:
        where = f"cache entry {row['key']}"
        try:
            key = request_key(row["request"])  # runs the cache's credential checks again
        except ValueError as error:
            raise BundleError(f"{where}: {error}; nothing was written") from None
        if key != row["key"]:
            raise BundleError(f"{where}: its request hashes to {key}; the cache is corrupt")
        _refuse_secrets(json.dumps(row, ensure_ascii=False), where)
        entries.append({**{name: row[name] for name in _ENTRY_FIELDS}, "sha256": _digest(row)})
    return entries


def _settings_summary(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Models, kinds, sampling settings and structured modes of the entries, with counts."""
    chat = [e["request"] for e in entries if e["request"].get("kind") == "chat"]
    sampling = Counter(json.dumps(r.get("sampling"), sort_keys=True) for r in chat)
    return {
        "models": dict(Counter(e["model"] for e in entries)),
        "chat_models": sorted({str(r.get("model")) for r in chat}),
        "kinds": dict(Counter(str(e["request"].get("kind")) for e in entries)),
        "structured": sorted({r["structured"] for r in chat if r.get("structured")}),
        "sampling": [{"sampling": json.loads(s), "requests": n} for s, n in sampling.items()],
        "prompt_tokens": sum(int(e["prompt_tokens"]) for e in entries),
        "completion_tokens": sum(int(e["completion_tokens"]) for e in entries),
    }


def export_bundle(
    out_path: str | Path,
    *,
    cache: ResponseCache | str | Path,
    keys: Iterable[str] | None = None,
    keylogs: Iterable[str | Path] = (),
    notebooks: Sequence[str] = (),
    profile: str | None = None,
    endpoint: str | None = None,
) -> dict[str, Any]:
    """Write the replies of a run to one bundle file and return its manifest.

    Which replies: every one in ``cache`` (a run done into its own ``RECAGENTS_CACHE_DIR``),
    or only ``keys`` and the keys listed in ``keylogs`` (files written under
    ``RECAGENTS_KEYLOG`` while the run went, for one notebook of a shared cache).

    Taught in: not shown in a notebook (used by ``python -m recagents.llm bundle export``).

    Args:
        out_path: The bundle file to write (replaced atomically).
        cache: A :class:`ResponseCache`, its file, or the cache directory holding it.
        keys: Export only these cache keys.
        keylogs: Key-log files whose keys are exported (added to ``keys``).
        notebooks: Names of the notebooks the run executed, for the manifest.
        profile: The run's profile (``smoke``, ``default``, ``paper``), for the manifest.
        endpoint: The endpoint URL the run used; only scheme, host and port are kept.

    Returns:
        The manifest written.

    Raises:
        BundleError: If a wanted key is not in the cache, nothing would be exported, or an
            entry or the manifest holds a credential (then nothing is written).
    """
    store, opened = _open_cache(cache)
    try:
        wanted = None
        if keys is not None or keylogs:
            wanted = list(dict.fromkeys([*(keys or ()), *_read_keylogs(keylogs)]))
        rows = store.entries(wanted)
    finally:
        if opened:
            store.close()
    if wanted is not None and len(rows) < len(wanted):
        found = {row["key"] for row in rows}
        absent = [k for k in wanted if k not in found]
        raise BundleError(f"{len(absent)} wanted keys are not in the cache, e.g. {absent[0]}")
    if not rows:
        raise BundleError(f"nothing to export: no replies found in {store.path}")
    entries = _checked_entries(rows)
    lines = "".join(json.dumps(e, ensure_ascii=False, sort_keys=True) + "\n" for e in entries)
    data = lines.encode("utf-8")
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "recagents_version": _version(),
        "endpoint": endpoint_host(endpoint),
        "profile": profile,
        "notebooks": list(notebooks),
        **_settings_summary(entries),
        "entries": len(entries),
        "entries_sha256": hashlib.sha256(data).hexdigest(),
    }
    manifest_text = json.dumps(manifest, indent=1, ensure_ascii=False)
    _refuse_secrets(manifest_text, "the manifest")
    _write_zip(Path(out_path), {_MANIFEST: manifest_text.encode("utf-8"), _ENTRIES: data})
    return manifest


def _version() -> str:
    from recagents import __version__

    return __version__


def _write_zip(path: Path, members: Mapping[str, bytes]) -> None:
    """Write a zip of ``members`` to ``path`` through a temporary file (atomic replace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    os.replace(partial, path)


# --------------------------------------------------------------------------- reading


def _read_members(path: Path) -> tuple[dict[str, Any], bytes]:
    """The parsed manifest and the raw entries of a bundle, after the format checks."""
    if not path.is_file():
        raise BundleError(f"bundle {path} does not exist")
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if not {_MANIFEST, _ENTRIES} <= names:
                raise BundleError(f"bundle {path} lacks {_MANIFEST} or {_ENTRIES}")
            manifest = json.loads(archive.read(_MANIFEST).decode("utf-8"))
            data = archive.read(_ENTRIES)
    except (zipfile.BadZipFile, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BundleError(f"bundle {path} is not a readable reply bundle ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{path} is not a reply bundle (manifest format is not {FORMAT!r})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise BundleError(
            f"bundle {path} has format_version {manifest.get('format_version')!r}; this code "
            f"reads version {FORMAT_VERSION}. Export it again with this version of recagents"
        )
    return manifest, data


def _parse_entry(line: str, number: int, path: Path) -> dict[str, Any]:
    """One checked entry of ``entries.jsonl``; raises BundleError naming the line and key."""
    where = f"bundle {path}, {_ENTRIES} line {number}"
    try:
        entry = json.loads(line)
        missing = [name for name in (*_ENTRY_FIELDS, "sha256") if name not in entry]
    except (json.JSONDecodeError, TypeError):
        raise BundleError(f"{where} is not a JSON object") from None
    if missing:
        raise BundleError(f"{where} lacks the fields {missing}")
    where += f" (key {entry['key']})"
    if _digest(entry) != entry["sha256"]:
        raise BundleError(f"{where}: checksum mismatch; the entry was altered or damaged")
    try:
        key = request_key(entry["request"])
    except ValueError as error:
        raise BundleError(f"{where}: {error}") from None
    if key != entry["key"]:
        raise BundleError(f"{where}: its request hashes to {key}, not to its key")
    return entry


def read_bundle(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read a bundle and verify it completely: format version, every entry, the whole file.

    Taught in: not shown in a notebook (used by ``python -m recagents.llm bundle verify``).

    Args:
        path: The bundle file.

    Returns:
        ``(manifest, entries)``.

    Raises:
        BundleError: On any mismatch, naming the bundle and, for an entry, its line and key.
    """
    path = Path(path).expanduser()
    manifest, data = _read_members(path)
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise BundleError(f"bundle {path}: {_ENTRIES} is not UTF-8") from None
    entries = [_parse_entry(line, n, path) for n, line in enumerate(lines, 1) if line.strip()]
    if len(entries) != manifest.get("entries"):
        raise BundleError(
            f"bundle {path} holds {len(entries)} entries but its manifest lists "
            f"{manifest.get('entries')}; an entry was added or removed"
        )
    if hashlib.sha256(data).hexdigest() != manifest.get("entries_sha256"):
        raise BundleError(f"bundle {path}: whole-bundle checksum mismatch ({_ENTRIES} altered)")
    return manifest, entries


def import_bundle(path: str | Path, cache: ResponseCache | str | Path) -> int:
    """Verify a bundle and store its replies in a cache, all in one transaction.

    Nothing is written unless every check passes; replies the cache holds already are kept.

    Taught in: not shown in a notebook (used by ``python -m recagents.llm bundle import``).

    Args:
        path: The bundle file.
        cache: A :class:`ResponseCache`, its file, or a cache directory (created if needed).

    Returns:
        How many replies were new to the cache.

    Raises:
        BundleError: If the bundle fails a check (see :func:`read_bundle`).
    """
    _manifest, entries = read_bundle(path)
    if isinstance(cache, ResponseCache):
        return cache.put_many(entries)
    target = Path(cache).expanduser()
    if target.is_dir() or not target.suffix:
        target = target / "llm-cache.sqlite"
    with ResponseCache(target, keylog="") as store:
        return store.put_many(entries)


def describe_bundle(manifest: Mapping[str, Any]) -> str:
    """A few lines that say what a bundle holds, for ``bundle show`` and ``check``.

    Taught in: not shown in a notebook (used by ``python -m recagents.llm bundle show``).
    """
    sampling = "; ".join(
        f"{json.dumps(s['sampling'], sort_keys=True)} x{s['requests']}"
        for s in manifest.get("sampling", [])
    )
    return "\n".join(
        [
            f"format:    {manifest.get('format')} v{manifest.get('format_version')}",
            f"created:   {manifest.get('created_at')} "
            f"(recagents {manifest.get('recagents_version')})",
            f"endpoint:  {manifest.get('endpoint')}",
            f"profile:   {manifest.get('profile')}; notebooks: {manifest.get('notebooks') or '-'}",
            f"models:    {manifest.get('models')}",
            f"kinds:     {manifest.get('kinds')}; structured: {manifest.get('structured')}",
            f"sampling:  {sampling or '-'}",
            f"tokens:    {manifest.get('prompt_tokens')} prompt + "
            f"{manifest.get('completion_tokens')} completion",
            f"entries:   {manifest.get('entries')} (sha256 {manifest.get('entries_sha256')})",
        ]
    )


# --------------------------------------------------------------------------- replay


@dataclass(frozen=True)
class Replay:
    """A bundle being replayed: which file, and what its manifest says.

    Taught in: not shown in a notebook (used by recagents.llm.client.LLMClient).

    Attributes:
        path: The bundle file.
        manifest: Its manifest.
    """

    path: Path
    manifest: dict[str, Any]

    @property
    def model(self) -> str | None:
        """The chat model of the bundle when it holds exactly one, else ``None``."""
        models = self.manifest.get("chat_models") or []
        return models[0] if len(models) == 1 else None

    @property
    def structured(self) -> str | None:
        """The structured-output mode of its schema requests when there is one, else ``None``."""
        modes = self.manifest.get("structured") or []
        return modes[0] if len(modes) == 1 else None

    def miss(
        self,
        request: Mapping[str, Any],
        key: str,
        *,
        tag: str = "",
        batch: str = "",
        missing: int = 1,
    ) -> ReplayMissError:
        """The error for a request the bundle does not hold, naming it and the bundle."""
        messages = request.get("messages") or [{}]
        last = messages[-1]
        text = str(last.get("content", request.get("input", "")))[:200]
        where = f"batch {batch!r}, " if batch else ""
        where += f"tag {tag!r}, " if tag else ""
        more = f" ({missing} requests of this batch are missing)" if missing > 1 else ""
        return ReplayMissError(
            f"replay-only mode ({REPLAY_ENV}={self.path}): the bundle holds no reply for a "
            f"{request.get('kind')} request to model {request.get('model')!r} ({where}key "
            f"{key}){more}; its last message ({last.get('role', '?')}) begins {text!r}. No "
            "endpoint is contacted in replay-only mode: export the bundle again from a run "
            f"that made this request, or unset {REPLAY_ENV} to call a model."
        )


def start_replay(path: str | Path, cache: ResponseCache | None) -> Replay:
    """Verify a bundle and import it into ``cache`` (once per process), for replay-only mode.

    Taught in: not shown in a notebook (used by recagents.llm.client.LLMClient).

    Args:
        path: The bundle file (the value of ``RECAGENTS_REPLAY``).
        cache: The client's reply cache; replay needs one.

    Returns:
        The :class:`Replay`.

    Raises:
        BundleError: If there is no cache or the bundle fails a check.
    """
    path = Path(path).expanduser().resolve()
    if cache is None:
        raise BundleError(
            f"{REPLAY_ENV}={path}: replay-only mode needs the reply cache (cache=False)"
        )
    if not path.is_file():
        raise BundleError(f"{REPLAY_ENV}={path}: no such bundle file")
    stat = path.stat()
    token = (str(path), stat.st_mtime_ns, stat.st_size, str(cache.path))
    if token not in _IMPORTED:
        manifest, entries = read_bundle(path)
        cache.put_many(entries)
        _IMPORTED[token] = manifest
    return Replay(path=path, manifest=_IMPORTED[token])
