"""Exact token counters: the optional replacement for the estimator's heuristic.

A :class:`TokenCounter` is anything with ``count(text) -> int``. When a caller gives
one to the :class:`~windowguard.accounting.estimate.Estimator` (or the manager), the text of
every segment is counted exactly with it; the per-message framing is still added
by the estimator, because a tokenizer alone does not know a chat template.

Two implementations wrap the usual libraries, both optional extras imported only
when a counter is built:

* :class:`TiktokenCounter` -- OpenAI's BPE (``cl100k_base``, ``o200k_base`` ...), from
  a ``tiktoken.Encoding``, an encoding name, or a local ``.tiktoken`` vocabulary file
  (machines without network access cannot let tiktoken download it).
* :class:`HFTokenizerCounter` -- a Hugging Face ``tokenizers.Tokenizer`` or a
  ``tokenizer.json`` path (Qwen, Llama, Mistral ... as vLLM serves them).
* :class:`QuickTokCounter` -- an encoding of ``quicktok`` (the ``quicktok-v1``
  package), a C++ BPE that is 5-10x faster; windowguard prefers it for the families
  where it is identical to the reference tokenizer (o200k, cl100k, Qwen3; not Llama 3,
  where it splits some words differently from Meta's tokenizer).

A counter may also have ``count_batch(texts) -> list[int]`` (every class here does):
:func:`count_texts` uses it to count many texts in one call, with the same results as
counting them one by one.

Invariants: counting never adds special tokens (BOS/EOS) and treats text that looks
like a special token (``<|endoftext|>``) as ordinary text, the way chat servers
tokenize message content.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..core.exceptions import ConfigurationError

__all__ = [
    "BatchTokenCounter",
    "HFTokenizerCounter",
    "QuickTokCounter",
    "TiktokenCounter",
    "TokenCounter",
    "count_texts",
    "load_counter",
]

_TIKTOKEN_HINT = 'exact OpenAI token counting needs tiktoken: pip install "windowguard[tiktoken]"'
_TOKENIZERS_HINT = (
    'exact Hugging Face token counting needs tokenizers: pip install "windowguard[tokenizers]"'
)

# tiktoken's own split patterns and special tokens (tiktoken_ext/openai_public.py), so a
# vocabulary loaded from a local file encodes exactly like tiktoken.get_encoding(name).
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_ENCODING_SPECS: Mapping[str, tuple[str, Mapping[str, int]]] = {
    "cl100k_base": (
        _CL100K_PATTERN,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": (_O200K_PATTERN, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a piece of text exactly, without special tokens."""

    def count(self, text: str) -> int:
        """Return the number of tokens ``text`` encodes to."""
        ...


