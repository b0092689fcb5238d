"""The estimator's per-message bound is never below the exact count (issue 18).

``Estimator.message_costs(shape)[1]`` must be at least the tokens the message adds in
every byte-level BPE family's chat template, whatever its content. Checked two ways:

* against a **byte counter** through every template of ``windowguard.accounting.templates`` (and the
  real templates' variants: Mistral re-parsing JSON tool results, llama-models'
  ``json.dumps`` with ``ensure_ascii=True``, Anthropic ``tool_result`` blocks rendered as
  tool messages): a byte-level BPE never emits more tokens than the (NFC-normalised)
  bytes it is shown, so this covers every vocabulary at once;
* against the **exact tokenizers** of o200k, cl100k, Llama 3/4, Qwen and Mistral, through
  the same local accounting the manager uses (``TemplateAccounting``) and as the
  increment of appending the message to a small conversation.

Messages of every kind and wire format, with adversarial text: control characters,
emoji, CJK, combining marks, characters NFC expands, ``\\udcxx`` escapes in JSON,
numbers ``json.dumps`` re-prints longer (``1e15``), very long runs.
"""

from __future__ import annotations

import functools
import json
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

import exact_tokenizers as ex
from windowguard.accounting.estimate import FAMILIES, Estimator
from windowguard.accounting.local import TemplateAccounting, openai_function
from windowguard.accounting.templates import (
    TEMPLATES,
    count_message,
    count_prompt,
    count_request_framing,
)
from windowguard.core.adapters import shape_messages

EXACT = ex.FAMILIES
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class ByteCounter:
    """At least what any byte-level BPE counts: the UTF-8 bytes after NFC (Qwen
    normalises first), lone surrogates as the three bytes of their replacement."""

    def count(self, text: str) -> int:
        with contextlib.suppress(UnicodeEncodeError):
            text = unicodedata.normalize("NFC", text)
        return len(text.encode("utf-8", "surrogatepass"))


BYTES = ByteCounter()


# --------------------------------------------------------------------------- strategies

NASTY = (
    "\x00\x01\x08\x0b\x0c\x1b\x1f\x7f\t\r\n\"\\/'`{}[]:,"
    "é中あ한😀👍🏽👨‍👩‍👧‍👦🇩🇪\u0301\u0300\u200b\u2028\ufeff"
    "\u0958\U0001d160\ufb2c\u212b\u0344"  # NFC lengthens these (U+0958 -> 2 code points)
)
texts = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=NASTY, max_size=200),
    st.tuples(
        st.sampled_from(["a", " ", "\n", "1", "\\", '"', "\x00", "😀", "\u0958"]),
        st.integers(1, 3000),
    ).map(lambda d: d[0] * d[1]),
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**30), 10**30),
    st.floats(allow_nan=False),
    st.sampled_from([1e15, 1e16, 1e300, 5e-324, 1.2345678901234567e17, -0.0]),
    st.text(alphabet=NASTY, max_size=20),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(alphabet=NASTY, max_size=6), inner)
    ),
    max_leaves=20,
)


def _raw_json(value: object, style: int) -> str:
    if style == 0:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if style == 1:
        return json.dumps(value, separators=(",", ":"))  # \\uXXXX, \\udcxx escapes
    return json.dumps(value, indent=2, ensure_ascii=False)


arguments = st.one_of(
    st.tuples(json_values, st.integers(0, 2)).map(lambda d: _raw_json(*d)),
    # Exponents json.dumps re-prints longer, \\udcxx escapes, and text that is no JSON.
    st.lists(
        st.sampled_from(["1e15", "1E5", "-2.5e-7", "12345678901234567890.5", "0"]), max_size=40
    ).map(lambda xs: "[" + ",".join(xs) + "]"),
    st.just('{"s":"\\udc80\\ud83d\\ude00"}'),
    texts,
)
ids = st.text(alphabet='abc_01-"\\é', max_size=12)


