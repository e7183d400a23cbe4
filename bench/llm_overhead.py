"""Overhead of the recagents LLM path versus calling llama.cpp in process.

Sends the same chat request N times (cache disabled) through recagents (client -> local
OpenAI-compatible llama.cpp server) and through ``llama_cpp.Llama`` loaded in this process
from the same GGUF file, side by side in one run, and prints generated tokens per second for
each and their ratio (target: recagents >= 0.9x in-process).

    .venv/bin/python bench/llm_overhead.py --requests 50
"""

from __future__ import annotations

import argparse
import time

from recagents.llm.client import ChatRequest, LLMClient
from recagents.llm.local import default_model_path, get_local_server, stop_local_server

MESSAGES = [
    {"role": "system", "content": "You are a movie expert. Answer in one sentence."},
    {"role": "user", "content": "Why do people still watch Casablanca?"},
]


def through_recagents(n: int, max_tokens: int) -> tuple[float, int]:
    """Wall seconds and completion tokens for ``n`` uncached requests via the client."""
    client = LLMClient(cache=False)
    get_local_server()
    client.chat(MESSAGES, max_tokens=max_tokens)  # warm-up: server start, first prompt
    started = time.perf_counter()
    results = client.map(
        [ChatRequest(MESSAGES, max_tokens=max_tokens) for _ in range(n)], progress=False
    )
    elapsed = time.perf_counter() - started
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return elapsed, sum(r.completion_tokens for r in results)


def in_process(n: int, max_tokens: int, n_ctx: int, n_threads: int | None) -> tuple[float, int]:
    """Wall seconds and completion tokens for ``n`` calls to an in-process ``Llama``."""
    from llama_cpp import Llama

    kwargs = {"n_threads": n_threads} if n_threads else {}
    llm = Llama(model_path=str(default_model_path()), n_ctx=n_ctx, verbose=False, **kwargs)
    llm.create_chat_completion(MESSAGES, max_tokens=max_tokens, temperature=0.0, seed=0)
    started = time.perf_counter()
    tokens = 0
    for _ in range(n):
        out = llm.create_chat_completion(MESSAGES, max_tokens=max_tokens, temperature=0.0, seed=0)
        tokens += out["usage"]["completion_tokens"]
    return time.perf_counter() - started, tokens


def main() -> None:
    """Run both paths and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--max-tokens", type=int, default=60)
    args = parser.parse_args()
    server = get_local_server()
    ours_s, ours_tokens = through_recagents(args.requests, args.max_tokens)
    n_ctx, n_threads = server.n_ctx, server.n_threads
    stop_local_server()  # free the cores for the in-process run
    base_s, base_tokens = in_process(args.requests, args.max_tokens, n_ctx, n_threads)
    ours_rate, base_rate = ours_tokens / ours_s, base_tokens / base_s
    print(f"recagents (client -> local server): {ours_s:6.2f} s, {ours_rate:6.1f} tokens/s")
    print(f"in-process llama_cpp:               {base_s:6.2f} s, {base_rate:6.1f} tokens/s")
    print(f"throughput ratio: {ours_rate / base_rate:.3f} (target >= 0.9)")


if __name__ == "__main__":
    main()
