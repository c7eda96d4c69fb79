"""The Spark side: a quiet session, and the fused per-key log job.

All log checks of a key run in one Python call (numpy inside, no Python loop
over rows). The entries travel packed: a few rows per key holding each column's
bytes; when one row holds a whole key, the job maps over the rows with no shuffle,
else it runs `applyInArrow` after one shuffle by key. The answer is small:
counts, a few examples, and the key's write-write / write-read edges.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import numpy as np

from checkers.logcheck import OUT_COLUMNS, Out, check_key
from checkers.spark_cds import JVM_FLAGS, QUIET, java_options
from checkers.spark_server import DAEMON_MODULE, log4j2_properties
from checkers.tables import ENTRY_COLUMNS, Tables, narrowest_dtype

LOG4J2 = log4j2_properties("error", "org.apache.spark.repl.Main")
IN_SCHEMA = ", ".join(["key long", "part long", *(f"b_{c} binary" for c in ENTRY_COLUMNS)])
OUT_SCHEMA = "tag string, type string, n long, detail string, src binary, dst binary"


CONNECT_MARK = "SPARK_CONNECT_MODE_ENABLED"


@contextmanager
def spark_session(master: str = "local[*]", remote: str | None = None,
                  driver_memory: str = "3g", *, hush: bool = True,
                  dump_archive: str | None = None) -> Iterator[Any]:
    """A Spark session that starts fast and keeps the JVM quiet; stopped on exit.

    The JVM's stderr goes to a log file by its own launch. `hush` also points this
    process's fd 2 there while the session starts, for what Python itself prints
    meanwhile (a fork from a thread can print a stray lock warning); not when other
    threads write to stderr that must be seen (a run's workload). A local JVM maps this
    venv's class-data archive when there is one; `dump_archive` names a file the JVM
    writes one to at its exit instead (checkers.spark_cds)."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # pyspark marks a process that opened a Spark Connect session with this variable and
    # never unmarks it: a later in-process session (and every child process) would then
    # refuse a classic start (CONNECT_URL_NOT_SET). It is put back as it was on exit.
    connect_mark = os.environ.get(CONNECT_MARK)
    conf_dir = tempfile.mkdtemp(prefix="undertow-spark-")
    log4j = Path(conf_dir) / "log4j2.properties"
    log4j.write_text(LOG4J2)
    opts: dict[str, Any] = {"spark.app.name": "undertow-check",
            "spark.sql.shuffle.partitions": str(_cores(master)),
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.sql.execution.arrow.maxRecordsPerBatch": "200000"}
    if remote:
        opts["spark.remote"] = remote
    else:
        # C1 only and the serial GC: less JIT and GC work at start, which is most of ours
        java_opts = f"-Dlog4j.configurationFile=file:{log4j} -Dlog4j2.level=error {JVM_FLAGS}"
        cds = (f"-XX:ArchiveClassesAtExit={dump_archive} {QUIET}" if dump_archive
               else java_options())
        opts.update({"spark.master": master,
                     "spark.python.daemon.module": DAEMON_MODULE,
                     "spark.ui.enabled": "false",
                     "spark.ui.showConsoleProgress": "false",
                     "spark.driver.memory": driver_memory,
                     "spark.driver.extraJavaOptions": f"{java_opts} {cds}".strip(),
                     "spark.executor.extraJavaOptions": java_opts,
                     "spark.local.dir": conf_dir})
    jvm_log = os.open(Path(conf_dir) / "jvm.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    saved = os.dup(2) if hush else -1
    try:
        if hush:
            sys.stderr.flush()
            os.dup2(jvm_log, 2)
        if not remote:
            _launch_jvm(opts, Path(conf_dir) / "jvm.log")
        spark = SparkSession.builder.config(map=dict(opts)).getOrCreate()
    except BaseException:
        shutil.rmtree(conf_dir, ignore_errors=True)
        _restore(CONNECT_MARK, connect_mark)
        raise
    finally:
        if hush:
            os.dup2(saved, 2)
            os.close(saved)
        os.close(jvm_log)
    if remote and "session_id=" in remote:
        # a named session is shared (the warm server's): stop() leaves it open
        cast(Any, spark).release_session_on_close = False
    try:
        if not remote:
            spark.sparkContext.setLogLevel("ERROR")
        yield spark
    finally:
        spark.stop()
        shutil.rmtree(conf_dir, ignore_errors=True)
        _restore(CONNECT_MARK, connect_mark)


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _launch_jvm(opts: dict[str, Any], log: Path) -> None:
    """Launch this process's Spark JVM (once; later sessions share it) with its stderr in
    log, so the launcher's and the JVM's own warnings stay off the terminal."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return
        with log.open("ab") as err:
            conf = SparkConf(loadDefaults=False).setAll(list(opts.items()))
            gateway = launch_gateway(conf, popen_kwargs={"stderr": err})  # type: ignore[no-untyped-call]
        SparkContext._ensure_initialized(gateway=gateway)


def _cores(master: str) -> int:
    """Shuffle partitions: one per local core (few big groups beat many small ones)."""
    if master.startswith("local"):
        n = master[6:-1] if master.startswith("local[") else "1"
        return max(1, os.cpu_count() or 1) if n == "*" else max(1, int(n.split(",")[0]))
    return 8


def out_frame(key: int, out: Out) -> dict[str, list[Any]]:
    """check_key's answer as columns: anomaly rows, then one row per edge kind whose
    src/dst hold the edge ends as bytes of the narrowest integer type (its dtype in
    `detail`): a few rows per key, not one per edge, and at scale the edges are most of
    what the driver receives."""
    tags = [r[0] for r in out.rows]
    types = [r[1] for r in out.rows]
    ns = [r[2] for r in out.rows]
    details = [r[3] for r in out.rows]
    src = [b""] * len(out.rows)
    dst = [b""] * len(out.rows)
    for kind, a, b in out.edges:
        a, b = np.ascontiguousarray(a, np.int64), np.ascontiguousarray(b, np.int64)
        dt = max(narrowest_dtype(a), narrowest_dtype(b), key=lambda d: d.itemsize)
        tags.append("e")
        types.append(kind)
        ns.append(len(a))
        details.append(dt.str)
        src.append(a.astype(dt).tobytes())
        dst.append(b.astype(dt).tobytes())
    return {"tag": tags, "type": types, "n": ns, "detail": details, "src": src, "dst": dst}


def out_table(out: dict[str, list[Any]]) -> Any:
    """out_frame's columns as an Arrow table of OUT_SCHEMA."""
    import pyarrow as pa

    kinds = {"tag": pa.string(), "type": pa.string(), "n": pa.int64(), "detail": pa.string(),
             "src": pa.binary(), "dst": pa.binary()}
    return pa.Table.from_arrays([arrow_column(out[c], kinds[c]) for c in OUT_COLUMNS],
                                names=list(OUT_COLUMNS))


def take_edges(log: dict[str, Any], kind: str) -> tuple[int, Iterator[tuple[Any, Any]]]:
    """How many edges of one kind the job's answer holds, and their (src, dst) op ids
    row by row; each row's bytes are dropped from `log` once the consumer moves on, so
    the answer and the graph's arrays are never both held whole."""
    rows = [i for i, (t, k) in enumerate(zip(log["tag"], log["type"], strict=True))
            if t == "e" and k == kind]

    def chunks() -> Iterator[tuple[Any, Any]]:
        for i in rows:
            yield (np.frombuffer(log["src"][i], log["detail"][i]),
                   np.frombuffer(log["dst"][i], log["detail"][i]))
            log["src"][i] = log["dst"][i] = b""

    return sum(int(log["n"][i]) for i in rows), chunks()


BLOB_ROWS = 1 << 19  # entries per packed row (about 40 MB of columns at most)


def key_slices(t: Tables) -> Iterator[tuple[int, Any]]:
    """(key, entry row indices) per key, in key order and entry order."""
    e = t.entries
    order = np.argsort(e["key"], kind="stable")
    keys = e["key"][order]
    starts: list[int] = (np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]).tolist()
                         if len(keys) else [])
    for a, b in itertools.pairwise([*starts, len(keys)]):
        yield int(keys[a]), order[a:b]


def narrow_dtypes(t: Tables) -> dict[str, str]:
    """Per entry column, the smallest integer type that holds all its values: the packed
    bytes a job writes, reads and hands to Python shrink to a third or so."""
    return {c: narrowest_dtype(t.entries[c]).str for c in ENTRY_COLUMNS}


def packed_entries(t: Tables, dtypes: dict[str, str] | None = None) -> Any:
    """The entries as a few rows per key: (key, part, one binary blob per column, of
    `dtypes` when given).

    Spark then shuffles a few hundred rows of raw column bytes by key instead of
    tens of millions of 12-field rows; each group is unpacked into the same numpy
    columns check_key reads (a memcpy, no per-row work anywhere)."""
    import pyarrow as pa

    e = t.entries
    order = np.argsort(e["key"], kind="stable")
    by_key = {c: e[c][order].astype((dtypes or {}).get(c, e[c].dtype), copy=False)
              for c in ENTRY_COLUMNS}  # one gather per column
    keys: list[int] = []
    parts: list[int] = []
    blobs: dict[str, list[bytes]] = {c: [] for c in ENTRY_COLUMNS}
    ks = by_key["key"]
    starts: list[int] = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]).tolist() if len(ks) \
        else []
    for a, b in itertools.pairwise([*starts, len(ks)]):
        for part, c0 in enumerate(range(a, b, BLOB_ROWS)):
            keys.append(int(ks[a]))
            parts.append(part)
            for c in ENTRY_COLUMNS:
                blobs[c].append(by_key[c][c0:min(b, c0 + BLOB_ROWS)].tobytes())
    return pa.Table.from_arrays(
        [arrow_column(keys, pa.int64()), arrow_column(parts, pa.int64()),
         *(arrow_column(blobs[c], pa.large_binary()) for c in ENTRY_COLUMNS)],
        names=["key", "part", *(f"b_{c}" for c in ENTRY_COLUMNS)])