@runtime_checkable
class BatchTokenCounter(TokenCounter, Protocol):
    """A :class:`TokenCounter` that also counts many texts in one call."""

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Return ``[count(text) for text in texts]``, computed faster."""
        ...


# Below this many characters in all, a batch is counted text by text: starting a batch
# (a thread pool in tiktoken, a parallel pass in tokenizers) costs more than it saves.
_BATCH_MIN_CHARS = 16_384
# tiktoken's and quicktok's batches only parallelise the same per-text work; on two
# cores shared with other work they were slower than a plain loop (a 200k-token window:
# tiktoken 73 ms in a loop, 148-173 ms batched; quicktok 10 ms against 14 ms;
# bench/bench_tokenizers.py), so they are used from four cores up. Hugging Face
# tokenizers' batch is faster even there (707 -> 487 ms) and is always used.
PARALLEL_BATCHES = (os.cpu_count() or 1) >= 4


def count_texts(counter: TokenCounter, texts: Sequence[str]) -> list[int]:
    """The token counts of ``texts``: one batch when the counter can batch, else one by
    one (the same numbers either way)."""
    batch = getattr(counter, "count_batch", None)
    if callable(batch) and len(texts) > 1:
        return list(batch(texts))
    return [counter.count(text) for text in texts]


def _import_tiktoken() -> Any:
    try:
        import tiktoken
        import tiktoken.load
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(_TIKTOKEN_HINT) from exc
    return tiktoken


def _import_tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(_TOKENIZERS_HINT) from exc
    return tokenizers


class TiktokenCounter:
    """A :class:`TokenCounter` over a tiktoken encoding.

    Args:
        encoding: a ``tiktoken.Encoding`` or an encoding name tiktoken knows
            (``"o200k_base"``; names tiktoken must download need network access --
            use :meth:`from_file` offline).

    Raises:
        ImportError: tiktoken is not installed.
        ConfigurationError: the encoding name is unknown or cannot be loaded.
    """

    __slots__ = ("_encoding",)

    def __init__(self, encoding: object) -> None:
        tiktoken = _import_tiktoken()
        if isinstance(encoding, str):
            try:
                encoding = tiktoken.get_encoding(encoding)
            except Exception as exc:
                raise ConfigurationError(
                    f"tiktoken cannot load the encoding {encoding!r} ({exc}); offline, build "
                    "the counter with TiktokenCounter.from_file(path, encoding_name)"
                ) from exc
        if not isinstance(encoding, tiktoken.Encoding):
            raise ConfigurationError(
                f"TiktokenCounter needs a tiktoken.Encoding or an encoding name, "
                f"got {type(encoding).__name__}"
            )
        self._encoding = encoding

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], encoding_name: str) -> TiktokenCounter:
        """Build a counter from a local ``.tiktoken`` vocabulary file.

        Args:
            path: the vocabulary file (e.g. ``o200k_base.tiktoken``).
            encoding_name: ``"cl100k_base"`` or ``"o200k_base"``: selects tiktoken's
                split pattern and special tokens for that vocabulary.

        Returns:
            A counter that encodes exactly like ``tiktoken.get_encoding(encoding_name)``.

        Raises:
            ImportError: tiktoken is not installed.
            ConfigurationError: unknown encoding name, or the file cannot be read.
        """
        tiktoken = _import_tiktoken()
        spec = _ENCODING_SPECS.get(encoding_name)
        if spec is None:
            raise ConfigurationError(
                f"no split pattern known for encoding {encoding_name!r}; "
                f"known: {', '.join(sorted(_ENCODING_SPECS))}"
            )
        pattern, special_tokens = spec
        try:
            ranks = tiktoken.load.load_tiktoken_bpe(os.fspath(path))
        except Exception as exc:
            raise ConfigurationError(f"cannot read tiktoken vocabulary {path!s}: {exc}") from exc
        encoding = tiktoken.Encoding(
            name=encoding_name,
            pat_str=pattern,
            mergeable_ranks=ranks,
            special_tokens=dict(special_tokens),
        )
        return cls(encoding)

    @property
    def name(self) -> str:
        """The encoding's name."""
        return str(self._encoding.name)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token lookalikes are encoded as ordinary text."""
        return list(self._encoding.encode_ordinary(text))

    def count(self, text: str) -> int:
        """Number of tokens of ``text``."""
        return len(self._encoding.encode_ordinary(text))

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Token counts of ``texts`` (tiktoken's threaded batch for large batches on four
        cores or more)."""
        if not PARALLEL_BATCHES or sum(map(len, texts)) < _BATCH_MIN_CHARS:
            return [len(self._encoding.encode_ordinary(text)) for text in texts]
        return [len(ids) for ids in self._encoding.encode_ordinary_batch(list(texts))]

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.name!r})"


class HFTokenizerCounter:
    """A :class:`TokenCounter` over a Hugging Face ``tokenizers.Tokenizer``.

    Args:
        tokenizer: a ``tokenizers.Tokenizer`` or the path of a ``tokenizer.json``.

    Raises:
        ImportError: tokenizers is not installed.
        ConfigurationError: the file cannot be loaded or the object is not a tokenizer.
    """

    __slots__ = ("_tokenizer",)

    def __init__(self, tokenizer: object) -> None:
        tokenizers = _import_tokenizers()
        if isinstance(tokenizer, (str, os.PathLike)):
            try:
                tokenizer = tokenizers.Tokenizer.from_file(os.fspath(tokenizer))
            except Exception as exc:
                raise ConfigurationError(
                    f"cannot load tokenizer file {tokenizer!s}: {exc}"
                ) from exc
        if not isinstance(tokenizer, tokenizers.Tokenizer):
            raise ConfigurationError(
                "HFTokenizerCounter needs a tokenizers.Tokenizer or a tokenizer.json path, "
                f"got {type(tokenizer).__name__}"
            )
        self._tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without added special tokens."""
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def count(self, text: str) -> int:
        """Number of tokens of ``text``."""
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Token counts of ``texts`` (tokenizers' parallel batch for large batches)."""
        if sum(map(len, texts)) < _BATCH_MIN_CHARS:
            return [self.count(text) for text in texts]
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [len(encoding.ids) for encoding in encodings]

    def __repr__(self) -> str:
        return "HFTokenizerCounter(...)"


