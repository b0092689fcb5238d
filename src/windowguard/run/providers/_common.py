"""Pieces every provider shares: where the model's limits come from, and plain helpers.

A provider knows its model's window from, in this order: the caller's explicit
``model_info``, what the serving endpoint reports (:mod:`windowguard.accounting.discovery`, asked
only for endpoints that are not the vendor's own default, unless told otherwise), the
catalog, then the fallback — merged per field by
:func:`windowguard.accounting.catalog.resolve_model_info`.

Invariants: resolving never raises for what a server does (discovery gives None on any
trouble), it asks the server at most once per provider (and the discovery module caches
across providers), and nothing here imports a provider SDK.

Reading an answer never raises anything but a classified
:class:`~windowguard.core.exceptions.ProviderError` for what a server sends: the SDK's own
errors are classified, and a success status whose body is not a whole answer (not
JSON, the wrong shape, a stream that ended before its finish reason) is a
``MALFORMED_RESPONSE`` failure (:func:`reading`, :func:`malformed`, :func:`incomplete`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ...accounting.catalog import ModelInfo, resolve_model_info
from ...accounting.discovery import adiscover_model_info, discover_model_info
from ...accounting.local import TEMPLATE_OF
from ...accounting.remote import (
    AnthropicCountTokens,
    OpenAIInputTokens,
    RemoteCounter,
    adiscover_counter,
    discover_counter,
)
from ...accounting.templates import TEXT_TEMPLATES
from ...core.exceptions import ConfigurationError, ProviderError, WindowGuardError
from ...core.failures import Failure, FailureKind, classify_failure

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "CounterSource",
    "ModelInfoSource",
    "as_dict",
    "check_model",
    "count_field",
    "field",
    "incomplete",
    "is_default_host",
    "is_object",
    "malformed",
    "reading",
]

DEFAULT_DISCOVERY_TIMEOUT = 5.0


def check_model(model: object) -> str:
    """Return ``model`` when it is a non-empty str.

    Raises:
        ConfigurationError: anything else.
    """
    if not isinstance(model, str) or not model.strip():
        raise ConfigurationError(f"model must be a non-empty str, got {model!r}")
    return model


def is_default_host(base_url: str, default_host: str) -> bool:
    """Whether ``base_url`` points at the vendor's own API host (no discovery there)."""
    return (urlsplit(base_url).hostname or "").lower() == default_host


def as_dict(value: object) -> dict[str, Any]:
    """A shallow dict copy of a wire message or block given as a dict or an SDK model.

    Raises:
        ConfigurationError: ``value`` is neither a mapping nor a pydantic-style model.
    """
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump(mode="json", exclude_none=True)
        if isinstance(dumped, dict):
            return dumped
    raise ConfigurationError(
        f"expected a message as a dict or an SDK model, got {type(value).__name__}"
    )


# --------------------------------------------------------------------------- answers


def malformed(detail: str, *, status: int | None = None) -> ProviderError:
    """The error for a success answer that is not a response: a transient failure.

    Args:
        detail: what is wrong with it, in words.
        status: the HTTP status it came with.
    """
    return ProviderError(
        Failure(
            kind=FailureKind.MALFORMED_RESPONSE,
            retryable=True,
            status=status,
            message=f"malformed response: {detail}",
            code="malformed_response",
        )
    )


def incomplete(detail: str, *, status: int | None = None) -> ProviderError:
    """The error for an answer that ended without a finish reason: nothing of it is used
    (its text may be cut short, its tool arguments cut off), and it is retried."""
    return ProviderError(
        Failure(
            kind=FailureKind.MALFORMED_RESPONSE,
            retryable=True,
            status=status,
            message=f"incomplete response: {detail}; it was not used",
            code="incomplete_response",
        )
    )


@contextlib.contextmanager
def reading(api_error: type[BaseException], *, status: int | None) -> Iterator[None]:
    """Read a success answer: the SDK's errors (a streamed error event, a dropped
    connection) are classified; anything else raised while parsing or assembling it
    means the body was not a whole answer.

    Args:
        api_error: the SDK's root API error class.
        status: the HTTP status the answer came with.
    """
    try:
        yield
    except ProviderError:
        raise
    except api_error as exc:
        raise ProviderError(classify_failure(exc)) from exc
    except Exception as exc:
        text = str(exc)
        if len(text) > 200:
            text = text[:200] + "..."
        raise malformed(f"{type(exc).__name__}: {text}", status=status) from exc


