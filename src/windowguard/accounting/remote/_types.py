"""The values every remote counter shares: the query, the error, the protocol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ...core.exceptions import WindowGuardError
from ...core.shapes import Format

__all__ = ["CountQuery", "DeadlineError", "Json", "RemoteCountError", "RemoteCounter"]

Json = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class CountQuery:
    """One request to count, in the caller's own wire format.

    Attributes:
        format: ``"openai_chat"``, ``"anthropic"`` or ``"responses"``.
        model: the model the request is for.
        messages: the caller's messages or Responses items (dicts or SDK objects).
        system: Anthropic's separate ``system`` argument (a string or text blocks);
            for Responses, the ``instructions``.
        tools: tool schemas in any wire format (OpenAI chat, Responses, Anthropic).
    """

    format: Format
    model: str
    messages: tuple[object, ...]
    system: object = None
    tools: tuple[object, ...] = ()


class RemoteCountError(WindowGuardError):
    """A remote count failed; the message names the endpoint and the reason.

    Attributes:
        endpoint: the counter's name (``"vllm POST /tokenize"``), when known.
        status: the HTTP status the server answered, when it answered.
    """

    def __init__(
        self, message: str, *, endpoint: str | None = None, status: int | None = None
    ) -> None:
        self.endpoint = endpoint
        self.status = status
        super().__init__(message)


class DeadlineError(RemoteCountError):
    """The count's deadline passed (discovery stops probing on it)."""


@runtime_checkable
class RemoteCounter(Protocol):
    """Counts a request's prompt tokens by asking the server that will answer it.

    A counter may also say, as ``media_formats`` (a set of wire formats), for which
    requests it counts images, audio and documents as the provider charges them: the
    manager then asks it to count a request holding media nothing has measured
    (decision 0004). Without it, no counter is asked for that reason.
    """

    name: str

    def count(self, query: CountQuery) -> int:
        """Exact prompt tokens the server's chat endpoint counts for ``query``."""
        ...

    async def acount(self, query: CountQuery) -> int:
        """Async twin of :meth:`count`; never blocks the event loop."""
        ...
