"""The Spark side: a quiet session, and the fused per-key log job.

All log checks of a key run in one `applyInPandas` call after a single
shuffle by key (numpy inside, no Python loop over rows); its answer is small:
counts, a few examples, and the key's write-write / write-read edges.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from checkers.logcheck import OUT_COLUMNS, Out, check_key
from checkers.tables import ENTRY_COLUMNS, Tables

LOG4J2 = """\
status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""
OUT_SCHEMA = "tag string, type string, n long, detail string, src long, dst long"


@contextmanager
def spark_session(master: str = "local[*]", remote: str | None = None,
                  driver_memory: str = "3g") -> Iterator[Any]:
    """A Spark session that starts fast and keeps the JVM quiet; stopped on exit."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    conf_dir = tempfile.mkdtemp(prefix="undertow-spark-")
    log4j = Path(conf_dir) / "log4j2.properties"
    log4j.write_text(LOG4J2)
    builder = SparkSession.builder.appName("undertow-check")
    if remote:
        builder = builder.remote(remote)
    else:
        java_opts = f"-Dlog4j.configurationFile=file:{log4j} -Dlog4j2.level=error"
        builder = (builder.master(master)
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.driver.memory", driver_memory)
                   .config("spark.driver.extraJavaOptions", java_opts)
                   .config("spark.executor.extraJavaOptions", java_opts)
                   .config("spark.local.dir", conf_dir))
    builder = (builder.config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200000"))
    # The JVM inherits fd 2 at launch: point it at a log file meanwhile, so the
    # launcher's and the JVM's own warnings stay off the terminal.
    jvm_log = os.open(Path(conf_dir) / "jvm.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    saved = os.dup(2)
    try:
        sys.stderr.flush()
        os.dup2(jvm_log, 2)
        spark = builder.getOrCreate()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(jvm_log)
    try:
        if not remote:
            spark.sparkContext.setLogLevel("ERROR")
        yield spark
    finally:
        spark.stop()
        shutil.rmtree(conf_dir, ignore_errors=True)


def out_frame(key: int, out: Out) -> dict[str, Any]:
    """check_key's answer as columns (anomaly rows, then edges)."""
    tags = [r[0] for r in out.rows]
    types = [r[1] for r in out.rows]
    ns = [r[2] for r in out.rows]
    details = [r[3] for r in out.rows]
    src: list[Any] = [np.zeros(len(out.rows), np.int64)]
    dst: list[Any] = [np.zeros(len(out.rows), np.int64)]
    for kind, a, b in out.edges:
        tags += ["e"] * len(a)
        types += [kind] * len(a)
        ns += [0] * len(a)
        details += [""] * len(a)
        src.append(a)
        dst.append(b)
    if not tags:  # Arrow cannot type an empty frame of Python objects: one no-op row
        tags, types, ns, details = ["-"], ["-"], [0], [""]
        src, dst = [np.zeros(1, np.int64)], [np.zeros(1, np.int64)]
    return {"tag": tags, "type": types, "n": ns, "detail": details,
            "src": np.concatenate(src), "dst": np.concatenate(dst)}


def log_checks_spark(spark: Any, t: Tables, *, local: bool) -> dict[str, Any]:
    """Run the per-key job; return its answer as numpy/list columns (OUT_COLUMNS)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    has_replicas, nodes = t.has_replicas, list(t.nodes)
    table = pa.table({c: t.entries[c] for c in ENTRY_COLUMNS})

    def per_key(pdf: pd.DataFrame) -> pd.DataFrame:
        cols = {c: pdf[c].to_numpy() for c in ENTRY_COLUMNS}
        key = int(cols["key"][0])
        return pd.DataFrame(out_frame(key, check_key(key, cols, has_replicas, nodes)))

    tmp = None
    try:
        if local:
            tmp = tempfile.mkdtemp(prefix="undertow-entries-")
            pq.write_table(table, f"{tmp}/entries.parquet", compression="none")
            df = spark.read.parquet(f"{tmp}/entries.parquet")
        else:
            df = spark.createDataFrame(table)
        res = df.groupBy("key").applyInPandas(per_key, OUT_SCHEMA).toArrow()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return {c: res.column(c).to_numpy(zero_copy_only=False) for c in OUT_COLUMNS}


def log_checks_local(t: Tables) -> dict[str, Any]:
    """The same job in this process, key by key (the bench's floor; tests compare both)."""
    e = t.entries
    order = np.argsort(e["key"], kind="stable")
    keys = e["key"][order]
    starts: list[int] = (np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]).tolist()
                         if len(keys) else [])
    bounds = [*starts, len(keys)]
    parts: list[dict[str, Any]] = []
    for a, b in itertools.pairwise(bounds):
        idx = order[a:b]
        cols = {c: e[c][idx] for c in ENTRY_COLUMNS}
        key = int(keys[a])
        parts.append(out_frame(key, check_key(key, cols, t.has_replicas, t.nodes)))
    if not parts:
        return {c: np.zeros(0, np.int64) if c in ("n", "src", "dst") else np.array([], object)
                for c in OUT_COLUMNS}
    return {c: np.concatenate([np.asarray(p[c], dtype=object if c in ("tag", "type", "detail")
                                          else np.int64) for p in parts]) for c in OUT_COLUMNS}
