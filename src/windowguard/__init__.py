"""windowguard keeps LLM agent tool loops inside the model's context window.

Before every provider send, :meth:`ContextWindowManager.fit` drops the oldest whole
turns (never the head, never the newest turn, never orphaning a call or a result),
counts tokens from the best source available (the provider's own reports, its count
endpoint near the edge, an exact local tokenizer, and an over-counting heuristic only for
what nothing measured) and fits ``max_tokens`` so prompt + tools + output never exceed
the window.

This module imports nothing up front (PEP 562): each public name is imported from its
submodule on first use, so ``import windowguard`` stays cheap and never loads a provider
SDK, ``asyncio``, ``sqlite3`` or an HTTP client until a feature that needs one is used.
"""

import sys as _sys
from importlib import import_module as _import_module
from types import ModuleType as _ModuleType

# Aliased so that `wg.Any` and `wg.TYPE_CHECKING` are not part of the namespace.
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ._version import __version__ as __version__

if _TYPE_CHECKING:
    from .accounting.catalog import FALLBACK_WINDOW as FALLBACK_WINDOW
    from .accounting.catalog import ModelInfo as ModelInfo
    from .accounting.catalog import lookup_model as lookup_model
    from .accounting.catalog import resolve_model_info as resolve_model_info
    from .accounting.counters import HFTokenizerCounter as HFTokenizerCounter
    from .accounting.counters import TiktokenCounter as TiktokenCounter
    from .accounting.counters import TokenCounter as TokenCounter
    from .accounting.counters import load_counter as load_counter
    from .accounting.discovery import adiscover_model_info as adiscover_model_info
    from .accounting.discovery import clear_discovery_cache as clear_discovery_cache
    from .accounting.discovery import discover_model_info as discover_model_info
    from .accounting.estimate import Estimator as Estimator
    from .accounting.remote import CountQuery as CountQuery
    from .accounting.remote import RemoteCounter as RemoteCounter
    from .accounting.remote import RemoteCountError as RemoteCountError
    from .accounting.remote import adiscover_counter as adiscover_counter
    from .accounting.remote import clear_counter_cache as clear_counter_cache
    from .accounting.remote import discover_counter as discover_counter
    from .accounting.usage import NO_USAGE as NO_USAGE
    from .accounting.usage import Calibration as Calibration
    from .accounting.usage import prompt_tokens_from_usage as prompt_tokens_from_usage
    from .core.adapters import detect_format as detect_format
    from .core.budget import Budget as Budget
    from .core.budget import compute_budget as compute_budget
    from .core.edits import DEFAULT_EDITS as DEFAULT_EDITS
    from .core.edits import ClampToolResults as ClampToolResults
    from .core.edits import ClearToolResults as ClearToolResults
    from .core.edits import EditRecord as EditRecord
    from .core.edits import Summarize as Summarize
    from .core.events import CalibrationCapped as CalibrationCapped
    from .core.events import ContextEdited as ContextEdited
    from .core.events import ContextEmergencyShrink as ContextEmergencyShrink
    from .core.events import ContextEstimate as ContextEstimate
    from .core.events import ContextPressure as ContextPressure
    from .core.events import Event as Event
    from .core.events import MaxTokensShrunk as MaxTokensShrunk
    from .core.events import PressureThresholdCrossed as PressureThresholdCrossed
    from .core.events import RemoteCounted as RemoteCounted
    from .core.events import RemoteCountFailed as RemoteCountFailed
    from .core.events import TokenizerInferred as TokenizerInferred
    from .core.events import TranscriptDeferred as TranscriptDeferred
    from .core.events import TranscriptPruned as TranscriptPruned
    from .core.events import UsageExcludesCached as UsageExcludesCached
    from .core.events import UsageMeasured as UsageMeasured
    from .core.events import UsageMismatch as UsageMismatch
    from .core.exceptions import ConfigurationError as ConfigurationError
    from .core.exceptions import ContextTruncatedError as ContextTruncatedError
    from .core.exceptions import InvalidTranscriptError as InvalidTranscriptError
    from .core.exceptions import JournalError as JournalError
    from .core.exceptions import JournalMismatchError as JournalMismatchError
    from .core.exceptions import ModelInfoError as ModelInfoError
    from .core.exceptions import ProviderError as ProviderError
    from .core.exceptions import RunLockedError as RunLockedError
    from .core.exceptions import RunStateError as RunStateError
    from .core.exceptions import SpillError as SpillError
    from .core.exceptions import SpillHandleError as SpillHandleError
    from .core.exceptions import SuspendRun as SuspendRun
    from .core.exceptions import UnknownFormatError as UnknownFormatError
    from .core.exceptions import WindowGuardError as WindowGuardError
    from .core.failures import Failure as Failure
    from .core.failures import FailureKind as FailureKind
    from .core.failures import TerminationReason as TerminationReason
    from .core.failures import classify_failure as classify_failure
    from .core.gauge import ContextGauge as ContextGauge
    from .core.shapes import Segment as Segment
    from .core.shapes import Shape as Shape
    from .core.shrink import ShrinkResult as ShrinkResult
    from .core.shrink import fit_max_tokens as fit_max_tokens
    from .core.shrink import shrink_max_tokens as shrink_max_tokens
    from .core.turns import Segmentation as Segmentation
    from .core.turns import segment as segment
    from .guard import guard as guard
    from .pipeline.manager import ContextWindowManager as ContextWindowManager
    from .pipeline.manager import Fit as Fit
    from .run.journal import Journal as Journal
    from .run.journal import PostgresJournal as PostgresJournal
    from .run.journal import RunState as RunState
    from .run.journal import SqliteJournal as SqliteJournal
    from .run.loop import AsyncToolLoop as AsyncToolLoop
    from .run.loop import RunResult as RunResult
    from .run.loop import ToolLoop as ToolLoop
    from .run.providers.anthropic import AnthropicProvider as AnthropicProvider
    from .run.providers.anthropic import AsyncAnthropicProvider as AsyncAnthropicProvider
    from .run.providers.fake import AsyncFakeProvider as AsyncFakeProvider
    from .run.providers.fake import FakeCalls as FakeCalls
    from .run.providers.fake import FakeProvider as FakeProvider
    from .run.providers.openai import AsyncOpenAIChatProvider as AsyncOpenAIChatProvider
    from .run.providers.openai import OpenAIChatProvider as OpenAIChatProvider
    from .run.retry import Backoff as Backoff
    from .run.retry import ClampOutput as ClampOutput
    from .run.retry import Refit as Refit
    from .run.retry import RetryDecision as RetryDecision
    from .run.retry import RetryPolicy as RetryPolicy
    from .run.retry import SendHistory as SendHistory
    from .run.retry import Stop as Stop
    from .run.sinks import JsonlSink as JsonlSink
    from .run.sinks import LoggingSink as LoggingSink
    from .run.sinks import OpenTelemetrySink as OpenTelemetrySink
    from .run.sinks import capture_events as capture_events
    from .run.sinks import emit as emit
    from .run.spill import SpillStore as SpillStore
    from .run.spill import spill_tool as spill_tool
    from .run.tools import Tool as Tool
    from .run.tools import ToolContext as ToolContext
    from .run.tools import tool as tool

