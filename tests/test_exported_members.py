"""The public namespace: sorted, complete, and free of provider SDK imports."""

from __future__ import annotations

import subprocess
import sys

import windowguard


def test_all_is_sorted_and_complete() -> None:
    public = {
        name
        for name, value in vars(windowguard).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("windowguard")
    }
    assert windowguard.__all__ == sorted(windowguard.__all__, key=lambda s: (not s.isupper(), s))
    assert public <= set(windowguard.__all__)
    assert all(hasattr(windowguard, name) for name in windowguard.__all__)


def test_namespace_holds_no_typing_helpers() -> None:
    public = {name for name in vars(windowguard) if not name.startswith("_")}
    assert not {"Any", "TYPE_CHECKING"} & public
    assert not [name for name in dir(windowguard) if name in ("Any", "TYPE_CHECKING")]


def test_importing_windowguard_imports_no_provider_sdk() -> None:
    code = "import sys, windowguard; print(sorted(m for m in ('openai', 'anthropic', 'tiktoken', 'tokenizers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
