"""Classification: the decision that turns a read provider answer into a Failure.

:func:`classify_failure` reads its input through :mod:`._sources`, then decides the
kind in a fixed order: a request above a non-window limit first ("Request too large for
... (TPM)", ``request_too_large``), throttling (Bedrock's "Too many tokens" is a rate
limit, not an overflow), per-field length limits, overflow rules with numbers,
output-cap rules, body codes, overflow words without numbers, content filters, the HTTP
status, missing credentials, and ``UNKNOWN`` last.

Invariants:
    * The status gates the patterns: only an answer whose status can carry a length
      refusal (:data:`LENGTH_STATUSES`, or no status at all: a raw body, a streamed
      error) is read as a context overflow or an output-cap refusal, however its text is
      worded. A 401 quoting "maximum context length" is an auth failure.
    * A context overflow, an output-cap refusal or a request too large is never
      retryable, whatever ``x-should-retry`` says; only a smaller request can pass.
    * A 501 Not Implemented, or a body ``type`` ``not_supported_error`` (llama.cpp), is a
      ``SERVER`` failure that is not retryable: the server lacks the feature, and the same
      request fails the same way until it is configured otherwise.
    * Groq's 498 (flex tier at capacity, ``capacity_exceeded``) is ``OVERLOADED``:
      retryable after a wait, not a client error.
    * A prompt count the server truncated or stated as "at least P" is flagged
      ``prompt_tokens_is_lower_bound``.
    * The message is redacted (:func:`redact_secrets`) after it has been read: no
      credential a server echoed reaches a Failure, and from it events, logs and
      exception messages.
    * Never raises on a provider's answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..redact import redact_secrets
from ._patterns import (
    _CODE_KINDS,
    _CREDENTIAL_WORDS,
    _FILTER_WORDS,
    _NOT_RETRYABLE_CODES,
    _NOT_SUPPORTED_CODES,
    _OUTPUT_RULES,
    _OUTPUT_WORDS,
    _OVERFLOW_RULES,
    _OVERFLOW_WORDS,
    _QUOTA_WORDS,
    _THROTTLE_WORDS,
    _TOO_LARGE_WORDS,
    _match_numbers,
)
from ._sources import (
    _Fields,
    _fields,
    _header_provider,
    _normalise,
    _parse_body,
    _retry_after,
)
from ._values import TRANSIENT_KINDS, Failure, FailureKind

__all__ = ["LENGTH_STATUSES", "classify_failure"]

#: The statuses real servers refuse a too-long request with: 400 (OpenAI, Azure,
#: Anthropic, Bedrock, Gemini, vLLM, SGLang, llama.cpp, Ollama, Mistral, LM Studio ...),
#: 413 (a gateway sizing the request), 422 (TGI's validation errors) and 500 (llama.cpp's
#: "Context size has been exceeded.", LM Studio behind some proxies). Any other status
#: decides the kind by itself, whatever its message quotes.
LENGTH_STATUSES = frozenset({400, 413, 422, 500})

_LENGTH_KINDS = (FailureKind.CONTEXT_OVERFLOW, FailureKind.OUTPUT_LIMIT)

# Gemini quota ids and metrics of a daily quota ("GenerateRequestsPerDayPerProjectPer...",
# ".../generate_content_requests_per_day...").
_PER_DAY = re.compile(r"per_?day", re.IGNORECASE)


def _status_kind(status: int) -> FailureKind:
    if status == 401:
        return FailureKind.AUTH
    if status in (402, 403):
        return FailureKind.PERMISSION
    if status == 404:
        return FailureKind.NOT_FOUND
    if status == 408:
        return FailureKind.TIMEOUT
    if status == 413:
        return FailureKind.REQUEST_TOO_LARGE
    if status == 429:
        return FailureKind.RATE_LIMIT
    if status in (409, 425):
        return FailureKind.SERVER
    if status == 498:
        # Groq's own status for its flex tier at capacity ("Flex Tier Capacity Exceeded",
        # console.groq.com/docs/errors): fails fast, passes after a jittered wait.
        return FailureKind.OVERLOADED
    if status == 499:
        return FailureKind.CONNECTION
    if status in (503, 529):
        return FailureKind.OVERLOADED
    if status == 504:
        return FailureKind.TIMEOUT
    if status >= 500:
        return FailureKind.SERVER
    if 400 <= status < 500:
        return FailureKind.INVALID_REQUEST
    return FailureKind.UNKNOWN


def _rate_limit_passes(f: _Fields, message: str, codes: set[str]) -> bool:
    """Whether a rate limit passes by waiting (the same request, sent again later).

    Gemini words every 429 alike ("You exceeded your current quota, please check your
    plan and billing details"), per-minute or per-day; its google.rpc details tell them
    apart. A QuotaFailure on a per-day quota, or on a quota of 0 (none in this tier),
    does not pass in the RetryInfo's seconds; any other 429 that says when to retry
    (RetryInfo) does. Without such details, billing and spend-limit wordings do not pass.
    """
    if any(_PER_DAY.search(quota) for quota in f.quotas) or "0" in f.quota_values:
        return False
    if f.retry_delay is not None:
        return True
    return not (_QUOTA_WORDS.search(message) or codes & _NOT_RETRYABLE_CODES)


def _guess_provider(
    rule_provider: str | None, headers: Mapping[str, str], f: _Fields
) -> str | None:
    by_header = _header_provider(headers)
    if by_header is not None:
        return by_header
    if rule_provider is not None:
        return rule_provider
    message = f.message
    if re.search(r"ThrottlingException|ValidationException|AccessDeniedException", message):
        return "bedrock"
    if "Azure OpenAI" in message or "azure" in f.codes:
        return "azure"
    if "groq" in message.lower():
        return "groq"
    if re.search(r"openrouter|middle-out", message, re.IGNORECASE):
        return "openrouter"
    if "exceeded max context length by" in message:
        return "ollama"
    return f.shape


def classify_failure(
    error: object = None,
    *,
    status: int | None = None,
    body: object = None,
    headers: object = None,
) -> Failure:
    """Classify one provider failure into a :class:`Failure`.

    Args:
        error: an ``openai``/``anthropic`` SDK exception (status errors carry
            ``.response``/``.body``/``.status_code``; connection and timeout errors
            carry none), an httpx/httpx2 ``Response``, an Anthropic message (object or
            dict) whose ``stop_reason`` is ``model_context_window_exceeded``, a streamed
            error payload (the Responses API ``error`` or ``response.failed`` event, or
            a chat chunk's ``{"error": ...}``), or None when passing the parts below.
        status: the HTTP status; overrides the one found on ``error``.
        body: the response body as str, bytes (UTF-8 JSON, or an SSE ``data:`` line)
            or a decoded JSON value; overrides the one found on ``error``.
        headers: response headers as a mapping or ``(name, value)`` pairs.

    Returns:
        The classified failure; ``FailureKind.UNKNOWN`` when nothing is recognised.
    """
    normal = _normalise(error, status, body, headers)
    if isinstance(normal, Failure):
        return normal
    signal = normal
    parsed, text = _parse_body(signal.body)
    f = _fields(parsed, text or signal.text)
    message = f.message or signal.text
    http_status = signal.status if signal.status is not None else f.status
    hdrs = signal.headers
    retry_after = _retry_after(hdrs, message, f.retry_delay)

    if signal.transport is not None and http_status is None:
        return Failure(
            kind=signal.transport,
            retryable=True,
            message=redact_secrets(message),
            provider=_header_provider(hdrs),
        )
    # Only a status that can carry a length refusal (or none) lets its text be read as one.
    length_status = http_status is None or http_status in LENGTH_STATUSES

    amzn = hdrs.get("x-amzn-errortype", "").split(":")[0].lower()
    code_list = [*f.codes, amzn] if amzn else list(f.codes)
    codes = set(code_list)
    kind: FailureKind | None = None
    numbers: dict[str, int] = {}
    rule_provider: str | None = None
    lower_bound = False

    throttled = (
        http_status == 429
        or bool(codes & {"throttlingexception", "rate_limit_exceeded", "rate_limit_error"})
        or "resource_exhausted" in codes
        or bool(_THROTTLE_WORDS.search(message))
    )
    if _TOO_LARGE_WORDS.search(message) or "request_too_large" in codes:
        kind = FailureKind.REQUEST_TOO_LARGE  # above the per-minute budget or the byte limit
    elif throttled:
        kind = FailureKind.RATE_LIMIT
    elif "string_above_max_length" in codes:
        kind = FailureKind.INVALID_REQUEST
    elif length_status:
        found = _match_numbers(_OVERFLOW_RULES, message)
        if found is not None:
            rule, numbers = found
            kind, rule_provider = FailureKind.CONTEXT_OVERFLOW, rule.provider
            lower_bound = rule.lower_bound or "at_least" in numbers
            max_input = numbers.get("max_input_tokens")
            if rule.truncated_at_max_input and max_input is not None:
                stated = numbers.get("prompt_tokens")
                if stated is None or stated == max_input + 1:
                    numbers["prompt_tokens"] = max_input + 1
                    lower_bound = True
        else:
            found = _match_numbers(_OUTPUT_RULES, message)
            if found is not None:
                rule, numbers = found
                kind, rule_provider = FailureKind.OUTPUT_LIMIT, rule.provider
                if "exclusive_cap" in numbers:
                    numbers["max_output_tokens"] = numbers["exclusive_cap"] - 1
    if (
        kind is None
        and length_status
        and (f.n_prompt_tokens is not None or "exceed_context_size_error" in codes)
    ):
        kind, rule_provider = FailureKind.CONTEXT_OVERFLOW, "llamacpp"
    # Body codes; a length kind only where the status can carry one.
    coded = [
        _CODE_KINDS[c]
        for c in code_list
        if c in _CODE_KINDS and (length_status or _CODE_KINDS[c] not in _LENGTH_KINDS)
    ]
    if kind is None:
        specific = [k for k in coded if k is not FailureKind.INVALID_REQUEST]
        if specific:
            kind = specific[0]
        server_side = (FailureKind.SERVER, FailureKind.OVERLOADED, FailureKind.TIMEOUT)
        if kind is FailureKind.SERVER and http_status is not None and http_status >= 500:
            kind = _status_kind(http_status)  # 503/529 overload, 504 timeout: the status says more
        elif kind in server_side and http_status is not None and 400 <= http_status < 500:
            kind = None  # a client error whose body names a server cause: trust the status
    if kind is None and length_status and _OVERFLOW_WORDS.search(message):
        kind = FailureKind.CONTEXT_OVERFLOW
    if kind is None and http_status is None and _OUTPUT_WORDS.search(message):
        kind = FailureKind.OUTPUT_LIMIT
    if kind is None and _FILTER_WORDS.search(message) and http_status in (None, 400, 403):
        kind = FailureKind.CONTENT_FILTER
    if kind is None and http_status is not None:
        kind = _status_kind(http_status)
    if kind is None and _CREDENTIAL_WORDS.search(message):
        kind = FailureKind.AUTH  # an SDK that could not load credentials; nothing was sent
    if kind is None:
        kind = coded[0] if coded else FailureKind.UNKNOWN

    if kind is FailureKind.CONTEXT_OVERFLOW:
        if "prompt_tokens" not in numbers and f.n_prompt_tokens is not None:
            numbers["prompt_tokens"] = f.n_prompt_tokens
        if "context_window" not in numbers and f.n_ctx is not None:
            numbers["context_window"] = f.n_ctx

    retryable = kind in TRANSIENT_KINDS
    if kind is FailureKind.RATE_LIMIT:
        retryable = _rate_limit_passes(f, message, codes)
    if http_status == 501 or codes & _NOT_SUPPORTED_CODES:
        # 501 Not Implemented: the server does not support what was asked (RFC 9110
        # section 15.6.2), e.g. llama.cpp's "This server does not support embeddings. Start
        # it with `--embeddings`". Sending it again changes nothing.
        retryable = False
    should_retry = hdrs.get("x-should-retry", "").strip().lower()
    if kind not in (*_LENGTH_KINDS, FailureKind.REQUEST_TOO_LARGE):
        if should_retry == "true":
            retryable = True
        elif should_retry == "false":
            retryable = False

    return Failure(
        kind=kind,
        retryable=retryable,
        retry_after=retry_after,
        status=http_status,
        provider=_guess_provider(rule_provider, hdrs, f),
        message=redact_secrets(message),
        code=f.code,
        prompt_tokens=numbers.get("prompt_tokens"),
        prompt_tokens_is_lower_bound=lower_bound and "prompt_tokens" in numbers,
        context_window=numbers.get("context_window"),
        requested_output=numbers.get("requested_output"),
        max_output_tokens=numbers.get("max_output_tokens"),
    )
