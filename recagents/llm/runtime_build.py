"""Build and install the embedded model's runtime (llama-cpp-python) with portable flags.

Why: llama-cpp-python ships only as source, and its default build turns on every
instruction set the build machine's CPUID reports. On CPUs that report AMX inside a
virtual machine the AMX kernels take a general protection fault at ``ldtilecfg`` on the
first chat request (upstream llama.cpp issue 20824), so the server dies. pip's wheel cache
is keyed by the source archive only, so a wheel built with other flags would be reused
silently. This module is the one place that chooses the flags: it builds a wheel with
:func:`cmake_args`, keeps it in a folder named after a hash of (version, flags, Python,
platform), installs it, and records the build in the environment
(:data:`RECORD_NAME` under ``sys.prefix``), which ``python -m recagents.llm check`` prints.

It also builds llama.cpp's own ``llama-server`` from the llama.cpp sources vendored in the
same pinned source archive, with the same flags (:func:`ensure_server`): that server runs
several slots with continuous batching, which the Python server cannot, and
:mod:`recagents.llm.local` runs it when ``RECAGENTS_LOCAL_RUNTIME=llama-server``.

It uses the standard library only and runs before the rest of the environment exists:
``python recagents/llm/runtime_build.py install`` (the Makefile does this; conda users run
it after ``conda activate recagents``). ``--print`` shows the plan without building.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

#: The pinned version; pyproject.toml pins the same (tests/unit/test_packaging.py checks).
LLAMA_CPP_VERSION = "0.3.36"
#: File under ``sys.prefix`` that records which build the environment holds.
RECORD_NAME = "recagents-llama-cpp-build.json"
#: Where built wheels are kept across environments (keyed by flags, so never mixed up).
WHEEL_DIR_ENV = "RECAGENTS_WHEEL_DIR"

#: x86-64: AVX2 with FMA/F16C/BMI2, which every x86-64 CPU of the last ten years has;
#: AVX-512 and AMX off, because their kernels are picked from CPUID at build time and the
#: AMX ones crash where the OS has not enabled the tile state. LLAVA_BUILD=OFF skips the
#: multimodal library (text-only model; it halves the build).
X86_64_ARGS = (
    "-DGGML_NATIVE=OFF",
    "-DGGML_SSE42=ON",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_BMI2=ON",
    "-DGGML_AVX_VNNI=OFF",
    "-DGGML_AVX512=OFF",
    "-DGGML_AVX512_VBMI=OFF",
    "-DGGML_AVX512_VNNI=OFF",
    "-DGGML_AVX512_BF16=OFF",
    "-DGGML_AMX_TILE=OFF",
    "-DGGML_AMX_INT8=OFF",
    "-DGGML_AMX_BF16=OFF",
    "-DLLAVA_BUILD=OFF",
)
#: Other machines (arm64 Linux, Apple silicon): llama.cpp's own defaults, multimodal off.
OTHER_ARGS = ("-DLLAVA_BUILD=OFF",)
#: Added for ``llama-server``: a static binary with no web UI (the default fetches the UI
#: from Hugging Face at build time, which must never happen here) and no libcurl.
SERVER_ARGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
#: The binary's name inside its build folder.
SERVER_BINARY = "llama-server"


class RuntimeBuildError(RuntimeError):
    """The runtime could not be built or installed (the message says why and what to do)."""


def cmake_args(machine: str | None = None) -> tuple[str, ...]:
    """The CMake flags for this machine's architecture (``platform.machine()`` by default)."""
    machine = (machine or platform.machine()).lower()
    return X86_64_ARGS if machine in {"x86_64", "amd64"} else OTHER_ARGS


