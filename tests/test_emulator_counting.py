"""The emulator's token-count APIs: real request, response and error shapes over HTTP.

Checked with plain ``urllib`` (no windowguard client), so these pin the wire shapes the
remote counters are tested against: each API's answer fields, its error envelope, its
401, what ``count_apis`` serves, and that text endpoints count a rendered prompt exactly
as the chat endpoint counts the request.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import openai
import pytest

from tests.exact_tokenizers import require
from windowguard.accounting.counters import TokenCounter
from windowguard.accounting.templates import count_prompt, render_prompt
from windowguard.core.exceptions import ConfigurationError
from windowguard.emulator import Emulator
from windowguard.emulator.cli import build_parser
from windowguard.emulator.counting import CountSetup, count_text, resolve_count_apis

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are careful."},
    {"role": "user", "content": "Fix the parser, then run the tests."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": json.dumps({"path": "p.py"})},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "def parse(): ..."},
]
CHAT_BODY = {"model": "m", "messages": MESSAGES, "tools": TOOLS}


@pytest.fixture(scope="module")
def qwen() -> TokenCounter:
    return require("qwen")


@pytest.fixture(scope="module")
def o200k() -> TokenCounter:
    return require("o200k")


def post(
    url: str, body: Any, headers: dict[str, str] | None = None, *, raw: bytes | None = None
) -> tuple[int, str, Any]:
    """(status, content type, decoded JSON or text) of one POST."""
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"content-type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, kind, payload = (
                response.status,
                response.headers["content-type"],
                response.read(),
            )
    except urllib.error.HTTPError as error:
        status, kind, payload = error.code, error.headers["content-type"], error.read()
    text = payload.decode()
    return status, kind, json.loads(text) if kind == "application/json" and text else text


def expected(counter: TokenCounter, template: str) -> int:
    return count_prompt(counter, MESSAGES, TOOLS, template=template)


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("flavor", "template", "served"),
    [
        ("vllm", "qwen", ("vllm",)),
        ("openai", "openai", ("openai",)),
        ("anthropic", "openai", ("anthropic",)),
        ("llamacpp", "qwen", ("llama-server", "llama-cpp-python")),
        ("llamacpp", "openai", ("llama-cpp-python",)),  # no text to apply a template to
    ],
)
def test_each_flavour_serves_its_native_count_apis(
    flavor: str, template: str, served: tuple[str, ...]
) -> None:
    assert resolve_count_apis(flavor, None, template) == served


def test_count_apis_none_and_explicit_choices() -> None:
    assert resolve_count_apis("vllm", "none", "qwen") == ()
    assert resolve_count_apis("openai", ["gemini", "anthropic"], "openai") == (
        "anthropic",
        "gemini",
    )
    with pytest.raises(ConfigurationError, match="unknown count API"):
        resolve_count_apis("vllm", "ollama", "qwen")
    with pytest.raises(ConfigurationError, match="both answer POST /tokenize"):
        resolve_count_apis("vllm", ("vllm", "tgi"), "qwen")
    with pytest.raises(ConfigurationError, match="'openai' template"):
        resolve_count_apis("llamacpp", "llama-server", "openai")


def test_cli_takes_count_apis() -> None:
    args = build_parser().parse_args(["--flavor", "vllm", "--count-apis", "sglang,gemini"])
    assert args.count_apis == "sglang,gemini"


def test_unserved_count_apis_are_404(o200k: TokenCounter) -> None:
    with Emulator(flavor="anthropic", tokenizer=o200k, count_apis="none") as emu:
        status, _, body = post(emu.root_url + "/v1/messages/count_tokens", CHAT_BODY)
    assert status == 404
    assert body["error"]["type"] == "not_found_error"


def test_count_requests_are_not_model_calls(o200k: TokenCounter) -> None:
    with Emulator(flavor="vllm", tokenizer=o200k, faults={1: 500}) as emu:
        status, _, body = post(emu.root_url + "/tokenize", CHAT_BODY)
        assert status == 200
        assert emu.records == ()
        sdk = openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0)
        with sdk, pytest.raises(openai.InternalServerError):
            sdk.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS)  # type: ignore[arg-type]
    assert body["count"] == expected(o200k, "openai")


# --------------------------------------------------------------------------- text counting


@pytest.mark.parametrize("template", ["qwen", "llama3", "mistral"])
def test_a_rendered_prompt_counts_as_the_chat_endpoint_counts(
    template: str, qwen: TokenCounter
) -> None:
    setup = CountSetup(counter=qwen, template=template, context_window=8192)
    text = render_prompt(MESSAGES, TOOLS, template=template)
    exact = expected(qwen, template)
    assert count_text(setup, text, add_special=False, parse_special=True) == exact
    bos = 1 if template in ("llama3", "mistral") else 0
    assert count_text(setup, "", add_special=True, parse_special=True) == bos
    assert count_text(setup, text, add_special=True, parse_special=True) == exact + bos
    assert count_text(setup, text, add_special=False, parse_special=False) == qwen.count(text)


# --------------------------------------------------------------------------- vllm / sglang


def test_vllm_tokenize_chat_and_prompt_forms(qwen: TokenCounter) -> None:
    with Emulator(flavor="vllm", tokenizer=qwen, template="llama3", context_window=4096) as emu:
        url = emu.root_url + "/tokenize"
        status, _, chat = post(url, CHAT_BODY | {"add_generation_prompt": True})
        _, _, with_bos = post(url, CHAT_BODY | {"add_special_tokens": True})
        _, _, prompt = post(url, {"prompt": "hello <|eot_id|>"})
        _, _, bare = post(url, {"prompt": "hello", "add_special_tokens": False})
    assert status == 200
    assert set(chat) == {"count", "max_model_len", "tokens", "token_strs"}
    assert chat["count"] == expected(qwen, "llama3") == len(chat["tokens"])
    assert chat["max_model_len"] == 4096
    assert chat["token_strs"] is None
    assert with_bos["count"] == chat["count"] + 1  # a BOS on top of the template's own
    assert prompt["count"] == 1 + qwen.count("hello ") + 1  # BOS, text, <|eot_id|>
    assert bare["count"] == qwen.count("hello")


@pytest.mark.parametrize(
    ("body", "wording"),
    [
        (CHAT_BODY | {"add_generation_prompt": False}, "not emulated"),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, "wizard"),
        ({"model": "m"}, "messages"),
    ],
)
def test_vllm_tokenize_errors_in_vllms_shape(body: Any, wording: str, o200k: TokenCounter) -> None:
    with Emulator(flavor="vllm", tokenizer=o200k) as emu:
        status, _, answer = post(emu.root_url + "/tokenize", body)
    assert status == 400
    assert answer["error"]["type"] == "BadRequestError"
    assert answer["error"]["code"] == 400
    assert wording in answer["error"]["message"]


def test_vllm_and_sglang_401(o200k: TokenCounter) -> None:
    for api in ("vllm", "sglang"):
        with Emulator(flavor="vllm", tokenizer=o200k, count_apis=api, api_key="k") as emu:
            refused = post(emu.root_url + "/tokenize", CHAT_BODY)
            allowed = post(emu.root_url + "/tokenize", CHAT_BODY, {"authorization": "Bearer k"})
        assert refused[0] == 401
        assert refused[2] == {"error": "Unauthorized"}
        assert allowed[0] == 200


def test_sglang_tokenize_shapes(qwen: TokenCounter) -> None:
    with Emulator(flavor="vllm", tokenizer=qwen, template="qwen", count_apis="sglang") as emu:
        url = emu.root_url + "/tokenize"
        _, _, chat = post(url, CHAT_BODY)
        _, _, many = post(url, {"prompt": ["a b", "<|im_start|>"]})
        status, _, both = post(url, {"prompt": "x", "messages": MESSAGES})
    assert set(chat) == {"tokens", "count", "max_model_len"}
    assert chat["count"] == expected(qwen, "qwen")
    assert many["count"] == [qwen.count("a b"), 1]
    assert [len(t) for t in many["tokens"]] == many["count"]
    assert status == 400
    assert both == {
        "object": "error",
        "message": "Exactly one of 'prompt' or 'messages' must be provided.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }


# --------------------------------------------------------------------------- llama.cpp


@pytest.mark.parametrize("template", ["qwen", "llama3", "mistral"])
def test_llama_server_apply_template_then_tokenize(template: str, qwen: TokenCounter) -> None:
    with Emulator(flavor="llamacpp", tokenizer=qwen, template=template) as emu:
        _, _, applied = post(emu.root_url + "/apply-template", CHAT_BODY)
        tokenize = emu.root_url + "/tokenize"
        prompt = applied["prompt"]
        _, _, with_special = post(tokenize, {"content": prompt, "add_special": True})
        _, _, plain = post(tokenize, {"content": prompt})
        _, _, as_text = post(tokenize, {"content": prompt, "parse_special": False})
        _, _, empty = post(tokenize, {})
    rendered = render_prompt(MESSAGES, TOOLS, template=template)
    bos = {"llama3": "<|begin_of_text|>", "mistral": "<s>"}.get(template, "")
    assert prompt == rendered.removeprefix(bos)  # the server strips the BOS it adds itself
    assert len(with_special["tokens"]) == expected(qwen, template)
    assert len(plain["tokens"]) == expected(qwen, template) - (1 if bos else 0)
    assert len(as_text["tokens"]) == qwen.count(prompt)
    assert empty == {"tokens": []}


def test_llama_server_errors_and_401(qwen: TokenCounter) -> None:
    with Emulator(flavor="llamacpp", tokenizer=qwen, template="qwen", api_key="k") as emu:
        refused = post(emu.root_url + "/apply-template", CHAT_BODY)
        key = {"authorization": "Bearer k"}
        invalid = post(emu.root_url + "/apply-template", {"messages": []}, key)
    assert refused[0] == 401
    assert refused[2]["error"] == {
        "code": 401,
        "message": "Invalid API Key",
        "type": "authentication_error",
    }
    assert invalid[0] == 400
    assert invalid[2]["error"]["type"] == "invalid_request_error"
    assert invalid[2]["error"]["code"] == 400


@pytest.mark.parametrize("template", ["qwen", "llama3"])
def test_llama_cpp_python_extras_tokenize_count(template: str, qwen: TokenCounter) -> None:
    with Emulator(flavor="llamacpp", tokenizer=qwen, template=template) as emu:
        url = emu.root_url + "/extras/tokenize/count"
        _, _, empty = post(url, {"input": ""})
        _, _, rendered = post(url, {"input": render_prompt(MESSAGES, TOOLS, template=template)})
        missing = post(url, {"inp": "x"})
        garbage = post(url, None, raw=b"not json")
    bos = 1 if template == "llama3" else 0
    assert empty == {"count": bos}  # llama-cpp-python adds the vocabulary's BOS
    assert rendered["count"] == expected(qwen, template) + bos
    assert missing[0] == 500
    assert missing[2]["error"]["type"] == "internal_server_error"
    assert "Field required" in missing[2]["error"]["message"]
    assert garbage[:2] == (500, "text/plain")
    assert garbage[2] == "Internal Server Error"


def test_llama_cpp_python_401(qwen: TokenCounter) -> None:
    with Emulator(flavor="llamacpp", tokenizer=qwen, template="qwen", api_key="k") as emu:
        status, _, body = post(emu.root_url + "/extras/tokenize/count", {"input": "x"})
    assert (status, body) == (401, {"detail": "Invalid API key"})


# --------------------------------------------------------------------------- tgi


def test_tgi_chat_tokenize_and_tokenize(qwen: TokenCounter) -> None:
    with Emulator(flavor="vllm", tokenizer=qwen, template="qwen", count_apis="tgi") as emu:
        _, _, chat = post(emu.root_url + "/chat_tokenize", CHAT_BODY)
        _, _, tokens = post(emu.root_url + "/tokenize", {"inputs": "a <|im_end|>"})
        missing = post(emu.root_url + "/chat_tokenize", {"model": "m"})
        garbage = post(emu.root_url + "/chat_tokenize", None, raw=b"{")
    assert len(chat["tokenize_response"]) == expected(qwen, "qwen")
    assert chat["tokenize_response"][0] == {"id": 0, "text": "", "start": 0, "stop": 0}
    assert chat["templated_text"] == render_prompt(MESSAGES, TOOLS, template="qwen")
    assert isinstance(tokens, list)
    assert len(tokens) == qwen.count("a ") + 1
    assert missing[:2] == (422, "text/plain")
    assert "missing field `messages`" in missing[2]
    assert garbage[0] == 400
    assert garbage[2].startswith("Failed to parse the request body as JSON")


def test_tgi_401_is_bare(qwen: TokenCounter) -> None:
    with Emulator(flavor="vllm", tokenizer=qwen, count_apis="tgi", api_key="k") as emu:
        status, _, body = post(emu.root_url + "/chat_tokenize", CHAT_BODY)
    assert (status, body) == (401, "")


# --------------------------------------------------------------------------- openai


def test_responses_input_tokens_shape_and_errors(o200k: TokenCounter) -> None:
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
    ]
    tools = [{"type": "function", **TOOLS[0]["function"]}]
    with Emulator(flavor="openai", tokenizer=o200k) as emu:
        url = emu.base_url + "/responses/input_tokens"
        ok = post(url, {"model": "m", "input": items, "tools": tools, "instructions": "Be brief."})
        text = post(url, {"model": "m", "input": "hello"})
        bad_role = post(url, {"model": "m", "input": [{"role": "wizard", "content": "x"}]})
        orphan = post(
            url, {"input": [{"type": "function_call_output", "call_id": "x", "output": ""}]}
        )
        builtin = post(url, {"input": "x", "tools": [{"type": "web_search"}]})
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    assert ok[2] == {
        "object": "response.input_tokens",
        "input_tokens": count_prompt(o200k, chat, TOOLS, template="openai"),
    }
    user = [{"role": "user", "content": "hello"}]
    assert text[2]["input_tokens"] == count_prompt(o200k, user, None, template="openai")
    assert bad_role[0] == 400
    assert bad_role[2]["error"]["param"] == "input[0].role"
    assert orphan[0] == 400
    assert "must be a response to a preceeding message" in orphan[2]["error"]["message"]
    assert builtin[0] == 400
    assert builtin[2]["error"]["type"] == "invalid_request_error"


# --------------------------------------------------------------------------- gemini


def test_gemini_count_tokens_forms_and_auth(o200k: TokenCounter) -> None:
    contents = [
        {"role": "user", "parts": [{"text": "Fix the parser, then run the tests."}]},
        {
            "role": "model",
            "parts": [{"functionCall": {"name": "read_file", "args": {"path": "p.py"}}}],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "read_file", "response": {"content": "ok"}}}],
        },
    ]
    request = {
        "model": "models/g",
        "contents": contents,
        "systemInstruction": {"parts": [{"text": "You are careful."}]},
        "tools": [{"functionDeclarations": [TOOLS[0]["function"]]}],
    }
    with Emulator(flavor="openai", tokenizer=o200k, count_apis="gemini", api_key="gk") as emu:
        url = emu.root_url + "/v1beta/models/g:countTokens"
        full = post(url, {"generateContentRequest": request}, {"x-goog-api-key": "gk"})
        bare = post(url + "?key=gk", {"contents": contents})
        missing = post(url, {"contents": contents})
        wrong = post(url, {"contents": contents}, {"x-goog-api-key": "nope"})
        empty = post(url, {"contents": []}, {"x-goog-api-key": "gk"})
    chat = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Fix the parser, then run the tests."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "read_file",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": "p.py"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "read_file", "content": "ok"},
    ]
    total = count_prompt(o200k, chat, TOOLS, template="openai")
    assert full[2] == {
        "totalTokens": total,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": total}],
    }
    assert bare[2]["totalTokens"] == count_prompt(o200k, chat[1:], None, template="openai")
    assert missing[0] == 403
    assert missing[2]["error"]["status"] == "PERMISSION_DENIED"
    assert wrong[0] == 400
    assert wrong[2]["error"] == {
        "code": 400,
        "message": "API key not valid. Please pass a valid API key.",
        "status": "INVALID_ARGUMENT",
    }
    assert empty[0] == 400
    assert "contents is not specified" in empty[2]["error"]["message"]


# --------------------------------------------------------------------------- anthropic


def test_anthropic_count_tokens_shape_and_errors(o200k: TokenCounter) -> None:
    with Emulator(flavor="anthropic", tokenizer=o200k, api_key="ak") as emu:
        url = emu.root_url + "/v1/messages/count_tokens"
        key = {"x-api-key": "ak"}
        ok = post(url, {"model": "c", "messages": [{"role": "user", "content": "hi"}]}, key)
        no_model = post(url, {"messages": [{"role": "user", "content": "hi"}]}, key)
        refused = post(url, {"model": "c", "messages": []})
    assert ok[0] == 200
    assert set(ok[2]) == {"input_tokens"}
    assert no_model[2] == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "model: Field required"},
    }
    assert refused[0] == 401
    assert refused[2]["error"]["type"] == "authentication_error"