_EXPORTS: dict[str, tuple[str, ...]] = {
    ".accounting.catalog": ("FALLBACK_WINDOW", "ModelInfo", "lookup_model", "resolve_model_info"),
    ".accounting.counters": (
        "HFTokenizerCounter",
        "TiktokenCounter",
        "TokenCounter",
        "load_counter",
    ),
    ".accounting.discovery": (
        "adiscover_model_info",
        "clear_discovery_cache",
        "discover_model_info",
    ),
    ".accounting.estimate": ("Estimator",),
    ".accounting.remote": (
        "CountQuery",
        "RemoteCounter",
        "RemoteCountError",
        "adiscover_counter",
        "clear_counter_cache",
        "discover_counter",
    ),
    ".accounting.usage": ("NO_USAGE", "Calibration", "prompt_tokens_from_usage"),
    ".core.adapters": ("detect_format",),
    ".core.budget": ("Budget", "compute_budget"),
    ".core.edits": (
        "DEFAULT_EDITS",
        "ClampToolResults",
        "ClearToolResults",
        "EditRecord",
        "Summarize",
    ),
    ".core.events": (
        "CalibrationCapped",
        "ContextEdited",
        "ContextEmergencyShrink",
        "ContextEstimate",
        "ContextPressure",
        "Event",
        "MaxTokensShrunk",
        "PressureThresholdCrossed",
        "RemoteCounted",
        "RemoteCountFailed",
        "TokenizerInferred",
        "TranscriptDeferred",
        "TranscriptPruned",
        "UsageExcludesCached",
        "UsageMeasured",
        "UsageMismatch",
    ),
    ".core.exceptions": (
        "ConfigurationError",
        "ContextTruncatedError",
        "InvalidTranscriptError",
        "JournalError",
        "JournalMismatchError",
        "ModelInfoError",
        "ProviderError",
        "RunLockedError",
        "RunStateError",
        "SpillError",
        "SpillHandleError",
        "SuspendRun",
        "UnknownFormatError",
        "WindowGuardError",
    ),
    ".core.failures": ("Failure", "FailureKind", "TerminationReason", "classify_failure"),
    ".core.gauge": ("ContextGauge",),
    ".core.shapes": ("Segment", "Shape"),
    ".core.shrink": ("ShrinkResult", "fit_max_tokens", "shrink_max_tokens"),
    ".core.turns": ("Segmentation", "segment"),
    ".guard": ("guard",),
    ".pipeline.manager": ("ContextWindowManager", "Fit"),
    ".run.journal": ("Journal", "PostgresJournal", "RunState", "SqliteJournal"),
    ".run.loop": ("AsyncToolLoop", "RunResult", "ToolLoop"),
    ".run.providers.fake": ("AsyncFakeProvider", "FakeCalls", "FakeProvider"),
    ".run.retry": (
        "Backoff",
        "ClampOutput",
        "Refit",
        "RetryDecision",
        "RetryPolicy",
        "SendHistory",
        "Stop",
    ),
    ".run.sinks": ("JsonlSink", "LoggingSink", "OpenTelemetrySink", "capture_events", "emit"),
    ".run.spill": ("SpillStore", "spill_tool"),
    ".run.tools": ("Tool", "ToolContext", "tool"),
    # The SDK-backed providers import their SDK (through the lazy ``run.providers``).
    ".run.providers": (
        "AnthropicProvider",
        "AsyncAnthropicProvider",
        "AsyncOpenAIChatProvider",
        "OpenAIChatProvider",
    ),
}
"""The submodule each public name is imported from on first use."""

