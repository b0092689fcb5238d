"""Spilled tool outputs: a private directory of whole outputs, and the tool that pages them.

When :class:`~windowguard.ClampToolResults` cuts an oversized output, ``spill=SpillStore(dir)``
keeps the whole text, and the marker in the clamped result names a handle the model reads
back with the ``read_spilled(handle, offset, limit)`` tool (:func:`spill_tool`; ``ToolLoop``
offers it by itself). Claude Code saves a truncated command's full output to a file the
same way, and pydantic-ai-harness ``ToolOutputLimits`` spills to a store with a
``read_tool_result`` paging tool.

This module does file I/O, so it stands outside the pure core (the core sees a store only
as :class:`~windowguard.core.edits.SpillTarget`).

Invariants:
    * Private: the directory is created ``0700``; an existing one that is a symlink, not
      a directory, another user's, or reachable by group or others is refused
      (:class:`~windowguard.core.exceptions.SpillError`), never silently tightened. Each output
      is a ``0600`` file, written under a temporary name and renamed into place.
    * Deterministic and idempotent: a handle is ``<tool>-<first 32 hex digits of the
      SHA-256 of the text>``, so the same output gets the same handle on every send and a
      second ``put`` writes nothing.
    * No path escape: only handles of that alphabet are accepted; anything else (``../``,
      an absolute path, a separator, a NUL) and a file replaced by a symlink are refused
      with :class:`~windowguard.core.exceptions.SpillHandleError`, never a raw ``OSError``.
    * Pages are in characters (Python ``str`` code points): ``offset`` and ``limit`` count
      characters, so the bodies of consecutive pages concatenate to the exact text; a page
      never splits a character, whatever its UTF-8 length.
    * Bounded: one output at most ``max_file_bytes`` (UTF-8), the store at most
      ``max_total_bytes``; over either, ``put`` raises ``SpillError`` saying which.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.edits.config import SpillTarget
from ..core.edits.text import PAGE_CHARS
from ..core.exceptions import SpillError, SpillHandleError
from .tools import Tool

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_TOTAL_BYTES",
    "READ_SPILLED",
    "SpillPage",
    "SpillStore",
    "spill_tool",
]

DEFAULT_MAX_FILE_BYTES = 32 * 1024 * 1024
"""The largest output one file keeps (UTF-8 bytes): ~8M tokens of text."""
DEFAULT_MAX_TOTAL_BYTES = 512 * 1024 * 1024
"""The most one store keeps in all."""
READ_SPILLED = "read_spilled"
"""The paging tool's name."""

_HANDLE = re.compile(r"[A-Za-z0-9_]{1,40}-[0-9a-f]{32}")
_SLUG = re.compile(r"[^A-Za-z0-9_]")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_ENCODING = ("utf-8", "surrogatepass")  # lone surrogates round-trip rather than fail


@dataclass(frozen=True, slots=True, kw_only=True)
class SpillPage:
    """One page of a spilled output.

    Attributes:
        handle: the output's handle.
        text: the page's characters, ``text_of_output[offset:end]``.
        offset: the first character's offset.
        end: the offset after the last character.
        total: the output's length in characters.
    """

    handle: str
    text: str
    offset: int
    end: int
    total: int

    def render(self) -> str:
        """The page as the tool returns it: a header line naming the range, the total and
        the next offset, then the characters."""
        if self.offset >= self.total:
            header = (
                f"[read_spilled {self.handle}: offset {self.offset:,} is past the end; the "
                f"output has {self.total:,} characters]"
            )
            return header
        rest = f"next page: offset={self.end}" if self.end < self.total else "this is the end"
        header = (
            f"[read_spilled {self.handle}: characters {self.offset:,}-{self.end:,} of "
            f"{self.total:,}; {rest}]"
        )
        return f"{header}\n{self.text}"


