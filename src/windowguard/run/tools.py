"""Tools the loop can run: ``Tool`` values and the ``@tool`` decorator.

A tool is a name, a description, a JSON schema of its arguments and a callable (sync
or async). The ``@tool`` decorator derives the schema from the function's type hints
and its Google-style docstring (first paragraph: description; ``Args:``: parameter
descriptions).

Running a tool never crashes a run: invalid JSON arguments, an unknown tool name,
arguments that do not fit the signature, an exception and a timeout all become a
tool result the model sees, marked ``is_error`` and saying what went wrong. Only
:class:`~windowguard.core.exceptions.SuspendRun` passes through: it pauses the run.

Tools run at least once, not exactly once: a tool in flight when its process dies runs
again when the run restarts from its journal. A tool with side effects that must happen
once takes a :class:`ToolContext` (annotate one parameter with it; the model never sees
it) and deduplicates them by its ``idempotency_key``, the same for the same call of the
same run on every restart.

A timeout abandons a call, it cannot stop it: Python cannot kill a thread. A sync tool
runs on one of its loop's own :class:`ToolThreads` (bounded, so hung calls of one loop
never starve another loop's tools); after its timeout the loop moves on with an error
result, the tool keeps running until it returns, its side effects still happen and its
result is discarded. The threads are daemon threads, never waited for at exit: a hung
tool does not keep the process (or ``asyncio.run``) alive, and is stopped mid-way when
the process ends. An async tool is cancelled at its timeout (``CancelledError`` at its
next ``await``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import enum
import hashlib
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin, overload

from ..core.exceptions import ConfigurationError, SuspendRun
from ..core.shapes import Format
from ._tool_threads import ToolThreads
from .providers.base import ToolCall, ToolResult, ToolSpec

__all__ = [
    "Tool",
    "ToolContext",
    "ToolThreads",
    "execute_tool",
    "execute_tool_async",
    "schema_from_function",
    "tool",
]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """The call a tool is serving, for tools that must not repeat a side effect.

    A tool gets one when a parameter is annotated with ``ToolContext`` (the name is
    yours; the parameter is left out of the schema the model sees)::

        @tool
        def charge(order: str, amount: int, ctx: ToolContext) -> str:
            '''Charge an order.'''
            return payments.charge(order, amount, idempotency_key=ctx.idempotency_key)

    Attributes:
        run_id: the run's id.
        call_id: the id the model gave the call.
        step: the model call that asked for it (0 for the first).
        position: its place among that model call's tool calls.
    """

    run_id: str
    call_id: str
    step: int = 0
    position: int = 0

    @property
    def idempotency_key(self) -> str:
        """A key for this call of this run, the same on every restart of the run.

        The journal replays the model call that asked for it, so its id, step and
        position come back unchanged. Two runs under one ``run_id`` are one run: give a
        new run its own id (a run without a journal gets one derived from its starting
        transcript, the same for the same transcript).
        """
        body = json.dumps([self.run_id, self.step, self.position, self.call_id])
        return "wg-" + hashlib.sha256(body.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A tool the model may call.

    Attributes:
        name: the name the model calls it by (``[a-zA-Z0-9_-]{1,64}``).
        description: what it does, for the model.
        parameters: JSON schema (an ``object``) of its arguments.
        fn: the callable, sync or async, called with the arguments as keywords.
        timeout: seconds before the call is abandoned (overrides the loop's default).
        context_param: the parameter of ``fn`` that receives the call's
            :class:`ToolContext` (``@tool`` finds it by its annotation), if any.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: Callable[..., Any]
    timeout: float | None = None
    context_param: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ConfigurationError(
                f"tool name must match [a-zA-Z0-9_-]{{1,64}}, got {self.name!r}"
            )
        if not callable(self.fn):
            raise ConfigurationError(f"tool {self.name!r}: fn must be callable")
        if not isinstance(self.parameters, Mapping) or self.parameters.get("type") != "object":
            raise ConfigurationError(
                f"tool {self.name!r}: parameters must be a JSON schema of type 'object'"
            )
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigurationError(f"tool {self.name!r}: timeout must be > 0 seconds")
        if self.context_param is not None and self.context_param in self.parameters.get(
            "properties", {}
        ):
            raise ConfigurationError(
                f"tool {self.name!r}: context_param {self.context_param!r} is also an "
                "argument the model is asked for"
            )

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def schema(self, format: Format) -> dict[str, Any]:
        """The tool's schema in ``format``'s request shape (see :meth:`ToolSpec.schema`),
        for offering it to a model outside ``ToolLoop``."""
        return self.spec.schema(format)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, timeout: float | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` of a function, its schema derived from hints and docstring.

    Examples:
        >>> @tool
        ... def read_file(path: str, max_lines: int = 200) -> str:
        ...     '''Read a text file.
        ...
        ...     Args:
        ...         path: the file to read.
        ...         max_lines: stop after this many lines.
        ...     '''
        ...     return open(path).read()
        >>> read_file.parameters["required"]
        ['path']
        >>> read_file.parameters["properties"]["max_lines"]
        {'type': 'integer', 'description': 'stop after this many lines.', 'default': 200}
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        doc_description, parameters = schema_from_function(f)
        return Tool(
            name=name or f.__name__,
            description=description or doc_description,
            parameters=parameters,
            fn=f,
            timeout=timeout,
            context_param=_context_param(f),
        )

    return wrap(fn) if fn is not None else wrap


def schema_from_function(fn: Callable[..., Any]) -> tuple[str, dict[str, Any]]:
    """The description and JSON schema of ``fn``'s keyword arguments.

    A parameter annotated :class:`ToolContext` is not an argument: it is left out.

    Raises:
        ConfigurationError: a parameter whose type cannot be expressed in JSON schema,
            or ``*args``/``**kwargs``.
    """
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise ConfigurationError(f"cannot read type hints of {fn!r}: {exc}") from exc
    description, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigurationError(
                f"tool {fn.__name__}: *args/**kwargs cannot be described to a model"
            )
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            continue
        schema = _schema(annotation, f"{fn.__name__}({param.name})")
        if param.name in arg_docs:
            schema["description"] = arg_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif _json_value(param.default):
            schema["default"] = param.default
        properties[param.name] = schema
    return description, {"type": "object", "properties": properties, "required": required}


def _context_param(fn: Callable[..., Any]) -> str | None:
    """The parameter of ``fn`` annotated :class:`ToolContext`, if any."""
    hints = typing.get_type_hints(fn)
    found = [name for name, hint in hints.items() if _is_context(hint) and name != "return"]
    if len(found) > 1:
        raise ConfigurationError(f"tool {fn.__name__}: more than one ToolContext parameter")
    return found[0] if found else None


def _is_context(annotation: Any) -> bool:
    """``ToolContext``, or ``ToolContext | None``."""
    if annotation is ToolContext:
        return True
    args = get_args(annotation)
    return get_origin(annotation) in (Union, types.UnionType) and set(args) == {
        ToolContext,
        type(None),
    }


def _json_value(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


_SIMPLE: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema(annotation: Any, where: str) -> dict[str, Any]:
    if annotation is Any or annotation is object:
        return {}
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}
    if annotation is type(None):
        return {"type": "null"}
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _schema(options[0], where)
        return {"anyOf": [_schema(a, where) for a in args]}
    if origin in (list, tuple, set, frozenset, Sequence) or annotation in (list, tuple):
        item = args[0] if args and args[0] is not Ellipsis else Any
        return {"type": "array", "items": _schema(item, where)}
    if origin in (dict, Mapping) or annotation is dict:
        return {"type": "object"}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return {"enum": [m.value for m in annotation]}
    if dataclasses.is_dataclass(annotation):
        return {"type": "object"}
    raise ConfigurationError(f"{where}: cannot describe type {annotation!r} in JSON schema")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    paragraphs = doc.split("\n\n")
    description = " ".join(paragraphs[0].split()) if paragraphs and paragraphs[0] else ""
    args: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args:
            if stripped.endswith(":") and not line.startswith((" ", "\t")):
                break
            match = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
            if match and (current is None or len(line) - len(line.lstrip()) <= 8):
                current = match.group(1)
                args[current] = match.group(2).strip()
            elif stripped and current:
                args[current] = f"{args[current]} {stripped}"
            elif not stripped and args:
                current = None
    return description, args


# -- execution -------------------------------------------------------------------------


def _prepare(call: ToolCall, tools: Mapping[str, Tool]) -> tuple[Tool, dict[str, Any]] | ToolResult:
    found = tools.get(call.name)
    if found is None:
        names = ", ".join(sorted(tools)) or "none"
        return _error(call, f"unknown tool {call.name!r}; available tools: {names}")
    try:
        args = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return _error(call, f"invalid JSON arguments for {call.name}: {exc}")
    if not isinstance(args, dict):
        return _error(call, f"arguments for {call.name} must be a JSON object, got {args!r}")
    context = found.context_param
    if context is not None and context in args:
        return _error(call, f"arguments do not fit {call.name}: unexpected argument {context!r}")
    try:
        inspect.signature(found.fn).bind(**args, **({context: None} if context else {}))
    except TypeError as exc:
        return _error(call, f"arguments do not fit {call.name}: {exc}")
    return found, args


def _arguments(
    found: Tool, args: dict[str, Any], call: ToolCall, context: ToolContext | None
) -> dict[str, Any]:
    """The keyword arguments of the call: the model's, and the context if it asks."""
    if found.context_param is None:
        return args
    given = context if context is not None else ToolContext(run_id="", call_id=call.id)
    return {**args, found.context_param: given}


