"""A system and a workload of one's own, plugged in without touching the harness.

The module below is written by the test into a folder of its own and named in
$UNDERTOW_PLUGINS: an in-process key-value log (its DB can be killed and started,
its client sends and polls), and a workload with a checker of its own. `undertow
run` drives them end to end, to a verdict and a report, as it drives our broker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness import registry

PLUGIN = textwrap.dedent('''
    """toyplug: an in-process replicated log and a workload that writes and reads it."""
    from __future__ import annotations

    import threading
    from dataclasses import dataclass, replace
    from pathlib import Path
    from typing import Any

    from harness import generator as g
    from harness import registry
    from harness.runfiles import Op, read_history
    from harness.spec import SpecError


    class ToyLog:
        """One log per key, on every live node; a write needs a live node (else it fails)."""

        def __init__(self, nodes):
            self.lock = threading.Lock()
            self.live = set(nodes)
            self.logs = {n: {} for n in nodes}

        def append(self, key, value):
            with self.lock:
                if not self.live:
                    raise ConnectionError("no live node")
                offset = max(len(self.logs[n].get(key, [])) for n in self.live)
                for n in self.live:
                    self.logs[n].setdefault(key, []).append(value)
                return offset

        def read(self, key):
            with self.lock:
                if not self.live:
                    raise ConnectionError("no live node")
                longest = max((self.logs[n].get(key, []) for n in self.live), key=len)
                return list(enumerate(longest))


    class ToyDB:
        """DB + Killable: a killed node stops serving and catches up when started."""

        def __init__(self, log):
            self.log = log
            self.setups = []

        def setup(self, run, node):
            run.extra["toy-log"] = self.log
            self.setups.append(node)

        def teardown(self, run, node):
            pass

        def wait_ready(self, run, timeout_s):
            pass

        def kill(self, run, node):
            with self.log.lock:
                self.log.live.discard(node)

        def start(self, run, node):
            with self.log.lock:
                if self.log.live:
                    src = next(iter(self.log.live))
                    self.log.logs[node] = {k: list(v) for k, v in self.log.logs[src].items()}
                self.log.live.add(node)


    class ToyClient:
        def __init__(self, log=None):
            self.log = log

        def open(self, run, node):
            return ToyClient(run.extra["toy-log"])

        def invoke(self, run, op):
            try:
                if op.f == "send":
                    (_, key, value), = op.value
                    return op.complete("ok", [["send", key, [self.log.append(key, value), value]]])
                recs = self.log.read(0)
                return op.complete("ok", [["poll", {"0": [[o, v] for o, v in recs]}]])
            except ConnectionError as e:
                return op.complete("fail", error=str(e))

        def close(self, run):
            pass


    class ToySystem:
        name = "toy"
        port = 1

        def check(self, spec):
            if spec.workload != "toyload":
                raise SpecError("--workload: the toy system speaks only toyload")

        def db(self, test, host):
            return ToyDB(ToyLog(test.spec.nodes))

        def client(self, test):
            return ToyClient()

        def describe(self, spec):
            return {"name": "toy", "version": "1"}


    @dataclass(frozen=True)
    class Writes(g.Gen):
        next_value: int = 0

        def op(self, ctx):
            if not ctx.free_threads():
                return g.PENDING, self
            inv = g.OneOp(g.Invoke("send", [["send", 0, self.next_value]])).op(ctx)
            return inv[0], replace(self, next_value=self.next_value + 1)


    class EveryWriteRead:
        """valid when every acknowledged value was read by some poll."""

        name = "every-write-read"

        def check(self, run_dir, spec):
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

        def generator(self, test):
            return g.stagger(0.01, Writes())

        def final_generator(self, test, history):
            return g.seq(*(g.op("poll", [["poll"]]) for _ in range(3)))

        def checkers(self, test):
            return [EveryWriteRead()]


    registry.register("system", "toy", ToySystem())
    registry.register("workload", "toyload", ToyLoad())
''')


def _env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "plug").mkdir(exist_ok=True)
    (tmp_path / "plug" / "toyplug.py").write_text(PLUGIN)
    return {**os.environ, registry.PLUGINS_ENV: "toyplug",
            "PYTHONPATH": os.pathsep.join([str(tmp_path / "plug"),
                                           os.environ.get("PYTHONPATH", "")])}


def test_unknown_system_and_workload_are_usage_errors(tmp_path: Path) -> None:
    for opt, name in (("--system", "nope"), ("--workload", "nope")):
        out = subprocess.run([sys.executable, "-m", "harness.cli", "run", opt, name,
                              "--results-dir", str(tmp_path / "r")],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out
        assert f"{opt}: 'nope' is not known" in out.stderr
        assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_toy_system_and_workload_run_end_to_end(tmp_path: Path) -> None:
    """`undertow run --system toy --workload toyload`: kills included, a verdict, a report."""
    results = tmp_path / "results"
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--system", "toy", "--workload", "toyload",
         "--nemesis", "kill", "--nemesis-interval", "1", "--time-limit", "4", "--seed", "7",
         "--concurrency", "3", "--results-dir", str(results)],
        capture_output=True, text=True, timeout=240, env=_env(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("VALID"), out.stdout
    run_dir = (results / "latest").resolve()
    res = json.loads((run_dir / "results.json").read_text())
    assert res["valid"] is True and res["stats"]["toy_sends_ok"] > 10
    assert "liveness" in res["stats"]  # the nemesis package's checker ran too
    test = json.loads((run_dir / "test.json").read_text())
    assert test["system"] == "toy" and test["system_info"] == {"name": "toy", "version": "1"}
    history = (run_dir / "history.jsonl").read_text()
    assert '"f":"kill"' in history.replace(" ", "") and '"f":"poll"' in history.replace(" ", "")
    assert (run_dir / "report.html").stat().st_size > 1000


def test_the_toy_system_refuses_a_workload_it_does_not_speak(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--system", "toy",
                          "--results-dir", str(tmp_path / "r")],
                         capture_output=True, text=True, timeout=60, env=_env(tmp_path))
    assert out.returncode == 2, out
    assert "the toy system speaks only toyload" in out.stderr
    assert not (tmp_path / "r").exists()
