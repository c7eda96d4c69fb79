"""python -m bench.raft [--seeds N] [--workers W] [--driver-failovers K]

1. N seeded simulator schedules (safe Raft): count, violations, wall time.
2. The broken variant (up-to-date vote check skipped): how many seeds until it is caught.
3. Simulated failover time (crash the leader, until a new leader commits in its own epoch), in
   simulated ms, with the simulator's timings and with the broker's default RaftConfig.
4. Real failover: RaftDrivers on asyncio with fsync'ed FileStorage over the loopback network,
   default RaftConfig; crash the leader K times, wall ms until a new leader is ready.
Writes bench/out/raft.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from broker.raft.core import RaftConfig
from broker.raft.driver import RaftDriver
from broker.raft.loopback import LoopbackNetwork
from broker.raft.sim import SimConfig, run_seed, run_seeds
from broker.raft.storage import FileStorage


def dist(values: list[int] | list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    s = sorted(values)
    return {"n": len(s), "min": s[0], "median": statistics.median(s),
            "p90": s[int(0.9 * (len(s) - 1))], "p99": s[int(0.99 * (len(s) - 1))], "max": s[-1]}


async def driver_failovers(count: int, config: RaftConfig) -> list[float]:
    voters = ("n1", "n2", "n3")
    out: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        net = LoopbackNetwork()

        async def start(n: str, seed: int) -> RaftDriver:
            d = RaftDriver(n, voters, FileStorage(Path(tmp) / n), net.transport(n),
                           config=config, seed=seed)
            net.drivers[n] = d
            await d.start()
            return d

        async def ready_leader(exclude: str | None) -> RaftDriver:
            while True:
                for n, d in net.drivers.items():
                    if n != exclude and d.running and d.leader_ready:
                        return d
                await asyncio.sleep(0.005)

        for i, n in enumerate(voters):
            await start(n, i)
        try:
            leader = await asyncio.wait_for(ready_leader(None), 30)
            for k in range(count):
                await leader.propose({"k": k})
                t0 = time.monotonic()
                await leader.stop()
                new = await asyncio.wait_for(ready_leader(leader.node_id), 30)
                out.append((time.monotonic() - t0) * 1000)
                await start(leader.node_id, 100 + k)
                await asyncio.sleep(config.election_timeout_ms / 1000)  # let it rejoin
                leader = new
        finally:
            for d in net.drivers.values():
                await d.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.raft")
    ap.add_argument("--seeds", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--driver-failovers", type=int, default=10)
    args = ap.parse_args()
    report: dict[str, Any] = {"load_before": os.getloadavg()}

    s = run_seeds(0, args.seeds, workers=args.workers)
    report["sim"] = {"schedules": s.schedules, "violations": len(s.violations),
                     "violation_examples": [(r.seed, r.violation) for r in s.violations[:5]],
                     "committed_entries": s.committed, "elapsed_s": round(s.elapsed_s, 1),
                     "workers": args.workers,
                     "failover_ms_under_mixed_faults": dist(list(s.failovers_ms))}
    print(f"simulator: {s.schedules} schedules, {len(s.violations)} violations, "
          f"{s.elapsed_s:.1f} s with {args.workers} workers "
          f"({1000 * s.elapsed_s * args.workers / max(1, s.schedules):.1f} ms CPU/schedule)")

    broken = SimConfig(unsafe_skip_log_up_to_date_check=True)
    caught = [seed for seed in range(200) if run_seed(seed, broken).violation]
    report["broken_variant"] = {"seeds_run": 200, "caught": len(caught),
                                "first_caught_seed": caught[0] if caught else None}
    print(f"broken variant (vote check skipped): caught in {len(caught)}/200 seeds, "
          f"first at seed {caught[0] if caught else None}")

    crash_only: dict[str, SimConfig] = {
        "sim_timings": SimConfig(faults=("failover",), drop_p=0.0, dup_p=0.0),
        "broker_default_timings": SimConfig(
            faults=("failover",), drop_p=0.0, dup_p=0.0, delay_max_ms=5,
            raft=RaftConfig(), duration_ms=60_000, fault_interval_ms=3000, settle_ms=5_000),
    }
    report["sim_failover_ms"] = {}
    for name, cfg in crash_only.items():
        seeds = 100 if cfg.raft.election_timeout_ms < 500 else 15
        ms = [m for seed in range(seeds) for m in run_seed(seed, cfg, vary=False).failovers_ms]
        d = dist(ms)
        report["sim_failover_ms"][name] = {"election_timeout_ms": cfg.raft.election_timeout_ms,
                                           **d}
        print(f"simulated failover ({name}, election timeout {cfg.raft.election_timeout_ms} ms):"
              f" median {d.get('median')} ms, p90 {d.get('p90')}, max {d.get('max')} "
              f"(n={d['n']})")

    if args.driver_failovers:
        real = asyncio.run(driver_failovers(args.driver_failovers, RaftConfig()))
        d = dist([round(x) for x in real])
        report["driver_failover_ms"] = d
        print(f"driver failover (asyncio + fsync, default config): median {d.get('median')} ms, "
              f"max {d.get('max')} ms (n={d['n']})")
    report["load_after"] = os.getloadavg()
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    out = Path("bench/out")
    out.mkdir(parents=True, exist_ok=True)
    (out / "raft.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {out / 'raft.json'}")


if __name__ == "__main__":
    main()
