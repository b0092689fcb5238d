"""``windowguard models [NAME] [--discover URL]``: the limits windowguard would use.

Without NAME: the built-in catalog, one row per entry. With NAME: every field of the
merged :class:`~windowguard.ModelInfo` and the source it came from (explicit,
override, discovered, litellm, catalog, family, fallback). ``--discover URL`` asks the
server first, exactly as a provider does. A model nobody knows is an error rather
than a silent 8192.
"""

from __future__ import annotations

import argparse
import json
from importlib import resources
from typing import Any

from ..accounting.catalog import ModelInfo, lookup_model, resolve_model_info
from ..accounting.discovery import discover_endpoint
from ._common import CliError, Output

__all__ = ["register", "run"]

_FIELDS = ("context_window", "max_input_tokens", "max_output_tokens", "tokenizer")


def register(sub: Any, parent: argparse.ArgumentParser) -> None:
    """Add the ``models`` subcommand to ``sub`` (an argparse subparsers action)."""
    parser = sub.add_parser(
        "models",
        parents=[parent],
        help="show catalog and discovered model limits with their sources",
        description="Without NAME, list the built-in catalog. With NAME, show the limits "
        "windowguard resolves for it and where each came from; --discover asks a server.",
    )
    parser.add_argument("name", metavar="NAME", nargs="?", help="a model name")
    parser.add_argument("--discover", metavar="URL", help="ask this server (vLLM, llama.cpp …)")
    parser.add_argument("--api-key", help="key for --discover")
    parser.add_argument("--timeout", type=float, default=5.0, help="discovery timeout (s)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run)


def _catalog_names() -> list[str]:
    raw = (resources.files("windowguard") / "data" / "catalog.json").read_text("utf-8")
    return [item["keys"][0] for item in json.loads(raw)["models"]]


def _info_dict(name: str, info: ModelInfo) -> dict[str, Any]:
    fields = {f: getattr(info, f) for f in _FIELDS}
    return {
        "model": name,
        **fields,
        "sources": {f: info.source_of(f) for f in _FIELDS if fields[f] is not None},
        "source": info.source,
        "origin": info.origin,
    }


def _show(value: object) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def run(args: argparse.Namespace) -> int:
    """Run ``windowguard models``; returns the exit status.

    Raises:
        CliError: an unknown model, or nothing discovered at the URL (an unreachable
            server is named as such, with the URL tried and the operating system's error).
    """
    out = Output(plain=args.plain)
    if args.name is None:
        if args.discover:
            raise CliError("--discover needs a model NAME")
        infos = [(n, lookup_model(n)) for n in _catalog_names()]
        known = [_info_dict(n, i) for n, i in infos if i is not None]
        if args.json:
            print(json.dumps(known, indent=1))
            return 0
        rows = [[d["model"], *(_show(d[f]) for f in _FIELDS)] for d in known]
        out.table(
            ["model", "window", "max input", "max output", "tokenizer"],
            rows,
            title=f"built-in catalog ({len(rows)} models; unknown members of a family get "
            "its defaults, unknown models 8,192)",
            right=(1, 2, 3),
        )
        return 0
    discovered = None
    if args.discover:
        found = discover_endpoint(
            args.discover, args.name, api_key=args.api_key, timeout=args.timeout
        )
        discovered = found.info
        if discovered is None:
            raise CliError(f"--discover {args.discover}: {found.problem}")
    info = resolve_model_info(args.name, discovered=discovered)
    if info.source_of("context_window") == "fallback":
        raise CliError(
            f"unknown model {args.name!r}: not in the catalog or overrides; windowguard "
            f"would assume {info.context_window} tokens (use --discover URL or an override)"
        )
    data = _info_dict(args.name, info)
    if args.json:
        print(json.dumps(data, indent=1))
        return 0
    rows = [
        [f, _show(data[f]), data["sources"].get(f, "-")] for f in _FIELDS if data[f] is not None
    ]
    title = f"{args.name}" + (f" (from {info.origin})" if info.origin else "")
    out.table(["field", "value", "source"], rows, title=title, right=(1,))
    return 0
