"""toyplug: a system and a workload of one's own, loaded as a plug-in through $UNDERTOW_PLUGINS.

Two systems share one in-process replicated log:
- `toy`: a killed node stops serving and catches up when started;
- `toyshrink`: the same log with a planted bug, losing its first write from every read once
  n1 was killed and n2 paused (in either order, at any time in the run), for the shrinker.
Both speak the `toyload` workload, whose own checker wants every acknowledged write read.
Each part declares its own options (harness/options.py): `toy` a latency per operation
(`--toy-latency-ms`), `toyload` how many final polls it makes (`--toy-final-polls`).
Nothing here is imported by the tests: they run `undertow` in a subprocess that loads it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness import generator as g
from harness import registry
from harness.options import SystemOptions, WorkloadOptions, option
from harness.runfiles import Op, read_history
from harness.spec import SpecError

PLANTED = frozenset({("kill", "n1"), ("pause", "n2")})


def _up_to_a_second(ms: int) -> str | None:
    return None if 0 <= ms <= 1000 else f"expected 0 to 1000 ms, got {ms!r}"


@dataclass(frozen=True, slots=True)
class ToyOptions(SystemOptions):
    latency_ms: int = option(0, "Each toy operation waits this long first.",
                             flag="--toy-latency-ms", check=_up_to_a_second, metavar="MS")


@dataclass(frozen=True, slots=True)
class ToyLoadOptions(WorkloadOptions):
    final_polls: int = option(3, "Polls at the end of a toyload run.", flag="--toy-final-polls",
                              check=lambda n: None if n >= 1 else f"expected >= 1, got {n!r}")


class ToyLog:
    """One log per key on every live node; a write needs a live node (else it fails)."""

    def __init__(self, nodes: Iterable[str], planted: frozenset[tuple[str, str]]) -> None:
        self.lock = threading.Lock()
        self.live = set(nodes)
        self.logs: dict[str, dict[int, list[int]]] = {n: {} for n in self.live}
        self.planted = planted
        self.faults: set[tuple[str, str]] = set()

    def append(self, key: int, value: int) -> int:
        with self.lock:
            if not self.live:
                raise ConnectionError("no live node")
            offset = max(len(self.logs[n].get(key, [])) for n in self.live)
            for n in self.live:
                self.logs[n].setdefault(key, []).append(value)
            return offset

    def read(self, key: int) -> list[list[int]]:
        with self.lock:
            if not self.live:
                raise ConnectionError("no live node")
            longest = max((self.logs[n].get(key, []) for n in self.live), key=len)
            lost = 1 if self.planted and self.planted <= self.faults else 0
            return [[o, v] for o, v in enumerate(longest)][lost:]


class ToyDB:
    """DB, Killable and Pausable; a pause is only noted (the node keeps serving)."""

    def __init__(self, log: ToyLog) -> None:
        self.log = log

    def setup(self, run: Any, node: str) -> None:
        run.extra["toy-log"] = self.log

    def teardown(self, run: Any, node: str) -> None:
        pass

    def wait_ready(self, run: Any, timeout_s: float) -> None:
        pass

    def kill(self, run: Any, node: str) -> None:
        with self.log.lock:
            self.log.faults.add(("kill", node))
            self.log.live.discard(node)

    def start(self, run: Any, node: str) -> None:
        with self.log.lock:
            if self.log.live:
                src = next(iter(self.log.live))
                self.log.logs[node] = {k: list(v) for k, v in self.log.logs[src].items()}
            self.log.live.add(node)

    def pause(self, run: Any, node: str) -> None:
        with self.log.lock:
            self.log.faults.add(("pause", node))

    def resume(self, run: Any, node: str) -> None:
        pass


class ToyClient:
    def __init__(self, log: ToyLog | None = None, latency_s: float = 0.0) -> None:
        self.log = log
        self.latency_s = latency_s

    def open(self, run: Any, node: str) -> ToyClient:
        return ToyClient(run.extra["toy-log"], self.latency_s)

    def invoke(self, run: Any, op: Op) -> Op:
        assert self.log is not None, "open() first"
        time.sleep(self.latency_s)
        try:
            if op.f == "send":
                (_, key, value), = op.value
                return op.complete("ok", [["send", key, [self.log.append(key, value), value]]])
            return op.complete("ok", [["poll", {"0": self.log.read(0)}]])
        except ConnectionError as e:
            return op.complete("fail", error=str(e))

    def close(self, run: Any) -> None:
        pass


@dataclass(frozen=True)
class ToySystem:
    name: str
    planted: frozenset[tuple[str, str]] = frozenset()
    port: int = 1
    options: type[ToyOptions] | None = None  # toyshrink has none

    def check(self, spec: Any) -> None:
        if spec.workload != "toyload":
            raise SpecError(f"--workload: the {self.name} system speaks only toyload")

    def db(self, test: Any, host: Any) -> ToyDB:
        return ToyDB(ToyLog(test.spec.nodes, self.planted))

    def client(self, test: Any) -> ToyClient:
        latency_ms = ToyOptions.of(test.spec).latency_ms if self.options else 0
        return ToyClient(latency_s=latency_ms / 1000)

    def describe(self, spec: Any) -> dict[str, str]:
        return {"name": self.name, "version": "1"}


@dataclass(frozen=True)
class Writes(g.Gen):
    next_value: int = 0

    def op(self, ctx: g.Context) -> g.Result:
        if not ctx.free_threads():
            return g.PENDING, self
        sent = g.OneOp(g.Invoke("send", [["send", 0, self.next_value]])).op(ctx)
        assert sent is not None, "a free thread always takes a send"
        return sent[0], replace(self, next_value=self.next_value + 1)


class EveryWriteRead:
    """valid when every acknowledged value was read by some poll."""

    name = "every-write-read"

    def check(self, run_dir: Any, spec: Any) -> dict[str, Any]:
        ops = read_history(Path(run_dir) / "history.jsonl")
        acked = {m[2][1] for o in ops if o.type == "ok" and o.f == "send" for m in o.value}
        read = {v for o in ops if o.type == "ok" and o.f == "poll"
                for m in o.value for recs in m[1].values() for _, v in recs}
        lost = sorted(acked - read)
        return {"valid": not lost, "anomaly_types": ["lost-write"] if lost else [],
                "bad_anomaly_types": ["lost-write"] if lost else [],
                "counts": {"lost-write": len(lost)} if lost else {},
                "anomalies": {"lost-write": [{"value": v} for v in lost[:32]]} if lost else {},
                "stats": {"toy_sends_ok": len(acked)}}


class ToyLoad:
    name = "toyload"
    options = ToyLoadOptions

    def generator(self, test: Any) -> Any:
        return g.stagger(0.01, Writes())

    def final_generator(self, test: Any, history: Any) -> Any:
        polls = ToyLoadOptions.of(test.spec).final_polls
        return g.seq(*(g.op("poll", [["poll"]]) for _ in range(polls)))

    def checkers(self, test: Any) -> list[EveryWriteRead]:
        return [EveryWriteRead()]


registry.register("system", "toy", ToySystem("toy", options=ToyOptions))
registry.register("system", "toyshrink", ToySystem("toyshrink", PLANTED))
registry.register("workload", "toyload", ToyLoad())
