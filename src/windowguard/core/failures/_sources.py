"""Reading a provider's answer: SDK exceptions, HTTP responses, bodies and headers.

Whatever :func:`~windowguard.core.failures.classify_failure` is given (an SDK exception, a
duck-typed httpx/httpx2 response, a streamed error event, a body as text, bytes or
JSON, headers as a mapping or pairs) is normalised here into a ``_Signal`` (status,
lowercased headers, body, text, and a transport kind when no response came back), the
body into ``_Fields`` (message, type/code values, token numbers, the provider its shape
reveals), and the headers into a wait in seconds and a provider name.

Invariants:
    * Duck-typed: no SDK or HTTP library is imported, and no SDK class name is read.
    * Never raises on a provider's answer: unreadable parts become ``None``, ``{}`` or
      ``""``.
    * No clock: an HTTP-date ``retry-after`` is measured against the response's own
      ``Date`` header, or not at all.
    * A wait is a finite number of seconds, never negative; a header that does not give
      one (garbage, ``inf``, ``nan``, ``-5``) is ignored, never raised on.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._patterns import _CONNECTION_WORDS, _RETRY_IN_TEXT, _TIMEOUT_WORDS
from ._values import Failure, FailureKind

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
    if transport is None and _request_of(error) is not None:
        # An SDK API error with a request and no response never reached a server.
        transport = FailureKind.CONNECTION
    return _Signal(None, headers, None, text, transport)


def _request_of(error: BaseException) -> object:
    """The error's ``request``; None when it has none (httpx's errors raise
    ``RuntimeError`` for a request that was never set)."""
    try:
        return getattr(error, "request", None)
    except RuntimeError:
        return None


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
    # Gemini/Vertex google.rpc details: RetryInfo.retryDelay in seconds, and the quotas a
    # QuotaFailure names (quotaId and quotaMetric, lowercased; quotaValue).
    retry_delay: float | None = None
    quotas: tuple[str, ...] = ()
    quota_values: tuple[str, ...] = ()


def _duration_seconds(value: object) -> float | None:
    """A google.protobuf.Duration in its JSON form ("36s", "1.203608125s") in seconds."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text.endswith("s"):
        return None
    try:
        seconds = float(text[:-1])
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _rpc_details(details: list[Any]) -> tuple[float | None, tuple[str, ...], tuple[str, ...]]:
    """RetryInfo's delay and QuotaFailure's quotas from Gemini's google.rpc ``details``."""
    delay: float | None = None
    quotas: list[str] = []
    values: list[str] = []
    for detail in details:
        if not isinstance(detail, Mapping):
            continue
        kind = str(detail.get("@type", ""))
        if kind.endswith("google.rpc.RetryInfo"):
            delay = _duration_seconds(detail.get("retryDelay"))
        elif kind.endswith("google.rpc.QuotaFailure"):
            violations = detail.get("violations")
            for violation in violations if isinstance(violations, list) else ():
                if not isinstance(violation, Mapping):
                    continue
                for field in ("quotaId", "quotaMetric"):
                    name = violation.get(field)
                    if isinstance(name, str):
                        quotas.append(name.lower())
                value = violation.get("quotaValue")
                if isinstance(value, (str, int)) and not isinstance(value, bool):
                    values.append(str(value))
    return delay, tuple(quotas), tuple(values)


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
    retry_delay: float | None = None
    quotas: tuple[str, ...] = ()
    quota_values: tuple[str, ...] = ()
    if isinstance(details, Mapping):
        raw_codes.append(details.get("error_code"))
    elif isinstance(details, list):  # Gemini google.rpc.ErrorInfo entries
        raw_codes.extend(d.get("reason") for d in details if isinstance(d, Mapping))
        retry_delay, quotas, quota_values = _rpc_details(details)
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
        retry_delay=retry_delay,
        quotas=quotas,
        quota_values=quota_values,
    )


# --- headers ----------------------------------------------------------------------

# Go's time.Duration text ("1m26.4s", "2m0s", "350ms", "1h2m3s": Duration.String() and
# what time.ParseDuration reads), which gateways written in Go put in retry-after.
_GO_DURATION = re.compile(r"(?:(?:\d+(?:\.\d*)?|\.\d+)(?:h|ms|m|s|us|\u00b5s|\u03bcs|ns))+")
_GO_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|\u00b5s|\u03bcs|ns)")
# unit -> (multiplier, divisor): sub-second units divide, so "350ms" is 0.35 exactly.
_GO_UNITS = {
    "h": (3600, 1),
    "m": (60, 1),
    "s": (1, 1),
    "ms": (1, 10**3),
    "us": (1, 10**6),
    "\u00b5s": (1, 10**6),
    "\u03bcs": (1, 10**6),
    "ns": (1, 10**9),
}


def _wait(seconds: float) -> float | None:
    """``seconds`` when it is a usable wait (finite, not negative), else None."""
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _go_duration_seconds(text: str) -> float | None:
    """A Go duration ("1m26.4s", "350ms", "0") in seconds; None for anything else.

    Only unsigned values: a negative wait is no wait."""
    text = text.strip()
    if text == "0":
        return 0.0
    if not _GO_DURATION.fullmatch(text):
        return None
    total = 0.0
    for number, unit in _GO_PART.findall(text):
        multiplier, divisor = _GO_UNITS[unit]
        total += float(number) * multiplier / divisor
    return _wait(total)


def _retry_after(
    headers: Mapping[str, str], message: str, body_delay: float | None = None
) -> float | None:
    """Seconds to wait: retry-after-ms, then retry-after (seconds, a Go duration such as
    ``1m26.4s``, or an HTTP date), then the body's own delay (Gemini's
    ``RetryInfo.retryDelay``), then the message text. A header that gives no usable wait
    is skipped."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = _wait(float(ms) / 1000.0)
        except ValueError:
            value = None
        if value is not None:
            return value
    after = headers.get("retry-after")
    if after is not None:
        value = _retry_after_value(after, headers.get("date"))
        if value is not None:
            return value
    if body_delay is not None:
        return body_delay
    match = _RETRY_IN_TEXT.search(message)
    if match is None:
        return None
    go, number, unit = match.groups()
    if go is not None:
        return _go_duration_seconds(go)  # "try again in 9m38.016s" (Groq)
    amount = float(number)
    return _wait(amount / 1000.0 if unit.lower() == "ms" else amount)


def _retry_after_value(after: str, date: str | None) -> float | None:
    """One ``retry-after`` value in seconds: a number, a Go duration, or an HTTP date."""
    try:
        return _wait(float(after))
    except ValueError:
        pass
    go = _go_duration_seconds(after)
    if go is not None:
        return go
    if date is None:
        return None  # an HTTP date is only usable against the response's own Date (no clock)
    from email.utils import parsedate_to_datetime  # on first use: loads the email package

    try:
        until = parsedate_to_datetime(after)
        now = parsedate_to_datetime(date)
        return _wait(max((until - now).total_seconds(), 0.0))
    except (TypeError, ValueError, IndexError, OverflowError):
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
