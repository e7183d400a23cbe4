"""Serving the embedded model: each paper's calls on llama-cpp-python's server, llama-server, raw.

What it measures, in one run on one machine with the same GGUF and the same threads:

1. **Capture.** Each paper of the registry runs its pipeline (``run``, the steps its notebook
   runs) at the smoke profile's sizes against the embedded model, with a reply cache of the
   bench's own (so a rerun of the bench skips this), and every batch it sends (each
   ``LLMClient.map``) is recorded.
2. **The fixed workload, served three ways.** The captured batches are sent again, uncached,
   batch by batch as the paper sent them, to: the raw model in this process
   (``llama_cpp.Llama``, one request at a time, its KV prefix reused between requests: the
   single-stream ideal); llama-cpp-python's server (one slot, one request in flight, prefix
   order: the embedded default); llama-server with ``--slots`` slots (that many in flight).
   For each: the wall time of the calls and the ratio
   ``wall / (prompt_tokens / 200 + completion_tokens / 90)``, the raw speeds (tokens/s) of this
   model on two idle cores that issue 21 of the project states.
3. **Concurrency.** The generation-heavy calls (the captured requests allowed the most
   completion tokens) sent at 1, 4 and 8 requests in flight to llama-server (8 slots) and to
   llama-cpp-python's server: generated tokens per second and the gain over 1.

    .venv/bin/python bench/llm_serving.py                 # every paper, smoke-profile sizes
    .venv/bin/python bench/llm_serving.py --papers AFL AgentCF --users 4 --threads 2

Needs the llama-server build (``python recagents/llm/runtime_build.py install``). Greedy
decoding in a batch is not bit-identical to decoding alone, so replies (and so completion
tokens) may differ a little between the three; the table shows each one's own counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from recagents.config import settings
from recagents.data import load_dataset
from recagents.llm.cache import ResponseCache
from recagents.llm.client import ChatRequest, LLMClient
from recagents.llm.local import MODEL_ALIAS, LocalServer, default_model_path
from recagents.llm.wire import response_format
from recagents.papers import registry
from recagents.protocol import Paper, RunOptions

PROMPT_TPS, GENERATION_TPS = 200.0, 90.0
PAPERS = registry()


class CapturingClient(LLMClient):
    """An ``LLMClient`` that records every batch it is asked to run (requests only)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list[list[ChatRequest]] = []

    def map(self, requests: Sequence[ChatRequest], *args: Any, **kwargs: Any) -> list[Any]:
        requests = list(requests)
        self.batches.append(requests)
        return super().map(requests, *args, **kwargs)


def capture(paper: Paper, users: int | None, cache_dir: Path) -> list[list[ChatRequest]]:
    """The batches ``paper.run`` sends at the smoke profile (replies cached here).

    ``users`` overrides the profile's number of users (``None``: the profile's).
    """
    config = dataclasses.replace(
        settings(), cache_dir=cache_dir, llm_base_url=None, llm_model=None, llm_structured="auto"
    )
    cache = ResponseCache(cache_dir / f"{paper.NOTEBOOK}.sqlite")
    client = CapturingClient(config=config, cache=cache)
    options = RunOptions(profile="smoke", n_users=users, client=client, n_boot=50)
    paper.run(load_dataset(paper.DATASET), None, options)
    return [batch for batch in client.batches if batch]


def _totals(results: Sequence[Any], wall: float) -> dict[str, Any]:
    prompt = sum(r.prompt_tokens for r in results)
    completion = sum(r.completion_tokens for r in results)
    ideal = prompt / PROMPT_TPS + completion / GENERATION_TPS
    return {
        "requests": len(results),
        "failed": sum(not r.ok for r in results),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "wall_s": round(wall, 2),
        "ratio": round(wall / ideal, 3) if ideal else float("nan"),
    }


def serve_batches(
    server: LocalServer, batches: Sequence[Sequence[ChatRequest]], limit: int
) -> dict[str, Any]:
    """Send every batch, uncached, to ``server`` with ``limit`` requests in flight."""
    config = dataclasses.replace(
        settings(),
        llm_base_url=server.base_url,
        llm_model=MODEL_ALIAS,
        llm_structured="json_object",
        llm_concurrency=limit,
        api_key=None,
    )
    client = LLMClient(config=config, cache=False)
    results: list[Any] = []
    started = time.perf_counter()
    for batch in batches:
        results += client.map(batch, concurrency=limit, order="prefix", progress=False)
    return _totals(results, time.perf_counter() - started)


@dataclasses.dataclass
class _RawResult:
    ok: bool
    prompt_tokens: int
    completion_tokens: int


