"""One subpackage per paper, each a plug-in: its ``entry`` module satisfies :class:`Paper`.

``agentcf``, ``agent4rec``, ``afl``, ``interecagent`` and ``rec4agentverse`` each hold
``config`` (the paper's settings as defaults), ``prompts`` (pure prompt builders, reply
schemas and parsers), the agent or loop, ``evaluate`` and ``entry`` (the plug-in: names,
profiles, ``run`` and ``rank``). No paper imports another: what they share lives in
:mod:`recagents.llm`, :mod:`recagents.protocol`, :mod:`recagents.data`,
:mod:`recagents.metrics` and :mod:`recagents.baselines`. :func:`registry` finds them; importing
this package imports no paper.
"""

from __future__ import annotations

import importlib
import pkgutil

from recagents.protocol import Paper


def registry() -> dict[str, Paper]:
    """Every paper under this package, by name, in the order of its notebook.

    A subpackage is a paper when it has an ``entry`` module; that module must satisfy
    :class:`~recagents.protocol.Paper`.

    Raises:
        TypeError: An entry module lacks a name of the contract (the message lists them).
    """
    found: list[Paper] = []
    for info in pkgutil.iter_modules(__path__):
        if not info.ispkg:
            continue
        try:
            module = importlib.import_module(f"{__name__}.{info.name}.entry")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{info.name}.entry":
                raise
            continue
        if not isinstance(module, Paper):
            wanted = [*Paper.__annotations__, "run", "rank"]
            missing = [name for name in wanted if not hasattr(module, name)]
            raise TypeError(f"{module.__name__} is not a Paper: it lacks {missing}")
        found.append(module)
    return {paper.PAPER: paper for paper in sorted(found, key=lambda paper: paper.NOTEBOOK)}


def get(name: str) -> Paper:
    """The paper called ``name`` (e.g. ``"AFL"``).

    Raises:
        KeyError: No such paper (the message lists the ones there are).
    """
    papers = registry()
    if name not in papers:
        raise KeyError(f"no paper {name!r}; there are {sorted(papers)}")
    return papers[name]