def _error(call: ToolCall, message: str) -> ToolResult:
    return ToolResult(call_id=call.id, name=call.name, content=f"Error: {message}", is_error=True)


def _result(call: ToolCall, value: object) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        content = value
    else:
        try:
            content = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            content = str(value)
    return ToolResult(call_id=call.id, name=call.name, content=content)


def _failed(call: ToolCall, exc: BaseException) -> ToolResult:
    return _error(call, f"{call.name} raised {type(exc).__name__}: {exc}")


def _timed_out(call: ToolCall, limit: float, *, started: bool, threads: ToolThreads) -> ToolResult:
    if started:
        return _error(
            call,
            f"{call.name} timed out after {limit:g}s; it may still be running, and what it "
            "returns will be discarded",
        )
    return _error(
        call,
        f"{call.name} timed out after {limit:g}s before it started: all {threads.max_workers} "
        "tool threads were busy (calls that timed out earlier may still be running)",
    )


def execute_tool(
    call: ToolCall,
    tools: Mapping[str, Tool],
    *,
    timeout: float | None = None,
    executor: ToolThreads | None = None,
    context: ToolContext | None = None,
) -> ToolResult:
    """Run one tool call synchronously; every failure becomes an error result.

    Without a timeout the tool runs on the calling thread. With one it runs on a thread
    of ``executor`` (a loop passes its own; None: a thread of its own), and a timeout
    abandons the call: the thread may finish later, its result discarded. An async tool
    runs in its own event loop.

    Args:
        call: the model's call.
        tools: the tools by name.
        timeout: seconds before the call is abandoned (a tool's own timeout wins).
        executor: the threads to run it on when there is a timeout.
        context: what a tool taking a :class:`ToolContext` is given (None: one with only
            the call's id).

    Raises:
        SuspendRun: the tool asked to pause the run.
    """
    prepared = _prepare(call, tools)
    if isinstance(prepared, ToolResult):
        return prepared
    found, args = prepared
    kwargs = _arguments(found, args, call, context)
    limit = found.timeout if found.timeout is not None else timeout

    def invoke() -> object:
        value = found.fn(**kwargs)
        if inspect.isawaitable(value):
            return asyncio.run(_awaited(value))
        return value

    try:
        if limit is None:
            return _result(call, invoke())
        threads = executor if executor is not None else ToolThreads(1)
        future = threads.submit(contextvars.copy_context().run, invoke)
        try:
            return _result(call, future.result(timeout=limit))
        except concurrent.futures.TimeoutError:
            if future.done() and not future.cancelled():
                return _result(call, future.result())
            return _timed_out(call, limit, started=not future.cancel(), threads=threads)
    except SuspendRun:
        raise
    except Exception as exc:
        return _failed(call, exc)


