"""Faults a local server serves to the loop: the malformed-answer matrix, and a refit.

The fault matrix: malformed 200 answers never escape a run as raw exceptions.

A local fault server answers every model call with a success status and a body that
is not a whole answer: not JSON, JSON of the wrong shape, or a stream that closes
before its finish reason. Each of the fourteen shapes is served to both providers
(OpenAI Chat and Anthropic, through their official SDKs over HTTP), from both drivers
(``ToolLoop`` and ``AsyncToolLoop``), streamed and not. Every cell must end the same
way: a classified ``MALFORMED_RESPONSE`` failure, retried by the policy like any
transient failure, then ``PROVIDER_ERROR`` with the failure attached — and no tool
ever runs from a response that was not whole.

The refit: an overflow refusal that states no counts is followed by a smaller request,
never the byte-identical one the server just refused.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import windowguard as wg
from windowguard.core.failures import FailureKind
from windowguard.run.providers.base import StreamDelta
from windowguard.run.retry import RetryPolicy

# --------------------------------------------------------------------------- server


Answer = tuple[bytes, str]  # body, content type; the status is 200 unless ``status`` says


class FaultServer:
    """Answers every POST on 127.0.0.1 with ``answer(n)`` (n counts from 1).

    The connection closes after each answer (HTTP/1.0), so a cut stream is a normal
    close, not a reset. Request bodies are kept in ``bodies`` (raw bytes).
    """

    def __init__(
        self, answer: Callable[[int], Answer], status: Callable[[int], int] = lambda n: 200
    ) -> None:
        self.bodies: list[bytes] = []
        bodies, lock = self.bodies, threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                with lock:
                    bodies.append(raw)
                    number = len(bodies)
                body, kind = answer(number)
                self.send_response(status(number))
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FaultServer:
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc_info: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


# --------------------------------------------------------------------------- bodies

JSON, SSE, HTML = "application/json", "text/event-stream", "text/html; charset=utf-8"


def openai_completion(**changes: Any) -> dict[str, Any]:
    """A whole Chat Completions answer, with ``changes`` applied to it."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": "final answer now"},
        "finish_reason": "stop",
    }
    body: dict[str, Any] = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [choice],
        "usage": {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23},
    }
    for key, value in changes.items():
        if key in ("message", "finish_reason"):
            choice[key] = value
        else:
            body[key] = value
    return body


def anthropic_message(**changes: Any) -> dict[str, Any]:
    """A whole Messages answer, with ``changes`` applied to it."""
    body: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [{"type": "text", "text": "final answer now"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 3},
    }
    body.update(changes)
    return body


def chunk(delta: Any = None, finish: str | None = None, **fields: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }
    value.update(fields)
    return value


def data(*events: Any) -> bytes:
    """OpenAI-style SSE: one ``data:`` line per event (text taken as it is)."""
    return b"".join(
        b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + b"\n\n"
        for e in events
    )


def events(*items: tuple[str, Any]) -> bytes:
    """Anthropic-style SSE: ``event:`` and ``data:`` lines (text taken as it is)."""
    return b"".join(
        f"event: {name}\n".encode()
        + b"data: "
        + (payload if isinstance(payload, bytes) else json.dumps(payload).encode())
        + b"\n\n"
        for name, payload in items
    )


START = {"type": "message_start", "message": anthropic_message(content=[], stop_reason=None)}


def text_start(index: int = 0) -> tuple[str, Any]:
    block = {"type": "content_block_start", "index": index}
    return "content_block_start", block | {"content_block": {"type": "text", "text": ""}}


def text_delta(text: str, index: int = 0) -> tuple[str, Any]:
    delta = {"type": "text_delta", "text": text}
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}


TOOL_CALL_START = chunk(
    {
        "role": "assistant",
        "tool_calls": [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "work", "arguments": ""},
            }
        ],
    }
)
TOOL_USE_START = (
    "content_block_start",
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "work", "input": {}},
    },
)
CUT_ARGUMENTS = (
    "content_block_delta",
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "input_json_delta", "partial_json": '{"pa'},
    },
)
OPENAI_TOOL_MESSAGE = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "work", "arguments": '{"pa'}}
    ],
}
ANTHROPIC_TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "work", "input": {"path": "a"}}


def _arguments(text: str) -> dict[str, Any]:
    return {"index": 0, "function": {"arguments": text}}


