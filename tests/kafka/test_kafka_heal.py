"""`undertow heal` after a harness killed mid-run on Kafka: no JVM, namespace or bridge is left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from harness import leftovers, netns
from systems.kafka import jars

pytestmark = [pytest.mark.kafka, pytest.mark.slow,
              pytest.mark.skipif(netns.supported() is not None,
                                 reason=f"netns: {netns.supported()}")]


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def _marked(runs: set[str]) -> list[int]:
    """Processes carrying the mark of one of these runs (the JVMs, the harness's children)."""
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            env = (p / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(f"{leftovers.RUN_ENV}={r}".encode() in env for r in runs):
            pids.append(int(p.name))
    return pids


def test_heal_after_a_killed_harness(state: Path, tmp_path: Path,
                                     kafka_jars: jars.KafkaJars) -> None:
    before = _namespaces()
    harness = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--system", "kafka", "--nemesis",
         "partition", "--time-limit", "60", "--seed", "1", "--results-dir", str(tmp_path)],
        env={**os.environ, leftovers.STATE_ENV: str(state)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not any(
                "ready in" in p.read_text() for p in tmp_path.glob("*/2*/harness.log")):
            assert harness.poll() is None, "the run ended before the cluster was ready"
            time.sleep(0.5)
        made = _namespaces() - before  # this run's: other tests may make their own meanwhile
        assert made, "no namespace was made"
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    runs = {d.name for d in state.iterdir() if d.is_dir()}
    assert runs, "the run recorded nothing in harness.leftovers"
    done = leftovers.heal_all()
    assert any("removed link" in line for line in done), done
    # this run's namespaces are named by its id (harness/netns.py); other tests' are not ours
    ours = tuple(f"ut{zlib.crc32(r.encode()) & 0xFFFFFF:06x}" for r in runs)
    assert any(n.startswith(ours) for n in made), (made, ours)
    assert not [n for n in _namespaces() if n.startswith(ours)]
    time.sleep(1.0)
    assert _marked(runs) == []
    assert leftovers.heal_all() == []