class SpillStore:
    """A private directory that keeps whole tool outputs by content hash.

    Examples:
        >>> import tempfile, pathlib
        >>> store = SpillStore(pathlib.Path(tempfile.mkdtemp()) / "spill")
        >>> handle = store.put("line 1\\nline 2\\n", tool_name="read_file")
        >>> handle == store.put("line 1\\nline 2\\n", tool_name="read_file")
        True
        >>> print(store.read(handle, offset=7, limit=6))
        [read_spilled read_file-...: characters 7-13 of 14; next page: offset=13]
        line 2

    Args:
        directory: where outputs are kept (``~`` is the user's home); created ``0700``
            if missing (its parents with the default mode). An existing directory must
            be a real directory of this user that group and others cannot reach.
        max_file_bytes: the largest output kept (UTF-8 bytes).
        max_total_bytes: the most the store keeps in all.
        page_chars: the default and largest page ``read`` returns (characters).

    Raises:
        SpillError: the directory cannot be used (named, with why), or a limit is not a
            positive int.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES,
        page_chars: int = PAGE_CHARS,
    ) -> None:
        for option, value in (
            ("max_file_bytes", max_file_bytes),
            ("max_total_bytes", max_total_bytes),
            ("page_chars", page_chars),
        ):
            if type(value) is not int or value < 1:
                raise SpillError(f"SpillStore({option}=...) must be an int >= 1, got {value!r}")
        self.directory = Path(os.path.abspath(os.path.expanduser(os.fspath(directory))))
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self.page_chars = page_chars
        self._lock = threading.Lock()
        self._prepare()

    def __repr__(self) -> str:
        return f"SpillStore({str(self.directory)!r})"

    # -- writing ------------------------------------------------------------------------

    def put(self, text: str, *, tool_name: str | None = None) -> str:
        """Keep ``text``; return its handle (the same text and tool: the same handle).

        Args:
            text: the whole output.
            tool_name: the tool that produced it, named in the handle (any characters
                outside ``[A-Za-z0-9_]`` become ``_``; 40 at most).

        Raises:
            SpillError: the output is over ``max_file_bytes``, the store would go over
                ``max_total_bytes``, or the directory or the write failed.
        """
        if not isinstance(text, str):
            raise SpillError(f"a spilled output must be text, got {type(text).__name__}")
        data = text.encode(*_ENCODING)
        if len(data) > self.max_file_bytes:
            raise SpillError(
                f"an output of {len(data):,} bytes is over this store's per-file cap of "
                f"{self.max_file_bytes:,} bytes (SpillStore(max_file_bytes=...))"
            )
        slug = _SLUG.sub("_", tool_name or "")[:40] or "output"
        handle = f"{slug}-{hashlib.sha256(data).hexdigest()[:32]}"
        path = self.directory / f"{handle}.txt"
        with self._lock:
            self._check_directory()
            if self._existing_size(path) == len(data):
                return handle  # already kept: same name, same size, same content hash
            used = self._total_bytes()
            if used + len(data) > self.max_total_bytes:
                raise SpillError(
                    f"the spill store {self.directory} holds {used:,} bytes; keeping "
                    f"{len(data):,} more would pass its cap of {self.max_total_bytes:,} "
                    "(SpillStore(max_total_bytes=...)); remove old outputs or raise the cap"
                )
            self._write(path, handle, data)
        return handle

    def _write(self, path: Path, handle: str, data: bytes) -> None:
        temporary = self.directory / f".{handle}.{os.getpid()}.{threading.get_ident()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        try:
            fd = os.open(temporary, flags, 0o600)
            try:
                if hasattr(os, "fchmod"):
                    os.fchmod(fd, 0o600)  # whatever the umask
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(temporary, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise SpillError(f"could not keep a spilled output in {self.directory}: {exc}") from exc

    # -- reading ------------------------------------------------------------------------

    def page(self, handle: str, offset: int = 0, limit: int | None = None) -> SpillPage:
        """The characters ``offset`` to ``offset + limit`` of a kept output.

        Args:
            handle: a handle ``put`` returned.
            offset: the first character (>= 0); past the end gives an empty page.
            limit: how many characters (1 to ``page_chars``; None: ``page_chars``; more is
                capped to it).

        Raises:
            SpillHandleError: not a handle of this store, or no output has it.
            SpillError: ``offset`` or ``limit`` is not a valid number.
        """
        text = self.text(handle)
        if type(offset) is not int or offset < 0:
            raise SpillError(f"offset must be an int >= 0, got {offset!r}")
        if limit is None:
            limit = self.page_chars
        if type(limit) is not int or limit < 1:
            raise SpillError(f"limit must be an int >= 1, got {limit!r}")
        limit = min(limit, self.page_chars)
        start = min(offset, len(text))
        end = min(len(text), start + limit)
        return SpillPage(
            handle=handle, text=text[start:end], offset=offset, end=end, total=len(text)
        )

    def read(self, handle: str, offset: int = 0, limit: int | None = None) -> str:
        """A page of a kept output as the ``read_spilled`` tool returns it: a header line
        (the range, the total, the next offset), then the characters. Takes
        :meth:`page`'s arguments and raises its errors."""
        return self.page(handle, offset, limit).render()

    def text(self, handle: str) -> str:
        """The whole output kept under ``handle``.

        Raises:
            SpillHandleError: not a handle of this store, or no output has it.
        """
        if not isinstance(handle, str) or not _HANDLE.fullmatch(handle):
            shown = repr(handle)[:80]
            raise SpillHandleError(
                f"{shown} is not a spill handle; handles look like "
                "read_file-0123456789abcdef0123456789abcdef, as a clamped result names them"
            )
        path = self.directory / f"{handle}.txt"
        self._check_directory()
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
        except FileNotFoundError:
            raise SpillHandleError(
                f"no spilled output has the handle {handle!r} in {self.directory} (it was "
                "never kept here, or was removed); call the tool again for its output"
            ) from None
        except OSError as exc:
            raise SpillHandleError(
                f"the spilled output {handle!r} cannot be read (a symlink or not a file?): "
                f"{exc.strerror}"
            ) from exc
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SpillHandleError(f"the spilled output {handle!r} is not a regular file")
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        finally:
            os.close(fd)
        try:
            return b"".join(chunks).decode(*_ENCODING)
        except UnicodeDecodeError as exc:
            raise SpillHandleError(f"the spilled output {handle!r} is not UTF-8 text") from exc

    # -- the directory ------------------------------------------------------------------

    def _prepare(self) -> None:
        try:
            os.lstat(self.directory)
        except FileNotFoundError:
            try:
                self.directory.parent.mkdir(parents=True, exist_ok=True)
                os.mkdir(self.directory, 0o700)
                os.chmod(self.directory, 0o700)  # whatever the umask
            except FileExistsError:
                pass  # made by someone else meanwhile: checked below like any other
            except OSError as exc:
                raise SpillError(
                    f"cannot create the spill directory {self.directory}: {exc}"
                ) from exc
        except OSError as exc:
            raise SpillError(f"cannot use the spill directory {self.directory}: {exc}") from exc
        self._check_directory()

    def _check_directory(self) -> None:
        where = self.directory
        try:
            st = os.lstat(where)
        except OSError as exc:
            raise SpillError(f"the spill directory {where} is gone or unreadable: {exc}") from exc
        if stat.S_ISLNK(st.st_mode):
            raise SpillError(
                f"the spill directory {where} is a symbolic link; give a real directory (a "
                "link could point spilled transcripts anywhere)"
            )
        if not stat.S_ISDIR(st.st_mode):
            raise SpillError(f"the spill directory {where} exists and is not a directory")
        getuid = getattr(os, "getuid", None)
        if getuid is not None and st.st_uid != getuid():
            raise SpillError(
                f"the spill directory {where} belongs to another user (uid {st.st_uid}); "
                "spilled outputs hold transcript text: use a directory of your own"
            )
        if getuid is not None and stat.S_IMODE(st.st_mode) & 0o077:
            raise SpillError(
                f"the spill directory {where} is reachable by group or others (mode "
                f"{stat.S_IMODE(st.st_mode):04o}); spilled outputs hold transcript text: "
                f"run chmod 700 on it, or give a new directory"
            )

    def _existing_size(self, path: Path) -> int | None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SpillError(f"cannot check {path}: {exc}") from exc
        if not stat.S_ISREG(st.st_mode):
            raise SpillError(f"{path} is not a regular file (a symlink?); refusing to use it")
        return st.st_size

    def _total_bytes(self) -> int:
        total = 0
        try:
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    if entry.name.endswith(".txt") and entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        except OSError as exc:
            raise SpillError(f"cannot list the spill directory {self.directory}: {exc}") from exc
        return total


