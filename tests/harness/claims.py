"""The nemesis's claims, asserted alike on every backend: each fault's `landed` and
evidence, read on the node itself, and the faults that cannot land saying so. Shared by
the local, docker and ssh backend tests (on their clusters of our broker), the Kafka
tests, and Kafka's runs on each backend (from their histories)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from harness.protocols import Run
from harness.runfiles import NEMESIS, Op
from nemesis.compose import compose
from nemesis.faults import Clock, Kill, Pause
from nemesis.netfaults import Partition

Invoke = Callable[[str, dict[str, Any]], Op]


def _invoker(run: Run, *nemeses: Any) -> Invoke:
    """The nemeses composed and set up on run, invoked as the run invokes them."""
    nem = compose(*nemeses)
    nem.setup(run)

    def inv(f: str, value: dict[str, Any]) -> Op:
        out: Op = nem.invoke(run, Op(type="invoke", process=NEMESIS, f=f, value=value))
        return out

    return inv


def assert_node_faults_say_whether_they_landed(run: Run, *, paused_shows: str) -> None:
    """kill, start, pause and resume on n2 and n3 of a running cluster, as the nodes' hosts
    show them, and the misses that say why (a kill of a node already down, a pause of a
    process that exited); `paused_shows` is how the backend sees a paused broker (the end
    of its evidence: its cgroup frozen, or its threads stopped)."""
    op = _invoker(run, Kill(1), Pause(1))

    def inv(f: str, value: dict[str, Any]) -> dict[str, Any]:
        return dict(op(f, value).extra)

    killed = inv("kill", {"nodes": ["n3"]})
    assert killed["landed"] is True and killed["evidence"].endswith(" gone"), killed
    again = inv("kill", {"nodes": ["n3"]})
    assert again["landed"] is False
    assert again["evidence"].startswith("n3: nothing to kill: no live process on n3"), again
    empty = inv("pause", {"nodes": ["n3"]})
    assert empty["landed"] is False and "no process to pause" in empty["evidence"], empty
    inv("resume", {})
    started = inv("start", {})
    assert started["landed"] is True and "n3: new pid " in started["evidence"], started
    paused = inv("pause", {"nodes": ["n2"]})
    assert paused["landed"] is True and re.search(paused_shows + "$", paused["evidence"]), paused
    resumed = inv("resume", {})
    assert resumed["landed"] is True and resumed["evidence"].endswith("running again"), resumed


def assert_faults_say_whether_they_landed(run: Run, *, paused_shows: str,
                                          clock: bool = True) -> None:
    """The node faults above, then a partition and its heal, probed from inside the nodes,
    and (with `clock`) a clock bump and reset read back from the broker."""
    assert_node_faults_say_whether_they_landed(run, paused_shows=paused_shows)
    inv = _invoker(run, Partition(1), Clock(1))
    cut = dict(inv("partition", {"grudge": {"n1": ["n2"]}}).extra)  # probed from inside n1
    assert cut == {"landed": True, "evidence": "n1->n2 dropped"}, cut
    healed = dict(inv("heal", {}).extra)
    assert healed == {"landed": True, "evidence": "n1->n2 flowing"}, healed
    if clock:
        assert_clock_faults_land(inv, slack_s=0.05)


def assert_clock_faults_land(invoke: Invoke, *,
                             slack_s: float) -> None:
    """clock-bump of n2, clock-skew of every node and clock-reset, each read back from the
    broker (the admin `clock` request) within the reading's own uncertainty plus slack_s;
    a second reset has nothing to undo and makes no claim."""
    bump = invoke("clock-bump", {"nodes": ["n2"], "delta_ns": 3_000_000_000})
    assert bump.extra["landed"] is True, bump.extra
    read = re.match(r"n2: clock reads ([+-][\d.]+) s against the harness's \(±([\d.]+) s\)",
                    bump.extra["evidence"])
    assert read is not None, bump.extra["evidence"]
    assert abs(float(read[1]) - 3.0) <= float(read[2]) + slack_s
    assert bump.extra["evidence"].endswith("offset +3.000 s in force, +3.000 s asked")
    skew = invoke("clock-skew", {})
    nodes = set(skew.value["offsets_ns"])
    assert skew.extra["landed"] is True
    assert skew.extra["evidence"].count("clock reads") == len(nodes), skew.extra
    reset = invoke("clock-reset", {})
    assert reset.extra["landed"] is True and reset.extra["evidence"].count(
        "offset +0.000 s in force, +0.000 s asked") == len(nodes), reset.extra
    assert "landed" not in invoke("clock-reset", {}).extra  # nothing to undo


def assert_each_fault_landed(history: str, verbs: tuple[str, ...]) -> None:
    """In a run's history.jsonl text: each verb's completions landed at least once, with
    evidence; every one that did not says why; no completion of the run's faults makes no
    claim (the backend and system observe every one of them)."""
    done = [o for o in map(json.loads, history.splitlines())
            if o["process"] == NEMESIS and o["type"] != "invoke" and o["f"] in verbs]
    for verb in verbs:
        ops = [o for o in done if o["f"] == verb]
        assert any(o.get("landed") is True and o.get("evidence") for o in ops), (verb, ops)
    assert all("landed" in o and o.get("evidence") for o in done if not o.get("final")), done


def assert_lose_unflushed_lands(run: Run) -> None:
    """Three acks=all writes (on every replica, in no file's flushed part yet), then a
    lose-unflushed of n3: its kill, the bytes each file lost, its start, all seen; n3 serves
    again."""
    from nemesis.faults import LoseUnflushed
    from systems.undertow.client import BrokerClient

    cl = BrokerClient(run.client_addrs, timeout_s=10)
    try:
        for v in range(3):
            cl.produce(1, 9_000_000 + v, acks="all")
    finally:
        cl.close()
    out = _invoker(run, LoseUnflushed(1))("lose-unflushed", {"nodes": ["n3"]})
    assert out.value["nodes"] == ["n3"] and out.extra["landed"] is True, out
    cut = re.search(r"^n3: pid \d+ gone; n3: ([\d,]+) B cut from \d+ files? \((.+?)\); "
                    r"n3: new pid \d+ serves$", out.extra["evidence"])
    assert cut is not None, out.extra["evidence"]
    assert int(cut[1].replace(",", "")) > 0 and ".log " in cut[2], cut[0]
