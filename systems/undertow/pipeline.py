"""One operation's sends with several requests in flight: max.in.flight.requests.per.connection.

Kafka's producer keeps up to max.in.flight requests unanswered on a connection.
Here the sends of one operation go out to their leaders that way; each that does
not come back acknowledged within an attempt's timeout is then sent again on its
own, in the operation's order, through BrokerClient's retries (when it may have
been written, only if `retries` allows a resend). So without idempotence a
record resent that way lands after records sent later, as Kafka's retries
reorder with several requests in flight; with idempotence a leader refuses a
sequence past a gap (OUT_OF_ORDER_SEQUENCE_NUMBER) and the in-order resends close
it. After any failure the idempotent producer takes a new id.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence

from broker.protocol import DEFINITE_ERRORS, OUT_OF_ORDER_SEQUENCE_NUMBER, ProtocolError

from systems.undertow.client import BrokerClient, ClientError, _Unsent

Result = int | None | ClientError  # an offset (None with acks "0"), or why it failed


def produce_many(cl: BrokerClient, items: Sequence[tuple[int, int]],
                 acks: str = "all") -> list[Result]:
    """(key, value) records; per record its offset or the ClientError it ended with."""
    if cl.max_in_flight <= 1 or len(items) <= 1 or acks == "0":
        return _one_by_one(cl, items, acks)
    try:
        seqs: list[int | None] = list(cl.next_sequences([k for k, _ in items], acks)) \
            if cl.idempotent else [None] * len(items)
    except ClientError as e:
        return [e] * len(items)
    results: dict[int, Result] = {}
    again: list[tuple[int, str | None]] = []  # (index, code if it may have been written)
    inflight: dict[str, deque[tuple[int, int]]] = {}  # node -> (request id, index), oldest first
    deadline = time.monotonic() + cl.request_timeout_s

    def lost(node: str, code: str) -> None:
        cl._drop(node)
        again.extend((i, code) for _rid, i in inflight.pop(node, ()))

    def settle(node: str) -> None:
        """Wait for the oldest request in flight to `node`."""
        rid, i = inflight[node][0]
        try:
            reply = cl._conns[node].recv(rid, deadline)
        except TimeoutError:
            lost(node, "TIMEOUT")
            return
        except (OSError, ProtocolError, KeyError):
            lost(node, "CONNECTION")
            return
        inflight[node].popleft()
        code = reply.get("error")
        if code is None:
            results[i] = int(reply["offset"])
        elif code in DEFINITE_ERRORS or code == OUT_OF_ORDER_SEQUENCE_NUMBER:
            again.append((i, None))  # certainly not written (a gap before it, for the latter)
        else:
            again.append((i, str(code)))

    for i, (key, value) in enumerate(items):
        try:
            node = cl._leader(key, deadline)
            conn = cl._conn(node, deadline)
        except _Unsent:
            again.append((i, None))
            continue
        try:
            rid = conn.send(cl.produce_msg(key, value, acks, seqs[i]))
        except OSError:
            again.append((i, "CONNECTION"))  # part of it may have gone out
            lost(node, "CONNECTION")
            continue
        q = inflight.setdefault(node, deque())
        q.append((rid, i))
        if len(q) >= cl.max_in_flight:
            settle(node)
    for node in list(inflight):
        while inflight.get(node):
            settle(node)
    for i, code in sorted(again):
        key, value = items[i]
        if code is not None and cl.retries == 0:
            results[i] = ClientError(code, f"partition {key}: no answer, no retries",
                                     definite=False)
            continue
        try:
            results[i] = cl.produce_attempt(key, value, acks, seqs[i],
                                            maybe_written=code is not None)
        except ClientError as e:
            results[i] = e
    if cl.idempotent and any(isinstance(r, ClientError) for r in results.values()):
        cl.producer = None  # which numbers were used is not known for sure: start afresh
    return [results[i] for i in range(len(items))]


def _one_by_one(cl: BrokerClient, items: Sequence[tuple[int, int]], acks: str) -> list[Result]:
    """One request at a time; after a failure the rest are not sent (a definite refusal)."""
    out: list[Result] = []
    for key, value in items:
        try:
            out.append(cl.produce(key, value, acks=acks))
        except ClientError as e:
            out.append(e)
            out.extend(ClientError("NOT_SENT", "an earlier send of the operation failed",
                                   definite=True) for _ in items[len(out):])
            break
    return out
