"""Running the proxy: in the foreground (the CLI) or on a background thread (tests).

:func:`serve` is ``windowguard proxy``: discover the upstream, print what was found,
open the event sinks, and serve with uvicorn until interrupted. :class:`ProxyServer`
runs the same application on a background thread, like the emulator, for tests,
benchmarks and programs that embed the proxy.

Invariants: the socket is bound before the server starts, so ``port=0`` gives a free
port that :attr:`ProxyServer.port` reports; uvicorn's access log is off (a query string
may carry a key) and nothing here logs a header; while a proxy serves, its log lines
(and uvicorn's and asyncio's) are rate-limited per kind, repeated tracebacks shortened
to one line (:mod:`._logs`: a flood of one error is a few lines and a count);
:meth:`ProxyServer.close` stops the server, closes its sinks and joins its thread
before it returns; a start that fails (the port cannot be bound, the events file cannot
be opened) leaves no socket or file open.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
import threading
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import IO, Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..core.edits._flags import describe_edits
from ..core.exceptions import ConfigurationError
from ..run.sinks import JsonlSink, OpenTelemetrySink, Sink
from ._logs import install as install_log_limits
from ._logs import uninstall as uninstall_log_limits
from .app import create_app
from .config import ProxyConfig, UpstreamInfo, discover_upstream

__all__ = ["ProxyServer", "serve"]


@contextlib.contextmanager
def _sinks(config: ProxyConfig, extra: Iterable[Sink]) -> Iterator[tuple[Sink, ...]]:
    sinks: list[Sink] = list(extra)
    jsonl: JsonlSink | None = None
    if config.events is not None:
        try:
            jsonl = JsonlSink(config.events)
        except OSError as exc:
            raise ConfigurationError(
                f"--events {config.events}: the events file cannot be opened "
                f"({exc.strerror or type(exc).__name__})"
            ) from exc
        sinks.append(jsonl)
    if config.otel:
        sinks.append(OpenTelemetrySink(provider_name="windowguard-proxy"))
    try:
        yield tuple(sinks)
    finally:
        if jsonl is not None:
            jsonl.close()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio turns Nagle off on the connections it accepts
    # only for sockets that say they are TCP. With Nagle on, an answer's body (written
    # after its headers) waits for the client's delayed ACK: 40 ms on every request.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _uvicorn(app: Any, config: ProxyConfig, log_level: str) -> uvicorn.Server:
    _raise_open_files(config.max_connections)
    return uvicorn.Server(
        uvicorn.Config(
            app,
            host=config.host,
            port=config.port,
            log_level=log_level,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
            http=_protocol(config.header_timeout),
            limit_concurrency=config.max_connections,
        )
    )


def _no_delay(transport: Any) -> None:
    """Nagle off on an accepted connection (asyncio does it only for sockets created
    with ``IPPROTO_TCP``; a socket handed over by a supervisor may not be)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _protocol(header_timeout: float) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol, closing a connection that does not send a whole
    request's headers within ``header_timeout`` seconds of connecting (or of its
    previous answer): a client trickling bytes cannot hold a connection forever."""

    class HeaderTimeoutProtocol(H11Protocol):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            _no_delay(transport)
            self._started: object = None
            self._deadline: Any = self.loop.call_later(header_timeout, self._too_slow)

        def handle_events(self) -> None:
            super().handle_events()
            cycle = getattr(self, "cycle", None)
            if cycle is not None and cycle is not self._started:
                self._started = cycle  # a request's headers are in
                if self._deadline is not None:
                    self._deadline.cancel()
                    self._deadline = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._deadline is None and not self.transport.is_closing():
                self._deadline = self.loop.call_later(header_timeout, self._too_slow)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            super().connection_lost(exc)

        def _too_slow(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutProtocol


def _raise_open_files(connections: int) -> None:
    """Raise the soft open-files limit towards the hard one, so ``connections`` sockets
    (plus the upstream's and the process's own) fit: beyond it, accept() fails in a
    loop that floods the log."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * connections + 256  # a client's socket and its upstream's, and some
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        if target > soft:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def serve(config: ProxyConfig, *, out: IO[str] | None = None) -> int:
    """Run ``windowguard proxy`` in the foreground until interrupted.

    Args:
        config: the proxy's settings.
        out: where the startup banner goes (stdout by default).

    Returns:
        The exit status (0 after a clean shutdown).

    Raises:
        ConfigurationError: nothing is known of the upstream's window and no
            ``--window`` was given, or the ``--events`` file cannot be opened.
        OSError: the port cannot be bound.
    """
    out = out or sys.stdout
    _interruptible()
    upstream = discover_upstream(config)
    sock = _bind(config.host, config.port)
    port = sock.getsockname()[1]
    with contextlib.closing(sock), _sinks(config, ()) as sinks:
        app = create_app(config, upstream, sinks=sinks)
        for line in [*upstream.describe(), describe_edits(app.state.proxy.guards.edits)]:
            print(f"windowguard proxy: {line}", file=out)
        root = f"http://{_host(config.host)}:{port}"
        if config.page != "off":
            print(f"windowguard proxy: live page: {root}/windowguard/", file=out)
        print(
            f"windowguard proxy: listening on {root} (base URL for OpenAI SDKs: {root}/v1; "
            f"for Anthropic SDKs: {root})",
            file=out,
            flush=True,
        )
        server = _uvicorn(app, config, "warning")
        install_log_limits()
        try:
            server.run(sockets=[sock])
        finally:
            uninstall_log_limits()
    return 0


