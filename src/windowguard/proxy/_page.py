"""The proxy's live page: the conversations it guards, their pressure over time, their
edits, shrinks and refusals, and the upstream's errors.

Routes (``--page``, :data:`~.config.PAGE_MODES`):

- ``GET /windowguard/`` (and ``/windowguard``): the page, one HTML file shipped in the
  package (``_page.html``: inline CSS and vanilla JavaScript, no build step, nothing
  fetched from anywhere but the proxy). It draws an inline SVG chart and polls
  ``GET /windowguard/state.json`` every 2 s.
- ``GET /windowguard/state.json``: :meth:`Page.state`, the
  :class:`~._recorder.ConversationRecorder`'s snapshot with the proxy's counters
  (``/metrics``) and what it knows of its upstream.
- ``GET /`` with ``--page root`` (the default): the page, for a request that accepts
  ``text/html`` (a browser). Any other request for ``/`` (``curl``, an SDK, Ollama's
  ``GET /`` health check, a ``POST``) passes through to the upstream as before. With
  ``--page path`` the page is only at ``/windowguard/`` and ``/`` always passes through
  (an upstream with its own web page there, as llama.cpp's server has); with
  ``--page off`` none of these is served and every one of them passes through.

Invariants:

- The page shows no message content and no secret: the state holds conversation ids
  (a digest's prefix), API and model names, numbers and times (see
  :mod:`._recorder`), and the upstream's URL without any user or password in it.
- The page inserts every value as text (``textContent``, ``setAttribute``), never as
  markup, and its Content-Security-Policy admits only its own inline script and style
  (by hash) and requests to the proxy itself: nothing outside can be loaded or run.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Awaitable, Callable
from functools import lru_cache
from importlib import resources
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ._recorder import ConversationRecorder
from .config import PAGE_MODES, PageMode, ProxyConfig, UpstreamInfo
from .metrics import ProxyMetrics

__all__ = ["PAGE_MODES", "PAGE_PATH", "STATE_PATH", "Page", "PageMode", "page_html"]

PAGE_PATH: Final = "/windowguard/"
STATE_PATH: Final = "/windowguard/state.json"

_NO_STORE: Final = {"cache-control": "no-store", "x-content-type-options": "nosniff"}

Endpoint = Callable[[HttpRequest], Awaitable[Response]]


@lru_cache(maxsize=1)
def page_html() -> str:
    """The page's HTML, as shipped in the package."""
    return resources.files("windowguard.proxy").joinpath("_page.html").read_text("utf-8")


@lru_cache(maxsize=1)
def _page_headers() -> dict[str, str]:
    html = page_html()
    scripts = " ".join(_hash(text) for text in re.findall(r"<script>(.*?)</script>", html, re.S))
    styles = " ".join(_hash(text) for text in re.findall(r"<style>(.*?)</style>", html, re.S))
    policy = (
        f"default-src 'none'; script-src {scripts}; style-src {styles}; connect-src 'self'; "
        "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    return {
        **_NO_STORE,
        "content-security-policy": policy,
        "referrer-policy": "no-referrer",
        "x-frame-options": "DENY",
    }


def _hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def _shown_upstream(root: str) -> str:
    """The upstream's URL without a user or password (``http://user:pw@host`` works)."""
    parts = urlsplit(root)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _wants_html(request: HttpRequest) -> bool:
    """Whether a request for ``/`` is a browser's: it names ``text/html`` in Accept."""
    return "text/html" in request.headers.get("accept", "").lower()


class Page:
    """The page's routes over one proxy's recorder, counters and upstream.

    Args:
        recorder: what the page shows of the conversations.
        metrics: the proxy's counters.
        config: the proxy's settings.
        upstream: what startup discovery found.
    """

    def __init__(
        self,
        recorder: ConversationRecorder,
        metrics: ProxyMetrics,
        config: ProxyConfig,
        upstream: UpstreamInfo,
    ) -> None:
        self.recorder = recorder
        self.metrics = metrics
        self.config = config
        self.upstream = upstream

    async def page(self, request: HttpRequest) -> Response:
        """The page (``GET /windowguard/``)."""
        return Response(page_html(), media_type="text/html", headers=_page_headers())

    async def state(self, request: HttpRequest) -> Response:
        """The page's data (``GET /windowguard/state.json``)."""
        return JSONResponse(self.snapshot(), headers=_NO_STORE)

    def snapshot(self) -> dict[str, Any]:
        """What ``state.json`` answers: the recorder's snapshot, the proxy's counters
        under ``metrics`` and its upstream under ``proxy``."""
        info = self.upstream.model_info
        state = self.recorder.snapshot()
        state["proxy"] = {
            "upstream": _shown_upstream(self.upstream.root),
            "model": self.upstream.model,
            "context_window": info.context_window if info is not None else None,
            "page": self.config.page,
        }
        state["metrics"] = self.metrics.totals()
        return state

    def routes(self, passthrough: Endpoint) -> list[Route]:
        """The page's routes, to go before the catch-all passthrough (none when off).

        A route here answers ``GET`` only: any other method on these paths matches the
        passthrough instead, so it reaches the upstream as before.
        """
        mode = self.config.page
        if mode == "off":
            return []
        routes = [
            Route(STATE_PATH, self.state, methods=["GET"]),
            Route(PAGE_PATH, self.page, methods=["GET"]),
            Route(PAGE_PATH.rstrip("/"), self.page, methods=["GET"]),
        ]
        if mode == "root":

            async def root(request: HttpRequest) -> Response:
                if _wants_html(request):
                    return await self.page(request)
                return await passthrough(request)

            routes.append(Route("/", root, methods=["GET"]))
        return routes
