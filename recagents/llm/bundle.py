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
at export, and every entry and the manifest go through :func:`recagents.llm.secret_scan.
find_secrets` (values of secret-named environment variables, raw and JSON-escaped; fields
named like credentials at any depth; ``detect-secrets``' key shapes); any hit refuses the
export. Each entry also passes the checks of reading (below), so an export never writes a
bundle that an import would refuse.

Reading is bounded and trusts nothing: ``entries.jsonl`` is streamed line by line, never
decompressed whole; a line longer than :data:`MAX_ENTRY_BYTES`, more than
:data:`MAX_BUNDLE_BYTES` decompressed (declared in the zip or actually read), more lines than
the manifest lists (at most :data:`MAX_ENTRIES`), an empty line, an entry nested deeper than
:data:`MAX_DEPTH`, a non-finite number, a duplicate key, or an entry that does not match
the entry rules (a chat reply without its ``text``, a token count that is not a whole
number from 0 to :data:`MAX_TOKENS`, ...) is refused at once with a :class:`BundleError`
naming the file, the line and the field. ``verify`` thereby checks what replay needs.

Replay-only mode (``RECAGENTS_REPLAY=path/to/bundle``): the client imports the bundle into
its reply cache, never contacts an endpoint, and stops a batch with :class:`ReplayMissError`
naming the first request the bundle does not hold, before anything else is done.

Nothing happens at import time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from recagents.llm.cache import ResponseCache, request_key
from recagents.llm.redact import redact_url
from recagents.llm.schemas import validate_json
from recagents.llm.secret_scan import find_secrets
from recagents.resources import import_jsonschema

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

MAX_ENTRY_BYTES = 4 * 2**20
"""Longest line of ``entries.jsonl`` read (4 MiB): one request and its reply. The project's
prompts are 1-16 KB (the embedded model's context is 4,096 tokens); this leaves room for a
128k-token prompt of a hosted model, JSON-escaped."""

MAX_BUNDLE_BYTES = 2**30
"""Most bytes of ``entries.jsonl`` read, decompressed (1 GiB), whatever the zip declares.
A paper-profile run of tens of thousands of 2-8 KB entries needs a few hundred MB. Reading
holds the parsed entries: measured 2.8 times the decompressed size (4 times while importing),
so a bundle at this limit needs about 3-4 GiB of memory."""

MAX_ENTRIES = 1_000_000
"""Most entries a manifest may list; lines beyond the manifest's count are refused at once."""

MAX_MANIFEST_BYTES = 2**20
"""Largest ``manifest.json`` read (1 MiB; a real one is about 1 KB)."""

MAX_DEPTH = 64
"""Deepest nesting of lists and objects inside an entry (real requests nest about 8 deep)."""

MAX_TOKENS = 10**9
"""Largest token count an entry may hold (SQLite stores it as a 64-bit integer)."""

MAX_LATENCY_S = 10.0**6
"""Largest original latency an entry may hold, in seconds (11.6 days)."""

_HEX = "0123456789abcdef"
_HEX64 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_COUNT = {"type": "integer", "minimum": 0, "maximum": MAX_TOKENS}
_STRINGS = {"type": "array", "items": {"type": "string"}}

MANIFEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["format", "format_version", "entries", "entries_sha256"],
    "properties": {
        "format": {"const": FORMAT},
        "format_version": {"const": FORMAT_VERSION},
        "entries": {"type": "integer", "minimum": 0, "maximum": MAX_ENTRIES},
        "entries_sha256": _HEX64,
        "created_at": {"type": ["string", "null"]},
        "recagents_version": {"type": ["string", "null"]},
        "endpoint": {"type": ["string", "null"]},
        "profile": {"type": ["string", "null"]},
        "notebooks": _STRINGS,
        "models": {"type": "object", "additionalProperties": _COUNT},
        "chat_models": _STRINGS,
        "kinds": {"type": "object", "additionalProperties": _COUNT},
        "structured": _STRINGS,
        "sampling": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["sampling", "requests"],
                "properties": {"sampling": {"type": ["object", "null"]}, "requests": _COUNT},
            },
        },
        "prompt_tokens": {"type": "integer", "minimum": 0},
        "completion_tokens": {"type": "integer", "minimum": 0},
    },
}
"""What a manifest must be: the fields that reading, ``bundle show`` and replay use."""
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_IMPORTED: dict[tuple[str, int, int, str], dict[str, Any]] = {}


