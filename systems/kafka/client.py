"""The queue workload's client on Apache Kafka, through confluent-kafka (librdkafka).

One client per process, as in workloads.queue: a producer with the spec's
acks (idempotent with retries for acks=all) whose delivery report gives each
send its offset, and a consumer with manual assign, seek and poll, committing
nothing. Ops and completions have HISTORY.md's shapes.

Every librdkafka error is judged by ERRORS below: `fail` only when the write
certainly did not happen, else `info`. librdkafka does not tell Python whether
a message was possibly persisted by an earlier try, so a broker's refusal is
definite only when there was a single try (retries=0, as for acks 0 and 1);
with retries a final refusal may follow a try that was written.

With acks=all not even retries=0 makes a single try: librdkafka resends a message
after NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE or UNKNOWN_TOPIC_OR_PART without
counting it as a retry (rd_kafka_handle_Produce_error: a "refresh" error is taken as a
request the broker rejected), but a leader that appended an acks=all record and lost
its leadership while waiting for the followers answers NOT_LEADER for it (Kafka's
DelayedProduce; KAFKA-13574), and the record may still commit. The resend's refusal
(e.g. NOT_ENOUGH_REPLICAS from the new leader) is then the one reported: issue 29's
G1a on 0.10.2.2, seed 3. So with acks=all a broker's refusal is `info`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from enum import Enum
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from systems.kafka import config
from workloads.options import MAX_POLL_RECORDS

log = logging.getLogger("undertow.kafka.client")
POLL_WAIT_S = 0.2  # a poll waits this long for a first record, then takes what is queued


class Sent(Enum):
    """What a produce error says about the write."""

    NEVER = "never-sent"     # refused before it left this process: fail
    REFUSED = "refused"      # the broker answered that it did not append: fail on a single try
    MAYBE = "maybe"          # it may have been appended: info


# librdkafka error name -> what it says about the write; a name not listed is MAYBE.
ERRORS: Mapping[str, Sent] = {
    # local: the message never reached a broker
    "_QUEUE_FULL": Sent.NEVER,
    "_MSG_SIZE_TOO_LARGE": Sent.NEVER,
    "_UNKNOWN_PARTITION": Sent.NEVER,
    "_UNKNOWN_TOPIC": Sent.NEVER,
    "_INVALID_ARG": Sent.NEVER,
    "_PURGE_QUEUE": Sent.NEVER,          # purged before it was sent
    "_STATE": Sent.NEVER,
    # the broker refused before appending
    "NOT_LEADER_OR_FOLLOWER": Sent.REFUSED,
    "NOT_ENOUGH_REPLICAS": Sent.REFUSED,  # checked before the append (AFTER_APPEND is not)
    "UNKNOWN_TOPIC_OR_PART": Sent.REFUSED,
    "LEADER_NOT_AVAILABLE": Sent.REFUSED,
    "FENCED_LEADER_EPOCH": Sent.REFUSED,
    "UNKNOWN_LEADER_EPOCH": Sent.REFUSED,
    "MSG_SIZE_TOO_LARGE": Sent.REFUSED,
    "INVALID_REQUIRED_ACKS": Sent.REFUSED,
    "CORRUPT_MESSAGE": Sent.REFUSED,
    # may have been appended
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": Sent.MAYBE,
    "REQUEST_TIMED_OUT": Sent.MAYBE,
    "NETWORK_EXCEPTION": Sent.MAYBE,
    "KAFKA_STORAGE_ERROR": Sent.MAYBE,
    "_MSG_TIMED_OUT": Sent.MAYBE,        # queued or in flight when time ran out
    "_TIMED_OUT": Sent.MAYBE,
    "_TRANSPORT": Sent.MAYBE,
    "_PURGE_INFLIGHT": Sent.MAYBE,
    "_FATAL": Sent.MAYBE,                # the idempotent producer gave up (e.g. a sequence gap)
    "OUT_OF_ORDER_SEQUENCE_NUMBER": Sent.MAYBE,
    "_INCONSISTENT": Sent.MAYBE,
}


def single_try(*, retries: int, acks: str) -> bool:
    """Whether librdkafka sends a message at most once: no retries, and not acks=all (whose
    uncounted resends after a "refresh" error may follow a try that was appended)."""
    return retries == 0 and acks != "all"


def outcome(error_name: str, *, retries: int, acks: str) -> str:
    """`fail` when the write certainly did not happen, else `info`."""
    sent = ERRORS.get(error_name, Sent.MAYBE)
    if sent is Sent.NEVER or (sent is Sent.REFUSED and single_try(retries=retries, acks=acks)):
        return "fail"
    return "info"


def _rdkafka_logger(run: Any) -> logging.Logger:
    """librdkafka's log lines go to the run's harness.log (refused connections to a killed
    node are expected there), else to this module's logger."""
    parent = getattr(run, "log", None)
    return parent.getChild("rdkafka") if isinstance(parent, logging.Logger) else \
        logging.getLogger("undertow.kafka.rdkafka")


