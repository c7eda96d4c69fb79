"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import leftovers, registry

PLUGINS = Path(__file__).parent / "plugins"


@pytest.fixture(autouse=True, scope="session")
def _no_warm_spark(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never check on a developer's warm Spark (`undertow spark start`): the warm
    server's folder is one of the session's own, empty unless a test starts one there."""
    os.environ["UNDERTOW_SPARK_DIR"] = str(tmp_path_factory.mktemp("warm-spark"))


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A leftovers state folder of the test's own; whatever it still lists is healed after."""
    d = tmp_path / "state"
    monkeypatch.setenv(leftovers.STATE_ENV, str(d))
    yield d
    leftovers.heal_all(force=True)


@pytest.fixture
def toy_plugin_env(tmp_path: Path) -> dict[str, str]:
    """The environment of an `undertow` subprocess that loads tests/plugins/toyplug.py."""
    return {**os.environ, registry.PLUGINS_ENV: "toyplug",
            "UNDERTOW_STATE_DIR": str(tmp_path / "state"),
            "PYTHONPATH": os.pathsep.join([str(PLUGINS), os.environ.get("PYTHONPATH", "")])}
