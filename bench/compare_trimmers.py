"""Benchmark (3): windowguard vs LangChain's and LiteLLM's ``trim_messages``.

The same transcripts are fitted to the same token budget by:

* ``windowguard``: ``ContextWindowManager(model_info=ModelInfo(budget + max_tokens,
  tokenizer="o200k"), safety=0).fit(messages, tools=tools, max_tokens=...)``, so
  ``Fit.budget`` equals the budget; a fresh manager per transcript (a cold fit). Its
  default pruning is ``"low_water"`` (a prune drops down to 0.7 x budget, so later
  sends keep a stable prompt prefix); ``windowguard (minimal)`` drops just enough;
* ``langchain (docs)``: ``langchain_core.messages.trim_messages(strategy="last",
  token_counter=<exact o200k counter>, include_system=True, start_on="human")``, the
  settings LangChain's docs recommend for chat history;
* ``langchain (default)``: ``trim_messages(max_tokens=..., token_counter=<same>)`` with
  every other argument left at its default;
* ``litellm``: ``litellm.utils.trim_messages(messages, model="gpt-4o", max_tokens=budget)``.

LangChain is given the OpenAI dicts converted with ``convert_to_messages`` and its
output converted back with ``convert_to_openai_messages`` (both inside its time); each
converted message carries its original index as ``id`` so the caller's own dicts are
what gets checked and counted. Its token counter is exact: o200k_base with OpenAI's
published per-message accounting (windowguard.accounting.templates), tool calls included.
Neither LangChain nor LiteLLM is told about the tool schemas; windowguard counts them
against the budget. Every output is judged by the same checks:

* orphaned results / unanswered calls: a tool message must answer a ``tool_call_id``
  of the nearest preceding assistant message; every call must be answered
  (``_corpus.pairing_problems``);
* task kept: the first user message is present, unchanged; system kept: likewise for
  the leading system message;
* exact tokens: o200k_base tokens of the output messages plus the tool schemas
  (``windowguard.accounting.templates.count_prompt``, ``template="openai"``), against the budget;
* time: wall-clock of the whole trimming call (median of 3 runs, 2 at 5,000 turns,
  garbage collected before each run of a large transcript; one run per real request).

Transcripts: synthetic ones of 10, 100, 1,000 and 5,000 real turns (``_corpus``), and
every real corpus run as the last request its agent sent (the messages before the
run's final assistant message), with the run's own tools.

    bench/run compare_trimmers.py [--quick]
"""

from __future__ import annotations

import argparse
import functools
import gc
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpus
import windowguard as wg
from _corpus import Message, Transcript
from windowguard.accounting.templates import count_prompt_parts
from windowguard.core.prune import PruningPolicy

BUDGETS = (8_000, 16_000, 32_000)
SIZES = (10, 100, 1_000, 5_000)
MAX_TOKENS = 1_024

