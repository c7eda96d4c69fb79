"""python -m bench.broker [--seconds S] [--producers 1,32] [--idempotence]: acks=all
throughput and latency.

Starts 3 local brokers (python -m broker --config ..., RF 3, min ISR 2,
leader-epoch truncation, 8 partitions), runs each producer count for S seconds
(threads, one BrokerClient each, one record per request), and writes
bench/out/broker.json. Also times a 3-node cluster from start to ready. With
--idempotence each run goes twice, without and then with the idempotent producer
(producer ids and sequence numbers), for what idempotence costs.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from broker.localcluster import LocalCluster
from broker.protocol import MAX_RESPONSE_BYTES, FrameDecoder, decode_response, encode_frame

from systems.undertow.client import BrokerClient, ClientError

SETTINGS = {"min.insync.replicas": 2, "truncation": "leader-epoch",
            "unclean.leader.election.enable": False}


def pipelined(addrs: dict[str, str], i: int, depth: int, stop_at: list[float],
              start: threading.Barrier, lat: list[int], errors: list[int],
              idempotent: bool = False) -> None:
    """One producer keeping `depth` acks=all produces in flight on one connection."""
    key = i % 8
    meta_client = BrokerClient(addrs, timeout_s=10)
    meta = meta_client.metadata()
    tag: dict[str, int] = {}
    if idempotent:
        pid, epoch = meta_client.init_producer(time.monotonic() + 10)
        tag = {"producer_id": pid, "producer_epoch": epoch}
    meta_client.close()
    host, _, port = addrs[meta["partitions"][str(key)]["leader"]].rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    dec = FrameDecoder(MAX_RESPONSE_BYTES)
    sent: dict[int, int] = {}
    rid = 0
    start.wait()

    def send() -> None:
        nonlocal rid
        rid += 1
        sent[rid] = time.perf_counter_ns()
        seq = {"sequence": rid - 1} if tag else {}
        sock.sendall(encode_frame({"id": rid, "type": "produce", "partition": key,
                                   "value": (i << 40) + rid, "acks": "all",
                                   "timeout_ms": 10_000, **tag, **seq}))

    for _ in range(depth):
        send()
    while sent:
        for body in dec.feed(sock.recv(1 << 16)):
            reply = decode_response(body)
            t0 = sent.pop(reply["id"])
            if reply.get("error"):
                errors[i] += 1
            else:
                lat.append(time.perf_counter_ns() - t0)
            if time.monotonic() < stop_at[0]:
                send()
    sock.close()


def run_producers(addrs: dict[str, str], producers: int, seconds: float,
                  depth: int = 1, idempotent: bool = False) -> dict[str, Any]:
    lat_ns: list[list[int]] = [[] for _ in range(producers)]
    errors: list[int] = [0] * producers
    start = threading.Barrier(producers + 1)
    stop_at = [0.0]

    def work(i: int) -> None:
        cl = BrokerClient(addrs, timeout_s=10, enable_idempotence=idempotent)
        cl.metadata()
        start.wait()
        v = i << 40
        mine = lat_ns[i]
        while time.monotonic() < stop_at[0]:
            v += 1
            t0 = time.perf_counter_ns()
            try:
                cl.produce(v % 8, v, acks="all")
            except ClientError:
                errors[i] += 1
                continue
            mine.append(time.perf_counter_ns() - t0)
        cl.close()

    if depth > 1:
        threads = [threading.Thread(target=pipelined, args=(addrs, i, depth, stop_at, start,
                                                            lat_ns[i], errors, idempotent))
                   for i in range(producers)]
    else:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(producers)]
    for t in threads:
        t.start()
    stop_at[0] = time.monotonic() + 3600
    start.wait()
    t0 = time.monotonic()
    stop_at[0] = t0 + seconds
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    lats = sorted(x for per in lat_ns for x in per)
    n = len(lats)

    def pct(q: float) -> float:
        return lats[min(n - 1, int(q * n))] / 1e6 if n else float("nan")

    return {"producers": producers, "pipeline": depth, "idempotent": idempotent,
            "seconds": round(elapsed, 2), "acked": n,
            "errors": sum(errors), "acked_per_s": round(n / elapsed, 1),
            "p50_ms": round(pct(0.50), 2), "p99_ms": round(pct(0.99), 2)}


def broker_cpu_s(c: LocalCluster) -> float:
    """User+system CPU seconds used so far by the cluster's broker processes."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in c.procs.values():
        fields = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / tick


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.broker", description=__doc__)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--producers", default="1,32,32x8",
                    help="runs: N producers, or NxD for N producers pipelining D requests each")
    ap.add_argument("--idempotence", action="store_true",
                    help="each run without, then with the idempotent producer")
    ap.add_argument("--out", type=Path, default=Path("bench/out/broker.json"))
    args = ap.parse_args()
    results: dict[str, Any] = {"load_before": os.getloadavg(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as tmp:
        c = LocalCluster(Path(tmp), settings=SETTINGS)
        try:
            t0 = time.monotonic()
            c.start_all()
            c.wait_ready(30)
            results["start_to_ready_s"] = round(time.monotonic() - t0, 2)
            runs = [(run, idem) for run in args.producers.split(",")
                    for idem in ((False, True) if args.idempotence else (False,))]
            for run, idem in runs:
                p, _, d = run.partition("x")
                cpu0 = broker_cpu_s(c)
                t = os.times()
                r = run_producers(c.addrs, int(p), args.seconds, int(d or 1), idem)
                t2 = os.times()
                client_cpu = (t2.user - t.user) + (t2.system - t.system)
                r["client_cpu_us_per_record"] = round(client_cpu / max(1, r["acked"]) * 1e6, 1)
                r["load"] = os.getloadavg()
                cpu = broker_cpu_s(c) - cpu0
                r["broker_cpu_s"] = round(cpu, 2)
                r["broker_cpu_us_per_record"] = round(cpu / max(1, r["acked"]) * 1e6, 1)
                results["runs"].append(r)
                print(f"producers={run:>5}{' idempotent' if idem else ''}  "
                      f"acked/s={r['acked_per_s']:9.1f}  "
                      f"p50={r['p50_ms']:7.2f} ms  p99={r['p99_ms']:7.2f} ms  "
                      f"errors={r['errors']}  cpu/record: brokers "
                      f"{r['broker_cpu_us_per_record']} us, client "
                      f"{r['client_cpu_us_per_record']} us  load={r['load'][0]:.2f}", flush=True)
        finally:
            c.close()
    results["cpus"] = os.cpu_count()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"3-node start to ready: {results['start_to_ready_s']} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
