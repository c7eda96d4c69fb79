"""What every shell-reached node (docker exec, ssh) shares: errors that name the node, tars."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path

from harness.protocols import Exec


class NodeError(RuntimeError):
    """A command on a node failed: names the node, the step and its stderr."""


def check_exec(r: Exec, node: str, what: str) -> Exec:
    if not r.ok:
        raise NodeError(f"{what} on {node} failed (exit {r.returncode}): "
                        f"{(r.stderr or r.stdout).strip()[-800:]}")
    return r


def tar_bytes(files: Mapping[str, bytes | Path], *, mode: int = 0o644) -> bytes:
    """A tar archive (in memory) of name -> content or local path (dirs recurse)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, content in files.items():
            if isinstance(content, Path):
                tf.add(str(content), arcname=name,
                       filter=lambda ti: None if "__pycache__" in ti.name else ti)
            else:
                ti = tarfile.TarInfo(name)
                ti.size = len(content)
                ti.mode = mode
                ti.mtime = int(time.time())
                tf.addfile(ti, io.BytesIO(content))
    return buf.getvalue()
