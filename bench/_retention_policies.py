"""The context policies the retention replay compares, each as a :class:`Session` factory.

Every policy gets the same window, the same reply budget (``max_tokens``) and the same
input budget ``B = window - max_tokens - 500`` (windowguard's ``Fit.budget`` with its
default safety of 500), and exact o200k counts wherever it takes a token counter.

* **windowguard** ``ContextWindowManager(model_info=ModelInfo(window, tokenizer="o200k"),
  pruning=..., edits=...)``, fitted before every send with the full history, the tool
  schemas, ``max_tokens`` and the previous request's exact prompt tokens as
  ``last_usage`` (what ``ToolLoop`` does). The edit policies use issue 19's API as
  ``../shared/DESIGN.md`` ("Edits (turn 3)") names it: ``ClampToolResults(max_tokens=
  max(1024, B // 4), keep="head_tail")``, ``ClearToolResults(keep=k)`` (its defaults
  otherwise), ``Summarize(<scripted summarizer>, keep_turns=3)``. Until the manager
  takes ``edits=`` they report that they await the wiring and are not run.
* **LangChain** (langchain 1.5.2): what ``ContextEditingMiddleware(edits=[ClearToolUsesEdit(
  trigger=window // 2, keep=3)])`` does in ``wrap_model_call`` -- a deep copy of the
  state's messages (the system message is the request's separate ``system_message``),
  ``edit.apply(copy, count_tokens=count_tokens_approximately)`` (its default
  ``token_count_method="approximate"``) -- then ``trim_messages(..., max_tokens=B,
  token_counter=<exact o200k per message>, strategy="last", include_system=True,
  start_on="human")`` on the edited request (the settings LangChain's docs give for chat
  history, as in compare_trimmers.py). The state keeps every message: both act on the
  request only. The trigger is the default's share of the window it was set for
  (100,000 of Claude's 200,000). ``trim_messages`` is not told about the tool schemas;
  the "tools subtracted" row gives it ``B`` minus their exact tokens.
* **pydantic-ai-harness** (0.62.0): ``TieredCompaction(tiers=[ClampOversizedMessages(
  max_part_tokens=B // 2), ClearToolResults(max_tokens=1, keep_pairs=3),
  SlidingWindowCompaction(max_messages=1, keep_tokens=B // 2)], target_tokens=B,
  tokenizer=<exact o200k>)``, the tier order its README recommends (clamp, then clear,
  the summary or a window last); the summary row's last tier is its README's
  ``SummarizingCompaction(max_messages=1, keep_messages=20)`` with a pydantic-ai
  ``FunctionModel`` as the model, writing the scripted summary
  (``_retention_replay.summary_text``). Each is driven through its own ``before_model_request`` hook
  on pydantic-ai messages converted from the transcript. Its edits persist into the run's
  history (``ctx.messages[:] = compacted``), as in an agent run, and each response
  carries the exact usage of the request that produced it (its token anchor).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from _retention_replay import ExactCounter, Refused, Request, budget, summary_text
from _retention_tasks import Message
from windowguard.core.prune import PruningPolicy

SUMMARY_FACTS = 3  # new facts one summary keeps (see summary_text)


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """A named way of building requests."""

    name: str
    make: Callable[[int, int, Sequence[Message], ExactCounter], Any]  # -> Session
    missing: Callable[[], str | None] = lambda: None  # why it cannot run here, if it cannot


# --------------------------------------------------------------------------- windowguard


def _edits_missing() -> str | None:
    import inspect

    import windowguard as wg

    wired = "edits" in inspect.signature(wg.ContextWindowManager).parameters
    if not hasattr(wg, "ClearToolResults") or not wired:
        return (
            "awaits the lead's wiring: wg.ClampToolResults / wg.ClearToolResults / "
            "wg.Summarize and ContextWindowManager(edits=...) are not on this commit"
        )
    return None


class ScriptedSummarizer:
    """``summarizer(turns, previous_summary) -> str`` for ``wg.Summarize``: see summary_text."""

    def __init__(self, counter: ExactCounter) -> None:
        self.counter = counter
        self.calls: list[int] = []

    def __call__(self, turns: object, previous_summary: str | None = None) -> str:
        text = json.dumps(turns, default=str)
        self.calls.append(self.counter.text(text) + self.counter.text(previous_summary or ""))
        return summary_text(text, previous_summary, facts_per_call=SUMMARY_FACTS)


class WindowguardSession:
    """windowguard's manager, fitted before every send with the full history."""

    def __init__(
        self,
        window: int,
        max_tokens: int,
        tools: Sequence[Message],
        counter: ExactCounter,
        *,
        pruning: PruningPolicy,
        low_water: float = 0.7,
        edits: Callable[[int, ScriptedSummarizer], list[Any]] | None,
    ) -> None:
        import windowguard as wg

        self.summarizer = ScriptedSummarizer(counter)
        kwargs: dict[str, Any] = {}
        if edits is not None:  # None: the manager's own default (wg.DEFAULT_EDITS)
            kwargs["edits"] = edits(budget(window, max_tokens), self.summarizer)
        self.manager = wg.ContextWindowManager(
            model_info=wg.ModelInfo(window, tokenizer="o200k"),
            pruning=pruning,
            low_water=low_water,
            **kwargs,
        )
        self.tools = list(tools)
        self.max_tokens = max_tokens
        self.history: list[Message] = []
        self.last_usage: int | None = None
        self._seen = 0

    def append(self, messages: Sequence[Message], *, prompt_tokens: int | None) -> None:
        self.history.extend(messages)
        if prompt_tokens is not None:
            self.last_usage = prompt_tokens

    def request(self) -> Request:
        import windowguard as wg

        try:
            fit = self.manager.fit(
                self.history,
                tools=self.tools,
                max_tokens=self.max_tokens,
                last_usage=self.last_usage,
            )
        except wg.ContextTruncatedError as exc:
            raise Refused(str(exc)) from exc
        return Request(messages=cast(list[Message], fit.messages), max_tokens=fit.max_tokens)

    def side_calls(self) -> list[int]:
        calls, self._seen = self.summarizer.calls[self._seen :], len(self.summarizer.calls)
        return calls


