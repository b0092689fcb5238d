"""The windowguard exception tree.

Every exception the library raises on purpose derives from one root, and every
name ends in ``Error``::

    WindowGuardError
    ├── ContextTruncatedError      head + newest turn cannot fit the budget; no provider
    │                              call may follow (TerminationReason.CONTEXT_TRUNCATED)
    ├── InvalidTranscriptError     not a transcript (empty, non-messages, a mistyped system);
    │   │                          damaged input (orphaned result, unanswered call, unknown
    │   │                          role, content of a wrong type) with strict=True
    │   └── UnknownFormatError     the wire format could not be detected or is not supported
    ├── ModelInfoError             a model limit or override that cannot be used
    ├── ConfigurationError         an argument that cannot work (negative window, ...)
    │   ├── LocalTokenizerError    an installed exact tokenizer failed to load
    │   │                          (windowguard.accounting.local; the heuristic takes over)
    │   └── RunStateError          a resume that does not fit its state (not a RunState,
    │                              results for unknown calls), or SuspendRun data that
    │                              cannot be saved as JSON
    ├── RemoteCountError           a serving endpoint's token count failed
    │                              (windowguard.accounting.remote; fit falls back and says so)
    ├── JournalError               a run journal cannot be opened or read (a damaged row,
    │   │                          a database that is not one, a server that went away)
    │   ├── JournalMismatchError   a run id reused for another transcript, model, tool set,
    │   │                          or a tool whose schema changed (named); a paused state
    │   │                          resumed again with another answer
    │   └── RunLockedError         another runner holds the run's lease (named, with its
    │                              expiry), or this runner lost it
    ├── SpillError                 a spill store that cannot be used (a directory others can
    │   │                          reach, a symlink), is full, or failed to write
    │   └── SpillHandleError       a handle that is not one of the store's (a path, a
    │                              traversal, an unknown or vanished output)
    └── ProviderError              a provider call failed; carries the classified Failure

    SuspendRun (outside the tree)  raised by a tool to pause a run: a signal, not an error

Provider failures are not exceptions of this tree: they are classified into a frozen
``Failure`` value by :func:`windowguard.classify_failure`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .redact import redact_secrets

__all__ = [
    "ConfigurationError",
    "ContextTruncatedError",
    "InvalidTranscriptError",
    "JournalError",
    "JournalMismatchError",
    "ModelInfoError",
    "ProviderError",
    "RunLockedError",
    "RunStateError",
    "SpillError",
    "SpillHandleError",
    "SuspendRun",
    "UnknownFormatError",
    "WindowGuardError",
]


class WindowGuardError(Exception):
    """Root of every exception windowguard raises on purpose."""


class ConfigurationError(WindowGuardError, ValueError):
    """An argument that cannot work, named with the value that was given."""


class RunStateError(ConfigurationError):
    """A run state that cannot be saved, or a resume that does not fit its state.

    Raised by ``resume`` before anything runs, for a state that is not a ``RunState``
    (a dict or JSON text: rebuild it with ``RunState.from_dict``/``from_json``), or
    results that are not a mapping of the paused turn's call ids to text, that name a
    call the turn does not have, or one that already has a result; and by a run whose
    tool paused it with ``SuspendRun`` data that cannot be stored as JSON (at once,
    before any further tool of the turn runs).
    """


class ModelInfoError(WindowGuardError, ValueError):
    """A model limit, override file or catalog entry that cannot be used."""


class InvalidTranscriptError(WindowGuardError, ValueError):
    """A transcript that is not one (empty, holding non-messages, content that cannot be
    serialised, a mistyped ``system``), or, with ``strict=True``, one that is damaged.

    Attributes:
        index: position of the offending message in the caller's list (``-1`` for the
            separate ``system`` argument or the transcript as a whole).
        problem: what is wrong, in words.
    """

    def __init__(self, problem: str, *, index: int = -1) -> None:
        self.index = index
        self.problem = problem
        where = f"message {index}: " if index >= 0 else ""
        super().__init__(f"{where}{problem}")


class UnknownFormatError(InvalidTranscriptError):
    """The wire format of a transcript could not be detected, or is not one we support."""


class ContextTruncatedError(WindowGuardError):
    """Even the smallest transcript windowguard may send (head + newest turn) does not fit.

    No provider call may follow: the run ends with ``TerminationReason.CONTEXT_TRUNCATED``.
    The refusal rests on the best count available: with an exact count (the provider's
    own reports, its count endpoint) it is raised only when head + newest turn + tools
    + the output floor exceed the window; with no exact source at all, when the
    estimate exceeds the input budget (the tool-loop design's rule).

    Attributes:
        estimated_tokens: the best count of head + newest turn (+ tools).
        budget: the input budget it had to fit (window - reserve - safety).
        context_window: the model's window the budget came from.
        exact: whether ``estimated_tokens`` was counted exactly.
        source: what counted it (``"ledger"``, ``"remote:..."``, ``"heuristic:..."`` ...).
        floor: the smallest reply the request had to leave room for.
        damage: for a damaged transcript, where and what (its damaged stretch is kept
            whole, so it counts as part of what had to fit).
    """

    def __init__(
        self,
        *,
        estimated_tokens: int,
        budget: int,
        context_window: int,
        exact: bool = False,
        source: str = "estimate",
        floor: int | None = None,
        damage: str = "",
    ) -> None:
        self.estimated_tokens = estimated_tokens
        self.budget = budget
        self.context_window = context_window
        self.exact = exact
        self.source = source
        self.floor = floor
        self.damage = damage
        if exact and floor is not None:
            need = (
                f"the head (system + task), the tools and the newest turn are exactly "
                f"{estimated_tokens} tokens (counted by {source}); with the smallest reply "
                f"({floor} tokens) that exceeds the context window {context_window}"
            )
        elif budget <= 0:  # a window smaller than the reply reserve plus the safety
            need = (
                f"the head (system + task) and the newest turn need ~{estimated_tokens} "
                f"tokens ({source}) but the context window {context_window} leaves no input "
                "budget once the reply's share and the safety margin are kept"
            )
        else:
            need = (
                f"the head (system + task) and the newest turn need ~{estimated_tokens} "
                f"tokens ({source}) but the input budget is {budget} (context window "
                f"{context_window})"
            )
        if damage:
            need = (
                f"the transcript is damaged ({damage}); its damaged stretch is kept whole, "
                f"and with it {need}"
            )
        super().__init__(
            f"{need}; nothing was sent. Shorten the system prompt or the newest tool result, "
            "lower max_tokens, or use a model with a larger window."
        )


class SpillError(WindowGuardError):
    """A spill store (``windowguard.SpillStore``) that cannot be used or written: its
    directory is a symlink, not a directory, another user's, or reachable by group or
    others; an output over the per-file cap or a store over its total cap; a write that
    failed. The message names the path and what to do."""


class SpillHandleError(SpillError):
    """A spill handle that is not one of the store's own: not of its alphabet (a path, a
    ``../`` traversal, an absolute path, a NUL), or naming no kept output (unknown, or
    removed, or replaced by a symlink)."""


class ProviderError(WindowGuardError):
    """A provider call failed; ``failure`` says how (a classified, frozen value).

    Raised by windowguard's providers from the SDK's own exception
    (``raise ProviderError(classify_failure(exc)) from exc``). The message is the
    failure's, redacted (:func:`windowguard.core.failures.redact_secrets`) even when the
    Failure was built by hand: no credential a server echoed appears in it.
    """

    def __init__(self, failure: Any) -> None:
        self.failure = failure
        message = str(getattr(failure, "message", "") or "provider call failed")
        super().__init__(
            f"{getattr(getattr(failure, 'kind', None), 'name', 'UNKNOWN')}: "
            f"{redact_secrets(message)}"
        )


class JournalError(WindowGuardError):
    """A run journal cannot be opened or read: a damaged row (named by run, step and
    position), a file that is not a database, a server that cannot be reached."""


class JournalMismatchError(JournalError):
    """A run id was reused for a different transcript, system prompt, model or tool set,
    or one of its tools changed its schema (description or parameters); or a paused
    state was resumed again with another result for a call than the journal holds.

    Replaying the journal would feed the model answers made for another run.

    Attributes:
        run_id: the run.
        tools: the tools that differ (changed, added or removed), if that is the reason.
    """

    def __init__(self, message: str, *, run_id: str = "", tools: tuple[str, ...] = ()) -> None:
        self.run_id = run_id
        self.tools = tools
        super().__init__(message)


class RunLockedError(JournalError):
    """Another runner holds the run: one runner at a time may drive a journalled run.

    Raised at once by a second runner (or after the journal's ``wait=`` seconds), and by
    a runner whose lease was taken over after it expired (its write is refused).

    Attributes:
        run_id: the run.
        holder: who holds it (``host:pid:token``).
        expires_at: when the holder's lease expires unless renewed (UTC), if known.
        where: the journal (a path, or a PostgreSQL address without its password).
        lost: True when this runner held the lease and lost it.
    """

    def __init__(
        self,
        run_id: str,
        *,
        holder: str,
        expires_at: datetime | None,
        seconds_left: float | None = None,
        where: str = "",
        lost: bool = False,
    ) -> None:
        self.run_id = run_id
        self.holder = holder
        self.expires_at = expires_at
        self.where = where
        self.lost = lost
        until = ""
        if expires_at is not None:
            until = f" until {expires_at.isoformat(timespec='seconds')}"
            if seconds_left is not None:
                until += f" (in {max(seconds_left, 0.0):.1f} s) unless it renews it"
        if lost:
            message = (
                f"this runner's lease on run {run_id!r} in {where} expired and the run is "
                f"now held by {holder}{until}; nothing more was written by this runner. "
                "The other runner continues the run; a tool this runner was running may "
                "have run twice."
            )
        else:
            message = (
                f"run {run_id!r} in {where} is held by another runner ({holder}){until}; "
                "pass wait=<seconds> to the journal to wait for it, or use another run id"
            )
        super().__init__(message)


class SuspendRun(Exception):
    """Raised by a tool to pause the run (approval, human input, any wait).

    A control signal, not an error: it stands outside the WindowGuardError tree, and its
    name (fixed by the public API) does not end in ``Error`` for that reason.

    The run ends with ``TerminationReason.SUSPENDED`` and a JSON-serialisable
    ``RunState``; ``loop.resume(state, ...)`` continues it.
    """

    def __init__(self, reason: str, data: Any = None) -> None:
        self.reason = reason
        self.data = data
        super().__init__(reason)
