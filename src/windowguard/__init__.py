"""windowguard keeps LLM agent tool loops inside the model's context window.

Before every provider send, :meth:`ContextWindowManager.fit` drops the oldest whole
turns (never the head, never the newest turn, never orphaning a call or a result),
counts tokens from the best source available (the provider's own reports, its count
endpoint near the edge, an exact local tokenizer, and an over-counting heuristic only for
what nothing measured) and fits ``max_tokens`` so prompt + tools + output never exceed
the window.

This module never imports a provider SDK: the provider classes are loaded on first use.
"""

# Aliased so that `wg.Any` and `wg.TYPE_CHECKING` are not part of the namespace.
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

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
from .run.providers.fake import AsyncFakeProvider as AsyncFakeProvider
from .run.providers.fake import FakeCalls as FakeCalls
from .run.providers.fake import FakeProvider as FakeProvider
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

if _TYPE_CHECKING:
    from .run.providers.anthropic import AnthropicProvider as AnthropicProvider
    from .run.providers.anthropic import AsyncAnthropicProvider as AsyncAnthropicProvider
    from .run.providers.openai import AsyncOpenAIChatProvider as AsyncOpenAIChatProvider
    from .run.providers.openai import OpenAIChatProvider as OpenAIChatProvider

_LAZY_PROVIDERS = frozenset(
    {"AnthropicProvider", "AsyncAnthropicProvider", "AsyncOpenAIChatProvider", "OpenAIChatProvider"}
)


def __getattr__(name: str) -> _Any:
    """Provider classes import their SDK on first use, never with ``import windowguard``."""
    if name in _LAZY_PROVIDERS:
        from .run import providers

        return getattr(providers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__version__ = "0.1.0"

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
