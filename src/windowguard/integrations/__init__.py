"""Drop-in integrations with agent frameworks: each module imports its framework lazily.

- :mod:`windowguard.integrations.langchain`: ``ContextWindowMiddleware`` for LangChain v1
  ``create_agent(..., middleware=[...])`` and ``pre_model_hook(...)`` for LangGraph's
  prebuilt ReAct agent (extra ``langchain``).
- :mod:`windowguard.integrations.openai_agents`: ``call_model_input_filter(...)`` for the
  OpenAI Agents SDK's ``RunConfig(call_model_input_filter=...)``, with ``.hooks`` for
  ``Runner.run(..., hooks=...)`` (extra ``openai-agents``).
- :mod:`windowguard.integrations.pydantic_ai`: ``history_processor(...)`` and the
  ``ContextWindowCapability`` for pydantic-ai agents (extra ``pydantic-ai``).
- :mod:`windowguard.integrations.litellm`: ``completion(...)`` / ``acompletion(...)``
  wrappers, ``ContextWindowGuard`` for other options, and ``ContextWindowLogger`` for the
  LiteLLM proxy (extra ``litellm``).

One naming scheme (``docs/decisions/0008-one-surface.md``): a class that plugs into a
framework is ``ContextWindow`` plus the framework's own word for it (``Middleware``,
``Hook``, ``Filter``, ``Hooks``, ``Capability``, ``Logger``; ``Guard`` for the class that
wraps LiteLLM's calls); a function is named after the parameter or function it fills or
stands in for (``pre_model_hook``, ``call_model_input_filter``, ``history_processor``,
``completion``). The older names ``WindowGuard``, ``LiteLLMGuard`` and
``WindowGuardLogger`` are aliases of the same classes. Every surface takes the same
options with the same defaults: ``model_info``, ``safety`` (500), ``pruning``
(``"low_water"``), ``edits`` (None: :data:`~windowguard.DEFAULT_EDITS`), ``strict``
(False), ``ttl_seconds`` (3600), ``max_conversations`` (1024), ``discover`` (None),
``sinks`` (None; one sink or several) and ``manager``.

Importing this package imports no framework; importing a module without its framework
installed raises ``ImportError`` naming the extra to install.
"""
