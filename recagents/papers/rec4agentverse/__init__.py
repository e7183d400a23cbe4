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

Modules, in the order a run uses them:

- ``config``: every setting (``Rec4AConfig``, our defaults; the paper gives none), the
  genre and era vocabularies, the consent field groups.
- ``catalogue``: about ten curator agent items over genre x era slices of the films, and
  one adversarial agent.
- ``users``: simulated users with hidden tastes from real ml-100k ratings; held-out films
  are the targets.
- ``recommender``: its profile of a user, the instructions it gives agents, its classic scorer.
- ``prompts``: pure prompt builders, reply schemas and parsers.
- ``reports``: what an agent tells the recommender, the consent gate and the strict schema.
- ``templates``: the rule-based user and agents (no LLM), a named baseline.
- ``session``: session state, the trace and the batched steps of a turn.
- ``stages``: the protocol of the three stages.
- ``manipulation``: an adversarial agent tries to get itself recommended.
- ``evaluate``: the session metrics; ``analysis``: tables, figure and trace for the notebook.
- ``entry``: the plug-in (:class:`~recagents.protocol.Paper`): the stage comparison in one
  call.
"""