async def _awaited(value: Any) -> object:
    return await value


async def execute_tool_async(
    call: ToolCall,
    tools: Mapping[str, Tool],
    *,
    timeout: float | None = None,
    executor: ToolThreads | None = None,
    context: ToolContext | None = None,
) -> ToolResult:
    """Run one tool call in an event loop; sync tools run on a thread of ``executor``.

    Takes the arguments of :func:`execute_tool`. At the timeout an async tool is
    cancelled; a sync tool's thread is abandoned (its result discarded).

    Raises:
        SuspendRun: the tool asked to pause the run.
    """
    prepared = _prepare(call, tools)
    if isinstance(prepared, ToolResult):
        return prepared
    found, args = prepared
    kwargs = _arguments(found, args, call, context)
    limit = found.timeout if found.timeout is not None else timeout
    threads = executor if executor is not None else ToolThreads(1)
    future: concurrent.futures.Future[Any] | None = None
    try:
        if inspect.iscoroutinefunction(found.fn):
            pending = found.fn(**kwargs)
        else:
            future = threads.submit(contextvars.copy_context().run, found.fn, **kwargs)
            pending = asyncio.wrap_future(future)
        value = await asyncio.wait_for(pending, timeout=limit)
        if inspect.isawaitable(value):
            value = await asyncio.wait_for(value, timeout=limit)
        return _result(call, value)
    except SuspendRun:
        raise
    except asyncio.TimeoutError:
        assert limit is not None
        started = future is None or not future.cancelled()
        return _timed_out(call, limit, started=started, threads=threads)
    except Exception as exc:
        return _failed(call, exc)
