"""OpenAI Agents SDK: fit every model call of a ``Runner`` run into the context window.

Two hooks, made together by :func:`call_model_input_filter` and used together::

    guard = call_model_input_filter(model_info=wg.ModelInfo(context_window=128_000))
    result = await Runner.run(
        agent, task, run_config=RunConfig(call_model_input_filter=guard), hooks=guard.hooks
    )

- The filter (:class:`ContextWindowFilter`, ``RunConfig.call_model_input_filter``) runs
  immediately before each model call with the runner's ``CallModelData``: the
  Responses-style input items and the agent's instructions. It fits the items
  (``format="responses"``, the instructions counted as the leading system message they
  render as, the agent's function tools and handoffs counted as tool schemas) and
  returns a ``ModelInputData`` with the kept items and the instructions unchanged.
  What it drops is dropped from that call only: the run's own history
  (``result.to_input_list()``) stays whole.
- The hooks (:class:`ContextWindowHooks`, ``Runner.run(..., hooks=guard.hooks)``) feed
  each response's ``usage.input_tokens`` back to the conversation's calibration and
  ledger (``on_llm_end``) and emit ``context_pressure``. The filter itself sees no usage.

Invariants:

- Items are never rewritten in place: the returned list is a subsequence of the
  caller's own item objects, in order, except the items an edit stage (``edits=``)
  changed, which are new items of the same type with only their output (or a cleared
  call's arguments) replaced, sent byte for byte again on later calls. Pruning is
  turn-atomic: a ``function_call``
  stays with the ``function_call_output`` of the same ``call_id``, a ``reasoning`` item
  with the calls of its response, parallel calls with all their outputs.
- The head (instructions and everything up to and including the first user input) and
  the newest turn are always kept; a call that cannot fit raises
  :class:`~windowguard.ContextTruncatedError` out of ``Runner.run`` before any HTTP
  request.
- ``max_tokens``: a filter cannot change the model settings of the call, so the reply
  budget is *reserved*, not fitted: the requested ``max_tokens`` (the filter's
  ``max_tokens=``, else the agent's ``ModelSettings.max_tokens``) is kept free beside
  the fitted input, and a call whose input cannot leave that much room raises
  ``ContextTruncatedError`` rather than being sent to be refused.
- Usage is fed back only to the send it answers, and only while that send is the
  conversation's latest: fits of one conversation run one at a time (concurrent runs
  with the same head wait for each other's fit, never for a model call); the filter
  numbers each fit (``Conversation.aprepare``) and notes
  the number against the last item object it returns; ``on_llm_start`` is given those
  same objects and takes the number only when its last item is that one (a run whose
  call was overtaken by another run's fit of the same head feeds nothing back), and
  ``on_llm_end`` records only while ``Conversation.is_latest``. A call that failed
  reports nothing, so the next fit says ``NO_USAGE``.
- Per-conversation state lives in a :class:`~windowguard.run._conversations.ConversationStore`
  per model, keyed by the run's head (instructions + first user input): a run's calls
  share one conversation, and different runs (or agents, whose instructions differ)
  get their own. The models are bounded too (a
  :class:`~windowguard.run._conversations.ConversationStores` of 256, as ``wg.guard``, least
  recently used forgotten first): a caller cycling model names cannot grow memory.

Not fitted: server-side state. With ``previous_response_id`` /
``auto_previous_response_id`` / ``conversation_id`` the runner sends only the new
items and the server prepends the rest, which no client-side filter can see or drop;
do not combine those with this filter. Hosted tools (web search, file search ...) and
an ``output_type`` schema are not counted.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any, Final, cast

try:
    from agents import Agent, RunHooks
    from agents.handoffs import Handoff, handoff
    from agents.items import ModelResponse, TResponseInputItem
    from agents.models.default_models import get_default_model
    from agents.run_config import CallModelData, ModelInputData
    from agents.run_context import RunContextWrapper
    from agents.tool import FunctionTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "windowguard.integrations.openai_agents needs the OpenAI Agents SDK: "
        'pip install "windowguard[openai-agents]"'
    ) from exc

from ..accounting.catalog import ModelInfo
from ..accounting.usage import prompt_tokens_from_usage
from ..core.edits.config import EditStage
from ..core.exceptions import ConfigurationError, ContextTruncatedError, InvalidTranscriptError
from ..core.gauge import ContextGauge
from ..core.prune import PruningPolicy
from ..core.shrink import DEFAULT_SAFETY_BUFFER
from ..pipeline.manager import ContextWindowManager
from ..run._conversations import (
    DEFAULT_MAX_CONVERSATIONS,
    DEFAULT_TTL_SECONDS,
    Conversation,
    ConversationStore,
    ConversationStores,
    Fitted,
    ManagerOptions,
    head_key,
)
from ..run.sinks import Sink, as_sinks, emit

__all__ = ["ContextWindowFilter", "ContextWindowHooks", "call_model_input_filter"]

_FORMAT: Final = "responses"


class ContextWindowFilter:
    """A ``RunConfig.call_model_input_filter`` that fits each model call (see the
    module docstring); :attr:`hooks` feeds the usage back. Made by
    :func:`call_model_input_filter`.

    Attributes:
        hooks: the ``RunHooks`` to pass as ``Runner.run(..., hooks=...)``.
    """

    def __init__(
        self,
        *,
        model: str | None,
        model_info: ModelInfo | None,
        safety: int | None,
        pruning: PruningPolicy | None,
        sinks: Sink | Iterable[Sink] | None,
        strict: bool | None,
        manager: ContextWindowManager | None,
        max_tokens: int | None,
        max_conversations: int,
        ttl_seconds: float | None,
        edits: Sequence[EditStage] | None = None,
        discover: bool | None = None,
    ) -> None:
        self.options = ManagerOptions(
            caller="call_model_input_filter()",
            manager=manager,
            model_info=model_info,
            safety=safety,
            pruning=pruning,
            strict=strict,
            edits=edits,
            max_conversations=max_conversations,
            ttl_seconds=ttl_seconds,
            discover=discover,
        )
        self.options.no_discovery()
        if model is not None and (not isinstance(model, str) or not model):
            raise ConfigurationError(f"model must be a model name, got {model!r}")
        _check_max_tokens(max_tokens, "max_tokens")
        self.model = model
        self.max_tokens = max_tokens
        self.sinks: tuple[Sink, ...] = as_sinks(sinks)
        self._stores: ConversationStores[str, ConversationStore] = ConversationStores(
            lambda model: self.options.store(lambda: self.options.make(model))
        )
        # Per conversation (by its manager): the instructions item it is fitted with.
        self._instructions: weakref.WeakKeyDictionary[
            ContextWindowManager, tuple[str, dict[str, str]]
        ] = weakref.WeakKeyDictionary()
        # Per conversation: its latest send's number and the last item object it sent,
        # which the runner hands on_llm_start unchanged (the items are not weakref-able
        # dicts, so the latest one is held; one per conversation).
        self._sends: weakref.WeakKeyDictionary[ContextWindowManager, tuple[object, int]] = (
            weakref.WeakKeyDictionary()
        )
        self.hooks = ContextWindowHooks(self)

    # -- the filter ---------------------------------------------------------------------

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """Fit one model call's input (the ``call_model_input_filter`` protocol).

        Args:
            data: the runner's ``CallModelData``.

        Returns:
            ``ModelInputData`` with the kept items (the caller's own objects, in order)
            and the instructions unchanged.

        Raises:
            ContextTruncatedError: the head, the newest turn and the reserved
                ``max_tokens`` cannot fit; the runner raises it before any request.
            InvalidTranscriptError: the input is not a list of items, or is damaged and
                ``strict=True``.
        """
        model_data = data.model_data
        items = model_data.input
        instructions = model_data.instructions
        if not isinstance(items, list):
            raise InvalidTranscriptError(
                f"call_model_input_filter got input of type {type(items).__name__}, "
                "expected the runner's list of Responses input items"
            )
        agent = data.agent
        model = self.model_name(agent)
        conversation = self.conversation_for(model, items, instructions)
        requested = self.max_tokens
        if requested is None:
            requested = agent.model_settings.max_tokens
            _check_max_tokens(requested, "the agent's ModelSettings.max_tokens")
        lead = self._instructions_item(conversation, instructions)
        request: list[object] = [lead, *items] if lead is not None else list(items)
        fitted = await self._fit(conversation, request, _tool_schemas(agent), requested)
        fit = fitted.fit
        kept = [item for item in fit.messages if item is not lead]
        with conversation.lock:
            # Another loop or thread may have fitted this conversation since: only the
            # latest fit's send may be noted (its usage is the only one recorded).
            if conversation.is_latest(fitted.send):
                self._sends[conversation.manager] = (kept[-1] if kept else None, fitted.send)
        for event in fit.events:
            self.emit(event)
        if requested is not None and fit.max_tokens < requested:
            # The call cannot be given a smaller max_tokens from here: sending it would
            # only be refused for prompt + max_tokens over the window.
            raise ContextTruncatedError(
                estimated_tokens=fit.estimated_tokens,
                budget=max(0, fit.context_window - requested),
                context_window=fit.context_window,
                exact=fit.exact,
                source=fit.sources[0] if fit.sources else "estimate",
                floor=requested,
            )
        return ModelInputData(
            input=cast("list[TResponseInputItem]", kept), instructions=instructions
        )

    async def _fit(
        self,
        conversation: Conversation,
        request: list[object],
        tools: list[dict[str, Any]] | None,
        requested: int | None,
    ) -> Fitted:
        """The conversation's fit, with its turn and any remote count awaited (never
        blocking the loop)."""
        return await conversation.aprepare(
            request, tools=tools, max_tokens=requested, format=_FORMAT
        )

    # -- conversations --------------------------------------------------------------------

    def model_name(self, agent: Agent[Any]) -> str:
        """The model an agent's calls go to: ``model=``, else the agent's model (a name
        or a ``Model`` with a ``model`` attribute), else the SDK's default model."""
        if self.model is not None:
            return self.model
        model = agent.model
        if isinstance(model, str) and model:
            return model
        name = getattr(model, "model", None)
        if isinstance(name, str) and name:
            return name
        return get_default_model()

    def conversation_for(
        self, model: str, items: list[TResponseInputItem], instructions: str | None
    ) -> Conversation:
        """The conversation of a run's call, made on first use (keyed by the head)."""
        key = head_key(items, system=instructions, model=model)
        return self._stores.get(model).get(key)

    def find_conversation(
        self, model: str, items: list[TResponseInputItem], instructions: str | None
    ) -> Conversation | None:
        """The conversation a call belongs to, or None when none was fitted (or it was
        forgotten)."""
        if model not in self._stores:
            return None
        key = head_key(items, system=instructions, model=model)
        store = self._stores.get(model)
        if key not in store:
            return None
        return store.get(key)

    def _instructions_item(
        self, conversation: Conversation, instructions: str | None
    ) -> dict[str, str] | None:
        """The system item the instructions are counted as, one object per conversation
        (so the manager's per-item cache holds across its calls)."""
        if not instructions:
            return None
        with conversation.lock:
            cached = self._instructions.get(conversation.manager)
            if cached is not None and cached[0] == instructions:
                return cached[1]
            item = {"role": "system", "content": instructions}
            self._instructions[conversation.manager] = (instructions, item)
            return item

    def send_of(self, conversation: Conversation, items: list[TResponseInputItem]) -> int | None:
        """The number of the conversation's latest send when ``items`` are what it sent
        (its last item is the very object the filter returned last), else None: that call
        was overtaken by a later fit, so its usage belongs to no send that can record it.
        """
        with conversation.lock:
            noted = self._sends.get(conversation.manager)
        if noted is None or not items or items[-1] is not noted[0]:
            return None
        return noted[1]

    def emit(self, event: Any) -> None:
        """Give an event to the sinks."""
        if self.sinks:
            emit(event, self.sinks)


