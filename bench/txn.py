"""python -m bench.txn [--seconds 10] [--producers 4] [--rounds 3]: transactions and idempotence.

Starts 3 local nodes of our broker (RF 3, min ISR 2, 3 transaction-state partitions, 8
keys) and measures, with `--producers` client threads each on its own connections:
- committed transactions per second, each of 4 sends to 4 keys (init once; then begin,
  add the 4 partitions, the 4 sends with up to 5 in flight, commit);
- acknowledged records per second (acks=all, one operation of 4 sends with up to 5 in
  flight, as the queue workload's), with the idempotent producer on and off, side by side:
  the two alternate for `--rounds` rounds of `--seconds` each in one cluster, so both see
  the same machine and the idempotence cost is their ratio;
- the brokers' CPU time per committed transaction (user + system, all 3 nodes; Linux
  /proc), a figure that depends far less on what else runs on the machine than rates do,
  and the client threads' (this process's).
Writes bench/out/txn.json and prints the summary.

`--old DIR` compares brokers instead: a second cluster runs the broker of the checkout
DIR (with its own .venv, e.g. `git worktree add --detach DIR <commit>` then
`./scripts/bootstrap setup` there), and each round measures committed transactions per
second and broker CPU per transaction on both, one after the other, alternating which
goes first; the clients are this checkout's. Writes bench/out/txn-compare.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.localcluster import LocalCluster

from systems.undertow.client import BrokerClient, ClientError
from systems.undertow.pipeline import produce_many
from systems.undertow.txn_producer import Outcome, TxnProducer

SETTINGS = {"min.insync.replicas": 2, "transaction.state.log.num.partitions": 3}
KEYS = 8
SENDS = 4
IN_FLIGHT = 5


def rate(addrs: dict[str, str], producers: int, seconds: float,
         work: Callable[[BrokerClient, int, int], int], **client: Any) -> float:
    """Units per second that `producers` threads complete running work(client, thread, i)
    (it returns how many units it completed) over `seconds`."""
    done = [0] * producers
    stop = time.monotonic() + seconds

    def loop(t: int) -> None:
        cl = BrokerClient(addrs, timeout_s=10, retries=3, max_in_flight=IN_FLIGHT, **client)
        i = 0
        try:
            while time.monotonic() < stop:
                done[t] += work(cl, t, i)
                i += 1
        finally:
            cl.close()

    threads = [threading.Thread(target=loop, args=(t,)) for t in range(producers)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return sum(done) / (time.monotonic() - t0)


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds the processes used so far (Linux /proc)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def sends(values: int, t: int, i: int) -> list[tuple[int, int]]:
    base = (t * 1_000_000 + i) * SENDS + values
    return [((t + i + j) % KEYS, base + j) for j in range(SENDS)]


def acked(offset_base: int) -> Callable[[BrokerClient, int, int], int]:
    def work(cl: BrokerClient, t: int, i: int) -> int:
        results = produce_many(cl, sends(offset_base, t, i))
        return sum(not isinstance(r, ClientError) for r in results)
    return work


def transactions(seconds: float) -> Callable[[BrokerClient, int, int], int]:
    producers: dict[int, TxnProducer] = {}

    def work(cl: BrokerClient, t: int, i: int) -> int:
        p = producers.get(t)
        if p is None or p.cl is not cl:
            p = producers[t] = TxnProducer(cl, f"bench-{t}-{time.monotonic_ns()}",
                                           transaction_timeout_ms=int(seconds * 1000) + 30_000)
        items = sends(500_000_000, t, i)
        try:
            p.begin()
            p.add_partitions({k for k, _v in items})
            if any(isinstance(r, ClientError) for r in produce_many(cl, items)):
                p.abandon()
                return 0
        except ClientError:
            p.abandon()
            return 0
        return 1 if p.end(commit=True) is Outcome.COMMITTED else 0
    return work


def txn_round(c: LocalCluster, producers: int, seconds: float) -> dict[str, float]:
    """Committed transactions per second on `c`, and CPU ms per transaction of its brokers
    and of the client threads (this process: on a 2-core machine they compete)."""
    pids = [p.pid for p in c.procs.values()]
    cpu0, own0 = cpu_s(pids), sum(os.times()[:2])
    txns = rate(c.addrs, producers, seconds, transactions(seconds))
    n = max(1.0, txns * seconds)
    return {"txns_per_s": txns,
            "broker_cpu_ms_per_txn": 1000 * (cpu_s(pids) - cpu0) / n,
            "client_cpu_ms_per_txn": 1000 * (sum(os.times()[:2]) - own0) / n}


def compare(old: Path, args: argparse.Namespace) -> dict[str, Any]:
    """This checkout's broker against `old`'s, alternating round by round."""
    python = old / ".venv" / "bin" / "python"
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as d, \
            LocalCluster(Path(d) / "new", settings=SETTINGS, partitions=KEYS) as new_c, \
            LocalCluster(Path(d) / "old", settings=SETTINGS, partitions=KEYS,
                         python=str(python)) as old_c:
        clusters = {"new": new_c, "old": old_c}
        for c in clusters.values():
            c.start_all()
        rows: dict[str, list[dict[str, float]]] = {"new": [], "old": []}
        for c in clusters.values():
            c.wait_ready(30)
            rate(c.addrs, args.producers, 2.0, transactions(2.0))  # warm up
        for r in range(args.rounds):
            for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
                row = txn_round(clusters[side], args.producers, args.seconds)
                rows[side].append(row)
                print(json.dumps({"round": r, "side": side, "load": os.getloadavg()[0],
                                  **{k: round(v, 2) for k, v in row.items()}}), flush=True)
    summary: dict[str, Any] = {"old": str(old), "producers": args.producers,
                               "seconds": args.seconds, "rounds": args.rounds}
    for side, got in rows.items():
        for key in ("txns_per_s", "broker_cpu_ms_per_txn", "client_cpu_ms_per_txn"):
            summary[f"{side}_{key}"] = round(statistics.median(row[key] for row in got), 2)
    summary["speedup"] = round(summary["new_txns_per_s"] / summary["old_txns_per_s"], 2)
    return {"rounds": rows, "summary": summary}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.txn", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None,
                    help="default bench/out/txn.json, with --old bench/out/txn-compare.json")
    ap.add_argument("--old", type=Path, default=None,
                    help="a checkout whose broker to compare with (its .venv runs it)")
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.producers < 1 or args.rounds < 1:
        ap.error("--seconds must be positive, --producers and --rounds at least 1")
    if args.old is not None and not (args.old / ".venv" / "bin" / "python").exists():
        ap.error(f"--old {args.old}: no .venv/bin/python there (run ./scripts/bootstrap "
                 "setup in it)")
    load_before = os.getloadavg()
    if args.old is not None:
        res = compare(args.old.resolve(), args)
        res["summary"] |= {"load_before": load_before, "load_after": os.getloadavg()}
        out = args.out or Path("bench/out/txn-compare.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=1))
        print(json.dumps(res["summary"], indent=1))
        return 0
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-txn-") as d, LocalCluster(
            Path(d), settings=SETTINGS, partitions=KEYS) as c:
        c.start_all()
        c.wait_ready(30)
        rate(c.addrs, args.producers, 2.0, acked(900_000_000))  # warm up: leaders, ISRs
        for r in range(args.rounds):
            row: dict[str, Any] = {"round": r}
            for idem in (True, False) if r % 2 == 0 else (False, True):
                name = "idempotent_records_per_s" if idem else "plain_records_per_s"
                row[name] = rate(c.addrs, args.producers, args.seconds,
                                 acked((r * 2 + idem) * 100_000_000),
                                 enable_idempotence=idem)
            row |= txn_round(c, args.producers, args.seconds)
            rows.append(row)
            print(json.dumps({k: round(v, 1) for k, v in row.items()}), flush=True)

    def med(key: str) -> float:
        return round(float(statistics.median(float(row[key]) for row in rows)), 1)

    summary = {"producers": args.producers, "seconds": args.seconds, "rounds": args.rounds,
               "sends_per_txn": SENDS, "txns_per_s": med("txns_per_s"),
               "broker_cpu_ms_per_txn": med("broker_cpu_ms_per_txn"),
               "client_cpu_ms_per_txn": med("client_cpu_ms_per_txn"),
               "idempotent_records_per_s": med("idempotent_records_per_s"),
               "plain_records_per_s": med("plain_records_per_s"),
               "idempotence_cost_pct": round(100 * (1 - med("idempotent_records_per_s")
                                                    / med("plain_records_per_s")), 1),
               "load_before": load_before, "load_after": os.getloadavg()}
    out = args.out or Path("bench/out/txn.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rounds": rows, "summary": summary}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
