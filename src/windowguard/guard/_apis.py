"""What each guarded SDK call carries, and how its fitted request is built.

One :class:`Api` value per guarded call (``chat.completions.create``,
``responses.create``, ``messages.create`` / ``messages.stream``) names where the
transcript, the separate system prompt, the tools and the reply budget live in the
call's keyword arguments. :func:`parse` reads a call into a :class:`Request`;
:func:`fitted_kwargs` builds the keyword arguments actually sent.

Invariants:

- The caller's ``kwargs`` are never mutated; the send gets a shallow copy in which only
  the transcript, the reply budget (and, for Anthropic extended thinking, a budget that
  no longer fits below it), and OpenAI's ``stream_options`` differ.
- A Chat Completions stream reports usage only when asked: where the caller left
  ``stream_options.include_usage`` unset the guard asks for it
  (:attr:`Request.usage_added`), and the caller's stream hides what that adds (the
  usage-only last chunk, the other chunks' ``"usage": null``); an ``include_usage`` the
  caller set, True or False, is sent as they set it.
- The transcript sent is ``Fit.messages``: the caller's own message objects, a
  subsequence of what was given, in order.
- A reply budget is set where the caller gave one (to the fitted value), and where the
  API requires one (Anthropic's ``max_tokens``). OpenAI-compatible servers bound an
  unset reply by what is left of the window, so none is added there: the transcript is
  still fitted to leave the model's output cap (at most half the window) free.
- Nothing here does I/O or imports an SDK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..core.exceptions import ConfigurationError, InvalidTranscriptError
from ..pipeline.manager import Fit

__all__ = [
    "ANTHROPIC_MESSAGES",
    "CHAT",
    "RESPONSES",
    "Api",
    "Request",
    "adds_usage",
    "asking_for_usage",
    "fitted_kwargs",
    "parse",
]

# Sentinels the SDKs use for "not given" (openai.NOT_GIVEN / omit, anthropic likewise).
_SENTINELS: Final = frozenset({"NotGiven", "Omit"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Api:
    """Where one SDK call keeps what the guard fits.

    Attributes:
        name: the call, as the user writes it (for messages and events).
        format: the transcript's wire format for :meth:`ContextWindowManager.fit`.
        messages_param: the keyword holding the transcript.
        system_param: the keyword holding a separate system prompt, if the API has one.
        max_params: the keywords of the reply budget, in order of preference.
        requires_max: the API refuses a request without a reply budget.
        stream_usage: a stream reports usage only when ``stream_options.include_usage``
            asks for it (OpenAI Chat Completions).
    """

    name: str
    format: Literal["openai_chat", "anthropic", "responses"]
    messages_param: str
    system_param: str | None
    max_params: tuple[str, ...]
    requires_max: bool = False
    stream_usage: bool = False


CHAT: Final = Api(
    name="chat.completions.create",
    format="openai_chat",
    messages_param="messages",
    system_param=None,
    max_params=("max_completion_tokens", "max_tokens"),
    stream_usage=True,
)
RESPONSES: Final = Api(
    name="responses.create",
    format="responses",
    messages_param="input",
    system_param="instructions",
    max_params=("max_output_tokens",),
)
ANTHROPIC_MESSAGES: Final = Api(
    name="messages.create",
    format="anthropic",
    messages_param="messages",
    system_param="system",
    max_params=("max_tokens",),
    requires_max=True,
)

# Responses arguments that make the server prepend context the guard cannot see.
# (``response_id`` resumes a stored response's stream in ``responses.stream``.)
_SERVER_STATE: Final = ("previous_response_id", "conversation", "response_id")


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One guarded call, read.

    Attributes:
        api: the call.
        kwargs: the caller's keyword arguments, as given.
        model: the request's model.
        messages: the transcript to fit (a one-message list for Responses text input).
        system: the separate system prompt (Anthropic ``system``, Responses
            ``instructions``), or None.
        tools: the tool schemas, or None.
        requested: the caller's reply budget, or None.
        replace_messages: whether the fitted transcript replaces the caller's (False
            for Responses text input: a single message is never pruned).
        lead: messages put before the caller's for fitting only (Responses
            ``instructions``, which the manager counts as a leading system message).
        stream: the caller asked for a stream.
    """

    api: Api
    kwargs: Mapping[str, Any]
    model: str
    messages: list[object]
    system: object
    tools: list[object] | None
    requested: int | None
    replace_messages: bool
    stream: bool
    lead: int = 0

    @property
    def usage_added(self) -> bool:
        """The guard asks this stream for the usage chunk the caller did not ask for (a
        Chat Completions stream with ``include_usage`` unset): the caller must not see it."""
        return (
            self.api.stream_usage and self.stream and adds_usage(self.kwargs.get("stream_options"))
        )

    def fit_options(self) -> dict[str, Any]:
        """The :meth:`ContextWindowManager.fit` arguments besides the transcript."""
        return {
            "tools": self.tools,
            "max_tokens": self.requested,
            "system": self.system,
            "format": self.api.format,
        }


