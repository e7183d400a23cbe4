"""AFL: a recommendation agent and a user agent in a feedback loop.

Cai et al., *Agentic Feedback Loop Modeling Improves Recommendation and User Simulation*,
SIGIR 2025 (arXiv 2410.20027).

A recommendation agent sees a user's recent history and 20 candidates (plus, in the first
round, a sequential recommender's top pick) and proposes one item with a reason. A user
agent, playing that user, accepts it or rejects it with a reason. Each rejection goes into
both agents' memories and the recommendation agent tries again, until the user agent accepts
or a round limit is reached; the prediction is the last proposal. One round alone is the
*single recommendation agent*. The dialogue memory also makes the user agent a better *user
simulator* (like / dislike judgements).

Modules, in the order a run uses them: ``config`` (:class:`~.config.AFLConfig`, the paper's
settings as defaults; where the paper and its code disagree, an option), ``samples`` (one
:class:`~.samples.Sample` per test user with the SASRec tool's view), ``prompts`` (pure
prompt builders, schemas and parsers), ``loop`` (the feedback loop, batched over samples,
every call accounted), ``user_simulation`` (the like / dislike protocol at 1:1, 1:3, 1:9),
``evaluate`` (HR@1 by round limit, stops, simulation metrics), ``scripted`` (a scripted user
agent for demonstrations, never an LLM result), ``seeds`` (AFL against the single agent over
several seeds), ``analysis`` (bias, figures, a dialogue trace) and ``entry`` (the plug-in:
``run`` and ``rank``). Importing the package runs nothing.
"""
