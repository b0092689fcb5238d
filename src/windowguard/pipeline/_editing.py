"""The edit stages of a fit: clamp oversized tool results, clear old ones, then (after
whole turns are dropped) fold what would be lost into a summary.

Each stage is a function of the fit's view (:class:`~windowguard.pipeline._fitting.FitContext`)
and the run's :class:`EditState`, and returns the edits it made; the manager
(:mod:`windowguard.pipeline.manager`) runs them in that order and only as far as needed:

* **clamp** (:class:`~windowguard.ClampToolResults`): every tool result over its
  ``max_tokens`` is cut to head and tail when it first arrives, in the newest turn too;
  and when even head + newest turn cannot fit, the newest turn's results are cut further,
  to what fits. An output larger than the window no longer ends the run.
* **clear** (:class:`~windowguard.ClearToolResults`): when the request would lose turns,
  old tool results (outside the newest ``keep`` turns), oldest first, become a short
  placeholder naming the tool and its arguments (the whole result: its images and
  documents go too, each freeing the family's media allowance) -- in one block down to
  the low-water mark, and only when that frees at least ``clear_at_least`` tokens, so the
  prompt's prefix changes once per block, not on every send.

Invariants: an edited message is a new object of the caller's type with only its
content replaced (:mod:`windowguard.core.edits.rewrite`); an edit, once made, is sent byte for
byte on every later send of the run (the edited copy is kept per caller's message, and
every number in it comes from one deterministic count of the original); pairing, the head
and the newest turn are untouched by construction (results are edited in place, never
removed).
"""

from __future__ import annotations

import hashlib
import logging
import operator
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from ..accounting.estimate import Estimator
from ..core.edits.config import ClampToolResults, ClearToolResults, EditStage, Summarize
from ..core.edits.parts import CallRef, ResultRef, scan_refs, tool_calls
from ..core.edits.records import EditRecord
from ..core.edits.rewrite import clear_call_inputs, media_droppable, replace_result_text
from ..core.edits.summary import arun_summarizer, run_summarizer
from ..core.edits.text import PAGE_CHARS, clamp_text, placeholder_text
from ..core.exceptions import ConfigurationError, WindowGuardError
from ._fitting import FitContext

__all__ = [
    "BytesBounded",
    "EditState",
    "Stages",
    "SummaryQuery",
    "SummaryState",
    "clamp_new",
    "clamp_to_fit",
    "clear_block",
    "newest_results",
    "summarize_now",
    "summary_key",
]

logger = logging.getLogger("windowguard")

TextCount = Callable[[str], int]


class BytesBounded:
    """A text count that never exceeds the text's UTF-8 length: an exact byte-level BPE
    tokenizer (every local family). The clamp then counts only a text whose bytes could
    be over its limit; a text within it in bytes is within it in tokens."""

    __slots__ = ("_count",)

    def __init__(self, count: TextCount) -> None:
        self._count = count

    def __call__(self, text: str) -> int:
        return self._count(text)


def _shown_within(ctx: FitContext, start: int, limit: int) -> bool:
    """Whether every message from ``start`` on (what is sent there) has a guaranteed
    bound of at most ``limit``: a bound holds all the bytes of a message's tool results
    (with their framing), so no result there is over ``limit`` in bytes, nor in the
    tokens of a byte-level BPE. Read off the entries, without reading the messages."""
    entries = ctx.run.ledger.entries
    end = ctx.end
    if start >= end:
        return True
    widest: int = max(map(_BOUND, entries[start:end]))
    return widest <= limit


_BOUND: Final = operator.attrgetter("bound")


def _within_in_bytes(text: str, limit: int) -> bool:
    """Whether ``text``'s UTF-8 bytes are at most ``limit`` (without encoding it when its
    length alone says so: a character is at most 4 bytes)."""
    if 4 * len(text) <= limit:
        return True
    if len(text) > limit:
        return False
    return len(text.encode("utf-8", "surrogatepass")) <= limit


SPILL_TOOL = "read_spilled"
"""The tool that pages through spilled outputs (``windowguard.run.spill.spill_tool``'s
default name): its results are never clamped."""

MIN_FREED = 50
"""A result is cleared only when its placeholder is at least this many tokens shorter
(a short result costs little, and clearing it would rewrite the prompt for nothing)."""


