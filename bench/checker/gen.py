"""Synthetic histories of a correct log (64 keys, 20 processes) with planted anomalies.

Each op takes effect at its completion, so the history is correct except for
the plants: a lost acknowledged write (its offset reused: lost-write and
inconsistent-offsets), a value stored twice (duplicate), a failed send that
was stored (G1a), and one poll that re-reads a record (nonmonotonic-poll).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

KEYS = 64
PROCESSES = 20
PLANTED = ("lost-write", "inconsistent-offsets", "duplicate", "G1a", "nonmonotonic-poll")


@dataclass(frozen=True)
class _Shape:
    """How one kind of synthetic history differs from the other."""
    encode: Callable[[object], bytes]
    first_value: int
    value_step: tuple[int, int]  # a new value is the last plus randrange(*value_step)
    time_step: tuple[int, int]
    max_records: int  # a poll reads 1 to max_records - 1 new records of each key it reads
    all_keys: bool  # each poll reads every key in a random order, else its own few keys


_COMPACT = _Shape(orjson.dumps, 0, (1, 2), (1000, 1001), 4, False)
_REALISTIC = _Shape(lambda o: json.dumps(o).encode(), 10**17, (1, 1000), (1000, 2_000_000),
                    7, True)


def generate(path: Path, ops: int, *, seed: int = 1) -> int:
    """Write about `ops` lines (each op is an invoke and a completion); returns lines."""
    return _write(path, ops, seed, _COMPACT)


def generate_realistic(path: Path, ops: int, *, seed: int = 1) -> int:
    """About `ops` lines of a correct log written the way many writers write JSON (a space
    after every separator, times in nanoseconds since the start, 18-digit values): 64 keys,
    20 processes, each poll reading what is new on every key in a random order, 1 to 6
    records of each (about 20 records a poll); about 220 bytes a line. The same plants as
    `generate`."""
    return _write(path, ops, seed, _REALISTIC)


def _write(path: Path, ops: int, seed: int, shape: _Shape) -> int:
    rnd = random.Random(seed)
    logs: list[list[int]] = [[] for _ in range(KEYS)]
    own_keys = [list(range(p % KEYS, KEYS, PROCESSES)) for p in range(PROCESSES)]
    cursors = [[0] * KEYS for _ in range(PROCESSES)]
    pairs = ops // 2 - KEYS
    plant_at = {pairs // 5: "lost", 2 * pairs // 5: "dup", 3 * pairs // 5: "g1a",
                (4 * pairs // 5) | 1: "reread"}
    lines = 0
    value = shape.first_value
    t = 0
    buf: list[bytes] = []
    with open(path, "wb") as fh:
        def emit(type_: str, p: int, f: str, v: object) -> None:
            nonlocal lines, t
            t += rnd.randrange(*shape.time_step)
            buf.append(shape.encode({"index": lines, "time": t, "type": type_, "process": p,
                                     "f": f, "value": v}))
            lines += 1

        for i in range(pairs):
            plant = plant_at.get(i)
            p = i % PROCESSES
            if i % 2 == 0 or plant in ("lost", "dup", "g1a"):
                k = rnd.randrange(KEYS) if plant is None else {"lost": 1, "dup": 2, "g1a": 3}[plant]
                value += rnd.randrange(*shape.value_step)
                log = logs[k]
                emit("invoke", p, "send", [["send", k, value]])
                off = len(log)
                if plant != "lost":
                    log.append(value)
                if plant == "dup":
                    log.append(value)
                emit("fail" if plant == "g1a" else "ok", p, "send", [["send", k, [off, value]]])
            else:
                emit("invoke", p, "poll", [["poll"]])
                got = {}
                keys = rnd.sample(range(KEYS), KEYS) if shape.all_keys else own_keys[p]
                for k in keys:
                    c = cursors[p][k]
                    if plant == "reread" and c > 0:
                        c -= 1
                        plant = None
                    end = min(len(logs[k]), c + rnd.randrange(1, shape.max_records))
                    if end > c:
                        got[str(k)] = [[o, logs[k][o]] for o in range(c, end)]
                        cursors[p][k] = end
                emit("ok", p, "poll", [["poll", got]])
            if len(buf) >= 100000:
                fh.write(b"\n".join(buf) + b"\n")
                buf.clear()
        for k in range(KEYS):  # the final read of every key
            emit("invoke", PROCESSES + k, "poll", [["poll"]])
            emit("ok", PROCESSES + k, "poll",
                 [["poll", {str(k): [[o, v] for o, v in enumerate(logs[k])]}]])
        fh.write(b"\n".join(buf) + b"\n")
    return lines
