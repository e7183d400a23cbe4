"""Find credentials in text before it is stored or shared (reply cache, reply bundles).

Why: a reply bundle is handed to a whole class and a reply cache is copied between machines;
neither may carry a key. Three kinds of evidence are looked for:

- the values of environment variables whose names look like credentials (``*_KEY``,
  ``*_TOKEN``, ``*SECRET*``, ``*PASSWORD*``, ...; values under
  :data:`MIN_SECRET_CHARS` characters and well-known placeholders are ignored), matched both
  raw and JSON-escaped, so that a secret holding a quote or a backslash is found inside JSON;
- JSON fields, at any depth, whose names look like credentials (``api-key``, ``x-api-key``,
  ``apiKey``, ``access_token``, ``Authorization``, ``password``, ``secret``, ...), compared
  case- and separator-insensitively (see :func:`is_credential_name`);
- strings shaped like well-known credentials, found by the regular-expression plugins of
  Yelp's ``detect-secrets`` library plus the few providers it does not know (Anthropic,
  Hugging Face, Groq, GitHub fine-grained tokens, Google API keys, generic ``sk-`` keys and
  ``Bearer`` tokens), and quoted strings of high-entropy Base64.

Left out of ``detect-secrets``' plugins on purpose: ``HexHighEntropyString`` (every cache key
and checksum in a bundle is a 64-character SHA-256 hex digest, which it flags),
``KeywordDetector`` (prose that mentions a password; JSON fields are checked by name),
``IPPublicDetector`` (an address is not a credential), and the vendor-specific
``name = value`` patterns of Artifactory, Cloudant, IBM and SoftLayer (70% of the scan time
on real agent logs). The plugins are called directly, never through ``detect-secrets``'
process-wide settings, so a scan has no side effects and is safe from several threads.

Descriptions name the kind of secret, the variable or the field, never the secret itself.

Nothing happens at import time; ``detect-secrets`` is imported on the first full scan.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from typing import Any

MIN_SECRET_CHARS = 8
"""Values of secret-named environment variables shorter than this are not looked for."""

# Placeholders that local servers and tutorials put into OPENAI_API_KEY and the like.
_PLACEHOLDERS = frozenset({"not-needed", "sk-no-key-required", "placeholder", "changeme"})

# Environment variable names (upper-cased): a substring anywhere, a whole "_"-separated part,
# or the end of a part (HF_TOKEN, ACCESSTOKEN; not TOKENIZERS_PARALLELISM).
_ENV_SUBSTRINGS = ("SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "APIKEY", "ACCESSKEY")
_ENV_PARTS = frozenset({"KEY", "KEYS", "PAT", "CREDENTIAL", "CREDENTIALS"})
_ENV_PART_ENDS = ("TOKEN", "TOKENS")

# JSON field names, lower-cased with everything but letters and digits removed.
_CREDENTIAL_NAME = re.compile(
    r"(apikey|apitoken|accesskey|secretkey|privatekey|authkey|subscriptionkey|token|secret"
    r"|password|passwd|passphrase|authorization|credentials?|cookie)$"
)
_JSON_KEY = re.compile(r'"([^"\\]{1,200})"\s*:')
_NOT_ALNUM = re.compile(r"[^a-z0-9]")


@functools.lru_cache(maxsize=1024)
def _is_secret_env_name(name: str) -> bool:
    """Whether an environment variable of this name holds a secret (cached per name)."""
    upper = name.upper()
    if upper in {"PWD", "OLDPWD"}:  # the working directory, not a password
        return False
    parts = set(re.split(r"[^A-Z0-9]+", upper))
    return (
        any(s in upper for s in _ENV_SUBSTRINGS)
        or bool(parts & _ENV_PARTS)
        or any(part.endswith(_ENV_PART_ENDS) for part in parts)
    )


@functools.lru_cache(maxsize=256)
def _forms(value: str) -> tuple[str, ...]:
    """The value as it appears raw and inside JSON text (escaped, with or without ASCII)."""
    forms = (value, json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1])
    return tuple(dict.fromkeys(forms))


def env_secrets_in(text: str, environ: dict[str, str] | None = None) -> list[str]:
    """Names of the secret-named environment variables whose values occur in ``text``.

    Cheap enough for every request the reply cache hashes (a few microseconds per variable).

    Args:
        text: The text to search.
        environ: The environment to read (default: ``os.environ``).

    Returns:
        The variable names, sorted; never their values.
    """
    found = []
    for name, value in (os.environ if environ is None else environ).items():
        if len(value) < MIN_SECRET_CHARS or not _is_secret_env_name(name):
            continue
        if value.lower() in _PLACEHOLDERS:
            continue
        if any(form in text for form in _forms(value)):
            found.append(name)
    return sorted(found)


def is_credential_name(name: str) -> bool:
    """Whether a JSON field name looks like a credential (``x-api-key``, ``apiKey``, ...).

    Case, ``-``, ``_`` and other separators are ignored; token *counts* (``max_tokens``,
    ``prompt_tokens``) are not credentials.
    """
    return bool(_CREDENTIAL_NAME.search(_NOT_ALNUM.sub("", name.lower())))


def _credential_fields(text: str) -> list[str]:
    """Names of the JSON object keys in ``text`` that look like credentials.

    In JSON text every quote inside a string is escaped, so ``"name":`` with unescaped
    quotes is an object key; keys quoted inside a message's text are not matched.
    """
    return sorted({m.group(1) for m in _JSON_KEY.finditer(text) if is_credential_name(m.group(1))})


@functools.lru_cache(maxsize=1)
def _plugins() -> tuple[Any, ...]:
    """The detect-secrets plugins used, plus those for providers it does not know.

    Listed by name rather than discovered, so that no plugin file named in detect-secrets'
    process-wide settings is ever loaded.
    """
    # Imported here: only a full scan needs them.
    from detect_secrets.plugins import (
        aws,
        azure_storage_key,
        basic_auth,
        discord,
        github_token,
        gitlab_token,
        high_entropy_strings,
        jwt,
        mailchimp,
        npm,
        openai,
        private_key,
        pypi_token,
        sendgrid,
        slack,
        square_oauth,
        stripe,
        telegram_token,
        twilio,
    )
    from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector

    library: list[type[BasePlugin]] = [
        aws.AWSKeyDetector,
        azure_storage_key.AzureStorageKeyDetector,
        basic_auth.BasicAuthDetector,
        discord.DiscordBotTokenDetector,
        github_token.GitHubTokenDetector,
        gitlab_token.GitLabTokenDetector,
        jwt.JwtTokenDetector,
        mailchimp.MailchimpDetector,
        npm.NpmDetector,
        openai.OpenAIDetector,
        private_key.PrivateKeyDetector,
        pypi_token.PypiTokenDetector,
        sendgrid.SendGridDetector,
        slack.SlackDetector,
        square_oauth.SquareOAuthDetector,
        stripe.StripeDetector,
        telegram_token.TelegramBotTokenDetector,
        twilio.TwilioKeyDetector,
        high_entropy_strings.Base64HighEntropyString,  # quoted strings only, entropy > 4.5
    ]

    def extra(secret_type: str, pattern: str) -> type[RegexBasedDetector]:
        """A detect-secrets regex plugin for a provider the library does not know."""
        name = re.sub(r"\W", "", secret_type.title()) + "Detector"
        denylist = (re.compile(pattern),)
        return type(name, (RegexBasedDetector,), {"secret_type": secret_type, "denylist": denylist})

    # Each token must hold a digit: real keys do (random base-62), prose words do not.
    digit = r"(?=[A-Za-z_\-]*\d)"
    extras = [
        extra("Anthropic key", rf"sk-ant-{digit}[A-Za-z0-9_\-]{{20,}}"),
        extra("sk- style API key", rf"sk-(?<![A-Za-z0-9_\-]sk-){digit}[A-Za-z0-9_\-]{{20,}}"),
        extra("Hugging Face token", r"hf_(?<![A-Za-z0-9]hf_)[A-Za-z0-9]{30,}"),
        extra("Groq key", r"gsk_(?<![A-Za-z0-9]gsk_)[A-Za-z0-9]{20,}"),
        extra("GitHub fine-grained token", r"github_pat_[A-Za-z0-9_]{22,}"),
        extra("Google API key", r"AIza[0-9A-Za-z_\-]{35}"),
        extra("Bearer token", r"(?i:\bbearer)\s+(?=[A-Za-z0-9._~+/\-]*\d)[A-Za-z0-9._~+/\-]{16,}"),
    ]
    return tuple(cls() for cls in (*library, *extras))


def _shaped_like_keys(text: str) -> list[str]:
    """Descriptions of the credential-shaped strings in ``text``, one per plugin that fires."""
    found = []
    for plugin in _plugins():
        limit = getattr(plugin, "entropy_limit", None)
        for candidate in plugin.analyze_string(text):
            # A string of n characters has at most log2(n) bits of entropy per character:
            # shorter ones cannot pass the limit, and computing it for every quoted JSON key
            # and word was most of an export's time.
            if limit is not None and (
                math.log2(max(len(candidate), 1)) <= limit
                or plugin.calculate_shannon_entropy(candidate) <= limit
            ):
                continue
            found.append(f"a string shaped like an API key or token ({plugin.secret_type})")
            break
    return found


def find_secrets(text: str, environ: dict[str, str] | None = None) -> list[str]:
    """Describe every credential found in ``text``; an empty list means none was found.

    Args:
        text: Any text; JSON text also has its object keys checked.
        environ: The environment whose secret-named values are looked for (default:
            ``os.environ``).

    Returns:
        One description per finding, e.g. ``"the value of the environment variable
        AZURE_OPENAI_KEY"`` or ``"a field named 'x-api-key'"``; never the secret itself.
    """
    found = [f"the value of the environment variable {n}" for n in env_secrets_in(text, environ)]
    found += [f"a field named {name!r}" for name in _credential_fields(text)]
    return found + _shaped_like_keys(text)
