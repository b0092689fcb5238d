"""Edits survive a rebuilt view: a caller that sends fresh copies of its messages.

A proxy parses each request's JSON, and clients copy their history or move Anthropic's
``cache_control`` marker to the newest block; a system prompt that changes each send
then makes the manager rebuild its view of the transcript on every send. What the edit
stages did must not be lost there:

* an edited message sent again as an equal copy is sent edited, byte for byte as
  before (only the caller's ``cache_control`` markers follow the caller), so the
  prompt's prefix stays cached and no clear is made or receipted twice, and the summary
  is sent again without asking the summarizer twice;
* a message that really changed is never sent as the old edit;
* the previous send's cut is kept, so a drop's receipt names only what this send newly
  drops (also with ``edits=()``);
* a re-fit (a message before the previous cut was replaced) keeps this send's receipts.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
import random
from typing import Any

import pytest

import windowguard as wg

WINDOW = 16_384


def _output(lines: int, seed: int) -> str:
    rng = random.Random(seed)
    return "\n".join(f"{i:05d} value_{rng.randrange(10**6)} = compute({i})" for i in range(lines))


def _chat_turn(n: int, text: str) -> list[dict[str, Any]]:
    call = {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": f"src/m{n}.py"})},
    }
    return [
        {"role": "assistant", "content": f"Step {n}", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{n}", "content": text},
    ]


def _anthropic_turn(n: int, texts: list[str]) -> list[dict[str, Any]]:
    uses = [
        {"type": "tool_use", "id": f"tu_{n}_{k}", "name": "read_file", "input": {"path": f"f{k}"}}
        for k in range(len(texts))
    ]
    results = [
        {"type": "tool_result", "tool_use_id": f"tu_{n}_{k}", "content": text}
        for k, text in enumerate(texts)
    ]
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"step {n}"}, *uses]},
        {"role": "user", "content": results},
    ]


def _manager(**options: Any) -> wg.ContextWindowManager:
    return wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=WINDOW, max_output_tokens=1024),
        counter="heuristic",
        **options,
    )


def _unmarked(message: Any) -> str:
    """A message as JSON, without its blocks' cache_control markers."""
    message = copy.deepcopy(message)
    if isinstance(message.get("content"), list):
        for block in message["content"]:
            block.pop("cache_control", None)
    return json.dumps(message, sort_keys=True)


def _markers(messages: list[Any]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, message in enumerate(messages)
        if isinstance(message.get("content"), list)
        for j, block in enumerate(message["content"])
        if "cache_control" in block
    ]


def _receipts(fit: wg.Fit) -> list[tuple[str, tuple[int, ...], int]]:
    return [(r.kind, r.messages, r.tokens_freed) for r in fit.edits]