class BundleError(ValueError):
    """A bundle cannot be written or read; the message names the file and the entry."""


class ReplayMissError(RuntimeError):
    """Replay-only mode met a request whose reply the bundle does not hold."""


# --------------------------------------------------------------------------- helpers


def endpoint_host(url: str | None) -> str:
    """Return only the scheme, host and port of an endpoint URL, for a manifest.

    User names, passwords, paths and query strings are dropped: some providers put keys in
    them. ``None`` (the embedded server) gives ``"local"``.

    Args:
        url: The endpoint URL, or ``None``.

    Returns:
        For example ``"https://api.openai.com"``.
    """
    if not url:
        return "local"
    try:  # credentials masked first (see redact_url), whatever urlsplit makes of the rest
        parts = urlsplit(redact_url(url))
        host, port = parts.hostname or "unknown", parts.port
    except ValueError:  # a bad port or bracket: never echo any of it
        return "unknown"
    return f"{parts.scheme or 'http'}://{host}{f':{port}' if port else ''}"


def _digest(entry: Mapping[str, Any]) -> str:
    """SHA-256 of an entry's canonical JSON, its own ``sha256`` field left out."""
    body = {name: entry[name] for name in _ENTRY_FIELDS}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _refuse_secrets(text: str, where: str, environ: dict[str, str] | None = None) -> None:
    """Raise BundleError if :func:`find_secrets` finds a credential in ``text``.

    The message names what was found (a variable, a field name, a kind of key), never the
    secret itself. ``environ``: a snapshot of the environment (default: ``os.environ``).
    """
    found = find_secrets(text, environ)
    if found:
        more = f" (and {len(found) - 1} more findings)" if len(found) > 1 else ""
        raise BundleError(
            f"{where} holds {found[0]}{more}; bundles must never carry credentials; remove it "
            "from the cache (or unset the variable if it is a false alarm); nothing was written"
        )