def given(value: object) -> bool:
    """Whether a keyword value is really given (not None, not an SDK "not given")."""
    return value is not None and type(value).__name__ not in _SENTINELS


def server_state(api: Api, kwargs: Mapping[str, Any]) -> str | None:
    """The argument that brings in server-side context the guard cannot fit, if any."""
    if api is not RESPONSES:
        return None
    for name in _SERVER_STATE:
        if given(kwargs.get(name)):
            return name
    return None


def parse(api: Api, kwargs: Mapping[str, Any], *, helper: bool = False) -> Request:
    """Read one call's keyword arguments.

    Args:
        api: the call.
        kwargs: its keyword arguments.
        helper: the call is an SDK stream helper (``.stream(...)``), so a stream.

    Returns:
        The :class:`Request`.

    Raises:
        ConfigurationError: no model name, tools that are not a list, or a reply
            budget that is not a positive int.
        InvalidTranscriptError: a transcript that is not a list of messages.
    """
    model = kwargs.get("model")
    if not isinstance(model, str) or not model:
        raise ConfigurationError(
            f"{api.name}(model=...) must be a model name string for the guard to know "
            f"the window, got {model!r}"
        )
    raw = kwargs.get(api.messages_param)
    replace_messages = True
    if api is RESPONSES and isinstance(raw, str):
        messages: list[object] = [{"role": "user", "content": raw}]
        replace_messages = False
    elif isinstance(raw, (list, tuple)):
        messages = list(raw)
    else:
        raise InvalidTranscriptError(
            f"{api.name}({api.messages_param}=...) must be a list of messages, "
            f"got {type(raw).__name__}"
        )
    tools_value = kwargs.get("tools")
    tools: list[object] | None = None
    if given(tools_value):
        if not isinstance(tools_value, Sequence) or isinstance(tools_value, (str, bytes)):
            raise ConfigurationError(
                f"{api.name}(tools=...) must be a list of tool schemas, "
                f"got {type(tools_value).__name__}"
            )
        tools = list(tools_value) or None
    system = kwargs.get(api.system_param) if api.system_param else None
    system = system if given(system) else None
    lead = 0
    if api is RESPONSES and system is not None:
        # The manager takes a separate system argument in the Anthropic format only:
        # Responses instructions are counted as the leading system message they render as.
        messages.insert(0, {"role": "system", "content": system})
        system, lead = None, 1
    return Request(
        api=api,
        kwargs=kwargs,
        model=model,
        messages=messages,
        system=system,
        tools=tools,
        requested=_requested(api, kwargs),
        replace_messages=replace_messages,
        stream=helper or kwargs.get("stream") is True,
        lead=lead,
    )


def _requested(api: Api, kwargs: Mapping[str, Any]) -> int | None:
    budgets = []
    for name in api.max_params:
        value = kwargs.get(name)
        if not given(value):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(
                f"{api.name}({name}=...) must be a positive int, got {value!r}"
            )
        budgets.append(value)
    return min(budgets) if budgets else None


def fitted_kwargs(request: Request, fit: Fit) -> dict[str, Any]:
    """The keyword arguments to send: the caller's, with the fitted transcript and
    reply budget (and ``stream_options.include_usage`` for a Chat Completions stream).
    """
    api = request.api
    out = dict(request.kwargs)
    if request.replace_messages:
        out[api.messages_param] = fit.messages[request.lead :]
    present = [name for name in api.max_params if given(out.get(name))]
    for name in present:
        out[name] = fit.max_tokens
    if not present and api.requires_max:
        out[api.max_params[0]] = fit.max_tokens
    if api is ANTHROPIC_MESSAGES:
        thinking = out.get("thinking")
        out_max = out.get("max_tokens")
        if isinstance(thinking, Mapping) and isinstance(out_max, int):
            budget = thinking.get("budget_tokens")
            # Anthropic: budget_tokens must stay below max_tokens (extended thinking docs).
            if isinstance(budget, int) and budget >= out_max:
                out["thinking"] = {**thinking, "budget_tokens": max(out_max - 1, 1)}
    if api.stream_usage and request.stream:
        out["stream_options"] = asking_for_usage(out.get("stream_options"))
    return out


def adds_usage(stream_options: object) -> bool:
    """Whether :func:`asking_for_usage` adds ``include_usage`` to a caller's
    ``stream_options``: they did not set it, either way."""
    if not given(stream_options):
        return True
    return isinstance(stream_options, Mapping) and "include_usage" not in stream_options


def asking_for_usage(stream_options: object) -> object:
    """A Chat Completions ``stream_options`` that asks for the usage chunk: the caller's
    own, with ``include_usage`` added unless they set it either way (a copy, never
    theirs changed). Where it is added (:func:`adds_usage`), the caller's stream must
    hide the usage-only chunk it brings."""
    if not adds_usage(stream_options):
        return stream_options
    if not given(stream_options):
        return {"include_usage": True}
    assert isinstance(stream_options, Mapping)
    return {**stream_options, "include_usage": True}
