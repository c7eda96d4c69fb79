"""The words of a history line (shared/HISTORY.md) and the codes the readers' columns give
them: one list for the strict reader, its compiled parser (`fastlines`), the checks
across lines and the checkers' DuckDB reader, so a new operation is named once."""

from __future__ import annotations

TYPE_CODES: dict[str, int] = {"invoke": 0, "ok": 1, "fail": 2, "info": 3}
TYPE_NAMES: tuple[str, ...] = ("invoke", "ok", "fail", "info")
CLIENT_FS: tuple[str, ...] = ("send", "poll", "txn", "assign", "subscribe", "crash", "commit",
                               "committed")
F_CODES: dict[str, int] = {f: i for i, f in enumerate(CLIENT_FS)}
F_NEMESIS = len(CLIENT_FS)  # the f code of every nemesis op
NEMESIS_CODE = -1  # the process code of "nemesis"
