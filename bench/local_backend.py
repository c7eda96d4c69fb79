"""Local backend figures: 3-node start to ready, link-proxy overhead, produce ops/s through it.

python -m bench.local_backend [--rounds 5] [--seconds 5] [--threads 20]
Writes bench/out/local_backend.json and prints a summary (with the machine's load).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import socketserver
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness import core
from harness.control.local import LocalBackend
from harness.protocols import Run
from harness.proxy import LinkProxy
from harness.proxy_process import ProxyProcess
from harness.runfiles import RunPaths
from harness.spec import build_spec
from workloads.options import QueueOptions

OUT = Path(__file__).parent / "out"


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _run(root: Path, keys: int = 8) -> Run:
    spec = build_spec({"keys": keys})
    return Run(spec=spec, nodes=spec.nodes, paths=RunPaths(root), log=logging.getLogger("bench"))


def start_to_ready(rounds: int) -> dict[str, float]:
    times = []
    for i in range(rounds):
        with tempfile.TemporaryDirectory() as d:
            run = _run(Path(d) / f"r{i}")
            b = LocalBackend()
            t0 = time.monotonic()
            try:
                core.cluster_up(b, run)
                times.append(time.monotonic() - t0)
            finally:
                core.cluster_down(b, run)
    return {"median_s": statistics.median(times), "max_s": max(times), "rounds": rounds}


def _parallel(threads: int, seconds: float, make: Callable[[int], Callable[[], None]]) -> float:
    """Ops/s of `threads` threads each looping its op for `seconds`."""
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def worker(i: int) -> None:
        op = make(i)
        n = 0
        while time.monotonic() < stop:
            op()
            n += 1
        counts[i] = n

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts) / (time.monotonic() - t0)


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


def proxy_echo(threads: int, seconds: float) -> dict[str, float]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    direct = f"127.0.0.1:{server.server_address[1]}"
    proxy = LinkProxy()
    via = proxy.add_link("client", "n1", direct).listen
    child = ProxyProcess()
    via_child = child.add_link("client", "n1", direct).listen

    def rtt(addr: str) -> Callable[[int], Callable[[], None]]:
        def make(_: int) -> Callable[[], None]:
            host, port = addr.rsplit(":", 1)
            s = socket.create_connection((host, int(port)))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            msg = b"x" * 100

            def op() -> None:
                s.sendall(msg)
                got = 0
                while got < len(msg):
                    got += len(s.recv(4096))

            return op
        return make

    try:
        return {"direct_ops_s": _parallel(threads, seconds, rtt(direct)),
                "thread_proxy_ops_s": _parallel(threads, seconds, rtt(via)),
                "process_proxy_ops_s": _parallel(threads, seconds, rtt(via_child))}
    finally:
        proxy.stop()
        child.stop()
        server.shutdown()
        server.server_close()


def produce(threads: int, seconds: float, proxy_mode: str) -> dict[str, float]:
    from systems.undertow.client import BrokerClient

    with tempfile.TemporaryDirectory() as d:
        run = _run(Path(d) / "produce")
        b = LocalBackend(proxy_mode=proxy_mode)
        try:
            core.cluster_up(b, run)

            def via(addrs: Mapping[str, str]) -> Callable[[int], Callable[[], None]]:
                def make(i: int) -> Callable[[], None]:
                    c = BrokerClient(addrs, timeout_s=5)
                    value = iter(range(i * 10_000_000, (i + 1) * 10_000_000))

                    def op() -> None:
                        c.produce(i % QueueOptions.of(run.spec).keys, next(value))

                    return op
                return make

            return {"direct_ops_s": _parallel(threads, seconds, via(b.listen)),
                    "proxied_ops_s": _parallel(threads, seconds, via(run.client_addrs))}
        finally:
            core.cluster_down(b, run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=20)
    args = ap.parse_args()
    out: dict[str, Any] = {"load_before": _load(), "cpus": os.cpu_count()}
    out["start_to_ready"] = start_to_ready(args.rounds)
    out["proxy_echo"] = proxy_echo(args.threads, args.seconds)
    out["produce_acks_all"] = {m: produce(args.threads, args.seconds, m)
                               for m in ("process", "thread")}
    out["load_after"] = _load()
    OUT.mkdir(exist_ok=True)
    (OUT / "local_backend.json").write_text(json.dumps(out, indent=1) + "\n")
    s, e, p = out["start_to_ready"], out["proxy_echo"], out["produce_acks_all"]
    print(f"3-node start to ready: median {s['median_s']:.2f} s, max {s['max_s']:.2f} s "
          f"({s['rounds']} rounds; target <= 5 s)")
    print(f"echo round trips, {args.threads} threads: direct {e['direct_ops_s']:.0f}/s, "
          f"proxy in a thread {e['thread_proxy_ops_s']:.0f}/s, "
          f"proxy in a process {e['process_proxy_ops_s']:.0f}/s")
    for mode, r in p.items():
        print(f"produce acks=all, {args.threads} threads, proxy in a {mode}: "
              f"direct {r['direct_ops_s']:.0f}/s, through the proxy {r['proxied_ops_s']:.0f}/s")
    print(f"load average before/after: {out['load_before']} / {out['load_after']} "
          f"on {out['cpus']} cpus")


if __name__ == "__main__":
    main()
