"""Token accounting from exact sources: the ledger, local tokenizers, remote counts.

The "provider" here reports what a server counting exactly would: o200k_base under
OpenAI's accounting (``windowguard.accounting.templates.count_prompt``), the same number the
emulator reports. Properties hold for any transcript: a count the manager calls exact
is exact, every other count is an upper bound, no fitted request overflows the window,
and a refusal with an exact count is always justified.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import windowguard as wg
from windowguard.accounting import INFERENCE_TOLERANCE, choose_sources
from windowguard.accounting.local import LOCAL_FAMILIES, TemplateAccounting, local_accounting
from windowguard.accounting.remote import CountQuery, RemoteCountError, VLLMTokenizeCounter
from windowguard.accounting.templates import count_prompt
from windowguard.core.adapters import shape_messages
from windowguard.emulator import Emulator

from .exact_tokenizers import (
    MemoCounter,
    official_vocabulary,
    require,
    require_corpus,
    vocabulary,
)
from .transcripts import Plan, TurnPlan, plans, render

SETTINGS = settings(deadline=None, max_examples=60)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the project and return it with line numbers.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "the file"}},
                "required": ["path"],
            },
        },
    }
]


@pytest.fixture(scope="module")
def o200k() -> Any:
    return MemoCounter(require("o200k"))


def _exact(counter: Any, messages: Sequence[Any], tools: Any = TOOLS) -> int:
    return count_prompt(counter, list(messages), tools, template="openai")


def _head_and_newest(messages: list[Any]) -> list[Any]:
    shapes = shape_messages(messages, format="openai_chat").shapes
    seg = wg.segment(shapes)
    newest = seg.turn_starts[-1] if seg.turn_starts else len(messages)
    return messages[: seg.head_stop] + messages[newest:]


def _run_against_exact(
    exact_counter: Any, plan: Plan, window: int, max_tokens: int, **options: Any
) -> list[wg.Fit]:
    """Fit every prefix ending at a turn boundary, reporting the exact count of each
    fitted request as the provider would; check the invariants on every send."""
    messages, _ = render(plan, "openai_chat")
    info = wg.ModelInfo(window, tokenizer="o200k")
    mgr = wg.ContextWindowManager(model_info=info, safety=50, **options)
    shapes = shape_messages(messages, format="openai_chat").shapes
    stops = [*wg.segment(shapes).turn_starts[1:], len(messages)]
    usage: object = None
    fits = []
    for stop in stops:
        prefix = messages[:stop]
        try:
            fit = mgr.fit(prefix, tools=TOOLS, max_tokens=max_tokens, last_usage=usage)
        except wg.ContextTruncatedError as exc:
            floor_request = _exact(exact_counter, _head_and_newest(prefix))
            if exc.exact:
                assert floor_request + mgr.floor > window, "an exact refusal must be justified"
            else:
                assert exc.estimated_tokens >= floor_request
            usage = wg.NO_USAGE
            continue
        exact = _exact(exact_counter, fit.messages)
        # with an exact source the edge rule's upper count bounds the request; the best
        # estimate (a cut span's proportional share) may sit a little either side
        upper = fit.upper_tokens or fit.estimated_tokens
        assert upper >= exact, "every decision count is exact or an upper bound"
        if fit.exact:
            assert fit.estimated_tokens == exact
        assert exact + fit.max_tokens <= window, "no fitted request overflows"
        usage = exact
        fits.append(fit)
    return fits


@SETTINGS
@given(plan=plans(max_turns=16), window=st.integers(1_000, 8_000), max_tokens=st.integers(50, 600))
def test_counts_are_exact_or_upper_bounds_with_the_local_tokenizer(
    o200k: Any, plan: Plan, window: int, max_tokens: int
) -> None:
    _run_against_exact(o200k, plan, window, max_tokens)


def _turn(
    text: str, calls: Sequence[str] = (), results: Sequence[str] = (), follow_up: Any = None
) -> TurnPlan:
    return TurnPlan(
        text=text,
        calls=tuple(calls),
        results=tuple(results),
        reasoning="",
        follow_up=follow_up,
        ids="distinct",
        interleaved=False,
    )


def test_a_base_measured_again_takes_its_old_messages_share_with_it(o200k: Any) -> None:
    # Found by the property above: a prune cut the span the base was first measured
    # with, the base was measured again with the newest turn, and the next send kept
    # everything. The old messages' shares had been split from one total with the *old*
    # base, so they plus the new base counted 477 for a request of 499 exact tokens.
    plan = Plan(
        system="0",
        task="0:0:0:0",
        demos=("0:",),
        turns=(
            _turn("0"),
            _turn("0:0:"),
            _turn("", follow_up="0"),
            _turn("0:0:0:0", follow_up="0:0: 0:0:"),
            _turn("0", ['{"path": "0:"}'], ["0:0:"]),
            _turn("0", ['{"path": "0\\u4e2d"}'], ["0"]),
            _turn(":0:0", ['{"path": "0a\\ud83d\\ude42: 0:\\u00e9\\ud83d\\ude42:0:0:"}'], ["0:"]),
            _turn("0000", ['{"path": ""}'], ["0:"], "0:0:"),
            _turn("0:0:0:", ['{"path": ""}', '{"path": "0\\u00e9"}'], [":0:", "0"]),
            _turn(
                ":0:0:0:0:0:0:0",
                ['{"path": ""}'] * 2 + ['{"path": "0"}'],
                ["0:0", "0:0", "0000:0:0:"],
            ),
            _turn("", ['{"path": ""}'] * 2 + ['{"path": "0000:0:\\u00e9\\u00e9"}'], ["", "", ""]),
            _turn("", ['{"path": ""}'], [""]),
            _turn(""),
        ),
        greeting=None,
    )
    fits = _run_against_exact(o200k, plan, 1_000, 456)
    assert any(fit.dropped_turns for fit in fits)  # the path that broke: prune, then more


@SETTINGS
@given(plan=plans(max_turns=16), window=st.integers(1_000, 8_000), max_tokens=st.integers(50, 600))
def test_counts_are_exact_or_upper_bounds_with_the_ledger_and_heuristic_alone(
    o200k: Any, plan: Plan, window: int, max_tokens: int
) -> None:
    _run_against_exact(o200k, plan, window, max_tokens, counter="heuristic")


@SETTINGS
@given(plan=plans(max_turns=16), window=st.integers(1_500, 8_000))
def test_minimal_pruning_against_exact_reports_keeps_the_invariants(
    o200k: Any, plan: Plan, window: int
) -> None:
    _run_against_exact(o200k, plan, window, 200, pruning="minimal")


# --- the ledger ----------------------------------------------------------------------


def _chat(turns: int, size: int = 40) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the failing test in the parser module."},
    ]
    for i in range(turns):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"m{i}.py"})},
        }
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        body = "\n".join(f"{n:>4}  value_{i}_{n} = compute({n}, {i})" for n in range(size))
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": body})
    return messages


def test_reports_measure_the_base_then_each_appended_turn_exactly(o200k: Any) -> None:
    messages = _chat(6)
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(100_000, tokenizer="o200k"))
    fit = mgr.fit(messages[:2], tools=TOOLS, max_tokens=500)
    assert not fit.exact and fit.measured_tokens == 0
    report = _exact(o200k, messages[:2])
    fit = mgr.fit(messages[:4], tools=TOOLS, max_tokens=500, last_usage=report)
    measured = [e for e in fit.events if isinstance(e, wg.UsageMeasured)]
    assert measured and measured[0].with_base and measured[0].measured_tokens == report
    assert fit.measured_tokens == report  # the base is known, the new turn estimated
    previous = report
    for stop in range(6, len(messages) + 1, 2):
        report = _exact(o200k, messages[: stop - 2])
        fit = mgr.fit(messages[:stop], tools=TOOLS, max_tokens=500, last_usage=report)
        event = next(e for e in fit.events if isinstance(e, wg.UsageMeasured))
        assert event.known_tokens == previous  # everything sent before was known exactly
        assert event.measured_tokens == report - previous  # the turn appended in between
        assert event.messages == 2
        previous = report
    # reporting the last request measures everything: the count is exact
    report = _exact(o200k, messages)
    fit = mgr.fit(messages, tools=TOOLS, max_tokens=500, last_usage=report)
    assert fit.exact and fit.estimated_tokens == report and fit.sources == ("ledger",)


@pytest.mark.parametrize("edits", [(), None], ids=["drop only", "default edits"])
def test_measured_turns_keep_their_cost_after_a_prune(
    o200k: Any, edits: tuple[Any, ...] | None
) -> None:
    messages = _chat(30, size=60)
    window = 9_000
    mgr = wg.ContextWindowManager(
        model_info=wg.ModelInfo(window, tokenizer="o200k"), counter="heuristic", edits=edits
    )
    usage = 0
    pruned_exact = 0
    edited = extended = 0
    previous: list[object] = []
    for stop in range(4, len(messages) + 1, 2):
        fit = mgr.fit(messages[:stop], tools=TOOLS, max_tokens=500, last_usage=usage or None)
        if edited and not fit.edits and fit.messages[: len(previous)] == previous:
            # a request that extends an edited one: the edited copies were measured as
            # sent, so everything but the newest turn is known exactly
            assert fit.measured_tokens == usage
            extended += 1
        edited += any(e.kind != "drop" for e in fit.edits)
        previous = fit.messages
        usage = _exact(o200k, fit.messages)
        if fit.dropped_turns and edits == ():
            # the newest turn is the only estimate; the kept old turns are measured
            assert fit.measured_tokens > 0.5 * usage
            pruned_exact += fit.estimated_tokens - usage < 0.5 * usage
    if edits == ():
        assert pruned_exact and not edited
    else:
        assert edited and extended


def test_a_report_larger_than_the_known_parts_raises_the_base() -> None:
    messages = _chat(2)
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(50_000, tokenizer="o200k"))
    mgr.fit(messages, tools=TOOLS, max_tokens=100)
    mgr.fit(messages, tools=TOOLS, max_tokens=100, last_usage=2_000)
    again = mgr.fit(messages, tools=TOOLS, max_tokens=100, last_usage=2_010)
    drift = next(e for e in again.events if isinstance(e, wg.UsageMeasured)).drift
    assert drift == 10 and again.exact and again.estimated_tokens == 2_010
    lower = mgr.fit(messages, tools=TOOLS, max_tokens=100, last_usage=1_990)
    assert lower.estimated_tokens == 2_010  # a smaller report keeps the upper bound


def test_calibration_grows_only_from_what_was_estimated() -> None:
    messages = _chat(3)
    # The first turn's result is a hex dump: the heuristic prices it far below its
    # guaranteed bound (a byte-level BPE may spend up to a token per byte on it), so a
    # report of 2.6x its estimate is something its visible content could cost. (The
    # numbered lines of _chat are priced close to their bound: 2.6x their estimate
    # would be more than any tokenizer can make of them, which is hidden, below.)
    dump = " ".join(f"{i * 2_654_435_761 % 2**32:08x}" for i in range(150))
    messages[3] = {**messages[3], "content": dump}

    def fresh() -> wg.ContextWindowManager:
        return wg.ContextWindowManager(
            model_info=wg.ModelInfo(50_000, tokenizer="o200k"), counter="heuristic"
        )

    mgr = fresh()
    first = mgr.fit(messages[:2], tools=TOOLS, max_tokens=100)
    seed = mgr.calibration.factor
    raw = first.estimated_tokens / seed
    turn = fresh().fit(messages[:4], tools=TOOLS, max_tokens=100).estimated_tokens / seed - raw
    mgr.fit(messages[:4], tools=TOOLS, max_tokens=100, last_usage=int(raw * 1.3))
    assert mgr.calibration.factor == pytest.approx(1.3, rel=0.01)
    # The base is now exact: an under-estimated turn raises the factor by its own ratio,
    # by at most x1.5 per report, and an event says when the cap held it back.
    report = int(raw * 1.3) + int(turn * 2.6)  # messages[2:4] cost 2.6x their estimate
    grown = mgr.fit(messages, tools=TOOLS, max_tokens=100, last_usage=report)
    visible = next(e for e in grown.events if isinstance(e, wg.UsageMeasured))
    assert visible.hidden_tokens == 0 and visible.measured_tokens == int(turn * 2.6)
    (capped,) = [e for e in grown.events if isinstance(e, wg.CalibrationCapped)]
    assert capped.source == "heuristic" and capped.observed == pytest.approx(2.6, rel=0.02)
    assert mgr.calibration.factor == pytest.approx(1.3 * 1.5, rel=0.001) == capped.factor
    # Tokens no visible content can account for are hidden: they never calibrate.
    mgr = fresh()
    mgr.fit(messages[:2], tools=TOOLS, max_tokens=100)
    mgr.fit(messages[:4], tools=TOOLS, max_tokens=100, last_usage=int(raw * 1.3))
    hidden = mgr.fit(messages, tools=TOOLS, max_tokens=100, last_usage=int(raw * 1.3) + 100_000)
    measured = next(e for e in hidden.events if isinstance(e, wg.UsageMeasured))
    assert measured.hidden_tokens > 90_000
    assert mgr.calibration.factor == pytest.approx(1.3, rel=0.01)
    mgr.fit(messages, tools=TOOLS, max_tokens=100, last_usage=None)  # no usage: kept
    assert mgr.calibration.factor == pytest.approx(1.3, rel=0.01)
    mgr.fit(messages, tools=TOOLS, max_tokens=100, new_run=True)
    assert mgr.calibration.factor == mgr.calibration.seed


# --- local exact tokenizers ------------------------------------------------------------


def _corpus(limit: int = 60) -> list[dict[str, Any]]:
    """The first corpus runs of each source, in order (skips, or fails under CI, when
    ``../shared/corpus`` is absent)."""
    by_source: dict[str, list[dict[str, Any]]] = {}
    for run in require_corpus():
        by_source.setdefault(str(run.get("source")), []).append(run)
    runs = [r for name in ("openhands", "swe-agent", "tau-bench") for r in by_source.get(name, [])]
    return runs[:limit]


@pytest.mark.parametrize("family", LOCAL_FAMILIES)
def test_local_template_accounting_covers_every_corpus_request_within_a_few_tokens(
    family: str,
) -> None:
    counter = MemoCounter(require(family))
    accounting = TemplateAccounting(family, counter)
    checked = 0
    for run in _corpus():
        messages, tools = run["messages"], run.get("tools") or None
        for stop in range(2, len(messages) + 1):
            request = messages[:stop]
            if request[-1]["role"] != "user" and request[-1]["role"] != "tool":
                continue
            exact = count_prompt(counter, request, tools, template=accounting.template)
            shapes = shape_messages(request, format="openai_chat").shapes
            local = accounting.fixed_tokens(tools) + sum(
                accounting.message_tokens(s) for s in shapes
            )
            assert exact <= local <= exact + 4 * len(request) + 8, (run["id"], stop)
            checked += 1
    assert checked > 200


def test_local_tokenizers_are_found_offline_and_loaded_on_first_use() -> None:
    accounting = local_accounting("o200k")
    assert accounting is not None
    assert accounting._counter is None  # nothing loaded yet
    assert accounting.counter.count("hello world") == 2
    assert "o200k_base" in accounting.origin
    assert local_accounting("claude") is None  # no exact Claude tokenizer offline
    assert local_accounting(None) is None


def test_the_offline_vocabulary_matches_the_official_file() -> None:
    accounting = local_accounting("o200k")
    assert accounting is not None
    path = official_vocabulary("o200k")  # or skip (fail under CI) with the reason
    official = wg.TiktokenCounter.from_file(path, "o200k_base")
    swe_agent = [run for run in require_corpus() if run.get("source") == "swe-agent"]
    text = json.dumps(swe_agent, ensure_ascii=False)[:200_000]
    assert accounting.counter.count(text) == official.count(text)


def test_counter_choices_are_named_and_bad_ones_refused() -> None:
    assert choose_sources("heuristic", "o200k").local is None
    assert choose_sources(None, "o200k").local is not None
    explicit = choose_sources(require("cl100k"), "qwen")
    assert explicit.local is not None and explicit.local.family == "qwen"
    with pytest.raises(wg.ConfigurationError, match="counter must be"):
        wg.ContextWindowManager(counter="exact")  # type: ignore[arg-type]
    with pytest.raises(wg.ConfigurationError, match="count\\(text\\)"):
        wg.ContextWindowManager(counter=42)  # type: ignore[arg-type]


def test_an_unknown_model_gets_its_tokenizer_inferred_from_the_first_report(o200k: Any) -> None:
    messages = _chat(40, size=80)
    mgr = wg.ContextWindowManager("acme-coder-7b", model_info=wg.ModelInfo(8_000))
    assert mgr.local is None and mgr.model_info.tokenizer is None
    usage: object = None
    inferred = []
    for stop in range(2, len(messages) + 1, 2):
        fit = mgr.fit(messages[:stop], tools=TOOLS, max_tokens=500, last_usage=usage)
        inferred += [e for e in fit.events if isinstance(e, wg.TokenizerInferred)]
        usage = _exact(o200k, fit.messages)
    assert [e.family for e in inferred] == ["o200k"]
    assert abs(inferred[0].counted_tokens - inferred[0].reported_tokens) <= (
        INFERENCE_TOLERANCE * inferred[0].reported_tokens
    )


# --- remote counts ---------------------------------------------------------------------


@pytest.fixture
def vllm() -> Any:
    with Emulator(
        flavor="vllm",
        context_window=6_000,
        tokenizer=str(vocabulary("o200k")),
        model="acme-coder-7b",
        scenario="echo",
    ) as emu:
        yield emu


def test_from_endpoint_finds_window_and_count_api_and_counts_only_near_the_edge(
    vllm: Emulator,
) -> None:
    wg.clear_counter_cache()
    # edits=(): the default edits clear old results at 55 % of the budget, so the
    # requests would never come near the edge this test is about
    mgr = wg.ContextWindowManager.from_endpoint(
        vllm.base_url, "acme-coder-7b", counter=None, edits=()
    )
    assert mgr.context_window == 6_000
    assert isinstance(mgr.remote, VLLMTokenizeCounter)
    messages = _chat(30, size=50)
    usage: object = None
    counted = 0
    for stop in range(2, len(messages) + 1, 2):
        fit = mgr.fit(messages[:stop], tools=TOOLS, max_tokens=400, last_usage=usage)
        assert fit.remote_counts <= mgr.max_remote_counts
        remote = [e for e in fit.events if isinstance(e, wg.RemoteCounted)]
        assert len(remote) == fit.remote_counts
        if fit.remote_counts:
            counted += 1
        else:  # no count when nothing is near the edge
            assert fit.estimated_tokens + 400 + fit.budget // 10 <= fit.context_window or fit.exact
        exact = vllm.count_prompt(_parsed(fit.messages))
        assert fit.estimated_tokens >= exact
        assert exact + fit.max_tokens <= fit.context_window
        usage = exact
    assert counted


def _parsed(messages: Sequence[Any]) -> Any:
    from windowguard.emulator.flavors.openai import parse_chat_request

    return parse_chat_request("vllm", {"model": "m", "messages": list(messages), "tools": TOOLS})


class _Broken:
    name = "broken POST /tokenize"

    def __init__(self) -> None:
        self.calls = 0

    def count(self, query: CountQuery) -> int:
        self.calls += 1
        raise RemoteCountError("connection refused", endpoint=self.name)

    async def acount(self, query: CountQuery) -> int:
        return self.count(query)


def test_a_failing_remote_count_falls_back_and_says_so() -> None:
    broken = _Broken()
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(3_000, tokenizer="o200k"), counter=broken)
    fit = mgr.fit(_chat(20), tools=TOOLS, max_tokens=300)
    failed = [e for e in fit.events if isinstance(e, wg.RemoteCountFailed)]
    assert broken.calls == 1 and len(failed) == 1
    assert "connection refused" in failed[0].error and "local:o200k" in failed[0].fallback
    assert fit.estimated_tokens <= fit.budget


def test_fit_steps_is_sans_io(vllm: Emulator) -> None:
    counter = VLLMTokenizeCounter(vllm.base_url)
    mgr = wg.ContextWindowManager("acme-coder-7b", model_info=wg.ModelInfo(6_000), counter=counter)
    steps = mgr.fit_steps(_chat(30), tools=TOOLS, max_tokens=300)
    query = next(steps)
    assert isinstance(query, CountQuery) and query.model == "acme-coder-7b"
    try:
        while True:
            query = steps.send(counter.count(query))
    except StopIteration as done:
        fit = done.value
    assert fit.remote_counts >= 1 and fit.estimated_tokens <= fit.budget


def test_tool_loops_wire_the_providers_count_endpoint_sync_and_async(vllm: Emulator) -> None:
    wg.clear_counter_cache()
    files = {f"m{i}.py": "\n".join(f"line {n} of file {i}" for n in range(120)) for i in range(9)}

    @wg.tool
    def read_file(path: str) -> str:
        """Read a file.

        Args:
            path: the file.
        """
        return files.get(path, "missing")

    vllm.policy = _reader(list(files))
    task = [{"role": "user", "content": "Read every file, then summarise."}]

    provider = wg.OpenAIChatProvider("acme-coder-7b", base_url=vllm.base_url, api_key="x")
    loop = wg.ToolLoop(
        provider,
        tools=[read_file],
        # drop only: the default edits' clearing would keep every request far from the
        # edge, where the count endpoint is asked
        manager=wg.ContextWindowManager(model_info=provider.model_info(), edits=()),
        max_tokens=300,
    )
    try:
        result = loop.run(task)
    finally:
        provider.close()
    assert result.termination is wg.TerminationReason.COMPLETED
    assert any(isinstance(e, wg.RemoteCounted) for e in result.events)
    assert all(r.status == 200 for r in vllm.records)

    async def run_async() -> wg.RunResult:
        aprovider = wg.AsyncOpenAIChatProvider("acme-coder-7b", base_url=vllm.base_url, api_key="x")
        aloop = wg.AsyncToolLoop(
            aprovider,
            tools=[read_file],
            manager=wg.ContextWindowManager(model_info=await aprovider.amodel_info(), edits=()),
            max_tokens=300,
        )
        try:
            return await aloop.run(task)
        finally:
            await aprovider.aclose()

    vllm.policy = _reader(list(files))
    result = asyncio.run(run_async())
    assert result.termination is wg.TerminationReason.COMPLETED
    assert any(isinstance(e, wg.RemoteCounted) for e in result.events)
    assert all(r.status == 200 for r in vllm.records)


def _reader(paths: list[str]) -> Any:
    from windowguard.emulator import Reply, ToolCall

    answered = {"n": 0}

    def policy(request: Any) -> Any:
        n = answered["n"]
        answered["n"] += 1
        if n < len(paths):
            return Reply(tool_calls=(ToolCall(name="read_file", arguments={"path": paths[n]}),))
        return "Summary: nine files of numbered lines."

    return policy


# --- refusals rest on the best count ---------------------------------------------------


def test_a_request_that_fits_exactly_is_sent_with_a_shrunk_reply_not_refused(o200k: Any) -> None:
    head = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Summarise the file."},
    ]
    call = {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    body = "\n".join(f"{n:>4}  line {n} of a long file" for n in range(300))
    turn = [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": body},
    ]
    exact = _exact(o200k, head + turn)
    window = exact + 1_000  # the request fits, with 1,000 left for the reply
    # drop only: the file is sent whole or the request refused (the default edits clamp
    # it, below)
    mgr = wg.ContextWindowManager(
        model_info=wg.ModelInfo(window, tokenizer="o200k"), counter="heuristic", edits=()
    )
    mgr.fit(head, tools=TOOLS, max_tokens=4_000)
    report = _exact(o200k, head)
    # the ledger knows the head exactly; the heuristic over-counts the file: no exact
    # count of the newest turn: the rule is head + newest (an upper bound) + floor vs window
    try:
        fit = mgr.fit(head + turn, tools=TOOLS, max_tokens=4_000, last_usage=report)
    except wg.ContextTruncatedError as exc:
        assert not exc.exact and exc.estimated_tokens + 200 > window
    else:
        assert exact + fit.max_tokens <= window
    # with the local exact tokenizer the same send goes out, max_tokens shrunk to fit
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(window, tokenizer="o200k"), edits=())
    mgr.fit(head, tools=TOOLS, max_tokens=4_000)
    fit = mgr.fit(head + turn, tools=TOOLS, max_tokens=4_000, last_usage=report)
    assert fit.messages == head + turn and not fit.edits
    assert fit.max_tokens < 4_000 and exact + fit.max_tokens <= window
    assert any(isinstance(e, wg.MaxTokensShrunk) for e in fit.events)
    # the default edits clamp the file (over a quarter of the input budget) and fit the
    # reply to what is sent, which leaves it more room
    for counter in ("heuristic", "auto"):
        mgr = wg.ContextWindowManager(
            model_info=wg.ModelInfo(window, tokenizer="o200k"),
            counter=counter,  # type: ignore[arg-type]
        )
        mgr.fit(head, tools=TOOLS, max_tokens=4_000)
        fit = mgr.fit(head + turn, tools=TOOLS, max_tokens=4_000, last_usage=report)
        assert [e.kind for e in fit.edits] == ["clamp"] and fit.messages[:3] == head + turn[:1]
        sent = _exact(o200k, fit.messages)
        assert sent < exact and sent + fit.max_tokens <= window
        assert fit.max_tokens > window - exact


def test_an_exact_refusal_names_its_source_and_the_numbers(vllm: Emulator) -> None:
    counter = VLLMTokenizeCounter(vllm.base_url)
    mgr = wg.ContextWindowManager("m", model_info=wg.ModelInfo(600), counter=counter, edits=())
    with pytest.raises(wg.ContextTruncatedError) as caught:
        mgr.fit(_chat(3, size=80), tools=TOOLS, max_tokens=100)
    exc = caught.value
    assert exc.exact and "remote" in exc.source
    assert "exactly" in str(exc) and "600" in str(exc)
    assert exc.estimated_tokens + exc.floor > 600  # type: ignore[operator]
    # the default edits clamp the results instead: the request goes out, counted exactly
    mgr = wg.ContextWindowManager("m", model_info=wg.ModelInfo(600), counter=counter)
    fit = mgr.fit(_chat(3, size=80), tools=TOOLS, max_tokens=100)
    assert "clamp" in {e.kind for e in fit.edits}
    assert fit.exact and fit.estimated_tokens + fit.max_tokens <= 600


@pytest.mark.parametrize("counter", ["heuristic", "auto"])
def test_an_overflow_without_a_count_makes_every_refit_send_less(counter: str) -> None:
    messages = _chat(30, size=60)
    mgr = wg.ContextWindowManager(
        model_info=wg.ModelInfo(9_000, tokenizer="o200k"),
        counter=counter,  # type: ignore[arg-type]
    )
    sent = mgr.fit(messages, tools=TOOLS, max_tokens=500)
    seen = {(len(sent.messages), sent.max_tokens)}
    for _ in range(4):
        mgr.observe_overflow()  # refused, and the provider stated no count
        try:
            refit = mgr.fit(messages, tools=TOOLS, max_tokens=500, last_usage=wg.NO_USAGE)
        except wg.ContextTruncatedError:
            break  # nothing smaller can be sent: a legible stop, not the same request
        # strictly less: a whole turn fewer, or a smaller reply; never the same request
        assert (refit.dropped_turns > sent.dropped_turns) or (refit.max_tokens < sent.max_tokens)
        assert (len(refit.messages), refit.max_tokens) not in seen
        assert refit.context_window < sent.context_window
        seen.add((len(refit.messages), refit.max_tokens))
        sent = refit
    # the window the refusals taught stays for the run
    assert mgr.context_window < 9_000


def test_tools_and_system_edited_in_place_are_counted_again() -> None:
    messages = _chat(3)
    mgr = wg.ContextWindowManager(model_info=wg.ModelInfo(50_000, tokenizer="o200k"))
    tools = list(TOOLS)
    small = mgr.fit(messages, tools=tools, max_tokens=100)
    big = dict(TOOLS[0], function=dict(TOOLS[0]["function"], description="x " * 2_000))
    tools[0] = big  # the same list, edited in place
    grown = mgr.fit(messages, tools=tools, max_tokens=100, last_usage=wg.NO_USAGE)
    fresh = wg.ContextWindowManager(model_info=wg.ModelInfo(50_000, tokenizer="o200k"))
    assert (
        grown.estimated_tokens == fresh.fit(messages, tools=tools, max_tokens=100).estimated_tokens
    )
    assert grown.estimated_tokens > small.estimated_tokens + 1_000
    system = [{"type": "text", "text": "You are terse."}]
    chat = [{"role": "user", "content": "hi"}]
    anthropic = wg.ContextWindowManager(model_info=wg.ModelInfo(50_000, tokenizer="claude"))
    before = anthropic.fit(chat, system=system, max_tokens=100)
    system.append({"type": "text", "text": "Context: " + "y " * 2_000})
    after = anthropic.fit(chat, system=system, max_tokens=100, last_usage=wg.NO_USAGE)
    assert after.estimated_tokens > before.estimated_tokens + 1_000
