"""The proxy's ASGI application: fit model calls, pass everything else through.

Routes:

- ``POST /v1/chat/completions``, ``POST /v1/responses`` (OpenAI) and
  ``POST /v1/messages`` (Anthropic): the JSON body is exactly the keyword arguments of
  the SDK call, so it is read, fitted and sent by the drop-in guard's core
  (:mod:`windowguard.guard`): the oldest whole turns are left out until the request fits,
  the reply budget (``max_tokens`` / ``max_completion_tokens`` / ``max_output_tokens``)
  is fitted, the tools are counted. The answer, streamed or not, goes back as the
  upstream sent it, and its usage is fed back to the conversation.
- ``GET /metrics`` (Prometheus text) and ``GET /healthz``.
- The live page (:mod:`._page`, ``--page``): ``GET /windowguard/`` and its
  ``GET /windowguard/state.json``, and ``GET /`` for a browser (one that accepts
  ``text/html``); a :class:`~._recorder.ConversationRecorder` among the sinks feeds it.
- Every other method and path: passed through untouched (method, query, headers less
  hop-by-hop ones, body and answer streamed both ways).

Invariants:

- A request that cannot fit is answered 400 ``context_truncated`` in the API's own
  error shape, with the numbers, and the upstream is not contacted.
- A body larger than ``max_body_bytes`` is answered 413 ``request_too_large`` in the
  API's own shape, without reading the rest of it or contacting the upstream.
- One path form (:mod:`._paths`): a request's path is normalised before routing
  (``/v1/./chat/completions`` is the fitted route) and forwarded in that same form, so
  no spelling skips fitting and nothing climbs out of the upstream's path prefix; a
  path that cannot be normalised safely is a 400 ``invalid_path``.
- Every request the proxy refuses itself, without contacting the upstream, emits a
  ``proxy_refused`` event (``context_truncated``, ``invalid_request``, ``invalid_path``,
  ``request_too_large``); an upstream error, and an upstream that cannot be reached,
  emits a ``provider_error`` event instead.
- Bad input (a body that is not a JSON object, messages that are not a list, a bad
  ``max_tokens`` ...) is answered 400 in the API's own shape naming the problem; the
  proxy never answers with a traceback.
- An upstream that cannot be reached, times out, or drops the connection before the
  whole answer of a fitted route was read is answered 502 (504 on a timeout) in the
  API's own shape; the send learns it failed and ``upstream_errors_total`` counts it.
- An upstream context overflow gets one reactive refit (the manager learns from the
  refusal, the request is fitted again with the reactive safety margin of 100 tokens)
  and is sent once more; any other upstream error, and a second overflow, goes back
  unchanged (status, body, headers).
- For a Chat Completions stream the proxy asks for ``stream_options.include_usage``
  when the client left it unset, and then takes out what that adds (the usage-only last
  chunk, each other chunk's ``"usage": null``), so the client reads the chunks it would
  read without the proxy; an ``include_usage`` the client set, True or False, is sent
  as set and its answer passed on.
- Credentials are forwarded, or replaced by the proxy's own key; none is logged, put in
  an event, or echoed in an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final

import httpx2
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from ..core.events import Event, ProviderErrorEvent, ProxyRefused
from ..core.exceptions import ContextTruncatedError, WindowGuardError
from ..core.failures import Failure, FailureKind, classify_failure
from ..guard._apis import ANTHROPIC_MESSAGES, CHAT, RESPONSES, Api
from ..guard._core import Send
from ..run.sinks import Sink, in_conversation
from ._guards import ProxyGuards, UpstreamRefusal
from ._http import (
    AnswerTooLarge,
    ClientGone,
    Ending,
    PassedResponse,
    QuickSwitches,
    disconnected,
    encode_body,
    forwarded_path,
    header_bytes,
    read_all,
    usage_of_body,
)
from ._page import Page
from ._parse import THREAD_BYTES, BodyParser
from ._paths import PathsMiddleware
from ._recorder import ConversationRecorder
from ._wire import (
    Redactor,
    SseUsage,
    error_body,
    forward_headers,
    response_headers,
    stream_error_event,
)
from .config import ProxyConfig, UpstreamInfo
from .metrics import ProxyMetrics

__all__ = ["ProxyRefused", "create_app"]

logger = logging.getLogger("windowguard.proxy")

_READ_CHUNK: Final = 64 * 1024
# A body this large is parsed and fitted off the event loop: its shaping, estimating and
# exact counting would hold it (every other client) for milliseconds to seconds. Smaller
# ones stay on the loop, where a fit costs less than a thread hop (_parse.THREAD_BYTES).
OFFLOAD_BYTES: Final = THREAD_BYTES
_BODY_BYTES: Final = "windowguard.body_bytes"  # the scope key of a fitted body's size


@dataclass(frozen=True, slots=True, kw_only=True)
class _Route:
    """One fitted route: its API, its metric label and its error shape."""

    api: Api
    label: str
    anthropic: bool


_ROUTES: Final = (
    ("/v1/chat/completions", _Route(api=CHAT, label="chat", anthropic=False)),
    ("/v1/responses", _Route(api=RESPONSES, label="responses", anthropic=False)),
    ("/v1/messages", _Route(api=ANTHROPIC_MESSAGES, label="messages", anthropic=True)),
)
_FITTED_PATHS: Final = frozenset(path for path, _ in _ROUTES)
_PASSTHROUGH: Final = _Route(api=CHAT, label="passthrough", anthropic=False)
_SHRINKS: Final = ("max_tokens_shrunk", "context_emergency_shrink")


class _Proxy:
    """The state one proxy app shares across requests."""

    def __init__(self, config: ProxyConfig, upstream: UpstreamInfo, sinks: Iterable[Sink]) -> None:
        self.config = config
        self.upstream = upstream
        self.metrics = ProxyMetrics()
        # What the live page shows (nothing is recorded when it is off).
        self.recorder = ConversationRecorder() if config.page != "off" else None
        recording = (self.recorder,) if self.recorder is not None else ()
        self.sinks: tuple[Sink, ...] = (*sinks, *recording)
        self.guards = ProxyGuards(config, upstream, self.sinks, on_evict=self._evicted)
        self.client: httpx2.AsyncClient | None = None
        # The proxy's own key, never passed back in what an upstream answers (one
        # Redactor per stream: it holds back a tail that may start the key).
        self.redactor = Redactor([config.api_key])
        # Quick GIL hand-overs while a large body is worked on a thread (QuickSwitches).
        self.switches = QuickSwitches()
        self.parser = BodyParser(self.switches, thread_bytes=OFFLOAD_BYTES)

    # -- lifecycle --------------------------------------------------------------------

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        timeout = httpx2.Timeout(
            connect=10.0,
            read=self.config.upstream_timeout,
            write=self.config.upstream_timeout,
            pool=self.config.upstream_timeout,
        )
        limits = httpx2.Limits(max_connections=None, max_keepalive_connections=256)
        if self.config.preload_tokenizers:
            began = time.perf_counter()
            loaded = await asyncio.to_thread(self.guards.preload_tokenizers)
            if loaded:
                logger.info(
                    "exact tokenizers loaded in %.1f s: %s",
                    time.perf_counter() - began,
                    "; ".join(f"{family} ({origin})" for family, origin in loaded.items()),
                )
        async with httpx2.AsyncClient(timeout=timeout, limits=limits) as client:
            self.client = client
            try:
                yield
            finally:
                self.client = None
                await asyncio.to_thread(self.parser.close)

    def _client(self) -> httpx2.AsyncClient:
        if self.client is None:
            raise RuntimeError("the proxy app is not running (its lifespan has not started)")
        return self.client

    def emit(self, event: Event) -> None:
        self.guards.emit(event)

    def bad_path(self, anthropic: bool, message: str) -> None:
        """A path refused before routing (:class:`~._paths.PathsMiddleware`)."""
        api = ANTHROPIC_MESSAGES if anthropic else CHAT
        self.metrics.inc("requests_total", "passthrough")
        self.emit(ProxyRefused(api=api.name, code="invalid_path", message=message))

    # -- local routes -----------------------------------------------------------------

    def _evicted(self, count: int) -> None:
        """The byte budget forgot ``count`` conversations (their next sends start over)."""
        self.metrics.inc("state_evictions_total", "max_state_mb", count)
        budget = self.guards.budget
        logger.info(
            "forgot %d least recently used conversation(s) to keep the state under "
            "--max-state-mb %g (%d bytes kept now)",
            count,
            self.config.max_state_mb,
            budget.total,
        )

    async def metrics_route(self, request: HttpRequest) -> Response:
        budget = self.guards.budget
        self.metrics.set_gauge("state_bytes", budget.total)
        self.metrics.set_gauge("state_conversations", len(budget))
        return PlainTextResponse(
            self.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    async def healthz(self, request: HttpRequest) -> Response:
        info = self.upstream.model_info
        return JSONResponse(
            {
                "status": "ok",
                "upstream": self.upstream.root,
                "model": self.upstream.model,
                "context_window": info.context_window if info is not None else None,
                "count_endpoint": self.upstream.counter.name if self.upstream.counter else None,
            }
        )

    # -- fitted model calls -----------------------------------------------------------

    def model_route(self, route: _Route) -> Any:
        async def endpoint(request: HttpRequest) -> Response:
            return await self.model_call(request, route)

        return endpoint

    async def model_call(self, request: HttpRequest, route: _Route) -> Response:
        started = time.perf_counter()
        self.metrics.inc("requests_total", route.label)
        body = await self._read_json(request, route)
        if isinstance(body, Response):
            return body
        read = time.perf_counter()
        offload = _large(request)
        guard = self.guards.for_api(route.api)
        try:
            parsed = guard.request(route.api, body)
        except WindowGuardError as exc:
            return self._bad_request(route, str(exc))
        if parsed is None:  # server-side state (previous_response_id): sent unchanged
            self._observe(route, started, read)
            stream = body.get("stream") is True
            return await self._unless_gone(
                request, route, None, self._send(request, route, body, None, stream=stream)
            )
        try:
            conversation, _ = await guard.aconversation_for(
                parsed, self.guards.endpoint_for(route.api), None
            )
            if self.recorder is not None:
                self.recorder.note(conversation.key, api=route.label, model=parsed.model)
            with self.switches.held() if offload else contextlib.nullcontext():
                send = await guard.afit(parsed, conversation, offload=offload)
        except ContextTruncatedError as exc:
            return self._refuse(route, exc, conversation.key)
        except WindowGuardError as exc:
            return self._bad_request(route, str(exc))
        except Exception as exc:  # a transcript shape nothing anticipated: still a 400
            logger.warning("could not fit a %s request: %s", route.label, type(exc).__name__)
            return self._bad_request(
                route, f"the request could not be read as a {route.api.name} call: {exc}"
            )
        self._count_fit(route, send)
        self._observe(route, started, read)
        return await self._unless_gone(
            request,
            route,
            send,
            self._send(request, route, send.kwargs, send, stream=parsed.stream),
        )

    async def _unless_gone(
        self, request: HttpRequest, route: _Route, send: Send | None, work: Awaitable[Response]
    ) -> Response:
        """``work`` (the upstream call, up to its answer or its stream's headers), cancelled
        when the client goes away first: closing the upstream connection tells a server
        that stops work on a disconnect (vLLM, llama.cpp) to stop."""
        task = asyncio.ensure_future(work)
        gone = asyncio.ensure_future(disconnected(request))
        try:
            await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done() and not gone.done():  # this handler itself was cancelled
                task.cancel()
            gone.cancel()
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        self.metrics.inc("client_disconnects_total", route.label)
        if send is not None:
            send.failed(ClientGone("the client disconnected before the answer"))
        logger.info("a %s client went away: its upstream request was cancelled", route.label)
        return Response(status_code=499)  # nobody reads it

    async def _read_json(self, request: HttpRequest, route: _Route) -> dict[str, Any] | Response:
        declared = request.headers.get("content-length")
        limit = self.config.max_body_bytes
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return self._too_large(route)
        chunks: list[bytes] = []
        size = 0
        reads = request.stream().__aiter__()
        while True:
            try:
                chunk = await asyncio.wait_for(reads.__anext__(), self.config.body_timeout)
            except StopAsyncIteration:
                break
            except TimeoutError:
                return self._slow_body(route)
            size += len(chunk)
            if size > limit:
                return self._too_large(route)
            chunks.append(chunk)
        raw = b"".join(chunks)
        request.scope[_BODY_BYTES] = size
        parsed = await self.parser.parse(raw)
        if isinstance(parsed, str):
            return self._bad_request(route, parsed)
        return parsed

    def _observe(self, route: _Route, started: float, read: float) -> None:
        now = time.perf_counter()
        self.metrics.observe_latency(route.label, now - started)
        self.metrics.observe_fit(route.label, now - read)

    def _count_fit(self, route: _Route, send: Send) -> None:
        fit = send.fit
        edited = any(record.kind != "drop" for record in fit.edits)
        shrunk = any(e.kind in _SHRINKS for e in fit.events)
        if edited:
            self.metrics.inc("edited_requests_total", route.label)
        if fit.dropped_turns:
            self.metrics.inc("pruned_requests_total", route.label)
            self.metrics.inc("dropped_turns_total", route.label, fit.dropped_turns)
        if shrunk:
            self.metrics.inc("shrinks_total", route.label)
        if self.recorder is not None:  # the page counts requests as /metrics does
            self.recorder.counted(send.conversation.key, edited=edited, shrunk=shrunk)

    async def _send(
        self,
        request: HttpRequest,
        route: _Route,
        payload: dict[str, Any],
        send: Send | None,
        *,
        stream: bool,
        attempt: int = 1,
    ) -> Response:
        url = self.upstream.root + forwarded_path(request)
        headers = [
            (name, value)
            for name, value in forward_headers(
                request.headers.items(),
                api_key=self.config.api_key,
                anthropic=route.anthropic,
                identity=True,
            )
            if name.lower() != "content-type"
        ]
        headers.append(("content-type", "application/json"))
        if _large(request):
            with self.switches.held():
                content = await asyncio.to_thread(encode_body, payload)
        else:
            content = encode_body(payload)
        client = self._client()
        outgoing = client.build_request(
            "POST",
            url,
            params=request.url.query or None,
            headers=header_bytes(headers),
            content=content,
        )
        try:
            answer = await client.send(outgoing, stream=True)
        except httpx2.HTTPError as exc:
            return self._unreachable(route, exc, send)
        if answer.status_code >= 400:
            raw_or_error = await read_all(answer)
            if isinstance(raw_or_error, httpx2.HTTPError):
                return self._unreachable(route, raw_or_error, send)
            raw = raw_or_error
            failure = classify_failure(status=answer.status_code, body=raw, headers=answer.headers)
            self.metrics.inc("upstream_errors_total", failure.kind.value)
            retry = (
                send is not None and failure.kind is FailureKind.CONTEXT_OVERFLOW and attempt == 1
            )
            self._upstream_error_event(route, send, failure, "refit" if retry else "returned")
            if send is not None:
                send.failed(UpstreamRefusal(answer, raw))
            if retry and send is not None:
                large = _large(request)
                try:
                    with self.switches.held() if large else contextlib.nullcontext():
                        await self.guards.for_api(route.api).arefit(send, offload=large)
                except ContextTruncatedError as exc:
                    return self._refuse(route, exc, send.conversation.key)
                self.metrics.inc("refits_total", route.label)
                return await self._send(
                    request, route, send.kwargs, send, stream=stream, attempt=attempt + 1
                )
            return Response(
                self.redactor.whole(raw), answer.status_code, headers=self._headers(answer)
            )
        if stream:
            strip = route.api is CHAT and send is not None and send.request.usage_added
            return StreamingResponse(
                self._relay(answer, route, send, strip_usage_chunk=strip),
                status_code=answer.status_code,
                headers=self._headers(answer),
            )
        raw_or_error = await read_all(answer)
        if isinstance(raw_or_error, httpx2.HTTPError):  # cut off after its headers
            return self._unreachable(route, raw_or_error, send)
        raw = raw_or_error
        if send is not None:
            send.usage(usage_of_body(raw))
        return Response(self.redactor.whole(raw), answer.status_code, headers=self._headers(answer))

    def _headers(self, answer: httpx2.Response, *, decoded: bool = True) -> dict[str, str]:
        """The upstream's answer headers for the client: the body goes on decoded (the
        proxy read it), and the proxy's own key never goes back."""
        redactor = self.redactor if self.redactor else None
        return response_headers(answer.headers.items(), decoded=decoded, redactor=redactor)

    def _stream_redactor(self) -> Redactor | None:
        return Redactor([self.config.api_key]) if self.redactor else None

    # -- answers the proxy gives itself -----------------------------------------------

    def _too_large(self, route: _Route) -> Response:
        limit = self.config.max_body_bytes
        message = f"windowguard proxy: the request body is larger than {limit} bytes"
        self.emit(ProxyRefused(api=route.api.name, code="request_too_large", message=message))
        body = error_body(route.anthropic, message, code="request_too_large")
        return JSONResponse(body, status_code=413)

    def _slow_body(self, route: _Route) -> Response:
        timeout = self.config.body_timeout
        message = (
            f"windowguard proxy: the request body paused for more than {timeout:g} s; send it whole"
        )
        self.emit(ProxyRefused(api=route.api.name, code="request_timeout", message=message))
        body = error_body(route.anthropic, message, code="request_timeout")
        return JSONResponse(body, status_code=408, headers={"connection": "close"})

    def _bad_request(self, route: _Route, message: str) -> Response:
        message = f"windowguard proxy: {message}"
        self.emit(ProxyRefused(api=route.api.name, code="invalid_request", message=message))
        body = error_body(route.anthropic, message, code="invalid_request")
        return JSONResponse(body, status_code=400)

    def _refuse(self, route: _Route, exc: ContextTruncatedError, conversation: str) -> Response:
        self.metrics.inc("refusals_total", route.label)
        message = f"windowguard proxy: this request cannot fit the context window: {exc}"
        numbers: dict[str, Any] = {
            "estimated_tokens": exc.estimated_tokens,
            "budget": exc.budget,
            "context_window": exc.context_window,
        }
        with in_conversation(conversation):
            self.emit(
                ProxyRefused(
                    api=route.api.name, code="context_truncated", message=message, **numbers
                )
            )
        body = error_body(route.anthropic, message, code="context_truncated", **numbers)
        return JSONResponse(body, status_code=400)

    def _unreachable(self, route: _Route, exc: httpx2.HTTPError, send: Send | None) -> Response:
        failure = classify_failure(exc)
        self.metrics.inc("upstream_errors_total", failure.kind.value)
        if send is not None:
            send.failed(exc)
        self._upstream_error_event(route, send, failure, "returned")
        message = (
            f"windowguard proxy: the upstream {self.upstream.root} could not be reached "
            f"({type(exc).__name__})"
        )
        code = "upstream_unreachable"
        if isinstance(exc, AnswerTooLarge):
            message, code = f"windowguard proxy: {exc}", "upstream_answer_too_large"
        logger.warning("%s", message.removeprefix("windowguard proxy: "))
        status = 504 if isinstance(exc, httpx2.TimeoutException) else 502
        error_type = "api_error" if route.anthropic else "upstream_error"
        body = error_body(route.anthropic, message, code=code, error_type=error_type)
        return JSONResponse(body, status_code=status)

    def _upstream_error_event(
        self, route: _Route, send: Send | None, failure: Failure, decision: str
    ) -> None:
        self.emit(
            ProviderErrorEvent(
                run_id=send.conversation.key if send is not None else "",
                step=0,
                site=f"proxy {route.api.name}",
                failure_kind=failure.kind.value,
                retryable=failure.retryable,
                status=failure.status,
                message=failure.message,
                decision=decision,
            )
        )

    # -- everything else --------------------------------------------------------------

    async def passthrough(self, request: HttpRequest) -> Response:
        self.metrics.inc("requests_total", "passthrough")
        path = request.url.path
        # With its own key the proxy reads what it passes back (to take the key out of
        # it), so it asks for it unencoded and decodes what comes encoded anyway.
        redactor = self._stream_redactor()
        headers = forward_headers(
            request.headers.items(),
            api_key=self.config.api_key,
            anthropic=path.startswith("/v1/messages"),
            identity=redactor is not None,
            keep_length=True,
        )
        anthropic = path.startswith("/v1/messages")
        if "content-length" in request.headers and "transfer-encoding" in request.headers:
            # Two framings of one body (RFC 9112 6.1: a request smuggling pattern): which
            # one the upstream believes is not for the proxy to guess.
            route = _Route(
                api=ANTHROPIC_MESSAGES if anthropic else CHAT,
                label="passthrough",
                anthropic=anthropic,
            )
            return self._bad_request(
                route, "the request has both Content-Length and Transfer-Encoding; send one"
            )
        has_body = "content-length" in request.headers or "transfer-encoding" in request.headers
        client = self._client()
        outgoing = client.build_request(
            request.method,
            self.upstream.root + forwarded_path(request),
            params=request.url.query or None,
            headers=header_bytes(headers),
            content=request.stream() if has_body else None,
        )
        try:
            answer = await client.send(outgoing, stream=True)
        except httpx2.HTTPError as exc:
            route = _Route(
                api=ANTHROPIC_MESSAGES if anthropic else CHAT,
                label="passthrough",
                anthropic=anthropic,
            )
            return self._unreachable(route, exc, None)
        if answer.status_code >= 400:
            self.metrics.inc("upstream_errors_total", _kind_of_status(answer.status_code))
        ending = Ending()
        return PassedResponse(
            self._passed(answer, redactor, ending),
            ending,
            status_code=answer.status_code,
            headers=self._headers(answer, decoded=redactor is not None),
        )

    # -- streams ----------------------------------------------------------------------

    async def _relay(
        self, answer: httpx2.Response, route: _Route, send: Send | None, *, strip_usage_chunk: bool
    ) -> AsyncIterator[bytes]:
        """A fitted route's event stream, as it arrives, with the usage read from it and
        the proxy's own key taken out. A stream the upstream breaks after its headers
        counts as an upstream error, emits ``provider_error``, and ends with an error
        event in the API's shape (the status line is gone: the SDK raises on that)."""
        reader = SseUsage(
            send.usage if send is not None else _ignore, strip_usage_chunk=strip_usage_chunk
        )
        redactor = self._stream_redactor()
        try:
            async for chunk in answer.aiter_bytes():
                out = reader.feed(chunk)
                if redactor is not None:
                    out = redactor.feed(out)
                if out:
                    yield out
            rest = reader.close()
        except httpx2.HTTPError as exc:
            self._stream_broke(route, send if not reader.reported else None, exc)
            # An event cut off is dropped (as an event stream's reader drops one at its
            # end); the blank line ends any oversized event passed on in part.
            yield (redactor.close() if redactor is not None else b"") + b"\n\n"
            message = (
                f"windowguard proxy: the upstream broke the stream off ({type(exc).__name__}); "
                "the answer is incomplete"
            )
            yield stream_error_event(route.anthropic, message)
            return
        finally:
            await answer.aclose()
        if redactor is not None:
            rest = redactor.feed(rest) + redactor.close()
        if rest:
            yield rest

    async def _passed(
        self, answer: httpx2.Response, redactor: Redactor | None, ending: Ending
    ) -> AsyncIterator[bytes]:
        """A passed-through answer: as it came, or decoded with the proxy's own key taken
        out. A body the upstream breaks off counts as an upstream error, and is broken
        off for the client too (``ending``)."""
        try:
            if redactor is None:
                async for chunk in answer.aiter_raw():
                    yield chunk
                return
            async for chunk in answer.aiter_bytes():
                out = redactor.feed(chunk)
                if out:
                    yield out
            rest = redactor.close()
            if rest:
                yield rest
        except httpx2.HTTPError as exc:
            ending.broken = True
            self._stream_broke(_PASSTHROUGH, None, exc)
        finally:
            await answer.aclose()

    def _stream_broke(self, route: _Route, send: Send | None, exc: httpx2.HTTPError) -> None:
        failure = classify_failure(exc)
        self.metrics.inc("upstream_errors_total", failure.kind.value)
        if send is not None:
            send.failed(exc)
        self._upstream_error_event(route, send, failure, "returned")
        logger.warning(
            "upstream %s broke a %s answer off: %s",
            self.upstream.root,
            route.label,
            type(exc).__name__,
        )


