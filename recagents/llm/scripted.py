"""A stand-in for the LLM client whose replies come from a Python policy: demonstrations only.

Why: the embedded model is at chance on every taste judgement, so some mechanisms never fire
with it (an AFL user agent that never rejects, an Agent4Rec agent that always leaves on page
1). A *scripted* policy makes such a mechanism visible: the paper's own loop runs unchanged,
and only the replies of one role come from a rule written in Python. Its results are named
``scripted:<name>`` everywhere (the client's :attr:`ScriptedClient.model`) and are never an
LLM result.

:class:`ScriptedClient` has the one method the papers' loops use, :meth:`ScriptedClient.map`.
Each reply is checked against the request's JSON schema, exactly as a model's reply is, so a
policy that answers out of schema is a counted failure, not a silent pass. Requests the
policy declines (it returns :data:`PASS`) go to a fallback client, for example the embedded
model, so one role can be scripted while the other stays an LLM.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from recagents.llm.client import ChatRequest, ChatResult, Usage
from recagents.llm.schemas import validate_json
from recagents.resources import import_jsonschema

#: What a policy returns for a request it does not answer (it goes to the fallback client).
PASS = object()


class ScriptedClient:
    """Answers chat requests with ``policy(request)``; unanswered ones go to ``fallback``.

    Args:
        policy: Returns the reply for one request: a JSON-able object when the request has a
            schema, a string otherwise, or :data:`PASS` to hand the request to ``fallback``.
        name: What the policy is (shown as ``scripted:<name>`` in logs and tables).
        fallback: The client for requests the policy passes on (``None``: passing is an
            error).
    """

    def __init__(
        self,
        policy: Callable[[ChatRequest], Any],
        name: str,
        fallback: Any | None = None,
    ) -> None:
        self.policy = policy
        self.fallback = fallback
        self.model = f"scripted:{name}"
        self.usage = Usage(model=self.model)

    def _answer(self, request: ChatRequest, reply: Any) -> ChatResult:
        """One scripted reply as a result, validated against the request's schema."""
        self.usage.requests += 1
        if request.schema is None:
            return ChatResult(ok=True, text=str(reply), tag=request.tag)
        jsonschema = import_jsonschema()
        text = json.dumps(reply, ensure_ascii=False)
        try:
            validate_json(reply, request.schema)
        except jsonschema.ValidationError as error:
            self.usage.invalid_outputs += 1
            message = f"scripted reply does not match the schema: {error.message}"
            return ChatResult(
                ok=False, text=text, error=message, failure="invalid", tag=request.tag
            )
        return ChatResult(ok=True, text=text, data=reply, tag=request.tag)

    def map(
        self,
        requests: Sequence[ChatRequest],
        concurrency: int | None = None,
        progress: bool = True,
        desc: str = "scripted",
        order: str | None = None,
        raise_unreachable: bool = True,
    ) -> list[ChatResult]:
        """Answer each request in order; the same signature as :meth:`LLMClient.map`."""
        results: list[ChatResult | None] = []
        passed: list[int] = []
        for index, request in enumerate(requests):
            reply = self.policy(request)
            if reply is PASS:
                passed.append(index)
                results.append(None)
            else:
                results.append(self._answer(request, reply))
        if passed:
            if self.fallback is None:
                raise ValueError(
                    f"{self.model} passed {len(passed)} request(s) of {desc!r} on and has no "
                    "fallback client"
                )
            answered = self.fallback.map(
                [requests[i] for i in passed],
                concurrency=concurrency,
                progress=progress,
                desc=desc,
                order=order,
                raise_unreachable=raise_unreachable,
            )
            for index, result in zip(passed, answered, strict=True):
                results[index] = result
        return [result for result in results if result is not None]
