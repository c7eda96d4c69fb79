"""The run-file contract (shared/HISTORY.md), read and written in this one package.

- `paths`: the folder's file names and `RunPaths`;
- `testjson`: test.json read, written and amended (the only code that does);
- `ops`: the `Op` record (one history line) and `HistoryError`, the one input error;
- `writer`: history.jsonl appended as it happens, replicas.jsonl and results.json
  written whole (the one results.json writer);
- `vocab`: the words of a history line (types, operations) and their column codes;
- `strict`: the strict reader of history.jsonl (checked columns, for the checkers),
  `crosslines` its checks across lines (also run on the DuckDB reader's columns);
  `commits` its grammar of committed offsets (`commit`, `committed`, `"group"`),
  `lineerror` the line error and integer check its parsers share;
- `replicas`: the strict reader of replicas.jsonl;
- `notes`: the nemesis lines and error strings that the columns leave out (availability);
- `tolerant`: the forgiving reader of a run folder (report, index, nightly, liveness),
  and `iter_history`, the one streamed pass over history lines;
- `walk`: the tolerant pass over the history's lines that the report draws from
  (imported as `harness.runfiles.walk`: it needs numpy, the rest does not);
- `verdict`: the exit codes of `undertow run` and `undertow check`.

Other packages import the public names re-exported here (or from `walk`), never a
private one: a new reader or writer of run files belongs in this package.
"""

from harness.runfiles.commits import (
    COMMIT_ANSWERED,
    COMMIT_ASKED,
    COMMIT_COLUMNS,
    COMMIT_WRITE,
    DEFAULT_GROUP,
    merge_commits,
)
from harness.runfiles.notes import FINAL, Assigned, ErrorLine, Notes, line_times, read_notes
from harness.runfiles.ops import NEMESIS, HistoryError, Op, OpType, Process
from harness.runfiles.paths import (
    HISTORY_JSONL,
    REPLICAS_JSONL,
    RESULTS_JSON,
    TEST_JSON,
    RunPaths,
)
from harness.runfiles.replicas import Replicas, ReplicaSummary, read_replicas
from harness.runfiles.strict import (
    CLIENT_FS,
    F_CODES,
    F_NEMESIS,
    NEMESIS_CODE,
    NO_OFFSET,
    TYPE_CODES,
    TYPE_NAMES,
    HistoryScan,
    check_lines,
    check_sends,
    parse_commit_lines,
    read_history,
    scan_history,
)
from harness.runfiles.testjson import amend_test_json, read_test_json, save_test_json
from harness.runfiles.tolerant import (
    RunFiles,
    iter_history,
    last_acked_send,
    load_run,
    no_gc,
    read_json,
    read_jsonl,
    read_results,
    recent_send_counts,
    recent_send_keys,
)
from harness.runfiles.verdict import (
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_MEANING,
    EXIT_UNKNOWN,
    EXIT_USAGE,
    EXIT_VALID,
    exit_code,
    worst_exit_code,
)
from harness.runfiles.writer import HistoryWriter, write_jsonl, write_results

__all__ = [
    "CLIENT_FS",
    "COMMIT_ANSWERED",
    "COMMIT_ASKED",
    "COMMIT_COLUMNS",
    "COMMIT_WRITE",
    "DEFAULT_GROUP",
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_MEANING",
    "EXIT_UNKNOWN",
    "EXIT_USAGE",
    "EXIT_VALID",
    "FINAL",
    "F_CODES",
    "F_NEMESIS",
    "HISTORY_JSONL",
    "NEMESIS",
    "NEMESIS_CODE",
    "NO_OFFSET",
    "REPLICAS_JSONL",
    "RESULTS_JSON",
    "TEST_JSON",
    "TYPE_CODES",
    "TYPE_NAMES",
    "Assigned",
    "ErrorLine",
    "HistoryError",
    "HistoryScan",
    "HistoryWriter",
    "Notes",
    "Op",
    "OpType",
    "Process",
    "ReplicaSummary",
    "Replicas",
    "RunFiles",
    "RunPaths",
    "amend_test_json",
    "check_lines",
    "check_sends",
    "exit_code",
    "iter_history",
    "last_acked_send",
    "line_times",
    "load_run",
    "merge_commits",
    "no_gc",
    "parse_commit_lines",
    "read_history",
    "read_json",
    "read_jsonl",
    "read_notes",
    "read_replicas",
    "read_results",
    "read_test_json",
    "recent_send_counts",
    "recent_send_keys",
    "save_test_json",
    "scan_history",
    "worst_exit_code",
    "write_jsonl",
    "write_results",
]
