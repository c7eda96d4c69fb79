"""Every fault against the real local backend: it really happens, and its heal really heals.

Real broker processes, the real link proxy: kill leaves no process, pause leaves a
stopped one, a partition makes the controller fence the cut node, and teardown
(or the final heal) leaves nothing in force. Then Ctrl-C in the middle of a
partition: the harness exits and leaves no process and no state behind.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from harness import core, leftovers
from harness.control.local import LocalBackend
from harness.net import ProxyNet
from harness.protocols import Run
from harness.runfiles import NEMESIS, Op, RunPaths
from harness.spec import build_spec
from nemesis.compose import Composed, compose
from nemesis.faults import Clock, Kill, LoseUnflushed, Pause
from nemesis.netfaults import Links, Partition
from systems.undertow.client import BrokerClient
from systems.undertow.local_db import LocalBrokerDB
from tests.harness.claims import assert_clock_faults_land
from workloads.options import QueueOptions

pytestmark = pytest.mark.slow
T = TypeVar("T")


@pytest.fixture(autouse=True)
def asyncio_proxy(state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here has its own leftovers state (tests/conftest.py) and the asyncio proxy."""
    monkeypatch.setenv("UNDERTOW_PROXY_LOOP", "asyncio")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Run, Composed]]:
    root = tmp_path_factory.mktemp("nemesis-local")
    os.environ.setdefault("UNDERTOW_PROXY_LOOP", "asyncio")
    spec = build_spec({"keys": 4})
    run = Run(spec=spec, nodes=spec.nodes, paths=RunPaths(root / "run"),
              log=logging.getLogger("test"))
    backend = LocalBackend()
    core.cluster_up(backend, run)
    nem = compose(Kill(1), Pause(1), Partition(1), Links(1), Clock(1), LoseUnflushed(1))
    nem.setup(run)
    try:
        yield run, nem
    finally:
        nem.teardown(run)
        core.cluster_down(backend, run)


def wait_for(what: str, pred: Callable[[], bool], timeout_s: float = 20.0) -> None:
    wait_value(what, lambda: True if pred() else None, timeout_s)


def wait_value(what: str, get: Callable[[], T | None], timeout_s: float = 20.0) -> T:
    """The first answer that is not None: the answer waited for, not a later read."""
    deadline = time.monotonic() + timeout_s
    while (got := get()) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return got


def proc_state(db: LocalBrokerDB, node: str) -> str:
    pid = db.procs.pid(node)
    assert pid is not None
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def invoke(run: Run, nem: Composed, f: str, value: object) -> Op:
    out = nem.invoke(run, Op(type="invoke", process=NEMESIS, f=f, value=value))
    assert out.type == "info" and out.process == NEMESIS and out.f == f
    assert out.error is None, out.error
    return out


def db_net(run: Run) -> tuple[LocalBrokerDB, ProxyNet]:
    assert isinstance(run.db, LocalBrokerDB) and isinstance(run.net, ProxyNet)
    return run.db, run.net


def test_kill_of_the_leader_really_kills_and_start_really_starts(
        cluster: tuple[Run, Composed]) -> None:
    run, nem = cluster
    db, _ = db_net(run)
    leader = db.leader_of(run, 2)
    out = invoke(run, nem, "kill", {"target": "leader", "key": 2})
    assert out.value["nodes"] == [leader] and out.value["key"] == 2
    assert not db.is_running(str(leader))
    assert out.extra["landed"] is True and f"{leader}: pid " in out.extra["evidence"]
    assert out.extra["evidence"].endswith(" gone")
    back = invoke(run, nem, "start", {})
    assert back.value["nodes"] == [leader]
    assert back.extra["landed"] is True
    assert back.extra["evidence"] == f"{leader}: new pid {db.procs.pid(str(leader))} serves"
    assert all(db.is_running(n) for n in run.nodes)
    wait_for("the cluster to serve again", lambda: db.leader_of(run, 2) is not None)


