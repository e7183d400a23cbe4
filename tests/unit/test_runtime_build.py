"""The embedded runtime's build: portable flags, a key per build, and an install record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from recagents.llm import runtime_build


def test_x86_64_flags_are_portable() -> None:
    args = runtime_build.cmake_args("x86_64")
    assert "-DGGML_NATIVE=OFF" in args
    assert "-DGGML_AVX2=ON" in args
    # the kernels that fault where the OS has not enabled AMX tile state, and AVX-512
    for flag in ("AMX_TILE", "AMX_INT8", "AMX_BF16", "AVX512"):
        assert f"-DGGML_{flag}=OFF" in args
    assert not any(a.endswith("=ON") and ("AMX" in a or "AVX512" in a) for a in args)


def test_other_machines_keep_llama_cpp_defaults() -> None:
    assert runtime_build.cmake_args("arm64") == ("-DLLAVA_BUILD=OFF",)
    assert runtime_build.cmake_args("aarch64") == ("-DLLAVA_BUILD=OFF",)


def test_the_key_changes_with_flags_version_and_machine() -> None:
    base = runtime_build.build_key("0.3.36", ("-DA=ON",), "x86_64")
    assert base == runtime_build.build_key("0.3.36", ("-DA=ON",), "x86_64")
    assert base != runtime_build.build_key("0.3.36", ("-DA=OFF",), "x86_64")
    assert base != runtime_build.build_key("0.3.37", ("-DA=ON",), "x86_64")
    assert base != runtime_build.build_key("0.3.36", ("-DA=ON",), "aarch64")


def test_wheel_dir_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runtime_build.WHEEL_DIR_ENV, str(tmp_path / "w"))
    assert runtime_build.wheel_dir() == tmp_path / "w"
    monkeypatch.delenv(runtime_build.WHEEL_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert runtime_build.wheel_dir() == tmp_path / "recagents" / "wheels"


def test_this_environment_holds_the_portable_build() -> None:
    """`make setup` installs through runtime_build, so the record must match this machine."""
    record = runtime_build.recorded_build()
    assert record is not None, "llama-cpp-python was not installed by runtime_build.py"
    assert record["key"] == runtime_build.build_key()
    assert record["version"] == runtime_build.installed_version()
    assert Path(record["wheel"]).name.startswith("llama_cpp_python-")
    if record.get("server"):  # `install --server`, as `make setup` runs it
        assert Path(record["server"]).is_file()
        assert Path(record["server"]).parent == runtime_build.server_dir()


def test_loaded_library_has_no_amx_or_avx512_kernels() -> None:
    """What the shared library itself reports, not only what we asked the build for."""
    if runtime_build.cmake_args() != runtime_build.X86_64_ARGS:
        pytest.skip("not an x86-64 machine")
    code = "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"
    info = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    enabled = {
        p.split("=")[0].strip().split(":")[-1].strip() for p in info.split("|") if "= 1" in p
    }
    assert "AVX2" in enabled
    assert not {name for name in enabled if name.startswith(("AMX", "AVX512"))}, info


def test_install_is_skipped_when_the_record_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = tmp_path / "llama-server"
    record = {"key": runtime_build.build_key(), "version": "0.3.36", "server": str(server)}
    (tmp_path / runtime_build.RECORD_NAME).write_text(json.dumps(record))
    monkeypatch.setattr(runtime_build.sys, "prefix", str(tmp_path))
    monkeypatch.setattr(runtime_build, "installed_version", lambda: "0.3.36")
    monkeypatch.setattr(runtime_build, "ensure_server", lambda version: server)

    def no_build(*_: Any, **__: Any) -> Path:
        raise AssertionError("must not build")

    monkeypatch.setattr(runtime_build, "ensure_wheel", no_build)
    assert runtime_build.install("0.3.36", server=True) == record
    # Asked for the server, a record without it is not current: the wheel is installed again.
    del record["server"]
    (tmp_path / runtime_build.RECORD_NAME).write_text(json.dumps(record))
    with pytest.raises(AssertionError, match="must not build"):
        runtime_build.install("0.3.36", server=True)
    assert runtime_build.install("0.3.36") == record


def test_a_build_of_other_flags_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record of another key (or none: a pip-built wheel) means reinstall from our wheel."""
    (tmp_path / runtime_build.RECORD_NAME).write_text(
        json.dumps({"key": "native", "version": "0.3.36"})
    )
    monkeypatch.setattr(runtime_build.sys, "prefix", str(tmp_path))
    monkeypatch.setattr(runtime_build, "installed_version", lambda: "0.3.36")
    wheel = tmp_path / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"wheel")
    monkeypatch.setattr(runtime_build, "ensure_wheel", lambda version: wheel)
    server = tmp_path / "llama-server"
    server.write_bytes(b"binary")
    monkeypatch.setattr(runtime_build, "ensure_server", lambda version: server)
    commands: list[list[str]] = []

    def fake_run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(runtime_build.subprocess, "run", fake_run)
    record = runtime_build.install("0.3.36", server=True)
    assert commands and "--force-reinstall" in commands[0] and str(wheel) in commands[0]
    assert "--no-cache-dir" in commands[0]
    assert record["key"] == runtime_build.build_key("0.3.36")
    assert record["server"] == str(server) and len(record["server_sha256"]) == 64
    assert json.loads((tmp_path / runtime_build.RECORD_NAME).read_text()) == record


def test_a_cached_wheel_is_reused_without_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(runtime_build.WHEEL_DIR_ENV, str(tmp_path))
    key = runtime_build.build_key("0.3.36")
    folder = tmp_path / f"llama_cpp_python-0.3.36-{key}"
    folder.mkdir()
    wheel = folder / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"wheel")

    def no_run(*_: Any, **__: Any) -> None:
        raise AssertionError("must not build")

    monkeypatch.setattr(runtime_build.subprocess, "run", no_run)
    assert runtime_build.ensure_wheel("0.3.36") == wheel


def test_the_server_build_has_its_own_folder_and_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama-server's flags extend the wheel's (same kernels) and never fetch a web UI."""
    monkeypatch.setenv(runtime_build.WHEEL_DIR_ENV, str(tmp_path))
    folder = runtime_build.server_dir("0.3.36")
    assert folder.parent == tmp_path and folder.name.startswith("llama-server-0.3.36-")
    assert folder.name != f"llama_cpp_python-0.3.36-{runtime_build.build_key('0.3.36')}"
    assert {"-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_CURL=OFF"} <= set(runtime_build.SERVER_ARGS)


def test_a_built_server_is_reused_without_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(runtime_build.WHEEL_DIR_ENV, str(tmp_path))
    folder = runtime_build.server_dir("0.3.36")
    folder.mkdir(parents=True)
    (folder / runtime_build.SERVER_BINARY).write_bytes(b"binary")

    def no_run(*_: Any, **__: Any) -> None:
        raise AssertionError("must not build")

    monkeypatch.setattr(runtime_build.subprocess, "run", no_run)
    assert runtime_build.ensure_server("0.3.36") == folder / runtime_build.SERVER_BINARY


def test_a_failed_server_build_names_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip download fails (offline, say): one clear error, and no binary is left behind."""
    monkeypatch.setenv(runtime_build.WHEEL_DIR_ENV, str(tmp_path))

    def failing(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(runtime_build.subprocess, "run", failing)
    with pytest.raises(runtime_build.RuntimeBuildError, match="downloading the llama-cpp-python"):
        runtime_build.ensure_server("0.3.36")
    assert not (runtime_build.server_dir("0.3.36") / runtime_build.SERVER_BINARY).exists()
