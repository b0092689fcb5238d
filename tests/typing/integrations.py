"""The integrations' constructors take the shared options with their types, and give
back typed hooks (``mypy --strict``; never run)."""

from __future__ import annotations

from typing import Any

from typing_extensions import assert_type

import windowguard as wg
from windowguard.integrations import litellm as wg_litellm
from windowguard.integrations import openai_agents as wg_agents
from windowguard.integrations import pydantic_ai as wg_pydantic
from windowguard.integrations.langchain import (
    ContextWindowHook,
    ContextWindowMiddleware,
    pre_model_hook,
)


def sink(event: wg.Event) -> None:
    del event


CLEAR = [wg.ClearToolResults(keep=3)]
INFO = wg.ModelInfo(context_window=32_768)


def every_option() -> None:
    ContextWindowMiddleware(
        model_info=INFO,
        safety=500,
        pruning="minimal",
        edits=[wg.ClampToolResults(max_tokens=2_000), wg.ClearToolResults(keep=3)],
        strict=True,
        ttl_seconds=None,
        max_conversations=10,
        discover=False,
        sinks=sink,
    )
    hook = pre_model_hook(None, sinks=[sink], edits=(), ttl_seconds=60.0)
    assert_type(hook, ContextWindowHook)
    agents = wg_agents.call_model_input_filter(model="gpt-4o", sinks=sink, discover=None)
    assert_type(agents, wg_agents.ContextWindowFilter)
    assert_type(agents.hooks, wg_agents.ContextWindowHooks)
    wg_pydantic.ContextWindowCapability(safety=0, sinks=None, manager=wg.ContextWindowManager())
    wg_pydantic.history_processor(model="gpt-4o", pruning="low_water")
    guard = wg_litellm.ContextWindowGuard(model_info=INFO, sinks=(sink,))
    wg_litellm.ContextWindowLogger(guard=guard)


def the_old_names() -> None:
    assert_type(wg_pydantic.WindowGuard(), wg_pydantic.ContextWindowCapability)
    assert_type(wg_litellm.LiteLLMGuard(), wg_litellm.ContextWindowGuard)
    assert_type(wg_litellm.WindowGuardLogger(), wg_litellm.ContextWindowLogger)


def wrong_types() -> None:
    ContextWindowMiddleware(pruning="most")  # type: ignore[arg-type]
    ContextWindowMiddleware(safety=None)  # type: ignore[arg-type]
    wg_agents.call_model_input_filter(sinks=3)  # type: ignore[arg-type]
    wg_pydantic.ContextWindowCapability(ttl_seconds="1h")  # type: ignore[arg-type]
    wg_litellm.ContextWindowGuard(discover="yes")  # type: ignore[arg-type]
    wg_litellm.ContextWindowGuard(edit=CLEAR)  # type: ignore[call-arg]
    wg_litellm.ContextWindowLogger(safety="500")  # type: ignore[arg-type]
    wg_litellm.ContextWindowLogger(ttl=60)  # type: ignore[call-arg]
    options: dict[str, Any] = {"safety": 500}
    wg_litellm.ContextWindowLogger(**options)  # a plain dict of options still goes
