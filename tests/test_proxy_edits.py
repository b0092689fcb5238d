"""``windowguard proxy`` edit flags (issue 19), with an unmodified openai client.

Without a flag the proxy runs the default edits (``wg.DEFAULT_EDITS``);
``--clamp-tool-results`` / ``--clear-tool-results`` / ``--clear-at-least`` (and
``ProxyConfig``'s fields of the same names) choose how it clamps and clears tool results
before it drops whole turns, ``--no-edits`` makes it drop whole turns only, and
``--spill-dir`` keeps clamped outputs whole in a private directory. The client is the real openai SDK pointed at the proxy (``ProxyServer``,
uvicorn on a thread), in front of an emulator the test starts (tests/surface_edits.py).
"""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

import windowguard as wg
from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.emulator import Emulator
from windowguard.proxy import ProxyConfig, ProxyServer
from windowguard.run.providers.base import ToolCall
from windowguard.run.tools import execute_tool

from .surface_edits import (
    HUGE_AT,
    REPLY_TOKENS,
    STEPS,
    WINDOW,
    Received,
    check_clamped_and_cleared,
    only_drops,
    result_text,
    step_of,
    tool_texts,
)

MODEL = "emulated-model"
SYSTEM = "You are a careful coding agent."
TASK = "Read src/m0.py onwards and find the bug."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]
FLAGS = {"clamp_tool_results": 1_500, "clear_tool_results": 2, "clear_at_least": 500}


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    wg.clear_counter_cache()
    yield
    clear_discovery_cache()
    wg.clear_counter_cache()


def _loop(proxy: ProxyServer, *, huge: bool = True) -> list[Any]:
    """The agent loop an unmodified openai client runs through the proxy; checks that
    no call changes the client's transcript. Returns the transcript."""
    transcript: list[Any] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    with openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client:
        for _ in range(STEPS + 1):
            before = copy.deepcopy(transcript)
            reply = client.chat.completions.create(
                model=MODEL, messages=transcript, tools=TOOLS, max_tokens=REPLY_TOKENS
            )
            assert transcript == before
            message = reply.choices[0].message
            calls = message.tool_calls or []
            transcript.append(message.model_dump(exclude_none=True))
            for call in calls:
                step = step_of(json.loads(call.function.arguments))
                transcript.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": result_text(step, huge=huge),
                    }
                )
            if not calls:
                break
    return transcript


def test_the_proxy_clamps_and_clears_before_dropping() -> None:
    received = Received()
    with (
        Emulator(flavor="openai", context_window=WINDOW, scenario=received) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0, window=WINDOW, **FLAGS)) as proxy,
    ):
        transcript = _loop(proxy)
        statuses = [r.status for r in emu.records]
        metrics = proxy.metrics
        assert metrics.value("edited_requests_total", "chat") > 0
        assert metrics.value("pruned_requests_total", "chat") == 0
        assert metrics.value("refusals_total", "chat") == 0
    check_clamped_and_cleared(received, statuses)
    assert transcript[2 + 2 * HUGE_AT + 1]["content"] == result_text(HUGE_AT)  # still whole


def test_without_flags_the_proxy_clamps_and_clears_by_default() -> None:
    config = ProxyConfig(upstream="http://127.0.0.1:9", window=WINDOW)
    assert config.edit_stages() is None  # the manager's default: wg.DEFAULT_EDITS
    received = Received()
    with (
        Emulator(flavor="openai", context_window=WINDOW, scenario=received) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0, window=WINDOW)) as proxy,
    ):
        transcript = _loop(proxy)  # the result three times the window is clamped
        statuses = [r.status for r in emu.records]
        assert proxy.metrics.value("edited_requests_total", "chat") > 0
        assert proxy.metrics.value("refusals_total", "chat") == 0
    check_clamped_and_cleared(received, statuses)
    assert transcript[2 + 2 * HUGE_AT + 1]["content"] == result_text(HUGE_AT)  # still whole


