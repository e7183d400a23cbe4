"""Command line of the LLM layer.

``python -m recagents.llm check`` is the first thing a new user runs: it prints the backend,
the model, one round trip (reply, latency, tokens per second), one schema-constrained round
trip, and where the cache lives, and exits non-zero with the reason on one line when the
endpoint cannot be reached.

``python -m recagents.llm serve`` starts the embedded llama.cpp server in the foreground and
prints the variables that point other processes at it, so one server (and its prompt cache)
serves a whole ``make reproduce`` run instead of one per notebook kernel.

``python -m recagents.llm bundle export|import|show|verify`` writes the replies of a run to
one portable file, fills a cache from one, and shows or checks one (see
:mod:`recagents.llm.bundle`); ``RECAGENTS_REPLAY=FILE`` then replays it with no endpoint.
``bundle verify FILE --regenerate N`` also re-asks N of its requests cold and counts the
replies that come back byte-identical (:mod:`recagents.llm.regenerate`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from recagents.config import settings
from recagents.llm.client import ChatRequest, EndpointUnreachableError, LLMClient

CHECK_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["answer"],
}


def check() -> int:
    """Run the round trips and print a short report; return the exit status."""
    config = settings()
    if os.environ.get("RECAGENTS_REPLAY"):
        return check_replay()
    client = LLMClient(cache=False)
    print(f"backend:  {client.backend}")
    print(f"model:    {client.model}")
    print(f"key:      {'set (hidden)' if config.api_key else 'not set'}")
    print(f"cache:    {config.llm_cache_path}")
    started = time.perf_counter()
    try:
        url = client.base_url()
    except Exception as error:  # noqa: BLE001 - report any start-up failure on one line
        print(f"error:    the endpoint could not be started: {error}")
        return 1
    if client.local:
        print(f"server:   {url} (started in {time.perf_counter() - started:.1f} s)")
        print(f"runtime:  {runtime_summary()}")
    messages = [
        {"role": "system", "content": "You are a helpful assistant. Answer briefly."},
        {"role": "user", "content": "Name one famous movie from the 1990s."},
    ]
    try:
        reply = client.chat(messages, max_tokens=40)
    except EndpointUnreachableError as error:
        print(f"error:    {error}")
        return 1
    if not reply.ok:
        print(f"error:    {reply.error}")
        return 1
    rate = reply.completion_tokens / reply.latency_s if reply.latency_s else 0.0
    print(f"reply:    {(reply.text or '').strip()!r}")
    print(
        f"latency:  {reply.latency_s:.2f} s for {reply.prompt_tokens} prompt + "
        f"{reply.completion_tokens} completion tokens ({rate:.0f} tokens/s overall)"
    )
    question = [{"role": "user", "content": "Is Toy Story an animated movie? Reply in JSON."}]
    result = client.map([ChatRequest(question, schema=CHECK_SCHEMA, max_tokens=30)], progress=False)
    structured = result[0]
    status = f"ok {structured.data}" if structured.ok else f"FAILED ({structured.error})"
    print(f"json:     {status} via {client.structured_mode}")
    return 0 if structured.ok else 1


def check_replay() -> int:
    """In replay-only mode: verify and import the bundle, and say that no endpoint is used."""
    from recagents.llm.bundle import BundleError, describe_bundle

    try:
        client = LLMClient()
    except BundleError as error:
        print(f"error:    {error}")
        return 1
    print(f"backend:  {client.backend} (replay-only: no endpoint, no key, no local server)")
    print(f"model:    {client.model} ({client.structured_mode})")
    print(f"cache:    {settings().llm_cache_path}")
    print(describe_bundle(client.replay.manifest))
    return 0


def bundle(args: argparse.Namespace) -> int:
    """Run ``bundle export|import|show|verify``; errors are one line on stderr, status 1.

    Errors: a bundle that fails a check (:class:`~recagents.llm.bundle.BundleError`), a cache
    that cannot be used (:class:`~recagents.llm.cache.CacheError`), a setting or client that
    cannot re-ask the bundle's requests (``ValueError``) or a file that cannot be read or
    written (``OSError``); never a traceback. ``verify --regenerate N`` exits 1 also when a
    re-asked reply differs from the recorded one or got none.
    """
    from recagents.llm import bundle as bundles
    from recagents.llm.cache import CacheError

    try:
        if args.action == "export":
            before = _mtime(args.out)
            manifest = bundles.export_bundle(
                args.out,
                cache=args.cache or settings().llm_cache_path,
                keylogs=args.keys,
                notebooks=args.notebook,
                profile=args.profile,
                endpoint=args.endpoint or settings().llm_base_url,
                keep_unchanged=args.keep_unchanged,
            )
            if before is not None and before == _mtime(args.out):
                print(f"kept {args.out}: its {manifest['entries']} replies are unchanged")
            else:
                print(f"wrote {args.out}: {manifest['entries']} replies")
        elif args.action == "import":
            new = bundles.import_bundle(args.bundle, args.cache or settings().llm_cache_path)
            print(f"imported {args.bundle}: {new} new replies")
        else:
            manifest, _entries = bundles.read_bundle(args.bundle)
            if args.action == "show":
                print(bundles.describe_bundle(manifest))
            else:
                print(
                    f"ok: {args.bundle}: {manifest['entries']} replies, every entry valid and "
                    "every checksum matches"
                )
                if args.regenerate > 0:
                    return _regenerate(_entries, args.regenerate, args.seed)
    except (bundles.BundleError, CacheError, ValueError, OSError) as error:
        message = " ".join(str(error).split())  # one line, whatever the error holds
        print(f"error: {message}", file=sys.stderr)
        return 1
    return 0


def _mtime(path: str) -> int | None:
    """The modification time of ``path`` in nanoseconds, or None if there is no such file."""
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _regenerate(entries: list[dict], n: int, seed: int) -> int:
    """Re-ask ``n`` sampled chat requests cold; print the count; 0 only if all repeat exactly."""
    from recagents.llm.client import get_client
    from recagents.llm.regenerate import regenerate, sample_chat_entries

    sample = sample_chat_entries(entries, n, seed)
    client = get_client()
    print(f"re-asking {len(sample)} chat requests (seed {seed}) uncached: {client.backend}")
    report = regenerate(sample, client, progress=True)
    print(report.summary())
    for key, index in report.differing[:5]:
        print(f"  differs: {key} from character {index}")
    for key in report.failed[:5]:
        print(f"  no reply: {key}")
    return 0 if report.identical == report.asked else 1


def runtime_summary() -> str:
    """Which llama-cpp-python build serves the embedded model, and the CPU kernels it uses."""
    from recagents.llm import runtime_build

    record = runtime_build.recorded_build()
    version = runtime_build.installed_version()
    if record is None:
        build = f"llama-cpp-python {version}, not the project's portable build"
    else:
        build = f"llama-cpp-python {record.get('version')}, portable build {record.get('key')}"
    try:
        import llama_cpp

        info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
        features = [part.strip() for part in info.split("|") if part.strip().endswith("= 1")]
        kernels = ", ".join(f.removesuffix(" = 1").split(":")[-1].strip() for f in features)
    except Exception as error:  # noqa: BLE001 - informational only
        kernels = f"unknown ({type(error).__name__})"
    from recagents.llm.local import fallback_notice, local_runtime, local_slots

    server = f"server: {local_runtime()}"
    if local_runtime() == "llama-server":
        server += f" ({local_slots()} slots, {record.get('server') if record else 'not built'})"
    elif notice := fallback_notice():
        server += f" ({notice})"
    return f"{build}; CPU kernels: {kernels}; {server}"


def serve(port: int) -> int:
    """Run the embedded server until interrupted, printing how to use it."""
    from recagents.llm.local import MODEL_ALIAS, LocalServer, default_model_path

    # Ctrl-C and SIGTERM stop the server even where this process was started with SIGINT
    # ignored (a background job of a non-interactive shell), which disables Python's handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    server = LocalServer(model_path=default_model_path(), port=port).start()
    print(f"export RECAGENTS_LLM_BASE_URL={server.base_url}")
    print(f"export RECAGENTS_LLM_MODEL={MODEL_ALIAS}")
    print("export RECAGENTS_LLM_STRUCTURED=json_object")
    print("# serving; Ctrl-C stops the server", flush=True)
    try:
        while server.pid is not None:
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def _parser() -> argparse.ArgumentParser:
    """The command line: ``check``, ``serve`` and ``bundle export|import|show|verify``."""
    parser = argparse.ArgumentParser(prog="python -m recagents.llm")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check", help="one round trip (in replay mode: check the bundle)")
    serve_parser = commands.add_parser("serve", help="run the embedded server for others")
    serve_parser.add_argument("--port", type=int, default=0, help="port (0 picks a free one)")
    bundle = commands.add_parser("bundle", help="export, import, show or verify a reply bundle")
    actions = bundle.add_subparsers(dest="action", required=True)
    export = actions.add_parser("export", help="write a run's replies to one bundle file")
    export.add_argument("--out", required=True, help="the bundle file to write")
    export.add_argument("--cache", help="cache directory or file (default: RECAGENTS_CACHE_DIR)")
    export.add_argument(
        "--keys", action="append", default=[], help="only the keys of this RECAGENTS_KEYLOG file"
    )
    export.add_argument("--notebook", action="append", default=[], help="notebook run (record)")
    export.add_argument("--profile", help="profile of the run, e.g. paper (recorded)")
    export.add_argument("--endpoint", help="endpoint URL used (only its host is recorded)")
    export.add_argument(
        "--keep-unchanged",
        action="store_true",
        help="leave --out as it is if it already holds exactly these replies (same profile "
        "and notebooks): a rerun from a committed bundle leaves it untouched",
    )
    load = actions.add_parser("import", help="verify a bundle and add its replies to a cache")
    load.add_argument("bundle")
    load.add_argument("--cache", help="cache directory or file (default: RECAGENTS_CACHE_DIR)")
    actions.add_parser("show", help="show a bundle").add_argument("bundle")
    verify = actions.add_parser("verify", help="verify a bundle (and re-ask some of it cold)")
    verify.add_argument("bundle")
    verify.add_argument(
        "--regenerate",
        type=int,
        default=0,
        metavar="N",
        help="re-ask N of its chat requests (a seeded sample) uncached from the configured "
        "model and count the byte-identical replies; exit 1 unless all are",
    )
    verify.add_argument("--seed", type=int, default=0, help="seed of the --regenerate sample")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    args = _parser().parse_args(argv)
    if args.command == "bundle":
        return bundle(args)
    return check() if args.command == "check" else serve(args.port)


if __name__ == "__main__":
    sys.exit(main())