def _field(path: Iterable[Any]) -> str:
    """``reply.text`` or ``request.messages[0]`` for a path of keys and indexes."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".") or "(the whole entry)"


def _shape_problem(value: Any) -> str | None:
    """The first non-finite number, or nesting deeper than :data:`MAX_DEPTH`, in ``value``.

    Iterative, so that no nesting depth can exhaust the stack. ``None`` when there is none.
    """
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return f"field {_field(path)}: {item} is not a finite number"
        if isinstance(item, dict | list):
            if len(path) >= MAX_DEPTH:
                return f"field {_field(path)}: nested deeper than MAX_DEPTH={MAX_DEPTH}"
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            stack.extend((v, (*path, k)) for k, v in pairs)
    return None


def _check_shape(value: Any, schema: dict[str, Any], where: str) -> None:
    """Raise BundleError naming the field if ``value`` is non-finite, too deep or off-schema."""
    problem = _shape_problem(value)
    if problem is None:
        try:
            validate_json(value, schema)
        except import_jsonschema().ValidationError as error:
            path = list(error.absolute_path)
            message = error.message if len(error.message) <= 200 else error.message[:200] + "..."
            if error.validator == "required" and isinstance(error.instance, dict):
                path.append(next(n for n in error.validator_value if n not in error.instance))
                message = "missing"
            problem = f"field {_field(path)}: {message}"
    if problem is not None:
        raise BundleError(f"{where}: {problem}")


def _is_number(value: Any) -> bool:
    """An int or a float, not a bool (finiteness is checked by :func:`_shape_problem`)."""
    return type(value) in (int, float)


def _entry_problem(entry: Mapping[str, Any]) -> str | None:
    """What is wrong with an entry's fields, naming the field; ``None`` when nothing is.

    The rules (what the cache stores and replay reads): exactly the fields ``key``,
    ``request``, ``reply``, ``model``, ``prompt_tokens``, ``completion_tokens``,
    ``latency_s`` and ``sha256``; ``key`` and ``sha256`` 64 lowercase hex digits; ``model``
    a non-empty string; token counts whole numbers from 0 to :data:`MAX_TOKENS`;
    ``latency_s`` a number from 0 to :data:`MAX_LATENCY_S`; ``request`` an object of
    ``kind`` ``chat`` (with a ``messages`` list of objects, and a string or null
    ``structured``) or ``embed`` (with a string ``input``); ``reply`` an object holding, for
    a chat, a string ``text`` (and a string or null ``finish_reason``), for an embedding a
    non-empty list of numbers ``embedding``.

    Written out rather than as a JSON Schema: jsonschema took 250 us an entry, more than the
    rest of reading together.
    """
    names = (*_ENTRY_FIELDS, "sha256")
    for name in names:
        if name not in entry:
            return f"field {name}: missing"
    for name in entry:
        if name not in names:
            return f"field {str(name)[:100]}: not a field of a bundle entry"
    for name in ("key", "sha256"):
        value = entry[name]
        if not isinstance(value, str) or len(value) != 64 or value.strip(_HEX) != "":
            return f"field {name}: {value!r:.80} is not 64 lowercase hex digits"
    if not isinstance(entry["model"], str) or not 0 < len(entry["model"]) <= 1000:
        return f"field model: {entry['model']!r:.80} is not a model name (1-1,000 characters)"
    for name in ("prompt_tokens", "completion_tokens"):
        value = entry[name]
        if type(value) is not int or not 0 <= value <= MAX_TOKENS:
            return f"field {name}: {value!r:.80} is not a whole number from 0 to {MAX_TOKENS:,}"
    value = entry["latency_s"]
    if not _is_number(value) or not 0 <= value <= MAX_LATENCY_S:
        return f"field latency_s: {value!r:.80} is not a number from 0 to {MAX_LATENCY_S:g}"
    request, reply = entry["request"], entry["reply"]
    if not isinstance(request, dict):
        return "field request: not an object"
    if not isinstance(reply, dict):
        return "field reply: not an object"
    kind = request.get("kind")
    if kind == "chat":
        messages = request.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return "field request.messages: not a list of messages (objects)"
        if not isinstance(request.get("structured"), str | None):  # the manifest lists them
            return "field request.structured: not a string or null"
        if not isinstance(reply.get("text"), str):
            return "field reply.text: " + ("missing" if "text" not in reply else "not a string")
        if reply.get("finish_reason") is not None and not isinstance(reply["finish_reason"], str):
            return "field reply.finish_reason: not a string or null"
    elif kind == "embed":
        if not isinstance(request.get("input"), str):
            return "field request.input: not a string"
        vector = reply.get("embedding")
        if not isinstance(vector, list) or not vector:
            return "field reply.embedding: not a non-empty list of numbers"
        for i, value in enumerate(vector):
            if not _is_number(value):
                return f"field reply.embedding[{i}]: {value!r:.50} is not a number"
    else:
        return f"field request.kind: {kind!r:.80} is not 'chat' or 'embed'"
    return None


def _check_entry(entry: Any, where: str) -> None:
    """Raise BundleError naming the field if ``entry`` breaks a rule of :func:`_entry_problem`.

    Non-finite numbers and nesting deeper than :data:`MAX_DEPTH` are refused first.
    """
    problem = _shape_problem(entry) or _entry_problem(entry)
    if problem is not None:
        raise BundleError(f"{where}: {problem}")


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
        try:
            text = path.read_text(encoding="ascii")
        except UnicodeDecodeError:
            raise BundleError(f"key log {path} is not a key log (not ASCII text)") from None
        keys += [line.strip() for line in text.splitlines()]
    return list(dict.fromkeys(k for k in keys if k))


# --------------------------------------------------------------------------- export


def _checked_entries(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], bytes]:
    """The rows as entries and as ``entries.jsonl``, after every check; raises BundleError.

    Each row passes the cache's credential checks again, the entry rules of reading, and
    :func:`find_secrets` on its exact line (the environment is read once per export).
    """
    environ = dict(os.environ)
    entries, lines = [], []
    for row in rows:
        where = f"cache entry {row['key']}"
        try:
            key = request_key(row["request"])  # runs the cache's credential checks again
        except ValueError as error:
            raise BundleError(f"{where}: {error}; nothing was written") from None
        if key != row["key"]:
            raise BundleError(f"{where}: its request hashes to {key}; the cache is corrupt")
        entry = {**{name: row[name] for name in _ENTRY_FIELDS}, "sha256": _digest(row)}
        _check_entry(entry, f"{where} cannot be exported (nothing was written)")
        line = json.dumps(entry, ensure_ascii=False, sort_keys=True)
        _refuse_secrets(line, where, environ)
        entries.append(entry)
        lines.append(line + "\n")
    return entries, "".join(lines).encode("utf-8")


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
    keep_unchanged: bool = False,
) -> dict[str, Any]:
    """Write the replies of a run to one bundle file and return its manifest.

    Which replies: every one in ``cache`` (a run done into its own ``RECAGENTS_CACHE_DIR``),
    or only ``keys`` and the keys listed in ``keylogs`` (files written under
    ``RECAGENTS_KEYLOG`` while the run went, for one notebook of a shared cache).

    Args:
        out_path: The bundle file to write (replaced atomically).
        cache: A :class:`ResponseCache`, its file, or the cache directory holding it.
        keys: Export only these cache keys.
        keylogs: Key-log files whose keys are exported (added to ``keys``).
        notebooks: Names of the notebooks the run executed, for the manifest.
        profile: The run's profile (``smoke``, ``default``, ``paper``), for the manifest.
        endpoint: The endpoint URL the run used; only scheme, host and port are kept.
        keep_unchanged: Leave ``out_path`` as it is when it is a bundle of exactly these
            replies for the same profile and notebooks (only its date would change), so
            that rerunning a published run from its bundle leaves the file untouched.

    Returns:
        The manifest written (or, when kept, the one of the file on disk).

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
    # In key order, whatever order the keys were logged in (make -j runs notebooks side by
    # side), so that the same replies always make the same file.
    entries, data = _checked_entries(sorted(rows, key=lambda row: row["key"]))
    digest = hashlib.sha256(data).hexdigest()
    if keep_unchanged:
        kept = _same_bundle(Path(out_path), digest, profile, list(notebooks))
        if kept is not None:
            return kept
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created_at": _created_at(),
        "recagents_version": _version(),
        "endpoint": endpoint_host(endpoint),
        "profile": profile,
        "notebooks": list(notebooks),
        **_settings_summary(entries),
        "entries": len(entries),
        "entries_sha256": digest,
    }
    manifest_text = json.dumps(manifest, indent=1, ensure_ascii=False)
    _refuse_secrets(manifest_text, "the manifest")
    _write_zip(Path(out_path), {_MANIFEST: manifest_text.encode("utf-8"), _ENTRIES: data})
    return manifest


