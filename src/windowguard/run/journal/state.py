"""What a run journal stores, as JSON: model responses, tool results, digests, RunState.

Every value goes in and out of a journal as plain JSON text, so a row written by one
machine is read by any other (a fleet sharing one PostgreSQL database). A row that does
not decode is damage, reported by the journal as a
:class:`~windowguard.core.exceptions.JournalError` naming the run and the row.

:class:`RunState` is the JSON-serialisable state of a run that a tool paused with
:class:`~windowguard.core.exceptions.SuspendRun`; ``loop.resume(state, ...)`` continues it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ...core.exceptions import ConfigurationError, JournalError
from ..providers.base import ModelResponse, ToolCall, ToolResult, ToolSpec, Usage

__all__ = [
    "RunState",
    "decode_row",
    "jsonable",
    "response_from_dict",
    "response_to_dict",
    "result_from_dict",
    "result_to_dict",
    "summary_from_row",
    "tool_changes",
    "tool_digest",
    "tool_digests",
    "transcript_digest",
]

_T = TypeVar("_T")


def jsonable(value: object) -> Any:
    """``value`` as plain JSON data: SDK objects are dumped, tuples become lists."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return jsonable(dump(exclude_none=True))
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise ConfigurationError(f"cannot store a {type(value).__name__} in a run journal or state")


