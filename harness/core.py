"""`run(spec)`: one whole experiment, from an empty folder to a verdict.

assemble the Test (harness.test; spec errors surface here, before anything
exists) -> store -> backend up (nodes) -> the system set up on each node ->
links wired -> ready -> clients + nemesis under the workload's generator (time
limit; checkers that can prepare, `Prepares`, start their slow parts in the
background meanwhile, and those that watch the history, `WatchesHistory`, see each op
as it is written) -> the nemesis's final heal -> wait for the system -> the workload's
final reads (history.jsonl is complete: checkers that can, `ReadsHistoryEarly`, start
reading it) -> replicas dumped to replicas.jsonl -> node files collected ->
system torn down and backend down (always, in a finally, also on SIGINT) ->
the Test's checkers -> report. The runner names no system and no workload.
A report that fails to render is logged and the verdict kept. On SIGINT/SIGTERM,
whenever it comes, the run stops within a bounded time, heals, tears the cluster
down, skips or stops the check, and results.json says it was interrupted and in
which phase (see Stopper).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

from harness import checking, store
from harness import generator as g
from harness.interpreter import Interpreter, Stats, client_node
from harness.protocols import (
    DB,
    Backend,
    Checker,
    DumpsReplicas,
    HasLogs,
    Nemesis,
    Prepares,
    ReadsHistoryEarly,
    Run,
    WatchesHistory,
)
from harness.runfiles import (
    EXIT_INTERRUPTED,
    HistoryWriter,
    exit_code,
    write_jsonl,
    write_results,
)
from harness.spec import TestSpec
from harness.test import Test, assemble

READY_TIMEOUT_S = 60.0
WAIT_READY_AFTER_HEAL_S = 30.0


@dataclass
class Watch:
    """What the terminal shows while a run goes on; core writes it, the CLI reads it."""

    stats: Stats = field(default_factory=Stats)
    phase: str = "starting"
    run_dir: Path | None = None
    started_s: float = field(default_factory=time.monotonic)
    main_started_s: float | None = None
    time_limit_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """The end of one run: its folder, verdict and what went wrong, if anything."""

    run_dir: Path
    valid: bool | str  # True, False or "unknown"
    results: dict[str, Any]
    report: Path | None
    interrupted: bool = False
    error: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_INTERRUPTED if self.interrupted else exit_code(self.valid)

    def summary(self) -> str:
        """The one line a person reads at the end."""
        if self.interrupted:
            head = "INTERRUPTED (not checked)"
        else:
            head = "VALID" if self.valid is True else "INVALID" if self.valid is False \
                else "UNKNOWN"
        counts = self.results.get("counts") or {}
        anomalies = ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "no anomalies"
        where = f"run {self.run_dir}"
        if self.report is not None:
            where += f" report {self.report}"
        err = f" ({self.error})" if self.error else ""
        live = (self.results.get("stats") or {}).get("liveness") or {}
        stalled = "" if live.get("ok", True) else \
            f"; LIVENESS: {len(live.get('stalled', []))} heal(s) with no success for " \
            f"{live.get('stall_s')} s after"
        why = self.results.get("unknown_reason")
        unlanded = f"; UNKNOWN because {why}" if why else ""
        return f"{head}: {anomalies}{stalled}{unlanded}{_outages(self.results)}; {where}{err}"


def _outages(results: dict[str, Any]) -> str:
    """The longest stretches with no successful send and poll, and the longest a key
    waited for a poll returning its records (an empty ok poll serves no key), from
    results.json's `availability`, beside the verdict: safety and availability apart,
    both in view."""
    av = results.get("availability") or {}
    longest = av.get("longest_without_ok") or {}
    parts = [f"no ok {f} for {g['s']:.1f} s ({g['from_s']:.1f}-{g['to_s']:.1f})"
             for f, g in longest.items() if isinstance(g, dict) and g.get("s", 0) >= 1.0]
    w = av.get("poll_by_key_worst")
    if isinstance(w, dict) and w.get("s", 0) >= 1.0:
        parts.append(f"key {w.get('key')} unread for {w['s']:.1f} s "
                     f"({w['from_s']:.1f}-{w['to_s']:.1f})")
    return f"; availability: longest {', '.join(parts)}" if parts else ""


class Stopper:
    """SIGINT/SIGTERM from the first moment of a command to its last.

    `mode` says what a signal does where the run is: "note" (nothing to stop yet, or
    tearing down: it is only noted, the run ends interrupted at the next check),
    "stop" (cluster up: the first asks the run to stop and heal, a second one
    interrupts at once) and "raise" (checking and reporting: nothing to undo, so it
    interrupts at once). Either way the run ends on the interrupted path.
    """

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.interp: Interpreter | None = None
        self.mode = "note"
        self.watch: Watch | None = None
        self.phase = ""  # the run's phase when the first signal came
        self._old: dict[signal.Signals, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = not self.requested.is_set()
        if first:
            self.phase = self.watch.phase if self.watch is not None else "starting"
        self.requested.set()
        if self.mode == "raise" or (self.mode == "stop" and not first):
            raise KeyboardInterrupt
        if self.mode == "stop" and self.interp is not None:
            self.interp.stop()

    @contextlib.contextmanager
    def installed(self) -> Iterator[Stopper]:
        """Handle the signals in this block (main thread only; elsewhere a no-op)."""
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.signal(s, self._handle)
        try:
            yield self
        finally:
            for s, h in self._old.items():
                signal.signal(s, h)
            self._old.clear()

    def reinstall(self) -> None:
        """Take the signals back from whoever replaced the handler meanwhile."""
        for s in self._old:
            signal.signal(s, self._handle)

    @contextlib.contextmanager
    def mode_of(self, mode: str) -> Iterator[None]:
        old, self.mode = self.mode, mode
        try:
            yield
        finally:
            self.mode = old


def _render(run_dir: Path, log: Any) -> Path | None:
    try:
        from harness.report.render import render_run

        return render_run(run_dir)
    except Exception:
        log.exception("rendering the report failed (the verdict stands)")
        return None


def _each_node(run: Run, what: str, fn: Callable[[str], None]) -> None:
    """fn on every node, in parallel (a slow node does not hold the others up)."""
    with ThreadPoolExecutor(max_workers=max(1, len(run.nodes)),
                            thread_name_prefix=f"undertow-{what}") as pool:
        for f in [pool.submit(fn, n) for n in run.nodes]:
            f.result()


def _start_system(test: Test, run: Run, ready: Callable[[], bool]) -> DB:
    """Nodes made by the backend, the system set up on each, links wired, then ready
    (unless `ready()` says not to wait: the run is being interrupted)."""
    host = test.backend.up(run, test.system)
    db = run.db = test.system.db(test, host)
    _each_node(run, "setup", lambda n: db.setup(run, n))
    test.backend.connect(run)
    if ready():
        db.wait_ready(run, READY_TIMEOUT_S)
    return db


def cluster_up(backend: Backend, run: Run) -> DB:
    """run.spec's system started on backend's nodes and ready, outside a whole run (tests,
    benchmarks); on failure everything is torn down again. cluster_down undoes it."""
    test = replace(assemble(run.spec), backend=backend)
    try:
        return _start_system(test, run, lambda: True)
    except BaseException:
        cluster_down(backend, run)
        raise


def cluster_down(backend: Backend, run: Run) -> None:
    """The system torn down on every node, then the backend's nodes; never raises."""
    _stop_system(run, run.db)
    backend.down(run)


