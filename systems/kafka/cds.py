"""A class-data archive per Kafka release, for the local backend's Kafka JVMs.

A broker's JVM spent 4.8 s of CPU to its start and StorageTool 1.9 s, mostly loading
and verifying the same classes; mapped from an archive, 2.2 s and 1.1 s (Kafka 4.4.0,
docs/benchmarks.md). Every run starts a JVM per node, formats each node's storage,
restarts what the nemesis killed and dumps the segments, so the archive is built once
per release and JDK (harness.jvm_cds has the rules): a one-node KRaft cluster of the
release started in a scratch folder with `-XX:ArchiveClassesAtExit`, ended by SIGTERM
once it has started (the JVM dumps at a normal exit), the archive then renamed into
<cache>/<version>/cds/. A build that fails is marked and not tried again for that key;
absent, failed or stale, the JVMs start as before. KRaft releases only: a broker of a
ZooKeeper release needs its ZooKeeper before it starts. Each broker's JVM writes what it
did with the archive (mapped, or why not) to its node's cds.log, not to stderr.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from harness.control.launcher import die_with_parent
from harness.control.local import free_port
from harness.jvm_cds import DUMP_OPTION, archive_key, java_binary, publish, use_options
from harness.locks import exclusive
from systems.kafka import config
from systems.kafka.jars import KafkaJars
from systems.kafka.options import KafkaOptions

OFF_ENV = "UNDERTOW_KAFKA_CDS"  # "0": never build or use an archive
BUILD_TIMEOUT_S = 180.0
_STARTED = "Kafka Server started"
log = logging.getLogger(__name__)


def archive_path(java: str, jars: KafkaJars) -> Path | None:
    """The release's archive for this JDK and its jars (it may not exist yet)."""
    binary = java_binary(java)
    if binary is None:
        return None
    try:
        key = archive_key(binary, sorted(jars.libs.iterdir()), " ".join(config.JVM_OPTS))
    except OSError:
        return None
    return None if key is None else jars.libs.parent / "cds" / f"kafka-{key}.jsa"


def options(java: str, jars: KafkaJars) -> tuple[str, ...]:
    """The JVM options that map the release's archive, built first when it is missing
    (once: two processes asking at once wait for one build); () when there is none."""
    if os.environ.get(OFF_ENV) == "0":
        return ()
    path = archive_path(java, jars)
    if path is None:
        return ()
    if not path.is_file():
        with exclusive(path.parent / ".lock"):
            failed = path.with_suffix(".failed")
            if not path.is_file() and not failed.exists():
                try:
                    build_archive(java, jars, path)
                except (OSError, RuntimeError, subprocess.SubprocessError) as e:
                    failed.write_text(f"{e}\n")
                    log.warning("Kafka %s: no class-data archive (%s); its JVMs start as "
                                "before", jars.version, e)
    return use_options(path) if path.is_file() else ()


def build_archive(java: str, jars: KafkaJars, final: Path) -> None:
    """Start a one-node cluster of the release to its start under ArchiveClassesAtExit,
    end it with SIGTERM, and publish what its JVM dumped as `final`."""
    with tempfile.TemporaryDirectory(prefix="kafka-cds-") as scratch:
        root = Path(scratch)
        (node,) = config.make_nodes(("n1",), "127.0.0.1", free_port).values()
        props = root / "server.properties"
        settings = KafkaOptions(replication_factor=1, min_insync_replicas=1)
        props.write_text(config.render_properties(config.server_properties(
            node, {"n1": node}, root / "data", settings, partitions=1)))
        formatted = subprocess.run(config.format_command(java, jars.classpath, str(props)),
                                   cwd=root, capture_output=True, text=True, timeout=120)
        if formatted.returncode != 0:
            raise RuntimeError(f"StorageTool exited {formatted.returncode}: "
                               f"{(formatted.stdout + formatted.stderr).strip()[-500:]}")
        dumped = root / "dumped.jsa"
        # the broker dies with the harness (a kill of the harness leaves no JVM behind)
        cmd, preexec = die_with_parent(config.server_command(
            java, jars.classpath, str(props), jvm=(f"{DUMP_OPTION}{dumped}",)))
        out = root / "kafka.log"
        with open(out, "wb") as sink:
            proc = subprocess.Popen(cmd, cwd=root, stdout=sink, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=preexec)
        try:
            deadline = time.monotonic() + BUILD_TIMEOUT_S
            while _STARTED not in out.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the broker did not start: "
                                       f"{out.read_text(errors='replace')[-500:]}")
                time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=BUILD_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        publish(dumped, final, "kafka-*.jsa")
