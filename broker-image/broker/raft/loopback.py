"""An in-process asyncio network for RaftDrivers: real timers and tasks, no sockets; links can be
cut one way and messages delayed, so tests and benches can fail over a real driver."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from .driver import RaftDriver

log = logging.getLogger("broker.raft")


@dataclass
class LoopbackNetwork:
    delay_s: float = 0.001
    drivers: dict[str, RaftDriver] = field(default_factory=dict)
    blocked: set[tuple[str, str]] = field(default_factory=set)

    def transport(self, src: str) -> _Link:
        return _Link(self, src)

    def isolate(self, node: str) -> None:
        self.blocked |= {(a, b) for a in self.drivers for b in self.drivers
                         if a != b and node in (a, b)}

    def heal(self) -> None:
        self.blocked.clear()

    def _deliver(self, src: str, dest: str, message: dict[str, Any]) -> None:
        driver = self.drivers.get(dest)
        if driver is None or not driver.running or (src, dest) in self.blocked:
            return
        driver.deliver(src, message)


@dataclass
class _Link:
    net: LoopbackNetwork
    src: str

    def send(self, dest: str, message: dict[str, Any]) -> None:
        if (self.src, dest) in self.net.blocked:
            return
        asyncio.get_running_loop().call_later(self.net.delay_s, self.net._deliver, self.src,
                                              dest, message)