def _stop_system(run: Run, db: DB | None) -> None:
    """Every node's teardown; never raises (what fails is logged, `undertow heal` remains)."""
    if db is None:
        return
    for n in run.nodes:
        try:
            db.teardown(run, n)
        except Exception:
            run.log.exception("teardown of %s failed", n)


def _drive(test: Test, run: Run, history: HistoryWriter, stopper: Stopper,
           watch: Watch, checkers: Sequence[Checker]) -> None:
    """Everything between the nodes coming up and going down; the checkers that can
    prepare start doing so as the workload begins."""
    spec, log, pkg, wl = test.spec, run.log, test.nemesis, test.workload
    watch.phase = "cluster up"
    db = _start_system(test, run, lambda: not stopper.requested.is_set())
    if stopper.requested.is_set():
        return
    client = test.system.client(test)
    nem: Nemesis | None = pkg.nemesis.setup(run) if pkg is not None else None
    interp = Interpreter(run, history, concurrency=spec.concurrency,
                         open_client=lambda t: client.open(run, client_node(run.nodes, t)),
                         nemesis=nem, seed=spec.seed, stats=watch.stats)
    stopper.interp = interp
    if stopper.requested.is_set():
        interp.stop()
    try:
        try:
            watch.phase, watch.main_started_s = "running", time.monotonic()
            for c in checkers:
                if isinstance(c, Prepares):
                    c.prepare(spec)
            main = g.clients_and_nemesis(wl.generator(test), pkg.generator if pkg else None)
            interp.run(g.time_limit(spec.time_limit_s, main))
            if pkg is not None and not interp.stopped:
                watch.phase = "final heal"
                interp.run(g.nemesis(pkg.final_generator))
        finally:
            if nem is not None:
                watch.phase = "healing"
                try:
                    nem.teardown(run)
                except Exception:
                    log.exception("nemesis teardown failed")
        final = wl.final_generator(test, run.paths.history)
        if not interp.stopped and final is not None:
            watch.phase = "waiting for the cluster"
            try:
                db.wait_ready(run, WAIT_READY_AFTER_HEAL_S)
            except Exception as e:  # final reads still try, and record what they get
                log.warning("cluster not ready after the final heal: %s", e)
            watch.phase = "final reads"
            log.info("final reads")
            interp.run(g.clients(final))
    finally:
        interp.close()
        history.close()
    if not stopper.requested.is_set():
        for c in checkers:
            if isinstance(c, ReadsHistoryEarly):
                c.history_written(run.paths.history)
    watch.phase = "dumping replicas"
    if isinstance(db, DumpsReplicas):
        try:
            n = write_jsonl(run.paths.replicas, iter(db.dump_replicas(run)))
            log.info("replicas.jsonl: %d rows", n)
        except Exception:
            log.exception("dumping replicas failed")
    watch.phase = "collecting"
    if isinstance(db, HasLogs):
        for node in run.nodes:
            try:
                db.collect(run, node, run.paths.node_dir(node))
            except Exception:
                log.exception("collecting the files of %s failed", node)


