"""The kill steps of kafka-kip101-*: A dies just after an acknowledged send on the key
(by its own shutdown in the divergence sequence), and the second kill hits the newly
elected leader or, when none is seen, nobody.

A fake DB (leaders scripted per call, kills recorded) and a history written by the
test; no cluster."""

from __future__ import annotations

import logging
import random
import threading
import time
from pathlib import Path
from typing import cast

import pytest

from harness.protocols import DB, Run
from harness.runfiles import (
    NEMESIS,
    HistoryWriter,
    Op,
    RunPaths,
    last_acked_send,
    recent_send_counts,
)
from harness.spec import build_spec
from nemesis import faults
from nemesis.faults import Kill, NemesisError
from systems.kafka.kip101 import (
    BACK_S,
    ELECTION_WAIT_S,
    kafka_kip101_divergence,
    kafka_kip101_loss,
)


class FakeDB:
    """Leaders of every key from a script (the last answer repeats); kills recorded."""

    def __init__(self, leaders: list[str | None]) -> None:
        self.leaders = leaders
        self.asked = 0
        self.killed: list[str] = []

    def leader_of(self, run: Run, key: int) -> str | None:
        self.asked += 1
        return self.leaders[min(self.asked, len(self.leaders)) - 1]

    def controller(self, run: Run) -> str | None:
        return None

    def kill(self, run: Run, node: str) -> None:
        self.killed.append(node)

    def start(self, run: Run, node: str) -> None:
        pass


class StoppingDB(FakeDB):
    """FakeDB whose nodes can also be asked to shut down (recorded apart from kills)."""

    def __init__(self, leaders: list[str | None]) -> None:
        super().__init__(leaders)
        self.stopped: list[str] = []

    def stop(self, run: Run, node: str) -> None:
        self.stopped.append(node)


def _run(tmp_path: Path, db: FakeDB) -> Run:
    spec = build_spec({"keys": 2, "node_count": 4})
    run = Run(spec=spec, nodes=spec.nodes, paths=RunPaths(tmp_path), log=logging.getLogger("t"),
              db=cast(DB, db))
    run.extra["nemesis_roles"] = {"A": ("n1",), "F": ("n2", "n3")}
    run.extra["nemesis_keys"] = {"F": 1}
    return run


def _second_kill(wait_s: float) -> Op:
    return Op("invoke", NEMESIS, "kill", {"target": "leader", "key_of": "F", "as": "L2",
                                          "leader_not": "A", "wait_s": wait_s})


def test_the_second_kill_hits_the_leader_elected_after_a(tmp_path: Path) -> None:
    db = FakeDB(["n1", "n1", None, "n3"])
    run = _run(tmp_path, db)
    done = Kill().setup(run).invoke(run, _second_kill(5.0))
    assert db.killed == ["n3"]
    assert done.value["nodes"] == ["n3"] and done.value["key"] == 1
    assert "missed" not in done.value and done.extra.get("landed") is not False
    assert run.extra["nemesis_roles"]["L2"] == ("n3",)


def test_no_new_leader_seen_kills_nobody_and_says_it_did_not_land(tmp_path: Path) -> None:
    db = FakeDB(["n1"])  # A is still reported leader: the election was not seen
    run = _run(tmp_path, db)
    kill = Kill().setup(run)
    t0 = time.monotonic()
    done = kill.invoke(run, _second_kill(0.3))
    assert time.monotonic() - t0 >= 0.3
    assert db.killed == []  # never A again
    assert done.value["nodes"] == []
    assert done.extra["landed"] is False
    assert "no leader of key 1 other than n1 within 0.3 s" in done.extra["evidence"]
    assert run.extra["nemesis_roles"]["L2"] == ()
    healed = kill.invoke(run, Op("invoke", NEMESIS, "start", {"role": "L2"}))
    assert healed.value["nodes"] == []  # L2's restart starts nobody


def test_a_graceful_kill_asks_the_node_to_shut_down(tmp_path: Path) -> None:
    db = StoppingDB(["n1"])
    run = _run(tmp_path, db)
    done = Kill().setup(run).invoke(run, Op("invoke", NEMESIS, "kill",
                                            {"role": "A", "graceful": True}))
    assert db.stopped == ["n1"] and db.killed == []
    assert done.value["nodes"] == ["n1"] and done.value["graceful"] is True
    Kill().setup(run).invoke(run, Op("invoke", NEMESIS, "kill", {"role": "A"}))
    assert db.killed == ["n1"] and db.stopped == ["n1"]


def test_a_graceful_kill_of_nodes_that_cannot_shut_down_is_refused(tmp_path: Path) -> None:
    db = FakeDB(["n1"])
    run = _run(tmp_path, db)
    with pytest.raises(NemesisError, match="cannot ask a node to shut down"):
        Kill().setup(run).invoke(run, Op("invoke", NEMESIS, "kill",
                                         {"role": "A", "graceful": True}))
    assert db.killed == []


def _send(hw: HistoryWriter, process: int, key: int, value: int, offset: int) -> None:
    hw.append(Op("invoke", process, "send", [["send", key, value]]))
    hw.append(Op("ok", process, "send", [["send", key, [offset, value]]]))


