"""Group-level delivery from a hand-written history: offsets below the final committed
position that no subscribed poll returned are listed."""

from __future__ import annotations

from typing import Any

from checkers.groups import group_delivery


def line(i: int, typ: str, p: Any, f: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"index": i, "time": i, "type": typ, "process": p, "f": f, "value": value, **extra}


def test_offsets_committed_past_but_never_returned_by_the_group_are_listed() -> None:
    ops = [
        line(0, "invoke", 0, "subscribe", [0, 1]),
        line(1, "ok", 0, "subscribe", [0, 1]),
        line(2, "invoke", 1, "send", [["send", 0, 10], ["send", 0, 11], ["send", 0, 12]]),
        line(3, "ok", 1, "send", [["send", 0, [0, 10]], ["send", 0, [1, 11]],
                                  ["send", 0, [2, 12]]]),
        line(4, "invoke", 0, "poll", [["poll"]]),
        line(5, "ok", 0, "poll", [["poll", {"0": [[0, 10]]}]]),
        # the consumer crashed holding offsets 1 and 2; a commit had covered them
        line(6, "invoke", 0, "crash", None),
        line(7, "info", 0, "crash", None),
        line(8, "invoke", 2, "send", [["send", 1, 20]]),
        line(9, "fail", 2, "send", [["send", 1, [0, 20]]]),  # a failed send proves nothing
        line(10, "invoke", 3, "assign", [], fetch_committed=True),
        line(11, "ok", 3, "assign", [], fetch_committed=True, committed={"0": 3, "1": 1}),
        # the final reads see every offset, but they are not the group
        line(12, "invoke", 3, "assign", [0]),
        line(13, "ok", 3, "assign", [0]),
        line(14, "invoke", 3, "poll", [["poll"]]),
        line(15, "ok", 3, "poll", [["poll", {"0": [[0, 10], [1, 11], [2, 12]]}]]),
    ]
    got = group_delivery(ops)
    assert got is not None and got.committed_index == 11
    k0, k1 = got.keys
    assert (k0.key, k0.committed, k0.known_below, k0.read_below, k0.missing) == \
        (0, 3, 3, 1, (1, 2))
    assert (k1.key, k1.known_below, k1.missing) == (1, 0, ())
    assert not got.complete and got.missing == 2
    # the same records read by the group before it committed: complete
    ops[5] = line(5, "ok", 0, "poll", [["poll", {"0": [[0, 10], [1, 11], [2, 12]]}]])
    got = group_delivery(ops)
    assert got is not None and got.complete


def test_no_subscribe_no_section_and_no_committed_positions_no_verdict() -> None:
    assert group_delivery([line(0, "invoke", 0, "assign", [1])]) is None
    got = group_delivery([line(0, "invoke", 0, "subscribe", [1])])
    assert got is not None and got.committed_index is None and not got.complete


def test_membership_stretches_follow_what_each_poll_reported() -> None:
    from checkers.groups import Held, membership

    def poll(i: int, p: int, gen: int, keys: list[int]) -> dict[str, Any]:
        return line(i, "ok", p, "poll", [["poll", {}]], generation=gen, assignment=keys)

    ops = [line(0, "invoke", 0, "subscribe", [0, 1]), poll(1, 0, 1, [0, 1]), poll(2, 0, 1, [0, 1]),
           poll(3, 0, -1, []), poll(4, 0, 2, [1]), line(5, "ok", 0, "send", []),
           line(6, "invoke", 0, "assign", []), poll(7, 1, 2, [0])]
    assert membership(ops) == [Held(0, 1, 3, 1, (0, 1)), Held(0, 4, 6, 2, (1,)),
                               Held(1, 7, 7, 2, (0,))]
