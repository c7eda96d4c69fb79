"""Kafka's jars from Maven Central, resolved once into a versioned cache folder.

`mvn dependency:copy-dependencies` runs on the pom kept beside this module
(copied into a scratch folder, so the source tree stays clean) and the jars go
to <cache>/<version>/libs. A folder is complete once its `.complete` marker is
written, so a resolution cut short is redone, never half used; the marker holds
the digest of the pom it was resolved with, so a changed pom resolves again. The
pom is this folder's, adapted to the release by systems/kafka/releases.py (its
Scala build, the jars newer JDKs dropped): unchanged for 3.9 and later. Two
processes may resolve one release at once: each works in a scratch folder and the
first rename wins. With no version asked for, the newest complete 4.x in the cache
is used, else Maven resolves the newest 4.x release it can reach.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from systems.kafka import releases
from systems.kafka.releases import ReleaseError

POM = Path(__file__).with_name("pom.xml")
CACHE_ENV = "UNDERTOW_KAFKA_CACHE"
DEFAULT_RANGE = "[4.0.0,5.0.0)"  # the newest 4.x release
MVN_TIMEOUT_S = 900.0
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_CORE_JAR = re.compile(r"kafka_2\.1[123]-(\d+(?:\.\d+){2,3})\.jar")
_MARK = ".complete"


class KafkaJarsError(RuntimeError):
    """Kafka's jars cannot be had: says what was asked and what Maven printed."""


@dataclass(frozen=True, slots=True)
class KafkaJars:
    """One Kafka version's runtime jars."""

    version: str
    libs: Path
    seconds: float = 0.0  # time spent resolving (0 when cached)
    cached: bool = True

    @property
    def classpath(self) -> str:
        return f"{self.libs}/*"


def cache_root() -> Path:
    """$UNDERTOW_KAFKA_CACHE, else $XDG_CACHE_HOME/undertow/kafka, else ~/.cache/undertow/kafka."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "undertow" / "kafka"


def parse_version(version: str) -> tuple[int, ...]:
    """'4.1.1' -> (4, 1, 1); a clear error for anything else or anything before 0.10.2."""
    try:
        return releases.release(version).parts
    except ReleaseError as e:
        raise KafkaJarsError(str(e)) from None


def pom_text(version: str | None = None) -> str:
    """The pom a release resolves with: this folder's, with the release's Scala build and
    the jars newer JDKs dropped (log4j 1 releases bring their own slf4j binding)."""
    text = POM.read_text()
    if version is None or not releases.is_release(version):
        return text  # the default range: the newest 4.x
    try:
        era = releases.release(version).era
    except ReleaseError:
        return text
    text = text.replace("<artifactId>kafka_2.13</artifactId>",
                        f"<artifactId>kafka_{era.scala}</artifactId>")
    deps = "".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>\n"
        for g, a, v in (j.split(":") for j in era.extra_jars))
    if era.log4j1:  # the release's slf4j-log4j12 binds slf4j; a second binding would race it
        start = text.index("    <!-- a logger behind slf4j-api")
        text = text[:start] + text[text.index("</dependency>", start) + 14:]
    return text.replace("  </dependencies>", deps + "  </dependencies>")


def pom_digest(version: str | None = None) -> str:
    return hashlib.sha256(pom_text(version).encode()).hexdigest()[:16]


def _is_complete(libs: Path) -> bool:
    try:
        return (libs / _MARK).read_text().split()[-1] == pom_digest(libs.parent.name)
    except (OSError, IndexError):
        return False


def _complete(root: Path, version: str) -> KafkaJars | None:
    libs = root / version / "libs"
    return KafkaJars(version, libs) if _is_complete(libs) else None


def cached(root: Path | None = None) -> list[KafkaJars]:
    """Every complete release in the cache, oldest first."""
    root = root or cache_root()
    found = [j for d in (root.iterdir() if root.is_dir() else ())
             if releases.is_release(d.name) and (j := _complete(root, d.name)) is not None]
    return sorted(found, key=lambda j: releases.parse(j.version))


def newest_cached(root: Path | None = None, major: int = 4) -> KafkaJars | None:
    """The newest complete cached release of that major version, if any."""
    root = root or cache_root()
    found: list[tuple[tuple[int, int, int], str]] = []
    for d in root.iterdir() if root.is_dir() else ():
        m = _VERSION.fullmatch(d.name)
        if m and int(m[1]) == major and _is_complete(d / "libs"):
            found.append(((int(m[1]), int(m[2]), int(m[3])), d.name))
    if not found:
        return None
    return KafkaJars(max(found)[1], root / max(found)[1] / "libs")


def resolve(version: str | None = None, *, root: Path | None = None,
            progress: Callable[[str], None] | None = None) -> KafkaJars:
    """Kafka's jars for `version` (None: the newest 4.x), from the cache or from Maven."""
    root = root or cache_root()
    if version is not None:
        parse_version(version)
        hit = _complete(root, version)
    else:
        hit = newest_cached(root)
    if hit is not None:
        return hit
    try:
        return _mvn_resolve(version or DEFAULT_RANGE, root, progress)
    except KafkaJarsError as e:
        if version is None:
            raise
        near = [v for v in releases.nearest(version, count=4) if v != version][:3]
        raise KafkaJarsError(f"--kafka-version {version}: does not resolve from Maven Central "
                             f"(nearest releases that do: {', '.join(near)})") from e


def _mvn_resolve(wanted: str, root: Path, progress: Callable[[str], None] | None) -> KafkaJars:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaJarsError("mvn is not on PATH: install Maven (Debian: apt-get install maven) "
                             "to fetch Kafka's jars from Maven Central")
    root.mkdir(parents=True, exist_ok=True)
    pom = pom_text(None if wanted == DEFAULT_RANGE else wanted)
    artifact = re.search(r"<artifactId>(kafka_2\.1\d)</artifactId>", pom)
    if progress:
        progress(f"resolving org.apache.kafka:{artifact[1] if artifact else 'kafka'}:{wanted} "
                 f"with Maven into {root}")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=".resolve-", dir=root) as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(pom)
        out = work / "libs"
        cmd = [mvn, "-q", "-B", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={out}",
               f"-Dkafka.version={wanted}"]
        try:
            done = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                                  timeout=MVN_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as e:
            raise KafkaJarsError(f"{' '.join(cmd)}: no answer in {MVN_TIMEOUT_S:.0f} s") from e
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip()[-2000:]
            raise KafkaJarsError(f"Kafka {wanted} did not resolve: {' '.join(cmd)} exited "
                                 f"{done.returncode}:\n{tail}")
        version = _core_version(out)
        (out / _MARK).write_text(f"{version} {pom_digest(version)}\n")
        dest = root / version / "libs"
        dest.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if not _is_complete(dest):
                shutil.rmtree(dest)  # a cut-short earlier try, or an older pom's
        if not dest.exists():
            with contextlib.suppress(OSError):  # another process renamed its copy first
                os.replace(out, dest)
        if not _is_complete(dest):
            raise KafkaJarsError(f"Kafka {version}: {dest} is not complete after resolving")
    jars = KafkaJars(version, dest, seconds=time.monotonic() - t0, cached=False)
    if progress:
        progress(f"Kafka {version}: {len(list(dest.glob('*.jar')))} jars in {jars.seconds:.1f} s")
    return jars


def _core_version(libs: Path) -> str:
    for p in libs.glob("kafka_2.1*-*.jar"):
        m = _CORE_JAR.fullmatch(p.name)
        if m:
            return m[1]
    raise KafkaJarsError(f"Maven finished but {libs} holds no kafka_2.1x jar")