def _large(request: HttpRequest) -> bool:
    """Whether the request's body is large enough to be parsed, fitted and re-encoded
    on a worker thread (:data:`OFFLOAD_BYTES`)."""
    return int(request.scope.get(_BODY_BYTES, 0)) >= OFFLOAD_BYTES


def _kind_of_status(status: int) -> str:
    return classify_failure(status=status).kind.value


def _ignore(usage: object) -> None:
    return None


def create_app(
    config: ProxyConfig, upstream: UpstreamInfo, *, sinks: Iterable[Sink] = ()
) -> Starlette:
    """The proxy as an ASGI application (serve it with uvicorn).

    Args:
        config: the proxy's settings.
        upstream: what :func:`~windowguard.proxy.discover_upstream` found.
        sinks: where events go (besides the metrics).

    Returns:
        The Starlette application; its ``state.proxy`` holds the metrics.
    """
    proxy = _Proxy(config, upstream, sinks)
    routes = [
        Route("/metrics", proxy.metrics_route, methods=["GET"]),
        Route("/healthz", proxy.healthz, methods=["GET"]),
    ]
    routes += [Route(path, proxy.model_route(route), methods=["POST"]) for path, route in _ROUTES]
    if proxy.recorder is not None:
        page = Page(proxy.recorder, proxy.metrics, config, upstream)
        routes += page.routes(proxy.passthrough)
    routes.append(
        Route(
            "/{path:path}",
            proxy.passthrough,
            methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
        )
    )
    app = Starlette(routes=routes, lifespan=proxy.lifespan)
    app.state.proxy = proxy
    app.add_middleware(PathsMiddleware, fitted=_FITTED_PATHS, refused=proxy.bad_path)
    return app
