"""Agent4Rec: generative user agents that browse recommendations (SIGIR 2024).

``simulate`` holds the agents, their prompts and the page-by-page loop (LLM calls);
``analysis`` holds everything computed from the logs without an LLM: traits, engagement,
rating distributions, trait alignment, the filter bubble and causal discovery. Importing
this package starts nothing.
"""
