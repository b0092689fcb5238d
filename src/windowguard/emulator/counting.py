"""The serving endpoints' own token-count APIs, as the emulator answers them.

Each count API is served in its real server's request, response and error shapes, and
counts exactly what the emulator's chat endpoint counts for the same request
(:func:`windowguard.accounting.templates.count_prompt` with the emulator's tokenizer and template:
tool schemas and the generation prompt included). Which APIs an emulator answers is
its ``count_apis`` option; each flavour's native ones by default.

================  ============================================  ===========================
API               routes                                        shapes from
================  ============================================  ===========================
vllm              ``POST /tokenize`` (chat or ``prompt`` form)  vllm ``entrypoints/serve/
                                                                tokenize/protocol.py``
sglang            ``POST /tokenize`` (``messages`` or           sglang ``entrypoints/openai/
                  ``prompt``)                                   protocol.py``
llama-server      ``POST /apply-template``, ``POST /tokenize``  llama.cpp ``tools/server/
                  (``content``)                                 server-context.cpp``
llama-cpp-python  ``POST /extras/tokenize/count``               llama-cpp-python
                                                                ``server/app.py``, ``errors.py``
tgi               ``POST /chat_tokenize``, ``POST /tokenize``   TGI ``router/src/server.rs``
                  (``inputs``)                                  and ``lib.rs``
anthropic         ``POST /v1/messages/count_tokens``            docs.claude.com count tokens
openai            ``POST /v1/responses/input_tokens``           OpenAI API reference
gemini            ``POST /v1beta/models/{m}:countTokens``       ai.google.dev/api/tokens
================  ============================================  ===========================

Text is counted the way those servers tokenize it: the template's control tokens
(``<|im_start|>``, ``<|eot_id|>``, ``[INST]`` ...) are one token each when special
tokens are parsed, and asking for special tokens adds the BOS a Llama 3 or Mistral
vocabulary adds (a Qwen vocabulary adds none). So a prompt rendered with
:func:`windowguard.accounting.templates.render_prompt` counts exactly as the chat endpoint does.
llama-server's ``/apply-template`` answers the rendering without that leading BOS, as
the real server strips it (llama.cpp ``common/chat.cpp``) and its ``/tokenize`` adds it
back with ``add_special``. Token ids in answers are placeholders (0): the emulator
counts, it does not expose a vocabulary.

Count requests are not model calls: they are not numbered, recorded or faulted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..accounting.counters import TokenCounter
from ..accounting.templates import count_prompt, render_prompt
from ..core import provider_errors
from ..core.exceptions import ConfigurationError, WindowGuardError
from ..core.provider_errors import Flavor, WireError
from .flavors import anthropic as anthropic_flavor
from .flavors._common import ParsedRequest
from .flavors.gemini import gemini_error, parse_count_tokens_request
from .flavors.openai import parse_chat_request
from .flavors.responses import parse_input_tokens_request

__all__ = [
    "COUNT_APIS",
    "CountReply",
    "CountSetup",
    "count_text",
    "handle",
    "resolve_count_apis",
    "route",
]

COUNT_APIS: Final = (
    "vllm",
    "sglang",
    "llama-server",
    "llama-cpp-python",
    "tgi",
    "anthropic",
    "openai",
    "gemini",
)
_NATIVE: Final[Mapping[str, tuple[str, ...]]] = {
    "openai": ("openai",),
    "vllm": ("vllm",),
    "llamacpp": ("llama-server", "llama-cpp-python"),
    "anthropic": ("anthropic",),
}
_TOKENIZE_OWNERS: Final = ("vllm", "sglang", "llama-server", "tgi")
# Control tokens of each template (windowguard.accounting.templates), one token each when parsed.
_CONTROL: Final[Mapping[str, tuple[str, ...]]] = {
    "qwen": ("<|im_start|>", "<|im_end|>"),
    "llama3": ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"),
    "mistral": (
        "<s>",
        "</s>",
        "[INST]",
        "[/INST]",
        "[AVAILABLE_TOOLS]",
        "[/AVAILABLE_TOOLS]",
        "[TOOL_CALLS]",
        "[TOOL_RESULTS]",
        "[/TOOL_RESULTS]",
    ),
}
_SPLIT: Final = {
    name: re.compile("(" + "|".join(re.escape(t) for t in tokens) + ")")
    for name, tokens in _CONTROL.items()
}
# The BOS a vocabulary adds when asked for special tokens (add_bos_token): Llama 3 and
# Mistral tokenizers add one, Qwen's does not.
_BOS: Final[Mapping[str, str]] = {"llama3": "<|begin_of_text|>", "mistral": "<s>"}
# Count APIs whose errors are one of provider_errors' envelopes.
_FLAVOR_OF: Final[Mapping[str, Flavor]] = {
    "vllm": "vllm",
    "llama-server": "llamacpp",
    "anthropic": "anthropic",
    "openai": "openai",
}
_GEMINI_PATH: Final = re.compile(r"^/v1(?:beta)?/models/([^/:]+):countTokens$")


@dataclass(frozen=True, slots=True, kw_only=True)
class CountSetup:
    """What a count needs from the emulator.

    Attributes:
        counter: the emulator's tokenizer.
        template: its chat template.
        context_window: reported as ``max_model_len`` where the API reports one.
        api_key: the key requests must carry, or None.
    """

    counter: TokenCounter
    template: str
    context_window: int
    api_key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CountReply:
    """One answer: JSON ``body``, or ``raw`` bytes for the servers that answer text."""

    status: int
    body: Any = None
    raw: bytes | None = None
    content_type: str = "application/json"


def resolve_count_apis(
    flavor: str, count_apis: str | Iterable[str] | None, template: str
) -> tuple[str, ...]:
    """The count APIs an emulator serves.

    Args:
        flavor: the emulator's flavour.
        count_apis: None (the flavour's native ones), ``"none"``, an API name or names.
        template: the emulator's chat template (llama-server needs a text form).

    Returns:
        The API names, in :data:`COUNT_APIS` order.

    Raises:
        ConfigurationError: an unknown name, two APIs that both own ``POST /tokenize``,
            or llama-server asked for with the ``"openai"`` template (no text form).
    """
    if count_apis is None:
        native = _NATIVE.get(flavor, ())
        if template == "openai":  # no prompt text to apply a template to
            native = tuple(api for api in native if api != "llama-server")
        return native
    names = (count_apis,) if isinstance(count_apis, str) else tuple(count_apis)
    if names in (("none",), ()):
        return ()
    unknown = [name for name in names if name not in COUNT_APIS]
    if unknown:
        raise ConfigurationError(
            f"unknown count API {unknown[0]!r}; use 'none' or any of {COUNT_APIS}"
        )
    owners = [name for name in names if name in _TOKENIZE_OWNERS]
    if len(set(owners)) > 1:
        raise ConfigurationError(
            f"{' and '.join(sorted(set(owners)))} both answer POST /tokenize; pick one"
        )
    if "llama-server" in names and template == "openai":
        raise ConfigurationError(
            "llama-server's /apply-template returns prompt text, which the 'openai' "
            "template does not have; use a qwen, llama3 or mistral template"
        )
    return tuple(name for name in COUNT_APIS if name in names)


def route(path: str, apis: tuple[str, ...]) -> str | None:
    """The count API that answers ``POST path`` on this emulator, or None."""
    candidates: tuple[str, ...] = ()
    if path == "/tokenize":
        candidates = _TOKENIZE_OWNERS
    elif path == "/apply-template":
        candidates = ("llama-server",)
    elif path == "/extras/tokenize/count":
        candidates = ("llama-cpp-python",)
    elif path == "/chat_tokenize":
        candidates = ("tgi",)
    elif path == "/v1/messages/count_tokens":
        candidates = ("anthropic",)
    elif path == "/v1/responses/input_tokens":
        candidates = ("openai",)
    elif _GEMINI_PATH.match(path):
        candidates = ("gemini",)
    return next((api for api in candidates if api in apis), None)


# --------------------------------------------------------------------------- counting


def count_text(setup: CountSetup, text: str, *, add_special: bool, parse_special: bool) -> int:
    """Tokens of ``text`` as the servers tokenize it (see the module docstring)."""
    tokens = 0
    splitter = _SPLIT.get(setup.template)
    if parse_special and splitter is not None:
        for index, piece in enumerate(splitter.split(text)):
            if index % 2:
                tokens += 1
            elif piece:
                tokens += setup.counter.count(piece)
    elif text:
        tokens = setup.counter.count(text)
    if add_special and setup.template in _BOS:
        tokens += 1
    return tokens


def _chat_count(setup: CountSetup, parsed: ParsedRequest) -> int:
    tools = list(parsed.tools) or None
    return count_prompt(setup.counter, list(parsed.messages), tools, template=setup.template)


def _rendered(setup: CountSetup, parsed: ParsedRequest) -> str:
    text = render_prompt(list(parsed.messages), list(parsed.tools) or None, template=setup.template)
    bos = _BOS.get(setup.template)
    return text.removeprefix(bos) if bos else text


def _zeros(count: int) -> list[int]:
    return [0] * count


# --------------------------------------------------------------------------- errors


def _reply(error: WireError) -> CountReply:
    return CountReply(status=error.status, body=error.body)


def _error(api: str, status: int, message: str) -> CountReply:
    """A refusal in ``api``'s own error shape."""
    if api == "sglang":  # flat ErrorResponse (sglang entrypoints/openai/protocol.py)
        error_type = "BadRequestError" if status == 400 else "InternalServerError"
        body = {"object": "error", "message": message, "type": error_type, "param": None}
        return CountReply(status=status, body=body | {"code": status})
    if api == "tgi":  # ErrorResponse {error, error_type} (TGI router/src/lib.rs)
        return CountReply(status=status, body={"error": message, "error_type": "validation"})
    if api == "llama-cpp-python":  # every failure is a 500 (llama_cpp/server/errors.py)
        error = {"message": message, "type": "internal_server_error", "param": None, "code": None}
        return CountReply(status=500, body={"error": error})
    if api == "gemini":
        return _reply(gemini_error(status, message))
    return _reply(provider_errors.invalid_request_error(_FLAVOR_OF.get(api, "openai"), message))


def _wire_message(error: WireError) -> str:
    inner = error.body.get("error")
    if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
        return str(inner["message"])
    return json.dumps(error.body)


def _unauthorized(api: str, missing: bool) -> CountReply:
    if api in ("vllm", "sglang"):  # the --api-key middleware of both servers
        return CountReply(status=401, body={"error": "Unauthorized"})
    if api == "tgi":  # TGI's auth middleware answers a bare 401
        return CountReply(status=401, raw=b"", content_type="text/plain")
    if api == "llama-cpp-python":  # FastAPI HTTPException (server/app.py authenticate)
        return CountReply(status=401, body={"detail": "Invalid API key"})
    if api == "gemini":  # ai.google.dev/gemini-api/docs/troubleshooting
        if missing:
            message = (
                "Method doesn't allow unregistered callers (callers without established "
                "identity). Please use API Key or other form of API consumer identity to "
                "call this API."
            )
            return _reply(gemini_error(403, message, "PERMISSION_DENIED"))
        return _reply(gemini_error(400, "API key not valid. Please pass a valid API key."))
    return _reply(provider_errors.auth_error(_FLAVOR_OF.get(api, "openai")))


def _offered_key(api: str, headers: Mapping[str, str], query: str) -> str | None:
    if api == "gemini":
        from_query = re.search(r"(?:^|&)key=([^&]*)", query)
        return headers.get("x-goog-api-key") or (from_query.group(1) if from_query else None)
    bearer = headers.get("authorization", "")
    return headers.get("x-api-key") or (bearer.removeprefix("Bearer ").strip() or None)


def _bad_json(api: str, exc: Exception) -> CountReply:
    if api == "llama-cpp-python":  # its error handler re-reads the body and fails
        return CountReply(status=500, raw=b"Internal Server Error", content_type="text/plain")
    if api == "tgi":  # axum's Json extractor rejection
        text = f"Failed to parse the request body as JSON: {exc}"
        return CountReply(status=400, raw=text.encode(), content_type="text/plain")
    return _error(api, 400, f"The request body is not valid JSON: {exc}")


# --------------------------------------------------------------------------- handlers


def handle(
    api: str, path: str, query: str, raw: bytes, headers: Mapping[str, str], setup: CountSetup
) -> CountReply:
    """Answer one count request of ``api``.

    Args:
        api: the API :func:`route` chose.
        path: the request path (without the query string).
        query: the query string ("" when absent).
        raw: the request body.
        headers: the request headers, lowercase names.
        setup: the emulator's tokenizer, template, window and key.

    Returns:
        The answer in the API's own shapes.
    """
    if setup.api_key is not None:
        offered = _offered_key(api, headers, query)
        if offered != setup.api_key:
            return _unauthorized(api, missing=offered is None)
    try:
        body = json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError) as exc:
        return _bad_json(api, exc)
    try:
        return _HANDLERS[api](path, body, setup)
    except WindowGuardError as exc:  # a message the template cannot render
        return _error(api, 400, str(exc))


