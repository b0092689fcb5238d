"""ContextGauge: ADR 0020's event, and threshold crossings with hysteresis."""

from __future__ import annotations

import pytest

import windowguard as wg


def test_event_is_exactly_adr_0020() -> None:
    event = wg.ContextGauge(window=200_000).measure(tokens=50_000)
    assert event.to_dict() == {
        "event": "context_pressure",
        "tokens": 50000,
        "window": 200000,
        "pressure": 0.25,
    }


def test_thresholds_cross_once_with_hysteresis() -> None:
    gauge = wg.ContextGauge(window=1000, thresholds=(0.8, 0.95), hysteresis=0.05)

    def crossings(tokens: int) -> list[tuple[float, str]]:
        return [
            (e.threshold, e.direction)
            for e in gauge.observe(tokens)
            if isinstance(e, wg.PressureThresholdCrossed)
        ]

    assert crossings(500) == []
    assert crossings(810) == [(0.8, "up")]
    assert crossings(820) == []
    assert crossings(790) == []  # inside the hysteresis band
    assert crossings(960) == [(0.95, "up")]
    assert crossings(700) == [(0.8, "down"), (0.95, "down")]
    assert crossings(800) == [(0.8, "up")]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"window": 0}, "window"), ({"window": 10, "thresholds": (2.0,)}, "thresholds")],
)
def test_bad_configuration_is_named(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(wg.ConfigurationError, match=match):
        wg.ContextGauge(**kwargs)  # type: ignore[arg-type]


def test_negative_tokens_rejected() -> None:
    with pytest.raises(wg.ConfigurationError, match="tokens"):
        wg.ContextGauge(window=10).measure(-1)
