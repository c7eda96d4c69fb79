"""What each of the Java client's exceptions says about a write or a commit: `fail` or `info`.

The way Jepsen's Kafka client judges them: `fail` only when the operation certainly
did not take effect, `info` when it may have. The table is keyed by the exception's
simple class name; a class not in it, and the superclasses it names, are looked up
by walking the Java class hierarchy (so a subclass of RetriableException the table
does not list is judged as one), and anything still unknown is `info`.

Why the `info` rows are not `fail`:
- TimeoutException: the request may have reached the leader, which appends it.
- NotLeaderOrFollowerException: Kafka may answer it for a write that still commits
  (KAFKA-13574: the old leader appended and replicated before it stepped down).
- NetworkException, DisconnectException: the connection broke with the request sent.
- OutOfOrderSequenceException, UnknownProducerIdException: the idempotent producer lost
  track of sequences; earlier tries of the batch may be in the log.
- NotEnoughReplicasAfterAppendException: appended on the leader, not yet replicated.
- KafkaStorageException, UnknownServerException, CorruptRecordException (broker side):
  the broker's state is not known.
- ProducerFencedException, InvalidProducerEpochException, InvalidTxnStateException,
  TransactionAbortedException at a commit: a newer producer or the coordinator may have
  completed the transaction either way (the caller turns an acknowledged abort into
  `fail` itself).

The `fail` rows were refused before anything was written: the topic or partition does
not exist, the record is too large or malformed, the client refused it locally
(serialization, a buffer it could not get, an illegal state or argument).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FAIL, INFO = "fail", "info"

EXCEPTIONS: Mapping[str, str] = {
    # certainly not written
    "InvalidTopicException": FAIL,
    "UnknownTopicOrPartitionException": FAIL,
    "InvalidReplicationFactorException": FAIL,
    "RecordTooLargeException": FAIL,
    "RecordBatchTooLargeException": FAIL,
    "InvalidRecordException": FAIL,
    "SerializationException": FAIL,
    "InvalidRequiredAcksException": FAIL,
    "TopicAuthorizationException": FAIL,
    "TransactionalIdAuthorizationException": FAIL,
    "IllegalStateException": FAIL,           # e.g. a send outside a transaction
    "IllegalArgumentException": FAIL,
    "InterruptException": FAIL,              # the send was interrupted before it was queued
    "BufferExhaustedException": FAIL,        # no room in the accumulator: never sent
    "NotEnoughReplicasException": FAIL,      # checked before the append
    # may have been written
    "TimeoutException": INFO,
    "NotLeaderOrFollowerException": INFO,    # KAFKA-13574
    "NetworkException": INFO,
    "DisconnectException": INFO,
    "NotEnoughReplicasAfterAppendException": INFO,
    "OutOfOrderSequenceException": INFO,
    "UnknownProducerIdException": INFO,
    "KafkaStorageException": INFO,
    "UnknownServerException": INFO,
    "CorruptRecordException": INFO,
    "ProducerFencedException": INFO,
    "InvalidProducerEpochException": INFO,
    "InvalidTxnStateException": INFO,
    "TransactionAbortedException": INFO,
    "ConcurrentTransactionsException": INFO,
    "TransactionAbortableException": INFO,   # transaction version 2: the txn must abort
    "RetriableException": INFO,              # any retriable error the table does not name
    "ApiException": INFO,
    "KafkaException": INFO,
}


def unwrap(e: Any) -> Any:
    """The cause of an ExecutionException (a send's Future) or a KafkaException that only
    wraps another; the exception itself otherwise."""
    seen = 0
    while seen < 5 and e is not None:
        name = str(e.getClass().getSimpleName())
        cause = e.getCause()
        if cause is None or name not in ("ExecutionException", "CompletionException"):
            break
        e, seen = cause, seen + 1
    return e


def class_names(e: Any) -> list[str]:
    """The simple names of e's class and its superclasses, nearest first."""
    names: list[str] = []
    cls = e.getClass()
    while cls is not None:
        names.append(str(cls.getSimpleName()))
        cls = cls.getSuperclass()
    return names


def outcome_of(names: list[str]) -> str:
    """`fail` or `info` for an exception whose class (and superclasses) are `names`."""
    for n in names:
        if n in EXCEPTIONS:
            return EXCEPTIONS[n]
    return INFO


# A TimeoutException saying this came from the wait for the partition's metadata, before the
# record was appended to the producer's buffer: never sent (a partition that does not exist)
NEVER_SENT = "not present in metadata"


def outcome(e: Any) -> str:
    """`fail` or `info` for a Java exception (an ExecutionException is judged by its cause)."""
    e = unwrap(e)
    if NEVER_SENT in str(e.getMessage() or ""):
        return FAIL
    return outcome_of(class_names(e))


def text(e: Any) -> str:
    """`SimpleName: message`, as the history's errors read."""
    e = unwrap(e)
    message = e.getMessage()
    return f"{e.getClass().getSimpleName()}: {'' if message is None else message}"
