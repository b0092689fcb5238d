"""Provider error wire formats: the one place their texts live.

A provider that refuses a request answers with an HTTP status, a JSON body in its own
shape and, sometimes, headers such as ``retry-after``. Two parts of windowguard need
those answers verbatim: the local emulator (which must refuse exactly like the server
it imitates) and :func:`windowguard.classify_failure` (which must recognise the refusal
and read the numbers back out of it). Both take the texts from here, so the two can
never drift apart: every message template below is also compiled into the pattern
the classifier matches (:func:`template_pattern`).

Invariants:
    * Builders are pure: the same arguments give an equal :class:`WireError`, with no
      clock, randomness or I/O.
    * Every body is a JSON object (``json.dumps`` accepts it as is) and every builder
      output classifies back to the kind and numbers it was built from.
    * Each template names where its wording comes from (a provider document, a server
      source file at a version, or a public issue quoting the server).

Flavours and their error envelopes:
    * ``openai``: ``{"error": {"message", "type", "param", "code"}}`` (OpenAI API
      reference, "Error codes"), ``code`` a string such as ``context_length_exceeded``.
    * ``vllm``: the same envelope with ``type`` an exception name (``BadRequestError``)
      and ``code`` the integer status (vllm ``entrypoints/openai/protocol.py``
      ``ErrorResponse``).
    * ``llamacpp``: ``{"error": {"code", "message", "type"}}`` with an integer code
      (llama.cpp ``tools/server/server-common.cpp`` ``format_error_response``).
    * ``anthropic``: ``{"type": "error", "error": {"type", "message"}}`` (Anthropic
      API reference, "Errors").
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

from .exceptions import ConfigurationError

__all__ = [
    "ANTHROPIC_INPUT_AND_MAX_TOKENS",
    "ANTHROPIC_OUTPUT_CAP",
    "ANTHROPIC_PROMPT_TOO_LONG",
    "LLAMACPP_EXCEED_CONTEXT",
    "OPENAI_MESSAGES_AND_COMPLETION",
    "OPENAI_MESSAGES_ONLY",
    "OPENAI_OUTPUT_CAP",
    "TEMPLATES",
    "VLLM_OUTPUT_OVER_WINDOW",
    "VLLM_PROMPT_AND_OUTPUT",
    "Flavor",
    "WireError",
    "auth_error",
    "context_overflow_error",
    "invalid_request_error",
    "output_limit_error",
    "rate_limit_error",
    "request_too_large_error",
    "server_error",
    "template_pattern",
]

Flavor = Literal["openai", "vllm", "llamacpp", "anthropic"]
_FLAVORS: tuple[str, ...] = get_args(Flavor)

# --- message templates ------------------------------------------------------------
# Placeholders: {prompt_tokens} {context_window} {requested_output} {total_tokens}
# {max_output_tokens} {model}; {at_least} is either "" or "at least ".

# OpenAI Chat Completions, prompt alone over the window. Quoted verbatim in
# https://github.com/dimagi/open-chat-studio/issues/463 (code context_length_exceeded).
OPENAI_MESSAGES_ONLY = (
    "This model's maximum context length is {context_window} tokens. However, your "
    "messages resulted in {prompt_tokens} tokens. Please reduce the length of the messages."
)
# OpenAI Chat Completions, prompt + max_tokens over the window. Whole body verbatim in
# https://github.com/ChatGPTNextWeb/NextChat/issues/3195; vLLM <= 0.10 used the same text
# (https://github.com/vllm-project/vllm/issues/20409).
OPENAI_MESSAGES_AND_COMPLETION = (
    "This model's maximum context length is {context_window} tokens. However, you "
    "requested {total_tokens} tokens ({prompt_tokens} in the messages, {requested_output} "
    "in the completion). Please reduce the length of the messages or completion."
)
# OpenAI, max_tokens above the model's output cap (param max_tokens, code null). Whole
# body verbatim in https://github.com/ChatGPTNextWeb/NextChat/issues/3195.
OPENAI_OUTPUT_CAP = (
    "max_tokens is too large: {requested_output}. This model supports at most "
    "{max_output_tokens} completion tokens, whereas you provided {requested_output}."
)
# vLLM's current wording (vllm renderers/params.py, v0.18 .. main): the prompt is
# tokenized with truncation at max_input_tokens + 1, so an over-long prompt is reported
# as "at least" that many tokens: a lower bound, not a count.
VLLM_PROMPT_AND_OUTPUT = (
    "This model's maximum context length is {context_window} tokens. However, you "
    "requested {requested_output} output tokens and your prompt contains {at_least}"
    "{prompt_tokens} input tokens, for a total of {at_least}{total_tokens} tokens. Please "
    "reduce the length of the input prompt or the number of requested output tokens."
)
# vLLM, max_tokens larger than max_model_len itself (vllm renderers/params.py
# TokenizeParams.__post_init__); text as a server answered it, quoted in a public
# report of vLLM 0.2x ("max_completion_tokens=131072 cannot be greater than
# max_model_len=max_total_tokens=65536").
VLLM_OUTPUT_OVER_WINDOW = (
    "max_tokens={requested_output} cannot be greater than "
    "max_model_len=max_total_tokens={max_output_tokens}. Please request fewer output tokens."
)
# llama.cpp server (tools/server/server-context.cpp, 2025+): type
# exceed_context_size_error with n_prompt_tokens / n_ctx beside the message.
LLAMACPP_EXCEED_CONTEXT = (
    "request ({prompt_tokens} tokens) exceeds the available context size "
    "({context_window} tokens), try increasing it"
)
# Anthropic Messages, prompt alone over the window. Verbatim in
# https://github.com/entropy-research/Devon/issues/88 and
# https://github.com/anthropics/claude-code/issues/14195.
ANTHROPIC_PROMPT_TOO_LONG = "prompt is too long: {prompt_tokens} tokens > {context_window} maximum"
# Anthropic Messages, prompt + max_tokens over the window. Verbatim in
# https://github.com/docker/docker-agent/issues/569 and
# https://github.com/continuedev/continue/issues/6080.
ANTHROPIC_INPUT_AND_MAX_TOKENS = (
    "input length and `max_tokens` exceed context limit: {prompt_tokens} + "
    "{requested_output} > {context_window}, decrease input length or `max_tokens` and try again"
)
# Anthropic, max_tokens above the model's output cap. Verbatim in
# https://github.com/ChatGPTNextWeb/NextChat/issues/4964.
ANTHROPIC_OUTPUT_CAP = (
    "max_tokens: {requested_output} > {max_output_tokens}, which is the maximum allowed "
    "number of output tokens for {model}"
)

TEMPLATES: tuple[str, ...] = (
    OPENAI_MESSAGES_ONLY,
    OPENAI_MESSAGES_AND_COMPLETION,
    OPENAI_OUTPUT_CAP,
    VLLM_PROMPT_AND_OUTPUT,
    VLLM_OUTPUT_OVER_WINDOW,
    LLAMACPP_EXCEED_CONTEXT,
    ANTHROPIC_PROMPT_TOO_LONG,
    ANTHROPIC_INPUT_AND_MAX_TOKENS,
    ANTHROPIC_OUTPUT_CAP,
)

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def template_pattern(template: str) -> re.Pattern[str]:
    """Compile a message template into the regular expression that reads it back.

    Numeric placeholders become named integer groups (a repeat must equal the first
    occurrence), ``{model}`` matches a model id, and ``{at_least}`` an optional
    ``"at least "`` captured as the group ``at_least``. Spaces match any whitespace run
    and backticks are optional, as clients re-flow messages and strip Markdown.

    Args:
        template: one of this module's message templates.

    Returns:
        A case-insensitive pattern to ``search`` a provider message with.
    """
    seen: set[str] = set()
    out: list[str] = []
    for index, part in enumerate(_PLACEHOLDER.split(template)):
        if index % 2 == 0:
            # Clients re-flow messages and strip Markdown: any whitespace run, optional `.
            literal = re.escape(part).replace("`", "`?")
            out.append(re.sub(r"(?:\\ )+", r"\\s+", literal))
        elif part in seen:
            out.append("(?:at least )?" if part == "at_least" else f"(?P={part})")
        else:
            seen.add(part)
            if part == "at_least":
                out.append("(?P<at_least>at least )?")
            elif part == "model":
                out.append(r"(?P<model>[\w.:/@-]*\w)")
            else:
                out.append(f"(?P<{part}>\\d+)")
    return re.compile("".join(out), re.IGNORECASE)


# --- the value --------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WireError:
    """One refusal as a server sends it.

    Attributes:
        status: the HTTP status code.
        body: the JSON object of the response body (a fresh dict per builder call;
            treat it as read-only).
        headers: extra response headers as ``(name, value)`` pairs, lowercase names.
    """

    status: int
    body: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = ()

    def json_bytes(self) -> bytes:
        """The body serialised the way a server writes it (UTF-8 JSON)."""
        return json.dumps(self.body).encode("utf-8")

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (case-insensitive), or None when absent."""
        wanted = name.lower()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value
        return None


