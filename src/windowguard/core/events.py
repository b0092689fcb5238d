"""Typed events: frozen values with a permanent ``kind`` and ``to_dict()``.

Every event carries its kind under ``"event"`` in ``to_dict()``; the other keys are
the event's fields. Kind names are permanent: operators build dashboards on them.
Events hold no wall-clock time and no random ids, so the same run gives the same
events (a sink that wants a timestamp adds its own).

``context_pressure`` is exactly the pressure gauge's
``{"event": "context_pressure", "tokens", "window", "pressure"}``, measured from the
provider-reported input tokens after a live model call; the estimate made before a
send is its own kind, ``context_estimate``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "CalibrationCapped",
    "CalibrationUpdated",
    "ContextEdited",
    "ContextEmergencyShrink",
    "ContextEstimate",
    "ContextPressure",
    "Event",
    "GuardPassthrough",
    "MaxTokensShrunk",
    "ModelCall",
    "PressureThresholdCrossed",
    "ProviderErrorEvent",
    "ProxyRefused",
    "RemoteCountFailed",
    "RemoteCounted",
    "RetryScheduled",
    "RunFinished",
    "RunStarted",
    "TokenizerInferred",
    "ToolCallEvent",
    "ToolResultEvent",
    "TranscriptDeferred",
    "TranscriptPruned",
    "UsageExcludesCached",
    "UsageMeasured",
    "UsageMismatch",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of all events. ``kind`` is the permanent event name."""

    kind: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        """The event as a JSON-ready dict, its kind under ``"event"``."""
        out: dict[str, Any] = {"event": self.kind}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextPressure(Event):
    """Prompt tokens the provider reported against the window (the pressure gauge)."""

    kind: ClassVar[str] = "context_pressure"
    tokens: int
    window: int
    pressure: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PressureThresholdCrossed(Event):
    """Pressure rose past (``direction="up"``) or fell back below a threshold."""

    kind: ClassVar[str] = "context_pressure_threshold"
    threshold: float
    direction: str
    tokens: int
    window: int
    pressure: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextEstimate(Event):
    """The best count of a request before it is sent, and where it came from.

    ``source`` says where the window came from (the catalog, discovery ...);
    ``measured_tokens`` is the part counted exactly (provider reports attributed by the
    ledger, or the endpoint's own count); ``exact`` is True when all of it was;
    ``sources`` names what counted the rest (``"ledger"``, ``"remote:<endpoint>"``,
    ``"local:<family>"``, ``"heuristic:<family>"``), and ``calibration`` is the factor
    applied to the estimated part.
    """

    kind: ClassVar[str] = "context_estimate"
    estimated_tokens: int
    window: int
    budget: int
    pressure: float
    calibration: float
    source: str
    measured_tokens: int = 0
    exact: bool = False
    sources: tuple[str, ...] = ()
    upper_tokens: int = 0
    """A guaranteed upper count when an exact source exists (exact where measured or
    counted, bounded elsewhere; media nothing measured at an allowance, which has no
    bound), which the edge rule decides on; 0 when none exists."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageMeasured(Event):
    """The ledger attributed an exact prompt size (a provider report, an overflow
    error's count, or a remote count) to the turns it measured.

    ``measured_tokens`` were newly attributed to ``messages`` messages (and the base:
    framing, system, tools and head, when ``with_base``); ``known_tokens`` of the total
    were known exactly before; ``drift`` is ``total - known`` for a request that was
    known exactly already (templates are not perfectly additive).
    """

    kind: ClassVar[str] = "usage_measured"
    origin: str
    total_tokens: int
    known_tokens: int
    measured_tokens: int
    estimated_tokens: int
    messages: int
    with_base: bool
    drift: int
    hidden_tokens: int = 0
    """Of ``measured_tokens``, what the request's visible content cannot account for
    (reasoning passed by id, encrypted reasoning, server-side state): kept as its own
    component, never fed to calibration."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationCapped(Event):
    """A report would have raised the ``source`` calibration factor (``"heuristic"`` or
    ``"local"``) to ``observed``; it rose only to ``factor``, the most one report may
    raise it (x1.5), so a report distorted by something the request does not show
    cannot inflate every later estimate at once."""

    kind: ClassVar[str] = "calibration_capped"
    source: str
    factor: float
    observed: float
    origin: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageExcludesCached(Event):
    """The provider's ``prompt_tokens`` leave out the cached tokens it reports beside
    them (``reported_tokens`` + ``cached_tokens`` is the prompt): from now on the two are
    added. ``evidence`` says what showed it."""

    kind: ClassVar[str] = "usage_excludes_cached"
    reported_tokens: int
    cached_tokens: int
    evidence: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageMismatch(Event):
    """A report disagrees with the local exact count of the same request by more than
    the templates' tolerance: the report is trusted (it is the provider's count) and the
    local count's calibration grows from it; a server whose template differs from the
    family's shows here."""

    kind: ClassVar[str] = "usage_mismatch"
    reported_tokens: int
    counted_tokens: int
    counter: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenizerInferred(Event):
    """A model nobody named a tokenizer for counts like ``family``: its installed exact
    tokenizer counted a reported request at ``counted_tokens`` against the provider's
    ``reported_tokens``, so it now counts what the ledger has not measured."""

    kind: ClassVar[str] = "tokenizer_inferred"
    family: str
    reported_tokens: int
    counted_tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteCounted(Event):
    """The serving endpoint counted a request exactly, near the edge of a decision."""

    kind: ClassVar[str] = "remote_count"
    counter: str
    tokens: int
    messages: int
    purpose: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteCountFailed(Event):
    """A remote count failed; the decision fell back to the ledger and estimates."""

    kind: ClassVar[str] = "remote_count_failed"
    counter: str
    error: str
    fallback: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptPruned(Event):
    """Oldest whole turns were dropped so the request fits its budget.

    ``new_cut`` is False when the request keeps the previous send's cut (low-water
    pruning: the prompt prefix is unchanged), True when more turns were dropped.
    """

    kind: ClassVar[str] = "transcript_pruned"
    dropped_turns: int
    dropped_messages: int
    kept_messages: int
    tokens_before: int
    tokens_after: int
    budget: int
    new_cut: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextEdited(Event):
    """An edit stage changed what is sent: results clamped or cleared, call inputs
    cleared, turns summarized or dropped (issue 19).

    ``edit`` is the stage (``"clamp"``, ``"clear"``, ``"clear_inputs"``, ``"summarize"``,
    ``"drop"``); ``messages`` are indices in the caller's transcript; ``tool_names`` the
    tools whose results or calls were edited; ``tokens_before`` / ``tokens_after`` the
    edited messages' size (by the manager's count) and ``tokens_freed`` their difference.
    ``new`` is False when the edit repeats one made on an earlier send (a result once
    cleared stays cleared, byte for byte), True when it is made on this send.
    """

    kind: ClassVar[str] = "context_edited"
    edit: str
    messages: tuple[int, ...]
    tool_names: tuple[str, ...]
    tokens_before: int
    tokens_after: int
    tokens_freed: int
    new: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptDeferred(Event):
    """Damaged input was passed on unchanged; the provider will judge it."""

    kind: ClassVar[str] = "transcript_deferred"
    reason: str
    problems: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxTokensShrunk(Event):
    """The reply budget was lowered so prompt + tools + output fit the window."""

    kind: ClassVar[str] = "max_tokens_shrunk"
    requested: int | None
    max_tokens: int
    estimated_input_tokens: int
    context_window: int
    safety_buffer: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextEmergencyShrink(Event):
    """Nothing was left for the reply: ``max_tokens`` was clamped to the floor."""

    kind: ClassVar[str] = "context_emergency_shrink"
    requested: int | None
    max_tokens: int
    estimated_input_tokens: int
    context_window: int
    safety_buffer: int
    floor: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(Event):
    """A tool-loop run began (or resumed)."""

    kind: ClassVar[str] = "run_started"
    run_id: str
    model: str
    context_window: int
    window_source: str
    resumed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCall(Event):
    """A live model call completed (replayed calls emit nothing)."""

    kind: ClassVar[str] = "model_call"
    run_id: str
    step: int
    site: str
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int
    cache_write_tokens: int
    max_tokens: int | None
    stop_reason: str | None
    tool_calls: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationUpdated(Event):
    """The estimator's calibration factor rose after a provider report."""

    kind: ClassVar[str] = "calibration_updated"
    factor: float
    reported_tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent(Event):
    """The loop is about to run a tool."""

    kind: ClassVar[str] = "tool_call"
    run_id: str
    step: int
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultEvent(Event):
    """A tool finished (or failed; the model sees the error)."""

    kind: ClassVar[str] = "tool_result"
    run_id: str
    step: int
    call_id: str
    name: str
    is_error: bool
    chars: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderErrorEvent(Event):
    """A provider call failed; ``failure`` is its classification as a dict."""

    kind: ClassVar[str] = "provider_error"
    run_id: str
    step: int
    site: str
    failure_kind: str
    retryable: bool
    status: int | None
    message: str
    decision: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryScheduled(Event):
    """The loop will retry a failed send (after ``delay_seconds``)."""

    kind: ClassVar[str] = "retry_scheduled"
    run_id: str
    step: int
    attempt: int
    delay_seconds: float
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(Event):
    """A run ended; ``termination`` is a TerminationReason name."""

    kind: ClassVar[str] = "run_finished"
    run_id: str
    termination: str
    iterations: int
    model_calls: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardPassthrough(Event):
    """A guarded call (``wg.guard``, the proxy) was sent unchanged: it could not be fitted.

    ``reason`` names why (Responses ``previous_response_id`` / ``conversation``: the
    server prepends context nobody here can see or drop).
    """

    kind: ClassVar[str] = "guard_passthrough"
    api: str
    model: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyRefused(Event):
    """The proxy answered a request itself, without contacting the upstream.

    ``code`` is ``context_truncated`` (head + newest turn cannot fit),
    ``invalid_request`` (bad input), ``invalid_path`` (a path it will not route or
    forward: an encoded separator, a control character, ``..`` above the root) or
    ``request_too_large`` (a body above the proxy's limit); the numbers are set for the
    first.
    """

    kind: ClassVar[str] = "proxy_refused"
    api: str
    code: str
    message: str
    estimated_tokens: int | None = None
    budget: int | None = None
    context_window: int | None = None