class QuickTokCounter:
    """A :class:`TokenCounter` over a ``quicktok`` encoding (package ``quicktok-v1``).

    Args:
        name: a bundled quicktok encoding (``"o200k_base"``, ``"cl100k_base"``,
            ``"qwen3"`` ...).
        with_special: count the vocabulary's added tokens written in the text as one
            token each, as Hugging Face ``tokenizers`` does (Qwen3's ``<tool_call>``,
            ``<|im_end|>``); False treats them as text, as tiktoken's
            ``encode_ordinary`` does.

    Raises:
        ImportError: quicktok is not installed.
        ConfigurationError: quicktok has no such encoding.
    """

    __slots__ = ("_count_batch", "_encoding", "_with_special", "name")

    def __init__(self, name: str, *, with_special: bool = False) -> None:
        try:
            quicktok: Any = importlib.import_module("quicktok")
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                'quicktok counting needs quicktok: pip install "windowguard[exact]"'
            ) from exc
        try:
            self._encoding = quicktok.get_encoding(name)
        except Exception as exc:
            raise ConfigurationError(f"quicktok has no encoding {name!r}: {exc}") from exc
        self._count_batch = quicktok.count_batch
        self._with_special = with_special
        self.name = name

    def count(self, text: str) -> int:
        """Number of tokens of ``text``."""
        if self._with_special:
            return len(self._encoding.encode_with_special(text))
        return int(self._encoding.count(text))

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """Token counts of ``texts`` (quicktok's parallel batch for large batches on four
        cores or more)."""
        if not PARALLEL_BATCHES or sum(map(len, texts)) < _BATCH_MIN_CHARS:
            return [self.count(text) for text in texts]
        counts = self._count_batch(self._encoding, list(texts), 0, self._with_special)
        return [int(n) for n in counts]

    def __repr__(self) -> str:
        return f"QuickTokCounter({self.name!r})"


def load_counter(spec: object) -> TokenCounter:
    """Build a :class:`TokenCounter` from whatever names one.

    Args:
        spec: a TokenCounter (returned as is); a ``tiktoken.Encoding``; a
            ``tokenizers.Tokenizer``; a ``tokenizer.json`` path; a ``.tiktoken`` file path
            whose stem is the encoding name (``o200k_base.tiktoken``); a
            ``(path, encoding_name)`` pair; or a tiktoken encoding name.

    Returns:
        A counter.

    Raises:
        ConfigurationError: the spec names nothing we can load.
        ImportError: the library the spec needs is not installed.
    """
    if isinstance(spec, (TiktokenCounter, HFTokenizerCounter, QuickTokCounter)):
        return spec
    if isinstance(spec, tuple) and len(spec) == 2:
        path, name = spec
        if isinstance(path, (str, os.PathLike)) and isinstance(name, str):
            return TiktokenCounter.from_file(path, name)
    if isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec)
        if text.endswith(".json"):
            return HFTokenizerCounter(text)
        if text.endswith(".tiktoken"):
            return TiktokenCounter.from_file(text, Path(text).stem)
        if isinstance(spec, str) and os.sep not in text:
            return TiktokenCounter(text)
        raise ConfigurationError(
            f"cannot tell what tokenizer {text!r} is: give a tokenizer.json, a "
            "<encoding>.tiktoken file, or a tiktoken encoding name"
        )
    module = type(spec).__module__.split(".")[0]
    if module == "tiktoken":
        return TiktokenCounter(spec)
    if module == "tokenizers":
        return HFTokenizerCounter(spec)
    if isinstance(spec, TokenCounter):
        return spec
    raise ConfigurationError(
        f"cannot build a token counter from {type(spec).__name__}: give a TokenCounter, a "
        "tiktoken.Encoding, a tokenizers.Tokenizer, a tokenizer.json or .tiktoken path, or "
        "an encoding name"
    )
