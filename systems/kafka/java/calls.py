"""The queue client's hot calls in Java (ClientCalls.java beside this module), compiled once
per client version with the JDK's javac into the client jars' cache, and put on the JVM's
classpath (systems/kafka/java/jvm.py).

Why Java: JPype costs microseconds per call and per Java object it hands to Python, not per
byte. Read field by field from Python, a poll's records cost three calls each (6 µs a record,
a third of a poll's CPU in the harness) and a send six; here each is one call, and a poll's
records come back as one long[] (docs/benchmarks.md, "Kafka's Java client beside
librdkafka"). What the client does is the same: the same Kafka calls, in the same order.
"""

from __future__ import annotations

import array
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from systems.kafka.java.jars import ClientJars, ClientJarsError, root

SOURCE = Path(__file__).with_name("ClientCalls.java")
CLASS = "undertow.kafka.ClientCalls"
JAVAC_TIMEOUT_S = 120.0
_MARK = ".complete"


def classes(jars: ClientJars) -> Path:
    """The folder of ClientCalls compiled against `jars` (compiled now if it is not yet)."""
    digest = hashlib.sha256(SOURCE.read_bytes() + jars.version.encode()).hexdigest()[:16]
    dest = root() / "calls" / f"{jars.version}-{digest}"
    if (dest / _MARK).exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".compile-", dir=dest.parent) as tmp:
        out = Path(tmp) / "classes"
        cmd = [_javac(), "--release", "11", "-nowarn", "-encoding", "UTF-8",
               "-cp", os.pathsep.join(jars.jars), "-d", str(out), str(SOURCE)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True,
                                  timeout=JAVAC_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as e:
            raise ClientJarsError(f"javac gave no answer in {JAVAC_TIMEOUT_S:.0f} s compiling "
                                  f"{SOURCE.name}") from e
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no output"])[0]
            raise ClientJarsError(f"{SOURCE.name} does not compile against kafka-clients "
                                  f"{jars.version}: {first}")
        (out / _MARK).write_text(digest + "\n")
        if not (dest / _MARK).exists():
            shutil.rmtree(dest, ignore_errors=True)
            try:
                os.replace(out, dest)
            except OSError:  # another process put its copy there first
                if not (dest / _MARK).exists():
                    raise
    return dest


def _javac() -> str:
    """javac of the JDK JPype starts (its libjvm's home), else the one on PATH."""
    import jpype

    try:
        home = Path(jpype.getDefaultJVMPath()).resolve().parents[2]
    except Exception:  # JPype found no JVM: the PATH's javac may still say what is wrong
        home = None
    if home is not None and (home / "bin" / "javac").is_file():
        return str(home / "bin" / "javac")
    found = shutil.which("javac")
    if found is None:
        raise ClientJarsError("javac is not on PATH: --client java needs a JDK (Debian: "
                              "apt-get install default-jdk-headless)")
    return found


def _calls() -> Any:
    from systems.kafka.java import jvm

    return jvm.cls(CLASS)


def send(producer: Any, topic: str, partition: int, value: int) -> int | None:
    """One record sent to `partition` and waited for: its offset (None for acks=0).
    Raises the Java client's exception (an ExecutionException wraps the cause)."""
    offset = int(_calls().send(producer, topic, partition, str(value)))
    return offset if offset >= 0 else None


def records(polled: Any) -> Iterator[tuple[int, int, int]]:
    """A poll's records as (partition, offset, value); a value that is no decimal number
    raises the Java client's NumberFormatException."""
    flat = array.array("q", bytes(memoryview(_calls().flatten(polled))))
    it = iter(flat.tolist())
    return zip(it, it, it, strict=True)


def poll(consumer: Any, wait_ms: int) -> Any:
    """consumer.poll for at most wait_ms."""
    return _calls().poll(consumer, wait_ms)


def assign(consumer: Any, topic: str, partitions: Sequence[int],
           positions: Mapping[int, int]) -> None:
    """The partitions assigned, each at its position, else at its beginning."""
    import jpype

    _calls().assign(consumer, topic, jpype.JArray(jpype.JInt)(list(partitions)),
                    jpype.JArray(jpype.JLong)([positions.get(p, -1) for p in partitions]))
