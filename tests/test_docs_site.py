"""The reference site (mkdocs.yml, docs/) builds with ``--strict`` and stays complete.

- The site builds with ``mkdocs build --strict`` (MkDocs, Material, mkdocstrings: the
  ``docs`` extra) and holds a page per surface, the events page, the decisions and the
  API reference of every public name. Without MkDocs installed the build test skips
  with a reason, except under ``CI=true``, where it must run.
- ``docs/events.md`` lists every event class of ``windowguard.core.events`` with its
  kind and every field with its type, and nothing that is not there.
- The API reference renders every name of ``windowguard.__all__`` and every public
  integration module; every page under docs/ is in the nav.
- No docstring, comment or page cites the seeds by numbers a reader cannot look up
  ("ADR-107", "seed 003", ...); docs/background.md explains them in our own words.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import windowguard
from windowguard.core import events as events_module

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
MKDOCS_YML = ROOT / "mkdocs.yml"

SURFACE_PAGES = (
    "index.md",
    "manager.md",
    "integrations.md",
    "integrations/guard.md",
    "integrations/langchain.md",
    "integrations/openai-agents.md",
    "integrations/pydantic-ai.md",
    "integrations/litellm.md",
    "tool-loop.md",
    "proxy.md",
    "cli.md",
    "emulator.md",
    "journal.md",
    "events.md",
    "background.md",
)
"""Pages the site must have: one per surface, the events page and the seeds' ideas."""

INTEGRATION_MODULES = (
    "windowguard.integrations.langchain",
    "windowguard.integrations.openai_agents",
    "windowguard.integrations.pydantic_ai",
    "windowguard.integrations.litellm",
    "windowguard.proxy",
    "windowguard.emulator",
)
"""Public modules outside ``windowguard.__all__`` whose API the reference renders."""

UNPUBLISHED = re.compile(r"seed 0|[Ss]eed-0|ADR[ -]?[0-9]")
"""A citation of a seed by a number nobody outside the project can look up."""


# -- the events page ----------------------------------------------------------------


def _event_classes() -> dict[str, type[events_module.Event]]:
    classes: dict[str, type[events_module.Event]] = {}
    for name in events_module.__all__:
        value = getattr(events_module, name)
        is_event = isinstance(value, type) and issubclass(value, events_module.Event)
        if is_event and value is not events_module.Event:
            classes[name] = value
    return classes


def _events_page() -> dict[str, tuple[str, dict[str, str]]]:
    """``{class name: (kind, {field: type})}`` as docs/events.md lists them."""
    listed: dict[str, tuple[str, dict[str, str]]] = {}
    current: dict[str, str] | None = None
    heading = re.compile(r"^### `([a-z_]+)` \(`(\w+)`\)\s*$")
    row = re.compile(r"^\| `(\w+)` \| (`[^`]+`(?: or `[^`]+`)*) \|")
    for line in (DOCS / "events.md").read_text(encoding="utf-8").splitlines():
        found = heading.match(line)
        if found:
            kind, name = found.groups()
            assert name not in listed, f"docs/events.md lists {name} twice"
            current = {}
            listed[name] = (kind, current)
            continue
        if line.startswith("#"):
            current = None
            continue
        field = row.match(line)
        if field and current is not None:
            name, annotation = field.groups()
            assert name not in current, f"docs/events.md lists the field {name} twice"
            # `int` or `None` on the page (a pipe would split the table's cell)
            current[name] = " | ".join(re.findall(r"`([^`]+)`", annotation))
    return listed


def test_the_events_page_lists_every_event_and_every_field() -> None:
    classes = _event_classes()
    listed = _events_page()
    assert len(classes) >= 20  # the module's event classes were found
    missing = sorted(set(classes) - set(listed))
    extra = sorted(set(listed) - set(classes))
    assert not missing, f"events in windowguard/core/events.py but not in docs/events.md: {missing}"
    assert not extra, f"events in docs/events.md that the code does not define: {extra}"
    for name, cls in classes.items():
        kind, fields = listed[name]
        assert kind == cls.kind, f"docs/events.md: {name} is {cls.kind!r}, not {kind!r}"
        in_code = {f.name: str(f.type) for f in dataclasses.fields(cls)}
        assert set(fields) == set(in_code), (
            f"docs/events.md, {name}: fields missing {sorted(set(in_code) - set(fields))}, "
            f"not in the code {sorted(set(fields) - set(in_code))}"
        )
        for field, annotation in in_code.items():
            assert fields[field] == annotation, (
                f"docs/events.md, {name}.{field}: type {fields[field]!r}, code says {annotation!r}"
            )


def test_every_event_kind_is_unique() -> None:
    kinds = [cls.kind for cls in _event_classes().values()]
    assert len(kinds) == len(set(kinds))


