"""Benchmark: LLMClient.map with concurrency 1 vs 32 against a fixed-latency endpoint.

The endpoint is the scripted OpenAI-compatible *test* server (tests/scripted_server.py),
answering every request with a deterministic echo after a fixed delay; it measures the
client's concurrency, never a model. Each run uses no reply cache, so every request is an
HTTP call. Target: a speedup of at least 25x for 256 requests at 250 ms.

The server runs in its own process and keeps connections alive, like a real endpoint;
``--in-process`` and ``--no-keep-alive`` measure the less realistic set-ups. The client's CPU
time per request (this process, all threads) is printed too: at concurrency 32 the event
loop must finish 32 requests' worth of client work per latency period, so that cost, and
any other load on the machine, is what keeps the speedup below the ideal 32x.

Usage::

    .venv/bin/python bench/llm_concurrency.py [--requests 256] [--latency 0.25]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import multiprocessing
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _server_module() -> Any:
    """Import the scripted test server from tests/ (it is not part of the package).

    Loaded by file path, so that no installed package named ``tests`` can shadow it.
    """
    name = "scripted_server"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "tests" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def run(requests: int, latency: float, concurrency: int, url: str, cache_dir: Path) -> dict:
    """Time one ``map`` of ``requests`` distinct prompts at ``concurrency``; check replies."""
    from recagents.config import settings
    from recagents.llm.client import ChatRequest, LLMClient

    server_module = _server_module()
    config = dataclasses.replace(
        settings(),
        cache_dir=cache_dir,
        llm_base_url=None,
        llm_model=None,
        llm_concurrency=None,
        llm_timeout_s=max(30.0, 20 * latency),
        llm_max_attempts=1,
        llm_structured="auto",
    )
    client = LLMClient(
        base_url=url, model="scripted", api_key="not-needed", config=config, cache=False
    )
    prompts = [f"c{concurrency} request {i}" for i in range(requests)]
    batch = [ChatRequest(messages=[{"role": "user", "content": p}]) for p in prompts]
    client.chat([{"role": "user", "content": "warm-up"}])  # loop thread, HTTP client, imports
    client.reset_usage()
    started, cpu_started = time.perf_counter(), time.process_time()
    results = client.map(batch, concurrency=concurrency, progress=False)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    expected = [server_module.echo_text([{"role": "user", "content": p}]) for p in prompts]
    wrong = sum(r.text != e for r, e in zip(results, expected, strict=True))
    return {
        "concurrency": concurrency,
        "wall_s": wall,
        "cpu_ms_per_request": 1000 * cpu / requests,
        "ok": sum(r.ok for r in results),
        "wrong": wrong,
        "http_calls": client.usage.http_calls,
        "ideal_s": latency * -(-requests // concurrency),
    }


def _serve(conn: Any, latency: float, keep_alive: bool) -> None:
    """Child process: serve echo replies after ``latency`` until told to stop."""
    server_module = _server_module()
    default = server_module.echo(delay_s=latency)
    with server_module.ScriptedServer(default=default, keep_alive=keep_alive) as server:
        conn.send(server.url)
        while (command := conn.recv()) != "stop":
            assert command == "stats", command
            conn.send({"count": server.count(), "max_in_flight": server.max_in_flight})
            server.clear()


@contextmanager
def scripted_endpoint(latency: float, keep_alive: bool, in_process: bool) -> Iterator[Any]:
    """Yield ``(url, stats)``: a scripted echo server and a function returning its counters.

    By default the server runs in its own process, as a real endpoint would, so that its
    threads do not compete with the client for this interpreter's GIL.
    """
    if in_process:
        server_module = _server_module()
        default = server_module.echo(delay_s=latency)
        with server_module.ScriptedServer(default=default, keep_alive=keep_alive) as server:

            def stats() -> dict[str, int]:
                out = {"count": server.count(), "max_in_flight": server.max_in_flight}
                server.clear()
                return out

            yield server.url, stats
        return
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_serve, args=(child, latency, keep_alive), daemon=True)
    process.start()
    try:
        if not parent.poll(60):
            raise RuntimeError("the scripted server process did not start")
        url = parent.recv()

        def stats() -> dict[str, int]:
            parent.send("stats")
            return parent.recv()

        yield url, stats
    finally:
        if process.is_alive():
            parent.send("stop")
            process.join(10)
        if process.is_alive():
            process.terminate()
            process.join(5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=256, help="requests per run")
    parser.add_argument("--latency", type=float, default=0.25, help="server delay, seconds")
    parser.add_argument(
        "--concurrency", type=int, nargs=2, default=(1, 32), metavar=("LOW", "HIGH")
    )
    parser.add_argument("--target", type=float, default=25.0, help="speedup to reach")
    parser.add_argument(
        "--no-keep-alive",
        dest="keep_alive",
        action="store_false",
        help="close the connection after every reply (the test suite's server mode)",
    )
    parser.add_argument(
        "--in-process", action="store_true", help="run the server in this process (shares the GIL)"
    )
    args = parser.parse_args(argv)

    rows = []
    with (
        scripted_endpoint(args.latency, args.keep_alive, args.in_process) as (url, stats),
        tempfile.TemporaryDirectory() as tmp,
    ):
        for concurrency in args.concurrency:
            row = run(args.requests, args.latency, concurrency, url, Path(tmp))
            served = stats()
            row["server_calls"] = served["count"] - 1  # less the warm-up call
            row["server_max_in_flight"] = served["max_in_flight"]
            rows.append(row)

    where = "in this process" if args.in_process else "in its own process"
    print(
        f"{args.requests} requests, {args.latency * 1000:.0f} ms scripted latency, no cache, "
        f"server {where}, keep-alive {'on' if args.keep_alive else 'off'}"
    )
    print(
        f"{'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'ok':>5} {'wrong':>5} "
        f"{'HTTP calls':>10} {'max in flight':>13} {'client CPU ms/req':>17}"
    )
    for r in rows:
        print(
            f"{r['concurrency']:>11} {r['wall_s']:>8.2f} {r['ideal_s']:>8.2f} {r['ok']:>5} "
            f"{r['wrong']:>5} {r['server_calls']:>10} {r['server_max_in_flight']:>13} "
            f"{r['cpu_ms_per_request']:>17.2f}"
        )
    speedup = rows[0]["wall_s"] / rows[1]["wall_s"]
    ideal = rows[0]["ideal_s"] / rows[1]["ideal_s"]
    verdict = "PASS" if speedup >= args.target else "FAIL"
    print(f"speedup {speedup:.1f}x (ideal {ideal:.1f}x, target >= {args.target:g}x): {verdict}")
    all_ok = all(r["ok"] == args.requests and r["wrong"] == 0 for r in rows)
    return 0 if all_ok and speedup >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
