"""The group operations' shared rules (workloads/groupops.py), over a fake system's port:
what every system's group client does the same way, without a broker."""

from __future__ import annotations

from typing import Any

from harness.runfiles import Op, OpType
from workloads.groupops import Batch, GroupOps, Held
from workloads.spares import Spares

RUN: Any = None  # no run: the fake port needs none


class Refused(Exception):
    pass


class Member:
    def __init__(self, n: int) -> None:
        self.n = n
        self.left: bool | None = None  # None: still in; else left with final
        self.handed: list[dict[int, int]] = []


class Port:
    """A fake system: members numbered as they join; a generation (or none) to stand in."""

    crashed = "crashed: a fake"
    errors = (Refused,)

    def __init__(self, generation: int | None = 3) -> None:
        self.joined = 0
        self.generation = generation
        self.sent: list[dict[int, int]] = []
        self.batches = [Batch({"1": [[4, 40]]}, None, {"generation": 3})]
        self.fail_reads = False
        self.covered: list[Batch] = []
        self.dead: list[Member | None] = []

    def text(self, error: BaseException) -> str:
        return f"FAKE: {error}"

    def join(self, op: Op) -> Member:
        self.joined += 1
        return Member(self.joined)

    def poll(self, member: Member) -> Batch:
        return self.batches.pop(0) if self.batches else Batch({})

    def hand_on(self, member: Member, handed: dict[int, int]) -> None:
        member.handed.append(handed)

    def held(self, member: Member) -> Held:
        return Held(self.generation, [1, 2])

    def commit(self, member: Member, held: Held,
               offsets: dict[int, int]) -> tuple[OpType, str | None]:
        self.sent.append(offsets)
        return "ok", None

    def committed_of(self, keys: list[int]) -> dict[int, int]:
        if self.fail_reads:
            raise Refused("down")
        return {k: 7 for k in keys if k % 2}

    def committed(self) -> dict[str, int]:
        if self.fail_reads:
            raise Refused("down")
        return {"1": 7}

    def leave(self, member: Member, *, final: bool) -> None:
        member.left = final

    def cover(self, member: Member, batch: Batch) -> None:
        self.covered.append(batch)

    def die(self, member: Member | None) -> None:
        self.dead.append(member)


class Inner:
    """The queue client: what the group does not take."""

    def __init__(self) -> None:
        self.ops: list[str] = []

    def open(self, run: Any, node: str) -> Inner:
        return self

    def invoke(self, run: Any, op: Op) -> Op:
        self.ops.append(op.f)
        return op.complete("ok", op.value)

    def close(self, run: Any) -> None:
        pass


def _ops(port: Port, commit: str = "off", offset_ops: bool = False,
         spares: Spares[Member] | None = None) -> tuple[GroupOps[Member], Inner]:
    inner = Inner()
    closed = spares if spares is not None else Spares(lambda m: setattr(m, "left", True))
    return GroupOps(port, inner, closed, commit=commit, offset_ops=offset_ops), inner


def _op(f: str, value: Any = None, **extra: Any) -> Op:
    return Op("invoke", 0, f, value, extra=extra)


def test_a_spare_is_kept_by_a_subscribe_and_left_by_a_rejoin() -> None:
    port = Port()
    spares: Spares[Member] = Spares(lambda m: setattr(m, "left", True))
    a, _ = _ops(port, spares=spares)
    assert a.invoke(RUN, _op("subscribe", [0, 1])).type == "ok"
    first = a.member
    a.park()  # the process ended info
    b, _ = _ops(port, spares=spares)
    assert b.invoke(RUN, _op("subscribe", [0, 1])).type == "ok"
    assert b.member is first and port.joined == 1
    b.park()
    c, _ = _ops(port, spares=spares)
    assert c.invoke(RUN, _op("subscribe", [0, 1], rejoin=True)).type == "ok"
    assert first is not None and first.left is False and c.member is not first
    assert port.joined == 2


def test_assign_ends_the_membership_and_the_final_one_reads_the_committed_offsets() -> None:
    port = Port()
    ops, inner = _ops(port)
    ops.invoke(RUN, _op("subscribe", [0, 1]))
    m = ops.member
    done = ops.invoke(RUN, _op("assign", [2]))
    assert done.type == "ok" and m is not None and m.left is False and ops.member is None
    ops.invoke(RUN, _op("subscribe", [0, 1]))
    m = ops.member
    spare = Member(99)
    ops.spares.put(spare)
    done = ops.invoke(RUN, _op("assign", [], fetch_committed=True))
    assert done.type == "ok" and done.extra["committed"] == {"1": 7}
    assert m is not None and m.left is True and spare.left is True
    assert inner.ops == ["assign", "assign"]
    port.fail_reads = True
    failed = ops.invoke(RUN, _op("assign", [], fetch_committed=True))
    assert (failed.type, failed.error) == ("fail", "committed offsets: FAKE: down")
    assert inner.ops == ["assign", "assign"]