def _chat(api: str, flavor: Flavor, body: Mapping[str, Any]) -> ParsedRequest | CountReply:
    """Validate a chat-form body the way the chat endpoint does."""
    for option, refused in (("add_generation_prompt", False), ("continue_final_message", True)):
        if body.get(option, not refused) is refused:
            return _error(api, 400, f"{option}={json.dumps(refused)} is not emulated")
    parsed = parse_chat_request(flavor, body)
    if isinstance(parsed, WireError):
        return _error(api, parsed.status, _wire_message(parsed))
    return parsed


def _vllm(path: str, body: Any, setup: CountSetup) -> CountReply:
    if not isinstance(body, Mapping):
        return _error("vllm", 400, "The request body must be a JSON object.")
    if "messages" in body:
        parsed = _chat("vllm", "vllm", body)
        if isinstance(parsed, CountReply):
            return parsed
        count = _chat_count(setup, parsed)
        if body.get("add_special_tokens") is True and setup.template in _BOS:
            count += 1  # "special tokens (e.g. BOS) ... on top of what the template adds"
    elif isinstance(body.get("prompt"), str):
        add = body.get("add_special_tokens", True) is not False
        count = count_text(setup, body["prompt"], add_special=add, parse_special=True)
    else:
        return _error("vllm", 400, "Field required: 'messages' (chat) or 'prompt' (text)")
    tokens = _zeros(count)
    return CountReply(
        status=200,
        body={
            "count": count,
            "max_model_len": setup.context_window,
            "tokens": tokens,
            "token_strs": None,
        },
    )


