"""Model limits: ModelInfo and the built-in catalog.

(Skeleton: the catalog work fills in the table, overrides and lookup.)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ModelInfo", "lookup_model"]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A model's token limits and where they came from.

    Attributes:
        context_window: total tokens the model accepts, prompt plus output.
        max_output_tokens: the largest reply the model may produce, if capped.
        max_input_tokens: the largest prompt, when it is below the window
            (gpt-5: 272k input in a 400k window).
        tokenizer: the tokenizer family the estimator's priors come from
            (``"o200k"``, ``"cl100k"``, ``"claude"``, ``"gemini"``, ``"llama3"`` ...).
        source: where the numbers came from (``"explicit"``, ``"override"``,
            ``"discovered"``, ``"litellm"``, ``"catalog"``, ``"fallback"``).
    """

    context_window: int
    max_output_tokens: int | None = None
    max_input_tokens: int | None = None
    tokenizer: str | None = None
    source: str = "explicit"


def lookup_model(name: str) -> ModelInfo | None:
    """Return the built-in limits of ``name``, or None when the model is unknown."""
    del name
    return None
