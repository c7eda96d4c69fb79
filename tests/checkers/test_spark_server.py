"""The warm Spark (`undertow spark start|status|stop`), a standalone cluster, and the rule
that picks which Spark a check uses (checkers.spark_server).

The slow tests start real JVMs from pyspark's own scripts on 127.0.0.1, check the shared
examples there, and then look for anything left behind: by pgrep on the test's folder
(every JVM's class path holds it) and by the tag every process inherits.
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
from typing import Any

import orjson
import pytest

from checkers.spark_server import (
    DIR_ENV,
    SparkError,
    StandaloneCluster,
    free_port,
    listening,
    parse_remote,
    resolve,
    shared_session,
    spark_dir,
    tagged,
)

EXAMPLES = Path("/work/shared/examples")
if not EXAMPLES.exists():
    EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "examples"
FIELDS = ("valid", "anomaly_types", "bad_anomaly_types", "counts", "anomalies")
needs_spark = pytest.mark.skipif(
    shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
    reason="Java is not installed: Spark needs a JVM")
needs_examples = pytest.mark.skipif(not (EXAMPLES / "truncated").exists(),
                                    reason="no shared examples")


def undertow(*args: str, env: dict[str, str] | None = None,
             timeout: float = 600) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("undertow")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def examples(tmp_path: Path) -> list[Path]:
    """Both shared examples, copied without their results."""
    out = []
    for name in ("clean", "truncated"):
        shutil.copytree(EXAMPLES / name, tmp_path / name)
        (tmp_path / name / "results.json").unlink()
        out.append(tmp_path / name)
    return out


def assert_as_expected(runs: list[Path]) -> list[dict[str, Any]]:
    """Every run's results equal the shared expected ones, field by field."""
    got_all = []
    for run in runs:
        got = orjson.loads((run / "results.json").read_bytes())
        want = orjson.loads((EXAMPLES / run.name / "results.json").read_bytes())
        assert "error" not in got, got.get("error")
        for field in FIELDS:
            assert got[field] == want[field], (run.name, field)
        got_all.append(got)
    return got_all


def jvms_under(folder: Path) -> list[str]:
    """pgrep's view: processes whose command line names the folder (the JVMs' class path)."""
    r = subprocess.run(["pgrep", "-a", "-f", str(folder)], capture_output=True, text=True)
    return r.stdout.splitlines()


# -- the rule, without a JVM -----------------------------------------------------------------


@pytest.fixture
def warm_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "spark"
    monkeypatch.setenv(DIR_ENV, str(d))
    assert spark_dir() == d
    return d