BAD_USAGE = anthropic_message(content=[], stop_reason=None, usage="lots")
PAGE = b"<html><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>"


@dataclass(frozen=True)
class Shape:
    """One malformed answer, rendered for each provider and streaming mode."""

    name: str
    openai: Answer
    openai_stream: Answer
    anthropic: Answer
    anthropic_stream: Answer

    def render(self, provider: str, stream: bool) -> Answer:
        return getattr(self, provider + ("_stream" if stream else ""))  # type: ignore[no-any-return]


def _j(value: Any) -> Answer:
    return json.dumps(value).encode(), JSON


SHAPES = (
    Shape(
        "empty object `{}`",
        _j({}),
        (data({}), SSE),
        _j({}),
        (events(("message_start", {})), SSE),
    ),
    Shape(
        "`null`",
        _j(None),
        (data(b"null"), SSE),
        _j(None),
        (events(("message_start", b"null")), SSE),
    ),
    Shape(
        "array `[]`",
        _j([]),
        (data(b"[]"), SSE),
        _j([]),
        (events(("message_start", b"[]")), SSE),
    ),
    Shape(
        'bare string `"ok"`',
        _j("ok"),
        (data(b'"ok"'), SSE),
        _j("ok"),
        (events(("message_start", b'"ok"')), SSE),
    ),
    Shape(
        "cut-off JSON",
        (json.dumps(openai_completion()).encode()[:60], JSON),
        (data(chunk({"content": "final "}))[:50], SSE),
        (json.dumps(anthropic_message()).encode()[:60], JSON),
        (events(("message_start", START))[:70], SSE),
    ),
    Shape("HTML page", (PAGE, HTML), (PAGE, HTML), (PAGE, HTML), (PAGE, HTML)),
    Shape("empty body", (b"", JSON), (b"", SSE), (b"", JSON), (b"", SSE)),
    Shape(
        "`{not json}`",
        (b"{not json}", JSON),
        (data(b"{not json}"), SSE),
        (b"{not json}", JSON),
        (events(("message_start", b"{not json}")), SSE),
    ),
    Shape(
        "null message / `content: null`",
        _j(openai_completion(message=None)),
        (data({"id": "c1", "choices": [{"index": 0, "delta": None, "finish_reason": None}]}), SSE),
        _j(anthropic_message(content=None)),
        (
            events(
                ("message_start", START),
                text_start(),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": None},
                ),
            ),
            SSE,
        ),
    ),
    Shape(
        "null choice / null block",
        _j(openai_completion(choices=[None])),
        (data(chunk(choices=[None])), SSE),
        _j(anthropic_message(content=[None])),
        (
            events(
                ("message_start", START),
                ("content_block_start", {"type": "content_block_start", "index": 0}),
            ),
            SSE,
        ),
    ),
    Shape(
        "wrong types (`choices`/`content` a string)",
        _j(openai_completion(choices="abc")),
        (data(chunk(choices="abc")), SSE),
        _j(anthropic_message(content="abc")),
        (events(("message_start", {"type": "message_start", "message": "abc"})), SSE),
    ),
    Shape(
        "no finish reason (stream: 1 of 3 text chunks, then a normal close)",
        _j(openai_completion(finish_reason=None)),
        (data(chunk({"role": "assistant", "content": "final "})), SSE),
        _j(anthropic_message(stop_reason=None)),
        (events(("message_start", START), text_start(), text_delta("final ")), SSE),
    ),
    Shape(
        'cut inside tool-call arguments (`{"pa`)',
        _j(openai_completion(message=OPENAI_TOOL_MESSAGE, finish_reason=None)),
        (data(TOOL_CALL_START, chunk({"tool_calls": [_arguments('{"pa')]})), SSE),
        _j(anthropic_message(content=[ANTHROPIC_TOOL_USE], stop_reason=None)),
        (events(("message_start", START), TOOL_USE_START, CUT_ARGUMENTS), SSE),
    ),
    Shape(
        'usage of the wrong type (`"lots"`)',
        _j(openai_completion(usage="lots")),
        (data(chunk({"content": "hi"}, "stop"), chunk(choices=[], usage="lots"), b"[DONE]"), SSE),
        _j(anthropic_message(usage="lots")),
        (events(("message_start", {"type": "message_start", "message": BAD_USAGE})), SSE),
    ),
)

