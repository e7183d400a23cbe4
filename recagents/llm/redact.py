"""Mask credentials in endpoint URLs before any message, log, repr or record shows one.

Why: an OpenAI-compatible endpoint may carry its credentials in the URL itself, as user
info (``http://user:PASSWORD@host/v1``) or as a query parameter (``?api-key=...``, as some
gateways expect). Every place that shows an endpoint, and every error text that may embed
one (the openai and httpx libraries put the request URL in some of theirs), goes through
:func:`redact_url` so that the secret never reaches a notebook, a log or a bundle.
Nothing happens at import time.
"""

from __future__ import annotations

import logging
import re

#: What a credential is replaced with.
MASK = "***"

# A URL with a scheme, inside any text: up to whitespace, a quote or an angle bracket.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")

# Query or fragment parameter names that carry credentials (compared after lower-casing
# and dropping ``-``, ``_`` and ``.``): api-key, x-api-key, access_token, sig, password...
_CREDENTIAL_NAME = re.compile(
    r"key|token|secret|pass|pwd|auth|sig|credential|session|cookie|jwt|bearer|code"
)


def _mask_parameters(text: str) -> str:
    """``a=1&api-key=S`` -> ``a=1&api-key=***``; other parameters are kept byte for byte."""
    parts = []
    for part in re.split(r"([&;])", text):
        name, sep, value = part.partition("=")
        plain = re.sub(r"[-_.]", "", name.lower())
        if sep and value and _CREDENTIAL_NAME.search(plain):
            part = f"{name}={MASK}"
        parts.append(part)
    return "".join(parts)


def _redact_one(url: str) -> str:
    """Redact one URL that starts with ``scheme://``."""
    scheme, _, rest = url.partition("://")
    # The authority ends at the first "?" or "#". A "/" does not end it here: a password
    # with a raw "/" (which no client parses as intended) must still be masked whole.
    end = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    head, tail = rest[:end], rest[end:]
    if "@" in head:
        head = f"{MASK}@{head.rpartition('@')[2]}"
    query, hash_, fragment = tail.partition("#")
    if query.startswith("?"):
        query = "?" + _mask_parameters(query[1:])
    if hash_:
        fragment = _mask_parameters(fragment)
    return f"{scheme}://{head}{query}{hash_}{fragment}"


def redact_url(text: str | None) -> str:
    """Return ``text`` with the credentials of every URL in it masked as ``***``.

    ``text`` may be a bare URL or any message that contains URLs (an exception's text, a log
    line). In each URL the user info (``user:password@``) becomes ``***@`` and the value of
    each query or fragment parameter named like a credential (``api-key``, ``key``,
    ``access_token``, ``sig``, ``password``...) becomes ``***``; the scheme, host, port,
    path and other parameters are kept, so the message still says which endpoint it was.

    Args:
        text: A URL or a message; ``None`` gives ``""``.

    Returns:
        The text with credentials masked (unchanged when it holds none).

    Examples:
        >>> redact_url("http://u:PASS@127.0.0.1:8080/v1?api-key=PASS&x=1")
        'http://***@127.0.0.1:8080/v1?api-key=***&x=1'
    """
    if not text:
        return ""
    text = str(text)
    if "://" not in text and "@" in text and not any(c.isspace() for c in text):
        # A bare endpoint without a scheme, ``user:password@host:port/v1``.
        return _redact_one(f"x://{text}")[4:]
    # Punctuation after a URL ("(see http://h/v1?key=S).") is taken as part of it: a masked
    # value may swallow a ")" or ".", but no character of a secret is ever left behind.
    return _URL.sub(lambda match: _redact_one(match.group(0)), text)


#: Loggers of the HTTP stack that write request URLs (``httpx`` logs every request's URL,
#: user info included, at INFO). ``httpx2`` and ``httpcore2`` are the names some builds of
#: the openai SDK vendor them under.
HTTP_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "openai._base_client")


class RedactingFilter(logging.Filter):
    """A logging filter that passes every record with :func:`redact_url` applied to it."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record's message when it holds a credential; never drop it."""
        message = record.getMessage()
        clean = redact_url(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def redact_http_logs() -> None:
    """Attach one :class:`RedactingFilter` to each of :data:`HTTP_LOGGERS` (idempotent).

    Called when an :class:`~recagents.llm.client.LLMClient` is made, not at import. A record
    is only built when its logger is enabled, so this costs nothing while logging is off.
    """
    for name in HTTP_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
