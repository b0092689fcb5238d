"""The HTTP half of a remote count: one deadline, a worker thread, honest errors.

Plain standard-library HTTP (``http.client``), like :mod:`windowguard.accounting.discovery`: every
socket wait ends at the count's deadline, redirects are never followed, bodies are
bounded, and the request runs on a daemon thread the caller stops waiting for at the
deadline -- so even a server that accepts and never answers (or a hung DNS lookup)
cannot hold a count past ``timeout``. Every failure becomes a ``RemoteCountError`` that
names the endpoint; API keys are redacted from anything a server says back.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from ...core.exceptions import ConfigurationError
from ..templates import render_prompt
from ._convert import Unconvertible, chat_messages, chat_tools
from ._types import CountQuery, DeadlineError, Json, RemoteCountError

_MAX_BODY: Final = 32 * 1024 * 1024  # TGI lists every token with its text
_SNIPPET: Final = 300
TEXT_TEMPLATES: Final = ("qwen", "llama3", "mistral")

__all__ = [
    "TEXT_TEMPLATES",
    "Answer",
    "Counter",
    "chat_body",
    "ensure_template",
    "holds_media",
    "post",
    "rendered",
    "root_of",
]


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    location: str


def post(url: str, payload: bytes, headers: Mapping[str, str], deadline: float) -> Answer:
    """One POST whose every socket wait ends at ``deadline``; redirects are not followed."""

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise DeadlineError("no answer before the deadline")
        return left

    import http.client  # on first use: ``import windowguard`` loads no HTTP client

    parts = urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname or "", parts.port, timeout=remaining())
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        conn.request("POST", path, body=payload, headers=dict(headers))
        response = conn.getresponse()
        chunks: list[bytes] = []
        size = 0
        while True:
            if conn.sock is not None:
                with contextlib.suppress(OSError):
                    conn.sock.settimeout(remaining())
            chunk = response.read(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > _MAX_BODY:
                raise RemoteCountError(f"the answer is larger than {_MAX_BODY} bytes")
            chunks.append(chunk)
        return Answer(response.status, b"".join(chunks), response.getheader("location") or "")
    except TimeoutError:
        raise DeadlineError("no answer before the deadline") from None
    except ConnectionRefusedError:
        raise RemoteCountError("connection refused") from None
    except (OSError, http.client.HTTPException) as exc:
        if deadline - time.monotonic() <= 0:
            raise DeadlineError("no answer before the deadline") from None
        raise RemoteCountError(f"{type(exc).__name__}: {exc}") from None
    finally:
        conn.close()


def error_text(body: bytes) -> str:
    """The server's own words: the ``message`` of its JSON error, else its text."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:_SNIPPET] or "(empty body)"
    error = data.get("error", data) if isinstance(data, dict) else data
    for candidate in (error, data):
        if isinstance(candidate, dict):
            for key in ("message", "detail", "error"):
                value = candidate.get(key)
                if isinstance(value, str):
                    return value[:_SNIPPET]
        if isinstance(candidate, str):
            return candidate[:_SNIPPET]
    return text[:_SNIPPET]


def spawn(work: Callable[[], int], deliver: Callable[[bool, object], None]) -> None:
    def run() -> None:
        try:
            outcome: tuple[bool, object] = (True, work())
        except BaseException as exc:  # delivered to the waiting caller, re-raised there
            outcome = (False, exc)
        deliver(*outcome)

    threading.Thread(target=run, name="windowguard-remote-count", daemon=True).start()


def outcome(ok: bool, value: object, name: str) -> int:
    if ok and isinstance(value, int):
        return value
    if isinstance(value, RemoteCountError):
        raise value
    raise RemoteCountError(f"{name}: {type(value).__name__}: {value}", endpoint=name)


# --------------------------------------------------------------------------- counters


