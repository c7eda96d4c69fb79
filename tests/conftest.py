"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import leftovers, registry

PLUGINS = Path(__file__).parent / "plugins"
SOAK_ENV = "UNDERTOW_SOAK"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", default=False,
                     help="also run the soak tests (exhaustive sweeps the nightly runs; "
                          f"or {SOAK_ENV}=1)")


# Under pytest-xdist (`just test -n 2 --dist loadgroup`) the tests of one group run one
# after another on one worker: those on the session's shared Kafka cluster (one cluster, not
# one per worker), and those on containers (one Docker engine, its images built once). Every
# other test, its own clusters included, may run beside any other.
def _xdist_group(item: pytest.Item) -> str | None:
    if "kafka_cluster" in getattr(item, "fixturenames", ()):
        return "kafka-cluster"
    if item.get_closest_marker("docker") or item.get_closest_marker("ssh"):
        return "containers"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Soak tests (long sweeps: `just test-soak`, the nightly) are left out of the default
    suite, deselected rather than skipped, so the suite's time is what its tests take; the
    others get their xdist group."""
    if not (config.getoption("--soak") or os.environ.get(SOAK_ENV) == "1"):
        soak = [i for i in items if i.get_closest_marker("soak") is not None]
        if soak:
            config.hook.pytest_deselected(items=soak)
            items[:] = [i for i in items if i.get_closest_marker("soak") is None]
    for item in items:
        group = _xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True, scope="session")
def _no_warm_spark(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never check on a developer's warm Spark (`undertow spark start`): the warm
    server's folder is one of the session's own, empty until `session_spark` starts one."""
    os.environ["UNDERTOW_SPARK_DIR"] = str(tmp_path_factory.mktemp("warm-spark"))


@pytest.fixture(scope="session")
def session_spark(_no_warm_spark: None) -> Iterator[dict[str, object]]:
    """One warm Spark server (`undertow spark start`) for the session, in its own folder:
    every run and check of a slow test (in-process or an `undertow` subprocess, which
    inherits UNDERTOW_SPARK_DIR) then attaches to it, as `--spark auto` does on a
    developer's machine, instead of starting a JVM and its Python workers of its own:
    seconds of CPU per check. Stopped, with all it forked, at the session's end."""
    from checkers.spark_server import start_server, stop_server

    state = start_server(port=0, master="local[2]", driver_memory="2g")
    try:
        yield state
    finally:
        stop_server()


@pytest.fixture(autouse=True)
def _slow_tests_check_on_the_session_spark(request: pytest.FixtureRequest) -> None:
    """A slow test (clusters, runs, Spark) checks on `session_spark`; a test that must
    check cold says so (`--spark cold`, TestSpec(spark="cold")), as a user would."""
    if request.node.get_closest_marker("slow") is not None:
        request.getfixturevalue("session_spark")


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