def windowguard_policy(
    name: str,
    *,
    pruning: PruningPolicy = "low_water",
    low_water: float = 0.7,
    edits: Callable[[int, Any], list[Any]] | None = None,
) -> Policy:
    def make(window: int, max_tokens: int, tools: Sequence[Message], counter: ExactCounter) -> Any:
        return WindowguardSession(
            window, max_tokens, tools, counter, pruning=pruning, low_water=low_water, edits=edits
        )

    return Policy(
        name=name, make=make, missing=_edits_missing if edits is not None else lambda: None
    )


def clamp(b: int, *, share: int = 4) -> Any:
    import windowguard as wg

    return wg.ClampToolResults(max_tokens=max(1_024, b // share), keep="head_tail")


def clear(
    keep: int,
    *,
    inputs: bool = False,
    placeholder: str | None = None,
    mark: float | None = None,
    trigger: float | None = None,
) -> Any:
    import windowguard as wg

    return wg.ClearToolResults(
        keep=keep, clear_inputs=inputs, placeholder=placeholder, low_water=mark, trigger=trigger
    )


def wg_default_clamp() -> Any:
    import windowguard as wg

    return wg.ClampToolResults(max_tokens=0.25)


def summarize(summarizer: ScriptedSummarizer) -> Any:
    import windowguard as wg

    return wg.Summarize(summarizer, keep_turns=3)


def _clamp_clear(b: int, summarizer: object, *, keep: int) -> list[Any]:
    return [clamp(b), clear(keep)]


def windowguard_policies() -> list[Policy]:
    """Today's drop-only rows and issue 19's edit pipelines."""
    rows = [
        windowguard_policy("windowguard default (wg.DEFAULT_EDITS)"),
        windowguard_policy("windowguard drop-only (low-water, today)", edits=lambda b, s: []),
        windowguard_policy(
            "windowguard drop-only (minimal)", pruning="minimal", edits=lambda b, s: []
        ),
        windowguard_policy("windowguard clamp + drop", edits=lambda b, s: [clamp(b)]),
    ]
    for keep in (1, 2, 3, 5):
        rows.append(
            windowguard_policy(
                f"windowguard clamp + clear(keep={keep}) + drop",
                edits=functools.partial(_clamp_clear, keep=keep),
            )
        )
    rows.append(
        windowguard_policy(
            "windowguard clamp + clear(keep=1, inputs too) + drop",
            edits=lambda b, s: [clamp(b), clear(1, inputs=True)],
        )
    )
    for mark in (0.3, 0.4, 0.5):
        rows.append(
            windowguard_policy(
                f"windowguard clamp + clear(keep=1, inputs too, low_water={mark}) + drop",
                edits=lambda b, s, m=mark: [clamp(b), clear(1, inputs=True, mark=m)],
            )
        )
    for mark, clear_mark in ((0.5, 0.3), (0.5, 0.4), (0.6, 0.4)):
        rows.append(
            windowguard_policy(
                f"windowguard clamp + clear(keep=1, inputs too, low_water={clear_mark}) + drop, "
                f"low_water={mark}",
                low_water=mark,
                edits=lambda b, s, m=clear_mark: [clamp(b), clear(1, inputs=True, mark=m)],
            )
        )
    rows.append(
        windowguard_policy(
            "windowguard the default without its trigger (clear only when turns would be lost)",
            edits=lambda b, s: [
                wg_default_clamp(),
                clear(1, inputs=True, mark=0.3),
            ],
        )
    )
    for trigger, clear_mark, mark in (
        (0.5, 0.3, 0.7),
        (0.55, 0.3, 0.7),
        (0.65, 0.3, 0.7),
        (0.7, 0.3, 0.7),
        (0.6, 0.3, 0.5),
    ):
        rows.append(
            windowguard_policy(
                f"windowguard clamp + clear(keep=1, inputs too, low_water={clear_mark}, "
                f"trigger={trigger}) + drop, low_water={mark}",
                low_water=mark,
                edits=lambda b, s, m=clear_mark, t=trigger: [
                    clamp(b),
                    clear(1, inputs=True, mark=m, trigger=t),
                ],
            )
        )
    for mark in (0.5, 0.6):
        rows.append(
            windowguard_policy(
                f"windowguard clamp + clear(keep=1, inputs too) + drop, low_water={mark}",
                low_water=mark,
                edits=lambda b, s: [clamp(b), clear(1, inputs=True)],
            )
        )
    rows.append(
        windowguard_policy(
            "windowguard clamp + clear(keep=1, short placeholder) + drop",
            edits=lambda b, s: [clamp(b), clear(1, placeholder="[{tool} result cleared]")],
        )
    )
    rows.append(
        windowguard_policy(
            "windowguard clamp(B/8) + clear(keep=1) + drop",
            edits=lambda b, s: [clamp(b, share=8), clear(1)],
        )
    )
    rows.append(
        windowguard_policy(
            "windowguard clamp + clear(keep=3) + drop (minimal)",
            pruning="minimal",
            edits=lambda b, s: [clamp(b), clear(3)],
        )
    )
    rows.append(
        windowguard_policy(
            "windowguard clamp + clear(keep=3) + drop + summary",
            edits=lambda b, s: [clamp(b), clear(3), summarize(s)],
        )
    )
    rows.append(
        windowguard_policy(
            "windowguard clamp + clear(keep=1) + drop + summary",
            edits=lambda b, s: [clamp(b), clear(1), summarize(s)],
        )
    )
    return rows


# --------------------------------------------------------------------------- LangChain


class LangChainSession:
    """ClearToolUsesEdit as ContextEditingMiddleware applies it, then trim_messages."""

    def __init__(
        self,
        window: int,
        max_tokens: int,
        tools: Sequence[Message],
        counter: ExactCounter,
        *,
        subtract_tools: bool,
    ) -> None:
        from langchain.agents.middleware.context_editing import ClearToolUsesEdit

        self.edit = ClearToolUsesEdit(trigger=window // 2, keep=3)
        self.counter = counter
        self.max_tokens = max_tokens
        self.budget = budget(window, max_tokens) - (counter.tools_tokens if subtract_tools else 0)
        self.history: list[Message] = []
        self.converted: list[Any] = []

    def append(self, messages: Sequence[Message], *, prompt_tokens: int | None) -> None:
        from langchain_core.messages import convert_to_messages

        for message in messages:
            (converted,) = convert_to_messages([message])
            converted.id = str(len(self.history))
            self.history.append(message)
            self.converted.append(converted)

    def _tokens(self, message: Any) -> int:
        original = self.history[int(str(message.id))]
        if message.content != original.get("content") and original.get("role") == "tool":
            original = {**original, "content": message.content}
        return self.counter.message(original)

    def request(self) -> Request:
        from langchain_core.messages import SystemMessage, convert_to_openai_messages, trim_messages
        from langchain_core.messages.utils import count_tokens_approximately

        system = [m for m in self.converted[:1] if isinstance(m, SystemMessage)]
        edited = copy.deepcopy(self.converted[len(system) :])
        self.edit.apply(edited, count_tokens=count_tokens_approximately)

        def token_counter(batch: Sequence[Any]) -> int:
            return self.counter.request_tokens + sum(map(self._tokens, batch))

        trimmed = trim_messages(
            [*system, *edited],
            max_tokens=self.budget,
            token_counter=token_counter,
            strategy="last",
            include_system=True,
            start_on="human",
        )
        sent = convert_to_openai_messages(trimmed)
        return Request(messages=list(sent), max_tokens=self.max_tokens)

    def side_calls(self) -> list[int]:
        return []


def langchain_policies() -> list[Policy]:
    def missing() -> str | None:
        try:
            import langchain.agents.middleware.context_editing  # noqa: F401
        except ImportError as exc:
            return f"langchain is not installed ({exc})"
        return None

    def make(subtract: bool) -> Callable[..., Any]:
        return lambda w, m, t, c: LangChainSession(w, m, t, c, subtract_tools=subtract)

    return [
        Policy(
            name="LangChain ClearToolUsesEdit + trim_messages", make=make(False), missing=missing
        ),
        Policy(
            name="LangChain ClearToolUsesEdit + trim_messages (tools subtracted)",
            make=make(True),
            missing=missing,
        ),
    ]


# --------------------------------------------------------------------------- pydantic-ai-harness


def to_pydantic_ai(
    messages: Sequence[Message], usage: Sequence[int | None], counter: ExactCounter
) -> list[Any]:
    """OpenAI Chat messages as pydantic-ai ModelMessages (results and user turns grouped)."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.usage import RequestUsage

    out: list[Any] = []
    names: dict[str, str] = {}
    parts: list[Any] = []
    for message, prompt_tokens in zip(messages, usage, strict=True):
        role = message.get("role")
        if role == "assistant":
            if parts:
                out.append(ModelRequest(parts=parts))
                parts = []
            response_parts: list[Any] = []
            if isinstance(message.get("content"), str) and message["content"]:
                response_parts.append(TextPart(content=message["content"]))
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                names[call.get("id")] = function.get("name", "")
                response_parts.append(
                    ToolCallPart(
                        tool_name=function.get("name", ""),
                        args=function.get("arguments") or "{}",
                        tool_call_id=call.get("id"),
                    )
                )
            out.append(
                ModelResponse(
                    parts=response_parts,
                    model_name="gpt-4o",
                    usage=RequestUsage(
                        input_tokens=prompt_tokens or 0, output_tokens=counter.message(message)
                    ),
                )
            )
        elif role == "tool":
            call_id = str(message.get("tool_call_id"))
            parts.append(
                ToolReturnPart(
                    tool_name=names.get(call_id, ""),
                    content=message.get("content"),
                    tool_call_id=call_id,
                )
            )
        elif role in ("system", "developer"):
            parts.append(SystemPromptPart(content=str(message.get("content") or "")))
        else:
            parts.append(UserPromptPart(content=str(message.get("content") or "")))
    if parts:
        out.append(ModelRequest(parts=parts))
    return out


def to_openai(messages: Sequence[Any]) -> list[Message]:
    """pydantic-ai ModelMessages back to OpenAI Chat messages (what goes on the wire)."""
    from pydantic_ai.messages import (
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[Message] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            text = "".join(p.content for p in message.parts if isinstance(p, TextPart))
            calls = [
                {
                    "id": p.tool_call_id,
                    "type": "function",
                    "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
                }
                for p in message.parts
                if isinstance(p, ToolCallPart)
            ]
            sent: Message = {"role": "assistant", "content": text or None}
            if calls:
                sent["tool_calls"] = calls
            out.append(sent)
            continue
        for part in message.parts:
            if isinstance(part, SystemPromptPart):
                out.append({"role": "system", "content": part.content})
            elif isinstance(part, ToolReturnPart):
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": part.tool_call_id,
                        "content": part.model_response_str(),
                    }
                )
            elif isinstance(part, UserPromptPart):
                content = (
                    part.content
                    if isinstance(part.content, str)
                    else "\n".join(map(str, part.content))
                )
                out.append({"role": "user", "content": content})
            else:  # retry prompts and whatever else a strategy adds: the model reads them
                out.append({"role": "user", "content": str(getattr(part, "content", part))})
    return out


class HarnessSession:
    """pydantic-ai-harness's TieredCompaction, through its before_model_request hook."""

    def __init__(
        self,
        window: int,
        max_tokens: int,
        tools: Sequence[Message],
        counter: ExactCounter,
        *,
        summarize: bool,
    ) -> None:
        from pydantic_ai.models.function import FunctionModel
        from pydantic_ai.tools import ToolDefinition
        from pydantic_ai_harness import (
            ClampOversizedMessages,
            ClearToolResults,
            SlidingWindowCompaction,
            SummarizingCompaction,
            TieredCompaction,
        )

        b = budget(window, max_tokens)
        self.counter = counter
        self.max_tokens = max_tokens
        tokenizer = functools.lru_cache(maxsize=8192)(counter.text)
        self.summaries: list[int] = []
        last: Any
        if summarize:
            last = SummarizingCompaction(max_messages=1, keep_messages=20, tokenizer=tokenizer)
        else:
            last = SlidingWindowCompaction(max_messages=1, keep_tokens=b // 2, tokenizer=tokenizer)
        self.strategy = TieredCompaction(
            tiers=[
                ClampOversizedMessages(max_part_tokens=b // 2, tokenizer=tokenizer),
                ClearToolResults(max_tokens=1, keep_pairs=3, tokenizer=tokenizer),
                last,
            ],
            target_tokens=b,
            tokenizer=tokenizer,
        )
        self.model = FunctionModel(self._summarize, model_name="gpt-4o")
        self.tools = [
            ToolDefinition(
                name=t["function"]["name"],
                description=t["function"].get("description"),
                parameters_json_schema=t["function"].get("parameters") or {"type": "object"},
            )
            for t in tools
        ]
        self.history: list[Any] = []

    def _summarize(self, messages: list[Any], info: Any) -> Any:
        from pydantic_ai.messages import ModelResponse, TextPart

        text = json.dumps([m.parts for m in messages], default=str)
        self.summaries.append(self.counter.text(text))
        return ModelResponse(
            parts=[TextPart(content=summary_text(text, None, facts_per_call=SUMMARY_FACTS))]
        )

    def append(self, messages: Sequence[Message], *, prompt_tokens: int | None) -> None:
        usage = [prompt_tokens if m.get("role") == "assistant" else None for m in messages]
        self.history.extend(to_pydantic_ai(messages, usage, self.counter))

    def request(self) -> Request:
        from opentelemetry.trace import NoOpTracer
        from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
        from pydantic_ai.tools import RunContext
        from pydantic_ai.usage import RunUsage

        ctx = RunContext(
            deps=None,
            model=self.model,
            usage=RunUsage(),
            messages=self.history,
            tracer=NoOpTracer(),
        )
        request_context = ModelRequestContext(
            model=self.model,
            messages=list(self.history),
            model_settings=None,
            model_request_parameters=ModelRequestParameters(function_tools=self.tools),
        )
        done = asyncio.run(self.strategy.before_model_request(ctx, request_context))
        self.history = ctx.messages  # the hook persists its compaction into the run's history
        return Request(messages=to_openai(done.messages), max_tokens=self.max_tokens)

    def side_calls(self) -> list[int]:
        calls, self.summaries = self.summaries, []
        return calls


def harness_policies() -> list[Policy]:
    def missing() -> str | None:
        try:
            import pydantic_ai_harness  # noqa: F401
        except ImportError as exc:
            return (
                f"pydantic-ai-harness is not installed ({exc}); see bench/requirements-nodeps.txt"
            )
        return None

    def make(summarize: bool) -> Callable[..., Any]:
        return lambda w, m, t, c: HarnessSession(w, m, t, c, summarize=summarize)

    return [
        Policy(
            name="pydantic-ai-harness TieredCompaction (clamp, clear, sliding window)",
            make=make(False),
            missing=missing,
        ),
        Policy(
            name="pydantic-ai-harness TieredCompaction (clamp, clear, summary)",
            make=make(True),
            missing=missing,
        ),
    ]


def all_policies() -> list[Policy]:
    """Every row, in table order."""
    return [*windowguard_policies(), *langchain_policies(), *harness_policies()]