class ContextWindowHooks(RunHooks[Any]):
    """``RunHooks`` that feed each model response's usage back to its conversation.

    ``on_llm_start`` finds the conversation of the call the filter just fitted (by the
    same head key) and the send number the filter gave it (by the identity of the last
    input item), and notes them for this run; ``on_llm_end`` records
    ``response.usage.input_tokens`` for that send, if it is still the conversation's
    latest, and emits ``context_pressure``. Subclass it (calling ``super()``) to add
    hooks of your own: a run takes one ``RunHooks`` object.
    """

    def __init__(self, guard: ContextWindowFilter) -> None:
        self._guard = guard
        self._pending: dict[int, tuple[Conversation, int]] = {}
        self._lock = threading.Lock()

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        """Note which conversation this run's model call belongs to."""
        guard = self._guard
        conversation = guard.find_conversation(guard.model_name(agent), input_items, system_prompt)
        send = None if conversation is None else guard.send_of(conversation, input_items)
        with self._lock:
            if conversation is None or send is None:
                self._pending.pop(id(context), None)
            else:
                self._pending[id(context)] = (conversation, send)

    async def on_llm_end(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        response: ModelResponse,
    ) -> None:
        """Record the response's usage in its conversation and measure the pressure."""
        with self._lock:
            pending = self._pending.pop(id(context), None)
        if pending is None:
            return
        conversation, send = pending
        input_tokens = _input_tokens(response)
        usage = None if input_tokens is None else {"input_tokens": input_tokens}
        # Dropped when a later call of this conversation was fitted since.
        if conversation.record(usage, send=send) and input_tokens is not None:
            window = conversation.manager.context_window
            self._guard.emit(ContextGauge(window).measure(input_tokens))


