"""The local backend with real brokers: up/down, kill, pause, partition, dump, heal."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness import core, leftovers
from harness.backends import make_backend
from harness.control.local import LocalBackend
from harness.net import ProxyNet
from harness.protocols import (
    DumpsReplicas,
    HasClock,
    HasLeaders,
    HasLogs,
    Killable,
    LosesUnflushed,
    Pausable,
    Run,
    complete_grudge,
)
from harness.runfiles import RunPaths
from harness.spec import build_spec
from systems.undertow.local_db import LocalBrokerDB
from workloads.options import partitions

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("state")]


def make_run(root: Path, **spec: object) -> Run:
    s = build_spec({"keys": 4, **spec})
    return Run(spec=s, nodes=s.nodes, paths=RunPaths(root), log=logging.getLogger("test"))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Run, LocalBackend]]:
    run = make_run(tmp_path / "run")
    backend = LocalBackend()
    core.cluster_up(backend, run)
    yield run, backend
    core.cluster_down(backend, run)


def wait_for(what: str, pred: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def refused(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=0.5).close()
    except OSError:
        return True
    return False


def proc_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def db_of(run: Run) -> LocalBrokerDB:
    assert isinstance(run.db, LocalBrokerDB)
    return run.db


def test_up_writes_configs_and_serves_clients_through_the_proxy(
        cluster: tuple[Run, LocalBackend]) -> None:
    from systems.undertow.client import BrokerClient

    run, backend = cluster
    db = db_of(run)
    for ability in (Killable, Pausable, HasLogs, HasLeaders, HasClock, LosesUnflushed,
                    DumpsReplicas):
        assert isinstance(db, ability)
    admin = dict(db.admin_addrs(live_only=False))
    assert backend.proxy is not None
    for n in run.nodes:
        cfg = json.loads((run.paths.node_dir(n) / "NODE.json").read_text())
        assert cfg["node_id"] == n and cfg["listen"] == admin[n]
        assert cfg["peers"][n] == admin[n]  # itself: direct
        for m in run.nodes:
            if m != n:
                assert cfg["peers"][m] == backend.proxy.link(n, m).listen
        assert cfg["topic"]["partitions"] == partitions(run.spec)  # the key pool
        assert cfg["settings"]["min.insync.replicas"] == 2
        assert run.client_addrs[n] == backend.proxy.link("client", n).listen
    client = BrokerClient(run.client_addrs, timeout_s=5)
    try:
        offsets = [client.produce(k % 4, k) for k in range(20)]
        assert all(o is not None for o in offsets)
        got = client.fetch(1, 0)
        assert [v for _, v in got] == [1, 5, 9, 13, 17]
    finally:
        client.close()
    assert db.leader_of(run, 0) in run.nodes
    assert db.controller(run) == "n1"
    rows = db.dump_replicas(run)
    assert {r["node"] for r in rows} == set(run.nodes)


def test_kill_start_pause_resume_are_real(cluster: tuple[Run, LocalBackend]) -> None:
    from systems.undertow.client import BrokerClient, admin_metadata

    run, _ = cluster
    db = db_of(run)
    node = db.nodes["n3"]
    pid = db.procs.pid("n3") or -1
    db.pause(run, "n3")
    assert proc_state(pid) == "T"
    with pytest.raises(Exception):  # noqa: B017 - any failure to answer
        admin_metadata(node.listen, timeout_s=0.5)
    db.resume(run, "n3")
    assert proc_state(pid) != "T"

    def answers() -> bool:
        try:
            return bool(admin_metadata(node.listen, timeout_s=2)["node"] == "n3")
        except Exception:
            return False

    wait_for("n3 to answer after resume", answers)

    client = BrokerClient(run.client_addrs, timeout_s=5)
    try:
        client.produce(0, 111)
    finally:
        client.close()
    db.kill(run, "n3")
    assert not db.is_running("n3")
    assert not leftovers.same_process(pid, leftovers.proc_start_time(pid))
    assert refused(node.listen)
    db.kill(run, "n3")  # idempotent
    offline = db.dump_node(run, "n3")  # from the data dir while down
    with pytest.raises(RuntimeError, match="kill it first"):
        db.lose_unflushed(run, "n1")
    db.lose_unflushed(run, "n3")
    db.start(run, "n3")
    db.start(run, "n3")  # idempotent
    assert db.procs.pid("n3") not in (None, pid)
    wait_for("n3 to answer again", lambda: not refused(node.listen))
    wait_for("n3 to dump live", lambda: bool(db.dump_node(run, "n3")) or not offline)
    db.shift_clock(run, "n2", 5_000_000_000)
    db.shift_clock(run, "n2", -1_000_000_000)
    assert (run.paths.node_dir("n2") / "clock_offset_ns").read_text().strip() == "4000000000"
    db.reset_clock(run, "n2")
    assert db.clock_offset_ns("n2") == 0


def test_a_partition_really_cuts_brokers_apart(cluster: tuple[Run, LocalBackend]) -> None:
    from systems.undertow.client import admin_metadata

    run, _ = cluster
    db = db_of(run)
    net = run.net
    assert isinstance(net, ProxyNet)
    # Cut n3 off from n1 (the controller) and n2: the controller must see n3 dead,
    # and move the leadership of n3's partitions away.
    net.partition(run, complete_grudge([{"n1", "n2"}, {"n3"}]))
    assert net.in_force()
    ctrl = db.nodes["n1"].listen

    def n3_fenced() -> bool:
        meta = admin_metadata(ctrl, timeout_s=1)
        alive = meta["brokers"].get("n3", {}).get("alive")
        leaders = {p["leader"] for p in meta["partitions"].values()}
        return alive is False and "n3" not in leaders

    wait_for("the controller to fence n3", n3_fenced)
    net.heal(run)
    assert net.in_force() == []
    wait_for("n3 back alive", lambda: admin_metadata(ctrl, timeout_s=1)["brokers"]["n3"]["alive"]
             is True)


def test_down_leaves_no_process_port_thread_or_state(tmp_path: Path, state: Path) -> None:
    threads = threading.active_count()
    run = make_run(tmp_path / "run")
    backend = make_backend(run.spec)
    assert isinstance(backend, LocalBackend)
    core.cluster_up(backend, run)
    db = db_of(run)
    pids = {n: db.procs.pid(n) or -1 for n in db.nodes}
    starts = {n: leftovers.proc_start_time(p) for n, p in pids.items()}
    assert backend.proxy is not None
    addrs = [li.listen for li in backend.proxy.links()] + list(backend.listen.values())
    items = list((state / run.extra["run_id"]).glob("process-*.json"))
    assert len(items) == 4  # 3 brokers + the proxy
    db.pause(run, "n2")  # down resumes before it kills
    core.cluster_down(backend, run)
    core.cluster_down(backend, run)  # idempotent, never raises
    for n, pid in pids.items():
        assert not leftovers.same_process(pid, starts[n])
    assert all(refused(a) for a in addrs)
    assert threading.active_count() == threads
    assert not (state / run.extra["run_id"]).exists()
    assert (run.paths.node_dir("n1") / "broker.log").stat().st_size > 0


def test_failed_start_says_why_and_cleans_up(tmp_path: Path, state: Path) -> None:
    run = make_run(tmp_path / "run")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "broker").mkdir()
    (tmp_path / "bad" / "broker" / "__init__.py").write_text("")
    (tmp_path / "bad" / "broker" / "__main__.py").write_text("raise SystemExit('no broker')\n")
    backend = LocalBackend()
    backend.python = sys.executable
    os.environ["PYTHONPATH"] = str(tmp_path / "bad")
    try:
        with pytest.raises(RuntimeError, match=r"broker n\d exited with code 1"):
            core.cluster_up(backend, run)
    finally:
        del os.environ["PYTHONPATH"]
    assert backend.proxy is not None and refused(backend.proxy.links()[0].listen)
    assert not any(state.glob("*/process-*.json"))


HARNESS = textwrap.dedent("""
    import logging, sys, time
    from pathlib import Path
    from harness.spec import build_spec
    from harness.protocols import Run
    from harness.runfiles import RunPaths
    from harness import core
    from harness.control.local import LocalBackend
    spec = build_spec({"keys": 2})
    run = Run(spec=spec, nodes=spec.nodes, paths=RunPaths(Path(sys.argv[1])),
              log=logging.getLogger("h"))
    b = LocalBackend()
    db = core.cluster_up(b, run)
    print(" ".join(f"{n}={db.procs.pid(n)}" for n in db.nodes), flush=True)
    print(" ".join(li.listen for li in b.proxy.links()), flush=True)
    time.sleep(120)
