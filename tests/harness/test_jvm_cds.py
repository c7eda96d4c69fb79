"""The key that names a JVM class-data archive (harness.jvm_cds): it changes with whatever
the JVM would refuse the archive for."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness.jvm_cds import archive_key


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH")
def test_the_key_follows_the_jdk_the_flags_and_every_jar(tmp_path: Path) -> None:
    java = Path(shutil.which("java") or "java").resolve()
    jars = [tmp_path / "a.jar", tmp_path / "b.jar"]
    for j in jars:
        j.write_bytes(b"x")
    key = archive_key(java, jars, "-Xmx1g")
    assert key is not None and key == archive_key(java, jars, "-Xmx1g")
    assert archive_key(java, jars, "-Xmx2g") != key
    assert archive_key(java, jars[:1], "-Xmx1g") != key
    os.utime(jars[1], (1, 1))
    assert archive_key(java, jars, "-Xmx1g") != key
    assert archive_key(java, [tmp_path / "gone.jar"], "-Xmx1g") is None