def test_a_commit_is_refused_unsent_unless_the_member_stands_where_its_polls_did() -> None:
    port = Port(generation=3)
    ops, _ = _ops(port, offset_ops=True)
    early = ops.invoke(RUN, _op("commit", [["commit", {"1": 5}]], generation=3))
    assert (early.type, early.error) == ("fail", "not subscribed: no membership to commit for")
    ops.invoke(RUN, _op("subscribe", [0, 1]))
    moved = ops.invoke(RUN, _op("commit", [["commit", {"1": 5}]], generation=2))
    assert moved.type == "fail" and moved.error == \
        "the group moved on from generation 2 (now 3): nothing sent"
    assert ops.invoke(RUN, _op("commit", [["commit", {"1": 5}]], generation=3)).type == "ok"
    assert port.sent == [{1: 5}]
    port.generation = None  # a client that names no generation: the keys it held
    held = ops.invoke(RUN, _op("commit", [["commit", {"1": 6}]], held=[2]))
    assert held.type == "fail" and "moved on from keys [2] (now [1, 2])" in (held.error or "")
    assert ops.invoke(RUN, _op("commit", [["commit", {"1": 6}]], held=[1, 2])).type == "ok"
    assert port.sent == [{1: 5}, {1: 6}]


def test_committed_is_a_read_whose_error_is_a_fail() -> None:
    port = Port()
    ops, _ = _ops(port)
    done = ops.invoke(RUN, _op("committed", [["committed", [0, 1]]]))
    assert done.type == "ok" and done.value == [["committed", {"0": None, "1": 7}]]
    port.fail_reads = True
    failed = ops.invoke(RUN, _op("committed", [["committed", [0, 1]]]))
    assert (failed.type, failed.error) == ("fail", "committed offsets: FAKE: down")


def test_a_crash_dies_holding_a_batch_covered_only_with_auto() -> None:
    for commit, covered in (("auto", 1), ("processed", 0)):
        port = Port()
        ops, _ = _ops(port, commit=commit)
        ops.invoke(RUN, _op("subscribe", [0, 1]))
        m = ops.member
        done = ops.invoke(RUN, _op("crash"))
        assert (done.type, done.error) == ("info", "crashed: a fake")
        assert len(port.covered) == covered and port.dead == [m] and ops.member is None
    port = Port()
    ops, _ = _ops(port)
    assert ops.invoke(RUN, _op("crash")).type == "info" and port.dead == [None]


def test_processed_hands_a_polls_records_on_at_the_next_operation() -> None:
    port = Port()
    ops, inner = _ops(port, commit="processed")
    ops.invoke(RUN, _op("subscribe", [0, 1]))
    m = ops.member
    assert m is not None
    polled = ops.invoke(RUN, _op("poll", [["poll"]]))
    assert polled.value == [["poll", {"1": [[4, 40]]}]]
    assert polled.extra == {"generation": 3, "assignment": [1, 2]}  # the keys it held
    assert m.handed == [{}]  # at the poll: nothing handed on yet
    ops.invoke(RUN, _op("send", [["send", 1, 41]]))
    assert m.handed == [{}, {1: 5}] and inner.ops == ["send"]
    port.batches = [Batch({}, "FAKE: gone", {"assignment": [2]})]  # a batch that names them
    failed = ops.invoke(RUN, _op("poll", [["poll"]]))
    assert (failed.type, failed.value, failed.error) == ("fail", [["poll"]], "FAKE: gone")
    assert failed.extra == {"assignment": [2]}
    for offset_ops in (True, False):  # commits as operations, or not `processed`: never
        other, _ = _ops(Port(), commit="processed" if offset_ops else "auto",
                        offset_ops=offset_ops)
        other.invoke(RUN, _op("subscribe", [0, 1]))
        other.invoke(RUN, _op("poll", [["poll"]]))
        other.invoke(RUN, _op("send", [["send", 1, 41]]))
        assert other.member is not None and other.member.handed == []
