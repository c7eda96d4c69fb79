"""The link proxy in its own process: LinkProxy's API over a pipe.

Why: in the harness process the proxy's event loop shares one GIL with every
client thread and the interpreter, and forwarding slows to the pace of the
GIL hand-offs. In a child it has its own interpreter (and uvloop).

The child reads one JSON command per line on stdin and answers one JSON line on
stdout. It exits when stdin closes, so it ends with the harness even without
PDEATHSIG (the local backend sets that too, and registers it in leftovers).

    python -m harness.proxy_process [--host 127.0.0.1]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from typing import IO, Any

from harness.proxy import CLEAN, LinkInfo, LinkProxy, Shape
from harness.proxyprobe import (
    LinkCounters,
    LinkProbe,
    LinkTiming,
    counters_from,
    probe_from,
    timing_from,
)

Spawn = Callable[[Sequence[str]], "subprocess.Popen[bytes]"]


def _default_spawn(cmd: Sequence[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(list(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE)


class ProxyProcess:
    """LinkProxy's methods, served by a child process; thread-safe."""

    def __init__(self, host: str = "127.0.0.1", *, spawn: Spawn | None = None,
                 python: str = sys.executable) -> None:
        self.host = host
        cmd = [python, "-m", "harness.proxy_process", "--host", host]
        self.proc = (spawn or _default_spawn)(cmd)
        if self.proc.stdin is None or self.proc.stdout is None:
            raise RuntimeError("the proxy process needs pipes on stdin and stdout")
        self._in: IO[bytes] = self.proc.stdin
        self._out: IO[bytes] = self.proc.stdout
        self._lock = threading.Lock()
        self._links: dict[tuple[str, str], LinkInfo] = {}
        self._shapes: dict[tuple[str, str], tuple[Shape, Shape]] = {}
        self._stopped = False
        self._buf = b""
        self._seq = 0
        self._rpc("ping", timeout_s=60.0)  # the child's start: imports, under load

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _rpc(self, op: str, timeout_s: float = 10.0, **args: Any) -> Any:
        with self._lock:
            if self._stopped:
                raise RuntimeError("the link proxy is stopped")
            try:
                self._seq += 1
                self._in.write(json.dumps({"op": op, "id": self._seq, **args}).encode() + b"\n")
                self._in.flush()
                deadline = time.monotonic() + timeout_s
                while True:  # skip a late answer to an earlier request that timed out
                    line = self._readline(deadline - time.monotonic())
                    if not line:
                        raise RuntimeError(f"link proxy process (pid {self.pid}) exited "
                                           f"with code {self.proc.poll()}")
                    answer = json.loads(line)
                    if answer.get("id") == self._seq:
                        break
            except (OSError, ValueError) as e:
                raise RuntimeError(f"link proxy process (pid {self.pid}): {op}: {e}") from e
        if "error" in answer:
            raise RuntimeError(f"link proxy: {op}: {answer['error']}")
        return answer.get("result")

    def _readline(self, timeout_s: float) -> bytes:
        """One answer line, read from the raw pipe with a deadline (b"" at EOF)."""
        deadline = time.monotonic() + timeout_s
        fd = self._out.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"no answer within {timeout_s:g} s")
            chunk = os.read(fd, 65536)
            if not chunk:
                return b""
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def add_link(self, src: str, dst: str, target: str, port: int = 0) -> LinkInfo:
        info = LinkInfo(**self._rpc("add_link", src=src, dst=dst, target=target, port=port))
        self._links[(src, dst)] = info
        self._shapes[(src, dst)] = (CLEAN, CLEAN)
        return info

    def links(self) -> list[LinkInfo]:
        return list(self._links.values())

    def link(self, src: str, dst: str) -> LinkInfo:
        return self._links[(src, dst)]

    def shape(self, src: str, dst: str) -> tuple[Shape, Shape]:
        return self._shapes[(src, dst)]

    def set_shapes(self, shapes: Iterable[tuple[str, str, Shape, Shape]]) -> None:
        todo = list(shapes)
        for src, dst, _, _ in todo:
            if (src, dst) not in self._links:
                raise KeyError(f"no link {src}->{dst}")
        self._rpc("set_shapes", shapes=[[s, d, asdict(f), asdict(b)] for s, d, f, b in todo])
        for s, d, f, b in todo:
            self._shapes[(s, d)] = (f, b)

    def connection_count(self) -> int:
        return int(self._rpc("connection_count"))

    def counters(self) -> dict[tuple[str, str], LinkCounters]:
        return {(s, d): counters_from(c) for s, d, c in self._rpc("counters")}

    def probe(self, links: Sequence[tuple[str, str]],
              timeout_s: float) -> dict[tuple[str, str], LinkProbe]:
        got = self._rpc("probe", timeout_s=timeout_s + 10.0,
                        links=[list(k) for k in links], probe_timeout_s=timeout_s)
        return dict(zip(links, (probe_from(p) for p in got), strict=True))

    def round_trips(self, links: Sequence[tuple[str, str]],
                    budget_s: float) -> dict[tuple[str, str], LinkTiming]:
        got = self._rpc("round_trips", timeout_s=budget_s + 15.0,
                        links=[list(k) for k in links], budget_s=budget_s)
        return dict(zip(links, (timing_from(t) for t in got), strict=True))

    def stop(self) -> None:
        """Close stdin (the child stops its proxy and exits); kill it if it lingers."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            with contextlib.suppress(OSError, ValueError):
                self._in.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        with contextlib.suppress(OSError, ValueError):
            self._out.close()


def serve(proxy: LinkProxy, inp: IO[str], out: IO[str]) -> None:
    """Answer commands until stdin closes."""
    for line in inp:
        cmd: Any = None
        try:
            cmd = json.loads(line)
            op = cmd.get("op")
            result: Any = None
            if op == "ping":
                result = "pong"
            elif op == "add_link":
                result = asdict(proxy.add_link(cmd["src"], cmd["dst"], cmd["target"],
                                               int(cmd.get("port", 0))))
            elif op == "set_shapes":
                proxy.set_shapes([(s, d, Shape(**f), Shape(**b)) for s, d, f, b in cmd["shapes"]])
            elif op == "connection_count":
                result = proxy.connection_count()
            elif op == "counters":
                result = [[s, d, asdict(c)] for (s, d), c in proxy.counters().items()]
            elif op == "probe":
                links = [(s, d) for s, d in cmd["links"]]
                probes = proxy.probe(links, float(cmd["probe_timeout_s"]))
                result = [asdict(probes[k]) for k in links]
            elif op == "round_trips":
                links = [(s, d) for s, d in cmd["links"]]
                timings = proxy.round_trips(links, float(cmd["budget_s"]))
                result = [asdict(timings[k]) for k in links]
            else:
                raise ValueError(f"unknown op {op!r}")
            out.write(json.dumps({"id": cmd.get("id"), "result": result}) + "\n")
        except Exception as e:
            out.write(json.dumps({"id": cmd.get("id") if isinstance(cmd, dict) else None,
                                  "error": f"{type(e).__name__}: {e}"}) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the harness's link proxy, driven over stdin")
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args(argv)
    proxy = LinkProxy(args.host)
    try:
        serve(proxy, sys.stdin, sys.stdout)
    finally:
        proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
