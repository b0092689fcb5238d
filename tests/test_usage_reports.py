"""Usage reports that measure nothing: a prompt count of 0 (how servers and SDKs report a
missing usage) or below 0 is no usage, for ``fit()``, ``ToolLoop`` and ``wg.guard``
alike. Taken as an exact measurement, a 0 left the whole request uncounted and
``max_tokens`` was sized into the tokens it filled (review of the accounting, item 4);
a negative count ended a ``ToolLoop`` run with a ConfigurationError (item 9).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

import windowguard as wg
from windowguard.core.events import ContextEstimate, ContextPressure, UsageMeasured
from windowguard.run._conversations import ConversationStore
from windowguard.run.providers.base import ModelRequest, Usage
from windowguard.run.providers.fake import FakeCalls, FakeProvider

WINDOW = 16_384
WORDS = 1_500  # at least one token each
ZERO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def _chat(*extra: dict[str, object]) -> list[dict[str, object]]:
    return [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "word " * WORDS},
        *extra,
    ]


@pytest.mark.parametrize("counter", [None, "heuristic"])
@pytest.mark.parametrize("usage", [0, ZERO_USAGE, {"input_tokens": 0, "output_tokens": 0}])
def test_fit_takes_a_zero_usage_as_no_usage(counter: Any, usage: object) -> None:
    manager = wg.ContextWindowManager(
        model_info=wg.ModelInfo(WINDOW, max_output_tokens=WINDOW, tokenizer="o200k"),
        counter=counter,
        edits=(),
    )
    first = manager.fit(_chat(), max_tokens=2_000)
    second = manager.fit(
        _chat({"role": "assistant", "content": "ok"}, {"role": "user", "content": "again"}),
        last_usage=usage,
    )
    assert first.estimated_tokens >= WORDS
    assert not any(isinstance(e, UsageMeasured) for e in second.events)
    # the second request holds the first: it is counted at least as large
    assert second.estimated_tokens >= WORDS
    assert second.max_tokens is not None
    assert second.estimated_tokens + second.max_tokens <= WINDOW
    assert second.upper_tokens + second.max_tokens <= WINDOW


@wg.tool
def read(path: str) -> str:
    """Read a file.

    Args:
        path: the file.
    """
    return "x " * 2_000


@pytest.mark.parametrize("reported", [0, -1])
def test_a_tool_loop_whose_provider_reports_no_prompt_tokens_counts_every_send(
    reported: int,
) -> None:
    info = wg.ModelInfo(WINDOW, max_output_tokens=WINDOW, tokenizer="o200k", source="explicit")
    provider = FakeProvider(
        [FakeCalls(("read", {"path": "a"})), FakeCalls(("read", {"path": "b"})), "done"],
        usage=lambda request: reported,
        model_info=info,
    )
    loop = wg.ToolLoop(
        provider,
        tools=[read],
        manager=wg.ContextWindowManager(model_info=info, edits=()),
    )
    result = loop.run([{"role": "user", "content": "go"}])
    assert result.termination is wg.TerminationReason.COMPLETED
    assert not any(isinstance(e, (UsageMeasured, ContextPressure)) for e in result.events)
    estimates = [e for e in result.events if isinstance(e, ContextEstimate)]
    assert len(estimates) == len(provider.requests) == 3
    # each send holds one more 2,000-token result than the one before
    assert estimates[2].upper_tokens > estimates[1].upper_tokens + 1_500
    for estimate, request in zip(estimates, provider.requests):
        assert request.max_tokens is not None
        assert estimate.upper_tokens + request.max_tokens <= WINDOW


def _openai_answering(usage: dict[str, Any]) -> openai.OpenAI:
    def answer(request: httpx.Request) -> httpx.Response:
        reply = {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        }
        return httpx.Response(200, json=reply)

    return openai.OpenAI(
        base_url="http://test.invalid/v1",
        api_key="k",
        http_client=httpx.Client(transport=httpx.MockTransport(answer)),
    )


def test_a_negative_count_from_the_server_is_no_count_and_the_answer_stays_usable() -> None:
    usage = {
        "prompt_tokens": -5,
        "completion_tokens": 3,
        "total_tokens": -2,
        "prompt_tokens_details": {"cached_tokens": -7},
    }
    client = _openai_answering(usage)
    provider = wg.OpenAIChatProvider("m", client=client, discover=False)
    try:
        response = provider.complete(
            ModelRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=10)
        )
    finally:
        client.close()
    assert response.text == "ok"
    assert response.usage == Usage(input_tokens=None, output_tokens=3, cache_read_tokens=0)


def test_a_conversation_takes_a_recorded_zero_usage_as_no_usage() -> None:
    store = ConversationStore(lambda: wg.ContextWindowManager(model_info=wg.ModelInfo(WINDOW)))
    conversation = store.get("k")
    first = conversation.fit(_chat(), max_tokens=2_000)
    assert conversation.record(ZERO_USAGE)
    second = conversation.fit(_chat({"role": "assistant", "content": "ok"}))
    assert not any(isinstance(e, UsageMeasured) for e in second.events)
    assert first.estimated_tokens >= WORDS
    assert second.estimated_tokens >= WORDS


def test_the_guard_takes_a_zero_usage_as_no_usage() -> None:
    bodies: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        reply = {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "ok"},
                    "finish_reason": "stop",
                }
            ],
            "usage": ZERO_USAGE,
        }
        return httpx.Response(200, json=reply)

    events: list[wg.Event] = []
    client = openai.OpenAI(
        base_url="http://test.invalid/v1",
        api_key="k",
        http_client=httpx.Client(transport=httpx.MockTransport(answer)),
    )
    guarded = wg.guard(
        client,
        model_info=wg.ModelInfo(WINDOW, max_output_tokens=WINDOW, tokenizer="o200k"),
        sinks=[events.append],
        discover=False,
    )
    guarded.chat.completions.create(model="m", messages=_chat(), max_tokens=2_000)
    guarded.chat.completions.create(
        model="m",
        messages=_chat(
            {"role": "assistant", "content": "ok"}, {"role": "user", "content": "again"}
        ),
        max_tokens=WINDOW,
    )
    client.close()
    assert not any(isinstance(e, (UsageMeasured, ContextPressure)) for e in events)
    estimates = [e for e in events if isinstance(e, ContextEstimate)]
    assert len(estimates) == len(bodies) == 2
    assert estimates[1].upper_tokens >= WORDS
    assert estimates[1].upper_tokens + bodies[1]["max_tokens"] <= WINDOW
