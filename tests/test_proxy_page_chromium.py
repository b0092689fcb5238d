"""The proxy's live page in a real browser: Debian's headless Chromium, offline.

Real traffic goes through the proxy with the openai SDK (tests/page_traffic.py), then
Chromium loads ``GET /`` as a browser does, runs the page's script (virtual time: the
page polls ``/windowguard/state.json`` more than once) and gives back its DOM and a
screenshot. The DOM must show every conversation with the numbers the proxy's state and
``/metrics`` hold, the upstream errors and the refusals, a model name that is markup as
text (nothing of it runs), and one pressure line per measured conversation; the
screenshot must be a drawn page, not a blank one.

Chromium comes from Debian (``apt-get install chromium``; ``.ci/run`` installs it when
it runs as root). Without it the test skips and says so, except under ``CI=true``, where
it must run. ``WINDOWGUARD_PAGE_SCREENSHOT=docs/img/proxy-page.png`` saves the
screenshot (how docs/proxy.md's was made).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import pytest
from matplotlib import image

import windowguard as wg
from windowguard.accounting.discovery import clear_discovery_cache
from windowguard.emulator import Emulator
from windowguard.proxy import ProxyConfig, ProxyServer

from .page_traffic import (
    FAULTS,
    WINDOW,
    XSS_MODEL,
    chromium,
    conversation_ids,
    drive,
    run_chromium,
)

SIZE = (1280, 1120)


@pytest.fixture(autouse=True)
def _fresh_discovery() -> Iterator[None]:
    clear_discovery_cache()
    wg.clear_counter_cache()
    yield
    clear_discovery_cache()
    wg.clear_counter_cache()


@pytest.fixture
def browser() -> str:
    found = chromium()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true needs Chromium for the page test: apt-get install chromium")
        pytest.skip("no chromium binary (apt-get install chromium, or set WINDOWGUARD_CHROMIUM)")
    return found


class Dom(HTMLParser):
    """The parts of the page's DOM the test reads: table rows by their data attribute
    (cells by ``data-field``), the cards, the chart's lines, the title, the tags seen."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: dict[str, dict[str, dict[str, str]]] = {
            "data-conversation": {},
            "data-error": {},
            "data-refused": {},
        }
        self.errors: list[dict[str, str]] = []
        self.cards: dict[str, str] = {}
        self.lines: list[str] = []
        self.tags: set[str] = set()
        self.body: dict[str, str] = {}
        self.title = ""
        self._row: dict[str, str] | None = None
        self._field: str | None = None
        self._card: str | None = None
        self._in: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.tags.add(tag)
        self._in.append(tag)
        if tag == "body":
            self.body = found
        if tag == "tr":
            for kind, rows in self.rows.items():
                if kind in found:
                    self._row = {}
                    if kind == "data-error":
                        self.errors.append(self._row)
                    else:
                        rows[found[kind]] = self._row
        if tag == "td" and self._row is not None:
            self._field = found.get("data-field")
            self._row[self._field or ""] = ""
        if tag == "div" and "data-card" in found:
            self._card = found["data-card"]
        if tag == "polyline":
            self.lines.append(found.get("data-conversation", ""))

    def handle_endtag(self, tag: str) -> None:
        if self._in:
            self._in.pop()
        if tag == "tr":
            self._row = None
        if tag == "td":
            self._field = None

    def handle_data(self, data: str) -> None:
        if self._row is not None and self._field is not None:
            self._row[self._field] += data
        if self._card is not None and self._in and self._in[-1] == "div" and data.strip():
            self.cards.setdefault(self._card, data.strip())
        if self._in and self._in[-1] == "title":
            self.title += data


def number(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_page_in_headless_chromium(browser: str, tmp_path: Path) -> None:
    with Emulator(flavor="vllm", context_window=WINDOW, faults=FAULTS) as emu:
        config = ProxyConfig(upstream=emu.root_url, port=0, clamp_tool_results=300)
        with ProxyServer(config) as proxy:
            seen = drive(proxy.base_url)
            state: dict[str, Any] = httpx2.get(proxy.root_url + "/windowguard/state.json").json()
            dom_text = run_chromium(browser, proxy.root_url + "/")
            shot = tmp_path / "page.png"
            run_chromium(browser, proxy.root_url + "/", screenshot=shot, size=SIZE)
    dom = Dom()
    dom.feed(dom_text)
    assert number(dom.body["data-polls"]) >= 2  # loaded, drawn, and refreshed

    rows = dom.rows["data-conversation"]
    ids = conversation_ids(seen)
    assert set(rows) == set(ids.values()) == {c["id"] for c in state["conversations"]}
    for conversation in state["conversations"]:
        row = rows[conversation["id"]]
        for name in ("sends", "edits", "prunes", "dropped_turns", "shrinks", "refusals", "errors"):
            assert number(row[name]) == conversation[name], (name, row)
        assert row["id"] == conversation["id"]
        assert row["api"] == "chat"
        if conversation["pressure"] is None:
            assert row["pressure"] == "\N{EN DASH}"
        else:
            assert row["pressure"] == f"{100 * conversation['pressure']:.1f}%"
            assert number(row["window"]) == WINDOW
    for name, id_ in ids.items():
        assert number(rows[id_]["sends"]) == seen.sends[name]
        assert number(rows[id_]["errors"]) == seen.upstream_errors[name]
        assert number(rows[id_]["refusals"]) == seen.refused[name]
        assert rows[id_]["model"] == seen.models[name]
    # the model name that is markup is shown as text, and nothing of it ran
    assert rows[ids["markup-model"]]["model"] == XSS_MODEL
    assert "img" not in dom.tags
    assert dom.title == "windowguard proxy"

    metrics = state["metrics"]
    assert number(dom.cards["requests"]) == sum(metrics["requests_total"].values())
    assert number(dom.cards["shrinks"]) == sum(metrics["shrinks_total"].values()) > 0
    assert number(dom.cards["refusals"]) == sum(metrics["refusals_total"].values()) == 1
    assert number(dom.cards["upstream_errors"]) == len(FAULTS)
    assert number(dom.cards["conversations"]) == len(ids)
    assert [(e["kind"], e["status"]) for e in dom.errors] == [("overloaded", "503")] * len(FAULTS)
    errored = {id_ for name, id_ in ids.items() if seen.upstream_errors[name]}
    assert {e["conversation"] for e in dom.errors} == errored
    assert number(dom.rows["data-refused"]["context_truncated"]["count"]) == 1
    measured = {c["id"] for c in state["conversations"] if c["points"]}
    assert sorted(dom.lines) == sorted(measured) and len(measured) == len(ids) - 1

    pixels = image.imread(shot)  # a PNG, decoded (values 0..1)
    assert pixels.shape[:2] == (SIZE[1], SIZE[0])
    rgb = np.round(pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colors = np.unique(rgb, axis=0)
    assert len(colors) > 200  # text, cards, bars and lines: not a blank page
    background = np.bincount(np.ravel_multi_index(rgb.T, (256, 256, 256))).argmax()
    assert (np.ravel_multi_index(rgb.T, (256, 256, 256)) != background).mean() > 0.05
    # the chart's first line colour (the page's palette) is drawn
    assert np.all(np.abs(rgb.astype(int) - (0x2F, 0x6F, 0xDE)) <= 8, axis=1).sum() > 100
    saved = os.environ.get("WINDOWGUARD_PAGE_SCREENSHOT")
    if saved:
        shutil.copyfile(shot, saved)
