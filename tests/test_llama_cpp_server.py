"""windowguard against a real llama.cpp server: llama-cpp-python's OpenAI-compatible server
(``../shared/llama_server``), serving a tiny random-weight GGUF that carries the real
Qwen3 tokenizer and chat template. Nothing on the server side was written by windowguard:
the prompt tokenisation, the ``usage`` counts, the ``n_ctx`` limit, its overflow error
and ``/extras/tokenize/count`` are llama.cpp's and llama-cpp-python's own.

Checked through the official ``openai`` SDK's real HTTP stack:

- windowguard's local Qwen3 accounting counts a request as the server does (its reported
  ``prompt_tokens``), tools, tool calls and tool results included;
- the count API is found from the base URL and counts as the server does;
- the server's overflow refusal is classified as one, with its window and prompt size;
- a guarded client and the guarding proxy carry a conversation growing far past the
  window without one refusal, where the same requests sent unguarded are refused.

The server is built once per machine by ``bash ../shared/llama_server/setup.sh`` (llama-cpp-python
compiles llama.cpp: about 20 minutes on 2 cores). These tests skip, naming that command,
when it is not built (``.ci/run`` does not build it).
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import windowguard as wg
from tests.exact_tokenizers import SHARED
from windowguard.accounting.local import TEMPLATE_OF, local_tokenizer
from windowguard.accounting.remote import CountQuery, LlamaCppPythonCounter, discover_counter
from windowguard.accounting.templates import count_prompt
from windowguard.core.failures import FailureKind, classify_failure

openai = pytest.importorskip("openai")

SERVE = SHARED / "llama_server" / "serve.sh"
STATE = Path(os.environ.get("STATE_DIR") or Path.home() / ".cache" / "windowguard-llama")
VENV = Path(os.environ.get("VENV") or STATE / "venv")
N_CTX = 4_096
MODEL = "tiny-qwen3"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository and return its text.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "the file's path"}},
                "required": ["path"],
            },
        },
    }
]


def _missing() -> str | None:
    if not SERVE.is_file():
        return f"{SERVE} is missing (the shared llama.cpp harness)"
    python = VENV / "bin" / "python"
    if not python.is_file():
        return f"llama-cpp-python is not built: run `bash {SERVE.parent / 'setup.sh'}` (~20 min)"
    probe = subprocess.run(
        [str(python), "-c", "import llama_cpp, gguf"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        return f"{VENV} cannot import llama_cpp: run `bash {SERVE.parent / 'setup.sh'}`"
    if local_tokenizer("qwen") is None:
        return "no exact Qwen3 tokenizer is installed (the test extra carries it)"
    return None


_MISSING = _missing()
pytestmark = pytest.mark.skipif(_MISSING is not None, reason=str(_MISSING))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The server's OpenAI base URL (``.../v1``), enforcing a 4,096-token window."""
    port = _free_port()
    env = {**os.environ, "PORT": str(port), "N_CTX": str(N_CTX), "MODEL_ALIAS": MODEL}
    started = subprocess.run(
        ["bash", str(SERVE)], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert started.returncode == 0, started.stderr[-2_000:]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        subprocess.run(["bash", str(SERVE), "stop"], env=env, capture_output=True, check=False)


@pytest.fixture
def client(server: str) -> Iterator[Any]:
    with openai.OpenAI(base_url=server, api_key="x", max_retries=0) as sdk:
        yield sdk


def _qwen_count(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    counter = local_tokenizer("qwen")
    assert counter is not None
    return count_prompt(counter, messages, tools, template=TEMPLATE_OF["qwen"])


def _turn(n: int, rng: random.Random, words: int) -> list[dict[str, Any]]:
    """One tool step: the assistant's call (content "" -- this server answers 500 to a
    null content) and its result, ``words`` random words."""
    vocabulary = ("alpha", "river", "42", "état", "函数", "x_y", "{", "}", "é", "path/to")
    body = " ".join(rng.choice(vocabulary) for _ in range(words))
    call = {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": "read_file", "arguments": f'{{"path": "src/m{n}.py"}}'},
    }
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": body},
    ]


REQUESTS = {
    "one user message": ([{"role": "user", "content": "Hello there, how are you?"}], None),
    "system and user": (
        [
            {"role": "system", "content": "You are a careful coding agent."},
            {"role": "user", "content": "Fix the failing test in tests/test_io.py, please."},
        ],
        None,
    ),
    "tools and a tool step": (
        [
            {"role": "system", "content": "You fix code."},
            {"role": "user", "content": "Read src/m0.py and src/m1.py."},
            *_turn(0, random.Random(0), 60),
            *_turn(1, random.Random(1), 90),
        ],
        TOOLS,
    ),
    "an answer after the steps": (
        [
            {"role": "user", "content": "Summarise état and 函数 for me."},
            {"role": "assistant", "content": "Done: état means state; 函数 means function."},
            {"role": "user", "content": "Thanks! Now in one line?"},
        ],
        None,
    ),
}


@pytest.mark.parametrize("name", list(REQUESTS))
def test_the_local_qwen_accounting_counts_as_the_server_does(client: Any, name: str) -> None:
    messages, tools = REQUESTS[name]
    extra: dict[str, Any] = {"tools": tools} if tools else {}
    reply = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=1, **extra)
    assert reply.usage is not None
    assert _qwen_count(messages, tools) == reply.usage.prompt_tokens


