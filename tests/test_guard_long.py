"""A 300-call conversation in a 16k window, through wg.guard and without it.

The caller does what most hand-written loops do: keeps its whole transcript and re-sends
it on every call, appending the assistant's reply, a large tool result and, every fifth
call, a user message. Against a vLLM-flavoured emulator (window discovered from
``/v1/models``, exact counts from ``/tokenize``) the guarded client never overflows and
the first user task is in every request; the unguarded one meets the server's 400 once
the transcript outgrows the window. The measured numbers are printed (``pytest -s``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

import windowguard as wg
from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.core.events import Event
from windowguard.emulator import Emulator, EmulatorRequest, Reply, ToolCall
from windowguard.guard import guard

MODEL = "emulated-model"
WINDOW = 16_384
MAX_TOKENS = 512
CALLS = 300
TASK = "TASK-7f3: find the bug in the parser and fix it."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the project.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    wg.clear_counter_cache()
    yield
    clear_discovery_cache()
    wg.clear_counter_cache()


def file_text(n: int) -> str:
    """A tool result of 400 to 1,600 tokens, different on every call."""
    lines = 20 + (n * 37) % 60
    return "\n".join(f"def f{n}_{j}(x):\n    return x * {j}  # line {j}" for j in range(lines))


def policy(task_present: list[bool]) -> Callable[[EmulatorRequest], Reply]:
    def answer(request: EmulatorRequest) -> Reply:
        task_present.append(any(TASK in str(m.get("content") or "") for m in request.messages))
        n = request.call_number
        return Reply(
            text=f"Reading module {n}.",
            tool_calls=(ToolCall(name="read_file", arguments={"path": f"src/m{n}.py"}),),
        )

    return answer


def run(client: Any, calls: int) -> BaseException | None:
    """The caller's own loop: re-send the whole transcript; stop at the first error."""
    transcript: list[Any] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": TASK},
    ]
    for n in range(calls):
        try:
            response = client.chat.completions.create(
                model=MODEL, messages=transcript, tools=TOOLS, max_tokens=MAX_TOKENS
            )
        except openai.APIError as exc:
            return exc
        message = response.choices[0].message
        transcript.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or []:
            transcript.append({"role": "tool", "tool_call_id": call.id, "content": file_text(n)})
        if n % 5 == 4:
            transcript.append({"role": "user", "content": f"Keep going; note {n} is done."})
    return None


def test_300_calls_in_a_16k_window_never_overflow_with_the_guard() -> None:
    task_present: list[bool] = []
    events: list[Event] = []
    with Emulator(flavor="vllm", context_window=WINDOW, scenario=policy(task_present)) as emu:
        raw = openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0)
        try:
            error = run(guard(raw, sinks=[events.append]), CALLS)
        finally:
            raw.close()
        records = emu.records

    overflows = sum(r.status == 400 for r in records)
    prompts = [r.prompt_tokens or 0 for r in records]
    tail = prompts[len(prompts) // 3 :]
    usable = WINDOW - MAX_TOKENS
    pruned = [e for e in events if isinstance(e, wg.TranscriptPruned)]
    utilisation = statistics.mean(p / usable for p in tail)
    print(
        f"\nguarded: {len(records)} calls, {overflows} overflows, "
        f"mean prompt / (window - max_tokens) over the last two-thirds = {utilisation:.3f}, "
        f"mean prompt / window = {statistics.mean(p / WINDOW for p in tail):.3f}, "
        f"max prompt = {max(prompts)}, turns dropped at the end = {pruned[-1].dropped_turns}, "
        f"cuts moved = {sum(e.new_cut for e in pruned)}"
    )
    assert error is None
    assert overflows == 0
    assert len(records) == CALLS and all(r.status == 200 for r in records)
    assert all(task_present)
    assert max(prompts) + MAX_TOKENS <= WINDOW
    assert pruned[-1].dropped_turns > 0
    # The guard keeps the window in use rather than pruning it to nothing.
    assert utilisation > 0.5


def test_300_calls_in_a_16k_window_overflow_without_the_guard() -> None:
    task_present: list[bool] = []
    with Emulator(flavor="vllm", context_window=WINDOW, scenario=policy(task_present)) as emu:
        raw = openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0)
        try:
            error = run(raw, CALLS)
        finally:
            raw.close()
        records = emu.records
    print(f"\nunguarded: overflowed at call {len(records)} of {CALLS}")
    assert isinstance(error, openai.BadRequestError)
    assert wg.classify_failure(error).kind is wg.FailureKind.CONTEXT_OVERFLOW
    assert records[-1].status == 400
    assert sum(r.status == 400 for r in records) == 1
