"""Providers: the tool loop's connection to a model, on the official SDKs.

:mod:`.base` holds the contract (:class:`~.base.Provider`, :class:`~.base.ModelRequest`
...). The SDK-backed providers live in their own modules and are imported lazily, so
``import windowguard.run.providers`` imports no SDK; touching a provider class imports its
SDK, and a missing SDK raises ``ImportError`` naming the extra to install::

    from windowguard.run.providers import OpenAIChatProvider      # imports openai
    from windowguard.run.providers import AnthropicProvider       # imports anthropic
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .anthropic import AnthropicProvider, AsyncAnthropicProvider
    from .openai import AsyncOpenAIChatProvider, OpenAIChatProvider

__all__ = [
    "AnthropicProvider",
    "AsyncAnthropicProvider",
    "AsyncOpenAIChatProvider",
    "OpenAIChatProvider",
]

_LAZY = {
    "AnthropicProvider": ".anthropic",
    "AsyncAnthropicProvider": ".anthropic",
    "AsyncOpenAIChatProvider": ".openai",
    "OpenAIChatProvider": ".openai",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