# -- the paging tool -------------------------------------------------------------------

_DESCRIPTION = (
    "Read a tool output that was too large to show whole. A clamped tool result names its "
    "handle; this returns the characters offset to offset+limit of the whole output, after "
    "a header line that gives the range, the total and the next offset."
)


def _parameters(page_chars: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "handle": {
                "type": "string",
                "description": "the handle named in the clamped result",
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "description": "the first character to read",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": page_chars,
                "default": page_chars,
                "description": f"how many characters to read (at most {page_chars:,})",
            },
        },
        "required": ["handle"],
    }


def spill_tool(store: SpillTarget, *, name: str = READ_SPILLED) -> Tool:
    """The ``read_spilled(handle, offset=0, limit=...)`` tool over ``store``.

    ``ToolLoop`` adds it by itself when its manager clamps with a spill store; a ``fit()``
    user offers ``spill_tool(store).schema(format)`` to the model and runs calls of it
    with ``windowguard.run.tools.execute_tool``. A bad handle or offset becomes an error
    result the model sees.
    """
    if not isinstance(store, SpillTarget):
        raise SpillError(f"spill_tool needs a SpillStore (put() and read()), got {store!r}")
    page_chars = getattr(store, "page_chars", PAGE_CHARS)
    page_chars = page_chars if type(page_chars) is int and page_chars > 0 else PAGE_CHARS

    def read_spilled(handle: str, offset: int = 0, limit: int = page_chars) -> str:
        return store.read(handle, offset, limit)

    return Tool(
        name=name, description=_DESCRIPTION, parameters=_parameters(page_chars), fn=read_spilled
    )
