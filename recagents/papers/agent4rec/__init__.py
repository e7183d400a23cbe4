"""Agent4Rec: generative user agents that browse recommendations (SIGIR 2024).

Zhang et al., *On Generative Agents in Recommendation*, SIGIR 2024 (arXiv 2310.10108).

One LLM agent per real user: three social traits computed from the data (activity,
conformity, diversity), a taste persona the LLM writes from the user's ratings, and a memory.
A recommender's ranked list is shown 4 items a page, at most 5 pages; on each page the agent
judges every item, watches some and rates them with a feeling, then leaves or turns the page;
afterwards it is interviewed about its satisfaction (1-10). The paper uses such simulations to
check that agents act like their users (taste discrimination, trait alignment), to compare
recommenders offline, to retrain on simulated feedback, to watch a filter bubble form and for
causal discovery.

Modules, from the settings to the analyses:

- :mod:`~recagents.papers.agent4rec.config`: :class:`Agent4RecConfig` (the paper's settings
  as defaults), the traits and their percentile cuts, the recommenders compared.
- :mod:`~recagents.papers.agent4rec.prompts`: pure prompt builders (``*_messages``), reply
  schemas and parsers, and the trait sentences of the role prompt.
- :mod:`~recagents.papers.agent4rec.agents`: the paper's random split, item lines, and
  ``build_agents`` (traits and personas).
- :mod:`~recagents.papers.agent4rec.loop`: the page-by-page loop (``simulate`` and its steps).
- :mod:`~recagents.papers.agent4rec.evaluate`: the taste probe, the recommenders' lists and
  offline accuracy, feedback retraining and the filter-bubble rounds.
- :mod:`~recagents.papers.agent4rec.frames`: the log formats and their checks.
- :mod:`~recagents.papers.agent4rec.traits`: ``compute_traits`` and trait alignment
  (behaviour by level, ANOVA, figure).
- :mod:`~recagents.papers.agent4rec.engagement`: engagement per recommender, satisfaction by
  trait level, rating distribution.
- :mod:`~recagents.papers.agent4rec.bubble`: genre concentration round by round.
- :mod:`~recagents.papers.agent4rec.causal`: the per-item table, DirectLiNGAM, the graph.
- :mod:`~recagents.papers.agent4rec.recorded`: the authors' recorded run (read only from a
  folder passed in or named by ``$RECAGENTS_AGENT4REC_RECORDED``) and its safe pickle loader.
- :mod:`~recagents.papers.agent4rec.replay`: the recorded run's decisions replayed through
  our loop, compared with the records agent by agent and with ``metrics.txt``.
- :mod:`~recagents.papers.agent4rec.scripted`: a scripted browsing agent (a rule, not an
  LLM) that keeps browsing, so later pages, retrieved memories and the reflection appear.
- :mod:`~recagents.papers.agent4rec.entry`: the plug-in (:class:`recagents.protocol.Paper`):
  notebook 02's recommender comparison as ``run`` and the steps it takes.

Importing the package imports none of its modules.
"""
