"""``windowguard proxy``: an OpenAI- and Anthropic-compatible proxy that fits every request.

Agents that cannot be changed (Codex CLI, aider, Cline, a vendor's binary) still take a
base URL. Point it at the proxy, and the proxy at the real server::

    windowguard proxy --upstream http://127.0.0.1:8000      # vLLM, llama.cpp, Ollama ...
    OPENAI_BASE_URL=http://127.0.0.1:8788/v1 my-agent

Each ``POST /v1/chat/completions``, ``/v1/responses`` and ``/v1/messages`` is fitted
exactly as :func:`windowguard.guard` fits the SDK call its body stands for (oldest whole
turns out, head and newest turn kept, the reply budget fitted, the tools counted), then
forwarded; streams pass through as they arrive. Every other path passes through
untouched. A browser pointed at the proxy (``GET /``, or ``/windowguard/``) gets a live
page of the conversations it guards. See ``docs/proxy.md``.

Invariants:

- A request that cannot fit is answered 400 ``context_truncated`` in the API's own
  error shape and never reaches the upstream.
- Per-conversation state (calibration, ledger, low-water cut) lives in memory, keyed by
  the conversation's head, bounded by count and idle time; losing it (a restart,
  another replica) costs only calibration, never correctness.
- The proxy binds 127.0.0.1 unless told otherwise and never logs a credential.
"""

from __future__ import annotations

from .app import ProxyRefused, create_app
from .config import ProxyConfig, UpstreamInfo, discover_upstream
from .metrics import ProxyMetrics
from .server import ProxyServer, serve

__all__ = [
    "ProxyConfig",
    "ProxyMetrics",
    "ProxyRefused",
    "ProxyServer",
    "UpstreamInfo",
    "create_app",
    "discover_upstream",
    "serve",
]