def test_pause_really_stops_and_resume_really_continues(cluster: tuple[Run, Composed]) -> None:
    run, nem = cluster
    db, _ = db_net(run)
    out = invoke(run, nem, "pause", {"nodes": ["n3"]})
    assert out.value["nodes"] == ["n3"] and proc_state(db, "n3") == "T"
    threads = len(list(Path(f"/proc/{db.procs.pid('n3')}/task").iterdir()))
    assert out.extra["landed"] is True
    assert out.extra["evidence"] == f"n3: pid {db.procs.pid('n3')}, {threads} of {threads} " \
                                    "threads stopped"
    back = invoke(run, nem, "resume", {})
    assert proc_state(db, "n3") != "T"
    assert back.extra == {"landed": True, "evidence": f"n3: pid {db.procs.pid('n3')} running again"}


def test_faults_that_cannot_land_say_so(cluster: tuple[Run, Composed]) -> None:
    """A kill of a node already down, a pause and a resume of a process that has exited:
    each completion says `"landed": false` and why; the start that ends it lands; a fault
    on two nodes that lands on one of them landed, its evidence naming the miss."""
    run, nem = cluster
    db, _ = db_net(run)
    first = invoke(run, nem, "kill", {"nodes": ["n2"]})
    assert first.extra["landed"] is True
    again = invoke(run, nem, "kill", {"nodes": ["n2"]})
    assert again.extra["landed"] is False
    assert again.extra["evidence"] == "n2: nothing to kill: no live process on n2"
    paused = invoke(run, nem, "pause", {"nodes": ["n2"]})
    assert paused.extra["landed"] is False
    assert paused.extra["evidence"] == "n2: no process to pause: no live process on n2"
    resumed = invoke(run, nem, "resume", {})
    assert resumed.extra["landed"] is False and "no process to resume" in resumed.extra["evidence"]
    back = invoke(run, nem, "start", {})
    assert back.extra["landed"] is True and db.is_running("n2")
    idle = invoke(run, nem, "start", {})  # nothing was down: a heal with nothing to undo
    assert "landed" not in idle.extra
    invoke(run, nem, "kill", {"nodes": ["n2"]})
    unread = invoke(run, nem, "clock-bump", {"nodes": ["n2"], "delta_ns": 10**9})
    assert "landed" not in unread.extra  # a node that is down cannot show its clock
    invoke(run, nem, "clock-reset", {})
    invoke(run, nem, "start", {})
    both = invoke(run, nem, "kill", {"nodes": ["n2", "n3"]})
    invoke(run, nem, "start", {"nodes": ["n2"]})
    half = invoke(run, nem, "kill", {"nodes": ["n3", "n2"]})  # n3 is down already
    assert both.extra["landed"] is True and half.extra["landed"] is True  # on n2, not on n3
    assert half.extra["evidence"].startswith("n3: nothing to kill") and "; n2: pid " in \
        half.extra["evidence"]
    invoke(run, nem, "start", {})
    assert all(db.is_running(n) for n in run.nodes)
    wait_for("the cluster to serve again", lambda: db.leader_of(run, 2) is not None)


def test_partition_really_cuts_and_heal_really_heals(cluster: tuple[Run, Composed]) -> None:
    from systems.undertow.client import admin_metadata

    run, nem = cluster
    db, net = db_net(run)
    ctrl = db.nodes["n1"].listen
    out = invoke(run, nem, "partition", {"kind": "one", "grudge": {"n3": ["n1", "n2"],
                                                                    "n1": ["n3"], "n2": ["n3"]}})
    assert out.value["nodes"] == ["n1", "n2", "n3"] and net.in_force()
    assert out.extra["landed"] is True, out.extra  # the proxy held probes to the brokers' ports
    assert out.extra["evidence"].startswith("n1->n3 dropped (n1->n3 held 0."), out.extra
    wait_for("the controller to fence n3",
             lambda: admin_metadata(ctrl, timeout_s=1)["brokers"]["n3"]["alive"] is False)
    healed = invoke(run, nem, "heal", {})
    assert healed.extra["landed"] is True, healed.extra
    assert healed.extra["evidence"].startswith("n1->n3 flowing (n1->n3 connected in ")
    assert net.in_force() == []
    wait_for("n3 alive again",
             lambda: admin_metadata(ctrl, timeout_s=1)["brokers"]["n3"]["alive"] is True)


