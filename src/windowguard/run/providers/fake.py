"""Scripted providers for tests: ``FakeProvider`` and ``AsyncFakeProvider``.

Like pydantic-ai's ``TestModel``/``FunctionModel``, they ship in the package because
users testing their own loops need them too. They speak the OpenAI Chat format, make
no I/O, and record every request they were sent.

A script is a sequence of items, one per provider call (or a function of the request):
a ``str`` (a text reply), a :class:`FakeCalls` (tool calls), a
:class:`~windowguard.run.providers.base.ModelResponse`, a
:class:`~windowguard.core.failures.Failure` (raised as ``ProviderError``), or any exception.
When the script runs out, the provider answers ``"done"``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...accounting.catalog import ModelInfo
from ...core.exceptions import ConfigurationError, ProviderError
from ...core.failures import Failure
from ...core.shapes import Format
from .base import ModelRequest, ModelResponse, StreamDelta, ToolCall, ToolResult, Usage

__all__ = ["AsyncFakeProvider", "FakeCalls", "FakeProvider", "ScriptItem"]


@dataclass(frozen=True, slots=True)
class FakeCalls:
    """A scripted reply that calls tools: ``FakeCalls(("read", {"path": "a"}), ...)``.

    Arguments given as a ``str`` are sent verbatim (to script invalid JSON).
    """

    calls: tuple[tuple[str, dict[str, Any] | str], ...]
    text: str = ""

    def __init__(self, *calls: tuple[str, dict[str, Any] | str], text: str = "") -> None:
        object.__setattr__(self, "calls", tuple(calls))
        object.__setattr__(self, "text", text)


ScriptItem = str | FakeCalls | ModelResponse | Failure | BaseException


def default_usage(request: ModelRequest) -> int:
    """A deterministic prompt-token count: JSON characters / 4 (messages + tools)."""
    body = json.dumps(list(request.messages), default=str)
    tools = json.dumps([t.parameters for t in request.tools]) if request.tools else ""
    return (len(body) + len(tools)) // 4 + 3


class _FakeBase:
    def __init__(
        self,
        script: Sequence[ScriptItem] | Callable[[ModelRequest], ScriptItem] = (),
        *,
        model: str = "fake-model",
        model_info: ModelInfo | None = None,
        usage: Callable[[ModelRequest], int | None] | None = default_usage,
    ) -> None:
        if not callable(script) and not isinstance(script, Sequence):
            raise ConfigurationError("script must be a sequence of items or a function")
        self._script = script
        self._position = 0
        self._model = model
        self._info = model_info or ModelInfo(8192, tokenizer="o200k", source="explicit")
        self._usage = usage
        self.requests: list[ModelRequest] = []

    @property
    def format(self) -> Format:
        return "openai_chat"

    @property
    def model(self) -> str:
        return self._model

    @property
    def calls(self) -> int:
        """How many times the provider was called."""
        return len(self.requests)

    def model_info(self) -> ModelInfo:
        return self._info

    def tool_result_messages(self, results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        return [{"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in results]

    def user_message(self, text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def _answer(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if callable(self._script):
            item = self._script(request)
        elif self._position < len(self._script):
            item = self._script[self._position]
            self._position += 1
        else:
            item = "done"
        if isinstance(item, Failure):
            raise ProviderError(item)
        if isinstance(item, BaseException):
            raise item
        usage = None
        if self._usage is not None:
            counted = self._usage(request)
            usage = Usage(input_tokens=counted, output_tokens=5) if counted is not None else None
        if isinstance(item, ModelResponse):
            return item
        if isinstance(item, str):
            return ModelResponse(
                message={"role": "assistant", "content": item},
                text=item,
                usage=usage,
                stop_reason="stop",
            )
        calls = tuple(
            ToolCall(
                id=f"call_{i}",
                name=name,
                arguments=args if isinstance(args, str) else json.dumps(args),
            )
            for i, (name, args) in enumerate(item.calls)
        )
        return ModelResponse(
            message={
                "role": "assistant",
                "content": item.text or None,
                "tool_calls": [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in calls
                ],
            },
            text=item.text,
            tool_calls=calls,
            usage=usage,
            stop_reason="tool_calls",
        )


class FakeProvider(_FakeBase):
    """A scripted synchronous provider (OpenAI Chat format)."""

    def complete(self, request: ModelRequest) -> ModelResponse:
        return self._answer(request)

    def stream(self, request: ModelRequest) -> Iterator[StreamDelta | ModelResponse]:
        response = self._answer(request)
        for word in _pieces(response.text):
            yield StreamDelta(text=word)
        yield response


class AsyncFakeProvider(_FakeBase):
    """A scripted asynchronous provider (OpenAI Chat format)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return self._answer(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamDelta | ModelResponse]:
        response = self._answer(request)
        for word in _pieces(response.text):
            yield StreamDelta(text=word)
        yield response


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words) if w or i == 0]
