"""python -m bench.kafka [--kafka-version V] [--nodes 3] [--backend local|docker]: Kafka start
to ready. `--archive-side-by-side N`: the local start without and with the release's
class-data archive, alternating (bench/out/kafka-cds.json).

Local: resolves the jars (timed when Maven runs), formats and starts a KRaft cluster of
combined broker+controller JVMs, and times from the first start to every broker
registered, the topic made and every partition led with a full ISR. Docker: the same
cluster in containers of the Kafka node image (built first if missing, timed apart),
timed from creating the network to ready (containers made, storage formatted, JVMs
started). Then one client's acks=all sends, one after another (median and p99
latency). Writes bench/out/kafka.json (bench/out/kafka-docker.json).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.control.launcher import Launcher
from harness.control.local import free_port
from systems.kafka import cds, config, jars
from systems.kafka.admin import KafkaAdmin
from systems.kafka.client import KafkaQueueClient
from systems.kafka.local import LocalKafka
from systems.kafka.options import KafkaOptions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kafka-version", default=None)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--sends", type=int, default=200)
    ap.add_argument("--backend", choices=("local", "docker"), default="local")
    ap.add_argument("--archive-side-by-side", type=int, default=0, metavar="N",
                    help="local: N starts without the release's class-data archive and N "
                         "with it, alternating (systems.kafka.cds); writes kafka-cds.json")
    args = ap.parse_args()
    if args.backend == "docker":
        _write(_docker(args), "kafka-docker.json")
        return
    t0 = time.monotonic()
    j = jars.resolve(args.kafka_version, progress=print)
    t_jars = time.monotonic() - t0
    if args.archive_side_by_side:
        _write(_archive_side_by_side(args, j), "kafka-cds.json")
        return
    out = {"kafka_version": j.version, "nodes": args.nodes, "partitions": args.partitions,
           "jars_s": round(t_jars, 2), "maven_ran": not j.cached, **_local(args, j)}
    _write(out, "kafka.json")


def _local(args: argparse.Namespace, j: jars.KafkaJars, sends: bool = True) -> dict[str, Any]:
    """Format, start to ready, then (with `sends`) one client's acks=all sends."""
    names = tuple(f"n{i + 1}" for i in range(args.nodes))
    nodes = config.make_nodes(names, "127.0.0.1", free_port)
    settings = KafkaOptions(replication_factor=min(3, args.nodes),
                              min_insync_replicas=min(2, args.nodes))
    launcher = Launcher("bench-kafka")
    lat: list[float] = []
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
            if sends:
                client = KafkaQueueClient(keys=args.partitions, acks="all", timeout_s=10,
                                          bootstrap=k.bootstrap).open(None, names[0])
                lat = _sends(client, args.sends, args.partitions)
        finally:
            k.close()
            launcher.close()
    out: dict[str, Any] = {"format_s": round(t_format, 2), "start_to_ready_s": round(t_ready, 2)}
    if lat:
        out |= {"send_acks_all_median_ms": round(statistics.median(lat) * 1000, 1),
                "send_acks_all_p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 1)}
    return out


def _archive_side_by_side(args: argparse.Namespace, j: jars.KafkaJars) -> dict[str, Any]:
    """Format and start to ready without and with the class-data archive, alternating in
    one process (the machine's load then weighs on both alike); the archive is built
    first when missing, outside the timings."""
    cds.options("java", j)
    runs: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
    for i in range(args.archive_side_by_side):
        for mode in ("without", "with"):
            os.environ[cds.OFF_ENV] = "0" if mode == "without" else "1"
            runs[mode].append(_local(args, j, sends=False))
            print(f"{mode} archive, start {i + 1}: {runs[mode][-1]}")
    os.environ.pop(cds.OFF_ENV, None)
    return {"kafka_version": j.version, "nodes": args.nodes, "runs": runs,
            **{f"{mode}_median_{k}": statistics.median(r[k] for r in rs)
               for mode, rs in runs.items() for k in ("format_s", "start_to_ready_s")}}


def _sends(client: Any, sends: int, partitions: int) -> list[float]:
    """Seconds per acks=all send, one after another, sorted (the first, which pays for
    the producer id, left out)."""
    lat: list[float] = []
    try:
        for i in range(sends):
            t = time.monotonic()
            client.produce(i % partitions, i)
            lat.append(time.monotonic() - t)
    finally:
        client.close(None)
    return sorted(lat[1:])


def _docker(args: argparse.Namespace) -> dict[str, Any]:
    """The cluster on the docker backend, through the same path a run takes."""
    from harness import core
    from harness.control.docker import DockerBackend
    from harness.image import ensure_images
    from harness.protocols import Run
    from harness.runfiles import RunPaths
    from harness.spec import build_spec
    from systems.kafka.remote import KafkaRemoteDB
    from systems.kafka.system import system

    extra = {"kafka_version": args.kafka_version} if args.kafka_version else {}
    spec = build_spec({"system": "kafka", "backend": "docker", "node_count": args.nodes,
                       "keys": args.partitions, "key_pool": args.partitions, "extra": extra,
                       "broker": {"replication_factor": min(3, args.nodes),
                                  "min_insync_replicas": min(2, args.nodes)}})
    t0 = time.monotonic()
    images = ensure_images(system.node_image(), progress=print)
    t_image = time.monotonic() - t0
    assert images.node is not None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    with tempfile.TemporaryDirectory(prefix="bench-kafka-docker-") as tmp:
        run = Run(spec=spec, nodes=spec.nodes, paths=RunPaths(Path(tmp)),
                  log=logging.getLogger("bench.kafka"))
        backend = DockerBackend(image=images.node.tag)
        try:
            t1 = time.monotonic()
            core.cluster_up(backend, run)
            t_ready = time.monotonic() - t1
            db = run.db
            assert isinstance(db, KafkaRemoteDB)
            client = KafkaQueueClient(keys=args.partitions, acks="all", timeout_s=10,
                                      bootstrap=db.bootstrap).open(None, spec.nodes[0])
            lat = _sends(client, args.sends, args.partitions)
        finally:
            core.cluster_down(backend, run)
    return {"backend": "docker", "kafka_version": db.jars.version, "nodes": args.nodes,
            "partitions": args.partitions, "image_s": round(t_image, 2),
            "image_built": images.node.built, "start_to_ready_s": round(t_ready, 2),
            "send_acks_all_median_ms": round(statistics.median(lat) * 1000, 1),
            "send_acks_all_p99_ms": round(lat[int(len(lat) * 0.99)] * 1000, 1)}


def _write(out: dict[str, Any], name: str) -> None:
    print(json.dumps(out))
    Path("bench/out").mkdir(parents=True, exist_ok=True)
    (Path("bench/out") / name).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
