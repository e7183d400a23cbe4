"""One subpackage per paper, each with the same anatomy.

``agentcf``, ``agent4rec``, ``afl``, ``interecagent`` and ``rec4agentverse`` each hold
``config`` (the paper's settings as defaults), ``prompts`` (pure prompt builders, reply
schemas and parsers), the agent or loop, ``evaluate`` and ``analysis``, and re-export their
public API from the package, so ``from recagents.papers import agentcf`` is all a notebook
needs. No paper imports another: what they share lives in :mod:`recagents.llm`,
:mod:`recagents.protocol`, :mod:`recagents.data`, :mod:`recagents.metrics` and
:mod:`recagents.baselines`. Importing this package imports no paper.
"""