def _same_bundle(
    path: Path, digest: str, profile: str | None, notebooks: list[str]
) -> dict[str, Any] | None:
    """The manifest of ``path`` if it holds entries with ``digest`` for the same run, else None.

    Only the manifest is read (the digest covers every entry); an unreadable or foreign file
    is simply replaced.
    """
    if not path.is_file():
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            manifest = _read_manifest(archive, path)
    except (BundleError, zipfile.BadZipFile, zlib.error, EOFError, OSError):
        return None
    same = (
        manifest.get("entries_sha256") == digest
        and manifest.get("profile") == profile
        and manifest.get("notebooks") == notebooks
    )
    return manifest if same else None


def _created_at() -> str:
    """Now, or ``SOURCE_DATE_EPOCH`` (the reproducible-builds convention) when it is set.

    With it, exporting the same replies twice writes the same bytes: a committed bundle
    then changes only when its replies do.

    Raises:
        BundleError: ``SOURCE_DATE_EPOCH`` is not a whole number of seconds.
    """
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not epoch:
        return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if not epoch.isdigit() or len(epoch) > 11:
        raise BundleError(f"SOURCE_DATE_EPOCH={epoch!r} must be a whole number of seconds")
    return dt.datetime.fromtimestamp(int(epoch), dt.UTC).isoformat(timespec="seconds")


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


