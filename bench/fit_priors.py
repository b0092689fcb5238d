"""Fit the estimator's per-family priors on the benchmark corpus (needs scipy).

For every tokenizer family with an exact offline tokenizer, every unique text of
``../shared/corpus`` (system, user, assistant text, tool-call name+arguments, tool
results, tool schemas), every adversarial text and every request (each prefix ending
before an assistant message, with the run's tools) is counted exactly -- texts *as
the family's chat template presents them* (JSON-escaped tool results for Llama 3 and
Mistral, re-serialised arguments, TypeScript or JSON schemas), requests through
``windowguard.templates``. One linear program per family then chooses the feature
weights of the three content classes *and* the per-message / per-call / per-tool /
tools-block / per-request overheads together, minimising the mean estimate/exact
over all requests subject to:

* estimate >= exact for every request (the guarantee), and per item: every tool block
  (each corpus tool set, each single tool, the unions) >= the tokens it adds, every
  message >= its own cost in the template (OpenAI's per-message count, elsewhere the
  increment of appending it), the request overhead >= an empty request's framing;
* estimate >= exact for every unique corpus text whose presented count fits in its
  UTF-8 length (so per-item minima stay at 1.0 where the byte ceiling allows), every
  tool schema and every adversarial text, in every content class;
* unigram weights >= 0; bigram ("merge") weights may be negative -- the adversarial
  set holds, for every bigram, a text made of nothing but that transition, which is
  where a negative weight would under-count most (a per-character monotonicity
  constraint was tried: it costs 0.40 of mean ratio on o200k and guards nothing the
  guarantee needs; a text's estimate is clamped at 0);
* overheads never below the framing the template itself writes per message and call.

The fit is then re-checked through the real ``Estimator`` (ceil, byte ceiling) and the
request overhead raised if any request came out under (reported; so far never).

Families without an offline tokenizer are fitted the same way to a *target* built
from the measured counts (see docs/decisions/0002-estimator.md): ``claude`` to
max(1.46 x o200k, every measured family), ``gemini`` and ``deepseek`` to the maximum
of the measured families.

    python bench/fit_priors.py            # print the fit
    python bench/fit_priors.py --write    # and rewrite the block in estimate.py
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import linprog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import exact_tokenizers as ex  # noqa: E402
from windowguard.adapters import shape_messages  # noqa: E402
from windowguard.estimate import (  # noqa: E402
    FEATURES,
    text_features,
)
from windowguard.templates import count_prompt, count_prompt_parts  # noqa: E402

EXACT_FAMILIES = ("o200k", "cl100k", "llama3", "llama4", "qwen", "mistral")
TEMPLATE_OF = {
    "o200k": "openai",
    "cl100k": "openai",
    "llama3": "llama3",
    "llama4": "llama3",
    "qwen": "qwen",
    "mistral": "mistral",
}
# Tokens the template writes around every message and every tool call, by template:
# openai: 3 + the role; llama3: header ids, role, "\n\n", eot; qwen: im_start, role,
# im_end, "\n" and the <tool_call> JSON frame; mistral: [INST]/[/INST] and [TOOL_CALLS].
FRAMING_FLOOR = {"openai": (4, 7), "llama3": (5, 8), "qwen": (5, 12), "mistral": (2, 10)}
# Families whose template JSON-escapes tool results (tojson / {"content": ...}).
ESCAPES_RESULTS = {"llama3", "llama4", "mistral"}
REPARSES_ARGUMENTS = {"llama3", "llama4", "qwen", "mistral"}


def tool_text(tool: Any) -> str:
    """The text the estimator sizes a tool schema by (must match Estimator.tools_tokens)."""
    return json.dumps(tool, ensure_ascii=False)


def load_corpus() -> list[dict[str, Any]]:
    return list(ex.corpus_transcripts())


def message_items(message: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(kind label, content class, text) of each segment, as the adapter sees them."""
    shape = shape_messages([message], format="openai_chat").shapes[0]
    role = message.get("role")
    items = []
    for seg in shape.segments:
        if role == "assistant" and seg.content_class == "dense":
            label = "tool-call arguments"
        elif role == "tool":
            label = "tool results"
        elif role == "assistant":
            label = "assistant text"
        else:
            label = str(role)
        items.append((label, seg.content_class, seg.text))
    return items


