"""Real traffic for the proxy's live page, and a headless Chromium to look at it.

:func:`drive` runs agent-like conversations through the proxy with the unmodified openai
SDK (its real HTTP stack), round-robin so their pressure lines share the chart's time:
transcripts that grow past the window (the proxy drops turns), one asking for more reply
than fits (the proxy shrinks ``max_tokens``), one with an oversized tool result (the
proxy clamps it), one whose newest message alone is larger than the window (refused,
``context_truncated``), and upstream faults the emulator injects (503s). It returns what
the client saw, to check the page against.

:func:`chromium` finds Debian's ``chromium`` (or ``$WINDOWGUARD_CHROMIUM``);
:func:`run_chromium` drives it headless, offline: ``--dump-dom`` and ``--screenshot``
after a virtual-time budget that lets the page's script fetch and draw.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import openai

from windowguard.run._conversations import head_key

WINDOW = 4096
STEPS = 16
FAULTS = {9: 503, 30: 503}
"""Model calls (numbered by the emulator in arrival order) answered 503."""
XSS_MODEL = '<img src=x onerror="document.title=1">'
"""A model name that is markup: the page must show it as text."""


@dataclass
class Seen:
    """What the client saw, per conversation name."""

    sends: Counter[str] = field(default_factory=Counter)
    answered: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    upstream_errors: Counter[str] = field(default_factory=Counter)
    models: dict[str, str] = field(default_factory=dict)


def _filler(n: int, lines: int) -> str:
    return f"file {n}:\n" + "".join(f"x_{n}_{i} = {i}\n" for i in range(lines))


def system_and_task(name: str) -> list[dict[str, object]]:
    """The head of conversation ``name``: its system prompt and its task."""
    task = _filler(99, 3000) if name == "too-big" else f"Task of {name}: summarise the files."
    return [
        {"role": "system", "content": f"You are agent {name}."},
        {"role": "user", "content": task},
    ]


def drive(base_url: str) -> Seen:
    """The conversations, through the proxy at ``base_url`` (``.../v1``)."""
    seen = Seen()
    plans = {
        "grows": {"model": "emulated-model", "max_tokens": 128, "lines": 40},
        "grows-fast": {"model": "emulated-model", "max_tokens": 128, "lines": 70},
        "big-reply": {"model": "emulated-model", "max_tokens": 3000, "lines": 30},
        "markup-model": {"model": XSS_MODEL, "max_tokens": 128, "lines": 20},
    }
    transcripts = {name: system_and_task(name) for name in plans}
    # One conversation with a tool result far over the proxy's clamp.
    transcripts["tool-output"] = [
        *system_and_task("tool-output"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "run_tests", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": _filler(0, 400)},
    ]
    plans["tool-output"] = {"model": "emulated-model", "max_tokens": 128, "lines": 10}
    with openai.OpenAI(base_url=base_url, api_key="page-test", max_retries=0) as client:
        for step in range(STEPS):
            for name, plan in plans.items():
                transcript = transcripts[name]
                transcript.append({"role": "user", "content": _filler(step, int(plan["lines"]))})
                seen.models[name] = str(plan["model"])
                seen.sends[name] += 1
                try:
                    reply = client.chat.completions.create(
                        model=str(plan["model"]),
                        messages=transcript,  # type: ignore[arg-type]
                        max_tokens=int(plan["max_tokens"]),
                    )
                except openai.InternalServerError:
                    seen.upstream_errors[name] += 1
                    transcript.pop()
                    continue
                seen.answered[name] += 1
                transcript.append(
                    {"role": "assistant", "content": reply.choices[0].message.content or "ok"}
                )
        refused = system_and_task("too-big")  # its task alone is larger than the window
        seen.models["too-big"] = "emulated-model"
        seen.sends["too-big"] += 1
        try:
            client.chat.completions.create(
                model="emulated-model",
                messages=refused,  # type: ignore[arg-type]
                max_tokens=128,
            )
        except openai.BadRequestError as exc:
            assert exc.code == "context_truncated", exc
            seen.refused["too-big"] += 1
    return seen


def conversation_ids(seen: Seen) -> dict[str, str]:
    """Each conversation's id on the page: its key's first 12 hex digits, the key made
    from its head as the proxy makes it."""
    return {
        name: head_key(system_and_task(name), model=seen.models[name])[:12] for name in seen.sends
    }


def chromium() -> str | None:
    """Debian's Chromium (``apt-get install chromium``), or ``$WINDOWGUARD_CHROMIUM``."""
    named = os.environ.get("WINDOWGUARD_CHROMIUM")
    if named:
        return named
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def run_chromium(
    binary: str,
    url: str,
    *,
    screenshot: Path | None = None,
    size: tuple[int, int] = (1280, 900),
    budget_ms: int = 5000,
) -> str:
    """Load ``url`` in a headless Chromium with its background networking off, let its
    scripts run for ``budget_ms`` of virtual time, and return the DOM (with
    ``screenshot``: save a PNG of the window, ``size`` pixels, there instead)."""
    with tempfile.TemporaryDirectory(prefix="wg-chromium-") as profile:
        args = [
            binary,
            "--headless=new",
            "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--no-proxy-server",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            f"--window-size={size[0]},{size[1]}",
        ]
        if screenshot is not None:
            args.append(f"--screenshot={screenshot}")
        else:
            args.append("--dump-dom")
        done = subprocess.run(
            [*args, url],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            env={**os.environ, "HOME": profile},
        )
    assert done.returncode == 0, f"chromium exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout
