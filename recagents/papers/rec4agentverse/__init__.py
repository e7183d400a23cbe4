"""Rec4Agentverse: a recommender that routes users to agent items and talks with them.

Zhang et al., *Prospect Personalized Recommendation on Large Language Model-based Agent
Platform* (arXiv 2402.18240; CACM 2025). A perspective paper with no code and no numbers:
when the items of a platform are LLM agents ("agent items"), the recommender ("Agent
Recommender") not only picks an agent for a user but also exchanges information with it.
Three stages add flows: (1) user <-> agent item, the user talks to the recommended agent over
several turns; (2) agent item <-> recommender, the agent reports the preferences it learned,
and the recommender updates its profile of the user and instructs the agent or switches to a
better one; (3) agent items <-> agent items, the recommender brokers a consultation, the
current agent receives shortlists from other agents and its final list merges them.
Everything measured here is our own demonstration protocol on MovieLens-100K, not the paper's.

Its modules, one line each, are in MODULES.md (generated from their docstrings).
"""
