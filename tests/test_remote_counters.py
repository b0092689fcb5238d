"""Remote counters against the emulator: every count equals the chat endpoint's own.

Each counter asks an :class:`~windowguard.emulator.Emulator` started in the test, over
plain HTTP; the same request is then sent as a chat completion (through the official
SDK's real HTTP stack) and the two counts must agree. The SDKs' own count calls
(``messages.count_tokens``, ``responses.input_tokens.count``) are driven against the
emulator the same way. Every failure mode must surface as ``RemoteCountError`` with a
message that names the endpoint and the reason. Nothing here leaves the machine.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import openai
import pytest

from tests.exact_tokenizers import require
from windowguard.accounting.counters import TokenCounter
from windowguard.accounting.remote import (
    AnthropicCountTokens,
    CountQuery,
    GeminiCountTokens,
    LlamaCppPythonCounter,
    LlamaServerCounter,
    OpenAIInputTokens,
    RemoteCounter,
    RemoteCountError,
    SGLangTokenizeCounter,
    TGICounter,
    VLLMTokenizeCounter,
    adiscover_counter,
    clear_counter_cache,
    discover_counter,
)
from windowguard.core.exceptions import ConfigurationError, WindowGuardError
from windowguard.emulator import Emulator

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the repository.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_shell",
            "description": "Run a shell command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    },
]


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": "The parser drops the last line of every file; fix it."},
    {
        "role": "assistant",
        "content": "Let me look first.",
        "tool_calls": [
            _call("call_1", "read_file", {"path": "parser.py"}),
            _call("call_2", "run_shell", {"command": "pytest -q"}),
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "def parse(text):\n    return text.split('\\n')[:-1]\n",
    },
    {"role": "tool", "tool_call_id": "call_2", "content": "1 failed, 3 passed — déjà vu"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [_call("call_3", "read_file", {"path": "tests/test_parser.py", "limit": 40})],
    },
    {"role": "tool", "tool_call_id": "call_3", "content": "assert parse('a\\nb') == ['a', 'b']"},
    {"role": "assistant", "content": "The slice drops the last line."},
    {"role": "user", "content": "Then fix it, please."},
]

# The same conversation as Responses items, and as Anthropic messages.
ITEMS: list[dict[str, Any]] = [
    {"role": "system", "content": CHAT[0]["content"]},
    {"role": "user", "content": CHAT[1]["content"]},
    {"role": "assistant", "content": "Let me look first."},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "read_file",
        "arguments": json.dumps({"path": "parser.py"}),
    },
    {
        "type": "function_call",
        "call_id": "call_2",
        "name": "run_shell",
        "arguments": json.dumps({"command": "pytest -q"}),
    },
    {"type": "function_call_output", "call_id": "call_1", "output": CHAT[3]["content"]},
    {"type": "function_call_output", "call_id": "call_2", "output": CHAT[4]["content"]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
    {
        "type": "function_call",
        "call_id": "call_3",
        "name": "read_file",
        "arguments": json.dumps({"path": "tests/test_parser.py", "limit": 40}),
    },
    {"type": "function_call_output", "call_id": "call_3", "output": CHAT[6]["content"]},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "The slice drops the last line."}],
    },
    {"role": "user", "content": [{"type": "input_text", "text": "Then fix it, please."}]},
]
RESPONSES_TOOLS: list[dict[str, Any]] = [{"type": "function", **t["function"]} for t in TOOLS]

SYSTEM = CHAT[0]["content"]
ANTHROPIC_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": CHAT[1]["content"]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look first."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "read_file",
                "input": {"path": "parser.py"},
            },
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": CHAT[3]["content"]},
            {"type": "text", "text": "Then fix it, please."},
        ],
    },
]
ANTHROPIC_TOOLS: list[dict[str, Any]] = [
    {
        "name": t["function"]["name"],
        "description": t["function"]["description"],
        "input_schema": t["function"]["parameters"],
    }
    for t in TOOLS
]


def chat_query(**changes: Any) -> CountQuery:
    values: dict[str, Any] = {
        "format": "openai_chat",
        "model": "m",
        "messages": tuple(CHAT),
        "tools": tuple(TOOLS),
    }
    return CountQuery(**(values | changes))


@pytest.fixture(scope="module")
def o200k() -> TokenCounter:
    return require("o200k")


@pytest.fixture(scope="module")
def qwen() -> TokenCounter:
    return require("qwen")


@pytest.fixture(autouse=True)
def _fresh_discovery_cache() -> Iterator[None]:
    clear_counter_cache()
    yield
    clear_counter_cache()


def chat_prompt_tokens(emu: Emulator, messages: list[Any], tools: list[Any]) -> int:
    """The prompt tokens the emulator reports for a chat completion (official SDK)."""
    with openai.OpenAI(base_url=emu.base_url, api_key="sk-test", max_retries=0) as sdk:
        response = sdk.chat.completions.create(
            model="m", messages=messages, tools=tools, max_tokens=5
        )
    assert response.usage is not None
    return response.usage.prompt_tokens


def both(counter: RemoteCounter, query: CountQuery) -> tuple[int, int]:
    """The sync and the async count of one query."""
    return counter.count(query), asyncio.run(counter.acount(query))


# --------------------------------------------------------------------------- exactness

# (counter factory, emulator flavour, count_apis)
OPEN_SERVERS: dict[str, tuple[Callable[[str, str], RemoteCounter], str, str | None]] = {
    "vllm": (lambda url, t: VLLMTokenizeCounter(url), "vllm", None),
    "sglang-messages": (lambda url, t: SGLangTokenizeCounter(url), "vllm", "sglang"),
    "sglang-text": (lambda url, t: SGLangTokenizeCounter(url, template=t), "vllm", "sglang"),
    "llama-server": (lambda url, t: LlamaServerCounter(url), "llamacpp", None),
    "llama-cpp-python": (lambda url, t: LlamaCppPythonCounter(url, template=t), "llamacpp", None),
    "tgi-chat": (lambda url, t: TGICounter(url), "vllm", "tgi"),
    "tgi-text": (lambda url, t: TGICounter(url, template=t), "vllm", "tgi"),
}


@pytest.mark.parametrize("template", ["qwen", "llama3", "mistral"])
@pytest.mark.parametrize("server", sorted(OPEN_SERVERS))
def test_open_server_counts_equal_the_chat_prompt_tokens(
    server: str, template: str, qwen: TokenCounter
) -> None:
    make, flavor, apis = OPEN_SERVERS[server]
    with Emulator(
        flavor=flavor, tokenizer=qwen, template=template, count_apis=apis, context_window=32_768
    ) as emu:
        counter = make(emu.base_url, template)
        counted = both(counter, chat_query())
        expected = chat_prompt_tokens(emu, CHAT, TOOLS)
    assert counted == (expected, expected)


@pytest.mark.parametrize(
    ("make", "flavor", "apis"),
    [
        (VLLMTokenizeCounter, "vllm", None),
        (OpenAIInputTokens, "openai", None),
        (GeminiCountTokens, "openai", "gemini"),
        (TGICounter, "vllm", "tgi"),
    ],
)
def test_o200k_counts_equal_the_chat_prompt_tokens(
    make: Callable[[str], RemoteCounter], flavor: str, apis: str | None, o200k: TokenCounter
) -> None:
    with Emulator(flavor=flavor, tokenizer=o200k, count_apis=apis) as emu:
        counted = both(make(emu.base_url), chat_query())
        expected = chat_prompt_tokens(emu, CHAT, TOOLS)
    assert counted == (expected, expected)


def test_root_url_and_base_url_count_alike(o200k: TokenCounter) -> None:
    with Emulator(flavor="vllm", tokenizer=o200k) as emu:
        assert VLLMTokenizeCounter(emu.root_url).count(chat_query()) == VLLMTokenizeCounter(
            emu.base_url + "/"
        ).count(chat_query())


def test_anthropic_count_equals_the_messages_input_tokens(o200k: TokenCounter) -> None:
    query = CountQuery(
        format="anthropic",
        model="claude-x",
        messages=tuple(ANTHROPIC_MESSAGES),
        system=SYSTEM,
        tools=tuple(ANTHROPIC_TOOLS),
    )
    with Emulator(flavor="anthropic", tokenizer=o200k) as emu:
        counted = both(AnthropicCountTokens(emu.root_url), query)
        with anthropic.Anthropic(base_url=emu.root_url, api_key="k", max_retries=0) as sdk:
            message = sdk.messages.create(
                model="claude-x",
                max_tokens=64,
                system=SYSTEM,
                messages=ANTHROPIC_MESSAGES,  # type: ignore[arg-type]
                tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
            )
            sdk_count = sdk.messages.count_tokens(
                model="claude-x",
                system=SYSTEM,
                messages=ANTHROPIC_MESSAGES,  # type: ignore[arg-type]
                tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
            )
    assert counted == (message.usage.input_tokens, message.usage.input_tokens)
    assert sdk_count.input_tokens == message.usage.input_tokens


def test_openai_input_tokens_of_responses_items_and_through_the_sdk(o200k: TokenCounter) -> None:
    query = CountQuery(
        format="responses", model="m", messages=tuple(ITEMS), tools=tuple(RESPONSES_TOOLS)
    )
    with Emulator(flavor="openai", tokenizer=o200k) as emu:
        counted = both(OpenAIInputTokens(emu.base_url), query)
        expected = chat_prompt_tokens(emu, CHAT, TOOLS)
        with openai.OpenAI(base_url=emu.base_url, api_key="sk-test", max_retries=0) as sdk:
            sdk_count = sdk.responses.input_tokens.count(
                model="m",
                input=ITEMS,  # type: ignore[arg-type]
                tools=RESPONSES_TOOLS,  # type: ignore[arg-type]
            )
    assert counted == (expected, expected)
    assert sdk_count.input_tokens == expected
    assert sdk_count.object == "response.input_tokens"


def test_async_sdk_count_calls_against_the_emulator(o200k: TokenCounter) -> None:
    async def counts(emu_openai: Emulator, emu_anthropic: Emulator) -> tuple[int, int]:
        async with openai.AsyncOpenAI(
            base_url=emu_openai.base_url, api_key="k", max_retries=0
        ) as oai:
            items = await oai.responses.input_tokens.count(model="m", input=ITEMS)  # type: ignore[arg-type]
        async with anthropic.AsyncAnthropic(
            base_url=emu_anthropic.root_url, api_key="k", max_retries=0
        ) as claude:
            tokens = await claude.messages.count_tokens(
                model="c",
                system=SYSTEM,
                messages=ANTHROPIC_MESSAGES,  # type: ignore[arg-type]
                tools=ANTHROPIC_TOOLS,  # type: ignore[arg-type]
            )
        return items.input_tokens, tokens.input_tokens

    with (
        Emulator(flavor="openai", tokenizer=o200k) as emu_openai,
        Emulator(flavor="anthropic", tokenizer=o200k) as emu_anthropic,
    ):
        got = asyncio.run(counts(emu_openai, emu_anthropic))
        expected_items = OpenAIInputTokens(emu_openai.base_url).count(
            CountQuery(format="responses", model="m", messages=tuple(ITEMS))
        )
        expected_anthropic = AnthropicCountTokens(emu_anthropic.root_url).count(
            CountQuery(
                format="anthropic",
                model="c",
                messages=tuple(ANTHROPIC_MESSAGES),
                system=SYSTEM,
                tools=tuple(ANTHROPIC_TOOLS),
            )
        )
    assert got == (expected_items, expected_anthropic)


def test_formats_convert_to_the_same_conversation(o200k: TokenCounter) -> None:
    """A Responses or Anthropic transcript sent to an open server counts as the chat
    form of the same conversation; a chat transcript sent to Anthropic counts as its
    Anthropic form."""
    anthropic_query = CountQuery(
        format="anthropic",
        model="m",
        messages=tuple(ANTHROPIC_MESSAGES),
        system=SYSTEM,
        tools=tuple(ANTHROPIC_TOOLS),
    )
    responses_query = CountQuery(
        format="responses", model="m", messages=tuple(ITEMS), tools=tuple(RESPONSES_TOOLS)
    )
    with (
        Emulator(flavor="vllm", tokenizer=o200k) as vllm,
        Emulator(flavor="anthropic", tokenizer=o200k) as claude,
    ):
        via_vllm = VLLMTokenizeCounter(vllm.base_url).count(anthropic_query)
        via_anthropic = AnthropicCountTokens(claude.root_url).count(anthropic_query)
        assert via_vllm == via_anthropic
        chat_tokens = chat_prompt_tokens(vllm, CHAT, TOOLS)
        assert VLLMTokenizeCounter(vllm.base_url).count(responses_query) == chat_tokens
        assert AnthropicCountTokens(claude.root_url).count(chat_query()) == chat_tokens


def test_sdk_objects_in_the_transcript_are_dumped(o200k: TokenCounter) -> None:
    """The assistant's own SDK message goes back into the transcript, as agents do."""
    task = CHAT[:2]
    with (
        Emulator(flavor="vllm", tokenizer=o200k, seed=3) as emu,
        openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as sdk,
    ):
        reply = sdk.chat.completions.create(model="m", messages=task, tools=TOOLS)  # type: ignore[arg-type]
        message = reply.choices[0].message
        results = [
            {"role": "tool", "tool_call_id": call.id, "content": f"result of {call.id}"}
            for call in message.tool_calls or []
        ]
        transcript: list[Any] = [*task, message, *results]
        counted = VLLMTokenizeCounter(emu.base_url).count(chat_query(messages=tuple(transcript)))
        follow_up = sdk.chat.completions.create(
            model="m", messages=transcript, tools=TOOLS, max_tokens=5
        )
    assert message.tool_calls
    assert follow_up.usage is not None
    assert counted == follow_up.usage.prompt_tokens


