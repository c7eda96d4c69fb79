"""Property tests: histories of a correct in-memory log are valid; one planted anomaly is found."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.api import check_local
from checkers.testing import HistoryBuilder


def simulate(seed: int, steps: int, keys: int, procs: int) -> HistoryBuilder:
    """Random concurrent clients of one correct log; each op takes effect at completion."""
    rnd = random.Random(seed)
    b = HistoryBuilder()
    logs: list[list[int]] = [[] for _ in range(keys)]
    slots: list[dict[str, Any]] = [{"p": i, "pending": None, "cur": [0] * keys}
                                   for i in range(procs)]
    next_p, next_v = procs, 1
    for _ in range(steps):
        s = rnd.choice(slots)
        op = s["pending"]
        if op is None:
            if rnd.random() < 0.5:
                sends = [(rnd.randrange(keys), next_v + j) for j in range(rnd.choice((1, 1, 2)))]
                next_v += len(sends)
                f = "send" if len(sends) == 1 else "txn"
                b.invoke(s["p"], f, [["send", k, v] for k, v in sends])
                s["pending"] = (f, sends)
            else:
                b.invoke(s["p"], "poll", [["poll"]])
                s["pending"] = ("poll", None)
            continue
        f, sends = op
        s["pending"] = None
        if f == "poll":
            got = {}
            for k in range(keys):
                end = min(len(logs[k]), s["cur"][k] + rnd.randrange(3))
                if end > s["cur"][k]:
                    got[str(k)] = [[o, logs[k][o]] for o in range(s["cur"][k], end)]
                    s["cur"][k] = end
            b.complete(s["p"], "poll", "ok", [["poll", got]])
            continue
        outcome = rnd.choice(("ok", "ok", "ok", "fail", "info"))
        applied = outcome == "ok" or (outcome == "info" and rnd.random() < 0.5)
        done = []
        for k, v in sends:
            off = None
            if applied:
                off = len(logs[k])
                logs[k].append(v)
            done.append(["send", k, [off if outcome != "info" else None, v]])
        b.complete(s["p"], f, outcome, done)
        if outcome == "info":
            s["p"], next_p, s["cur"] = next_p, next_p + 1, [0] * keys
    for s in slots:  # complete what is pending as failed (never applied)
        if s["pending"] is not None:
            f, sends = s["pending"]
            b.complete(s["p"], f, "fail", [["poll"]] if f == "poll" else
                       [["send", k, v] for k, v in sends])
    for k in range(keys):
        b.poll(next_p + k, {k: [(o, v) for o, v in enumerate(logs[k])]})
    return b


histories = st.tuples(st.integers(0, 2**32), st.integers(1, 60), st.integers(1, 3),
                      st.integers(1, 4))
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def check(b: HistoryBuilder) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        return check_local(b.write(Path(d)))


@SETTINGS
@given(histories)
def test_correct_log_is_valid(args: tuple[int, int, int, int]) -> None:
    r = check(simulate(*args))
    assert r["anomaly_types"] == [], r["anomalies"]
    assert r["valid"] is True


def ok_sends(b: HistoryBuilder) -> list[tuple[int, int, int]]:
    """(key, value, offset) of every ok send with an offset."""
    out = []
    for x in b.lines:
        if x["type"] == "ok" and x["f"] in ("send", "txn"):
            out += [(m[1], m[2][1], m[2][0]) for m in x["value"] if m[0] == "send"]
    return out


def final_polls(b: HistoryBuilder) -> dict[int, list[list[int]]]:
    """The final read's records by key (the last poll line of each key)."""
    out = {}
    for x in b.lines:
        if x["type"] == "ok" and x["f"] == "poll":
            for ks, recs in x["value"][0][1].items():
                out[int(ks)] = recs
    return out


@SETTINGS
@given(histories, st.sampled_from(["lost-write", "G1a", "duplicate", "inconsistent-offsets"]),
       st.integers(0, 2**16))
def test_planted_anomaly_found(args: tuple[int, int, int, int], plant: str, pick: int) -> None:
    b = simulate(*args)
    sends = ok_sends(b)
    top = {k: max(o for kk, _, o in sends if kk == k) for k, _, _ in sends}
    if plant == "lost-write":
        sends = [s for s in sends if s[2] < top[s[0]]]
    if not sends:
        return
    key, value, offset = sends[pick % len(sends)]
    if plant == "lost-write":  # nobody ever reads it
        for x in b.lines:
            if x["f"] == "poll" and x["type"] == "ok":
                for recs in x["value"][0][1].values():
                    recs[:] = [r for r in recs if r[1] != value]
    elif plant == "G1a":  # its operation reports fail, yet it was read
        for i, x in enumerate(b.lines):
            if x["type"] == "ok" and any(m[0] == "send" and m[2][1] == value for m in x["value"]):
                b.lines[i] = {**x, "type": "fail"}
    elif plant == "duplicate":
        recs = final_polls(b)[key]
        recs.append([recs[-1][0] + 1, value])
    else:
        for r in final_polls(b)[key]:
            if r[0] == offset:
                r[1] = 10**9
    result = check(b)
    assert plant in result["anomaly_types"], result["anomaly_types"]
    assert result["valid"] is False


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1)),
                max_size=60), st.integers(0, 3))
def test_unique_pairs_is_numpys_unique_of_rows(rows: list[tuple[int, int]], repeat: int) -> None:
    """The log checks' distinct (offset, value) rows: the rows and order np.unique gives."""
    import numpy as np

    from checkers.logcheck import unique_pairs

    a = np.array([r[0] for r in rows] * (repeat + 1), np.int64)
    b = np.array([r[1] for r in rows] * (repeat + 1), np.int64)
    want = np.unique(np.stack([a, b], axis=1), axis=0) if len(a) else np.zeros((0, 2), np.int64)
    got = unique_pairs(a, b)
    assert got.dtype == np.int64 and got.shape == want.shape
    assert np.array_equal(got, want)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=30), max_size=5),
       st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20))
def test_read_by_any_is_isin_over_every_range(ranges: list[list[int]], values: list[int]) -> None:
    """Which info values some Spark task read: np.isin over all the tasks' values."""
    import numpy as np

    from checkers.sparkread import read_by_any

    distinct = [np.unique(np.array(r, np.int64)) for r in ranges]
    vals = np.unique(np.array(values, np.int64))
    every = np.concatenate(distinct) if distinct else np.zeros(0, np.int64)
    assert np.array_equal(read_by_any(vals, distinct), np.isin(vals, every))