def test_with_no_edits_the_proxy_only_drops_and_a_huge_result_is_refused() -> None:
    config = ProxyConfig(upstream="http://127.0.0.1:9", window=WINDOW, no_edits=True)
    assert config.edit_stages() == ()
    with pytest.raises(wg.ConfigurationError, match="--no-edits"):
        ProxyConfig(upstream="http://127.0.0.1:9", no_edits=True, **FLAGS)
    received = Received()
    with (
        Emulator(flavor="openai", context_window=WINDOW, scenario=received) as emu,
        ProxyServer(
            ProxyConfig(upstream=emu.root_url, port=0, window=WINDOW, no_edits=True)
        ) as proxy,
    ):
        _loop(proxy, huge=False)
        assert proxy.metrics.value("pruned_requests_total", "chat") > 0
        assert proxy.metrics.value("edited_requests_total", "chat") == 0
        assert only_drops(received)
    with (
        Emulator(flavor="openai", context_window=WINDOW, scenario=Received()) as emu,
        ProxyServer(
            ProxyConfig(upstream=emu.root_url, port=0, window=WINDOW, no_edits=True)
        ) as proxy,
    ):
        with pytest.raises(openai.BadRequestError, match="cannot fit the context window"):
            _loop(proxy)  # drop-only cannot send a result three times the window
        assert [r.status for r in emu.records] == [200] * (HUGE_AT + 1)  # refused unsent


def test_spilled_outputs_are_private_and_readable_by_a_client_that_offers_the_tool(
    tmp_path: Path,
) -> None:
    spill = tmp_path / "spill"
    received = Received(steps=HUGE_AT + 1)
    with Emulator(flavor="openai", context_window=WINDOW, scenario=received) as emu:
        config = ProxyConfig(
            upstream=emu.root_url,
            port=0,
            window=WINDOW,
            clamp_tool_results=1_500,
            spill_dir=str(spill),
        )
        with ProxyServer(config) as proxy:
            transcript: list[Any] = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": TASK},
            ]
            with openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client:
                for _ in range(HUGE_AT + 2):
                    reply = client.chat.completions.create(
                        model=MODEL, messages=transcript, tools=TOOLS, max_tokens=REPLY_TOKENS
                    )
                    message = reply.choices[0].message
                    transcript.append(message.model_dump(exclude_none=True))
                    for call in message.tool_calls or []:
                        step = step_of(json.loads(call.function.arguments))
                        transcript.append(
                            {"role": "tool", "tool_call_id": call.id, "content": result_text(step)}
                        )
    assert stat.S_IMODE(os.stat(spill).st_mode) == 0o700
    files = [p for p in spill.iterdir() if not p.name.startswith(".")]
    assert len(files) == 1 and stat.S_IMODE(os.stat(files[0]).st_mode) == 0o600
    sent = [t for r in received.requests for t in tool_texts(r) if "read_spilled(" in t]
    assert sent, "the clamped result names no handle"
    handle = re.search(r'read_spilled\(handle="([^"]+)"', sent[0])
    assert handle is not None and files[0].name == f"{handle.group(1)}.txt"
    # The proxy cannot run read_spilled: a client that offers its own tool over the same
    # directory pages the whole output back.
    tool = wg.spill_tool(wg.SpillStore(spill))
    whole, offset = "", 0
    while True:
        arguments = json.dumps({"handle": handle.group(1), "offset": offset})
        call = ToolCall(id="c", name="read_spilled", arguments=arguments)
        page = execute_tool(call, {"read_spilled": tool}).content
        header, _, body = page.partition("\n")
        whole += body
        found = re.search(r"next page: offset=(\d+)", header)
        if found is None:
            break
        offset = int(found.group(1))
    assert whole == result_text(HUGE_AT)


