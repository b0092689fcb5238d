"""An overflow refusal teaches the manager about the request it refused, and only that
one: a refusal without numbers for an older send (a concurrent branch's) was blamed on
the manager's latest fit, whose size then set the window, permanently (review of the
accounting, item 2: a 128k window became 1,019 tokens).
"""

from __future__ import annotations

import contextlib

import windowguard as wg
from windowguard.run._conversations import ConversationStore

WINDOW = 128_000


class _Refused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.status_code = 400
        self.body = {"message": message, "code": "context_length_exceeded"}


def _chat(*extra: dict[str, object]) -> list[dict[str, object]]:
    return [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}, *extra]


def _two_branches() -> tuple[object, list[dict[str, object]], int, int]:
    conversation = ConversationStore(
        lambda: wg.ContextWindowManager(model_info=wg.ModelInfo(context_window=WINDOW), edits=())
    ).get("k")
    big = _chat({"role": "assistant", "content": "x " * 60_000}, {"role": "user", "content": "go"})
    small = _chat({"role": "assistant", "content": "short"}, {"role": "user", "content": "go"})
    a = conversation.prepare(big, max_tokens=1_000)  # branch A
    b = conversation.prepare(small, max_tokens=1_000)  # branch B: now the latest fit
    conversation.record({"prompt_tokens": 20}, send=b.send)
    return conversation, small, a.send, b.send


def test_a_refusal_without_numbers_of_an_older_send_leaves_the_window_alone() -> None:
    conversation, small, older, _ = _two_branches()
    conversation.failed(_Refused("Input is too long for this model."), send=older)
    more = small + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    fit = conversation.prepare(more, max_tokens=1_000).fit
    assert conversation.manager.context_window == WINDOW
    assert fit.max_tokens == 1_000
    assert fit.dropped_turns == 0


def test_a_refusal_without_numbers_of_the_latest_send_still_sends_less() -> None:
    conversation, small, _, latest = _two_branches()
    conversation.failed(_Refused("Input is too long for this model."), send=latest)
    more = small + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    with contextlib.suppress(wg.ContextTruncatedError):  # B did not fit: nor does more
        conversation.prepare(more, max_tokens=1_000)
    assert conversation.manager.context_window < 2_000  # just below B and its reply


def test_an_unattributed_refusal_teaches_only_the_stated_window() -> None:
    manager = wg.ContextWindowManager(model_info=wg.ModelInfo(context_window=WINDOW), edits=())
    manager.fit(_chat(), max_tokens=1_000)
    manager.observe_overflow(attributed=False)
    assert manager.context_window == WINDOW
    fit = manager.fit(
        _chat({"role": "assistant", "content": "ok"}), last_usage=30, max_tokens=1_000
    )
    assert fit.max_tokens == 1_000
    assert [e.total_tokens for e in fit.events if isinstance(e, wg.UsageMeasured)] == [30]
    manager.observe_overflow(40, 64_000, attributed=False)
    assert manager.context_window == 64_000
    fit = manager.fit(
        _chat({"role": "assistant", "content": "ok"}), last_usage=31, max_tokens=1_000
    )
    # the stated count was another request's: only the usage measured this one
    assert [e.total_tokens for e in fit.events if isinstance(e, wg.UsageMeasured)] == [31]
