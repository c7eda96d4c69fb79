"""Harness figures: client ops/s on a 3-node local cluster (concurrency 20, no faults)
with the CPU time each op costs (servers, harness; bench/harness/cpu.py), the history
writer alone, and 3-node cluster start to ready.

    python -m bench.harness [--system undertow|kafka] [--seconds 10] [--writer-ops 300000]
                            [--starts 3] [--idle-seconds 0] [--client librdkafka,java]

`--client` (kafka): the throughput with each client named, one after the other in this
process (librdkafka first: the Java client's JVM stays once started), each with the
harness's resident memory (VmRSS) as its ops end, clients still open.

Writes bench/out/harness.json and prints a summary with the machine's load.
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

from bench.harness import cpu
from harness import core
from harness import generator as g
from harness.interpreter import Interpreter, client_node
from harness.protocols import Run
from harness.runfiles import HistoryWriter, Op, Process, RunPaths, read_history
from harness.spec import TestSpec, build_spec

OUT = Path(__file__).resolve().parents[1] / "out"
# figure -> (target, True when higher is better)
TARGETS = {"ops_per_s": (2000.0, True), "writer_ops_per_s": (200_000.0, True),
           "start_to_ready_s": (5.0, False)}
# real Kafka: JVMs on the same 2 cores
SYSTEM_TARGETS = {"kafka": {"ops_per_s": (1500.0, True), "start_to_ready_s": (30.0, False)}}


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def new_run(spec: TestSpec, root: Path) -> Run:
    paths = RunPaths(root)
    for n in spec.nodes:
        paths.node_dir(n).mkdir(parents=True, exist_ok=True)
    return Run(spec=spec, nodes=spec.nodes, paths=paths, log=logging.getLogger("bench"))


def writer(ops: int, tmp: Path) -> float:
    op = Op("ok", 3, "send", [["send", 2, [5, 17]]], time=1)
    with HistoryWriter(tmp / "w.jsonl") as hw:
        t0 = time.perf_counter()
        for _ in range(ops):
            hw.append(op)
        elapsed = time.perf_counter() - t0
    return ops / elapsed


def start_to_ready(tmp: Path, i: int, system: str) -> float:
    from harness.control.local import LocalBackend

    spec = build_spec({"system": system, "nemesis": [], "results_dir": str(tmp)})
    run = new_run(spec, tmp / f"start{i}")
    backend = LocalBackend()
    t0 = time.perf_counter()
    try:
        core.cluster_up(backend, run)
        return time.perf_counter() - t0
    finally:
        core.cluster_down(backend, run)


def rss_mib() -> float:
    """This process's resident memory now (MiB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def throughput(tmp: Path, seconds: float, system: str, *, idle_s: float = 0.0,
               client_name: str | None = None) -> dict[str, Any]:
    """Client ops/s; with idle_s, that long with the clients open and no ops after it, so
    the servers' steady background work is taken out of their CPU per op."""
    from dataclasses import replace

    from harness.control.local import LocalBackend
    from harness.test import assemble

    spec = build_spec({"system": system, "nemesis": [], "concurrency": 20,
                       "results_dir": str(tmp),
                       **({"extra": {"client": client_name}} if client_name else {})})
    run = new_run(spec, tmp / f"ops-{client_name or system}")
    backend = LocalBackend()
    test = replace(assemble(spec), backend=backend)
    client = test.system.client(test)
    try:
        core.cluster_up(backend, run)
        hw = HistoryWriter(run.paths.history)
        interp = Interpreter(run, hw, concurrency=20, nemesis=None, seed=1,
                             open_client=lambda t: client.open(run, client_node(run.nodes, t)))
        t0, cpu0 = time.perf_counter(), cpu.sample()
        interp.run(g.time_limit(seconds, g.clients(test.workload.generator(test))))
        elapsed, cpu1 = time.perf_counter() - t0, cpu.sample()
        rss = rss_mib()
        idle = None
        if idle_s > 0:
            time.sleep(idle_s)
            idle = cpu1, cpu.sample(), idle_s
        interp.close()
        hw.close()
        counts = dict(interp.stats.counts)
    finally:
        core.cluster_down(backend, run)
    done = sum(counts.values())
    return {"ops_per_s": done / elapsed, "counts": counts, "seconds": elapsed,
            "harness_rss_mib": rss,
            "latency_ms": latencies(run.paths.history),
            "cpu": cpu.per_op(cpu0, cpu1, ops=done, seconds=elapsed, idle=idle)}


