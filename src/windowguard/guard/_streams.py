"""Usage from streams, without changing the stream the caller gets.

A streamed reply reports its usage in one of its events: OpenAI Chat Completions in the
last chunk (when ``stream_options.include_usage`` asked for it), Anthropic in
``message_start`` (the prompt's tokens, final once the request is accepted), Responses
in ``response.completed`` / ``response.incomplete``; the SDKs' stream helpers pass the
same events on (OpenAI's chat helper inside ``chunk`` events). The guard must feed that usage
back when the caller consumes the stream, however it consumes it (iteration,
``text_stream``, ``get_final_message()``, ``until_done()``).

Every one of those paths reads the SDK stream's single ``_iterator`` (``Stream``,
``AsyncStream``, Anthropic's ``MessageStream`` and ``AsyncMessageStream`` alike), so
:func:`tap` replaces it with a generator that yields the very same items and hands the
first usage it sees to a callback. The caller keeps the SDK's own object, of the SDK's
own type, with its context manager, ``close()``, ``response`` and helpers untouched.

With ``hide_usage_chunk`` (a Chat Completions stream for which the guard, not the
caller, asked ``include_usage``), the stream the caller reads is the one they would get
without the guard: the usage-only last chunk (no ``choices``) is read and withheld, and
the ``"usage": null`` that ``include_usage`` adds to every other chunk is unset again, so
``chunk.to_dict()`` / ``to_json()`` match too. For an SDK stream helper
(``chat.completions.stream``) the helper's own raw stream is tapped, so its events and
``get_final_completion()`` never see the chunk either.

Invariants: items pass through unchanged (but for the hiding above) and in order; the
callback runs at most once per stream; a stream consumed only in part, closed early or
broken by an error never calls it (the conversation then knows the send reported no
usage). An SDK stream without ``_iterator`` (a future SDK) is returned untouched and
reports no usage (and, with ``hide_usage_chunk``, cannot hide the chunk: the guard then
does not know the SDK).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from ..core.adapters._common import field

__all__ = ["is_usage_only_chunk", "stream_usage", "tap", "tap_async"]

UsageCallback = Callable[[object], None]


def stream_usage(event: object) -> object | None:
    """The usage an OpenAI, Anthropic or Responses stream event reports, if any.

    ``event`` is an SDK event object or a decoded JSON event (the proxy's): both are read
    with :func:`~windowguard.core.adapters._common.field`. OpenAI Chat Completions: a chunk's
    ``usage`` (the last chunk, when ``stream_options.include_usage`` asked for it);
    Anthropic: ``message_start``'s ``message.usage`` (the prompt's count is final once the
    request is accepted); Responses: ``response.completed`` / ``response.incomplete``'s
    ``response.usage``. A scalar where a usage should be is no usage.
    """
    kind = field(event, "type")
    if kind == "message_start":
        return _usage_of(field(event, "message"))
    if kind in ("response.completed", "response.incomplete"):
        return _usage_of(field(event, "response"))
    if kind == "chunk":  # openai's chat.completions.stream helper wraps each chunk
        event = field(event, "chunk")
    if field(event, "object") == "chat.completion.chunk":
        return _usage_of(event)
    return None


def is_usage_only_chunk(event: object) -> bool:
    """Whether an event is the Chat Completions chunk ``include_usage`` adds at the end
    of a stream: no ``choices``, a ``usage`` (an SDK object or a decoded JSON chunk)."""
    return (
        field(event, "object") == "chat.completion.chunk"
        and field(event, "choices") == []
        and _usage_of(event) is not None
    )


def _unset_null_usage(chunk: object) -> None:
    """Unset the ``"usage": null`` ``include_usage`` adds to a chunk, as if the server
    had not sent it (a pydantic model's fields set: what ``to_dict()`` / ``to_json()``
    include). The chunk is the SDK's fresh object for this event, shared with no one."""
    fields = getattr(chunk, "model_fields_set", None)
    if isinstance(fields, set) and "usage" in fields and field(chunk, "usage") is None:
        fields.discard("usage")


def _usage_of(holder: object) -> object | None:
    usage = None if holder is None else field(holder, "usage")
    return None if usage is None or isinstance(usage, (str, bytes, int, float)) else usage


def tap(stream: Any, on_usage: UsageCallback, *, hide_usage_chunk: bool = False) -> bool:
    """Make a sync SDK stream report its usage to ``on_usage`` as it is consumed.

    Args:
        stream: the SDK's stream (or stream helper) object.
        on_usage: called once with the usage, when the event reporting it is read.
        hide_usage_chunk: withhold the usage-only chunk and unset the other chunks'
            ``"usage": null`` (the guard asked ``include_usage``, the caller did not).

    Returns:
        Whether the stream could be tapped.
    """
    target = _raw(stream) if hide_usage_chunk else stream
    iterator = getattr(target, "_iterator", None)
    if iterator is None or not hasattr(iterator, "__next__"):
        return False
    target._iterator = _tapped(iterator, on_usage, hide_usage_chunk)
    return True


def tap_async(stream: Any, on_usage: UsageCallback, *, hide_usage_chunk: bool = False) -> bool:
    """:func:`tap` for an async SDK stream."""
    target = _raw(stream) if hide_usage_chunk else stream
    iterator = getattr(target, "_iterator", None)
    if iterator is None or not hasattr(iterator, "__anext__"):
        return False
    target._iterator = _atapped(iterator, on_usage, hide_usage_chunk)
    return True


def _raw(stream: Any) -> Any:
    """The stream of chunks under an SDK stream helper (its ``_raw_stream``, which the
    helper reads lazily through ``_iterator``), or the stream itself."""
    raw = getattr(stream, "_raw_stream", None)
    return stream if raw is None else raw


def _tapped(iterator: Iterator[Any], on_usage: UsageCallback, hide: bool) -> Iterator[Any]:
    reported = False
    try:
        for item in iterator:
            if not reported:
                usage = stream_usage(item)
                if usage is not None:
                    reported = True
                    on_usage(usage)
            if hide:
                if is_usage_only_chunk(item):
                    continue
                _unset_null_usage(item)
            yield item
    finally:
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


async def _atapped(
    iterator: AsyncIterator[Any], on_usage: UsageCallback, hide: bool
) -> AsyncIterator[Any]:
    reported = False
    try:
        async for item in iterator:
            if not reported:
                usage = stream_usage(item)
                if usage is not None:
                    reported = True
                    on_usage(usage)
            if hide:
                if is_usage_only_chunk(item):
                    continue
                _unset_null_usage(item)
            yield item
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
