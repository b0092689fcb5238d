"""The manager's incremental view of one run's transcript, and a request's fixed parts.

:class:`Transcript` keeps, per message, an :class:`~windowguard.accounting.ledger.Entry`
(shape, heuristic estimate, and what the ledger or a local tokenizer counted), the
incremental segmentation and the ledger. When a send's transcript extends the previous
one (the same objects, in order), only the new messages are shaped and estimated;
otherwise it is rebuilt from the per-message cache, so messages that are still there
keep everything counted about them. A rebuild also keeps what the edit stages did to a
message the caller sends again as a fresh copy (a proxy parsing each request, a client
copying its history, or moving Anthropic's ``cache_control`` marker): the copy equal to
the message edited at the same index is sent edited, the same bytes as before (only
its blocks' ``cache_control`` follows the caller's), and the previous send's cut is kept
when the messages it kept are still there. A message that changed is never sent edited
as it was: the edit stages see it anew.

:class:`RequestParts` sizes what a request holds besides its messages — the framing,
Anthropic's separate system argument and the tool schemas — and names them by content,
so the ledger keeps one measured *base* per distinct system and tool set.
"""

from __future__ import annotations

import hashlib
import json
import operator
from bisect import bisect_left
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ..accounting.bounds import message_costs, request_bound, tools_costs
from ..accounting.estimate import Estimator
from ..accounting.ledger import Entry, Ledger, leave_room
from ..core.adapters import format_evidence, shaper
from ..core.adapters.anthropic import shape_system
from ..core.exceptions import ConfigurationError, InvalidTranscriptError
from ..core.shapes import Format, Shape
from ..core.turns import TurnIndex

__all__ = ["Fixed", "RequestParts", "Transcript", "update_transcript"]


