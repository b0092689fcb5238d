"""The per-conversation store behind wg.guard, the integrations and the proxy."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

import windowguard as wg
from windowguard.core.shrink import DEFAULT_SAFETY_BUFFER
from windowguard.run._conversations import (
    ConversationStore,
    ConversationStores,
    ManagerOptions,
    head_key,
)


def _manager() -> wg.ContextWindowManager:
    return wg.ContextWindowManager(model_info=wg.ModelInfo(context_window=8_192))


def _chat(task: str, *extra: dict[str, object]) -> list[dict[str, object]]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": task}, *extra]


def test_head_key_ignores_everything_after_the_first_user_message() -> None:
    first = _chat("fix the bug")
    later = _chat("fix the bug", {"role": "assistant", "content": "done"})
    assert head_key(first, model="m") == head_key(later, model="m")
    assert head_key(first, model="m") != head_key(_chat("write docs"), model="m")
    assert head_key(first, model="m") != head_key(first, model="other")
    assert head_key(first, system="a") != head_key(first, system="b")


def test_head_key_reads_pydantic_and_sdk_objects() -> None:
    class Message:
        def __init__(self, role: str, content: str) -> None:
            self.role, self.content = role, content

        def model_dump(self, mode: str) -> dict[str, str]:
            return {"role": self.role, "content": self.content}

    objects = [Message("user", "task"), Message("assistant", "x")]
    assert head_key(objects) == head_key([{"role": "user", "content": "task"}])


def test_store_is_bounded_least_recently_used_first() -> None:
    store = ConversationStore(_manager, max_conversations=2)
    a, b = store.get("a"), store.get("b")
    assert store.get("a") is a  # "a" is now the most recent
    store.get("c")
    assert "b" not in store and "a" in store and "c" in store
    assert store.get("b") is not b  # forgotten: a fresh conversation


def test_store_forgets_idle_conversations(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr("windowguard.run._conversations.time.monotonic", lambda: clock[0])
    store = ConversationStore(_manager, ttl_seconds=10)
    first = store.get("a")
    clock[0] += 11
    store.get("b")
    assert "a" not in store
    assert store.get("a") is not first


def _grown(messages: list[dict[str, object]], n: int) -> list[dict[str, object]]:
    """The transcript with one more exchange appended (a new list, same old objects)."""
    return [
        *messages,
        {"role": "assistant", "content": f"ok {n}"},
        {"role": "user", "content": f"more {n}"},
    ]


def _usage_measured(fit: wg.Fit) -> list[int]:
    return [e.total_tokens for e in fit.events if isinstance(e, wg.UsageMeasured)]


def test_usage_is_handed_on_once_and_a_failed_send_is_followed_by_no_usage() -> None:
    conversation = ConversationStore(_manager).get("k")
    messages = _chat("task")
    first = conversation.prepare(messages, max_tokens=100)
    assert conversation.record({"prompt_tokens": 40}, send=first.send)
    messages = _grown(messages, 1)
    second = conversation.prepare(messages, max_tokens=100)
    assert _usage_measured(second.fit) == [40]
    messages = _grown(messages, 2)
    third = conversation.prepare(messages, max_tokens=100)  # nothing recorded since
    assert _usage_measured(third.fit) == []
    conversation.record(None, send=third.send)  # no usage came back
    assert _usage_measured(conversation.fit(_grown(messages, 3), max_tokens=100)) == []


def test_fit_passes_the_recorded_usage_to_the_manager() -> None:
    conversation = ConversationStore(_manager).get("k")
    messages = _chat("task")
    conversation.fit(messages, max_tokens=100)
    conversation.record({"prompt_tokens": 30})  # send=None: the latest send
    fit = conversation.fit(_grown(messages, 1), max_tokens=100)
    assert _usage_measured(fit) == [30]


def test_a_report_for_any_send_but_the_latest_fit_is_dropped() -> None:
    conversation = ConversationStore(_manager).get("k")
    history = _chat("task")
    branch_a = [*history, {"role": "user", "content": "branch a"}]
    branch_b = [*history, {"role": "user", "content": "branch b"}]
    a = conversation.prepare(branch_a, max_tokens=100)
    b = conversation.prepare(branch_b, max_tokens=100)
    # A's usage arrives after B was fitted: the manager's last fit is B's request.
    assert not conversation.record({"prompt_tokens": 3_000}, send=a.send)
    assert conversation.is_latest(b.send) and not conversation.is_latest(a.send)
    assert _usage_measured(conversation.fit(branch_b, max_tokens=100)) == []


def test_a_kept_report_is_handed_to_the_next_fit_once() -> None:
    conversation = ConversationStore(_manager).get("k")
    history = _chat("task")
    a = conversation.prepare([*history, {"role": "user", "content": "a"}], max_tokens=100)
    assert conversation.record({"prompt_tokens": 25}, send=a.send)  # A is the latest fit
    b = conversation.prepare([*history, {"role": "user", "content": "b"}], max_tokens=100)
    assert _usage_measured(b.fit) == [25]  # handed to B's fit: it measures A's request
    c = conversation.prepare([*history, {"role": "user", "content": "c"}], max_tokens=100)
    assert _usage_measured(c.fit) == []  # handed on once only


def test_a_refused_fit_leaves_a_started_conversation_without_stale_usage() -> None:
    conversation = ConversationStore(_manager).get("k")
    messages = _chat("task")
    conversation.fit(messages, max_tokens=100)
    conversation.record({"prompt_tokens": 30})
    huge = _chat("task", {"role": "user", "content": "x " * 40_000})
    with pytest.raises(wg.ContextTruncatedError):
        conversation.fit(huge, max_tokens=100)
    assert conversation.started and conversation.latest_send is None
    assert _usage_measured(conversation.fit(_grown(messages, 1), max_tokens=100)) == []


@pytest.mark.parametrize("bad", [0, -1, True, "3"])
def test_store_rejects_a_bad_bound(bad: object) -> None:
    with pytest.raises(wg.ConfigurationError, match="max_conversations"):
        ConversationStore(_manager, max_conversations=bad)  # type: ignore[arg-type]


def test_store_rejects_a_bad_key() -> None:
    with pytest.raises(wg.ConfigurationError, match="conversation key"):
        ConversationStore(_manager).get("")


def test_afit_fits_as_fit_does_and_feeds_the_recorded_usage() -> None:
    messages = _chat("task")
    fitted = ConversationStore(_manager).get("k").fit(messages, max_tokens=100)
    conversation = ConversationStore(_manager).get("k")
    fit = asyncio.run(conversation.afit(messages, max_tokens=100))
    assert fit.messages == fitted.messages and fit.max_tokens == fitted.max_tokens
    conversation.record({"prompt_tokens": 30})
    messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    fit = asyncio.run(conversation.afit(messages, max_tokens=100))
    measured = [e for e in fit.events if isinstance(e, wg.UsageMeasured)]
    assert [e.total_tokens for e in measured] == [30]


def test_a_refused_afit_of_a_new_conversation_starts_it_over() -> None:
    conversation = ConversationStore(_manager).get("k")
    huge = _chat("task", {"role": "user", "content": "x " * 40_000})
    with pytest.raises(wg.ContextTruncatedError):
        asyncio.run(conversation.afit(huge, max_tokens=100))
    assert not conversation.started  # its next fit starts the run (new_run=True)
    assert conversation.latest_send is None
    asyncio.run(conversation.afit(_chat("task"), max_tokens=100))
    assert conversation.started


class _Refused(Exception):
    """A provider's 400 as the SDKs raise it (status and body), for classify_failure."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.status_code = 400
        self.body = {"message": message, "code": "context_length_exceeded"}


