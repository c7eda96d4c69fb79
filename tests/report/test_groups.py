"""Group-level delivery from a hand-written history: offsets below the final committed
position that no subscribed poll returned are listed."""

from __future__ import annotations

from typing import Any

from harness.report.groups import group_delivery


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
    from harness.report.groups import Held, membership

    def poll(i: int, p: int, gen: int, keys: list[int]) -> dict[str, Any]:
        return line(i, "ok", p, "poll", [["poll", {}]], generation=gen, assignment=keys)

    ops = [line(0, "invoke", 0, "subscribe", [0, 1]), poll(1, 0, 1, [0, 1]), poll(2, 0, 1, [0, 1]),
           poll(3, 0, -1, []), poll(4, 0, 2, [1]), line(5, "ok", 0, "send", []),
           line(6, "invoke", 0, "assign", []), poll(7, 1, 2, [0])]
    assert membership(ops) == [Held(0, 1, 3, 1, (0, 1)), Held(0, 4, 6, 2, (1,)),
                               Held(1, 7, 7, 2, (0,))]


def _eos_history(second_reader: str) -> list[dict[str, Any]]:
    """Producer 9 wrote key 0 offsets 0..3 in a committed txn; processes 0 and 1 of the group
    consumed them in transactions, process 1's last one being `second_reader`."""
    return [
        line(0, "invoke", 0, "subscribe", [0]),
        line(1, "ok", 0, "subscribe", [0]),
        line(2, "invoke", 1, "subscribe", [0]),
        line(3, "ok", 1, "subscribe", [0]),
        line(4, "invoke", 9, "txn", [["send", 0, 10], ["send", 0, 11], ["send", 0, 12],
                                     ["send", 0, 13]]),
        line(5, "ok", 9, "txn", [["send", 0, [0, 10]], ["send", 0, [1, 11]],
                                 ["send", 0, [2, 12]], ["send", 0, [3, 13]]]),
        # an aborted transaction read 0 and 1: it does not count, the next one reads again
        line(6, "invoke", 0, "txn", [["poll"], ["send", 0, 20], ["send", 0, 21]], abort=True),
        line(7, "fail", 0, "txn", [["poll", {"0": [[0, 10], [1, 11]]}], ["send", 0, 20],
                                   ["send", 0, 21]], error="aborted", abort=True),
        line(8, "invoke", 0, "txn", [["poll"]]),
        line(9, "ok", 0, "txn", [["poll", {"0": [[0, 10], [1, 11]]}]]),
        line(10, "invoke", 1, "txn", [["poll"]]),
        line(11, second_reader, 1, "txn", [["poll", {"0": [[1, 11], [2, 12]]}]]),
        line(12, "invoke", 3, "assign", [], fetch_committed=True),
        line(13, "ok", 3, "assign", [], fetch_committed=True, committed={"0": 4}),
    ]


def test_exactly_once_lists_offsets_read_twice_and_offsets_no_committed_txn_read() -> None:
    from harness.report.groups import exactly_once

    # process 1 re-read offset 1 (a rebalance it did not abort for), and offset 3 was
    # committed past without any committed transaction reading it: both are listed
    got = exactly_once(_eos_history("ok"))
    assert got is not None and got.committed_index == 13 and got.transactions == 2
    [k0] = got.keys
    assert (k0.key, k0.committed, k0.known_below, k0.once) == (0, 4, 4, 2)
    assert k0.repeated == ((1, 2),) and k0.unread == (3,) and k0.uncertain == ()
    assert not got.holds and (got.repeated, got.unread) == (1, 1)
    # the same second transaction with an unknown outcome: what it alone read is uncertain
    got = exactly_once(_eos_history("info"))
    assert got is not None
    [k0] = got.keys
    assert k0.repeated == () and k0.unread == (3,) and k0.uncertain == (2,)
    assert not got.holds


def test_exactly_once_holds_when_each_offset_has_one_committed_reader() -> None:
    from harness.report.groups import exactly_once

    ops = _eos_history("ok")
    ops[11] = line(11, "ok", 1, "txn", [["poll", {"0": [[2, 12], [3, 13]]}]])
    got = exactly_once(ops)
    assert got is not None and got.holds and got.keys[0].once == 4
    # no txn from a subscribed process (the queue workload): no section
    assert exactly_once(ops[:4] + ops[12:]) is None
    # an `info` transaction's sends are not known offsets: it may have been aborted
    ops += [line(14, "invoke", 9, "txn", [["send", 0, 30], ["send", 0, 31]]),
            line(15, "info", 9, "txn", [["send", 0, [5, 30]], ["send", 0, [6, 31]]])]
    ops[13] = line(13, "ok", 3, "assign", [], fetch_committed=True, committed={"0": 7})
    got = exactly_once(ops)
    assert got is not None and got.holds and got.keys[0].known_below == 4
