"""A class-data-sharing archive for the cold Spark JVM: its start loads ~10k classes.

A cold check's JVM spends seconds of CPU parsing and verifying the same Spark
classes every time. JDK 17 can map them from an archive dumped by an earlier JVM
(`-XX:ArchiveClassesAtExit`, then `-XX:SharedArchiveFile`). The archive is only
valid for the JDK and the jars it was dumped from, so it is kept per venv, named by
a key over both, built by `python -m checkers.spark_cds` (`./scripts/bootstrap` runs
it), and used only when its key matches: absent or stale, sessions start as before.
The JVM writes it at its exit, so the build waits for that JVM and then renames the
file into place (a reader never sees half an archive). The key and the publishing are
harness.jvm_cds's, shared with Kafka's archives (systems/kafka/cds.py).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from harness.jvm_cds import QUIET as QUIET_OPTIONS
from harness.jvm_cds import archive_key, java_binary, publish, use_options

CDS_DIR_ENV = "UNDERTOW_CDS_DIR"  # where archives live (default: in this venv)
OFF_ENV = "UNDERTOW_CDS"  # "0": never use or build an archive
# the JVM options the archive is dumped under (the GC must match at use); a young
# generation of 256 MB: the shuffle's short-lived buffers are collected before they
# grow the heap (the JVM's peak at 10M lines: 1.8 instead of 2.3 GB)
JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmn256m"
QUIET = " ".join(QUIET_OPTIONS)  # harness.jvm_cds: a stale archive's warnings silenced


def cds_dir() -> Path:
    return Path(os.environ.get(CDS_DIR_ENV) or Path(sys.prefix) / "var" / "undertow-cds")


def archive_path() -> Path | None:
    """This venv's archive for the current JDK and Spark jars (it may not exist yet);
    None when no java or no pyspark is found."""
    java = java_binary()  # the one Spark's launcher runs
    try:
        import pyspark
    except ImportError:
        return None
    if java is None:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    try:
        key = archive_key(java, sorted(jars.iterdir()), JVM_FLAGS)
    except OSError:
        return None
    return None if key is None else cds_dir() / f"spark-{key}.jsa"


def java_options() -> str:
    """Options that map the archive into the driver JVM when a current one exists, else
    "" (the JVM starts as it always did)."""
    if os.environ.get(OFF_ENV) == "0":
        return ""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    return " ".join(use_options(path))


def build() -> Path | None:
    """Dump the archive from a session that runs the real job once (checkers.spark.warm_up);
    return its path (None without java or pyspark). Older archives in the folder go."""
    from pyspark import SparkContext

    from checkers.spark import spark_session, warm_up

    final = archive_path()
    if final is None:
        return None
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".building-", suffix=".jsa", dir=final.parent)
    os.close(fd)
    os.unlink(tmp)  # the JVM creates it at exit
    try:
        with spark_session("local[2]", dump_archive=tmp) as spark:
            warm_up(spark, local=True)
        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        if gateway is not None:
            gateway.shutdown()
        if proc is not None:
            proc.stdin.close()  # the gateway JVM exits at EOF on its stdin, dumping then
            proc.wait(timeout=300)
        publish(Path(tmp), final, "spark-*.jsa")
    finally:
        Path(tmp).unlink(missing_ok=True)
    return final


def main() -> None:
    """`python -m checkers.spark_cds [--if-missing]`: (re)build this venv's archive;
    with --if-missing only when there is no current one."""
    if os.environ.get(OFF_ENV) == "0" or ("--if-missing" in sys.argv[1:] and java_options()):
        return
    path = build()
    print(f"class-data archive: {path}" if path else "class-data archive: no java or pyspark")


if __name__ == "__main__":
    main()
