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

from .accounting.remote import CountQuery as CountQuery
from .accounting.remote import RemoteCounter as RemoteCounter
from .accounting.remote import RemoteCountError as RemoteCountError
from .accounting.remote import adiscover_counter as adiscover_counter
from .accounting.remote import clear_counter_cache as clear_counter_cache
from .accounting.remote import discover_counter as discover_counter
from .accounting.usage import NO_USAGE as NO_USAGE
from .accounting.usage import Calibration as Calibration
from .accounting.usage import prompt_tokens_from_usage as prompt_tokens_from_usage
from .adapters import detect_format as detect_format
from .budget import Budget as Budget
from .budget import compute_budget as compute_budget
from .catalog import FALLBACK_WINDOW as FALLBACK_WINDOW
from .catalog import ModelInfo as ModelInfo
from .catalog import lookup_model as lookup_model
from .catalog import resolve_model_info as resolve_model_info
from .counters import HFTokenizerCounter as HFTokenizerCounter
from .counters import TiktokenCounter as TiktokenCounter
from .counters import TokenCounter as TokenCounter
from .counters import load_counter as load_counter
from .discovery import adiscover_model_info as adiscover_model_info
from .discovery import clear_discovery_cache as clear_discovery_cache
from .discovery import discover_model_info as discover_model_info
from .edits import DEFAULT_EDITS as DEFAULT_EDITS
from .edits import ClampToolResults as ClampToolResults
from .edits import ClearToolResults as ClearToolResults
from .edits import EditRecord as EditRecord
from .edits import Summarize as Summarize
from .estimate import Estimator as Estimator
from .events import CalibrationCapped as CalibrationCapped
from .events import ContextEdited as ContextEdited
from .events import ContextEmergencyShrink as ContextEmergencyShrink
from .events import ContextEstimate as ContextEstimate
from .events import ContextPressure as ContextPressure
from .events import Event as Event
from .events import MaxTokensShrunk as MaxTokensShrunk
from .events import PressureThresholdCrossed as PressureThresholdCrossed
from .events import RemoteCounted as RemoteCounted
from .events import RemoteCountFailed as RemoteCountFailed
from .events import TokenizerInferred as TokenizerInferred
from .events import TranscriptDeferred as TranscriptDeferred
from .events import TranscriptPruned as TranscriptPruned
from .events import UsageExcludesCached as UsageExcludesCached
from .events import UsageMeasured as UsageMeasured
from .events import UsageMismatch as UsageMismatch
from .exceptions import ConfigurationError as ConfigurationError
from .exceptions import ContextTruncatedError as ContextTruncatedError
from .exceptions import InvalidTranscriptError as InvalidTranscriptError
from .exceptions import JournalError as JournalError
from .exceptions import JournalMismatchError as JournalMismatchError
from .exceptions import ModelInfoError as ModelInfoError
from .exceptions import ProviderError as ProviderError
from .exceptions import RunLockedError as RunLockedError
from .exceptions import RunStateError as RunStateError
from .exceptions import SpillError as SpillError
from .exceptions import SpillHandleError as SpillHandleError
from .exceptions import SuspendRun as SuspendRun
from .exceptions import UnknownFormatError as UnknownFormatError
from .exceptions import WindowGuardError as WindowGuardError
from .failures import Failure as Failure
from .failures import FailureKind as FailureKind
from .failures import TerminationReason as TerminationReason
from .failures import classify_failure as classify_failure
from .gauge import ContextGauge as ContextGauge
from .guard import guard as guard
from .journal import Journal as Journal
from .journal import PostgresJournal as PostgresJournal
from .journal import RunState as RunState
from .journal import SqliteJournal as SqliteJournal
from .loop import AsyncToolLoop as AsyncToolLoop
from .loop import RunResult as RunResult
from .loop import ToolLoop as ToolLoop
from .manager import ContextWindowManager as ContextWindowManager
from .manager import Fit as Fit
from .providers.fake import AsyncFakeProvider as AsyncFakeProvider
from .providers.fake import FakeCalls as FakeCalls
from .providers.fake import FakeProvider as FakeProvider
from .retry import Backoff as Backoff
from .retry import ClampOutput as ClampOutput
from .retry import Refit as Refit
from .retry import RetryDecision as RetryDecision
from .retry import RetryPolicy as RetryPolicy
from .retry import SendHistory as SendHistory
from .retry import Stop as Stop
from .shapes import Segment as Segment
from .shapes import Shape as Shape
from .shrink import ShrinkResult as ShrinkResult
from .shrink import fit_max_tokens as fit_max_tokens
from .shrink import shrink_max_tokens as shrink_max_tokens
from .sinks import JsonlSink as JsonlSink
from .sinks import LoggingSink as LoggingSink
from .sinks import OpenTelemetrySink as OpenTelemetrySink
from .sinks import capture_events as capture_events
from .sinks import emit as emit
from .spill import SpillStore as SpillStore
from .spill import spill_tool as spill_tool
from .tools import Tool as Tool
from .tools import ToolContext as ToolContext
from .tools import tool as tool
from .turns import Segmentation as Segmentation
from .turns import segment as segment

if _TYPE_CHECKING:
    from .providers.anthropic import AnthropicProvider as AnthropicProvider
    from .providers.anthropic import AsyncAnthropicProvider as AsyncAnthropicProvider
    from .providers.openai import AsyncOpenAIChatProvider as AsyncOpenAIChatProvider
    from .providers.openai import OpenAIChatProvider as OpenAIChatProvider

_LAZY_PROVIDERS = frozenset(
    {"AnthropicProvider", "AsyncAnthropicProvider", "AsyncOpenAIChatProvider", "OpenAIChatProvider"}
)


def __getattr__(name: str) -> _Any:
    """Provider classes import their SDK on first use, never with ``import windowguard``."""
    if name in _LAZY_PROVIDERS:
        from . import providers

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
