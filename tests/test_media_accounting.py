"""Images, audio and documents have no guaranteed bound (decision 0004, "Near the edge").

A provider charges an image by its pixels and per model (gpt-4.1-nano up to 1,536
patches x 2.46 = 3,779 tokens), which no message shows: the 1,600 tokens the bounds and
the local counts carry per media item are an allowance, not a bound. So a request holding
media nothing has measured is never certain by the bound alone: a count API that counts
media as the provider charges them is asked first, and a count API that cannot see them
(a conversion drops them; an open server's ``/tokenize`` counts a placeholder) refuses
rather than pass a short count off as an exact one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import exact_tokenizers as ex
import windowguard as wg
from windowguard.accounting.remote import (
    CountQuery,
    OpenAIInputTokens,
    RemoteCountError,
    VLLMTokenizeCounter,
)
from windowguard.accounting.templates import count_prompt
from windowguard.core.adapters import shape_messages
from windowguard.emulator import Emulator

PER_IMAGE = 3_779  # gpt-4.1-nano, a high-detail image at its largest
WINDOW = 16_384
IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "high"}}


class ProviderCount:
    """A count API that counts media as the provider charges them (as Anthropic's and
    OpenAI's own count APIs do for a transcript in their format)."""

    name = "provider count"
    media_formats = frozenset({"openai_chat"})

    def __init__(self) -> None:
        self.counter = ex.require("o200k")
        self.calls = 0

    def count(self, query: CountQuery) -> int:
        self.calls += 1
        return truth(self.counter, list(query.messages))

    async def acount(self, query: CountQuery) -> int:
        return self.count(query)


def truth(counter: Any, messages: list[dict[str, Any]]) -> int:
    """What the provider counts: the text as OpenAI accounts for it, plus each image."""
    text_only = []
    images = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            images += sum(1 for part in content if part.get("type") == "image_url")
            text = [part for part in content if part.get("type") == "text"]
            message = {**message, "content": text[0]["text"] if text else ""}
        text_only.append(message)
    return count_prompt(counter, text_only, template="openai") + PER_IMAGE * images


def _manager(remote: ProviderCount | None) -> wg.ContextWindowManager:
    info = wg.ModelInfo(context_window=WINDOW, tokenizer="o200k")
    return wg.ContextWindowManager(model_info=info, counter=remote, edits=())


def _photos(n: int, text: str = "Compare these photos.") -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}, *[IMAGE] * n]}


def test_a_send_holding_media_nothing_measured_is_counted_first() -> None:
    """The review's repro, with a count API at hand: 3 images at 3,779 tokens each look
    like 4,800 by the allowance, so the send looked far from the edge, was never counted,
    and its reply did not fit (truth + max_tokens over the window)."""
    remote = ProviderCount()
    messages = [{"role": "system", "content": "You are helpful."}, _photos(3)]
    fit = _manager(remote).fit(messages, max_tokens=6_000)
    real = truth(remote.counter, fit.messages)
    assert fit.remote_counts == 1
    assert fit.exact
    assert real + fit.max_tokens <= WINDOW


def test_media_a_report_measured_is_not_counted_again() -> None:
    remote = ProviderCount()
    manager = _manager(remote)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}, _photos(2)]
    first = manager.fit(messages, max_tokens=2_000)
    assert first.remote_counts == 1
    reported = {"prompt_tokens": truth(remote.counter, first.messages)}
    messages += [
        {"role": "assistant", "content": "The second photo is brighter."},
        {"role": "user", "content": "Why?"},
    ]
    second = manager.fit(messages, max_tokens=2_000, last_usage=reported)
    assert second.remote_counts == 0  # the images were measured by the report
    messages += [{"role": "assistant", "content": "More light."}, _photos(1, "And this one?")]
    reported = {"prompt_tokens": truth(remote.counter, second.messages)}
    third = manager.fit(messages, max_tokens=2_000, last_usage=reported)
    assert third.remote_counts == 1  # a new image nothing measured
    assert truth(remote.counter, third.messages) + third.max_tokens <= WINDOW


def test_without_a_count_api_that_sees_media_nothing_is_asked_for_them() -> None:
    """A count API that cannot see media is not asked because of them (it would refuse)."""
    remote = ProviderCount()
    remote.media_formats = frozenset()
    fit = _manager(remote).fit([_photos(1)], max_tokens=1_000)
    assert fit.remote_counts == 0
    assert not fit.exact


def _chat_query(messages: list[dict[str, Any]], fmt: str = "openai_chat") -> CountQuery:
    return CountQuery(format=fmt, model="m", messages=tuple(messages))  # type: ignore[arg-type]


def test_a_count_api_that_cannot_see_media_refuses_a_request_holding_them() -> None:
    """vLLM's /tokenize counts a placeholder per image (vllm-project/vllm#16191), and a
    conversion to another provider's format drops media: either count would be short by
    the media and still be taken as exact."""
    o200k = ex.require("o200k")
    messages = [{"role": "user", "content": [{"type": "text", "text": "What is it?"}, IMAGE]}]
    with Emulator(flavor="vllm", tokenizer=o200k) as emu:
        counter = VLLMTokenizeCounter(emu.base_url)
        assert counter.count(_chat_query([{"role": "user", "content": "What is it?"}])) > 0
        with pytest.raises(RemoteCountError, match="images, audio or documents"):
            counter.count(_chat_query(messages))
    with pytest.raises(RemoteCountError, match="images, audio or documents"):
        OpenAIInputTokens("http://127.0.0.1:9").count(_chat_query(messages))


def test_the_provider_count_of_its_own_format_takes_media() -> None:
    """OpenAI's input_tokens counts a Responses transcript's images itself: not refused
    before it is sent (here nothing listens, so the failure is the connection's)."""
    items = [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is it?"},
                {"type": "input_image", "image_url": "https://example.com/a.png"},
            ],
        }
    ]
    assert shape_messages(items, format="responses").shapes[0].media_items == 1
    with pytest.raises(RemoteCountError) as caught:
        OpenAIInputTokens("http://127.0.0.1:9", timeout=0.5).count(_chat_query(items, "responses"))
    assert "images, audio or documents" not in str(caught.value)
