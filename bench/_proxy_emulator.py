"""The upstream of ``bench_proxy.py``: the emulator in its own process, counting what reaches it.

Serves windowguard's emulator (vLLM flavour, ``echo`` scenario, exact counting,
``/tokenize``) on 127.0.0.1 and tallies every model call by outcome: ``served``, or
refused as a ``context_overflow`` (prompt + ``max_tokens`` over the window: the 400 the
emulator answers, as vLLM does), or ``status_<N>`` for any other refusal; and
``count_calls``, the token counts asked of its count API (what a proxy asks near the
edge). Each line ``stats`` read on standard input is answered with one JSON line of the
tallies so far, so the bench can take the difference over each of its phases; end of
input stops the server.

Run by ``bench_proxy.py``: ``python bench/_proxy_emulator.py --port N --window W``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

from windowguard import FailureKind, classify_failure
from windowguard.core.provider_errors import WireError
from windowguard.emulator import Emulator
from windowguard.emulator import counting as _counting


class CountingEmulator(Emulator):
    """The emulator, with a tally of its model calls by outcome."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tally: Counter[str] = Counter()
        self.tally_lock = threading.Lock()

    def handle_model_call(
        self, path: str, body: Any, headers: Mapping[str, str]
    ) -> WireError | tuple[Any, Any]:
        result = super().handle_model_call(path, body, headers)
        if not isinstance(result, WireError):
            outcome = "served"
        elif (
            classify_failure(status=result.status, body=result.body).kind
            is FailureKind.CONTEXT_OVERFLOW
        ):
            outcome = "context_overflow"
        else:
            outcome = f"status_{result.status}"
        with self.tally_lock:
            self.tally[outcome] += 1
        return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--window", type=int, required=True)
    parser.add_argument("--model", default="emulated-model")
    args = parser.parse_args()

    emulator = CountingEmulator(
        flavor="vllm",
        context_window=args.window,
        model=args.model,
        scenario="echo",
        port=args.port,
    )
    # The count API is served outside handle_model_call: count its calls where the
    # server hands them over (this process only).
    count = _counting.handle

    def counted(*call: Any, **named: Any) -> Any:
        with emulator.tally_lock:
            emulator.tally["count_calls"] += 1
        return count(*call, **named)

    _counting.handle = counted
    with emulator:
        for line in sys.stdin:
            if line.strip() == "stats":
                with emulator.tally_lock:
                    tally = dict(emulator.tally)
                print(json.dumps(tally), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