class KafkaQueueClient:
    """harness.protocols.Client for the queue workload on Kafka; one per process."""

    def __init__(self, *, keys: int, acks: str = "all", timeout_s: float = 3.0,
                 bootstrap: str = "", topic: str = config.TOPIC, retries: int | None = None,
                 request_timeout_s: float | None = None,
                 idempotence: bool | None = None, max_in_flight: int | None = None,
                 max_poll_records: int = MAX_POLL_RECORDS) -> None:
        """timeout_s: a send's delivery timeout; retries, request_timeout_s, idempotence and
        max_in_flight: None keeps config.producer_config's defaults."""
        self.keys = keys
        self.max_poll_records = max_poll_records
        self.acks = acks
        self.timeout_s = timeout_s
        self.retries_setting = retries
        self.request_timeout_s = request_timeout_s
        self.idempotence = idempotence
        self.max_in_flight = max_in_flight
        self.bootstrap = bootstrap
        self.topic = topic
        self.producer: Producer | None = None  # made at the first send (reads need none)
        self.producer_config: dict[str, Any] = {}
        self.consumer: Consumer | None = None
        self.assigned: tuple[int, ...] = ()
        self.positions: dict[int, int] = {}

    @property
    def retries(self) -> int:
        return int(config.producer_config("", self.acks, timeout_s=1,
                                          retries=self.retries_setting)["retries"])

    def open(self, run: Any, node: str) -> KafkaQueueClient:
        """A fresh client; bootstrap from the run's client addresses, the slot's node first."""
        addrs = dict(getattr(run, "client_addrs", None) or {})
        bootstrap = self.bootstrap
        if addrs:
            first = [addrs.pop(node)] if node in addrs else []
            bootstrap = ",".join([*first, *addrs.values()])
        c = KafkaQueueClient(keys=self.keys, acks=self.acks, timeout_s=self.timeout_s,
                             bootstrap=bootstrap, topic=self.topic,
                             retries=self.retries_setting,
                             request_timeout_s=self.request_timeout_s,
                             idempotence=self.idempotence, max_in_flight=self.max_in_flight,
                             max_poll_records=self.max_poll_records)
        c.producer_config = {**config.producer_config(bootstrap, self.acks,
                                                      timeout_s=self.timeout_s,
                                                      retries=self.retries_setting,
                                                      request_timeout_s=self.request_timeout_s,
                                                      idempotence=self.idempotence,
                                                      max_in_flight=self.max_in_flight),
                             "logger": _rdkafka_logger(run)}
        c.consumer = Consumer({**config.consumer_config(bootstrap, timeout_s=self.timeout_s),
                               "logger": _rdkafka_logger(run)})
        return c

    def invoke(self, run: Any, op: Any) -> Any:
        if op.f == "send":
            return self._send(op)
        if op.f == "poll":
            return self._poll(op)
        if op.f == "assign":
            return self._assign(op)
        return op.complete("fail", error=f"unknown f {op.f!r}")

    # -- send --------------------------------------------------------------------

    def produce(self, key: int, value: int) -> int | None:
        """Send one record and wait for its delivery report: its offset (None for acks=0).

        Raises KafkaException carrying the librdkafka error.
        """
        assert self.producer_config, "open() first"
        if self.producer is None:
            self.producer = Producer(self.producer_config)
        report: list[tuple[KafkaError | None, Message]] = []
        try:
            self.producer.produce(self.topic, value=str(value).encode(), partition=key,
                                  on_delivery=lambda err, msg: report.append((err, msg)))
        except BufferError:
            raise KafkaException(KafkaError(KafkaError._QUEUE_FULL)) from None
        # message.timeout.ms bounds the wait: a report always comes by then. poll() serves
        # the report as flush() would, without flush()'s waking every broker thread of the
        # producer for each send (the leader's thread was woken by produce() already)
        deadline = time.monotonic() + self.timeout_s + 2.0
        while not report and (left := deadline - time.monotonic()) > 0:
            self.producer.poll(left)
        if not report:
            raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "no delivery report"))
        err, msg = report[0]
        if err is not None:
            raise KafkaException(err)
        offset = msg.offset()
        return offset if offset is not None and offset >= 0 else None

    def _send(self, op: Any) -> Any:
        done: list[Any] = []
        try:
            for micro in op.value:
                _, key, value = micro
                offset = self.produce(int(key), int(value))
                done.append(["send", key, [offset, value]])
        except KafkaException as e:
            err = e.args[0]
            name = err.name() if isinstance(err, KafkaError) else "UNKNOWN"
            text = f"{name}: {err.str() if isinstance(err, KafkaError) else err}"
            if outcome(name, retries=self.retries, acks=self.acks) == "fail" and not done:
                return op.complete("fail", error=text)
            return op.complete("info", [*done, *op.value[len(done):]], error=text)
        return op.complete("ok", done)

    # -- assign / poll -------------------------------------------------------------

    def _assign(self, op: Any) -> Any:
        assert self.consumer is not None, "open() first"
        keys = tuple(int(k) for k in op.value)
        if op.extra.get("seek_to_beginning"):
            self.positions.update({k: 0 for k in keys})
        tps = [TopicPartition(self.topic, k, self.positions.get(k, OFFSET_BEGINNING))
               for k in keys]
        try:
            self.consumer.assign(tps)
        except KafkaException as e:
            return op.complete("fail", error=str(e))
        self.assigned = keys
        return op.complete("ok")

    def _poll(self, op: Any) -> Any:
        assert self.consumer is not None, "open() first"
        read: dict[str, list[list[int]]] = {}
        error: str | None = None
        if self.assigned:
            try:
                # consume(n, t) waits for n records or t; poll returns at the first one
                first = self.consumer.poll(POLL_WAIT_S)
                msgs: list[Message] = [] if first is None else [first]
                if msgs and self.max_poll_records > 1:
                    msgs += self.consumer.consume(self.max_poll_records - 1, timeout=0)
            except KafkaException as e:
                msgs, error = [], str(e)
            restart: list[int] = []
            for m in msgs:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._AUTO_OFFSET_RESET and m.partition() is not None:
                        restart.append(int(m.partition()))  # type: ignore[arg-type]
                    if err.code() != KafkaError._PARTITION_EOF:
                        error = f"{err.name()}: {err.str()}"
                    continue
                key, offset, value = m.partition(), m.offset(), m.value()
                if key is None or offset is None or value is None or key not in self.assigned:
                    continue
                if offset < self.positions.get(key, 0):
                    # behind where this process already read: records librdkafka fetched for
                    # an earlier assignment or position (seen right after a re-assign), not
                    # the log going backwards; a restart from 0 is an explicit seek
                    continue
                read.setdefault(str(key), []).append([offset, int(value)])
                self.positions[key] = offset + 1
            if restart:
                # the log was cut below our position (a new leader holds less): those keys
                # start over from 0, and this poll fails, which ends the succession of polls
                self.positions.update({k: 0 for k in restart})
                with contextlib.suppress(KafkaException):
                    self.consumer.assign([TopicPartition(self.topic, k, self.positions.get(
                        k, OFFSET_BEGINNING)) for k in self.assigned])
        if error is not None:
            return op.complete("fail", [["poll", read]] if read else [["poll"]], error=error)
        return op.complete("ok", [["poll", read]])

    def close(self, run: Any) -> None:
        if self.producer is not None:
            self.producer.purge()
            self.producer.flush(0)
            self.producer = None
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None


WARMUP_TOPIC = "undertow-warmup"


def warm_up(bootstrap: str, admin: Any, *, timeout_s: float = 60.0) -> None:
    """One idempotent send to a topic of its own, so the producer-id machinery (the
    transaction state log) is loaded before the workload's first send needs it."""
    deadline = time.monotonic() + timeout_s
    while True:  # on a loaded machine the controller may answer after the admin's timeout
        try:
            admin.create_topic(1, 1, 1, topic=WARMUP_TOPIC)
            break
        except KafkaException as e:
            if e.args[0].code() != KafkaError._TIMED_OUT or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    p = Producer({**config.producer_config(bootstrap, "all", timeout_s=timeout_s),
                  "log_level": 2})
    report: list[KafkaError | None] = []
    p.produce(WARMUP_TOPIC, value=b"warm-up", on_delivery=lambda err, msg: report.append(err))
    p.flush(timeout_s + 2.0)
    if not report or report[0] is not None:
        why = report[0] if report else "no delivery report"
        raise RuntimeError(f"warm-up send to {WARMUP_TOPIC}: {why}")