@dataclass(frozen=True, slots=True)
class Stages:
    """A manager's edit stages, by kind (each None when not configured)."""

    clamp: ClampToolResults | None = None
    clear: ClearToolResults | None = None
    summarize: Summarize | None = None

    @classmethod
    def of(cls, edits: Sequence[EditStage]) -> Stages:
        clamp = next((e for e in edits if isinstance(e, ClampToolResults)), None)
        clear = next((e for e in edits if isinstance(e, ClearToolResults)), None)
        summarize = next((e for e in edits if isinstance(e, Summarize)), None)
        return cls(clamp=clamp, clear=clear, summarize=summarize)

    def __bool__(self) -> bool:
        return self.clamp is not None or self.clear is not None or self.summarize is not None


@dataclass(slots=True)
class EditState:
    """What the edit stages did in one run: the latest record of each edited caller's
    message, by identity (the message is kept so its id stays valid), in the order
    made."""

    records: dict[int, tuple[object, EditRecord]] = field(default_factory=dict)
    summary: SummaryState | None = None
    summaries: dict[str, str] = field(default_factory=dict)
    """Summary texts by :func:`summary_key`, this run's and any given to the manager
    (a resumed run's journal), so the same turns are never summarized twice."""
    barren: bool = False
    """The last summary freed no room: the next send drops instead of asking again."""
    clear_reach: int = 0
    """What the last clear block that gave up could have freed (every candidate looked at)."""
    futile_clear: tuple[int | None, int, int] | None = None
    """A clear for the trigger alone that gave up: the cut it was made under, the
    request's size then, and the most it could reach since (what it could free plus the
    turns ``keep`` protected then). While the cut holds and the request has not grown by
    what is missing, trying again would scan every result for nothing."""

    def note(self, original: object, record: EditRecord) -> None:
        self.records[id(original)] = (original, record)


def _scan(ctx: FitContext, start: int, *, original: bool = False) -> list[ResultRef]:
    """The tool results of the turn holding message ``start`` and every later one (of
    the whole transcript when ``start`` lies in the head), in what is sent (an earlier
    edit's copy where there is one; ``original``: in the caller's own messages), with
    the transcript's indices and turn numbers."""
    return _refs(ctx, start, original=original)[1]


def _refs(
    ctx: FitContext, start: int, *, original: bool = False
) -> tuple[list[CallRef], list[ResultRef]]:
    """The tool calls and results :func:`_scan` reads, from the turn holding ``start``
    on: what is before it is not read (a long run's dropped turns cost nothing).

    One reading serves every stage of a fit until a message is replaced: a later ask
    from a later turn takes the refs from that turn on (each turn is read on its own,
    so they are the same as reading from there)."""
    seg = ctx.seg
    starts = seg.turn_starts
    fmt = ctx.run.format
    messages = ctx.run.seen if original else ctx.run.effective
    turn = bisect_right(starts, start) - 1
    whole = start < seg.head_stop or turn < 0
    first = 0 if whole else starts[turn]
    known = ctx.refs.get(original)
    if known is not None and known[0] is messages and known[1] <= first:
        _, read_from, calls, found = known
        if read_from == first:
            return calls, found
        return [c for c in calls if c.index >= first], [r for r in found if r.index >= first]
    if whole:
        calls, found = scan_refs(messages[: ctx.end], fmt, seg.head_stop, starts)
    else:
        relative = [starts[j] - first for j in range(turn, len(starts))]
        calls, found = scan_refs(
            messages[first : ctx.end], fmt, 0, relative, offset=first, turn_offset=turn
        )
    ctx.refs[original] = (messages, first, calls, found)
    return calls, found


def _apply(
    ctx: FitContext,
    estimator: Estimator,
    texts: dict[int, dict[int, str]],
    state: EditState,
    records: dict[int, EditRecord],
    *,
    drop_media: bool = False,
) -> list[EditRecord]:
    """Replace the results' texts (by message index and part) in what is sent, and with
    ``drop_media`` (a clear) their images and documents."""
    run = ctx.run
    changes: dict[int, object] = {}
    for index, parts in texts.items():
        changes[index] = replace_result_text(
            run.effective[index], run.format, parts, drop_media=drop_media
        )
    run.substitute(changes, estimator)
    made = []
    for index in sorted(records):
        record = records[index]
        state.note(run.seen[index], record)
        made.append(record)
    ctx.refresh()
    return made