class Transcript:
    """Incremental per-run view of the transcript last fitted."""

    __slots__ = (
        "anchor",
        "base_key",
        "cache",
        "cleared",
        "edited_at",
        "edited_order",
        "edits_checked",
        "effective",
        "format",
        "format_certain",
        "index",
        "ledger",
        "seen",
        "snapshot",
        "verified_from",
    )

    def __init__(self, fmt: Format, certain: bool) -> None:
        self.format: Format = fmt
        self.format_certain = certain
        self.seen: list[object] = []
        # What is sent in place of each message: ``seen`` itself until an edit stage
        # replaces one (then a list of its own, the edited copies in their places).
        self.effective: list[object] = self.seen
        # Index -> the edited copy sent there, ascending (what ``effective`` differs in).
        self.edited_at: dict[int, object] = {}
        # ``edited_at``'s indices in order (None: not made since the last edit), so that
        # a send keeping the newest turns visits only the copies it keeps.
        self.edited_order: list[int] | None = None
        # Messages before this index were looked at by the clamp stage already.
        self.edits_checked = 0
        self.index = TurnIndex()
        self.ledger = Ledger()
        # id(message) -> its entry; the entry keeps the message, so the id stays valid.
        self.cache: dict[int, Entry] = {}
        # id(message) -> the parts of it whose tool results were cleared (never cleared
        # again); the message's cache entry (its edited copy) keeps the id valid.
        self.cleared: dict[int, frozenset[int]] = {}
        # Where the previous send's kept turns began (message index), for low-water pruning.
        self.anchor: int | None = None
        # A copy of the transcript just fitted, made while comparing it with the previous
        # send's (update_transcript); taken once by the fit that keeps every message.
        self.snapshot: list[object] | None = None
        # The base key of the last send (fixed parts' key, head length, key): a send with
        # the same fixed parts and head reuses it, and the dict lookups its cached hash.
        self.base_key: tuple[Hashable, int, Hashable] | None = None
        # Messages [head, verified_from) were not compared with the previous send's: they
        # lie before the previous cut, so nothing counted of them is sent unless a cut
        # moves back over them, which checks them first (Transcript.verify).
        self.verified_from = 0

    def verify(self, messages: Sequence[object], start: int) -> bool:
        """Whether ``messages[start:verified_from]`` are the messages this view holds
        there (a cut about to move back over them); marks them checked when they are."""
        stop = self.verified_from
        if start >= stop:
            return True
        seen = self.seen
        if all(map(operator.is_, seen[start:stop], messages[start:stop])):
            self.verified_from = start
            return True
        return False

    def take(self, messages: Sequence[object]) -> list[object]:
        """A new list of what is sent for ``messages`` (the transcript just fitted): the
        snapshot made while comparing it, when there is one and nothing was edited, else
        a copy."""
        snapshot, self.snapshot = self.snapshot, None
        if snapshot is None or len(snapshot) != len(messages):
            snapshot = list(messages)
        return self.patched(snapshot)

    def sent_from(self, messages: Sequence[object], head_stop: int, kept_from: int) -> list[object]:
        """What is sent of ``messages`` keeping the head and ``[kept_from:]``: the
        caller's own objects (those of this send: an equal message from an earlier send
        is not the caller's now), the edited copies in their places."""
        kept = list(messages[:head_stop])
        kept.extend(messages[kept_from:])
        edited = self.edited_at
        if not edited:
            return kept
        order = self._order()
        for index in order[: bisect_left(order, head_stop)]:
            kept[index] = edited[index]
        shift = head_stop - kept_from
        for index in order[bisect_left(order, kept_from) :]:
            kept[index + shift] = edited[index]
        return kept

    def patched(self, kept: list[object]) -> list[object]:
        """``kept`` (the transcript, or its start) with the edited copies in place.

        Every send that keeps all the turns runs this over every copy, so the usual
        case is one bare loop (a third of the time of one checking each index)."""
        edited = self.edited_at
        if not edited:
            return kept
        order = self._order()
        if order[-1] < len(kept):
            for index, copy in edited.items():
                kept[index] = copy
        else:
            for index in order[: bisect_left(order, len(kept))]:
                kept[index] = edited[index]
        return kept

    def _order(self) -> list[int]:
        """``edited_at``'s indices in order, made once after each edit."""
        order = self.edited_order
        if order is None:
            order = self.edited_order = sorted(self.edited_at)
        return order

    @property
    def edited(self) -> bool:
        """Whether any message is sent as an edited copy."""
        return self.effective is not self.seen

    def substitute(self, changes: Mapping[int, object], estimator: Estimator) -> None:
        """Send ``changes[i]`` (an edited copy of message ``i``) in place of message
        ``i`` from now on: it gets an entry of its own, which later sends of the same
        caller's message find in the cache, and what the ledger measured of the old one
        is forgotten."""
        if not changes:
            return
        if self.effective is self.seen:
            self.effective = list(self.seen)
        shape_of = shaper(self.format)
        costs = message_costs(estimator)
        entries = self.ledger.entries
        for index, message in changes.items():
            original = self.seen[index]
            shape = shape_of(message)
            entry = Entry(message, shape, *costs(shape))
            entry.origin = original
            entries[index] = entry
            self.cache[id(original)] = entry
            self.effective[index] = message
            self.edited_at[index] = message
        self.edited_order = None
        self.base_key = None
        self.ledger.replaced(sorted(changes))

    def append(self, new: Sequence[object], estimator: Estimator) -> None:
        """Shape, estimate and segment messages appended to the transcript."""
        entries = self._entries(new, estimator)
        self.ledger.append(entries)
        self.seen.extend(new)
        if self.effective is not self.seen:
            self.effective.extend(entry.message for entry in entries)
        self.index.extend(e.shape for e in entries)

    def _entries(self, new: Sequence[object], estimator: Estimator) -> list[Entry]:
        shape_of = shaper(self.format)
        estimate = message_costs(estimator)
        cache = self.cache
        entries: list[Entry] = []
        add = entries.append
        lookup = cache.get if cache else _NOTHING.get  # a cold fit has nothing cached
        for message in new:
            key = id(message)
            entry = lookup(key)
            if entry is None or entry.origin is not message:
                try:
                    shape = shape_of(message)
                    entry = Entry(message, shape, *estimate(shape))
                except (RecursionError, ValueError, TypeError) as exc:
                    # Circular or absurdly deep content (json cannot serialise it).
                    position = len(self.seen) + len(entries)
                    raise InvalidTranscriptError(
                        f"content that cannot be serialised ({type(exc).__name__}: {exc})",
                        index=position,
                    ) from exc
                cache[key] = entry
            add(entry)
        return entries


