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

Its modules, one line each, are in MODULES.md (generated from their docstrings).

Importing the package imports none of its modules.
"""