# -- the API reference and the nav ---------------------------------------------------


def _rendered() -> set[str]:
    """Every identifier an API reference page renders with ``::: identifier``."""
    found: set[str] = set()
    for page in REFERENCE.glob("*.md"):
        found.update(re.findall(r"^::: ([\w.]+)\s*$", page.read_text(encoding="utf-8"), re.M))
    return found


def test_the_reference_renders_every_public_name_and_integration_module() -> None:
    rendered = _rendered()
    missing = [name for name in windowguard.__all__ if f"windowguard.{name}" not in rendered]
    assert not missing, f"names of windowguard.__all__ with no ::: in docs/reference/: {missing}"
    modules = [module for module in INTEGRATION_MODULES if module not in rendered]
    assert not modules, f"public modules with no ::: in docs/reference/: {modules}"
    # every event class is in the reference too, under its shortest public path
    for name in _event_classes():
        short = f"windowguard.{name}" if name in windowguard.__all__ else None
        assert short in rendered or f"windowguard.core.events.{name}" in rendered, name


def test_every_page_is_in_the_nav() -> None:
    config = MKDOCS_YML.read_text(encoding="utf-8")
    pages = sorted(
        page.relative_to(DOCS).as_posix()
        for page in DOCS.rglob("*.md")
        if "_ext" not in page.relative_to(DOCS).parts
    )
    missing = [
        page for page in pages if not re.search(rf"[\s:-] ?{re.escape(page)}\s*$", config, re.M)
    ]
    assert not missing, f"pages not in mkdocs.yml's nav (add them): {missing}"
    for page in SURFACE_PAGES:
        assert (DOCS / page).is_file(), f"docs/{page} is missing"


# -- the seeds are explained, not cited by number ------------------------------------


def test_no_page_or_docstring_cites_the_seeds_by_number() -> None:
    offenders: list[str] = []
    files = [ROOT / "README.md", *(p for p in (ROOT / "src").rglob("*") if p.is_file())]
    files += [p for p in DOCS.rglob("*") if p.is_file()]
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files (compiled bytecode, images)
        for number, line in enumerate(text.splitlines(), 1):
            if UNPUBLISHED.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, (
        "cite the seeds by the names docs/background.md gives them (the tool-loop design, "
        "the pressure gauge, the shrink guard), not by number:\n" + "\n".join(offenders)
    )


def test_the_background_page_explains_each_seed() -> None:
    text = (DOCS / "background.md").read_text(encoding="utf-8")
    for section in ("## The tool-loop design", "## The pressure gauge", "## The shrink guard"):
        assert section in text


# -- the build -----------------------------------------------------------------------


def _require_mkdocs() -> None:
    missing = [
        name
        for name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
        if _find_spec(name) is None
    ]
    if missing:
        if os.environ.get("CI") == "true":
            raise AssertionError(f"CI must build the site; not installed: {missing}")
        pytest.skip(f'the site needs the docs extra (pip install -e ".[docs]"): no {missing}')


def _find_spec(name: str) -> object:
    try:
        return importlib.util.find_spec(name)
    except ModuleNotFoundError:
        return None


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _require_mkdocs()
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(MKDOCS_YML)]
    done = subprocess.run(
        [*command, "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def _html(site: Path, page: str) -> str:
    stem = page.removesuffix(".md")
    stem = stem.removesuffix("index").rstrip("/") if stem.endswith("index") else stem
    path = site / stem / "index.html" if stem else site / "index.html"
    assert path.is_file(), f"the site has no page for docs/{page}"
    return path.read_text(encoding="utf-8")


def test_the_site_builds_strict_with_every_surface_page(site: Path) -> None:
    for page in SURFACE_PAGES:
        _html(site, page)
    for decision in sorted((DOCS / "decisions").glob("*.md")):
        _html(site, f"decisions/{decision.name}")


def test_the_events_page_renders_every_kind(site: Path) -> None:
    html = _html(site, "events.md")
    for cls in _event_classes().values():
        assert f"<code>{cls.kind}</code>" in html, cls.kind


def test_the_reference_pages_render_the_docstrings(site: Path) -> None:
    html = "".join(_html(site, f"reference/{page.name}") for page in REFERENCE.glob("*.md"))
    for name in windowguard.__all__:
        assert f'id="windowguard.{name}"' in html, f"windowguard.{name} is not rendered"
    for module in INTEGRATION_MODULES:
        assert f'id="{module}"' in html, f"{module} is not rendered"


def test_the_site_fetches_nothing(site: Path) -> None:
    """No web fonts or scripts from a CDN: the pages work offline, as the build does."""
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        remote = re.findall(r'<(?:link|script)[^>]+(?:href|src)="(https?://[^"]+)"', text)
        assert not remote, f"{page.relative_to(site)} loads {remote}"