def _anthropic_run(marker: bool, sends: int = 40) -> list[tuple[wg.Fit, list[Any]]]:
    """A run whose caller sends a deep copy of its history each time, with (or without)
    a cache_control marker on its newest block (moved there each send)."""
    manager = _manager()
    history: list[Any] = [{"role": "user", "content": "task"}]
    fits: list[tuple[wg.Fit, list[Any]]] = []
    usage: object = None
    for n in range(sends):
        history += _anthropic_turn(n, [_output(40 + (n * 7) % 50, seed=n)])
        send = copy.deepcopy(history)
        if marker:
            send[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        fit = manager.fit(send, last_usage=usage, format="anthropic")
        usage = wg.NO_USAGE
        fits.append((fit, send))
    return fits


def test_a_moving_cache_control_marker_keeps_every_edit_as_it_was_sent() -> None:
    plain = _anthropic_run(marker=False)
    marked = _anthropic_run(marker=True)
    assert any(r.kind == "clear" for fit, _ in plain for r in fit.edits)  # edits were made
    extended = 0
    for (expected, _), (fit, send) in zip(plain, marked):
        # The same request as a caller sending equal copies without a marker: every
        # edit carried over (byte for byte apart from the marker), none made twice.
        assert [_unmarked(m) for m in fit.messages] == [_unmarked(m) for m in expected.messages]
        assert _receipts(fit) == _receipts(expected)
        # The only marker sent is the caller's own, where the caller put it now.
        assert _markers(fit.messages) == [(len(fit.messages) - 1, 0)]
        assert fit.messages[-1] is send[-1]
    for (before, _), (after, _) in itertools.pairwise(marked):
        sent = [_unmarked(m) for m in before.messages]
        extends = [_unmarked(m) for m in after.messages[: len(sent)]] == sent
        extended += extends
        # only a send that edits or drops may rewrite what the previous one sent
        assert extends or after.edits or after.dropped_turns != before.dropped_turns
    assert extended >= 40 // 2


def test_a_marker_on_an_edited_message_follows_the_caller() -> None:
    manager = _manager(edits=[wg.ClampToolResults(max_tokens=200)])
    history: list[Any] = [{"role": "user", "content": "task"}]
    history += _anthropic_turn(0, [_output(200, seed=1), "short"])
    send = copy.deepcopy(history)
    send[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    first = manager.fit(send, format="anthropic")
    assert [r.kind for r in first.edits] == ["clamp"]
    clamped = first.messages[-1]
    assert clamped["content"][0]["cache_control"] == {"type": "ephemeral"}
    history += _anthropic_turn(1, ["ok"])
    send = copy.deepcopy(history)
    send[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    second = manager.fit(send, format="anthropic", last_usage=wg.NO_USAGE)
    assert second.edits == ()  # nothing clamped again
    carried = second.messages[2]
    assert "cache_control" not in carried["content"][0]  # the caller moved it on
    assert carried["content"][0]["content"] == clamped["content"][0]["content"]
    assert carried["content"][1] is send[2]["content"][1]  # untouched: the caller's own
    assert _markers(second.messages) == [(4, 0)]


def _chat_run(fresh: bool, sends: int = 40, **options: Any) -> list[tuple[wg.Fit, list[Any]]]:
    """A run whose system prompt changes each send (the date, a memory), sending its
    own list or a deep copy of it."""
    manager = _manager(**options)
    history: list[Any] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    fits: list[tuple[wg.Fit, list[Any]]] = []
    usage: object = None
    for n in range(sends):
        history += _chat_turn(n, _output(40 + (n * 7) % 50, seed=n))
        history[0] = {"role": "system", "content": f"sys; day {n}"}
        send = copy.deepcopy(history) if fresh else history
        fit = manager.fit(send, last_usage=usage)
        usage = wg.NO_USAGE
        fits.append((fit, send))
    return fits


def test_fresh_copies_and_a_changing_system_prompt_keep_every_edit() -> None:
    own = _chat_run(fresh=False)
    copied = _chat_run(fresh=True)
    clears = [r for fit, _ in copied for r in fit.edits if r.kind == "clear"]
    assert clears and len({r.messages for r in clears}) == len(clears)  # each made once
    for (expected, _), (fit, _) in zip(own, copied):
        assert fit.messages[1:] == expected.messages[1:]
        assert _receipts(fit) == _receipts(expected)


def test_a_message_that_changed_is_not_sent_as_its_old_edit() -> None:
    manager = _manager()
    history: list[Any] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    usage: object = None
    for n in range(20):
        history += _chat_turn(n, _output(60, seed=n))
        fit = manager.fit(copy.deepcopy(history), last_usage=usage)
        usage = wg.NO_USAGE
    assert fit.dropped_turns == 0
    cleared = [
        i
        for i, m in enumerate(fit.messages)
        if m["role"] == "tool" and m["content"].startswith("[cleared")
    ]
    assert len(cleared) >= 2
    index = cleared[0]
    send = copy.deepcopy(history)
    send[0] = {"role": "system", "content": "sys; a new day"}  # the view is rebuilt
    send[index] = {**send[index], "content": "a short new result"}
    send += _chat_turn(99, "done")
    after = manager.fit(send, last_usage=wg.NO_USAGE)
    assert after.dropped_turns == 0
    assert after.messages[index] is send[index]  # the caller's, as it is now
    # An equal copy of a message edited before is still sent as that edit.
    neighbour = next(i for i in cleared if i != index)
    assert after.messages[neighbour] == fit.messages[neighbour] != send[neighbour]


def test_drop_receipts_name_only_what_a_send_newly_drops_after_a_rebuild() -> None:
    for fresh in (False, True):
        receipts: list[tuple[int, ...]] = []
        previous_kept: set[int] = set()
        for fit, send in _chat_run(fresh=fresh, sends=40, edits=()):
            drops = [r.messages for r in fit.edits if r.kind == "drop"]
            for messages in drops:
                # Every message a drop names was sent by the previous send.
                assert set(messages) <= previous_kept, (messages, sorted(previous_kept))
            receipts += drops
            kept = {id(m) for m in fit.messages}
            previous_kept = {i for i, m in enumerate(send) if id(m) in kept}
        assert receipts  # the run did drop turns


def test_the_summary_is_sent_again_over_fresh_copies(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def summarizer(turns: list[Any], previous: str | None) -> str:
        calls.append(len(turns))
        return "the summary so far"

    def run(fresh: bool) -> list[wg.Fit]:
        calls.clear()
        manager = _manager(edits=[wg.Summarize(summarizer, keep_turns=2)])
        history: list[Any] = [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
        ]
        fits: list[wg.Fit] = []
        usage: object = None
        for n in range(16):
            history += _chat_turn(n, _output(40, seed=n))
            history[0] = {"role": "system", "content": f"sys; day {n}"}
            fits.append(manager.fit(copy.deepcopy(history) if fresh else history, last_usage=usage))
            usage = wg.NO_USAGE
        return fits

    own = run(fresh=False)
    own_calls = list(calls)
    with caplog.at_level(logging.WARNING, logger="windowguard"):
        copied = run(fresh=True)
    assert own_calls and calls == own_calls  # never asked again for the same turns
    assert not [r for r in caplog.records if "summarized turns changed" in r.getMessage()]
    for expected, fit in zip(own, copied):
        assert fit.messages[1:] == expected.messages[1:]
        assert _receipts(fit) == _receipts(expected)


def test_a_summary_never_stands_for_a_folded_message_the_caller_changed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Fresh copies of a changed transcript (its system prompt rewritten, so the view is
    rebuilt) in which the caller corrected a result the summary folded: the summary, made
    without the correction, is no longer sent; what is sent has the correction, in a
    message or in a summary the summarizer made from it."""
    given: list[str] = []

    def summarizer(turns: list[Any], previous: str | None) -> str:
        given.append(json.dumps(turns, default=str))
        return "SUMMARY" if previous is None else previous + " SUMMARY"

    manager = _manager(edits=[wg.Summarize(summarizer, keep_turns=2)])
    history: list[Any] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    fit = None
    for n in range(16):
        history += _chat_turn(n, _output(40, seed=n))
        fit = manager.fit(copy.deepcopy(history), last_usage=wg.NO_USAGE)
        if any(e.kind == "summarize" for e in fit.edits):
            break
    assert fit is not None and any(e.kind == "summarize" for e in fit.edits), "never folded"
    folded = len(given)
    changed = copy.deepcopy(history)
    changed[0] = {"role": "system", "content": "sys, revised"}
    changed[3] = {**changed[3], "content": "CORRECTED"}  # a result the summary folded
    with caplog.at_level(logging.WARNING, logger="windowguard"):
        fit = manager.fit(changed, last_usage=wg.NO_USAGE)
    assert [r for r in caplog.records if "summarized turns changed" in r.getMessage()]
    sent = [str(m.get("content")) for m in fit.messages]
    summarized = any("SUMMARY" in text for text in sent)
    assert "CORRECTED" in sent or (summarized and "CORRECTED" in "".join(given[folded:]))


def test_a_refit_keeps_the_receipts_of_its_first_pass() -> None:
    manager = wg.ContextWindowManager(
        model_info=wg.ModelInfo(context_window=WINDOW, max_output_tokens=8000),
        counter="heuristic",
        pruning="minimal",
        edits=[wg.ClampToolResults(max_tokens=2000)],
    )
    history: list[Any] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for n in range(30):
        history += _chat_turn(n, _output(20, seed=n))
    first = manager.fit(history, max_tokens=4000)
    (drop,) = [r for r in first.edits if r.kind == "drop"]
    history = list(history)
    # A message the previous send dropped is replaced, and this send keeps it (it asks
    # for a smaller reply): the manager fits again from a rebuilt view.
    history[27] = {"role": "tool", "tool_call_id": "call_12", "content": "short"}
    history += _chat_turn(99, _output(150, seed=5))
    second = manager.fit(history, max_tokens=200, last_usage=wg.NO_USAGE)
    assert second.dropped_turns < first.dropped_turns
    assert any(m is history[27] for m in second.messages)
    assert [(r.kind, r.messages) for r in second.edits] == [("clamp", (len(history) - 1,))]
    assert [e.to_dict()["edit"] for e in second.events if e.kind == "context_edited"] == ["clamp"]
    assert drop.messages[-1] >= 27
