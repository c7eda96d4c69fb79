"""Benchmark: render the report of a 10-minute run with 1M history lines.

Generates a run folder with the contract's shapes (history.jsonl of sends and
polls from 10 workers over 8 keys, nemesis kill/start, pause/resume and
partition/heal every ~10 s, replicas.jsonl of 3 nodes, results.json with
lost-write, inconsistent-offsets and replica-divergence examples and the `availability`
block the checker writes), then times render_run and reports the report's size.
Targets: <= 10 s, <= 20 MB. `--without-availability` leaves the block out, as results
written before it existed (or by another tool): the report then measures it from the
history itself, which costs a second read of it.

    python -m bench.report [--ops 1000000] [--out bench/out/report-run] [--without-availability]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import orjson

from harness.faultkinds import KILL, PARTITION, PAUSE
from harness.report.render import render_run

DURATION_NS = 600 * 10**9
NODES = ("n1", "n2", "n3")


def generate(run_dir: Path, ops: int, *, keys: int = 8, concurrency: int = 10,
             seed: int = 1, availability: bool = True) -> dict[str, Any]:
    """Write history.jsonl, replicas.jsonl, results.json and test.json; return a summary."""
    rng = random.Random(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    step_ns = DURATION_NS // ops
    logs: list[list[int]] = [[] for _ in range(keys)]  # key -> values by offset
    writer: dict[int, int] = {}
    procs = list(range(concurrency))
    pending: dict[int, tuple[str, Any]] = {}
    read_pos: dict[tuple[int, int], int] = {}
    next_value = 0
    lines: list[bytes] = []
    t = 0
    nem_next = 10 * 10**9
    nem_cycle = [(KILL.start, {"nodes": ["n2"]}), (KILL.heal, {"nodes": ["n2"]}),
                 (PAUSE.start, {"nodes": ["n3"]}), (PAUSE.heal, {"nodes": ["n3"]}),
                 (PARTITION.start,
                  {"grudge": {"n1": ["n3"], "n2": ["n3"], "n3": ["n1", "n2"]}}),
                 (PARTITION.heal, {})]
    nem_i = 0
    slot = 0

    def emit(row: dict[str, Any]) -> None:
        row["index"] = len(lines)
        lines.append(orjson.dumps(row))

    while len(lines) < ops:
        t += step_ns
        if t >= nem_next and len(lines) + 2 <= ops:
            f, v = nem_cycle[nem_i % len(nem_cycle)]
            nem_i += 1
            emit({"time": t, "type": "invoke", "process": "nemesis", "f": f, "value": v})
            emit({"time": t + 1000, "type": "info", "process": "nemesis", "f": f, "value": v})
            nem_next += 10 * 10**9
            continue
        slot = (slot + 1) % concurrency
        p = procs[slot]
        if p not in pending:
            k = rng.randrange(keys)
            if rng.random() < 0.5:
                v = next_value
                next_value += 1
                writer[v] = p
                pending[p] = ("send", (k, v))
                emit({"time": t, "type": "invoke", "process": p, "f": "send",
                      "value": [["send", k, v]]})
            else:
                pending[p] = ("poll", k)
                emit({"time": t, "type": "invoke", "process": p, "f": "poll",
                      "value": [["poll"]]})
            continue
        f, arg = pending.pop(p)
        r = rng.random()
        kind = "ok" if r < 0.985 else ("fail" if r < 0.995 else "info")
        if f == "send":
            k, v = arg
            if kind == "fail":
                emit({"time": t, "type": "fail", "process": p, "f": "send",
                      "value": [["send", k, v]], "error": "not-leader"})
            else:
                logs[k].append(v)
                emit({"time": t, "type": kind, "process": p, "f": "send",
                      "value": [["send", k, [len(logs[k]) - 1, v]]],
                      **({"error": "timeout"} if kind == "info" else {})})
        else:
            k = arg
            pos = read_pos.get((p, k), 0)
            recs = [[o, logs[k][o]] for o in range(pos, min(pos + 3, len(logs[k])))]
            if kind == "ok" and recs:
                read_pos[(p, k)] = recs[-1][0] + 1
            emit({"time": t, "type": "ok" if kind == "ok" else kind, "process": p, "f": "poll",
                  "value": [["poll", {str(k): recs} if kind == "ok" else {}]],
                  **({"error": "timeout"} if kind != "ok" else {})})
        if kind == "info":
            procs[slot] = p + concurrency
    (run_dir / "history.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    # replicas: every node holds every key's log; n3 diverges on key 0 at a few offsets
    rows: list[bytes] = []
    for node in NODES:
        for k in range(keys):
            n = len(logs[k])
            rows.append(orjson.dumps({"node": node, "key": k, "hw": n, "leo": n,
                                      "leader_epoch": 3}))
            for o, v in enumerate(logs[k]):
                if node == "n3" and k == 0 and o in (100, 101, 102):
                    v = -1 - o
                rows.append(orjson.dumps({"node": node, "key": k, "offset": o, "value": v,
                                          "epoch": 1}))
    (run_dir / "replicas.jsonl").write_bytes(b"\n".join(rows) + b"\n")
    lost = [{"key": 1, "value": logs[1][o], "offset": o, "writer": writer[logs[1][o]],
             "max_read_offset": len(logs[1]) - 1} for o in range(50, 50 + 32)]
    results = {
        "valid": False,
        "anomaly_types": ["lost-write", "inconsistent-offsets", "replica-divergence"],
        "bad_anomaly_types": ["lost-write", "inconsistent-offsets", "replica-divergence"],
        "counts": {"lost-write": 120, "inconsistent-offsets": 4, "replica-divergence": 3},
        "anomalies": {
            "lost-write": lost,
            "inconsistent-offsets": [{"key": 2, "offset": o, "values": [logs[2][o], logs[2][o + 1]]}
                                     for o in range(10, 14)],
            "replica-divergence": [{"key": 0, "offset": o, "values": {"n1": logs[0][o],
                                                                      "n3": -1 - o}}
                                   for o in (100, 101, 102)],
        },
        "stats": {"ops": ops},
    }
    if availability:  # as checkers.api.with_availability writes it
        from checkers.availability import availability as measure
        from checkers.tables import load_tables
        results["availability"] = measure(load_tables(run_dir), run_dir)
    (run_dir / "results.json").write_text(json.dumps(results))
    (run_dir / "test.json").write_text(json.dumps({
        "name": "bench-report", "seed": seed, "concurrency": concurrency, "keys": keys,
        "time_limit_s": 600, "nodes": list(NODES)}))
    return {"lines": len(lines), "replica_rows": len(rows),
            "history_mb": (run_dir / "history.jsonl").stat().st_size / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1_000_000, help="history lines")
    ap.add_argument("--out", type=Path, default=Path("bench/out/report-run"))
    ap.add_argument("--repeat", type=int, default=3, help="render this many times")
    ap.add_argument("--without-availability", action="store_true",
                    help="results.json without its availability block (the report measures it)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    summary = generate(args.out, args.ops, availability=not args.without_availability)
    gen_s = time.perf_counter() - t0
    times, cpu = [], []
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = render_run(args.out)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    size_mb = out.stat().st_size / 1e6
    load = os.getloadavg()
    result = {"ops": summary["lines"], "history_mb": round(summary["history_mb"], 1),
              "replica_rows": summary["replica_rows"], "generate_s": round(gen_s, 1),
              "render_s": [round(x, 2) for x in times], "render_best_s": round(min(times), 2),
              "render_cpu_s": [round(x, 2) for x in cpu],
              "report_mb": round(size_mb, 2),
              "availability_in_results": not args.without_availability,
              "load_avg": [round(x, 2) for x in load],
              "targets": {"render_s": 10, "report_mb": 20},
              "ok": min(times) <= 10 and size_mb <= 20}
    (args.out.parent / "report.json").write_text(json.dumps(result, indent=1))
    print(f"bench.report: {summary['lines']} ops ({summary['history_mb']:.0f} MB history, "
          f"{summary['replica_rows']} replica rows): render {', '.join(f'{x:.2f}' for x in times)}"
          f" s wall (best {min(times):.2f} s, target <= 10; CPU "
          f"{', '.join(f'{x:.2f}' for x in cpu)} s), report {size_mb:.2f} MB "
          f"(target <= 20), load avg {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
