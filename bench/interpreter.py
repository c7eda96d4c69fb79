"""The harness's own CPU per client op: the scheduler, the generator, the worker threads
and the history writer, with a client that answers at once (no system under test).

    python -m bench.interpreter [--seconds 5] [--concurrency 20]

What is left of a real run's harness CPU per op (bench.harness) beyond this is the
system's client (for Kafka, librdkafka and its threads). Prints ops/s, CPU µs per op
(user and system) and the context switches per op, with the machine's load.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness.__main__ import load, new_run
from harness import generator as g
from harness.interpreter import Interpreter
from harness.runfiles import HistoryWriter, Op
from harness.spec import build_spec
from workloads import queue


class InstantClient:
    """harness.protocols.Client answering every op ok at once, in the workload's shapes."""

    def open(self, run: Any, node: str) -> InstantClient:
        return self

    def invoke(self, run: Any, op: Op) -> Op:
        if op.f == "send":
            return op.complete("ok", [["send", m[1], [0, m[2]]] for m in op.value])
        if op.f == "poll":
            return op.complete("ok", [["poll", {}]])
        return op.complete("ok")

    def close(self, run: Any) -> None:
        pass


def measure(seconds: float, concurrency: int) -> dict[str, float]:
    """The queue workload's main phase against InstantClient for `seconds`."""
    spec = build_spec({"nemesis": [], "concurrency": concurrency})
    client = InstantClient()
    with tempfile.TemporaryDirectory(prefix="bench-interpreter-") as d:
        run = new_run(spec, Path(d))
        with HistoryWriter(run.paths.history) as hw:
            interp = Interpreter(run, hw, concurrency=concurrency, nemesis=None, seed=1,
                                 open_client=lambda t: client)
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            interp.run(g.time_limit(seconds, g.clients(queue.generator(spec))))
            elapsed, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
            interp.close()
        ops = sum(interp.stats.counts.values())
    return {"ops_per_s": ops / elapsed,
            "user_us_per_op": (r1.ru_utime - r0.ru_utime) / ops * 1e6,
            "sys_us_per_op": (r1.ru_stime - r0.ru_stime) / ops * 1e6,
            "switches_per_op": (r1.ru_nvcsw - r0.ru_nvcsw + r1.ru_nivcsw - r0.ru_nivcsw) / ops}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.interpreter")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=20)
    args = ap.parse_args()
    before = load()
    r = measure(args.seconds, args.concurrency)
    print(f"load (1/5/15 min) before {before}, after {load()}")
    print(f"interpreter with an instant client, concurrency {args.concurrency}: "
          f"{r['ops_per_s']:,.0f} ops/s; CPU {r['user_us_per_op'] + r['sys_us_per_op']:.1f} "
          f"µs per op (user {r['user_us_per_op']:.1f}, system {r['sys_us_per_op']:.1f}); "
          f"{r['switches_per_op']:.1f} context switches per op")


if __name__ == "__main__":
    main()
