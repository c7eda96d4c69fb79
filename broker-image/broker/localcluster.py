"""Start N broker processes on this host, each with `python -m broker --config NODE.json`.

  python -m broker.localcluster --nodes 3 --dir /tmp/c3 [--setting KEY=JSON ...]

writes /tmp/c3/<node>.json, starts the nodes, waits until every partition has
a leader, prints the client addresses, and stops them on Ctrl-C. Tests and
benchmarks use LocalCluster the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .protocol import FrameDecoder, decode_response, encode_frame


def free_ports(n: int) -> list[int]:
    """n distinct TCP ports on 127.0.0.1, free now and below the ephemeral range.

    A node binds its port only once its process starts (and again after each restart);
    a port from the ephemeral range can meanwhile become the local end of any process's
    outgoing connection (a busy machine makes many), or be handed to another test
    worker's node: then a request meant for this node reaches someone else's. The
    harness picks its ports the same way (harness.control.local.free_port): the broker
    imports nothing of the harness.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    socks: list[socket.socket] = []
    try:
        while len(socks) < n:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", random.randrange(10_000, low) if low > 11_000 else 0))
            except OSError:
                s.close()
                continue
            socks.append(s)  # held open together so they differ
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def request(addr: str, msg: dict[str, Any], timeout_s: float = 2.0) -> dict[str, Any]:
    """One request/reply on a fresh connection (no dependency on the client package)."""
    host, _, port = addr.rpartition(":")
    deadline = time.monotonic() + timeout_s
    with socket.create_connection((host, int(port)), timeout=timeout_s) as s:
        s.sendall(encode_frame({**msg, "id": 1}))
        dec = FrameDecoder(64 << 20)
        while True:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            data = s.recv(1 << 16)
            if not data:
                raise ConnectionError(f"{addr} closed the connection")
            for body in dec.feed(data):
                return decode_response(body)