def _sglang(path: str, body: Any, setup: CountSetup) -> CountReply:
    if not isinstance(body, Mapping):
        return _error("sglang", 400, "The request body must be a JSON object.")
    if ("prompt" in body) == ("messages" in body):
        return _error("sglang", 400, "Exactly one of 'prompt' or 'messages' must be provided.")
    add = body.get("add_special_tokens", True) is not False
    prompt = body.get("prompt")
    if "messages" in body:
        parsed = _chat("sglang", "vllm", body)
        if isinstance(parsed, CountReply):
            return parsed
        count: int | list[int] = _chat_count(setup, parsed)
    elif isinstance(prompt, str):
        count = count_text(setup, prompt, add_special=add, parse_special=True)
    elif isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
        count = [count_text(setup, p, add_special=add, parse_special=True) for p in prompt]
    else:
        message = f"Invalid prompt type: {type(prompt)}. Expected str or List[str]."
        return _error("sglang", 400, message)
    tokens = [_zeros(n) for n in count] if isinstance(count, list) else _zeros(count)
    body_out = {"tokens": tokens, "count": count, "max_model_len": setup.context_window}
    return CountReply(status=200, body=body_out)


def _apply_template(path: str, body: Any, setup: CountSetup) -> CountReply:
    if not isinstance(body, Mapping):
        return _error("llama-server", 400, "The request body must be a JSON object.")
    parsed = _chat("llama-server", "llamacpp", body)
    if isinstance(parsed, CountReply):
        return parsed
    return CountReply(status=200, body={"prompt": _rendered(setup, parsed)})


