"""LocalRemote: commands run in the node's folder; timeouts and missing programs are answers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.control.local import LocalRemote, free_port


def test_exec_upload_download(tmp_path: Path) -> None:
    dirs = {"n1": tmp_path / "n1", "n2": tmp_path / "n2"}
    for d in dirs.values():
        d.mkdir()
    remote = LocalRemote(dirs, {"UNDERTOW_TEST": "yes"})
    r = remote.exec("n1", [sys.executable, "-c",
                           "import os; print(os.getcwd(), os.environ['UNDERTOW_TEST'])"])
    assert r.ok and r.stdout.split() == [str(dirs["n1"]), "yes"]
    bad = remote.exec("n2", [sys.executable, "-c", "import sys; sys.exit('boom')"])
    assert bad.returncode == 1 and "boom" in bad.stderr
    slow = remote.exec("n1", [sys.executable, "-c", "import time; time.sleep(5)"], timeout_s=0.3)
    assert slow.returncode == 124 and "timed out" in slow.stderr
    missing = remote.exec("n1", ["/no/such/program"])
    assert missing.returncode == 127
    src = tmp_path / "f.txt"
    src.write_text("hello")
    remote.upload("n2", src, "sub/f.txt")
    assert (dirs["n2"] / "sub" / "f.txt").read_text() == "hello"
    remote.download("n2", "sub/f.txt", tmp_path / "back" / "f.txt")
    assert (tmp_path / "back" / "f.txt").read_text() == "hello"
    with pytest.raises(KeyError, match="no node 'n9'"):
        remote.exec("n9", ["true"])


def test_free_ports_are_distinct_and_below_the_ephemeral_range() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(10_000 <= p < low for p in ports)