""")


def test_sigkill_of_the_harness_leaves_nothing_after_heal(tmp_path: Path, state: Path) -> None:
    env = {**os.environ, leftovers.STATE_ENV: str(state)}
    harness = subprocess.Popen([sys.executable, "-c", HARNESS, str(tmp_path / "run")], env=env,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert harness.stdout is not None
        pids = {n: int(p) for n, p in (x.split("=") for x in harness.stdout.readline().split())}
        proxied = harness.stdout.readline().split()
        starts = {n: leftovers.proc_start_time(p) for n, p in pids.items()}
        assert len(pids) == 3 and all(starts.values())
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    # PDEATHSIG alone kills the brokers when the harness dies ...
    wait_for("the brokers to die with their harness", lambda: not any(
        leftovers.same_process(pid, starts[n]) for n, pid in pids.items()), timeout_s=10)
    # ... and the proxy process too (it is signalled at the same moment, exits a little later)
    wait_for("the link proxy to die with its harness",
             lambda: all(refused(a) for a in proxied), timeout_s=10)
    # ... and heal finds their records and clears them.
    done = leftovers.heal_all()
    assert sum("already gone" in x for x in done) == 4, done  # + the proxy
    assert not any(state.iterdir())
    assert leftovers.heal_all() == []


def test_children_are_started_with_no_python_between_fork_and_exec() -> None:
    """PDEATHSIG comes from setpriv: a preexec_fn can deadlock in a harness with other
    threads (a JVM's, with Kafka's Java client), and did when a kill's restart forked."""
    from harness.control.launcher import die_with_parent, setpriv

    argv, preexec = die_with_parent(["true"])
    path = setpriv()
    assert path is not None and argv == [path, "--pdeathsig", "KILL", "--", "true"]
    assert preexec is None
    assert subprocess.run(argv).returncode == 0


def test_without_setpriv_a_preexec_fn_ties_the_child_to_the_thread_that_forked_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback where setpriv lacks --pdeathsig: the child dies when the forking thread
    ends, and one whose harness is already gone exits before it runs anything."""
    from harness.control import launcher

    monkeypatch.setattr(launcher, "setpriv", lambda: None)
    argv, preexec = launcher.die_with_parent(["sleep", "60"])
    assert argv == ["sleep", "60"] and preexec is not None
    started: list[subprocess.Popen[bytes]] = []
    forker = threading.Thread(target=lambda: started.append(
        subprocess.Popen(argv, preexec_fn=preexec)))
    forker.start()
    forker.join()
    assert started[0].wait(timeout=30) == -signal.SIGKILL
    orphan = launcher._die_with_parent(os.getpid() + 4_000_000)  # not this child's parent
    assert subprocess.Popen(["sleep", "60"], preexec_fn=orphan).wait(timeout=30) == 1