class LocalCluster:
    def __init__(self, base: Path, nodes: Sequence[str] = ("n1", "n2", "n3"), *,
                 settings: Mapping[str, Any] | None = None, partitions: int = 8,
                 replication_factor: int = 3, controller: str | None = None,
                 roles: Mapping[str, list[str]] | None = None,
                 brokers: Sequence[str] | None = None,
                 voters: Sequence[str] | None = None, python: str = sys.executable) -> None:
        """`voters`: the controller quorum (default: just `controller`, else the first node);
        voters get the controller role unless `roles` says otherwise. `python` runs the
        nodes (another checkout's venv runs that checkout's broker, for benchmarks)."""
        self.base = base
        self.python = python
        self.nodes = list(nodes)
        ports = free_ports(len(self.nodes))
        self.addrs = {n: f"127.0.0.1:{p}" for n, p in zip(self.nodes, ports, strict=True)}
        self.controller = controller or self.nodes[0]
        self.voters = list(voters or [self.controller])
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        base.mkdir(parents=True, exist_ok=True)
        roles = roles or {}
        for n in self.nodes:
            cfg: dict[str, Any] = {
                "node_id": n, "listen": self.addrs[n], "data_dir": str(base / n / "data"),
                "peers": self.addrs,
                "process_roles": roles.get(n, ["broker", "controller"]
                                           if n in self.voters else ["broker"]),
                "controller_quorum_voters": self.voters,
                "topic": {"name": "queue", "partitions": partitions,
                          "replication_factor": replication_factor},
                "settings": dict(settings or {}),
                "clock_file": str(base / n / "clock_offset_ns"),
            }
            if brokers is not None:
                cfg["brokers"] = list(brokers)
            (base / n).mkdir(exist_ok=True)
            (base / f"{n}.json").write_text(json.dumps(cfg, indent=1))

    def data_dir(self, node: str) -> Path:
        return self.base / node / "data"

    def start(self, node: str) -> None:
        if node in self.procs and self.procs[node].poll() is None:
            return
        logf = open(self.base / f"{node}.log", "ab")  # noqa: SIM115 - owned by the child
        self.procs[node] = subprocess.Popen(
            [self.python, "-m", "broker", "--config", str(self.base / f"{node}.json")],
            stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        logf.close()

    def start_all(self) -> None:
        for n in self.nodes:
            self.start(n)

    def kill(self, node: str) -> None:
        """SIGKILL: the process dies at once; the page cache (its appends) survives."""
        p = self.procs.pop(node, None)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(10)

    def stop(self, node: str) -> None:
        p = self.procs.pop(node, None)
        if p is not None and p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)

    def close(self) -> None:
        for n in list(self.procs):
            self.kill(n)

    def metadata(self, node: str, timeout_s: float = 2.0) -> dict[str, Any]:
        return request(self.addrs[node], {"type": "metadata"}, timeout_s)

    def wait(self, pred: Any, timeout_s: float = 15.0, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = pred()
                if last:
                    return last
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)
        raise TimeoutError(f"{what} not reached in {timeout_s}s (last: {last!r})")

    def ready(self, nodes: Sequence[str] | None = None) -> bool:
        """Every listed node answers metadata and sees a leader for every partition."""
        for n in nodes or list(self.procs):
            self.check_running(n)
            m = self.metadata(n)
            parts = m.get("partitions", {})
            if not parts or any(p.get("leader") is None for p in parts.values()):
                return False
        return True

    def check_running(self, node: str) -> None:
        """Raise, with the end of its log, if the node's process has exited: a port that
        it never bound may be answered by another process."""
        p = self.procs.get(node)
        if p is not None and p.poll() is not None:
            log = (self.base / f"{node}.log").read_text(errors="replace")[-1500:]
            raise RuntimeError(f"{node} exited with {p.returncode}: {log}")

    def pause(self, node: str) -> None:
        """SIGSTOP: the process keeps its sockets and state but does nothing."""
        self.procs[node].send_signal(signal.SIGSTOP)

    def resume(self, node: str) -> None:
        self.procs[node].send_signal(signal.SIGCONT)

    def active_controller(self, nodes: Sequence[str] | None = None,
                          timeout_s: float = 1.0) -> tuple[str | None, int]:
        """(the controller, its quorum epoch) per the answer with the highest epoch among
        `nodes` (default: all running) that names one; (None, -1) when none does."""
        best: tuple[str | None, int] = (None, -1)
        for n in nodes or list(self.procs):
            try:
                m = self.metadata(n, timeout_s)
            except (OSError, ValueError):
                continue
            epoch = (m.get("quorum") or {}).get("epoch")
            if m.get("controller") and isinstance(epoch, int) and epoch > best[1]:
                best = (str(m["controller"]), epoch)
        return best

    def wait_ready(self, timeout_s: float = 15.0, nodes: Sequence[str] | None = None) -> None:
        self.wait(lambda: self.ready(nodes), timeout_s, "cluster ready")

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m broker.localcluster", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--replication-factor", type=int, default=3)
    ap.add_argument("--setting", action="append", default=[], metavar="KEY=JSON")
    args = ap.parse_args(argv)
    settings = {}
    for s in args.setting:
        k, _, v = s.partition("=")
        settings[k] = json.loads(v)
    nodes = [f"n{i + 1}" for i in range(args.nodes)]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with LocalCluster(args.dir, nodes, settings=settings, partitions=args.partitions,
                      replication_factor=min(args.replication_factor, args.nodes)) as c:
        c.start_all()
        c.wait_ready()
        print(json.dumps({"ready": True, "addrs": c.addrs,
                          "pids": {n: p.pid for n, p in c.procs.items()}}), flush=True)
        try:
            while not stop and all(p.poll() is None for p in c.procs.values()):
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        for n in list(c.procs):
            c.stop(n)  # SIGTERM: a clean stop (flush, checkpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
