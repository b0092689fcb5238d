"""When the manager believes a provider's ``prompt_tokens`` leave out the cached tokens it
reports beside them (decision 0004, ``usage_excludes_cached``), it must rest on exact
evidence, and it must let go of the belief when the reports contradict it.

Before (review of the accounting, item 7): a local count that over-counted (an image at
its 1,600-token allowance, reasoning a template drops, a caller's conservative counter)
was taken as exact, so an ordinary provider (cached tokens inside ``prompt_tokens``) was
flagged; the flag was never cleared, and every later report was inflated by the cached
tokens, about doubling the count of the request (pruning at ~13k tokens of a 32k window).
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

import windowguard as wg
from windowguard.accounting.templates import count_prompt
from windowguard.core.events import UsageExcludesCached

from .exact_tokenizers import require

WINDOW = 32_768
IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
IMAGE_TOKENS = 765  # what the provider charges (the local accounting allows 1,600)


@pytest.fixture
def o200k() -> Any:
    return require("o200k")


def _prose(rng: random.Random, words: int) -> str:
    vocabulary = ["the", "house", "river", "quickly", "between", "system", "under"]
    return " ".join(rng.choice(vocabulary) for _ in range(words))


def _truth(counter: Any, messages: Sequence[Mapping[str, Any]]) -> int:
    """The provider's count: text exactly, each image at what it charges."""
    images, shown = 0, []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            images += sum(1 for part in content if part.get("type") == "image_url")
            text = "\n".join(part["text"] for part in content if part.get("type") == "text")
            message = {**message, "content": text}
        shown.append(message)
    return count_prompt(counter, shown, None, template="openai") + IMAGE_TOKENS * images


def _cached(previous: int, prompt: int) -> int:
    """The previous prompt's prefix hits the cache, in blocks of 128."""
    return min(previous, prompt) // 128 * 128


def test_an_over_counted_image_is_no_evidence_that_prompt_tokens_leave_out_cached(
    o200k: Any,
) -> None:
    rng = random.Random(5)
    manager = wg.ContextWindowManager(model_info=wg.ModelInfo(WINDOW, tokenizer="o200k"), edits=())
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": [{"type": "text", "text": "Describe these."}, IMAGE, IMAGE]},
    ]
    usage: object = None
    previous = 0
    for _ in range(8):
        # no max_tokens: the reply fills the window, so each send is counted locally
        fit = manager.fit(messages, last_usage=usage)
        assert not any(isinstance(e, UsageExcludesCached) for e in fit.events)
        truth = _truth(o200k, fit.messages)
        if usage is not None:  # the previous send measured all but the newest turn
            assert fit.estimated_tokens <= truth + 2 * 1_600
        usage = {
            "prompt_tokens": truth,
            "prompt_tokens_details": {"cached_tokens": _cached(previous, truth)},
        }
        previous = truth
        messages += [
            {"role": "assistant", "content": _prose(rng, 300)},
            {"role": "user", "content": _prose(rng, 100)},
        ]


class _Doubling:
    """A caller's counter that counts high (twice o200k): an upper bound, not exact."""

    def __init__(self, exact: Any) -> None:
        self.exact = exact

    def count(self, text: str) -> int:
        return 2 * self.exact.count(text)


def test_a_callers_counter_is_no_evidence_that_prompt_tokens_leave_out_cached(
    o200k: Any,
) -> None:
    rng = random.Random(7)
    manager = wg.ContextWindowManager(
        model_info=wg.ModelInfo(WINDOW, tokenizer="o200k"), counter=_Doubling(o200k), edits=()
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": _prose(rng, 200)},
    ]
    usage: object = None
    previous = 0
    for _ in range(6):
        fit = manager.fit(messages, max_tokens=1_000, last_usage=usage)
        assert not any(isinstance(e, UsageExcludesCached) for e in fit.events)
        truth = count_prompt(o200k, fit.messages, None, template="openai")
        usage = {
            "prompt_tokens": truth,
            "prompt_tokens_details": {"cached_tokens": _cached(previous, truth)},
        }
        previous = truth
        messages += [
            {"role": "assistant", "content": _prose(rng, 300)},
            {"role": "user", "content": _prose(rng, 100)},
        ]


