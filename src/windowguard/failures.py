"""Provider failure classification, and why a run ended.

A provider refusal arrives as an SDK exception, an HTTP response, a streamed error
event or, for Anthropic, even as a successful message whose ``stop_reason`` is
``model_context_window_exceeded``. :func:`classify_failure` turns any of them into one
frozen :class:`Failure` value: what kind of failure it is, whether the same request
sent again unchanged may succeed (``retryable``), how long the server asked us to wait,
and the token numbers its message states (prompt, window, requested output, output cap).

Invariants:
    * Classification reads the status, the body's ``type``/``code``, the headers
      (``retry-after-ms``, ``retry-after``, ``x-should-retry``, Bedrock's
      ``x-amzn-errortype``) and message patterns; never an SDK's class names, and it
      imports no SDK or HTTP library (responses are duck-typed).
    * It never raises on a provider's answer: what it cannot place is ``UNKNOWN``.
    * A context overflow is never retryable as is; only a smaller request can pass.
      A prompt count stated as "at least P" is flagged ``prompt_tokens_is_lower_bound``.
    * Traps kept apart: output-cap refusals are ``OUTPUT_LIMIT``; Bedrock's
      ``ThrottlingException: Too many tokens`` is ``RATE_LIMIT``; per-field length limits
      (``string_above_max_length``) are ``INVALID_REQUEST``.

The message texts windowguard's own emulator sends come from
:mod:`windowguard.provider_errors`; the patterns here are compiled from the same
templates, plus the wordings of servers the emulator does not imitate.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

from . import provider_errors as wire

__all__ = ["Failure", "FailureKind", "TerminationReason", "classify_failure"]


class FailureKind(enum.Enum):
    """What went wrong with one provider call."""

    CONTEXT_OVERFLOW = "context_overflow"
    OUTPUT_LIMIT = "output_limit"
    RATE_LIMIT = "rate_limit"
    AUTH = "auth"
    PERMISSION = "permission"
    NOT_FOUND = "not_found"
    INVALID_REQUEST = "invalid_request"
    CONTENT_FILTER = "content_filter"
    SERVER = "server"
    OVERLOADED = "overloaded"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    UNKNOWN = "unknown"


_TRANSIENT = frozenset(
    {
        FailureKind.RATE_LIMIT,
        FailureKind.SERVER,
        FailureKind.OVERLOADED,
        FailureKind.TIMEOUT,
        FailureKind.CONNECTION,
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
            "tgi", "lmstudio"), else None.
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


# --- message patterns -------------------------------------------------------------
# Group names: prompt_tokens, context_window, requested_output, total_tokens,
# max_output_tokens, max_input_tokens, at_least, exclusive_cap.


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str]
    provider: str | None = None
    # "prompt is max_input + 1" wordings: the stated count was truncated by the server.
    truncated_at_max_input: bool = False
    lower_bound: bool = False


def _rx(text: str) -> re.Pattern[str]:
    return re.compile(text, re.IGNORECASE)


_CTX = r"maximum context length is (?P<context_window>\d+) tokens"

_OVERFLOW_RULES: tuple[_Rule, ...] = (
    # Compiled from the emulator's own templates (provider_errors), so they cannot drift.
    _Rule(wire.template_pattern(wire.VLLM_PROMPT_AND_OUTPUT), "vllm"),
    _Rule(wire.template_pattern(wire.ANTHROPIC_PROMPT_TOO_LONG), "anthropic"),
    _Rule(wire.template_pattern(wire.ANTHROPIC_INPUT_AND_MAX_TOKENS), "anthropic"),
    _Rule(wire.template_pattern(wire.LLAMACPP_EXCEED_CONTEXT), "llamacpp"),
    _Rule(wire.template_pattern(wire.OPENAI_MESSAGES_ONLY)),
    _Rule(wire.template_pattern(wire.OPENAI_MESSAGES_AND_COMPLETION)),
    # vLLM renderers/params.py (v0.18+): a prompt rejected by characters before tokenizing.
    _Rule(
        _rx(
            _CTX + r"\. However, you requested (?P<requested_output>\d+) output tokens and "
            r"your prompt contains \d+ characters \(more than \d+ characters, which is the "
            r"upper bound for (?P<max_input_tokens>\d+) input tokens\)"
        ),
        "vllm",
        truncated_at_max_input=True,
    ),
    # vLLM renderers/params.py (v0.16-ish): "You passed N input tokens/characters ...".
    _Rule(
        _rx(
            r"You passed (?:(?P<prompt_tokens>\d+) input tokens|\d+ input characters) and "
            r"requested (?P<requested_output>\d+) output tokens\. However, the model's context "
            r"length is only (?P<context_window>\d+) tokens, resulting in a maximum input "
            r"length of (?P<max_input_tokens>\d+) tokens"
        ),
        "vllm",
        truncated_at_max_input=True,
    ),
    # vLLM 0.11-0.15 entrypoints/openai/serving_engine.py _validate_input.
    _Rule(
        _rx(
            r"'max_tokens' or 'max_completion_tokens' is too large: (?P<requested_output>\d+)\. "
            r"This model's " + _CTX + r" and your request has (?P<prompt_tokens>\d+) input tokens"
        ),
        "vllm",
    ),
    _Rule(_rx(_CTX + r"\. However, your request has (?P<prompt_tokens>\d+) input tokens")),
    # OpenAI legacy / vLLM <= 0.10 / DeepSeek: "(P in the messages, M in the completion)";
    # older OpenAI completions: "(P in your prompt; M for the completion)".
    _Rule(
        _rx(
            _CTX + r"[.,] however,? you requested (?P<total_tokens>\d+) tokens "
            r"\((?P<prompt_tokens>\d+) in (?:the messages|your prompt)[,;] "
            r"(?P<requested_output>\d+) (?:in|for) the completion\)"
        )
    ),
    _Rule(
        _rx(_CTX + r"\. However, you requested (?P<prompt_tokens>\d+) tokens in the messages"),
        "vllm",
    ),
    # OpenAI with tool schemas: "your messages resulted in T tokens (P in the messages, F in
    # the functions)": every one of them is prompt.
    _Rule(_rx(_CTX + r"\. However, your messages resulted in (?P<prompt_tokens>\d+) tokens")),
    # OpenRouter (openrouter.ai/docs/errors; estimate of the upstream count).
    _Rule(
        _rx(
            r"This endpoint's maximum context length is (?P<context_window>\d+) tokens\. "
            r"However, you requested about (?P<total_tokens>\d+) tokens "
            r"\((?P<prompt_tokens>\d+) of text input(?:, \d+ of [a-z ]+input)*, "
            r"(?P<requested_output>\d+) in the output\)"
        ),
        "openrouter",
    ),
    # SGLang python/sglang/srt/entrypoints/openai/serving_*.py and managers/scheduler.py.
    _Rule(
        _rx(
            r"Requested token count exceeds the model's maximum context length of "
            r"(?P<context_window>\d+) tokens\. You requested a total "
            r"of (?P<total_tokens>\d+) tokens: (?P<prompt_tokens>\d+) tokens from the input "
            r"messages and (?P<requested_output>\d+) tokens for the completion"
        ),
        "sglang",
    ),
    _Rule(
        _rx(
            r"The input \((?P<prompt_tokens>\d+) tokens\) is longer than the model's context "
            r"length \((?P<context_window>\d+) tokens\)"
        ),
        "sglang",
    ),
    _Rule(
        _rx(
            r"Input length \((?P<prompt_tokens>\d+) tokens\) exceeds the maximum allowed length "
            r"\((?P<max_input_tokens>\d+) tokens\)"
        ),
        "sglang",
    ),
    # llama.cpp, older split wording of the same check.
    _Rule(
        _rx(
            r"input \((?P<prompt_tokens>\d+) tokens\) is larger than the max context size "
            r"\((?P<context_window>\d+) tokens\)"
        ),
        "llamacpp",
    ),
    # llama-cpp-python llama.py: the stated count is the prompt's.
    _Rule(
        _rx(
            r"Requested tokens \((?P<prompt_tokens>\d+)\) exceed context window of "
            r"(?P<context_window>\d+)"
        ),
        "llama-cpp-python",
    ),
    # Gemini / Vertex AI 400 INVALID_ARGUMENT (AI Studio omits the prompt count).
    _Rule(
        _rx(
            r"input token count(?: \((?P<prompt_tokens>\d+)\))? exceeds the maximum number of "
            r"tokens allowed \(?(?P<context_window>\d+)"
        ),
        "gemini",
    ),
    # Mistral La Plateforme.
    _Rule(
        _rx(
            r"Prompt contains (?P<prompt_tokens>\d+) tokens(?: and \d+ (?:draft tokens|images))?"
            r",? too large for model with (?P<context_window>\d+) maximum context length"
        ),
        "mistral",
    ),
    # TGI router/src/validation.rs (422 validation errors).
    _Rule(
        _rx(
            r"`inputs` tokens \+ `max_new_tokens` must be <= (?P<context_window>\d+)\. Given: "
            r"(?P<prompt_tokens>\d+) `inputs` tokens and (?P<requested_output>\d+) "
            r"`max_new_tokens`"
        ),
        "tgi",
    ),
    _Rule(
        _rx(
            r"`inputs` must have less than (?P<max_input_tokens>\d+) tokens\. Given: "
            r"(?P<prompt_tokens>\d+)"
        ),
        "tgi",
    ),
    # LM Studio: the tokens it must keep, a lower bound of the prompt.
    _Rule(
        _rx(
            r"Trying to keep the first (?P<prompt_tokens>\d+) tokens when context (?:the )?"
            r"overflows\. However, the model is loaded with context length of only "
            r"(?P<context_window>\d+) tokens"
        ),
        "lmstudio",
        lower_bound=True,
    ),
    # vLLM engine-level checks (vllm/v1/engine/processor.py, older llm_engine.py).
    _Rule(
        _rx(
            r"The decoder prompt \(length (?P<prompt_tokens>\d+)\) is longer than the maximum "
            r"model length of (?P<context_window>\d+)"
        ),
        "vllm",
    ),
    _Rule(
        _rx(
            r"The prompt \(total length (?P<prompt_tokens>\d+)\) is too long to fit into the "
            r"model \(context length (?P<context_window>\d+)\)"
        ),
        "vllm",
    ),
    # xAI.
    _Rule(
        _rx(
            r"maximum prompt length is (?P<context_window>\d+) but the request contains "
            r"(?P<prompt_tokens>\d+) tokens"
        )
    ),
    # OpenAI per-model input limit (gpt-5: 272k input inside a 400k window).
    _Rule(
        _rx(
            r"Input tokens exceed the configured limit of (?P<max_input_tokens>\d+) tokens\. "
            r"Your messages resulted in (?P<prompt_tokens>\d+) tokens"
        ),
        "openai",
    ),
)

# Overflow statements without usable numbers.
_OVERFLOW_WORDS = _rx(
    r"prompt too long; exceeded (?:max )?context length"  # Ollama
    r"|the request exceeds the available context size"  # llama.cpp before numbers
    r"|exceeds the available context size"
    r"|input is too long for requested model"  # Bedrock
    r"|exceeds the context window"  # OpenAI Responses
    r"|maximum context length"
    r"|context length exceeded|context_length_exceeded|context window exceeded"
    r"|model_context_window_exceeded"
    r"|prompt is too long"
    r"|the prompt is longer than the context length"
    r"|reduce the length of the messages"  # Groq
    r"|too large for model with \d+ maximum context length"
    r"|is longer than the model's context length"
)

_OUTPUT_RULES: tuple[_Rule, ...] = (
    _Rule(wire.template_pattern(wire.ANTHROPIC_OUTPUT_CAP), "anthropic"),
    _Rule(wire.template_pattern(wire.VLLM_OUTPUT_OVER_WINDOW), "vllm"),
    _Rule(wire.template_pattern(wire.OPENAI_OUTPUT_CAP)),
    # OpenAI, for max_tokens and max_completion_tokens alike.
    _Rule(
        _rx(
            r"(?:max_tokens|max_completion_tokens|max_output_tokens) is too large: "
            r"(?P<requested_output>\d+)\. This model supports at most (?P<max_output_tokens>\d+) "
            r"completion tokens"
        )
    ),
    # vLLM renderers/params.py variants ("...=131072cannot be greater than max_model_len=...").
    _Rule(
        _rx(
            r"max_(?:completion_|output_)?tokens=(?P<requested_output>\d+)\s*cannot be greater "
            r"than max_model_len=(?:max_total_tokens=)?(?P<max_output_tokens>\d+)"
        ),
        "vllm",
    ),
    # OpenAI Responses: code integer_above_max_value on max_output_tokens.
    _Rule(
        _rx(
            r"Invalid '(?:max_output_tokens|max_tokens|max_completion_tokens)': integer above "
            r"maximum value\. Expected a value <= (?P<max_output_tokens>\d+), but got "
            r"(?P<requested_output>\d+) instead"
        )
    ),
    # Gemini / Vertex: the upper end of the range is exclusive.
    _Rule(
        _rx(
            r"maxOutputTokens value of (?P<requested_output>-?\d+) but the supported range is "
            r"from \d+ \(inclusive\) to (?P<exclusive_cap>\d+) \(exclusive\)"
        ),
        "gemini",
    ),
    # DeepSeek.
    _Rule(
        _rx(r"valid range of max_tokens is \[\d+, (?P<max_output_tokens>\d+)\]"),
        "deepseek",
    ),
    # OpenAI-compatible gateways in front of Bedrock / Qwen.
    _Rule(
        _rx(
            r"'max_tokens' \((?P<requested_output>\d+)\) exceeds model maximum "
            r"\((?P<max_output_tokens>\d+)\)"
        )
    ),
)

# Bedrock throttles with "ThrottlingException: Too many tokens, please wait before trying
# again." (AWS Bedrock API reference, "Common errors"): a rate limit, not an overflow.
# openai-python LengthFinishReasonError: the reply hit max_tokens before it was complete.
_OUTPUT_WORDS = _rx(r"length limit was reached")
_THROTTLE_WORDS = _rx(r"throttl|too many tokens, please wait")
_QUOTA_WORDS = _rx(
    r"insufficient_quota|exceeded your current quota|check your plan and billing|"
    r"spend limit|credit balance is too low|insufficient credits|"
    r"Request too large for model"
)
_FILTER_WORDS = _rx(
    r"content management policy|content[_ ]filter|responsibleaipolicyviolation|"
    r"content_policy_violation|flagged|moderation"
)
_CREDENTIAL_WORDS = _rx(r"credentials|identity token|api[_ ]key")
_TIMEOUT_WORDS = _rx(r"timed out|timeout|deadline exceeded")
_CONNECTION_WORDS = _rx(
    r"connection|connect error|network|remote ?protocol|server disconnected|broken pipe|"
    r"reset by peer|name resolution|socket"
)
_RETRY_IN_TEXT = _rx(r"(?:retry|try again) (?:after|in) (\d+(?:\.\d+)?) ?(ms|s|sec|seconds?)\b")

# Body type/code values -> kind (OpenAI, Anthropic, vLLM, llama.cpp, Gemini status).
_CODE_KINDS: dict[str, FailureKind] = {
    "context_length_exceeded": FailureKind.CONTEXT_OVERFLOW,
    "exceed_context_size_error": FailureKind.CONTEXT_OVERFLOW,
    "model_context_window_exceeded": FailureKind.CONTEXT_OVERFLOW,
    "string_above_max_length": FailureKind.INVALID_REQUEST,
    "rate_limit_exceeded": FailureKind.RATE_LIMIT,
    "rate_limit_error": FailureKind.RATE_LIMIT,
    "insufficient_quota": FailureKind.RATE_LIMIT,
    "resource_exhausted": FailureKind.RATE_LIMIT,
    "throttlingexception": FailureKind.RATE_LIMIT,
    "toomanyrequests": FailureKind.RATE_LIMIT,
    "overloaded_error": FailureKind.OVERLOADED,
    "unavailable": FailureKind.OVERLOADED,
    "unavailable_error": FailureKind.OVERLOADED,
    "serviceunavailableerror": FailureKind.OVERLOADED,
    "authentication_error": FailureKind.AUTH,
    "invalid_api_key": FailureKind.AUTH,
    "unauthenticated": FailureKind.AUTH,
    "unauthorized": FailureKind.AUTH,
    "api_key_invalid": FailureKind.AUTH,
    "permission_error": FailureKind.PERMISSION,
    "permission_denied": FailureKind.PERMISSION,
    "billing_error": FailureKind.PERMISSION,
    "accessdeniedexception": FailureKind.PERMISSION,
    "not_found_error": FailureKind.NOT_FOUND,
    "model_not_found": FailureKind.NOT_FOUND,
    "not_found": FailureKind.NOT_FOUND,
    "notfounderror": FailureKind.NOT_FOUND,
    "resourcenotfoundexception": FailureKind.NOT_FOUND,
    "content_filter": FailureKind.CONTENT_FILTER,
    "content_policy_violation": FailureKind.CONTENT_FILTER,
    "responsibleaipolicyviolation": FailureKind.CONTENT_FILTER,
    "timeout_error": FailureKind.TIMEOUT,
    "deadline_exceeded": FailureKind.TIMEOUT,
    "modeltimeoutexception": FailureKind.TIMEOUT,
    "api_error": FailureKind.SERVER,
    "server_error": FailureKind.SERVER,
    "internal": FailureKind.SERVER,
    "internalservererror": FailureKind.SERVER,
    "internalserverexception": FailureKind.SERVER,
    "serviceunavailableexception": FailureKind.OVERLOADED,
    "validationexception": FailureKind.INVALID_REQUEST,
    "invalid_argument": FailureKind.INVALID_REQUEST,
    "invalid_request_error": FailureKind.INVALID_REQUEST,
    "badrequesterror": FailureKind.INVALID_REQUEST,
}

# Anthropic error_code details that are billing or policy, not a passing rate limit.
_NOT_RETRYABLE_CODES = frozenset(
    {
        "insufficient_quota",
        "contract_spend_limit_reached",
        "enforced_spend_limit_reached",
        "linked_organization_spend_limit_reached",
    }
)


# --- input normalisation ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Signal:
    status: int | None
    headers: Mapping[str, str]
    body: object
    text: str  # the raw body text, or the exception's message
    transport: FailureKind | None = None  # TIMEOUT / CONNECTION without a response


def _lower_headers(headers: object) -> dict[str, str]:
    if headers is None:
        return {}
    items: Iterable[Any]
    if hasattr(headers, "items"):  # a Mapping, or httpx's multi-valued Headers
        items = headers.items()
    else:
        items = headers  # type: ignore[assignment]
    out: dict[str, str] = {}
    try:
        for key, value in items:
            name = key.decode("latin-1") if isinstance(key, bytes) else str(key)
            val = value.decode("latin-1") if isinstance(value, bytes) else str(value)
            out[name.lower()] = val
    except (TypeError, ValueError):
        return {}
    return out


def _parse_body(body: object) -> tuple[object, str]:
    """(JSON value or None, text) of a body given as str, bytes or a JSON value."""
    if body is None:
        return None, ""
    if isinstance(body, (bytes, bytearray)):
        body = bytes(body).decode("utf-8", errors="replace")
    if isinstance(body, str):
        text = body.strip()
        for line in text.splitlines():  # an SSE frame: "data: {...}" or "error: {...}"
            head, sep, rest = line.partition(":")
            if sep and head.strip() in ("data", "error") and rest.strip().startswith("{"):
                text = rest.strip()
                break
        try:
            return json.loads(text), body
        except ValueError:
            return None, body
    try:
        return body, json.dumps(body, default=str)
    except (TypeError, ValueError):
        return body, str(body)


def _status_of(value: object) -> int | None:
    status = getattr(value, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return status
    return None


def _response_body(response: object) -> object:
    """The body of a duck-typed httpx/httpx2 response, never raising."""
    try:
        return response.json()  # type: ignore[attr-defined]
    except Exception:
        pass
    try:
        text = response.text  # type: ignore[attr-defined]
    except Exception:
        return None
    return text if isinstance(text, str) else None


def _exception_chain(error: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _from_exception(error: BaseException) -> _Signal:
    response = getattr(error, "response", None)
    status = _status_of(error) or _status_of(response)
    body = getattr(error, "body", None)
    headers = _lower_headers(getattr(response, "headers", None))
    if body is None and response is not None and status is not None:
        body = _response_body(response)
    text = str(getattr(error, "message", None) or error)
    if status is not None or body is not None:
        return _Signal(status, headers, body, text)
    transport: FailureKind | None = None
    for link in _exception_chain(error):
        if isinstance(link, TimeoutError) or _TIMEOUT_WORDS.search(str(link)):
            transport = FailureKind.TIMEOUT
            break
        if isinstance(link, ConnectionError) or _CONNECTION_WORDS.search(str(link)):
            transport = FailureKind.CONNECTION
    if transport is None and getattr(error, "request", None) is not None:
        # An SDK API error with a request and no response never reached a server.
        transport = FailureKind.CONNECTION
    return _Signal(None, headers, None, text, transport)


def _get(obj: object, name: str) -> object:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _anthropic_window_stop(message: object) -> Failure | None:
    """An Anthropic message that stopped because the context window filled up."""
    if _get(message, "stop_reason") != "model_context_window_exceeded":
        return None
    usage = _get(message, "usage")
    prompt = 0
    found = False
    for field in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        value = _get(usage, field)
        if isinstance(value, int) and not isinstance(value, bool):
            prompt += value
            found = True
    return Failure(
        kind=FailureKind.CONTEXT_OVERFLOW,
        retryable=False,
        status=None,
        provider="anthropic",
        message="stop_reason model_context_window_exceeded",
        code="model_context_window_exceeded",
        prompt_tokens=prompt if found else None,
    )


def _normalise(
    error: object, status: int | None, body: object, headers: object
) -> _Signal | Failure:
    if error is None:
        return _Signal(status, _lower_headers(headers), body, "")
    stopped = _anthropic_window_stop(error)
    if stopped is not None:
        return stopped
    if isinstance(error, BaseException):
        signal = _from_exception(error)
    elif isinstance(error, (Mapping, str, bytes, bytearray)):
        signal = _Signal(None, {}, error, "")
    elif callable(getattr(error, "model_dump", None)):
        # An SDK's typed stream event (ResponseErrorEvent, ResponseFailedEvent ...).
        try:
            dumped = error.model_dump()  # type: ignore[attr-defined]
        except Exception:
            dumped = None
        signal = _Signal(None, {}, dumped, str(error))
    elif _status_of(error) is not None and hasattr(error, "headers"):
        signal = _Signal(
            _status_of(error), _lower_headers(error.headers), _response_body(error), ""
        )
    else:
        signal = _Signal(None, {}, None, str(error))
    merged = dict(signal.headers)
    merged.update(_lower_headers(headers))
    return _Signal(
        status if status is not None else signal.status,
        merged,
        body if body is not None else signal.body,
        signal.text,
        signal.transport,
    )


# --- body fields ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Fields:
    message: str
    codes: tuple[str, ...]  # lowercased type/code/status/error_code values
    code: str | None
    status: int | None
    n_prompt_tokens: int | None
    n_ctx: int | None
    shape: str | None  # a provider recognised from the body's shape


def _int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _fields(parsed: object, fallback_text: str) -> _Fields:
    if isinstance(parsed, list) and parsed:  # Gemini REST streams wrap errors in a list
        parsed = parsed[0]
    if not isinstance(parsed, Mapping):
        return _Fields(fallback_text, (), None, None, None, None, None)
    root: Mapping[str, Any] = parsed
    shape: str | None = None
    if root.get("type") == "response.failed" and isinstance(root.get("response"), Mapping):
        root = {"error": root["response"].get("error")}  # Responses API failed event
    err = root.get("error")
    if isinstance(err, Mapping):
        obj: Mapping[str, Any] = err
        if root.get("type") == "error":
            shape = "anthropic"
    else:
        obj = root  # flat: vLLM/SGLang legacy, Responses SSE error event, Bedrock
        if root.get("object") == "error":
            shape = "vllm"
    message = obj.get("message")
    if not isinstance(message, str):
        message = err if isinstance(err, str) else ""
    if not message:
        message = str(root.get("detail") or root.get("Message") or fallback_text)
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping) and isinstance(metadata.get("raw"), str):
        message = f"{message} {metadata['raw']}"  # OpenRouter passes the upstream text
    raw_codes: list[object] = [obj.get("code"), obj.get("type"), obj.get("status")]
    details = obj.get("details")
    if isinstance(details, Mapping):
        raw_codes.append(details.get("error_code"))
    elif isinstance(details, list):  # Gemini google.rpc.ErrorInfo entries
        raw_codes.extend(d.get("reason") for d in details if isinstance(d, Mapping))
    inner = obj.get("innererror")
    if isinstance(inner, Mapping):
        raw_codes.append(inner.get("code"))
        shape = "azure"
    if "error_type" in root:
        raw_codes.append(root.get("error_type"))
        shape = "tgi"
    codes = tuple(str(c).lower() for c in raw_codes if isinstance(c, str) and c)
    code_value = obj.get("code")
    code = code_value if isinstance(code_value, str) and code_value else None
    if code is None:
        code = next((c for c in raw_codes if isinstance(c, str) and c), None)
    status = _int(code_value) or _int(obj.get("http_status_code"))
    if isinstance(obj.get("status"), str) and isinstance(code_value, int):
        shape = "gemini"
    elif isinstance(obj.get("metadata"), Mapping) and isinstance(code_value, int):
        shape = "openrouter"  # openrouter.ai/docs/errors: {code, message, metadata}
    elif isinstance(code_value, int) and "type" in obj and "param" not in obj and not shape:
        shape = "llamacpp"
    elif isinstance(code_value, int) and "param" in obj and shape is None:
        shape = "vllm"
    return _Fields(
        message=message,
        codes=codes,
        code=code,
        status=status if status is not None and 100 <= status <= 599 else None,
        n_prompt_tokens=_int(obj.get("n_prompt_tokens")),
        n_ctx=_int(obj.get("n_ctx")),
        shape=shape,
    )


# --- headers ----------------------------------------------------------------------


def _retry_after(headers: Mapping[str, str], message: str) -> float | None:
    """Seconds to wait: retry-after-ms, then retry-after (seconds or HTTP date), then text."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if value >= 0:
                return value
        except ValueError:
            pass
    after = headers.get("retry-after")
    if after is not None:
        try:
            value = float(after)
            if value >= 0:
                return value
        except ValueError:
            # An HTTP date: only usable against the response's own Date header (no clock).
            try:
                until = parsedate_to_datetime(after)
                now = parsedate_to_datetime(headers["date"])
                return max((until - now).total_seconds(), 0.0)
            except (KeyError, TypeError, ValueError, IndexError):
                pass
    match = _RETRY_IN_TEXT.search(message)
    if match:
        amount = float(match.group(1))
        return amount / 1000.0 if match.group(2).lower() == "ms" else amount
    return None


