"""One holder at a time across processes: an exclusive flock on a file (made if missing),
released when the block ends or the process dies. For work several harness processes
(parallel tests, a run beside a build) may start at once and only one should do: an
image build, a Kafka release's class-data archive."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive(lock: Path) -> Iterator[None]:
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