def test_every_counter_is_a_remote_counter() -> None:
    url = "http://127.0.0.1:9"
    counters: list[object] = [
        VLLMTokenizeCounter(url),
        SGLangTokenizeCounter(url),
        LlamaServerCounter(url),
        LlamaCppPythonCounter(url, template="qwen"),
        TGICounter(url),
        AnthropicCountTokens(url),
        OpenAIInputTokens(url),
        GeminiCountTokens(url),
    ]
    for counter in counters:
        assert isinstance(counter, RemoteCounter)
        assert isinstance(counter.name, str)
        assert "POST" in counter.name


@pytest.mark.parametrize(
    "build",
    [
        lambda: VLLMTokenizeCounter("localhost:8000"),
        lambda: VLLMTokenizeCounter("http://127.0.0.1:8000", timeout=0),
        lambda: LlamaCppPythonCounter("http://127.0.0.1:8000", template="openai"),
        lambda: SGLangTokenizeCounter("http://127.0.0.1:8000", template="chatml"),
    ],
)
def test_unusable_configuration_is_refused_up_front(build: Callable[[], object]) -> None:
    with pytest.raises(ConfigurationError):
        build()


# --------------------------------------------------------------------------- discovery


@pytest.mark.parametrize(
    ("flavor", "apis", "expected"),
    [
        ("vllm", None, VLLMTokenizeCounter),
        ("llamacpp", None, LlamaServerCounter),
        ("llamacpp", "llama-cpp-python", LlamaCppPythonCounter),
        ("openai", None, OpenAIInputTokens),
        ("anthropic", None, AnthropicCountTokens),
        ("vllm", "sglang", SGLangTokenizeCounter),
        ("vllm", "tgi", TGICounter),
    ],
)
def test_discover_counter_finds_the_flavours_count_api(
    flavor: str, apis: str | None, expected: type, qwen: TokenCounter
) -> None:
    with Emulator(flavor=flavor, tokenizer=qwen, template="qwen", count_apis=apis) as emu:
        counter = discover_counter(emu.base_url, "m", template="qwen")
        assert isinstance(counter, expected)
        if flavor != "anthropic":  # (Anthropic's exactness: its own test above)
            assert counter.count(chat_query()) == chat_prompt_tokens(emu, CHAT, TOOLS)