def test_followers_partition_cuts_leader_from_followers_only(
        cluster: tuple[Run, Composed]) -> None:
    run, nem = cluster
    db, net = db_net(run)
    leader = db.leader_of(run, 1)
    out = invoke(run, nem, "partition", {"kind": "followers", "key": 1, "as": "F",
                                         "leader_as": "L", "cut_clients": True})
    grudge = out.value["grudge"]
    assert sorted(grudge[leader]) == sorted(n for n in run.nodes if n != leader)
    assert grudge["client"] == [leader] and "client" not in out.value["nodes"]
    assert any("client" in x for x in net.in_force())
    assert run.extra["nemesis_roles"]["L"] == (leader,)
    invoke(run, nem, "heal", {})
    assert net.in_force() == []


def test_leader_answers_cut_drops_answers_while_writes_happen(
        cluster: tuple[Run, Composed]) -> None:
    from systems.undertow.client import ClientError

    run, nem = cluster
    db, net = db_net(run)
    # its connection to the leader is up before the cut; that first write may wait on a
    # busy machine (it once missed a 2 s bound in a whole-suite run at load 13), and the
    # leader is asked for after it: a busy cluster had none to name just before
    cut = BrokerClient(run.client_addrs, timeout_s=60)

    def first_write() -> int | None:  # again on a reset connection (seen at load 30)
        try:
            return cut.produce(2, 7_000_000)
        except ClientError:
            return None

    wait_value("a first write to key 2", first_write, timeout_s=60)
    leader = wait_value("key 2's leader", lambda: db.leader_of(run, 2))
    cut.timeout_s = cut.request_timeout_s = 2.0  # the unanswered write need not wait long
    try:
        out = invoke(run, nem, "partition", {"kind": "leader-answers", "key": 2, "as": "L"})
        assert out.value["grudge"] == {"client": [leader]}
        assert run.extra["nemesis_roles"]["L"] == (leader,)
        with pytest.raises(ClientError) as e:
            cut.produce(2, 7_000_001)
        assert not e.value.definite  # the request went through, its answer did not
    finally:
        cut.close()
        invoke(run, nem, "heal", {})  # a failure here leaves the next test no cut
    assert net.in_force() == []
    cl = BrokerClient(run.client_addrs, timeout_s=5)
    try:
        wait_for("the unanswered write committed",
                 lambda: 7_000_001 in [v for _o, v in cl.fetch(2, 0)])
    finally:
        cl.close()


def test_links_clock_and_lose_unflushed_and_their_heals(cluster: tuple[Run, Composed]) -> None:
    run, nem = cluster
    db, net = db_net(run)
    slow = invoke(run, nem, "slow", {"nodes": ["n2"], "delay_ms": 50, "jitter_ms": 0})
    assert slow.extra["landed"] is True and slow.extra["evidence"].endswith(" of 50 asked")
    lossy = invoke(run, nem, "lossy", {"nodes": ["n3"], "drop_probability": 0.3})
    assert lossy.extra["landed"] is True, lossy.extra
    assert any("slow n2" in x for x in net.in_force())
    assert any("lossy n3" in x for x in net.in_force())
    fast = invoke(run, nem, "fast", {})
    assert fast.extra["landed"] is True, fast.extra
    assert net.in_force() == []
    # read back within the reading's own uncertainty: "+2.998 s ... (±0.003 s)" at load
    assert_clock_faults_land(lambda f, v: invoke(run, nem, f, v), slack_s=0.001)
    assert all(db.clock_offset_ns(n) == 0 for n in run.nodes)  # the reset's files
    cl = BrokerClient(run.client_addrs, timeout_s=10)
    try:  # on every replica, n3's too, and in no file's flushed part yet
        for v in range(3):
            cl.produce(1, 8_000_000 + v, acks="all")
    finally:
        cl.close()
    out = invoke(run, nem, "lose-unflushed", {"nodes": ["n3"]})
    assert out.value["nodes"] == ["n3"] and db.is_running("n3")
    assert out.extra["landed"] is True
    cut = re.search(r" gone; n3: ([\d,]+) B cut from \d+ files? \((.+?)\); n3: new pid ",
                    out.extra["evidence"])
    assert cut is not None, out.extra["evidence"]
    assert int(cut[1].replace(",", "")) > 0 and "/" in cut[2] and ".log " in cut[2], cut[0]


