"""Real 3-node clusters started as documented (python -m broker --config NODE.json)."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from broker.localcluster import LocalCluster, request

from systems.undertow.client import BrokerClient, ClientError, admin_dump, admin_request
from tests.broker.producers import Producers, read_all

pytestmark = pytest.mark.slow

SAFE = {"min.insync.replicas": 2, "truncation": "leader-epoch",
        "unclean.leader.election.enable": False, "replica.lag.time.max.ms": 2000,
        "broker.session.timeout.ms": 1500}


@pytest.mark.parametrize("event_loop", ["auto", "asyncio"])
def test_three_nodes_take_acks_all_writes_and_serve_them_back(
        make_cluster: Callable[..., LocalCluster], event_loop: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_EVENT_LOOP", event_loop)  # uvloop when installed, and without
    c = make_cluster(settings=SAFE)
    c.start_all()
    c.wait_ready(15)
    cl = BrokerClient(c.addrs, timeout_s=10)
    try:
        sent: dict[int, list[tuple[int, int]]] = {}
        for v in range(240):
            off = cl.produce(v % 8, v, acks="all")
            assert off is not None
            sent.setdefault(v % 8, []).append((off, v))
        for key, recs in sent.items():
            assert cl.fetch(key, 0, max_records=1000) == recs
            assert cl.end_offset(key) == len(recs)
        meta = cl.metadata()
        assert set(meta["brokers"]) == {"n1", "n2", "n3"}
        assert all(len(p["isr"]) == 3 for p in meta["partitions"].values())
    finally:
        cl.close()
    # every replica holds the same committed log (the dump has replicas.jsonl's shape)
    logs: dict[tuple[str, int], dict[int, int]] = {}
    for n in c.nodes:
        for row in admin_dump(c.addrs[n]):
            if "offset" in row:
                logs.setdefault((n, row["key"]), {})[row["offset"]] = row["value"]
    for key, recs in sent.items():
        for n in c.nodes:
            assert logs[(n, key)] == dict(recs)


def test_localcluster_command_starts_three_nodes(tmp_path: Path) -> None:
    """The documented one-command start: python -m broker.localcluster --nodes 3."""
    proc = subprocess.Popen([sys.executable, "-m", "broker.localcluster", "--nodes", "3",
                             "--dir", str(tmp_path / "c3"), "--setting",
                             "min.insync.replicas=2"], stdout=subprocess.PIPE, text=True)
    pids: dict[str, int] = {}
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        pids = ready["pids"]
        assert ready["ready"] and set(ready["addrs"]) == {"n1", "n2", "n3"}
        cl = BrokerClient(ready["addrs"], timeout_s=10)
        try:
            assert cl.produce(3, 33, acks="all") == 0
            assert cl.fetch(3, 0) == [(0, 33)]
        finally:
            cl.close()
        proc.terminate()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in pids.values():  # only our own broker processes, should any be left
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if str(tmp_path).encode() in cmdline:
                os.kill(pid, signal.SIGKILL)


def full_isr(c: LocalCluster) -> bool:
    m = c.metadata("n2")
    return all(p["leader"] and len(p["isr"]) == 3 for p in m["partitions"].values())


def all_committed(c: LocalCluster) -> bool:
    leaders = 0
    for n in c.nodes:
        for p in c.metadata(n)["local"].values():
            if p["role"] == "leader":
                leaders += 1
                if p["hw"] != p["leo"]:
                    return False
    return leaders == 8


def test_killing_and_restarting_any_broker_loses_no_acknowledged_write(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(settings=SAFE)
    c.start_all()
    c.wait_ready(15)
    with Producers(c.addrs) as prod:
        for victim in ("n2", "n3", "n1"):   # n1 is also the controller
            time.sleep(0.7)
            c.kill(victim)
            time.sleep(2.0)
            c.start(victim)
            c.wait(lambda: full_isr(c), 30, f"isr full after restarting {victim}")
        time.sleep(0.5)
    assert prod.count() > 50, (prod.count(), prod.errors)
    # a new leader's HW moves once its followers fetch from it: let it settle
    c.wait(lambda: all_committed(c), 15, "every leader's hw at its leo")
    lost = prod.lost(read_all(c.addrs, prod.keys))
    assert lost == {}, f"acknowledged writes lost, e.g. {lost}"


def raw(addr: str, payload: bytes, timeout_s: float = 3.0) -> bytes:
    host, _, port = addr.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks)


def frames(data: bytes) -> list[dict[str, Any]]:
    out = []
    while len(data) >= 4:
        (n,) = struct.unpack(">I", data[:4])
        out.append(json.loads(data[4:4 + n]))
        data = data[4 + n:]
    return out


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def test_bad_input_gets_errors_and_never_takes_the_node_down(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(nodes=("n1",), replication_factor=1, partitions=2)
    c.start_all()
    c.wait_ready(15)
    addr = c.addrs["n1"]
    bad = [b"not json", b"[1,2]", b'{"id": 1}', b'{"id": 2, "type": "nope"}',
           b'{"id": 3, "type": "produce", "partition": "x", "value": 1, "acks": "all", '
           b'"timeout_ms": 10}',
           b'{"id": 4, "type": "produce", "partition": 0, "value": 1, "acks": "2", '
           b'"timeout_ms": 10}',
           b'{"id": 5, "type": "fetch", "partition": 99, "offset": 0, "max_records": 1}',
           b'{"id": 6, "type": "replica_fetch", "node": "n1", "partitions": [["a"]], '
           b'"max_wait_ms": 0}',
           b'{"id": 7, "type": "test_fence", "node": "n1"}', b"\xff\xfe", b"{" * 5000]
    replies = frames(raw(addr, b"".join(frame(b) for b in bad)))
    assert len(replies) == len(bad)
    assert all(r["error"] for r in replies)
    codes = {r["id"]: r["error"] for r in replies}
    assert codes[2] == "UNSUPPORTED" and codes[3] == "INVALID_REQUEST"
    assert codes[5] == "UNKNOWN_PARTITION" and codes[7] == "DISABLED"
    # an oversized frame: an error, then the connection is closed
    over = frames(raw(addr, struct.pack(">I", 50 << 20) + b"x" * 100))
    assert over and over[0]["error"] == "INVALID_REQUEST"
    # a truncated frame and a reset connection
    raw(addr, struct.pack(">I", 100) + b"{")
    s = socket.create_connection(tuple(addr.rsplit(":", 1)))  # type: ignore[arg-type]
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.sendall(frame(b'{"id": 1, "type": "metadata"'))
    s.close()
    # random frames: garbage bytes and mutated valid requests, on one connection
    rng = random.Random(7)
    valid = [b'{"id": 1, "type": "produce", "partition": 0, "value": 5, "acks": "1", '
             b'"timeout_ms": 100}', b'{"id": 2, "type": "fetch", "partition": 1, "offset": 0, '
             b'"max_records": 5}', b'{"id": 3, "type": "replica_fetch", "node": "n1", '
             b'"partitions": [[0, 1, 0]], "max_wait_ms": 0}', b'{"id": 4, "type": "metadata"}']
    blobs = []
    for _ in range(300):
        if rng.random() < 0.3:
            blobs.append(rng.randbytes(rng.randint(0, 64)))
        else:
            b = bytearray(rng.choice(valid))
            for _m in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            blobs.append(bytes(b))
    replies = frames(raw(addr, b"".join(frame(b) for b in blobs), timeout_s=10))
    assert len(replies) == len(blobs)
    assert request(addr, {"type": "metadata"})["node"] == "n1"
    assert c.procs["n1"].poll() is None


def test_offline_tools_dump_and_lose_unflushed(make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(nodes=("n1",), replication_factor=1, partitions=2,
                     settings={"flush.messages": 3})
    c.start_all()
    c.wait_ready(15)
    cl = BrokerClient(c.addrs, timeout_s=5)
    for v in range(7):
        cl.produce(0, v, acks="1")
    cl.close()
    online = admin_dump(c.addrs["n1"])
    c.kill("n1")
    py = [sys.executable, "-m", "broker.tools"]
    dd = str(c.data_dir("n1"))
    out = subprocess.run([*py, "dump", "--data-dir", dd, "--node", "n1"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    offline = [json.loads(line) for line in out.splitlines()]
    key = lambda r: (r["key"], r.get("offset", -1))  # noqa: E731
    strip = [{k: v for k, v in r.items() if k != "hw"} for r in sorted(online, key=key)]
    assert [{k: v for k, v in r.items() if k != "hw"} for r in sorted(offline, key=key)] == strip
    out = subprocess.run([*py, "lose-unflushed", "--data-dir", dd], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    done = json.loads(out)
    assert done["dropped"] == 1   # 7 records, flushed every 3: 6 are durable
    (cut_file, cut_bytes), = done["cut_bytes"].items()  # the one record's bytes, one file
    assert cut_file.endswith(".log") and (c.data_dir("n1") / cut_file).is_file()
    assert 0 < cut_bytes < (c.data_dir("n1") / cut_file).stat().st_size / 5
    c.start("n1")
    c.wait_ready(15)
    cl = BrokerClient(c.addrs, timeout_s=5)
    try:
        assert [v for _o, v in cl.fetch(0, 0)] == list(range(6))
    finally:
        cl.close()


def test_isr_shrinks_when_followers_lag_and_grows_back(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(partitions=1, settings={**SAFE, "replica.lag.time.max.ms": 400,
                                             "test.controls.enable": True})
    c.start_all()
    c.wait_ready(15)
    for n in ("n2", "n3"):
        admin_request(c.addrs[n], {"type": "test_fetcher", "action": "pause"})

    def isr() -> list[str]:
        members: list[str] = c.metadata("n1")["partitions"]["0"]["isr"]
        return members

    c.wait(lambda: isr() == ["n1"], 10, "isr shrunk to the leader")
    cl = BrokerClient(c.addrs, timeout_s=2)
    try:
        with pytest.raises(ClientError) as e:
            cl.produce(0, 1, acks="all")
        assert e.value.code == "NOT_ENOUGH_REPLICAS" and e.value.definite
        assert cl.produce(0, 2, acks="1") == 0     # min ISR only guards acks=all
        for n in ("n2", "n3"):
            admin_request(c.addrs[n], {"type": "test_fetcher", "action": "resume"})
        c.wait(lambda: isr() == ["n1", "n2", "n3"], 10, "isr grown back")
        assert cl.produce(0, 3, acks="all") == 1
    finally:
        cl.close()


def test_emulated_os_writeback_limits_lose_unflushed_to_the_recent_tail(
        make_cluster: Callable[..., LocalCluster]) -> None:
    c = make_cluster(nodes=("n1",), replication_factor=1, partitions=1,
                     settings={"os.dirty.expire.ms": 2000})
    c.start_all()
    c.wait_ready(15)
    cl = BrokerClient(c.addrs, timeout_s=5)
    for v in range(5):
        cl.produce(0, v, acks="1")
    time.sleep(3.0)                      # older than os.dirty.expire.ms: written back
    for v in range(5, 7):
        cl.produce(0, v, acks="1")
    cl.close()
    c.kill("n1")                         # the last two are still dirty
    out = subprocess.run([sys.executable, "-m", "broker.tools", "lose-unflushed", "--data-dir",
                          str(c.data_dir("n1"))], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    done = json.loads(out)
    assert done["dropped"] == 2 and len(done["cut_bytes"]) == 1


def test_a_node_that_cannot_bind_its_port_is_named_at_once(
        make_cluster: Callable[..., LocalCluster]) -> None:
    """A port taken between the pick and the node's start is a node that exited, said
    with its log, not a cluster that is slow to become ready (or another process that
    answers on that port)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    c = make_cluster(partitions=1)
    ports = [int(a.rpartition(":")[2]) for a in c.addrs.values()]
    assert len(set(ports)) == 3 and all(10_000 <= p < low for p in ports)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", ports[1]))
        squatter.listen()
        c.start_all()
        exited = r"^n2 exited with 1: (?s:.*)[Aa]ddress already in use"
        with pytest.raises(RuntimeError, match=exited):
            c.wait_ready(30)  # not a TimeoutError