def update_transcript(
    run: Transcript | None,
    messages: Sequence[object],
    explicit: Format | None,
    system: object,
    estimator: Estimator,
) -> Transcript:
    """The view of ``messages``: ``run`` extended when it is a prefix, else rebuilt.

    Args:
        run: the view of the previous send, if any.
        messages: this send's full transcript.
        explicit: the format the caller named, if any.
        system: Anthropic's separate system argument (format evidence).
        estimator: the heuristic that sizes new messages.
    """
    if run is not None and explicit is not None and explicit != run.format:
        run = None
    prefix = None
    if run is not None:
        run.snapshot = None
        if len(run.seen) <= len(messages):
            # Only the head and what the previous cut kept are compared: the messages
            # before the cut are checked if a later cut moves back over them.
            skip_from = run.index.segmentation().head_stop if run.anchor is not None else 0
            skip_to = run.anchor if run.anchor is not None else 0
            if skip_to <= skip_from or run.verified_from > len(run.seen):
                skip_from = skip_to = 0
            prefix = _prefix_of(messages, run.seen, skip_from, skip_to)
            if prefix is not None:
                run.verified_from = skip_to  # [head, skip_to) not compared (0: all was)
    if run is not None and prefix is not None:
        new = messages[len(run.seen) :]
        check_message_types(new, offset=len(run.seen))
        if not run.format_certain and explicit is None:
            found = format_evidence(new, system=system)
            if found is not None and found != run.format:
                return _rebuild(messages, found, True, None, estimator)
            run.format_certain = found is not None
        run.append(new, estimator)
        if isinstance(prefix, list):
            prefix.extend(new)
            run.snapshot = prefix  # the copy compared is the copy sent (Transcript.take)
        return run
    check_message_types(messages)
    if explicit is not None:
        return _rebuild(messages, explicit, True, run, estimator)
    found = format_evidence(messages, system=system)
    return _rebuild(messages, found or "openai_chat", found is not None, run, estimator)


def _prefix_of(
    messages: Sequence[object], seen: list[object], skip_from: int = 0, skip_to: int = 0
) -> list[object] | bool | None:
    """Whether ``messages`` begins with the messages of the previous send, apart from
    ``[skip_from, skip_to)`` (not compared): a copy of that prefix (a list, when nothing
    was skipped), True (it does, nothing copied) or None (it does not).

    A list is compared with ``==`` at C speed (7x faster than a Python-level identity
    walk at 2,000 messages): each element is first compared by identity, and a message
    replaced by an equal one costs what it did. The copy that comparison needs is
    returned, so that a send which keeps everything does not copy the transcript again.
    Anything else is walked by identity.
    """
    n = len(seen)
    if isinstance(messages, list):
        try:
            if skip_to <= skip_from:
                prefix = messages[:n]
                return prefix if prefix == seen else None
            same = messages[:skip_from] == seen[:skip_from]
            return True if same and messages[skip_to:n] == seen[skip_to:n] else None
        except Exception:  # a message whose == raises (arrays in its content)
            pass
    if skip_to <= skip_from:
        return True if all(map(operator.is_, seen, messages)) else None
    head = all(map(operator.is_, seen[:skip_from], messages[:skip_from]))
    return True if head and all(map(operator.is_, seen[skip_to:], messages[skip_to:n])) else None


_NOTHING: Final[dict[int, Entry]] = {}
_NOT_MESSAGES: Final = (str, bytes, int, float, bool, type(None))