_EXACT = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted "
    "in 20 tokens. Please reduce the length of the messages."
)
_AT_LEAST = (
    "This model's maximum context length is 8192 tokens. However, you requested 1000 output "
    "tokens and your prompt contains at least 7500 input tokens, for a total of at least "
    "8500 tokens. Please reduce the length of the input prompt or the number of requested "
    "output tokens."
)


def _sent_once() -> Any:
    conversation = ConversationStore(
        lambda: wg.ContextWindowManager(model_info=wg.ModelInfo(context_window=16_384))
    ).get("k")
    conversation.fit(_chat("task"), max_tokens=100)
    return conversation


def _measured(conversation: Any) -> list[int]:
    fit = conversation.fit(_chat("task", {"role": "assistant", "content": "ok"}), max_tokens=100)
    return [e.total_tokens for e in fit.events if isinstance(e, wg.UsageMeasured)]


def test_an_overflow_refusal_teaches_the_window_and_the_exact_prompt_count() -> None:
    conversation = _sent_once()
    conversation.failed(_Refused(_EXACT))
    assert conversation.manager.context_window == 8_192
    assert _measured(conversation) == [20]


def test_an_at_least_prompt_count_is_never_taken_as_exact() -> None:
    conversation = _sent_once()
    conversation.failed(_Refused(_AT_LEAST))
    assert conversation.manager.context_window == 8_192
    assert _measured(conversation) == []


