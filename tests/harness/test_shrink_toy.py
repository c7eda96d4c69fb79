"""`undertow shrink` on a toy system with a planted bug: lost writes only when n1 was killed
and n2 paused in the same run. From a failing run of eight fault windows it must find
exactly those two, in a few trials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness import registry

REPO = Path(__file__).resolve().parents[2]

PLUGIN = textwrap.dedent('''
    """toyshrink: an in-process log that loses its first write once n1 was killed and n2
    paused (in either order, at any time in the run)."""
    from __future__ import annotations

    import threading
    from dataclasses import dataclass, replace
    from pathlib import Path

    from harness import generator as g
    from harness import registry
    from harness.runfiles import read_history
    from harness.spec import SpecError

    PLANTED = {("kill", "n1"), ("pause", "n2")}


    class ToyLog:
        def __init__(self, nodes):
            self.lock = threading.Lock()
            self.values = []
            self.faults = set()

        def append(self, value):
            with self.lock:
                self.values.append(value)
                return len(self.values) - 1

        def read(self):
            with self.lock:
                start = 1 if PLANTED <= self.faults else 0
                return [[o, v] for o, v in enumerate(self.values)][start:]


    class ToyDB:
        def __init__(self, log):
            self.log = log

        def setup(self, run, node):
            run.extra["toy-log"] = self.log

        def teardown(self, run, node):
            pass

        def wait_ready(self, run, timeout_s):
            pass

        def _note(self, verb, node):
            with self.log.lock:
                self.log.faults.add((verb, node))

        def kill(self, run, node):
            self._note("kill", node)

        def start(self, run, node):
            pass

        def pause(self, run, node):
            self._note("pause", node)

        def resume(self, run, node):
            pass


    class ToyClient:
        def __init__(self, log=None):
            self.log = log

        def open(self, run, node):
            return ToyClient(run.extra["toy-log"])

        def invoke(self, run, op):
            if op.f == "send":
                (_, key, value), = op.value
                return op.complete("ok", [["send", key, [self.log.append(value), value]]])
            return op.complete("ok", [["poll", {"0": self.log.read()}]])

        def close(self, run):
            pass


    class ToySystem:
        name = "toyshrink"
        port = 1

        def check(self, spec):
            if spec.workload != "toyshrinkload":
                raise SpecError("--workload: the toyshrink system speaks only toyshrinkload")

        def db(self, test, host):
            return ToyDB(ToyLog(test.spec.nodes))

        def client(self, test):
            return ToyClient()

        def describe(self, spec):
            return {"name": "toyshrink", "version": "1"}


    @dataclass(frozen=True)
    class Writes(g.Gen):
        next_value: int = 0

        def op(self, ctx):
            if not ctx.free_threads():
                return g.PENDING, self
            inv = g.OneOp(g.Invoke("send", [["send", 0, self.next_value]])).op(ctx)
            return inv[0], replace(self, next_value=self.next_value + 1)


    class EveryWriteRead:
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
                    "stats": {}}


    class ToyLoad:
        name = "toyshrinkload"

        def generator(self, test):
            return g.stagger(0.02, Writes())

        def final_generator(self, test, history):
            return g.op("poll", [["poll"]])

        def checkers(self, test):
            return [EveryWriteRead()]


    registry.register("system", "toyshrink", ToySystem())
    registry.register("workload", "toyshrinkload", ToyLoad())
''')

# eight windows, one after another; the bug needs the third and the sixth
WINDOWS = [("kill", "n2"), ("pause", "n1"), ("kill", "n1"), ("pause", "n3"), ("kill", "n3"),
           ("pause", "n2"), ("kill", "n2"), ("pause", "n3")]
HEAL = {"kill": "start", "pause": "resume"}


def experiment(tmp_path: Path) -> Path:
    lines = ['system = "toyshrink"', 'workload = "toyshrinkload"', 'nemesis = ["kill", "pause"]',
             "time_limit_s = 4.0", "concurrency = 2", "seed = 3", ""]
    for i, (verb, node) in enumerate(WINDOWS):
        t = 0.4 + 0.3 * i
        for at, f, value in ((t, verb, f'{{ nodes = ["{node}"] }}'), (t + 0.2, HEAL[verb], "{}")):
            lines += ["[[nemesis_plan]]", f"at_s = {at:.2f}", f'f = "{f}"', f"value = {value}", ""]
    path = tmp_path / "planted.toml"
    path.write_text("\n".join(lines))
    return path


def undertow(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "plug").mkdir(exist_ok=True)
    (tmp_path / "plug" / "toyshrink.py").write_text(PLUGIN)
    env = {**os.environ, registry.PLUGINS_ENV: "toyshrink",
           "UNDERTOW_STATE_DIR": str(tmp_path / "state"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "plug"),
                                          os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_shrink_finds_exactly_the_two_planted_faults(tmp_path: Path) -> None:
    results = tmp_path / "results"
    first = undertow(tmp_path, "run", "--config", str(experiment(tmp_path)),
                     "--results-dir", str(results))
    assert first.returncode == 1 and first.stdout.startswith("INVALID"), first.stdout + first.stderr
    run_dir = (results / "latest").resolve()
    t0 = time.monotonic()
    out = undertow(tmp_path, "shrink", str(run_dir), "--tries", "1")
    took_s = time.monotonic() - t0
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    (shrink_dir,) = [d.resolve() for d in results.glob("shrink-*/latest")]
    s = json.loads((shrink_dir / "shrink.json").read_text())
    rows = s["minimal"]["rows"]
    assert [(r["fault"], r["target"]) for r in rows] == [("kill", "n1"), ("pause", "n2")]
    assert s["original"]["windows"] == 8 and s["minimal"]["reproduced"] == 1
    assert len(s["trials"]) <= 12 and took_s < 180, (len(s["trials"]), took_s)
    assert len(list((shrink_dir / "trials").iterdir())) == len(s["trials"])
    assert "kill" in out.stdout and "8 -> 2 fault windows" in out.stdout
    # the minimal plan, replayed from its experiment file, fails the same way
    again = undertow(tmp_path, "run", "--config", str(shrink_dir / "minimal.toml"),
                     "--results-dir", str(results))
    assert again.returncode == 1 and "lost-write" in again.stdout, again.stdout + again.stderr
    html = (shrink_dir / "shrink.html").read_text()
    assert html.count("report") >= len(s["trials"]) and 'href="minimal.toml"' in html