Trimmer = Callable[[list[Message], list[Message], int], list[Message]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """One trimmer's output for one transcript and budget, judged."""

    refused: bool  # raised instead of returning (windowguard's ContextTruncatedError)
    failed: str | None  # any other exception
    kept_messages: int
    orphans: int
    unanswered: int
    task_kept: bool
    system_kept: bool
    exact_tokens: int
    time_ms: float
    note: str = ""


# --------------------------------------------------------------------------- trimmers


def windowguard_trimmer(pruning: PruningPolicy) -> Trimmer:
    def trim(messages: list[Message], tools: list[Message], budget: int) -> list[Message]:
        max_tokens = min(MAX_TOKENS, budget)  # the reserve is capped at half the window
        info = wg.ModelInfo(budget + max_tokens, tokenizer="o200k")
        manager = wg.ContextWindowManager(model_info=info, safety=0, pruning=pruning)
        fit = manager.fit(messages, tools=tools or None, max_tokens=max_tokens)
        assert fit.budget == budget, (fit.budget, budget)
        return cast(list[Message], fit.messages)  # the caller's own dicts

    return trim


def _o200k_message_tokens(message: Message) -> int:
    """Exact o200k tokens of one message under OpenAI's accounting (no reply priming)."""
    parts = count_prompt_parts(_corpus.o200k_counter(), [message], None, template="openai")
    return parts.message_tokens[0]


def langchain_trimmer(*, docs_settings: bool) -> Trimmer:
    from langchain_core.messages import (
        BaseMessage,
        convert_to_messages,
        convert_to_openai_messages,
        trim_messages,
    )

    def trim(messages: list[Message], tools: list[Message], budget: int) -> list[Message]:
        converted = convert_to_messages(messages)
        for index, message in enumerate(converted):
            message.id = str(index)

        def token_counter(batch: Sequence[BaseMessage]) -> int:
            # The LangChain docs' tiktoken counter: per-message tokens + 3 reply priming.
            return 3 + sum(_o200k_message_tokens(messages[int(str(m.id))]) for m in batch)

        if docs_settings:
            trimmed = trim_messages(
                converted,
                max_tokens=budget,
                token_counter=token_counter,
                strategy="last",
                include_system=True,
                start_on="human",
            )
        else:
            trimmed = trim_messages(converted, max_tokens=budget, token_counter=token_counter)
        convert_to_openai_messages(trimmed)  # what a caller of an OpenAI-format API does next
        return [messages[int(str(m.id))] for m in trimmed]

    return trim


class _Swallowed(logging.Handler):
    """Collects the errors LiteLLM logs when its trimming fails and it returns the input."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.errors: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        self.errors.append(f"{type(exc).__name__}: {exc}" if exc else record.getMessage())


class TrimmerFailedSilentlyError(Exception):
    """The trimmer swallowed an internal error and returned its input untrimmed."""

    def __init__(self, error: str, output: list[Message]) -> None:
        super().__init__(error)
        self.output = output


def litellm_trimmer() -> Trimmer:
    import litellm

    litellm.suppress_debug_info = True
    swallowed = _Swallowed()
    for name in ("LiteLLM", "litellm"):
        logger = logging.getLogger(name)
        logger.handlers = [swallowed]
        logger.propagate = False

    def trim(messages: list[Message], tools: list[Message], budget: int) -> list[Message]:
        swallowed.errors.clear()
        out = list(litellm.utils.trim_messages(messages, model="gpt-4o", max_tokens=budget))
        if swallowed.errors:
            raise TrimmerFailedSilentlyError(swallowed.errors[0], out)
        return out

    return trim


def trimmers() -> dict[str, Trimmer]:
    return {
        "windowguard": windowguard_trimmer("low_water"),
        "windowguard (minimal)": windowguard_trimmer("minimal"),
        "langchain (docs)": langchain_trimmer(docs_settings=True),
        "langchain (default)": langchain_trimmer(docs_settings=False),
        "litellm": litellm_trimmer(),
    }


# --------------------------------------------------------------------------- judging


def _first(messages: Sequence[Message], role: str) -> Message | None:
    return next((m for m in messages if m.get("role") == role), None)


def _present(original: Message | None, output: Sequence[Message]) -> bool:
    if original is None:
        return True
    return any(
        m.get("role") == original.get("role") and m.get("content") == original.get("content")
        for m in output
    )


def run_one(trim: Trimmer, transcript: Transcript, budget: int, repetitions: int) -> Outcome:
    times: list[float] = []
    output: list[Message] = []
    note = ""
    large = len(transcript.messages) >= 1_000
    for _ in range(repetitions):
        if large:  # no collection debt from the previous trimmer inside this timing
            gc.collect()
        start = time.perf_counter()
        try:
            output = trim(transcript.messages, transcript.tools, budget)
        except TrimmerFailedSilentlyError as exc:
            output, note = exc.output, f"logged {exc} and returned its input"
        except wg.ContextTruncatedError:
            return Outcome(
                refused=True,
                failed=None,
                kept_messages=0,
                orphans=0,
                unanswered=0,
                task_kept=False,
                system_kept=False,
                exact_tokens=0,
                time_ms=(time.perf_counter() - start) * 1_000,
            )
        except Exception as exc:
            return Outcome(
                refused=False,
                failed=f"{type(exc).__name__}: {exc}"[:120],
                kept_messages=0,
                orphans=0,
                unanswered=0,
                task_kept=False,
                system_kept=False,
                exact_tokens=0,
                time_ms=0.0,
            )
        times.append(time.perf_counter() - start)
    orphans, unanswered = _corpus.pairing_problems(output)
    return Outcome(
        refused=False,
        failed=None,
        kept_messages=len(output),
        orphans=orphans,
        unanswered=unanswered,
        task_kept=_present(_first(transcript.messages, "user"), output),
        system_kept=_present(_first(transcript.messages, "system"), output),
        exact_tokens=_corpus.exact_tokens(output, transcript.tools),
        time_ms=statistics.median(times) * 1_000,
        note=note,
    )


def kept_share(outcome: Outcome, budget: int) -> str:
    """Exact tokens kept / budget: above 1.00 overshoots, far below wastes the window."""
    share = outcome.exact_tokens / budget
    return f"**{share:.2f}**" if share > 1 else f"{share:.2f}"


def fmt_ms(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:,.0f}"


def last_request(transcript: Transcript) -> Transcript:
    """The run's last request: every message before its final assistant message."""
    messages = transcript.messages
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=0)
    if last > _corpus.split_head(messages):
        messages = messages[:last]
    return Transcript(
        name=transcript.name, messages=messages, tools=transcript.tools, turns=transcript.turns
    )