def _llama_tokenize(path: str, body: Any, setup: CountSetup) -> CountReply:
    if not isinstance(body, Mapping):
        return _error("llama-server", 400, "The request body must be a JSON object.")
    content = body.get("content")
    if content is None:  # post_tokenize answers an empty list when there is no content
        return CountReply(status=200, body={"tokens": []})
    add = body.get("add_special", False) is True
    parse = body.get("parse_special", True) is not False
    pieces = content if isinstance(content, list) else [content]
    count = 0
    for piece in pieces:  # tokenize_mixed: token ids pass through, strings are tokenized
        if isinstance(piece, int) and not isinstance(piece, bool):
            count += 1
        elif isinstance(piece, str):
            count += count_text(setup, piece, add_special=False, parse_special=parse)
        else:
            return _error("llama-server", 400, '"content" must be a string or token list')
    if add and setup.template in _BOS:
        count += 1
    return CountReply(status=200, body={"tokens": _zeros(count)})


def _llama_cpp_python(path: str, body: Any, setup: CountSetup) -> CountReply:
    text = body.get("input") if isinstance(body, Mapping) else None
    if not isinstance(text, str):
        message = (
            "1 validation error:\n  {'type': 'missing', 'loc': ('body', 'input'), "
            "'msg': 'Field required'}"
        )
        return _error("llama-cpp-python", 500, message)
    return CountReply(
        status=200, body={"count": count_text(setup, text, add_special=True, parse_special=True)}
    )


