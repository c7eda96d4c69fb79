"""python -m bench.failover [--rounds N] [--faults kill,pause]: controller failover times.

Starts 3 local nodes (python -m broker --config ..., all three controller voters, RF 3,
min ISR 2, leader-epoch), then N times: find the active controller (the highest quorum
epoch among the answers), kill -9 or SIGSTOP it, and time until (a) admin `metadata` on
the other nodes names a new controller with a higher quorum epoch and (b) an acks=all
produce succeeds on every partition. Then it restarts/resumes the node and waits until the
cluster is ready again. Writes bench/out/failover.json and prints median and max.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from broker.localcluster import LocalCluster

from harness.faultkinds import KILL, PAUSE
from systems.undertow.client import BrokerClient, ClientError

SETTINGS = {"min.insync.replicas": 2, "truncation": "leader-epoch",
            "unclean.leader.election.enable": False}
VOTERS = ["n1", "n2", "n3"]
PARTITIONS = 4


def produce_everywhere(addrs: dict[str, str], deadline: float) -> bool:
    """An acks=all produce succeeds on every partition before `deadline`."""
    cl = BrokerClient(addrs, timeout_s=2)
    try:
        for k in range(PARTITIONS):
            while True:
                try:
                    cl.produce(k, 1, acks="all")
                    break
                except ClientError:
                    if time.monotonic() > deadline:
                        return False
                    time.sleep(0.02)
        return True
    finally:
        cl.close()


def one_round(c: LocalCluster, fault: str, timeout_s: float) -> dict[str, Any]:
    ctrl, epoch = c.active_controller()
    if ctrl is None:
        raise RuntimeError("no active controller before the fault")
    live = [n for n in VOTERS if n != ctrl]
    live_addrs = {n: c.addrs[n] for n in live}
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    if fault == KILL.start:
        c.kill(ctrl)
    else:
        c.pause(ctrl)
    new = None
    while time.monotonic() < deadline:
        new, new_epoch = c.active_controller(live, timeout_s=0.5)
        if new is not None and new != ctrl and new_epoch > epoch:
            break
        time.sleep(0.01)
    else:
        raise RuntimeError(f"no new controller within {timeout_s} s after {fault} of {ctrl}")
    t_controller = time.monotonic() - t0
    if not produce_everywhere(live_addrs, deadline):
        raise RuntimeError(f"no acks=all produce within {timeout_s} s after {fault} of {ctrl}")
    t_produce = time.monotonic() - t0
    if fault == KILL.start:
        c.start(ctrl)
    else:
        c.resume(ctrl)
    c.wait_ready(30)
    time.sleep(1.0)  # let the returning node catch up before the next fault
    return {"fault": fault, "old": ctrl, "new": new, "old_epoch": epoch, "new_epoch": new_epoch,
            "controller_s": round(t_controller, 3), "failover_s": round(t_produce, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10, help="faults per kind")
    ap.add_argument("--faults", default=f"{KILL.start},{PAUSE.start}")
    ap.add_argument("--timeout", type=float, default=30.0, help="per failover, seconds")
    ap.add_argument("--out", type=Path, default=Path("bench/out/failover.json"))
    args = ap.parse_args(argv)
    faults = [f for f in args.faults.split(",") if f]
    bad = [f for f in faults if f not in (KILL.start, PAUSE.start)]
    if bad:
        ap.error(f"--faults: {bad} are not kill or pause")
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as d, LocalCluster(
            Path(d), VOTERS, voters=VOTERS, settings=SETTINGS, partitions=PARTITIONS) as c:
        c.start_all()
        c.wait_ready(30)
        for i in range(args.rounds):
            for fault in faults:
                row = one_round(c, fault, args.timeout)
                rows.append(row)
                print(f"{i:3d} {fault:5s} {row['old']}->{row['new']} epoch "
                      f"{row['old_epoch']}->{row['new_epoch']}: controller "
                      f"{row['controller_s']:.2f} s, produce ok {row['failover_s']:.2f} s",
                      flush=True)
    summary: dict[str, Any] = {"load_before": load_before, "load_after": os.getloadavg()}
    for fault in faults:
        for key in ("controller_s", "failover_s"):
            xs = [r[key] for r in rows if r["fault"] == fault]
            summary[f"{fault}_{key}"] = {"n": len(xs), "median": statistics.median(xs),
                                         "max": max(xs), "min": min(xs)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