def check_message_types(messages: Sequence[object], *, offset: int = 0) -> None:
    """Refuse things that are not messages (text, numbers, None), naming the position.

    The distinct types are looked at first (at C speed: a transcript holds a handful);
    the positions only when one of them is not a message.

    Raises:
        InvalidTranscriptError: ``messages[i]`` is not a message (its index is
            ``offset + i``).
    """
    if any(issubclass(kind, _NOT_MESSAGES) for kind in set(map(type, messages))):
        for index, message in enumerate(messages):
            if isinstance(message, _NOT_MESSAGES):
                raise InvalidTranscriptError(
                    f"expected a message (a dict or an SDK message object), got "
                    f"{type(message).__name__} {message!r:.60}",
                    index=offset + index,
                )


def _rebuild(
    messages: Sequence[object],
    fmt: Format,
    certain: bool,
    old: Transcript | None,
    estimator: Estimator,
) -> Transcript:
    run = Transcript(fmt, certain)
    previous = None
    if old is not None and old.format == fmt:
        live = {id(m) for m in messages}
        run.cache = {k: v for k, v in old.cache.items() if k in live}
        run.cleared = {k: v for k, v in old.cleared.items() if k in live}
        previous = old.ledger
        _carry_edits(run, messages, old, estimator)
    entries = run._entries(messages, estimator)
    run.ledger.adopt(entries, previous)
    run.seen.extend(messages)
    leave_room(run.seen)
    if any(entry.origin is not entry.message for entry in entries):
        run.effective = [entry.message for entry in entries]
        run.edited_at = {
            i: entry.message for i, entry in enumerate(entries) if entry.origin is not entry.message
        }
    run.index.extend(e.shape for e in entries)
    if old is not None and previous is not None:
        run.anchor = _carry_anchor(run, old)
    return run


def _carry_edits(
    run: Transcript, messages: Sequence[object], old: Transcript, estimator: Estimator
) -> None:
    """Give ``run`` the edits ``old`` sent for the messages the caller sends again as
    new objects: a message equal to the one edited at the same index (apart from its
    blocks' ``cache_control``, in the Anthropic format) is sent as the same edited copy,
    and keeps the parts cleared in it. Anything else the edit stages see anew."""
    cache = run.cache
    shape_of = shaper(run.format)
    costs = message_costs(estimator)
    for index, copy in old.edited_at.items():
        if index >= len(messages):
            continue
        message, original = messages[index], old.seen[index]
        if message is original or id(message) in cache:
            continue  # the same object: its entry was kept
        sent = _resent(copy, original, message, run.format)
        if sent is None:
            continue
        shape = shape_of(sent)
        entry = Entry(sent, shape, *costs(shape))
        entry.origin = message
        cache[id(message)] = entry
        cleared = old.cleared.get(id(original))
        if cleared:
            run.cleared[id(message)] = cleared


def _resent(copy: object, original: object, message: object, fmt: Format) -> object | None:
    """What to send for ``message`` where ``copy`` (an edited copy of ``original``) was
    sent: ``copy`` itself when ``message`` equals ``original``; in the Anthropic format,
    when they differ only in their content blocks' ``cache_control``, ``copy`` with the
    caller's markers now (a marker is not part of the cached prefix, and moves as the
    caller moves it); else None (the message changed)."""
    try:
        if message == original:
            return copy
        if fmt != "anthropic" or not same_message(message, original, fmt):
            return None
    except Exception:  # a message whose == raises (arrays in its content)
        return None
    # Both are dicts whose content is a list of blocks (same_message); so is the copy.
    assert isinstance(original, dict) and isinstance(message, dict)
    if not isinstance(copy, dict) or not isinstance(copy.get("content"), list):
        return None
    if len(copy["content"]) != len(message["content"]):
        return None
    blocks: list[object] = []
    for edited, was, now in zip(
        copy["content"], original["content"], message["content"], strict=True
    ):
        if edited is was:
            blocks.append(now)  # untouched: the caller's own block
        elif now == was:
            blocks.append(edited)  # no marker moved here
        elif isinstance(edited, dict) and isinstance(now, dict):
            block = {k: v for k, v in edited.items() if k != "cache_control"}
            if "cache_control" in now:
                block["cache_control"] = now["cache_control"]
            blocks.append(block)
        else:
            return None
    return {**copy, "content": blocks}


