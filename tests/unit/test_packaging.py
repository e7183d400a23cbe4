"""The install files agree with each other and every dependency is pinned."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for requirement in project["dependencies"]:
        name, _, version = requirement.partition("==")
        assert version, f"{requirement!r} in pyproject.toml is not pinned with =="
        pins[name.lower()] = version
    return pins


def _environment_pins() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    pins = {}
    for requirement in pip_section:
        if requirement.startswith("-e"):
            continue
        name, _, version = requirement.partition("==")
        assert version, f"{requirement!r} in environment.yml is not pinned with =="
        pins[name.lower()] = version
    return pins


RUNTIME = "llama-cpp-python[server]"


def test_environment_yml_matches_pyproject():
    """Same pins, but the embedded runtime is left to runtime_build.py (see environment.yml)."""
    pyproject = _pyproject_pins()
    del pyproject[RUNTIME]
    assert _environment_pins() == pyproject


def test_runtime_pin_is_the_one_the_portable_build_installs():
    from recagents.llm import runtime_build

    assert _pyproject_pins()[RUNTIME] == runtime_build.LLAMA_CPP_VERSION
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    # installing the package from environment.yml would build the runtime with native flags
    assert not any(line.startswith("-e") or "llama" in line for line in pip_section)


def test_python_versions_agree():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda_python = next(d for d in env["dependencies"] if str(d).startswith("python="))
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    major_minor = conda_python.split("=")[1]
    assert f">={major_minor}" in requires


def test_recbole_compatibility_caps():
    """README, Compatibility notes: RecBole 1.2.1 needs numpy<2, scipy<1.12, setuptools<81."""
    pins = _pyproject_pins()

    def version(name: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", pins[name])[:2])

    assert version("numpy") < (2, 0)
    assert version("scipy") < (1, 12)
    assert version("setuptools") < (81, 0)
    assert pins["torch"] == "2.13.0"