def arrow_column(values: Sequence[Any], kind: Any) -> Any:
    """values as an Arrow array of kind (int64, string, binary or large_binary), built from
    its buffers. pa.array would first import pandas, to see whether the values are
    pandas': about a second of CPU in the driver and in each new Python worker."""
    import pyarrow as pa

    if kind == pa.int64():
        data = np.ascontiguousarray(values, dtype=np.int64)
        return pa.Array.from_buffers(kind, len(data), [None, pa.py_buffer(data)])
    blobs = [v.encode() if isinstance(v, str) else v for v in values]
    offsets = np.zeros(len(blobs) + 1, np.int64)
    np.cumsum([len(b) for b in blobs], out=offsets[1:])
    if kind != pa.large_binary():
        if offsets[-1] > np.iinfo(np.int32).max:
            raise ValueError(f"{offsets[-1]} bytes do not fit one Arrow {kind} column")
        offsets = offsets.astype(np.int32)
    return pa.Array.from_buffers(kind, len(blobs),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(blobs))])


def unpack_group(group: Any, dtypes: dict[str, Any],
                 packed: dict[str, Any] | None = None) -> dict[str, Any]:
    """One key's packed rows (of `packed` dtypes, else `dtypes`) back into its entry
    columns of `dtypes` (parts in order)."""
    # to_pylist, not to_numpy: pyarrow's to_numpy imports pandas (a second of CPU in
    # each new Python worker)
    order = np.argsort(group.column("part").to_pylist(), kind="stable")
    out = {}
    for c in ENTRY_COLUMNS:
        chunks = group.column(f"b_{c}").to_pylist()
        col = np.frombuffer(b"".join(chunks[i] for i in order),
                            dtype=(packed or dtypes)[c])
        out[c] = col.astype(dtypes[c], copy=False)
    return out