def field(value: object, name: str) -> object:
    """``value.name`` of an SDK model, or ``value[name]`` of a mapping; None if absent."""
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def count_field(value: object, name: str, where: str, *, status: int | None) -> int | None:
    """A token count read from ``value``: an int, or None when the server left it out
    or reported one below 0 (no count; the answer itself stays usable).

    Raises:
        ProviderError: ``MALFORMED_RESPONSE`` for a count that is not a whole number.
    """
    count = field(value, name)
    if count is None:
        return None
    if isinstance(count, bool) or not isinstance(count, int):
        raise malformed(f"{where}.{name} is {count!r}, not a token count", status=status)
    return count if count >= 0 else None


def is_object(value: object) -> bool:
    """Whether ``value`` is a JSON object: a mapping, or an SDK model built from one."""
    return isinstance(value, Mapping) or callable(getattr(value, "model_dump", None))


class ModelInfoSource:
    """Resolves a provider's ModelInfo once: explicit, discovered, catalog, fallback.

    Args:
        model: the model name.
        explicit: the caller's ModelInfo (its fields win).
        discover: whether to ask the endpoint at ``base_url``.
        base_url: the endpoint the SDK client talks to.
        api_key: sent to the endpoint's discovery routes.
        timeout: seconds for the whole discovery.
    """

    def __init__(
        self,
        model: str,
        *,
        explicit: ModelInfo | None,
        discover: bool,
        base_url: str,
        api_key: str | None,
        timeout: float,
    ) -> None:
        if explicit is not None and not isinstance(explicit, ModelInfo):
            raise ConfigurationError(
                f"model_info must be a windowguard ModelInfo, got {type(explicit).__name__}"
            )
        self._model = model
        self._explicit = explicit
        self._discover = discover
        self._base_url = base_url
        self._api_key = api_key
        self._timeout = timeout
        self._lock = threading.Lock()
        self._resolved: ModelInfo | None = None

    def get(self) -> ModelInfo:
        """The merged ModelInfo, discovering (synchronously, bounded) on first use."""
        if self._resolved is not None:
            return self._resolved
        with self._lock:
            if self._resolved is None:
                self._resolved = self._resolve(self._discovered())
            return self._resolved

    async def aget(self) -> ModelInfo:
        """Async twin of :meth:`get`: discovery runs without blocking the event loop."""
        if self._resolved is not None:
            return self._resolved
        discovered: ModelInfo | None = None
        if self._wants_discovery():
            try:
                discovered = await adiscover_model_info(
                    self._base_url, self._model, api_key=self._api_key, timeout=self._timeout
                )
            except WindowGuardError:
                discovered = None
        resolved = self._resolve(discovered)
        with self._lock:
            if self._resolved is None:
                self._resolved = resolved
            return self._resolved

    def _wants_discovery(self) -> bool:
        # An explicit context window settles the question; there is nothing to ask.
        return self._discover and self._explicit is None

    def _discovered(self) -> ModelInfo | None:
        if not self._wants_discovery():
            return None
        try:
            return discover_model_info(
                self._base_url, self._model, api_key=self._api_key, timeout=self._timeout
            )
        except WindowGuardError:  # a base URL discovery cannot use: no discovery
            return None

    def _resolve(self, discovered: ModelInfo | None) -> ModelInfo:
        return resolve_model_info(self._model, model_info=self._explicit, discovered=discovered)


