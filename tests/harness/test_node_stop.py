"""A node asked to shut down (SIGTERM; SIGKILL after a grace): the server's own shutdown
runs, a frozen one is woken so that it can, and one that ignores SIGTERM still goes.
Real processes through the local backend's launcher."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.control.launcher import Launcher
from harness.control.processes import NodeProcesses

SERVER = """
import pathlib, signal, sys, time
def bye(*_):
    pathlib.Path(sys.argv[1]).write_text("shut down")
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
print("up", flush=True)
while True:
    time.sleep(0.05)
"""
DEAF = SERVER.replace("signal.signal(signal.SIGTERM, bye)",
                      "signal.signal(signal.SIGTERM, signal.SIG_IGN)")


@pytest.fixture
def procs() -> Iterator[NodeProcesses]:
    launcher = Launcher("node-stop-test")
    table = NodeProcesses(launcher, ["n1"])
    yield table
    table.kill("n1")
    launcher.close()


def _start(procs: NodeProcesses, tmp_path: Path, script: str) -> Path:
    marker = tmp_path / "shutdown"
    log = tmp_path / "n1.log"
    procs.start("n1", [sys.executable, "-c", script, str(marker)], tmp_path, log)
    deadline = time.monotonic() + 20
    while "up" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the server never came up"
        time.sleep(0.02)
    return marker


def test_a_stop_runs_the_servers_own_shutdown(procs: NodeProcesses, tmp_path: Path) -> None:
    marker = _start(procs, tmp_path, SERVER)
    procs.stop("n1", grace_s=20)
    assert not procs.is_running("n1")
    assert marker.read_text() == "shut down"


def test_a_paused_server_is_woken_to_shut_down(procs: NodeProcesses, tmp_path: Path) -> None:
    marker = _start(procs, tmp_path, SERVER)
    procs.pause("n1")
    procs.stop("n1", grace_s=20)
    assert not procs.is_running("n1") and not procs.is_paused("n1")
    assert marker.read_text() == "shut down"


def test_a_server_deaf_to_sigterm_is_killed_after_the_grace(procs: NodeProcesses,
                                                           tmp_path: Path) -> None:
    marker = _start(procs, tmp_path, DEAF)
    t0 = time.monotonic()
    procs.stop("n1", grace_s=0.5)
    assert not procs.is_running("n1") and time.monotonic() - t0 >= 0.5
    assert not marker.exists()
