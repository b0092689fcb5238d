"""Reading a transcript for ``fit`` and ``inspect``: which file shapes, which transcript.

A file is a JSON list of messages, a JSON object with ``messages`` (and optionally
``tools``, ``system``, ``model``) or Responses ``input``, or JSON Lines: one message per
line, or one transcript object per line (the corpus format, ``{"id", "model",
"messages", "tools", ...}``). JSON vs JSON Lines, and messages vs transcripts per line,
are detected; ``--jsonl`` says which, and a file that mixes the two is refused. From a
file of transcripts ``--index`` / ``--id`` pick one (default the first), and
:attr:`Transcript.where` says which of how many it is.

Invariants: empty input, a message that is not an object and a damaged transcript (no
role, unknown role, an orphaned result, an unanswered call) are bad input, reported as
a one-line :class:`~._common.CliError`: fitting would pass them on unchanged for the
provider to refuse.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ..core.adapters import shape_messages
from ..core.turns import Problem, segment
from ._common import EXAMPLE, CliError, non_negative_int, read_text

__all__ = [
    "JSONL_KINDS",
    "Transcript",
    "add_input_options",
    "damage",
    "damage_line",
    "load_transcript",
    "read_transcript",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcript:
    """A transcript as read: messages plus what travelled with them.

    Attributes:
        messages: the messages, as loaded.
        tools: the tool schemas the file carried, if any.
        system: Anthropic's separate system argument, if any.
        model: the model the file names, if any.
        container: how to write it back: ``"list"`` (a JSON list of messages),
            ``"object"`` (a JSON object with ``messages`` or ``input``), ``"jsonl"`` (one
            message per line) or ``"jsonl-transcripts"`` (one transcript per line).
        raw: the parsed document (the chosen transcript's object for a file of them).
        path: the file as named on the command line.
        index: which transcript of the file this is (from 0).
        count: how many transcripts the file holds.
        transcript_id: the transcript's ``id``, if it has one.
        chosen: whether ``--index`` or ``--id`` picked it.
    """

    messages: list[Any]
    tools: list[Any] | None
    system: Any
    model: str | None
    container: str
    raw: Any
    path: str = ""
    index: int = 0
    count: int = 1
    transcript_id: str | None = None
    chosen: bool = False

    @property
    def where(self) -> str:
        """The file, and which of its transcripts when it holds several."""
        if self.count == 1:
            return self.path
        named = f", id {self.transcript_id}" if self.transcript_id else ""
        return f"{self.path} (transcript --index {self.index} of {self.count}{named})"


JSONL_KINDS = ("messages", "transcripts")


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """How ``fit`` and ``inspect`` read JSON Lines and pick one transcript of several."""
    parser.add_argument(
        "--jsonl",
        choices=JSONL_KINDS,
        help="read FILE as JSON Lines of messages (one per line) or of transcripts (one "
        "object with 'messages' per line); detected by default",
    )
    pick = parser.add_mutually_exclusive_group()
    pick.add_argument(
        "--index",
        type=non_negative_int,
        metavar="N",
        help="in a file of transcripts, the N-th (from 0; default 0)",
    )
    pick.add_argument(
        "--id",
        dest="transcript_id",
        metavar="ID",
        help="in a file of transcripts, the one whose 'id' is ID",
    )


def load_transcript(args: argparse.Namespace) -> Transcript:
    """:func:`read_transcript` with the options of :func:`add_input_options`."""
    return read_transcript(
        args.file,
        jsonl=getattr(args, "jsonl", None),
        index=getattr(args, "index", None),
        transcript_id=getattr(args, "transcript_id", None),
    )


def read_transcript(
    path: str,
    *,
    jsonl: str | None = None,
    index: int | None = None,
    transcript_id: str | None = None,
) -> Transcript:
    """Read a transcript: a JSON list of messages, a JSON object with ``messages``
    (and optionally ``tools``, ``system``, ``model``) or Responses ``input``, or JSON
    Lines: one message per line, or one transcript object per line (the corpus format,
    ``{"id", "model", "messages", "tools", ...}``). JSON vs JSON Lines, and messages vs
    transcripts per line, are detected unless ``jsonl`` says which.

    Args:
        path: the file, ``-`` for stdin, or ``example:coding-agent`` for the bundled
            example (a real OpenHands run).
        jsonl: ``"messages"`` or ``"transcripts"``: read the file as JSON Lines of those.
        index: which transcript of a file of several (from 0; default the first).
        transcript_id: pick the transcript whose ``id`` is this instead.

    Raises:
        CliError: the file is missing, unreadable, empty, not JSON, mixes messages and
            transcripts, or the pick or a message is not there.
    """
    if path == EXAMPLE:
        text = resources.files("windowguard.examples").joinpath("coding_agent.json").read_text()
    else:
        text = read_text(path)
    if not text.strip():
        raise CliError(f"{path}: empty file (no messages)")
    data: Any = None
    if jsonl is None:
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        else:
            if _is_message(data) and not _is_transcript(data):
                data = None  # a one-line JSON Lines file of messages
    if data is None:
        records = _json_lines(path, text)
        kinds = [_is_transcript(record) for _, record in records]
        if jsonl == "transcripts" or (jsonl is None and any(kinds)):
            if not all(kinds):
                number = records[kinds.index(False)][0]
                if jsonl is None:
                    first = records[kinds.index(True)][0]
                    raise CliError(
                        f"{path}: mixes transcripts (line {first}) and messages (line "
                        f"{number}); a JSON Lines file holds one kind (--jsonl picks which)"
                    )
                raise CliError(
                    f"{path}:{number}: not a transcript (an object with a 'messages' list)"
                )
            return _pick(path, [r for _, r in records], "jsonl-transcripts", index, transcript_id)
        data, container = [r for _, r in records], "jsonl"
    elif isinstance(data, list):
        container = "list"
    elif _is_transcript(data):
        return _pick(path, [data], "object", index, transcript_id)
    else:
        raise CliError(f"{path}: expected a list of messages or an object with 'messages'")
    if index is not None or transcript_id is not None:
        raise CliError(
            f"--index and --id pick one transcript of a file of them; {path} holds messages"
        )
    return _checked(
        Transcript(
            messages=data,
            tools=None,
            system=None,
            model=None,
            container=container,
            raw=data,
            path=path,
        )
    )


def _json_lines(path: str, text: str) -> list[tuple[int, Any]]:
    """The non-blank lines of ``text`` parsed as JSON, with their line numbers (from 1)."""
    records: list[tuple[int, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise CliError(f"{path}: not JSON or JSON Lines (line {number}: {exc.msg})") from exc
    return records


def _is_transcript(record: object) -> bool:
    if not isinstance(record, dict):
        return False
    if isinstance(record.get("messages"), list):
        return True
    return isinstance(record.get("input"), list) and not _is_message(record)


def _is_message(record: object) -> bool:
    return isinstance(record, dict) and ("role" in record or "type" in record)


def _pick(
    path: str, records: list[Any], container: str, index: int | None, transcript_id: str | None
) -> Transcript:
    count = len(records)
    if transcript_id is not None:
        found = [i for i, r in enumerate(records) if str(r.get("id")) == transcript_id]
        if not found:
            raise CliError(f"{path}: none of its {count} transcript(s) has id {transcript_id!r}")
        chosen = found[0]
    else:
        chosen = 0 if index is None else index
        if chosen >= count:
            raise CliError(
                f"{path}: --index {chosen} is out of range: it holds {count} transcript(s)"
                f" (0..{count - 1})"
            )
    record = records[chosen]
    key = "messages" if isinstance(record.get("messages"), list) else "input"
    tools, model, ident = record.get("tools"), record.get("model"), record.get("id")
    return _checked(
        Transcript(
            messages=record[key],
            tools=tools if isinstance(tools, list) else None,
            system=record.get("system"),
            model=model if isinstance(model, str) else None,
            container=container,
            raw=record,
            path=path,
            index=chosen,
            count=count,
            transcript_id=None if ident is None else str(ident),
            chosen=index is not None or transcript_id is not None,
        )
    )


def _checked(transcript: Transcript) -> Transcript:
    """``transcript`` once it has messages and every one is an object."""
    if not transcript.messages:
        raise CliError(f"{transcript.where}: no messages (an empty transcript)")
    for number, message in enumerate(transcript.messages):
        if not isinstance(message, dict):
            raise CliError(
                f"{transcript.where}: message {number} is {_json_kind(message)}, not a "
                "message object"
            )
    return transcript


def _json_kind(value: object) -> str:
    kinds = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a list"
    return kinds.get(type(value), f"a {type(value).__name__}")


def damage(transcript: Transcript, format: str | None = None) -> tuple[Problem, ...]:
    """The damage in ``transcript`` (missing or unknown roles, orphaned results,
    unanswered calls), in message order; empty when it is sound.

    Raises:
        UnknownFormatError: ``format`` is unknown or does not suit the transcript.
    """
    shaped = shape_messages(transcript.messages, format=format, system=transcript.system)
    return segment(shaped.shapes).problems


def damage_line(transcript: Transcript, problems: Sequence[Problem | str]) -> str:
    """One line naming the first problem (and how many more there are)."""
    more = f"; {len(problems) - 1} more" if len(problems) > 1 else ""
    return f"{transcript.where}: damaged transcript ({problems[0]}{more})"
