"""``python -m recagents.llm check`` and ``serve`` on the embedded model."""

import json
import os
import signal
import subprocess
import sys
import urllib.request


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECAGENTS_LLM_")}
    env["RECAGENTS_CACHE_DIR"] = str(tmp_path)
    env["OPENAI_API_KEY"] = "sk-cli-SENTINEL-0a1b2c3d4e"
    return env


def test_check_reports_a_round_trip(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "recagents.llm", "check"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "backend:  local" in done.stdout
    assert "model:    smollm2-135m-instruct" in done.stdout
    assert "json:     ok" in done.stdout
    assert "key:      set (hidden)" in done.stdout
    assert "SENTINEL" not in done.stdout + done.stderr


def test_check_fails_clearly_on_a_dead_endpoint(tmp_path):
    env = _env(tmp_path) | {
        "RECAGENTS_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "RECAGENTS_LLM_MODEL": "nothing",
        "RECAGENTS_LLM_MAX_ATTEMPTS": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "recagents.llm", "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "error:" in done.stdout and "Connection" in done.stdout
    assert "SENTINEL" not in done.stdout + done.stderr


def test_serve_prints_variables_of_a_working_server(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "recagents.llm", "serve"],
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        first = process.stdout.readline().strip()
        assert first.startswith("export RECAGENTS_LLM_BASE_URL=http://127.0.0.1:")
        url = first.split("=", 1)[1]
        with urllib.request.urlopen(f"{url}/models", timeout=10) as response:
            models = json.load(response)
        assert any(m["id"] == "smollm2-135m-instruct" for m in models["data"])
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
