"""bench/proctree.py and bench.checker's memory by part: read from /proc, a real child."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench import proctree
from bench.checker.__main__ import tree_rss_bytes

HOLD = "import sys, time\nb = bytearray(200 << 20)\nsys.stdout.write('up\\n')\nsys.stdout.flush()" \
       "\ntime.sleep(120)"


def test_a_child_holding_memory_counts_in_the_tree_as_a_python_worker() -> None:
    p = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "up\n"
        procs = proctree.snapshot()
        assert p.pid in set(proctree.descendants(procs, os.getpid()))
        assert procs[p.pid].ppid == os.getpid() and procs[p.pid].name.startswith("python")
        parts = tree_rss_bytes(os.getpid())
        assert parts["python_workers"] >= 190 << 20
        assert parts["driver"] > 0
        assert parts["jvm"] == 0 and parts["cluster"] == 0
        # the same child named as a second root counts as the cluster instead
        assert tree_rss_bytes(os.getpid(), p.pid)["cluster"] >= 190 << 20
    finally:
        p.kill()
        p.wait()
    deadline = time.monotonic() + 5
    while p.pid in proctree.snapshot() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert p.pid not in proctree.snapshot()
