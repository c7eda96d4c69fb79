"""What committed offsets cost a check: one subscribe-style history with `commit` and
`committed` operations, and the same history without them, checked side by side.

`python -m bench.offsets [--lines N] [--spark] [--run DIR]`: generates both
(bench/out/offsets-*), or with --run takes a real run folder's history (a subscribe run
with offset operations) and the same history less its commit and committed lines,
checks each twice in turn (without, with, without, with) and prints the best time of
each and their ratio; in this process (`checkers.api.check_local`: the read, the per-key
loop, the graph and the register searches), and with `--spark` also as `undertow check`
runs it (one local[2] session for all four checks). The issue's budget: at most 1.5x.

The workload, simulated (no cluster): 20 consumers of one group, each owning 3 or 4 of
64 keys, each operation 1 to 20 ms long; half sends to any key, the rest polls of the
consumer's own keys (taking effect at their invoke), plus, as the queue workload's
subscribe loop does with `--commit processed` (a commit at each 0.1 s heartbeat), a
synchronous commit of its positions every 0.1 s (1 % end `info`) and a `committed`
read of its keys every second; then a final read of every key. A commit takes effect at its
completion, so the register is valid and every search runs to its end.
"""

from __future__ import annotations

import argparse
import heapq
import random
import shutil
import time
from pathlib import Path
from typing import Any

import orjson

KEYS, CONSUMERS = 64, 20
COMMIT_EVERY_NS, ASK_EVERY_NS = 100_000_000, 1_000_000_000
OUT = Path("bench/out")


def simulate(ops: int, seed: int = 1) -> list[dict[str, Any]]:
    """About 2 * ops lines of one group's consumers (module docstring), time-sorted."""
    rnd = random.Random(seed)
    logs: list[list[int]] = [[] for _ in range(KEYS)]
    cursor = [0] * KEYS  # each key has one owner: its position is the group's
    own = [list(range(w, KEYS, CONSUMERS)) for w in range(CONSUMERS)]
    next_commit = [rnd.randrange(COMMIT_EVERY_NS) for _ in range(CONSUMERS)]
    next_ask = [rnd.randrange(ASK_EVERY_NS) for _ in range(CONSUMERS)]
    names = list(range(CONSUMERS))
    events: list[tuple[int, int, dict[str, Any]]] = []
    writes: list[tuple[int, dict[int, int]]] = []  # (instant, offsets) of commits
    asks: list[tuple[int, list[int], dict[str, Any]]] = []  # answered once all is known
    clock = [(2, w) for w in range(CONSUMERS)]
    value = 10**17
    for w in range(CONSUMERS):
        events.append((0, len(events), _op("invoke", w, "subscribe", own[w])))
        events.append((1, len(events), _op("ok", w, "subscribe", own[w])))
    for _ in range(ops):
        t, w = heapq.heappop(clock)
        d = rnd.randrange(1_000_000, 20_000_000)
        p = names[w]
        extra: dict[str, Any] = {}
        inv: Any
        done: Any
        if t >= next_commit[w]:
            next_commit[w] += COMMIT_EVERY_NS
            offs = {k: cursor[k] for k in own[w] if cursor[k]}
            mop = [["commit", {str(k): o for k, o in offs.items()}]]
            inv, done, kind = mop, mop, "ok" if rnd.random() > 0.01 else "info"
            if kind == "ok" or rnd.random() < 0.5:
                writes.append((t + d, offs))
            f = "commit"
        elif t >= next_ask[w]:
            next_ask[w] += ASK_EVERY_NS
            inv, done, kind, f = [["committed", own[w]]], [], "ok", "committed"
            asks.append((t, own[w], extra))
        elif rnd.random() < 0.5:
            k = rnd.randrange(KEYS)
            value += rnd.randrange(1, 1000)
            logs[k].append(value)
            inv, f, kind = [["send", k, value]], "send", "ok"
            done = [["send", k, [len(logs[k]) - 1, value]]]
        else:
            got = {}
            for k in own[w]:
                end = min(len(logs[k]), cursor[k] + rnd.randrange(0, 30))
                if end > cursor[k]:
                    got[str(k)] = [[o, logs[k][o]] for o in range(cursor[k], end)]
                    cursor[k] = end
            inv, done, f, kind = [["poll"]], [["poll", got]], "poll", "ok"
        events.append((t, len(events), _op("invoke", p, f, inv)))
        extra.update(_op(kind, p, f, done))
        events.append((t + d, len(events), extra))
        if kind == "info":
            names[w] = max(names) + 1
        heapq.heappush(clock, (t + d, w))
    _answer(writes, asks)
    end = max(e[0] for e in events) + 1
    for k in range(KEYS):  # the final reads
        p = max(names) + 1 + k
        events.append((end + 2 * k, len(events), _op("invoke", p, "poll", [["poll"]])))
        events.append((end + 2 * k + 1, len(events), _op(
            "ok", p, "poll", [["poll", {str(k): [[o, v] for o, v in enumerate(logs[k])]}]])))
    events.sort(key=lambda e: (e[0], e[1]))
    return [{**e[2], "index": i, "time": e[0]} for i, e in enumerate(events)]


