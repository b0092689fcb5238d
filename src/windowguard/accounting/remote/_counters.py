"""One counter class per count API (shapes and sources in each docstring)."""

from __future__ import annotations

import re
from typing import Any, Final
from urllib.parse import quote

from ._client import Counter, chat_body, ensure_template, rendered
from ._convert import (
    Unconvertible,
    anthropic_tools,
    chat_messages,
    chat_to_anthropic,
    chat_to_gemini,
    chat_to_items,
    function_of,
    mapping,
    plain,
    responses_tools,
    text_of,
)
from ._types import CountQuery, Json, RemoteCountError

__all__ = [
    "AnthropicCountTokens",
    "GeminiCountTokens",
    "LlamaCppPythonCounter",
    "LlamaServerCounter",
    "OpenAIInputTokens",
    "SGLangTokenizeCounter",
    "TGICounter",
    "VLLMTokenizeCounter",
]

_ANTHROPIC_VERSION: Final = "2023-06-01"  # https://docs.claude.com/en/api/versioning


class VLLMTokenizeCounter(Counter):
    """vLLM ``POST /tokenize`` in its chat form (``count`` of the templated prompt).

    Shape (vllm ``entrypoints/serve/tokenize/protocol.py``): request ``model``,
    ``messages``, ``tools``, ``add_generation_prompt`` (true), ``add_special_tokens``
    (false, the chat endpoint's default); answer ``{"count", "max_model_len", "tokens",
    "token_strs"}``. Errors: ``{"error": {"message", "type", "param", "code"}}``.
    """

    name = "vllm POST /tokenize"

    def _body(self, query: CountQuery) -> Any:
        return chat_body(query, add_generation_prompt=True)

    def _exchange(self, body: Any, model: str, deadline: float) -> int:
        return self._int(self._call("/tokenize", body, deadline), "count", "/tokenize")


class SGLangTokenizeCounter(Counter):
    """SGLang ``POST /tokenize``.

    Current SGLang (``entrypoints/openai/protocol.py`` ``TokenizeRequest``: exactly one
    of ``prompt`` or ``messages``, plus ``tools``) templates ``messages`` the way its chat
    endpoint does; releases before that take ``prompt`` text only. With ``template=``
    the prompt is rendered here (:func:`windowguard.accounting.templates.render_prompt`) and sent as
    ``prompt`` with ``add_special_tokens: false`` (the template writes its own BOS).
    Answer ``{"tokens", "count", "max_model_len"}``; errors are a flat
    ``{"object": "error", "message", "type", "param", "code"}``.

    Args:
        base_url: the server, with or without ``/v1``.
        template: ``"qwen"``, ``"llama3"`` or ``"mistral"`` for text-only SGLang.
        api_key: sent as ``Authorization: Bearer``.
        timeout: seconds for the whole count.
    """

    name = "sglang POST /tokenize"

    def __init__(
        self,
        base_url: str,
        *,
        template: str | None = None,
        api_key: str | None = None,
        timeout: float = 2.0,
    ) -> None:
        super().__init__(base_url, api_key=api_key, timeout=timeout)
        self.template = ensure_template(template, required=False)

    def _body(self, query: CountQuery) -> Any:
        if self.template is None:
            return chat_body(query)
        prompt = rendered(query, self.template)
        return {"model": query.model, "prompt": prompt, "add_special_tokens": False}

    def _exchange(self, body: Any, model: str, deadline: float) -> int:
        return self._int(self._call("/tokenize", body, deadline), "count", "/tokenize")


class LlamaServerCounter(Counter):
    """llama.cpp's llama-server: ``POST /apply-template`` then ``POST /tokenize``.

    ``/apply-template`` takes the chat body and answers ``{"prompt"}`` -- the chat
    endpoint's own rendering, generation prompt included, minus a BOS the vocabulary
    adds itself; ``/tokenize`` takes ``{"content", "add_special", "parse_special"}`` and
    answers ``{"tokens": [...]}``. Both are asked exactly as the chat endpoint tokenizes
    (``add_special`` and ``parse_special`` true): llama.cpp
    ``tools/server/server-context.cpp`` ``post_apply_template``, ``post_tokenize`` and
    ``handle_completions_impl``. Errors: ``{"error": {"code", "message", "type"}}``.
    """

    name = "llama-server POST /apply-template + /tokenize"

    def _body(self, query: CountQuery) -> Any:
        return chat_body(query)

    def _exchange(self, body: Any, model: str, deadline: float) -> int:
        applied = self._call("/apply-template", body, deadline)
        prompt = self._field(applied, "prompt", "/apply-template")
        if not isinstance(prompt, str):
            raise RemoteCountError(
                f"{self.name} at {self._root}/apply-template: 'prompt' is not text",
                endpoint=self.name,
            )
        request = {"model": model, "content": prompt, "add_special": True, "parse_special": True}
        return self._list_length(self._call("/tokenize", request, deadline), "tokens", "/tokenize")


