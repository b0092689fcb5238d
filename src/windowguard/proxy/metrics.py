"""The proxy's counters and its added-latency histogram, in Prometheus text format.

``GET /metrics`` answers :meth:`ProxyMetrics.render`: the Prometheus text exposition
format 0.0.4 (``# HELP`` / ``# TYPE`` lines, then one sample a line), written by hand so
the proxy needs no ``prometheus_client``.

Metrics (all prefixed ``windowguard_proxy_``):

==============================  =========  ==================================================
name                            type       what
==============================  =========  ==================================================
``requests_total``              counter    requests received, by ``api`` (``chat``,
                                           ``messages``, ``responses``, ``passthrough``)
``pruned_requests_total``       counter    fitted requests that left turns out, by ``api``
``dropped_turns_total``         counter    turns left out, summed over fitted requests
``edited_requests_total``       counter    fitted requests whose tool results were newly
                                           clamped or cleared (``--clamp-tool-results``,
                                           ``--clear-tool-results``)
``shrinks_total``               counter    requests whose reply budget was lowered
``refusals_total``              counter    requests answered 400 ``context_truncated``
                                           without contacting the upstream
``refits_total``                counter    reactive refits after an upstream overflow
``upstream_errors_total``       counter    upstream error answers, by classified ``kind``
``client_disconnects_total``    counter    fitted requests whose client went away before
                                           the answer's headers: the upstream request
                                           was cancelled
``state_evictions_total``       counter    remembered conversations forgotten to keep the
                                           state within ``--max-state-mb``, by ``reason``
``state_bytes``                 gauge      estimated bytes the remembered conversations
                                           hold now (every model's)
``state_conversations``         gauge      conversations remembered now
``added_latency_seconds``       histogram  the proxy's own time before the upstream
                                           request goes out (read, fit, count), by ``api``
``fit_seconds``                 histogram  the same from when the whole body is in (parse,
                                           fit, count: what the proxy does, not how fast
                                           the client sends), by ``api``
==============================  =========  ==================================================

Invariants: counters only grow; label values are from closed sets (API names and
:class:`~windowguard.FailureKind` values), never from client input, so the number of
series is bounded; updates are thread-safe.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from typing import Final

__all__ = ["LATENCY_BUCKETS", "ProxyMetrics"]

LATENCY_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)
"""Upper bounds (seconds) of the added-latency histogram's buckets (``+Inf`` added)."""

_PREFIX: Final = "windowguard_proxy_"
_COUNTERS: Final = {
    "requests_total": ("api", "Requests received."),
    "pruned_requests_total": ("api", "Fitted requests that left whole turns out."),
    "dropped_turns_total": ("api", "Turns left out, summed over fitted requests."),
    "edited_requests_total": (
        "api",
        "Fitted requests whose tool results were newly clamped or cleared.",
    ),
    "shrinks_total": ("api", "Requests whose reply budget was lowered to fit."),
    "refusals_total": (
        "api",
        "Requests refused with context_truncated; the upstream was not contacted.",
    ),
    "refits_total": ("api", "Reactive refits after an upstream context overflow."),
    "upstream_errors_total": ("kind", "Upstream error answers, by classified failure kind."),
    "client_disconnects_total": (
        "api",
        "Fitted requests whose client went away before the answer; the upstream request "
        "was cancelled.",
    ),
    "state_evictions_total": (
        "reason",
        "Remembered conversations forgotten to keep the state within --max-state-mb.",
    ),
}
_GAUGES: Final = {
    "state_bytes": "Estimated bytes the remembered conversations hold (every model's).",
    "state_conversations": "Conversations remembered now.",
}


_HISTOGRAMS: Final = {
    "added_latency_seconds": (
        "Time the proxy adds before the upstream request goes out (reading, fitting, counting)."
    ),
    "fit_seconds": (
        "Time from the whole request body read to the upstream request going out "
        "(parsing, fitting, counting)."
    ),
}


