"""``import windowguard`` is lazy (PEP 562): the common first use loads no provider SDK,
no event loop, no database and no HTTP client, and every public name still resolves.

Timing lives in ``bench/bench_import.py``; nothing here is timed.
"""

from __future__ import annotations

import subprocess
import sys

import windowguard

HEAVY = ("asyncio", "sqlite3", "ssl", "http.client", "email", "openai", "anthropic", "httpx")


def loaded_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter holds after running ``code``."""
    report = f"import sys; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\n{report}"], capture_output=True, text=True, check=True
    )
    return [m for m in out.stdout.strip().split(",") if m]


def test_import_loads_nothing_heavy() -> None:
    assert loaded_after("import windowguard") == []


def test_first_use_loads_nothing_heavy() -> None:
    code = (
        "import windowguard as wg\n"
        "wg.ContextWindowManager, wg.ModelInfo, wg.ClampToolResults\n"
        "assert callable(wg.guard) and wg.guard.__module__ == 'windowguard.guard'\n"
    )
    assert loaded_after(code) == []


def test_every_public_name_resolves_and_is_listed() -> None:
    # A fresh interpreter: here other tests may already have imported every submodule.
    code = (
        "import windowguard as wg\n"
        "assert set(wg.__all__) <= set(dir(wg)), set(wg.__all__) - set(dir(wg))\n"
        "missing = [n for n in wg.__all__ if getattr(wg, n, None) is None]\n"
        "assert not missing, missing\n"
        "from windowguard import ContextWindowManager, SqliteJournal, ToolLoop\n"
        "assert ContextWindowManager is wg.ContextWindowManager\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    for name in windowguard.__all__:
        assert getattr(windowguard, name) is not None, name
    assert set(windowguard.__all__) <= set(dir(windowguard))


def test_unknown_names_raise_attribute_error() -> None:
    assert not hasattr(windowguard, "NoSuchName")


def test_guard_stays_the_function_when_its_subpackage_is_imported_first() -> None:
    code = (
        "import windowguard.guard._core, windowguard as wg\n"
        "from windowguard import guard\n"
        "assert callable(wg.guard) and guard is wg.guard, wg.guard\n"
        "assert wg.guard is sys.modules['windowguard.guard'].guard\n"
    )
    subprocess.run([sys.executable, "-c", f"import sys\n{code}"], check=True)
