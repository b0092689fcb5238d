"""What a screenshot-driven agent keeps: clearing whole results (images too) against
dropping whole turns.

A computer-use-style loop in the Anthropic format: each step the assistant writes a
short plan and calls ``screenshot`` (or ``read_page``), and the result is one image
(``--text-share`` of the steps return a page's text with its screenshot instead).
``fit()`` is called before every send, as a loop does; nothing is sent. After each run:

- steps kept: the assistant messages of the last request, of all steps (the agent's own
  reasoning and calls, which a dropped turn loses);
- images sent in the last request; results cleared in the run; sends that dropped turns;
- window use: the last request's estimate over the window.

Rows: the default edits, and ``edits=()`` (drop only). Run this script from another
checkout (``PYTHONPATH=<other>/src python bench/bench_clear_media.py --no-header
--label before``) to put its rows in the same table.

Run: ``bench/run bench_clear_media.py`` (or ``python bench/bench_clear_media.py``).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _corpus
import windowguard as wg

TASK = "Open the admin console, find the user named in ticket 4411 and reset their MFA."
IMAGE = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
}


def step(rng: random.Random, i: int, text_share: float) -> list[dict[str, Any]]:
    plan = " ".join(rng.choice(WORDS) for _ in range(rng.randint(25, 90)))
    with_text = rng.random() < text_share
    name = "read_page" if with_text else "screenshot"
    content: list[Any] = []
    if with_text:
        rows = rng.randint(20, 120)
        content.append(
            {
                "type": "text",
                "text": "\n".join(
                    f"<tr><td>user{rng.randrange(10**5)}</td><td>{rng.choice(WORDS)}</td></tr>"
                    for _ in range(rows)
                ),
            }
        )
    content.append(IMAGE)
    call_id = f"toolu_{i:04d}"
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"Step {i}: {plan}"},
                {"type": "tool_use", "id": call_id, "name": name, "input": {"step": i}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call_id, "content": content}],
        },
    ]


_PHRASE = (
    "click the menu then open settings scroll down until the users table shows the row "
    "and check the status column before the next page loads wait for the spinner"
)
WORDS = tuple(_PHRASE.split(" "))


def run(edits: Any, window: int, steps: int, text_share: float, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    kwargs: dict[str, Any] = {} if edits is None else {"edits": edits}
    manager = wg.ContextWindowManager(
        model_info=wg.ModelInfo(window, max_output_tokens=8_192), **kwargs
    )
    messages: list[Any] = [{"role": "user", "content": TASK}]
    cleared = dropping_sends = 0
    fit = None
    for i in range(steps):
        messages += step(rng, i, text_share)
        fit = manager.fit(messages, max_tokens=1_024, format="anthropic")
        cleared += sum(1 for e in fit.edits if e.kind == "clear")
        dropping_sends += fit.dropped_turns > 0
    assert fit is not None
    kept = sum(1 for m in fit.messages if m["role"] == "assistant")
    images = sum(str(m).count("'type': 'image'") for m in fit.messages)
    return {
        "kept": kept,
        "steps": steps,
        "images": images,
        "cleared": cleared,
        "dropping": dropping_sends,
        "use": fit.estimated_tokens / window,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--windows", type=int, nargs="*", default=[32_000, 64_000, 200_000])
    parser.add_argument("--text-share", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--label", default="this checkout")
    parser.add_argument("--no-header", action="store_true")
    args = parser.parse_args()
    if not args.no_header:
        print("### Screenshots in tool results (bench/bench_clear_media.py)\n")
        print(_corpus.environment())
        print(
            f"\n{args.steps} steps, Anthropic format, {args.text_share:.0%} of the results "
            "a page's text with its screenshot, the rest one screenshot; max_tokens=1024.\n"
        )
        print(
            "| code | edits | window | steps kept (last request) | images sent | results "
            "cleared | sends that dropped turns | window use |"
        )
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for window in args.windows:
        for label, edits in (("default", None), ("drop only", ())):
            row = run(edits, window, args.steps, args.text_share, args.seed)
            print(
                f"| {args.label} | {label} | {window:,} | {row['kept']} / {row['steps']} "
                f"| {row['images']} | {row['cleared']} | {row['dropping']} "
                f"| {row['use']:.2f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
