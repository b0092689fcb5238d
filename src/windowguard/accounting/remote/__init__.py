"""Remote exact counts: the serving endpoint's own count of a request.

A pruning decision near the edge of the window is settled by asking the server that
will answer the request how many prompt tokens it is -- with its own tokenizer, chat
template, tool rendering and generation prompt. One class per count API:

==========================  =========================================  ================
class                       request (source of the shape)              count
==========================  =========================================  ================
VLLMTokenizeCounter         ``POST /tokenize`` chat form: ``model``,    ``count``
                            ``messages``, ``tools``,
                            ``add_generation_prompt`` (vllm
                            ``entrypoints/serve/tokenize/protocol.py``
                            ``TokenizeChatRequest``)
SGLangTokenizeCounter       ``POST /tokenize`` with ``messages`` (sglang ``count``
                            ``entrypoints/openai/protocol.py``
                            ``TokenizeRequest``, current main) or, with
                            ``template=``, the locally rendered
                            ``prompt`` (older releases take text only)
LlamaServerCounter          ``POST /apply-template`` -> ``prompt``,    ``len(tokens)``
                            then ``POST /tokenize`` ``content``,
                            ``add_special``, ``parse_special``
                            (llama.cpp ``tools/server/server-context.cpp``)
LlamaCppPythonCounter       ``POST /extras/tokenize/count``            ``count`` minus
                            ``{"input": text}`` of the prompt rendered  the count of ""
                            here (llama-cpp-python ``server/app.py``)
TGICounter                  ``POST /chat_tokenize`` (TGI               ``len`` of
                            ``router/src/server.rs``), or with          the token list
                            ``template=`` ``POST /tokenize``
                            ``{"inputs", "add_special_tokens"}``
AnthropicCountTokens        ``POST /v1/messages/count_tokens``         ``input_tokens``
                            (docs.claude.com/en/api/messages-count-
                            tokens)
OpenAIInputTokens           ``POST /v1/responses/input_tokens``        ``input_tokens``
                            (developers.openai.com/api/reference,
                            responses ``input_tokens``)
GeminiCountTokens           ``POST /v1beta/models/{m}:countTokens``    ``totalTokens``
                            ``generateContentRequest``
                            (ai.google.dev/api/tokens)
==========================  =========================================  ================

What each count includes, and why it equals the chat endpoint's ``prompt_tokens``:

* vLLM: ``/tokenize`` renders the chat template with the same ``tools`` and
  ``add_generation_prompt`` (default true) and ``add_special_tokens`` (default false) as
  ``/v1/chat/completions``.
* llama-server: ``/apply-template`` runs the chat endpoint's own template code
  (``oaicompat_chat_params_parse``), which strips a leading BOS the vocabulary adds by
  itself (``common/chat.cpp``); the chat endpoint then tokenizes with
  ``add_special=true, parse_special=true``, so ``/tokenize`` is asked the same.
* llama-cpp-python: ``/extras/tokenize/count`` counts raw text, with special tokens
  parsed (``tokenize(..., special=True)``) but *with* ``add_bos=True``, while the chat
  handler tokenizes the rendered template with ``add_bos=False`` (Jinja2ChatFormatter
  sets ``added_special``). The client renders the prompt with
  :func:`windowguard.accounting.templates.render_prompt` and subtracts what the server adds to
  every text (the count of ``""``, asked once).
* TGI: ``/chat_tokenize`` is ``try_into_generate`` (the chat path's template and tool
  prompt) tokenized with ``add_special_tokens: false``, as chat requests are.
* Anthropic, OpenAI, Gemini: the provider's own count of the request.

Formats: a query's messages are the caller's own (dicts or SDK objects, dumped with
``model_dump(exclude_none=True)``); they are converted to what the endpoint takes
(OpenAI chat messages for the open servers, Responses items, Anthropic messages, Gemini
``contents``). A transcript counted in another provider's format is that provider's
count of the same conversation, not byte-for-byte the original request. Reasoning items
a conversion cannot carry are counted as nothing. A request holding images, audio or
documents is counted only by a count API that counts them as the provider charges them
(``media_formats``: Anthropic's of Anthropic messages, OpenAI's of Responses items); the
others refuse it with a :class:`RemoteCountError`, since a conversion drops the media
and an open server's ``/tokenize`` counts a placeholder for each, not its tokens.

Invariants: every failure -- refused, timed out, non-2xx (with the server's own error
text), redirected (never followed), a body that is not JSON or has no count, a message
that cannot be converted -- raises :class:`RemoteCountError` naming the endpoint and the
reason; ``timeout`` bounds the whole count (all its requests), even against a server
that accepts and never answers; ``acount`` never blocks the event loop; API keys never
appear in an error message.
"""

from __future__ import annotations

from ._counters import AnthropicCountTokens as AnthropicCountTokens
from ._counters import GeminiCountTokens as GeminiCountTokens
from ._counters import LlamaCppPythonCounter as LlamaCppPythonCounter
from ._counters import LlamaServerCounter as LlamaServerCounter
from ._counters import OpenAIInputTokens as OpenAIInputTokens
from ._counters import SGLangTokenizeCounter as SGLangTokenizeCounter
from ._counters import TGICounter as TGICounter
from ._counters import VLLMTokenizeCounter as VLLMTokenizeCounter
from ._discover import adiscover_counter as adiscover_counter
from ._discover import clear_counter_cache as clear_counter_cache
from ._discover import discover_counter as discover_counter
from ._types import CountQuery as CountQuery
from ._types import RemoteCounter as RemoteCounter
from ._types import RemoteCountError as RemoteCountError

__all__ = [
    "AnthropicCountTokens",
    "CountQuery",
    "GeminiCountTokens",
    "LlamaCppPythonCounter",
    "LlamaServerCounter",
    "OpenAIInputTokens",
    "RemoteCountError",
    "RemoteCounter",
    "SGLangTokenizeCounter",
    "TGICounter",
    "VLLMTokenizeCounter",
    "adiscover_counter",
    "clear_counter_cache",
    "discover_counter",
]
