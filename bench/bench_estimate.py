"""Benchmark (1): estimate / exact per tokenizer family and content class.

For each family with an exact offline tokenizer, every unique corpus item is
estimated by ``Estimator(family)`` and counted exactly as the family's chat
template presents it; whole requests (each prefix ending before an assistant
message, plus the run's tools) are counted with ``windowguard.accounting.templates``. Generated
texts of every content class the estimator must never under-count (JSON, CSV, YAML,
``key: value`` lines, paths, tables, logs, numbers, runs of one character, emoji, CJK,
mixed alphabets, pasted configs; tool schemas) are drawn with a seed the fit never saw
(``fit_priors.BENCH_SEED``) and counted as a tool result and as a user message (what
the template adds for that message), tool sets as the tokens their block adds.

The unknown family (``Estimator(None)``, the per-text maximum over the measured
families) is compared with the largest exact count of any measured family.

Prints per family: whole requests (min / mean / p99), the over-count p50 / p99 and the
minimum per content class, the adversarial texts, the held-out robustness texts, the
provider-reported usage checks, and the cold estimate time of a 1,000-turn transcript.

    .venv/bin/python bench/bench_estimate.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import content_classes as cc  # noqa: E402
import exact_tokenizers as ex  # noqa: E402
from fit_priors import (  # noqa: E402
    BENCH_PER_CLASS,
    BENCH_SCHEMAS,
    BENCH_SEED,
    EXACT_FAMILIES,
    KINDS,
    SYSTEM,
    TASK,
    TEMPLATE_OF,
    TEXT_CLASSES,
    MemoCounter,
    as_message,
    block_head,
    call_texts,
    content_cost,
    content_message,
    content_texts,
    corpus_tool_sets,
    exact_tool_block,
    issue_schema_cases,
    message_cost,
    message_increments,
    message_items,
    presented_count,
    schema_cases,
    tool_block_sets,
    tool_presented_count,
)
from windowguard.accounting.estimate import UNKNOWN_FAMILY, Estimator  # noqa: E402
from windowguard.accounting.templates import count_prompt  # noqa: E402
from windowguard.core.adapters import shape_messages  # noqa: E402

CORPUS_KINDS = (
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
SCHEMA_KINDS = (
    "schema: enums",
    "schema: nested",
    "schema: long descriptions",
    "schema sets",
    *cc.SCHEMA_CLASSES,
)
PLACED_KINDS = tuple(
    f"{name} ({kind})" for name in (*TEXT_CLASSES, *cc.TEXT_CLASSES) for kind in KINDS
) + tuple(f"{name} (call)" for name in cc.CALL_CLASSES)
ALL_KINDS = (*CORPUS_KINDS, *PLACED_KINDS, *SCHEMA_KINDS)
# Where the per-message bound is reported: every corpus message, every generated one.
BOUND_KINDS = ("messages", *PLACED_KINDS)
FAMILIES = (*EXACT_FAMILIES, UNKNOWN_FAMILY)

# What an item is, so any family's estimator can size it: ("text", class, text),
# ("tools", tools), ("message", message) or ("request", messages, tools).
Item = tuple[Any, ...]


def p50(values: list[float]) -> float:
    return statistics.median(values)


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _line_numbered_code() -> Iterator[str]:
    """The demo's sample project as its read_file tool shows it."""
    from windowguard.demo.tools import project_files, read_project_file

    for path in project_files():
        lines = read_project_file(path).splitlines()
        yield "".join(f"{n:>4}  {line}\n" for n, line in enumerate(lines, 1))


