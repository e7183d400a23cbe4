"""Do cold replies repeat? The same recorded requests, twice, to fresh embedded servers.

For each server configuration, two fresh servers (runs A and B, nothing cached anywhere) are
asked the same seeded sample of a bundle's chat requests, through the project's client
(:func:`recagents.llm.regenerate.regenerate`: no reply cache, no re-asks, requests sent in
the bundle's order, as many in flight as the server has slots). It prints, per configuration,
how many of B's replies are byte-identical to A's, how many of A's equal the recorded ones,
and each run's wall time, all in one run on one machine. With ``--reversed`` a third fresh
server (run C) is asked in the reverse order: C equals A only where a reply is a function of
its request alone, whatever the server computed before it.

    .venv/bin/python -m recagents.llm bundle export --cache .cache --out /tmp/run.bundle
    .venv/bin/python bench/cold_repeat.py /tmp/run.bundle --requests 24 --threads 2

Configurations (``--configs`` picks some): ``slots4`` (4 slots, continuous batching, a
prompt cache shared by the slots; the default until 2026-12-07), ``slots1`` (one slot,
prompt cache on: the embedded default), ``slots1-nocache`` and ``slots4-nocache``
(``--no-cache-prompt --cache-ram 0``: every prompt evaluated from scratch), ``python``
(llama-cpp-python's server, one request at a time, its KV prefix reused).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from recagents.config import settings
from recagents.llm.bundle import read_bundle
from recagents.llm.client import LLMClient
from recagents.llm.local import MODEL_ALIAS, LocalServer, default_model_path
from recagents.llm.regenerate import regenerate, sample_chat_entries

NO_PROMPT_CACHE = ("--no-cache-prompt", "--cache-ram", "0")
CONFIGS: dict[str, dict[str, Any]] = {
    "slots4": {"runtime": "llama-server", "slots": 4},
    "slots1": {"runtime": "llama-server", "slots": 1},
    "slots1-nocache": {"runtime": "llama-server", "slots": 1, "extra_args": NO_PROMPT_CACHE},
    "slots4-nocache": {"runtime": "llama-server", "slots": 4, "extra_args": NO_PROMPT_CACHE},
    "python": {"runtime": "llama-cpp-python", "slots": 1},
}


def _run(config: dict[str, Any], entries: list[dict[str, Any]], threads: int) -> Any:
    """One cold run: a fresh server of ``config``, the sample re-asked, the server stopped."""
    server = LocalServer(model_path=default_model_path(), n_threads=threads, **config).start()
    try:
        settings_ = dataclasses.replace(settings(), llm_structured="json_object")
        client = LLMClient(
            base_url=server.base_url, model=MODEL_ALIAS, config=settings_, cache=False
        )
        return regenerate(entries, client, concurrency=config["slots"], progress=False)
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    """Run the chosen configurations; print one line each and a JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", help="a reply bundle recorded with the embedded model")
    parser.add_argument("--requests", type=int, default=24, help="chat requests re-asked")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--threads", type=int, default=2, help="server threads")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument(
        "--save", metavar="DIR", help="write run A's replies to DIR/CONFIG-tTHREADS.json"
    )
    parser.add_argument(
        "--reversed", action="store_true", help="also a run C in the reverse order (vs A)"
    )
    args = parser.parse_args(argv)
    entries = sample_chat_entries(read_bundle(args.bundle)[1], args.requests, args.seed)
    rows = []
    for name in args.configs:
        first = _run(CONFIGS[name], entries, args.threads)
        # Run B is compared with run A: A's replies stand in for the recorded ones.
        as_a = [
            {**e, "reply": {**e["reply"], "text": first.replies[e["key"]]}}
            for e in entries
            if first.replies[e["key"]] is not None
        ]
        second = _run(CONFIGS[name], as_a, args.threads)
        # Run C asks in the reverse order: equal to A only if a reply depends on its request
        # alone, not on what the server computed (and cached) before it.
        third = _run(CONFIGS[name], as_a[::-1], args.threads) if args.reversed else None
        row = {
            "config": name,
            "requests": len(entries),
            "b_equals_a": second.identical,
            "compared": second.asked,
            "a_equals_recorded": first.identical,
            "wall_a_s": round(first.wall_s, 1),
            "wall_b_s": round(second.wall_s, 1),
            "c_reversed_equals_a": third.identical if third else None,
        }
        rows.append(row)
        if args.save:  # to compare configurations or thread counts with each other
            out = Path(args.save) / f"{name}-t{args.threads}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(first.replies, indent=0, sort_keys=True))
        print(
            f"{name:>15}: B = A in {row['b_equals_a']} of {row['compared']}, A = recorded in "
            f"{row['a_equals_recorded']} of {len(entries)}; wall A {row['wall_a_s']} s, "
            f"B {row['wall_b_s']} s"
            + (f"; C (reverse order) = A in {third.identical}" if third else ""),
            flush=True,
        )
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
