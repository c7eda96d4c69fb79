"""Our broker's client for the queue workload: send, poll and assign over BrokerClient.

A send's ClientError maps to `fail` when definite, else `info`. A send that
succeeded after a resend completes `ok` with the offset of the attempt that was
acknowledged; an earlier attempt may hold the value at another offset too
(`duplicate`), which is what retries without idempotence do. A poll changes
nothing on the server, so a poll that hits an error is `fail`, carrying whatever
it had already read (HISTORY.md allows records in any completion). Keys a
process is newly assigned start at offset 0 (auto.offset.reset=earliest, as
Jepsen's test). A poll returns at most `max_poll_records` records, shared evenly
among the assigned keys (each key's fetch asks for its share), as Kafka's
max.poll.records bounds a consumer's poll. `isolation` is the consumer's
isolation.level ("read_committed": stop at the last stable offset, skip aborted
transactions' records; None: the broker's default, read_uncommitted).
"""

from __future__ import annotations

from typing import Any

from harness.protocols import Run
from harness.runfiles import Op
from systems.undertow.client import BrokerClient, ClientError
from systems.undertow.pipeline import produce_many
from workloads.options import MAX_POLL_RECORDS


class QueueClient:
    """harness.protocols.Client over BrokerClient; one per process."""

    def __init__(self, *, keys: int, acks: str = "all", timeout_s: float = 3.0,
                 retries: int = 0, request_timeout_s: float | None = None,
                 enable_idempotence: bool = False, max_in_flight: int = 1,
                 max_poll_records: int = MAX_POLL_RECORDS, isolation: str | None = None,
                 conn: Any = None) -> None:
        """timeout_s: a send's delivery timeout, retries included; see BrokerClient."""
        self.keys = keys
        self.max_poll_records = max_poll_records
        self.acks = acks
        self.timeout_s = timeout_s
        self.retries = retries
        self.request_timeout_s = request_timeout_s
        self.enable_idempotence = enable_idempotence
        self.max_in_flight = max_in_flight
        self.isolation = isolation
        self.conn = conn  # a BrokerClient once opened
        self.assigned: tuple[int, ...] = ()
        self.positions: dict[int, int] = {}

    def open(self, run: Run, node: str) -> QueueClient:
        # the slot's node first: the client follows leaders from there
        addrs = dict(run.client_addrs)
        ordered = {node: addrs.pop(node)} if node in addrs else {}
        ordered.update(addrs)
        conn = BrokerClient(ordered, timeout_s=self.timeout_s, retries=self.retries,
                            request_timeout_s=self.request_timeout_s,
                            enable_idempotence=self.enable_idempotence,
                            max_in_flight=self.max_in_flight)
        return QueueClient(keys=self.keys, acks=self.acks, timeout_s=self.timeout_s,
                           retries=self.retries, request_timeout_s=self.request_timeout_s,
                           enable_idempotence=self.enable_idempotence,
                           max_in_flight=self.max_in_flight,
                           max_poll_records=self.max_poll_records, isolation=self.isolation,
                           conn=conn)

    def invoke(self, run: Run, op: Op) -> Op:
        if op.f == "send":
            return self._send(op)
        if op.f == "poll":
            return self._poll(op)
        if op.f == "assign":
            keys = tuple(int(k) for k in op.value)
            if op.extra.get("seek_to_beginning"):
                self.positions.update({k: 0 for k in keys})
            self.assigned = keys
            return op.complete("ok")
        return op.complete("fail", error=f"unknown f {op.f!r}")

    def _send(self, op: Op) -> Op:
        items = [(int(key), int(value)) for _, key, value in op.value]
        results = produce_many(self.conn, items, self.acks)
        errors = [r for r in results if isinstance(r, ClientError)]
        # what was acknowledged stays known (offsets count once the operation happened)
        done = [["send", k, v] if isinstance(r, ClientError) else ["send", k, [r, v]]
                for (k, v), r in zip(items, results, strict=True)]
        if not errors:
            return op.complete("ok", done)
        error = f"{errors[0].code}: {errors[0]}"
        if len(errors) == len(results) and all(e.definite for e in errors):
            return op.complete("fail", error=error)
        return op.complete("info", done, error=error)

    def _poll(self, op: Op) -> Op:
        read, e = self.poll_assigned()
        if e is not None:
            return op.complete("fail", [["poll", read]] if read else [["poll"]],
                               error=f"{e.code}: {e}")
        return op.complete("ok", [["poll", read]])

    def poll_assigned(self) -> tuple[dict[str, list[list[int]]], ClientError | None]:
        """One poll of the assigned keys: what it read, and the error that cut it short."""
        read: dict[str, list[list[int]]] = {}
        share = max(1, self.max_poll_records // max(1, len(self.assigned)))
        try:
            for key in self.assigned:
                pos = self.positions.get(key, 0)
                records, nxt = self.conn.fetch_next(key, pos, max_records=share,
                                                    isolation=self.isolation)
                if records:
                    read[str(key)] = [[o, v] for o, v in records]
                self.positions[key] = nxt
        except ClientError as e:
            if e.code == "OFFSET_OUT_OF_RANGE":
                # The log was cut below our position (a new leader holds less): start that key
                # over from the beginning, as Kafka's auto.offset.reset=earliest does. This poll
                # completes `fail`, which ends the succession of polls for the checker.
                self.positions[key] = 0
            return read, e
        return read, None

    def close(self, run: Run) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