def measure(family: str, corpus: list[dict[str, Any]]) -> dict[str, list[tuple[Item, int]]]:
    """Every item of every kind with its exact count, in an order all families share."""
    counter = MemoCounter(ex.load(family))
    template = TEMPLATE_OF[family]
    out: dict[str, list[tuple[Item, int]]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    for transcript in corpus:
        for message in transcript["messages"]:
            for label, cls, text in message_items(message):
                if (label, text) in seen or not text:
                    continue
                seen.add((label, text))
                exact = presented_count(family, counter, message, label, text)
                out[label].append((("text", cls, text), exact))
    for tools in corpus_tool_sets(corpus):
        for tool in tools:
            out["tool schemas"].append(
                (("tools", [tool]), tool_presented_count(family, counter, tool))
            )
    # Per item: each tool set's whole block (corpus sets, single tools, the union) and
    # each message's own cost in the template (additive, or its append increment).
    head = block_head(corpus)
    for tools in tool_block_sets(corpus):
        out["tool blocks"].append(
            (("tools", tools), exact_tool_block(counter, template, tools, head))
        )
    for transcript in corpus:
        increments = message_increments(counter, template, transcript["messages"])
        for message, exact in zip(transcript["messages"], increments, strict=True):
            out["messages"].append((("message", message), exact))
    for transcript in corpus:
        tools = transcript.get("tools") or None
        for request in ex.corpus_requests(transcript):
            exact = count_prompt(counter, request, tools, template=template)
            out["whole requests"].append((("request", request, tools), exact))
    # The demo's sample project as its read_file tool shows it (line-numbered code), and
    # the bundled coding-agent example's requests.
    for text in _line_numbered_code():
        exact = presented_count(family, counter, {"role": "tool"}, "tool results", text)
        out["line-numbered code"].append((("text", "dense", text), exact))
    example = json.loads((ROOT / "src/windowguard/examples/coding_agent.json").read_text())
    for request in ex.corpus_requests(example):
        exact = count_prompt(counter, request, example.get("tools"), template=template)
        out["coding_agent.json requests"].append(
            (("request", request, example.get("tools")), exact)
        )
    # Held-out generated texts of every class, as a tool result and as a user message,
    # and generated tool sets as the tokens their block adds.
    for name, text in content_texts(BENCH_SEED, BENCH_PER_CLASS):
        for kind in KINDS:
            exact = message_cost(counter, template, kind, text)
            out[f"{name} ({kind})"].append((("message", as_message(kind, text)[1]), exact))
    for name, text in call_texts(BENCH_SEED, BENCH_PER_CLASS):
        exact = content_cost(counter, template, "call", text)
        out[f"{name} (call)"].append((("message", content_message("call", text)), exact))
    schemas = [
        *schema_cases(BENCH_SEED, BENCH_SCHEMAS),
        *issue_schema_cases(BENCH_SEED, BENCH_SCHEMAS),
    ]
    for name, tools in schemas:
        out[name].append(
            (("tools", tools), exact_tool_block(counter, template, tools, [SYSTEM, TASK]))
        )
    return out


def unknown_exact(measured: dict[str, dict[str, list[tuple[Item, int]]]]) -> dict[str, Any]:
    """What the unknown family must cover: per item, the largest exact count of any family."""
    first = measured[EXACT_FAMILIES[0]]
    return {
        kind: [
            (item, max(measured[f][kind][i][1] for f in EXACT_FAMILIES))
            for i, (item, _) in enumerate(items)
        ]
        for kind, items in first.items()
    }


def estimate(est: Estimator, item: Item) -> int:
    what = item[0]
    if what == "text":
        return est.text_tokens(item[2], item[1])
    if what == "tools":
        return est.tools_tokens(item[1])
    if what == "message":
        return est.message_tokens(shape_messages([item[1]], format="openai_chat").shapes[0])
    return est.count(item[1], item[2])


def bound_ratios(
    family: str, measured: dict[str, list[tuple[Item, int]]]
) -> dict[str, list[float]]:
    """Per message kind: the bound of Estimator.message_costs over the exact count."""
    est = Estimator(None if family == UNKNOWN_FAMILY else family)
    out = {}
    for kind in BOUND_KINDS:
        out[kind] = [
            est.message_costs(shape_messages([item[1]], format="openai_chat").shapes[0])[1] / exact
            for item, exact in measured[kind]
            if exact
        ]
    return out


def ratios(family: str, measured: dict[str, list[tuple[Item, int]]]) -> dict[str, list[float]]:
    est = Estimator(None if family == UNKNOWN_FAMILY else family)
    return {
        kind: [estimate(est, item) / exact for item, exact in items if exact]
        for kind, items in measured.items()
    }


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


def timing(corpus: list[dict[str, Any]], family: str | None) -> str:
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
    estimator = Estimator(family)
    best = float("inf")
    for _ in range(5):
        # Fresh copies: nothing may be cached between runs.
        fresh = [dict(m) for m in transcript]
        start = time.perf_counter()
        estimator.count(fresh, source["tools"])
        best = min(best, time.perf_counter() - start)
    return (
        f"cold raw estimate, 1,000 turns ({len(transcript)} messages, {chars:,} chars), "
        f"{estimator.tokenizer}: {best * 1000:.1f} ms"
    )


def main() -> None:
    corpus = list(ex.corpus_transcripts())
    measured = {family: measure(family, corpus) for family in EXACT_FAMILIES}
    measured[UNKNOWN_FAMILY] = unknown_exact(measured)
    table = {family: ratios(family, measured[family]) for family in FAMILIES}
    bounds = {family: bound_ratios(family, measured[family]) for family in EXACT_FAMILIES}
    unknown = f"{UNKNOWN_FAMILY} (vs the largest exact)"

    print("## whole requests: estimate / exact (min / mean / p99)\n")
    print("| family | n | min | mean | p99 |")
    print("| --- | --- | --- | --- | --- |")
    for family in FAMILIES:
        values = table[family]["whole requests"]
        label = unknown if family == UNKNOWN_FAMILY else family
        print(
            f"| {label} | {len(values)} | {min(values):.3f} | {statistics.fmean(values):.3f} "
            f"| {p99(values):.3f} |"
        )
    print(
        "\n## estimate / exact per content class: p50 / p99 / min\n\n"
        f"Generated classes: {BENCH_PER_CLASS} held-out texts each, as a tool result "
        "(tool), as a user message (user), compact JSON as a tool call's arguments "
        f"(call); schema classes: {BENCH_SCHEMAS} tool sets each. The minimum is the "
        "guarantee (>= 1.00). The unknown family is compared with the largest exact count "
        "of any family.\n"
    )
    print("| class | n | " + " | ".join(FAMILIES) + " |")
    print("| --- | --- |" + " --- |" * len(FAMILIES))
    for kind in ALL_KINDS:
        cells = [
            f"{p50(table[f][kind]):.2f} / {p99(table[f][kind]):.2f} / {min(table[f][kind]):.2f}"
            for f in FAMILIES
        ]
        print(f"| {kind} | {len(table[FAMILIES[0]][kind])} | " + " | ".join(cells) + " |")
    under = [
        f"{f} {kind} {min(table[f][kind]):.3f}"
        for f in FAMILIES
        for kind in ALL_KINDS
        if min(table[f][kind]) < 1.0
    ]
    print(f"\nUnder 1.00: {', '.join(under) if under else 'none'}.")
    print(
        "\n## per-message bound / exact: min / p50\n\n"
        "Estimator.message_costs' bound over the exact tokens the family's template adds "
        "for the message (corpus messages: their increments; generated: as above). The "
        "bound must never be below 1.00.\n"
    )
    print("| messages | n | " + " | ".join(EXACT_FAMILIES) + " |")
    print("| --- | --- |" + " --- |" * len(EXACT_FAMILIES))
    for kind in BOUND_KINDS:
        cells = [f"{min(bounds[f][kind]):.2f} / {p50(bounds[f][kind]):.2f}" for f in EXACT_FAMILIES]
        print(f"| {kind} | {len(bounds[EXACT_FAMILIES[0]][kind])} | " + " | ".join(cells) + " |")

    print("\n## adversarial texts: estimate / exact (lower of the two content classes)\n")
    names = list(ex.adversarial_texts())
    print("| text | " + " | ".join(EXACT_FAMILIES) + " |")
    print("| --- |" + " --- |" * len(EXACT_FAMILIES))
    adversarial = {family: adversarial_ratios(family) for family in EXACT_FAMILIES}
    for name in names:
        row = " | ".join(f"{adversarial[f][name]:.2f}" for f in EXACT_FAMILIES)
        print(f"| {name} | {row} |")
    print("\n## held-out robustness texts (not fitted on): min estimate / exact\n")
    print("| family | seed | n | min | worst text | texts under 1.0 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for family in EXACT_FAMILIES:
        for seed in (7, 8):
            print(robustness_row(family, seed))
    print("\n## provider-reported prompt tokens\n")
    for line in usage_checks(corpus):
        print(f"- {line}")
    print(f"\n## speed\n\n- {timing(corpus, 'o200k')}\n- {timing(corpus, None)}")
    print("\n## chars per estimated token on the corpus, families without a tokenizer\n")
    for family in ("claude", "gemini", "deepseek", None):
        estimator = Estimator(family)
        chars = tokens = 0
        for transcript in corpus:
            for message in transcript["messages"]:
                for _, cls, text in message_items(message):
                    chars += len(text)
                    tokens += estimator.text_tokens(text, cls)
        print(f"- {estimator.tokenizer}: {chars / tokens:.2f} chars/token")
    print(json.dumps({"families": FAMILIES}))


if __name__ == "__main__":
    main()
