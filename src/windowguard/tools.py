"""Tools the loop can run: ``Tool`` values and the ``@tool`` decorator.

A tool is a name, a description, a JSON schema of its arguments and a callable (sync
or async). The ``@tool`` decorator derives the schema from the function's type hints
and its Google-style docstring (first paragraph: description; ``Args:``: parameter
descriptions).

Running a tool never crashes a run: invalid JSON arguments, an unknown tool name,
arguments that do not fit the signature, an exception and a timeout all become a
tool result the model sees, marked ``is_error`` and saying what went wrong. Only
:class:`~windowguard.exceptions.SuspendRun` passes through: it pauses the run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin, overload

from .exceptions import ConfigurationError, SuspendRun
from .providers.base import ToolCall, ToolResult, ToolSpec

__all__ = ["Tool", "execute_tool", "execute_tool_async", "schema_from_function", "tool"]

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A tool the model may call.

    Attributes:
        name: the name the model calls it by (``[a-zA-Z0-9_-]{1,64}``).
        description: what it does, for the model.
        parameters: JSON schema (an ``object``) of its arguments.
        fn: the callable, sync or async, called with the arguments as keywords.
        timeout: seconds before the call is abandoned (overrides the loop's default).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    fn: Callable[..., Any]
    timeout: float | None = None

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

    @property
    def spec(self) -> ToolSpec:
        """The tool as the model sees it."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


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

    Example:
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
        )

    return wrap(fn) if fn is not None else wrap


def schema_from_function(fn: Callable[..., Any]) -> tuple[str, dict[str, Any]]:
    """The description and JSON schema of ``fn``'s keyword arguments.

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
        schema = _schema(annotation, f"{fn.__name__}({param.name})")
        if param.name in arg_docs:
            schema["description"] = arg_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif _json_value(param.default):
            schema["default"] = param.default
        properties[param.name] = schema
    return description, {"type": "object", "properties": properties, "required": required}


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
    try:
        inspect.signature(found.fn).bind(**args)
    except TypeError as exc:
        return _error(call, f"arguments do not fit {call.name}: {exc}")
    return found, args


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


def execute_tool(
    call: ToolCall,
    tools: Mapping[str, Tool],
    *,
    timeout: float | None = None,
    executor: concurrent.futures.Executor | None = None,
) -> ToolResult:
    """Run one tool call synchronously; every failure becomes an error result.

    A timeout abandons the call (the worker thread may finish later; its result is
    discarded). An async tool runs in its own event loop on a worker thread.

    Raises:
        SuspendRun: the tool asked to pause the run.
    """
    prepared = _prepare(call, tools)
    if isinstance(prepared, ToolResult):
        return prepared
    found, args = prepared
    limit = found.timeout if found.timeout is not None else timeout

    def invoke() -> object:
        value = found.fn(**args)
        if inspect.isawaitable(value):
            return asyncio.run(_awaited(value))
        return value

    try:
        if limit is None:
            return _result(call, invoke())
        pool = executor or _shared_pool()
        future = pool.submit(invoke)
        try:
            return _result(call, future.result(timeout=limit))
        except concurrent.futures.TimeoutError:
            future.cancel()
            return _error(call, f"{call.name} timed out after {limit:g}s")
    except SuspendRun:
        raise
    except Exception as exc:
        return _failed(call, exc)


async def _awaited(value: Any) -> object:
    return await value


async def execute_tool_async(
    call: ToolCall, tools: Mapping[str, Tool], *, timeout: float | None = None
) -> ToolResult:
    """Run one tool call in an event loop; sync tools run in a worker thread.

    Raises:
        SuspendRun: the tool asked to pause the run.
    """
    prepared = _prepare(call, tools)
    if isinstance(prepared, ToolResult):
        return prepared
    found, args = prepared
    limit = found.timeout if found.timeout is not None else timeout
    try:
        if inspect.iscoroutinefunction(found.fn):
            pending = found.fn(**args)
        else:
            pending = asyncio.to_thread(found.fn, **args)
        value = await asyncio.wait_for(pending, timeout=limit)
        if inspect.isawaitable(value):
            value = await asyncio.wait_for(value, timeout=limit)
        return _result(call, value)
    except SuspendRun:
        raise
    except asyncio.TimeoutError:
        return _error(call, f"{call.name} timed out after {limit:g}s")
    except Exception as exc:
        return _failed(call, exc)


_POOL: concurrent.futures.ThreadPoolExecutor | None = None


def _shared_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(
            max_workers=8, thread_name_prefix="windowguard-tool"
        )
    return _POOL