def test_discover_counter_is_none_for_a_usage_only_server(o200k: TokenCounter) -> None:
    with Emulator(flavor="openai", tokenizer=o200k, count_apis="none") as emu:
        assert discover_counter(emu.base_url, "m") is None
        assert discover_counter(emu.base_url, "m", template="qwen") is None


def test_discover_counter_needs_the_template_for_text_only_apis(qwen: TokenCounter) -> None:
    with Emulator(
        flavor="llamacpp", tokenizer=qwen, template="qwen", count_apis="llama-cpp-python"
    ) as emu:
        assert discover_counter(emu.base_url, "m") is None
        clear_counter_cache()
        assert isinstance(
            discover_counter(emu.base_url, "m", template="qwen"), LlamaCppPythonCounter
        )


def test_discover_counter_for_gemini_by_its_api_version_path(o200k: TokenCounter) -> None:
    with Emulator(flavor="openai", tokenizer=o200k, count_apis="gemini") as emu:
        counter = discover_counter(emu.root_url + "/v1beta", "gemini-x")
        assert isinstance(counter, GeminiCountTokens)
        assert counter.count(chat_query(model="gemini-x")) == chat_prompt_tokens(emu, CHAT, TOOLS)


def test_discovery_is_cached_and_async_shares_the_cache(o200k: TokenCounter) -> None:
    with Emulator(flavor="vllm", tokenizer=o200k) as emu:
        url = emu.base_url
        first = discover_counter(url, "m")
    assert isinstance(first, VLLMTokenizeCounter)
    # the server is gone: only the cache can answer
    assert isinstance(discover_counter(url, "m"), VLLMTokenizeCounter)
    assert isinstance(asyncio.run(adiscover_counter(url, "m")), VLLMTokenizeCounter)
    clear_counter_cache()
    assert discover_counter(url, "m", timeout=1.0) is None