def test_the_count_api_is_found_and_counts_as_the_server_does(server: str, client: Any) -> None:
    wg.clear_counter_cache()
    found = discover_counter(server, MODEL, template="qwen")
    assert isinstance(found, LlamaCppPythonCounter)
    for name, (messages, tools) in REQUESTS.items():
        counted = found.count(
            CountQuery(
                format="openai_chat",
                model=MODEL,
                messages=tuple(messages),
                tools=tuple(tools or ()),
            )
        )
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        reply = client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=1, **extra
        )
        assert reply.usage is not None
        assert counted == reply.usage.prompt_tokens, name
    wg.clear_counter_cache()


def test_the_servers_overflow_refusal_is_classified_with_its_numbers(client: Any) -> None:
    messages = [{"role": "user", "content": "word " * 6_000}]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, messages=messages, max_tokens=16)
    failure = classify_failure(caught.value)
    assert failure.kind is FailureKind.CONTEXT_OVERFLOW
    assert not failure.retryable
    assert failure.context_window == N_CTX
    assert failure.prompt_tokens == _qwen_count(messages, None)


def _growing(steps: int) -> Iterator[list[dict[str, Any]]]:
    """A conversation that grows ~450 tokens a step: 40 steps pass the window 4x."""
    rng = random.Random(18)
    transcript: list[dict[str, Any]] = [
        {"role": "system", "content": "You fix code."},
        {"role": "user", "content": "Read every module and fix the bug."},
    ]
    for n in range(steps):
        transcript += _turn(n, rng, 200)
        yield transcript


def test_a_guarded_client_carries_a_conversation_past_the_window(server: str) -> None:
    steps = 40
    # Unguarded, the same requests are refused once the transcript passes the window.
    with openai.OpenAI(base_url=server, api_key="x", max_retries=0) as raw:
        refused = 0
        for transcript in _growing(steps):
            try:
                raw.chat.completions.create(
                    model=MODEL, messages=transcript, tools=TOOLS, max_tokens=8
                )
            except openai.BadRequestError:
                refused += 1
        assert refused > steps // 2
    info = wg.ModelInfo(N_CTX, tokenizer="qwen")
    sdk = openai.OpenAI(base_url=server, api_key="x", max_retries=0)
    with sdk:
        guarded = wg.guard(sdk, model_info=info, discover=False)
        prompts = []
        for transcript in _growing(steps):
            reply = guarded.chat.completions.create(
                model=MODEL, messages=transcript, tools=TOOLS, max_tokens=8
            )
            assert reply.usage is not None
            prompts.append(reply.usage.prompt_tokens)
    assert len(prompts) == steps  # no refusal, no overflow
    assert all(p + 8 <= N_CTX for p in prompts)
    assert max(prompts) > 0.6 * N_CTX  # it used the window, not a sliver of it


def test_the_proxy_carries_a_conversation_past_the_window(server: str) -> None:
    from windowguard.proxy import ProxyConfig, ProxyServer

    steps = 40
    config = ProxyConfig(upstream=server.removesuffix("/v1"), port=0, window=N_CTX)
    with (
        ProxyServer(config) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as sdk,
    ):
        prompts = []
        for transcript in _growing(steps):
            reply = sdk.chat.completions.create(
                model=MODEL, messages=transcript, tools=TOOLS, max_tokens=8
            )
            assert reply.usage is not None
            prompts.append(reply.usage.prompt_tokens)
        assert proxy.metrics.value("upstream_errors_total", "context_overflow") == 0
    assert len(prompts) == steps
    assert all(p + 8 <= N_CTX for p in prompts)


def test_guarded_streams_carry_a_conversation_past_the_window(server: str) -> None:
    # This server's streams carry no usage, and a stream it refuses for length is an
    # empty HTTP 200 (no error to learn from): only the local count keeps it inside.
    steps = 30
    info = wg.ModelInfo(N_CTX, tokenizer="qwen")
    *_, last = _growing(steps)
    # A client of its own: after a stream it refused, the server resets the connection
    # the next request would reuse.
    with openai.OpenAI(base_url=server, api_key="x", max_retries=0) as raw:
        unguarded = raw.chat.completions.create(
            model=MODEL, messages=last, tools=TOOLS, max_tokens=8, stream=True
        )
        assert list(unguarded) == []  # refused without a word
    with openai.OpenAI(base_url=server, api_key="x", max_retries=0) as sdk:
        guarded = wg.guard(sdk, model_info=info, discover=False)
        answered = 0
        for transcript in _growing(steps):
            stream = guarded.chat.completions.create(
                model=MODEL, messages=transcript, tools=TOOLS, max_tokens=8, stream=True
            )
            chunks = list(stream)
            assert chunks, "an empty stream: the server refused the prompt's length"
            assert chunks[-1].choices and chunks[-1].choices[0].finish_reason is not None
            answered += 1
    assert answered == steps


def test_an_async_guarded_client_carries_a_conversation_past_the_window(server: str) -> None:
    import asyncio

    async def run() -> list[int]:
        info = wg.ModelInfo(N_CTX, tokenizer="qwen")
        async with openai.AsyncOpenAI(base_url=server, api_key="x", max_retries=0) as sdk:
            guarded = wg.guard(sdk, model_info=info, discover=False)
            prompts = []
            for transcript in _growing(30):
                reply = await guarded.chat.completions.create(
                    model=MODEL, messages=transcript, tools=TOOLS, max_tokens=8
                )
                assert reply.usage is not None
                prompts.append(reply.usage.prompt_tokens)
            return prompts

    prompts = asyncio.run(run())
    assert len(prompts) == 30
    assert all(p + 8 <= N_CTX for p in prompts)
