"""The broker's one source of time, shiftable by a clock fault through `clock_file`.

The file holds an integer number of nanoseconds added to the system clock. It is
re-read at most every 100 ms, and only when its mtime changed, so a nemesis can
skew a node's clock with a plain file write on any backend.
"""

from __future__ import annotations

import os
import time

RECHECK_NS = 100_000_000


class Clock:
    """Wall-clock time plus the offset in clock_file (0 when there is none)."""

    def __init__(self, clock_file: str | None) -> None:
        self._path = clock_file
        self._offset_ns = 0
        self._mtime_ns = -1
        self._checked_ns = -RECHECK_NS
        self._refresh(time.monotonic_ns())

    def _refresh(self, mono_ns: int) -> None:
        self._checked_ns = mono_ns
        if not self._path:
            return
        try:
            st = os.stat(self._path)
        except OSError:
            self._offset_ns, self._mtime_ns = 0, -1
            return
        if st.st_mtime_ns == self._mtime_ns:
            return
        self._mtime_ns = st.st_mtime_ns
        try:
            with open(self._path) as f:
                text = f.read().strip()
            self._offset_ns = int(text) if text else 0
        except (OSError, ValueError):
            pass  # a half-written file: keep the last good offset, retry next time

    def now_ns(self) -> int:
        mono = time.monotonic_ns()
        if mono - self._checked_ns >= RECHECK_NS:
            self._refresh(mono)
        return time.time_ns() + self._offset_ns

    def now_ms(self) -> int:
        return self.now_ns() // 1_000_000

    @property
    def offset_ns(self) -> int:
        return self._offset_ns
