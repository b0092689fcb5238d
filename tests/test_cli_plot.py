"""``windowguard plot``: one line per conversation of a proxy's events, and event files
that are one JSON document (an array, a single event) read as what they are. Run
through the real proxy in front of the emulator, and the real command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from windowguard.cli import main
from windowguard.emulator import Emulator, EmulatorRequest, Reply, ToolCall
from windowguard.proxy import ProxyConfig, ProxyServer

pytest.importorskip("matplotlib")

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _reads(request: EmulatorRequest) -> Reply:
    n = request.call_number
    return Reply(text=f"Reading {n}.", tool_calls=(ToolCall(name="read_file", arguments={}),))


def _proxy_events(path: Path, calls: dict[str, int]) -> None:
    """Conversations through one proxy, interleaved: ``calls`` maps each task to how
    many calls it makes; the proxy writes its events to ``path``."""
    with (
        Emulator(flavor="vllm", context_window=8192, scenario=_reads) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0, events=str(path))) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
    ):
        transcripts = {task: [{"role": "user", "content": task}] for task in calls}
        for step in range(max(calls.values())):
            for task, messages in transcripts.items():
                if step >= calls[task]:
                    continue
                reply = client.chat.completions.create(
                    model="emulated-model", messages=messages, tools=TOOLS
                )
                message = reply.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls or []:
                    result = "line\n" * (40 if task.startswith("long") else 5)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def test_a_proxys_conversations_are_one_line_each(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    events = tmp_path / "proxy.jsonl"
    _proxy_events(events, {"long task: read every file": 4, "short task: read one": 2})
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    pressures = [e for e in lines if e["event"] == "context_pressure"]
    assert len(pressures) == 6
    keys = list(dict.fromkeys(e["conversation"] for e in pressures))
    assert len(keys) == 2  # every reading says which conversation it measured
    chart = tmp_path / "chart.png"
    code, out, err = _run(capsys, "plot", str(events), "-o", str(chart))
    assert code == 0, err
    assert chart.read_bytes()[:4] == b"\x89PNG"
    said = out.splitlines()
    # steps are counted per conversation, never across them
    assert said[0].startswith(f"proxy {keys[0][:8]}: 4 steps, ")
    assert said[1].startswith(f"proxy {keys[1][:8]}: 2 steps, ")
    assert said[2] == f"chart: {chart}"
    # one of them, by a prefix of its key
    code, out, err = _run(
        capsys, "plot", str(events), "-o", str(chart), "--conversation", keys[1][:6]
    )
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"proxy {keys[1][:8]}: 2 steps, ")
    assert len(out.splitlines()) == 2
    code, out, err = _run(capsys, "plot", str(events), "-o", str(chart), "--conversation", "zz")
    assert code == 2 and not out and len(err.strip().splitlines()) == 1
    assert "--conversation zz: no conversation's key starts with 'zz'" in err
    assert keys[0][:8] in err and keys[1][:8] in err


def test_a_run_without_conversations_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    events = tmp_path / "run.jsonl"
    lines = [
        {"event": "context_pressure", "tokens": 100, "window": 1000, "pressure": 0.1},
        {"event": "context_pressure", "tokens": 300, "window": 1000, "pressure": 0.3},
    ]
    events.write_text("".join(json.dumps(e) + "\n" for e in lines))
    chart = tmp_path / "chart.png"
    code, out, _ = _run(capsys, "plot", str(events), "-o", str(chart))
    assert code == 0 and out.splitlines()[0].startswith("run: 2 steps, peak pressure 30%")
    code, _, err = _run(capsys, "plot", str(events), "-o", str(chart), "--conversation", "ab")
    assert code == 2 and "none (no event names one)" in err


_EVENTS = [
    {"event": "context_pressure", "tokens": 100, "window": 1000, "pressure": 0.1},
    {"event": "transcript_pruned", "dropped_turns": 1, "new_cut": True},
    {"event": "context_pressure", "tokens": 500, "window": 1000, "pressure": 0.5},
]


@pytest.mark.parametrize(
    ("document", "steps"),
    [
        (_EVENTS, 2),  # a JSON array, pretty-printed
        ({"events": _EVENTS}, 2),  # an object holding the array
        (_EVENTS[0], 1),  # one event
    ],
    ids=["array", "object with events", "single event"],
)
def test_one_json_document_of_events_is_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, document: Any, steps: int
) -> None:
    events = tmp_path / "run.json"
    events.write_text(json.dumps(document, indent=2))
    chart = tmp_path / "chart.png"
    code, out, err = _run(capsys, "plot", str(events), "-o", str(chart))
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"run: {steps} steps, ")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"model": "gpt-4o", "messages": []}', "a JSON object that is not an event"),
        ("[1, 2]", "item 0 of the JSON array is not an event"),
        ("42", "a JSON number, not events"),
        ('{"event": "context_pressure"}\n{oops\n', "run.json:2: not JSON"),
    ],
    ids=["a transcript", "an array of numbers", "a number", "broken JSON Lines"],
)
def test_what_is_not_events_is_named_with_what_was_expected(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, needle: str
) -> None:
    events = tmp_path / "run.json"
    events.write_text(text)
    code, out, err = _run(capsys, "plot", str(events), "-o", str(tmp_path / "c.png"))
    assert code == 2 and not out and len(err.strip().splitlines()) == 1
    assert needle in err
    if "item 0" not in needle:
        assert "expected JSON Lines of events" in err and "or one JSON array" in err


def test_a_guarded_clients_conversations_are_told_apart_in_its_event_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import windowguard as wg

    events = tmp_path / "guarded.jsonl"
    with (
        wg.JsonlSink(events) as sink,
        Emulator(flavor="openai", context_window=8192, scenario=_reads) as emu,
        openai.OpenAI(base_url=emu.base_url, api_key="k", max_retries=0) as raw,
    ):
        client = wg.guard(
            raw, model_info=wg.ModelInfo(context_window=8192), sinks=[sink], discover=False
        )
        for task, calls in (("first task", 3), ("second task", 1)):
            messages: list[Any] = [{"role": "user", "content": task}]
            for _ in range(calls):
                reply = client.chat.completions.create(
                    model="emulated-model", messages=messages, tools=TOOLS, max_tokens=64
                )
                message = reply.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls or []:
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": "ok"})
        sink(wg.ContextPressure(tokens=1, window=2, pressure=0.5))  # outside any conversation
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert "conversation" not in lines[-1]  # only a conversation's events carry one
    keys = list(dict.fromkeys(e["conversation"] for e in lines[:-1]))
    assert len(keys) == 2
    chart = tmp_path / "chart.png"
    code, out, err = _run(capsys, "plot", str(events), "-o", str(chart))
    assert code == 0, err
    said = out.splitlines()
    assert said[0].startswith(f"guarded {keys[0][:8]}: 3 steps, ")
    assert said[1].startswith(f"guarded {keys[1][:8]}: 1 steps, ")
