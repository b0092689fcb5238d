"""ContextGauge: how full the window is (the pressure gauge: measurement only).

``pressure = tokens / window``, measured after each live model call from the
provider-reported input tokens. The gauge changes nothing about a run.

With thresholds (for example 0.8 and 0.95) the gauge also reports each crossing once:
``up`` when pressure reaches a threshold, and ``down`` only after it has fallen below
``threshold - hysteresis``, so a run hovering at a threshold does not flap.
"""

from __future__ import annotations

from collections.abc import Sequence

from .events import ContextPressure, PressureThresholdCrossed
from .exceptions import ConfigurationError

__all__ = ["ContextGauge"]


class ContextGauge:
    """Measures context pressure against one window.

    Examples:
        >>> ContextGauge(window=200_000).measure(tokens=50_000).to_dict()
        {'event': 'context_pressure', 'tokens': 50000, 'window': 200000, 'pressure': 0.25}
    """

    __slots__ = ("_above", "hysteresis", "thresholds", "window")

    def __init__(
        self, window: int, *, thresholds: Sequence[float] = (), hysteresis: float = 0.05
    ) -> None:
        if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
            raise ConfigurationError(f"window must be a positive int, got {window!r}")
        for t in thresholds:
            if not 0.0 < t <= 1.5:
                raise ConfigurationError(f"pressure thresholds must lie in (0, 1.5], got {t!r}")
        if not 0.0 <= hysteresis < 1.0:
            raise ConfigurationError(f"hysteresis must lie in [0, 1), got {hysteresis!r}")
        self.window = window
        self.thresholds = tuple(sorted(thresholds))
        self.hysteresis = hysteresis
        self._above: set[float] = set()

    def measure(self, tokens: int) -> ContextPressure:
        """The ``context_pressure`` event for ``tokens`` prompt tokens (no state change)."""
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise ConfigurationError(f"tokens must be a non-negative int, got {tokens!r}")
        return ContextPressure(tokens=tokens, window=self.window, pressure=tokens / self.window)

    def observe(self, tokens: int) -> tuple[ContextPressure | PressureThresholdCrossed, ...]:
        """Measure and report threshold crossings since the last observation."""
        reading = self.measure(tokens)
        events: list[ContextPressure | PressureThresholdCrossed] = [reading]
        for threshold in self.thresholds:
            if threshold not in self._above and reading.pressure >= threshold:
                self._above.add(threshold)
                events.append(self._crossed(threshold, "up", reading))
            elif threshold in self._above and reading.pressure < threshold - self.hysteresis:
                self._above.discard(threshold)
                events.append(self._crossed(threshold, "down", reading))
        return tuple(events)

    def reset(self) -> None:
        """Forget crossings (a new run)."""
        self._above.clear()

    @staticmethod
    def _crossed(
        threshold: float, direction: str, reading: ContextPressure
    ) -> PressureThresholdCrossed:
        return PressureThresholdCrossed(
            threshold=threshold,
            direction=direction,
            tokens=reading.tokens,
            window=reading.window,
            pressure=reading.pressure,
        )
