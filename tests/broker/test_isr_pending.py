"""A leader's pending ISR change and the controller's answers (broker/partition.py).

Only a refusal settles a change as not applied; an answer that settles nothing
(REQUEST_TIMED_OUT: the controller's commit may still go through; NOT_CONTROLLER; an
unknown error) keeps it pending, its outcome unknown, so the HW goes on counting the
maximal ISR and the same change is sent again (Kafka's PendingExpandIsr). A change
answered REQUEST_TIMED_OUT once dropped its pending state: see test_isr.py for that
run on real brokers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from broker.config import Settings
from broker.log import PartitionLog
from broker.metadata import PartitionMeta
from broker.partition import Partition
from broker.protocol import (
    INELIGIBLE_REPLICA,
    INVALID_REQUEST,
    NOT_CONTROLLER,
    REQUEST_TIMED_OUT,
    STALE_STATE,
    UNKNOWN_SERVER_ERROR,
)

META = PartitionMeta(0, ("a", "b", "c"), "a", 1, 5, ("a", "b"))


def leader(tmp_path: Path) -> Partition:
    """Leader a with ISR {a, b}; b has all 3 records, c (not in the ISR) has 2."""
    p = Partition(node="a", pid=0, log=PartitionLog(tmp_path), settings=Settings())
    p.become_leader(META, 0)
    p.log.append([(1, 10), (1, 11)], [None, None], [False, False])
    p.followers["b"].leo = p.followers["c"].leo = 2
    p.maybe_advance_hw()
    assert p.log.hw == 2
    p.log.append([(1, 12)], [None], [False])
    return p


@pytest.mark.parametrize("code", [REQUEST_TIMED_OUT, NOT_CONTROLLER, UNKNOWN_SERVER_ERROR,
                                  "SOMETHING_NEW"])
def test_an_answer_that_settles_nothing_keeps_the_expansion_pending(
        tmp_path: Path, code: str) -> None:
    p = leader(tmp_path)
    assert p.propose_isr(("a", "b", "c")) == ("a", "b", "c")
    p.isr_change_failed(code)
    assert p.pending_isr == ("a", "b", "c") and p.pending_maybe_applied
    assert p.maximal_isr == ("a", "b", "c")
    p.followers["b"].leo = 3
    p.maybe_advance_hw()
    assert p.log.hw == 2, "the HW passed a record that c, maybe in the ISR now, lacks"
    # the same change is sent again, never another one, until the outcome is known
    assert p.propose_isr(("a",)) == ("a", "b", "c")
    p.isr_change_failed(STALE_STATE)  # the epoch moved: maybe by our change; metadata says
    assert p.pending_isr == ("a", "b", "c")
    p.update_meta(PartitionMeta(0, META.replicas, "a", 1, 6, ("a", "b", "c")))
    assert p.pending_isr is None and p.isr == ("a", "b", "c") and p.log.hw == 2
    p.followers["c"].leo = 3
    p.maybe_advance_hw()
    assert p.log.hw == 3


@pytest.mark.parametrize("code", [INVALID_REQUEST, INELIGIBLE_REPLICA, STALE_STATE])
def test_a_refusal_clears_the_pending_change(tmp_path: Path, code: str) -> None:
    p = leader(tmp_path)
    p.propose_isr(("a", "b", "c"))
    p.isr_change_failed(code)
    assert p.pending_isr is None and not p.pending_maybe_applied
    assert p.maximal_isr == ("a", "b")
    p.followers["b"].leo = 3
    p.maybe_advance_hw()
    assert p.log.hw == 3


def test_a_shrink_whose_outcome_is_unknown_keeps_the_larger_isr_for_the_hw(
        tmp_path: Path) -> None:
    p = leader(tmp_path)
    p.propose_isr(("a",))  # drop b
    p.isr_change_failed(REQUEST_TIMED_OUT)
    assert p.pending_isr == ("a",) and p.maximal_isr == ("a", "b")
    p.maybe_advance_hw()
    assert p.log.hw == 2  # still waits for b, the committed ISR's member
