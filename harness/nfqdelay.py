"""Slow links without netem: hold each queued packet for a delay, then let it go.

Some kernels (this project's CI machines among them) have no netem qdisc, so `tc ... netem
delay` cannot slow a container's or a host's links. They do have iptables' NFQUEUE target:
`iptables -A OUTPUT ... -j NFQUEUE --queue-num Q --queue-bypass` hands every matching packet
to a process that binds queue Q in the same network namespace. This is that process
(`python -m harness.nfqdelay`): it accepts each packet `delay_ms` (± `jitter_ms`, uniform)
after it was queued. fnfqueue speaks the netlink protocol; this module only keeps time.

It never loses a packet it holds: on SIGTERM/SIGINT, or when the process that started it
is gone (a killed harness), it accepts everything still held and exits. With
`--queue-bypass` on the rule, packets pass undelayed whenever no delayer is bound, so a
delayer that dies leaves a working (if no longer slow) link.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

PARENT_POLL_S = 0.5
QUEUE_MAXLEN = 65536


class Delayer:
    """Packets due at a time, released by one timer thread in due order."""

    def __init__(self, delay_ms: float, jitter_ms: float, seed: int | None = None) -> None:
        if delay_ms < 0 or jitter_ms < 0:
            raise ValueError(f"nfqdelay: delay {delay_ms} ms and jitter {jitter_ms} ms "
                             "must be >= 0")
        self.delay_s = delay_ms / 1000.0
        self.jitter_s = jitter_ms / 1000.0
        self.rng = random.Random(seed)
        self._held: list[tuple[float, int, Any]] = []
        self._order = itertools.count()
        self._cv = threading.Condition()
        self._stopping = False
        self.released = 0

    def hold(self, packet: Any) -> None:
        """Queue `packet` (anything with .accept()) for release after the delay."""
        wait = self.delay_s + (self.rng.uniform(-self.jitter_s, self.jitter_s)
                               if self.jitter_s else 0.0)
        due = time.monotonic() + max(0.0, wait)
        with self._cv:
            heapq.heappush(self._held, (due, next(self._order), packet))
            self._cv.notify()

    def run(self) -> None:
        """Release packets as they fall due; on stop, release the rest at once."""
        while True:
            with self._cv:
                while True:
                    if self._stopping:
                        rest = [p for _, _, p in sorted(self._held)]
                        self._held.clear()
                        break
                    if self._held and self._held[0][0] <= time.monotonic():
                        rest = [heapq.heappop(self._held)[2]]
                        break
                    timeout = self._held[0][0] - time.monotonic() if self._held else None
                    self._cv.wait(timeout)
            for p in rest:
                _accept(p)
                self.released += 1
            if self._stopping and not self._held:
                return

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify()

    @property
    def held(self) -> int:
        with self._cv:
            return len(self._held)


def _accept(packet: Any) -> None:
    try:
        packet.accept()
    except Exception:
        pass


def serve(queue: int, delay_ms: float, jitter_ms: float, parent: int | None,
          ready_file: str | None = None) -> int:
    """Bind `queue` in this network namespace and delay its packets until told to stop."""
    import fnfqueue  # type: ignore[import-untyped]  # only the delayer process needs it

    delayer = Delayer(delay_ms, jitter_ms)
    conn = fnfqueue.Connection(packet_size=4096)
    try:
        q = conn.bind(queue)
    except PermissionError:
        print(f"nfqdelay: binding queue {queue} needs root (CAP_NET_ADMIN)", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"nfqdelay: cannot bind queue {queue}: {e}", file=sys.stderr)
        return 2
    q.set_mode(0, fnfqueue.COPY_META)
    q.set_maxlen(QUEUE_MAXLEN)
    q.fail_open = True

    timer = threading.Thread(target=delayer.run, name="nfqdelay-timer", daemon=True)
    timer.start()

    def stop(_sig: int = 0, _frame: FrameType | None = None) -> None:
        delayer.stop()
        conn.close()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def watch_parent() -> None:
        while parent is not None and not delayer._stopping:
            if not _alive(parent):
                stop()
                return
            time.sleep(PARENT_POLL_S)

    threading.Thread(target=watch_parent, name="nfqdelay-parent", daemon=True).start()
    if ready_file == "-":
        print(os.getpid(), flush=True)
    elif ready_file:
        with open(ready_file, "w") as f:
            f.write(f"{os.getpid()}\n")
    try:
        for packet in conn:
            delayer.hold(packet)
    except Exception as e:
        if not delayer._stopping:
            print(f"nfqdelay: queue {queue}: {e}", file=sys.stderr)
    finally:
        stop()
        timer.join(timeout=5 + delayer.delay_s + delayer.jitter_s)
    return 0


def _alive(pid: int) -> bool:
    """pid exists and is not a zombie (a killed harness whose parent has not reaped it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.nfqdelay", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queue", type=int, required=True, help="NFQUEUE number to bind")
    ap.add_argument("--delay-ms", type=float, required=True)
    ap.add_argument("--jitter-ms", type=float, default=0.0)
    ap.add_argument("--parent", type=int, default=None,
                    help="exit (releasing every held packet) once this pid is gone")
    ap.add_argument("--ready-file", default=None,
                    help="write our pid here once bound (-: standard output)")
    a = ap.parse_args(argv)
    if not 0 <= a.queue <= 65535:
        ap.error(f"--queue {a.queue}: must be 0..65535")
    if a.delay_ms < 0 or a.jitter_ms < 0:
        ap.error("--delay-ms and --jitter-ms must be >= 0")
    return serve(a.queue, a.delay_ms, a.jitter_ms, a.parent, a.ready_file)


if __name__ == "__main__":
    sys.exit(main())
