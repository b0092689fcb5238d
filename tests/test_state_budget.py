"""The byte budget over remembered conversations (issue 20, item 3): what a conversation
keeps is estimated after each fit, and the least recently used are forgotten beyond the
budget, across every store (model) that shares it."""

from __future__ import annotations

import gc
import json
import random
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import windowguard as wg
from windowguard.guard._apis import CHAT
from windowguard.proxy._guards import ProxyGuards
from windowguard.proxy.config import ProxyConfig, UpstreamInfo
from windowguard.run._conversations import ConversationStore, ConversationStores
from windowguard.run._retained import (
    PER_CONVERSATION_BYTES,
    StateBudget,
    entry_bytes,
    value_bytes,
)

INFO = wg.ModelInfo(context_window=200_000, tokenizer="o200k")


def _manager() -> wg.ContextWindowManager:
    return wg.ContextWindowManager(model_info=INFO)


def _transcript(seed: int, turns: int, result_chars: int = 2_000) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent. " * 20},
        {"role": "user", "content": f"task {seed}: " + "do the thing " * 30},
    ]
    for turn in range(turns):
        call = f"call_{turn}"
        arguments = json.dumps({"path": f"/src/{turn}.py"})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "read", "arguments": arguments},
                    }
                ],
            }
        )
        text = "".join(rng.choice("abcdef \n") for _ in range(result_chars))
        messages.append({"role": "tool", "tool_call_id": call, "content": text})
    return messages


class _Held:
    """A stand-in conversation for the budget alone (hashable by identity)."""

    def __init__(self, name: int) -> None:
        self.key = str(name)


class _Store:
    def __init__(self) -> None:
        self.discarded: list[Any] = []

    def discard(self, conversation: Any) -> None:
        self.discarded.append(conversation)


# -- the policy -----------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    budget=st.integers(min_value=1, max_value=10_000),
    puts=st.lists(
        st.tuples(st.integers(min_value=0, max_value=15), st.integers(0, 12_000)),
        max_size=60,
    ),
)
def test_the_total_never_exceeds_the_budget_unless_one_conversation_alone_does(
    budget: int, puts: list[tuple[int, int]]
) -> None:
    evicted: list[int] = []
    state = StateBudget(budget, on_evict=evicted.append)
    store = _Store()
    conversations = {n: _Held(n) for n in range(16)}
    kept: dict[int, int] = {}  # the model: name -> size, least recently used first
    for name, size in puts:
        conversation = conversations[name]
        state.put(conversation, store, size, new=True)
        kept.pop(name, None)
        kept[name] = size
        while sum(kept.values()) > budget and len(kept) > 1:
            del kept[next(iter(kept))]
        assert state.total == sum(kept.values())
        assert state.total <= budget or len(state) == 1
        assert state.sizes() == list(kept.values())
        if state.total > budget:  # kept alone: the one just put
            assert state.sizes() == [size]
    assert state.evictions == len(store.discarded) == sum(evicted)


def test_an_evicted_conversation_is_not_accounted_again_by_a_late_fit() -> None:
    state = StateBudget(100)
    store = _Store()
    a, b = _Held(1), _Held(2)
    state.put(a, store, 60, new=True)
    state.put(b, store, 60, new=True)  # a is evicted
    assert store.discarded == [a]
    state.put(a, store, 10)  # a fit of a that was running when it was evicted
    assert (state.total, len(state)) == (60, 1)


def test_a_budget_refuses_a_bad_bound() -> None:
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(wg.ConfigurationError, match="max_bytes"):
            StateBudget(bad)  # type: ignore[arg-type]


# -- the stores -----------------------------------------------------------------------


def test_stores_sharing_a_budget_evict_across_models_least_recently_used_first() -> None:
    budget = StateBudget(3 * PER_CONVERSATION_BYTES)
    one = ConversationStore(_manager, budget=budget)
    two = ConversationStore(_manager, budget=budget)
    a = one.get("a")
    two.get("b")
    one.get("c")
    assert len(budget) == 3 and budget.total == 3 * PER_CONVERSATION_BYTES
    assert one.get("a") is a  # now the most recently used: "b" is the oldest
    two.get("d")
    assert "b" not in two and "a" in one and "c" in one and "d" in two
    assert budget.evictions == 1


def test_a_fit_accounts_what_the_conversation_keeps_and_evicts_the_oldest() -> None:
    budget = StateBudget(400 * 1024)
    store = ConversationStore(_manager, budget=budget)
    first = store.get("first")
    first.fit(_transcript(1, 20))
    assert first.retained_bytes > 60 * 1024  # 20 tool results of 2,000 characters
    assert budget.total == first.retained_bytes
    for n in range(2, 12):
        store.get(str(n)).fit(_transcript(n, 20))
        assert budget.total <= budget.max_bytes
    assert "first" not in store and budget.evictions > 0
    kept = [key for key in map(str, range(2, 12)) if key in store]
    assert kept == ["9", "10", "11"][-len(kept) :] and len(kept) == len(budget) == len(store)
    assert budget.total == sum(store.get(key).retained_bytes for key in kept)


def test_a_conversation_larger_than_the_budget_is_kept_alone_until_another_comes() -> None:
    budget = StateBudget(50 * 1024)
    store = ConversationStore(_manager, budget=budget)
    big = store.get("big")
    big.fit(_transcript(1, 40))
    assert "big" in store and len(budget) == 1 and budget.total > budget.max_bytes
    store.get("small")
    assert "big" not in store and len(budget) == 1