def test_last_acked_send_is_the_newest_ok_send_on_the_key(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    assert last_acked_send(path, 1) is None
    with HistoryWriter(path) as hw:
        _send(hw, 0, 1, 10, 0)  # indices 0, 1
        _send(hw, 1, 0, 11, 0)  # 2, 3
        hw.append(Op("invoke", 2, "send", [["send", 1, 12]]))  # 4: not acknowledged
        hw.append(Op("info", 2, "send", [["send", 1, 12]]))  # 5: nor is this
    assert last_acked_send(path, 1) == 1
    assert last_acked_send(path, 0) == 3
    assert last_acked_send(path, 5) is None


def test_a_fresh_key_is_the_live_key_that_entered_last(tmp_path: Path) -> None:
    db = FakeDB(["n1"])
    run = _run(tmp_path, db)
    with HistoryWriter(run.paths.history) as hw:
        for i in range(30):  # key 7 written alone, then keys 7 and 9 alternately
            hw.append(Op("invoke", 0, "send", [["send", 7, i]]))
        for i in range(10):
            hw.append(Op("invoke", 0, "send", [["send", 9 if i % 2 else 7, 100 + i]]))
    assert recent_send_counts(run.paths.history) == {7: 35, 9: 5}
    for seed in range(5):
        value: dict[str, object] = {"key": "fresh", "as": "F"}
        assert faults.resolve_key(run, value, random.Random(seed)) == 9
    assert run.extra["nemesis_keys"]["F"] == 9
    assert {faults.resolve_key(run, {"key": "live"}, random.Random(s)) for s in range(20)} \
        == {7, 9}


def _kill_a() -> Op:
    return Op("invoke", NEMESIS, "kill", {"role": "A", "key_of": "F", "await_ack_s": 2.0})


def test_a_is_killed_just_after_a_new_acknowledged_send_on_the_key(tmp_path: Path) -> None:
    db = FakeDB(["n1"])
    run = _run(tmp_path, db)
    hw = HistoryWriter(run.paths.history)
    _send(hw, 0, 1, 1, 0)  # acknowledged before the step began: not fresh
    kill = Kill().setup(run)
    killed_after: list[int] = []

    def writer() -> None:
        time.sleep(0.2)
        _send(hw, 1, 0, 2, 0)  # another key: not it
        time.sleep(0.1)
        _send(hw, 0, 1, 3, 1)
        killed_after.append(len(db.killed))

    th = threading.Thread(target=writer)
    th.start()
    done = kill.invoke(run, _kill_a())
    th.join()
    hw.close()
    assert killed_after == [0]  # the kill waited for the ack on key 1
    assert db.killed == ["n1"]
    assert done.value["acked"] is True and done.value["key"] == 1
    assert 0.25 <= done.value["ack_wait_s"] < 2.0


def test_with_no_acknowledged_send_a_is_killed_after_the_wait(tmp_path: Path) -> None:
    db = FakeDB(["n1"])
    run = _run(tmp_path, db)
    with HistoryWriter(run.paths.history) as hw:
        _send(hw, 0, 1, 1, 0)
    op = Op("invoke", NEMESIS, "kill", {"role": "A", "key_of": "F", "await_ack_s": 0.2})
    done = Kill().setup(run).invoke(run, op)
    assert db.killed == ["n1"]
    assert done.value["acked"] is False and done.value["ack_wait_s"] >= 0.2


def test_the_sequences_wait_for_the_ack_and_restart_after_the_longest_election() -> None:
    for build in (kafka_kip101_loss, kafka_kip101_divergence):
        steps = build(10.0, random.Random(1))
        kill_a = next(s for s in steps if s.f == "kill" and s.value.get("role") == "A")
        assert kill_a.value["key_of"] == "F" and kill_a.value["await_ack_s"] > 0
        assert steps[0].value["key"] == "fresh" and steps[0].value["as"] == "F"
        kill_l2 = next(s for s in steps if s.f == "kill" and s.value.get("as") == "L2")
        assert kill_l2.value["wait_s"] == ELECTION_WAIT_S
        back = min(s.at_s for s in steps if s.f == "start")
        assert back - kill_l2.at_s >= ELECTION_WAIT_S and back == 10.0 + BACK_S
        # the divergence needs A's last high watermark on disk: only its own shutdown
        assert kill_a.value.get("graceful", False) is (build is kafka_kip101_divergence)
    assert faults.ACK_POLL_S < 0.05


class IsrDB(FakeDB):
    """FakeDB with metadata: key 9's ISR is short, key 7's full."""

    def metadata(self) -> dict[str, object]:
        return {"partitions": {"7": {"leader": "n1", "replicas": ["n1", "n2", "n3"],
                                     "isr": ["n1", "n2", "n3"]},
                               "9": {"leader": "n1", "replicas": ["n1", "n2", "n3"],
                                     "isr": ["n1"]}}}


def test_a_fresh_key_with_a_full_isr_is_preferred(tmp_path: Path) -> None:
    """The divergence sequence's key must be able to elect a clean new leader: a live key
    whose ISR an earlier fault left short is passed over while another is full."""
    run = _run(tmp_path, IsrDB(["n1"]))
    with HistoryWriter(run.paths.history) as hw:
        for i in range(30):  # key 7 written long, key 9 fresh
            hw.append(Op("invoke", 0, "send", [["send", 7, i]]))
        for i in range(10):
            hw.append(Op("invoke", 0, "send", [["send", 9 if i % 2 else 7, 100 + i]]))
    for seed in range(5):
        assert faults.resolve_key(run, {"key": "fresh"}, random.Random(seed)) == 9
        assert faults.resolve_key(run, {"key": "fresh", "full_isr": True},
                                  random.Random(seed)) == 7
    # only the divergence sequence asks for it (the loss sequence's runs were measured)
    apart = {build: build(10.0, random.Random(1))[0].value
             for build in (kafka_kip101_loss, kafka_kip101_divergence)}
    assert apart[kafka_kip101_divergence]["full_isr"] is True
    assert "full_isr" not in apart[kafka_kip101_loss]
