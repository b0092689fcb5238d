"""SpillStore("~/...") keeps outputs under the user's home, as a shell would read the
path: it made a directory named "~" in the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

import windowguard as wg


def test_a_leading_tilde_is_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USERPROFILE", str(home))  # Windows
    monkeypatch.chdir(work)
    store = wg.SpillStore("~/spill")
    assert store.directory == home / "spill"
    handle = store.put("the whole output\n", tool_name="run")
    assert (home / "spill" / f"{handle}.txt").is_file()
    assert not (work / "~").exists()
