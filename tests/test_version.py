"""One version source: ``_version.py`` is what the wheel's metadata, ``wg.__version__``
and ``windowguard --version`` say, and the CHANGELOG's top section is that release."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import windowguard as wg
from windowguard._version import __version__

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_the_metadata_and_the_command_say_one_version() -> None:
    assert wg.__version__ == __version__
    assert importlib.metadata.version("windowguard") == __version__
    done = subprocess.run(
        [sys.executable, "-c", "from windowguard.cli import main; main()", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, f"windowguard {__version__}")


def test_the_changelog_top_section_is_this_release() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    top = re.search(r"^## (\S+)(?: \((\w+)\))?$", text, flags=re.MULTILINE)
    assert top is not None, "CHANGELOG.md has no '## <version>' section"
    release = re.match(r"\d+\.\d+\.\d+", __version__)
    assert release is not None
    assert top.group(1) == release.group(0)
    # a development version is unreleased, and a release is not
    assert (top.group(2) == "unreleased") == (".dev" in __version__)