def serve_raw(batches: Sequence[Sequence[ChatRequest]], threads: int) -> dict[str, Any]:
    """Every request through ``llama_cpp.Llama`` in this process, one at a time, prefix order."""
    from llama_cpp import Llama

    llm = Llama(
        model_path=str(default_model_path()), n_ctx=4096, n_threads=threads,
        n_threads_batch=threads, verbose=False,
    )  # fmt: skip
    results: list[_RawResult] = []
    started = time.perf_counter()
    for batch in batches:
        for request in sorted(batch, key=lambda r: json.dumps(r.messages, sort_keys=True)):
            extra = {}
            if request.schema is not None:
                extra["response_format"] = response_format(request.schema, "json_object")
            reply = llm.create_chat_completion(
                messages=list(request.messages), repeat_penalty=1.1, **request.sampling(), **extra
            )
            usage = reply["usage"]
            results.append(_RawResult(True, usage["prompt_tokens"], usage["completion_tokens"]))
    return _totals(results, time.perf_counter() - started)


def throughput(server: LocalServer, requests: Sequence[ChatRequest], limit: int) -> float:
    """Generated tokens per second with ``limit`` requests in flight (uncached)."""
    result = serve_batches(server, [list(requests)], limit)
    return result["completion_tokens"] / result["wall_s"]


def with_server(runtime: str, threads: int, slots: int, job: Callable[[LocalServer], Any]) -> Any:
    """Run ``job`` against a fresh server of ``runtime``; always stop it."""
    with tempfile.TemporaryDirectory() as folder:
        server = LocalServer(
            model_path=default_model_path(), n_threads=threads, runtime=runtime, slots=slots,
            log_path=Path(folder) / "server.log",
        )  # fmt: skip
        with server:
            return job(server)


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", nargs="+", default=list(PAPERS), choices=list(PAPERS))
    parser.add_argument("--users", type=int, help="users per paper (default: the smoke profile's)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of every runtime")
    parser.add_argument("--slots", type=int, default=4, help="llama-server slots (workload)")
    parser.add_argument("--heavy", type=int, default=16, help="requests in the concurrency test")
    parser.add_argument(
        "--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "recagents-bench-serving"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    args.cache_dir.mkdir(parents=True, exist_ok=True)

    rows: list[dict[str, Any]] = []
    everything: list[ChatRequest] = []
    for paper in args.papers:
        started = time.perf_counter()
        batches = capture(PAPERS[paper], args.users, args.cache_dir)
        everything += [r for batch in batches for r in batch]
        print(f"{paper}: {sum(map(len, batches))} requests in {len(batches)} batches "
              f"(captured in {time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip
        runs = {
            "raw (in process, 1 stream)": serve_raw(batches, args.threads),
            "llama-cpp-python server (1 slot)": with_server(
                "llama-cpp-python", args.threads, 1, lambda s, b=batches: serve_batches(s, b, 1)
            ),
            f"llama-server ({args.slots} slots)": with_server(
                "llama-server", args.threads, args.slots,
                lambda s, b=batches: serve_batches(s, b, args.slots),
            ),
        }  # fmt: skip
        for runtime, result in runs.items():
            rows.append({"paper": paper, "runtime": runtime, **result})
            print(f"  {runtime:34s} {json.dumps(result)}", flush=True)

    heavy = sorted(everything, key=lambda r: -r.max_tokens)[: args.heavy]
    concurrency: dict[str, dict[int, float]] = {}
    for runtime, slots in (("llama-server", 8), ("llama-cpp-python", 1)):
        concurrency[runtime] = with_server(
            runtime, args.threads, slots,
            lambda s: {n: round(throughput(s, heavy, n), 1) for n in (1, 4, 8)},
        )  # fmt: skip
        gains = {n: round(v / concurrency[runtime][1], 2) for n, v in concurrency[runtime].items()}
        print(f"{runtime}: generated tokens/s at 1, 4, 8 in flight {concurrency[runtime]}, "
              f"gain over 1 {gains}", flush=True)  # fmt: skip

    by_runtime: dict[str, list[float]] = {}
    for row in rows:
        by_runtime.setdefault(row["runtime"], []).append(row["ratio"])
    print("\nratio wall / (prompt/200 + completion/90), per paper; median over papers:")
    for runtime, ratios in by_runtime.items():
        print(f"  {runtime:34s} {ratios} median {statistics.median(ratios):.3f}")
    if args.json:
        payload = {"threads": args.threads, "users": args.users, "rows": rows,
                   "concurrency": concurrency, "heavy_requests": len(heavy)}  # fmt: skip
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
