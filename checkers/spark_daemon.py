"""Spark's Python worker daemon with the check's imports done once, before it forks.

Spark forks one Python worker per running task from a daemon
(`spark.python.daemon.module`), and ends a worker that has been idle for a minute
(a fixed timeout), so a check that comes a minute after the last one, or after a
run's workload, meets new workers. Each new worker used to import pyspark's worker,
numpy and the checks itself: about a second of CPU per worker, most of a warm check.
Imported here, in the daemon, every fork starts with them.

Only modules that start no thread when imported belong here: a fork keeps the
forking thread alone (pyspark's own daemon imports its worker after the fork for
that reason). numpy's OpenBLAS pool is kept to the calling thread (the checks do
no linear algebra); pyarrow is left out (its allocator starts a thread; it imports
in a few milliseconds once numpy is in).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy  # noqa: F401
import pyspark.worker  # noqa: F401
from pyspark.daemon import manager

import checkers.spark  # noqa: F401  (the log job's own module, check_key's)

if __name__ == "__main__":
    manager()