assert len(SHAPES) == 14


# --------------------------------------------------------------------------- runs

RAN: list[str] = []


@wg.tool
def work(path: str) -> str:
    """Work on a file (records that it ran: no tool may run from a broken answer).

    Args:
        path: the file.
    """
    RAN.append(path)
    return "worked"


TASK = [{"role": "user", "content": "Work on a.py, then answer."}]
POLICY = RetryPolicy()  # the default: 4 transient retries


@dataclass
class Outcome:
    termination: str
    failure_kind: str | None
    retryable: bool | None
    requests: int
    sleeps: int
    tools_run: int
    message: str

    def cell(self) -> str:
        return f"{self.termination}/{self.failure_kind} after {self.requests} requests"


def _provider(kind: str, sync: bool, url: str) -> Any:
    info = wg.ModelInfo(32_000, max_output_tokens=1024, tokenizer="o200k")
    if kind == "openai":
        cls = wg.OpenAIChatProvider if sync else wg.AsyncOpenAIChatProvider
        return cls("m", base_url=url + "/v1", api_key="k", discover=False, model_info=info)
    cls = wg.AnthropicProvider if sync else wg.AsyncAnthropicProvider
    return cls("claude-x", base_url=url, api_key="k", discover=False, model_info=info)


def run_cell(shape: Shape, provider: str, mode: str, stream: bool) -> Outcome:
    """One run against a server answering every call with ``shape``; never raises."""
    RAN.clear()
    sleeps: list[float] = []
    answer = shape.render(provider, stream)
    with FaultServer(lambda n: answer) as server:
        if mode == "sync":
            with _provider(provider, True, server.url) as p:
                loop = wg.ToolLoop(p, tools=[work], max_tokens=64, sleep=sleeps.append)
                if stream:
                    running = loop.stream(TASK)
                    list(running)
                    result = running.result
                else:
                    result = loop.run(TASK)
        else:

            async def main() -> wg.RunResult | None:
                async def sleep(seconds: float) -> None:
                    sleeps.append(seconds)

                async with _provider(provider, False, server.url) as p:
                    loop = wg.AsyncToolLoop(p, tools=[work], max_tokens=64, sleep=sleep)
                    if not stream:
                        return await loop.run(TASK)
                    running = loop.stream(TASK)
                    async for _ in running:
                        pass
                    return running.result

            result = asyncio.run(main())
        requests = len(server.bodies)
    assert result is not None
    failure = result.failure
    return Outcome(
        termination=result.termination.name,
        failure_kind=failure.kind.name if failure else None,
        retryable=failure.retryable if failure else None,
        requests=requests,
        sleeps=len(sleeps),
        tools_run=len(RAN),
        message=failure.message if failure else "",
    )


CELLS = [
    pytest.param(shape, provider, mode, stream, id=f"{i:02d}-{provider}-{mode}-{tag}")
    for i, shape in enumerate(SHAPES, 1)
    for provider in ("openai", "anthropic")
    for mode in ("sync", "async")
    for stream, tag in ((False, "whole"), (True, "stream"))
]


