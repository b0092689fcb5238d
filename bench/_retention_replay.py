"""The scripted agent of the retention replay, and what one replay measures.

One replay runs one task (:mod:`_retention_tasks`) through one context policy
(:mod:`_retention_policies`) in one window. The agent is scripted: at step ``k`` it
sends the request the policy builds from the history so far, and then

* every fact step ``k`` needs must be *visible* in that request (its marker appears in
  some message's text or tool-call arguments, exactly);
* a needed ``tool`` fact that is not visible is fetched again: the agent's answer to
  this call is a call of the same tool with the same arguments (one call for all the
  facts it misses), whose result, the same text as before, joins the history; then it
  sends again. At most :data:`MAX_REFETCHES` such calls per step; a fact still not
  visible after them is lost;
* a needed ``task``, ``agent`` or ``user`` fact that is not visible is **lost**: nothing
  can bring it back;
* then it appends the step's recorded messages (its assistant message, the results and
  any user turns), with the exact prompt tokens of the request as the provider's usage.

A task is **solved** when its run reached the final answer (no ``CONTEXT_TRUNCATED``,
no overflow) and no fact was lost at any step that needed it.

Every request that goes out is counted exactly (o200k_base, OpenAI's per-message
accounting, tool schemas included: :class:`ExactCounter`, equal to
``windowguard.accounting.templates.count_prompt``) and checked: a prompt plus ``max_tokens`` over
the window is an overflow (the provider's 400: the run ends there, and the request is
not billed); orphaned results and unanswered calls by ``_corpus.pairing_problems``'s
rule; whether the user's task (the head's first user message) is there. Its cost under
prompt caching is ``bench_cache``'s model: the cached part is the exact tokens of the
longest common prefix with the previous request that went out (tool schemas, then
messages equal in content), at Anthropic's and OpenAI's published prices.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from _retention_tasks import Fact, Message, Task

MAX_REFETCHES = 2
FACT_PATTERN = re.compile(r"FACT-[0-9a-f]{4}-\d{2}-[0-9a-f]{6}")
#: the reply budget each request asks for, per window (the reserve outside the prompt)
MAX_TOKENS = {8_192: 1_024, 16_384: 2_048, 32_768: 4_096}
#: tokens every policy keeps free below the window (windowguard's default safety)
SAFETY = 500


def budget(window: int, max_tokens: int) -> int:
    """The input budget every policy is given: windowguard's ``Fit.budget``."""
    return window - max_tokens - SAFETY


class Refused(Exception):
    """The policy refused to build a request (windowguard's ContextTruncatedError)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """What a policy sends: the messages and the reply budget."""

    messages: list[Message]
    max_tokens: int


class Session(Protocol):
    """One policy's state over one replay."""

    def append(self, messages: Sequence[Message], *, prompt_tokens: int | None) -> None:
        """Add messages to the conversation (``prompt_tokens``: the usage of the call
        whose answer they hold; None for the head)."""

    def request(self) -> Request:
        """Build the next request; raise :class:`Refused` to end the run."""

    def side_calls(self) -> list[int]:
        """Input tokens of model calls the policy made itself (summaries) since last asked."""


# --------------------------------------------------------------------------- counting


def message_text(message: Message) -> str:
    """Everything of a message a reader sees: its text and its tool-call arguments."""
    parts: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        parts.append(str(function.get("arguments") or ""))
    return "\n".join(parts)


class ExactCounter:
    """Exact o200k tokens of requests, cached per message content.

    OpenAI's accounting is additive (windowguard.accounting.templates: per-message tokens, the tool
    block, 3 tokens of reply priming), so a request is the sum of cached parts.
    """

    def __init__(self, counter: Any, tools: Sequence[Message]) -> None:
        from windowguard.accounting.templates import count_prompt_parts

        self._counter = counter
        self._parts = count_prompt_parts
        parts = count_prompt_parts(counter, [], list(tools), template="openai")
        self.tools_tokens = parts.tools_tokens
        self.request_tokens = parts.request_tokens
        self._by_key: dict[str, int] = {}
        self._by_id: dict[int, tuple[Message, str, str]] = {}  # holds the message: ids stay unique

    def describe(self, message: Message) -> tuple[str, str]:
        """(content key, visible text) of a message."""
        seen = self._by_id.get(id(message))
        if seen is not None and seen[0] is message:
            return seen[1], seen[2]
        raw = json.dumps(message, sort_keys=True, default=str)
        key = hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()
        described = (message, key, message_text(message))
        self._by_id[id(message)] = described
        return described[1], described[2]

    def message(self, message: Message) -> int:
        """Exact tokens one message adds to a request."""
        key, _ = self.describe(message)
        tokens = self._by_key.get(key)
        if tokens is None:
            tokens = self._parts(self._counter, [message], None, template="openai").message_tokens[
                0
            ]
            self._by_key[key] = tokens
        return tokens

    def prompt(self, messages: Sequence[Message]) -> int:
        """Exact prompt tokens of a request of these messages and the tools."""
        return sum(map(self.message, messages)) + self.tools_tokens + self.request_tokens

    def text(self, text: str) -> int:
        """Exact tokens of a plain string."""
        return int(self._counter.count(text))


def pairing_problems(messages: Sequence[Message]) -> tuple[int, int]:
    """(orphaned tool results, unanswered tool calls), ``_corpus.pairing_problems``'s rule."""
    orphans = unanswered = 0
    open_ids: list[Any] | None = None
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            unanswered += len(open_ids or ())
            open_ids = [c.get("id") for c in message.get("tool_calls") or ()]
        elif role == "tool":
            if open_ids is not None and message.get("tool_call_id") in open_ids:
                open_ids.remove(message.get("tool_call_id"))
            else:
                orphans += 1
    return orphans, unanswered + len(open_ids or ())


