"""bench/harness/cpu.py: CPU time is read for this process and its descendants."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from bench.harness import cpu

SPIN = "while True: pass"


def test_a_spinning_grandchild_counts_as_servers_not_harness() -> None:
    # a local cluster's servers are the harness's children (or theirs)
    launcher = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {SPIN!r}])" \
               "\ntime.sleep(120)"
    before = cpu.sample()
    p = subprocess.Popen([sys.executable, "-c", launcher], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        after = cpu.sample()
        while after.servers - before.servers < 0.2 and time.monotonic() < deadline:
            time.sleep(0.2)
            after = cpu.sample()
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    assert after.servers - before.servers >= 0.2
    assert after.harness - before.harness < after.servers - before.servers


def test_per_op_divides_by_ops_and_seconds() -> None:
    spent = cpu.per_op(cpu.CpuTimes(harness=1.0, servers=2.0),
                       cpu.CpuTimes(harness=1.5, servers=4.0), ops=500, seconds=2.0)
    assert spent["servers_ms_per_op"] == 4.0
    assert spent["harness_ms_per_op"] == 1.0
    assert spent["total_ms_per_op"] == 5.0
    assert spent["total_cores"] == 1.25


def test_an_idle_window_takes_the_background_out() -> None:
    spent = cpu.per_op(cpu.CpuTimes(harness=0.0, servers=0.0),
                       cpu.CpuTimes(harness=1.0, servers=3.0), ops=1000, seconds=10.0,
                       idle=(cpu.CpuTimes(harness=1.0, servers=3.0),
                             cpu.CpuTimes(harness=1.0, servers=4.0), 5.0))
    assert spent["servers_idle_cores"] == 0.2
    assert spent["servers_busy_ms_per_op"] == 1.0  # 3 s less 0.2 cores for 10 s, by 1000
    assert spent["harness_busy_ms_per_op"] == 1.0