def _interruptible() -> None:
    """Let SIGINT stop the proxy from the start, as it does once uvicorn runs (uvicorn
    handles SIGINT whatever the process inherited). A shell starts a background job with
    SIGINT ignored; one that came between the banner and uvicorn's handler was then
    lost, and the proxy served on (two test runs side by side found it)."""
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class ProxyServer:
    """The proxy served on a background thread.

    ::

        with Emulator(flavor="vllm", context_window=16_384) as emu:
            with ProxyServer(ProxyConfig(upstream=emu.root_url, port=0)) as proxy:
                client = openai.OpenAI(base_url=proxy.base_url, api_key="k")

    Args:
        config: the proxy's settings (``port=0``: any free port).
        sinks: extra event sinks (besides ``config.events`` / ``config.otel``).
        upstream: what discovery found (None: discover now).

    Raises:
        ConfigurationError: as :func:`~windowguard.proxy.discover_upstream`.
    """

    def __init__(
        self,
        config: ProxyConfig,
        *,
        sinks: Iterable[Sink] = (),
        upstream: UpstreamInfo | None = None,
    ) -> None:
        self.config = config
        self.upstream = upstream if upstream is not None else discover_upstream(config)
        self._extra = tuple(sinks)
        self._stack: contextlib.ExitStack | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port = 0
        self.app: Any = None

    def start(self) -> ProxyServer:
        """Bind, start serving on a thread, and wait until it accepts connections.

        Raises:
            ConfigurationError: already started, the ``events`` file cannot be opened,
                or the server did not come up.
            OSError: the port cannot be bound.
        """
        if self._server is not None:
            raise ConfigurationError("this proxy is already running")
        with contextlib.ExitStack() as opening:
            sock = _bind(self.config.host, self.config.port)
            opening.callback(sock.close)
            sinks = opening.enter_context(_sinks(self.config, self._extra))
            self._port = sock.getsockname()[1]
            self.app = create_app(self.config, self.upstream, sinks=sinks)
            server = _uvicorn(self.app, self.config, "warning")
            install_log_limits()
            opening.callback(uninstall_log_limits)
            stack = opening.pop_all()  # opened: close() closes them from now on
        thread = threading.Thread(
            target=server.run,
            kwargs={"sockets": [sock]},
            name=f"windowguard-proxy-{self._port}",
            daemon=True,
        )
        self._stack, self._server, self._thread = stack, server, thread
        thread.start()
        ready = threading.Event()
        while not ready.wait(0.01):
            if server.started:
                ready.set()
            elif not thread.is_alive():
                self.close()
                raise ConfigurationError("the proxy server did not start")
        return self

    def close(self) -> None:
        """Stop serving, close the sinks and free the port (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        if self._stack is not None:
            self._stack.close()
            self._stack = None

    def __enter__(self) -> ProxyServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The bound port."""
        return self._port

    @property
    def root_url(self) -> str:
        """``http://host:port``: what the Anthropic SDK takes as ``base_url``."""
        return f"http://{_host(self.config.host)}:{self._port}"

    @property
    def base_url(self) -> str:
        """``http://host:port/v1``: what the OpenAI SDK takes as ``base_url``."""
        return self.root_url + "/v1"

    @property
    def metrics(self) -> Any:
        """The running app's :class:`~windowguard.proxy.metrics.ProxyMetrics`."""
        return self.app.state.proxy.metrics
