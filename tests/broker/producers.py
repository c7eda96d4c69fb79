"""Background acks=all producers for the broker's cluster tests: they remember every ack."""

from __future__ import annotations

import threading

from systems.undertow.client import BrokerClient, ClientError


class Producers:
    """Threads producing unique values with acks=all to `keys` keys.

    acked[key] holds every value the cluster acknowledged; errors counts refusals by code.
    """

    def __init__(self, addrs: dict[str, str], keys: int = 8, threads: int = 4) -> None:
        self.addrs = addrs
        self.keys = keys
        self.acked: dict[int, set[int]] = {k: set() for k in range(keys)}
        self.errors: dict[str, int] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(threads)]

    def _run(self, i: int) -> None:
        cl = BrokerClient(self.addrs, timeout_s=3)
        v = i * 1_000_000
        try:
            while not self.stop.is_set():
                v += 1
                k = v % self.keys
                try:
                    cl.produce(k, v, acks="all")
                except ClientError as e:
                    with self.lock:
                        self.errors[e.code] = self.errors.get(e.code, 0) + 1
                    continue
                with self.lock:
                    self.acked[k].add(v)
        finally:
            cl.close()

    def count(self) -> int:
        with self.lock:
            return sum(len(s) for s in self.acked.values())

    def lost(self, read: dict[int, set[int]]) -> dict[int, list[int]]:
        """Acknowledged values missing from `read` (key -> values), up to 5 per key."""
        with self.lock:
            return {k: sorted(vs - read.get(k, set()))[:5]
                    for k, vs in self.acked.items() if vs - read.get(k, set())}

    def __enter__(self) -> Producers:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)


def read_all(addrs: dict[str, str], keys: int) -> dict[int, set[int]]:
    """Every committed value of every key, read from offset 0 to the end offset."""
    cl = BrokerClient(addrs, timeout_s=10)
    try:
        out: dict[int, set[int]] = {}
        for k in range(keys):
            end = cl.end_offset(k)
            vals: set[int] = set()
            off = 0
            while off < end:
                recs = cl.fetch(k, off)
                if not recs:
                    break
                vals.update(v for _o, v in recs)
                off = recs[-1][0] + 1
            out[k] = vals
        return out
    finally:
        cl.close()
