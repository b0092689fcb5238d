"""How each flavour enforces the context window and the output cap.

One pure function, :func:`enforce`, decides from the exact prompt count and the
requested reply size either the reply budget the server would really generate with, or
the error the server would really answer. The wire texts come from
:mod:`windowguard.core.provider_errors` (the one place they live); this module only decides
*which* error, following each server's own checks:

* **openai** — ``max_tokens`` above the model's output cap is rejected; prompt plus
  ``max_tokens`` above the window is ``context_length_exceeded``; without ``max_tokens``
  only a prompt that fills the window is rejected.
* **vllm** — ``max_tokens`` above ``max_model_len`` itself is rejected outright; a
  prompt that fills the window is rejected; ``max_tokens`` that does not
  fit beside the prompt is rejected; without ``max_tokens`` the budget is *silently*
  ``max_model_len - prompt`` (``vllm/entrypoints/utils.py: get_max_tokens`` takes the
  minimum of that, the request's value and the generation-config default).
* **llamacpp** — only a prompt that fills ``n_ctx`` is rejected
  (``exceed_context_size_error``); generation simply stops when the context is full, so
  the budget is silently lowered to what is left.
* **anthropic** — ``max_tokens`` above the model's output cap is rejected; a prompt above
  the window is "prompt is too long"; prompt plus ``max_tokens`` above the window is
  "input length and `max_tokens` exceed context limit" (since Claude 3.7 the API no
  longer lowers ``max_tokens`` itself). With the beta
  ``model-context-window-exceeded-2025-08-26`` the request is served instead and stops
  with ``stop_reason: "model_context_window_exceeded"`` when the window fills.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import provider_errors
from ..core.provider_errors import Flavor, WireError

__all__ = ["Limits", "ReplyBudget", "enforce"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The served model's limits.

    Attributes:
        flavor: ``"openai"``, ``"vllm"``, ``"llamacpp"`` or ``"anthropic"``.
        model: the model name errors mention.
        context_window: prompt plus reply, in tokens.
        max_output_tokens: the model's output cap, if any.
    """

    flavor: Flavor
    model: str
    context_window: int
    max_output_tokens: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyBudget:
    """The reply size the server generates with.

    Attributes:
        max_output_tokens: the most tokens the reply may have.
        window_bound: True when the window (not the request or the cap) set the budget,
            so a reply cut there stopped because the context was full.
    """

    max_output_tokens: int
    window_bound: bool = False


def enforce(
    limits: Limits,
    *,
    prompt_tokens: int,
    requested_output: int | None,
    window_exceeded_beta: bool = False,
) -> ReplyBudget | WireError:
    """Apply the flavour's window and output-cap checks.

    Args:
        limits: the served model's limits.
        prompt_tokens: the exact prompt count.
        requested_output: the request's ``max_tokens`` (or equivalent), None if absent.
        window_exceeded_beta: Anthropic only: the client sent the
            ``model-context-window-exceeded`` beta.

    Returns:
        The reply budget, or the error the server answers instead.
    """
    flavor = limits.flavor
    window = limits.context_window
    cap = limits.max_output_tokens
    room = window - prompt_tokens

    def overflow(requested: int | None) -> WireError:
        return provider_errors.context_overflow_error(
            flavor, prompt_tokens=prompt_tokens, context_window=window, requested_output=requested
        )

    def over_cap(requested: int, cap_tokens: int) -> WireError:
        return provider_errors.output_limit_error(
            flavor, requested_output=requested, max_output_tokens=cap_tokens, model=limits.model
        )

    capped = flavor in ("openai", "anthropic") and cap is not None
    if capped and cap is not None and requested_output is not None and requested_output > cap:
        return over_cap(requested_output, cap)
    if flavor == "anthropic":
        if prompt_tokens > window:
            return overflow(None)
        requested = requested_output if requested_output is not None else 0
        if requested > room:
            if not window_exceeded_beta:
                return overflow(requested)
            return ReplyBudget(max_output_tokens=room, window_bound=True)
        return ReplyBudget(max_output_tokens=requested)
    if flavor == "vllm" and requested_output is not None and requested_output > window:
        # vllm renderers/params.py rejects max_tokens > max_model_len before counting.
        return over_cap(requested_output, window)
    if room <= 0:
        return overflow(requested_output)
    if flavor == "llamacpp":
        return _silent(room, requested_output, cap)
    if requested_output is not None:
        if requested_output > room:
            return overflow(requested_output)
        if flavor == "openai":
            return ReplyBudget(max_output_tokens=requested_output)
    return _silent(room, requested_output, cap)


def _silent(room: int, requested: int | None, cap: int | None) -> ReplyBudget:
    """The budget a server that lowers ``max_tokens`` quietly generates with."""
    budget = min(value for value in (room, requested, cap) if value is not None)
    return ReplyBudget(max_output_tokens=budget, window_bound=budget == room)
