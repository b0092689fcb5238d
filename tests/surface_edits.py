"""Test helper: one edit scenario for every surface (guard, integrations, proxy).

A tool loop in an 8k window whose tool results are ~700 tokens each, except one of
~25k tokens (three times the window). With :data:`EDITS` the surface must

- clamp the huge result (the run goes on; the emulator never answers 400; the request it
  received holds the clamped text with its marker), and
- clear old results before any turn is dropped (the requests the emulator received hold
  placeholders for old results while every assistant message is still there),

and never change the caller's own transcript. :class:`Received` is the emulator policy
that plays the model and keeps every request it answered (the emulator's OpenAI Chat
view of it: Anthropic and Responses requests are converted), and the checks read them.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import windowguard as wg
from windowguard.emulator import EmulatorRequest, Reply, ToolCall

WINDOW = 8192
REPLY_TOKENS = 256
STEPS = 12
HUGE_AT = 2
"""The step whose tool result is larger than the window."""
TOOL = "read_file"
MARKER = "tokens of this output cut here"
PLACEHOLDER = "[cleared to save context: read_file("

EDITS = (
    wg.ClampToolResults(max_tokens=1_500),
    wg.ClearToolResults(keep=2, clear_at_least=500),
)


def result_text(step: int, *, huge: bool = True) -> str:
    """The tool's output at ``step``: ~700 tokens, or ~25k at :data:`HUGE_AT` (unless
    ``huge=False``)."""
    lines = 2_500 if step == HUGE_AT and huge else 70
    return "\n".join(f"{step:03d}-{j:04d} value_{j} = compute({j}, {step})" for j in range(lines))


def step_of(arguments: Mapping[str, Any]) -> int:
    """The step a call's arguments name (``{"path": "src/m<step>.py"}``)."""
    path = str(arguments.get("path", ""))
    return int(path.removeprefix("src/m").removesuffix(".py"))


def text_of(content: object) -> str:
    """A chat message's text (a string, or text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            str(p.get("text") or "") if isinstance(p, Mapping) else str(p) for p in content
        )
    return "" if content is None else str(content)


class Received:
    """The model: calls ``read_file`` on ``src/m<n>.py`` for call n = 0, 1, ... up to
    ``steps``, then answers. Keeps the OpenAI Chat view of every request it answered."""

    def __init__(self, steps: int = STEPS) -> None:
        self.steps = steps
        self.requests: list[list[Mapping[str, Any]]] = []
        self._lock = threading.Lock()

    def __call__(self, request: EmulatorRequest) -> Reply:
        with self._lock:
            self.requests.append([dict(m) for m in request.messages])
            n = len(self.requests) - 1
        if n >= self.steps:
            return Reply(text="All files read.")
        return Reply(
            text=f"Step {n}: reading the next file.",
            tool_calls=(ToolCall(name=TOOL, arguments={"path": f"src/m{n}.py"}),),
        )


def tool_texts(request: Sequence[Mapping[str, Any]]) -> list[str]:
    return [text_of(m.get("content")) for m in request if m.get("role") == "tool"]


def assistants(request: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for m in request if m.get("role") == "assistant")


def check_clamped_and_cleared(
    received: Received, statuses: Sequence[int], *, steps: int = STEPS
) -> None:
    """The scenario's server-side checks: every call answered 200, the huge result sent
    clamped with its marker, old results cleared to placeholders with every assistant
    message still sent (nothing was dropped)."""
    assert list(statuses) == [200] * (steps + 1), statuses
    requests = received.requests
    assert len(requests) == steps + 1
    huge = result_text(HUGE_AT)
    clamped = [
        t
        for request in requests
        for t in tool_texts(request)
        if MARKER in t and t.startswith(huge[:40])
    ]
    assert clamped, "the oversized result never reached the model clamped"
    assert all(len(t) < len(huge) // 4 for t in clamped)
    # Nothing was dropped: request i holds the i assistant messages before it.
    assert [assistants(r) for r in requests] == list(range(steps + 1))
    cleared = [r for r in requests if any(t.startswith(PLACEHOLDER) for t in tool_texts(r))]
    assert cleared, "no old result was cleared"
    last = requests[-1]
    results = tool_texts(last)
    assert len(results) == steps  # every call is still answered
    assert results[-1] == result_text(steps - 1)  # the newest turn is whole
    assert sum(t.startswith(PLACEHOLDER) for t in results) >= steps // 2
    assert huge not in "".join(results)


def only_drops(received: Received) -> bool:
    """Whether no request held a clamp marker or a placeholder."""
    return not any(
        MARKER in t or t.startswith(PLACEHOLDER) for r in received.requests for t in tool_texts(r)
    )