class LlamaCppPythonCounter(Counter):
    """llama-cpp-python's ``POST /extras/tokenize/count``: ``{"input"}`` -> ``{"count"}``.

    The endpoint counts raw text (no chat template), parsing special tokens but adding
    the vocabulary's BOS (``llama_cpp/server/app.py`` ``count_query_tokens``:
    ``tokenize(input, special=True)`` with ``add_bos`` left true), while the chat handler
    tokenizes its rendering with ``add_bos=False``. So the prompt is rendered here with
    ``template`` and the count of ``""`` (what the server adds to any text; asked once
    per model) is subtracted. Errors: 500 ``{"error": {"message", "type":
    "internal_server_error", ...}}``; a wrong key, 401 ``{"detail": "Invalid API key"}``.

    Args:
        base_url: the server, with or without ``/v1``.
        template: the model's chat template: ``"qwen"``, ``"llama3"`` or ``"mistral"``.
        api_key: sent as ``Authorization: Bearer``.
        timeout: seconds for the whole count.
    """

    name = "llama-cpp-python POST /extras/tokenize/count"

    def __init__(
        self, base_url: str, *, template: str, api_key: str | None = None, timeout: float = 2.0
    ) -> None:
        super().__init__(base_url, api_key=api_key, timeout=timeout)
        self.template = str(ensure_template(template, required=True))
        self._baselines: dict[str, int] = {}

    def _body(self, query: CountQuery) -> Any:
        return {"model": query.model, "input": rendered(query, self.template)}

    def _exchange(self, body: Any, model: str, deadline: float) -> int:
        path = "/extras/tokenize/count"
        baseline = self._baselines.get(model)
        if baseline is None:
            empty = self._call(path, {"model": model, "input": ""}, deadline)
            baseline = self._baselines[model] = self._int(empty, "count", path)
        return max(0, self._int(self._call(path, body, deadline), "count", path) - baseline)


class TGICounter(Counter):
    """Hugging Face TGI: ``POST /chat_tokenize`` (or ``POST /tokenize`` with ``template=``).

    ``/chat_tokenize`` takes the chat request and answers ``{"tokenize_response":
    [{"id", "text", "start", "stop"}, ...], "templated_text"}`` -- the chat path's
    template and tool prompt, tokenized with ``add_special_tokens: false`` as chat
    requests are (TGI ``router/src/server.rs`` ``get_chat_tokenize``, ``lib.rs``
    ``try_into_generate``). TGI releases without it answer ``/tokenize``
    (``{"inputs", "add_special_tokens"}`` -> a token list); give ``template`` to render
    the prompt here for them. Errors: ``{"error", "error_type"}``.

    Args:
        base_url: the server, with or without ``/v1``.
        template: ``"qwen"``, ``"llama3"`` or ``"mistral"`` to use ``/tokenize``.
        api_key: sent as ``Authorization: Bearer``.
        timeout: seconds for the whole count.
    """

    def __init__(
        self,
        base_url: str,
        *,
        template: str | None = None,
        api_key: str | None = None,
        timeout: float = 2.0,
    ) -> None:
        super().__init__(base_url, api_key=api_key, timeout=timeout)
        self.template = ensure_template(template, required=False)
        self.name = "tgi POST " + ("/tokenize" if self.template else "/chat_tokenize")

    def _body(self, query: CountQuery) -> Any:
        if self.template is None:
            return chat_body(query)
        return {"inputs": rendered(query, self.template), "add_special_tokens": False}

    def _exchange(self, body: Any, model: str, deadline: float) -> int:
        if self.template is None:
            data = self._call("/chat_tokenize", body, deadline)
            return self._list_length(data, "tokenize_response", "/chat_tokenize")
        return self._list_length(self._call("/tokenize", body, deadline), None, "/tokenize")