def call_model_input_filter(
    *,
    model: str | None = None,
    model_info: ModelInfo | None = None,
    safety: int = DEFAULT_SAFETY_BUFFER,
    pruning: PruningPolicy = "low_water",
    edits: Sequence[EditStage] | None = None,
    strict: bool = False,
    ttl_seconds: float | None = DEFAULT_TTL_SECONDS,
    max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
    discover: bool | None = None,
    sinks: Sink | Iterable[Sink] | None = None,
    manager: ContextWindowManager | None = None,
    max_tokens: int | None = None,
) -> ContextWindowFilter:
    """A ``call_model_input_filter`` for ``RunConfig`` that keeps every model call of an
    Agents SDK run inside the model's window, with the hooks that feed usage back.

    Example::

        guard = call_model_input_filter(model_info=wg.ModelInfo(context_window=16_384))
        result = Runner.run_sync(
            agent, "Fix the failing test.",
            run_config=RunConfig(call_model_input_filter=guard),
            hooks=guard.hooks,
        )

    Args:
        model: the model name for the catalog (default: the agent's model, else the
            SDK's default model).
        model_info: the model's limits, overriding the catalog.
        safety: tokens kept free below the window.
        pruning: the manager's pruning policy (``"low_water"`` by default).
        sinks: where events go (``context_estimate``, ``transcript_pruned``,
            ``context_pressure`` ...).
        strict: raise :class:`~windowguard.InvalidTranscriptError` on damaged input
            instead of passing it on.
        edits: edit stages run before whole turns are dropped
            (``[wg.ClampToolResults(...), wg.ClearToolResults(...)]``; ``docs/edits.md``);
            None (default): :data:`~windowguard.DEFAULT_EDITS`; ``()``: drop only. Only
            the call's input is edited, never the run's history.
        manager: a template :class:`~windowguard.ContextWindowManager`, copied per
            conversation (then pass none of ``model_info``, ``safety``, ``pruning``,
            ``strict``, ``edits``).
        max_tokens: the reply budget to reserve; None: the agent's
            ``ModelSettings.max_tokens``, else the manager's default reserve. Set the
            same value in ``ModelSettings(max_tokens=...)``: the filter cannot set it.
        max_conversations: conversations kept per model (least recently used first out).
        ttl_seconds: a conversation idle this long is forgotten (None: never).
        discover: accepted for the same options everywhere; this surface sees no
            endpoint to ask, so None (default) and False do no discovery and True is
            refused (give ``model_info`` for a server the catalog does not know).

    Returns:
        The filter; pass it as ``RunConfig(call_model_input_filter=...)`` and its
        ``.hooks`` as ``Runner.run(..., hooks=...)``.

    Raises:
        ConfigurationError: an option of the wrong type or out of range.
    """
    return ContextWindowFilter(
        model=model,
        model_info=model_info,
        safety=safety,
        pruning=pruning,
        sinks=sinks,
        strict=strict,
        manager=manager,
        max_tokens=max_tokens,
        max_conversations=max_conversations,
        ttl_seconds=ttl_seconds,
        edits=edits,
        discover=discover,
    )


def _check_max_tokens(value: object, name: str) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ConfigurationError(f"{name} must be a positive int or None, got {value!r}")


def _tool_schemas(agent: Agent[Any]) -> list[dict[str, Any]] | None:
    """The agent's function tools and handoffs as the Responses tool schemas the model
    is sent (``is_enabled`` is not consulted: a disabled tool only over-counts)."""
    schemas: list[dict[str, Any]] = []
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            schemas.append(
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description or "",
                    "parameters": tool.params_json_schema,
                    "strict": tool.strict_json_schema,
                }
            )
    for target in agent.handoffs:
        made = target if isinstance(target, Handoff) else handoff(target)
        schemas.append(
            {
                "type": "function",
                "name": made.tool_name,
                "description": made.tool_description or "",
                "parameters": made.input_json_schema,
                "strict": made.strict_json_schema,
            }
        )
    return schemas or None


def _input_tokens(response: ModelResponse) -> int | None:
    """The prompt tokens a response reported, or None (the SDK reports a missing usage
    as zeros)."""
    usage = getattr(response, "usage", None)
    try:
        tokens = prompt_tokens_from_usage({"input_tokens": getattr(usage, "input_tokens", None)})
    except ConfigurationError:
        return None
    return tokens if tokens else None
