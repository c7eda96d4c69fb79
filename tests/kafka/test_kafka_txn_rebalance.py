"""A consume-transform-produce transaction on Kafka whose group rebalances after it
consumed records: the fetch that served the rebalance read from the new assignment's
committed positions, so it is kept out of the operation (its reads would seem to go
backwards inside one operation, `int-nonmonotonic-poll`), and the transaction aborts."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from harness.runfiles import Op
from tests.kafka.cluster import PARTITIONS, Cluster, txn_member

pytestmark = [pytest.mark.kafka, pytest.mark.slow]
_values = itertools.count(3_000_000)


def test_a_rebalance_after_consuming_keeps_the_next_fetch_out(kafka_cluster: Cluster) -> None:
    first = txn_member(kafka_cluster)
    sends = [["send", k, next(_values)] for k in range(PARTITIONS) for _ in range(3)]
    done = first.invoke(None, Op("invoke", 0, "txn", sends))
    assert done.type == "ok", done
    assert first.begin(set()) is None
    deadline = time.monotonic() + 60
    while not first.moved:  # until the transaction consumed records
        assert time.monotonic() < deadline, "no records read"
        first.poll()
    second = txn_member(kafka_cluster)  # joins: the group rebalances
    stop = threading.Event()

    def keep_polling() -> None:  # a member rejoins only once polled
        assert second.group is not None
        while not stop.is_set():
            second.group.fetch_batch()

    t = threading.Thread(target=keep_polling)
    t.start()
    try:
        while True:
            assert time.monotonic() < deadline, "no rebalance seen"
            micro, error = first.poll()
            if error is not None and error.startswith("REBALANCE"):
                assert micro == ["poll"]
                break
            assert error is None, error
    finally:
        stop.set()
        t.join(30)
        first.abort()
        for m in (first, second):
            m.close(None)  # hands its consumer on, as after an `info`: leave the group
            assert m.group is not None
            m.group.spares.close_all()