def transcript_digest(
    messages: Sequence[object], system: object, tools: Sequence[str], model: str
) -> str:
    """A digest identifying a run's starting point (transcript, system, tool names, model)."""
    body = json.dumps(
        [jsonable(list(messages)), jsonable(system), list(tools), model],
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(body.encode()).hexdigest()


def tool_digest(spec: ToolSpec) -> str:
    """A digest of a tool as the model sees it (name, description, parameters schema).

    The journal keeps one per tool of a run: a tool whose schema changed is named when
    the run is started again (replayed answers were made for the old schema).
    """
    body = json.dumps(
        [spec.name, spec.description, jsonable(spec.parameters)], sort_keys=True, ensure_ascii=False
    )
    return hashlib.sha256(body.encode()).hexdigest()


def tool_changes(mine: Mapping[str, str], known: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """How the tools ``mine`` (name: :func:`tool_digest`) differ from those a run was
    started with, in words (``"a different schema ... for tool 'x'; without tool 'y'"``),
    and the tools that differ (changed, added, removed); no names when none does."""
    changed = sorted(n for n in mine.keys() & known.keys() if mine[n] != known[n])
    added = sorted(mine.keys() - known.keys())
    removed = sorted(known.keys() - mine.keys())
    parts = []
    if changed:
        parts.append(
            "a different schema (description or parameters) for "
            + ", ".join(f"tool {n!r}" for n in changed)
        )
    if added:
        parts.append("without " + ", ".join(f"tool {n!r}" for n in added))
    if removed:
        parts.append("with " + ", ".join(f"tool {n!r}" for n in removed))
    return "; ".join(parts), (*changed, *added, *removed)


def tool_digests(data: Mapping[str, Any]) -> dict[str, str]:
    """A run's tool digests (name: digest) from their JSON object."""
    if not all(isinstance(v, str) for v in data.values()):
        raise TypeError("tool digests must be strings")
    return {str(k): str(v) for k, v in data.items()}


def decode_row(text: Any, build: Callable[[Mapping[str, Any]], _T], what: str, where: str) -> _T:
    """``build`` applied to the JSON object ``text`` of a journal row, or a
    :class:`~windowguard.core.exceptions.JournalError` naming the row (``what``) and the
    journal (``where``)."""
    try:
        data = json.loads(text)
        if not isinstance(data, Mapping):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        return build(data)
    except (ValueError, TypeError, KeyError, AttributeError, ConfigurationError) as exc:
        raise JournalError(
            f"the journal {where} holds a damaged row: {what} cannot be read "
            f"({type(exc).__name__}: {exc}). Restore the journal from a backup, or "
            "start the run again under a new run id"
        ) from exc


def summary_from_row(text: Any, key: str, what: str) -> str | None:
    """The text of a journalled summary row if it summarised what ``key`` names."""
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise JournalError(f"{what} is not JSON") from exc
    if isinstance(found, dict) and found.get("key") == key and isinstance(found.get("text"), str):
        return str(found["text"])
    return None


def response_to_dict(response: ModelResponse) -> dict[str, Any]:
    """A model response as JSON data."""
    return {
        "message": jsonable(response.message),
        "text": response.text,
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls
        ],
        "usage": None if response.usage is None else response.usage.to_dict(),
        "stop_reason": response.stop_reason,
    }


def response_from_dict(data: Mapping[str, Any]) -> ModelResponse:
    """The inverse of :func:`response_to_dict`."""
    usage = data.get("usage")
    return ModelResponse(
        message=dict(data["message"]),
        text=data.get("text", ""),
        tool_calls=tuple(ToolCall(**c) for c in data.get("tool_calls", ())),
        usage=None if usage is None else Usage(**usage),
        stop_reason=data.get("stop_reason"),
    )


def result_to_dict(result: ToolResult) -> dict[str, Any]:
    """A tool result as JSON data."""
    return {
        "call_id": result.call_id,
        "name": result.name,
        "content": result.content,
        "is_error": result.is_error,
    }


def result_from_dict(data: Mapping[str, Any]) -> ToolResult:
    """The inverse of :func:`result_to_dict`."""
    return ToolResult(
        call_id=data["call_id"],
        name=data["name"],
        content=data["content"],
        is_error=bool(data.get("is_error", False)),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunState:
    """A paused run, as JSON-serialisable data.

    Attributes:
        run_id: the run's id (a journal continues under it).
        messages: the full transcript so far, as JSON data, ending with the assistant
            message whose tool calls are pending.
        system: Anthropic's separate system argument, if any.
        step: model calls made so far.
        iteration: tool iterations made so far.
        pending: the tool calls of the paused turn, in order.
        completed: results of those calls obtained before the pause.
        suspended_call: the id of the call that paused the run.
        reason: why it paused (the tool's ``SuspendRun`` reason).
        data: what the tool attached (JSON data).
    """

    run_id: str
    messages: tuple[Any, ...]
    system: Any = None
    step: int
    iteration: int
    pending: tuple[ToolCall, ...]
    completed: tuple[ToolResult, ...]
    suspended_call: str
    reason: str
    data: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON data."""
        return {
            "run_id": self.run_id,
            "messages": jsonable(list(self.messages)),
            "system": jsonable(self.system),
            "step": self.step,
            "iteration": self.iteration,
            "pending": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.pending
            ],
            "completed": [result_to_dict(r) for r in self.completed],
            "suspended_call": self.suspended_call,
            "reason": self.reason,
            "data": jsonable(self.data),
        }

    def to_json(self) -> str:
        """The state as a JSON string."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunState:
        """Rebuild a state from :meth:`to_dict` output.

        Raises:
            ConfigurationError: the data is not a run state.
        """
        try:
            return cls(
                run_id=str(data["run_id"]),
                messages=tuple(data["messages"]),
                system=data.get("system"),
                step=int(data["step"]),
                iteration=int(data["iteration"]),
                pending=tuple(ToolCall(**c) for c in data["pending"]),
                completed=tuple(result_from_dict(r) for r in data["completed"]),
                suspended_call=str(data["suspended_call"]),
                reason=str(data["reason"]),
                data=data.get("data"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"not a windowguard run state: {exc!r}") from exc

    @classmethod
    def from_json(cls, text: str) -> RunState:
        """Rebuild a state from :meth:`to_json` output."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"run state is not JSON: {exc}") from exc
        if not isinstance(data, Mapping):
            raise ConfigurationError("run state JSON must be an object")
        return cls.from_dict(data)