@pytest.fixture
def listener() -> Iterator[int]:
    """A real socket listening on 127.0.0.1 (stands where a server would answer)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


SESSION = "5f0c6c3e-8a4b-4d8e-9a37-1b2c3d4e5f60"


def _record(d: Path, port: int, **over: Any) -> None:
    """A warm-server record naming this very process (alive: same pid and start time)."""
    from checkers.spark_server import _start_time

    d.mkdir(parents=True, exist_ok=True)
    state = {"pid": os.getpid(), "start_time": _start_time(os.getpid()), "port": port,
             "address": f"sc://127.0.0.1:{port}", "python": sys.executable, "tag": "t",
             "session": SESSION,
             "master": "local[*]", "log": "x", **over}
    (d / "state.json").write_text(orjson.dumps(state).decode())


def test_without_a_warm_server_every_check_is_cold(warm_dir: Path) -> None:
    assert resolve() == resolve("auto", "local[*]")
    t = resolve("auto", "local[2]")
    assert (t.master, t.remote, t.shares_files, t.label) == \
        ("local[2]", None, True, "cold local[2]")
    with pytest.raises(SparkError, match=r"--spark warm: no warm Spark is up.*spark start"):
        resolve("warm")


def test_a_warm_server_that_is_up_is_used_unless_cold_or_a_cluster_is_named(
        warm_dir: Path, listener: int) -> None:
    _record(warm_dir, listener)
    address = f"sc://127.0.0.1:{listener}"
    shared = f"{address}/;session_id={SESSION}"  # the server's one long-lived session
    for choice in ("auto", "warm"):
        t = resolve(choice, "local[2]")
        assert (t.remote, t.shares_files, t.label) == (shared, True, f"warm {address}")
    assert resolve("cold", "local[2]").remote is None
    cluster = resolve("auto", "spark://127.0.0.1:7077")
    assert (cluster.remote, cluster.shares_files) == (None, False)
    # named explicitly, our own server still reads our files, in its shared session
    named = resolve("auto", None, address)
    assert (named.remote, named.shares_files) == (shared, True)


def test_a_dead_or_foreign_record_is_ignored(warm_dir: Path, listener: int) -> None:
    _record(warm_dir, listener, start_time=-1)  # a recycled pid
    assert resolve("auto").remote is None
    _record(warm_dir, listener, python="/other/venv/bin/python")  # runs other code
    assert resolve("auto").remote is None
    _record(warm_dir, free_port())  # nothing answers on its port
    assert resolve("auto").remote is None


def test_a_named_remote_must_be_well_formed_and_answer(warm_dir: Path, listener: int) -> None:
    assert parse_remote("sc://127.0.0.1:15002") == ("127.0.0.1", 15002)
    assert parse_remote("sc://[::1]:15002/;user_id=a") == ("::1", 15002)
    for bad in ("127.0.0.1:15002", "sc://host", "sc://:1", "http://h:1"):
        with pytest.raises(SparkError, match="is not sc://HOST:PORT"):
            parse_remote(bad)
    port = free_port()
    with pytest.raises(SparkError, match=f"nothing answers on 127.0.0.1:{port}"):
        resolve("auto", None, f"sc://127.0.0.1:{port}")
    with pytest.raises(SparkError, match="exclude each other"):
        resolve("cold", None, f"sc://127.0.0.1:{listener}")
    t = resolve("auto", None, f"sc://127.0.0.1:{listener}")
    assert (t.shares_files, t.label) == (False, f"connect sc://127.0.0.1:{listener}")


def test_check_and_run_refuse_an_unusable_spark_before_starting(warm_dir: Path,
                                                                 tmp_path: Path) -> None:
    env = {**os.environ, DIR_ENV: str(warm_dir)}
    r = undertow("check", "--spark", "warm", str(tmp_path), env=env)
    assert r.returncode == 2 and "no warm Spark is up" in r.stderr, r.stderr
    r = undertow("run", "--spark-remote", "localhost:1", "--results-dir", str(tmp_path / "res"),
                 env=env)
    assert r.returncode == 2 and "is not sc://HOST:PORT" in r.stderr, r.stderr
    assert not (tmp_path / "res").exists()
    r = undertow("spark", "status", env=env)
    assert r.returncode == 3 and r.stdout.startswith("down"), r.stdout


# -- real JVMs -----------------------------------------------------------------------------


@pytest.mark.slow
@needs_examples
@needs_spark
def test_warm_server_checks_like_a_cold_one_and_stops_clean(tmp_path: Path) -> None:
    d = tmp_path / "spark"
    env = {**os.environ, DIR_ENV: str(d)}
    port = free_port()
    try:
        r = undertow("spark", "start", "--port", str(port), "--master", "local[2]", env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.startswith("started in "), r.stdout
        tag = orjson.loads((d / "state.json").read_bytes())["tag"]
        assert listening("127.0.0.1", port) and tagged(tag)
        again = undertow("spark", "start", "--port", str(port), env=env)
        assert again.returncode == 0 and again.stdout.startswith("already up"), again.stdout
        assert undertow("spark", "status", env=env).returncode == 0
        # No Java for the check itself: it can only have run on the warm server.
        no_java = {**env, "JAVA_HOME": str(tmp_path / "no-java")}
        runs = examples(tmp_path / "auto")
        r = undertow("check", *map(str, runs), env=no_java)
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stderr == ""
        for got in assert_as_expected(runs):
            assert got["stats"]["spark"] == f"warm sc://127.0.0.1:{port}"
        named = examples(tmp_path / "named")
        r = undertow("check", "--spark-remote", f"sc://127.0.0.1:{port}", *map(str, named),
                     env=no_java)
        assert r.returncode == 1, r.stdout + r.stderr
        assert_as_expected(named)
    finally:
        stopped = undertow("spark", "stop", env=env)
    assert stopped.returncode == 0 and stopped.stdout.startswith("stopped"), stopped.stdout
    assert not listening("127.0.0.1", port)
    assert tagged(tag) == [] and jvms_under(tmp_path) == []
    assert not (d / "state.json").exists()
    assert undertow("spark", "status", env=env).returncode == 3
    assert undertow("spark", "stop", env=env).stdout.startswith("nothing to stop")


@pytest.mark.slow
@needs_spark
def test_ctrl_c_while_the_warm_server_starts_leaves_nothing(tmp_path: Path) -> None:
    d = tmp_path / "spark"
    exe = Path(sys.executable).with_name("undertow")
    proc = subprocess.Popen([str(exe), "spark", "start", "--port", str(free_port())],
                            env={**os.environ, DIR_ENV: str(d)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        tag = None
        while tag is None or not tagged(tag):
            assert proc.poll() is None and time.monotonic() < deadline
            if (d / "state.json").exists():
                tag = orjson.loads((d / "state.json").read_bytes())["tag"]
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert tagged(tag) == [] and jvms_under(tmp_path) == []
    assert not (d / "state.json").exists()


@pytest.mark.slow
@needs_examples
@needs_spark
def test_a_standalone_cluster_of_two_workers_checks_alike_and_stops_clean(
        tmp_path: Path) -> None:
    work = tmp_path / "cluster"
    runs = examples(tmp_path / "shared")  # one folder every worker sees
    with StandaloneCluster(work, workers=2) as cluster:
        assert cluster.url.startswith("spark://127.0.0.1:")
        assert cluster.alive_workers() == 2 and len(tagged(cluster.tag)) >= 3
        # the executors read the history themselves (the driver's reader, the same code
        # on any master, runs in tests/checkers/test_cli_spark.py)
        r = undertow("check", "--spark-master", cluster.url, "--reader", "spark",
                     *map(str, runs))
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stderr == ""
        for got in assert_as_expected(runs):
            assert got["stats"]["spark"] == f"cold {cluster.url}"
            assert got["stats"]["reader"] == "spark"
        # the application's executors ran on both workers
        for i in (1, 2):
            assert list((work / f"worker-{i}").glob("app-*/*/stderr")), f"worker-{i}"
    assert tagged(cluster.tag) == [] and jvms_under(tmp_path) == []


@pytest.mark.slow
@needs_spark
def test_a_session_on_the_warm_server_leaves_no_connect_mark_behind(
        session_spark: dict[str, object]) -> None:
    """pyspark marks a process that opened a Connect session and never unmarks it: a cold
    check after a warm one (in this process or a child) then failed (CONNECT_URL_NOT_SET)."""
    from checkers.spark import CONNECT_MARK, spark_session

    assert CONNECT_MARK not in os.environ
    with spark_session(remote=shared_session(session_spark)) as spark:
        assert spark.range(3).count() == 3
        assert CONNECT_MARK in os.environ  # pyspark's own, while the session is open
    assert CONNECT_MARK not in os.environ
