"""`run(spec)`: one whole experiment, from an empty folder to a verdict.

store -> backend up -> clients + nemesis under the generator (time limit) ->
the nemesis's final heal -> wait for the cluster -> final reads -> replicas
dumped to replicas.jsonl -> logs collected -> backend down (always, in a
finally, also on SIGINT) -> checkers -> report. A report that fails to render
is logged and the verdict kept. On SIGINT/SIGTERM, whenever it comes, the run
stops within a bounded time, heals, tears the cluster down, skips or stops the
check, and results.json says it was interrupted and in which phase (see Stopper).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from harness import generator as g
from harness import store
from harness.interpreter import Interpreter, Stats, client_node
from harness.protocols import Backend, DumpsReplicas, Nemesis, Run
from harness.runfiles import (
    EXIT_INTERRUPTED,
    RESULTS_JSON,
    HistoryError,
    HistoryWriter,
    exit_code,
    read_jsonl,
    write_jsonl,
    write_results,
)
from harness.spec import SpecError, TestSpec

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
        return f"{head}: {anomalies}{stalled}; {where}{err}"


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


def _nemesis_package(spec: TestSpec) -> Any:
    if not spec.nemesis:
        if spec.nemesis_plan:
            raise SpecError("nemesis_plan: a plan to replay needs the faults that inject it "
                            "(`nemesis`, e.g. [\"kill\", \"partition\"])")
        return None
    from nemesis.packages import nemesis_package

    return nemesis_package(spec)


def _workload(spec: TestSpec) -> Any:
    if spec.workload != "queue":
        raise SpecError(f"--workload: {spec.workload!r} is not known (known: queue)")
    from workloads.queue import workload

    return workload(spec)


def _wait_ready(backend: Backend, run: Run, timeout_s: float) -> None:
    waiter: Callable[[Run, float], None] | None = getattr(backend, "wait_ready", None)
    if waiter is not None:
        waiter(run, timeout_s)
        return
    from harness import db

    addrs = run.extra.get("admin_addrs") or run.client_addrs
    db.wait_ready(addrs, timeout_s, partitions=run.spec.keys)


def _check(run_dir: Path, spec: TestSpec, log: Any) -> tuple[dict[str, Any], str | None]:
    try:
        from checkers.api import check_run

        return check_run(run_dir, spark_master=spec.spark_master), None
    except HistoryError as e:
        log.error("the history the harness wrote breaks the contract: %s", e)
        return {"valid": "unknown", "error": str(e)}, f"bad history: {e}"
    except Exception as e:
        log.exception("checking failed")
        return {"valid": "unknown", "error": repr(e)}, f"check failed: {e!r}"


def _add_liveness(run_dir: Path, results: dict[str, Any], log: Any) -> None:
    """Put how fast the cluster served again after each heal into results.json's stats.

    The checkers judge safety from the run files alone; liveness is the harness's own
    measurement, so it is added here and never changes the verdict.
    """
    from nemesis.liveness import liveness

    try:
        ops = read_jsonl(run_dir / "history.jsonl")
        results.setdefault("stats", {})["liveness"] = liveness(ops)
        if (run_dir / RESULTS_JSON).exists():
            write_results(run_dir, results)
    except Exception:
        log.exception("measuring liveness failed (the verdict stands)")


def _render(run_dir: Path, log: Any) -> Path | None:
    try:
        from harness.report.render import render_run

        return render_run(run_dir)
    except Exception:
        log.exception("rendering the report failed (the verdict stands)")
        return None


def _drive(spec: TestSpec, run: Run, backend: Backend, history: HistoryWriter,
           wl: Any, pkg: Any, stopper: Stopper, watch: Watch) -> None:
    """Everything between backend up and backend down."""
    log = run.log
    watch.phase = "cluster up"
    backend.up(run)
    if stopper.requested.is_set():
        return
    nem: Nemesis | None = pkg.nemesis.setup(run) if pkg is not None else None
    interp = Interpreter(run, history, concurrency=spec.concurrency,
                         open_client=lambda t: wl.client.open(run, client_node(run.nodes, t)),
                         nemesis=nem, seed=spec.seed, stats=watch.stats)
    stopper.interp = interp
    if stopper.requested.is_set():
        interp.stop()
    try:
        try:
            watch.phase, watch.main_started_s = "running", time.monotonic()
            main = g.clients_and_nemesis(wl.generator, pkg.generator if pkg else None)
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
        if not interp.stopped:
            watch.phase = "waiting for the cluster"
            try:
                _wait_ready(backend, run, WAIT_READY_AFTER_HEAL_S)
            except Exception as e:  # final reads still try, and record what they get
                log.warning("cluster not ready after the final heal: %s", e)
            watch.phase = "final reads"
            log.info("final reads")
            interp.run(g.clients(wl.final_generator(run.paths.history)))
    finally:
        interp.close()
        history.close()
    watch.phase = "dumping replicas"
    if isinstance(run.db, DumpsReplicas):
        try:
            n = write_jsonl(run.paths.replicas, iter(run.db.dump_replicas(run)))
            log.info("replicas.jsonl: %d rows", n)
        except Exception:
            log.exception("dumping replicas failed")
    watch.phase = "collecting"
    try:
        backend.collect(run)
    except Exception:
        log.exception("collecting node files failed")


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


def check_startable(spec: TestSpec) -> tuple[Any, Any, Backend]:
    """The workload, nemesis package and backend of spec, made without starting anything.

    Every SpecError a run can meet is raised here, before a folder, process or rule exists.
    """
    spec.validate()
    from harness.backends import make_backend

    return _workload(spec), _nemesis_package(spec), make_backend(spec)


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
    wl, pkg, backend = check_startable(spec)
    watch = watch or Watch()
    watch.time_limit_s = spec.time_limit_s
    stopper.watch = watch
    stored = store.create_run(spec)
    try:
        return _run_stored(spec, stored, backend, wl, pkg, stopper, watch)
    finally:
        stored.close()


def _run_stored(spec: TestSpec, stored: store.StoredRun, backend: Backend, wl: Any, pkg: Any,
                stopper: Stopper, watch: Watch) -> Outcome:
    watch.run_dir = stored.paths.root
    log = stored.log
    log.info("seed %d; spec %s", spec.seed, spec)
    plan = pkg.plan_json() if pkg is not None and hasattr(pkg, "plan_json") else []
    phases = (getattr(pkg, "schedule", None) or {}).get("phases")
    store.write_test_json(stored.paths, spec, run_id=stored.run_id, nemesis_plan=plan,
                          **({"nemesis_phases": phases} if phases else {}))
    if stopper.requested.is_set():
        return _interrupted(stored, stopper.phase, None)
    run_ = Run(spec=spec, nodes=spec.nodes, paths=stored.paths, log=log)
    history = HistoryWriter(stored.paths.history)
    error: str | None = None
    try:
        with stopper.mode_of("stop"):
            _drive(spec, run_, backend, history, wl, pkg, stopper, watch)
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
            backend.down(run_)
    if stopper.requested.is_set():
        return _interrupted(stored, stopper.phase, error)
    if error is not None:
        res: dict[str, Any] = {"valid": "unknown", "error": error}
        return Outcome(stored.paths.root, "unknown", res, None, False, error)
    try:
        with stopper.mode_of("raise"):
            watch.phase = "checking"
            results, check_error = _check(stored.paths.root, spec, log)
            _add_liveness(stored.paths.root, results, log)
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
    log.info("verdict %s: %s", valid, results.get("counts"))
    return Outcome(stored.paths.root, valid, results, report, False, check_error)
