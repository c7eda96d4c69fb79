"""bench/checker/gen.py: both shapes are correct logs apart from their plants, and the
realistic one keeps the sampled run's mix."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from bench.checker.gen import PLANTED, generate, generate_realistic
from checkers.api import check_local


@pytest.mark.parametrize("make", [generate, generate_realistic], ids=["compact", "realistic"])
def test_exactly_the_planted_anomalies_are_found(tmp_path: Path, make: object) -> None:
    assert callable(make)
    lines = make(tmp_path / "history.jsonl", 40_000)
    result = check_local(tmp_path)
    assert result["stats"]["lines"] == lines
    assert set(result["counts"]) == set(PLANTED)


def test_realistic_mix_follows_the_sampled_run(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    lines = generate_realistic(path, 100_000)
    rows = [orjson.loads(x) for x in path.read_bytes().splitlines()][:-2 * 64]  # final reads
    ops = [r for r in rows if r["type"] == "invoke"]
    share = {f: sum(r["f"] == f for r in ops) / len(ops) for f in ("send", "poll", "assign")}
    assert share["send"] == pytest.approx(0.503, abs=0.01)
    assert share["poll"] == pytest.approx(0.393, abs=0.01)
    assert any(r["type"] == "info" and "error" in r for r in rows)
    polls = [r["value"][0][1] for r in rows if r["f"] == "poll" and r["type"] == "ok"]
    read = [sum(map(len, p.values())) for p in polls]
    assert sum(n == 0 for n in read) / len(read) == pytest.approx(0.203, abs=0.02)
    assert sum(n > 100 or len(p) > 3 for n, p in zip(read, polls, strict=True)) <= 1  # the re-read
    assert 220 <= path.stat().st_size / lines <= 270  # 231 here, 263 at 10M (longer numbers)
