"""DESIGN.md's public API, exactly as outside tests and benchmarks use it."""

from __future__ import annotations

import windowguard as wg
from windowguard.run.providers.fake import FakeCalls, FakeProvider


def test_design_snippet_runs_as_written() -> None:
    info = wg.lookup_model("gpt-4o")
    assert info is not None and info.context_window > 0
    info = wg.ModelInfo(context_window=32_768, max_output_tokens=4_096, max_input_tokens=None)

    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    tools = [
        {
            "type": "function",
            "function": {"name": "t", "description": "d", "parameters": {"type": "object"}},
        }
    ]
    mgr = wg.ContextWindowManager(model="gpt-4o")
    fit = mgr.fit(messages, tools=tools, max_tokens=4_096, last_usage=None)
    assert isinstance(fit.messages, list) and all(a is b for a, b in zip(fit.messages, messages))
    assert isinstance(fit.estimated_tokens, int) and isinstance(fit.budget, int)
    assert fit.dropped_turns == 0 and 0 < fit.pressure < 1 and fit.max_tokens == 4_096
    assert fit.deferred is False
    assert (
        wg.ContextWindowManager(model_info=info, safety=500, fallback_window=8192)
        .fit(messages)
        .budget
        == 32_768 - 4_096 - 500
    )

    est = wg.Estimator()
    assert est.count(messages, tools=None) > 0

    shrunk = wg.shrink_max_tokens(messages, tools=tools, context_window=131_072, requested=131_072)
    assert (shrunk.shrunk, shrunk.emergency) == (True, False) and shrunk.max_tokens < 131_072

    gauge = wg.ContextGauge(window=200_000)
    assert gauge.measure(tokens=50_000).to_dict() == {
        "event": "context_pressure",
        "tokens": 50000,
        "window": 200000,
        "pressure": 0.25,
    }

    failure = wg.classify_failure(
        status=400,
        body={
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
    )
    assert failure.kind is wg.FailureKind.CONTEXT_OVERFLOW and failure.retryable is False
    assert failure.prompt_tokens == 9000 and failure.context_window == 8192
    assert wg.TerminationReason.CONTEXT_TRUNCATED.is_retryable is False

    @wg.tool
    def echo(text: str) -> str:
        """Echo text."""
        return text

    provider = FakeProvider([FakeCalls(("echo", {"text": "x"})), "done"])
    loop = wg.ToolLoop(
        provider, tools=[echo], manager=wg.ContextWindowManager(model_info=info), max_iterations=25
    )
    result = loop.run(messages)
    assert result.termination is wg.TerminationReason.COMPLETED
    assert isinstance(result.messages, list) and result.usage.model_calls == 2 and result.events
