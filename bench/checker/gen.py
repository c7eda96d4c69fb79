"""Synthetic histories of a correct log (64 keys, 20 processes) with planted anomalies.

Each op takes effect at its completion, so the history is correct except for
the plants: a lost acknowledged write (its offset reused: lost-write and
inconsistent-offsets), a value stored twice (duplicate), a failed send that
was stored (G1a), and one poll that re-reads a record (nonmonotonic-poll).

The realistic shape re-samples a real `undertow run` history: the default
experiment (`undertow run --seed 1`, queue-kill-partition, 60 s, 25,858 lines;
`python -m bench.history_bytes` and the figures below, 2026-11-26). Sampled:
- client operations: 50.3 % send, 39.3 % poll, 10.3 % assign (of 1, 2 or 3 keys,
  a third each); 2.4 % of sends end info (the process then continues under a new
  number), 0.24 % of polls fail; both carry an error message as the harness writes;
- completed polls: 20.3 % read nothing; the others read 1, 2 or 3 keys (44, 34,
  22 %) and a number of records drawn from the run's quantiles (POLL_RECORDS; mean
  28.8, median 6, at most 100);
- 2.46 ms between lines on average.
Not sampled: the real run has 14 keys, compact JSON and values counting from 0;
here 64 keys, values of 18 digits, and a space after every separator, as many
writers emit (`json.dumps`). Positions persist across assigns (no seek to the
beginning), so a poll reads only records it has not read. That makes 231 bytes a
line at 100k lines, 254 at 1M and 263 at 10M (2.63 GB), as numbers get longer.
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
# records read by a non-empty poll of the sampled run, its quantiles at 0, 5, ..., 100 %
POLL_RECORDS = (1, 1, 1, 1, 2, 2, 3, 4, 5, 6, 8, 12, 22, 34, 41, 51, 61, 70, 99, 100, 100)
SEND_ERROR = "CONNECTION: n1: connection closed by the broker"
POLL_ERROR = "n3: partition 5: gave up after 3.0s: n3: [Errno 104] Connection reset by peer"


@dataclass(frozen=True)
class _Shape:
    """How one kind of synthetic history differs from the other."""
    encode: Callable[[object], bytes]
    first_value: int
    value_step: tuple[int, int]  # a new value is the last plus randrange(*value_step)
    time_step: tuple[int, int]
    sampled: bool  # the realistic mix above; else sends and polls alternate, each poll
    # reading 1 to 3 new records of each of the process's own few keys


_COMPACT = _Shape(orjson.dumps, 0, (1, 2), (1000, 1001), False)
_REALISTIC = _Shape(lambda o: json.dumps(o).encode(), 10**17, (1, 1000), (1, 4_920_000), True)


def generate(path: Path, ops: int, *, seed: int = 1) -> int:
    """Write about `ops` lines (each op is an invoke and a completion); returns lines."""
    return _write(path, ops, seed, _COMPACT)


def generate_realistic(path: Path, ops: int, *, seed: int = 1) -> int:
    """About `ops` lines re-sampled from a real run (module docstring), 230 to 265 bytes
    a line; the same plants as `generate`."""
    return _write(path, ops, seed, _REALISTIC)


def _poll_records(rnd: random.Random) -> int:
    """A draw from POLL_RECORDS (linear between the quantiles)."""
    u = rnd.random() * (len(POLL_RECORDS) - 1)
    i = int(u)
    return round(POLL_RECORDS[i] + (POLL_RECORDS[i + 1] - POLL_RECORDS[i]) * (u - i))


def _write(path: Path, ops: int, seed: int, shape: _Shape) -> int:
    rnd = random.Random(seed)
    logs: list[list[int]] = [[] for _ in range(KEYS)]
    own_keys = [list(range(p % KEYS, KEYS, PROCESSES)) for p in range(PROCESSES)]
    cursors = [[0] * KEYS for _ in range(PROCESSES)]
    seg_keys: list[set[int]] = [set() for _ in range(PROCESSES)]  # read since a break
    names = list(range(PROCESSES))  # each worker's process number (new after info)
    pairs = ops // 2 - KEYS
    plant_at = {pairs // 5: "lost", 2 * pairs // 5: "dup", 3 * pairs // 5: "g1a",
                (4 * pairs // 5) | 1: "reread"}
    reread = False  # the re-read is planted at the first poll that can carry it
    lines = 0
    value = shape.first_value
    t = 0
    buf: list[bytes] = []
    with open(path, "wb") as fh:
        def emit(type_: str, p: int, f: str, v: object, error: str | None = None) -> None:
            nonlocal lines, t
            t += rnd.randrange(*shape.time_step)
            op: dict[str, object] = {"index": lines, "time": t, "type": type_, "process": p,
                                     "f": f, "value": v}
            if error is not None:
                op["error"] = error
            buf.append(shape.encode(op))
            lines += 1

        for i in range(pairs):
            plant = plant_at.get(i)
            reread = reread or plant == "reread"
            w = i % PROCESSES
            p = names[w]
            u = rnd.random() if shape.sampled else (i % 2) * 0.75
            planted_key = {"lost": 1, "dup": 2, "g1a": 3}.get(plant or "")
            if planted_key is not None or u < 0.503:
                k = rnd.randrange(KEYS) if planted_key is None else planted_key
                value += rnd.randrange(*shape.value_step)
                log = logs[k]
                emit("invoke", p, "send", [["send", k, value]])
                off = len(log)
                if plant is None and shape.sampled and rnd.random() < 0.024:
                    if rnd.random() < 0.5:
                        log.append(value)  # it happened, unknown to the client
                    emit("info", p, "send", [["send", k, value]], SEND_ERROR)
                    names[w] = max(names) + 1
                    seg_keys[w].clear()
                    continue
                if plant != "lost":
                    log.append(value)
                if plant == "dup":
                    log.append(value)
                emit("fail" if plant == "g1a" else "ok", p, "send", [["send", k, [off, value]]])
            elif u < 0.896:
                emit("invoke", p, "poll", [["poll"]])
                if shape.sampled and rnd.random() < 0.0024:
                    emit("fail", p, "poll", [["poll"]], POLL_ERROR)
                    seg_keys[w].clear()
                    continue
                got = {}
                if not shape.sampled:
                    keys, quota = own_keys[w], [rnd.randrange(1, 4) for _ in own_keys[w]]
                elif rnd.random() < 0.203:
                    keys, quota = [], []
                else:
                    n = rnd.choices((1, 2, 3), (44, 34, 22))[0]
                    # of a few keys, those with the most to read (a consumer's assigned
                    # keys are ones being written)
                    pick = rnd.sample(range(KEYS), 3 * n)
                    pick.sort(key=lambda x: cursors[w][x] - len(logs[x]))
                    keys, total = pick[:n], _poll_records(rnd)
                    quota = [total // n + (j < total % n) for j in range(n)]
                if reread and (again := [k for k in seg_keys[w] if cursors[w][k] > 0]):
                    k = min(again)  # re-read this key's last record: nonmonotonic
                    keys, quota = [k, *(x for x in keys if x != k)], [1, *quota]
                    cursors[w][k] -= 1
                    reread = False
                for k, q in zip(keys, quota, strict=False):
                    c = cursors[w][k]
                    end = min(len(logs[k]), c + q)
                    if end > c:
                        got[str(k)] = [[o, logs[k][o]] for o in range(c, end)]
                        cursors[w][k] = end
                        seg_keys[w].add(k)
                emit("ok", p, "poll", [["poll", got]])
            else:
                keys = rnd.sample(range(KEYS), rnd.randrange(1, 4))
                emit("invoke", p, "assign", keys)
                emit("ok", p, "assign", keys)
                seg_keys[w].clear()
            if len(buf) >= 100000:
                fh.write(b"\n".join(buf) + b"\n")
                buf.clear()
        last = max(names) + 1
        for k in range(KEYS):  # the final read of every key
            emit("invoke", last + k, "poll", [["poll"]])
            emit("ok", last + k, "poll",
                 [["poll", {str(k): [[o, v] for o, v in enumerate(logs[k])]}]])
        fh.write(b"\n".join(buf) + b"\n")
    return lines
