"""Drop-in integrations with agent frameworks: each module imports its framework lazily.

- :mod:`windowguard.integrations.langchain`: ``ContextWindowMiddleware`` for LangChain v1
  ``create_agent(..., middleware=[...])`` and ``pre_model_hook(...)`` for LangGraph's
  prebuilt ReAct agent (extra ``langchain``).
- :mod:`windowguard.integrations.openai_agents`: ``call_model_input_filter(...)`` for the
  OpenAI Agents SDK's ``RunConfig(call_model_input_filter=...)``, with ``.hooks`` for
  ``Runner.run(..., hooks=...)`` (extra ``openai-agents``).
- :mod:`windowguard.integrations.pydantic_ai`: ``history_processor(...)`` and the
  ``WindowGuard`` capability for pydantic-ai agents (extra ``pydantic-ai``).
- :mod:`windowguard.integrations.litellm`: ``completion(...)`` / ``acompletion(...)``
  wrappers and a ``CustomLogger`` for the LiteLLM proxy (extra ``litellm``).

Importing this package imports no framework; importing a module without its framework
installed raises ``ImportError`` naming the extra to install.
"""