def build_key(
    version: str = LLAMA_CPP_VERSION,
    args: tuple[str, ...] | None = None,
    machine: str | None = None,
) -> str:
    """A short hash of everything that makes two builds differ."""
    machine = (machine or platform.machine()).lower()
    parts = {
        "version": version,
        "args": list(args if args is not None else cmake_args(machine)),
        "python": f"{sys.implementation.name}{sys.version_info[0]}{sys.version_info[1]}",
        "system": platform.system(),
        "machine": machine,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def wheel_dir() -> Path:
    """The folder of built wheels: ``$RECAGENTS_WHEEL_DIR`` or ``~/.cache/recagents/wheels``."""
    override = os.environ.get(WHEEL_DIR_ENV)
    if override:
        return Path(override).expanduser()
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "recagents" / "wheels"


def record_path(prefix: str | Path | None = None) -> Path:
    """Where the environment at ``prefix`` (default: this one) records its build."""
    return Path(prefix or sys.prefix) / RECORD_NAME


def recorded_build(prefix: str | Path | None = None) -> dict[str, Any] | None:
    """The build record of the environment, or ``None`` when it holds none (or not ours)."""
    path = record_path(prefix)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def installed_version() -> str | None:
    """The llama-cpp-python version installed in this environment, if any."""
    try:
        return metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        return None


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` so two installs never build the same wheel."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ensure_wheel(version: str = LLAMA_CPP_VERSION, jobs: int | None = None) -> Path:
    """The portable wheel for this machine, built on first use (4-10 minutes on two cores).

    The build never reads or writes pip's wheel cache (``--no-cache-dir``), so a wheel built
    elsewhere with native flags can neither be taken nor poisoned.
    """
    args = cmake_args()
    folder = wheel_dir() / f"llama_cpp_python-{version}-{build_key(version, args)}"
    with _locked(folder):
        wheels = sorted(folder.glob("llama_cpp_python-*.whl"))
        if wheels:
            return wheels[0]
        env = dict(os.environ)
        env["CMAKE_ARGS"] = " ".join(args)
        env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(jobs or os.cpu_count() or 2))
        env.pop("FORCE_CMAKE", None)
        print(
            f"Building llama-cpp-python {version} from source with {env['CMAKE_ARGS']} "
            f"(once per machine; several minutes) into {folder}",
            flush=True,
        )
        with tempfile.TemporaryDirectory(dir=folder) as scratch:
            command = [
                sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-cache-dir",
                "--no-binary", "llama-cpp-python", "-w", scratch,
                f"llama-cpp-python=={version}",
            ]  # fmt: skip
            if subprocess.run(command, env=env).returncode != 0:
                raise RuntimeBuildError(
                    f"building llama-cpp-python {version} failed (flags: {env['CMAKE_ARGS']}); "
                    "it needs a C/C++ compiler and cmake >= 3.21 (Debian: apt-get install "
                    "build-essential cmake)"
                )
            built = sorted(Path(scratch).glob("llama_cpp_python-*.whl"))
            if not built:
                raise RuntimeBuildError(f"pip wheel produced no llama-cpp-python wheel ({scratch})")
            target = folder / built[0].name
            shutil.move(str(built[0]), target)
        return target


def server_dir(version: str = LLAMA_CPP_VERSION) -> Path:
    """The folder that holds this machine's ``llama-server`` build of ``version``."""
    args = cmake_args() + SERVER_ARGS
    return wheel_dir() / f"llama-server-{version}-{build_key(version, args)}"


def _safe_extract(archive: Path, target: Path) -> Path:
    """Unpack the source archive (no links out of ``target``, no special files)."""
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    roots = [p for p in target.iterdir() if p.is_dir()]
    if len(roots) != 1:
        raise RuntimeBuildError(f"{archive.name} does not unpack to one folder")
    return roots[0]


def ensure_server(version: str = LLAMA_CPP_VERSION, jobs: int | None = None) -> Path:
    """This machine's ``llama-server``, built on first use (6-9 minutes on two cores).

    The sources are the llama.cpp copy vendored in the pinned llama-cpp-python source
    archive, so the embedded model runs on the same llama.cpp whichever server serves it.
    """
    folder = server_dir(version)
    binary = folder / SERVER_BINARY
    with _locked(folder):
        if binary.is_file():
            return binary
        args = cmake_args() + SERVER_ARGS
        jobs = jobs or int(os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or os.cpu_count() or 2)
        print(
            f"Building llama-server (llama.cpp of llama-cpp-python {version}) with "
            f"{' '.join(args)} (once per machine; several minutes) into {folder}",
            flush=True,
        )
        with tempfile.TemporaryDirectory(dir=folder) as scratch_name:
            scratch = Path(scratch_name)
            download = [
                sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                "--no-cache-dir", "--no-binary", ":all:", "-d", str(scratch),
                f"llama-cpp-python=={version}",
            ]  # fmt: skip
            if subprocess.run(download).returncode != 0:
                raise RuntimeBuildError(
                    f"downloading the llama-cpp-python {version} sources failed"
                )
            archives = sorted(scratch.glob("llama_cpp_python-*.tar.gz"))
            if not archives:
                raise RuntimeBuildError(f"pip download produced no source archive ({scratch})")
            source = _safe_extract(archives[0], scratch / "src") / "vendor" / "llama.cpp"
            build = scratch / "build"
            steps = [
                ["cmake", "-S", str(source), "-B", str(build), *args],
                ["cmake", "--build", str(build), "--target", SERVER_BINARY, "-j", str(jobs)],
            ]
            for step in steps:
                done = subprocess.run(step, stdout=subprocess.DEVNULL)
                if done.returncode != 0:
                    raise RuntimeBuildError(
                        f"building llama-server failed at `{' '.join(step[:3])}`; it needs a "
                        "C/C++ compiler and cmake >= 3.21 (Debian: apt-get install "
                        "build-essential cmake)"
                    )
            built = build / "bin" / SERVER_BINARY
            if not built.is_file():
                raise RuntimeBuildError(f"the build produced no {built}")
            partial = folder / f".{SERVER_BINARY}.partial"
            shutil.copy2(built, partial)
            partial.replace(binary)
        return binary


def install(
    version: str = LLAMA_CPP_VERSION, force: bool = False, server: bool = False
) -> dict[str, Any]:
    """Install the portable build into this environment unless it already holds it.

    A llama-cpp-python that this module did not install (no record, or a record of other
    flags) is replaced, whatever its version string says. With ``server``, the record also
    names this machine's ``llama-server`` build (built first if needed).

    Returns:
        The build record now in the environment.
    """
    key = build_key(version)
    record = recorded_build()
    binary = ensure_server(version) if server else None
    if (
        not force
        and record is not None
        and record.get("key") == key
        and installed_version() == version
        and (binary is None or record.get("server") == str(binary))
    ):
        print(f"llama-cpp-python {version} (portable build {key}) is already installed")
        return record
    wheel = ensure_wheel(version)
    command = [
        sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--force-reinstall",
        "--no-cache-dir", str(wheel),
    ]  # fmt: skip
    if subprocess.run(command).returncode != 0:
        raise RuntimeBuildError(f"installing {wheel} failed")
    record = {
        "package": "llama-cpp-python",
        "version": version,
        "key": key,
        "cmake_args": list(cmake_args()),
        "machine": platform.machine(),
        "wheel": str(wheel),
        "wheel_sha256": _sha256(wheel),
    }
    if binary is not None:
        record["server"] = str(binary)
        record["server_sha256"] = _sha256(binary)
    record_path().write_text(json.dumps(record, indent=2) + "\n")
    print(f"installed llama-cpp-python {version} (portable build {key}) from {wheel}")
    return record


def main(argv: list[str] | None = None) -> int:
    """Command line: ``install`` (default), ``--print`` to show the plan only."""
    parser = argparse.ArgumentParser(prog="python recagents/llm/runtime_build.py")
    parser.add_argument("command", nargs="?", default="install", choices=["install", "show"])
    parser.add_argument("--force", action="store_true", help="rebuild the install even if current")
    parser.add_argument(
        "--server",
        action="store_true",
        help="also build llama.cpp's llama-server (RECAGENTS_LOCAL_RUNTIME=llama-server)",
    )
    args = parser.parse_args(argv)
    if args.command == "show":
        print(json.dumps({
            "version": LLAMA_CPP_VERSION,
            "key": build_key(),
            "cmake_args": list(cmake_args()),
            "wheel_dir": str(wheel_dir()),
            "server_dir": str(server_dir()),
            "installed_version": installed_version(),
            "record": recorded_build(),
        }, indent=2))  # fmt: skip
        return 0
    try:
        install(force=args.force, server=args.server)
    except RuntimeBuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
