"""python -m bench.kafka [--kafka-version V] [--nodes 3]: local Kafka start to ready.

Resolves the jars (timed when Maven runs), formats and starts a KRaft cluster of
combined broker+controller JVMs, and times from the first start to every broker
registered, the topic made and every partition led with a full ISR; then one
client's acks=all sends, one after another (median and p99 latency). Writes
bench/out/kafka.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from harness.control.launcher import Launcher
from harness.control.local import free_port
from harness.spec import BrokerSettings
from systems.kafka import config, jars
from systems.kafka.admin import KafkaAdmin
from systems.kafka.client import KafkaQueueClient
from systems.kafka.local import LocalKafka


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kafka-version", default=None)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--sends", type=int, default=200)
    args = ap.parse_args()
    t0 = time.monotonic()
    j = jars.resolve(args.kafka_version, progress=print)
    t_jars = time.monotonic() - t0
    names = tuple(f"n{i + 1}" for i in range(args.nodes))
    nodes = config.make_nodes(names, "127.0.0.1", free_port)
    settings = BrokerSettings(replication_factor=min(3, args.nodes),
                              min_insync_replicas=min(2, args.nodes))
    launcher = Launcher("bench-kafka")
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as tmp:
        k = LocalKafka(j, nodes, Path(tmp), settings, partitions=args.partitions,
                       launcher=launcher)
        try:
            t1 = time.monotonic()
            k.prepare()
            t_format = time.monotonic() - t1
            t2 = time.monotonic()
            for n in names:
                k.start(None, n)
            admin = KafkaAdmin(k.bootstrap, {n.node_id: n.name for n in nodes.values()})
            admin.wait_ready(args.nodes, args.partitions, settings.replication_factor,
                             settings.min_insync_replicas, timeout_s=120)
            t_ready = time.monotonic() - t2
            client = KafkaQueueClient(keys=args.partitions, acks="all", timeout_s=10,
                                      bootstrap=k.bootstrap).open(None, names[0])
            lat: list[float] = []
            try:
                for i in range(args.sends):
                    t = time.monotonic()
                    client.produce(i % args.partitions, i)
                    lat.append(time.monotonic() - t)
            finally:
                client.close(None)
            lat = lat[1:]  # the first pays for the producer id
            lat.sort()
        finally:
            k.close()
            launcher.close()
    out = {"kafka_version": j.version, "nodes": args.nodes, "partitions": args.partitions,
           "jars_s": round(t_jars, 2), "maven_ran": not j.cached,
           "format_s": round(t_format, 2), "start_to_ready_s": round(t_ready, 2),
           "send_acks_all_median_ms": round(statistics.median(lat) * 1000, 1),
           "send_acks_all_p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 1)}
    print(json.dumps(out))
    Path("bench/out").mkdir(parents=True, exist_ok=True)
    Path("bench/out/kafka.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
