"""What does a fault's evidence cost the clients? Client ops/s under faults every 2 s,
with the evidence (HISTORY.md's `landed`), and with it left out, side by side in one run.

    python -m bench.evidence [--seconds 30] [--pairs 3] [--interval 2] [--together]
                             [--nemesis kill,pause,partition] [--system undertow]

The default experiment's setting (local backend, 3 nodes, concurrency 20 as in
bench.harness), faults every `--interval` seconds. "Without" is this same code with
the observations a fault makes for its evidence turned into no claim: the process
states around a kill or a pause, the proxy's probes around a partition or a heal, the
round trips around slow and lossy links. Both sides of a pair use one seed (the same
plan of faults); pairs alternate which side goes first, so the machine's drift falls
on both, or with `--together` both sides of a seed run at the same moment (each its own
cluster and process), so both see the same load. The run is not checked (its results
are not the figure).

Prints each run, each seed's ratios (with / without) of client ops/s and of CPU per
client op (the whole run's: servers, link proxy, harness; getrusage of the process and
its reaped children), their medians and geometric means, and the nemesis's time per
verb; writes bench/out/evidence.json. CPU per op is the steadier figure on a shared
machine: ops/s moves with whatever else runs, the CPU each op costs much less.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness import core
from harness.runfiles import NEMESIS, read_history
from harness.spec import build_spec
from harness.test import Test, assemble

OUT = Path(__file__).resolve().parent / "out"


class _Unchecked(Test):
    """The run without its checkers: the bench times the clients, not the check."""

    def checkers(self) -> list[Any]:
        return []


@contextlib.contextmanager
def no_evidence() -> Iterator[None]:
    """Every observation a fault makes for its evidence answers "cannot tell" meanwhile."""
    import nemesis.faults
    import nemesis.netfaults
    import nemesis.shaping

    quiet: list[tuple[object, str, Any]] = [
        (nemesis.faults, "observe", lambda run, nodes: None),
        (nemesis.netfaults, "_link_evidence", lambda run, pairs, want: {}),
        (nemesis.shaping, "time_links", lambda run, nodes, budget_s: None)]
    saved = [(m, name, getattr(m, name)) for m, name, _ in quiet]
    for m, name, stand_in in quiet:
        setattr(m, name, stand_in)
    try:
        yield
    finally:
        for m, name, old in saved:
            setattr(m, name, old)


def one_run(root: Path, *, system: str, nemesis: str, seconds: float, interval: float,
            seed: int, evidence: bool) -> dict[str, Any]:
    spec = build_spec({"system": system, "nemesis": nemesis.split(","),
                       "nemesis_interval_s": interval, "time_limit_s": seconds,
                       "concurrency": 20, "seed": seed, "results_dir": str(root)})
    test = assemble(spec)
    test = _Unchecked(**{f: getattr(test, f) for f in
                         ("spec", "system", "workload", "nemesis", "backend")})
    with contextlib.ExitStack() as stack:
        if not evidence:
            stack.enter_context(no_evidence())
        t0, cpu0 = time.monotonic(), cpu_seconds()
        out = core.run_test(test)
        wall, cpu_s = time.monotonic() - t0, cpu_seconds() - cpu0
    got = figures(out.run_dir / "history.jsonl", seconds)
    return {"evidence": evidence, "seed": seed, "run": str(out.run_dir), "wall_s": wall,
            "cpu_s": cpu_s, "cpu_ms_per_op": 1000 * cpu_s / max(got["client_ops"], 1), **got}


def cpu_seconds() -> float:
    """User and system CPU seconds of this process and of its children that have been
    waited for: the whole run (servers, link proxy, the harness with its client threads)
    once it is over, since the run reaps every process it started."""
    own, kids = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                     resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def figures(history: Path, seconds: float) -> dict[str, Any]:
    """Client ops completed in the timed window, per second; the faults, their claims, and
    how long the nemesis took over each verb (invocation to completion, median ms): the
    time an observation holds the nemesis is how evidence could cost the clients."""
    start: int | None = None
    done = every = 0
    faults = landed = missed = 0
    invoked: int | None = None
    took: dict[str, list[float]] = {}
    for op in read_history(history):
        if op.process == NEMESIS:
            if op.type == "invoke":
                invoked = op.time
                continue
            if invoked is not None:
                took.setdefault(op.f, []).append((op.time - invoked) / 1e6)
            if not op.extra.get("final"):
                faults += 1
                if op.extra.get("landed") is True:
                    landed += 1
                elif op.extra.get("landed") is False:
                    missed += 1
            continue
        if start is None:
            start = op.time
        if op.type != "invoke":
            every += 1
            done += op.time - start <= seconds * 1e9
    return {"ops_per_s": done / seconds, "ops": done, "client_ops": every,
            "nemesis_ops": faults,
            "landed": landed, "not_landed": missed,
            "nemesis_ms": {f: round(statistics.median(v), 1) for f, v in sorted(took.items())}}


def _side_argv(args: argparse.Namespace, root: Path, seed: int, evidence: bool) -> list[str]:
    return [sys.executable, "-m", "bench.evidence", "--one", "on" if evidence else "off",
            "--root", str(root), "--seed", str(seed), "--system", args.system,
            "--nemesis", args.nemesis, "--seconds", str(args.seconds),
            "--interval", str(args.interval)]


def pair(args: argparse.Namespace, root: Path, seed: int, first: bool) -> list[dict[str, Any]]:
    """One seed with and without the evidence: at the same moment, each in a process of
    its own (--together), or one after the other in this process, `first` first."""
    if args.together:
        procs = [subprocess.Popen(_side_argv(args, root / side, seed, side == "on"),
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                 for side in ("on", "off")]
        outs = [p.communicate(timeout=args.seconds + 600)[0] for p in procs]
        if any(p.returncode for p in procs):
            codes = [p.returncode for p in procs]
            raise RuntimeError(f"a side of seed {seed} failed: exit codes {codes}")
        return [json.loads(o.strip().splitlines()[-1]) for o in outs]
    return [one_run(root, system=args.system, nemesis=args.nemesis, seconds=args.seconds,
                    interval=args.interval, seed=seed, evidence=evidence)
            for evidence in (first, not first)]


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.evidence")
    ap.add_argument("--system", default="undertow")
    ap.add_argument("--nemesis", default="kill,pause,partition")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=2.0)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--together", action="store_true",
                    help="run both sides of a seed at the same moment, each its own cluster "
                         "and process: both see the same load")
    ap.add_argument("--one", choices=("on", "off"), help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:  # one side of a --together pair: its figures as the last line
        r = one_run(args.root, system=args.system, nemesis=args.nemesis, seconds=args.seconds,
                    interval=args.interval, seed=args.seed, evidence=args.one == "on")
        print(json.dumps(r))
        return
    OUT.mkdir(parents=True, exist_ok=True)
    runs: list[dict[str, Any]] = []
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    with tempfile.TemporaryDirectory(prefix="bench-evidence-") as d:
        for i in range(args.pairs):
            seed = args.first_seed + i
            for r in pair(args, Path(d), seed, first=i % 2 == 0):
                runs.append(r)
                print(f"seed {seed} evidence {'on ' if r['evidence'] else 'off'}: "
                      f"{r['ops_per_s']:,.0f} client ops/s ({r['ops']:,} ops), "
                      f"{r['nemesis_ops']} nemesis completions, {r['landed']} landed, "
                      f"{r['not_landed']} not landed, {r['cpu_ms_per_op']:.2f} CPU ms per "
                      f"op", flush=True)
    on = [r["ops_per_s"] for r in runs if r["evidence"]]
    off = [r["ops_per_s"] for r in runs if not r["evidence"]]
    ratios = [a["ops_per_s"] / b["ops_per_s"] for a, b in zip(
        sorted((r for r in runs if r["evidence"]), key=lambda r: r["seed"]),
        sorted((r for r in runs if not r["evidence"]), key=lambda r: r["seed"]), strict=True)]
    res: dict[str, Any] = {
        "args": vars(args), "load_before": load_before,
        "load_after": " ".join(Path("/proc/loadavg").read_text().split()[:3]), "runs": runs,
        "median_ops_per_s": {"with": statistics.median(on), "without": statistics.median(off)},
        "per_seed_ratio": ratios}
    with_, without = statistics.median(on), statistics.median(off)
    res["ratio_median"] = statistics.median(ratios)
    res["ratio_geometric_mean"] = statistics.geometric_mean(ratios)
    cpu = [a["cpu_ms_per_op"] / b["cpu_ms_per_op"] for a, b in zip(
        sorted((r for r in runs if r["evidence"]), key=lambda r: r["seed"]),
        sorted((r for r in runs if not r["evidence"]), key=lambda r: r["seed"]), strict=True)]
    res["per_seed_cpu_ratio"] = cpu
    res["cpu_ratio_median"] = statistics.median(cpu)
    res["cpu_ratio_geometric_mean"] = statistics.geometric_mean(cpu)
    print(f"client ops/s with/without evidence, per seed: "
          f"{', '.join(f'{x:.3f}' for x in ratios)}; median {res['ratio_median']:.3f}, "
          f"geometric mean {res['ratio_geometric_mean']:.3f} (medians over seeds: with "
          f"{with_:,.0f}, without {without:,.0f}); load before {load_before}, "
          f"after {res['load_after']}")
    print(f"CPU ms per client op (the whole run: servers, proxy, harness) with/without, "
          f"per seed: {', '.join(f'{x:.3f}' for x in cpu)}; median "
          f"{res['cpu_ratio_median']:.3f}, geometric mean "
          f"{res['cpu_ratio_geometric_mean']:.3f} (medians: with "
          f"{statistics.median(r['cpu_ms_per_op'] for r in runs if r['evidence']):.2f} ms, "
          f"without "
          f"{statistics.median(r['cpu_ms_per_op'] for r in runs if not r['evidence']):.2f} ms)")
    (OUT / "evidence.json").write_text(json.dumps(res, indent=1) + "\n")
    for side in (True, False):
        by_f: dict[str, list[float]] = {}
        for r in runs:
            if r["evidence"] is side:
                for f, ms in r["nemesis_ms"].items():
                    by_f.setdefault(f, []).append(ms)
        print(f"nemesis ms per verb {'with' if side else 'without'} evidence (median of runs' "
              "medians): " + ", ".join(f"{f} {statistics.median(v):,.0f}"
                                       for f, v in sorted(by_f.items())))
    print(f"wrote {OUT / 'evidence.json'}")


if __name__ == "__main__":
    main()
