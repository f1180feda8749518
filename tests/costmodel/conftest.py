"""Cost-model tests never touch the user's real data directory: SEEDANCE_HOME is a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def seedance_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private SEEDANCE_HOME for each test."""
    home = tmp_path / "seedance-home"
    monkeypatch.setenv("SEEDANCE_HOME", str(home))
    return home