@st.composite
def chat_messages(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["system", "user", "assistant", "calls", "tool"]))
    if kind == "calls":
        calls = [
            {
                "id": draw(ids),
                "type": "function",
                "function": {"name": draw(st.text(max_size=12)), "arguments": draw(arguments)},
            }
            for _ in range(draw(st.integers(1, 3)))
        ]
        content = draw(st.none() | texts)
        return {"role": "assistant", "content": content, "tool_calls": calls}
    if kind == "tool":
        content = draw(st.one_of(texts, arguments))
        return {"role": "tool", "tool_call_id": draw(ids), "content": content}
    return {"role": kind, "content": draw(texts)}


@st.composite
def anthropic_user(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An Anthropic user message of tool results (and text), and the chat messages a
    server renders it as: a tool message per result, a user message for the text."""
    results = draw(st.lists(st.tuples(ids, st.one_of(texts, arguments)), min_size=1, max_size=4))
    text = draw(st.none() | texts)
    blocks: list[dict[str, Any]] = [
        {"type": "tool_result", "tool_use_id": call_id, "content": content}
        for call_id, content in results
    ]
    chat = [{"role": "tool", "tool_call_id": i, "content": c} for i, c in results]
    if text is not None:
        blocks.append({"type": "text", "text": text})
        chat.append({"role": "user", "content": text})
    return {"role": "user", "content": blocks}, chat


def _variants(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The message as the real templates may show it beyond windowguard.accounting.templates:
    Mistral re-parses a JSON tool result; llama-models writes arguments with
    ``json.dumps`` (ensure_ascii=True)."""
    out = [message]
    if message["role"] == "tool":
        try:
            parsed = json.loads(message["content"])
        except ValueError:
            return out
        if not isinstance(parsed, str):
            out.append({**message, "content": json.dumps(parsed, ensure_ascii=False)})
    for call in message.get("tool_calls") or ():
        try:
            parsed = json.loads(call["function"]["arguments"])
        except ValueError:
            continue
        ascii_call = {**call, "function": {**call["function"], "arguments": json.dumps(parsed)}}
        out.append({**message, "tool_calls": [ascii_call]})
    return out


def _shape(message: dict[str, Any], fmt: str = "openai_chat") -> Any:
    return shape_messages([message], format=fmt).shapes[0]


# --------------------------------------------------------------------------- byte counter


def _calls(*arguments: str) -> dict[str, Any]:
    calls = [
        {"id": "", "type": "function", "function": {"name": "", "arguments": a}} for a in arguments
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


# The cases where one allowance alone must cover the template: escapes, re-printed
# numbers, \\uXXXX, and the framing of bare calls.
EDGES = [
    {"role": "tool", "tool_call_id": "", "content": '"' * 500},
    {"role": "tool", "tool_call_id": "", "content": "\\" * 500},
    {"role": "tool", "tool_call_id": "", "content": "\x00" * 300},
    {"role": "tool", "tool_call_id": "", "content": "[" + "1e15," * 200 + "0]"},
    {"role": "tool", "tool_call_id": "", "content": "{" + '"a":1,' * 200 + '"b":2}'},
    _calls("[" + "1e15," * 200 + "0]"),
    _calls(json.dumps(["\u00e9\u4e2d\U0001f600" * 50], ensure_ascii=False)),
    _calls("", "", "", ""),
    {  # the name comes first in the call's text; its arguments are still re-printed
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "", "function": {"name": ":", "arguments": "[1E13,1E15,1E15]"}}],
    },
    _calls("{}", "[]"),
    {"role": "assistant", "content": ""},
    {"role": "user", "content": "\u0958" * 300},
]


@pytest.mark.parametrize("family", [*sorted(FAMILIES), None])
@SETTINGS
@given(message=chat_messages())
def test_bound_covers_every_template_byte_for_byte(family: str | None, message: Any) -> None:
    bound = Estimator(family).message_costs(_shape(message))[1]
    for template in TEMPLATES:
        for shown in _variants(message):
            assert bound >= count_message(BYTES, shown, template=template), template