def test_a_refusal_of_an_older_send_teaches_only_the_window() -> None:
    conversation = _sent_once()
    older = conversation.latest_send
    assert older is not None
    conversation.fit(_chat("task"), max_tokens=100)
    conversation.record({"prompt_tokens": 30})
    conversation.failed(_Refused(_EXACT), send=older)
    assert conversation.manager.context_window == 8_192
    assert _measured(conversation) == [30]  # the latest send's usage, not the refusal's


def test_any_other_failure_only_clears_the_usage() -> None:
    conversation = _sent_once()
    conversation.record({"prompt_tokens": 30})
    conversation.failed(ConnectionError("reset by peer"))
    assert conversation.manager.context_window == 16_384
    assert _measured(conversation) == []


def test_only_the_latest_send_is_latest_and_numbers_never_repeat() -> None:
    store = ConversationStore(_manager, max_conversations=1)
    conversation = store.get("k")
    assert conversation.latest_send is None
    first = conversation.prepare(_chat("task"), max_tokens=100).send
    assert conversation.is_latest(first)
    second = conversation.prepare(_chat("task"), max_tokens=100).send
    assert conversation.latest_send == second
    assert not conversation.is_latest(first) and conversation.is_latest(second)
    store.get("other")  # "k" is forgotten ...
    again = store.get("k")  # ... and made anew: an old send's number never matches it
    assert again is not conversation
    assert not again.is_latest(second)
    assert again.prepare(_chat("task"), max_tokens=100).send not in (first, second)


# -- ManagerOptions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("manager", "gpt-4o"),
        ("model_info", {"context_window": 8_192}),
        ("safety", -1),
        ("safety", True),
        ("safety", 1.5),
        ("pruning", "oldest"),
        ("strict", "yes"),
        ("max_conversations", 0),
        ("max_conversations", True),
        ("ttl_seconds", 0),
        ("ttl_seconds", "60"),
    ],
)
def test_options_name_a_bad_option_its_value_and_the_caller(option: str, value: object) -> None:
    with pytest.raises(wg.ConfigurationError) as raised:
        ManagerOptions(caller="guard()", **{option: value})
    message = str(raised.value)
    assert message.startswith("guard(): ")
    assert f"{option} must be" in message
    assert repr(value) in message


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("model_info", wg.ModelInfo(context_window=8_192)),
        ("safety", 100),
        ("pruning", "minimal"),
        ("strict", True),
    ],
)
def test_an_option_given_with_manager_clashes(option: str, value: object) -> None:
    template = wg.ContextWindowManager("gpt-4o")
    expected = (
        f"pass {option} to the ContextWindowManager given as manager=, "
        "not to ContextWindowMiddleware() as well"
    )
    with pytest.raises(wg.ConfigurationError, match=re.escape(expected)):
        ManagerOptions(caller="ContextWindowMiddleware()", manager=template, **{option: value})