def _member(archive: zipfile.ZipFile, name: str, limit: int, path: Path) -> zipfile.ZipInfo:
    """The zip entry ``name``, refused when missing, encrypted, oddly compressed or too big.

    Only the declared size is checked here; the reader counts the bytes it really gets too.
    """
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise BundleError(f"bundle {path} lacks {name}; it is not a reply bundle") from None
    if info.flag_bits & 0x1:
        raise BundleError(f"bundle {path}: {name} is encrypted; bundles never are")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise BundleError(
            f"bundle {path}: {name} uses zip compression method {info.compress_type}; bundles "
            "are stored or deflated"
        )
    if info.file_size > limit:
        raise BundleError(
            f"bundle {path}: {name} declares {info.file_size:,} bytes, more than the "
            f"{limit:,} this code reads; it is not a bundle this code wrote"
        )
    return info


def _read_manifest(archive: zipfile.ZipFile, path: Path) -> dict[str, Any]:
    """The manifest, read with a size cap and checked against :data:`MANIFEST_SCHEMA`."""
    info = _member(archive, _MANIFEST, MAX_MANIFEST_BYTES, path)
    with archive.open(info) as stream:
        data = stream.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise BundleError(f"bundle {path}: {_MANIFEST} is larger than {MAX_MANIFEST_BYTES:,} bytes")
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError
        raise BundleError(f"bundle {path}: {_MANIFEST} is not JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{path} is not a reply bundle (manifest format is not {FORMAT!r})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise BundleError(
            f"bundle {path} has format_version {manifest.get('format_version')!r}; this code "
            f"reads version {FORMAT_VERSION}. Export it again with this version of recagents"
        )
    _check_shape(manifest, MANIFEST_SCHEMA, f"bundle {path}, {_MANIFEST}")
    return manifest


def _parse_entry(line: bytes, number: int, path: Path) -> dict[str, Any]:
    """One checked entry of ``entries.jsonl``; raises BundleError naming the line and field."""
    where = f"bundle {path}, {_ENTRIES} line {number}"
    try:
        entry = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise BundleError(f"{where} is not UTF-8 text") from None
    except (ValueError, RecursionError) as error:  # JSONDecodeError; an int of 4,300+ digits
        raise BundleError(f"{where} is not a JSON object ({str(error)[:200]})") from None
    if not isinstance(entry, dict):
        raise BundleError(f"{where} is not a JSON object")
    if isinstance(entry.get("key"), str) and len(entry["key"]) == 64:
        where += f" (key {entry['key']})"
    _check_entry(entry, where)
    if _digest(entry) != entry["sha256"]:
        raise BundleError(f"{where}: checksum mismatch; the entry was altered or damaged")
    try:
        key = request_key(entry["request"])
    except ValueError as error:
        raise BundleError(f"{where}: {error}") from None
    if key != entry["key"]:
        raise BundleError(f"{where}: its request hashes to {key}, not to its key")
    return entry


