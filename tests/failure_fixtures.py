"""Real provider refusals, each with where its text comes from.

Every fixture is a status/body/headers triple (or an object passed as ``error``) and the
classification it must get, numbers included. ``source`` names a provider document, a
server source file at a version, or a public issue quoting the server's answer. Where
a public report quoted only the message, the envelope around it is the provider's
documented error shape (named in the source).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from windowguard.core.failures import FailureKind as K


@dataclass(frozen=True, slots=True, kw_only=True)
class Fixture:
    name: str
    source: str
    kind: K
    status: int | None = None
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    error: Any = None  # passed as classify_failure(error) instead of the parts
    provider: str | None = None
    retryable: bool | None = None  # None: the kind's default
    prompt_tokens: int | None = None
    lower_bound: bool = False
    context_window: int | None = None
    requested_output: int | None = None
    max_output_tokens: int | None = None
    retry_after: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def _openai(message: str, *, type_: str | None, param: str | None, code: Any) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def _anthropic(type_: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


def _vllm(message: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "BadRequestError", "param": param, "code": 400}}


def _vllm_flat(message: str) -> dict[str, Any]:
    return {
        "object": "error",
        "message": message,
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }


FIXTURES: tuple[Fixture, ...] = (
    # ---------------------------------------------------------------- OpenAI
    Fixture(
        name="openai-chat-messages-only",
        source="https://github.com/dimagi/open-chat-studio/issues/463",
        status=400,
        body=_openai(
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 8202 tokens. Please reduce the length of the messages.",
            type_="invalid_request_error",
            param="messages",
            code="context_length_exceeded",
        ),
        kind=K.CONTEXT_OVERFLOW,
        prompt_tokens=8202,
        context_window=8192,
    ),
    Fixture(
        name="openai-chat-messages-and-completion",
        source="https://github.com/ChatGPTNextWeb/NextChat/issues/3195",
        status=400,
        body=_openai(
            "This model's maximum context length is 8192 tokens. However, you requested 8256 "
            "tokens (64 in the messages, 8192 in the completion). Please reduce the length of "
            "the messages or completion.",
            type_="invalid_request_error",
            param="messages",
            code="context_length_exceeded",
        ),
        headers=(("openai-processing-ms", "12"), ("openai-version", "2020-10-01")),
        kind=K.CONTEXT_OVERFLOW,
        provider="openai",
        prompt_tokens=64,
        context_window=8192,
        requested_output=8192,
    ),
    Fixture(
        name="openai-completions-legacy-prompt-wording",
        source="https://github.com/stanford-crfm/helm/issues/94",
        status=400,
        body=_openai(
            "This model's maximum context length is 2049 tokens, however you requested 2054 "
            "tokens (2049 in your prompt; 5 for the completion). Please reduce your prompt or "
            "completion length.",
            type_="invalid_request_error",
            param=None,
            code=None,
        ),
        kind=K.CONTEXT_OVERFLOW,
        prompt_tokens=2049,
        context_window=2049,
        requested_output=5,
    ),
    Fixture(
        name="openai-chat-messages-and-functions",
        source="OpenAI Chat Completions with tool schemas; wording quoted in a public client "
        "test (find_string 'in the functions'); all of it is prompt",
        status=400,
        body=_openai(
            "This model's maximum context length is 300000 tokens. However, your messages "
            "resulted in 350564 tokens (100 in the messages, 350464 in the functions). Please "
            "reduce the length of the messages or functions.",
            type_="invalid_request_error",
            param="messages",
            code="context_length_exceeded",
        ),
        kind=K.CONTEXT_OVERFLOW,
        prompt_tokens=350564,
        context_window=300000,
    ),
    Fixture(
        name="openai-responses-streamed-error-event",
        source="OpenAI API reference, Responses streaming event `error` (type, code, message, "
        "param, sequence_number); message as OpenAI Responses words an overflow",
        body={
            "type": "error",
            "code": "context_length_exceeded",
            "message": "Your input exceeds the context window of this model. Please adjust "
            "your input and try again.",
            "param": "input",
            "sequence_number": 2,
        },
        kind=K.CONTEXT_OVERFLOW,
    ),
    Fixture(
        name="openai-responses-streamed-error-event-as-sse-text",
        source="OpenAI API reference, Responses streaming: `event: error` SSE frame",
        body=(
            "event: error\n"
            'data: {"type":"error","code":"context_length_exceeded","message":"Your input '
            "exceeds the context window of this model. Please adjust your input and try "
            'again.","param":"input","sequence_number":2}\n\n'
        ),
        kind=K.CONTEXT_OVERFLOW,
    ),
    Fixture(
        name="openai-responses-failed-event",
        source="OpenAI API reference, Responses streaming event `response.failed` "
        "(response.error {code, message})",
        error={
            "type": "response.failed",
            "sequence_number": 5,
            "response": {
                "id": "resp_1",
                "object": "response",
                "status": "failed",
                "error": {"code": "server_error", "message": "The model produced an error."},
            },
        },
        kind=K.SERVER,
    ),
    Fixture(
        name="openai-output-cap",
        source="https://github.com/ChatGPTNextWeb/NextChat/issues/3195",
        status=400,
        body=_openai(
            "max_tokens is too large: 8192. This model supports at most 4096 completion "
            "tokens, whereas you provided 8192.",
            type_="invalid_request_error",
            param="max_tokens",
            code=None,
        ),
        kind=K.OUTPUT_LIMIT,
        requested_output=8192,
        max_output_tokens=4096,
    ),
    Fixture(
        name="openai-responses-max-output-tokens-above-max",
        source="OpenAI 400 code integer_above_max_value: \"Invalid 'param': integer above "
        'maximum value. Expected a value <= N, but got M instead." (OpenAI parameter '
        "validation wording; sibling of string_above_max_length)",
        status=400,
        body=_openai(
            "Invalid 'max_output_tokens': integer above maximum value. Expected a value <= "
            "128000, but got 200000 instead.",
            type_="invalid_request_error",
            param="max_output_tokens",
            code="integer_above_max_value",
        ),
        kind=K.OUTPUT_LIMIT,
        requested_output=200000,
        max_output_tokens=128000,
    ),
    Fixture(
        name="openai-output-cap-via-litellm",
        source="https://github.com/enoch3712/ExtractThinker/issues/346",
        status=400,
        body="litellm.BadRequestError: OpenAIException - max_tokens is too large: 32000. "
        "This model supports at most 16384 completion tokens, whereas you provided 32000.",
        kind=K.OUTPUT_LIMIT,
        requested_output=32000,
        max_output_tokens=16384,
    ),
    Fixture(
        name="openai-string-above-max-length",
        source="OpenAI 400 code string_above_max_length ('Expected a string with maximum "
        "length N, but got a string with length M instead.'), quoted in public client tests",
        status=400,
        body=_openai(
            "Invalid 'messages[1].content': string too long. Expected a string with maximum "
            "length 10485760, but got a string with length 12000000 instead.",
            type_="invalid_request_error",
            param="messages[1].content",
            code="string_above_max_length",
        ),
        kind=K.INVALID_REQUEST,
    ),
    Fixture(
        name="openai-insufficient-quota",
        source="OpenAI 'Error codes' guide: 429 You exceeded your current quota",
        status=429,
        body=_openai(
            "You exceeded your current quota, please check your plan and billing details. For "
            "more information on this error, read the docs: "
            "https://platform.openai.com/docs/guides/error-codes/api-errors.",
            type_="insufficient_quota",
            param=None,
            code="insufficient_quota",
        ),
        kind=K.RATE_LIMIT,
        retryable=False,
    ),
    Fixture(
        name="openai-rate-limit-try-again-in-text",
        source="OpenAI 'Rate limits' guide: 429 rate_limit_exceeded 'Please try again in Ns'",
        status=429,
        body=_openai(
            "Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): "
            "Limit 30000, Used 28000, Requested 4000. Please try again in 4.8s. Visit "
            "https://platform.openai.com/account/rate-limits to learn more.",
            type_="tokens",
            param=None,
            code="rate_limit_exceeded",
        ),
        kind=K.RATE_LIMIT,
        retry_after=4.8,
    ),
    Fixture(
        name="openai-rate-limit-retry-after-ms-header",
        source="openai-python _base_client._parse_retry_after_header (retry-after-ms first)",
        status=429,
        body=_openai(
            "Rate limit reached for requests",
            type_="requests",
            param=None,
            code="rate_limit_exceeded",
        ),
        headers=(("retry-after-ms", "1500"), ("retry-after", "2")),
        kind=K.RATE_LIMIT,
        retry_after=1.5,
    ),
    Fixture(
        name="openai-retry-after-http-date",
        source="RFC 9110 section 10.2.3 Retry-After as an HTTP-date, read against Date",
        status=503,
        body=_openai(
            "The engine is currently overloaded, please try again later",
            type_="server_error",
            param=None,
            code=None,
        ),
        headers=(
            ("retry-after", "Wed, 21 Oct 2026 07:28:30 GMT"),
            ("date", "Wed, 21 Oct 2026 07:28:00 GMT"),
        ),
        kind=K.OVERLOADED,
        retry_after=30.0,
    ),
    Fixture(
        name="openai-auth",
        source="OpenAI 'Error codes' guide: 401 Incorrect API key provided",
        status=401,
        body=_openai(
            "Incorrect API key provided: sk-abc***xyz. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            type_="invalid_request_error",
            param=None,
            code="invalid_api_key",
        ),
        kind=K.AUTH,
    ),
    Fixture(
        name="openai-model-not-found",
        source="OpenAI 'Error codes' guide: 404 model_not_found",
        status=404,
        body=_openai(
            "The model `gpt-9` does not exist or you do not have access to it.",
            type_="invalid_request_error",
            param=None,
            code="model_not_found",
        ),
        kind=K.NOT_FOUND,
    ),
    Fixture(
        name="openai-unsupported-region",
        source="OpenAI 'Error codes' guide: 403 Country, region, or territory not supported",
        status=403,
        body=_openai(
            "Country, region, or territory not supported",
            type_="request_forbidden",
            param=None,
            code="unsupported_country_region_territory",
        ),
        kind=K.PERMISSION,
    ),
    Fixture(
        name="openai-server-error",
        source="OpenAI 'Error codes' guide: 500 The server had an error while processing",
        status=500,
        body=_openai(
            "The server had an error while processing your request. Sorry about that!",
            type_="server_error",
            param=None,
            code=None,
        ),
        headers=(("x-should-retry", "true"),),
        kind=K.SERVER,
    ),
    # ---------------------------------------------------------------- Azure OpenAI
    Fixture(
        name="azure-context-length",
        source="Azure OpenAI returns OpenAI's context_length_exceeded body; apim-request-id "
        "header per Azure OpenAI REST reference",
        status=400,
        body=_openai(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130521 tokens. Please reduce the length of the messages.",
            type_="invalid_request_error",
            param="messages",
            code="context_length_exceeded",
        ),
        headers=(("apim-request-id", "0c5d7e3a"), ("x-ms-region", "East US")),
        kind=K.CONTEXT_OVERFLOW,
        provider="azure",
        prompt_tokens=130521,
        context_window=128000,
    ),
    Fixture(
        name="azure-content-filter",
        source="Azure OpenAI 'Content filtering' docs: 400 code content_filter, innererror "
        "ResponsibleAIPolicyViolation",
        status=400,
        body={
            "error": {
                "message": "The response was filtered due to the prompt triggering Azure "
                "OpenAI's content management policy. Please modify your prompt and retry.",
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
                "innererror": {
                    "code": "ResponsibleAIPolicyViolation",
                    "content_filter_result": {"violence": {"filtered": True, "severity": "medium"}},
                },
            }
        },
        kind=K.CONTENT_FILTER,
        provider="azure",
    ),
    Fixture(
        name="azure-rate-limit",
        source="Azure OpenAI 'Quotas and limits' docs: 429 'Please retry after N seconds'",
        status=429,
        body={
            "error": {
                "code": "429",
                "message": "Requests to the ChatCompletions_Create Operation under Azure OpenAI "
                "API version 2024-02-01 have exceeded token rate limit of your current OpenAI S0 "
                "pricing tier. Please retry after 6 seconds.",
            }
        },
        headers=(("retry-after", "6"),),
        kind=K.RATE_LIMIT,
        provider="azure",
        retry_after=6.0,
    ),
    # ---------------------------------------------------------------- Anthropic
    Fixture(
        name="anthropic-prompt-too-long",
        source="https://github.com/entropy-research/Devon/issues/88",
        status=400,
        body=_anthropic(
            "invalid_request_error", "prompt is too long: 209353 tokens > 199999 maximum"
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="anthropic",
        prompt_tokens=209353,
        context_window=199999,
    ),
    Fixture(
        name="anthropic-input-and-max-tokens",
        source="https://github.com/docker/docker-agent/issues/569",
        status=400,
        body={
            **_anthropic(
                "invalid_request_error",
                "input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, "
                "decrease input length or `max_tokens` and try again",
            ),
            "request_id": "req_011CUB2XUHWkFnQzxcKBbjpF",
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="anthropic",
        prompt_tokens=178959,
        context_window=200000,
        requested_output=64000,
    ),
    Fixture(
        name="anthropic-input-and-max-tokens-no-backticks",
        source="https://github.com/stackblitz/bolt.new/issues/7414 (backticks stripped by the "
        "client); classified from the message alone",
        status=400,
        body="input length and max_tokens exceed context limit: 90402 + 116650 > 204648, "
        "decrease input length or max_tokens and try again",
        kind=K.CONTEXT_OVERFLOW,
        provider="anthropic",
        prompt_tokens=90402,
        context_window=204648,
        requested_output=116650,
    ),
    Fixture(
        name="anthropic-output-cap",
        source="https://github.com/ChatGPTNextWeb/NextChat/issues/4964",
        status=400,
        body=_anthropic(
            "invalid_request_error",
            "max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens "
            "for claude-3-5-sonnet-20240620",
        ),
        kind=K.OUTPUT_LIMIT,
        provider="anthropic",
        requested_output=10000,
        max_output_tokens=4096,
    ),
    Fixture(
        name="anthropic-overloaded",
        source="Anthropic API 'Errors': 529 overloaded_error",
        status=529,
        body=_anthropic("overloaded_error", "Overloaded"),
        headers=(("x-should-retry", "true"), ("request-id", "req_1")),
        kind=K.OVERLOADED,
        provider="anthropic",
    ),
    Fixture(
        name="anthropic-overloaded-streamed",
        source="Anthropic 'Streaming messages': an `event: error` frame mid-stream",
        body='event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
        '"message": "Overloaded"}}\n\n',
        kind=K.OVERLOADED,
        provider="anthropic",
    ),
    Fixture(
        name="anthropic-rate-limit",
        source="Anthropic 'Rate limits': 429 rate_limit_error with retry-after",
        status=429,
        body=_anthropic(
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit "
            "(https://docs.anthropic.com/en/api/rate-limits); see the response headers for "
            "current usage. Please reduce the prompt length or the maximum tokens requested, "
            "or try again later.",
        ),
        headers=(("retry-after", "30"), ("anthropic-ratelimit-input-tokens-remaining", "0")),
        kind=K.RATE_LIMIT,
        provider="anthropic",
        retry_after=30.0,
    ),
    Fixture(
        name="anthropic-request-too-large",
        source="Anthropic API 'Errors': 413 request_too_large (bytes, not tokens)",
        status=413,
        body=_anthropic(
            "request_too_large", "Request exceeds the maximum allowed number of bytes."
        ),
        kind=K.REQUEST_TOO_LARGE,
        provider="anthropic",
    ),
    Fixture(
        name="anthropic-auth",
        source="Anthropic API 'Errors': 401 authentication_error",
        status=401,
        body=_anthropic("authentication_error", "invalid x-api-key"),
        kind=K.AUTH,
        provider="anthropic",
    ),
    Fixture(
        name="anthropic-window-stop-reason",
        source="Anthropic 'Handling stop reasons': model_context_window_exceeded",
        error={
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "partial"}],
            "stop_reason": "model_context_window_exceeded",
            "usage": {
                "input_tokens": 190000,
                "cache_read_input_tokens": 8000,
                "output_tokens": 2000,
            },
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="anthropic",
        prompt_tokens=198000,
    ),
    # ---------------------------------------------------------------- Bedrock
    Fixture(
        name="bedrock-input-too-long",
        source="AWS Bedrock InvokeModel ValidationException 'Input is too long for requested "
        "model.' (x-amzn-errortype header per AWS REST error shape)",
        status=400,
        body={"message": "Input is too long for requested model."},
        headers=(
            ("x-amzn-errortype", "ValidationException:http://internal.amazon.com/coral/"),
            ("x-amzn-requestid", "5f1c"),
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="bedrock",
    ),
    Fixture(
        name="bedrock-throttling-too-many-tokens",
        source="AWS Bedrock 'Common errors': ThrottlingException 'Too many tokens, please wait "
        "before trying again.' (a rate limit, NOT an overflow)",
        status=429,
        body={"message": "Too many tokens, please wait before trying again."},
        headers=(("x-amzn-errortype", "ThrottlingException:http://internal.amazon.com/coral/"),),
        kind=K.RATE_LIMIT,
        provider="bedrock",
    ),
    Fixture(
        name="bedrock-throttling-message-only",
        source="botocore ClientError text for the same ThrottlingException",
        body="An error occurred (ThrottlingException) when calling the InvokeModel operation: "
        "Too many tokens, please wait before trying again.",
        kind=K.RATE_LIMIT,
        provider="bedrock",
    ),
    Fixture(
        name="bedrock-vllm-style-at-least",
        source="https://github.com/decisionbox-io/decisionbox issue #347 (GLM on Bedrock "
        "openai-compat, vLLM wording)",
        status=400,
        body={
            "message": "This model's maximum context length is 202752 tokens. However, you "
            "requested 64000 output tokens and your prompt contains at least 138753 input "
            "tokens, for a total of at least 202753 tokens. Please reduce the length of the "
            "input prompt or the number of requested output tokens."
        },
        headers=(("x-amzn-errortype", "ValidationException:http://internal.amazon.com/coral/"),),
        kind=K.CONTEXT_OVERFLOW,
        provider="bedrock",
        prompt_tokens=138753,
        lower_bound=True,
        context_window=202752,
        requested_output=64000,
    ),
    # ---------------------------------------------------------------- Gemini / Vertex
    Fixture(
        name="vertex-input-token-count",
        source="Vertex AI Gemini 400 INVALID_ARGUMENT, quoted in public tests "
        "(find_string 'exceeds the maximum number of tokens allowed (')",
        status=400,
        body={
            "error": {
                "code": 400,
                "message": "The input token count (1196265) exceeds the maximum number of "
                "tokens allowed (1048575).",
                "status": "INVALID_ARGUMENT",
            }
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="gemini",
        prompt_tokens=1196265,
        context_window=1048575,
    ),
    Fixture(
        name="ai-studio-input-token-count",
        source="Gemini API (AI Studio) 400; body recorded in a public test of "
        "@langchain/google 0.2.3",
        status=400,
        body={
            "error": {
                "code": 400,
                "message": "The input token count exceeds the maximum number of tokens allowed "
                "(1048576).",
                "status": "INVALID_ARGUMENT",
            }
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="gemini",
        context_window=1048576,
    ),
    Fixture(
        name="vertex-max-output-tokens-range",
        source="Vertex AI 400, quoted in litellm tests (maxOutputTokens range, exclusive end)",
        status=400,
        body={
            "error": {
                "code": 400,
                "message": "Unable to submit request because it has a maxOutputTokens value of "
                "100000 but the supported range is from 1 (inclusive) to 65537 (exclusive). "
                "Update the value and try again.",
                "status": "INVALID_ARGUMENT",
            }
        },
        kind=K.OUTPUT_LIMIT,
        provider="gemini",
        requested_output=100000,
        max_output_tokens=65536,
    ),
    Fixture(
        name="gemini-resource-exhausted",
        source="Vertex AI 'Error code 429': RESOURCE_EXHAUSTED",
        status=429,
        body={
            "error": {
                "code": 429,
                "message": "Resource has been exhausted (e.g. check quota).",
                "status": "RESOURCE_EXHAUSTED",
            }
        },
        kind=K.RATE_LIMIT,
        provider="gemini",
    ),
    Fixture(
        name="gemini-unavailable",
        source="Gemini API 'Troubleshooting': 503 UNAVAILABLE 'The model is overloaded'",
        status=503,
        body={
            "error": {
                "code": 503,
                "message": "The model is overloaded. Please try again later.",
                "status": "UNAVAILABLE",
            }
        },
        kind=K.OVERLOADED,
        provider="gemini",
    ),
    Fixture(
        name="gemini-api-key-invalid",
        source="Gemini API 400 INVALID_ARGUMENT with ErrorInfo reason API_KEY_INVALID",
        status=400,
        body={
            "error": {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "API_KEY_INVALID",
                        "domain": "googleapis.com",
                    }
                ],
            }
        },
        kind=K.AUTH,
        provider="gemini",
    ),
    # ---------------------------------------------------------------- vLLM
    Fixture(
        name="vllm-le-0.10-messages-and-completion",
        source="vllm entrypoints/openai/serving_engine.py v0.9.1 (flat ErrorResponse); same "
        "text in https://github.com/vllm-project/vllm/issues/20409",
        status=400,
        body=_vllm_flat(
            "This model's maximum context length is 16384 tokens. However, you requested 122946 "
            "tokens (112946 in the messages, 10000 in the completion). Please reduce the length "
            "of the messages or completion."
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=112946,
        context_window=16384,
        requested_output=10000,
    ),
    Fixture(
        name="vllm-le-0.10-messages-only",
        source="vllm entrypoints/openai/serving_engine.py v0.9.1 (prompt-only branch)",
        status=400,
        body=_vllm_flat(
            "This model's maximum context length is 8192 tokens. However, you requested 9000 "
            "tokens in the messages, Please reduce the length of the messages."
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=9000,
        context_window=8192,
    ),
    Fixture(
        name="vllm-0.11-request-has-input-tokens",
        source="vllm entrypoints/openai/serving_engine.py v0.11.0 _validate_input",
        status=400,
        body=_vllm(
            "This model's maximum context length is 32768 tokens. However, your request has "
            "59360 input tokens. Please reduce the length of the input messages."
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=59360,
        context_window=32768,
    ),
    Fixture(
        name="vllm-0.11-max-tokens-too-large",
        source="https://github.com/claude-code-best/claude-code/issues/272 (vLLM 0.11 "
        "serving_engine.py, with its trailing ' None')",
        status=400,
        body=_vllm(
            "'max_tokens' or 'max_completion_tokens' is too large: 64000. This model's maximum "
            "context length is 64001 tokens and your request has 24235 input tokens (64000 > "
            "64001 - 24235). None"
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=24235,
        context_window=64001,
        requested_output=64000,
    ),
    Fixture(
        name="vllm-0.16-you-passed-truncated",
        source="vllm renderers/params.py @ 1aa021e8 TokenizeParams._token_len_check (prompt "
        "tokenized with truncation at max_input + 1, so 8129 is a lower bound)",
        status=400,
        body=_vllm(
            "You passed 8129 input tokens and requested 64 output tokens. However, the model's "
            "context length is only 8192 tokens, resulting in a maximum input length of 8128 "
            "tokens. Please reduce the length of the input prompt.",
            param="input_tokens",
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=8129,
        lower_bound=True,
        context_window=8192,
        requested_output=64,
    ),
    Fixture(
        name="vllm-0.16-you-passed-characters",
        source="vllm renderers/params.py @ 1aa021e8 TokenizeParams._text_len_check",
        status=400,
        body=_vllm(
            "You passed 100000 input characters and requested 64 output tokens. However, the "
            "model's context length is only 8192 tokens, resulting in a maximum input length of "
            "8128 tokens (at most 1040384 characters). Please reduce the length of the input "
            "prompt.",
            param="input_text",
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=8129,
        lower_bound=True,
        context_window=8192,
        requested_output=64,
    ),
    Fixture(
        name="vllm-current-at-least",
        source="vllm renderers/params.py (v0.18+); verbatim in a public report of vLLM "
        "serving Qwen3-14B-AWQ (find_string 'your prompt contains at least')",
        status=400,
        body=_vllm(
            "This model's maximum context length is 8192 tokens. However, you requested 4096 "
            "output tokens and your prompt contains at least 4097 input tokens, for a total of "
            "at least 8193 tokens. Please reduce the length of the input prompt or the number "
            "of requested output tokens.",
            param="input_tokens",
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=4097,
        lower_bound=True,
        context_window=8192,
        requested_output=4096,
    ),
    Fixture(
        name="vllm-current-exact",
        source="vllm renderers/params.py (main); verbatim in a public test of vLLM 0.22",
        status=400,
        body=_vllm(
            "This model's maximum context length is 131072 tokens. However, you requested 65536 "
            "output tokens and your prompt contains 100000 input tokens, for a total of 165536 "
            "tokens. Please reduce the length of the input prompt or the number of requested "
            "output tokens."
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=100000,
        context_window=131072,
        requested_output=65536,
    ),
    Fixture(
        name="vllm-current-characters",
        source="vllm renderers/params.py v0.25.1 (characters over the input bound)",
        status=400,
        body=_vllm(
            "This model's maximum context length is 8192 tokens. However, you requested 64 "
            "output tokens and your prompt contains 100000 characters (more than 81280 "
            "characters, which is the upper bound for 8128 input tokens). Please reduce the "
            "length of the input prompt or the number of requested output tokens.",
            param="input_text",
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=8129,
        lower_bound=True,
        context_window=8192,
        requested_output=64,
    ),
    Fixture(
        name="vllm-max-tokens-over-max-model-len",
        source="vllm renderers/params.py TokenizeParams.__post_init__; text as answered by a "
        "vLLM 0.2x server in a public report",
        status=400,
        body=_vllm(
            "max_completion_tokens=131072 cannot be greater than "
            "max_model_len=max_total_tokens=65536. Please request fewer output tokens.",
            param="max_completion_tokens",
        ),
        kind=K.OUTPUT_LIMIT,
        provider="vllm",
        requested_output=131072,
        max_output_tokens=65536,
    ),
    Fixture(
        name="vllm-multimodal-prompt-too-long",
        source="https://github.com/vllm-project/vllm/issues/12165",
        status=400,
        body=_vllm_flat(
            "The prompt (total length 25938) is too long to fit into the model (context length "
            "4096). Make sure that `max_model_len` is no smaller than the number of text tokens "
            "plus multimodal tokens."
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=25938,
        context_window=4096,
    ),
    Fixture(
        name="vllm-unauthorized",
        source="vllm entrypoints/openai/api_server.py --api-key middleware",
        status=401,
        body={"error": "Unauthorized"},
        kind=K.AUTH,
    ),
    # ---------------------------------------------------------------- SGLang
    Fixture(
        name="sglang-total",
        source="sglang srt/entrypoints/openai serving: 'Requested token count exceeds the "
        "model's maximum context length'",
        status=400,
        body=_vllm_flat(
            "Requested token count exceeds the model's maximum context length of 131072 tokens. "
            "You requested a total of 140000 tokens: 132000 tokens from the input messages and "
            "8000 tokens for the completion. Please reduce the number of tokens in the input "
            "messages or the completion to fit within the limit."
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="sglang",
        prompt_tokens=132000,
        context_window=131072,
        requested_output=8000,
    ),
    Fixture(
        name="sglang-scheduler-input-length",
        source="https://github.com/sgl-project/sglang/issues/4048",
        status=400,
        body=_vllm_flat(
            "Input length (160062 tokens) exceeds the maximum allowed length (59862 tokens). "
            "Use a shorter input or enable --allow-auto-truncate."
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="sglang",
        prompt_tokens=160062,
    ),
    Fixture(
        name="sglang-input-longer-than-context",
        source="sglang tokenizer_manager._validate_input_ids_in_context_window; also served by "
        "Together AI (quoted in public tests)",
        status=400,
        body=_vllm_flat(
            "The input (516368 tokens) is longer than the model's context length (262144 tokens)."
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="sglang",
        prompt_tokens=516368,
        context_window=262144,
    ),
    # ---------------------------------------------------------------- llama.cpp
    Fixture(
        name="llamacpp-exceed-context-size",
        source="llama.cpp tools/server/server-context.cpp (2025+); body quoted in a public "
        "README (find_string 'exceed_context_size_error')",
        status=400,
        body={
            "error": {
                "code": 400,
                "message": "request (4476 tokens) exceeds the available context size (4096 "
                "tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4476,
                "n_ctx": 4096,
            }
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="llamacpp",
        prompt_tokens=4476,
        context_window=4096,
    ),
    Fixture(
        name="llamacpp-exceed-context-size-numbers-in-fields-only",
        source="llama.cpp tools/server (mid-2025): message without numbers, n_prompt_tokens "
        "and n_ctx beside it",
        status=400,
        body={
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 13392,
                "n_ctx": 8192,
            }
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="llamacpp",
        prompt_tokens=13392,
        context_window=8192,
    ),
    Fixture(
        name="llamacpp-old-streamed-error",
        source="llama.cpp examples/server (2024): 'try increasing the context size or enable "
        "context shift', sent as an SSE 'error:' line",
        body='error: {"code":400,"message":"the request exceeds the available context size. '
        'try increasing the context size or enable context shift","type":"invalid_request_error"}',
        kind=K.CONTEXT_OVERFLOW,
        provider="llamacpp",
    ),
    Fixture(
        name="llamacpp-loading-model",
        source="llama.cpp tools/server/server.cpp: 503 unavailable_error 'Loading model'",
        status=503,
        body={"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
        kind=K.OVERLOADED,
        provider="llamacpp",
    ),
    # ---------------------------------------------------------------- llama-cpp-python
    Fixture(
        name="llama-cpp-python-value-error",
        source="llama-cpp-python llama_cpp/llama.py _create_completion ValueError",
        error=ValueError("Requested tokens (18690) exceed context window of 7168"),
        kind=K.CONTEXT_OVERFLOW,
        provider="llama-cpp-python",
        prompt_tokens=18690,
        context_window=7168,
    ),
    # ---------------------------------------------------------------- Ollama
    Fixture(
        name="ollama-prompt-too-long",
        source="Ollama native API 400, body quoted in a public test (find_string 'exceeded max "
        "context length by')",
        status=400,
        body={"error": "prompt too long; exceeded max context length by 4 tokens"},
        kind=K.CONTEXT_OVERFLOW,
        provider="ollama",
    ),
    # ---------------------------------------------------------------- Mistral
    Fixture(
        name="mistral-prompt-contains",
        source="Mistral La Plateforme 400, wording quoted in public tests (find_string 'too "
        "large for model with')",
        status=400,
        body={
            "object": "error",
            "message": "Prompt contains 40000 tokens and 0 draft tokens, too large for model "
            "with 32768 maximum context length",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="mistral",
        prompt_tokens=40000,
        context_window=32768,
    ),
    # ---------------------------------------------------------------- Groq
    Fixture(
        name="groq-context-length",
        source="Groq 400, whole body verbatim in https://github.com/OpenHands/OpenHands/issues/1902 "
        "and https://github.com/letta-ai/letta/issues/1963 (no numbers at all)",
        status=400,
        body=_openai(
            "Please reduce the length of the messages or completion.",
            type_="invalid_request_error",
            param="messages",
            code="context_length_exceeded",
        ),
        kind=K.CONTEXT_OVERFLOW,
    ),
    Fixture(
        name="groq-413-request-too-large-for-tpm",
        source="Groq 413 rate_limit_exceeded 'Request too large for model ... on tokens per "
        "minute (TPM)' (never passes by waiting)",
        status=413,
        body={
            "error": {
                "message": "Request too large for model `llama-3.3-70b-versatile` in "
                "organization `org_01` service tier `on_demand` on tokens per minute (TPM): "
                "Limit 12000, Requested 33476, please reduce your message size and try again. "
                "Visit https://console.groq.com/docs/rate-limits for more information.",
                "type": "tokens",
                "code": "rate_limit_exceeded",
            }
        },
        kind=K.REQUEST_TOO_LARGE,
        provider="groq",
        retryable=False,
    ),
    # ---------------------------------------------------------------- DeepSeek
    Fixture(
        name="deepseek-context-length",
        source="DeepSeek 400, body quoted in a public Go test (find_string 'However, your "
        "request has')",
        status=400,
        body=_openai(
            "This model's maximum context length is 65536 tokens. However, you requested 70000 "
            "tokens (70000 in the messages, 0 in the completion). Please reduce the length of "
            "the messages or completion.",
            type_="invalid_request_error",
            param=None,
            code="invalid_request_error",
        ),
        kind=K.CONTEXT_OVERFLOW,
        prompt_tokens=70000,
        context_window=65536,
        requested_output=0,
    ),
    Fixture(
        name="deepseek-max-tokens-range",
        source="https://github.com/we0-dev/we0/issues/56",
        status=400,
        body=_openai(
            "Invalid max_tokens value, the valid range of max_tokens is [1, 8192]",
            type_="invalid_request_error",
            param=None,
            code="invalid_request_error",
        ),
        kind=K.OUTPUT_LIMIT,
        provider="deepseek",
        max_output_tokens=8192,
    ),
    # ---------------------------------------------------------------- OpenRouter
    Fixture(
        name="openrouter-endpoint-context-length",
        source="openrouter.ai/docs/errors shape {error: {code, message}}; wording quoted in "
        'public tests (find_string "This endpoint\'s maximum context length")',
        status=400,
        body={
            "error": {
                "message": "This endpoint's maximum context length is 8192 tokens. However, you "
                "requested about 12000 tokens (10000 of text input, 2000 in the output). Please "
                'reduce the length of either one, or use the "middle-out" transform to compress '
                "your prompt automatically.",
                "code": 400,
            }
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="openrouter",
        prompt_tokens=10000,
        context_window=8192,
        requested_output=2000,
    ),
    Fixture(
        name="openrouter-moderation-403",
        source="openrouter.ai/docs/errors: 403 'your chosen model requires moderation and your "
        "input was flagged'",
        status=403,
        body={
            "error": {
                "code": 403,
                "message": "meta-llama/llama-guard requires moderation: your input was flagged",
                "metadata": {"reasons": ["violence"], "flagged_input": "..."},
            }
        },
        kind=K.CONTENT_FILTER,
        provider="openrouter",
    ),
    Fixture(
        name="openrouter-in-stream-error-chunk",
        source="openrouter.ai/docs/errors: mid-stream errors arrive as an SSE data event with "
        "error.code the status",
        body='data: {"error": {"code": 502, "message": "Provider returned error"}}',
        kind=K.SERVER,
    ),
    # ---------------------------------------------------------------- TGI
    Fixture(
        name="tgi-422-inputs-plus-max-new-tokens",
        source="text-generation-inference router/src/validation.rs ValidationError::"
        "MaxTotalTokens (HTTP 422, error_type validation)",
        status=422,
        body={
            "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= "
            "4096. Given: 4000 `inputs` tokens and 500 `max_new_tokens`",
            "error_type": "validation",
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="tgi",
        prompt_tokens=4000,
        context_window=4096,
        requested_output=500,
    ),
    Fixture(
        name="tgi-422-inputs-too-long",
        source="text-generation-inference router/src/validation.rs ValidationError::InputLength",
        status=422,
        body={
            "error": "Input validation error: `inputs` must have less than 4095 tokens. Given: "
            "5000",
            "error_type": "validation",
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="tgi",
        prompt_tokens=5000,
    ),
    # ---------------------------------------------------------------- LM Studio
    Fixture(
        name="lmstudio-keep-first-tokens",
        source="LM Studio server 400, quoted in public client tests (find_string 'Trying to "
        "keep the first'); the kept tokens are a lower bound of the prompt",
        status=400,
        body={
            "error": "Trying to keep the first 50785 tokens when context the overflows. However, "
            "the model is loaded with context length of only 45217 tokens, which is not enough. "
            "Try to load the model with a larger context length, or provide a shorter input"
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="lmstudio",
        prompt_tokens=50785,
        lower_bound=True,
        context_window=45217,
    ),
    # ------------------------------------------------- issue 12: current self-hosted wordings
    Fixture(
        name="vllm-0.33-prompt-alone-exact",
        source="vllm 0.33.0 (PyPI sdist) vllm/renderers/params.py:538-553 "
        "TokenizeParams._token_len_check; str(VLLMValidationError) appends '(parameter=..., "
        "value=...)' (vllm/exceptions.py:49-56); served as a 400 BadRequestError by "
        "vllm/entrypoints/serve/exception_handling/error_response.py create_error_response",
        status=400,
        body=_vllm(
            "This model's maximum context length is 8192 tokens. However, your prompt contains "
            "9000 input tokens, which exceeds this limit even without any output tokens. Please "
            "reduce the length of the input prompt. (parameter=input_tokens, value=9000)",
            param="input_tokens",
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=9000,
        context_window=8192,
    ),
    Fixture(
        name="vllm-0.33-prompt-alone-at-least",
        source="vllm 0.33.0 vllm/renderers/params.py:538-553: the prompt is tokenized with "
        "truncation at max_input_tokens + 1 (params.py:372-375; max_input_tokens is the window, "
        "params.py:225-236), so window + 1 is stated as 'at least'",
        status=400,
        body=_vllm(
            "This model's maximum context length is 8192 tokens. However, your prompt contains "
            "at least 8193 input tokens, which exceeds this limit even without any output "
            "tokens. Please reduce the length of the input prompt. (parameter=input_tokens, "
            "value=8193)",
            param="input_tokens",
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=8193,
        lower_bound=True,
        context_window=8192,
    ),
    Fixture(
        name="vllm-0.33-prompt-characters",
        source="vllm 0.33.0 vllm/renderers/params.py:394-413 TokenizeParams._text_len_check "
        "(characters over max_chars_per_token * window: more than the window in tokens)",
        status=400,
        body=_vllm(
            "This model's maximum context length is 8192 tokens. However, your prompt contains "
            "100000 characters (more than 81920 characters, which is the upper bound for 8192 "
            "input tokens). Please reduce the length of the input prompt. (parameter=input_text, "
            "value=100000)",
            param="input_text",
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="vllm",
        prompt_tokens=8193,
        lower_bound=True,
        context_window=8192,
    ),
    Fixture(
        name="llamacpp-500-context-size-exceeded",
        source="llama.cpp tools/server/server-context.cpp update_slots: llama_decode returned 1 "
        'with n_batch == 1 -> err = "Context size has been exceeded." sent by send_error\'s '
        "default ERROR_TYPE_SERVER, which format_error_response (tools/server/server-common.cpp) "
        "answers as 500 server_error; read at ngxson/llama.cpp@3f545be (2026-08-22) "
        "server-context.cpp:3568 and server-common.cpp:35-38, and tools/server/server.cpp:4175 "
        "@66d8ecc (2025-11)",
        status=500,
        body={
            "error": {
                "code": 500,
                "message": "Context size has been exceeded.",
                "type": "server_error",
            }
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="llamacpp",
    ),
    Fixture(
        name="llamacpp-2024-request-exceeds-context-size",
        source="llama.cpp examples/server/server.cpp @fbc98b7 (2024-10-15) line 2088: "
        "ERROR_TYPE_INVALID_REQUEST (400 invalid_request_error), no numbers beside it",
        status=400,
        body={
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size. try increasing the "
                "context size or enable context shift",
                "type": "invalid_request_error",
            }
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="llamacpp",
    ),
    Fixture(
        name="lmstudio-n-keep-ge-n-ctx",
        source="LM Studio (llama.cpp engine; closed source) 400 {'error': str}, verbatim in a "
        "public client test serving it (find_string 'is greater than the context length "
        "(n_keep'); n_keep is the part of the prompt it must keep, a lower bound of the prompt",
        status=400,
        body={
            "error": "The number of tokens to keep from the initial prompt is greater than the "
            "context length (n_keep: 4166>= n_ctx: 4096). Try to load the model with a larger "
            "context length, or provide a shorter input."
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="lmstudio",
        prompt_tokens=4166,
        lower_bound=True,
        context_window=4096,
    ),
    Fixture(
        name="lmstudio-n-keep-spaced",
        source="the same LM Studio wording with a space before '>=', as quoted in other public "
        "reports (find_string '>= n_ctx: ')",
        body="The number of tokens to keep from the initial prompt is greater than the context "
        "length (n_keep: 8485 >= n_ctx: 8192).",
        kind=K.CONTEXT_OVERFLOW,
        provider="lmstudio",
        prompt_tokens=8485,
        lower_bound=True,
        context_window=8192,
    ),
    Fixture(
        name="llama-cpp-python-server-no-max-tokens",
        source="llama-cpp-python llama_cpp/server/errors.py:49-82 (@3691546, v0.3.x) "
        "ErrorResponseFormatters.context_length_exceeded formats request.max_tokens, which "
        "defaults to None for chat (llama_cpp/server/types.py:213-216); 400, JSONResponse "
        "{'error': ErrorResponse}",
        status=400,
        body=_openai(
            "This model's maximum context length is 2048 tokens. However, you requested 2500 "
            "tokens (2500 in the messages, None in the completion). Please reduce the length of "
            "the messages or completion.",
            type_="invalid_request_error",
            param="messages",
            code="context_length_exceeded",
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="llama-cpp-python",
        prompt_tokens=2500,
        context_window=2048,
    ),
    Fixture(
        name="llama-cpp-python-server-completions-no-max-tokens",
        source="llama-cpp-python llama_cpp/server/errors.py:65-72 (text completion wording)",
        status=400,
        body=_openai(
            "This model's maximum context length is 2048 tokens, however you requested 3000 "
            "tokens (3000 in your prompt; None for the completion). Please reduce your prompt; "
            "or completion length.",
            type_="invalid_request_error",
            param="messages",
            code="context_length_exceeded",
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="llama-cpp-python",
        prompt_tokens=3000,
        context_window=2048,
    ),
    # ------------------------------------------------- issue 12: retry decisions
    Fixture(
        name="openai-429-request-too-large-for-tpm",
        source="OpenAI 429 body as logged by a client (find_string 'Request too large for gpt-4o "
        "in organization'): one request above the whole per-minute limit never passes by waiting",
        status=429,
        body=_openai(
            "Request too large for gpt-4o in organization org-FPY5TvqSJGKGWU6QsfNtWZB7 on tokens "
            "per min (TPM): Limit 30000, Requested 34102. The input or output tokens must be "
            "reduced in order to run successfully. Visit "
            "https://platform.openai.com/account/rate-limits to learn more.",
            type_="tokens",
            param=None,
            code="rate_limit_exceeded",
        ),
        kind=K.REQUEST_TOO_LARGE,
        retryable=False,
    ),
    Fixture(
        name="gemini-429-per-minute-quota-retry-info",
        source="Gemini API 429 body quoted whole in https://github.com/RooCodeInc/Roo-Code/issues/"
        "3883 (QuotaFailure ...PerMinute-FreeTier, RetryInfo retryDelay '26s')",
        status=429,
        body={
            "error": {
                "code": 429,
                "message": "You exceeded your current quota, please check your plan and billing "
                "details. For more information on this error, head to: "
                "https://ai.google.dev/gemini-api/docs/rate-limits.",
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [
                            {
                                "quotaMetric": "generativelanguage.googleapis.com/"
                                "generate_content_free_tier_input_token_count",
                                "quotaId": "GenerateContentInputTokensPerModelPerMinute-FreeTier",
                                "quotaDimensions": {
                                    "location": "global",
                                    "model": "gemini-2.5-flash",
                                },
                                "quotaValue": "250000",
                            }
                        ],
                    },
                    {
                        "@type": "type.googleapis.com/google.rpc.Help",
                        "links": [
                            {
                                "description": "Learn more about Gemini API quotas",
                                "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                            }
                        ],
                    },
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "26s"},
                ],
            }
        },
        kind=K.RATE_LIMIT,
        provider="gemini",
        retryable=True,
        retry_after=26.0,
    ),
    Fixture(
        name="gemini-429-per-day-quota-retry-info",
        source="Gemini API 429 for a spent daily free-tier quota, as recorded in a public client "
        "test (find_string 'GenerateRequestsPerDayPerProjectPerModel-FreeTier'): its RetryInfo "
        "says 36s, but the day's quota does not come back in 36s",
        status=429,
        body={
            "error": {
                "code": 429,
                "message": "You exceeded your current quota... Please retry in 36.36s.",
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [
                            {
                                "quotaMetric": "generativelanguage.googleapis.com/"
                                "generate_content_free_tier_requests",
                                "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                                "quotaDimensions": {
                                    "location": "global",
                                    "model": "gemini-3.7-flash",
                                },
                                "quotaValue": "20",
                            }
                        ],
                    },
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "36s"},
                ],
            }
        },
        kind=K.RATE_LIMIT,
        provider="gemini",
        retryable=False,
        retry_after=36.0,
    ),
    # ------------------------------------------------- more provider wordings
    Fixture(
        name="vertex-input-token-count-rest-list-with-errors",
        source="https://github.com/google-gemini/gemini-cli/issues/6678 (the REST stream's "
        "list wrapper and google.api errors[] entry, verbatim)",
        status=400,
        body=[
            {
                "error": {
                    "code": 400,
                    "message": "The input token count (1200293) exceeds the maximum number of "
                    "tokens allowed (1048576).",
                    "errors": [
                        {
                            "message": "The input token count (1200293) exceeds the maximum "
                            "number of tokens allowed (1048576).",
                            "domain": "global",
                            "reason": "badRequest",
                        }
                    ],
                    "status": "INVALID_ARGUMENT",
                }
            }
        ],
        kind=K.CONTEXT_OVERFLOW,
        provider="gemini",
        prompt_tokens=1200293,
        context_window=1048576,
    ),
    Fixture(
        name="vertex-input-token-count-is-n-but-model-only-supports-m",
        source="https://github.com/google-gemini/gemini-cli/issues/19727 (message verbatim); "
        "envelope: Vertex AI 400 INVALID_ARGUMENT {error: {code, message, status}}",
        status=400,
        body={
            "error": {
                "code": 400,
                "message": "Unable to submit request because the input token count is 1251952 "
                "but model only supports up to 1048576. Reduce the input token count and try "
                "again. You can also use the CountTokens API to calculate prompt token count "
                "and billable characters. Learn more: "
                "https://cloud.google.com/vertex-ai/generative-ai/docs/learn/models",
                "status": "INVALID_ARGUMENT",
            }
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="gemini",
        prompt_tokens=1251952,
        context_window=1048576,
    ),
    Fixture(
        name="bedrock-nova-input-tokens-exceeded",
        source="AWS Bedrock Nova ValidationException 'Input Tokens Exceeded' (wording as given "
        "in the issue; no public copy found); AWS REST error shape with x-amzn-errortype",
        status=400,
        body={"message": "Input Tokens Exceeded"},
        headers=(
            ("x-amzn-errortype", "ValidationException:http://internal.amazon.com/coral/"),
            ("x-amzn-requestid", "7a4bfff1-fdfb-4bda-70e8-81cc52a9189c"),
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="bedrock",
    ),
    Fixture(
        name="cohere-prompt-too-many-tokens",
        source="Cohere 'Errors (status codes and description)', 400 example messages "
        "(https://docs.cohere.com/v1/reference/errors); body {message}. 4081 is the prompt's "
        "limit, not the window, so it is not read as one",
        status=400,
        body={
            "message": "too many tokens: total number of tokens in the prompt cannot exceed "
            "4081 - received 4292. Try using a shorter prompt, or enabling prompt truncating. "
            "See https://docs.cohere.com/reference/generate for more details."
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="cohere",
        prompt_tokens=4292,
    ),
    Fixture(
        name="cohere-prompt-and-prediction-too-many-tokens",
        source="https://github.com/cohere-ai/sandbox-topically/issues/4 (older wording: prompt "
        "and prediction together; the count received is both, so no prompt count)",
        status=400,
        body={
            "message": "too many tokens: total number of tokens (prompt and prediction) cannot "
            "exceed 2048 - received 6354. Try using a shorter prompt or a smaller max_tokens "
            "value."
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="cohere",
        context_window=2048,
    ),
    Fixture(
        name="cohere-size-limit-exceeded",
        source="https://docs.cohere.com/v1/reference/errors (400 example message)",
        status=400,
        body={
            "message": "too many tokens: size limit exceeded by 11326 tokens. Try using shorter "
            "or fewer inputs, or setting prompt_truncation='AUTO'."
        },
        kind=K.CONTEXT_OVERFLOW,
    ),
    Fixture(
        name="cohere-max-tokens-output-cap",
        source="https://docs.cohere.com/v1/reference/errors (400 example message)",
        status=400,
        body={
            "message": "too many tokens: max tokens must be less than or equal to 4096, the "
            "maximum output for this model - received 8192."
        },
        kind=K.OUTPUT_LIMIT,
        provider="cohere",
        requested_output=8192,
        max_output_tokens=4096,
    ),
    Fixture(
        name="groq-498-flex-capacity-exceeded",
        source="Groq flex tier: 'requests will fail quickly with status 498 and error "
        "capacity_exceeded' (https://console.groq.com/docs/flex-processing); envelope "
        "{error: {message, type}} from https://console.groq.com/docs/errors; the message "
        "text itself is not published, so it is as given in the issue",
        status=498,
        body={
            "error": {
                "message": "Flex tier capacity exceeded. Please try again later.",
                "type": "capacity_exceeded",
                "code": "capacity_exceeded",
            }
        },
        kind=K.OVERLOADED,
    ),
    Fixture(
        name="llamacpp-501-not-supported",
        source="https://github.com/ggml-org/llama.cpp/issues/14223 (body verbatim); "
        "ERROR_TYPE_NOT_SUPPORTED -> 501 not_supported_error in format_error_response "
        "(tools/server): the server lacks the feature, so never retried",
        status=501,
        body={
            "error": {
                "code": 501,
                "message": "This server does not support embeddings. Start it with `--embeddings`",
                "type": "not_supported_error",
            }
        },
        kind=K.SERVER,
        provider="llamacpp",
        retryable=False,
    ),
    Fixture(
        name="bedrock-output-cap-maximum-tokens-exceeds-model-limit",
        source="https://github.com/vercel/ai/issues/2772 (ValidationException message "
        "verbatim); AWS REST error shape with x-amzn-errortype",
        status=400,
        body={
            "message": "The maximum tokens you requested exceeds the model limit of 4096. Try "
            "again with a maximum tokens value that is lower than 4096."
        },
        headers=(("x-amzn-errortype", "ValidationException:http://internal.amazon.com/coral/"),),
        kind=K.OUTPUT_LIMIT,
        provider="bedrock",
        max_output_tokens=4096,
    ),
    Fixture(
        name="bedrock-output-cap-exceed-wording-message-only",
        source="https://github.com/RooCodeInc/Roo-Code/issues/248 (the 'exceed' wording, as a "
        "client relays the message alone)",
        status=400,
        body="The maximum tokens you requested exceed the model limit of 4096. Try again with a "
        "maximum tokens value lower than 4096.",
        kind=K.OUTPUT_LIMIT,
        provider="bedrock",
        max_output_tokens=4096,
    ),
    Fixture(
        name="gateway-max-tokens-exceeds-model-limit-output-cap",
        source="a gateway relaying Bedrock's refusal by the parameter's name, quoted in a "
        "public client test (find_string 'exceeds the model limit of'); OpenAI error shape",
        status=400,
        body={"error": {"message": "max_tokens exceeds the model limit of 8192"}},
        kind=K.OUTPUT_LIMIT,
        max_output_tokens=8192,
    ),
    Fixture(
        name="tgi-422-max-new-tokens-output-cap",
        source="text-generation-inference router/src/validation.rs ValidationError::MaxNewTokens "
        "'`max_new_tokens` must be <= {0}. Given: {1}' (HTTP 422, error_type validation)",
        status=422,
        body={
            "error": "Input validation error: `max_new_tokens` must be <= 2048. Given: 4096",
            "error_type": "validation",
        },
        kind=K.OUTPUT_LIMIT,
        provider="tgi",
        requested_output=4096,
        max_output_tokens=2048,
    ),
    Fixture(
        name="tgi-422-inputs-plus-max-new-tokens-no-backticks",
        source="TGI ValidationError::MaxTotalTokens with the backticks stripped, as relays "
        "print it (wording as given in the issue); prompt + output over the window is an "
        "overflow, as the backticked form",
        status=422,
        body={
            "error": "Input validation error: inputs tokens + max_new_tokens must be <= 8192. "
            "Given: 8000 inputs tokens and 500 max_new_tokens",
            "error_type": "validation",
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="tgi",
        prompt_tokens=8000,
        context_window=8192,
        requested_output=500,
    ),
    Fixture(
        name="fireworks-prompt-too-long",
        source="Fireworks 400 (wording as given in the issue; the same text is quoted as an "
        "Ollama 400 in public client tests, find_string 'model maximum context length:'); "
        "OpenAI-compatible error shape",
        status=400,
        body={
            "error": {
                "object": "error",
                "type": "invalid_request_error",
                "message": "The prompt is too long: 40000, model maximum context length: 32768",
            }
        },
        kind=K.CONTEXT_OVERFLOW,
        prompt_tokens=40000,
        context_window=32768,
    ),
    Fixture(
        name="groq-context-length-total-only",
        source="Groq 400 context_length_exceeded stating the window and the total requested "
        "(wording as given in the issue); the total is prompt + completion, so no prompt count",
        status=400,
        body=_openai(
            "This model's maximum context length is 8192 tokens. However, you requested 9000 "
            "tokens. Please reduce the length of the messages or completion.",
            type_="invalid_request_error",
            param="messages",
            code="context_length_exceeded",
        ),
        kind=K.CONTEXT_OVERFLOW,
        context_window=8192,
    ),
    Fixture(
        name="bedrock-llama-maximum-context-length",
        source="Bedrock Llama ValidationException, recorded in pkdone/paul-genai-test-tools-ts "
        "src/llm/providers/bedrock/bedrock-titan/bedrock-titan.manifest.ts; AWS REST error "
        "shape",
        status=400,
        body={
            "message": "This model's maximum context length is 8192 tokens. Please reduce the "
            "length of the prompt."
        },
        headers=(("x-amzn-errortype", "ValidationException:http://internal.amazon.com/coral/"),),
        kind=K.CONTEXT_OVERFLOW,
        provider="bedrock",
        context_window=8192,
    ),
    # ----------------------------------------- issue 20 item 12, sources found by search
    Fixture(
        name="ollama-400-prompt-too-long-model-maximum-context-length",
        source="Ollama 400 {error: str}, the Fireworks wording: a public client test quotes "
        '\'Ollama HTTP 400: {"error":"The prompt is too long: 208863, model maximum context '
        "length: 202752\"}' (find_string 'model maximum context length:')",
        status=400,
        body={"error": "The prompt is too long: 208863, model maximum context length: 202752"},
        kind=K.CONTEXT_OVERFLOW,
        prompt_tokens=208863,
        context_window=202752,
    ),
    Fixture(
        name="bedrock-titan-too-many-input-tokens",
        source="Bedrock InvokeModel ValidationException, verbatim in Titan Text Lite evaluation "
        "output ('An error occurred (ValidationException) when calling the InvokeModel "
        "operation: 400 Bad Request: Too many input tokens. Max input tokens: 4096, request "
        "input token count: 7262 ') and in pkdone/paul-genai-test-tools-ts "
        "src/llm/providers/bedrock/bedrock-error-patterns.ts; AWS REST error shape. 4096 is the "
        "input limit, not the window",
        status=400,
        body={
            "message": "400 Bad Request: Too many input tokens. Max input tokens: 4096, request "
            "input token count: 7262 "
        },
        headers=(
            (
                "x-amzn-errortype",
                "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            ),
            ("x-amzn-requestid", "0d6f0c71-3a5e-4d1b-9a43-1b0a2f9e7c55"),
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="bedrock",
        prompt_tokens=7262,
    ),
    Fixture(
        name="bedrock-llama-malformed-input-max-gen-len",
        source="Bedrock InvokeModel (Llama) ValidationException, verbatim in "
        "pkdone/paul-genai-test-tools-ts src/llm/providers/bedrock/bedrock-llama/"
        "bedrock-llama-llm.ts ('Malformed input request: #/max_gen_len: 8192 is not less or "
        "equal to 2048, please reformat your input and try again.'); AWS REST error shape",
        status=400,
        body={
            "message": "Malformed input request: #/max_gen_len: 8192 is not less or equal to "
            "2048, please reformat your input and try again."
        },
        headers=(
            (
                "x-amzn-errortype",
                "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            ),
        ),
        kind=K.OUTPUT_LIMIT,
        provider="bedrock",
        requested_output=8192,
        max_output_tokens=2048,
    ),
    Fixture(
        name="bedrock-converse-malformed-input-max-tokens-boto-text",
        source="botocore's text of a Converse ValidationException, quoted in a public client "
        "test (find_string 'Malformed input request: #/max_tokens'); no status, as a client "
        "that kept only str(error) passes it",
        body="An error occurred (ValidationException) when calling the Converse operation: "
        "Malformed input request: #/max_tokens: 10000 is not less or equal to 4096, please "
        "reformat your input and try again.",
        kind=K.OUTPUT_LIMIT,
        provider="bedrock",
        requested_output=10000,
        max_output_tokens=4096,
    ),
    Fixture(
        name="bedrock-nova-extraneous-key-max-tokens-is-no-cap",
        source="https://github.com/logancyang/obsidian-copilot/issues/2145 (message verbatim): "
        "Nova's schema has no max_tokens; an invalid request, not an output cap to clamp",
        status=400,
        body={
            "message": "Malformed input request: #: extraneous key [max_tokens] is not "
            "permitted, please reformat your input and try again."
        },
        headers=(
            (
                "x-amzn-errortype",
                "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            ),
        ),
        kind=K.INVALID_REQUEST,
        provider="bedrock",
    ),
    Fixture(
        name="bedrock-messages-maximum-tokens-exceeds-model-limit",
        source="https://github.com/charmbracelet/crush/issues/946 (POST bedrock-runtime "
        "/v1/messages: 400 Bad Request, body verbatim)",
        status=400,
        body={"message": "The maximum tokens you requested exceeds the model limit of 32768"},
        kind=K.OUTPUT_LIMIT,
        provider="bedrock",
        max_output_tokens=32768,
    ),
    Fixture(
        name="cerebras-current-length-while-limit",
        source="https://github.com/cline/cline/issues/5140 (message verbatim: '400 Please reduce "
        "the length of the messages or completion. Current length is 42328 while limit is "
        "40000'); envelope: the OpenAI-compatible error shape. The length is prompt and "
        "completion together, so no prompt count",
        status=400,
        body=_openai(
            "Please reduce the length of the messages or completion. Current length is 42328 "
            "while limit is 40000",
            type_="invalid_request_error",
            param="messages",
            code="context_length_exceeded",
        ),
        kind=K.CONTEXT_OVERFLOW,
        provider="cerebras",
        context_window=40000,
    ),
    Fixture(
        name="gemini-streaming-input-token-count-no-prompt",
        source="https://github.com/arkavo-org/arkavo-edge/issues/371 (HTTP 400 body verbatim, "
        "streamGenerateContent)",
        status=400,
        body={
            "error": {
                "code": 400,
                "message": "The input token count exceeds the maximum number of tokens allowed "
                "(1048576).",
                "status": "INVALID_ARGUMENT",
            }
        },
        kind=K.CONTEXT_OVERFLOW,
        provider="gemini",
        context_window=1048576,
    ),
    Fixture(
        name="groq-429-tokens-per-day-try-again-in-go-duration",
        source="https://github.com/continuedev/continue/issues/10920 (429 message verbatim, "
        "'%3F' there is the issue form's encoding of '?'); envelope as in "
        "https://github.com/danielmiessler/Fabric/issues/364 ({error: {message, type: tokens, "
        "code: rate_limit_exceeded}}). No retry-after header: the wait is the message's Go "
        "duration, 9m38.016s",
        status=429,
        body=_openai(
            "Rate limit reached for model `llama-3.3-70b-versatile` in organization "
            "`org_01kjh7p9n8f1qs6nz2bz77vy6b` service tier `on_demand` on tokens per day (TPD): "
            "Limit 100000, Used 97050, Requested 3619. Please try again in 9m38.016s. Need more "
            "tokens? Upgrade to Dev Tier today at https://console.groq.com/settings/billing",
            type_="tokens",
            param=None,
            code="rate_limit_exceeded",
        ),
        kind=K.RATE_LIMIT,
        provider="groq",
        retry_after=578.016,
    ),
    Fixture(
        name="groq-429-retry-after-go-duration-header",
        source="Groq 429 with the wait as a Go duration in retry-after (the form the issue "
        "reports, 'retry-after: 1m26.4s'; Groq's documented x-ratelimit-reset-* headers use "
        "the same form, e.g. '2m59.56s', console.groq.com/docs/rate-limits); message as in "
        "https://github.com/bklieger-groq/stockbot-on-groq/issues/46, whose own wait the "
        "header outranks",
        status=429,
        body=_openai(
            "Rate limit reached for model `llama3-70b-8192` in organization "
            "`org_01hqm053avffh8w60ayqm1kr4a` on : Limit 500000, Used 500370, Requested 252. "
            "Please try again in 1m47.5854s. Visit https://console.groq.com/docs/rate-limits for "
            "more information.",
            type_="tokens",
            param=None,
            code="rate_limit_exceeded",
        ),
        headers=(
            ("retry-after", "1m26.4s"),
            ("x-ratelimit-reset-requests", "2m59.56s"),
            ("x-groq-region", "us-west-1"),
        ),
        kind=K.RATE_LIMIT,
        provider="groq",
        retry_after=86.4,
    ),
    # ---------------------------------------------------------------- gateways
    Fixture(
        name="nginx-502",
        source="nginx default 502 page in front of a model server",
        status=502,
        body="<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 "
        "Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
        kind=K.SERVER,
    ),
    Fixture(
        name="nginx-504",
        source="nginx default 504 page",
        status=504,
        body="<html><head><title>504 Gateway Time-out</title></head></html>",
        kind=K.TIMEOUT,
    ),
)
