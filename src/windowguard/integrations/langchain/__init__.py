"""LangChain v1 agents and LangGraph's prebuilt ReAct agent, kept inside the window.

Two hooks, one set of rules:

* :class:`ContextWindowMiddleware` for ``langchain.agents.create_agent(...,
  middleware=[...])``. Its ``wrap_model_call`` / ``awrap_model_call`` sees the request
  the model node is about to send (system message, messages, tools, model settings),
  fits it, and calls the model with ``request.override(messages=kept,
  model_settings={..., "max_tokens": fitted})``. The agent's state keeps the full
  history; only this one model call sees the fitted list.
* :func:`pre_model_hook` for ``langgraph.prebuilt.create_react_agent(...,
  pre_model_hook=...)``. It returns ``{"llm_input_messages": kept}``, which LangGraph
  feeds to the model without rewriting the state; its :meth:`ContextWindowHook.model`
  (passed as the agent's model) binds the fitted ``max_tokens``.

Invariants:

- What reaches the model is a subsequence of the framework's own message objects, in
  order: each LangChain message is mapped to OpenAI Chat dicts for counting only
  (``convert_to_openai_messages``) and an index map takes the fitted dicts back to the
  messages they came from. With ``edits=`` the exceptions are copies: a message whose
  tool result was clamped or cleared (or whose call arguments were cleared) is sent as a
  ``model_copy`` with only that content replaced, a summary as a new ``HumanMessage``;
  the state keeps the originals.
- Pruning is turn-atomic: an ``AIMessage`` and every ``ToolMessage`` answering its
  ``tool_calls`` (by ``tool_call_id``) are kept or dropped together, so no tool message
  is ever orphaned. The head (system prompt through the first user message) and the
  newest turn are always kept.
- A request that cannot fit raises :class:`~windowguard.ContextTruncatedError` before
  the model is called: no HTTP request is made.
- Each conversation (keyed by its head and model, see :mod:`windowguard.run._conversations`)
  has its own manager; the ``usage_metadata.input_tokens`` of each reply is fed back as
  the next fit's ``last_usage``, and only to the send it answers: fits of one
  conversation run one at a time, each is numbered (``Conversation.prepare``), and its
  usage is recorded only while it is the conversation's latest fit
  (``Conversation.record``), so two runs with the same head at once (no checkpointer to
  tell them apart) never feed each other's counts. A streamed reply
  carries usage only when the chat model asks for it: a ``ChatOpenAI`` left with
  ``stream_usage`` unset is asked to (a copy of it, for the fitted call only); the
  middleware withholds the usage-only chunk that brings from the stream LangChain
  builds (:mod:`._streams`), so ``stream_mode="messages"`` readers see what they see
  without windowguard; a reply without usage makes the next fit say ``NO_USAGE`` and
  rest on its counters. The LangGraph hook cannot wrap the model call, so it cannot
  withhold that chunk: its ``hook.model`` asks for stream usage only with
  ``pre_model_hook(..., stream_usage=True)``.
- The LangGraph hook's fitted ``max_tokens`` belongs to one call, not to a conversation:
  it is kept under the last message of the state it fitted (the newest turn is always
  kept, and the model node sees the same state), so two same-head runs never swap
  budgets.

Layout: :mod:`._fitter` (the shared core: conversations, message mapping, usage),
:mod:`.middleware` (:class:`ContextWindowMiddleware`) and :mod:`.langgraph`
(:func:`pre_model_hook`, :class:`ContextWindowHook`).
"""

from __future__ import annotations

try:
    import langchain.agents  # noqa: F401 - checks the extra before the modules need it
    import langchain_core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "windowguard.integrations.langchain needs LangChain v1 (langchain, langchain-core): "
        'pip install "windowguard[langchain]"'
    ) from exc

from .langgraph import ContextWindowHook as ContextWindowHook
from .langgraph import pre_model_hook as pre_model_hook
from .middleware import ContextWindowMiddleware as ContextWindowMiddleware

__all__ = ["ContextWindowHook", "ContextWindowMiddleware", "pre_model_hook"]