_SOURCE: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> _Any:
    """Import a public name from its submodule on first use and keep it in the namespace."""
    module = _SOURCE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


class _Namespace(_ModuleType):
    """The package's module type: ``wg.guard`` stays the function.

    Importing the subpackage :mod:`windowguard.guard` (e.g. ``import windowguard.guard``,
    or any module that imports from it) makes the import system set ``windowguard.guard``
    to the subpackage, which would shadow the lazily imported function ``guard``; the
    subpackage has finished loading by then, so its ``guard`` is bound instead, as the
    eager ``from .guard import guard`` did.
    """

    def __setattr__(self, name: str, value: object) -> None:
        if name == "guard" and isinstance(value, _ModuleType):
            value = value.guard
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Namespace


__all__ = [
    "DEFAULT_EDITS",
    "FALLBACK_WINDOW",
    "NO_USAGE",
    "AnthropicProvider",
    "AsyncAnthropicProvider",
    "AsyncFakeProvider",
    "AsyncOpenAIChatProvider",
    "AsyncToolLoop",
    "Backoff",
    "Budget",
    "Calibration",
    "CalibrationCapped",
    "ClampOutput",
    "ClampToolResults",
    "ClearToolResults",
    "ConfigurationError",
    "ContextEdited",
    "ContextEmergencyShrink",
    "ContextEstimate",
    "ContextGauge",
    "ContextPressure",
    "ContextTruncatedError",
    "ContextWindowManager",
    "CountQuery",
    "EditRecord",
    "Estimator",
    "Event",
    "Failure",
    "FailureKind",
    "FakeCalls",
    "FakeProvider",
    "Fit",
    "HFTokenizerCounter",
    "InvalidTranscriptError",
    "Journal",
    "JournalError",
    "JournalMismatchError",
    "JsonlSink",
    "LoggingSink",
    "MaxTokensShrunk",
    "ModelInfo",
    "ModelInfoError",
    "OpenAIChatProvider",
    "OpenTelemetrySink",
    "PostgresJournal",
    "PressureThresholdCrossed",
    "ProviderError",
    "Refit",
    "RemoteCountError",
    "RemoteCountFailed",
    "RemoteCounted",
    "RemoteCounter",
    "RetryDecision",
    "RetryPolicy",
    "RunLockedError",
    "RunResult",
    "RunState",
    "RunStateError",
    "Segment",
    "Segmentation",
    "SendHistory",
    "Shape",
    "ShrinkResult",
    "SpillError",
    "SpillHandleError",
    "SpillStore",
    "SqliteJournal",
    "Stop",
    "Summarize",
    "SuspendRun",
    "TerminationReason",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerInferred",
    "Tool",
    "ToolContext",
    "ToolLoop",
    "TranscriptDeferred",
    "TranscriptPruned",
    "UnknownFormatError",
    "UsageExcludesCached",
    "UsageMeasured",
    "UsageMismatch",
    "WindowGuardError",
    "adiscover_counter",
    "adiscover_model_info",
    "capture_events",
    "classify_failure",
    "clear_counter_cache",
    "clear_discovery_cache",
    "compute_budget",
    "detect_format",
    "discover_counter",
    "discover_model_info",
    "emit",
    "fit_max_tokens",
    "guard",
    "load_counter",
    "lookup_model",
    "prompt_tokens_from_usage",
    "resolve_model_info",
    "segment",
    "shrink_max_tokens",
    "spill_tool",
    "tool",
]
