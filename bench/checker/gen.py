"""Synthetic histories of a correct log (64 keys, 20 processes) with planted anomalies.

Each op takes effect at its completion, so the history is correct except for
the plants: a lost acknowledged write (its offset reused: lost-write and
inconsistent-offsets), a value stored twice (duplicate), a failed send that
was stored (G1a), and one poll that re-reads a record (nonmonotonic-poll).
"""

from __future__ import annotations

import random
from pathlib import Path

import orjson

KEYS = 64
PROCESSES = 20
PLANTED = ("lost-write", "inconsistent-offsets", "duplicate", "G1a", "nonmonotonic-poll")


def generate(path: Path, ops: int, *, seed: int = 1) -> int:
    """Write about `ops` lines (each op is an invoke and a completion); returns lines."""
    rnd = random.Random(seed)
    logs: list[list[int]] = [[] for _ in range(KEYS)]
    cursors = [dict.fromkeys(range(p % KEYS, KEYS, PROCESSES), 0) for p in range(PROCESSES)]
    pairs = ops // 2 - KEYS
    plant_at = {pairs // 5: "lost", 2 * pairs // 5: "dup", 3 * pairs // 5: "g1a",
                (4 * pairs // 5) | 1: "reread"}
    lines = 0
    value = 0
    t = 0
    buf: list[bytes] = []
    dumps = orjson.dumps
    with open(path, "wb") as fh:
        def emit(type_: str, p: int, f: str, v: object) -> None:
            nonlocal lines, t
            t += 1000
            buf.append(dumps({"index": lines, "time": t, "type": type_, "process": p,
                              "f": f, "value": v}))
            lines += 1

        for i in range(pairs):
            plant = plant_at.get(i)
            p = i % PROCESSES
            if i % 2 == 0 or plant in ("lost", "dup", "g1a"):
                k = rnd.randrange(KEYS) if plant is None else {"lost": 1, "dup": 2, "g1a": 3}[plant]
                value += 1
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
                for k, c in cursors[p].items():
                    if plant == "reread" and c > 0:
                        c -= 1
                        plant = None
                    end = min(len(logs[k]), c + rnd.randrange(1, 4))
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


def generate_realistic(path: Path, ops: int, *, seed: int = 1) -> int:
    """About `ops` lines of a correct log written the way many writers write JSON (a space
    after every separator, times in nanoseconds since the start, 18-digit values): 64 keys,
    20 processes, each poll reading what is new on every key in a random order, 1 to 6
    records of each (about 20 records a poll); about 260 bytes a line, so a 10M-line
    history is about 2.6 GB. The same plants as `generate`."""
    import json

    rnd = random.Random(seed)
    logs: list[list[int]] = [[] for _ in range(KEYS)]
    cursors = [[0] * KEYS for _ in range(PROCESSES)]
    pairs = ops // 2 - KEYS
    plant_at = {pairs // 5: "lost", 2 * pairs // 5: "dup", 3 * pairs // 5: "g1a",
                (4 * pairs // 5) | 1: "reread"}
    lines = 0
    value = 10**17
    t = 0
    buf: list[str] = []
    dumps = json.dumps
    with open(path, "w") as fh:
        def emit(type_: str, p: int, f: str, v: object) -> None:
            nonlocal lines, t
            t += rnd.randrange(1000, 2_000_000)
            buf.append(dumps({"index": lines, "time": t, "type": type_, "process": p,
                              "f": f, "value": v}))
            lines += 1

        for i in range(pairs):
            plant = plant_at.get(i)
            p = i % PROCESSES
            if i % 2 == 0 or plant in ("lost", "dup", "g1a"):
                k = rnd.randrange(KEYS) if plant is None else {"lost": 1, "dup": 2, "g1a": 3}[plant]
                value += rnd.randrange(1, 1000)
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
                for k in rnd.sample(range(KEYS), KEYS):
                    c = cursors[p][k]
                    if plant == "reread" and c > 0:
                        c -= 1
                        plant = None
                    end = min(len(logs[k]), c + rnd.randrange(1, 7))
                    if end > c:
                        got[str(k)] = [[o, logs[k][o]] for o in range(c, end)]
                        cursors[p][k] = end
                emit("ok", p, "poll", [["poll", got]])
            if len(buf) >= 100000:
                fh.write("\n".join(buf) + "\n")
                buf.clear()
        for k in range(KEYS):  # the final read of every key
            emit("invoke", PROCESSES + k, "poll", [["poll"]])
            emit("ok", PROCESSES + k, "poll",
                 [["poll", {str(k): [[o, v] for o, v in enumerate(logs[k])]}]])
        fh.write("\n".join(buf) + "\n")
    return lines
