"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import leftovers


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A leftovers state folder of the test's own; whatever it still lists is healed after."""
    d = tmp_path / "state"
    monkeypatch.setenv(leftovers.STATE_ENV, str(d))
    yield d
    leftovers.heal_all(force=True)