def message_ids(message: dict[str, Any]) -> tuple[str, ...]:
    """Call ids a message opens or answers (the estimator sizes them as dense text)."""
    shape = shape_messages([message], format="openai_chat").shapes[0]
    return (*shape.opens, *shape.answers)


def presented_count(
    family: str, counter: Any, message: dict[str, Any], label: str, text: str
) -> int:
    """Exact tokens of one segment as the family's template presents it."""
    if label == "tool results" and family in ESCAPES_RESULTS:
        return counter.count(json.dumps(text, ensure_ascii=False))
    if label == "tool-call arguments" and family in REPARSES_ARGUMENTS:
        total = 0
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            name, raw = function.get("name", ""), function.get("arguments") or ""
            if f"{name}{raw}" != text:
                continue
            try:
                shown = json.dumps(json.loads(raw), ensure_ascii=False) if raw else "{}"
            except ValueError:
                shown = raw
            total = counter.count(name) + counter.count(shown)
            return total
    return counter.count(text)


def tool_presented_count(family: str, counter: Any, tool: dict[str, Any]) -> int:
    template = TEMPLATE_OF[family]
    if template == "openai":
        from windowguard.templates import _typescript_functions

        return counter.count(_typescript_functions([tool]))
    if template == "llama3":
        return counter.count(json.dumps(tool, ensure_ascii=False, indent=4))
    if template == "mistral":
        function = tool.get("function", tool)
        return counter.count(
            json.dumps({"type": "function", "function": function}, ensure_ascii=False)
        )
    return counter.count(json.dumps(tool, ensure_ascii=False))


