"""recagents: a tested companion to five LLM-agent recommender papers.

Importing the package has no side effects; each module is imported on demand.
"""

__version__ = "0.1.0"
