"""Sinks: every sink gets every event, a failing sink never breaks a run, and each
shipped sink (logging, JSONL, OpenTelemetry, capture_events) records what it says."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from windowguard.core.events import (
    CalibrationCapped,
    CalibrationUpdated,
    ContextEdited,
    ContextEmergencyShrink,
    ContextEstimate,
    ContextPressure,
    Event,
    GuardPassthrough,
    MaxTokensShrunk,
    ModelCall,
    PressureThresholdCrossed,
    ProviderErrorEvent,
    ProxyRefused,
    RemoteCounted,
    RemoteCountFailed,
    RetryScheduled,
    RunFinished,
    RunStarted,
    TokenizerInferred,
    ToolCallEvent,
    ToolResultEvent,
    TranscriptDeferred,
    TranscriptPruned,
    UsageExcludesCached,
    UsageMeasured,
    UsageMismatch,
)
from windowguard.core.exceptions import ConfigurationError
from windowguard.run.sinks import (
    EventRecorder,
    JsonlSink,
    LoggingSink,
    OpenTelemetrySink,
    as_sinks,
    capture_events,
    emit,
)


def model_call(run_id: str = "r1", step: int = 1, **over: Any) -> ModelCall:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "step": step,
        "site": "loop",
        "input_tokens": 1200,
        "output_tokens": 80,
        "cache_read_tokens": 1000,
        "cache_write_tokens": 0,
        "max_tokens": 4096,
        "stop_reason": "tool_calls",
        "tool_calls": 2,
    }
    fields.update(over)
    return ModelCall(**fields)


def one_of_each() -> list[Event]:
    """One event of every kind, in the order a run might emit them."""
    return [
        RunStarted(run_id="r1", model="gpt-4o", context_window=128_000, window_source="catalog"),
        ContextEstimate(
            estimated_tokens=1300,
            window=128_000,
            budget=100_000,
            pressure=0.01,
            calibration=1.05,
            source="catalog",
            measured_tokens=1100,
            exact=False,
            sources=("ledger", "heuristic:o200k"),
        ),
        UsageMeasured(
            origin="usage",
            total_tokens=1250,
            known_tokens=1100,
            measured_tokens=150,
            estimated_tokens=180,
            messages=2,
            with_base=False,
            drift=0,
        ),
        RemoteCounted(counter="vllm POST /tokenize", tokens=99_000, messages=40, purpose="confirm"),
        TokenizerInferred(family="o200k", reported_tokens=1617, counted_tokens=1617),
        CalibrationCapped(source="heuristic", factor=1.575, observed=10.7, origin="usage"),
        UsageExcludesCached(
            reported_tokens=412, cached_tokens=9_984, evidence="below the 10,380 tokens measured"
        ),
        UsageMismatch(reported_tokens=14_976, counted_tokens=14_020, counter="local:llama3"),
        RemoteCountFailed(
            counter="vllm POST /tokenize", error="timed out after 2.0 s", fallback="heuristic:qwen"
        ),
        TranscriptPruned(
            dropped_turns=3,
            dropped_messages=7,
            kept_messages=12,
            tokens_before=130_000,
            tokens_after=90_000,
            budget=100_000,
        ),
        ContextEdited(
            edit="clear",
            messages=(3, 5),
            tool_names=("read_file",),
            tokens_before=17_400,
            tokens_after=60,
            tokens_freed=17_340,
            new=True,
        ),
        TranscriptDeferred(reason="orphaned tool result", problems=("message 4: orphan",)),
        MaxTokensShrunk(
            requested=128_000,
            max_tokens=30_000,
            estimated_input_tokens=90_000,
            context_window=128_000,
            safety_buffer=1000,
            reason="window",
        ),
        ContextEmergencyShrink(
            requested=4096,
            max_tokens=256,
            estimated_input_tokens=127_900,
            context_window=128_000,
            safety_buffer=1000,
            floor=256,
        ),
        model_call(),
        CalibrationUpdated(factor=1.12, reported_tokens=1200),
        ContextPressure(tokens=1200, window=128_000, pressure=1200 / 128_000),
        PressureThresholdCrossed(
            threshold=0.8, direction="up", tokens=110_000, window=128_000, pressure=0.859375
        ),
        ToolCallEvent(
            run_id="r1", step=1, call_id="call_0", name="read_file", arguments='{"path": "a b"}'
        ),
        ToolResultEvent(
            run_id="r1", step=1, call_id="call_0", name="read_file", is_error=True, chars=42
        ),
        ProviderErrorEvent(
            run_id="r1",
            step=2,
            site="loop",
            failure_kind="rate_limited",
            retryable=True,
            status=429,
            message="Rate limit reached",
            decision="retry",
        ),
        GuardPassthrough(
            api="responses", model="gpt-4o", reason="previous_response_id= is server-side"
        ),
        ProxyRefused(
            api="chat",
            code="context_truncated",
            message="head + newest turn need 9,100 tokens; the window is 8,192",
            estimated_tokens=9_100,
            budget=7_180,
            context_window=8_192,
        ),
        RetryScheduled(run_id="r1", step=2, attempt=1, delay_seconds=1.5, reason="rate_limited"),
        RunFinished(
            run_id="r1",
            termination="COMPLETED",
            iterations=2,
            model_calls=2,
            input_tokens=2400,
            output_tokens=160,
        ),
    ]


def all_kinds() -> set[str]:
    kinds: set[str] = set()
    stack: list[type[Event]] = [Event]
    while stack:
        cls = stack.pop()
        kinds.add(cls.kind)
        stack.extend(cls.__subclasses__())
    return kinds - {Event.kind}


def test_samples_cover_every_event_kind() -> None:
    assert {e.kind for e in one_of_each()} == all_kinds()


# --- emit and as_sinks ---------------------------------------------------------------


class Boom:
    def __call__(self, event: Event) -> None:
        raise RuntimeError(f"sink broke on {event.kind}")

    def __repr__(self) -> str:
        return "<Boom sink>"


def test_emit_calls_every_sink_in_order() -> None:
    seen: list[tuple[str, str]] = []
    event = model_call()
    emit(event, [lambda e: seen.append(("a", e.kind)), lambda e: seen.append(("b", e.kind))])
    assert seen == [("a", "model_call"), ("b", "model_call")]


def test_failing_sink_is_logged_and_the_others_still_get_the_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before, after = EventRecorder(), EventRecorder()
    event = model_call()
    with caplog.at_level(logging.ERROR, logger="windowguard"):
        emit(event, [before, Boom(), after])
    assert before == [event]
    assert after == [event]
    [record] = [r for r in caplog.records if r.name == "windowguard"]
    assert record.levelno == logging.ERROR
    assert "<Boom sink>" in record.getMessage()
    assert "model_call" in record.getMessage()
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)
    assert "sink broke on model_call" in caplog.text


def test_emit_does_not_swallow_keyboard_interrupt() -> None:
    def interrupt(event: Event) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        emit(model_call(), [interrupt])


def test_as_sinks_accepts_none_one_callable_or_an_iterable() -> None:
    recorder = EventRecorder()

    def fn(event: Event) -> None:
        pass

    assert as_sinks(None) == ()
    assert as_sinks(fn) == (fn,)
    assert as_sinks(recorder)[0] is recorder  # a recorder is a list, but it is one sink
    assert as_sinks(iter([fn, recorder])) == (fn, recorder)


@pytest.mark.parametrize(
    ("sinks", "needle"),
    [([print, 3], "sinks[1] is not callable"), ("logfile.jsonl", "callables"), (7, "iterable")],
)
def test_as_sinks_rejects_what_cannot_be_a_sink(sinks: Any, needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        as_sinks(sinks)


# --- LoggingSink ---------------------------------------------------------------------


def test_logging_sink_writes_kind_and_fields_and_attaches_the_dict(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("test_sinks.logging")
    event = model_call()
    with caplog.at_level(logging.DEBUG, logger=logger.name):
        LoggingSink(logger)(event)
    [record] = caplog.records
    assert record.name == logger.name
    assert record.levelno == logging.INFO
    assert record.getMessage() == (
        "model_call run_id=r1 step=1 site=loop input_tokens=1200 output_tokens=80 "
        "cache_read_tokens=1000 cache_write_tokens=0 max_tokens=4096 stop_reason=tool_calls "
        "tool_calls=2"
    )
    assert record.windowguard_event == event.to_dict()


def test_logging_sink_quotes_values_that_would_break_key_value_parsing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    event = ToolCallEvent(run_id="r1", step=3, call_id="c", name="sh", arguments='{"cmd": "ls"}')
    with caplog.at_level(logging.INFO, logger="windowguard"):
        LoggingSink()(event)
        LoggingSink()(ContextPressure(tokens=1, window=3, pressure=1 / 3))
        LoggingSink()(TranscriptDeferred(reason="bad", problems=("x y",)))
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].endswith(r'arguments="{\"cmd\": \"ls\"}"')
    assert messages[1] == "context_pressure tokens=1 window=3 pressure=0.3333"
    assert messages[2] == 'transcript_deferred reason=bad problems=["x y"]'


@pytest.mark.parametrize("event", one_of_each(), ids=lambda e: e.kind)
def test_logging_sink_warns_only_for_the_warning_kinds(
    event: Event, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="windowguard"):
        LoggingSink(level=logging.DEBUG)(event)
    [record] = caplog.records
    warn = event.kind in {"provider_error", "context_emergency_shrink", "transcript_deferred"}
    assert record.levelno == (logging.WARNING if warn else logging.DEBUG)
    assert record.getMessage().split(" ", 1)[0] == event.kind


def test_logging_sink_respects_the_logger_level(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="windowguard"):
        sink = LoggingSink()
        for event in one_of_each():
            sink(event)
    assert sorted({r.windowguard_event["event"] for r in caplog.records}) == [
        "context_emergency_shrink",
        "provider_error",
        "transcript_deferred",
    ]


def test_logging_sink_rejects_a_non_int_level() -> None:
    with pytest.raises(ConfigurationError, match="level"):
        LoggingSink(level="INFO")  # type: ignore[arg-type]


# --- JsonlSink -----------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_jsonl_lines_parse_back_to_the_event_dicts(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    events = one_of_each()
    with JsonlSink(path) as sink:
        for event in events:
            sink(event)
    assert read_jsonl(path) == [e.to_dict() for e in events]


def test_jsonl_appends_to_an_existing_file_and_flushes_each_event(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"event": "earlier"}\n', encoding="utf-8")
    sink = JsonlSink(str(path))
    sink(model_call(step=1))
    # Visible to another reader before close: nothing waits in a buffer.
    assert [d["event"] for d in read_jsonl(path)] == ["earlier", "model_call"]
    sink(model_call(step=2))
    assert [d.get("step") for d in read_jsonl(path)] == [None, 1, 2]
    sink.close()
    sink.close()
    assert sink.closed


def test_jsonl_after_close_raises_and_emit_keeps_the_run_going(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = JsonlSink(tmp_path / "e.jsonl")
    sink.close()
    with pytest.raises(ConfigurationError, match="closed"):
        sink(model_call())
    recorder = EventRecorder()
    with caplog.at_level(logging.ERROR, logger="windowguard"):
        emit(model_call(), [sink, recorder])
    assert len(recorder) == 1
    assert "JsonlSink(" in caplog.text


def test_jsonl_a_killed_process_loses_nothing_already_emitted(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    code = f"""
import os, signal
from windowguard.core.events import ContextPressure
from windowguard.run.sinks import JsonlSink, emit
sink = JsonlSink({str(path)!r})
for tokens in (10, 20, 30):
    emit(ContextPressure(tokens=tokens, window=100, pressure=tokens / 100), [sink])
