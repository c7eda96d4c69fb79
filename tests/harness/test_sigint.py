"""SIGINT at any moment, and SIGKILL + `undertow heal`, leave no broker, proxy or port behind.

Drives the real CLI in a subprocess; leftovers are looked for by what the run
made: processes whose command line or environment names its folder, and every
port its NODE.json files name (broker listens and the proxy's link ports).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def start(tmp_path: Path, time_limit_s: float = 60,
          env_extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The run checks on a Spark of its own (`--spark cold`, not the session's warm one):
    that JVM and its workers are among what an interrupt must leave nothing of."""
    env = {**os.environ, "UNDERTOW_STATE_DIR": str(tmp_path / "state"), **(env_extra or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--time-limit", str(time_limit_s),
         "--nemesis-interval", "2", "--seed", "4", "--spark", "cold",
         "--results-dir", str(tmp_path / "results")],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(pred: object, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def run_dir(tmp_path: Path) -> Path | None:
    latest = tmp_path / "results" / "latest"
    return latest.resolve() if latest.exists() else None


def history_lines(tmp_path: Path) -> int:
    d = run_dir(tmp_path)
    if d is None or not (d / "history.jsonl").exists():
        return 0
    return (d / "history.jsonl").read_bytes().count(b"\n")


def ports_of(d: Path) -> set[int]:
    ports: set[int] = set()
    for cfg in d.glob("nodes/*/NODE.json"):
        data = json.loads(cfg.read_text())
        for addr in [data["listen"], *data["peers"].values()]:
            ports.add(int(addr.rsplit(":", 1)[1]))
    return ports


def leftovers(tmp_path: Path) -> list[str]:
    found: list[str] = []
    mark = str(tmp_path)
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            env = (p / "environ").read_bytes().decode(errors="replace")
            state = (p / "stat").read_text().split(") ")[1][0]
        except (OSError, IndexError):
            continue
        if state != "Z" and (mark in cmd or mark in env):
            found.append(f"process {p.name}: {cmd[:200]}")
    d = run_dir(tmp_path)
    for port in ports_of(d) if d else set():
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                found.append(f"port {port} still bound")
    return found


def log_says(tmp_path: Path, text: str) -> bool:
    d = run_dir(tmp_path)
    return d is not None and (d / "harness.log").exists() \
        and text in (d / "harness.log").read_text()


def spark_running(tmp_path: Path) -> bool:
    """The check's Spark JVM, a child of this run, is up."""
    for p in Path("/proc").iterdir():
        try:
            cmd = (p / "cmdline").read_bytes()
            env = (p / "environ").read_bytes()
        except OSError:
            continue
        if b"org.apache.spark" in cmd and str(tmp_path).encode() in env:
            return True
    return False


# moment -> (time limit, when to send SIGINT, the phases results.json may name)
MOMENTS: dict[str, tuple[float, object, set[str]]] = {
    "before-cluster": (60, None, {"starting"}),
    "starting": (60, lambda t: run_dir(t) is not None, {"starting", "cluster up"}),
    "running": (60, lambda t: history_lines(t) > 200, {"running"}),
    # the check's Spark, started early while the workload runs, is up (or starting)
    "running-spark-up": (60, lambda t: spark_running(t) and history_lines(t) > 0, {"running"}),
    # final reads of an 8 s run can end within the time a signal takes to land: the run
    # may already be dumping replicas, which must end on the interrupted path all the same
    "final-reads": (8, lambda t: log_says(t, "final reads"), {"final reads", "dumping replicas"}),
    # the early start off: the check's Spark starts in the checking phase, as it did before
    "checking": (5, spark_running, {"checking"}),
}
NO_EARLY_SPARK = {"checking": {"UNDERTOW_SPARK_EARLY": "0"}}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_sigint_at_any_moment_leaves_nothing(tmp_path: Path, moment: str) -> None:
    time_limit_s, ready, phases = MOMENTS[moment]
    p = start(tmp_path, time_limit_s, NO_EARLY_SPARK.get(moment))
    try:
        if ready is None:  # the header line: the command is past its first moment
            assert p.stderr is not None and p.stderr.readline().startswith("undertow run:")
        else:
            assert wait_for(lambda: ready(tmp_path), 90), moment  # type: ignore[operator]
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=300)  # teardown on a busy machine
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 130, err[-3000:]
    assert "INTERRUPTED" in out
    assert wait_for(lambda: not leftovers(tmp_path), 10), leftovers(tmp_path)
    d = run_dir(tmp_path)
    if d is None:  # stopped before the run folder was made
        assert moment == "before-cluster" and "before the run started" in out
        return
    results = json.loads((d / "results.json").read_text())
    assert results["interrupted"] is True and results["valid"] == "unknown"
    assert results["interrupted_during"] in phases, results
    assert "report.html" not in os.listdir(d) or moment == "checking"


def test_sigkill_then_heal_leaves_nothing_and_heal_twice_is_safe(tmp_path: Path) -> None:
    p = start(tmp_path)
    try:
        assert wait_for(lambda: history_lines(tmp_path) > 200, 60)
        p.kill()
        p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    env = {**os.environ, "UNDERTOW_STATE_DIR": str(tmp_path / "state")}
    heal = [sys.executable, "-m", "harness.cli", "heal"]
    first = subprocess.run(heal, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    assert wait_for(lambda: not leftovers(tmp_path), 10), leftovers(tmp_path)
    second = subprocess.run(heal, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert second.returncode == 0 and "nothing to heal" in second.stdout
    # the history written so far is readable line by line (a torn last line at most)
    lines = (run_dir(tmp_path) / "history.jsonl").read_text().splitlines()  # type: ignore[operator]
    for line in lines[:-1]:
        json.loads(line)
