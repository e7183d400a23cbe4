"""Tests of recagents.llm.bundle: export a run's replies, import them, replay with no endpoint.

A "run" here is a small batch against the scripted test server (tests/scripted_server.py):
plain chats whose reply echoes the prompt, one structured reply, and one structured reply
that needs a re-ask. Replay must give the same results with zero requests to the server.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai  # noqa: F401  (imported up front so no test pays for the first import)
import pytest
from scripted_server import ScriptedServer, reply

from recagents.config import settings
from recagents.llm import __main__ as cli
from recagents.llm import local
from recagents.llm.bundle import (
    FORMAT_VERSION,
    BundleError,
    ReplayMissError,
    endpoint_host,
    export_bundle,
    import_bundle,
    read_bundle,
)
from recagents.llm.cache import ResponseCache, request_key
from recagents.llm.client import ChatRequest, LLMClient

SENTINEL = "sk-SENTINEL-h6-5b1e9d2c7a40"
SCHEMA = {
    "type": "object",
    "properties": {"choice": {"type": "integer", "enum": [1, 2]}},
    "required": ["choice"],
}


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _client(cache_dir: Path, *, base_url: str | None, **kwargs: Any) -> LLMClient:
    """A fast client whose cache is ``cache_dir/llm-cache.sqlite``."""
    config = dataclasses.replace(
        settings(),
        cache_dir=cache_dir,
        llm_base_url=None,
        llm_model=None,
        llm_concurrency=4,
        llm_max_attempts=2,
        llm_max_reasks=1,
        llm_timeout_s=2.0,
        llm_structured="auto",
    )
    return LLMClient(
        base_url=base_url,
        config=config,
        cache=ResponseCache(config.llm_cache_path),
        backoff_base_s=0.01,
        backoff_max_s=0.02,
        **kwargs,
    )


RUN = [ChatRequest(_user(f"rank the films for user {u}"), tag=f"user-{u}") for u in range(5)]


def _run(client: LLMClient) -> list[tuple[Any, ...]]:
    """The run: a batch of plain chats, one structured reply, one that needs a re-ask."""
    results = client.map(RUN, progress=False, desc="rank")
    results.append(client.chat_json(_user("pick one"), SCHEMA))
    results.append(client.chat_json(_user("pick again"), SCHEMA))
    return [
        (r.ok, r.text, r.data, r.reasks, r.failure, r.prompt_tokens, r.completion_tokens, r.tag)
        for r in results
    ]


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """A run recorded into its own cache directory, with a scripted server still listening."""
    monkeypatch.delenv("RECAGENTS_REPLAY", raising=False)
    with ScriptedServer() as server:
        client = _client(tmp_path / "run", base_url=server.url, model="scripted", api_key=SENTINEL)
        # chat_json calls go one at a time, so the scripted replies meet them in order.
        original = client.map(RUN, progress=False, desc="rank")
        server.script(reply('{"choice": 1}'), reply("not json"), reply('{"choice": 2}'))
        rest = [client.chat_json(_user("pick one"), SCHEMA)]
        rest.append(client.chat_json(_user("pick again"), SCHEMA))
        assert all(r.ok for r in original + rest) and rest[1].reasks == 1
        client.cache.close()
        server.clear()
        yield {"server": server, "cache_dir": tmp_path / "run", "results": original + rest}


def _fingerprint(results: Any) -> list[tuple[Any, ...]]:
    return [
        (r.ok, r.text, r.data, r.reasks, r.failure, r.prompt_tokens, r.completion_tokens, r.tag)
        for r in results
    ]


def _replay_client(tmp_path: Path, bundle: Path, server: ScriptedServer) -> LLMClient:
    """A client in replay-only mode over an empty cache; its URL is the live scripted server."""
    return _client(tmp_path / "class", base_url=server.url, replay=bundle)


def _rewrite(bundle: Path, out: Path, edit: Any) -> Path:
    """Copy a bundle with ``edit(manifest, lines)`` applied (checksums are not fixed up)."""
    with zipfile.ZipFile(bundle) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        lines = archive.read("entries.jsonl").decode().splitlines()
    edit(manifest, lines)
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("manifest.json", json.dumps(manifest))
        archive.writestr("entries.jsonl", "".join(line + "\n" for line in lines))
    return out


# --------------------------------------------------------------------------- export and replay


def test_exported_run_replays_with_zero_calls_and_same_results(
    recorded: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = tmp_path / "class.bundle"
    manifest = export_bundle(bundle, cache=recorded["cache_dir"], profile="smoke")
    assert manifest["entries"] == 8  # 5 plain, 1 structured, 1 invalid + its re-ask
    assert manifest["chat_models"] == ["scripted"] and manifest["structured"] == ["json_schema"]

    def no_local_server() -> None:
        raise AssertionError("replay-only mode started the local server")

    monkeypatch.setattr(local, "get_local_server", no_local_server)
    monkeypatch.setenv("RECAGENTS_REPLAY", str(bundle))
    # From the environment alone: model and structured mode come from the manifest.
    client = _client(tmp_path / "class", base_url=None)
    assert client.model == "scripted" and client.structured_mode == "json_schema"
    assert client.local is False and client.backend == f"replay {bundle.resolve()}"
    replayed = _run(client)
    assert replayed == _fingerprint(recorded["results"])
    assert recorded["server"].count() == 0
    assert client.usage.http_calls == 0 and client.usage.cache_hits == client.usage.requests == 7
    with pytest.raises(RuntimeError, match="never contacts an endpoint"):
        client.base_url()


def test_a_missing_reply_stops_the_batch_naming_the_request(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    with ResponseCache(recorded["cache_dir"] / "llm-cache.sqlite") as cache:
        entries = cache.entries()
    keys = [e["key"] for e in entries]
    (dropped,) = [e["key"] for e in entries if e["request"]["messages"] == RUN[3].messages]
    bundle = tmp_path / "partial.bundle"
    export_bundle(bundle, cache=recorded["cache_dir"], keys=[k for k in keys if k != dropped])

    replay = _replay_client(tmp_path, bundle, recorded["server"])
    with pytest.raises(ReplayMissError) as raised:
        replay.map(RUN, progress=False, desc="rank")
    message = str(raised.value)
    assert dropped in message and "tag 'user-3'" in message and "batch 'rank'" in message
    assert "'rank the films for user 3'" in message and str(bundle.resolve()) in message
    assert "'scripted'" in message and "chat request" in message
    assert recorded["server"].count() == 0 and replay.usage.http_calls == 0


def test_a_missing_reask_stops_with_its_request(recorded: dict[str, Any], tmp_path: Path) -> None:
    with ResponseCache(recorded["cache_dir"] / "llm-cache.sqlite") as cache:
        reask = [
            e["key"] for e in cache.entries() if len(e["request"]["messages"]) == 3
        ]  # the re-ask: question, bad answer, correction
    assert len(reask) == 1
    with ResponseCache(recorded["cache_dir"] / "llm-cache.sqlite") as cache:
        keep = [k for k in cache if k != reask[0]]
    bundle = tmp_path / "no-reask.bundle"
    export_bundle(bundle, cache=recorded["cache_dir"], keys=keep)
    replay = _replay_client(tmp_path, bundle, recorded["server"])
    with pytest.raises(ReplayMissError, match=reask[0]) as raised:
        replay.chat_json(_user("pick again"), SCHEMA)
    assert "That reply could not be used" in str(raised.value)  # the re-ask's last message
    assert recorded["server"].count() == 0


# --------------------------------------------------------------------------- checks


def test_a_tampered_entry_fails_its_checksum_and_nothing_is_written(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    bundle = tmp_path / "ok.bundle"
    export_bundle(bundle, cache=recorded["cache_dir"])

    def tamper(manifest: dict[str, Any], lines: list[str]) -> None:
        entry = json.loads(lines[2])
        entry["reply"]["text"] = "a different answer"
        lines[2] = json.dumps(entry)

    bad = _rewrite(bundle, tmp_path / "bad.bundle", tamper)
    target = tmp_path / "target"
    with pytest.raises(BundleError, match=r"line 3 \(key [0-9a-f]{64}\): checksum mismatch"):
        import_bundle(bad, target)
    with ResponseCache(target / "llm-cache.sqlite") as cache:
        assert len(cache) == 0


def test_whole_bundle_checksum_count_and_version_are_checked(
    recorded: dict[str, Any], tmp_path: Path
) -> None:
    bundle = tmp_path / "ok.bundle"
    export_bundle(bundle, cache=recorded["cache_dir"])

    def drop_line(manifest: dict[str, Any], lines: list[str]) -> None:
        del lines[0]

    def swap_lines(manifest: dict[str, Any], lines: list[str]) -> None:
        lines[0], lines[1] = lines[1], lines[0]

    def newer(manifest: dict[str, Any], lines: list[str]) -> None:
        manifest["format_version"] = FORMAT_VERSION + 1

    with pytest.raises(BundleError, match="7 entries but its manifest lists 8"):
        read_bundle(_rewrite(bundle, tmp_path / "a.bundle", drop_line))
    with pytest.raises(BundleError, match="whole-bundle checksum mismatch"):
        read_bundle(_rewrite(bundle, tmp_path / "b.bundle", swap_lines))
    with pytest.raises(BundleError, match=f"format_version {FORMAT_VERSION + 1}"):
        read_bundle(_rewrite(bundle, tmp_path / "c.bundle", newer))
    (tmp_path / "junk.bundle").write_bytes(b"not a zip")
    with pytest.raises(BundleError, match="not a readable reply bundle"):
        read_bundle(tmp_path / "junk.bundle")


def test_import_fills_a_cache_once(recorded: dict[str, Any], tmp_path: Path) -> None:
    bundle = tmp_path / "ok.bundle"
    export_bundle(bundle, cache=recorded["cache_dir"])
    assert import_bundle(bundle, tmp_path / "target") == 8
    assert import_bundle(bundle, tmp_path / "target") == 0
    with (
        ResponseCache(tmp_path / "target" / "llm-cache.sqlite") as copy,
        ResponseCache(recorded["cache_dir"] / "llm-cache.sqlite") as source,
    ):
        assert list(copy) == list(source)
        assert [e["reply"] for e in copy.entries()] == [e["reply"] for e in source.entries()]


# --------------------------------------------------------------------------- credentials


def _cache_with(tmp_path: Path, content: str) -> Path:
    """A cache holding one reply whose request carries ``content`` (stored with no key set)."""
    folder = tmp_path / "leaky"
    _store_one(folder, content)
    return folder


def _store_one(folder: Path, content: str) -> None:
    """Add one "ok" reply to the cache in ``folder``, for a request that carries ``content``."""
    request = {"kind": "chat", "model": "m", "messages": _user(content), "sample": 0}
    with ResponseCache(folder / "llm-cache.sqlite") as cache:
        cache.put(
            request_key(request),
            request,
            {"text": "ok"},
            model="m",
            prompt_tokens=1,
            completion_tokens=1,
            latency_s=0.1,
        )


def test_export_refuses_a_request_holding_the_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    folder = _cache_with(tmp_path, "my key is Zq81-plain-secret-value-77")
    monkeypatch.setenv("OPENAI_API_KEY", "Zq81-plain-secret-value-77")
    out = tmp_path / "leak.bundle"
    with pytest.raises(BundleError, match="OPENAI_API_KEY") as raised:
        export_bundle(out, cache=folder)
    assert "Zq81" not in str(raised.value) and not out.exists()


def test_export_refuses_key_shaped_strings_and_credential_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    folder = _cache_with(tmp_path, f"use {SENTINEL}")
    with pytest.raises(BundleError, match="shaped like an API key"):
        export_bundle(tmp_path / "a.bundle", cache=folder)
    # A row written around the cache's own checks, with a credential field.
    request = {"kind": "chat", "model": "m", "api_key": "x", "messages": []}
    text = json.dumps(request, sort_keys=True, separators=(",", ":"))
    with sqlite3.connect(folder / "llm-cache.sqlite") as conn:
        conn.execute("DELETE FROM replies")
        conn.execute(
            "INSERT INTO replies VALUES (?, ?, ?, 'm', 1, 1, 0.1, 0)", ("k" * 64, text, "{}")
        )
    with pytest.raises(BundleError, match="credential-like key 'api_key'"):
        export_bundle(tmp_path / "b.bundle", cache=folder)
    assert not (tmp_path / "a.bundle").exists() and not (tmp_path / "b.bundle").exists()


def test_bundle_bytes_hold_no_credentials(
    recorded: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    monkeypatch.setenv("RECAGENTS_LLM_API_KEY", SENTINEL)
    bundle = tmp_path / "class.bundle"
    url = f"https://user:{SENTINEL}@api.example.com:8443/v1?key={SENTINEL}"
    manifest = export_bundle(bundle, cache=recorded["cache_dir"], endpoint=url)
    assert manifest["endpoint"] == "https://api.example.com:8443"
    with zipfile.ZipFile(bundle) as archive:
        members = b"".join(archive.read(name) for name in archive.namelist())
    for blob in (members, bundle.read_bytes()):
        assert SENTINEL.encode() not in blob and b"SENTINEL" not in blob
    # The run itself sent the key to the server: it reached the wire, never the bundle.
    assert endpoint_host(None) == "local"


# --------------------------------------------------------------------------- key logs and CLI


def test_key_log_exports_one_run_from_a_shared_cache(tmp_path: Path) -> None:
    with ScriptedServer() as server:
        first_log, second_log = tmp_path / "first.keys", tmp_path / "second.keys"
        client = _client(tmp_path / "shared", base_url=server.url, model="scripted")
        client.cache.keylog = first_log
        client.map(RUN[:3], progress=False)
        client.map(RUN[:3], progress=False)  # served from the cache: logged again
        client.cache.keylog = second_log
        client.map(RUN[3:], progress=False)
        client.cache.close()
    first = sorted(set(first_log.read_text().split()))
    assert len(first) == 3 and len(first_log.read_text().split()) == 6
    manifest = export_bundle(
        tmp_path / "first.bundle", cache=tmp_path / "shared", keylogs=[first_log]
    )
    _manifest, entries = read_bundle(tmp_path / "first.bundle")
    assert manifest["entries"] == 3 and sorted(e["key"] for e in entries) == first
    with pytest.raises(BundleError, match="not in the cache"):
        export_bundle(tmp_path / "x.bundle", cache=tmp_path / "shared", keys=["0" * 64])


def test_cli_export_show_verify_import_and_check(
    recorded: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bundle = str(tmp_path / "class.bundle")
    cache = str(recorded["cache_dir"])
    argv = ["bundle", "export", "--cache", cache, "--out", bundle, "--profile", "paper"]
    assert cli.main([*argv, "--notebook", "02_agent4rec"]) == 0
    assert cli.main(["bundle", "show", bundle]) == 0
    shown = capsys.readouterr().out
    assert "profile:   paper; notebooks: ['02_agent4rec']" in shown and "entries:   8" in shown
    assert cli.main(["bundle", "verify", bundle]) == 0
    assert cli.main(["bundle", "import", bundle, "--cache", str(tmp_path / "c")]) == 0
    assert "8 new replies" in capsys.readouterr().out
    Path(bundle).write_bytes(Path(bundle).read_bytes()[:-40])
    assert cli.main(["bundle", "verify", bundle]) == 1
    assert capsys.readouterr().err.startswith("error: ")

    good = tmp_path / "good.bundle"
    export_bundle(good, cache=recorded["cache_dir"])
    monkeypatch.setenv("RECAGENTS_CACHE_DIR", str(tmp_path / "student"))
    monkeypatch.setenv("RECAGENTS_REPLAY", str(good))
    for name in ("RECAGENTS_LLM_BASE_URL", "RECAGENTS_LLM_MODEL", "RECAGENTS_LLM_STRUCTURED"):
        monkeypatch.delenv(name, raising=False)
    assert cli.main(["check"]) == 0
    out = capsys.readouterr().out
    assert "replay-only" in out and "model:    scripted (json_schema)" in out
    assert recorded["server"].count() == 0


def test_an_agent_loop_replays_to_the_same_records(tmp_path: Path) -> None:
    """AFL's feedback loop, recorded then replayed: same rounds, same call log, no calls."""
    from recagents.llm.runlog import RunLog
    from recagents.papers.afl.config import AFLConfig
    from recagents.papers.afl.loop import feedback_loop
    from recagents.papers.afl.samples import Sample

    candidates = [tuple(f"u{k}-c{j}" for j in range(4)) for k in range(3)]
    samples = [
        Sample(
            user=f"u{k}",
            history=(f"u{k}-h0",),
            candidates=c,
            target=c[2],
            prior=c[3],
            focus=c[3:],
            scores={item: float(j) for j, item in enumerate(c)},
        )
        for k, c in enumerate(candidates)
    ]
    titles = {i: f"Title of {i}" for s in samples for i in (*s.candidates, *s.history)}
    config = AFLConfig(n_candidates=4, max_rounds=2)
    answer = json.dumps({"reason": "r", "choice": 1, "decision": "no"})  # both agents' schema

    def run(client: LLMClient) -> tuple[Any, Any]:
        log = RunLog()
        rounds = feedback_loop(samples, titles, config, client, log, phase="loop")
        return rounds, log.calls_frame()

    with ScriptedServer(default=reply(answer)) as server:
        recorded = _client(tmp_path / "run", base_url=server.url, model="scripted")
        rounds, calls = run(recorded)
        recorded.cache.close()
        bundle = tmp_path / "afl.bundle"
        export_bundle(bundle, cache=tmp_path / "run", profile="smoke")
        server.clear()
        replayed_rounds, replayed_calls = run(_replay_client(tmp_path, bundle, server))
        assert server.count() == 0
    assert len(rounds) == len(samples) * config.max_rounds
    assert replayed_rounds.equals(rounds)
    assert not calls["cached"].any() and replayed_calls["cached"].all()
    same = [c for c in calls.columns if c != "cached"]
    assert replayed_calls[same].equals(calls[same])


