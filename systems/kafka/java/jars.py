"""Kafka's Java client (`org.apache.kafka:kafka-clients`) from Maven Central, cached per version.

As the broker's jars (systems/kafka/jars.py, whose cache root this shares): Maven's
`dependency:copy-dependencies` runs on the small pom beside this module in a scratch
folder, the jars go to <cache>/clients/<version>/libs, and a `.complete` marker
holding the pom's digest makes a folder usable. With no version asked for, the
client follows the broker: its release when that is 4.x, else the newest 4.x.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from systems.kafka import jars as broker_jars

POM = Path(__file__).with_name("pom.xml")
NEWEST = "[4.0.0,5.0.0)"  # the newest 4.x release
MVN_TIMEOUT_S = 600.0
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_CLIENT_JAR = re.compile(r"kafka-clients-(\d+\.\d+\.\d+)\.jar")
_MARK = ".complete"


class ClientJarsError(RuntimeError):
    """The client's jars cannot be had: one line saying what was asked and why."""


@dataclass(frozen=True, slots=True)
class ClientJars:
    version: str
    libs: Path

    @property
    def jars(self) -> list[str]:
        return sorted(str(p) for p in self.libs.glob("*.jar"))


def root() -> Path:
    return broker_jars.cache_root() / "clients"


def _digest() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()[:16]


def _complete(libs: Path) -> bool:
    try:
        return (libs / _MARK).read_text().split()[-1] == _digest()
    except (OSError, IndexError):
        return False


def default_version(broker_version: str | None) -> str | None:
    """The broker's release when it is 4.x or later; None (the newest 4.x) otherwise."""
    if broker_version is not None:
        m = _VERSION.fullmatch(broker_version.strip())
        if m is not None and int(m[1]) >= 4:
            return broker_version.strip()
    return None


def _newest_cached(where: Path) -> ClientJars | None:
    found = sorted((tuple(int(x) for x in m.groups()), d.name)
                    for d in (where.iterdir() if where.is_dir() else ())
                    if (m := _VERSION.fullmatch(d.name)) and int(m[1]) == 4
                    and _complete(d / "libs"))
    return ClientJars(found[-1][1], where / found[-1][1] / "libs") if found else None


def resolve(version: str | None = None) -> ClientJars:
    """kafka-clients at `version` (None: the newest 4.x), from the cache or from Maven."""
    where = root()
    if version is not None:
        if _VERSION.fullmatch(version.strip()) is None:
            raise ClientJarsError(f"--kafka-client-version: {version!r} is not a release "
                                  "number like 4.1.1")
        libs = where / version / "libs"
        if _complete(libs):
            return ClientJars(version, libs)
    elif (hit := _newest_cached(where)) is not None:
        return hit
    return _mvn(version or NEWEST, where)


def _mvn(wanted: str, where: Path) -> ClientJars:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ClientJarsError("mvn is not on PATH: install Maven (Debian: apt-get install "
                              "maven) to fetch Kafka's Java client from Maven Central")
    where.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".resolve-", dir=where) as tmp:
        work = Path(tmp)
        shutil.copy2(POM, work / "pom.xml")
        out = work / "libs"
        cmd = [mvn, "-q", "-B", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={out}",
               f"-Dkafka.client.version={wanted}"]
        try:
            done = subprocess.run(cmd, cwd=work, capture_output=True, text=True,
                                  timeout=MVN_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as e:
            raise ClientJarsError(f"--kafka-client-version {wanted}: Maven gave no answer in "
                                  f"{MVN_TIMEOUT_S:.0f} s") from e
        found = [m[1] for p in out.glob("kafka-clients-*.jar")
                 if (m := _CLIENT_JAR.fullmatch(p.name))] if done.returncode == 0 else []
        if not found:
            raise ClientJarsError(f"--kafka-client-version {wanted}: "
                                  f"org.apache.kafka:kafka-clients:{wanted} does not resolve "
                                  "on Maven Central")
        version = found[0]
        (out / _MARK).write_text(f"{version} {_digest()}\n")
        dest = where / version / "libs"
        dest.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if not _complete(dest):
                shutil.rmtree(dest)
        if not dest.exists():
            os.replace(out, dest)
    return ClientJars(version, dest)
