"""Fair work per request (issue 20, item 1), the parts that are behaviour, not timing
(the timings are bench_proxy_fairness.py's):

- a body of 4 MiB or more is parsed in a helper process, with parse_body's very answer,
  and a helper that dies costs only that body's parse moving to a thread;
- while a large body is worked on a worker thread the interpreter hands the GIL over
  every 0.5 ms, and the interval it had comes back after (nested and concurrent holds
  counted);
- small requests are answered while a large one is still being fitted;
- the exact tokenizers fits will use are loaded at startup, before the first request
  (``--no-preload-tokenizers``: on first use), so no client waits on a vocabulary.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import time

import httpx2
import pytest

from windowguard.accounting.catalog import lookup_model
from windowguard.accounting.local import LOCAL_FAMILIES, local_accounting
from windowguard.cli import build_parser
from windowguard.emulator import Emulator
from windowguard.proxy import ProxyConfig, ProxyServer
from windowguard.proxy._guards import ProxyGuards
from windowguard.proxy._http import QuickSwitches, parse_body
from windowguard.proxy._parse import BodyParser
from windowguard.proxy.config import UpstreamInfo

MODEL = "emulated-model"


def test_quick_switches_while_held_and_the_old_interval_after() -> None:
    before = sys.getswitchinterval()
    switches = QuickSwitches(0.0005)
    with switches.held():
        assert sys.getswitchinterval() == pytest.approx(0.0005)
        with switches.held():  # a second large request at the same time
            assert sys.getswitchinterval() == pytest.approx(0.0005)
        assert sys.getswitchinterval() == pytest.approx(0.0005)  # the first still runs
    assert sys.getswitchinterval() == before


def test_quick_switches_restore_after_an_exception_and_across_threads() -> None:
    before = sys.getswitchinterval()
    switches = QuickSwitches(0.0005)
    with pytest.raises(RuntimeError), switches.held():
        raise RuntimeError("a fit that failed")
    assert sys.getswitchinterval() == before
    inside = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with switches.held():
            inside.set()
            release.wait(30)

    worker = threading.Thread(target=hold)
    worker.start()
    assert inside.wait(30)
    with switches.held():
        pass  # ends first: the other thread's hold keeps the quick interval
    assert sys.getswitchinterval() == pytest.approx(0.0005)
    release.set()
    worker.join(30)
    assert sys.getswitchinterval() == before


def test_small_requests_are_answered_while_a_large_one_is_fitted() -> None:
    line = "lorem ipsum dolor sit amet, consectetur 12345 adipiscing; "
    text = line * (8 * 1024 * 1024 // len(line))  # 8 MiB: offloaded, clamped
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Read the log."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": text},
    ]
    large = json.dumps({"model": MODEL, "messages": messages, "max_tokens": 64}).encode()
    with (
        Emulator(flavor="vllm", context_window=32768) as emu,
        ProxyServer(ProxyConfig(upstream=emu.root_url, port=0)) as proxy,
    ):
        url = proxy.base_url + "/chat/completions"
        done: list[tuple[int, float]] = []

        def send_large() -> None:
            answer = httpx2.post(
                url, content=large, headers={"content-type": "application/json"}, timeout=300
            )
            done.append((answer.status_code, time.monotonic()))

        worker = threading.Thread(target=send_large)
        worker.start()
        answered: list[float] = []
        with httpx2.Client(timeout=300) as client:
            while worker.is_alive() and len(answered) < 3:
                small = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
                if client.post(url, json=small).status_code == 200:
                    answered.append(time.monotonic())
        worker.join(300)
        assert done and done[0][0] == 200
        # Answered before the large request was: the proxy did not wait for its fit.
        assert len(answered) == 3
        assert answered[-1] < done[0][1]


def _upstream(model: str | None) -> UpstreamInfo:
    info = lookup_model(model) if model is not None else None
    return UpstreamInfo(
        root="http://127.0.0.1:9", model=model, model_info=info, explicit=None, counter=None
    )


def test_the_tokenizers_to_preload_are_the_models_family_or_the_first_one_inferred() -> None:
    config = ProxyConfig(upstream="http://127.0.0.1:9")
    installed = tuple(f for f in LOCAL_FAMILIES if local_accounting(f) is not None)
    known = ProxyGuards(config, _upstream("gpt-4o"), ())
    assert known.tokenizers_to_preload() == (("o200k",) if "o200k" in installed else ())
    unknown = ProxyGuards(config, _upstream(None), ())
    assert unknown.tokenizers_to_preload() == installed[:1]


def test_the_proxy_loads_the_tokenizers_before_it_serves(
    caplog: pytest.LogCaptureFixture,
) -> None:
    if local_accounting("o200k") is None:
        pytest.skip("no exact o200k tokenizer installed (bpe-openai, in the test extra)")
    with caplog.at_level(logging.INFO, logger="windowguard.proxy"):
        with (
            Emulator(flavor="vllm", context_window=32768, model="gpt-4o") as emu,
            ProxyServer(ProxyConfig(upstream=emu.root_url, port=0)),
        ):
            pass
        loaded = [r.getMessage() for r in caplog.records if "tokenizers loaded" in r.getMessage()]
        assert len(loaded) == 1 and "o200k" in loaded[0]
        caplog.clear()
        with (
            Emulator(flavor="vllm", context_window=32768, model="gpt-4o") as emu,
            ProxyServer(ProxyConfig(upstream=emu.root_url, port=0, preload_tokenizers=False)),
        ):
            pass
        assert not [r for r in caplog.records if "tokenizers loaded" in r.getMessage()]


def test_the_preload_flag() -> None:
    parser = build_parser()
    args = parser.parse_args(["proxy", "--upstream", "http://127.0.0.1:8000"])
    assert args.preload_tokenizers is True
    args = parser.parse_args(
        ["proxy", "--upstream", "http://127.0.0.1:8000", "--no-preload-tokenizers"]
    )
    assert args.preload_tokenizers is False


BODIES = [
    json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 70_000}]}),
    json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": "\u00e9\U0001f642" * 30_000}]}
    ),
    '{"model": "m", "messages": [{"role": "user", "content": "' + "y" * 70_000 + '\\ud83d"}]}',
    "[" + "1, " * 30_000 + "2]",
    '{"model": "m", "broken": ' + "z" * 70_000,
]


def test_a_large_body_is_parsed_in_a_helper_process_with_the_same_answer() -> None:

    parser = BodyParser(QuickSwitches(), process_bytes=65_536)
    try:
        for text in BODIES:
            raw = text.encode()
            assert len(raw) >= 65_536
            assert asyncio.run(parser.parse(raw)) == parse_body(raw)
        assert parser.process_parses == len(BODIES)
        # The helper dies: that body moves to a thread, the next starts a new helper.
        pool = parser._helper()
        for process in list(pool._processes.values()):  # type: ignore[union-attr]
            process.kill()
            process.join(30)
        raw = BODIES[0].encode()
        assert asyncio.run(parser.parse(raw)) == parse_body(raw)
        assert asyncio.run(parser.parse(raw)) == parse_body(raw)
        assert parser.process_parses == len(BODIES) + 1
    finally:
        parser.close()
    assert parser._pool is None


def test_a_body_below_the_process_size_never_starts_a_helper() -> None:

    parser = BodyParser(QuickSwitches())
    raw = BODIES[0].encode()  # 70 KB: a thread's
    assert asyncio.run(parser.parse(raw)) == parse_body(raw)
    assert parser.process_parses == 0 and parser._pool is None
    parser.close()