def _op(type_: str, p: int, f: str, value: Any) -> dict[str, Any]:
    return {"type": type_, "process": p, "f": f, "value": value}


def _answer(writes: list[tuple[int, dict[int, int]]],
            asks: list[tuple[int, list[int], dict[str, Any]]]) -> None:
    """Each committed read answers the last commit of each key before its invoke (one
    sweep over both in time order)."""
    writes.sort(key=lambda x: x[0])
    state: dict[int, int] = {}
    i = 0
    for t, keys, line in sorted(asks, key=lambda a: a[0]):
        while i < len(writes) and writes[i][0] < t:
            state.update(writes[i][1])
            i += 1
        line["value"] = [["committed", {str(k): state.get(k) for k in keys}]]


def write(rows: list[dict[str, Any]], run: Path) -> Path:
    """A run folder holding only this history (an earlier --run's replicas and test.json,
    which would be checked with it, removed)."""
    if run.exists():
        shutil.rmtree(run)
    run.mkdir(parents=True)
    (run / "history.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000, help="about this many lines")
    ap.add_argument("--spark", action="store_true", help="also through one Spark session")
    ap.add_argument("--run", type=Path, default=None,
                    help="a run folder whose history to check with and without its offsets")
    a = ap.parse_args()
    if a.run is None:
        rows = simulate(a.lines // 2)
    else:
        rows = [orjson.loads(line) for line in
                (a.run / "history.jsonl").read_bytes().splitlines() if line.strip()]
    plain = [r for r in rows if r["f"] not in ("commit", "committed")]
    runs = {"with": write(rows, OUT / "offsets-with"),
            "without": write([{**r, "index": i} for i, r in enumerate(plain)],
                             OUT / "offsets-without")}
    for name in ("test.json", "replicas.jsonl"):  # the run's own, the same for both
        if a.run is not None and (a.run / name).is_file():
            for d in runs.values():
                (d / name).write_bytes((a.run / name).read_bytes())
    n_commit = sum(r["f"] == "commit" for r in rows) // 2
    print(f"{len(rows)} lines with {n_commit} commits and "
          f"{sum(r['f'] == 'committed' for r in rows) // 2} committed reads; "
          f"{len(plain)} lines without")
    from checkers.api import check_local

    best: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for name in ("without", "with", "without", "with"):
        t0, c0 = time.monotonic(), time.process_time()
        res = check_local(runs[name])
        wall, used = time.monotonic() - t0, time.process_time() - c0
        best[name] = min(best.get(name, float("inf")), wall)
        cpu[name] = min(cpu.get(name, float("inf")), used)
        print(f"  in process, {name}: {wall:.2f} s wall, {used:.2f} s CPU, valid "
              f"{res['valid']}, registers {res['stats'].get('offset_registers', 0)} in "
              f"{res['stats'].get('offset_check_s', 0)} s")
    print(f"in process (best of two): without {best['without']:.2f} s wall, "
          f"{cpu['without']:.2f} s CPU; with {best['with']:.2f} s wall, {cpu['with']:.2f} s "
          f"CPU; ratio {best['with'] / best['without']:.2f} wall, "
          f"{cpu['with'] / cpu['without']:.2f} CPU")
    if a.spark:
        from checkers.api import check_runs
        from checkers.spark_server import resolve

        order = [runs["without"], runs["with"], runs["without"], runs["with"]]
        out = check_runs(order, resolve("cold", "local[2]"))
        spark: dict[str, float] = {}
        for d, res in zip(order, out, strict=True):
            name = "with" if d == runs["with"] else "without"
            s = float(res["stats"]["read_s"]) + float(res["stats"]["check_s"])
            spark[name] = min(spark.get(name, float("inf")), s)
            print(f"  spark, {name}: read {res['stats']['read_s']} s + check "
                  f"{res['stats']['check_s']} s, valid {res['valid']}")
        print(f"spark: without {spark['without']:.2f} s, with {spark['with']:.2f} s, "
              f"ratio {spark['with'] / spark['without']:.2f}")


if __name__ == "__main__":
    main()
