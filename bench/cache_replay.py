"""Warm-cache replay: how long 1,000 already-cached requests take through ``LLMClient.map``.

Fills a fresh cache with 1,000 replies (written directly, so no model is needed), then maps
the same 1,000 requests through the client and times the replay (target: under 2 s).

    .venv/bin/python bench/cache_replay.py --requests 1000
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from recagents.config import settings
from recagents.llm.cache import ResponseCache, request_key
from recagents.llm.client import ChatRequest, LLMClient


def main() -> None:
    """Fill, then replay, and print the timing."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        config = dataclasses.replace(settings(), cache_dir=Path(folder))
        cache = ResponseCache(config.llm_cache_path)
        client = LLMClient(
            base_url="http://127.0.0.1:9/v1", model="replay", config=config, cache=cache
        )
        requests = [
            ChatRequest([{"role": "user", "content": f"Recommend movie number {i}."}])
            for i in range(args.requests)
        ]
        for request in requests:
            key_request = client._key_request(request, request.messages)
            cache.put(
                request_key(key_request),
                key_request,
                {"text": "ok", "finish_reason": "stop"},
                model="replay",
                prompt_tokens=12,
                completion_tokens=1,
                latency_s=1.0,
            )
        started = time.perf_counter()
        results = client.map(requests, progress=False)
        elapsed = time.perf_counter() - started
        assert all(r.ok and r.cached for r in results)
        assert client.usage.http_calls == 0
        print(f"replayed {len(results)} cached requests in {elapsed:.3f} s (target < 2 s)")


if __name__ == "__main__":
    main()