# --------------------------------------------------------------------------- one replay


@dataclass(slots=True, kw_only=True)
class Outcome:
    """What one replay measured."""

    task: str
    group: str
    window: int
    end: str = "completed"  # completed | CONTEXT_TRUNCATED | overflow
    solved: bool = False
    calls: int = 0  # model calls that went out (refetches and summaries included)
    refetch_calls: int = 0
    summary_calls: int = 0
    input_tokens: int = 0
    anthropic_usd: float = 0.0
    openai_usd: float = 0.0
    extends: int = 0  # sends whose request starts with the whole previous request
    sends: int = 0  # agent sends (not summaries)
    lost: dict[str, str] = field(default_factory=dict)  # fact id -> source
    refetched: int = 0  # facts fetched again
    orphans: int = 0
    unanswered: int = 0
    task_missing: int = 0  # requests without the user's task
    peak_share: float = 0.0  # largest prompt sent / the input budget
    note: str = ""


def _refetch(facts: Sequence[Fact], step: int, attempt: int) -> list[Message]:
    calls = [
        {
            "id": f"refetch_{step}_{attempt}_{n}",
            "type": "function",
            "function": {"name": f.tool[0], "arguments": f.tool[1]},
        }
        for n, f in enumerate(facts)
        if f.tool is not None
    ]
    reply: Message = {"role": "assistant", "content": None, "tool_calls": calls}
    results = [
        {"role": "tool", "tool_call_id": c["id"], "content": f.result or ""}
        for c, f in zip(calls, facts, strict=True)
    ]
    return [reply, *results]


def replay(task: Task, window: int, session: Session, counter: ExactCounter) -> Outcome:
    """Run ``task`` through ``session`` in ``window`` (see the module docstring)."""
    from bench_cache import ANTHROPIC, OPENAI, cost_usd

    out = Outcome(task=task.name, group=task.group, window=window)
    the_task = next(m for m in task.head if m.get("role") == "user")
    task_key, _ = counter.describe(the_task)
    previous: list[tuple[str, int]] = []
    session.append(list(task.head), prompt_tokens=None)

    def bill_side_calls() -> None:
        for tokens in session.side_calls():
            out.calls += 1
            out.summary_calls += 1
            out.input_tokens += tokens
            out.anthropic_usd += cost_usd(ANTHROPIC, tokens, 0)
            out.openai_usd += cost_usd(OPENAI, tokens, 0)

    for k, step in enumerate(task.steps):
        attempts = 0
        while True:
            try:
                request = session.request()
            except Refused as exc:
                bill_side_calls()
                out.end, out.note = "CONTEXT_TRUNCATED", str(exc)[:160]
                return out
            bill_side_calls()
            messages = request.messages
            tokens = counter.prompt(messages)
            usable = window - request.max_tokens
            out.peak_share = max(out.peak_share, tokens / budget(window, MAX_TOKENS[window]))
            if tokens > usable:
                out.end = "overflow"
                out.note = (
                    f"step {k}: prompt {tokens:,} + max_tokens {request.max_tokens:,} > {window:,}"
                )
                return out
            described = [counter.describe(m) for m in messages]
            keyed = [
                (key, counter.message(m)) for (key, _), m in zip(described, messages, strict=True)
            ]
            shared = 0
            prefix_tokens = counter.tools_tokens
            for (key, n), (old, _) in zip(keyed, previous, strict=False):
                if key != old:
                    break
                shared += 1
                prefix_tokens += n
            out.extends += bool(previous) and shared == len(previous)
            previous = keyed
            out.calls += 1
            out.sends += 1
            out.input_tokens += tokens
            out.anthropic_usd += cost_usd(ANTHROPIC, tokens, prefix_tokens)
            out.openai_usd += cost_usd(OPENAI, tokens, prefix_tokens)
            orphans, unanswered = pairing_problems(messages)
            out.orphans += orphans
            out.unanswered += unanswered
            out.task_missing += all(key != task_key for key, _ in keyed)
            visible = "\n".join(text for _, text in described)
            missing = [f for f in map(task.fact, step.needs) if f.marker not in visible]
            fetchable = [f for f in missing if f.source == "tool"]
            if fetchable and attempts < MAX_REFETCHES:
                session.append(_refetch(fetchable, k, attempts), prompt_tokens=tokens)
                attempts += 1
                out.refetch_calls += 1
                out.refetched += len(fetchable)
                continue
            for fact in missing:
                out.lost.setdefault(fact.id, fact.source)
            session.append(list(step.messages), prompt_tokens=tokens)
            break
    out.solved = not out.lost
    return out


def summary_text(text: str, previous: str | None, *, facts_per_call: int) -> str:
    """The scripted summarizer's summary (what every summarizing policy's summarizer writes).

    It keeps every fact of the previous summary and adds at most ``facts_per_call`` new
    facts, the first it finds in the text it summarizes: a summary keeps some of what
    it reads, not all.
    """
    kept = FACT_PATTERN.findall(previous or "")
    new = [m for m in dict.fromkeys(FACT_PATTERN.findall(text)) if m not in kept]
    facts = [*kept, *new[:facts_per_call]]
    lines = "\n".join(f"- {m}" for m in facts) or "- (nothing kept)"
    return f"Summary of the earlier work (scripted summarizer): facts kept:\n{lines}"