class CounterSource:
    """Finds the count API of a provider's endpoint once (remote exact counts).

    A vendor's own host has a known count API (Anthropic ``count_tokens``, OpenAI
    ``responses/input_tokens``); any other endpoint is probed with
    :func:`windowguard.accounting.remote.discover_counter`, passing the chat template of
    the model's tokenizer family so text-only count APIs (llama-cpp-python) can count
    chats. Never raises for what a server does: no API found is None.

    Args:
        model: the model name.
        base_url: the endpoint the SDK client talks to.
        api_key: sent to the count routes.
        vendor: ``"anthropic"`` or ``"openai"`` when ``base_url`` is the vendor's own
            host (no probing), else None.
        family: the model's tokenizer family, when known.
        timeout: seconds for the whole discovery.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None,
        vendor: str | None,
        family: Callable[[], str | None],
        timeout: float,
    ) -> None:
        self._model = model
        self._base_url = base_url
        self._api_key = api_key
        self._vendor = vendor
        self._family = family
        self._timeout = timeout
        self._lock = threading.Lock()
        self._done = False
        self._counter: RemoteCounter | None = None

    def get(self) -> RemoteCounter | None:
        """The endpoint's count API, found (synchronously, bounded) on first use."""
        with self._lock:
            if not self._done:
                self._counter = self._find()
                self._done = True
            return self._counter

    async def aget(self) -> RemoteCounter | None:
        """Async twin of :meth:`get`: probing runs without blocking the event loop."""
        if self._done:
            return self._counter
        counter = self._vendor_counter()
        if counter is None and self._vendor is None:
            try:
                counter = await adiscover_counter(
                    self._base_url,
                    self._model,
                    api_key=self._api_key,
                    timeout=self._timeout,
                    template=self._template(),
                )
            except WindowGuardError:
                counter = None
        with self._lock:
            if not self._done:
                self._counter, self._done = counter, True
            return self._counter

    def _template(self) -> str | None:
        template = TEMPLATE_OF.get(self._family() or "")
        return template if template in TEXT_TEMPLATES else None

    def _vendor_counter(self) -> RemoteCounter | None:
        if self._vendor == "anthropic":
            return AnthropicCountTokens(self._base_url, api_key=self._api_key)
        if self._vendor == "openai":
            return OpenAIInputTokens(self._base_url, api_key=self._api_key)
        return None

    def _find(self) -> RemoteCounter | None:
        if self._vendor is not None:
            return self._vendor_counter()
        try:
            return discover_counter(
                self._base_url,
                self._model,
                api_key=self._api_key,
                timeout=self._timeout,
                template=self._template(),
            )
        except WindowGuardError:  # a base URL discovery cannot use: no counter
            return None


class OwnsClient:
    """Closing for a sync provider: only a client the provider built is closed."""

    _client: Any
    _owns_client: bool

    def close(self) -> None:
        """Close the SDK client if this provider built it (a client you passed is yours)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class OwnsAsyncClient:
    """Closing for an async provider: only a client the provider built is closed."""

    _client: Any
    _owns_client: bool

    async def aclose(self) -> None:
        """Close the SDK client if this provider built it (a client you passed is yours)."""
        if self._owns_client:
            await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class SdkProvider:
    """What every SDK-backed provider shares: its model, its client and its limits.

    Subclasses call :meth:`_init_sdk` from their constructor; the limits resolve once,
    in the order explicit, discovered (only from endpoints other than the vendor's
    own ``default_host`` unless ``discover`` says otherwise), catalog, fallback.
    """

    _model: str
    _client: Any
    _info: ModelInfoSource
    _counter: CounterSource

    def _init_sdk(
        self,
        model: str,
        client: Any,
        *,
        default_host: str,
        vendor: str,
        api_key: str | None,
        model_info: ModelInfo | None,
        discover: bool | None,
        discovery_timeout: float,
    ) -> None:
        self._model = check_model(model)
        endpoint = str(client.base_url)
        key = client.api_key if isinstance(client.api_key, str) else api_key
        vendor_host = is_default_host(endpoint, default_host)
        self._info = ModelInfoSource(
            self._model,
            explicit=model_info,
            discover=not vendor_host if discover is None else discover,
            base_url=endpoint,
            api_key=key,
            timeout=discovery_timeout,
        )
        self._counter = CounterSource(
            self._model,
            base_url=endpoint,
            api_key=key,
            vendor=vendor if vendor_host else None,
            family=lambda: self._info.get().tokenizer,
            timeout=discovery_timeout,
        )

    @property
    def model(self) -> str:
        """The model name sent with every request."""
        return self._model

    @property
    def client(self) -> Any:
        """The SDK client the provider sends with."""
        return self._client

    def model_info(self) -> ModelInfo:
        """The model's limits: explicit, discovered, catalog, fallback, in that order.

        Discovery happens once, bounded by ``discovery_timeout``, and never raises.
        """
        return self._info.get()

    def count_endpoint(self) -> RemoteCounter | None:
        """The endpoint's own token-count API (found once, never raising), for exact
        counts near the edge; a ``ToolLoop`` hands it to its manager."""
        return self._counter.get()