def test_the_counter_cache_is_bounded_least_recently_used_first(
    o200k: TokenCounter, monkeypatch: pytest.MonkeyPatch
) -> None:
    import windowguard.accounting.remote._discover as found

    monkeypatch.setattr(found, "CACHE_ENTRIES", 3)
    clear_counter_cache()
    with Emulator(flavor="vllm", tokenizer=o200k) as emu:
        url = emu.base_url
        assert isinstance(discover_counter(url, "m"), VLLMTokenizeCounter)
        for n in range(6):  # a caller cycling model names
            discover_counter(url, f"cycled-{n}")
            assert isinstance(discover_counter(url, "m"), VLLMTokenizeCounter)  # used again
        assert len(found._cache) <= 3
    # the server is gone: "m" answers from the cache, "cycled-0" was forgotten
    assert isinstance(discover_counter(url, "m"), VLLMTokenizeCounter)
    assert discover_counter(url, "cycled-0", timeout=1.0) is None
    clear_counter_cache()


def test_discovery_and_counts_carry_the_api_key(o200k: TokenCounter) -> None:
    with Emulator(flavor="vllm", tokenizer=o200k, api_key="sk-secret-123") as emu:
        assert discover_counter(emu.base_url, "m") is None  # refused without the key
        clear_counter_cache()
        counter = discover_counter(emu.base_url, "m", api_key="sk-secret-123")
        assert isinstance(counter, VLLMTokenizeCounter)
        assert counter.count(chat_query()) > 0
        with pytest.raises(RemoteCountError) as refused:
            VLLMTokenizeCounter(emu.base_url, api_key="sk-wrong-456").count(chat_query())
    assert "HTTP 401" in str(refused.value)
    assert "sk-wrong-456" not in str(refused.value)