def _unmarked(message: object) -> object:
    """An Anthropic message with no ``cache_control`` on its content blocks (None: it is
    not a dict whose content is a list of blocks)."""
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if not isinstance(content, list):
        return None
    blocks = [
        {k: v for k, v in block.items() if k != "cache_control"}
        if isinstance(block, dict) and "cache_control" in block
        else block
        for block in content
    ]
    return {**message, "content": blocks}


def _carry_anchor(run: Transcript, old: Transcript) -> int | None:
    """Where the previous send's kept turns began, in the rebuilt view: ``old``'s cut,
    when the head is as long as it was, the cut is still a turn start and every message
    the previous send kept from it is still there, at the same index (equal, apart from
    ``cache_control``); else None (not known). A shorter transcript is a branch taken
    back to an earlier point (a conversation's branches, a retried step): its cut is
    chosen anew, since what was measured together with the newer messages is unmeasured
    again, and a cut the longer request needed may not be needed now."""
    anchor = old.anchor
    if anchor is None:
        return None
    seen, before = run.seen, old.seen
    if len(seen) < len(before) or anchor >= len(before):
        return None
    seg = run.index.segmentation()
    if seg.head_stop != old.index.segmentation().head_stop:
        return None
    starts = seg.turn_starts
    at = bisect_left(starts, anchor)
    if at >= len(starts) or starts[at] != anchor:
        return None
    stop = min(len(seen), len(before))
    kept, was_kept = seen[anchor:stop], before[anchor:stop]
    try:
        if kept == was_kept:  # at C speed; each pair compared by identity first
            return anchor
    except Exception:  # a message whose == raises (arrays in its content)
        pass
    fmt = run.format
    for now, was in zip(kept, was_kept, strict=True):
        if now is not was and not same_message(now, was, fmt):
            return None
    return anchor


def same_message(message: object, other: object, fmt: Format) -> bool:
    """Whether ``message`` is sent as ``other`` would be: equal, or in the Anthropic
    format equal apart from its content blocks' ``cache_control``."""
    try:
        if message == other:
            return True
        if fmt != "anthropic":
            return False
        unmarked = _unmarked(message)
        return unmarked is not None and unmarked == _unmarked(other)
    except Exception:  # a message whose == raises (arrays in its content)
        return False


@dataclass(frozen=True, slots=True)
class Fixed:
    """What a request holds besides its messages: framing, system argument, tools.

    Attributes:
        key: names the system argument and tools by content (with the format).
        raw: the heuristic's estimate of them, framing included.
        system_raw: the heuristic's estimate of the system argument alone.
        tools: the tool schemas, as given.
        bound: a guaranteed upper bound of them, framing included.
    """

    key: Hashable
    raw: int
    system_raw: int
    tools: tuple[object, ...]
    bound: int = 0
    system_shapes: tuple[Shape, ...] = ()
    """Anthropic's separate system argument as shapes (a local tokenizer counts them as
    the template renders a system message)."""


_Cached = tuple[object, tuple[int, ...], int, str, int, tuple[Shape, ...]]
"""A system argument's or tools' cache entry: the value, its elements' identities, its
raw estimate, its content digest, its bound and (a system argument's) its shapes."""