def test_a_store_that_forgets_by_count_releases_the_bytes() -> None:
    budget = StateBudget(10**9)
    store = ConversationStore(_manager, max_conversations=2, budget=budget)
    for key in "abc":
        store.get(key).fit(_transcript(ord(key), 3))
    assert len(budget) == 2
    assert budget.total == sum(store.get(key).retained_bytes for key in "bc")
    store.clear()
    assert (len(budget), budget.total, len(store)) == (0, 0, 0)


def test_a_model_forgotten_by_count_releases_its_conversations() -> None:
    budget = StateBudget(10**9)

    def make(model: str) -> ConversationStore:
        return ConversationStore(_manager, budget=budget)

    stores = ConversationStores(make, max_keys=1, on_evict=ConversationStore.clear)
    stores.get("m1").get("x").fit(_transcript(1, 3))
    assert len(budget) == 1
    stores.get("m2")
    assert (len(budget), budget.total) == (0, 0)


# -- the estimate ---------------------------------------------------------------------


def _proxy_guards(max_state_mb: float = 10_000) -> ProxyGuards:
    config = ProxyConfig(
        upstream="http://127.0.0.1:9", window=200_000, discover=False, max_state_mb=max_state_mb
    )
    upstream = UpstreamInfo(
        root="http://127.0.0.1:9", model="m", model_info=INFO, explicit=INFO, counter=None
    )
    return ProxyGuards(config, upstream, ())


def _proxy_send(guards: ProxyGuards, messages: list[dict[str, Any]]) -> Any:
    """What the proxy does with one request: parse its JSON, fit it, record usage."""
    guard = guards.for_api(CHAT)
    raw = json.dumps({"model": "m", "messages": messages, "max_tokens": 1_000})
    parsed = guard.request(CHAT, json.loads(raw))
    assert parsed is not None
    conversation, _ = guard.conversation_for(parsed, guards.endpoint_for(CHAT), None)
    send = guard.fit(parsed, conversation)
    send.usage({"prompt_tokens": len(raw) // 4, "completion_tokens": 5})
    return conversation


@pytest.mark.parametrize(
    ("turns", "result_chars"), [(0, 0), (6, 2_000), (30, 2_000), (30, 200), (10, 20_000)]
)
def test_the_estimate_is_near_what_tracemalloc_measures(turns: int, result_chars: int) -> None:
    guards = _proxy_guards()
    _proxy_send(guards, _transcript(-1, 1))  # the catalog and tokenizer load once
    base = guards.budget.total
    count = 12
    transcripts = [_transcript(n, turns, result_chars) for n in range(count)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for messages in transcripts:  # three growing sends each, every one parsed anew
            for stop in (max(2, len(messages) - 4), max(2, len(messages) - 2), len(messages)):
                _proxy_send(guards, messages[:stop])
        gc.collect()
        measured = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    accounted = guards.budget.total - base
    assert 0.8 * measured <= accounted <= 1.5 * measured, (accounted, measured)


def test_a_proxy_conversation_keeps_one_copy_of_its_transcript() -> None:
    guards = _proxy_guards()
    messages = _transcript(3, 10)
    for stop in (4, 8, len(messages)):
        conversation = _proxy_send(guards, messages[:stop])
    entries, _ = conversation.manager.retained()
    assert len(entries) == len(messages)
    # The last request's parse is not kept beside the view (it would be a second copy).
    assert conversation._previous == ((), 0)


def test_a_caller_sending_its_own_objects_keeps_them_for_branch_detection() -> None:
    store = ConversationStore(_manager, budget=StateBudget(10**9))
    conversation = store.get("k")
    messages = _transcript(4, 3)
    conversation.fit(messages)
    assert conversation._previous == (messages, len(messages))


def test_value_bytes_counts_texts_by_their_width_and_survives_cycles() -> None:
    ascii_text, wide = "a" * 10_000, "\U0001f600" * 10_000
    assert value_bytes({"content": wide}) > 3 * value_bytes({"content": ascii_text})
    loop: list[Any] = []
    loop.append(loop)
    assert value_bytes(loop) > 0

    class Message:  # an SDK object: its attributes are counted
        def __init__(self) -> None:
            self.content = ascii_text

    assert value_bytes(Message()) > 10_000


def test_a_tool_calls_joined_text_is_counted_once_more() -> None:
    store = ConversationStore(_manager, budget=StateBudget(10**9))
    conversation = store.get("k")
    arguments = json.dumps({"content": "x" * 50_000})
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "write it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "w", "arguments": arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    conversation.fit(messages)
    entries, _ = conversation.manager.retained()
    # The call's segment joins its name and arguments: a second string of ~50 KB.
    assert entry_bytes(entries[1]) > 2 * 50_000


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "8"])
def test_a_bad_max_state_mb_is_refused_naming_the_flag(bad: Any) -> None:
    with pytest.raises(wg.ConfigurationError, match="--max-state-mb"):
        ProxyConfig(upstream="http://127.0.0.1:9", max_state_mb=bad)


def test_the_flag_reaches_the_proxys_budget() -> None:
    from windowguard.cli import build_parser

    args = build_parser().parse_args(
        ["proxy", "--upstream", "http://127.0.0.1:9", "--max-state-mb", "8"]
    )
    assert args.max_state_mb == 8.0
    assert build_parser().parse_args(["proxy", "--upstream", "u"]).max_state_mb == 256
    assert _proxy_guards(max_state_mb=args.max_state_mb).budget.max_bytes == 8 * 1024 * 1024
    with pytest.raises(SystemExit):
        build_parser().parse_args(["proxy", "--upstream", "u", "--max-state-mb", "0"])