def test_discovery_never_outlives_its_timeout() -> None:
    with _SilentServer() as url:
        started = time.monotonic()
        assert discover_counter(url, "m", timeout=0.5) is None
        assert time.monotonic() - started < 2.0


# --------------------------------------------------------------------------- failures


class _Fake(BaseHTTPRequestHandler):
    """Answers every POST with the class's (status, content type, body, headers)."""

    answer: tuple[int, str, bytes, dict[str, str]] = (200, "application/json", b"{}", {})
    seen: list[dict[str, str]]

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        self.seen.append({k.lower(): v for k, v in self.headers.items()})
        status, content_type, body, headers = self.answer
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


class _FakeServer:
    def __init__(
        self,
        status: int,
        body: bytes | str,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        raw = body.encode() if isinstance(body, str) else body
        self.seen: list[dict[str, str]] = []
        handler = type(
            "_Handler",
            (_Fake,),
            {"answer": (status, content_type, raw, headers or {}), "seen": self.seen},
        )
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def __enter__(self) -> _FakeServer:
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class _SilentServer:
    """Accepts connections and never answers."""

    def __enter__(self) -> str:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self._sock.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def failure(counter: RemoteCounter, query: CountQuery | None = None) -> str:
    """The message of the RemoteCountError a count raises (sync and async alike)."""
    query = query or chat_query()
    with pytest.raises(RemoteCountError) as sync_error:
        counter.count(query)
    with pytest.raises(RemoteCountError) as async_error:
        asyncio.run(counter.acount(query))
    assert isinstance(sync_error.value, WindowGuardError)
    assert str(sync_error.value) == str(async_error.value)
    return str(sync_error.value)


def test_connection_refused() -> None:
    message = failure(VLLMTokenizeCounter(f"http://127.0.0.1:{_free_port()}"))
    assert "vllm POST /tokenize" in message
    assert "refused" in message


def test_a_server_that_never_answers_is_bounded_by_the_timeout() -> None:
    with _SilentServer() as url:
        counter = LlamaServerCounter(url, timeout=0.4)
        started = time.monotonic()
        message = failure(counter)
        elapsed = time.monotonic() - started
    assert "no answer within 0.4 s" in message
    assert elapsed < 2.5  # two counts (sync and async), each bounded by 0.4 s


def test_acount_leaves_the_event_loop_free() -> None:
    """While a count waits on a silent server, other tasks keep running."""

    async def scenario(url: str) -> tuple[int, str]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        task = asyncio.create_task(ticker())
        try:
            await VLLMTokenizeCounter(url, timeout=0.5).acount(chat_query())
        except RemoteCountError as exc:
            message = str(exc)
        finally:
            task.cancel()
        return ticks, message

    with _SilentServer() as url:
        ticks, message = asyncio.run(scenario(url))
    assert ticks >= 10
    assert "no answer within 0.5 s" in message


def test_404_from_a_server_without_the_endpoint(o200k: TokenCounter) -> None:
    with Emulator(flavor="vllm", tokenizer=o200k, count_apis="none") as emu:
        message = failure(VLLMTokenizeCounter(emu.base_url))
    assert "HTTP 404" in message
    assert "/tokenize" in message


def test_500_carries_the_servers_own_error_text() -> None:
    body = json.dumps({"error": {"message": "CUDA out of memory", "type": "InternalServerError"}})
    with _FakeServer(500, body) as server:
        message = failure(OpenAIInputTokens(server.url))
    assert "HTTP 500" in message
    assert "CUDA out of memory" in message
    with _FakeServer(500, body) as server, pytest.raises(RemoteCountError) as raised:
        OpenAIInputTokens(server.url).count(chat_query())
    assert raised.value.status == 500
    assert "openai POST /v1/responses/input_tokens" in message


def test_html_instead_of_json() -> None:
    with _FakeServer(200, "<!DOCTYPE html><html>login</html>", content_type="text/html") as server:
        message = failure(TGICounter(server.url))
    assert "not JSON" in message
    assert "<!DOCTYPE html>" in message


def test_json_without_the_count_field() -> None:
    with _FakeServer(200, json.dumps({"tokens": [1, 2, 3]})) as server:
        message = failure(VLLMTokenizeCounter(server.url))
    assert "no 'count'" in message


@pytest.mark.parametrize("bad", [-1, "12", True, 1.5])
def test_a_count_that_is_not_a_count(bad: object) -> None:
    with _FakeServer(200, json.dumps({"input_tokens": bad})) as server:
        message = failure(AnthropicCountTokens(server.url))
    assert "not a count" in message


def test_redirects_are_not_followed() -> None:
    with _FakeServer(302, "", headers={"location": "http://elsewhere.example/tokenize"}) as server:
        message = failure(VLLMTokenizeCounter(server.url))
    assert "redirect" in message
    assert "not followed" in message


def test_the_api_key_never_appears_in_errors() -> None:
    key = "sk-very-secret-key"
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}"}})
    with _FakeServer(401, body) as server:
        message = failure(OpenAIInputTokens(server.url, api_key=key))
    assert key not in message
    assert "***" in message


