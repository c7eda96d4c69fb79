"""The active controller isolated through the local backend's link proxy (3 voters).

The majority elects a new controller (higher quorum epoch), the DB's controller() lookup
(asking every node, highest epoch wins) names it although the isolated node still answers
admin requests, the old one resigns (check quorum), partitions get leaders on the majority
side, acks=all writes succeed; after the heal the old controller follows the new one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import core
from harness.control.local import LocalBackend
from harness.net import ProxyNet
from harness.protocols import Run, complete_grudge
from harness.runfiles import RunPaths
from harness.spec import build_spec
from systems.undertow.admin import controller_voters, default_voter_count
from systems.undertow.local_db import LocalBrokerDB

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("state")]


def wait_for(what: str, pred: Callable[[], object], timeout_s: float = 20.0) -> object:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got = pred()
            if got:
                return got
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_default_quorum_sizes() -> None:
    assert [default_voter_count(n) for n in (1, 2, 3, 4, 5, 7)] == [1, 1, 3, 3, 5, 5]
    spec = build_spec({"keys": 2, "node_count": 5})
    assert controller_voters(spec) == list(spec.nodes)
    assert len(controller_voters(build_spec({"keys": 2, "node_count": 4}))) == 3
    assert controller_voters(build_spec({"keys": 2, "extra": {"controller_voters": 1}})) == [
        "n1"]
    with pytest.raises(ValueError, match="not nodes"):
        controller_voters(build_spec({"keys": 2, "extra": {"controller_voters": ["zz"]}}))


def test_isolating_the_active_controller_fails_over(tmp_path: Path) -> None:
    from systems.undertow.client import BrokerClient, admin_metadata

    spec = build_spec({"keys": 4, "key_pool": 4})  # four partitions: failover, not rotation
    run = Run(spec=spec, nodes=spec.nodes, paths=RunPaths(tmp_path / "run"),
              log=logging.getLogger("test"))
    backend = LocalBackend()
    core.cluster_up(backend, run)
    try:
        db = run.db
        net = run.net
        assert isinstance(db, LocalBrokerDB) and isinstance(net, ProxyNet)
        assert len(controller_voters(spec)) == 3
        old = db.controller(run)
        assert old in run.nodes
        old_epoch = admin_metadata(db.nodes[old].listen)["quorum"]["epoch"]
        others = [n for n in run.nodes if n != old]
        net.partition(run, complete_grudge([{old}, set(others)]))

        def new_controller() -> str | None:
            c = db.controller(run)
            if c is None or c == old:
                return None
            epoch = admin_metadata(db.nodes[c].listen, timeout_s=1)["quorum"]["epoch"]
            return c if epoch > old_epoch else None

        new = wait_for("a new controller on the majority side", new_controller)
        assert new in others
        # the cut-off controller stops acting as one (check quorum), though it still answers
        wait_for(f"{old} resigns", lambda: admin_metadata(
            db.nodes[old].listen, timeout_s=1)["quorum"]["role"] != "leader")
        assert db.controller(run) == new

        def leaders_on_majority() -> bool:
            # and each ISR back to min.insync.replicas (the majority's follower catches up)
            parts = admin_metadata(db.nodes[new].listen, timeout_s=1)["partitions"]
            return all(p["leader"] in others and len(p["isr"]) >= 2 for p in parts.values())

        wait_for("every partition led on the majority side with an ISR of 2",
                 leaders_on_majority)
        client = BrokerClient({n: run.client_addrs[n] for n in others}, timeout_s=10)
        try:
            for k in range(4):
                assert client.produce(k, 100 + k, acks="all") is not None
        finally:
            client.close()
        # cut off for several election timeouts (1-2 s each), the old controller keeps asking
        # for pre-votes; it must rejoin at the new epoch, not depose the new controller
        time.sleep(6)
        net.heal(run)
        wait_for(f"{old} follows {new}", lambda: admin_metadata(
            db.nodes[old].listen, timeout_s=1)["quorum"]["leader"] == new)
        assert db.controller(run) == new
    finally:
        core.cluster_down(backend, run)