class RequestParts:
    """Sizes and names a request's system argument and tools.

    Both are cached by the identity of the value *and of its elements*, so a list edited
    in place (a tool replaced, a system block appended) is sized and named again; a tool
    dict mutated inside is assumed not to happen, as for messages.
    """

    __slots__ = ("_estimator", "_last", "_system", "_tools")

    def __init__(self, estimator: Estimator) -> None:
        self._estimator = estimator
        self._system: _Cached | None = None
        self._tools: _Cached | None = None
        # The last Fixed, with the format and cache entries it was made from: a send
        # with the same system and tools gets the same value (and its key's hash).
        self._last: tuple[Format, _Cached | None, _Cached | None, Fixed] | None = None

    def fixed(self, fmt: Format, system: object, tools: Sequence[object] | None) -> Fixed:
        """The fixed parts of one request.

        Raises:
            InvalidTranscriptError: a system argument outside the Anthropic format.
            ConfigurationError: tools that are not tool definitions.
        """
        estimator = self._estimator
        system_entry: _Cached | None = None
        tools_entry: _Cached | None = None
        if system is not None:
            if fmt != "anthropic":
                raise InvalidTranscriptError(
                    f"a separate system argument is only used by the Anthropic format, not {fmt}"
                )
            _check_system(system)
            cached = self._system
            elements = _elements(system)
            if cached is None or cached[0] is not system or cached[1] != elements:
                costs = message_costs(estimator)
                shapes = shape_system(system)
                parts = [costs(s) for s in shapes]
                tokens, bound = sum(p[0] for p in parts), sum(p[1] for p in parts)
                cached = self._system = (system, elements, tokens, digest(system), bound, shapes)
            system_entry = cached
        if tools:
            known = self._tools
            elements = _elements(tools)
            if known is None or known[0] is not tools or known[1] != elements:
                try:
                    tokens, bound = tools_costs(estimator, tools)
                except RecursionError as exc:
                    raise ConfigurationError(f"tools nest too deeply to serialise: {exc}") from exc
                known = self._tools = (tools, elements, tokens, digest(tools), bound, ())
            tools_entry = known
        last = self._last
        if (
            last is not None
            and last[0] == fmt
            and last[1] is system_entry
            and last[2] is tools_entry
        ):
            return last[3]
        raw = estimator.request_tokens
        bound = request_bound(estimator)
        system_digest, system_raw = "", 0
        system_shapes: tuple[Shape, ...] = ()
        if system_entry is not None:
            system_raw, system_digest = system_entry[2], system_entry[3]
            system_shapes = system_entry[5]
            raw += system_raw
            bound += system_entry[4]
        tools_digest = ""
        tool_tuple: tuple[object, ...] = ()
        if tools_entry is not None:
            raw += tools_entry[2]
            bound += tools_entry[4]
            tools_digest = tools_entry[3]
            tool_tuple = tuple(tools or ())
        fixed = Fixed(
            key=(fmt, system_digest, tools_digest),
            raw=raw,
            system_raw=system_raw,
            tools=tool_tuple,
            bound=max(bound, raw),
            system_shapes=system_shapes,
        )
        self._last = (fmt, system_entry, tools_entry, fixed)
        return fixed


def _check_system(system: object) -> None:
    """Anthropic's ``system`` is a string or a list of text blocks (dicts or SDK objects).

    Raises:
        InvalidTranscriptError: anything else, named (it would otherwise count as ~0).
    """
    if isinstance(system, str):
        return
    if not isinstance(system, (list, tuple)):
        raise InvalidTranscriptError(
            f"system must be a string or a list of content blocks, got {type(system).__name__}"
        )
    for index, block in enumerate(system):
        kind = block.get("type") if isinstance(block, Mapping) else getattr(block, "type", None)
        if not isinstance(kind, str):
            raise InvalidTranscriptError(
                f"system block {index} must be a content block such as "
                f'{{"type": "text", "text": ...}}, got {type(block).__name__} {block!r:.40}'
            )


def _elements(value: object) -> tuple[int, ...]:
    """The identities of a list's elements (empty for anything else)."""
    return tuple(map(id, value)) if isinstance(value, (list, tuple)) else ()


def digest(value: object) -> str:
    """A content digest of tools or a system argument (SDK objects dumped).

    Raises:
        ConfigurationError: circular or absurdly deep content.
    """
    try:
        text = json.dumps(value, sort_keys=True, default=_dump, ensure_ascii=False)
    except (RecursionError, ValueError) as exc:
        raise ConfigurationError(f"cannot serialise {type(value).__name__}: {exc}") from exc
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def _dump(value: object) -> object:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    return repr(value)
