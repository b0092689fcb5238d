"""The emulator's usage plans: answers without usage, and a prompt cache reported inside
or outside the prompt count, driven by the official openai SDK over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

import windowguard as wg
from windowguard.accounting.counters import TokenCounter, load_counter
from windowguard.accounting.templates import count_prompt
from windowguard.core.exceptions import ConfigurationError
from windowguard.emulator import DEFAULT_TOKENIZER, Emulator, Reply, UsagePlan
from windowguard.run.providers.base import ModelRequest

# A system prompt far above the 1,024-token cache minimum, and a growing conversation.
SYSTEM: dict[str, Any] = {
    "role": "system",
    "content": " ".join(f"rule {i}: be careful." for i in range(600)),
}
FIRST: list[Any] = [SYSTEM, {"role": "user", "content": "Start the task."}]
SECOND: list[Any] = [
    *FIRST,
    {"role": "assistant", "content": "Started."},
    {"role": "user", "content": "Go on."},
]


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return load_counter(DEFAULT_TOKENIZER)


_OPEN: list[openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def client(emu: Emulator) -> openai.OpenAI:
    sdk = openai.OpenAI(base_url=emu.base_url, api_key="sk-test", max_retries=0)
    _OPEN.append(sdk)
    return sdk


def _text(request: Any) -> Reply:
    return Reply(text="ok")


@pytest.mark.parametrize("flavor", ["openai", "vllm", "llamacpp"])
def test_chosen_calls_answer_without_usage(flavor: str, counter: TokenCounter) -> None:
    plan = UsagePlan(omit_calls=frozenset({2}))
    with Emulator(flavor=flavor, scenario=_text, usage=plan) as emu:
        sdk = client(emu)
        answers = [sdk.chat.completions.create(model="m", messages=FIRST) for _ in range(3)]
        records = emu.records
    exact = count_prompt(counter, FIRST, template="openai")
    assert answers[1].usage is None
    for answer in (answers[0], answers[2]):
        assert answer.usage is not None and answer.usage.prompt_tokens == exact
    assert [r.usage_reported for r in records] == [True, False, True]
    assert all(r.prompt_tokens == exact for r in records)  # the record keeps the truth


def test_an_omitted_stream_has_no_usage_chunk() -> None:
    with Emulator(flavor="vllm", scenario=_text, usage=UsagePlan(omit_calls=frozenset({1}))) as emu:
        sdk = client(emu)
        options: Any = {"include_usage": True}
        chunks = list(
            sdk.chat.completions.create(
                model="m", messages=FIRST, stream=True, stream_options=options
            )
        )
        kept = list(
            sdk.chat.completions.create(
                model="m", messages=FIRST, stream=True, stream_options=options
            )
        )
    assert all(chunk.usage is None for chunk in chunks)
    assert all(chunk.choices for chunk in chunks)  # no trailing usage-only chunk
    assert kept[-1].usage is not None and kept[-1].choices == []


def test_omitted_calls_are_a_seeded_share() -> None:
    plan = UsagePlan(omit_probability=0.3, seed=7)
    omitted = [n for n in range(1, 1001) if plan.omits(n)]
    assert 250 <= len(omitted) <= 350
    assert omitted == [
        n for n in range(1, 1001) if UsagePlan(omit_probability=0.3, seed=7).omits(n)
    ]
    assert omitted != [
        n for n in range(1, 1001) if UsagePlan(omit_probability=0.3, seed=8).omits(n)
    ]
    assert not any(UsagePlan().omits(n) for n in range(1, 100))


@pytest.mark.parametrize("mode", ["reported", "excluded"])
@pytest.mark.parametrize("flavor", ["openai", "vllm"])
def test_a_shared_prefix_is_cached_and_reported_inside_or_outside_the_count(
    flavor: str, mode: str, counter: TokenCounter
) -> None:
    plan = UsagePlan(cache=mode)  # type: ignore[arg-type]
    with Emulator(flavor=flavor, scenario=_text, usage=plan) as emu:
        sdk = client(emu)
        first = sdk.chat.completions.create(model="m", messages=FIRST)
        second = sdk.chat.completions.create(model="m", messages=SECOND)
        records = emu.records
    exact = count_prompt(counter, SECOND, template="openai")
    assert first.usage is not None and second.usage is not None
    assert first.usage.prompt_tokens == count_prompt(counter, FIRST, template="openai")
    details = second.usage.prompt_tokens_details
    assert details is not None and details.cached_tokens is not None
    cached = details.cached_tokens
    # The shared prefix is the system prompt and the first user message: most of FIRST.
    assert 1_024 <= cached <= first.usage.prompt_tokens
    assert cached % 128 == 0 and first.usage.prompt_tokens - cached < 128 + 16
    assert records[1].cached_tokens == cached and records[1].prompt_tokens == exact
    if mode == "reported":
        assert second.usage.prompt_tokens == exact
    else:
        assert second.usage.prompt_tokens == exact - cached


def test_no_cache_below_the_minimum_or_without_a_shared_prefix() -> None:
    short: list[Any] = [{"role": "user", "content": "hi"}]
    with Emulator(flavor="vllm", scenario=_text, usage=UsagePlan(cache="excluded")) as emu:
        sdk = client(emu)
        sdk.chat.completions.create(model="m", messages=short)
        again = sdk.chat.completions.create(model="m", messages=short)
        other = sdk.chat.completions.create(model="m", messages=[*short[:0], SECOND[-1]])
    for answer in (again, other):
        assert answer.usage is not None and answer.usage.prompt_tokens_details is not None
        assert answer.usage.prompt_tokens_details.cached_tokens == 0


def test_responses_report_the_cache_outside_input_tokens(counter: TokenCounter) -> None:
    items: list[Any] = [{"role": "system", "content": SYSTEM["content"]}]
    items.append({"role": "user", "content": "a"})
    with Emulator(flavor="openai", scenario=_text, usage=UsagePlan(cache="excluded")) as emu:
        sdk = client(emu)
        sdk.responses.create(model="m", input=items)
        longer: list[Any] = [*items, {"role": "user", "content": "b"}]
        second = sdk.responses.create(model="m", input=longer)
        records = emu.records
    assert second.usage is not None
    cached = second.usage.input_tokens_details.cached_tokens
    assert cached >= 1_024
    assert second.usage.input_tokens == records[1].prompt_tokens - cached  # type: ignore[operator]


def test_windowguard_reads_the_excluded_count_as_the_prompt() -> None:
    """What a client that trusts ``prompt_tokens`` sees: the prompt minus the cache."""
    with Emulator(flavor="vllm", scenario=_text, usage=UsagePlan(cache="excluded")) as emu:
        provider = wg.OpenAIChatProvider("m", base_url=emu.base_url, api_key="x", discover=False)
        try:
            for messages in (FIRST, SECOND):
                response = provider.complete(ModelRequest(messages=messages, max_tokens=16))
        finally:
            provider.close()
        record = emu.records[-1]
    assert response.usage is not None and record.cached_tokens
    assert response.usage.cache_read_tokens == record.cached_tokens
    assert response.usage.input_tokens == record.prompt_tokens - record.cached_tokens  # type: ignore[operator]


@pytest.mark.parametrize(
    ("options", "wording"),
    [
        ({"omit_probability": 1.5}, "omit_probability"),
        ({"omit_calls": frozenset({0})}, "omit_calls"),
        ({"cache": "sometimes"}, "cache must be one of"),
        ({"cache_block_tokens": 0}, "cache_block_tokens"),
    ],
)
def test_bad_plans_are_refused(options: dict[str, Any], wording: str) -> None:
    with pytest.raises(ConfigurationError, match=wording):
        UsagePlan(**options)


def test_usage_plans_are_for_the_openai_compatible_flavours() -> None:
    with pytest.raises(ConfigurationError, match="OpenAI-compatible"):
        Emulator(flavor="anthropic", usage=UsagePlan(cache="excluded"))
    with pytest.raises(ConfigurationError, match="UsagePlan"):
        Emulator(flavor="vllm", usage={"cache": "excluded"})  # type: ignore[arg-type]