class AnthropicCountTokens(Counter):
    """Anthropic ``POST /v1/messages/count_tokens`` (the SDK's ``messages.count_tokens``).

    Request ``{"model", "messages", "system", "tools"}``, answer ``{"input_tokens"}``
    (docs.claude.com/en/api/messages-count-tokens); headers ``x-api-key`` and
    ``anthropic-version``. Anthropic transcripts are sent as they are; others are
    converted (``tool_calls`` -> ``tool_use``, ``tool`` messages -> ``tool_result``
    blocks, system messages -> ``system``).
    """

    name = "anthropic POST /v1/messages/count_tokens"
    media_formats = frozenset({"anthropic"})

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "anthropic-version": _ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _body(self, query: CountQuery) -> Any:
        if query.format == "anthropic":
            system, messages = plain(query.system), [plain(m) for m in query.messages]
        else:
            system, messages = chat_to_anthropic(chat_messages(query))
        body: Json = {"model": query.model, "messages": messages}
        if system:
            body["system"] = system
        tools = anthropic_tools(query.tools)
        if tools:
            body["tools"] = tools
        return body

    def _exchange(self, body: Any, model: str, deadline: float) -> int:
        path = "/v1/messages/count_tokens"
        return self._int(self._call(path, body, deadline), "input_tokens", path)


class OpenAIInputTokens(Counter):
    """OpenAI ``POST /v1/responses/input_tokens`` (SDK ``responses.input_tokens.count``).

    Request ``{"model", "input", "instructions", "tools"}``, answer ``{"object":
    "response.input_tokens", "input_tokens"}`` (OpenAI API reference, Responses "Get
    input token counts"). Responses items are sent as they are; a Chat Completions
    transcript is converted to items: messages, ``function_call`` per tool call,
    ``function_call_output`` per tool result.
    """

    name = "openai POST /v1/responses/input_tokens"
    media_formats = frozenset({"responses"})

    def _body(self, query: CountQuery) -> Any:
        body: Json = {"model": query.model}
        if query.format == "responses":
            body["input"] = [plain(item) for item in query.messages]
            if query.system:
                body["instructions"] = text_of(plain(query.system))
        else:
            body["input"] = chat_to_items(chat_messages(query))
        tools = responses_tools(query.tools)
        if tools:
            body["tools"] = tools
        return body

    def _exchange(self, body: Any, model: str, deadline: float) -> int:
        path = "/v1/responses/input_tokens"
        return self._int(self._call(path, body, deadline), "input_tokens", path)


class GeminiCountTokens(Counter):
    """Gemini ``POST /v1beta/models/{model}:countTokens`` with a ``generateContentRequest``.

    The ``generateContentRequest`` form counts what ``generateContent`` is sent --
    ``contents``, ``systemInstruction`` and ``tools`` (``functionDeclarations``); the bare
    ``contents`` form leaves the last two out (ai.google.dev/api/tokens). Answer
    ``{"totalTokens", "promptTokensDetails"}``; key in ``x-goog-api-key``. Messages are
    converted from OpenAI chat form (see :func:`chat_to_gemini`). ``base_url`` may be
    the API root, end in ``/v1beta`` (or ``/v1``), or be the OpenAI-compatible
    ``/v1beta/openai`` base.
    """

    name = "gemini POST models/{model}:countTokens"

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 2.0) -> None:
        super().__init__(base_url, api_key=api_key, timeout=timeout)
        root = base_url.strip().rstrip("/").removesuffix("/openai")
        self._root = root if re.search(r"/v1(alpha|beta)?\d*$", root) else root + "/v1beta"

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["x-goog-api-key"] = self._api_key
        return headers

    def _body(self, query: CountQuery) -> Any:
        system, contents = chat_to_gemini(chat_messages(query))
        name = query.model if query.model.startswith("models/") else f"models/{query.model}"
        request: Json = {"model": name, "contents": contents}
        if system:
            request["systemInstruction"] = system
        declarations = []
        for index, tool in enumerate(query.tools):
            function = function_of(mapping(plain(tool), f"tool {index}"))
            if function is None:
                raise Unconvertible(f"tool {index}: Gemini counts function tools only")
            keys = ("name", "description", "parameters")  # a FunctionDeclaration's fields
            declarations.append({key: function[key] for key in keys if key in function})
        if declarations:
            request["tools"] = [{"functionDeclarations": declarations}]
        return {"generateContentRequest": request}

    def _exchange(self, body: Any, model: str, deadline: float) -> int:
        name = body["generateContentRequest"]["model"]
        path = f"/{quote(name, safe='/')}:countTokens"
        return self._int(self._call(path, body, deadline), "totalTokens", path)
