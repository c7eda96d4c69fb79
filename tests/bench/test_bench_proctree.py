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
# a driver of its own, holding the child: the tree measured is that driver's, not pytest's
# (whose other children, such as the session's warm Spark, are not this test's)
DRIVER = f"import subprocess, sys\nc = subprocess.Popen([sys.executable, '-c', {HOLD!r}])\n" \
         "print(c.pid, flush=True)\nc.wait()"


def test_a_child_holding_memory_counts_in_the_tree_as_a_python_worker() -> None:
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert driver.stdout is not None
        child = int(driver.stdout.readline())
        assert driver.stdout.readline() == "up\n"  # the child's, through the shared stdout
        procs = proctree.snapshot()
        assert child in set(proctree.descendants(procs, driver.pid))
        assert driver.pid in set(proctree.descendants(procs, os.getpid()))
        assert procs[child].ppid == driver.pid and procs[child].name.startswith("python")
        parts = tree_rss_bytes(driver.pid)
        assert parts["python_workers"] >= 190 << 20
        assert parts["driver"] > 0
        assert parts["jvm"] == 0 and parts["cluster"] == 0
        # the same child named as a second root counts as the cluster instead
        assert tree_rss_bytes(driver.pid, child)["cluster"] >= 190 << 20
    finally:
        if child:
            os.kill(child, 9)  # the driver reaps it and ends
        try:
            driver.wait(timeout=10)
        finally:
            driver.kill()
            driver.wait()
    deadline = time.monotonic() + 5
    while child in proctree.snapshot() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child not in proctree.snapshot()
