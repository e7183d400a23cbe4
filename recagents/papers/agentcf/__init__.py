"""AgentCF: user and item agents that learn by collaborative reflection.

Zhang et al., *AgentCF: Collaborative Learning with Autonomous Language Agents for
Recommender Systems*, WWW 2024 (arXiv 2310.09233).

Users *and* items are LLM agents whose only parameters are text memories. Training replays
real interactions as pairwise choices: the user agent picks between the real next item and a
popularity-sampled negative and says why; then both sides rewrite their memories
("collaborative reflection"). Item memories are shared, so what one user teaches an item
reaches every later user of it. At test time a user agent ranks 1 + 9 candidates, each shown
with its item memory. Every quirk of the official code is an option of
:class:`~recagents.papers.agentcf.config.AgentCFConfig` whose default is the paper's behaviour.

Its modules, one line each, are in MODULES.md (generated from their docstrings).
"""
