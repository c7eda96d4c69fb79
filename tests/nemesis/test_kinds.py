"""Each fault kind, declared once in harness.faultkinds, shows under that declaration in the
live status line and in the report's lanes.

The real nemesis package injects each kind through the real interpreter, which
writes a real history; the status line is read while the fault is in force and
after its stop, and the report is rendered from that history. The cluster is a
toy one written here (node states in memory), since what is under test is the
vocabulary, not what a kill does to a broker (tests/nemesis/test_faults_local.py).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from harness import generator as g
from harness.faultkinds import KINDS, PARTITION, FaultKind, kinds_json, verbs
from harness.interpreter import Interpreter, Stats
from harness.protocols import Client, Grudge, Run
from harness.report.faults import UNKNOWN_COLOUR, fault_windows, run_kinds
from harness.report.render import render_run
from harness.report.scan import scan
from harness.runfiles import NEMESIS, HistoryWriter, Op, RunPaths
from harness.spec import build_spec
from nemesis.packages import nemesis_package

NODES = ("n1", "n2", "n3")
CUT = {"n2": ["n1", "n3"], "n1": ["n2"], "n3": ["n2"]}  # n2 alone
EVERY = ("kill", "pause", "partition", "slow", "lossy", "clock", "lose-unflushed")


class ToyCluster:
    """Node states in memory, with every ability the nemesis asks for. A gate, when
    set, holds lose_unflushed until released, so a test can look mid-op."""

    def __init__(self) -> None:
        self.state: dict[str, set[str]] = {n: set() for n in NODES}
        self.links: dict[str, Any] = {}
        self.gate: threading.Event | None = None
        self.inside = threading.Event()

    def setup(self, run: Run, node: str) -> None: ...
    def teardown(self, run: Run, node: str) -> None: ...
    def wait_ready(self, run: Run, timeout_s: float) -> None: ...

    def kill(self, run: Run, node: str) -> None:
        self.state[node].add("down")

    def start(self, run: Run, node: str) -> None:
        self.state[node].discard("down")

    def pause(self, run: Run, node: str) -> None:
        self.state[node].add("paused")

    def resume(self, run: Run, node: str) -> None:
        self.state[node].discard("paused")

    def shift_clock(self, run: Run, node: str, delta_ns: int) -> None:
        self.state[node].add("clock")

    def reset_clock(self, run: Run, node: str) -> None:
        self.state[node].discard("clock")

    def lose_unflushed(self, run: Run, node: str) -> None:
        self.inside.set()
        if self.gate is not None:
            assert self.gate.wait(10), "the test never released lose_unflushed"

    def partition(self, run: Run, grudge: Grudge) -> None:
        self.links["grudge"] = grudge

    def heal(self, run: Run) -> None:
        self.links.pop("grudge", None)

    def slow(self, run: Run, nodes: Collection[str], delay_ms: float, jitter_ms: float) -> None:
        self.links["slow"] = set(nodes)

    def lossy(self, run: Run, nodes: Collection[str], drop_probability: float) -> None:
        self.links["lossy"] = set(nodes)

    def fast(self, run: Run) -> None:
        self.links.pop("slow", None)
        self.links.pop("lossy", None)


def no_client(thread: int) -> Client:
    raise AssertionError("no client op was planned")


def start_value(kind: FaultKind) -> dict[str, Any]:
    return {"grudge": CUT} if kind.aims == "grudge" else {"nodes": ["n2"]}


def inject(tmp_path: Path, kind: FaultKind) -> tuple[dict[str, str], dict[str, str], Path]:
    """Start then stop `kind` on n2 through the real package nemesis and interpreter;
    the status line's faults while in force and after, and the run folder."""
    spec = build_spec({"nemesis": EVERY, "keys": 4})
    toy = ToyCluster()
    run = Run(spec=spec, nodes=NODES, paths=RunPaths(tmp_path), log=logging.getLogger("kinds"),
              db=toy, net=toy)
    nem = nemesis_package(spec).nemesis.setup(run)
    history = HistoryWriter(tmp_path / "history.jsonl")
    stats = Stats()
    interp = Interpreter(run, history, concurrency=1, open_client=no_client, nemesis=nem,
                         seed=1, stats=stats)
    try:
        if kind.stop is not None:
            interp.run(g.nemesis(g.op(kind.start, start_value(kind))))
            during = stats.snapshot()[1]
            interp.run(g.nemesis(g.op(kind.stop, {})))
        else:  # an instant: in force while its op runs
            toy.gate = threading.Event()
            t = threading.Thread(target=interp.run,
                                 args=(g.nemesis(g.op(kind.start, start_value(kind))),))
            t.start()
            assert toy.inside.wait(10)
            during = stats.snapshot()[1]
            toy.gate.set()
            t.join(10)
        after = stats.snapshot()[1]
    finally:
        interp.close()
        history.close()
        nem.teardown(run)
    assert all(not s for s in toy.state.values()) and not toy.links, "the stop healed it"
    return during, after, tmp_path