def test_every_clashing_option_is_named() -> None:
    with pytest.raises(wg.ConfigurationError, match="pass safety and strict to the"):
        ManagerOptions(caller="guard()", manager=wg.ContextWindowManager(), safety=100, strict=True)


def test_options_left_at_the_manager_defaults_do_not_clash() -> None:
    template = wg.ContextWindowManager("gpt-4o", safety=1_000, pruning="minimal", strict=True)
    options = ManagerOptions(
        caller="LiteLLMGuard()",
        manager=template,
        model_info=None,
        safety=DEFAULT_SAFETY_BUFFER,
        pruning="low_water",
        strict=False,
    )
    made = options.make("other-model")
    assert (made.safety, made.pruning, made.strict) == (1_000, "minimal", True)


def test_make_without_a_manager_builds_one_with_the_options() -> None:
    info = wg.ModelInfo(context_window=8_192)
    options = ManagerOptions(
        caller="guard()", model_info=info, safety=1_000, pruning="minimal", strict=True
    )
    first, second = options.make("gpt-4o"), options.make("gpt-4o")
    assert first is not second
    assert (first.safety, first.pruning, first.strict) == (1_000, "minimal", True)
    assert first.context_window == 8_192
    assert options.make("gpt-4o", wg.ModelInfo(context_window=4_096)).context_window == 4_096


def test_make_without_options_takes_the_manager_defaults() -> None:
    made = ManagerOptions(caller="guard()").make("gpt-4o")
    default = wg.ContextWindowManager("gpt-4o")
    assert (made.safety, made.pruning, made.strict) == (
        default.safety,
        default.pruning,
        default.strict,
    )
    assert made.context_window == wg.lookup_model("gpt-4o").context_window  # type: ignore[union-attr]
    assert ManagerOptions(caller="guard()").make("").model is None


def test_make_with_a_manager_copies_it_with_fresh_state() -> None:
    template = wg.ContextWindowManager(model_info=wg.ModelInfo(context_window=8_192), safety=700)
    template.fit(_chat("task"), max_tokens=100)
    options = ManagerOptions(caller="guard()", manager=template)
    made = options.make("gpt-4o", wg.ModelInfo(context_window=4_096))
    assert made is not template and options.make("gpt-4o") is not made
    assert made.context_window == 8_192  # the template's window, not model_info's
    assert made.safety == 700
    assert made.calibration is not template.calibration
    fit = made.fit(_chat("other task"), max_tokens=100)
    assert [m["content"] for m in fit.messages] == ["be brief", "other task"]


def test_store_takes_the_options_bounds() -> None:
    options = ManagerOptions(caller="guard()", max_conversations=2, ttl_seconds=None)
    store = options.store(lambda: options.make("gpt-4o"))
    assert (store.max_conversations, store.ttl_seconds) == (2, None)
    for key in "abc":
        store.get(key)
    assert len(store) == 2 and "a" not in store


def test_options_are_frozen_values() -> None:
    options = ManagerOptions(caller="guard()", safety=100)
    assert options == ManagerOptions(caller="guard()", safety=100)
    with pytest.raises(AttributeError):
        options.safety = 200  # type: ignore[misc]
    assert not hasattr(options, "__dict__")
    kwargs: dict[str, Any] = {"safety": 100}
    with pytest.raises(TypeError):
        ManagerOptions("guard()", **kwargs)  # type: ignore[misc]


def test_a_transcript_without_a_user_message_keeps_one_key_as_it_grows() -> None:
    first = [{"role": "system", "content": "be brief"}]
    grown = [*first, {"role": "assistant", "content": "hello"}]
    assert head_key(first) == head_key(grown) == head_key(grown + grown)
    assert head_key(first) != head_key([{"role": "system", "content": "be verbose"}])