def _symbols(rng: random.Random, chars: int) -> str:
    """Text of about one token per 1.3 bytes: the byte bound is close to its count."""
    return "".join(
        rng.choice(string.ascii_letters + string.digits + "+-*/=<>") for _ in range(chars)
    )


@pytest.mark.parametrize(
    ("counter", "max_tokens", "text"),
    [
        (None, None, _prose),  # every send counted locally: its local exact count
        ("heuristic", 1_000, _symbols),  # no local count: its guaranteed bound
    ],
    ids=["local-count", "bound"],
)
def test_the_belief_is_dropped_when_adding_the_cached_tokens_overshoots(
    o200k: Any,
    counter: Any,
    max_tokens: int | None,
    text: Callable[[random.Random, int], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One short report (a glitch, a proxy in front that changed) makes the manager add
    the cached tokens; the reports after it hold them, so adding them overshoots what
    the request can hold, and the manager stops adding them."""
    rng = random.Random(11)
    manager = wg.ContextWindowManager(
        model_info=wg.ModelInfo(WINDOW, tokenizer="o200k"), counter=counter, edits=()
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": text(rng, 600)},
    ]
    usage: object = None
    previous = 0
    flagged = False
    for step in range(8):
        fit = manager.fit(messages, max_tokens=max_tokens, last_usage=usage)
        flagged = flagged or any(isinstance(e, UsageExcludesCached) for e in fit.events)
        truth = count_prompt(o200k, fit.messages, None, template="openai")
        cached = _cached(previous, truth)
        short = step == 2  # this one report does leave them out
        usage = {
            "prompt_tokens": truth - cached if short else truth,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        previous = truth
        messages += [
            {"role": "assistant", "content": text(rng, 400)},
            {"role": "user", "content": text(rng, 100)},
        ]
    assert flagged
    assert "include the" in caplog.text and "no longer adding them" in caplog.text
    fit = manager.fit(messages, max_tokens=max_tokens, last_usage=usage)
    truth = count_prompt(o200k, fit.messages, None, template="openai")
    # the reports measure the request as it is again, not inflated by the cached tokens
    assert fit.measured_tokens <= truth


def _qwen_truth(counter: Any, messages: Sequence[Mapping[str, Any]]) -> int:
    """A Qwen3 server's count: the reasoning of turns before the last user query dropped."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    shown = [
        {k: v for k, v in m.items() if not (k == "reasoning_content" and i < last_user)}
        for i, m in enumerate(messages)
    ]
    return count_prompt(counter, shown, None, template="qwen")


@pytest.mark.parametrize("excluded", [False, True], ids=["included", "excluded"])
def test_reasoning_a_template_drops_is_no_evidence_but_a_real_exclusion_still_is(
    excluded: bool,
) -> None:
    """Qwen3 drops the reasoning of turns before the last user query, so a report falls
    short of the local count (and of what earlier reports measured) by up to that
    reasoning: no evidence on its own. A server that does leave the cached tokens out is
    short by more than that, and is still found."""
    qwen = require("qwen")
    rng = random.Random(5)
    manager = wg.ContextWindowManager(model_info=wg.ModelInfo(8_192, tokenizer="qwen"), edits=())
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": _prose(rng, 300)},
    ]
    fit = manager.fit(messages)
    previous = _qwen_truth(qwen, fit.messages)
    usage: object = {"prompt_tokens": previous}
    flagged = []
    for _ in range(8):
        messages += [
            {"role": "assistant", "content": _prose(rng, 40), "reasoning_content": _prose(rng, 60)},
            {"role": "user", "content": _prose(rng, 100)},
        ]
        fit = manager.fit(messages, last_usage=usage)
        flagged += [e for e in fit.events if isinstance(e, UsageExcludesCached)]
        truth = _qwen_truth(qwen, fit.messages)
        cached = _cached(previous, truth)
        usage = {
            "prompt_tokens": truth - cached if excluded else truth,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        previous = truth
    assert len(flagged) == (1 if excluded else 0)
