"""The cold JVM's class-data archive (checkers.spark_cds): built whole into this venv's
folder, mapped by the next session, and harmless when it is not a valid archive.

Each session runs in its own interpreter (one Spark JVM per process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.api import check_local
from checkers.spark_cds import CDS_DIR_ENV, JVM_FLAGS, archive_path, java_options
from checkers.testing import HistoryBuilder

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH")]

SESSION = """
import json, os, sys
from pathlib import Path
from pyspark import SparkContext
from checkers.api import check_with
from checkers.spark import spark_session
from checkers.api import check_local
from checkers.spark_cds import java_options

with spark_session("local[1]") as spark:
    results = check_with(spark, Path(sys.argv[1]))
    jvm = SparkContext._gateway.proc.pid
    mapped = Path(f"/proc/{jvm}/maps").read_text()
print(json.dumps({"valid": results["valid"], "counts": results["counts"],
                  "options": java_options(), "mapped": mapped}))
"""


def session(run: Path, env: dict[str, str]) -> tuple[dict[str, object], str]:
    done = subprocess.run([sys.executable, "-c", SESSION, str(run)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return out, done.stderr


def java_options_in(env: dict[str, str]) -> str:
    """checkers.spark_cds.java_options() as a session with this environment computes it."""
    os.environ[CDS_DIR_ENV] = env[CDS_DIR_ENV]
    try:
        return java_options()
    finally:
        del os.environ[CDS_DIR_ENV]


# A build of its own is a Spark session dumped at its exit then a second one on the archive
# (85 s of the suite): at night. The suite keeps the two halves that cost nothing: the
# classic session of tests/checkers/test_sparkread.py maps the archive ./scripts/bootstrap
# built, and a broken archive is ignored (below).
@pytest.mark.nightly
def test_an_archive_is_built_whole_then_mapped_and_a_broken_one_is_ignored(
        tmp_path: Path) -> None:
    env = {**os.environ, CDS_DIR_ENV: str(tmp_path / "cds")}
    (tmp_path / "cds").mkdir()
    (tmp_path / "cds" / "spark-0000.jsa").write_bytes(b"an archive of other jars")
    built = subprocess.run([sys.executable, "-m", "checkers.spark_cds"], env=env,
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    options = java_options_in(env)
    archive = next((Path(o.split("=", 1)[1]) for o in options.split()
                    if o.startswith("-XX:SharedArchiveFile=")), None)
    assert archive is not None and archive.parent == tmp_path / "cds"
    # only the current archive is left: no half-written file, no archive of other jars
    assert [p.name for p in (tmp_path / "cds").iterdir()] == [archive.name]
    assert archive.stat().st_size > 10_000_000

    b = HistoryBuilder()
    b.send(0, 0, 10, 0)
    b.send(1, 0, 11, 1)
    b.poll(2, {0: [(0, 10), (1, 10)]})
    run = b.write(tmp_path / "run")
    used, err = session(run, env)
    assert str(archive) in str(used["options"])
    assert str(archive) in str(used["mapped"])  # the JVM runs on it
    assert "cds" not in err.lower()

    want = check_local(run)
    assert want["valid"] is False
    assert (used["valid"], used["counts"]) == (want["valid"], want["counts"])

    # Not an archive: the driver JVM, started with the very options a session passes it,
    # starts without it and says nothing (the archive is mapped, or not, at the JVM's start;
    # a whole Spark session on top only took 20 s more)
    archive.write_bytes(b"\0" * 4096)
    java = shutil.which("java")
    assert java is not None
    options = f"{JVM_FLAGS} {java_options_in(env)}"
    assert str(archive) in options
    started = subprocess.run([java, *options.split(), "-version"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    assert "cds" not in started.stderr.lower() and "shared" not in started.stderr.lower()


def test_a_broken_archive_is_ignored_by_the_driver_jvm(tmp_path: Path) -> None:
    """Not an archive where the current one belongs: the driver JVM, started with the very
    options a session passes it, starts without it and says nothing."""
    env = {**os.environ, CDS_DIR_ENV: str(tmp_path / "cds")}
    os.environ[CDS_DIR_ENV] = env[CDS_DIR_ENV]
    try:
        archive = archive_path()
    finally:
        del os.environ[CDS_DIR_ENV]
    if archive is None:
        pytest.skip("no pyspark jars or no java")
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"\0" * 4096)
    options = f"{JVM_FLAGS} {java_options_in(env)}"
    assert str(archive) in options
    java = shutil.which("java")
    assert java is not None
    started = subprocess.run([java, *options.split(), "-version"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    assert "cds" not in started.stderr.lower() and "shared" not in started.stderr.lower()


def test_if_missing_leaves_a_current_archive_alone_and_off_builds_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m checkers.spark_cds --if-missing` (what ./scripts/bootstrap runs) returns at
    once while a current archive is there, and UNDERTOW_CDS=0 never builds one."""
    from checkers import spark_cds

    monkeypatch.setenv(CDS_DIR_ENV, str(tmp_path / "cds"))
    archive = archive_path()
    if archive is None:
        pytest.skip("no pyspark jars or no java")
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"the current archive")
    monkeypatch.setattr(sys, "argv", ["spark_cds", "--if-missing"])
    spark_cds.main()
    assert archive.read_bytes() == b"the current archive"
    archive.unlink()
    monkeypatch.setenv(spark_cds.OFF_ENV, "0")
    spark_cds.main()
    assert java_options() == "" and not archive.exists()
    assert capsys.readouterr().out == ""