@pytest.mark.parametrize("message", EDGES)
def test_bound_covers_the_edge_cases_byte_for_byte(message: dict[str, Any]) -> None:
    bound = Estimator("o200k").message_costs(_shape(message))[1]
    for template in TEMPLATES:
        for shown in _variants(message):
            assert bound >= count_message(BYTES, shown, template=template), template


@SETTINGS
@given(drawn=anthropic_user())
def test_bound_covers_tool_result_blocks_rendered_as_tool_messages(drawn: Any) -> None:
    message, chat = drawn
    bound = Estimator("qwen").message_costs(_shape(message, "anthropic"))[1]
    for template in TEMPLATES:
        rendered = sum(count_message(BYTES, m, template=template) for m in chat)
        as_one_user = count_message(
            BYTES, {"role": "user", "content": "".join(str(m["content"]) for m in chat)},
            template=template,
        )  # fmt: skip
        assert bound >= max(rendered, as_one_user), template


@settings(max_examples=40, deadline=None)
@given(
    call_id=ids,
    name=st.text(max_size=20),
    arguments=json_values,
    output=st.one_of(texts, arguments),
)
def test_bound_covers_responses_and_anthropic_calls(
    call_id: str, name: str, arguments: Any, output: str
) -> None:
    items = [
        ({"type": "function_call", "call_id": call_id, "name": name,
          "arguments": json.dumps(arguments)}, "responses"),
        ({"type": "function_call_output", "call_id": call_id, "output": output}, "responses"),
        ({"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": name,
          "input": {"a": arguments}}]}, "anthropic"),
    ]  # fmt: skip
    from windowguard.accounting._chat_form import chat_messages as chat_form

    est = Estimator("o200k")
    for item, fmt in items:
        shape = _shape(item, fmt)
        bound = est.message_costs(shape)[1]
        for rendered in chat_form(shape):  # a server may render one shape as several
            for template in TEMPLATES:
                for shown in _variants(rendered):
                    counted = count_message(BYTES, shown, template=template)
                    assert bound >= counted, (fmt, template)


def test_frame_constants_cover_every_template() -> None:
    import windowguard.accounting.estimate as estimate
    from windowguard.accounting.templates import _typescript_functions

    est = Estimator("o200k")
    for template in TEMPLATES:
        assert est.request_bound >= count_request_framing(BYTES, None, template=template)
        empty = count_prompt(BYTES, [], None, template=template)
        assert est.request_bound >= empty
    assert len(_typescript_functions([]).encode()) == 70  # _estimate_schema._TYPESCRIPT_FRAME
    assert FAMILIES["o200k"].media_item_tokens <= estimate._MEDIA_BOUND


tool_names = st.text(alphabet="abcxyz_", min_size=1, max_size=10)
schemas = st.recursive(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "integer", "number", "boolean"])},
        optional={
            "description": texts,
            "enum": st.lists(json_scalars, max_size=12),
        },
    ),
    lambda inner: st.fixed_dictionaries(
        {"type": st.just("object"), "properties": st.dictionaries(tool_names, inner, max_size=4)},
        optional={"description": texts, "required": st.lists(tool_names, max_size=3)},
    ),
    max_leaves=10,
)
tool_lists = st.lists(
    st.builds(
        lambda name, description, params: {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": params},
        },
        tool_names,
        texts,
        schemas,
    ),
    min_size=1,
    max_size=4,
)


@SETTINGS
@given(tools=tool_lists)
def test_tools_bound_covers_every_template_byte_for_byte(tools: list[dict[str, Any]]) -> None:
    bound = Estimator("llama3").tools_costs(tools)[1]
    for template in TEMPLATES:
        for base in ([], [{"role": "user", "content": "x"}]):
            added = count_prompt(BYTES, base, tools, template=template) - count_prompt(
                BYTES, base, None, template=template
            )
            assert bound >= added, template
    assert Estimator("o200k").tools_costs(None) == (0, 0)


# --------------------------------------------------------------------------- exact


@functools.cache
def _accounting(family: str) -> TemplateAccounting:
    return TemplateAccounting(family, ex.MemoCounter(ex.require(family)))


