"""The message patterns and code tables a provider refusal is recognised by.

Each ``_Rule`` is one server's wording of a context overflow or an output-cap refusal,
with named groups for the token numbers it states (``prompt_tokens``,
``context_window``, ``requested_output``, ``total_tokens``, ``max_output_tokens``,
``max_input_tokens``, ``at_least``, ``exclusive_cap``); the ``_*_WORDS`` patterns
recognise statements without usable numbers; ``_CODE_KINDS`` maps body
``type``/``code`` values to kinds.

Invariants:
    * Rules are tried in order and the first match wins, so the specific wordings come
      before the general ones.
    * The message texts windowguard's own emulator sends come from
      :mod:`windowguard.core.provider_errors`; the rules for them are compiled from the same
      templates (so they cannot drift), plus the wordings of servers the emulator does
      not imitate. Each rule names where its wording comes from.
    * Pure data and regular expressions: nothing here reads a request or a response.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .. import provider_errors as wire
from ._values import FailureKind

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
    # vLLM 0.33 renderers/params.py _token_len_check: the prompt alone against the window
    # (max_input_tokens is the window itself); tokenized with truncation at window + 1, so
    # that count is stated as "at least". str(VLLMValidationError) appends
    # "(parameter=input_tokens, value=N)".
    _Rule(
        _rx(
            _CTX + r"\. However, your prompt contains (?P<at_least>at least )?"
            r"(?P<prompt_tokens>\d+) input tokens, which exceeds this limit even without any "
            r"output tokens"
        ),
        "vllm",
    ),
    # vLLM 0.33 renderers/params.py _text_len_check: more characters than the window's
    # tokens can hold, so more than the window in tokens (a lower bound, window + 1).
    _Rule(
        _rx(
            _CTX + r"\. However, your prompt contains \d+ characters \(more than \d+ "
            r"characters, which is the upper bound for (?P<max_input_tokens>\d+) input tokens\)"
        ),
        "vllm",
        truncated_at_max_input=True,
    ),
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
    # llama-cpp-python llama_cpp/server/errors.py formats the request's max_tokens, None
    # when the request set none (the chat default): "(P in the messages, None in the
    # completion)", or "(P in your prompt; None for the completion)" for completions.
    _Rule(
        _rx(
            _CTX + r"[.,] however,? you requested (?P<total_tokens>\d+) tokens "
            r"\((?P<prompt_tokens>\d+) in (?:the messages|your prompt)[,;] None (?:in|for) the "
            r"completion\)"
        ),
        "llama-cpp-python",
    ),
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
    # Vertex AI's other wording of the same 400 INVALID_ARGUMENT, verbatim in
    # https://github.com/google-gemini/gemini-cli/issues/19727: "Unable to submit request
    # because the input token count is N but model only supports up to M. ..."
    _Rule(
        _rx(
            r"input token count is (?P<prompt_tokens>\d+) but (?:the )?model only supports up "
            r"to (?P<context_window>\d+)"
        ),
        "gemini",
    ),
    # Cohere 400s, docs.cohere.com/reference/errors: the prompt alone above the model's
    # input limit (an input limit, not the window, so not read as one, as for TGI's
    # `inputs` and SGLang's "maximum allowed length")...
    _Rule(
        _rx(
            r"too many tokens: total number of tokens in the prompt cannot exceed "
            r"(?P<max_input_tokens>\d+) - received (?P<prompt_tokens>\d+)"
        ),
        "cohere",
    ),
    # ... and the older wording, prompt and prediction together above the window: the count
    # received is both (https://github.com/cohere-ai/sandbox-topically/issues/4).
    _Rule(
        _rx(
            r"too many tokens: total number of tokens \(prompt and prediction\) cannot exceed "
            r"(?P<context_window>\d+) - received (?P<total_tokens>\d+)"
        ),
        "cohere",
    ),
    # Mistral La Plateforme.
    _Rule(
        _rx(
            r"Prompt contains (?P<prompt_tokens>\d+) tokens(?: and \d+ (?:draft tokens|images))?"
            r",? too large for model with (?P<context_window>\d+) maximum context length"
        ),
        "mistral",
    ),
    # TGI router/src/validation.rs (422 validation errors), ValidationError::MaxTotalTokens:
    # prompt and max_new_tokens together above the window, so an overflow (a refit lowers
    # either), like Anthropic's "input length and `max_tokens` exceed context limit".
    # Relays and clients strip the backticks, so they are optional.
    _Rule(
        _rx(
            r"`?inputs`? tokens \+ `?max_new_tokens`? must be <= (?P<context_window>\d+)\. "
            r"Given: (?P<prompt_tokens>\d+) `?inputs`? tokens and (?P<requested_output>\d+) "
            r"`?max_new_tokens`?"
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
    # LM Studio's llama.cpp engine: "The number of tokens to keep from the initial prompt is
    # greater than the context length (n_keep: N>= n_ctx: M)". The kept tokens are part of
    # the prompt, so N is a lower bound of it.
    _Rule(
        _rx(r"n_keep: (?P<prompt_tokens>\d+)\s*>=\s*n_ctx: (?P<context_window>\d+)"),
        "lmstudio",
        lower_bound=True,
    ),
    # llama.cpp tools/server/server-context.cpp update_slots: the KV cache cannot take even
    # one more token (llama_decode returned 1 at n_batch 1); sent as a 500 server_error,
    # sometimes prefixed "decode() failed: ". No numbers.
    _Rule(_rx(r"Context size has been exceeded"), "llamacpp"),
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
    # Fireworks 400 (as given); the same text is quoted in public client tests as an
    # Ollama 400 (find_string "model maximum context length:").
    _Rule(
        _rx(
            r"prompt is too long: (?P<prompt_tokens>\d+), model maximum context length: "
            r"(?P<context_window>\d+)"
        )
    ),
    # Bedrock InvokeModel ValidationException (Titan, Mistral, Claude): "400 Bad Request: Too
    # many input tokens. Max input tokens: 8192, request input token count: 9279" (recorded
    # in pkdone/paul-genai-test-tools-ts src/llm/providers/bedrock/bedrock-error-patterns.ts;
    # the same text in Titan Text Lite evaluation logs). The limit is the model's input
    # limit, not its window, so only the prompt is read.
    _Rule(
        _rx(
            r"Too many input tokens\. Max input tokens: (?P<max_input_tokens>\d+), request input "
            r"token count: (?P<prompt_tokens>\d+)"
        ),
        "bedrock",
    ),
    # Cerebras (OpenAI-compatible) 400, verbatim in https://github.com/cline/cline/issues/5140:
    # "Please reduce the length of the messages or completion. Current length is 42328 while
    # limit is 40000". The length is prompt and completion together, so only the limit (the
    # window) is read.
    _Rule(
        _rx(
            r"reduce the length of the messages or completion\. Current length is "
            r"(?P<total_tokens>\d+) while limit is (?P<context_window>\d+)"
        ),
        "cerebras",
    ),
    # Bedrock's Llama models: the window alone (pkdone/paul-genai-test-tools-ts
    # src/llm/providers/bedrock/bedrock-titan/bedrock-titan.manifest.ts records it).
    _Rule(_rx(_CTX + r"\. Please reduce the length of the prompt")),
    # Groq (as given) and OpenAI-compatible servers that state only the total: "However,
    # you requested T tokens." T is prompt and completion together, so it is no prompt
    # count (observe_overflow would learn it as one); only the window is read. Every
    # wording with a "(P in the messages, ...)" breakdown is matched above.
    _Rule(_rx(_CTX + r"[.,] however,? you requested (?P<total_tokens>\d+) tokens(?!\s*\()")),
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
    r"|\binput tokens exceeded\b"  # Bedrock Nova ValidationException (as given)
    # Cohere: the prompt above its limit with no count, or "size limit exceeded by N
    # tokens" (docs.cohere.com/reference/errors).
    r"|too many tokens: (?:total number of tokens|size limit exceeded)"
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
    # Bedrock Converse / InvokeModel ValidationException: "The maximum tokens you requested
    # exceeds the model limit of 4096. Try again with a maximum tokens value that is lower
    # than 4096." (https://github.com/vercel/ai/issues/2772; "exceed" in
    # https://github.com/RooCodeInc/Roo-Code/issues/248). The limit itself is accepted.
    _Rule(
        _rx(r"maximum tokens you requested exceeds? the model limit of (?P<max_output_tokens>\d+)"),
        "bedrock",
    ),
    # Gateways relaying it by the parameter's name: "max_tokens exceeds the model limit of
    # 8192", "max_tokens (9000) exceeds model limit of 8192".
    _Rule(
        _rx(
            r"\bmax_tokens(?: \(?(?P<requested_output>\d+)\)?)? exceeds? (?:the )?model limit "
            r"of (?P<max_output_tokens>\d+)"
        )
    ),
    # TGI ValidationError::MaxNewTokens "`max_new_tokens` must be <= N. Given: M" (no fast
    # tokenizer: the cap is max_total_tokens - max_input_tokens). Not the combined
    # "`inputs` tokens + `max_new_tokens` must be <= N" overflow, which the lookarounds keep
    # out should the overflow rule ever miss it.
    _Rule(
        _rx(
            r"(?<!\+ )(?<!\+ `)`?max_new_tokens`? must be <= (?P<max_output_tokens>\d+)\. Given: "
            r"(?P<requested_output>\d+)(?!\d| `?inputs`? tokens)"
        ),
        "tgi",
    ),
    # Bedrock InvokeModel's JSON-schema check of the model's native body (a ValidationException,
    # "Malformed input request: #/<field>: N is not less or equal to C, please reformat your
    # input and try again."): max_gen_len for Llama, verbatim in
    # pkdone/paul-genai-test-tools-ts src/llm/providers/bedrock/bedrock-llama/bedrock-llama-llm.ts
    # ("#/max_gen_len: 8192 is not less or equal to 2048"); max_tokens as a Converse refusal is
    # quoted in a public client test (find_string "Malformed input request: #/max_tokens").
    # Only the output-length fields: "#: extraneous key [max_tokens] is not permitted" (Nova)
    # is an invalid request, not a cap.
    _Rule(
        _rx(
            r"Malformed input request: #/(?:max_tokens|max_gen_len|max_tokens_to_sample|"
            r"maxTokenCount|max_new_tokens|maxTokens): (?P<requested_output>\d+) is not less or "
            r"equal to (?P<max_output_tokens>\d+)"
        ),
        "bedrock",
    ),
    # Cohere (docs.cohere.com/reference/errors).
    _Rule(
        _rx(
            r"too many tokens: max tokens must be less than or equal to "
            r"(?P<max_output_tokens>\d+), the maximum output for this model - received "
            r"(?P<requested_output>\d+)"
        ),
        "cohere",
    ),
)

# Bedrock throttles with "ThrottlingException: Too many tokens, please wait before trying
# again." (AWS Bedrock API reference, "Common errors"): a rate limit, not an overflow.
# openai-python LengthFinishReasonError: the reply hit max_tokens before it was complete.
_OUTPUT_WORDS = _rx(r"length limit was reached")
_THROTTLE_WORDS = _rx(r"throttl|too many tokens, please wait")
_QUOTA_WORDS = _rx(
    r"insufficient_quota|exceeded your current quota|check your plan and billing|"
    r"spend limit|credit balance is too low|insufficient credits"
)
# One request above the whole per-minute budget: OpenAI "Request too large for gpt-4o in
# organization ... on tokens per min (TPM): Limit 30000, Requested 34102", Groq "Request too
# large for model `...` ... on tokens per minute (TPM)". Waiting never lets it pass.
_TOO_LARGE_WORDS = _rx(r"\bRequest too large for\b")
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
# "try again in 4.8s", "retry after 6 seconds", and Groq's Go durations in its 429 text:
# "Please try again in 9m38.016s." (https://github.com/continuedev/continue/issues/10920),
# "in 1m47.5854s" (https://github.com/bklieger-groq/stockbot-on-groq/issues/46). Group 1
# is a Go duration, else groups 2 and 3 are a number and its unit.
_RETRY_IN_TEXT = _rx(
    r"(?:retry|try again) (?:after|in) (?:"
    r"((?:\d+(?:\.\d+)?(?:h|m)(?!s))+(?:\d+(?:\.\d+)?(?:ms|s|us|\u00b5s|ns))?)(?![a-z])"
    r"|(\d+(?:\.\d+)?) ?(ms|s|sec|seconds?)\b)"
)

# Body type/code values -> kind (OpenAI, Anthropic, vLLM, llama.cpp, Gemini status).
_CODE_KINDS: dict[str, FailureKind] = {
    "context_length_exceeded": FailureKind.CONTEXT_OVERFLOW,
    "exceed_context_size_error": FailureKind.CONTEXT_OVERFLOW,
    "model_context_window_exceeded": FailureKind.CONTEXT_OVERFLOW,
    "string_above_max_length": FailureKind.INVALID_REQUEST,
    "request_too_large": FailureKind.REQUEST_TOO_LARGE,
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
    # Groq's flex tier at capacity (HTTP 498, console.groq.com/docs/flex-processing).
    "capacity_exceeded": FailureKind.OVERLOADED,
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
    # llama.cpp's ERROR_TYPE_NOT_SUPPORTED (HTTP 501): the server lacks the feature; a
    # server answer, but never retryable (see _NOT_SUPPORTED_CODES).
    "not_supported_error": FailureKind.SERVER,
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


# Body codes of a permanent "this server does not do that": never retryable, whatever kind
# the status gives (llama.cpp tools/server/server-common.cpp format_error_response).
_NOT_SUPPORTED_CODES = frozenset({"not_supported_error"})


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
