"""The LLM layer: every model call in the project goes through here.

:func:`~recagents.llm.client.get_client` gives one process-wide
:class:`~recagents.llm.client.LLMClient` built from the environment (see
:mod:`recagents.config`): with nothing set, the embedded SmolLM2-135M behind a local llama.cpp
server; with ``RECAGENTS_LLM_BASE_URL`` and ``RECAGENTS_LLM_MODEL``, any OpenAI-compatible
endpoint; with ``RECAGENTS_REPLAY`` naming a reply bundle, no endpoint at all (see
:mod:`recagents.llm.bundle`). :func:`recagents.llm.embed.embed` gives cached text embeddings.
Importing this package starts nothing.
"""