@pytest.mark.parametrize(("shape", "provider", "mode", "stream"), CELLS)
def test_a_malformed_answer_is_a_classified_transient_failure(
    shape: Shape, provider: str, mode: str, stream: bool
) -> None:
    outcome = run_cell(shape, provider, mode, stream)
    assert outcome.termination == "PROVIDER_ERROR", outcome
    assert outcome.failure_kind == FailureKind.MALFORMED_RESPONSE.name, outcome
    assert outcome.retryable is True
    # the retry policy backed off on it like any transient failure, then gave up
    assert outcome.requests == POLICY.max_transient_retries + 1
    assert outcome.sleeps == POLICY.max_transient_retries
    assert outcome.tools_run == 0  # nothing is used from a response that was not whole
    assert outcome.message


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_broken_answer_followed_by_a_whole_one_completes(provider: str, mode: str) -> None:
    broken = {"openai": SHAPES[11].openai_stream, "anthropic": SHAPES[11].anthropic_stream}
    whole = {
        "openai": (data(chunk({"content": "final answer"}, "stop"), b"[DONE]"), SSE),
        "anthropic": (
            events(
                ("message_start", START),
                text_start(),
                text_delta("final answer"),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "end_turn"},
                        "usage": {"output_tokens": 2},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ),
            SSE,
        ),
    }
    sleeps: list[float] = []
    with FaultServer(lambda n: broken[provider] if n == 1 else whole[provider]) as server:
        if mode == "sync":
            with _provider(provider, True, server.url) as p:
                running = wg.ToolLoop(p, tools=[work], sleep=sleeps.append).stream(TASK)
                deltas = list(running)
                result = running.result
        else:

            async def main() -> tuple[list[Any], wg.RunResult | None]:
                async def sleep(seconds: float) -> None:
                    sleeps.append(seconds)

                async with _provider(provider, False, server.url) as p:
                    running = wg.AsyncToolLoop(p, tools=[work], sleep=sleep).stream(TASK)
                    return [item async for item in running], running.result

            deltas, result = asyncio.run(main())
    assert result is not None and result.termination is wg.TerminationReason.COMPLETED
    assert result.text == "final answer"
    assert len(server.bodies) == 2 and len(sleeps) == 1
    errors = [e for e in result.events if e.kind == "provider_error"]
    assert [e.to_dict()["failure_kind"] for e in errors] == ["malformed_response"]
    # the partial text of the broken attempt was streamed out; the transcript keeps
    # only the whole answer
    assert result.messages[-1]["role"] == "assistant" and len(result.messages) == 2
    assert any(isinstance(d, StreamDelta) for d in deltas)


def matrix_table() -> Iterator[str]:
    """The matrix as a Markdown table (``python -m tests.test_fault_matrix``)."""
    yield "| shape | provider | sync whole | sync stream | async whole | async stream |"
    yield "| --- | --- | --- | --- | --- | --- |"
    for shape in SHAPES:
        for provider in ("openai", "anthropic"):
            cells = []
            for mode in ("sync", "async"):
                for stream in (False, True):
                    try:
                        cells.append(run_cell(shape, provider, mode, stream).cell())
                    except Exception as exc:  # a raw exception: what the matrix forbids
                        cells.append(f"RAW {type(exc).__name__}")
            yield f"| {shape.name} | {provider} | " + " | ".join(cells) + " |"


if __name__ == "__main__":
    for line in matrix_table():
        print(line)


# --------------------------------------------------------------------------- the refit

OVERFLOW_WITHOUT_COUNTS = {
    "error": {
        "message": "This model's maximum context length is exceeded. "
        "Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


def _long_task(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test in the parser module."},
    ]
    for i in range(turns):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "work", "arguments": json.dumps({"path": f"m{i}.py"})},
        }
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        body = "\n".join(f"{n:>4}  value_{i}_{n} = compute({n}, {i})" for n in range(60))
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": body})
    return messages


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_refit_after_an_overflow_without_counts_sends_less(mode: str) -> None:
    # The server refuses the first request for overflow and states no count; the loop
    # must not send the same bytes again (issue 12 item 5).
    answers = {1: _j(OVERFLOW_WITHOUT_COUNTS)}
    task = _long_task(30)
    manager = wg.ContextWindowManager(
        model_info=wg.ModelInfo(9_000, tokenizer="o200k"), counter="heuristic"
    )
    with FaultServer(
        lambda n: answers.get(n, _j(openai_completion())), status=lambda n: 400 if n == 1 else 200
    ) as server:
        if mode == "sync":
            with _provider("openai", True, server.url) as p:
                result = wg.ToolLoop(p, tools=[work], manager=manager, max_tokens=500).run(task)
        else:

            async def main() -> wg.RunResult:
                async with _provider("openai", False, server.url) as p:
                    loop = wg.AsyncToolLoop(p, tools=[work], manager=manager, max_tokens=500)
                    return await loop.run(task)

            result = asyncio.run(main())
        refused, refit = server.bodies
    assert result.termination is wg.TerminationReason.COMPLETED, result.failure
    decisions = [e.to_dict()["decision"] for e in result.events if e.kind == "provider_error"]
    assert decisions == ["refit"]
    assert refit != refused and len(refit) < len(refused)
    sent, resent = json.loads(refused)["messages"], json.loads(refit)["messages"]
    assert len(resent) < len(sent)  # whole turns dropped ...
    assert resent[:2] == task[:2] and resent[-2:] == task[-2:]  # ... head and newest kept
    assert result.messages[: len(task)] == task  # the run keeps the full transcript
