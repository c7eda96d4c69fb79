"""`undertow check` end to end on Spark: the shared examples, exit codes, one session."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from checkers.api import check_local
from checkers.testing import HistoryBuilder

EXAMPLES = Path("/work/shared/examples")
if not EXAMPLES.exists():
    EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "examples"



def undertow(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("undertow")
    return subprocess.run([str(exe), "check", "--spark-master", "local[2]", *args],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.skipif(not (EXAMPLES / "clean").exists(), reason="shared examples not found")
def test_examples_and_exit_codes(tmp_path: Path) -> None:
    for name in ("clean", "truncated"):
        shutil.copytree(EXAMPLES / name, tmp_path / name)
        (tmp_path / name / "results.json").unlink()
    only = tmp_path / "only-history"
    only.mkdir()
    shutil.copy(EXAMPLES / "clean" / "history.jsonl", only)
    unknown = HistoryBuilder()
    unknown.send(0, 0, 1, None, "info")
    unknown.write(tmp_path / "unknown")
    r = undertow(*(str(tmp_path / n) for n in ("clean", "truncated", "only-history",
                                                 "unknown")))
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr == "", "the JVM stays quiet"
    assert len(r.stdout.splitlines()) == 4
    clean = orjson.loads((tmp_path / "clean" / "results.json").read_bytes())
    assert clean["valid"] is True and clean["anomaly_types"] == [] and clean["counts"] == {}
    got = orjson.loads((tmp_path / "truncated" / "results.json").read_bytes())
    want = orjson.loads((EXAMPLES / "truncated" / "results.json").read_bytes())
    for field in ("valid", "anomaly_types", "bad_anomaly_types", "counts"):
        assert got[field] == want[field]
    assert orjson.loads((only / "results.json").read_bytes())["valid"] is True
    assert orjson.loads((tmp_path / "unknown" / "results.json").read_bytes())["valid"] == \
        "unknown"
    # the Spark job and the in-process loop give the same answer
    local = check_local(tmp_path / "truncated")
    assert {k: local[k] for k in ("counts", "anomalies")} == \
        {k: got[k] for k in ("counts", "anomalies")}


def test_unreadable_input_exits_2_without_spark(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "history.jsonl").write_text('{"index": 0, "time": 1, "type": "invoke"\n')
    bad_test = tmp_path / "bad-test"
    bad_test.mkdir()
    shutil.copy(broken / "history.jsonl", bad_test)
    (bad_test / "test.json").write_text('{"seed": ')
    r = undertow(str(broken), str(tmp_path / "nowhere"), str(bad_test))
    assert r.returncode == 2
    assert f"{broken / 'history.jsonl'}:1: invalid JSON" in r.stderr
    assert f"{bad_test}: error: {bad_test / 'test.json'}: not valid JSON" in r.stderr
    assert "nowhere: error: no history.jsonl" in r.stderr


@pytest.mark.slow
def test_empty_history_is_unknown_not_an_input_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "history.jsonl").write_bytes(b"")
    r = undertow(str(empty))
    assert r.returncode == 3, r.stdout + r.stderr
    assert orjson.loads((empty / "results.json").read_bytes())["valid"] == "unknown"
    assert check_local(empty)["valid"] == "unknown"


def test_worst_exit_code() -> None:
    from harness.runfiles import worst_exit_code as worst

    assert worst([0, 3]) == 3 and worst([3, 1, 0]) == 1 and worst([1, 2, 3]) == 2
    assert worst([0]) == 0 and worst([0, 130, 2]) == 130 and worst([]) == 2
