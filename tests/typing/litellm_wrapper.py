"""windowguard's LiteLLM wrappers have LiteLLM's signature (``mypy --strict``; never run)."""

from __future__ import annotations

from typing import Any

from litellm import CustomStreamWrapper, ModelResponse
from typing_extensions import assert_type

import windowguard as wg
from windowguard.integrations import litellm as wg_litellm

MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]


def sync_calls() -> None:
    reply = wg_litellm.completion(model="openai/m", messages=MESSAGES, max_tokens=256)
    assert_type(reply, ModelResponse)
    assert_type(wg_litellm.completion("openai/m", MESSAGES), ModelResponse)
    stream = wg_litellm.completion(model="openai/m", messages=MESSAGES, stream=True)
    assert_type(stream, CustomStreamWrapper)
    info = wg.ModelInfo(context_window=16_384)
    wg_litellm.completion(model="m", messages=MESSAGES, model_info=info, edits=[])
    wg_litellm.completion(messages=MESSAGES)  # type: ignore[call-overload]
    wg_litellm.completion(model=3, messages=MESSAGES)  # type: ignore[call-overload]
    wg_litellm.completion("m", MESSAGES, 30.0)  # type: ignore[call-overload]


async def async_calls() -> None:
    reply = await wg_litellm.acompletion(model="openai/m", messages=MESSAGES)
    assert_type(reply, ModelResponse)
    stream = await wg_litellm.acompletion(model="openai/m", messages=MESSAGES, stream=True)
    assert_type(stream, CustomStreamWrapper)
    wg_litellm.acompletion(messages=MESSAGES)  # type: ignore[call-overload]


def guard_methods() -> None:
    guard = wg_litellm.LiteLLMGuard(safety=500)
    assert_type(guard.completion(model="m", messages=MESSAGES), ModelResponse)
    guard.completion(model="m", messages=MESSAGES, edits=3)  # type: ignore[call-overload]
