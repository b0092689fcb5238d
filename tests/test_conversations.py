"""The per-conversation store behind wg.guard, the integrations and the proxy."""

from __future__ import annotations

import pytest

import windowguard as wg
from windowguard._conversations import ConversationStore, head_key


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
    monkeypatch.setattr("windowguard._conversations.time.monotonic", lambda: clock[0])
    store = ConversationStore(_manager, ttl_seconds=10)
    first = store.get("a")
    clock[0] += 11
    store.get("b")
    assert "a" not in store
    assert store.get("a") is not first


def test_usage_is_handed_on_once_and_a_failed_send_is_followed_by_no_usage() -> None:
    conversation = ConversationStore(_manager).get("k")
    assert conversation.begin() is None  # first send: a new run
    conversation.record({"prompt_tokens": 40})
    assert conversation.begin() == {"prompt_tokens": 40}
    assert conversation.begin() is wg.NO_USAGE  # nothing recorded since
    conversation.record(None)
    assert conversation.begin() is wg.NO_USAGE


def test_fit_passes_the_recorded_usage_to_the_manager() -> None:
    conversation = ConversationStore(_manager).get("k")
    messages = _chat("task")
    conversation.fit(messages, max_tokens=100)
    conversation.record({"prompt_tokens": 30})
    messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    fit = conversation.fit(messages, max_tokens=100)
    measured = [e for e in fit.events if isinstance(e, wg.UsageMeasured)]
    assert [e.total_tokens for e in measured] == [30]


def test_a_refused_fit_leaves_a_started_conversation_without_stale_usage() -> None:
    conversation = ConversationStore(_manager).get("k")
    conversation.fit(_chat("task"), max_tokens=100)
    conversation.record({"prompt_tokens": 30})
    huge = _chat("task", {"role": "user", "content": "x " * 40_000})
    with pytest.raises(wg.ContextTruncatedError):
        conversation.fit(huge, max_tokens=100)
    assert conversation.begin() is wg.NO_USAGE


@pytest.mark.parametrize("bad", [0, -1, True, "3"])
def test_store_rejects_a_bad_bound(bad: object) -> None:
    with pytest.raises(wg.ConfigurationError, match="max_conversations"):
        ConversationStore(_manager, max_conversations=bad)  # type: ignore[arg-type]


def test_store_rejects_a_bad_key() -> None:
    with pytest.raises(wg.ConfigurationError, match="conversation key"):
        ConversationStore(_manager).get("")
