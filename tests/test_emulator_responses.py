"""The emulator's OpenAI Responses endpoint (``POST /v1/responses``), driven by the
official openai SDK over HTTP: create, create(stream=True) and stream(), sync and async."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from windowguard.core.failures import FailureKind, classify_failure
from windowguard.emulator import Emulator, EmulatorRequest, Reply
from windowguard.emulator.scenarios import ToolCall

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "read_file",
        "description": "Read a file from the repository.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
]


def _calls_then_text(request: EmulatorRequest) -> Reply:
    """Two parallel calls while no tool result is in the transcript, then text."""
    if any(message.get("role") == "tool" for message in request.messages):
        return Reply(text="All read: the answer is forty-two, as the files say.")
    return Reply(
        text="Reading both.",
        tool_calls=(
            ToolCall(name="read_file", arguments={"path": "a.py"}),
            ToolCall(name="read_file", arguments={"path": "b.py"}),
        ),
    )


def _answered(first: Any) -> list[Any]:
    """The conversation after ``first``: its output items and a result per call."""
    items: list[Any] = [{"role": "user", "content": "Read a.py and b.py."}]
    items += [item.model_dump(exclude_none=True) for item in first.output]
    for item in first.output:
        if item.type == "function_call":
            items.append(
                {"type": "function_call_output", "call_id": item.call_id, "output": "x = 1\n"}
            )
    return items


@contextlib.contextmanager
def _serve(**options: Any) -> Iterator[tuple[Emulator, openai.OpenAI]]:
    """A running emulator and an SDK client on it (both closed afterwards)."""
    with (
        Emulator(**options) as emu,
        openai.OpenAI(base_url=emu.base_url, api_key="x", max_retries=0) as client,
    ):
        yield emu, client


def _identity(item: Any) -> tuple[object, ...]:
    return (item.type, item.id, getattr(item, "call_id", None), getattr(item, "arguments", None))


def _count(emu: Emulator, **body: Any) -> int:
    """What the count endpoint says for the same request."""
    with openai.OpenAI(base_url=emu.base_url, api_key="x") as client:
        return client.responses.input_tokens.count(**body).input_tokens


def test_create_returns_function_calls_then_text_with_exact_usage() -> None:
    with _serve(flavor="openai", context_window=8192, scenario=_calls_then_text) as (emu, client):
        first = client.responses.create(
            model="gpt-4o",
            instructions="You are terse.",
            input="Read a.py and b.py.",
            tools=TOOLS,  # type: ignore[arg-type]
        )
        assert first.object == "response" and first.status == "completed"
        kinds = [item.type for item in first.output]
        assert kinds == ["message", "function_call", "function_call"]
        calls = [item for item in first.output if item.type == "function_call"]
        assert [json.loads(call.arguments)["path"] for call in calls] == ["a.py", "b.py"]
        assert all(call.call_id.startswith("call_") for call in calls)
        assert len({call.call_id for call in calls}) == 2
        assert first.output_text == "Reading both."
        assert first.usage is not None
        counted = _count(
            emu,
            model="gpt-4o",
            instructions="You are terse.",
            input="Read a.py and b.py.",
            tools=TOOLS,
        )
        assert first.usage.input_tokens == counted == emu.records[0].prompt_tokens
        assert first.usage.output_tokens == emu.records[0].completion_tokens
        assert first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens

        items = _answered(first)
        second = client.responses.create(model="gpt-4o", input=items, tools=TOOLS)  # type: ignore[arg-type]
        assert [item.type for item in second.output] == ["message"]
        assert second.output_text.startswith("All read")
        assert second.usage is not None
        assert second.usage.input_tokens == _count(emu, model="gpt-4o", input=items, tools=TOOLS)
        assert second.usage.input_tokens > first.usage.input_tokens


def test_stream_true_sends_the_real_event_sequence() -> None:
    with _serve(flavor="openai", context_window=8192, scenario=_calls_then_text) as (emu, client):
        events = list(
            client.responses.create(
                model="gpt-4o",
                input="Read a.py and b.py.",
                tools=TOOLS,  # type: ignore[arg-type]
                stream=True,
            )
        )
        kinds = [event.type for event in events]
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert kinds[-1] == "response.completed"
        assert [event.sequence_number for event in events] == list(range(len(events)))
        for kind in (
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
            "response.output_item.done",
        ):
            assert kind in kinds
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text == "Reading both."
        arguments = [
            e.arguments for e in events if e.type == "response.function_call_arguments.done"
        ]
        assert [json.loads(value) for value in arguments] == [
            {"path": "a.py"},
            {"path": "b.py"},
        ]
        final = events[-1].response  # type: ignore[union-attr]
        assert final.usage is not None
        assert final.usage.input_tokens == emu.records[0].prompt_tokens
        assert [item.type for item in final.output] == [
            "message",
            "function_call",
            "function_call",
        ]


def test_stream_helper_accumulates_the_same_response_as_create() -> None:
    with _serve(flavor="openai", context_window=8192, scenario=_calls_then_text) as (_emu, client):
        created = client.responses.create(model="gpt-4o", input="Read a.py and b.py.", tools=TOOLS)  # type: ignore[arg-type]
        with client.responses.stream(
            model="gpt-4o",
            input="Read a.py and b.py.",
            tools=TOOLS,  # type: ignore[arg-type]
        ) as stream:
            deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
            streamed = stream.get_final_response()
        assert "".join(deltas) == created.output_text == streamed.output_text
        assert streamed.usage == created.usage
        assert [_identity(item) for item in streamed.output] == [
            _identity(item) for item in created.output
        ]


def test_async_create_stream_and_stream_helper() -> None:
    async def main(emu: Emulator) -> tuple[Any, list[str], Any]:
        client = openai.AsyncOpenAI(base_url=emu.base_url, api_key="x")
        created = await client.responses.create(model="gpt-4o", input="Read a.py and b.py.")
        kinds = [
            event.type
            async for event in await client.responses.create(
                model="gpt-4o", input="Read a.py and b.py.", stream=True
            )
        ]
        async with client.responses.stream(model="gpt-4o", input="Read a.py and b.py.") as s:
            async for _ in s:
                pass
            final = await s.get_final_response()
        await client.close()
        return created, kinds, final

    with Emulator(flavor="openai", context_window=8192, scenario="echo") as emu:
        created, kinds, final = asyncio.run(main(emu))
    assert created.output_text == "Read a.py and b.py." == final.output_text
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert final.usage == created.usage


def test_overflow_is_the_responses_api_refusal_and_classifies() -> None:
    with _serve(flavor="openai", context_window=2048) as (emu, client):
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError) as caught:
                client.responses.create(model="gpt-4o", input="word " * 4000, stream=stream)
            error = caught.value
            assert error.status_code == 400
            assert error.code == "context_length_exceeded"
            assert error.param == "input"
            assert "exceeds the context window of this model" in error.message
            assert classify_failure(error).kind is FailureKind.CONTEXT_OVERFLOW
        # prompt + max_output_tokens over the window is refused the same way
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(model="gpt-4o", input="hi", max_output_tokens=4000)
        assert caught.value.code == "context_length_exceeded"
        assert [record.status for record in emu.records] == [400, 400, 400]


def test_max_output_tokens_bounds_the_reply_and_marks_it_incomplete() -> None:
    def long_text(request: EmulatorRequest) -> Reply:
        return Reply(text="many words " * 200)

    with _serve(flavor="openai", context_window=8192, scenario=long_text) as (emu, client):
        response = client.responses.create(model="gpt-4o", input="go", max_output_tokens=20)
        assert response.status == "incomplete"
        assert response.incomplete_details is not None
        assert response.incomplete_details.reason == "max_output_tokens"
        assert response.usage is not None and response.usage.output_tokens <= 20
        kinds = [
            e.type
            for e in client.responses.create(
                model="gpt-4o", input="go", max_output_tokens=20, stream=True
            )
        ]
        assert kinds[-1] == "response.incomplete"
        assert emu.records[0].max_output_tokens == 20


@pytest.mark.parametrize(
    ("body", "param", "wording"),
    [
        ({"input": "hi"}, "model", "Missing required parameter: 'model'."),
        ({"model": "m"}, "input", "Missing required parameter: 'input'."),
        (
            {"model": "m", "input": "hi", "max_output_tokens": 5},
            "max_output_tokens",
            "Expected a value >= 16, but got 5 instead.",
        ),
        (
            {"model": "m", "input": "hi", "previous_response_id": "resp_1"},
            "previous_response_id",
            "Previous response with id 'resp_1' not found.",
        ),
        (
            {
                "model": "m",
                "input": [
                    {"role": "user", "content": "hi"},
                    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                ],
            },
            "input",
            "No tool output found for function call c1.",
        ),
        (
            {
                "model": "m",
                "input": [
                    {"role": "user", "content": "hi"},
                    {"type": "function_call_output", "call_id": "c9", "output": "x"},
                ],
            },
            "input",
            "No tool call found for function call output with call_id c9.",
        ),
    ],
)
def test_invalid_requests_get_the_apis_400(body: dict[str, Any], param: str, wording: str) -> None:
    with _serve(flavor="openai", context_window=4096) as (_emu, client):
        with pytest.raises(openai.BadRequestError) as caught:
            client.post("/responses", body=body, cast_to=object)
        assert caught.value.param == param
        assert wording in caught.value.message


def test_calls_answered_out_of_position_pair_by_call_id() -> None:
    # The Responses API pairs by call_id: a message between a call and its output is fine.
    items = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{}"},
        {"role": "user", "content": "and meanwhile"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
    ]
    with _serve(flavor="openai", context_window=4096, scenario="echo") as (_emu, client):
        response = client.responses.create(model="gpt-4o", input=items)  # type: ignore[arg-type]
        assert response.output_text == "done"


def test_only_the_openai_flavour_serves_responses() -> None:
    with (
        _serve(flavor="vllm", context_window=4096) as (_emu, client),
        pytest.raises(openai.NotFoundError),
    ):
        client.responses.create(model="m", input="hi")