@pytest.mark.parametrize(
    ("options", "wording"),
    [
        ({"clamp_tool_results": 50}, "--clamp-tool-results: ClampToolResults(max_tokens=...) must"),
        ({"clear_tool_results": 0}, "--clear-tool-results: ClearToolResults(keep=...) must"),
        (
            {"clear_tool_results": 2, "clear_at_least": -1},
            "--clear-at-least: ClearToolResults(clear_at_least=...) must",
        ),
        ({"clear_at_least": 500}, "pass --clear-tool-results KEEP as well"),
        ({"clear_trigger": 0.6}, "--clear-trigger sets when a clearing happens; pass"),
        (
            {"clear_tool_results": 2, "clear_trigger": 1.5},
            "--clear-trigger: ClearToolResults(trigger=...) as a fraction must be in (0, 1]",
        ),
        (
            {"clear_tool_results": 2, "clear_trigger": 0},
            "--clear-trigger: ClearToolResults(trigger=...) must be >= 1",
        ),
        ({"spill_dir": "/tmp/x"}, "pass --clamp-tool-results TOKENS as well"),
        ({"clamp_tool_results": 500, "spill_dir": ""}, "--spill-dir must be a directory path"),
    ],
)
def test_bad_edit_flags_are_refused_when_the_config_is_made(
    options: dict[str, Any], wording: str
) -> None:
    with pytest.raises(wg.ConfigurationError) as refused:
        ProxyConfig(upstream="http://127.0.0.1:9", **options)
    assert wording in str(refused.value)


def test_a_spill_dir_others_can_read_is_refused_at_startup(tmp_path: Path) -> None:
    spill = tmp_path / "open"
    spill.mkdir(mode=0o755)
    os.chmod(spill, 0o755)
    config = ProxyConfig(
        upstream="http://127.0.0.1:9", window=WINDOW, clamp_tool_results=500, spill_dir=str(spill)
    )
    with pytest.raises(wg.SpillError, match="reachable by group or others"):
        config.edit_stages()


def test_the_cli_refuses_bad_flags_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from windowguard.cli import main

    assert main(["proxy", "--upstream", "http://127.0.0.1:9", "--spill-dir", "/tmp/x"]) == 2
    err = capsys.readouterr().err
    assert "pass --clamp-tool-results TOKENS as well" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as done:
        main(["proxy", "--upstream", "http://127.0.0.1:9", "--clamp-tool-results", "0"])
    assert done.value.code == 2
    assert "--clamp-tool-results" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_cli_takes_the_flags_and_says_what_it_edits(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "from windowguard.cli import main; exit(main())", "proxy"]
    spill = tmp_path / "spill"
    with Emulator(flavor="vllm", context_window=WINDOW) as emu:
        port = _free_port()
        process = subprocess.Popen(
            [
                *command,
                "--upstream",
                emu.root_url,
                "--port",
                str(port),
                "--clamp-tool-results",
                "1500",
                "--spill-dir",
                str(spill),
                "--clear-tool-results",
                "2",
                "--clear-at-least",
                "500",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            banner = []
            for line in process.stdout:
                banner.append(line)
                if "listening on" in line:
                    break
            text = "".join(banner)
        finally:
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=30)
    assert (
        "edits: clamp tool results over 1500 tokens, whole outputs kept in "
        f"SpillStore({str(spill)!r}); clear tool results outside the newest 2 turns (at "
        "least 500 tokens at a time); then whole turns are dropped"
    ) in text
    assert stat.S_IMODE(os.stat(spill).st_mode) == 0o700
    assert "Traceback" not in err


def test_clear_trigger_sets_the_clear_stage_s_trigger() -> None:
    config = ProxyConfig(
        upstream="http://127.0.0.1:9", clear_tool_results=1, clear_at_least=500, clear_trigger=0.6
    )
    assert config.edit_stages() == (wg.ClearToolResults(keep=1, clear_at_least=500, trigger=0.6),)
    tokens = ProxyConfig(upstream="http://127.0.0.1:9", clear_tool_results=1, clear_trigger=9000)
    assert tokens.edit_stages() == (wg.ClearToolResults(keep=1, trigger=9000),)