_REMEMBERED_CHARS = 64 * 1024


def _remembering(count: TextCount) -> TextCount:
    """``count``, remembering its answer for each long text (by identity: the same str
    object), so a 30 MB output is scanned once by the stage, not at every use."""
    known: dict[int, tuple[str, int]] = {}

    def counted(text: str) -> int:
        if len(text) < _REMEMBERED_CHARS:
            return count(text)
        found = known.get(id(text))
        if found is not None and found[0] is text:
            return found[1]
        tokens = count(text)
        known[id(text)] = (text, tokens)
        return tokens

    return counted


def clamp_new(
    ctx: FitContext,
    config: ClampToolResults,
    start: int,
    count: TextCount,
    state: EditState,
    estimator: Estimator,
    *,
    limit: int | None = None,
    newest_only: bool = False,
    pages: bool = False,
) -> list[EditRecord]:
    """Clamp every tool result from message ``start`` on that counts more than
    ``limit`` (the stage's ``max_tokens`` by default); a page of a spilled output only
    with ``pages`` (the last resort: head + newest turn cannot fit otherwise).

    Returns:
        The clamps made (none when nothing is over its limit).
    """
    limit = config.limit(ctx.budget.input_tokens) if limit is None else limit
    bounded = isinstance(count, BytesBounded)
    if bounded and _shown_within(ctx, start, limit):
        return []  # no message shows more bytes than the limit: no result to read
    count = _remembering(count)  # a long output is counted once, not once per use
    texts: dict[int, dict[int, str]] = {}
    records: dict[int, EditRecord] = {}
    newest = ctx.newest
    run = ctx.run
    originals: dict[tuple[int, int], ResultRef] | None = None
    for ref in _scan(ctx, start):
        if ref.index < start or (newest_only and ref.index < newest):
            continue
        if ref.tool_name in config.exclude_tools or not ref.text:
            continue
        page = config.spill is not None and ref.tool_name == SPILL_TOOL
        if page and not pages:
            continue  # a page of a spilled output: already bounded, and cutting it would
            # make the model page forever
        if bounded and _within_in_bytes(ref.text, limit):
            continue  # no more tokens than bytes: nothing to count
        before = count(ref.text)
        if before <= limit:
            continue
        whole = ref
        if run.effective[ref.index] is not run.seen[ref.index]:
            # Sent as an earlier edit's copy (clamped already): cut the caller's own output
            # again, so the marker counts all of it and the spill store keeps all of it
            # (under the same handle as the first time), never a clamp of a clamp.
            if originals is None:
                originals = {(r.index, r.part): r for r in _scan(ctx, start, original=True)}
            whole = originals.get((ref.index, ref.part), ref)
        spilled = None
        if config.spill is not None and not page:  # (a page's output is kept already)
            try:
                spilled = config.spill.put(whole.text, tool_name=ref.tool_name or None)
            except (WindowGuardError, OSError) as exc:  # a full store clamps without it
                logger.warning("could not keep the whole %s output (%s)", ref.tool_name, exc)
        try:
            cut = clamp_text(
                whole.text,
                limit,
                count,
                config.keep,
                spilled,
                error=whole.is_error or None,
                page_chars=_page_chars(config.spill),
            )
        except WindowGuardError as exc:  # the limit cannot hold even the marker
            logger.warning(
                "could not clamp a %s result to %d tokens: %s", ref.tool_name, limit, exc
            )
            continue
        texts.setdefault(ref.index, {})[ref.part] = cut
        after = count(cut)
        previous = records.get(ref.index)
        names = (*previous.tool_names, ref.tool_name) if previous else (ref.tool_name,)
        records[ref.index] = EditRecord(
            kind="clamp",
            messages=(ref.index,),
            tool_names=tuple(n for n in names if n),
            tokens_before=before + (previous.tokens_before if previous else 0),
            tokens_after=after + (previous.tokens_after if previous else 0),
        )
    if not texts:
        return []
    return _apply(ctx, estimator, texts, state, records)


def newest_results(ctx: FitContext, exclude_tools: Sequence[str]) -> list[ResultRef]:
    """The newest turn's tool results an edit may cut."""
    newest = ctx.newest
    return [
        r
        for r in _scan(ctx, newest)
        if r.index >= newest and r.text and r.tool_name not in exclude_tools
    ]