def _read_entries(
    archive: zipfile.ZipFile, path: Path, manifest: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Stream ``entries.jsonl`` line by line, checking each entry as it comes.

    Every line counts against the manifest's ``entries`` (empty lines included, which are
    refused), every byte against :data:`MAX_BUNDLE_BYTES`, each line against
    :data:`MAX_ENTRY_BYTES`: a bundle that decompresses to far more than it says stops at
    once, never after inflating it.
    """
    info = _member(archive, _ENTRIES, MAX_BUNDLE_BYTES, path)
    listed = manifest["entries"]
    digest, total, entries = hashlib.sha256(), 0, []
    seen: dict[str, int] = {}
    with archive.open(info) as stream:
        for number in range(1, MAX_ENTRIES + 2):
            line = stream.readline(MAX_ENTRY_BYTES + 1)
            if not line:
                break
            where = f"bundle {path}, {_ENTRIES} line {number}"
            total += len(line)
            if total > MAX_BUNDLE_BYTES:
                raise BundleError(
                    f"{where}: {_ENTRIES} holds more than MAX_BUNDLE_BYTES={MAX_BUNDLE_BYTES:,} "
                    "bytes decompressed"
                )
            if number > listed:
                raise BundleError(
                    f"{where}: the bundle holds more entries than the {listed} its manifest "
                    "lists; an entry was added"
                )
            if len(line) > MAX_ENTRY_BYTES and not line.endswith(b"\n"):
                raise BundleError(
                    f"{where} is longer than MAX_ENTRY_BYTES={MAX_ENTRY_BYTES:,} bytes"
                )
            if line.isspace():
                raise BundleError(f"{where} is empty; a bundle has one entry per line")
            digest.update(line)
            entry = _parse_entry(line, number, path)
            if entry["key"] in seen:
                raise BundleError(
                    f"{where}: key {entry['key']} is already on line {seen[entry['key']]}"
                )
            seen[entry["key"]] = number
            entries.append(entry)
    if len(entries) != listed:
        raise BundleError(
            f"bundle {path} holds {len(entries)} entries but its manifest lists "
            f"{listed}; an entry was added or removed"
        )
    if digest.hexdigest() != manifest["entries_sha256"]:
        raise BundleError(f"bundle {path}: whole-bundle checksum mismatch ({_ENTRIES} altered)")
    return entries


def _check_summary(
    manifest: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], path: Path
) -> None:
    """Refuse a manifest whose chat models or structured modes differ from its entries'.

    Replay takes the model and the structured-output mode from the manifest; the manifest
    has no checksum of its own, so they are recomputed from the (checked) entries.
    """
    summary = _settings_summary(entries)
    for name in ("chat_models", "structured"):
        if name in manifest and sorted(manifest[name]) != summary[name]:
            raise BundleError(
                f"bundle {path}: manifest field {name} is {manifest[name]} but its entries "
                f"hold {summary[name]}; the manifest was edited"
            )


def read_bundle(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read a bundle and verify it completely: format version, every entry, the whole file.

    Reading streams ``entries.jsonl`` under the limits :data:`MAX_ENTRY_BYTES`,
    :data:`MAX_BUNDLE_BYTES` and :data:`MAX_ENTRIES`, and checks each entry against
    the entry rules before it is trusted (see :func:`_entry_problem`).

    Args:
        path: The bundle file.

    Returns:
        ``(manifest, entries)``.

    Raises:
        BundleError: On any mismatch, naming the bundle and, for an entry, its line, key and
            field.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise BundleError(f"bundle {path} does not exist")
    try:
        with zipfile.ZipFile(path) as archive:
            manifest = _read_manifest(archive, path)
            entries = _read_entries(archive, path, manifest)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
        raise BundleError(f"bundle {path} is not a readable reply bundle ({error})") from None
    _check_summary(manifest, entries, path)
    return manifest, entries


def import_bundle(path: str | Path, cache: ResponseCache | str | Path) -> int:
    """Verify a bundle and store its replies in a cache, all in one transaction.

    Nothing is written unless every check passes; replies the cache holds already are kept.

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
    """A few lines that say what a bundle holds, for ``bundle show`` and ``check``."""
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
