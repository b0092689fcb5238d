"""The durable run journal (SQLite) and the suspended-run state.

ADR 0020's durable loop: every model call and every tool result is written to the
journal *before* the loop moves on. A run killed at any point and started again with
the same journal and run id replays the journalled model calls without calling the
provider, never re-runs a tool whose result was journalled, and continues from there.
Events are emitted for live calls only. The journal is authoritative and never pruned:
it holds every response in full, whatever the manager dropped from the requests.

Storage: stdlib ``sqlite3`` in WAL mode, one row per model call and per tool result,
each committed on its own, so a crash loses at most the call in flight.

:class:`RunState` is the JSON-serialisable state of a run that a tool paused with
:class:`~windowguard.exceptions.SuspendRun`; ``loop.resume(state, ...)`` continues it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .exceptions import ConfigurationError, WindowGuardError
from .providers.base import ModelResponse, ToolCall, ToolResult, Usage

__all__ = [
    "JournalMismatchError",
    "RunState",
    "SqliteJournal",
    "jsonable",
    "response_from_dict",
    "response_to_dict",
    "result_from_dict",
    "result_to_dict",
    "transcript_digest",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    termination TEXT,
    state TEXT
);
CREATE TABLE IF NOT EXISTS model_calls (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    response TEXT NOT NULL,
    PRIMARY KEY (run_id, step)
);
CREATE TABLE IF NOT EXISTS tool_results (
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    position INTEGER NOT NULL,
    result TEXT NOT NULL,
    PRIMARY KEY (run_id, step, position)
);
"""


class JournalMismatchError(WindowGuardError):
    """A run id was reused for a different transcript, tools or model."""


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


class SqliteJournal:
    """A run journal in one SQLite file (WAL mode); safe to share between threads.

    Args:
        path: the database file (created if missing).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise ConfigurationError(f"cannot open run journal {self.path}: {exc}") from exc

    def __enter__(self) -> SqliteJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()

    def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        with self._lock:
            row = self._db.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._lock:
            self._db.execute(sql, params)

    def begin_run(self, run_id: str, digest: str) -> bool:
        """Register a run; True when the journal already holds it (a restart).

        Raises:
            JournalMismatchError: ``run_id`` was started with a different digest.
        """
        known = self._one("SELECT digest FROM runs WHERE run_id = ?", (run_id,))
        if known is None:
            self._write("INSERT INTO runs (run_id, digest) VALUES (?, ?)", (run_id, digest))
            return False
        if known != digest:
            raise JournalMismatchError(
                f"run {run_id!r} in {self.path} was started with a different transcript, "
                "system prompt, tools or model; use a new run id"
            )
        return True

    def model_call(self, run_id: str, step: int) -> ModelResponse | None:
        """The journalled response of model call ``step``, if any."""
        text = self._one(
            "SELECT response FROM model_calls WHERE run_id = ? AND step = ?", (run_id, step)
        )
        return None if text is None else response_from_dict(json.loads(text))

    def record_model_call(self, run_id: str, step: int, response: ModelResponse) -> None:
        """Journal a model call's response (before the loop acts on it)."""
        self._write(
            "INSERT OR REPLACE INTO model_calls (run_id, step, response) VALUES (?, ?, ?)",
            (run_id, step, json.dumps(response_to_dict(response), ensure_ascii=False)),
        )

    def tool_result(self, run_id: str, step: int, position: int) -> ToolResult | None:
        """The journalled result of call ``position`` of model call ``step``, if any."""
        text = self._one(
            "SELECT result FROM tool_results WHERE run_id = ? AND step = ? AND position = ?",
            (run_id, step, position),
        )
        return None if text is None else result_from_dict(json.loads(text))

    def record_tool_result(self, run_id: str, step: int, position: int, result: ToolResult) -> None:
        """Journal a tool result (before the loop moves on)."""
        self._write(
            "INSERT OR REPLACE INTO tool_results (run_id, step, position, result) "
            "VALUES (?, ?, ?, ?)",
            (run_id, step, position, json.dumps(result_to_dict(result), ensure_ascii=False)),
        )

    def finish_run(self, run_id: str, termination: str, state: RunState | None = None) -> None:
        """Record how a run ended (and its state when suspended)."""
        self._write(
            "UPDATE runs SET termination = ?, state = ? WHERE run_id = ?",
            (termination, None if state is None else state.to_json(), run_id),
        )

    def termination(self, run_id: str) -> str | None:
        """How the run ended, if it has."""
        value = self._one("SELECT termination FROM runs WHERE run_id = ?", (run_id,))
        return None if value is None else str(value)

    def counts(self, run_id: str) -> tuple[int, int]:
        """(model calls, tool results) journalled for ``run_id``."""
        calls = self._one("SELECT COUNT(*) FROM model_calls WHERE run_id = ?", (run_id,))
        results = self._one("SELECT COUNT(*) FROM tool_results WHERE run_id = ?", (run_id,))
        return int(calls), int(results)


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
