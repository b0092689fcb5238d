"""The proxy's memory is bounded in bytes (issue 20, item 3): 4,000 distinct
conversations through the real proxy over HTTP, with ``--max-state-mb 8``, keep its
state within 8 MiB (its own accounting, and ``/metrics``), evict the least recently
used, and the process's resident memory stops growing once the budget is full.

The proxy and the emulator run in this process (``ProxyServer``, ``Emulator``); the
client is ``httpx2`` over loopback.
"""

from __future__ import annotations

import json
import os
import random
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import pytest

from windowguard.emulator import Emulator
from windowguard.proxy import ProxyConfig, ProxyServer

MODEL = "emulated-model"
CONVERSATIONS = 4_000
WARMUP = 400
MAX_STATE_MB = 8


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _body(n: int) -> bytes:
    rng = random.Random(n)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": f"task number {n}: read the files and report"},
    ]
    for turn in range(4):
        call = f"call_{turn}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "read", "arguments": json.dumps({"n": turn})},
                    }
                ],
            }
        )
        text = " ".join(rng.choice(("alpha", "beta", "gamma", "delta")) for _ in range(600))
        messages.append({"role": "tool", "tool_call_id": call, "content": text})
    return json.dumps({"model": MODEL, "messages": messages, "max_tokens": 8}).encode()


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads /proc (Linux)")
def test_the_state_stays_within_max_state_mb_over_4000_conversations() -> None:
    with (
        Emulator(flavor="vllm", context_window=32_768) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0, max_state_mb=MAX_STATE_MB)) as proxy,
        httpx2.Client(timeout=60) as client,
    ):
        budget = proxy.app.state.proxy.guards.budget
        url = proxy.base_url + "/chat/completions"
        headers = {"content-type": "application/json"}

        def send(n: int) -> int:
            return client.post(url, content=_body(n), headers=headers).status_code

        with ThreadPoolExecutor(max_workers=4) as pool:
            assert set(pool.map(send, range(WARMUP))) == {200}
            assert budget.evictions > 0  # the budget is full: the rest only replaces
            rss_full = _rss_bytes()
            largest = 0
            for start in range(WARMUP, CONVERSATIONS, 400):
                statuses = set(pool.map(send, range(start, min(start + 400, CONVERSATIONS))))
                assert statuses == {200}
                assert budget.total <= MAX_STATE_MB * 1024 * 1024
                largest = max(largest, budget.total)
            growth = _rss_bytes() - rss_full
        kept = len(budget)
        assert 0 < kept < CONVERSATIONS // 4
        assert budget.evictions == CONVERSATIONS - kept
        # Each conversation is accounted at ~30-40 KiB: 8 MiB holds a few hundred.
        assert largest > MAX_STATE_MB * 1024 * 1024 * 0.8
        # Unbounded, the 3,600 conversations after the warm-up would keep ~120 MiB more.
        assert growth < 48 * 1024 * 1024, growth

        metrics = client.get(proxy.root_url + "/metrics").text
        state = re.search(r"^windowguard_proxy_state_bytes (\d+)$", metrics, re.M)
        evictions = re.search(
            r'^windowguard_proxy_state_evictions_total\{reason="max_state_mb"\} (\d+)$',
            metrics,
            re.M,
        )
        conversations = re.search(r"^windowguard_proxy_state_conversations (\d+)$", metrics, re.M)
        assert state and evictions and conversations, metrics
        assert 0 < int(state.group(1)) <= MAX_STATE_MB * 1024 * 1024
        assert int(evictions.group(1)) == budget.evictions
        assert int(conversations.group(1)) == kept


def test_a_forgotten_conversation_starts_over_and_is_still_fitted() -> None:
    with (
        Emulator(flavor="vllm", context_window=32_768) as emu,
        ProxyServer(
            ProxyConfig(upstream=emu.root_url, port=0, max_state_mb=0.05)  # ~50 KiB
        ) as proxy,
        httpx2.Client(timeout=60) as client,
    ):
        budget = proxy.app.state.proxy.guards.budget
        url = proxy.base_url + "/chat/completions"
        headers = {"content-type": "application/json"}
        first = client.post(url, content=_body(1), headers=headers)
        assert first.status_code == 200 and len(budget) == 1
        assert client.post(url, content=_body(2), headers=headers).status_code == 200
        assert budget.evictions == 1 and len(budget) == 1  # the first was forgotten
        again = client.post(url, content=_body(1), headers=headers)
        assert again.status_code == 200 and again.json()["choices"]
        assert budget.evictions == 2