def test_conversation_stores_keep_at_most_max_keys_least_recently_used_first() -> None:
    options = ManagerOptions(caller="test")
    made: list[str] = []

    def factory(model: str) -> ConversationStore:
        made.append(model)
        return options.store(lambda: options.make(model))

    stores: ConversationStores[str, ConversationStore] = ConversationStores(factory, max_keys=3)
    first = stores.get("m0")
    for n in range(1, 50):  # a client cycling model names
        stores.get(f"m{n}")
        assert stores.get("m0") is first  # used again: kept
        assert len(stores) <= 3
    assert "m1" not in stores and "m49" in stores
    assert made.count("m0") == 1
    stores.get("m1")  # forgotten: made again, fresh
    assert made.count("m1") == 2
    with pytest.raises(wg.ConfigurationError, match="max_keys"):
        ConversationStores(factory, max_keys=0)


def test_conversation_stores_give_threads_asking_at_once_the_same_entry() -> None:
    import threading

    stores: ConversationStores[str, object] = ConversationStores(lambda key: object())
    barrier = threading.Barrier(8)
    got: list[object] = []

    def ask() -> None:
        barrier.wait()
        got.append(stores.get("same"))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 8 and all(entry is got[0] for entry in got)


# -- edit stages in the options ----------------------------------------------------------


def test_options_carry_edit_stages_to_every_manager() -> None:
    clamp = wg.ClampToolResults(max_tokens=500)
    options = ManagerOptions(caller="guard()", edits=[clamp])
    assert options.edits == (clamp,)  # a list is kept as a tuple
    made = options.make("gpt-4o")
    assert made.edits == (clamp,)
    assert options.make("gpt-4o", edits=()).edits == ()  # a conversation's own wins
    # edits=None (the default) is wg.DEFAULT_EDITS; edits=() drops whole turns only
    assert ManagerOptions(caller="guard()").edits is None
    assert ManagerOptions(caller="guard()").make("gpt-4o").edits == wg.DEFAULT_EDITS
    assert ManagerOptions(caller="guard()", edits=()).make("gpt-4o").edits == ()


@pytest.mark.parametrize(
    ("bad", "wording"),
    [
        (["clear"], "guard(): edits must hold wg.ClampToolResults"),
        ([wg.ClearToolResults(), wg.ClearToolResults()], "guard(): edits holds two"),
        ("clear", "guard(): edits must be a list"),
    ],
)
def test_bad_edit_options_name_the_caller(bad: Any, wording: str) -> None:
    with pytest.raises(wg.ConfigurationError, match=re.escape(wording)):
        ManagerOptions(caller="guard()", edits=bad)


def test_edits_with_a_template_manager_clash_like_the_other_options() -> None:
    template = wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=8_192), edits=[wg.ClearToolResults()]
    )
    with pytest.raises(wg.ConfigurationError, match="pass edits to the ContextWindowManager"):
        ManagerOptions(
            caller="guard()", manager=template, edits=[wg.ClampToolResults(max_tokens=500)]
        )
    with pytest.raises(wg.ConfigurationError, match="pass edits to the ContextWindowManager"):
        ManagerOptions(caller="guard()", manager=template, edits=())  # drop only: says something
    options = ManagerOptions(caller="guard()", manager=template, edits=None)  # the default: fine
    assert options.make("gpt-4o").edits == template.edits


