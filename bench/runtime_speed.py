"""Prompt and generation speed of the embedded runtime, and portable / native side by side.

Loads the bundled SmolLM2-135M GGUF in a fresh process per measurement and times a fixed
prompt evaluation (``--prompt-tokens``) and greedy generation (``--gen-tokens``). With
``--native-wheel PATH`` (a llama-cpp-python wheel built with llama.cpp's native CPU flags),
the same measurement runs with that build too, alternating the two builds ``--rounds`` times
in one run, and prints the ratio portable / native. Never run the native build on a CPU
whose AMX kernels fault (the reason the portable build exists): it would crash there.

    .venv/bin/python bench/runtime_speed.py --rounds 3
    CMAKE_ARGS=-DLLAVA_BUILD=OFF .venv/bin/pip wheel --no-deps --no-cache-dir \\
        --no-binary llama-cpp-python -w /tmp/native llama-cpp-python==0.3.36
    .venv/bin/python bench/runtime_speed.py --native-wheel /tmp/native/llama_cpp_python-*.whl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MEASURE = r"""
import json, sys, time
from llama_cpp import Llama, llama_print_system_info
model, prompt_tokens, gen_tokens, threads = sys.argv[1], *map(int, sys.argv[2:5])
llm = Llama(model_path=model, n_ctx=2048, n_threads=threads, n_threads_batch=threads,
            verbose=False)
text = " ".join(f"Movie {i} is a drama about a family in a small town." for i in range(200))
tokens = llm.tokenize(text.encode())[:prompt_tokens]
llm.eval(tokens[:16]); llm.reset()  # warm-up
started = time.perf_counter(); llm.eval(tokens); prompt_s = time.perf_counter() - started
started = time.perf_counter(); made = 0  # the prompt is in the KV cache: only new tokens
for _ in llm.generate(tokens, temp=0.0):
    made += 1
    if made == gen_tokens:
        break
gen_s = time.perf_counter() - started
features = [p.strip() for p in llama_print_system_info().decode().split("|") if "= 1" in p]
print(json.dumps({"prompt_tps": len(tokens) / prompt_s, "gen_tps": made / gen_s,
                  "features": features}))
"""


def measure(
    model: Path, prompt_tokens: int, gen_tokens: int, threads: int, path: str | None
) -> dict:
    """One measurement in a fresh process; ``path`` puts another build first on sys.path."""
    env = dict(os.environ)
    if path:
        env["PYTHONPATH"] = path + os.pathsep + env.get("PYTHONPATH", "")
    args = [str(model), str(prompt_tokens), str(gen_tokens), str(threads)]
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, *args],
        env=env, capture_output=True, text=True, check=True, timeout=600,
    ).stdout  # fmt: skip
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    """Measure the installed (portable) build, and a native wheel beside it if given."""
    from recagents.llm import runtime_build
    from recagents.llm.local import _default_threads, default_model_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--gen-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=_default_threads())
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--native-wheel", type=Path, default=None)
    args = parser.parse_args()
    model = default_model_path()
    record = runtime_build.recorded_build() or {}
    builds: dict[str, str | None] = {f"portable ({record.get('key', 'unrecorded')})": None}
    scratch = tempfile.TemporaryDirectory()
    if args.native_wheel:
        with zipfile.ZipFile(args.native_wheel) as wheel:
            wheel.extractall(scratch.name)
        builds["native"] = scratch.name
    results: dict[str, list[dict]] = {name: [] for name in builds}
    for _ in range(args.rounds):  # alternate, so load on the machine hits both alike
        for name, path in builds.items():
            results[name].append(
                measure(model, args.prompt_tokens, args.gen_tokens, args.threads, path)
            )
    print(f"{args.prompt_tokens}-token prompt, {args.gen_tokens} generated tokens, "
          f"{args.threads} threads, median of {args.rounds} rounds")  # fmt: skip
    medians = {}
    for name, runs in results.items():
        prompt = statistics.median(r["prompt_tps"] for r in runs)
        gen = statistics.median(r["gen_tps"] for r in runs)
        medians[name] = (prompt, gen)
        kernels = ", ".join(f.split("=")[0].strip() for f in runs[0]["features"])
        print(f"{name:28s} prompt {prompt:7.1f} tokens/s   generation {gen:6.1f} tokens/s")
        print(f"{'':28s} kernels: {kernels}")
    if len(medians) == 2:
        (p_prompt, p_gen), (n_prompt, n_gen) = medians.values()
        print(f"ratio portable / native: prompt {p_prompt / n_prompt:.2f}, "
              f"generation {p_gen / n_gen:.2f}")  # fmt: skip
    scratch.cleanup()


if __name__ == "__main__":
    main()