def test_keep_unchanged_leaves_a_bundle_of_the_same_replies_untouched(
    recorded: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "default.bundle"
    argv = ["bundle", "export", "--cache", str(recorded["cache_dir"]), "--out", str(bundle)]
    argv += ["--profile", "default", "--notebook", "02_agent4rec", "--keep-unchanged"]
    assert cli.main(argv) == 0 and "wrote" in capsys.readouterr().out
    first = bundle.read_bytes()
    os.utime(bundle, ns=(1, 1))
    assert cli.main(argv) == 0 and "kept" in capsys.readouterr().out
    assert bundle.read_bytes() == first and bundle.stat().st_mtime_ns == 1
    # another profile, or one reply more, is a different published run: rewritten
    assert cli.main([*argv[:-4], "smoke", *argv[-3:]]) == 0
    assert "wrote" in capsys.readouterr().out
    _store_one(recorded["cache_dir"], "one more")
    assert cli.main([*argv[:-4], "smoke", *argv[-3:]]) == 0
    assert "wrote" in capsys.readouterr().out
    assert read_bundle(bundle)[0]["entries"] == 9


def test_llm_cache_setting_moves_the_reply_cache_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECAGENTS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RECAGENTS_LLM_CACHE", raising=False)
    assert settings().llm_cache_path == tmp_path / "cache" / "llm-cache.sqlite"
    monkeypatch.setenv("RECAGENTS_LLM_CACHE", str(tmp_path / "fresh.sqlite"))
    config = settings()
    assert config.llm_cache_path == tmp_path / "fresh.sqlite"
    assert config.cache_dir == tmp_path / "cache"