def corpus_tool_sets(corpus: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    sets = [t["tools"] for t in corpus if t.get("tools")]
    for path in sorted((ex.CORPUS_DIR / "tools").glob("*.json")):
        data = json.loads(path.read_text())
        groups = data.get("tools", data) if isinstance(data, dict) else {"all": data}
        if isinstance(groups, list):
            groups = {"all": groups}
        sets.extend(group for group in groups.values() if isinstance(group, list) and group)
    return sets


def tool_block_sets(corpus: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Every tool set the tool-block guarantee covers, each once.

    The distinct corpus tool sets, every single tool schema alone, the union of the runs'
    tools (unique by name, in run order -- what bench/_corpus.py's synthetic transcripts
    send) and the union of those and the ``tools/*.json`` sets.
    """
    out: list[list[dict[str, Any]]] = []
    seen: set[str] = set()

    def add(tools: list[dict[str, Any]]) -> None:
        key = json.dumps(tools, sort_keys=True)
        if tools and key not in seen:
            seen.add(key)
            out.append(tools)

    def union(groups: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        names: set[str] = set()
        for group in groups:
            for tool in group:
                name = (tool.get("function") or tool).get("name")
                if name not in names:
                    names.add(name)
                    tools.append(tool)
        return tools

    sets = corpus_tool_sets(corpus)
    for tools in sets:
        add(list(tools))
        for tool in tools:
            add([tool])
    add(union([t["tools"] for t in corpus if t.get("tools")]))  # bench's synthetic union
    add(union(sets))  # and with the tools/*.json sets too
    return out


def block_head(corpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A real head (system + first user message): templates that put tools in or before a
    user message (Llama 3, Mistral) render no tool block without one."""
    run = next(t for t in corpus if t["source"] == "openhands" and t.get("tools"))
    for index, message in enumerate(run["messages"]):
        if message.get("role") == "user":
            return list(run["messages"][: index + 1])
    raise RuntimeError("no user message in the first openhands run")


def exact_tool_block(
    counter: Any, template: str, tools: list[dict[str, Any]], head: list[dict[str, Any]]
) -> int:
    """Tokens the tool block adds to a request: max over an empty request and a real head."""
    return max(
        count_prompt(counter, base, tools, template=template)
        - count_prompt(counter, base, None, template=template)
        for base in ([], head)
    )


def message_increments(counter: Any, template: str, messages: list[dict[str, Any]]) -> list[int]:
    """Each message's exact cost in the template, without tools.

    OpenAI's accounting is additive per message (its per-message count); for rendered
    templates it is the increment of appending the message to its prefix (>= 0; for
    Mistral with a fixed user message after both, see below).
    """
    if template == "openai":
        return list(count_prompt_parts(counter, messages, None, template=template).message_tokens)
    # Mistral writes the system prompt into the *last* user message, so a plain append
    # would charge the system message to the first user message after it: both prefixes
    # end with the same one-word user message instead.
    tail = [{"role": "user", "content": "ok"}] if template == "mistral" else []
    out = []
    previous = count_prompt(counter, tail, None, template=template)
    for index in range(len(messages)):
        total = count_prompt(counter, [*messages[: index + 1], *tail], None, template=template)
        out.append(max(0, total - previous))
        previous = total
    return out


MemoCounter = ex.MemoCounter

K = len(FEATURES)
CLASSES = ("prose", "dense", "schema")
OVERHEADS = ("message", "tool_call", "tool", "tools_block", "request")
N_VARS = 3 * K + len(OVERHEADS)
UNIGRAMS = 9  # chars .. utf8_4byte: non-negative; the rest are merge bigrams
# Claude: the densest published figure for Claude's tokenizer on agent transcripts is
# 2.4 chars/token where o200k gives ~3.5, i.e. up to 3.5 / 2.4 = 1.46x o200k's tokens.
CLAUDE_OVER_O200K = 1.46
CODE_WEIGHT = 0.1
CLAUDE_TOOL_USE_PROMPT = 346  # Anthropic's tool-use system prompt (tool_choice auto/none)


def collect(family: str, corpus: list[dict[str, Any]]) -> dict[str, Any]:
    """Exact counts of every item, schema, adversarial text and request for one family."""
    counter = MemoCounter(ex.load(family))
    items: dict[tuple[str, str], int] = {}
    for transcript in corpus:
        for message in transcript["messages"]:
            for label, cls, text in message_items(message):
                if text:
                    exact = presented_count(family, counter, message, label, text)
                    items[(cls, text)] = max(items.get((cls, text), 0), exact)
    schemas = {
        tool_text(tool): tool_presented_count(family, counter, tool)
        for tools in corpus_tool_sets(corpus)
        for tool in tools
    }
    adversarial = {}
    for text in ex.adversarial_texts().values():
        exact = counter.count(text)
        dense = exact
        if family in ESCAPES_RESULTS:
            dense = max(exact, counter.count(json.dumps(text, ensure_ascii=False)))
        adversarial[text] = (exact, dense)
    requests = []
    for index, transcript in enumerate(corpus):
        tools = transcript.get("tools") or None
        for request in ex.corpus_requests(transcript):
            exact = count_prompt(counter, request, tools, template=TEMPLATE_OF[family])
            requests.append((index, len(request), exact))
    template = TEMPLATE_OF[family]
    head = block_head(corpus)
    tool_blocks = [
        exact_tool_block(counter, template, tools, head) for tools in tool_block_sets(corpus)
    ]
    messages = [
        message_increments(counter, template, transcript["messages"]) for transcript in corpus
    ]
    code = {}
    for text in line_numbered_code():
        code[text] = presented_count(family, counter, {"role": "tool"}, "tool results", text)
        items[("dense", text)] = max(items.get(("dense", text), 0), code[text])
    return {
        "items": items,
        "schemas": schemas,
        "adversarial": adversarial,
        "requests": requests,
        "tool_blocks": tool_blocks,
        "messages": messages,
        "code": code,
    }


def line_numbered_code() -> list[str]:
    """The demo's sample project as its read_file tool shows it."""
    from windowguard.demo.tools import project_files, read_project_file

    return [
        "".join(f"{n:>4}  {line}\n" for n, line in enumerate(read_project_file(p).splitlines(), 1))
        for p in project_files()
    ]


class Design:
    """Feature rows of the corpus, shared by every family's linear program."""

    def __init__(self, corpus: list[dict[str, Any]]) -> None:
        self._features: dict[str, np.ndarray] = {}
        # Per transcript, cumulative [prose K | dense K | messages | calls] per message.
        self.prefix = []
        for transcript in corpus:
            rows = []
            for message in transcript["messages"]:
                shape = shape_messages([message], format="openai_chat").shapes[0]
                row = np.zeros(2 * K + 2)
                for segment in shape.segments:
                    offset = 0 if segment.content_class == "prose" else K
                    row[offset : offset + K] += self.features(segment.text)[:K]
                for call_id in (*shape.opens, *shape.answers):
                    row[K : 2 * K] += self.features(call_id)[:K]
                row[2 * K] = 1
                row[2 * K + 1] = len(shape.opens)
                rows.append(row)
            self.prefix.append(np.cumsum(np.array(rows), axis=0))
        # Per transcript: [schema K | tools | has tools].
        self.tools = []
        for transcript in corpus:
            row = np.zeros(K + 2)
            for tool in transcript.get("tools") or ():
                row[:K] += self.features(tool_text(tool))[:K]
                row[K] += 1
            row[K + 1] = 1 if row[K] else 0
            self.tools.append(row)
        # Per tool-block set: [schema K | tools | 1].
        self.blocks = []
        for tools in tool_block_sets(corpus):
            row = np.zeros(K + 2)
            for tool in tools:
                row[:K] += self.features(tool_text(tool))[:K]
            row[K], row[K + 1] = len(tools), 1
            self.blocks.append(row)

    def features(self, text: str) -> np.ndarray:
        found = self._features.get(text)
        if found is None:
            found = self._features[text] = np.array(text_features(text), dtype=float)
        return found

    def message_row(self, transcript: int, index: int) -> np.ndarray:
        prefix = self.prefix[transcript]
        own = prefix[index] - (prefix[index - 1] if index else 0)
        row = np.zeros(N_VARS)
        row[: 2 * K] = own[: 2 * K]
        row[3 * K : 3 * K + 2] = own[2 * K], own[2 * K + 1]
        return row

    def block_row(self, block: int) -> np.ndarray:
        row = np.zeros(N_VARS)
        row[2 * K : 3 * K] = self.blocks[block][:K]
        row[3 * K + 2], row[3 * K + 3] = self.blocks[block][K], 1
        return row

    def request_row(self, transcript: int, messages: int) -> np.ndarray:
        prefix, tools = self.prefix[transcript][messages - 1], self.tools[transcript]
        row = np.zeros(N_VARS)
        row[: 2 * K] = prefix[: 2 * K]
        row[2 * K : 3 * K] = tools[:K]
        row[3 * K :] = (prefix[2 * K], prefix[2 * K + 1], tools[K], tools[K + 1], 1)
        return row


def solve(design: Design, targets: dict[str, Any], floors: dict[str, int]) -> dict[str, Any]:
    """The linear program of the module docstring, for one family's targets."""
    rows: list[np.ndarray] = []
    bounds_rhs: list[float] = []

    def text_row(cls: int, features: np.ndarray) -> np.ndarray:
        row = np.zeros(N_VARS)
        row[cls * K : (cls + 1) * K] = features[:K]
        return row

    for (cls, text), exact in targets["items"].items():
        features = design.features(text)
        if exact <= features[K]:  # beyond the byte ceiling only the request can cover it
            rows.append(text_row(CLASSES.index(cls), features))
            bounds_rhs.append(exact)
    for text, exact in targets["schemas"].items():
        row = text_row(2, design.features(text))
        row[3 * K + 2] = row[3 * K + 3] = 1  # one tool, and the block around it
        rows.append(row)
        bounds_rhs.append(exact)
    for text, (exact, dense) in targets["adversarial"].items():
        features = design.features(text)
        for cls, target in ((0, exact), (1, dense), (2, exact)):
            rows.append(text_row(cls, features))
            bounds_rhs.append(min(target, features[K]))
    # Per item: every tool block of a corpus tool set, single tool or the union, and every
    # message's own cost in the template, are covered on their own, not only inside the
    # corpus' requests (a request with few messages and many tools must not rely on
    # per-message overheads to cover its tool block).
    for block, exact in enumerate(targets["tool_blocks"]):
        rows.append(design.block_row(block))
        bounds_rhs.append(exact)
    for transcript, increments in enumerate(targets["messages"]):
        for index, exact in enumerate(increments):
            rows.append(design.message_row(transcript, index))
            bounds_rhs.append(exact)
    objective = np.zeros(N_VARS)
    for transcript, messages, exact in targets["requests"]:
        row = design.request_row(transcript, messages)
        rows.append(row)
        bounds_rhs.append(exact)
        objective += row / exact
    objective /= len(targets["requests"])
    # Line-numbered code (what coding agents read) is rare in the corpus but common in
    # use: its texts weigh in the mean as much as a tenth of the requests.
    code = targets.get("code", {})
    for text, exact in code.items():
        objective += CODE_WEIGHT / len(code) * text_row(1, design.features(text)) / exact
    weight_bounds = [(0.0, None) if j % K < UNIGRAMS else (None, None) for j in range(3 * K)]
    overhead_bounds = [(float(floors.get(name, 0)), None) for name in OVERHEADS]
    result = linprog(
        c=objective,
        A_ub=-np.array(rows),
        b_ub=-np.array(bounds_rhs),
        bounds=weight_bounds + overhead_bounds,
        method="highs",
    )
    if not result.success:
        raise RuntimeError(result.message)
    # Round up: rounding must never lower an estimate.
    x = [math.ceil(v * 10_000 - 1e-6) / 10_000 for v in result.x]
    fitted: dict[str, Any] = {cls: x[i * K : (i + 1) * K] for i, cls in enumerate(CLASSES)}
    for name, value in zip(OVERHEADS, x[3 * K :], strict=True):
        fitted[name] = math.ceil(value - 1e-6)
    return fitted


def verify(
    name: str, fitted: dict[str, Any], targets: dict[str, Any], corpus: list[dict[str, Any]]
) -> dict[str, Any]:
    """Re-check through the real Estimator; raise the request overhead to cover any gap."""
    import windowguard.estimate as estimate

    def estimator() -> Any:
        estimate.FAMILIES[name] = estimate._priors(name, fitted, "checking")
        return estimate.Estimator(name)

    est = estimator()
    gap = 0
    for transcript, messages, exact in targets["requests"]:
        entry = corpus[transcript]
        request = entry["messages"][:messages]
        gap = max(gap, exact - est.count(request, entry.get("tools") or None))
    if gap > 0:
        print(f"{name}: request overhead raised by {gap} after the exact check", file=sys.stderr)
        fitted["request"] += gap
        est = estimator()
    blocks = tool_block_sets(corpus)
    under_blocks = sum(
        1
        for tools, exact in zip(blocks, targets["tool_blocks"], strict=True)
        if est.tools_tokens(tools) < exact
    )
    # The LP does not see the byte ceiling of a text: a message whose short text is
    # clamped (a 5-byte tool result inside Mistral's JSON frame) may come out under;
    # the per-message overhead is raised by the largest such gap.
    # A derived target (1.46 x o200k) can exceed a short text's byte ceiling where no
    # measured tokenizer does; for those families the gaps are only reported.
    message_gap, messages_under = 0, 0
    for transcript, increments in zip(corpus, targets["messages"], strict=True):
        for message, exact in zip(transcript["messages"], increments, strict=True):
            shape = shape_messages([message], format="openai_chat").shapes[0]
            gap = exact - est.message_tokens(shape)
            message_gap, messages_under = max(message_gap, gap), messages_under + (gap > 0)
    if message_gap > 0 and name not in EXACT_FAMILIES:
        print(f"{name}: {messages_under} messages under a derived target", file=sys.stderr)
    elif message_gap > 0:
        print(f"{name}: message overhead raised by {message_gap} (byte ceiling)", file=sys.stderr)
        fitted["message"] += message_gap
        est = estimator()
    if under_blocks:
        print(f"{name}: {under_blocks} tool blocks under (byte ceiling)", file=sys.stderr)
    for text, (exact, _) in targets["adversarial"].items():
        for cls in ("prose", "dense"):
            # A derived target can exceed the byte ceiling no estimate goes past.
            if est.text_tokens(text, cls) < min(exact, len(text.encode())):
                raise RuntimeError(f"{name}: adversarial text under-counted in {cls}")
    return fitted


def derived_targets(measured: dict[str, dict[str, Any]], scale_o200k: float) -> dict[str, Any]:
    """Per-text and per-request maximum of the measured families (and scaled o200k)."""
    families = list(measured.values())
    o200k = measured["o200k"]

    def combine(key: str, index: Any) -> int:
        best = max(f[key][index] for f in families)
        return max(best, math.ceil(scale_o200k * o200k[key][index]))

    items = {key: combine("items", key) for key in o200k["items"]}
    schemas = {key: combine("schemas", key) for key in o200k["schemas"]}
    adversarial = {
        text: tuple(
            max(
                max(f["adversarial"][text][i] for f in families),
                math.ceil(scale_o200k * o200k["adversarial"][text][i]),
            )
            for i in (0, 1)
        )
        for text in o200k["adversarial"]
    }
    requests = [
        (t, n, max(max(f["requests"][i][2] for f in families), math.ceil(scale_o200k * e)))
        for i, (t, n, e) in enumerate(o200k["requests"])
    ]
    code = {text: max(f["code"][text] for f in families) for text in o200k["code"]}
    tool_blocks = [
        max(max(f["tool_blocks"][i] for f in families), math.ceil(scale_o200k * exact))
        for i, exact in enumerate(o200k["tool_blocks"])
    ]
    messages = [
        [
            max(max(f["messages"][t][i] for f in families), math.ceil(scale_o200k * exact))
            for i, exact in enumerate(increments)
        ]
        for t, increments in enumerate(o200k["messages"])
    ]
    return {
        "tool_blocks": tool_blocks,
        "messages": messages,
        "items": items,
        "schemas": schemas,
        "adversarial": adversarial,
        "requests": requests,
        "code": code,
    }


def fit_all() -> dict[str, dict[str, Any]]:
    corpus = load_corpus()
    design = Design(corpus)
    measured: dict[str, dict[str, Any]] = {}
    fitted: dict[str, dict[str, Any]] = {}
    for family in EXACT_FAMILIES:
        targets = measured[family] = collect(family, corpus)
        floor_message, floor_call = FRAMING_FLOOR[TEMPLATE_OF[family]]
        # The request overhead covers at least the framing of an empty request (OpenAI's
        # reply priming, Llama 3's default system header ...).
        empty = count_prompt(ex.load(family), [], None, template=TEMPLATE_OF[family])
        floors = {"message": floor_message, "tool_call": floor_call, "request": empty}
        result = solve(design, targets, floors)
        result = verify(family, result, targets, corpus)
        fitted[family] = {
            "basis": f"fitted: exact {family} tokenizer, {TEMPLATE_OF[family]} template",
            **result,
        }
        print(family, fitted[family], file=sys.stderr)
    floors = {
        "message": max(f["message"] for f in fitted.values()),
        "tool_call": max(f["tool_call"] for f in fitted.values()),
        "request": max(f["request"] for f in fitted.values()),
    }
    claude_targets = derived_targets(measured, CLAUDE_OVER_O200K)
    claude = solve(design, claude_targets, {**floors, "tools_block": CLAUDE_TOOL_USE_PROMPT})
    fitted["claude"] = {
        "basis": (
            f"derived: max({CLAUDE_OVER_O200K} x o200k, measured families); "
            f"tool-use prompt {CLAUDE_TOOL_USE_PROMPT} (ADR 0002)"
        ),
        **verify("claude", claude, claude_targets, corpus),
    }
    widest_targets = derived_targets(measured, 1.0)
    widest = verify("gemini", solve(design, widest_targets, floors), widest_targets, corpus)
    for name in ("gemini", "deepseek"):
        fitted[name] = {
            "basis": "derived: maximum of the measured families (ADR 0002)",
            **widest,
        }
    return fitted


def write_block(fitted: dict[str, dict[str, Any]]) -> None:
    path = ROOT / "src" / "windowguard" / "estimate.py"
    text = path.read_text()
    start = text.index("# BEGIN FITTED PRIORS\n") + len("# BEGIN FITTED PRIORS\n")
    end = text.index("# END FITTED PRIORS")
    lines = ["# fmt: off", "_FITTED: dict[str, dict[str, Any]] = {"]
    for name, values in fitted.items():
        lines.append(f"    {json.dumps(name)}: {{")
        for key, value in values.items():
            if isinstance(value, list):  # unigram weights, then the merge (bigram) weights
                head, tail = value[:UNIGRAMS], value[UNIGRAMS:]
                lines.append(f"        {json.dumps(key)}: {json.dumps(head)[:-1]},")
                lines.append(f"            {json.dumps(tail)[1:]},")
            else:
                lines.append(f"        {json.dumps(key)}: {json.dumps(value)},")
        lines.append("    },")
    lines += ["}", "# fmt: on"]
    path.write_text(text[:start] + "\n".join(lines) + "\n" + text[end:])
    subprocess.run([sys.executable, "-m", "ruff", "format", str(path)], check=True)


if __name__ == "__main__":
    result = fit_all()
    print(json.dumps(result, indent=1))
    if "--write" in sys.argv:
        write_block(result)
