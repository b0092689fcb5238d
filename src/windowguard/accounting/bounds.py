"""Guaranteed upper bounds of what a message or a tool block adds to a prompt.

A byte-level BPE (tiktoken's o200k and cl100k, Llama 3/4, Qwen, Mistral Tekken) never
emits more tokens than the UTF-8 bytes it is shown, so the bytes a chat template shows
bound the tokens, plus the template's framing. The edge rule (decision 0004) decides on
such bounds whenever an exact source exists: a send whose measured part plus the bounds
of the rest stays within the budget fits for certain, with nothing counted.

These are the bounds the manager uses; :class:`~windowguard.accounting.estimate.Estimator` computes
them in the same pass as its estimate where it can (``message_costs``), and this module
falls back to a looser bound of its own for an estimator that does not.

Media have no bound. A provider charges an image by its pixels, per model (from 85
tokens to about 3,800 on gpt-4.1-nano, 48,000 on gpt-4o-mini, 16,384 on Qwen2.5-VL at
vLLM's default ``max_pixels``), a document by its pages and audio by its length, and no
message shows any of that in its bytes. The bounds and the local counts carry a fixed
allowance per media item (1,600 tokens, about Claude's largest image), an estimate:
only a usage report, or a count API that counts media as the provider charges them,
measures one (:func:`unbounded_media`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Final

from ..core.shapes import Shape
from .estimate import Estimator

if TYPE_CHECKING:
    from .ledger import Ledger

__all__ = ["message_costs", "request_bound", "tools_costs", "unbounded_media"]

# The fallback: every byte a template might show may be escaped (\\uXXXX is six bytes for
# a three-byte character: at most three times its UTF-8 length), plus framing.
_PER_BYTE: Final = 3
_PER_MESSAGE: Final = 48
_PER_SEGMENT: Final = 24
_PER_TOOL: Final = 96
_REQUEST: Final = 96
_MEDIA: Final = 1_600  # an allowance per media item, not a bound (module docstring)


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def message_costs(estimator: Estimator) -> Callable[[Shape], tuple[int, int]]:
    """``shape -> (estimate, bound)`` for ``estimator``'s family."""
    costs = getattr(estimator, "message_costs", None)
    if callable(costs):
        return costs  # type: ignore[no-any-return]
    estimate = estimator.message_tokens

    def fallback(shape: Shape) -> tuple[int, int]:
        bound = _PER_MESSAGE + _MEDIA * shape.media_items
        for segment in shape.segments:
            bound += _PER_BYTE * _utf8(segment.text) + _PER_SEGMENT
        return estimate(shape), bound

    return fallback


def tools_costs(estimator: Estimator, tools: Sequence[object]) -> tuple[int, int]:
    """``(estimate, bound)`` of a tool block."""
    costs = getattr(estimator, "tools_costs", None)
    if callable(costs):
        found: tuple[int, int] = costs(tools)
        return found
    text = json.dumps(list(tools), default=_dump, ensure_ascii=False)
    return estimator.tools_tokens(tools), _PER_BYTE * _utf8(text) + _PER_TOOL * len(tools)


def request_bound(estimator: Estimator) -> int:
    """The bound of one request's framing."""
    bound = getattr(estimator, "request_bound", None)
    if isinstance(bound, int):
        return max(bound, estimator.request_tokens)
    return max(_REQUEST, 2 * estimator.request_tokens)


def unbounded_media(
    ledger: Ledger, key: Hashable, head_stop: int, kept_from: int, end: int
) -> bool:
    """Whether the request of base ``key``, head ``entries[:head_stop]`` and
    ``entries[kept_from:end]`` holds a media item nothing has measured: its count is
    then no guarantee, whatever the bounds say (module docstring).

    The head is measured once its base is; the rest is measured up to
    :meth:`~windowguard.accounting.ledger.Ledger.gap` (a span the request cuts, or one
    measured with another base, counts as unmeasured: its members are read in part).
    """
    entries = ledger.entries
    if key not in ledger.bases and any(entries[i].shape.media_items for i in range(head_stop)):
        return True
    start = ledger.gap(kept_from, end, key)
    return any(entries[i].shape.media_items for i in range(start, end))


def _dump(value: object) -> object:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)
    return repr(value)
