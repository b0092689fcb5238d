"""Redaction: credential-shaped strings taken out of text before anyone else sees it.

Servers and gateways sometimes echo what they were sent: an API key in "Incorrect API key
provided: sk-...", an ``Authorization: Bearer ...`` header quoted in a proxy's error page,
a Gemini key in a URL's ``?key=`` parameter. :func:`redact_secrets` replaces such values
with ``[REDACTED]`` so that they never reach a :class:`~windowguard.core.failures.Failure`'s
message, the events and logs made from it, OpenTelemetry attributes or an exception's
message. It is applied where failures are classified, in ``ProviderError``, and again by
every shipped sink as a last line of defence.

Invariants:
    * One function, pure and idempotent: ``redact_secrets(redact_secrets(t)) ==
      redact_secrets(t)``; text without a credential comes back unchanged (the same
      object), so token counts, statuses and codes in a message survive.
    * What it recognises: provider key formats (OpenAI/Anthropic/OpenRouter ``sk-``,
      Google ``AIza``, Groq ``gsk_``, xAI ``xai-``, Hugging Face ``hf_``, Perplexity
      ``pplx-``, NVIDIA ``nvapi-``, Replicate ``r8_``, GitHub ``ghp_``/``github_pat_``,
      AWS access key ids), JSON Web Tokens, ``Bearer``/``Basic`` credentials, and the
      value of a credential-named header, field or query parameter (``x-api-key``,
      ``api-key``, ``api_key``, ``x-goog-api-key``, ``authorization``, ``access_token``,
      ``client_secret``, ``password``, ``?key=`` ...).
    * It is a safety net, not a guarantee: a secret in no recognisable shape passes.
"""

from __future__ import annotations

import re

__all__ = ["REDACTED", "redact_secrets"]

REDACTED = "[REDACTED]"

# Provider key formats: a prefix, then a run of key characters long enough not to be a word.
_KEY_SHAPES = re.compile(
    r"\b(?:"
    r"sk-[A-Za-z0-9_\-*]{8,}"  # OpenAI sk-/sk-proj-, Anthropic sk-ant-, OpenRouter sk-or-
    r"|AIza[0-9A-Za-z_\-]{30,}"  # Google API keys
    r"|gsk_[A-Za-z0-9]{16,}"  # Groq
    r"|xai-[A-Za-z0-9]{16,}"  # xAI
    r"|hf_[A-Za-z0-9]{16,}"  # Hugging Face
    r"|pplx-[A-Za-z0-9]{16,}"  # Perplexity
    r"|nvapi-[A-Za-z0-9_\-]{16,}"  # NVIDIA
    r"|r8_[A-Za-z0-9]{16,}"  # Replicate
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"  # GitHub
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"  # JSON Web Tokens
    r")"
)
# "Bearer <token>", "Basic <base64>": the scheme stays, the credential goes.
_SCHEME = re.compile(r"\b(Bearer|Basic)(\s+)(?!\[REDACTED\])[A-Za-z0-9._~+/=\-]{6,}", re.IGNORECASE)
# A credential-named header, JSON field or form/query parameter, then its value:
# 'x-api-key: v', '"api_key": "v"', "'Authorization': 'v'", 'password=v', '?key=v'.
_NAMED = re.compile(
    r"""(?ix)
    (
        (?:\b(?:x-api-key|x-goog-api-key|api[-_]?key|apikey|authorization|
               proxy-authorization|x-auth-token|access[-_]?token|refresh[-_]?token|
               id[-_]?token|client[-_]?secret|secret[-_]?key|password|passwd)\b
         |[?&]key\b)
        ["']?\s*[:=]\s*["']?
    )
    (?!\[REDACTED\])
    (?!(?:Bearer|Basic)\s)
    ([^\s"'&,;})\]]{4,})
    """
)


def redact_secrets(text: str) -> str:
    """``text`` with credential-shaped substrings replaced by ``[REDACTED]``.

    Args:
        text: any text: an error body, a message, a log line.

    Returns:
        The redacted text; ``text`` itself when nothing credential-shaped is in it.

    Examples:
        >>> redact_secrets("Incorrect API key provided: sk-proj-abcdefgh12345678.")
        'Incorrect API key provided: [REDACTED].'
        >>> redact_secrets("header x-api-key: abc123def456")
        'header x-api-key: [REDACTED]'
    """
    if not isinstance(text, str) or not text:
        return text
    redacted = _SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    redacted = _NAMED.sub(lambda m: f"{m.group(1)}{REDACTED}", redacted)
    redacted = _KEY_SHAPES.sub(REDACTED, redacted)
    return text if redacted == text else redacted
