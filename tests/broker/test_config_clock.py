"""NODE.json validation and the shiftable clock."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from broker.clock import Clock
from broker.config import ConfigError, parse_config
from broker.localcluster import LocalCluster, request

BASE: dict[str, Any] = {"node_id": "n1", "listen": "127.0.0.1:9001", "data_dir": "/tmp/x",
                        "peers": {"n1": "127.0.0.1:9001", "n2": "127.0.0.1:9002"},
                        "topic": {"partitions": 2, "replication_factor": 2}}


def test_contract_example_parses_with_kafka_names() -> None:
    cfg = parse_config({**BASE, "process_roles": ["broker", "controller"],
                        "controller_quorum_voters": ["n1"],
                        "settings": {"min.insync.replicas": 2, "truncation": "hw",
                                     "unclean.leader.election.enable": True,
                                     "flush.messages": None, "flush.ms": None,
                                     "replica.lag.time.max.ms": 2000,
                                     "broker.session.timeout.ms": 2000,
                                     "default.replication.factor": 2}})
    assert cfg.is_controller and cfg.is_broker and cfg.brokers == ("n1", "n2")
    assert cfg.settings.truncation == "hw" and cfg.settings.unclean_leader_election
    assert cfg.settings.min_insync_replicas == 2 and cfg.settings.flush_messages is None


@pytest.mark.parametrize(("patch", "needle"), [
    ({"listen": "nowhere"}, "listen"),
    ({"peers": {"n2": "127.0.0.1:1"}}, "peers"),
    ({"settings": {"truncation": "sometimes"}}, "truncation"),
    ({"settings": {"min.insync.replicas": 0}}, "min.insync.replicas"),
    ({"settings": {"unclean.leader.election.enable": "yes"}}, "unclean"),
    ({"topic": {"partitions": 0}}, "partitions"),
    ({"topic": {"replication_factor": 3}}, "replication_factor"),
    ({"controller_quorum_voters": ["n9"]}, "controller_quorum_voters"),
    ({"process_roles": ["zookeeper"]}, "process_roles"),
])
def test_bad_config_names_the_key(patch: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_config({**BASE, **patch})


def test_clock_adds_the_file_offset_and_rereads_it(tmp_path: Path) -> None:
    f = tmp_path / "clock_offset_ns"
    clock = Clock(str(f))
    assert abs(clock.now_ns() - time.time_ns()) < 1_000_000_000
    f.write_text(str(3600 * 10**9))
    os.utime(f, ns=(1, 1))  # a new mtime, whatever the filesystem's resolution
    time.sleep(0.15)
    assert clock.now_ns() - time.time_ns() > 3599 * 10**9
    assert clock.offset_ns == 3600 * 10**9
    f.write_text("garbage")
    os.utime(f, ns=(2, 2))
    time.sleep(0.15)
    assert clock.offset_ns == 3600 * 10**9   # a half-written file keeps the last good offset
    f.unlink()
    time.sleep(0.15)
    clock.now_ns()
    assert clock.offset_ns == 0


def test_the_clock_request_answers_the_time_the_node_acts_on(
        make_cluster: Callable[..., LocalCluster]) -> None:
    """The admin `clock` request: a clock fault's evidence, read back from the node."""
    c = make_cluster(nodes=("n1",), replication_factor=1, partitions=1)
    c.start("n1")
    c.wait(lambda: c.metadata("n1"), what="n1 answering")
    first = request(c.addrs["n1"], {"type": "clock"}, 2.0)
    assert first["offset_ns"] == 0 and abs(first["now_ns"] - time.time_ns()) < 10**9
    f = c.base / "n1" / "clock_offset_ns"
    f.write_text(str(-7200 * 10**9))
    os.utime(f, ns=(5, 5))
    time.sleep(0.15)  # re-read at most every 100 ms
    shifted = request(c.addrs["n1"], {"type": "clock"}, 2.0)
    assert shifted["offset_ns"] == -7200 * 10**9
    assert abs(shifted["now_ns"] - time.time_ns() + 7200 * 10**9) < 10**9
