"""Class-data-sharing archives for the JVMs Undertow starts: the rules every archive obeys.

A JVM's start spends seconds of CPU loading, parsing and verifying the same classes each
time. JDK 17 maps them from an archive an earlier JVM dumped at its exit
(`-XX:ArchiveClassesAtExit`, then `-XX:SharedArchiveFile`). An archive is valid only for
the JDK and the class path it was dumped from, so each is named by a key over both; the
JVM ignores one that does not match (the default `-Xshare:auto`), and `QUIET` keeps it
from saying so. Two owners use these rules: checkers/spark_cds.py (the cold Spark
driver) and systems/kafka/cds.py (a Kafka release's brokers and tools).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

# a missing, stale or broken archive is a warning on stderr: silence all CDS logging
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off", "-Xlog:class+path=off")
ARCHIVE_OPTION = "-XX:SharedArchiveFile="
DUMP_OPTION = "-XX:ArchiveClassesAtExit="


def java_binary(java: str | None = None) -> Path | None:
    """The java a launcher runs: `java` when given (a path or a name on PATH), else
    $JAVA_HOME/bin/java, else the one on PATH; resolved through links (the key names the
    real JDK)."""
    if java is not None:
        found = shutil.which(java) or java
    else:
        home = os.environ.get("JAVA_HOME")
        found = str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_key(java: Path, class_path: Iterable[Path], flags: str) -> str | None:
    """A key over the JDK (its binary and modules file), the JVM flags the archive is dumped
    under, and every class-path file's name, size and modification time; None when one of
    them cannot be read."""
    h = hashlib.sha256(f"{java}\n{flags}\n".encode())
    jdk = java.parent.parent
    try:
        for f in [jdk / "lib" / "modules", *class_path]:
            st = f.stat()
            h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    except OSError:
        return None
    return h.hexdigest()[:20]


def publish(dumped: Path, final: Path, pattern: str) -> None:
    """Rename the archive a JVM dumped into place (a reader never sees half of one), then
    remove the folder's other archives matching `pattern` (stale keys)."""
    if not dumped.is_file() or dumped.stat().st_size == 0:
        raise RuntimeError(f"the JVM wrote no class-data archive at {dumped}")
    os.replace(dumped, final)
    for old in final.parent.glob(pattern):
        if old != final:
            old.unlink(missing_ok=True)


def log_option(path: Path) -> str:
    """The JVM option that writes its class-data-sharing decisions (mapped, or why not) to
    `path` instead of stderr: a JVM that declines an archive says why there."""
    return f"-Xlog:cds*=info,class+path=info:file={path}"


def use_options(archive: Path) -> tuple[str, ...]:
    """The JVM options that map `archive` (ignored by the JVM when it does not match)."""
    return (f"{ARCHIVE_OPTION}{archive}", *QUIET)
