"""Build small run folders by hand (tests, examples): history.jsonl and replicas.jsonl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

Record = tuple[int, int]


class HistoryBuilder:
    """Appends history lines with index and an increasing time; `op` is invoke + completion."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def line(self, type_: str, process: int | str, f: str, value: Any, **extra: Any) -> int:
        i = len(self.lines)
        self.lines.append({"index": i, "time": 1000 * (i + 1), "type": type_,
                           "process": process, "f": f, "value": value, **extra})
        return i

    def invoke(self, process: int, f: str, value: Any, **extra: Any) -> int:
        return self.line("invoke", process, f, value, **extra)

    def complete(self, process: int, f: str, type_: str, value: Any, **extra: Any) -> int:
        return self.line(type_, process, f, value, **extra)

    def send(self, process: int, key: int, value: int, offset: int | None,
             type_: str = "ok") -> int:
        i = self.invoke(process, "send", [["send", key, value]])
        self.complete(process, "send", type_, [["send", key, [offset, value]]])
        return i

    def poll(self, process: int, records: dict[int, list[Record]], type_: str = "ok") -> int:
        i = self.invoke(process, "poll", [["poll"]])
        self.complete(process, "poll", type_,
                      [["poll", {str(k): [list(r) for r in v] for k, v in records.items()}]])
        return i

    def txn(self, process: int, sends: list[tuple[int, int, int | None]],
            reads: dict[int, list[Record]] | None = None, type_: str = "ok") -> int:
        mops: list[Any] = [["send", k, v] for k, v, _ in sends]
        done: list[Any] = [["send", k, [o, v]] for k, v, o in sends]
        if reads is not None:
            mops.append(["poll"])
            done.append(["poll", {str(k): [list(r) for r in v] for k, v in reads.items()}])
        i = self.invoke(process, "txn", mops)
        self.complete(process, "txn", type_, done)
        return i

    def write(self, run_dir: Path, replicas: list[dict[str, Any]] | None = None) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "history.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n"
                                                         for x in self.lines))
        if replicas is not None:
            (run_dir / "replicas.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n"
                                                              for x in replicas))
        return run_dir


def replica_rows(node: str, key: int, hw: int, values: list[int],
                 leo: int | None = None) -> list[dict[str, Any]]:
    """A replica's summary and records (offset = position in values)."""
    rows: list[dict[str, Any]] = [{"node": node, "key": key, "hw": hw,
                                   "leo": len(values) if leo is None else leo,
                                   "leader_epoch": 1}]
    rows += [{"node": node, "key": key, "offset": o, "value": v, "epoch": 1}
             for o, v in enumerate(values)]
    return rows
