"""InteRecAgent: a language model that plans calls to recommender tools.

Huang et al., *Recommender AI Agent: Integrating Large Language Models for Interactive
Recommendations* (arXiv 2308.16505; ACM TOIS 2025).

The LLM is the "brain" of a conversational recommender and classic recommender components
are its tools: a read-only SQL look-up and hard filter over the item table, an ItemCF soft
filter, a popularity / similarity / SASRec ranker and a title mapper. The tools hand item ids
to each other through a shared *candidate bus*, so item lists never enter a prompt. Per user
message a planner writes a whole tool plan at once ("plan-first"; or one tool per call,
ReAct), the executor runs it, and a critic may send it back with advice (reflection); a
dialogue memory, optionally a profile of stated likes and dislikes, carries the
conversation. The paper evaluates it with an LLM that plays a user looking for one held-out
item (Hit@5, AT@5) and with one-turn retrieval and ranking tasks, against the same LLM
without tools and Random / Pop.

Its modules, one line each, are in MODULES.md (generated from their docstrings).

Importing the package imports none of them.
"""