@pytest.mark.parametrize("kind", KINDS, ids=[k.start for k in KINDS])
def test_each_kind_shows_in_the_status_line_and_the_report_lanes_as_declared(
        tmp_path: Path, kind: FaultKind) -> None:
    during, after, run_dir = inject(tmp_path, kind)
    # the live status line: the kind's label, with the node it hit, then nothing
    assert list(during) == [kind.label]
    assert "n2" in during[kind.label]
    if kind.aims == "grudge":
        assert "n2xn1,n3" in during[kind.label]
    assert after == {}
    # the report's lane: one window per node hit, from the start to the stop, in the colour
    ops = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    assert all(o["process"] == NEMESIS and o.get("error") is None for o in ops)
    inv = next(o for o in ops if o["f"] == kind.start and o["type"] == "invoke")
    end = next(o for o in reversed(ops) if o["f"] == kind.ends and o["type"] == "info")
    hit = ["n1", "n2", "n3"] if kind.aims == "grudge" else ["n2"]
    assert [(w.node, w.kind, w.start_ns, w.end_ns, w.colour, w.label)
            for w in scan(ops).faults] == [
        (n, kind.start, inv["time"], end["time"], kind.colour, kind.label) for n in hit]
    html = render_run(run_dir).read_text()
    for n in hit:
        lane = (f'fill="{kind.colour}" opacity="0.8" class="fault">'
                f'<title>{kind.label} {n}</title>')
        assert lane in html
    assert f'class="fault"><title>{kind.label} n2</title>' in html


def test_every_declared_kind_has_a_nemesis_and_every_nemesis_verb_a_kind() -> None:
    nem = nemesis_package(build_spec({"nemesis": EVERY})).nemesis
    assert set(nem.kinds) == set(KINDS)
    assert nem.fs == verbs(KINDS)
    starts = [k.start for k in KINDS]
    assert len(starts) == len(set(starts)) and len({k.label for k in KINDS}) == len(KINDS)


def test_a_run_folder_draws_with_the_kinds_its_test_json_recorded(tmp_path: Path) -> None:
    recorded = [*kinds_json((PARTITION,)), {"start": "bitflip", "stop": "unflip",
                                            "colour": "#123456", "label": "bit flip"},
                {"start": "kill", "stop": "start", "colour": "red\" onload=\"x"}]
    kinds = run_kinds({"fault_kinds": recorded})
    assert kinds[:2] == (PARTITION, FaultKind("bitflip", "unflip", "#123456", "bit flip"))
    assert [k.start for k in kinds[2:]] == [k.start for k in KINDS if k is not PARTITION]
    ops = [(0, "bitflip", {"nodes": ["n1"]}, 10, 11), (2, "unflip", {}, 20, 21),
           (4, "mystery", {}, 30, 31)]
    windows = fault_windows(ops, 100, kinds)
    assert [(w.node, w.kind, w.start_ns, w.end_ns, w.colour, w.label) for w in windows] == [
        ("n1", "bitflip", 10, 21, "#123456", "bit flip"),
        ("all", "mystery", 30, 31, UNKNOWN_COLOUR, "")]
    # a history from another tool (no test.json) still pairs the contract's verbs
    assert [k.start for k in run_kinds(None)] == [k.start for k in KINDS]


def test_an_ill_formed_recorded_kind_is_named() -> None:
    with pytest.raises(ValueError, match=r"'kill'.*colour"):
        FaultKind.from_json({"start": "kill", "stop": "start", "colour": "url(x)"})
    with pytest.raises(ValueError, match="start"):
        FaultKind.from_json({"stop": "start", "colour": "red"})
    assert FaultKind.from_json(PARTITION.to_json()) == PARTITION


def test_the_status_line_reads_only_the_declared_kinds() -> None:
    stats = Stats()
    stats.declare(KINDS)
    kill = Op(type="info", process=NEMESIS, f="kill", value={"nodes": ["n1", "n3"]})
    stats.record(kill)
    stats.record(kill.with_(f="clock-bump", value={"nodes": ["n2"]}))
    stats.record(kill.with_(f="bitflip", value={"nodes": ["n2"]}))  # no kind: not a fault here
    assert stats.snapshot()[1] == {"kill": "n1,n3", "clock bump": "n2"}
    stats.record(kill.with_(f="start", value={"nodes": ["n1"]}))  # ends n1's kill only
    assert stats.snapshot()[1] == {"kill": "n3", "clock bump": "n2"}
    stats.record(kill.with_(f="clock-reset", value={}))
    assert stats.snapshot()[1] == {"kill": "n3"}