def test_each_api_sends_its_own_key_header() -> None:
    with _FakeServer(200, json.dumps({"input_tokens": 3, "totalTokens": 3})) as server:
        AnthropicCountTokens(server.url, api_key="ka").count(chat_query())
        GeminiCountTokens(server.url, api_key="kg").count(chat_query())
        OpenAIInputTokens(server.url, api_key="ko").count(chat_query())
    anthropic_headers, gemini_headers, openai_headers = server.seen
    assert anthropic_headers["x-api-key"] == "ka"
    assert anthropic_headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in anthropic_headers
    assert gemini_headers["x-goog-api-key"] == "kg"
    assert "authorization" not in gemini_headers
    assert openai_headers["authorization"] == "Bearer ko"


@pytest.mark.parametrize(
    ("counter", "query", "reason"),
    [
        (VLLMTokenizeCounter("http://127.0.0.1:9"), chat_query(messages=(42,)), "message 0"),
        (
            GeminiCountTokens("http://127.0.0.1:9"),
            chat_query(tools=({"type": "web_search"},)),
            "function tools",
        ),
        (
            VLLMTokenizeCounter("http://127.0.0.1:9"),
            CountQuery(format="responses", model="m", messages=({"type": "web_search_call"},)),
            "web_search_call",
        ),
        (
            AnthropicCountTokens("http://127.0.0.1:9"),
            chat_query(
                messages=(
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "f", "arguments": "[1]"},
                            }
                        ],
                    },
                )
            ),
            "not a JSON object",
        ),
        (
            LlamaCppPythonCounter("http://127.0.0.1:9", template="qwen"),
            chat_query(messages=({"role": "wizard", "content": "x"},)),
            "wizard",
        ),
    ],
)
def test_messages_that_cannot_be_converted(
    counter: RemoteCounter, query: CountQuery, reason: str
) -> None:
    message = failure(counter, query)
    assert counter.name in message
    assert reason in message
    with pytest.raises(RemoteCountError) as raised:
        counter.count(query)
    assert raised.value.endpoint == counter.name


def test_a_query_of_the_wrong_type() -> None:
    message = failure(VLLMTokenizeCounter("http://127.0.0.1:9"), {"messages": []})  # type: ignore[arg-type]
    assert "CountQuery" in message