# --- envelopes --------------------------------------------------------------------


def _envelope(
    flavor: Flavor,
    status: int,
    message: str,
    *,
    error_type: str,
    code: str | None = None,
    param: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The body of one refusal in ``flavor``'s JSON shape."""
    if flavor == "anthropic":
        return {"type": "error", "error": {"type": error_type, "message": message}}
    if flavor == "llamacpp":
        return {"error": {"code": status, "message": message, "type": error_type, **(extra or {})}}
    if flavor == "vllm":
        return {"error": {"message": message, "type": error_type, "param": param, "code": status}}
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def _check_flavor(flavor: str) -> Flavor:
    if flavor not in _FLAVORS:
        raise ConfigurationError(f"unknown error flavor {flavor!r}; expected one of {_FLAVORS}")
    return flavor  # type: ignore[return-value]


def _check_count(name: str, value: int | None, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigurationError(f"{name} must be a non-negative int, got {value!r}")


# --- builders ---------------------------------------------------------------------


def context_overflow_error(
    flavor: Flavor, *, prompt_tokens: int, context_window: int, requested_output: int | None
) -> WireError:
    """The 400 a server answers when the request does not fit its context window.

    Args:
        flavor: which server to imitate.
        prompt_tokens: the prompt's exact token count as the server counts it.
        context_window: the server's window (``max_model_len``, ``n_ctx`` ...).
        requested_output: the request's ``max_tokens`` (None or 0 when not given).

    Returns:
        The refusal. OpenAI and Anthropic choose the prompt-only wording when the
        prompt alone exceeds the window. vLLM reports a prompt beyond
        ``context_window - requested_output`` as "at least" that bound plus one,
        as it really does. llama.cpp states the prompt count only (it checks the
        prompt against ``n_ctx``, never ``max_tokens``).

    Raises:
        ConfigurationError: an unknown flavor or a negative count.
    """
    flavor = _check_flavor(flavor)
    _check_count("prompt_tokens", prompt_tokens)
    _check_count("context_window", context_window)
    _check_count("requested_output", requested_output, allow_none=True)
    output = requested_output or 0
    if flavor == "anthropic":
        if prompt_tokens > context_window or output == 0:
            message = ANTHROPIC_PROMPT_TOO_LONG.format(
                prompt_tokens=prompt_tokens, context_window=context_window
            )
        else:
            message = ANTHROPIC_INPUT_AND_MAX_TOKENS.format(
                prompt_tokens=prompt_tokens,
                requested_output=output,
                context_window=context_window,
            )
        body = _envelope(flavor, 400, message, error_type="invalid_request_error")
        return WireError(status=400, body=body)
    if flavor == "llamacpp":
        message = LLAMACPP_EXCEED_CONTEXT.format(
            prompt_tokens=prompt_tokens, context_window=context_window
        )
        extra = {"n_prompt_tokens": prompt_tokens, "n_ctx": context_window}
        body = _envelope(flavor, 400, message, error_type="exceed_context_size_error", extra=extra)
        return WireError(status=400, body=body)
    if flavor == "vllm":
        max_input = context_window - output
        truncated = prompt_tokens > max_input >= 0
        stated = max_input + 1 if truncated else prompt_tokens
        message = VLLM_PROMPT_AND_OUTPUT.format(
            context_window=context_window,
            requested_output=output,
            at_least="at least " if truncated else "",
            prompt_tokens=stated,
            total_tokens=stated + output,
        )
        body = _envelope(flavor, 400, message, error_type="BadRequestError", param="input_tokens")
        return WireError(status=400, body=body)
    if prompt_tokens > context_window or output == 0:
        message = OPENAI_MESSAGES_ONLY.format(
            context_window=context_window, prompt_tokens=prompt_tokens
        )
    else:
        message = OPENAI_MESSAGES_AND_COMPLETION.format(
            context_window=context_window,
            total_tokens=prompt_tokens + output,
            prompt_tokens=prompt_tokens,
            requested_output=output,
        )
    body = _envelope(
        flavor,
        400,
        message,
        error_type="invalid_request_error",
        code="context_length_exceeded",
        param="messages",
    )
    return WireError(status=400, body=body)


def output_limit_error(
    flavor: Flavor, *, requested_output: int, max_output_tokens: int, model: str
) -> WireError:
    """The 400 a server answers when ``max_tokens`` exceeds the model's output cap.

    Args:
        flavor: which server to imitate.
        requested_output: the request's ``max_tokens``.
        max_output_tokens: the cap (for vLLM: ``max_model_len``, its only cap).
        model: the model id, named by the Anthropic wording.

    Returns:
        The refusal. llama.cpp has no output-cap refusal of its own (it clamps
        ``n_predict``); its builder uses the OpenAI wording in llama.cpp's envelope.

    Raises:
        ConfigurationError: an unknown flavor or a negative count.
    """
    flavor = _check_flavor(flavor)
    _check_count("requested_output", requested_output)
    _check_count("max_output_tokens", max_output_tokens)
    numbers = {"requested_output": requested_output, "max_output_tokens": max_output_tokens}
    if flavor == "anthropic":
        message = ANTHROPIC_OUTPUT_CAP.format(model=model, **numbers)
        body = _envelope(flavor, 400, message, error_type="invalid_request_error")
    elif flavor == "vllm":
        message = VLLM_OUTPUT_OVER_WINDOW.format(**numbers)
        body = _envelope(flavor, 400, message, error_type="BadRequestError", param="max_tokens")
    else:
        message = OPENAI_OUTPUT_CAP.format(**numbers)
        body = _envelope(
            flavor, 400, message, error_type="invalid_request_error", param="max_tokens"
        )
    return WireError(status=400, body=body)


def auth_error(flavor: Flavor) -> WireError:
    """The 401 a server answers a missing or wrong API key with.

    Texts: OpenAI "Incorrect API key provided" (code ``invalid_api_key``, OpenAI
    "Error codes" guide); vLLM's ``--api-key`` middleware answers ``{"error":
    "Unauthorized"}`` (vllm ``entrypoints/openai/api_server.py``); llama.cpp
    "Invalid API Key" (``tools/server/server.cpp``); Anthropic ``authentication_error``
    "invalid x-api-key" (Anthropic "Errors").

    Args:
        flavor: which server to imitate.

    Returns:
        The refusal.

    Raises:
        ConfigurationError: an unknown flavor.
    """
    flavor = _check_flavor(flavor)
    if flavor == "vllm":
        return WireError(status=401, body={"error": "Unauthorized"})
    if flavor == "anthropic":
        body = _envelope(flavor, 401, "invalid x-api-key", error_type="authentication_error")
    elif flavor == "llamacpp":
        body = _envelope(flavor, 401, "Invalid API Key", error_type="authentication_error")
    else:
        message = (
            "Incorrect API key provided. You can find your API key at "
            "https://platform.openai.com/account/api-keys."
        )
        body = _envelope(
            flavor, 401, message, error_type="invalid_request_error", code="invalid_api_key"
        )
    return WireError(status=401, body=body)


def rate_limit_error(flavor: Flavor, *, retry_after: float) -> WireError:
    """A 429 with ``retry-after`` and ``retry-after-ms``, both rounded up (never too short).

    The OpenAI and Anthropic SDKs read ``retry-after-ms`` first, then ``retry-after``.
    vLLM and llama.cpp never throttle by themselves (a gateway in front of them does);
    their builders answer in their own envelope with the gateway's plain wording.

    Args:
        flavor: which server to imitate.
        retry_after: seconds the client should wait, >= 0.

    Returns:
        The refusal.

    Raises:
        ConfigurationError: an unknown flavor or a negative or non-finite delay.
    """
    flavor = _check_flavor(flavor)
    if not isinstance(retry_after, (int, float)) or not math.isfinite(retry_after):
        raise ConfigurationError(f"retry_after must be a finite number, got {retry_after!r}")
    if retry_after < 0:
        raise ConfigurationError(f"retry_after must be >= 0 seconds, got {retry_after!r}")
    headers = (
        ("retry-after", str(math.ceil(retry_after))),
        ("retry-after-ms", str(math.ceil(retry_after * 1000))),
    )
    if flavor == "anthropic":
        # Anthropic "Rate limits" guide; text as the API answered it in 2024-2025.
        message = (
            "Number of request tokens has exceeded your per-minute rate limit "
            "(https://docs.anthropic.com/en/api/rate-limits); see the response headers "
            "for current usage. Please reduce the prompt length or the maximum tokens "
            "requested, or try again later."
        )
        body = _envelope(flavor, 429, message, error_type="rate_limit_error")
    elif flavor == "openai":
        body = _envelope(
            flavor,
            429,
            "Rate limit reached for requests",
            error_type="requests",
            code="rate_limit_exceeded",
        )
    elif flavor == "vllm":
        body = _envelope(flavor, 429, "Too Many Requests", error_type="TooManyRequests")
    else:
        body = _envelope(flavor, 429, "Too Many Requests", error_type="rate_limit_error")
    return WireError(status=429, body=body, headers=headers)


def server_error(flavor: Flavor, *, status: int = 500) -> WireError:
    """A 5xx answer: an internal error, or an overload (503, and Anthropic's 529).

    Texts: OpenAI "The server had an error while processing your request. Sorry
    about that!" (``server_error``); Anthropic ``api_error`` "Internal server error" and
    529 ``overloaded_error`` "Overloaded" (Anthropic "Errors"); llama.cpp 503
    ``unavailable_error`` "Loading model" (``tools/server/server.cpp``).

    Args:
        flavor: which server to imitate.
        status: the status, 500..599.

    Returns:
        The refusal.

    Raises:
        ConfigurationError: an unknown flavor or a status outside 500..599.
    """
    flavor = _check_flavor(flavor)
    if not isinstance(status, int) or not 500 <= status <= 599:
        raise ConfigurationError(f"server_error status must be in 500..599, got {status!r}")
    overloaded = status in (503, 529)
    if flavor == "anthropic":
        if overloaded:
            body = _envelope(flavor, status, "Overloaded", error_type="overloaded_error")
        else:
            body = _envelope(flavor, status, "Internal server error", error_type="api_error")
    elif flavor == "llamacpp":
        if overloaded:
            body = _envelope(flavor, status, "Loading model", error_type="unavailable_error")
        else:
            body = _envelope(flavor, status, "Internal Server Error", error_type="server_error")
    elif flavor == "vllm":
        error_type = "ServiceUnavailableError" if overloaded else "InternalServerError"
        message = "Service Unavailable" if overloaded else "Internal Server Error"
        body = _envelope(flavor, status, message, error_type=error_type)
    else:
        message = (
            "The engine is currently overloaded, please try again later"
            if overloaded
            else "The server had an error while processing your request. Sorry about that!"
        )
        body = _envelope(flavor, status, message, error_type="server_error")
    return WireError(status=status, body=body)


def invalid_request_error(flavor: Flavor, message: str, *, param: str | None = None) -> WireError:
    """A plain 400 for a malformed request, in ``flavor``'s JSON shape.

    Args:
        flavor: which server to imitate.
        message: what is wrong (the server's own words where it has them).
        param: the offending request field, where the flavor's shape carries one.

    Returns:
        The refusal.

    Raises:
        ConfigurationError: an unknown flavor or an empty message.
    """
    flavor = _check_flavor(flavor)
    if not isinstance(message, str) or not message:
        raise ConfigurationError("invalid_request_error needs a non-empty message")
    error_type = "BadRequestError" if flavor == "vllm" else "invalid_request_error"
    body = _envelope(flavor, 400, message, error_type=error_type, param=param)
    return WireError(status=400, body=body)


# Anthropic API reference, "Errors": 413 request_too_large.
_ANTHROPIC_REQUEST_TOO_LARGE = "Request exceeds the maximum allowed number of bytes."


def request_too_large_error(
    flavor: Flavor, *, body_bytes: int | None, max_body_bytes: int
) -> WireError:
    """The 413 a server answers a request body above its byte limit with.

    Texts: Anthropic ``request_too_large`` "Request exceeds the maximum allowed number of
    bytes." (Anthropic API reference, "Errors"). OpenAI, vLLM and llama.cpp publish no
    wording of their own for it; their builders state the sizes in the emulator's words,
    in each flavour's envelope (``code`` ``request_too_large`` for OpenAI, the integer
    status for vLLM and llama.cpp).

    Args:
        flavor: which server to imitate.
        body_bytes: the size the request declared (``Content-Length``), when known.
        max_body_bytes: the server's limit.

    Returns:
        The refusal; it classifies as ``FailureKind.REQUEST_TOO_LARGE``.

    Raises:
        ConfigurationError: an unknown flavor or a negative size.
    """
    flavor = _check_flavor(flavor)
    _check_count("body_bytes", body_bytes, allow_none=True)
    _check_count("max_body_bytes", max_body_bytes)
    if flavor == "anthropic":
        body = _envelope(flavor, 413, _ANTHROPIC_REQUEST_TOO_LARGE, error_type="request_too_large")
        return WireError(status=413, body=body)
    size = f" is {body_bytes} bytes," if body_bytes is not None else " is"
    message = (
        f"The request body{size} more than the {max_body_bytes} bytes this server accepts. "
        "Send a smaller request."
    )
    error_type = "BadRequestError" if flavor == "vllm" else "invalid_request_error"
    code = "request_too_large" if flavor == "openai" else None
    body = _envelope(flavor, 413, message, error_type=error_type, code=code)
    return WireError(status=413, body=body)
