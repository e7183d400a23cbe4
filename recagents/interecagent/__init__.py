"""InteRecAgent (Huang et al., 2023): a language model that plans calls to recommender tools.

- :mod:`recagents.interecagent.tools`: everything that needs no language model: the item
  table and its read-only SQL, the candidate bus, the six tools, plan validation and
  execution, the conversation metrics and the Random / Pop baselines.
- :mod:`recagents.interecagent.agent`: the language-model side: planner (plan-first or
  step-by-step), demonstrations, critic (reflection), summariser, dialogue memory, and the
  LLM-without-tools baseline.
- :mod:`recagents.interecagent.evaluate`: the paper's evaluation: a simulated user who knows a
  held-out target, multi-turn sessions (Hit@5, AT@5), one-turn retrieval and ranking.

This file imports nothing, so importing the package has no side effects.
"""
