"""What does a fault's evidence cost the clients? Client ops/s under faults every 2 s,
with the evidence (HISTORY.md's `landed`), and with it left out, side by side in one run.

    python -m bench.evidence [--seconds 30] [--pairs 3] [--first-seed 1] [--interval 2]
                             [--together] [--keep DIR] [--nemesis kill,pause,partition]
                             [--system undertow]

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
its reaped children), their medians and geometric means; what the evidence's own calls
cost directly (their CPU on the nemesis's thread, as a share of the run's CPU, and per
nemesis op); how late the nemesis came against its plan on each side (an observation
that holds the nemesis stretches the fault windows behind it); and the nemesis's time
per verb. A pair where a side made no client op (its run failed) is left out and named.
Writes bench/out/evidence.json; `--keep DIR` keeps the run folders. Two runs of one seed
differ by up to 50 % in ops/s whatever the evidence (leaders move at other moments), so
the direct costs are the figures that resolve a few per cent.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from harness import core
from harness.runfiles import FINAL, NEMESIS, TEST_JSON, read_history, read_test_json
from harness.spec import build_spec
from harness.test import Test, assemble

OUT = Path(__file__).resolve().parent / "out"


class _Unchecked(Test):
    """The run without its checkers: the bench times the clients, not the check."""

    def checkers(self) -> list[Any]:
        return []


# the calls a fault makes for its evidence: (module, name); no_evidence quiets the first
# three (observe_after and read_clocks then have nothing to compare), timed_evidence
# times all of them
OBSERVATIONS = (("nemesis.faults", "observe"), ("nemesis.netfaults", "_link_evidence"),
                ("nemesis.shaping", "time_links"), ("nemesis.faults", "observe_after"),
                ("nemesis.faults", "read_clocks"))


@contextlib.contextmanager
def _patched(stand_ins: Iterable[tuple[str, str, Callable[[Any], Any]]]) -> Iterator[None]:
    """Each (module, name) replaced meanwhile by what its maker makes of the real one."""
    saved = []
    for module, name, make in stand_ins:
        m = importlib.import_module(module)
        real = getattr(m, name)
        saved.append((m, name, real))
        setattr(m, name, make(real))
    try:
        yield
    finally:
        for m, name, real in reversed(saved):
            setattr(m, name, real)


def timed_evidence(spent: dict[str, float]) -> contextlib.AbstractContextManager[None]:
    """Each evidence call's CPU time on its thread (the nemesis's) and its wall time,
    added up in `spent` ("cpu_s", "wall_s"): what the evidence itself costs, beside the
    whole run's CPU. The proxy's side of a probe (a connection or two per link) is not in
    it."""
    def timing(real: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*a: Any, **k: Any) -> Any:
            c0, w0 = time.thread_time(), time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                spent["cpu_s"] = spent.get("cpu_s", 0.0) + time.thread_time() - c0
                spent["wall_s"] = spent.get("wall_s", 0.0) + time.perf_counter() - w0
        return timed

    return _patched((module, name, timing) for module, name in OBSERVATIONS)


def no_evidence() -> contextlib.AbstractContextManager[None]:
    """Every observation a fault makes for its evidence answers "cannot tell" meanwhile."""
    quiet: dict[str, Callable[..., Any]] = {
        "observe": lambda run, nodes: None,
        "_link_evidence": lambda run, pairs, want: {},
        "time_links": lambda run, nodes, budget_s: None}
    def stand_in(name: str) -> Callable[[Any], Any]:
        return lambda real: quiet[name]

    return _patched((module, name, stand_in(name))
                    for module, name in OBSERVATIONS if name in quiet)


def one_run(root: Path, *, system: str, nemesis: str, seconds: float, interval: float,
            seed: int, evidence: bool) -> dict[str, Any]:
    spec = build_spec({"system": system, "nemesis": nemesis.split(","),
                       "nemesis_interval_s": interval, "time_limit_s": seconds,
                       "concurrency": 20, "seed": seed, "results_dir": str(root)})
    test = assemble(spec)
    test = _Unchecked(**{f: getattr(test, f) for f in
                         ("spec", "system", "workload", "nemesis", "backend")})
    spent: dict[str, float] = {}
    with contextlib.ExitStack() as stack:
        stack.enter_context(timed_evidence(spent) if evidence else no_evidence())
        t0, cpu0 = time.monotonic(), cpu_seconds()
        out = core.run_test(test)
        wall, cpu_s = time.monotonic() - t0, cpu_seconds() - cpu0
    got = figures(out.run_dir / "history.jsonl", seconds)
    return {"evidence": evidence, "seed": seed, "run": str(out.run_dir), "wall_s": wall,
            "cpu_s": cpu_s, "cpu_ms_per_op": 1000 * cpu_s / max(got["client_ops"], 1),
            "evidence_cpu_s": spent.get("cpu_s", 0.0), "evidence_wall_s": spent.get("wall_s", 0.0),
            "lateness_ms": lateness(out.run_dir), **got}


def lateness(run_dir: Path) -> dict[str, float] | None:
    """How late the nemesis's invocations came against its plan (test.json's
    `nemesis_plan`), each measured from the first: an observation that holds the nemesis
    delays the steps behind it, and so stretches the fault windows the clients see.
    Median and 90th percentile in ms; None without a plan."""
    test = read_test_json(run_dir / TEST_JSON) or {}
    plan = [float(s["at_s"]) for s in test.get("nemesis_plan") or ()]
    times = [op.time / 1e9 for op in read_history(run_dir / "history.jsonl")
             if op.process == NEMESIS and op.type == "invoke" and not op.extra.get(FINAL)]
    pairs = list(zip(plan, times, strict=False))
    if len(pairs) < 2:
        return None
    a0, t0 = pairs[0]
    late = sorted((t - t0) - (a - a0) for a, t in pairs)
    return {"median": round(1000 * statistics.median(late), 1),
            "p90": round(1000 * late[int(0.9 * (len(late) - 1))], 1)}


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


def _ratios(pairs: list[tuple[dict[str, Any], dict[str, Any]]], key: str) -> dict[str, Any]:
    r = [a[key] / b[key] for a, b in pairs]
    return {"per_seed": [round(x, 3) for x in r], "median": statistics.median(r),
            "geometric_mean": statistics.geometric_mean(r)}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each seed's two sides compared (a pair where a side made no client op is left out
    and named: its run failed, so it says nothing of the evidence), the share of the
    evidence side's CPU that its observations took, and both sides' lateness against the
    plan. Prints what it finds."""
    sides: dict[int, dict[bool, dict[str, Any]]] = {}
    for r in runs:
        sides.setdefault(r["seed"], {})[r["evidence"]] = r
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    left_out: list[dict[str, Any]] = []
    for seed, two in sorted(sides.items()):
        if len(two) == 2 and two[True]["ops"] and two[False]["ops"]:
            pairs.append((two[True], two[False]))
        else:
            left_out.append({"seed": seed, "runs": [r["run"] for r in two.values()]})
    for x in left_out:
        print(f"seed {x['seed']}: a side made no client op (its run failed): left out; "
              f"run folders {', '.join(x['runs'])}")
    out: dict[str, Any] = {"pairs": len(pairs), "left_out": left_out}
    if not pairs:
        return out
    out["ops_per_s"] = _ratios(pairs, "ops_per_s")
    out["cpu_ms_per_op"] = _ratios(pairs, "cpu_ms_per_op")
    out["ops_sum_ratio"] = sum(a["ops"] for a, _ in pairs) / sum(b["ops"] for _, b in pairs)
    out["evidence_cpu_share"] = (sum(a["evidence_cpu_s"] for a, _ in pairs)
                                 / sum(a["cpu_s"] for a, _ in pairs))
    out["evidence_cpu_ms_per_fault"] = (1000 * sum(a["evidence_cpu_s"] for a, _ in pairs)
                                        / max(1, sum(a["nemesis_ops"] for a, _ in pairs)))
    late = {side: [r["lateness_ms"]["median"] for r in (p[i] for p in pairs)
                   if r.get("lateness_ms")] for i, side in ((0, "with"), (1, "without"))}
    out["lateness_median_ms"] = {k: statistics.median(v) if v else None
                                 for k, v in late.items()}
    o, c = out["ops_per_s"], out["cpu_ms_per_op"]
    print(f"{len(pairs)} pairs. Client ops/s with/without evidence, per seed: "
          f"{', '.join(f'{x:.2f}' for x in o['per_seed'])}; median {o['median']:.3f}, "
          f"geometric mean {o['geometric_mean']:.3f}, all ops summed {out['ops_sum_ratio']:.3f}")
    print(f"CPU ms per client op (the whole run: servers, proxy, harness) with/without: "
          f"median {c['median']:.3f}, geometric mean {c['geometric_mean']:.3f}")
    print(f"the evidence's own calls: {100 * out['evidence_cpu_share']:.2f} % of the evidence "
          f"side's CPU ({out['evidence_cpu_ms_per_fault']:.1f} CPU ms per nemesis op); the "
          f"nemesis's lateness against its plan, median of runs' medians: with "
          f"{out['lateness_median_ms']['with']} ms, without "
          f"{out['lateness_median_ms']['without']} ms")
    return out


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
    ap.add_argument("--keep", type=Path, help="keep the run folders here (default: removed)")
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
    with contextlib.ExitStack() as stack:
        d = str(args.keep) if args.keep else stack.enter_context(
            tempfile.TemporaryDirectory(prefix="bench-evidence-"))
        for i in range(args.pairs):
            seed = args.first_seed + i
            for r in pair(args, Path(d), seed, first=i % 2 == 0):
                runs.append(r)
                print(f"seed {seed} evidence {'on ' if r['evidence'] else 'off'}: "
                      f"{r['ops_per_s']:,.0f} client ops/s ({r['ops']:,} ops), "
                      f"{r['nemesis_ops']} nemesis completions, {r['landed']} landed, "
                      f"{r['not_landed']} not landed, {r['cpu_ms_per_op']:.2f} CPU ms per "
                      f"op", flush=True)
    res: dict[str, Any] = {
        "args": {k: str(v) for k, v in vars(args).items()}, "load_before": load_before,
        "load_after": " ".join(Path("/proc/loadavg").read_text().split()[:3]), "runs": runs,
        **summary(runs)}
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
