"""One set of options for every drop-in surface (decision 0008).

``wg.guard``, every integration and ``windowguard proxy`` take the same options under the
same names, with the same defaults and the same accepted types; the signatures are
compared here, so a future difference fails. The old hook class names stay aliases of
the new classes.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI

import windowguard as wg
from windowguard.cli import build_parser
from windowguard.emulator import Emulator, echo
from windowguard.guard._apis import ANTHROPIC_MESSAGES, CHAT
from windowguard.integrations import litellm as wg_litellm
from windowguard.integrations import openai_agents as wg_agents
from windowguard.integrations import pydantic_ai as wg_pydantic
from windowguard.integrations.langchain import ContextWindowMiddleware, pre_model_hook
from windowguard.proxy import ProxyConfig, ProxyServer
from windowguard.proxy._guards import ProxyGuards
from windowguard.proxy.config import discover_upstream

OPTIONS = (
    "model_info",
    "safety",
    "pruning",
    "edits",
    "strict",
    "ttl_seconds",
    "max_conversations",
    "discover",
    "sinks",
    "manager",
)
"""The shared options, in the order every surface lists them."""

REFERENCE: Callable[..., Any] = wg.guard

SURFACES: dict[str, Callable[..., Any]] = {
    "langchain.ContextWindowMiddleware": ContextWindowMiddleware,
    "langchain.pre_model_hook": pre_model_hook,
    "openai_agents.call_model_input_filter": wg_agents.call_model_input_filter,
    "pydantic_ai.ContextWindowCapability": wg_pydantic.ContextWindowCapability,
    "pydantic_ai.history_processor": wg_pydantic.history_processor,
    "litellm.ContextWindowGuard": wg_litellm.ContextWindowGuard,
}

# (surface, the options it cannot act on): these take discover for the same options
# everywhere, but see no endpoint to ask and refuse discover=True.
NO_ENDPOINT = (
    "openai_agents.call_model_input_filter",
    "pydantic_ai.ContextWindowCapability",
    "pydantic_ai.history_processor",
    "litellm.ContextWindowGuard",
)

# The proxy's flags for the shared options (sinks: --events / --otel; edits: the edit
# flags; model_info: --window; manager: none, a manager is code).
PROXY_FLAGS = {
    "safety": ("--safety",),
    "pruning": ("--pruning",),
    "strict": ("--strict",),
    "ttl_seconds": ("--ttl-seconds",),
    "max_conversations": ("--max-conversations",),
    "discover": ("--discover", "--no-discover"),
    "edits": ("--no-edits", "--clamp-tool-results", "--clear-tool-results"),
    "sinks": ("--events", "--otel"),
    "model_info": ("--window",),
}


def _parameters(function: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(function).parameters)


def _reference() -> dict[str, inspect.Parameter]:
    parameters = _parameters(REFERENCE)
    assert [name for name in parameters if name in OPTIONS] == list(OPTIONS)
    return {name: parameters[name] for name in OPTIONS}


def test_the_reference_takes_the_documented_defaults() -> None:
    reference = _reference()
    defaults = {name: parameter.default for name, parameter in reference.items()}
    assert defaults == {
        "model_info": None,
        "safety": 500,
        "pruning": "low_water",
        "edits": None,
        "strict": False,
        "ttl_seconds": 3600.0,
        "max_conversations": 1024,
        "discover": None,
        "sinks": None,
        "manager": None,
    }
    assert reference["sinks"].annotation == "Sink | Iterable[Sink] | None"
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in reference.values())


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_every_surface_takes_the_same_options(surface: str) -> None:
    reference = _reference()
    parameters = _parameters(SURFACES[surface])
    assert [name for name in parameters if name in OPTIONS] == list(OPTIONS), "order"
    for name, expected in reference.items():
        got = parameters[name]
        assert got.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert got.default == expected.default, f"{surface}: {name} default"
        assert got.annotation == expected.annotation, f"{surface}: {name} type"


def test_the_litellm_logger_takes_the_guards_options() -> None:
    from windowguard.integrations._litellm_types import GuardOptions

    guard = _parameters(wg_litellm.ContextWindowGuard)
    assert GuardOptions.__annotations__.keys() == guard.keys()
    for name, annotation in GuardOptions.__annotations__.items():
        written = getattr(annotation, "__forward_arg__", annotation)  # a TypedDict's ForwardRef
        assert written == guard[name].annotation, name
    logger = wg_litellm.ContextWindowLogger(safety=7, ttl_seconds=None)
    assert (logger.guard.options.safety, logger.guard.options.ttl_seconds) == (7, None)


def test_the_proxy_config_has_the_same_defaults_and_types() -> None:
    reference = _reference()
    fields = ProxyConfig.__dataclass_fields__
    for name in ("safety", "pruning", "strict", "ttl_seconds", "max_conversations", "discover"):
        assert fields[name].default == reference[name].default, name
        assert fields[name].type == reference[name].annotation, name


def _proxy_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = sub.choices["proxy"]
    return parser


def _proxy_args(*flags: str) -> Any:
    return build_parser().parse_args(["proxy", "--upstream", "http://127.0.0.1:9", *flags])


def test_the_proxy_flags_have_the_same_names_and_defaults() -> None:
    reference = _reference()
    args = _proxy_args()
    for name in ("safety", "pruning", "strict", "ttl_seconds", "max_conversations", "discover"):
        assert getattr(args, name) == reference[name].default, name
    flags = {flag for action in _proxy_parser()._actions for flag in action.option_strings}
    for name, wanted in PROXY_FLAGS.items():
        assert set(wanted) <= flags, name
    assert _proxy_args("--ttl", "5").ttl_seconds == 5.0  # the old spelling still works


def test_the_proxy_flags_reach_its_guards() -> None:
    args = _proxy_args(
        "--safety", "7", "--pruning", "minimal", "--strict", "--no-discover", "--ttl-seconds", "9"
    )
    assert (args.safety, args.pruning, args.strict, args.discover, args.ttl_seconds) == (
        7,
        "minimal",
        True,
        False,
        9.0,
    )
    config = ProxyConfig(
        upstream="http://127.0.0.1:9",
        window=4096,
        safety=args.safety,
        pruning=args.pruning,
        strict=args.strict,
        discover=args.discover,
        ttl_seconds=args.ttl_seconds,
    )
    upstream = discover_upstream(config)
    guards = ProxyGuards(config, upstream, ())
    for api in (CHAT, ANTHROPIC_MESSAGES):
        guard = guards.for_api(api)
        manager = guard.options.make("m")
        assert (manager.safety, manager.pruning, manager.strict) == (7, "minimal", True)
        assert guard.options.ttl_seconds == 9.0
        assert guard.discover is False


def test_no_discover_asks_the_upstream_nothing() -> None:
    # Nothing listens on port 9 of the loopback: asking would fail, not asking cannot.
    config = ProxyConfig(upstream="http://127.0.0.1:9", window=4096, discover=False)
    upstream = discover_upstream(config)
    assert (upstream.listed, upstream.counter) == ((), None)
    assert upstream.model_info is not None
    assert upstream.model_info.context_window == 4096
    with pytest.raises(wg.ConfigurationError, match="could not be reached"):
        discover_upstream(ProxyConfig(upstream="http://127.0.0.1:9"))
    with pytest.raises(wg.ConfigurationError, match="--no-discover"):
        discover_upstream(ProxyConfig(upstream="http://127.0.0.1:9", discover=False))
    known = discover_upstream(
        ProxyConfig(upstream="http://127.0.0.1:9", model="gpt-4o", discover=False)
    )
    assert known.model_info is not None
    assert known.model_info.context_window == wg.lookup_model("gpt-4o").context_window  # type: ignore[union-attr]


@pytest.mark.parametrize("strict", [True, False])
def test_the_proxys_strict_refuses_a_damaged_transcript(strict: bool) -> None:
    orphaned = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the test."},
        {"role": "tool", "tool_call_id": "call_9", "content": "no call asked for this"},
        {"role": "user", "content": "Go on."},
    ]
    body = {"model": "emulated-model", "messages": orphaned, "max_tokens": 64}
    config = {"port": 0, "strict": strict, "discover": False, "window": 4096}
    with Emulator(flavor="vllm", context_window=4096, scenario=echo) as emu:
        with ProxyServer(ProxyConfig(upstream=emu.root_url, **config)) as proxy:
            answer = httpx2.post(proxy.root_url + "/v1/chat/completions", json=body)
        if strict:
            assert answer.status_code == 400, answer.text
            assert "call_9" in answer.json()["error"]["message"]
            assert emu.records == ()  # refused before the upstream was asked
        else:
            assert len(emu.records) == 1  # passed on unchanged, as before


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--safety", "-1"), ("--pruning", "most"), ("--ttl-seconds", "0")],
)
def test_bad_proxy_flags_are_refused(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        _proxy_args(flag, value)
    assert exc.value.code == 2
    assert flag.lstrip("-").split("-")[0] in capsys.readouterr().err


# -- the options act the same everywhere ---------------------------------------------


def _make(surface: str, **options: Any) -> Any:
    if surface == "wg.guard":
        import openai

        return wg.guard(
            openai.OpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1"), **options
        )
    return SURFACES[surface](**options)


ALL = ["wg.guard", *sorted(SURFACES)]


@pytest.mark.parametrize("surface", ALL)
@pytest.mark.parametrize(
    ("option", "bad"),
    [
        ("safety", -1),
        ("pruning", "most"),
        ("strict", "yes"),
        ("ttl_seconds", 0),
        ("max_conversations", 0),
        ("discover", "yes"),
        ("sinks", 3),
    ],
)
def test_every_surface_refuses_the_same_bad_values(surface: str, option: str, bad: object) -> None:
    with pytest.raises(wg.ConfigurationError, match=option if option != "sinks" else "sink"):
        _make(surface, **{option: bad})


@pytest.mark.parametrize("surface", ALL)
def test_every_surface_takes_one_sink_or_several(surface: str) -> None:
    def sink(event: wg.Event) -> None:
        del event

    _make(surface, sinks=sink)
    _make(surface, sinks=[sink, sink])
    _make(surface, sinks=None)


@pytest.mark.parametrize("surface", NO_ENDPOINT)
def test_a_surface_without_an_endpoint_refuses_discover_true(surface: str) -> None:
    _make(surface, discover=False)
    with pytest.raises(wg.ConfigurationError, match="discover=True"):
        _make(surface, discover=True)


def test_langchain_discovers_the_window_unless_told_not_to() -> None:
    windows: dict[object, list[int]] = {}
    with Emulator(flavor="vllm", context_window=16_384, scenario=echo) as emu:
        for discover in (None, False):
            events: list[wg.Event] = []
            middleware = ContextWindowMiddleware(discover=discover, sinks=events.append)
            llm = ChatOpenAI(
                model="emulated-model", base_url=emu.base_url, api_key="x", max_retries=0
            )
            agent = create_agent(llm, [], middleware=[middleware])
            agent.invoke({"messages": [HumanMessage("hello")]})
            windows[discover] = [e.window for e in events if isinstance(e, wg.ContextEstimate)]
    assert windows[None] == [16_384]  # the emulator's, discovered
    assert windows[False] == [8192]  # an unknown model's fallback: nothing was asked


# -- one naming scheme, the old names kept ---------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (wg_pydantic.WindowGuard, wg_pydantic.ContextWindowCapability),
        (wg_litellm.LiteLLMGuard, wg_litellm.ContextWindowGuard),
        (wg_litellm.WindowGuardLogger, wg_litellm.ContextWindowLogger),
    ],
)
def test_the_old_names_are_the_new_classes(old: type, new: type) -> None:
    assert old is new
    assert new.__name__.startswith("ContextWindow")


def test_every_hook_class_follows_the_scheme() -> None:
    from windowguard.integrations import langchain as wg_langchain

    classes = [
        wg_langchain.ContextWindowMiddleware,
        wg_langchain.ContextWindowHook,
        wg_agents.ContextWindowFilter,
        wg_agents.ContextWindowHooks,
        wg_pydantic.ContextWindowCapability,
        wg_litellm.ContextWindowGuard,
        wg_litellm.ContextWindowLogger,
    ]
    for module in (wg_langchain, wg_agents, wg_pydantic, wg_litellm):
        public = [getattr(module, name) for name in module.__all__]
        hooks = [
            obj
            for obj in public
            if isinstance(obj, type) and obj.__module__.startswith("windowguard.integrations")
        ]
        assert all(obj in classes for obj in hooks), module.__name__
    assert all(cls.__name__.startswith("ContextWindow") for cls in classes)
