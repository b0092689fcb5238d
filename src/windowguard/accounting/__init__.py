"""Token accounting from the best source available (DESIGN.md "Accounting").

Sources, in order of trust:

1. the **ledger** (:mod:`.ledger`): what the provider reported for earlier requests,
   exact for the request just sent; consecutive reports measure the turns appended in
   between;
2. a **remote count** (:mod:`.remote`): the serving endpoint's own count of a request
   (vLLM/SGLang ``/tokenize``, llama.cpp ``/apply-template`` + ``/tokenize``,
   llama-cpp-python ``/extras/tokenize/count``, TGI ``/tokenize``, Anthropic
   ``count_tokens``, OpenAI ``responses/input_tokens``, Gemini ``countTokens``), asked
   only when a decision is near the edge;
3. a **local exact tokenizer** (:mod:`.local`) with the family's chat-template
   accounting, chosen automatically when one is installed;
4. the seed's over-counting **heuristic** (:mod:`windowguard.accounting.estimate`), times the run's
   calibration, for what nothing has measured yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

from ..core.exceptions import ConfigurationError
from .counters import TokenCounter
from .local import LOCAL_FAMILIES, TEMPLATE_OF, TemplateAccounting, local_accounting
from .remote import RemoteCounter

__all__ = [
    "INFERENCE_TOLERANCE",
    "CounterArg",
    "Sources",
    "choose_sources",
    "counter_name",
    "infer_family",
]

INFERENCE_TOLERANCE = 0.02
"""How close a local count must come to a provider's report to name the tokenizer."""

CounterArg = TokenCounter | RemoteCounter | Literal["auto", "heuristic"] | None
"""What a manager's ``counter=`` may be."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sources:
    """The exact sources a manager counts with besides the ledger.

    Attributes:
        local: the local exact tokenizer with its family's template accounting.
        remote: the serving endpoint's count API.
        auto_remote: whether a count API found later (by a ``ToolLoop``'s provider or
            :meth:`~windowguard.ContextWindowManager.from_endpoint`) may be adopted.
        auto_local: whether a local tokenizer may be inferred from provider reports
            when the model's family is unknown (:func:`infer_family`).
    """

    local: TemplateAccounting | None
    remote: RemoteCounter | None
    auto_remote: bool
    auto_local: bool = False
    local_name: str | None = None
    """The name a caller's own counter goes by in ``Fit.sources`` and events
    (``"counter:<name>"``); None for a tokenizer found automatically."""


def choose_sources(counter: CounterArg, family: str | None) -> Sources:
    """The sources ``counter=`` asks for, for a model of tokenizer ``family``.

    Args:
        counter: None or ``"auto"``: the family's local exact tokenizer when installed,
            and a remote counter when one is found later; ``"heuristic"``: neither; a
            :class:`~windowguard.TokenCounter`: that tokenizer through the family's chat
            template (OpenAI's accounting for a family without one); a
            :class:`~windowguard.accounting.remote.RemoteCounter`: that count API, plus the
            local tokenizer if any.
        family: the model's tokenizer family (None: unknown).

    Raises:
        ConfigurationError: anything else.
    """
    if counter is None or counter == "auto":
        local = local_accounting(family)
        return Sources(local=local, remote=None, auto_remote=True, auto_local=local is None)
    if counter == "heuristic":
        return Sources(local=None, remote=None, auto_remote=False)
    if isinstance(counter, str):
        raise ConfigurationError(
            "counter must be 'auto', 'heuristic', a TokenCounter or a RemoteCounter, "
            f"got {counter!r}"
        )
    if callable(getattr(counter, "acount", None)) and isinstance(counter, RemoteCounter):
        local = local_accounting(family)
        return Sources(local=local, remote=counter, auto_remote=False, auto_local=local is None)
    if not callable(getattr(counter, "count", None)):
        raise ConfigurationError(
            "counter must have a count(text) -> int method (a TokenCounter) or be a "
            f"RemoteCounter, got {type(counter).__name__}"
        )
    template_family = family if family is not None and family in TEMPLATE_OF else "o200k"
    local = TemplateAccounting(template_family, cast(TokenCounter, counter))
    return Sources(
        local=local, remote=None, auto_remote=False, local_name=f"counter:{counter_name(counter)}"
    )


def counter_name(counter: object) -> str:
    """What a caller's counter is called: its ``name`` attribute when it has a string
    one, else its class name."""
    name = getattr(counter, "name", None)
    if isinstance(name, str) and name:
        return name
    return type(counter).__name__


def infer_family(
    reported: int, count_with: Callable[[TemplateAccounting], int]
) -> tuple[TemplateAccounting, int] | None:
    """The installed tokenizer family that counts a reported request the way the
    provider did, for a model whose family nobody named.

    Every family with an exact tokenizer installed counts the request
    (``count_with(accounting)``, e.g. framing + tools + head); the closest wins when it
    is within :data:`INFERENCE_TOLERANCE` of ``reported``. Families are tried in
    loading-cost order and an exact match stops the search, so the common case loads one
    vocabulary. A wrong match costs little: what it counts is still scaled by the run's
    calibration, which grows if it under-counts, and the ledger measures every send.

    Returns:
        ``(accounting, count)`` of the family chosen, or None.
    """
    best: tuple[float, TemplateAccounting, int] | None = None
    for family in LOCAL_FAMILIES:
        accounting = local_accounting(family)
        if accounting is None:
            continue
        try:
            counted = count_with(accounting)
        except Exception:  # a tokenizer that fails to load or count is no candidate
            continue
        error = abs(counted - reported) / max(reported, 1)
        if best is None or error < best[0]:
            best = (error, accounting, counted)
        if counted == reported:
            break
    if best is None or best[0] > INFERENCE_TOLERANCE:
        return None
    return best[1], best[2]
