"""Provider failure classification, and why a run ended.

A provider refusal arrives as an SDK exception, an HTTP response, a streamed error
event or, for Anthropic, even as a successful message whose ``stop_reason`` is
``model_context_window_exceeded``. :func:`classify_failure` turns any of them into one
frozen :class:`Failure` value: what kind of failure it is, whether the same request
sent again unchanged may succeed (``retryable``), how long the server asked us to wait,
and the token numbers its message states (prompt, window, requested output, output cap).

Invariants:
    * Classification reads the status, the body's ``type``/``code``, the headers
      (``retry-after-ms``, ``retry-after`` in seconds, a Go duration such as ``1m26.4s``
      or an HTTP date, ``x-should-retry``, Bedrock's ``x-amzn-errortype``) and message
      patterns; never an SDK's class names, and it imports no SDK or HTTP library
      (responses are duck-typed). A wait is finite and never negative, or None.
    * It never raises on a provider's answer: what it cannot place is ``UNKNOWN``.
    * A context overflow is never retryable as is; only a smaller request can pass.
      A prompt count stated as "at least P" is flagged ``prompt_tokens_is_lower_bound``.
    * Traps kept apart: output-cap refusals are ``OUTPUT_LIMIT``; Bedrock's
      ``ThrottlingException: Too many tokens`` is ``RATE_LIMIT``; per-field length limits
      (``string_above_max_length``) are ``INVALID_REQUEST``; one request above the whole
      per-minute budget ("Request too large for ... (TPM)") is ``REQUEST_TOO_LARGE``.
    * The status gates the patterns: only 400, 413, 422, 500 or no status at all
      (:data:`LENGTH_STATUSES`) may be read as an overflow or an output-cap refusal.
    * A 501 (llama.cpp's ``not_supported_error``) is ``SERVER`` but never retryable: the
      server lacks the feature. Groq's 498 (flex tier at capacity) is ``OVERLOADED``.
    * Messages are redacted: no credential a server echoed reaches a Failure.

Layout (one concept per module; this package is the only public path):
    * ``_values``: :class:`FailureKind`, :class:`Failure`, :class:`TerminationReason`.
    * ``_patterns``: the message patterns and code tables, compiled in part from the
      templates in :mod:`windowguard.core.provider_errors` so the emulator and the
      classifier cannot drift.
    * ``_sources``: reading SDK exceptions, HTTP responses, bodies and headers.
    * ``_classify``: :func:`classify_failure`, the decision itself.
    * ``_redact``: :func:`redact_secrets`, which takes credential-shaped strings out of
      a message before it reaches a Failure, an event, a log or an exception.
"""

from __future__ import annotations

from ..redact import redact_secrets
from ._classify import LENGTH_STATUSES, classify_failure
from ._values import TRANSIENT_KINDS, Failure, FailureKind, TerminationReason

__all__ = [
    "LENGTH_STATUSES",
    "TRANSIENT_KINDS",
    "Failure",
    "FailureKind",
    "TerminationReason",
    "classify_failure",
    "redact_secrets",
]

# The public names keep the module users import them from, as before the split
# (httpx's __init__ does the same): help(), reprs of the classes and pickles name
# windowguard.core.failures, never a private submodule.
FailureKind.__module__ = __name__
Failure.__module__ = __name__
TerminationReason.__module__ = __name__
classify_failure.__module__ = __name__
redact_secrets.__module__ = __name__
