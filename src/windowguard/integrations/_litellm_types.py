"""The LiteLLM wrappers' signatures, for type checkers: LiteLLM's own.

``litellm.completion`` / ``litellm.acompletion`` are declared ``(model: str, messages:
list = [], ..., stream: bool | None = None, ..., **kwargs) -> ModelResponse |
CustomStreamWrapper``, behind decorators a type checker cannot see through (mypy sees
``Any``). windowguard's wrappers take the same arguments plus two of their own
(``model_info=`` as a :class:`~windowguard.ModelInfo`, ``edits=``), and are typed here
with LiteLLM's parameter and return types, overloaded on ``stream`` so that a plain call
is a ``ModelResponse`` and a streamed one LiteLLM's stream. ``tests/test_typing_suite.py``
checks that every parameter named here is LiteLLM's, with LiteLLM's annotation.

Nothing here runs: the protocols are only annotations, and LiteLLM's types are imported
for the type checker alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, overload

if TYPE_CHECKING:
    from litellm import CustomStreamWrapper, ModelResponse

    from ..accounting.catalog import ModelInfo
    from ..core.edits.config import EditStage
    from ..core.prune import PruningPolicy
    from ..pipeline.manager import ContextWindowManager
    from ..run.sinks import Sink

__all__ = [
    "ACompletion",
    "Completion",
    "GuardOptions",
    "typed_acompletion",
    "typed_completion",
]


class GuardOptions(TypedDict, total=False):
    """``ContextWindowGuard``'s options, as ``ContextWindowLogger(**options)`` takes them
    (``tests/test_surface_options.py`` keeps the two the same)."""

    model_info: ModelInfo | None
    safety: int
    pruning: PruningPolicy
    edits: Sequence[EditStage] | None
    strict: bool
    ttl_seconds: float | None
    max_conversations: int
    discover: bool | None
    sinks: Sink | Iterable[Sink] | None
    manager: ContextWindowManager | None


class Completion(Protocol):
    """``litellm.completion``'s signature, with windowguard's ``model_info`` and ``edits``."""

    @overload
    def __call__(
        self,
        model: str,
        messages: list[Any] = ...,
        *,
        stream: Literal[False] | None = None,
        stream_options: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        max_completion_tokens: int | None = None,
        tools: list[Any] | None = None,
        model_info: ModelInfo | dict[str, Any] | None = None,
        edits: Sequence[EditStage] | None = None,
        **kwargs: Any,
    ) -> ModelResponse: ...

    @overload
    def __call__(
        self,
        model: str,
        messages: list[Any] = ...,
        *,
        stream: Literal[True],
        stream_options: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        max_completion_tokens: int | None = None,
        tools: list[Any] | None = None,
        model_info: ModelInfo | dict[str, Any] | None = None,
        edits: Sequence[EditStage] | None = None,
        **kwargs: Any,
    ) -> CustomStreamWrapper: ...

    @overload
    def __call__(
        self,
        model: str,
        messages: list[Any] = ...,
        *,
        stream: bool | None = None,
        stream_options: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        max_completion_tokens: int | None = None,
        tools: list[Any] | None = None,
        model_info: ModelInfo | dict[str, Any] | None = None,
        edits: Sequence[EditStage] | None = None,
        **kwargs: Any,
    ) -> ModelResponse | CustomStreamWrapper: ...


class ACompletion(Protocol):
    """``litellm.acompletion``'s signature, with windowguard's ``model_info`` and ``edits``."""

    @overload
    async def __call__(
        self,
        model: str,
        messages: list[Any] = ...,
        *,
        stream: Literal[False] | None = None,
        stream_options: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        max_completion_tokens: int | None = None,
        tools: list[Any] | None = None,
        model_info: ModelInfo | dict[str, Any] | None = None,
        edits: Sequence[EditStage] | None = None,
        **kwargs: Any,
    ) -> ModelResponse: ...

    @overload
    async def __call__(
        self,
        model: str,
        messages: list[Any] = ...,
        *,
        stream: Literal[True],
        stream_options: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        max_completion_tokens: int | None = None,
        tools: list[Any] | None = None,
        model_info: ModelInfo | dict[str, Any] | None = None,
        edits: Sequence[EditStage] | None = None,
        **kwargs: Any,
    ) -> CustomStreamWrapper: ...

    @overload
    async def __call__(
        self,
        model: str,
        messages: list[Any] = ...,
        *,
        stream: bool | None = None,
        stream_options: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        max_completion_tokens: int | None = None,
        tools: list[Any] | None = None,
        model_info: ModelInfo | dict[str, Any] | None = None,
        edits: Sequence[EditStage] | None = None,
        **kwargs: Any,
    ) -> ModelResponse | CustomStreamWrapper: ...


def typed_completion(function: Callable[..., Any]) -> Completion:
    """``function`` itself, typed as ``litellm.completion``'s signature."""
    return function


def typed_acompletion(function: Callable[..., Any]) -> ACompletion:
    """``function`` itself, typed as ``litellm.acompletion``'s signature."""
    return function