def _running(pid: int) -> bool:
    import os

    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:  # reaped elsewhere
        return False


def _end_children(log: Any, grace_s: float = 5.0) -> None:
    """End what this process still has running: an interrupted check can leave the Spark
    JVM it was launching (it holds our stdout and never exits by itself)."""
    import os

    me = str(os.getpid())
    children: list[int] = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and (p / "stat").read_text().rsplit(") ", 1)[1].split()[1] == me:
                children.append(int(p.name))
        except (OSError, IndexError):
            continue
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                alive.append(pid)
        deadline = time.monotonic() + grace_s
        while alive and time.monotonic() < deadline:
            alive = [pid for pid in alive if _running(pid)]
            time.sleep(0.05)
        if not alive:
            return
        log.warning("children %s did not end on %s", alive, sig.name)
        children = alive


def check_startable(spec: TestSpec) -> Test:
    """The Test of spec, assembled without starting anything.

    Every SpecError a run can meet is raised here, before a folder, process or rule exists.
    """
    return assemble(spec)


def _interrupted(stored: store.StoredRun, phase: str, error: str | None) -> Outcome:
    """results.json saying the run was interrupted (and in which phase), and its Outcome."""
    res: dict[str, Any] = {"valid": "unknown", "interrupted": True, "interrupted_during": phase,
                           "error": error or f"interrupted during {phase}"}
    write_results(stored.paths.root, res)
    stored.log.warning("interrupted during %s", phase)
    return Outcome(stored.paths.root, "unknown", res, None, True, error)


