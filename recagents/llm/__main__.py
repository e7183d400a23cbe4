"""Command line of the LLM layer.

``python -m recagents.llm check`` is the first thing a new user runs: it prints the backend,
the model, one round trip (reply, latency, tokens per second), one schema-constrained round
trip, and where the cache lives, and exits non-zero with the reason on one line when the
endpoint cannot be reached.

``python -m recagents.llm serve`` starts the embedded llama.cpp server in the foreground and
prints the variables that point other processes at it, so one server (and its prompt cache)
serves a whole ``make reproduce`` run instead of one per notebook kernel.
"""

from __future__ import annotations

import argparse
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
    print(f"reply:    {reply.text.strip()!r}")
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
    return f"{build}; CPU kernels: {kernels}"


def serve(port: int) -> int:
    """Run the embedded server until interrupted, printing how to use it."""
    from recagents.llm.local import MODEL_ALIAS, LocalServer, default_model_path

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


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m recagents.llm")
    parser.add_argument(
        "command",
        choices=["check", "serve"],
        help="check: one round trip; serve: run the embedded server for other processes",
    )
    parser.add_argument("--port", type=int, default=0, help="serve: port (0 picks a free one)")
    args = parser.parse_args(argv)
    return check() if args.command == "check" else serve(args.port)


if __name__ == "__main__":
    sys.exit(main())