def latencies(history: Path) -> dict[str, dict[str, float]]:
    """Each op kind's median and p90 latency (ms), invocation to completion: where a
    client's time goes (e.g. sends waiting for acknowledgement, polls for records)."""
    invoked: dict[Process, int] = {}
    by_f: dict[str, list[float]] = {}
    for op in read_history(history):
        if op.type == "invoke":
            invoked[op.process] = op.time
        elif op.process in invoked:
            by_f.setdefault(op.f, []).append((op.time - invoked.pop(op.process)) / 1e6)
    return {f: {"median": statistics.median(v), "p90": sorted(v)[int(len(v) * 0.9)]}
            for f, v in sorted(by_f.items())}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.harness")
    ap.add_argument("--system", default="undertow", help="the system under test")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--writer-ops", type=int, default=300_000)
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--idle-seconds", type=float, default=0.0,
                    help="after the ops, this long with clients open and no ops: CPU per op "
                         "then leaves out the servers' steady background work")
    ap.add_argument("--client", default=None,
                    help="kafka: librdkafka, java, or both comma-separated (side by side)")
    args = ap.parse_args()
    if args.client:
        clients(args)
        return
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-harness-") as d:
        tmp = Path(d)
        res: dict[str, Any] = {"system": args.system, "load_before": load(),
                               "cpus": os.cpu_count()}
        res["writer_ops_per_s"] = writer(args.writer_ops, tmp)
        starts = [start_to_ready(tmp, i, args.system) for i in range(args.starts)]
        res["start_to_ready_s"] = statistics.median(starts)
        res["start_to_ready_all_s"] = starts
        tp = throughput(tmp, args.seconds, args.system, idle_s=args.idle_seconds)
        res["ops_per_s"] = tp["ops_per_s"]
        res["ops_counts"] = tp["counts"]
        res["latency_ms"] = tp["latency_ms"]
        res["cpu"] = tp["cpu"]
        res["load_after"] = load()
    out = OUT / ("harness.json" if args.system == "undertow" else f"harness-{args.system}.json")
    out.write_text(json.dumps(res, indent=1) + "\n")
    targets = {**TARGETS, **SYSTEM_TARGETS.get(args.system, {})}
    ok = {k: (res[k] >= v if higher else res[k] <= v) for k, (v, higher) in targets.items()}
    print(f"load (1/5/15 min) before {res['load_before']}, after {res['load_after']}; "
          f"{res['cpus']} cpus")
    print(f"{args.system}: client ops/s, 3 nodes, concurrency 20, no faults: "
          f"{res['ops_per_s']:,.0f} (target >= {targets['ops_per_s'][0]:,.0f}: "
          f"{'met' if ok['ops_per_s'] else 'MISSED'}) {res['ops_counts']}")
    print("  latency (ms) median / p90: " + ", ".join(
        f"{f} {v['median']:.1f} / {v['p90']:.1f}" for f, v in res["latency_ms"].items()))
    c = res["cpu"]
    print(f"  CPU per op: servers {c['servers_ms_per_op']:.2f} ms + harness and clients "
          f"{c['harness_ms_per_op']:.2f} ms = {c['total_ms_per_op']:.2f} ms; cores used "
          f"{c['servers_cores']:.2f} + {c['harness_cores']:.2f} of {res['cpus']}")
    if "servers_idle_cores" in c:
        print(f"  idle, clients open: servers {c['servers_idle_cores']:.2f} cores, harness "
              f"{c['harness_idle_cores']:.2f}; CPU per op without it: servers "
              f"{c['servers_busy_ms_per_op']:.2f} ms + harness "
              f"{c['harness_busy_ms_per_op']:.2f} ms")
    print(f"history writer alone: {res['writer_ops_per_s']:,.0f} ops/s "
          f"(target >= 200,000: {'met' if ok['writer_ops_per_s'] else 'MISSED'})")
    print(f"3-node cluster start to ready: median {res['start_to_ready_s']:.2f} s of "
          f"{[round(s, 2) for s in starts]} (target <= {targets['start_to_ready_s'][0]:.0f} s: "
          f"{'met' if ok['start_to_ready_s'] else 'MISSED'})")
    print(f"wrote {out}")


def clients(args: argparse.Namespace) -> None:
    """Client ops/s and the harness's memory with each client, side by side in one run."""
    names = [c.strip() for c in args.client.split(",") if c.strip()]
    OUT.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"system": args.system, "load_before": load(), "clients": {}}
    with tempfile.TemporaryDirectory(prefix="bench-harness-") as d:
        for name in names:
            res["clients"][name] = throughput(Path(d), args.seconds, args.system,
                                              client_name=name)
    res["load_after"] = load()
    out = OUT / f"harness-{args.system}-clients.json"
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"load (1/5/15 min) before {res['load_before']}, after {res['load_after']}")
    for name, tp in res["clients"].items():
        print(f"{args.system} --client {name}: {tp['ops_per_s']:,.0f} client ops/s "
              f"(concurrency 20, no faults, {tp['seconds']:.0f} s) {tp['counts']}; harness "
              f"RSS {tp['harness_rss_mib']:,.0f} MiB; latency (ms) median / p90: " + ", ".join(
                  f"{f} {v['median']:.1f} / {v['p90']:.1f}" for f, v in tp["latency_ms"].items()))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