def test_teardown_heals_every_fault_at_once(cluster: tuple[Run, Composed]) -> None:
    run, nem = cluster
    db, net = db_net(run)
    invoke(run, nem, "kill", {"nodes": ["n2"]})
    invoke(run, nem, "pause", {"nodes": ["n3"]})
    invoke(run, nem, "partition", {"kind": "halves"})
    invoke(run, nem, "slow", {"nodes": ["n1"]})
    invoke(run, nem, "clock-bump", {"nodes": ["n1"], "delta_ns": -10**9})
    assert not db.is_running("n2") and proc_state(db, "n3") == "T" and net.in_force()
    nem.teardown(run)
    assert all(db.is_running(n) for n in run.nodes)
    assert proc_state(db, "n3") != "T"
    assert net.in_force() == []
    assert all(db.clock_offset_ns(n) == 0 for n in run.nodes)
    wait_for("every partition to have a leader",
             lambda: all(db.leader_of(run, k) for k in range(QueueOptions.of(run.spec).keys)))


def test_a_fault_on_the_controller_records_the_controller_elected_after_it(
        cluster: tuple[Run, Composed]) -> None:
    run, nem = cluster
    done = nem.invoke(run, Op("invoke", NEMESIS, "kill", {"target": "controller"}))
    try:
        old = done.value["controller"]
        assert done.value["nodes"] == [old] and done.error is None
        assert done.value["new_controller"] not in (None, old), done.value
        assert run.db.controller(run) == done.value["new_controller"]  # type: ignore[union-attr]
    finally:
        nem.invoke(run, Op("invoke", NEMESIS, "start", {}))
    from systems.undertow.client import ClientError, admin_metadata

    def answers() -> bool:
        try:
            return bool(admin_metadata(db_net(run)[0].nodes[old].listen, timeout_s=1))
        except ClientError:
            return False

    wait_for("the restarted controller to answer", answers)
    assert "new_controller" not in nem.invoke(
        run, Op("invoke", NEMESIS, "pause", {"nodes": ["n2"]})).value
    nem.invoke(run, Op("invoke", NEMESIS, "resume", {}))


def test_a_fault_on_the_controller_with_role_wait_s_0_does_not_wait_for_the_move(
        cluster: tuple[Run, Composed]) -> None:
    """A timed plan's step (systems/kafka/hunts.py) asks for no wait: the controller is
    looked up once, before the cluster could notice the pause, so none has moved yet
    (with the default wait, the test above sees the new one)."""
    run, nem = cluster
    done = nem.invoke(run, Op("invoke", NEMESIS, "pause",
                              {"target": "controller", "role_wait_s": 0}))
    try:
        assert done.error is None and done.value["nodes"] == [done.value["controller"]]
        assert done.value["new_controller"] is None, done.value
    finally:
        nem.invoke(run, Op("invoke", NEMESIS, "resume", {}))


def test_ctrl_c_in_the_middle_of_a_partition_leaves_nothing(tmp_path: Path, state: Path) -> None:
    results = tmp_path / "results"
    env = {**os.environ, leftovers.STATE_ENV: str(state), "UNDERTOW_PROXY_LOOP": "asyncio"}
    cmd = [sys.executable, "-m", "harness.cli", "run", "--nemesis", "partition",
           "--nemesis-interval", "1", "--time-limit", "60", "--keys", "2", "--concurrency", "2",
           "--seed", "5", "--results-dir", str(results)]
    harness = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def partitioned() -> bool:
            hist = list(results.glob("*/*/history.jsonl"))
            if not hist:
                return False
            ops = [json.loads(x) for x in hist[0].read_text().splitlines() if x.strip()]
            nem = [o for o in ops if o["process"] == NEMESIS and o["type"] == "info"]
            return bool(nem) and nem[-1]["f"] == "partition"

        wait_for("a partition in force", partitioned, timeout_s=90)
        pids = [json.loads(p.read_text()).get("pid") for p in state.glob("*/process-*.json")]
        assert pids
        harness.send_signal(signal.SIGINT)
        harness.wait(timeout=120)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    assert not any(state.glob("*/*.json")), "the run left state behind"
    assert leftovers.heal_all(force=True) == []
