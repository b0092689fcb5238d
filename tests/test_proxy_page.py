"""The proxy's live page (issue 20, item 10): its recorder, its routes and its data.

- :class:`~windowguard.proxy._recorder.ConversationRecorder` keeps, per conversation, the
  pressure points and the counts the page shows, bounded in conversations (least
  recently active forgotten), points and errors whatever the traffic (a property test
  against a model of it), and keeps no message text, no error text and no key.
- ``GET /windowguard/state.json`` after real traffic through the openai SDK (its real
  HTTP stack, against the emulator) holds exactly what the proxy's events and
  ``/metrics`` say, per conversation.
- ``GET /`` is the page only for a browser (``text/html``) under ``--page root``; any
  other ``GET /``, any ``POST /``, and everything under ``--page off`` reaches the
  upstream as before. The page loads nothing from outside (its CSP admits only its own
  inline script and style, by hash) and never parses data as markup.

The page in a real browser is tests/test_proxy_page_chromium.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

import windowguard as wg
from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.cli import build_parser
from windowguard.core.events import (
    ContextEdited,
    ContextEstimate,
    ContextPressure,
    Event,
    MaxTokensShrunk,
    ProviderErrorEvent,
    ProxyRefused,
    TranscriptPruned,
)
from windowguard.emulator import Emulator
from windowguard.proxy import ProxyConfig, ProxyServer
from windowguard.proxy._page import _shown_upstream, page_html
from windowguard.proxy._recorder import ConversationRecorder
from windowguard.run.sinks import current_conversation, in_conversation

from .page_traffic import FAULTS, WINDOW, Seen, conversation_ids, drive

KEYS = [hashlib.sha256(bytes([n])).hexdigest()[:32] for n in range(6)]


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    wg.clear_counter_cache()
    yield
    clear_discovery_cache()
    wg.clear_counter_cache()


class Ticks:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


def pressure(tokens: int, window: int = 1_000) -> ContextPressure:
    return ContextPressure(tokens=tokens, window=window, pressure=tokens / window)


def error(run_id: str = "", message: str = "upstream said no") -> ProviderErrorEvent:
    return ProviderErrorEvent(
        run_id=run_id,
        step=0,
        site="proxy chat.completions.create",
        failure_kind="overloaded",
        retryable=True,
        status=503,
        message=message,
        decision="returned",
    )


# --- the recorder -----------------------------------------------------------------------


def test_the_recorder_keeps_each_conversation_apart() -> None:
    recorder = ConversationRecorder(clock=Ticks())
    a, b = KEYS[0], KEYS[1]
    recorder.note(a, api="chat", model="m-a")
    with in_conversation(a):
        recorder(
            ContextEstimate(
                estimated_tokens=300,
                window=1_000,
                budget=900,
                pressure=0.3,
                calibration=1.0,
                source="catalog",
            )
        )
        recorder(pressure(250))
        recorder(
            ContextEdited(
                edit="clamp",
                messages=(3,),
                tool_names=("t",),
                tokens_before=9,
                tokens_after=1,
                tokens_freed=8,
            )
        )
        recorder(
            ContextEdited(
                edit="clamp",
                messages=(3,),
                tool_names=("t",),
                tokens_before=9,
                tokens_after=1,
                tokens_freed=8,
                new=False,
            )
        )
        recorder(
            TranscriptPruned(
                dropped_turns=4,
                dropped_messages=8,
                kept_messages=5,
                tokens_before=2_000,
                tokens_after=600,
                budget=900,
            )
        )
        recorder(
            TranscriptPruned(
                dropped_turns=4,
                dropped_messages=8,
                kept_messages=7,
                tokens_before=2_100,
                tokens_after=700,
                budget=900,
                new_cut=False,
            )
        )
        recorder(
            MaxTokensShrunk(
                requested=900,
                max_tokens=300,
                estimated_input_tokens=600,
                context_window=1_000,
                safety_buffer=100,
                reason="window",
            )
        )
        recorder(pressure(700))
    # Edits and shrinks are counted once a request, as the proxy tells them (the events
    # above, which a refit would report again, count none): two requests, one edited
    # and shrunk.
    recorder.counted(a, edited=True, shrunk=True)
    recorder.counted(a, edited=False, shrunk=False)
    recorder.note(b, api="messages", model="m-b")
    with in_conversation(b):
        recorder(ProxyRefused(api="messages.create", code="context_truncated", message="x"))
    recorder(error(run_id=a))
    recorder(ProxyRefused(api="chat.completions.create", code="invalid_path", message="y"))
    recorder(pressure(1))  # outside any conversation: nobody's point

    state = recorder.snapshot()
    first, second = state["conversations"]
    assert first["id"] == a[:12]  # the error touched a last
    assert (first["api"], first["model"], first["sends"]) == ("chat", "m-a", 1)
    assert first["window"] == 1000
    assert [p for _, p in first["points"]] == [0.25, 0.7]
    assert (first["pressure"], first["tokens"], first["peak_pressure"]) == (0.7, 700, 0.7)
    assert first["estimated_pressure"] == 0.3
    assert (first["edits"], first["prunes"], first["dropped_turns"]) == (1, 1, 4)
    assert (first["shrinks"], first["refusals"], first["errors"]) == (1, 0, 1)
    assert second["id"] == b[:12]
    assert (second["refusals"], second["points"], second["pressure"]) == (1, [], None)
    assert second["peak_pressure"] is None
    assert state["refused"] == {"context_truncated": 1, "invalid_path": 1}
    assert state["errors_total"] == 1
    assert state["errors"][0]["conversation"] == a[:12]
    assert (state["errors"][0]["kind"], state["errors"][0]["status"]) == ("overloaded", 503)


def test_the_recorder_keeps_no_message_text_and_no_key() -> None:
    recorder = ConversationRecorder()
    key = KEYS[2]
    recorder.note(key, api="chat", model="m" * 500)
    with in_conversation(key):
        recorder(
            ProxyRefused(
                api="chat.completions.create",
                code="invalid_request",
                message="the user's words: my password is hunter2",
            )
        )
    recorder(error(run_id=key, message="Incorrect API key provided: sk-live-abcdef"))
    text = json.dumps(recorder.snapshot())
    for secret in ("hunter2", "user's words", "sk-live", "Incorrect API key", key):
        assert secret not in text
    assert recorder.snapshot()["conversations"][0]["model"] == "m" * 120


@pytest.mark.parametrize(
    "bounds",
    [{"max_conversations": 0}, {"max_points": -1}, {"max_errors": True}, {"max_points": 1.5}],
)
def test_the_recorder_refuses_bad_bounds(bounds: dict[str, Any]) -> None:
    name = next(iter(bounds))
    with pytest.raises(wg.ConfigurationError, match=name):
        ConversationRecorder(**bounds)


@dataclass
class Model:
    """What the recorder should hold: LRU conversations, their last points, last errors."""

    limit: int
    conversations: OrderedDict[str, list[float]] = field(default_factory=OrderedDict)
    errors: list[str | None] = field(default_factory=list)
    seen: int = 0

    def touch(self, key: str) -> list[float]:
        if key in self.conversations:
            self.conversations.move_to_end(key)
        else:
            self.conversations[key] = []
            self.seen += 1
            while len(self.conversations) > self.limit:
                self.conversations.popitem(last=False)
        return self.conversations[key]


OPS = st.lists(
    st.tuples(
        st.sampled_from(["note", "pressure", "error", "refused", "loose-error"]),
        st.integers(0, len(KEYS) - 1),
        st.integers(0, 1_000),
    ),
    max_size=60,
)


@given(
    ops=OPS,
    max_conversations=st.integers(1, 4),
    max_points=st.integers(1, 3),
    max_errors=st.integers(1, 3),
)
def test_the_recorder_stays_within_its_bounds(
    ops: list[tuple[str, int, int]], max_conversations: int, max_points: int, max_errors: int
) -> None:
    recorder = ConversationRecorder(
        max_conversations=max_conversations,
        max_points=max_points,
        max_errors=max_errors,
        clock=Ticks(),
    )
    model = Model(limit=max_conversations)
    for kind, index, tokens in ops:
        key = KEYS[index]
        if kind == "note":
            recorder.note(key, api="chat", model="m")
            model.touch(key)
        elif kind == "pressure":
            with in_conversation(key):
                recorder(pressure(tokens))
            model.touch(key).append(tokens / 1_000)
        elif kind == "error":
            recorder(error(run_id=key))
            model.touch(key)
            model.errors.append(key[:12])
        elif kind == "refused":
            with in_conversation(key):
                recorder(ProxyRefused(api="chat", code="context_truncated", message=""))
            model.touch(key)
        else:
            recorder(error())
            model.errors.append(None)
    state = recorder.snapshot()
    conversations = state["conversations"]
    assert len(conversations) <= max_conversations
    assert [c["id"] for c in conversations] == [k[:12] for k in reversed(model.conversations)]
    for shown, points in zip(conversations, reversed(model.conversations.values()), strict=True):
        assert [p for _, p in shown["points"]] == points[-max_points:]
        times = [t for t, _ in shown["points"]]
        assert times == sorted(times)
    assert [e["conversation"] for e in state["errors"]] == model.errors[::-1][:max_errors]
    assert state["errors_total"] == len(model.errors)
    assert state["conversations_seen"] == model.seen
    assert state["conversations_seen"] - state["conversations_forgotten"] == len(conversations)


# --- the proxy's page and state, after real traffic -------------------------------------


@dataclass
class Traffic:
    seen: Seen
    state: dict[str, Any]
    events: dict[str | None, list[Event]]
    metrics: str


@pytest.fixture(scope="module")
def traffic() -> Iterator[Traffic]:
    events: dict[str | None, list[Event]] = defaultdict(list)

    def sink(event: Event) -> None:
        events[current_conversation()].append(event)

    clear_discovery_cache()
    wg.clear_counter_cache()
    config_args: dict[str, Any] = {"port": 0, "clamp_tool_results": 300}
    with Emulator(flavor="vllm", context_window=WINDOW, faults=FAULTS) as emu:
        config = ProxyConfig(upstream=emu.root_url, **config_args)
        with ProxyServer(config, sinks=[sink]) as proxy:
            seen = drive(proxy.base_url)
            state = httpx2.get(proxy.root_url + "/windowguard/state.json").json()
            metrics = httpx2.get(proxy.root_url + "/metrics").text
    yield Traffic(seen=seen, state=state, events=dict(events), metrics=metrics)
    clear_discovery_cache()
    wg.clear_counter_cache()


def _metric(text: str, name: str) -> float:
    pattern = rf"^windowguard_proxy_{name}\{{[^}}]*\}} (\S+)$"
    return sum(float(v) for v in re.findall(pattern, text, re.M))


def test_the_state_holds_what_the_events_and_metrics_say(traffic: Traffic) -> None:
    state, seen = traffic.state, traffic.seen
    shown = {c["id"]: c for c in state["conversations"]}
    ids = conversation_ids(seen)
    assert set(shown) == set(ids.values())
    by_id = {key[:12]: events for key, events in traffic.events.items() if key is not None}
    for name, id_ in ids.items():
        row, events = shown[id_], by_id[id_]
        kinds = Counter(e.kind for e in events)
        assert row["sends"] == seen.sends[name]
        assert row["model"] == seen.models[name]
        assert row["api"] == "chat"
        measured = [e.pressure for e in events if isinstance(e, ContextPressure)]
        assert len(measured) == seen.answered[name]
        assert [p for _, p in row["points"]] == measured
        assert row["peak_pressure"] == (max(measured) if measured else None)
        # once a request (no refit and one edit a request here: what the events say too)
        assert row["shrinks"] == kinds["max_tokens_shrunk"] + kinds["context_emergency_shrink"]
        assert row["edits"] == sum(
            1 for e in events if isinstance(e, ContextEdited) and e.new and e.edit != "drop"
        )
        assert row["prunes"] == sum(
            1 for e in events if isinstance(e, TranscriptPruned) and e.new_cut
        )
        assert row["refusals"] == seen.refused[name]
        assert row["errors"] == seen.upstream_errors[name]
    # the traffic did what it meant to: the page has something of each kind to show
    assert shown[ids["tool-output"]]["edits"] == 1
    assert shown[ids["grows-fast"]]["prunes"] > 0
    assert shown[ids["big-reply"]]["shrinks"] > 0
    assert shown[ids["too-big"]]["refusals"] == 1
    assert sum(seen.upstream_errors.values()) == len(FAULTS)
    # and agrees with /metrics, which the page shows beside it
    metrics = state["metrics"]
    for name in ("shrinks_total", "refusals_total", "upstream_errors_total", "requests_total"):
        assert sum(metrics[name].values()) == _metric(traffic.metrics, name)
    assert sum(c["shrinks"] for c in shown.values()) == _metric(traffic.metrics, "shrinks_total")
    edited = _metric(traffic.metrics, "edited_requests_total")
    assert sum(c["edits"] for c in shown.values()) == edited
    assert sum(c["refusals"] for c in shown.values()) == _metric(traffic.metrics, "refusals_total")
    assert state["errors_total"] == _metric(traffic.metrics, "upstream_errors_total")
    assert [(e["kind"], e["status"]) for e in state["errors"]] == [("overloaded", 503)] * 2
    assert state["refused"] == {"context_truncated": 1}
    assert state["proxy"]["context_window"] == WINDOW


def test_the_state_holds_no_message_text_and_no_key(traffic: Traffic) -> None:
    text = json.dumps(traffic.state)
    for words in ("You are agent", "Task of", "summarise", "x_3_", "run_tests", "page-test"):
        assert words not in text


def _serve(page: str, emu: Emulator) -> ProxyServer:
    return ProxyServer(ProxyConfig(upstream=emu.root_url, port=0, page=page))  # type: ignore[arg-type]


def test_root_is_the_page_only_for_a_browser() -> None:
    with Emulator(flavor="vllm", context_window=WINDOW) as emu, _serve("root", emu) as proxy:
        root = proxy.root_url
        browser = httpx2.get(root + "/", headers={"accept": "text/html,application/xhtml+xml"})
        assert browser.status_code == 200
        assert browser.headers["content-type"] == "text/html; charset=utf-8"
        assert browser.text == page_html()
        assert "script-src 'sha256-" in browser.headers["content-security-policy"]
        assert browser.headers["cache-control"] == "no-store"
        for path in ("/windowguard/", "/windowguard", "/windowguard/./"):
            assert httpx2.get(root + path).text == page_html()
        # anything else for / is the upstream's, as it was without the page
        other = httpx2.get(root + "/", headers={"accept": "*/*"})
        assert other.status_code == 404
        assert other.json()["error"]["message"] == "Not Found: GET /"
        posted = httpx2.post(root + "/", json={}, headers={"accept": "text/html"})
        assert posted.json()["error"]["message"] == "Not Found: POST /"
        state = httpx2.get(root + "/windowguard/state.json")
        assert state.headers["content-type"] == "application/json"
        assert state.headers["cache-control"] == "no-store"
        assert state.json()["conversations"] == []
        assert state.json()["proxy"]["page"] == "root"


@pytest.mark.parametrize("page", ["path", "off"])
def test_root_passes_through_unless_page_root(page: str) -> None:
    with Emulator(flavor="vllm", context_window=WINDOW) as emu, _serve(page, emu) as proxy:
        root = proxy.root_url
        browser = httpx2.get(root + "/", headers={"accept": "text/html"})
        assert browser.json()["error"]["message"] == "Not Found: GET /"
        at_path = httpx2.get(root + "/windowguard/")
        state = httpx2.get(root + "/windowguard/state.json")
        if page == "path":
            assert at_path.text == page_html()
            assert state.json()["proxy"]["page"] == "path"
        else:
            assert at_path.json()["error"]["message"] == "Not Found: GET /windowguard/"
            assert state.status_code == 404
            assert proxy.app.state.proxy.recorder is None


def test_the_page_loads_nothing_from_outside_and_parses_no_data_as_markup() -> None:
    html = page_html()
    # the only absolute URL is the SVG namespace, a name that is never fetched
    assert re.findall(r"https?://[^\s\"')]+", html) == ["http://www.w3.org/2000/svg"]
    for loader in ("src=", "@import", "url(", '<link rel="stylesheet"', "@font-face"):
        assert loader not in html
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        'setAttribute("style"',
    ):
        assert sink not in html
    script = re.findall(r"<script>(.*?)</script>", html, re.S)
    style = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert len(script) == len(style) == 1
    with Emulator(flavor="vllm", context_window=WINDOW) as emu, _serve("path", emu) as proxy:
        policy = httpx2.get(proxy.root_url + "/windowguard/").headers["content-security-policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["connect-src"] == "'self'"
    for name, text in (("script-src", script[0]), ("style-src", style[0])):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert directives[name] == f"'sha256-{digest}'"


def test_the_page_shows_the_upstream_without_credentials() -> None:
    assert _shown_upstream("http://user:pw@gpu-box:8000/gw") == "http://gpu-box:8000/gw"
    assert _shown_upstream("https://[::1]:8443") == "https://[::1]:8443"
    assert _shown_upstream("http://127.0.0.1:8000") == "http://127.0.0.1:8000"


def test_page_flag_and_config() -> None:
    parser = build_parser()
    args = parser.parse_args(["proxy", "--upstream", "http://127.0.0.1:8000"])
    assert args.page == "root"
    args = parser.parse_args(["proxy", "--upstream", "http://127.0.0.1:8000", "--page", "off"])
    assert args.page == "off"
    args = parser.parse_args(["proxy", "--upstream", "http://127.0.0.1:8000", "--no-page"])
    assert args.page == "off"
    with pytest.raises(SystemExit):
        parser.parse_args(["proxy", "--upstream", "http://127.0.0.1:8000", "--page", "yes"])
    with pytest.raises(wg.ConfigurationError, match="--page must be one of"):
        ProxyConfig(upstream="http://127.0.0.1:8000", page="yes")  # type: ignore[arg-type]


def test_a_refit_counts_its_request_once_as_metrics_do() -> None:
    # The proxy is told a window four times the served one: the upstream refuses a request
    # the proxy fitted (clamping 12 results), and the proxy refits it. The page counted
    # edit events (12 here, one per clamped result; a refit emits its own) where /metrics
    # counts edited requests (1): both now count requests.
    import openai

    events: list[Event] = []
    clear_discovery_cache()
    with (
        Emulator(flavor="vllm", context_window=4_096, count_apis="none") as emu,
        ProxyServer(
            ProxyConfig(
                upstream=emu.root_url,
                port=0,
                window=16_384,
                clamp_tool_results=1_000,
            ),
            sinks=[events.append],
        ) as proxy,
        openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=0) as client,
    ):
        transcript: list[Any] = [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "go"},
        ]
        rng = random.Random(18)
        for n in range(12):  # 1,000 tokens a turn by the estimate once clamped, ~550 exact
            call = {"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            words = " ".join(f"{rng.getrandbits(32):08x}" for _ in range(1_000))
            transcript.append({"role": "assistant", "content": "", "tool_calls": [call]})
            transcript.append({"role": "tool", "tool_call_id": f"c{n}", "content": words})
        client.chat.completions.create(model="m", messages=transcript, max_tokens=200)
        state = httpx2.get(proxy.root_url + "/windowguard/state.json").json()
        metrics = httpx2.get(proxy.root_url + "/metrics").text
    clear_discovery_cache()
    assert [r.status for r in emu.records] == [400, 200]  # refused once, refitted
    assert _metric(metrics, "refits_total") == 1
    clamps = [e for e in events if isinstance(e, ContextEdited) and e.new and e.edit == "clamp"]
    assert len(clamps) == 12  # what the page counted: an edit event per clamped result
    (row,) = state["conversations"]
    assert row["edits"] == _metric(metrics, "edited_requests_total") == 1
    assert row["shrinks"] == _metric(metrics, "shrinks_total")
    assert row["sends"] == 1
