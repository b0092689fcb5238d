"""Usage reports that measure nothing: a prompt count of 0 (how servers and SDKs report a
missing usage) or below 0 is no usage, for ``fit()``, ``ToolLoop`` and ``wg.guard``
alike. Taken as an exact measurement, a 0 left the whole request uncounted and
``max_tokens`` was sized into the tokens it filled (review of the accounting, item 4).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

import windowguard as wg
from windowguard._conversations import ConversationStore
from windowguard.events import ContextEstimate, ContextPressure, UsageMeasured

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
