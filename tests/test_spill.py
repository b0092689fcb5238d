"""The spill store: private files, deterministic handles, no path escape, exact paging;
and the read_spilled tool, through ToolLoop."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import windowguard as wg
from windowguard.core.exceptions import SpillError, SpillHandleError
from windowguard.run.providers.base import ModelRequest, ToolCall
from windowguard.run.providers.fake import AsyncFakeProvider, FakeCalls, FakeProvider
from windowguard.run.spill import READ_SPILLED, SpillPage, SpillStore, spill_tool
from windowguard.run.tools import execute_tool

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@posix_only
def test_the_directory_is_made_private_and_files_are_0600(tmp_path: Path) -> None:
    old = os.umask(0)  # the most permissive umask must not leak into the store
    try:
        store = SpillStore(tmp_path / "a" / "spill")
        handle = store.put("hello\n", tool_name="read_file")
    finally:
        os.umask(old)
    assert mode(store.directory) == 0o700
    assert mode(store.directory / f"{handle}.txt") == 0o600
    assert sorted(p.name for p in store.directory.iterdir()) == [f"{handle}.txt"]


@posix_only
def test_an_existing_directory_others_can_reach_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    with pytest.raises(SpillError, match=r"reachable by group or others \(mode 0755\).*chmod 700"):
        SpillStore(shared)
    assert mode(shared) == 0o755  # refused, never silently changed
    shared.chmod(0o700)
    assert SpillStore(shared).directory == shared


@posix_only
def test_a_symlinked_or_non_directory_path_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(SpillError, match="symbolic link"):
        SpillStore(link)
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(SpillError, match="not a directory"):
        SpillStore(afile)


@posix_only
def test_a_directory_swapped_for_a_symlink_later_is_refused(tmp_path: Path) -> None:
    store = SpillStore(tmp_path / "spill")
    handle = store.put("text")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.rename(store.directory, tmp_path / "moved")
    store.directory.symlink_to(elsewhere)
    with pytest.raises(SpillError, match="symbolic link"):
        store.put("more")
    with pytest.raises(SpillError, match="symbolic link"):
        store.read(handle)


def test_handles_are_deterministic_and_a_second_put_writes_nothing(tmp_path: Path) -> None:
    store = SpillStore(tmp_path / "spill")
    text = "the same output\n" * 100
    one = store.put(text, tool_name="read_file")
    path = store.directory / f"{one}.txt"
    before = os.stat(path)
    assert store.put(text, tool_name="read_file") == one
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns and os.stat(path).st_ino == before.st_ino
    assert SpillStore(tmp_path / "spill").put(text, tool_name="read_file") == one  # a new process
    assert one.startswith("read_file-") and len(one) == len("read_file-") + 32
    assert store.put(text, tool_name="grep") != one
    assert store.put(text).startswith("output-")
    assert store.put(text, tool_name="../../etc/pass wd").startswith("______etc_pass_wd-")
    assert store.put(text + "x", tool_name="read_file") != one


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(min_size=0, max_size=3_000),
    limit=st.integers(1, 700),
)
def test_paging_reads_back_the_whole_text_exactly(tmp_path: Path, text: str, limit: int) -> None:
    store = SpillStore(tmp_path / "pages", page_chars=500)
    handle = store.put(text, tool_name="t")
    assert store.text(handle) == text
    offset, pieces = 0, []
    while True:
        page = store.page(handle, offset, limit)
        assert page.total == len(text) and page.offset == offset
        assert page.end - page.offset <= min(limit, 500)
        rendered = store.read(handle, offset, limit)
        header, _, body = rendered.partition("\n")
        assert header.startswith(f"[read_spilled {handle}: ")
        if offset >= len(text):
            assert "past the end" in header and body == ""
            break
        assert body == page.text
        pieces.append(body)
        if page.end == len(text):
            assert "this is the end" in header
            break
        assert f"next page: offset={page.end}" in header
        offset = page.end
    assert "".join(pieces) == text


def test_lone_surrogates_round_trip(tmp_path: Path) -> None:
    store = SpillStore(tmp_path / "s")
    text = "a\ud800b"
    assert store.text(store.put(text)) == text


@pytest.mark.parametrize(
    "handle",
    [
        "../secret",
        "../../etc/passwd",
        "/etc/passwd",
        "a/b",
        "read_file-0123456789abcdef0123456789abcde\x00",
        "",
        "read_file-0123456789abcdef0123456789abcde",  # 31 digits
        "read_file-0123456789ABCDEF0123456789ABCDEF",  # not the store's alphabet
        "read-file-0123456789abcdef0123456789abcdef",
        "read_file-0123456789abcdef0123456789abcdef.txt",
        "x" * 41 + "-0123456789abcdef0123456789abcdef",
        None,
        42,
    ],
)
def test_anything_but_a_store_handle_is_refused(tmp_path: Path, handle: Any) -> None:
    store = SpillStore(tmp_path / "spill")
    with pytest.raises(SpillHandleError, match="is not a spill handle"):
        store.read(handle)


def test_an_unknown_handle_is_a_typed_error(tmp_path: Path) -> None:
    store = SpillStore(tmp_path / "spill")
    with pytest.raises(SpillHandleError, match="no spilled output has the handle"):
        store.read("read_file-0123456789abcdef0123456789abcdef")


@posix_only
def test_a_symlink_planted_under_a_handle_is_refused(tmp_path: Path) -> None:
    store = SpillStore(tmp_path / "spill")
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    handle = "read_file-0123456789abcdef0123456789abcdef"
    (store.directory / f"{handle}.txt").symlink_to(secret)
    with pytest.raises(SpillHandleError, match="cannot be read"):
        store.read(handle)
    text = "planted"
    import hashlib

    planted = f"t-{hashlib.sha256(text.encode()).hexdigest()[:32]}"
    (store.directory / f"{planted}.txt").symlink_to(secret)
    with pytest.raises(SpillError, match="not a regular file"):
        store.put(text, tool_name="t")
    assert secret.read_text() == "private"


def test_size_caps_per_file_and_in_all(tmp_path: Path) -> None:
    store = SpillStore(tmp_path / "spill", max_file_bytes=100, max_total_bytes=250)
    with pytest.raises(SpillError, match="per-file cap of 100 bytes"):
        store.put("é" * 51)  # 102 bytes of UTF-8
    first = store.put("a" * 100)
    store.put("b" * 100)
    with pytest.raises(SpillError, match="cap of 250"):
        store.put("c" * 100)
    assert store.put("a" * 100) == first  # kept already: no new bytes, no error


@pytest.mark.parametrize("option", ["max_file_bytes", "max_total_bytes", "page_chars"])
def test_limits_must_be_positive_ints(tmp_path: Path, option: str) -> None:
    with pytest.raises(SpillError, match=option):
        SpillStore(tmp_path / "s", **{option: 0})


def test_bad_offsets_and_limits_are_named(tmp_path: Path) -> None:
    store = SpillStore(tmp_path / "s", page_chars=10)
    handle = store.put("0123456789" * 5)
    with pytest.raises(SpillError, match="offset"):
        store.read(handle, -1)
    with pytest.raises(SpillError, match="limit"):
        store.read(handle, 0, 0)
    assert store.page(handle, 0, 10_000).end == 10  # capped at page_chars
    assert store.page(handle, 45).text == "56789"
    with pytest.raises(SpillError, match="must be text"):
        store.put(b"bytes")  # type: ignore[arg-type]


def test_a_page_renders_its_range() -> None:
    page = SpillPage(handle="t-" + "0" * 32, text="abc", offset=3, end=6, total=9)
    assert (
        page.render()
        == f"[read_spilled t-{'0' * 32}: characters 3-6 of 9; next page: offset=6]\nabc"
    )


# -- the tool ----------------------------------------------------------------------------


def test_the_tool_schema_in_every_format(tmp_path: Path) -> None:
    tool = spill_tool(SpillStore(tmp_path / "s", page_chars=5_000))
    chat = tool.schema("openai_chat")
    assert chat["type"] == "function" and chat["function"]["name"] == READ_SPILLED
    params = chat["function"]["parameters"]
    assert params["required"] == ["handle"]
    assert params["properties"]["limit"]["maximum"] == 5_000
    assert tool.schema("responses") == {
        "type": "function",
        "name": READ_SPILLED,
        "description": tool.description,
        "parameters": params,
        "strict": False,
    }
    assert tool.schema("anthropic") == {
        "name": READ_SPILLED,
        "description": tool.description,
        "input_schema": params,
    }
    with pytest.raises(wg.ConfigurationError, match="unknown format"):
        tool.schema("gemini")  # type: ignore[arg-type]
    with pytest.raises(SpillError, match="needs a SpillStore"):
        spill_tool("dir")  # type: ignore[arg-type]


def test_the_tool_handler_pages_and_turns_bad_handles_into_error_results(tmp_path: Path) -> None:
    store = SpillStore(tmp_path / "s")
    handle = store.put("x" * 30)
    tools = {READ_SPILLED: spill_tool(store)}
    call = ToolCall(
        id="c1",
        name=READ_SPILLED,
        arguments=json.dumps({"handle": handle, "offset": 10, "limit": 5}),
    )
    result = execute_tool(call, tools)
    assert not result.is_error and result.content.endswith("\nxxxxx")
    bad = ToolCall(id="c2", name=READ_SPILLED, arguments=json.dumps({"handle": "../../etc/passwd"}))
    result = execute_tool(bad, tools)
    assert (
        result.is_error
        and "SpillHandleError" in result.content
        and "not a spill handle" in result.content
    )


def loop_script(handle: str, text: str, page: int) -> list[Any]:
    steps: list[Any] = [
        FakeCalls((READ_SPILLED, {"handle": handle, "offset": offset, "limit": page}))
        for offset in range(0, len(text), page)
    ]
    return [*steps, "read it all"]


def spilling_manager(store: SpillStore) -> wg.ContextWindowManager:
    manager = wg.ContextWindowManager(model_info=wg.ModelInfo(200_000, tokenizer="o200k"))
    # The manager's edits option arrives with the pipeline; the loop reads it already.
    manager.edits = (wg.ClampToolResults(max_tokens=2_000, spill=store),)  # type: ignore[attr-defined]
    return manager


def bodies(messages: list[Any]) -> str:
    out = []
    for m in messages:
        if m.get("role") == "tool":
            header, _, body = m["content"].partition("\n")
            assert header.startswith("[read_spilled ")
            out.append(body)
    return "".join(out)


def test_tool_loop_offers_read_spilled_and_the_model_pages_through_it(tmp_path: Path) -> None:
    store = SpillStore(tmp_path / "spill", page_chars=4_000)
    text = "".join(f"line {i}: {'z' * (i % 61)}\n" for i in range(1_500))
    handle = store.put(text, tool_name="run_tests")
    provider = FakeProvider(loop_script(handle, text, 4_000))
    loop = wg.ToolLoop(provider, manager=spilling_manager(store), max_iterations=50)
    result = loop.run([{"role": "user", "content": "what failed?"}])
    assert result.termination is wg.TerminationReason.COMPLETED
    assert [t.name for t in provider.requests[0].tools] == [READ_SPILLED]
    assert bodies(result.messages) == text


def test_the_async_loop_offers_it_too(tmp_path: Path) -> None:
    store = SpillStore(tmp_path / "spill", page_chars=1_000)
    text = "é中🙂 " * 900
    handle = store.put(text)
    provider = AsyncFakeProvider(loop_script(handle, text, 1_000))
    loop = wg.AsyncToolLoop(provider, manager=spilling_manager(store), max_iterations=50)
    result = asyncio.run(loop.run([{"role": "user", "content": "go"}]))
    assert result.termination is wg.TerminationReason.COMPLETED
    assert bodies(result.messages) == text


def test_a_callers_tool_of_the_same_name_wins_and_no_spill_offers_nothing(tmp_path: Path) -> None:
    @wg.tool
    def read_spilled(handle: str) -> str:
        """The caller's own."""
        return "mine"

    store = SpillStore(tmp_path / "spill")
    loop = wg.ToolLoop(FakeProvider(["ok"]), tools=[read_spilled], manager=spilling_manager(store))
    assert loop.tools[READ_SPILLED] is read_spilled
    plain = wg.ContextWindowManager(model_info=wg.ModelInfo(8_192))
    plain.edits = (wg.ClampToolResults(max_tokens=500),)  # type: ignore[attr-defined]
    assert wg.ToolLoop(FakeProvider(["ok"]), manager=plain).tools == {}
    assert wg.ToolLoop(FakeProvider(["ok"])).tools == {}


def test_requests_name_the_tool_for_the_model(tmp_path: Path) -> None:
    store = SpillStore(tmp_path / "spill")
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return "done"

    wg.ToolLoop(FakeProvider(answer), manager=spilling_manager(store)).run(
        [{"role": "user", "content": "hi"}]
    )
    (spec,) = seen[0].tools
    assert spec.name == READ_SPILLED and "handle" in spec.parameters["properties"]
