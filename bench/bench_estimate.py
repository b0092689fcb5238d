"""Benchmark (1): estimate / exact per tokenizer family and content kind.

For each family with an exact offline tokenizer, every unique corpus item is
estimated by ``Estimator(family)`` and counted exactly as the family's chat
template presents it; whole requests (each prefix ending before an assistant
message, plus the run's tools) are counted with ``windowguard.templates``. Prints
min / mean / p99 of estimate/exact per kind, the adversarial texts, the
provider-reported usage checks, and the cold estimate time of a 1,000-turn transcript.

    .venv/bin/python bench/bench_estimate.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import exact_tokenizers as ex  # noqa: E402
from fit_priors import (  # noqa: E402
    EXACT_FAMILIES,
    TEMPLATE_OF,
    MemoCounter,
    block_head,
    corpus_tool_sets,
    exact_tool_block,
    message_increments,
    message_items,
    presented_count,
    tool_block_sets,
    tool_presented_count,
)
from windowguard.adapters import shape_messages  # noqa: E402
from windowguard.estimate import Estimator  # noqa: E402
from windowguard.templates import count_prompt  # noqa: E402

KINDS = (
    "system",
    "user",
    "assistant text",
    "tool-call arguments",
    "tool results",
    "tool schemas",
    "tool blocks",
    "messages",
    "whole requests",
    "line-numbered code",
    "coding_agent.json requests",
)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def family_ratios(family: str, corpus: list[dict[str, Any]]) -> dict[str, list[float]]:
    counter = MemoCounter(ex.load(family))
    estimator = Estimator(family)
    ratios: dict[str, list[float]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    for transcript in corpus:
        for message in transcript["messages"]:
            for label, cls, text in message_items(message):
                if (label, text) in seen or not text:
                    continue
                seen.add((label, text))
                exact = presented_count(family, counter, message, label, text)
                if exact:
                    ratios[label].append(estimator.text_tokens(text, cls) / exact)
    for tools in corpus_tool_sets(corpus):
        for tool in tools:
            exact = tool_presented_count(family, counter, tool)
            ratios["tool schemas"].append(estimator.tools_tokens([tool]) / exact)
    template = TEMPLATE_OF[family]
    # Per item: each tool set's whole block (corpus sets, single tools, the union) and
    # each message's own cost in the template (additive, or its append increment).
    head = block_head(corpus)
    for tools in tool_block_sets(corpus):
        exact = exact_tool_block(counter, template, tools, head)
        ratios["tool blocks"].append(estimator.tools_tokens(tools) / exact)
    for transcript in corpus:
        increments = message_increments(counter, template, transcript["messages"])
        for message, exact in zip(transcript["messages"], increments, strict=True):
            if exact:
                shape = shape_messages([message], format="openai_chat").shapes[0]
                ratios["messages"].append(estimator.message_tokens(shape) / exact)
    for transcript in corpus:
        tools = transcript.get("tools") or None
        for request in ex.corpus_requests(transcript):
            exact = count_prompt(counter, request, tools, template=template)
            ratios["whole requests"].append(estimator.count(request, tools) / exact)
    # The demo's sample project as its read_file tool shows it (line-numbered code), and
    # the bundled coding-agent example's requests.
    from windowguard.demo.tools import project_files, read_project_file

    for path in project_files():
        text = "".join(
            f"{n:>4}  {line}\n" for n, line in enumerate(read_project_file(path).splitlines(), 1)
        )
        exact = presented_count(family, counter, {"role": "tool"}, "tool results", text)
        if exact:
            ratios["line-numbered code"].append(estimator.text_tokens(text, "dense") / exact)
    example = json.loads((ROOT / "src/windowguard/examples/coding_agent.json").read_text())
    for request in ex.corpus_requests(example):
        exact = count_prompt(counter, request, example.get("tools"), template=template)
        ratios["coding_agent.json requests"].append(
            estimator.count(request, example.get("tools")) / exact
        )
    return ratios


def adversarial_ratios(family: str) -> dict[str, float]:
    counter = ex.load(family)
    estimator = Estimator(family)
    return {
        name: min(estimator.text_tokens(text, cls) for cls in ("prose", "dense"))
        / counter.count(text)
        for name, text in ex.adversarial_texts().items()
    }


def robustness_row(family: str, seed: int) -> str:
    counter = ex.load(family)
    estimator = Estimator(family)
    ratios = sorted(
        (
            min(estimator.text_tokens(t, "prose"), estimator.text_tokens(t, "dense"))
            / counter.count(t),
            n,
        )
        for n, t in ex.robustness_texts(seed).items()
        if t
    )
    under = sum(1 for r, _ in ratios if r < 1.0)
    return f"| {family} | {seed} | {len(ratios)} | {ratios[0][0]:.2f} | {ratios[0][1]} | {under} |"


def usage_checks(corpus: list[dict[str, Any]]) -> list[str]:
    """Estimate vs provider-reported prompt tokens where the corpus has them."""
    lines = []
    by_source: dict[str, list[float]] = defaultdict(list)
    for transcript in corpus:
        usage = transcript.get("api_usage") or []
        if not usage:
            continue
        model = str(transcript.get("model", ""))
        family = "o200k" if "gpt-4o" in model else "llama4" if "llama-4" in model else None
        if family is None:
            continue
        estimator = Estimator(family)
        tools = transcript.get("tools") or None
        for call in usage:
            request = transcript["messages"][: call["assistant_index"]]
            by_source[f"{transcript['source']} ({family})"].append(
                estimator.count(request, tools) / call["prompt_tokens"]
            )
    runs_without = sum(1 for t in corpus if not t.get("api_usage"))
    lines.append(f"runs without api_usage: {runs_without} of {len(corpus)}")
    for source, values in sorted(by_source.items()):
        lines.append(
            f"{source}: {len(values)} calls, estimate/reported min {min(values):.3f} "
            f"mean {statistics.fmean(values):.3f} max {max(values):.3f}"
        )
    return lines


def timing(corpus: list[dict[str, Any]]) -> str:
    """Cold raw estimate of a 1,000-turn transcript built from corpus turns."""
    source = next(t for t in corpus if t["source"].startswith("tau"))
    messages = [m for t in corpus if t["source"].startswith("tau") for m in t["messages"][1:]]
    turns = 0
    transcript: list[dict[str, Any]] = [source["messages"][0]]
    for message in messages:
        if message["role"] == "assistant":
            turns += 1
            if turns > 1000:
                break
        transcript.append(message)
    chars = sum(len(m.get("content") or "") for m in transcript)
    estimator = Estimator("o200k")
    best = float("inf")
    for _ in range(5):
        # Fresh copies: nothing may be cached between runs.
        fresh = [dict(m) for m in transcript]
        start = time.perf_counter()
        estimator.count(fresh, source["tools"])
        best = min(best, time.perf_counter() - start)
    return (
        f"cold raw estimate, 1,000 turns ({len(transcript)} messages, {chars:,} chars): "
        f"{best * 1000:.1f} ms"
    )


def main() -> None:
    corpus = list(ex.corpus_transcripts())
    print("## estimate / exact on the corpus (min / mean / p99; n)\n")
    print("| family | kind | n | min | mean | p99 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for family in EXACT_FAMILIES:
        ratios = family_ratios(family, corpus)
        for kind in KINDS:
            values = ratios.get(kind, [])
            if not values:
                continue
            print(
                f"| {family} | {kind} | {len(values)} | {min(values):.3f} | "
                f"{statistics.fmean(values):.3f} | {p99(values):.3f} |"
            )
    print("\n## adversarial texts: estimate / exact (lower of the two content classes)\n")
    names = list(ex.adversarial_texts())
    print("| text | " + " | ".join(EXACT_FAMILIES) + " |")
    print("| --- |" + " --- |" * len(EXACT_FAMILIES))
    table = {family: adversarial_ratios(family) for family in EXACT_FAMILIES}
    for name in names:
        print(f"| {name} | " + " | ".join(f"{table[f][name]:.2f}" for f in EXACT_FAMILIES) + " |")
    print("\n## held-out robustness texts (not fitted on): min estimate / exact\n")
    print("| family | seed | n | min | worst text | texts under 1.0 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for family in EXACT_FAMILIES:
        for seed in (7, 8):
            print(robustness_row(family, seed))
    print("\n## provider-reported prompt tokens\n")
    for line in usage_checks(corpus):
        print(f"- {line}")
    print(f"\n## speed\n\n- {timing(corpus)}")
    print("\n## chars per estimated token on the corpus, families without a tokenizer\n")
    for family in ("claude", "gemini", "deepseek"):
        estimator = Estimator(family)
        chars = tokens = 0
        for transcript in corpus:
            for message in transcript["messages"]:
                for _, cls, text in message_items(message):
                    chars += len(text)
                    tokens += estimator.text_tokens(text, cls)
        print(f"- {family}: {chars / tokens:.2f} chars/token")
    print(json.dumps({"families": EXACT_FAMILIES}))


if __name__ == "__main__":
    main()
