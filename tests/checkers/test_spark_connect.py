"""`undertow check --spark-remote`: the checks run on a real Spark Connect server.

The fixture starts the Connect server that pyspark's wheel ships (its JVM and the
Python workers it forks live in one new process group), bound to 127.0.0.1 on a free
port, and kills that whole group in teardown, whatever the test did.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pyspark
import pytest

EXAMPLES = Path("/work/shared/examples")
if not EXAMPLES.exists():
    EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "examples"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, SIGKILL it if it lingers; reap the JVM."""
    pgid = proc.pid  # start_new_session: the group's id is the leader's pid
    for sig, wait_s in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, 10.0)):
        if not _group_alive(pgid):
            break
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        deadline = time.monotonic() + wait_s  # forked Python workers end after the JVM
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
    if proc.poll() is None:
        proc.wait(timeout=10.0)


@pytest.fixture
def connect_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Spark Connect server on 127.0.0.1:<free port>; yields its sc:// address and log."""
    spark_home = Path(pyspark.__file__).parent
    work = tmp_path / "connect-server"
    work.mkdir()
    port = _free_port()
    env = {**os.environ, "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOG_DIR": str(work),
           "SPARK_PID_DIR": str(work)}
    env.pop("SPARK_REMOTE", None)
    cmd = [str(spark_home / "bin" / "spark-submit"), "--class", SERVER_CLASS,
           "--name", "undertow-connect-test", "--master", "local[2]",
           "--driver-memory", "1g",
           "--conf", f"spark.connect.grpc.binding.port={port}",
           "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
           "--conf", "spark.ui.enabled=false",
           "--conf", f"spark.local.dir={work}",
           "--conf", f"spark.sql.warehouse.dir={work / 'warehouse'}",
           "--conf", "spark.driver.extraJavaOptions=-XX:+UseSerialGC"]
    log_path = work / "server.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _listening(port):
            if proc.poll() is not None:
                pytest.fail(f"Connect server exited {proc.returncode}:\n"
                            + log_path.read_text(errors="replace")[-3000:])
            if time.monotonic() > deadline:
                pytest.fail(f"Connect server not listening on {port} after "
                            f"{START_TIMEOUT_S:.0f} s:\n"
                            + log_path.read_text(errors="replace")[-3000:])
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}", log_path
    finally:
        _stop_group(proc)
        assert not _group_alive(proc.pid), "the Connect server's processes outlive teardown"
        assert not _listening(port)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                    reason="Java is not installed: the Spark Connect server needs a JVM")
@pytest.mark.skipif(not (EXAMPLES / "truncated").exists(), reason="shared examples not found")
def test_check_on_spark_connect(connect_server: tuple[str, Path], tmp_path: Path) -> None:
    address, server_log = connect_server
    run = tmp_path / "truncated"
    shutil.copytree(EXAMPLES / "truncated", run)
    (run / "results.json").unlink()
    exe = Path(sys.executable).with_name("undertow")
    r = subprocess.run([str(exe), "check", "--spark-remote", address, str(run)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr == ""
    assert "INVALID" in r.stdout
    got = orjson.loads((run / "results.json").read_bytes())
    assert "error" not in got, got.get("error")
    want = orjson.loads((EXAMPLES / "truncated" / "results.json").read_bytes())
    assert got["valid"] is False
    assert got["anomaly_types"] == ["inconsistent-offsets", "lost-write", "replica-lost-write"]
    assert got["counts"] == {"inconsistent-offsets": 1, "lost-write": 1,
                             "replica-lost-write": 1}
    for field in ("valid", "anomaly_types", "bad_anomaly_types", "counts", "anomalies"):
        assert got[field] == want[field], field
    assert got["stats"]["spark_job_s"] > 0
    # the per-key applyInArrow job ran in the server's Python workers
    assert "FlatMapGroupsInBatchExec" in server_log.read_text(errors="replace")