def _resent_equal_copies_fits(
    edits: tuple[wg.EditStage, ...] | None,
) -> list[tuple[list[Any], wg.Fit]]:
    """A caller that re-sends its transcript as new, equal dicts every time (the
    LangChain and pydantic-ai integrations convert their messages anew for each fit,
    the proxy parses each body anew), in a window that drops turns: with ``edits=()``
    on most sends, with the default edits whenever clearing old results (and clamping
    each new one) is not enough for the assistants' own text. Returns every send with
    its fit (all kept alive, so no message id is reused)."""
    import copy

    manager = wg.ContextWindowManager(model_info=wg.ModelInfo(context_window=4_096), edits=edits)
    transcript: list[Any] = _chat("read every file")
    sends = [(sent := copy.deepcopy(transcript), manager.fit(sent))]
    for n in range(12):
        transcript.append(
            {
                "role": "assistant",
                "content": f"reading {n}: " + "since the parser fails " * 20,
                "tool_calls": [
                    {
                        "id": f"c{n}",
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    }
                ],
            }
        )
        transcript.append({"role": "tool", "tool_call_id": f"c{n}", "content": "x " * 600})
        sent = copy.deepcopy(transcript)
        sends.append((sent, manager.fit(sent, last_usage=wg.NO_USAGE)))
    assert sum(fit.dropped_turns > 0 for _, fit in sends) >= 3
    return sends


def _stands_for(fit: wg.Fit, sent: list[Any]) -> list[tuple[Any, Any]]:
    """Each sent message with the caller's message of this send it stands for: the head
    (two messages here), then everything after the dropped turns."""
    kept = [0, 1, *range(2 + fit.dropped_messages, len(sent))]
    assert len(kept) == len(fit.messages)
    return [(message, sent[i]) for message, i in zip(fit.messages, kept, strict=True)]


def _edited_copy(message: Any, original: Any) -> bool:
    """A new dict with the caller's keys and only a tool result's content or a call's
    arguments replaced."""
    if type(message) is not type(original) or message is original:
        return False
    if message.keys() != original.keys():
        return False

    def rest(m: dict[str, Any]) -> dict[str, Any]:
        calls = [
            {**c, "function": {**c["function"], "arguments": ""}} for c in m.get("tool_calls", ())
        ]
        return {**m, "content": m["content"] if m["role"] != "tool" else "", "tool_calls": calls}

    return rest(message) == rest(original)


CLEARED = "[cleared to save context: read("
CLAMPED = "tokens of this output cut here"
EDITS_OR_DROP_ONLY = pytest.mark.parametrize(
    "edits", [None, ()], ids=["default-edits", "drop-only"]
)


@EDITS_OR_DROP_ONLY
def test_a_pruned_fit_sends_the_objects_of_this_send(
    edits: tuple[wg.EditStage, ...] | None,
) -> None:
    """A cut sends this send's own objects, never the equal ones of an earlier send, with
    the edited copies patched in at their places."""
    sends = _resent_equal_copies_fits(edits)
    copied = 0
    for n, (sent, fit) in enumerate(sends):  # the pruned sends and the others alike
        before = {id(m) for transcript, _ in sends[:n] for m in transcript}
        assert not any(id(m) in before for m in fit.messages)
        pairs = _stands_for(fit, sent)
        copies = [(m, original) for m, original in pairs if m is not original]
        assert all(_edited_copy(m, original) for m, original in copies)
        assert fit.messages[-2] is sent[-2]  # the newest assistant message is the caller's
        copied += len(copies)
    if edits == ():
        assert copied == 0  # drop-only: every message is the caller's object of this send
    else:  # old results cleared, each new one clamped: sent as copies
        assert copied > 0


@EDITS_OR_DROP_ONLY
def test_a_pruned_fit_of_equal_copies_still_sends_equal_messages(
    edits: tuple[wg.EditStage, ...] | None,
) -> None:
    texts: list[str] = []
    for sent, fit in _resent_equal_copies_fits(edits):  # the pruned sends and the others
        differing = [(m, original) for m, original in _stands_for(fit, sent) if m != original]
        # only tool results differ: cleared to a placeholder or clamped with a marker
        assert all(original["role"] == "tool" for _, original in differing)
        texts += [m["content"] for m, _ in differing]
    if edits == ():
        assert texts == []  # equal values: the guard and proxy are safe
    else:
        assert all(t.startswith(CLEARED) or CLAMPED in t for t in texts)
        assert any(t.startswith(CLEARED) for t in texts)
        assert any(CLAMPED in t for t in texts)
