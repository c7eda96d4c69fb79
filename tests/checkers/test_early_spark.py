"""The run-file checker's early Spark start (`prepare` while the workload runs): the check
uses that session; a start that failed leaves the check to start one the ordinary way.

Each case runs in its own interpreter, as a run does (one Spark JVM per process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.testing import HistoryBuilder

pytestmark = pytest.mark.slow

SCRIPT = """
import json, os, sys
from pathlib import Path
from checkers.suite import RunFileChecker
from harness.spec import TestSpec

run, java_home = Path(sys.argv[1]), sys.argv[2]
if len(sys.argv) > 3:  # histories of this many bytes and more are read by Spark
    import checkers.sparkread
    checkers.sparkread.MIN_BYTES = int(sys.argv[3])
spec = TestSpec(options={"checkers": {"spark": "cold", "spark_master": "local[1]"}})
saved = os.environ.get("JAVA_HOME")
if java_home:
    os.environ["JAVA_HOME"] = java_home
checker = RunFileChecker()
checker.prepare(spec)
checker._early[1].wait()  # the start has ended (failed, with no Java there)
if saved is None:
    os.environ.pop("JAVA_HOME", None)
else:
    os.environ["JAVA_HOME"] = saved
results = checker.check(run, spec)
from pyspark import SparkContext
jvm = getattr(SparkContext._gateway, "proc", None)
results["jvm_nice"] = sorted({os.getpriority(os.PRIO_PROCESS, int(t))
                              for t in os.listdir(f"/proc/{jvm.pid}/task")}) if jvm else None
print(json.dumps(results))
checker.release()
"""


def folder(tmp_path: Path) -> Path:
    b = HistoryBuilder()
    b.send(0, 0, 10, 0)
    b.send(1, 0, 11, 1)
    b.poll(2, {0: [(0, 10), (1, 11)]})
    return b.write(tmp_path / "run")


def check(run: Path, java_home: str, *more: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(run), java_home, *more],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return out


def test_an_early_start_that_failed_falls_back_to_a_session_started_then(
        tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH for the fallback session")
    results = check(folder(tmp_path), str(tmp_path / "no-java-here"))
    assert results["valid"] is True, results
    early = results["stats"]["spark_early"]  # type: ignore[index]
    assert isinstance(early, str) and early.startswith("failed"), early
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["stats"]["spark_early"] == early


def test_the_check_uses_the_session_started_early_and_spark_reads_a_large_history(
        tmp_path: Path) -> None:
    from checkers.api import check_local

    b = HistoryBuilder()
    b.send(0, 0, 10, 0)
    b.send(1, 0, 11, 1)
    b.poll(2, {0: [(0, 10), (1, 11), (2, 10)]})  # 10 twice: a duplicate
    run = b.write(tmp_path / "run")
    by_spark = check(run, "", "0")  # every history is large: Spark reads it
    assert by_spark["stats"]["reader"] == "spark"  # type: ignore[index]
    assert by_spark["stats"]["spark_early"] is True  # type: ignore[index]
    # started at nice 10 beside the workload; the check itself runs at 0 where permitted
    if os.geteuid() == 0:
        assert by_spark["jvm_nice"] == [0]
    by_driver = check_local(run)  # the driver's own reading, without Spark
    for key in ("valid", "anomaly_types", "counts"):
        assert by_spark[key] == by_driver[key], key
    assert by_spark["anomaly_types"] == ["duplicate"], by_spark


READ_EARLY = """
import json, sys
from pathlib import Path
from checkers.suite import RunFileChecker
from harness.spec import TestSpec

spec = TestSpec(options={"checkers": {"spark": "cold", "spark_master": "local[1]"}})
checker = RunFileChecker()
checker.prepare(spec)
out = []
for run in map(Path, sys.argv[1:]):
    checker.history_written(run / "history.jsonl")  # as a run does, before its dumps
    assert checker._reading is not None
    out.append(checker.check(run, spec))
print(json.dumps(out))
checker.release()
"""


def test_a_history_read_early_gives_the_results_and_errors_of_a_read_at_check(
        tmp_path: Path) -> None:
    from checkers.api import check_local
    from checkers.fastscan import scan_fast
    from harness.runfiles import HistoryError

    b = HistoryBuilder()
    b.send(0, 0, 10, 0)
    b.send(1, 0, 11, 1)
    b.poll(2, {0: [(0, 10), (1, 10)]})  # 10 twice, 11 never: invalid
    bad = b.write(tmp_path / "bad")
    with (bad / "history.jsonl").open("a") as fh:
        fh.write('{"index": 6, "type": "invoke"}\n')
    with pytest.raises(HistoryError) as err:
        scan_fast(bad / "history.jsonl")
    invalid = b.write(tmp_path / "invalid")
    done = subprocess.run([sys.executable, "-c", READ_EARLY, str(invalid), str(bad)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    got, got_bad = json.loads(done.stdout.splitlines()[-1])
    want = check_local(invalid)
    assert got["valid"] is False
    for field in ("valid", "counts", "anomalies", "anomaly_types", "bad_anomaly_types"):
        assert got[field] == want[field]
    assert got_bad == {"valid": "unknown", "error": f"bad history: {err.value}"}