def clamp_to_fit(
    ctx: FitContext,
    config: ClampToolResults,
    room: int,
    count: TextCount,
    state: EditState,
    estimator: Estimator,
) -> list[EditRecord]:
    """Head + newest turn cannot fit: cut the newest turn's results so that together they
    use at most ``room`` tokens more than the rest of that request (each gets an equal
    share, at least the smallest clamp). Pages of spilled outputs are cut too: a page
    the model asked for can be more than the request has room for, and cutting it (the
    marker says how much) is better than ending the run."""
    refs = newest_results(ctx, config.exclude_tools)
    if not refs:
        return []
    share = max(room // len(refs), 100)
    return clamp_new(
        ctx,
        config,
        ctx.newest,
        count,
        state,
        estimator,
        limit=share,
        newest_only=True,
        pages=True,
    )


def _page_chars(spill: object) -> int:
    """The largest page ``spill`` returns (a :class:`~windowguard.SpillStore`'s
    ``page_chars``; :data:`~windowguard.core.edits.text.PAGE_CHARS` for another store)."""
    chars = getattr(spill, "page_chars", PAGE_CHARS)
    return chars if type(chars) is int and chars > 0 else PAGE_CHARS


def clear_block(
    ctx: FitContext,
    config: ClearToolResults,
    first: int,
    need: int,
    count: TextCount,
    state: EditState,
    estimator: Estimator,
    *,
    at_least: int | None = None,
) -> list[EditRecord]:
    """Clear old tool results, oldest first from message ``first`` (the first kept turn),
    outside the newest ``keep`` turns, until at least ``need`` tokens and at least
    ``at_least`` (default: the stage's ``clear_at_least``) are freed; nothing when all
    there is to clear frees less than ``at_least``.

    Returns:
        The clears made.
    """
    least = config.clear_at_least if at_least is None else at_least
    state.clear_reach = 0  # what this block could free, if it gives up
    starts = ctx.seg.turn_starts
    if len(starts) <= config.keep:
        return []
    boundary = starts[len(starts) - config.keep]
    if first >= boundary:
        return []
    originals: dict[tuple[int, int], ResultRef] | None = None
    texts: dict[int, dict[int, str]] = {}
    records: dict[int, EditRecord] = {}
    calls: dict[int, list[int]] = {}
    freed = 0
    seen, cleared = ctx.run.seen, ctx.run.cleared
    fmt, media_tokens = ctx.run.format, estimator.priors.media_item_tokens
    read_calls, read_results = _refs(ctx, first)
    for ref in read_results:
        if ref.index < first or ref.index >= boundary:
            continue
        if ref.tool_name in config.exclude_tools:
            continue
        # The placeholder stands for the whole result: its images and documents go too,
        # each freeing the family's allowance for a media item.
        media = ref.media_items if media_droppable(seen[ref.index], fmt) else 0
        if not ref.text and not media:
            continue
        if ref.part in cleared.get(id(seen[ref.index]), ()):
            continue  # cleared on an earlier send (a message's other results may not be)
        before = (count(ref.text) if ref.text else 0) + media * media_tokens
        tokens = before
        if ctx.run.effective[ref.index] is not seen[ref.index]:
            # Sent as an earlier edit's copy (a clamp): the placeholder names what the
            # caller's own result counts, not the clamp.
            if originals is None:
                originals = {(r.index, r.part): r for r in _scan(ctx, first, original=True)}
            whole = originals.get((ref.index, ref.part))
            if whole is not None:
                tokens = (count(whole.text) if whole.text else 0) + media * media_tokens
        text = placeholder_text(
            ref.tool_name, ref.arguments, tokens, config.placeholder, call_id=ref.call_id
        )
        after = count(text)
        if before - after < MIN_FREED:
            continue  # about as short as its placeholder: clearing it frees nothing
        texts.setdefault(ref.index, {})[ref.part] = text
        previous = records.get(ref.index)
        names = (*previous.tool_names, ref.tool_name) if previous else (ref.tool_name,)
        records[ref.index] = EditRecord(
            kind="clear",
            messages=(ref.index,),
            tool_names=tuple(n for n in names if n),
            tokens_before=before + (previous.tokens_before if previous else 0),
            tokens_after=after + (previous.tokens_after if previous else 0),
        )
        if config.clear_inputs and ref.call_index is not None and ref.call_part is not None:
            calls.setdefault(ref.call_index, []).append(ref.call_part)
        freed += before - after
        if freed >= max(need, least):
            break
    if freed < least or not texts:
        state.clear_reach = freed
        return []
    for index, parts in texts.items():
        key = id(seen[index])
        cleared[key] = cleared.get(key, frozenset()).union(parts)
    made = _apply(ctx, estimator, texts, state, records, drop_media=True)
    if calls:
        # The calls as read before the results were replaced: a result never shares a
        # message with a call in any wire format, so replacing results changed none.
        made += _clear_inputs(ctx, calls, read_calls, state, estimator)
    return made


def _clear_inputs(
    ctx: FitContext,
    calls: dict[int, list[int]],
    read: list[CallRef],
    state: EditState,
    estimator: Estimator,
) -> list[EditRecord]:
    """Clear the arguments of the calls whose results were cleared, where allowed
    (``read``: the transcript's calls, from the first of them on at least)."""
    run = ctx.run
    refs = {(c.index, c.part): c for c in read if c.index in calls}
    changes: dict[int, object] = {}
    made: list[EditRecord] = []
    for index, parts in calls.items():
        wanted = [
            refs[(index, p)]
            for p in parts
            if (index, p) in refs and refs[(index, p)].arguments.strip() not in ("", "{}")
        ]  # arguments that are already empty: clearing them would change nothing
        if not wanted:
            continue
        done = clear_call_inputs(run.effective[index], run.format, wanted)
        if not done.cleared:
            continue
        changes[index] = done.message
        # The calls cleared (not those skipped), their arguments before and after.
        gone = [r for r in wanted if r.part in done.cleared]
        now = {c.part: c.arguments for c in tool_calls([done.message], run.format, 1, ())}
        record = EditRecord(
            kind="clear_inputs",
            messages=(index,),
            tool_names=tuple(r.tool_name for r in gone),
            tokens_before=sum(estimator.text_tokens(r.arguments, "dense") for r in gone),
            tokens_after=sum(estimator.text_tokens(now.get(r.part, ""), "dense") for r in gone),
        )
        state.note(run.seen[index], record)
        made.append(record)
    run.substitute(changes, estimator)
    ctx.refresh()
    return made


# --------------------------------------------------------------------------- summarize


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryQuery:
    """What a fit asks its driver for when it folds whole turns into the summary: the
    summarizer's text for ``turns`` (the messages as they are sent) and the previous
    summary. :meth:`ContextWindowManager.fit` answers it by calling a sync summarizer;
    the async drivers await any summarizer. The answer is the text (or the exception the
    summarizer raised: the turns are then dropped as without a summary)."""

    config: Summarize
    turns: tuple[object, ...]
    previous: str | None
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryState:
    """The summary a run sends after its head.

    Attributes:
        text: the summarizer's text.
        message: the message it stands in (a user message in the run's format).
        resumes_at: the caller's message the kept turns begin at, at least (the first
            message after the turns it folds).
        tokens: what the message counts (the edit stages' count).
        covers: the caller's messages it stands for, as sent when they were folded
            (after the head, up to ``resumes_at``): the summary is sent again only while
            they and ``resumes_at`` are still there, the same objects or equal ones.
    """

    text: str
    message: object
    resumes_at: object
    tokens: int
    covers: tuple[object, ...]


def summary_key(previous: str | None, rendered: str) -> str:
    """The key a summary is remembered by: what it was made from (the previous summary
    and the turns it folds, rendered), so a replayed or resumed run finds the same text
    without calling the summarizer again."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update((previous or "").encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    digest.update(rendered.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def summarize_now(query: SummaryQuery) -> str | BaseException:
    """A summary made synchronously: a sync summarizer is called; an async one is run to
    completion when no event loop is running here (else it needs the async drivers)."""
    try:
        try:
            return run_summarizer(query.config, list(query.turns), query.previous)
        except ConfigurationError:
            if not query.config.is_async:
                raise
        import asyncio  # on first use: only an async summarizer needs it

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(arun_summarizer(query.config, list(query.turns), query.previous))
        raise ConfigurationError(
            "an async summarizer cannot run inside a running event loop from fit(): use "
            "AsyncToolLoop, an async integration, or fit_steps()"
        )
    except Exception as exc:  # a failing summarizer must not break a send: drop instead
        return exc