class _Histogram:
    __slots__ = ("buckets", "counts", "sums")

    def __init__(self) -> None:
        self.buckets: dict[str, list[int]] = {}
        self.sums: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    def observe(self, api: str, seconds: float) -> None:
        buckets = self.buckets.get(api)
        if buckets is None:
            buckets = self.buckets[api] = [0] * len(LATENCY_BUCKETS)
        index = bisect.bisect_left(LATENCY_BUCKETS, seconds)
        if index < len(buckets):
            buckets[index] += 1
        self.sums[api] += seconds
        self.counts[api] += 1

    def render(self, full: str, help_text: str) -> list[str]:
        lines = [f"# HELP {full} {help_text}", f"# TYPE {full} histogram"]
        for api in sorted(self.buckets):
            cumulative = 0
            for bound, count in zip(LATENCY_BUCKETS, self.buckets[api], strict=True):
                cumulative += count
                lines.append(f'{full}_bucket{{api="{api}",le="{bound}"}} {cumulative}')
            lines.append(f'{full}_bucket{{api="{api}",le="+Inf"}} {self.counts[api]}')
            lines.append(f'{full}_sum{{api="{api}"}} {_number(self.sums[api])}')
            lines.append(f'{full}_count{{api="{api}"}} {self.counts[api]}')
        return lines


class ProxyMetrics:
    """Thread-safe counters and the added-latency histogram of one proxy."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[str, float]] = {
            name: defaultdict(float) for name in _COUNTERS
        }
        self._gauges: dict[str, float] = dict.fromkeys(_GAUGES, 0.0)
        self._histograms = {name: _Histogram() for name in _HISTOGRAMS}

    def inc(self, name: str, label: str, amount: float = 1.0) -> None:
        """Add ``amount`` to counter ``name`` (without its prefix) under ``label``."""
        if name not in _COUNTERS:
            raise KeyError(name)
        with self._lock:
            self._counters[name][label] += amount

    def set_gauge(self, name: str, value: float) -> None:
        """Set gauge ``name`` (without its prefix) to ``value``."""
        if name not in _GAUGES:
            raise KeyError(name)
        with self._lock:
            self._gauges[name] = value

    def gauge(self, name: str) -> float:
        """The current value of gauge ``name``."""
        with self._lock:
            return self._gauges[name]

    def observe_latency(self, api: str, seconds: float) -> None:
        """Record one request's added latency."""
        with self._lock:
            self._histograms["added_latency_seconds"].observe(api, seconds)

    def observe_fit(self, api: str, seconds: float) -> None:
        """Record one request's time from its whole body to going upstream."""
        with self._lock:
            self._histograms["fit_seconds"].observe(api, seconds)

    def value(self, name: str, label: str) -> float:
        """The current value of counter ``name`` under ``label`` (0 when never set)."""
        with self._lock:
            return self._counters[name].get(label, 0.0)

    def totals(self) -> dict[str, dict[str, float]]:
        """Every counter's values by label (the live page's copy of ``/metrics``)."""
        with self._lock:
            return {name: dict(sorted(values.items())) for name, values in self._counters.items()}

    def render(self) -> str:
        """The Prometheus text exposition (format 0.0.4) of every metric."""
        lines: list[str] = []
        with self._lock:
            for name, (label, help_text) in _COUNTERS.items():
                full = _PREFIX + name
                lines.append(f"# HELP {full} {help_text}")
                lines.append(f"# TYPE {full} counter")
                for value_label, value in sorted(self._counters[name].items()):
                    lines.append(f'{full}{{{label}="{_escape(value_label)}"}} {_number(value)}')
            for name, help_text in _GAUGES.items():
                full = _PREFIX + name
                lines.append(f"# HELP {full} {help_text}")
                lines.append(f"# TYPE {full} gauge")
                lines.append(f"{full} {_number(self._gauges[name])}")
            for name, help_text in _HISTOGRAMS.items():
                lines += self._histograms[name].render(_PREFIX + name, help_text)
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
