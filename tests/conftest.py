"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import pytest

from harness import leftovers, registry
from tests.xdist_groups import mark_groups

PLUGINS = Path(__file__).parent / "plugins"
SOAK_ENV = "UNDERTOW_SOAK"
# the markers of tests that start clusters, JVMs, Spark or containers (`just test-fast`
# leaves them out); every other test is light
HEAVY = ("slow", "docker", "ssh", "browser", "kafka")
_WARM_SPARK = pytest.StashKey[Future[dict[str, Any]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", default=False,
                     help="also run the soak tests and nightly variants (exhaustive "
                          f"sweeps, the other client of a pair; or {SOAK_ENV}=1)")


@pytest.hookimpl(tryfirst=True)  # before xdist's, which reads the groups given here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Soak tests (long sweeps) and nightly tests (the other Kafka client of a pair:
    tests/kafka/pairs.py; a sweep's other cases; end-to-end tests whose parts the suite
    covers, each saying where) are left out of the default suite (`just test-soak`, the
    nightly), deselected rather than skipped, so the suite's time is what its tests take;
    the others get their xdist group. The light tests run first, while the session's warm Spark
    starts beside them (`session_spark`): its JVM's start is then off the suite's path."""
    if not (config.getoption("--soak") or os.environ.get(SOAK_ENV) == "1"):
        soak = [i for i in items if _nightly_only(i)]
        if soak:
            config.hook.pytest_deselected(items=soak)
            items[:] = [i for i in items if not _nightly_only(i)]
    mark_groups(items)
    items.sort(key=_heavy)  # stable: each kind keeps its files' order
    # Tests never check on a developer's warm Spark (`undertow spark start`): the warm
    # server's folder is one of the session's own, empty until the session starts one.
    factory = getattr(config, "_tmp_path_factory", None)
    os.environ["UNDERTOW_SPARK_DIR"] = str(
        factory.mktemp("warm-spark") if factory is not None else tempfile.mkdtemp())
    if not config.option.collectonly and any(i.get_closest_marker("slow") for i in items):
        # pyspark is imported here, not first in the start's thread: a test importing it
        # at the same moment saw it half-initialised (a circular ImportError)
        import pyspark.sql  # noqa: F401

        from checkers.spark_server import start_server

        pool = ThreadPoolExecutor(1, thread_name_prefix="warm-spark")
        config.stash[_WARM_SPARK] = pool.submit(
            start_server, port=0, master="local[2]", driver_memory="2g", warm=False)
        pool.shutdown(wait=False)


def _nightly_only(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) is not None for m in ("soak", "nightly"))


def _heavy(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) is not None for m in HEAVY)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The session's warm Spark is stopped, with all it forked, however the session ended
    (the last test, an error, Ctrl-C), once its start has ended."""
    started = config.stash.get(_WARM_SPARK, None)
    if started is not None:
        from checkers.spark_server import stop_server

        wait([started])  # a start that failed has stopped what it started; this is safe then
        stop_server()
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        _stop_the_workers_warm_sparks(config)


def _stop_the_workers_warm_sparks(config: pytest.Config) -> None:
    """xdist's controller, last: a worker that died (a crash, a kill) never ran its own
    unconfigure, so any warm Spark a worker recorded in its folder and left running is
    ended here, with what it forked."""
    from checkers.spark_server import kill_tagged, read_state

    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return
    # each worker's folder once (not its `warm-sparkcurrent` link beside it)
    for folder in factory.getbasetemp().glob("popen-gw*/warm-spark[0-9]*"):
        state = read_state(folder)
        if state is not None:
            kill_tagged(str(state["tag"]))


@pytest.fixture(scope="session")
def session_spark(pytestconfig: pytest.Config) -> dict[str, Any]:
    """One warm Spark server (`undertow spark start`) for the session, in its own folder:
    every run and check of a slow test (in-process or an `undertow` subprocess, which
    inherits UNDERTOW_SPARK_DIR) then attaches to it, as `--spark auto` does on a
    developer's machine, instead of starting a JVM and its Python workers of its own:
    seconds of CPU per check. Started at collection (above), stopped at unconfigure; its
    first job runs here, in the test's thread, as it opens a Connect session."""
    from checkers.spark_server import warm_workers

    started = pytestconfig.stash.get(_WARM_SPARK, None)
    if started is None:
        pytest.fail("session_spark is for slow tests: mark the test `slow`")
    state = started.result()
    warm_workers(state)
    return state


@pytest.fixture(autouse=True)
def _slow_tests_check_on_the_session_spark(request: pytest.FixtureRequest) -> None:
    """A slow test (clusters, runs, Spark) checks on `session_spark`; a test that must
    check cold says so (`--spark cold`, `[checkers] spark = "cold"`), as a user would."""
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
