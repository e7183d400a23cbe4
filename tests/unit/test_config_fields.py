"""recagents.config.check_fields: one validation, driven by annotations and bounds metadata."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

from recagents.config import ConfigError, Settings, bounds, check_fields


@dataclass(frozen=True)
class Example:
    count: int = field(default=3, metadata=bounds(1, 10))
    share: float = field(default=0.5, metadata=bounds(high=1, above=0))
    mode: Literal["a", "b"] = "a"
    flag: bool = False
    name: str = "x"
    limit: int | None = field(default=None, metadata=bounds(0))
    pairs: tuple[tuple[int, int], ...] = ((1, 1),)
    sizes: tuple[int, ...] = (1, 2)
    where: Path | None = None

    def __post_init__(self) -> None:
        check_fields(self)


def test_defaults_and_edges_pass() -> None:
    Example()
    Example(count=1, share=1.0, mode="b", flag=True, limit=0, where=Path("."))
    Example(count=np.int64(10), share=np.float64(1e-9))  # numpy scalars are numbers


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"count": 0}, r"Example.count=0 is out of range: use an integer from 1 to 10"),
        ({"count": 11}, r"Example.count=11 is out of range"),
        ({"count": 2.5}, r"Example.count=2.5 is not an integer"),
        ({"count": True}, r"Example.count=True is not an integer"),
        ({"share": 0.0}, r"Example.share=0.0 is out of range: use a number above 0 and at most 1"),
        ({"share": float("nan")}, r"Example.share=nan is not a finite number"),
        ({"share": "0.5"}, r"Example.share='0.5' is not a number"),
        ({"mode": "c"}, r"Example.mode='c' is not one of 'a', 'b'"),
        ({"flag": 1}, r"Example.flag=1 is not True or False"),
        ({"name": 3}, r"Example.name=3 is not a string"),
        ({"limit": -1}, r"Example.limit=-1 is out of range: use an integer from 0"),
        ({"sizes": (1, "2")}, r"Example.sizes=\(1, '2'\) holds '2', which is not an integer"),
        ({"sizes": [1, 2]}, r"Example.sizes=\[1, 2\] is not a tuple"),
        ({"where": "here"}, r"Example.where='here' is not a path"),
    ],
)
def test_each_kind_of_bad_value_is_named(changes: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Example(**changes)


def test_replace_is_checked_too() -> None:
    with pytest.raises(ValueError, match="Example.count"):
        dataclasses.replace(Example(), count=-5)


def test_settings_use_it_and_name_the_environment_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"llm_max_reasks \(RECAGENTS_LLM_MAX_REASKS\)=11"):
        Settings(cache_dir=tmp_path, llm_max_reasks=11)
    with pytest.raises(ConfigError, match=r"llm_structured \(RECAGENTS_LLM_STRUCTURED\)='xml'"):
        Settings(cache_dir=tmp_path, llm_structured="xml")  # type: ignore[arg-type]


def test_an_unknown_structured_mode_from_the_environment_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from recagents.config import settings

    monkeypatch.setenv("RECAGENTS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("RECAGENTS_LLM_STRUCTURED", "xml")
    with pytest.raises(ConfigError, match=r"\(RECAGENTS_LLM_STRUCTURED\)='xml' is not one of"):
        settings()


def test_training_settings_use_it_too() -> None:
    from recagents.baselines import TrainConfig

    assert TrainConfig(epochs=0).epochs == 0  # no training: Pop and Random need none
    with pytest.raises(ConfigError, match=r"TrainConfig.learning_rate=0.0 is out of range"):
        TrainConfig(learning_rate=0.0)
    with pytest.raises(ConfigError, match=r"TrainConfig.stopping_step=0 is out of range"):
        TrainConfig(stopping_step=0)