def _axum_rejection(field: str) -> CountReply:
    text = f"Failed to deserialize the JSON body into the target type: missing field `{field}`"
    return CountReply(status=422, raw=text.encode(), content_type="text/plain")


def _tgi(path: str, body: Any, setup: CountSetup) -> CountReply:
    if path == "/tokenize":
        text = body.get("inputs") if isinstance(body, Mapping) else None
        if not isinstance(text, str):
            return _axum_rejection("inputs")
        add = body.get("add_special_tokens", True) is not False
        count = count_text(setup, text, add_special=add, parse_special=True)
        return CountReply(status=200, body=[_simple_token() for _ in range(count)])
    if not isinstance(body, Mapping) or "messages" not in body:
        return _axum_rejection("messages")
    parsed = _chat("tgi", "vllm", body)
    if isinstance(parsed, CountReply):
        return parsed
    count = _chat_count(setup, parsed)
    templated = _rendered(setup, parsed) if setup.template in _CONTROL else ""
    tokens = [_simple_token() for _ in range(count)]
    return CountReply(status=200, body={"tokenize_response": tokens, "templated_text": templated})


def _simple_token() -> dict[str, Any]:
    return {"id": 0, "text": "", "start": 0, "stop": 0}


def _anthropic(path: str, body: Any, setup: CountSetup) -> CountReply:
    if isinstance(body, Mapping) and "max_tokens" not in body:
        body = dict(body, max_tokens=1)  # count_tokens takes no max_tokens
    parsed = anthropic_flavor.parse_messages_request(body)
    if isinstance(parsed, WireError):
        return _reply(parsed)
    return CountReply(status=200, body={"input_tokens": _chat_count(setup, parsed)})


def _openai(path: str, body: Any, setup: CountSetup) -> CountReply:
    parsed = parse_input_tokens_request(body)
    if isinstance(parsed, WireError):
        return _reply(parsed)
    count = _chat_count(setup, parsed)
    return CountReply(status=200, body={"object": "response.input_tokens", "input_tokens": count})


def _gemini(path: str, body: Any, setup: CountSetup) -> CountReply:
    match = _GEMINI_PATH.match(path)
    parsed = parse_count_tokens_request(body, model=match.group(1) if match else "")
    if isinstance(parsed, WireError):
        return _reply(parsed)
    count = _chat_count(setup, parsed)
    details = [{"modality": "TEXT", "tokenCount": count}]
    return CountReply(status=200, body={"totalTokens": count, "promptTokensDetails": details})


def _llama_server(path: str, body: Any, setup: CountSetup) -> CountReply:
    if path == "/apply-template":
        return _apply_template(path, body, setup)
    return _llama_tokenize(path, body, setup)


_HANDLERS: Final = {
    "vllm": _vllm,
    "sglang": _sglang,
    "llama-server": _llama_server,
    "llama-cpp-python": _llama_cpp_python,
    "tgi": _tgi,
    "anthropic": _anthropic,
    "openai": _openai,
    "gemini": _gemini,
}
