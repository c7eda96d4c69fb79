"""The live status line's faults in force, and the count of faults that did not land."""

from __future__ import annotations

from harness.faultkinds import KILL, PAUSE
from harness.inforce import InForce
from harness.runfiles import NEMESIS, Op


def _done(f: str, nodes: list[str], **extra: object) -> Op:
    return Op(type="info", process=NEMESIS, f=f, value={"nodes": nodes}, extra=extra)


def test_kills_in_force_and_misses_counted() -> None:
    status = InForce([KILL, PAUSE])
    status.record(_done("kill", ["n1"], landed=True, evidence="n1: pid 7 gone"))
    assert status.text() == {"kill": "n1"}
    status.record(_done("pause", ["n2"], landed=False, evidence="n2: no process to pause"))
    status.record(_done("kill", ["n3"]))  # no claim: not a miss
    assert status.text() == {"kill": "n1,n3", "pause": "n2",
                             "DID NOT LAND": "1 (last: pause n2)"}
    status.record(_done("start", []))
    status.record(_done("resume", []))
    assert status.text() == {"DID NOT LAND": "1 (last: pause n2)"}
