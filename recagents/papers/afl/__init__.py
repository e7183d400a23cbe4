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

Its modules, one line each, are in MODULES.md (generated from their docstrings).
"""
