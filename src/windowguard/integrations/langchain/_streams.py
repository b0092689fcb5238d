"""Stream usage for the middleware without changing the stream the agent's caller reads.

A ``ChatOpenAI`` left with ``stream_usage`` unset streams without usage against any
base URL but OpenAI's own. The middleware calls a copy of it that asks for usage
(``stream_usage=True``, which sends ``stream_options.include_usage``); LangChain would
turn the usage-only last chunk that brings into one more ``AIMessageChunk`` (empty
content, ``usage_metadata``) for every ``stream_mode="messages"`` reader and callback,
and put its usage on the agent's final message. So the copy's ``client`` /
``async_client`` (the openai SDK's ``chat.completions``) is wrapped: a stream it returns
is the SDK's own, tapped (:func:`windowguard.guard._streams.tap`) to withhold that chunk
and hand its usage to the model call running in :func:`collecting`, which the
middleware wraps around the handler. LangChain then streams exactly what it streams
without windowguard.

Invariants: only streams are touched, and only those asked for usage by windowguard
(the copy is made only for a model whose ``stream_usage`` and ``stream_options`` are
unset); the usage goes only to the model call whose context made the request (a
context variable), never to a concurrent one's. A call outside :func:`collecting` (the
LangGraph hook's model, which reads usage from the reply instead) gets no copy of this
kind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ...guard._streams import tap, tap_async

__all__ = ["AsyncHidingCompletions", "HidingCompletions", "collecting"]

_RECEIVER: ContextVar[list[object] | None] = ContextVar("windowguard_stream_usage", default=None)


@contextmanager
def collecting() -> Iterator[list[object]]:
    """Collect the usage of the streams the model call made inside this block (the
    first one: one model call makes one request)."""
    box: list[object] = []
    token = _RECEIVER.set(box)
    try:
        yield box
    finally:
        _RECEIVER.reset(token)


def _report(usage: object) -> None:
    box = _RECEIVER.get()
    if box is not None and not box:
        box.append(usage)


class HidingCompletions:
    """An openai ``chat.completions`` resource whose streams hide the usage-only chunk
    and report its usage to :func:`collecting`; everything else is the resource's own."""

    __slots__ = ("_completions",)

    def __init__(self, completions: Any) -> None:
        self._completions = completions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._completions, name)

    def create(self, **kwargs: Any) -> Any:
        """The resource's ``create``; a stream comes back tapped."""
        result = self._completions.create(**kwargs)
        if kwargs.get("stream") is True:
            tap(result, _report, hide_usage_chunk=True)
        return result


class AsyncHidingCompletions(HidingCompletions):
    """:class:`HidingCompletions` for the async resource."""

    __slots__ = ()

    async def create(self, **kwargs: Any) -> Any:
        """The resource's ``create``; a stream comes back tapped."""
        result = await self._completions.create(**kwargs)
        if kwargs.get("stream") is True:
            tap_async(result, _report, hide_usage_chunk=True)
        return result