# --------------------------------------------------------------------------- tables


def synthetic_table(tools: dict[str, Trimmer], sizes: Sequence[int], quick: bool) -> None:
    print(
        "\n#### Synthetic transcripts (one real head + N real corpus turns, "
        f"{len(_corpus.all_tools())} tool schemas)\n"
    )
    print(
        "| turns | input tokens | budget | tool | kept msgs | orphaned results "
        "| unanswered calls | task kept | system kept | exact tokens (msgs + tools) "
        "| exact tokens kept / budget | time ms |"
    )
    print("| ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | --- | ---: | ---: | ---: |")
    for turns in sizes:
        transcript = _corpus.synthetic(turns)
        full = _corpus.exact_tokens(transcript.messages, transcript.tools)
        repetitions = 1 if quick else 3 if turns < 5_000 else 2
        for budget in BUDGETS:
            for name, trim in tools.items():
                outcome = run_one(trim, transcript, budget, repetitions)
                print(row(turns, full, budget, name, outcome), flush=True)


def row(turns: int, full: int, budget: int, name: str, o: Outcome) -> str:
    lead = f"| {turns:,} | {full:,} | {budget:,} | {name}{f' ({o.note})' if o.note else ''} "
    if o.failed:
        return lead + f"| failed: {o.failed} | | | | | | | |"
    if o.refused:
        return (
            lead + "| refused: ContextTruncatedError (head + newest turn > budget) "
            f"| 0 | 0 | - | - | - | - | {fmt_ms(o.time_ms)} |"
        )
    return (
        lead + f"| {o.kept_messages:,} | {o.orphans} | {o.unanswered} "
        f"| {'yes' if o.task_kept else '**no**'} | {'yes' if o.system_kept else '**no**'} "
        f"| {o.exact_tokens:,} | {kept_share(o, budget)} | {fmt_ms(o.time_ms)} |"
    )


