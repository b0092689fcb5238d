"""The values of failure classification: a failure's kind, the failure, a run's end.

:class:`Failure` is what :func:`~windowguard.core.failures.classify_failure` returns for any
provider refusal; :class:`FailureKind` names what went wrong and :class:`TerminationReason`
why a tool-loop run ended.

Invariants:
    * Values only: frozen, slotted, keyword-only, no clock or identity inside.
    * ``TRANSIENT_KINDS`` is the set of kinds whose same request, sent again unchanged, may
      succeed; a context overflow or an output-cap refusal is never in it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class FailureKind(enum.Enum):
    """What went wrong with one provider call."""

    CONTEXT_OVERFLOW = "context_overflow"
    OUTPUT_LIMIT = "output_limit"
    RATE_LIMIT = "rate_limit"
    AUTH = "auth"
    PERMISSION = "permission"
    NOT_FOUND = "not_found"
    INVALID_REQUEST = "invalid_request"
    REQUEST_TOO_LARGE = "request_too_large"
    """The request is larger than a limit that is not the context window: one request
    above the whole per-minute token budget (OpenAI's and Groq's "Request too large for
    ... on tokens per min (TPM)"), or a body above the server's byte limit (HTTP 413,
    Anthropic's ``request_too_large``). Never retryable as is: waiting does not make the
    request fit; only a smaller request (or a higher limit) can pass."""
    CONTENT_FILTER = "content_filter"
    SERVER = "server"
    OVERLOADED = "overloaded"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    MALFORMED_RESPONSE = "malformed_response"
    """A success status whose body is not a whole answer: not JSON, the wrong shape, or
    a response (streamed or not) that ended without a finish reason. Transient: the
    same request may get a whole answer next time, and nothing from it is used."""
    UNKNOWN = "unknown"


TRANSIENT_KINDS = frozenset(
    {
        FailureKind.RATE_LIMIT,
        FailureKind.SERVER,
        FailureKind.OVERLOADED,
        FailureKind.TIMEOUT,
        FailureKind.CONNECTION,
        FailureKind.MALFORMED_RESPONSE,
    }
)


class TerminationReason(enum.Enum):
    """Why a tool-loop run ended."""

    COMPLETED = "completed"
    MAX_ITERATIONS = "max_iterations"
    CONTEXT_TRUNCATED = "context_truncated"
    PROVIDER_ERROR = "provider_error"
    SUSPENDED = "suspended"
    CANCELLED = "cancelled"

    @property
    def is_retryable(self) -> bool:
        """True only for PROVIDER_ERROR: running the same input again may end otherwise.

        CONTEXT_TRUNCATED is never retryable: the same transcript cannot fit.
        """
        return self is TerminationReason.PROVIDER_ERROR


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """One classified provider failure.

    Attributes:
        kind: what went wrong.
        retryable: the same request, unchanged, may succeed later.
        retry_after: seconds the provider asked us to wait, when it said so.
        status: the HTTP status, when there was one.
        provider: a short lowercase provider/server name when recognisable
            ("openai", "azure", "anthropic", "bedrock", "gemini", "vllm", "sglang",
            "llamacpp", "llama-cpp-python", "ollama", "mistral", "groq", "openrouter",
            "tgi", "lmstudio", "cohere", "cerebras"), else None.
        message: the provider's message (or the exception's text).
        code: the body's error ``code`` (or ``type`` when there is no code).
        prompt_tokens: the prompt size the message states, in the provider's tokens.
        prompt_tokens_is_lower_bound: the message says "at least" (or truncated the
            count), so the real prompt may be larger.
        context_window: the window the message states.
        requested_output: the ``max_tokens`` the message states.
        max_output_tokens: the output cap an OUTPUT_LIMIT message states.
    """

    kind: FailureKind
    retryable: bool
    retry_after: float | None = None
    status: int | None = None
    provider: str | None = None
    message: str = ""
    code: str | None = None
    prompt_tokens: int | None = None
    prompt_tokens_is_lower_bound: bool = False
    context_window: int | None = None
    requested_output: int | None = None
    max_output_tokens: int | None = None