def run(spec: TestSpec, *, watch: Watch | None = None, stopper: Stopper | None = None) -> Outcome:
    """One run of spec; see the module docstring. Raises SpecError before starting.

    `stopper`: one the caller installed earlier (the CLI does, at its first moment);
    else the run installs its own.
    """
    if stopper is None:
        stopper = Stopper()
        with stopper.installed():
            return run(spec, watch=watch, stopper=stopper)
    return run_test(check_startable(spec), watch=watch, stopper=stopper)


def run_test(test: Test, *, watch: Watch | None = None,
             stopper: Stopper | None = None) -> Outcome:
    """One run of an assembled Test; see the module docstring."""
    if stopper is None:
        stopper = Stopper()
        with stopper.installed():
            return run_test(test, watch=watch, stopper=stopper)
    spec = test.spec
    watch = watch or Watch()
    watch.time_limit_s = spec.time_limit_s
    stopper.watch = watch
    stored = store.create_run(spec)
    try:
        return _run_stored(test, stored, stopper, watch)
    finally:
        stored.close()


def _run_stored(test: Test, stored: store.StoredRun, stopper: Stopper,
                watch: Watch) -> Outcome:
    spec = test.spec
    watch.run_dir = stored.paths.root
    log = stored.log
    log.info("seed %d; spec %s", spec.seed, spec)
    pkg = test.nemesis
    phases = pkg.phases() if pkg is not None else None
    store.write_test_json(stored.paths, spec, run_id=stored.run_id,
                          nemesis_plan=pkg.plan_json() if pkg is not None else [],
                          fault_kinds=pkg.kinds_json() if pkg is not None else [],
                          system_info=dict(test.system.describe(spec)),
                          **({"nemesis_phases": phases} if phases else {}))
    if stopper.requested.is_set():
        return _interrupted(stored, stopper.phase, None)
    checkers = test.checkers()
    try:
        return _run_and_check(test, stored, stopper, watch, checkers)
    finally:
        with stopper.mode_of("note"):
            for c in checkers:
                if isinstance(c, Prepares):
                    c.release()


def _run_and_check(test: Test, stored: store.StoredRun, stopper: Stopper, watch: Watch,
                   checkers: Sequence[Checker]) -> Outcome:
    spec, log = test.spec, stored.log
    run_ = Run(spec=spec, nodes=spec.nodes, paths=stored.paths, log=log,
               fault_kinds=tuple(test.nemesis.kinds) if test.nemesis is not None else ())
    history = HistoryWriter(stored.paths.history,
                            observers=[c.watch(stored.paths.history) for c in checkers
                                       if isinstance(c, WatchesHistory)])
    error: str | None = None
    try:
        with stopper.mode_of("stop"):
            _drive(test, run_, history, stopper, watch, checkers)
    except KeyboardInterrupt:
        stopper.requested.set()
        log.warning("interrupted twice: tearing down at once")
    except Exception as e:
        log.exception("the run failed")
        error = f"{type(e).__name__}: {e}"
    finally:
        with stopper.mode_of("note"):
            watch.phase = "cluster down"
            history.close()
            _stop_system(run_, run_.db)
            test.backend.down(run_)
    if stopper.requested.is_set():
        return _interrupted(stored, stopper.phase, error)
    if error is not None:
        res: dict[str, Any] = {"valid": "unknown", "error": error}
        return Outcome(stored.paths.root, "unknown", res, None, False, error)
    try:
        with stopper.mode_of("raise"):
            watch.phase = "checking"
            log.info("checking")
            results = checking.check(checkers, stored.paths.root, spec, log)
            log.info("verdict %s: %s", results.get("valid", "unknown"), results.get("counts"))
            watch.phase = "report"
            report = _render(stored.paths.root, log)
    except KeyboardInterrupt:
        stopper.requested.set()
        _end_children(log)
        return _interrupted(stored, stopper.phase or watch.phase, None)
    finally:
        stopper.reinstall()  # pyspark puts its own SIGINT handler in place of ours
    if stopper.requested.is_set():  # a signal the check swallowed
        return _interrupted(stored, stopper.phase, None)
    valid = results.get("valid", "unknown")
    check_error = results.get("error")
    return Outcome(stored.paths.root, valid, results, report, False,
                   str(check_error) if check_error else None)

