"""python -m bench.groups_kafka [--members 10] [--rounds 20]: group rebalance time on Kafka.

bench.groups's measure on Apache Kafka: 3 local KRaft nodes (RF 3, min ISR 2) and a group of
N confluent-kafka consumers (range assignor, eager, each polling every 50 ms in a thread of
its own, as the workload's group client configures them) over 8 keys. Each round one
member leaves (close) and the time is taken until every remaining member was handed a new
assignment after the leave and together they cover every key once; a new member joins back
(untimed) before the next round. Writes bench/out/groups-kafka.json and prints median and max.
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

from confluent_kafka import Consumer

from harness.control.launcher import Launcher
from harness.control.local import free_port
from systems.kafka import config, jars
from systems.kafka.admin import KafkaAdmin
from systems.kafka.group_client import group_config
from systems.kafka.local import LocalKafka
from systems.kafka.options import KafkaOptions
from workloads.options import ConsumerSettings

KEYS = 8


class Runner:
    def __init__(self, bootstrap: str, heartbeat_ms: int | None) -> None:
        more = {} if heartbeat_ms is None else {"heartbeat.interval.ms": heartbeat_ms}
        self.consumer = Consumer({**group_config(bootstrap, ConsumerSettings(),
                                                 timeout_s=10.0), "log_level": 2, **more})
        self.last: tuple[float, tuple[int, ...]] | None = None  # when, what it was handed
        self.stop = threading.Event()
        self.consumer.subscribe([config.TOPIC], on_assign=self.handed)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def handed(self, consumer: Any, partitions: list[Any]) -> None:
        self.last = (time.monotonic(), tuple(sorted(p.partition for p in partitions)))

    def run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()

    def leave(self) -> None:
        self.stop.set()
        self.thread.join(60)


def wait_settled(runners: list[Runner], after: float, timeout_s: float) -> float:
    """When every runner was last handed its keys, once each was handed them after `after`
    and together they cover every key once."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        last = [r.last for r in runners]
        if all(x is not None and x[0] > after for x in last):
            keys = sorted(k for x in last if x is not None for k in x[1])
            if keys == list(range(KEYS)):
                return max(x[0] for x in last if x is not None)
        time.sleep(0.005)
    raise RuntimeError(f"the group did not settle within {timeout_s} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.groups_kafka", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--heartbeat-ms", type=int, default=None,
                    help="heartbeat.interval.ms (default: the workload's, "
                         "systems/kafka/group_client.py GROUP_HEARTBEAT_MS; members learn of a "
                         "rebalance at a heartbeat)")
    ap.add_argument("--out", type=Path, default=Path("bench/out/groups-kafka.json"))
    args = ap.parse_args(argv)
    if args.members < 2 or args.rounds < 1:
        ap.error("--members must be at least 2 and --rounds at least 1")
    j = jars.resolve(None)
    names = ("n1", "n2", "n3")
    nodes = config.make_nodes(names, "127.0.0.1", free_port)
    settings = KafkaOptions()
    launcher = Launcher("bench-groups-kafka")
    load_before = os.getloadavg()
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-groups-kafka-") as tmp:
        k = LocalKafka(j, nodes, Path(tmp), settings, partitions=KEYS, launcher=launcher)
        try:
            k.prepare()
            for n in names:
                k.start(None, n)
            KafkaAdmin(k.bootstrap, {n.node_id: n.name for n in nodes.values()}).wait_ready(
                3, KEYS, settings.replication_factor, settings.min_insync_replicas,
                timeout_s=120)
            runners = [Runner(k.bootstrap, args.heartbeat_ms) for _ in range(args.members)]
            wait_settled(runners, 0.0, 120)
            for i in range(args.rounds):
                leaver = runners.pop(i % len(runners))
                t0 = time.monotonic()
                leaver.leave()
                done = wait_settled(runners, t0, 120)
                times.append(done - t0)
                print(f"{i:3d} leave: settled in {times[-1] * 1000:.0f} ms", flush=True)
                t1 = time.monotonic()
                runners.append(Runner(k.bootstrap, args.heartbeat_ms))
                wait_settled(runners, t1, 120)
            for r in runners:
                r.leave()
        finally:
            k.close()
            launcher.close()
    summary: dict[str, Any] = {
        "system": "kafka", "kafka_version": j.version, "members": args.members,
        "heartbeat_ms": args.heartbeat_ms,
        "rounds": args.rounds, "median_ms": round(statistics.median(times) * 1000),
        "max_ms": round(max(times) * 1000), "min_ms": round(min(times) * 1000),
        "load_before": load_before, "load_after": os.getloadavg()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"times_s": times, "summary": summary}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