os.kill(os.getpid(), signal.SIGKILL)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == -9, done.stderr
    assert [d["tokens"] for d in read_jsonl(path)] == [10, 20, 30]


def test_jsonl_lines_from_concurrent_threads_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "threads.jsonl"
    threads_n, per_thread = 8, 200
    with JsonlSink(path) as sink:

        def work(thread: int) -> None:
            for step in range(per_thread):
                sink(model_call(run_id=f"t{thread}", step=step, stop_reason="x" * 500))

        threads = [threading.Thread(target=work, args=(i,)) for i in range(threads_n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rows = read_jsonl(path)
    assert len(rows) == threads_n * per_thread
    for thread in range(threads_n):
        steps = [r["step"] for r in rows if r["run_id"] == f"t{thread}"]
        assert steps == list(range(per_thread))


def test_jsonl_unopenable_path_fails_at_construction(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing-dir"):
        JsonlSink(tmp_path / "missing-dir" / "e.jsonl")


@settings(deadline=None, max_examples=60)
@given(
    names=st.lists(st.text(), min_size=1, max_size=5),
    arguments=st.text(),
    tokens=st.integers(min_value=0, max_value=10**7),
)
def test_jsonl_round_trips_arbitrary_text(
    tmp_path_factory: pytest.TempPathFactory, names: list[str], arguments: str, tokens: int
) -> None:
    path = tmp_path_factory.mktemp("rt") / "e.jsonl"
    events: list[Event] = [
        ToolCallEvent(run_id="r", step=i, call_id=f"c{i}", name=n, arguments=arguments)
        for i, n in enumerate(names)
    ]
    events.append(TranscriptDeferred(reason=arguments, problems=tuple(names)))
    events.append(model_call(input_tokens=tokens, stop_reason=None))
    with JsonlSink(path) as sink:
        for event in events:
            sink(event)
    # One physical line per event, whatever the strings hold (newlines, U+2028 ...).
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(line) for line in lines[:-1]] == [e.to_dict() for e in events]


# --- capture_events ------------------------------------------------------------------


def test_capture_events_records_and_filters() -> None:
    events_in = one_of_each()
    with capture_events() as events:
        for event in events_in:
            emit(event, as_sinks([events]))
    assert events == events_in
    assert events.kinds() == [e.kind for e in events_in]
    assert events.of_kind("model_call") == [e for e in events_in if isinstance(e, ModelCall)]
    typed = events.of_kind(ModelCall)
    assert [m.input_tokens for m in typed] == [1200]
    assert events.of_kind("retry_scheduled")[0].to_dict()["delay_seconds"] == 1.5


def test_capture_events_starts_empty_each_time() -> None:
    with capture_events() as first:
        first(model_call())
    with capture_events() as second:
        pass
    assert len(first) == 1
    assert second == []
    assert second.kinds() == []
    assert second.of_kind("model_call") == []


def test_of_kind_rejects_unknown_kinds() -> None:
    with capture_events() as events, pytest.raises(ConfigurationError, match="model_calls"):
        events.of_kind("model_calls")
    with pytest.raises(ConfigurationError, match="Event class"):
        events.of_kind(int)  # type: ignore[type-var]


# --- OpenTelemetry -------------------------------------------------------------------

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode  # noqa: E402


class Otel:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = sdk_trace.TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer = self.tracer_provider.get_tracer("test")

    def sink(self, **kw: Any) -> OpenTelemetrySink:
        return OpenTelemetrySink(self.tracer, self.meter_provider.get_meter("test"), **kw)

    def points(self, name: str) -> list[HistogramDataPoint]:
        data = self.reader.get_metrics_data()
        out: list[HistogramDataPoint] = []
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        out.extend(metric.data.data_points)  # type: ignore[arg-type]
        return out

    def finished(self, name: str) -> Any:
        return [s for s in self.spans.get_finished_spans() if s.name == name]


@pytest.fixture
def otel() -> Iterator[Otel]:
    o = Otel()
    yield o
    o.tracer_provider.shutdown()
    o.meter_provider.shutdown()


def test_otel_run_becomes_a_span_with_genai_attributes_and_events(otel: Otel) -> None:
    sink = otel.sink(provider_name="openai")
    events = one_of_each()
    for event in events:
        sink(event)
    [span] = otel.finished("invoke_agent")
    attrs = dict(span.attributes)
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.request.model"] == "gpt-4o"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["windowguard.run_id"] == "r1"
    assert attrs["windowguard.context_window"] == 128_000
    assert attrs["windowguard.termination"] == "COMPLETED"
    assert attrs["gen_ai.usage.input_tokens"] == 2400
    assert attrs["gen_ai.usage.output_tokens"] == 160
    assert "error.type" not in attrs
    assert span.status.status_code is StatusCode.UNSET
    # Every event but run_started lands on the run's span, including those without run_id.
    assert [e.name for e in span.events] == [f"windowguard.{e.kind}" for e in events[1:]]

    by_name = {e.name: dict(e.attributes) for e in span.events}
    call = by_name["windowguard.model_call"]
    assert call["gen_ai.operation.name"] == "chat"
    assert call["gen_ai.request.model"] == "gpt-4o"
    assert call["gen_ai.provider.name"] == "openai"
    assert call["gen_ai.usage.input_tokens"] == 1200
    assert call["gen_ai.usage.output_tokens"] == 80
    assert call["gen_ai.usage.cache_read.input_tokens"] == 1000
    assert call["gen_ai.usage.cache_creation.input_tokens"] == 0
    assert call["gen_ai.request.max_tokens"] == 4096
    assert call["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert call["windowguard.step"] == 1
    assert call["windowguard.site"] == "loop"
    assert "windowguard.input_tokens" not in call

    tool_call = by_name["windowguard.tool_call"]
    assert tool_call["gen_ai.tool.name"] == "read_file"
    assert tool_call["gen_ai.tool.call.id"] == "call_0"
    assert tool_call["gen_ai.operation.name"] == "execute_tool"
    assert tool_call["windowguard.arguments_chars"] == len('{"path": "a b"}')
    assert not any("arguments" in k and k != "windowguard.arguments_chars" for k in tool_call)

    tool_result = by_name["windowguard.tool_result"]
    assert tool_result["error.type"] == "tool_error"
    assert tool_result["windowguard.is_error"] is True

    error = by_name["windowguard.provider_error"]
    assert error["error.type"] == "rate_limited"
    assert error["http.response.status_code"] == 429
    assert error["windowguard.retryable"] is True

    assert by_name["windowguard.context_pressure"]["windowguard.tokens"] == 1200
    assert by_name["windowguard.transcript_deferred"]["windowguard.problems"] == (
        "message 4: orphan",
    )
    # None fields are left out (OpenTelemetry attributes cannot be None).
    assert "windowguard.requested" in by_name["windowguard.max_tokens_shrunk"]


def test_otel_token_usage_and_pressure_metrics(otel: Otel) -> None:
    sink = otel.sink(provider_name="anthropic")
    sink(RunStarted(run_id="r1", model="claude-x", context_window=200_000, window_source="catalog"))
    sink(model_call(input_tokens=1000, output_tokens=50))
    sink(model_call(step=2, input_tokens=3000, output_tokens=None))
    sink(ContextPressure(tokens=3000, window=200_000, pressure=0.015))
    sink(ContextPressure(tokens=180_000, window=200_000, pressure=0.9))

    usage = {p.attributes["gen_ai.token.type"]: p for p in otel.points("gen_ai.client.token.usage")}
    assert set(usage) == {"input", "output"}
    assert (usage["input"].count, usage["input"].sum) == (2, 4000)
    assert (usage["output"].count, usage["output"].sum) == (1, 50)
    for point in usage.values():
        assert point.attributes["gen_ai.operation.name"] == "chat"
        assert point.attributes["gen_ai.request.model"] == "claude-x"
        assert point.attributes["gen_ai.provider.name"] == "anthropic"
    assert list(usage["input"].explicit_bounds) == [float(4**i) for i in range(14)]

    [pressure] = otel.points("windowguard.context.pressure")
    assert pressure.count == 2
    assert pressure.sum == pytest.approx(0.915)
    assert pressure.attributes["gen_ai.request.model"] == "claude-x"


@pytest.mark.parametrize("termination", ["PROVIDER_ERROR", "CONTEXT_TRUNCATED"])
def test_otel_failed_run_span_has_error_status(otel: Otel, termination: str) -> None:
    sink = otel.sink()
    sink(RunStarted(run_id="r", model="m", context_window=8192, window_source="fallback"))
    sink(RunFinished(run_id="r", termination=termination, iterations=1, model_calls=0,
                     input_tokens=0, output_tokens=0))  # fmt: skip
    [span] = otel.finished("invoke_agent")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == termination.lower()
    assert "gen_ai.provider.name" not in span.attributes


def test_otel_run_span_is_a_child_of_the_current_span_and_orphans_go_there(otel: Otel) -> None:
    sink = otel.sink()
    with otel.tracer.start_as_current_span("agent") as outer:
        sink(ContextPressure(tokens=1, window=10, pressure=0.1))  # no run yet
        sink(RunStarted(run_id="r", model="m", context_window=10, window_source="explicit"))
        sink(model_call(run_id="r"))
        sink(RunFinished(run_id="r", termination="COMPLETED", iterations=1, model_calls=1,
                         input_tokens=1, output_tokens=1))  # fmt: skip
        sink(model_call(run_id="unknown-run"))  # no open span for it: the current span
        assert trace.get_current_span() is outer
    [agent] = otel.finished("agent")
    [run] = otel.finished("invoke_agent")
    assert run.parent is not None
    assert run.parent.span_id == agent.context.span_id
    assert [e.name for e in agent.events] == [
        "windowguard.context_pressure",
        "windowguard.model_call",
    ]
    assert "gen_ai.request.model" not in agent.events[1].attributes


def test_otel_without_any_span_still_records_metrics(otel: Otel) -> None:
    sink = otel.sink()
    sink(model_call())  # no run, no current span: the span event is dropped, not an error
    assert {
        p.attributes["gen_ai.token.type"] for p in otel.points("gen_ai.client.token.usage")
    } == {
        "input",
        "output",
    }
    assert otel.spans.get_finished_spans() == ()


def _run(sink: OpenTelemetrySink, run_id: str, barrier: threading.Barrier | None) -> None:
    sink(RunStarted(run_id=run_id, model=f"model-{run_id}", context_window=100, window_source="x"))
    for step in range(3):
        if barrier is not None:
            barrier.wait()
        # No run_id on these: they must find their run through the thread / task.
        sink(ContextPressure(tokens=step, window=100, pressure=step / 100))
        sink(CalibrationUpdated(factor=1.0 + step, reported_tokens=step))
    sink(RunFinished(run_id=run_id, termination="COMPLETED", iterations=3, model_calls=3,
                     input_tokens=0, output_tokens=0))  # fmt: skip


def _assert_runs_kept_apart(otel: Otel, run_ids: list[str]) -> None:
    spans = {s.attributes["windowguard.run_id"]: s for s in otel.finished("invoke_agent")}
    assert sorted(spans) == sorted(run_ids)
    for span in spans.values():
        names = [e.name for e in span.events]
        assert names.count("windowguard.context_pressure") == 3
        assert names.count("windowguard.calibration_updated") == 3
        assert names[-1] == "windowguard.run_finished"


def test_otel_concurrent_threads_keep_their_runs_apart(otel: Otel) -> None:
    sink = otel.sink()
    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=_run, args=(sink, rid, barrier)) for rid in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _assert_runs_kept_apart(otel, ["a", "b"])


def test_otel_concurrent_asyncio_tasks_keep_their_runs_apart(otel: Otel) -> None:
    sink = otel.sink()

    async def run(run_id: str) -> None:
        sink(RunStarted(run_id=run_id, model="m", context_window=100, window_source="x"))
        for step in range(3):
            await asyncio.sleep(0)
            sink(ContextPressure(tokens=step, window=100, pressure=step / 100))
            sink(CalibrationUpdated(factor=1.0, reported_tokens=step))
        sink(RunFinished(run_id=run_id, termination="COMPLETED", iterations=3, model_calls=3,
                         input_tokens=0, output_tokens=0))  # fmt: skip

    async def main() -> None:
        await asyncio.gather(run("x"), run("y"), run("z"))

    asyncio.run(main())
    _assert_runs_kept_apart(otel, ["x", "y", "z"])


def test_otel_nested_run_hands_back_to_the_outer_run(otel: Otel) -> None:
    sink = otel.sink()
    sink(RunStarted(run_id="outer", model="m", context_window=100, window_source="x"))
    _run(sink, "inner", None)
    sink(CalibrationUpdated(factor=2.0, reported_tokens=5))
    sink(RunFinished(run_id="outer", termination="COMPLETED", iterations=1, model_calls=1,
                     input_tokens=0, output_tokens=0))  # fmt: skip
    spans = {s.attributes["windowguard.run_id"]: s for s in otel.finished("invoke_agent")}
    outer_events = [e.name for e in spans["outer"].events]
    assert outer_events == ["windowguard.calibration_updated", "windowguard.run_finished"]
    assert spans["inner"].parent is None  # sibling spans: the sink sets no current context


def test_otel_restarted_run_id_closes_the_stale_span(otel: Otel) -> None:
    sink = otel.sink()
    sink(RunStarted(run_id="r", model="m", context_window=100, window_source="x"))
    sink(RunStarted(run_id="r", model="m", context_window=100, window_source="x", resumed=True))
    assert len(otel.finished("invoke_agent")) == 1
    sink(RunFinished(run_id="r", termination="SUSPENDED", iterations=1, model_calls=1,
                     input_tokens=0, output_tokens=0))  # fmt: skip
    [stale, resumed] = otel.finished("invoke_agent")
    assert resumed.attributes["windowguard.resumed"] is True
    assert [e.name for e in resumed.events] == ["windowguard.run_finished"]
    assert stale.events == ()


def test_otel_failing_inside_emit_never_breaks_the_run(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    otel_sink = otel.sink()
    recorder = EventRecorder()
    with caplog.at_level(logging.ERROR, logger="windowguard"):
        for event in one_of_each():
            emit(event, [otel_sink, Boom(), recorder])
    assert len(recorder) == len(one_of_each())
    assert len(otel.finished("invoke_agent")) == 1


def test_otel_missing_package_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("opentelemetry", "opentelemetry.trace", "opentelemetry.metrics"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError, match=r'pip install "windowguard\[otel\]"'):
        OpenTelemetrySink()


def test_importing_sinks_does_not_import_opentelemetry() -> None:
    code = "import sys, windowguard.run.sinks; print('opentelemetry' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_otel_defaults_use_the_global_providers() -> None:
    # Without an SDK configured the global API is a no-op; the sink must still accept
    # every event.
    sink = OpenTelemetrySink()
    for event in one_of_each():
        sink(event)
    assert "OpenTelemetrySink" in repr(sink)


# --- issue 12: no credential leaves through a sink ---------------------------------

_SECRETS = (
    "sk-proj-AbCdEf0123456789GhIjKlMnOpQrStUvWxYz",
    "sk-ant-api03-AbCdEf0123456789-GhIjKl_MnOpQrSt",
    "5up3r-s3cr3t-h3ad3r-valu3",
)


def _leaky_error() -> ProviderErrorEvent:
    """A provider_error event built by hand (no classifier in between) that echoes keys."""
    return ProviderErrorEvent(
        run_id="r1",
        step=2,
        site="loop",
        failure_kind="auth",
        retryable=False,
        status=401,
        message=f"bad key {_SECRETS[0]}; sent Authorization: Bearer {_SECRETS[1]} and "
        f"x-api-key: {_SECRETS[2]}",
        decision="stop",
    )


def test_jsonl_sink_redacts_credentials(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with JsonlSink(path) as sink:
        sink(_leaky_error())
    text = path.read_text()
    assert not any(secret in text for secret in _SECRETS)
    line = json.loads(text)
    assert line["event"] == "provider_error" and line["status"] == 401
    assert line["message"].count("[REDACTED]") == 3


def test_logging_sink_redacts_credentials(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.redact")
    with caplog.at_level(logging.INFO, logger="test.redact"):
        LoggingSink(logger)(_leaky_error())
    [record] = caplog.records
    assert not any(secret in record.getMessage() for secret in _SECRETS)
    data = record.windowguard_event  # type: ignore[attr-defined]
    assert not any(secret in json.dumps(data) for secret in _SECRETS)
    assert "[REDACTED]" in data["message"]


def test_otel_sink_redacts_credentials(otel: Otel) -> None:
    sink = otel.sink()
    sink(RunStarted(run_id="r1", model="m", context_window=8192, window_source="explicit"))
    sink(_leaky_error())
    sink(
        RunFinished(
            run_id="r1",
            termination="PROVIDER_ERROR",
            iterations=1,
            model_calls=1,
            input_tokens=0,
            output_tokens=0,
        )
    )
    [span] = otel.finished("invoke_agent")
    [error] = [e for e in span.events if e.name == "windowguard.provider_error"]
    message = dict(error.attributes)["windowguard.message"]
    assert "[REDACTED]" in message
    assert not any(secret in str(dict(error.attributes)) for secret in _SECRETS)
