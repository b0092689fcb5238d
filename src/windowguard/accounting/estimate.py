"""The over-counting token estimator, and a guaranteed upper bound beside it.

The tool-loop design estimates without a tokenizer: characters divided by 3.5 for prose and by
2.5 for dense machine text, plus per-message and per-tool-call overheads, times a
calibration factor seeded above 1.0 that only ever rises toward what the provider
reports. Fixed ratios under-count text that tokenizes densely, so the heuristic here
prices a text by byte-level features laid out after the tokenizers' pre-token rules
(:mod:`windowguard.accounting._estimate_features`):

    estimate(text) = min(ceiling, ceil(w · features(text) x 17/16) + 1)

Every pre-token start (a letter after punctuation, a digit or a space, punctuation after
a letter, a newline after anything else, each digit group, the second space of a run,
each multi-byte character) costs at least one token, and letters after the first cost
at least what the worst family spends per letter on words it never saw, so the
heuristic errs high by construction; the weights (``data/priors.json``, fitted per
family by ``bench/fit_priors.py``) add what the corpus and generated content classes
need above those floors. ``ceiling`` is the UTF-8 length plus five bytes per control
character.

Beside the estimate, :meth:`Estimator.message_costs` and :meth:`Estimator.tools_costs`
give, in the same pass, a **bound**: at least the tokens the message (or tool block)
adds in every byte-level BPE family's chat template (OpenAI's o200k/cl100k accounting,
Llama 3/4, Qwen, Mistral Tekken), whatever the content, since such a tokenizer never
emits more tokens than the UTF-8 bytes it is shown. The bound is those bytes (after
NFC, which Qwen applies first) plus what templates add: JSON escapes of tool results
and arguments, ``", "``/``": "`` and re-printed numbers of re-serialised arguments,
``\\uXXXX`` where llama-models writes ``json.dumps`` with ``ensure_ascii=True``, the
framing of every message, tool result and call. Media items get a fixed allowance,
which bounds nothing (a provider charges them by pixels, pages and seconds, which no
message shows): the bound covers text only (:mod:`windowguard.accounting.bounds`).
For Claude, Gemini, DeepSeek and the unknown family (no offline tokenizer) it adds one
token per segment (SentencePiece's dummy prefix) and is *not proven*.

Invariants:
    * every weight is >= 0 and every feature never decreases under appending, so a
      text's estimate never decreases when characters are appended;
    * tool-schema estimates are monotone: adding a tool, property, enum value or
      required name, or appending to a description, never lowers them;
    * the raw estimate of a request is >= the exact prompt tokens of the family's
      template on every request of the benchmark corpus (checked by the tests);
    * the unknown family is >= every measured family on every text, message and request;
    * ``bound >= exact`` for every message and tool block in every byte-level BPE
      family's template (hypothesis property tests against the exact tokenizers).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from ..core.exceptions import ConfigurationError
from ..core.shapes import ContentClass, Shape
from ._estimate_features import (
    ARGUMENTS,
    BIGRAM_CLASSES,
    ESCAPED,
    FEATURES,
    LETTER_RATE_FLOOR,
    MARGIN_DEN,
    MARGIN_NUM,
    NONE,
    STRICT_STARTS,
    TOKEN_STARTS,
    CostTables,
    bounded_sum,
    cost_tables,
    scan,
    text_features,
)
from ._estimate_priors import (
    CONSERVATIVE_FAMILY,
    FAMILIES,
    MEASURED_FAMILIES,
    UNKNOWN_FAMILY,
    FamilyPriors,
    family_priors,
)
from ._estimate_schema import schema_text, tool_bound_bytes, tool_text
from .counters import TokenCounter
from .usage import (
    DEFAULT_CALIBRATION_SEED,
    NO_USAGE,
    Calibration,
    prompt_tokens_from_usage,
)

__all__ = [
    "BIGRAM_CLASSES",
    "CONSERVATIVE_FAMILY",
    "DEFAULT_CALIBRATION_SEED",
    "FAMILIES",
    "FEATURES",
    "LETTER_RATE_FLOOR",
    "MEASURED_FAMILIES",
    "NO_USAGE",
    "STRICT_STARTS",
    "TOKEN_STARTS",
    "UNKNOWN_FAMILY",
    "Calibration",
    "Estimator",
    "FamilyPriors",
    "family_priors",
    "prompt_tokens_from_usage",
    "schema_text",
    "text_features",
]

# Compatibility names for the private helpers tests and bench/ used before the split.
_bounded_sum = bounded_sum
_tool_text = tool_text

# --------------------------------------------------------------------------- the bound
# Framing bytes (special tokens as one) that any template adds per message of each
# kind, measured through windowguard.accounting.templates with a byte counter and the real
# templates' extras (tests/test_estimate_bound.py re-derives them):
#   user 9 (Llama 3), system 10 (Qwen), assistant 14 (Llama 3) + 19 (Qwen 3's
#   "<think>\n\n</think>\n\n"), tool result 41 (Qwen's <tool_response> turn);
# per tool call 55 (Qwen's <tool_call> JSON frame; llama-models writes 46 with
# <|python_tag|>), per request 88 (Llama 3's default system header and reply header,
# Qwen 3 with thinking off 30), around the tool block 400 (Qwen's tools preamble 381,
# Llama 3's 288 + "Environment: ipython").
_MESSAGE_FRAME: Final[Mapping[str, int]] = {
    "system": 12,
    "user": 12,
    "assistant": 36,
    "tool": 44,
    "other": 44,
}
_RESULT_FRAME: Final = 44  # an Anthropic tool_result block, rendered as a tool message
_CALL_FRAME: Final = 64
_REQUEST_FRAME: Final = 92
_TOOLS_FRAME: Final = 400
_MEDIA_BOUND: Final = 1600  # per image, audio clip or document: an allowance, not a bound
_BPE_FAMILIES: Final = frozenset(MEASURED_FAMILIES)


# --------------------------------------------------------------------------- estimator


_RESPACING_FAMILIES: Final = frozenset({"mistral"})
_JSON_OPENERS: Final = ("[", "{")


class Estimator:
    """Raw (uncalibrated) prompt-token estimates for one tokenizer family.

    Args:
        tokenizer: the tokenizer family whose priors to use (``"o200k"``, ``"cl100k"``,
            ``"claude"``, ``"gemini"``, ``"llama3"``, ``"llama4"``, ``"qwen"``,
            ``"mistral"``, ``"deepseek"``); None when it is not known: each text is then
            estimated as the maximum over the families measured exactly
            (:data:`MEASURED_FAMILIES`), each overhead as the maximum of theirs.
        counter: an exact :class:`~windowguard.accounting.counters.TokenCounter`; when
            given, segment text is counted with it instead of the heuristic (framing is
            still added).

    Raises:
        ConfigurationError: unknown family, or a counter without ``count``.

    Examples:
        >>> Estimator("o200k").count([{"role": "user", "content": "hi"}]) > 0
        True
    """

    __slots__ = (
        "_counter",
        "_dense",
        "_ids",
        "_per_segment",
        "_priors",
        "_prose",
        "_respaces",
        "_schema",
    )

    def __init__(
        self, tokenizer: str | None = None, *, counter: TokenCounter | None = None
    ) -> None:
        priors = self._priors = family_priors(tokenizer)
        if counter is not None and not callable(getattr(counter, "count", None)):
            raise ConfigurationError(
                f"counter must have a count(text) -> int method, got {type(counter).__name__}"
            )
        self._counter = counter
        # One weight vector per class, or (unknown family) one per member family.
        members = priors.members or (priors,)
        self._prose = tuple(cost_tables(m.prose_weights) for m in members)
        self._dense = tuple(cost_tables(m.dense_weights) for m in members)
        self._schema = tuple(cost_tables(m.schema_weights) for m in members)
        # SentencePiece families (no offline tokenizer) may add a dummy-prefix token per
        # text; the bound adds one per segment for them (not proven: see the module).
        self._per_segment = 0 if priors.name in _BPE_FAMILIES else 1
        # Each call id is sized twice (the call opens it, its result answers it).
        self._ids: dict[str, tuple[int, int]] = {}
        # Families whose servers re-serialise a JSON tool result with spaces (Mistral;
        # the unknown family takes every member's worst case).
        names = {m.name for m in members} | {priors.name}
        self._respaces = bool(names & _RESPACING_FAMILIES)

    @property
    def priors(self) -> FamilyPriors:
        """The family priors in use."""
        return self._priors

    @property
    def tokenizer(self) -> str:
        """The tokenizer family in use (``"unknown"`` for ``Estimator(None)``)."""
        return self._priors.name

    @property
    def request_tokens(self) -> int:
        """Fixed framing of every request (BOS, default headers, reply priming)."""
        return self._priors.request_tokens

    @property
    def request_bound(self) -> int:
        """At least the fixed framing of every request in every byte-level BPE family's
        template (BOS, Llama 3's default system header, the reply header)."""
        return _REQUEST_FRAME + self._per_segment

    def text_tokens(self, text: str, content_class: ContentClass = "prose") -> int:
        """Tokens of one piece of text, without any framing.

        Args:
            text: the text.
            content_class: ``"prose"`` or ``"dense"`` (tool-call arguments, tool results,
                schemas).

        Raises:
            ConfigurationError: ``text`` is not a string or the class is unknown.
        """
        if not isinstance(text, str):
            raise ConfigurationError(f"text must be a str, got {type(text).__name__}")
        if self._counter is not None:
            return int(self._counter.count(text))
        if content_class == "prose":
            weights = self._prose
        elif content_class == "dense":
            weights = self._dense
        else:
            raise ConfigurationError(
                f"unknown content class {content_class!r}; expected 'prose' or 'dense'"
            )
        return scan(weights, text, shown=ESCAPED if weights is self._dense else NONE)[0]

    def _id_costs(self, call_id: str) -> tuple[int, int]:
        known = self._ids.get(call_id)
        if known is None:
            if len(self._ids) >= 4096:
                self._ids.clear()
            # Mistral shows ids as JSON strings ("id": ..., "call_id": ...).
            known = self._ids[call_id] = scan(self._dense, call_id, shown=ESCAPED)
        return known

    def message_tokens(self, shape: Shape) -> int:
        """Raw estimate of one message: its text, call ids, framing, tool calls and media."""
        return self.message_costs(shape)[0]

    def message_costs(self, shape: Shape) -> tuple[int, int]:
        """The raw estimate of one message and an upper bound on its exact tokens, in one
        pass over its text.

        The bound is at least the tokens the message adds to a prompt in every byte-level
        BPE family's chat template, whatever its content (module docstring): the bytes
        the template shows (tool results JSON-escaped or re-parsed, tool-call arguments
        re-serialised, ``\\uXXXX`` escapes, call ids) plus the framing of the message,
        of each tool call and of each Anthropic ``tool_result`` block (a tool message of
        its own on servers that render chat templates), and a fixed allowance per media
        item (an estimate: media have no bound). Not proven for families without an
        offline tokenizer.

        Returns:
            ``(estimate, bound)``.
        """
        priors = self._priors
        opens = shape.opens
        total = priors.message_tokens + priors.tool_call_tokens * len(opens)
        bound = _MESSAGE_FRAME.get(shape.kind, _RESULT_FRAME) + _CALL_FRAME * len(opens)
        if shape.kind != "tool":
            bound += _RESULT_FRAME * len(shape.answers)
        if shape.media_items:
            total += priors.media_item_tokens * shape.media_items
            bound += _MEDIA_BOUND * shape.media_items
        counter = self._counter
        if opens or shape.answers:
            for call_id in (*opens, *shape.answers):  # sized as dense text, once per id
                tokens, shown = self._id_costs(call_id)
                total += int(counter.count(call_id)) if counter is not None else tokens
                bound += shown
        dense, prose, extra = self._dense, self._prose, self._per_segment
        for segment in shape.segments:
            if segment.name_length is not None:
                tokens, shown = scan(dense, segment.text, True, ARGUMENTS)
            elif segment.content_class == "dense":
                tokens, shown = scan(dense, segment.text, True, ESCAPED)
                if self._respaces and segment.text[:1] in _JSON_OPENERS:
                    # Mistral's encoder (mistral-common, and vLLM on Mistral) re-parses a
                    # JSON tool result and writes it back with ", " and ": ": each
                    # separator may then start a token of its own.
                    text = segment.text
                    tokens += text.count(",") + text.count(":")
            else:
                tokens, shown = scan(prose, segment.text)
            total += int(counter.count(segment.text)) if counter is not None else tokens
            bound += shown + extra
        return total, bound

    def tools_tokens(self, tools: Sequence[object] | None) -> int:
        """Raw estimate of the tool-schema block, framing included (0 without tools).

        Each tool is sized by :func:`schema_text`, the words and values of its JSON
        line by line, with the JSON syntax and the keywords every schema repeats left
        out; the estimate is monotone in the schema (module docstring).

        Args:
            tools: wire-format tool definitions: OpenAI chat
                ``{"type": "function", "function": {...}}``, Responses
                ``{"type": "function", "name": ...}`` or built-in ``{"type": ...}``,
                Anthropic ``{"name", "input_schema"}``; pydantic objects are dumped.

        Raises:
            ConfigurationError: ``tools`` is not a sequence, or an entry is not a tool.
        """
        if not _check_tools(tools):
            return 0
        assert tools is not None
        priors = self._priors
        total = priors.tools_block_tokens
        counter = self._counter
        for index, tool in enumerate(tools):
            text = tool_text(tool, index)
            if counter is not None:
                total += priors.tool_tokens + int(counter.count(text))
            else:
                total += priors.tool_tokens + scan(self._schema, text, ceiling=False)[0]
        if counter is not None:
            return total
        # The margin once more on the whole block: a schema's JSON syntax (braces, quotes,
        # nesting) is priced through its lines, and small nested schemas are tightest.
        return -(-total * MARGIN_NUM // MARGIN_DEN)

    def tools_costs(self, tools: Sequence[object] | None) -> tuple[int, int]:
        """The raw estimate of the tool block and an upper bound on its exact tokens.

        The bound is at least the tokens the block adds in every byte-level BPE family's
        template: per tool the longest of its renderings (indented JSON with ``\\uXXXX``
        escapes, OpenAI's TypeScript), plus the block's framing (Qwen's and Llama 3's
        tool preambles). Not proven for families without an offline tokenizer.

        Returns:
            ``(estimate, bound)``, ``(0, 0)`` without tools.

        Raises:
            ConfigurationError: as :meth:`tools_tokens`.
        """
        estimate = self.tools_tokens(tools)
        if not tools:
            return estimate, 0
        bound = _TOOLS_FRAME + self._per_segment
        for index, tool in enumerate(tools):
            bound += tool_bound_bytes(tool, index) + self._per_segment
        return estimate, bound

    def count(
        self,
        messages: Sequence[object],
        tools: Sequence[object] | None = None,
        *,
        system: object = None,
        format: str | None = None,
    ) -> int:
        """Raw estimate of a whole request: messages, tools and request framing.

        Args:
            messages: the transcript in any supported wire format.
            tools: the request's tool definitions.
            system: Anthropic's separate system argument.
            format: the wire format, detected when None.

        Returns:
            The uncalibrated estimate (multiply by a :class:`Calibration` factor).

        Raises:
            UnknownFormatError: the format cannot be detected or is unsupported.
            ConfigurationError: bad tools.
        """
        from ..core.adapters import shape_messages

        shaped = shape_messages(messages, format=format, system=system)
        total = self.request_tokens + self.tools_tokens(tools)
        for shape in (*shaped.system_shapes, *shaped.shapes):
            total += self.message_tokens(shape)
        return total

    def __repr__(self) -> str:
        counter = "" if self._counter is None else f", counter={self._counter!r}"
        return f"Estimator({self.tokenizer!r}{counter})"


def _check_tools(tools: Sequence[object] | None) -> bool:
    """Whether there are tools; raises on something that is not a list of them."""
    if tools is None:
        return False
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise ConfigurationError(
            f"tools must be a list of tool definitions, got {type(tools).__name__}"
        )
    return bool(tools)


def _heuristic_tokens(weights: tuple[float, ...], text: str) -> int:
    """One weight vector's estimate of ``text``: ``ceil(w · features x 17/16) + 1``, at
    most ``utf8_bytes + 5 x control`` (tests/test_estimate.py checks it against
    text_features())."""
    tables: tuple[CostTables, ...] = (cost_tables(weights),)
    return scan(tables, text)[0]