class Counter:
    """Shared plumbing: base URL, key, deadline, thread, errors."""

    name: str
    media_formats: frozenset[str] = frozenset()
    """The wire formats of the requests whose images, audio and documents this count API
    counts as the provider charges them: the provider's own count of a transcript in
    its own format. Any other request holding media is refused (a conversion drops the
    media; an open server's ``/tokenize`` counts a placeholder, not the media tokens):
    a count short by the media would pass for an exact one."""

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 2.0) -> None:
        self._root = root_of(base_url)
        self._api_key = api_key or None
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigurationError(
                f"timeout must be a positive number of seconds, got {timeout!r}"
            )
        self.timeout = float(timeout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._root!r})"

    # the two halves every counter implements
    def _body(self, query: CountQuery) -> Any:
        """What to send (pure; raises Unconvertible)."""
        raise NotImplementedError

    def _exchange(self, body: Any, model: str, deadline: float) -> int:
        """Send it and read the count (raises RemoteCountError)."""
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _prepared(self, query: CountQuery) -> Any:
        if not isinstance(query, CountQuery):
            raise RemoteCountError(
                f"{self.name}: expected a CountQuery, got {type(query).__name__}",
                endpoint=self.name,
            )
        if query.format not in self.media_formats and holds_media(query):
            reason = "the request holds images, audio or documents, which it does not count"
            raise RemoteCountError(f"{self.name}: {reason}", endpoint=self.name)
        try:
            return self._body(query)
        except Unconvertible as exc:
            reason = f"cannot send this request: {exc}"
            raise RemoteCountError(f"{self.name}: {reason}", endpoint=self.name) from None
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            reason = f"cannot convert this request: {exc}"
            raise RemoteCountError(f"{self.name}: {reason}", endpoint=self.name) from None

    def count(self, query: CountQuery) -> int:
        """Exact prompt tokens the server's chat endpoint counts for ``query``.

        Raises:
            RemoteCountError: the server could not be asked or did not answer a count.
        """
        body = self._prepared(query)
        deadline = time.monotonic() + self.timeout
        done = threading.Event()
        box: list[tuple[bool, object]] = []

        def deliver(ok: bool, value: object) -> None:
            box.append((ok, value))
            done.set()

        spawn(lambda: self._exchange(body, query.model, deadline), deliver)
        if not done.wait(self.timeout):
            raise self._timeout()
        return outcome(*box[0], self.name)

    async def acount(self, query: CountQuery) -> int:
        """Async twin of :meth:`count`: the request runs on a worker thread.

        Raises:
            RemoteCountError: as for :meth:`count`.
        """
        import asyncio  # on first use: only async callers pay for it

        body = self._prepared(query)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[bool, object]] = loop.create_future()
        deadline = time.monotonic() + self.timeout

        def settle(ok: bool, value: object) -> None:
            if not future.done():
                future.set_result((ok, value))

        def deliver(ok: bool, value: object) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(settle, ok, value)

        spawn(lambda: self._exchange(body, query.model, deadline), deliver)
        try:
            ok, value = await asyncio.wait_for(future, self.timeout)
        except asyncio.TimeoutError:
            raise self._timeout() from None
        return outcome(ok, value, self.name)

    def _timeout(self) -> RemoteCountError:
        return DeadlineError(
            f"{self.name} at {self._root}: no answer within {self.timeout:g} s", endpoint=self.name
        )

    def _call(
        self, path: str, payload: object, deadline: float, headers: Mapping[str, str] | None = None
    ) -> Any:
        """POST ``payload`` to ``path``; the decoded JSON of a 2xx answer."""
        url = self._root + path
        where = f"{self.name} at {url}"
        try:
            data = json.dumps(payload, ensure_ascii=False).encode()
        except (TypeError, ValueError) as exc:
            reason = f"the request is not JSON: {exc}"
            raise RemoteCountError(f"{where}: {reason}", endpoint=self.name) from None
        try:
            answer = post(url, data, headers or self._headers(), deadline)
        except DeadlineError:
            raise self._timeout() from None
        except RemoteCountError as exc:
            raise RemoteCountError(
                f"{where}: {self._redact(str(exc))}", endpoint=self.name
            ) from None
        if 300 <= answer.status < 400:
            reason = f"HTTP {answer.status} redirect to {answer.location or '?'} (not followed)"
            raise RemoteCountError(f"{where}: {reason}", endpoint=self.name, status=answer.status)
        if not 200 <= answer.status < 300:
            text = self._redact(error_text(answer.body))
            raise RemoteCountError(
                f"{where}: HTTP {answer.status}: {text}", endpoint=self.name, status=answer.status
            )
        try:
            return json.loads(answer.body.decode("utf-8"))
        except ValueError:
            snippet = self._redact(answer.body[:80].decode("utf-8", "replace"))
            raise RemoteCountError(
                f"{where}: HTTP {answer.status} with a body that is not JSON: {snippet!r}",
                endpoint=self.name,
                status=answer.status,
            ) from None

    def _field(self, data: object, key: str, path: str) -> Any:
        value = data.get(key) if isinstance(data, dict) else None
        if value is None:
            snippet = self._redact(json.dumps(data)[:120])
            raise RemoteCountError(
                f"{self.name} at {self._root}{path}: the answer has no {key!r}: {snippet}",
                endpoint=self.name,
            )
        return value

    def _int(self, data: object, key: str, path: str) -> int:
        value = self._field(data, key, path)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise RemoteCountError(
                f"{self.name} at {self._root}{path}: {key!r} is {value!r}, not a count",
                endpoint=self.name,
            )
        return value

    def _list_length(self, data: object, key: str | None, path: str) -> int:
        value = data if key is None else self._field(data, key, path)
        if not isinstance(value, list):
            raise RemoteCountError(
                f"{self.name} at {self._root}{path}: expected a token list, got "
                f"{type(value).__name__}",
                endpoint=self.name,
            )
        return len(value)

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text


def root_of(base_url: object) -> str:
    if not isinstance(base_url, str) or urlsplit(base_url.strip()).scheme not in ("http", "https"):
        raise ConfigurationError(f"base_url must be an http(s) URL, got {base_url!r}")
    root = base_url.strip().rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def ensure_template(template: object, *, required: bool) -> str | None:
    if template is None and not required:
        return None
    if template not in TEXT_TEMPLATES:
        raise ConfigurationError(
            f"template must be one of {TEXT_TEMPLATES} (a chat template with a text form), "
            f"got {template!r}"
        )
    return str(template)


def holds_media(query: CountQuery) -> bool:
    """Whether the query's messages hold an image, audio clip or document."""
    from ...core.adapters import shape_messages

    try:
        shaped = shape_messages(query.messages, format=query.format)
    except Exception:  # not shapeable: the conversion itself will say why
        return False
    return any(shape.media_items for shape in shaped.shapes)


def chat_body(query: CountQuery, **extra: object) -> Json:
    body: Json = {"model": query.model, "messages": chat_messages(query), **extra}
    tools = chat_tools(query.tools)
    if tools:
        body["tools"] = tools
    return body


def rendered(query: CountQuery, template: str) -> str:
    tools = chat_tools(query.tools)
    try:
        return render_prompt(chat_messages(query), tools or None, template=template)
    except ConfigurationError as exc:
        raise Unconvertible(str(exc)) from None