def _header_provider(headers: Mapping[str, str]) -> str | None:
    if "x-amzn-errortype" in headers or "x-amzn-requestid" in headers:
        return "bedrock"
    if any(h.startswith("anthropic-") for h in headers):
        return "anthropic"
    if (
        "apim-request-id" in headers
        or "x-ms-region" in headers
        or "azureml-model-session" in headers
    ):
        return "azure"
    if any(h.startswith("openai-") for h in headers):
        return "openai"
    if any(h.startswith("x-groq-") for h in headers):
        return "groq"
    return None


# --- classification ---------------------------------------------------------------


def _match_numbers(rules: tuple[_Rule, ...], message: str) -> tuple[_Rule, dict[str, int]] | None:
    for rule in rules:
        match = rule.pattern.search(message)
        if match:
            numbers = {
                k: int(v) for k, v in match.groupdict().items() if v and v.lstrip("-").isdigit()
            }
            if match.groupdict().get("at_least"):
                numbers["at_least"] = 1
            return rule, numbers
    return None


def _status_kind(status: int) -> FailureKind:
    if status == 401:
        return FailureKind.AUTH
    if status in (402, 403):
        return FailureKind.PERMISSION
    if status == 404:
        return FailureKind.NOT_FOUND
    if status == 408:
        return FailureKind.TIMEOUT
    if status == 429:
        return FailureKind.RATE_LIMIT
    if status in (409, 425):
        return FailureKind.SERVER
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
    retry_after = _retry_after(hdrs, message)

    if signal.transport is not None and http_status is None:
        return Failure(
            kind=signal.transport, retryable=True, message=message, provider=_header_provider(hdrs)
        )

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
    if throttled:
        kind = FailureKind.RATE_LIMIT
    elif "string_above_max_length" in codes:
        kind = FailureKind.INVALID_REQUEST
    else:
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
    if kind is None and (f.n_prompt_tokens is not None or "exceed_context_size_error" in codes):
        kind, rule_provider = FailureKind.CONTEXT_OVERFLOW, "llamacpp"
    if kind is None:
        coded = [_CODE_KINDS[c] for c in code_list if c in _CODE_KINDS]
        specific = [k for k in coded if k is not FailureKind.INVALID_REQUEST]
        if specific:
            kind = specific[0]
        server_side = (FailureKind.SERVER, FailureKind.OVERLOADED, FailureKind.TIMEOUT)
        if kind is FailureKind.SERVER and http_status is not None and http_status >= 500:
            kind = _status_kind(http_status)  # 503/529 overload, 504 timeout: the status says more
        elif kind in server_side and http_status is not None and 400 <= http_status < 500:
            kind = None  # a client error whose body names a server cause: trust the status
    generic_status = http_status is None or http_status in (400, 413, 422)
    if kind is None and generic_status and _OVERFLOW_WORDS.search(message):
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
        coded = [_CODE_KINDS[c] for c in code_list if c in _CODE_KINDS]
        kind = coded[0] if coded else FailureKind.UNKNOWN

    if kind is FailureKind.CONTEXT_OVERFLOW:
        if "prompt_tokens" not in numbers and f.n_prompt_tokens is not None:
            numbers["prompt_tokens"] = f.n_prompt_tokens
        if "context_window" not in numbers and f.n_ctx is not None:
            numbers["context_window"] = f.n_ctx

    retryable = kind in _TRANSIENT
    if kind is FailureKind.RATE_LIMIT and (
        _QUOTA_WORDS.search(message) or codes & _NOT_RETRYABLE_CODES
    ):
        retryable = False  # billing, or a single request larger than the per-minute limit
    should_retry = hdrs.get("x-should-retry", "").strip().lower()
    if kind not in (FailureKind.CONTEXT_OVERFLOW, FailureKind.OUTPUT_LIMIT):
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
        message=message,
        code=f.code,
        prompt_tokens=numbers.get("prompt_tokens"),
        prompt_tokens_is_lower_bound=lower_bound and "prompt_tokens" in numbers,
        context_window=numbers.get("context_window"),
        requested_output=numbers.get("requested_output"),
        max_output_tokens=numbers.get("max_output_tokens"),
    )
