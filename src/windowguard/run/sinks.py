"""Event sinks: where a run's typed events go.

A sink is any ``Callable[[Event], None]``: a function, a bound method, a structlog
processor-like callable, or one of the sinks shipped here (stdlib logging, a JSONL
file, OpenTelemetry, and :func:`capture_events` for tests). There is no wrapper type
for "a callable": pass the callable.

Invariants:

* :func:`emit` calls every sink, in order, once per event. A sink that raises is
  logged on the ``"windowguard"`` logger (with its repr and the traceback) and
  suppressed: observability never breaks a run, and one failing sink never keeps the
  event from the sinks after it. ``BaseException`` (``KeyboardInterrupt``,
  ``SystemExit``) is not caught.
* Sinks add what events deliberately lack: events hold no wall-clock time and no
  random ids (see :mod:`windowguard.core.events`); a log record, or a span, has its own
  timestamp.
* Importing this module never imports OpenTelemetry; :class:`OpenTelemetrySink`
  imports it when constructed and says which extra to install when it is missing.
* The shipped sinks write no credential: every string of an event passes through
  :func:`~windowguard.core.failures.redact_secrets` before it becomes a log record, a JSON
  line or an OpenTelemetry attribute (a last line of defence; failure messages are
  redacted where they are classified).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, TypeVar, overload

from ..core.events import (
    ContextPressure,
    Event,
    ModelCall,
    ProviderErrorEvent,
    RunFinished,
    RunStarted,
    ToolCallEvent,
    ToolResultEvent,
)
from ..core.exceptions import ConfigurationError
from ..core.failures import redact_secrets

if TYPE_CHECKING:
    from opentelemetry.metrics import Histogram, Meter
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "EventRecorder",
    "JsonlSink",
    "LoggingSink",
    "OpenTelemetrySink",
    "Sink",
    "as_sinks",
    "capture_events",
    "emit",
]

Sink = Callable[[Event], None]
"""Anything that takes an event. Its return value is ignored."""

E = TypeVar("E", bound=Event)

_log = logging.getLogger("windowguard")

_conversation: ContextVar[str | None] = ContextVar("windowguard_conversation", default=None)


@contextmanager
def in_conversation(key: str) -> Iterator[None]:
    """Events emitted inside this block belong to the conversation ``key``: a
    :class:`JsonlSink` line of one carries it as ``"conversation"``.

    The drop-in surfaces (``wg.guard``, the proxy) follow many conversations through one
    set of sinks; this is how a file of their events tells them apart (``windowguard
    plot`` draws one line per conversation). The event values themselves stay as they
    are. A context variable: each thread and asyncio task has its own.
    """
    token = _conversation.set(key)
    try:
        yield
    finally:
        _conversation.reset(token)


def current_conversation() -> str | None:
    """The key of the conversation an event being emitted now belongs to (inside
    :func:`in_conversation`), or None: how a sink tells a surface's conversations apart."""
    return _conversation.get()


def as_sinks(sinks: Sink | Iterable[Sink] | None) -> tuple[Sink, ...]:
    """Check sinks once, where a loop is configured, rather than failing on every event.

    A single callable is one sink (so ``sinks=recorder`` means what it says even
    though a recorder is also a list).

    Args:
        sinks: ``None``, one sink, or an iterable of sinks.

    Returns:
        The sinks as a tuple, in order.

    Raises:
        ConfigurationError: ``sinks`` is not iterable, or an item is not callable.
    """
    if sinks is None:
        return ()
    if callable(sinks):
        return (sinks,)
    if isinstance(sinks, (str, bytes)):
        raise ConfigurationError(f"sinks must be callables taking an event, got {sinks!r}")
    try:
        items = tuple(sinks)
    except TypeError:
        raise ConfigurationError(
            f"sinks must be an iterable of callables taking an event, got {sinks!r}"
        ) from None
    for index, item in enumerate(items):
        if not callable(item):
            raise ConfigurationError(
                f"sinks[{index}] is not callable: {item!r}; a sink is any Callable[[Event], None]"
            )
    return items