def _exact_costs(family: str, message: dict[str, Any]) -> list[int]:
    """What the exact accounting charges the message, and what appending it adds."""
    accounting = _accounting(family)
    counter, template = accounting.counter, ex.TEMPLATE_OF[family]
    costs = [accounting.message_tokens(_shape(message))]
    if message["role"] in ("user", "tool"):
        prefix = [ex.SYSTEM, ex.TASK, ex.CALL] if message["role"] == "tool" else [ex.SYSTEM]
        tail = [ex.TAIL]
        costs.append(
            count_prompt(counter, [*prefix, message, *tail], template=template)
            - count_prompt(counter, [*prefix, *tail], template=template)
        )
    return costs


def _has_surrogate(message: dict[str, Any]) -> bool:
    # Qwen's tokenizer (HF tokenizers) raises on lone surrogates, which re-serialising
    # "\udcxx" escapes produces: not a bound question.
    pieces = [message.get("content")]
    pieces += [call["function"]["arguments"] for call in message.get("tool_calls") or ()]
    for piece in pieces:
        if not isinstance(piece, str):
            continue
        try:
            piece.encode("utf-8")
            json.dumps(json.loads(piece), ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return True
        except (ValueError, TypeError, RecursionError):
            pass
    return False


@pytest.mark.parametrize("family", EXACT)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=chat_messages())
def test_bound_covers_the_exact_tokenizers(family: str, message: dict[str, Any]) -> None:
    if family == "qwen":
        assume(not _has_surrogate(message))
    bound = Estimator(family).message_costs(_shape(message))[1]
    for exact in _exact_costs(family, message):
        assert bound >= exact


@pytest.mark.parametrize("family", EXACT)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tools=tool_lists)
def test_tools_bound_covers_the_exact_tokenizers(family: str, tools: list[dict[str, Any]]) -> None:
    counter = ex.MemoCounter(ex.require(family))
    template = ex.TEMPLATE_OF[family]
    functions = [openai_function(tool) for tool in tools]
    exact = count_request_framing(counter, functions, template=template) - count_request_framing(
        counter, None, template=template
    )
    assert Estimator(family).tools_costs(tools)[1] >= exact


@pytest.fixture(scope="module")
def corpus() -> list[dict[str, Any]]:
    return ex.require_corpus()


@pytest.mark.parametrize("family", EXACT)
def test_bound_covers_every_corpus_message(family: str, corpus: list[dict[str, Any]]) -> None:
    accounting = _accounting(family)
    est = Estimator(family)
    worst = (float("inf"), "")
    checked = 0
    for transcript in corpus:
        for index, message in enumerate(transcript["messages"]):
            shape = _shape(message)
            exact = accounting.message_tokens(shape)
            estimate, bound = est.message_costs(shape)
            assert estimate == est.message_tokens(shape)  # one pass, the same estimate
            checked += 1
            if exact and bound / exact < worst[0]:
                worst = (bound / exact, f"{transcript['id']} message {index}")
        tools = transcript.get("tools")
        if tools:
            functions = [openai_function(tool) for tool in tools]
            exact = accounting.fixed_tokens(functions) - accounting.fixed_tokens(None)
            assert est.tools_costs(tools)[1] >= exact
    assert checked > 5000
    assert worst[0] >= 1.0, f"bound / exact {worst[0]:.3f} on {worst[1]}"


@pytest.mark.parametrize("family", EXACT)
def test_request_bound_covers_every_corpus_request(
    family: str, corpus: list[dict[str, Any]]
) -> None:
    counter = ex.MemoCounter(ex.require(family))
    template = ex.TEMPLATE_OF[family]
    est = Estimator(family)
    for transcript in corpus[:: max(1, len(corpus) // 40)]:
        tools = transcript.get("tools") or None
        bounds = [est.message_costs(_shape(m))[1] for m in transcript["messages"]]
        for request in ex.corpus_requests(transcript):
            exact = count_prompt(counter, request, tools, template=template)
            bound = est.request_bound + est.tools_costs(tools)[1] + sum(bounds[: len(request)])
            assert bound >= exact