def log_checks_spark(spark: Any, t: Tables, *, local: bool,
                     shuffle: bool | None = None) -> dict[str, Any]:
    """Run the per-key job; return its answer as columns (OUT_COLUMNS).

    When the input goes through a local Parquet file and every key fits in one packed
    row (BLOB_ROWS entries), each row is a whole key: the job maps over the file's
    splits with no shuffle at all. Otherwise (`shuffle`, or a key in several rows, or
    input sent over the wire, which arrives as one partition) one shuffle by key."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    has_replicas, nodes = t.has_replicas, list(t.nodes)
    dtypes = {c: t.entries[c].dtype.str for c in ENTRY_COLUMNS}
    packed = narrow_dtypes(t)
    table = packed_entries(t, packed)
    if shuffle is None:
        shuffle = not local or any(table.column("part").to_pylist())

    def per_key(group: pa.Table) -> pa.Table:
        cols = unpack_group(group, dtypes, packed)
        key = int(group.column("key")[0].as_py())
        return out_table(out_frame(key, check_key(key, cols, has_replicas, nodes)))

    def per_row(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for i in range(batch.num_rows):
                yield from per_key(pa.Table.from_batches([batch.slice(i, 1)])).to_batches()

    tmp = None
    try:
        if local:
            tmp = tempfile.mkdtemp(prefix="undertow-entries-")
            pq.write_table(table, f"{tmp}/entries.parquet", compression="none",
                           row_group_size=16)
            # with its schema given, reading the file starts no job to infer it
            df = spark.read.schema(IN_SCHEMA).parquet(f"{tmp}/entries.parquet")
        else:
            df = spark.createDataFrame(table)
        job = (df.groupBy("key").applyInArrow(per_key, OUT_SCHEMA) if shuffle
               else df.mapInArrow(per_row, OUT_SCHEMA))
        res = job.toArrow()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return {c: res.column(c).to_pylist() for c in OUT_COLUMNS}


def log_checks_local(t: Tables) -> dict[str, Any]:
    """The same job in this process, key by key (the bench's floor; tests compare both)."""
    e = t.entries
    out: dict[str, list[Any]] = {c: [] for c in OUT_COLUMNS}
    for key, idx in key_slices(t):
        cols = {c: e[c][idx] for c in ENTRY_COLUMNS}
        part = out_frame(key, check_key(key, cols, t.has_replicas, t.nodes))
        for c in OUT_COLUMNS:
            out[c] += part[c]
    return out


def warm_up(spark: Any, *, local: bool) -> None:
    """The real job once on a tiny history: a cold JVM's first job spends seconds loading
    classes (Parquet, shuffle, Arrow) and starting Python workers; this pays that early."""
    from checkers.tables import load_tables
    from checkers.testing import HistoryBuilder, replica_rows

    b = HistoryBuilder()
    values = {k: [k * 1000 + i for i in range(16)] for k in range(4)}
    for k, vs in values.items():
        for o, v in enumerate(vs):
            b.send(o % 3, k, v, o)
        b.poll(3, {k: list(enumerate(vs))})
    with tempfile.TemporaryDirectory(prefix="undertow-warm-") as d:
        b.write(Path(d), [r for k, vs in values.items() for node in ("n1", "n2")
                          for r in replica_rows(node, k, len(vs), vs)])
        log_checks_spark(spark, load_tables(Path(d)), local=local)


def _import_the_check() -> None:
    """Import what the check itself imports in this process (DuckDB for the read, scipy
    for the cycle search): about a second of CPU, several on a busy machine, that a run
    otherwise pays between its workload and its verdict."""
    with contextlib.suppress(ImportError):
        import duckdb  # noqa: F401

        import checkers.api  # noqa: F401


class SessionStarter:
    """Starts the Spark session and warms it (`warm_up`) in a background thread, so that
    the JVM starts while the driver parses the history, or while the workload runs."""

    def __init__(self, master: str, remote: str | None, *, local: bool = True,
                 nice: int = 0, hush: bool = True) -> None:
        import threading

        self._cm = spark_session(master, remote, hush=hush)
        self._local = local
        self._nice = nice
        self._tid: int | None = None
        self._spark: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._start, name="spark-start", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        if self._nice:
            # this thread only; the JVM it launches and that JVM's Python workers inherit it
            import threading

            self._tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, self._tid, self._nice)
        try:
            self._spark = self._cm.__enter__()
            # also on Spark Connect, where a new session's server-side workers start cold
            warm_up(self._spark, local=self._local)
        except BaseException as e:  # handed to the caller of get()
            self._error = e
        _import_the_check()

    def wait(self) -> None:
        self._thread.join()

    def get(self) -> Any:
        """The session, once started; back at nice 0 where this user may do that (the
        workload is over: now the check comes first)."""
        self.wait()
        if self._error is not None:
            raise self._error
        self.unnice()
        return self._spark

    def unnice(self) -> None:
        """Back to nice 0 (the start under way and the JVM), where this user may do that."""
        if self._nice:
            if self._tid is not None and self._thread.is_alive():
                with contextlib.suppress(OSError):
                    os.setpriority(os.PRIO_PROCESS, self._tid, 0)
            renice_jvm(0)

    def close(self) -> None:
        self.wait()
        if self._spark is not None:
            self._cm.__exit__(None, None, None)


def renice_jvm(nice: int) -> None:
    """Every thread of this process's Spark JVM and of what it forked (Python workers) to
    `nice`; where the user may not lower it (no CAP_SYS_NICE), it stays as it was."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None:
        return
    parent: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                parent[int(d)] = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1]
                                     .split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, todo = [], [int(proc.pid)]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += [c for c, pp in parent.items() if pp == pid]
    for pid in tree:
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for tid in tids:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, nice)
            except OSError:  # gone, or not permitted: leave it
                continue