def corpus_table(tools: dict[str, Trimmer], quick: bool) -> None:
    runs = [last_request(t) for t in _corpus.real_runs()]
    if quick:
        runs = runs[:: max(1, len(runs) // 40)]
    by_source: dict[str, list[Transcript]] = {}
    for run in runs:
        by_source.setdefault(run.name.split("/", 1)[0], []).append(run)
    print(
        "\n#### Real corpus runs (each run's last request, with its own tools; "
        "counts summed over the runs; 'head + half the turns' = a per-run budget of the "
        "exact tokens of head + tools plus half of the rest)\n"
    )
    print(
        "| source (runs) | budget | tool | runs over budget as given | refused "
        "| outputs with orphans | orphaned results | unanswered calls | task lost "
        "| system lost | outputs over budget | exact tokens kept / budget (min / median / max) "
        "| median time ms |"
    )
    print(
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    specs: list[tuple[str, Callable[[int, int], int]]] = [
        (f"{budget:,}", functools.partial(lambda b, _size, _head: b, budget)) for budget in BUDGETS
    ]
    specs.append(("head + half the turns", lambda size, head: head + (size - head) // 2))
    for source, transcripts in sorted(by_source.items()):
        sizes = [_corpus.exact_tokens(t.messages, t.tools) for t in transcripts]
        heads = [
            _corpus.exact_tokens(t.messages[: _corpus.split_head(t.messages)], t.tools)
            for t in transcripts
        ]
        for label, budget_of in specs:
            budgets = [budget_of(size, head) for size, head in zip(sizes, heads, strict=True)]
            over_input = sum(size > budget for size, budget in zip(sizes, budgets, strict=True))
            for name, trim in tools.items():
                outcomes = [
                    run_one(trim, t, budget, 1)
                    for t, budget in zip(transcripts, budgets, strict=True)
                ]
                done = [
                    (o, budget)
                    for o, budget in zip(outcomes, budgets, strict=True)
                    if not o.refused and not o.failed
                ]
                failed = sum(o.failed is not None for o in outcomes)
                swallowed = sum(bool(o.note) for o in outcomes)
                shares = sorted(o.exact_tokens / b for o, b in done)
                kept = (
                    f"{shares[0]:.2f} / {statistics.median(shares):.2f} / {shares[-1]:.2f}"
                    if shares
                    else "-"
                )
                times = [o.time_ms for o, _ in done]
                print(
                    f"| {source} ({len(transcripts)}) | {label} | {name} | {over_input} "
                    f"| {sum(o.refused for o in outcomes)}"
                    f"{f' (+{failed} failed)' if failed else ''}"
                    f"{f' (+{swallowed} errors swallowed, input returned)' if swallowed else ''} "
                    f"| {sum(o.orphans + o.unanswered > 0 for o, _ in done)} "
                    f"| {sum(o.orphans for o, _ in done)} "
                    f"| {sum(o.unanswered for o, _ in done)} "
                    f"| {sum(not o.task_kept for o, _ in done)} "
                    f"| {sum(not o.system_kept for o, _ in done)} "
                    f"| {sum(o.exact_tokens > b for o, b in done)} "
                    f"| {kept} "
                    f"| {fmt_ms(statistics.median(times) if times else 0)} |",
                    flush=True,
                )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs, sizes up to 1,000")
    parser.add_argument("--sizes", type=int, nargs="*", default=None)
    parser.add_argument("--no-corpus", action="store_true", help="skip the real-run table")
    args = parser.parse_args()
    sizes = args.sizes if args.sizes is not None else (SIZES[:3] if args.quick else SIZES)

    print("### windowguard vs LangChain / LiteLLM trim_messages (bench/compare_trimmers.py)\n")
    print(_corpus.environment("langchain-core", "litellm", "tiktoken"))
    print(
        f"\nBudgets {', '.join(f'{b:,}' for b in BUDGETS)} input tokens; windowguard also "
        f"reserves max_tokens={MAX_TOKENS:,} outside the budget. Exact tokens: o200k_base, "
        "OpenAI's per-message accounting, messages + tool schemas. LangChain and LiteLLM "
        "are not told about the tool schemas."
    )
    tools = trimmers()
    warm_up = _corpus.synthetic(30)
    for trim in tools.values():  # imports, pydantic schemas and tokenizer caches
        run_one(trim, warm_up, 8_000, 1)
    synthetic_table(tools, sizes, args.quick)
    if not args.no_corpus:
        corpus_table(tools, args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
