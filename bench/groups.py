"""python -m bench.groups [--members 10] [--rounds 20]: consumer-group rebalance time on our broker.

Starts 3 local nodes (RF 3, min ISR 2, 3 offsets partitions) and a group of N members
(sticky assignor, one thread each, heartbeat every 100 ms, as systems/undertow/group_member.py
runs them) over 8 keys. Then, each round: one member leaves (leave_group) and the time is
taken until every remaining member holds the new generation's assignment and together they
cover every key once; a new member joins back (untimed) before the next round.
Writes bench/out/groups.json and prints median and max.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from broker.localcluster import LocalCluster

from systems.undertow.assignors import TopicPartition
from systems.undertow.client import BrokerClient
from systems.undertow.group_member import GroupMember, run_member

SETTINGS = {"min.insync.replicas": 2, "offsets.topic.num.partitions": 3}
KEYS = 8
EVERY = [("queue", k) for k in range(KEYS)]


class Runner:
    def __init__(self, addrs: dict[str, str], name: str) -> None:
        self.client = BrokerClient(addrs, timeout_s=10)
        self.member = GroupMember(self.client, "bench", ["queue"], {"queue": KEYS},
                                  strategy="sticky", client_id=name, session_timeout_ms=10_000,
                                  rebalance_timeout_ms=10_000)
        self.last: tuple[int, tuple[TopicPartition, ...]] | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=run_member, daemon=True,
                                       args=(self.member, self.stop, self.handed))
        self.thread.start()

    def handed(self, generation: int, assignment: tuple[TopicPartition, ...]) -> None:
        self.last = (generation, assignment)

    def leave(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.member.leave()
        self.client.close()


def settled(runners: list[Runner], after: int) -> int | None:
    """The generation (> after) every runner holds, when their keys cover every key once."""
    last = [r.last for r in runners]
    if any(x is None for x in last):
        return None
    gens = {x[0] for x in last if x is not None}
    keys = sorted(tp for x in last if x is not None for tp in x[1])
    if len(gens) != 1 or keys != EVERY or min(gens) <= after:
        return None
    return gens.pop()


def wait_settled(runners: list[Runner], after: int, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        gen = settled(runners, after)
        if gen is not None:
            return gen
        time.sleep(0.005)
    raise RuntimeError(f"the group did not settle past generation {after} in {timeout_s} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.groups", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("bench/out/groups.json"))
    args = ap.parse_args(argv)
    if args.members < 2 or args.rounds < 1:
        ap.error("--members must be at least 2 and --rounds at least 1")
    load_before = os.getloadavg()
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-groups-") as d, LocalCluster(
            Path(d), settings=SETTINGS, partitions=KEYS) as c:
        c.start_all()
        c.wait_ready(30)
        runners = [Runner(c.addrs, f"m{i}") for i in range(args.members)]
        gen = wait_settled(runners, 0, 60)
        for i in range(args.rounds):
            leaver = runners.pop(i % len(runners))
            t0 = time.monotonic()
            leaver.leave()
            gen = wait_settled(runners, gen, 60)
            times.append(time.monotonic() - t0)
            print(f"{i:3d} leave: generation {gen} settled in {times[-1] * 1000:.0f} ms",
                  flush=True)
            runners.append(Runner(c.addrs, f"j{i}"))
            gen = wait_settled(runners, gen, 60)
        for r in runners:
            r.leave()
    summary: dict[str, Any] = {
        "members": args.members, "rounds": args.rounds,
        "median_ms": round(statistics.median(times) * 1000), "max_ms": round(max(times) * 1000),
        "min_ms": round(min(times) * 1000), "load_before": load_before,
        "load_after": os.getloadavg()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"times_s": times, "summary": summary}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
