"""Group members parked between a worker's processes: a client process that ended `info`
leaves its membership (a consumer, a session) to the worker's next process, which takes
it up instead of joining anew, as Jepsen's Kafka test keeps its consumers. Each system
says how a spare is closed when the run ends."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Spares(Generic[T]):
    """Members whose process ended `info`, waiting for the worker's next process."""

    def __init__(self, close: Callable[[T], None]) -> None:
        self.lock = threading.Lock()
        self.members: list[T] = []
        self._close = close

    def put(self, member: T) -> None:
        with self.lock:
            self.members.append(member)

    def take(self) -> T | None:
        with self.lock:
            return self.members.pop() if self.members else None

    def close_all(self) -> None:
        """Close every parked member (the run is ending)."""
        with self.lock:
            members, self.members = self.members, []
        for m in members:
            self._close(m)