def emit(event: Event, sinks: Iterable[Sink]) -> None:
    """Give ``event`` to every sink; a sink that raises is logged and skipped.

    Args:
        event: the event to deliver.
        sinks: the sinks, called in order.
    """
    for sink in sinks:
        try:
            sink(event)
        except Exception:
            _log.exception(
                "event sink %r raised on a %s event; suppressed, the run continues",
                sink,
                event.kind,
            )


def _redacted(value: Any) -> Any:
    """``value`` (an event's dict, or any part of one) with every string redacted."""
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, dict):
        return {key: _redacted(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return redact_secrets(str(value))  # what json's default=str and str() would write


# --- stdlib logging ------------------------------------------------------------------


def _logfmt(value: Any) -> str:
    if isinstance(value, str):
        if value and not any(c.isspace() or c in '="\\' for c in value):
            return value
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return format(value, ".4g")
    return json.dumps(value, ensure_ascii=False, default=str)


class LoggingSink:
    """One stdlib log record per event: ``"<kind> k=v ..."``.

    The event's dict rides along as ``record.windowguard_event``, for handlers and
    formatters that want structure. Events that mean something went wrong or was
    overridden (``provider_error``, ``context_emergency_shrink``,
    ``transcript_deferred``) are logged at WARNING (or ``level`` if higher).

    Examples:
        >>> loop = ToolLoop(provider, sinks=[LoggingSink()])  # doctest: +SKIP
    """

    WARNING_KINDS = frozenset({"provider_error", "context_emergency_shrink", "transcript_deferred"})

    __slots__ = ("level", "logger")

    def __init__(self, logger: logging.Logger | None = None, level: int = logging.INFO) -> None:
        """Log to ``logger`` at ``level``.

        Args:
            logger: where records go; the ``"windowguard"`` logger by default.
            level: the level of ordinary events.

        Raises:
            ConfigurationError: ``level`` is not an int.
        """
        if not isinstance(level, int) or isinstance(level, bool):
            raise ConfigurationError(f"level must be a logging level int, got {level!r}")
        self.logger = logger if logger is not None else _log
        self.level = level

    def __call__(self, event: Event) -> None:
        level = max(self.level, logging.WARNING) if event.kind in self.WARNING_KINDS else self.level
        if not self.logger.isEnabledFor(level):
            return
        data = _redacted(event.to_dict())
        fields = " ".join(f"{k}={_logfmt(v)}" for k, v in data.items() if k != "event")
        message = f"{event.kind} {fields}" if fields else event.kind
        self.logger.log(level, message, extra={"windowguard_event": data})

    def __repr__(self) -> str:
        return f"LoggingSink(logger={self.logger.name!r}, level={logging.getLevelName(self.level)})"


# --- JSON lines ----------------------------------------------------------------------


class JsonlSink:
    """Appends one JSON line per event (its ``to_dict()``) to a file.

    An event a drop-in surface emitted for one of its conversations also carries the
    conversation's key under ``"conversation"`` (see :func:`in_conversation`).

    Each line is flushed as it is written, so a run killed at any point has every
    event it emitted on disk (up to the operating system; no fsync). Lines from
    concurrent runs sharing one sink never interleave.

    Examples:
        >>> with JsonlSink("run.jsonl") as sink:  # doctest: +SKIP
        ...     ToolLoop(provider, sinks=[sink]).run(messages)
    """

    __slots__ = ("_file", "_lock", "path")

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Open ``path`` for appending (created if missing).

        Events carry model text and tool output, so a new file is created ``0600``
        (owner only, whatever the umask), and an existing regular file that others may
        read is made ``0600``, with a log line saying so.

        Args:
            path: the JSONL file.

        Raises:
            OSError: the file cannot be opened for appending.
        """
        import stat

        self.path = os.fspath(path)
        self._lock = threading.Lock()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISREG(mode) and stat.S_IMODE(mode) & 0o077:
                try:
                    os.fchmod(fd, stat.S_IMODE(mode) & 0o700)
                except OSError as exc:
                    _log.warning("could not make event file %s private: %s", self.path, exc)
                else:
                    _log.warning(
                        "event file %s was readable by others (mode %04o); made it %04o, "
                        "as it holds model text and tool output",
                        self.path,
                        stat.S_IMODE(mode),
                        stat.S_IMODE(mode) & 0o700,
                    )
            self._file: IO[str] | None = open(  # noqa: SIM115 -- closed by close()/__exit__
                fd, "a", encoding="utf-8", buffering=1
            )
        except BaseException:
            os.close(fd)
            raise

    def __call__(self, event: Event) -> None:
        data = event.to_dict()
        conversation = _conversation.get()
        if conversation is not None:  # emitted for one of a surface's conversations
            data.setdefault("conversation", conversation)
        line = json.dumps(_redacted(data), ensure_ascii=False, default=str) + "\n"
        with self._lock:
            if self._file is None:
                raise ConfigurationError(f"JsonlSink({self.path!r}) is closed")
            self._file.write(line)
            self._file.flush()

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._file is None

    def close(self) -> None:
        """Close the file. Idempotent; events after it raise (and ``emit`` logs them)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JsonlSink({self.path!r})"


# --- capture for tests ---------------------------------------------------------------


def _known_kinds() -> set[str]:
    kinds: set[str] = set()
    stack: list[type[Event]] = [Event]
    while stack:
        cls = stack.pop()
        kinds.add(cls.kind)
        stack.extend(cls.__subclasses__())
    kinds.discard(Event.kind)
    return kinds


class EventRecorder(list[Event]):
    """A list of events that is also a sink: calling it appends the event."""

    def __call__(self, event: Event) -> None:
        self.append(event)

    def kinds(self) -> list[str]:
        """The kinds of the recorded events, in order."""
        return [event.kind for event in self]

    @overload
    def of_kind(self, kind: str) -> list[Event]: ...
    @overload
    def of_kind(self, kind: type[E]) -> list[E]: ...
    def of_kind(self, kind: str | type[E]) -> list[Event] | list[E]:
        """The recorded events of one kind, in order.

        Args:
            kind: a kind name (``"model_call"``) or an event class (``ModelCall``, which
                also gives typed results).

        Returns:
            The matching events.

        Raises:
            ConfigurationError: ``kind`` names no event kind (a typo would otherwise
                make ``assert not events.of_kind(...)`` pass vacuously).
        """
        if isinstance(kind, str):
            if kind not in _known_kinds():
                known = ", ".join(sorted(_known_kinds()))
                raise ConfigurationError(f"unknown event kind {kind!r}; known kinds: {known}")
            return [event for event in self if event.kind == kind]
        if not (isinstance(kind, type) and issubclass(kind, Event)):
            raise ConfigurationError(f"kind must be a kind name or an Event class, got {kind!r}")
        return [event for event in self if isinstance(event, kind)]


@contextmanager
def capture_events() -> Iterator[EventRecorder]:
    """Record events for a test.

    Examples:
        >>> with capture_events() as events:
        ...     emit(ContextPressure(tokens=50, window=200, pressure=0.25), [events])
        >>> events.kinds()
        ['context_pressure']

    Yields:
        An empty :class:`EventRecorder`; it keeps its events after the block.
    """
    yield EventRecorder()


# --- OpenTelemetry -------------------------------------------------------------------

# GenAI semantic conventions (opentelemetry.io/docs/specs/semconv/gen-ai/): field names
# of our events that have a convention name; every other field is "windowguard.<field>".
_GENAI_NAMES: dict[str, dict[str, str]] = {
    "model_call": {
        "input_tokens": "gen_ai.usage.input_tokens",
        "output_tokens": "gen_ai.usage.output_tokens",
        "cache_read_tokens": "gen_ai.usage.cache_read.input_tokens",
        "cache_write_tokens": "gen_ai.usage.cache_creation.input_tokens",
        "max_tokens": "gen_ai.request.max_tokens",
    },
    "run_started": {"model": "gen_ai.request.model"},
    "run_finished": {
        "input_tokens": "gen_ai.usage.input_tokens",
        "output_tokens": "gen_ai.usage.output_tokens",
    },
    "tool_call": {"name": "gen_ai.tool.name", "call_id": "gen_ai.tool.call.id"},
    "tool_result": {"name": "gen_ai.tool.name", "call_id": "gen_ai.tool.call.id"},
    "provider_error": {"status": "http.response.status_code"},
}
# Tool arguments may hold user data; the conventions make them opt-in, so only their
# size is recorded.
_DROPPED: dict[str, frozenset[str]] = {"tool_call": frozenset({"arguments"})}
# Recommended buckets for gen_ai.client.token.usage (GenAI metrics conventions).
_TOKEN_BUCKETS = tuple(float(4**i) for i in range(14))
_PRESSURE_BUCKETS = (0.1, 0.25, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1.0, 1.1)
_ERROR_TERMINATIONS = frozenset({"provider_error", "context_truncated"})


def _attribute(value: Any) -> Any:
    """An OpenTelemetry attribute value (None means: leave the attribute out)."""
    if isinstance(value, (list, tuple)):
        return [str(item) for item in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return str(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    span: Span
    model: str
    previous: str | None


class OpenTelemetrySink:
    """Events as OpenTelemetry spans, span events and metrics (GenAI conventions).

    * ``run_started`` opens an ``invoke_agent`` span (a child of whatever span is
      current) that ``run_finished`` ends, with ``gen_ai.request.model``, usage totals
      and, for ``provider_error`` / ``context_truncated`` terminations, an ERROR status
      and ``error.type``.
    * Every other event becomes a span event ``windowguard.<kind>`` on its run's span
      (found by the event's ``run_id``, or else by the run started in the same thread
      or asyncio task), or on the current span when no run is known. Fields use GenAI
      names where one exists (``gen_ai.usage.input_tokens``, ``gen_ai.tool.name``,
      ``gen_ai.tool.call.id``, ``gen_ai.request.max_tokens``,
      ``gen_ai.response.finish_reasons``, ``error.type`` ...) and ``windowguard.<field>``
      otherwise.
    * ``model_call`` records ``gen_ai.client.token.usage`` (``gen_ai.token.type``
      input/output); ``context_pressure`` records ``windowguard.context.pressure``.

    A run that never finishes (its process killed) leaves its span unended.
    """

    __slots__ = (
        "_active",
        "_current_span",
        "_pressure",
        "_provider",
        "_runs",
        "_token_usage",
        "_tracer",
    )

    def __init__(
        self,
        tracer: Tracer | None = None,
        meter: Meter | None = None,
        *,
        provider_name: str | None = None,
    ) -> None:
        """Create the instruments; spans open as runs start.

        Args:
            tracer: opens the run spans; ``trace.get_tracer("windowguard")`` by default.
            meter: creates the instruments; ``metrics.get_meter("windowguard")`` by
                default.
            provider_name: ``gen_ai.provider.name`` ("openai", "anthropic" ...), which
                the conventions require on token usage and events do not carry.

        Raises:
            ImportError: opentelemetry-api is not installed.
        """
        try:
            from opentelemetry import metrics, trace
        except ImportError as exc:
            raise ImportError(
                'OpenTelemetrySink needs opentelemetry-api: pip install "windowguard[otel]"'
            ) from exc
        self._tracer = tracer if tracer is not None else trace.get_tracer("windowguard")
        meter = meter if meter is not None else metrics.get_meter("windowguard")
        self._current_span = trace.get_current_span
        self._token_usage: Histogram = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self._pressure: Histogram = meter.create_histogram(
            "windowguard.context.pressure",
            unit="1",
            description="Provider-reported prompt tokens over the context window.",
            explicit_bucket_boundaries_advisory=_PRESSURE_BUCKETS,
        )
        self._provider = provider_name
        self._runs: dict[str, _Run] = {}
        # Which run this thread / asyncio task is in, for events that carry no run_id.
        self._active: ContextVar[str | None] = ContextVar(
            f"windowguard_otel_run_{id(self)}", default=None
        )

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._start_run(event)
            return
        run_id = getattr(event, "run_id", None)
        run = self._runs.get(run_id if isinstance(run_id, str) else self._active.get() or "")
        attributes = self._attributes(event, run)
        if isinstance(event, ModelCall):
            self._record_usage(event, run)
        elif isinstance(event, ContextPressure):
            self._pressure.record(event.pressure, self._model_attributes(run))
        span = run.span if run is not None else self._current_span()
        span.add_event(f"windowguard.{event.kind}", attributes)
        if isinstance(event, RunFinished) and run is not None:
            self._finish_run(event, run)

    def _model_attributes(self, run: _Run | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if run is not None:
            out["gen_ai.request.model"] = run.model
        if self._provider is not None:
            out["gen_ai.provider.name"] = self._provider
        return out

    def _attributes(self, event: Event, run: _Run | None) -> dict[str, Any]:
        names = _GENAI_NAMES.get(event.kind, {})
        dropped = _DROPPED.get(event.kind, frozenset())
        out: dict[str, Any] = {}
        for key, raw in _redacted(event.to_dict()).items():
            value = _attribute(raw)
            if key == "event" or key in dropped or value is None:
                continue
            out[names.get(key, f"windowguard.{key}")] = value
        if isinstance(event, ModelCall):
            out["gen_ai.operation.name"] = "chat"
            out.update(self._model_attributes(run))
            if event.stop_reason is not None:
                out["gen_ai.response.finish_reasons"] = [event.stop_reason]
        elif isinstance(event, ToolCallEvent):
            out["gen_ai.operation.name"] = "execute_tool"
            out["windowguard.arguments_chars"] = len(event.arguments)
        elif isinstance(event, ToolResultEvent):
            out["gen_ai.operation.name"] = "execute_tool"
            if event.is_error:
                out["error.type"] = "tool_error"
        elif isinstance(event, ProviderErrorEvent):
            out["error.type"] = event.failure_kind
        return out

    def _record_usage(self, event: ModelCall, run: _Run | None) -> None:
        base = {"gen_ai.operation.name": "chat", **self._model_attributes(run)}
        if event.input_tokens is not None:
            self._token_usage.record(event.input_tokens, {**base, "gen_ai.token.type": "input"})
        if event.output_tokens is not None:
            self._token_usage.record(event.output_tokens, {**base, "gen_ai.token.type": "output"})

    def _start_run(self, event: RunStarted) -> None:
        stale = self._runs.pop(event.run_id, None)
        if stale is not None:  # started again without finishing: close the old span
            stale.span.end()
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            **self._model_attributes(None),
            **self._attributes(event, None),
        }
        span = self._tracer.start_span("invoke_agent", attributes=attributes)
        self._runs[event.run_id] = _Run(span=span, model=event.model, previous=self._active.get())
        self._active.set(event.run_id)

    def _finish_run(self, event: RunFinished, run: _Run) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._runs.pop(event.run_id, None)
        span = run.span
        span.set_attributes(self._attributes(event, run))
        termination = event.termination.lower()
        if termination in _ERROR_TERMINATIONS:
            span.set_attribute("error.type", termination)
            span.set_status(Status(StatusCode.ERROR, f"run ended {termination}"))
        span.end()
        if self._active.get() == event.run_id:
            self._active.set(run.previous)

    def __repr__(self) -> str:
        return f"OpenTelemetrySink(provider_name={self._provider!r})"
