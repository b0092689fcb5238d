"""How the emulator reports usage: on every answer, or not; cached tokens, and how.

A :class:`UsagePlan` makes the emulator behave like the providers whose usage reports
are less than complete, so clients can be tested against them:

* **omitted usage**: chosen calls (``omit_calls``) or a seeded share of them
  (``omit_probability``) answer with no usage at all (``"usage": null``; no usage chunk
  in a stream), as servers that do not count, proxies that strip it, or a stream cut
  before its last chunk do;
* **a prompt cache**: the longest message prefix the request shares with a recent one
  (same tools) is *cached*, counted in whole blocks (``cache_block_tokens``, 128) once it
  reaches ``cache_min_tokens`` (1,024): OpenAI's published prompt-caching rule. With
  ``cache="reported"`` the usage reports it the way OpenAI does, inside the prompt count
  (``prompt_tokens`` is the whole prompt, ``prompt_tokens_details.cached_tokens`` beside
  it); with ``cache="excluded"`` the way some servers do, outside it (``prompt_tokens``
  is the prompt *minus* the cached tokens, the cached ones beside it), which a client
  that trusts ``prompt_tokens`` as the prompt's size under-counts.

Invariants: whether call *n* omits its usage depends only on the plan and *n* (as
:class:`~windowguard.emulator.FaultPlan` decides faults); the cached count of a request
never exceeds its exact prompt count and is a multiple of the block; the emulator's
:class:`~windowguard.emulator.CallRecord` always keeps the exact prompt count. Served by
the OpenAI-compatible flavours (chat completions and Responses).
"""

from __future__ import annotations

import json
import random
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..accounting.counters import TokenCounter
from ..accounting.templates import count_prompt_parts
from ..core.exceptions import ConfigurationError

__all__ = ["CACHE_MODES", "PrefixCache", "UsagePlan", "check_usage_plan"]

CacheMode = Literal["off", "reported", "excluded"]
CACHE_MODES: tuple[str, ...] = get_args(CacheMode)
_REMEMBERED = 16  # recent requests a new one may share a cached prefix with


@dataclass(frozen=True, slots=True, kw_only=True)
class UsagePlan:
    """Which answers carry usage, and how cached prompt tokens are reported.

    Attributes:
        omit_calls: call numbers (from 1) whose answers carry no usage.
        omit_probability: chance in 0..1 that any other call carries none (seeded).
        seed: seeds that draw, so the same seed omits the same calls.
        cache: ``"off"`` (no cache), ``"reported"`` (cached tokens inside
            ``prompt_tokens``, as OpenAI reports them) or ``"excluded"`` (outside it).
        cache_min_tokens: the smallest prefix that is cached.
        cache_block_tokens: cached prefixes are counted in whole blocks of this size.

    Raises:
        ConfigurationError: a probability outside 0..1, a call number below 1, an
            unknown cache mode or a non-positive size.
    """

    omit_calls: frozenset[int] = frozenset()
    omit_probability: float = 0.0
    seed: int = 0
    cache: CacheMode = "off"
    cache_min_tokens: int = 1_024
    cache_block_tokens: int = 128

    def __post_init__(self) -> None:
        if not 0.0 <= self.omit_probability <= 1.0:
            raise ConfigurationError(
                f"omit_probability must be in 0..1, got {self.omit_probability!r}"
            )
        if any(not isinstance(n, int) or n < 1 for n in self.omit_calls):
            raise ConfigurationError(f"omit_calls are call numbers from 1, got {self.omit_calls}")
        if self.cache not in CACHE_MODES:
            raise ConfigurationError(f"cache must be one of {CACHE_MODES}, got {self.cache!r}")
        for name in ("cache_min_tokens", "cache_block_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(f"{name} must be a positive int, got {value!r}")

    def omits(self, call_number: int) -> bool:
        """Whether call ``call_number`` (from 1) answers without usage."""
        if call_number in self.omit_calls:
            return True
        if self.omit_probability <= 0.0:
            return False
        draw = random.Random(f"windowguard-usage:{self.seed}:{call_number}").random()
        return draw < self.omit_probability


def check_usage_plan(usage: object, flavor: str) -> UsagePlan:
    """The emulator's ``usage=`` argument as a plan (None: usage on every answer).

    Raises:
        ConfigurationError: not a plan, or a plan for the anthropic flavour (the
            Anthropic API always reports usage, its cache reads beside ``input_tokens``).
    """
    if usage is None:
        return UsagePlan()
    if not isinstance(usage, UsagePlan):
        raise ConfigurationError(f"usage must be a UsagePlan or None, got {usage!r}")
    if flavor == "anthropic":
        raise ConfigurationError(
            "usage plans are emulated for the OpenAI-compatible flavours; the Anthropic API "
            "always reports usage, with cache reads beside input_tokens"
        )
    return usage


class PrefixCache:
    """The emulated prompt cache: recent requests, and what a new one shares with them.

    Args:
        plan: the usage plan (its cache mode, block and minimum sizes).
        counter: the emulator's tokenizer.
        template: its chat template.
    """

    def __init__(self, plan: UsagePlan, counter: TokenCounter, template: str) -> None:
        self._plan = plan
        self._counter = counter
        self._template = template
        self._lock = threading.Lock()
        self._recent: deque[tuple[str, tuple[str, ...]]] = deque(maxlen=_REMEMBERED)

    def cached_tokens(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        prompt_tokens: int,
    ) -> int | None:
        """The cached part of a request's prompt (None when no cache is emulated), then
        remember the request.

        The shared prefix is the longest run of leading messages equal to a recent
        request's with the same tools; its size is the tool block plus what those
        messages add (:func:`windowguard.accounting.templates.count_prompt_parts`), at most the
        prompt, in whole blocks, and 0 below the minimum.

        Args:
            messages: the request's messages in chat form.
            tools: its tool schemas.
            prompt_tokens: the exact prompt count.
        """
        if self._plan.cache == "off":
            return None
        tools_key = json.dumps(list(tools), sort_keys=True, default=str)
        keys = tuple(json.dumps(m, sort_keys=True, default=str) for m in messages)
        with self._lock:
            shared = 0
            for recent_tools, recent in self._recent:
                if recent_tools != tools_key:
                    continue
                common = 0
                for mine, theirs in zip(keys, recent, strict=False):
                    if mine != theirs:
                        break
                    common += 1
                shared = max(shared, common)
            self._recent.append((tools_key, keys))
        if shared == 0:
            return 0
        parts = count_prompt_parts(
            self._counter, list(messages), list(tools) or None, template=self._template
        )
        prefix = min(prompt_tokens, parts.tools_tokens + sum(parts.message_tokens[:shared]))
        if prefix < self._plan.cache_min_tokens:
            return 0
        block = self._plan.cache_block_tokens
        return prefix // block * block
