"""The log job's two shapes (a map over whole-key rows, a shuffle by key) answer alike.

Runs in its own interpreter, as a check does (one Spark JVM per process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLES = Path("/work/shared/examples")
if not EXAMPLES.exists():
    EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "examples"

SCRIPT = """
import sys
from pathlib import Path
from checkers.spark import OUT_COLUMNS, log_checks_local, log_checks_spark, spark_session
from checkers.tables import load_tables

t = load_tables(Path(sys.argv[1]))
rows = lambda log: sorted(zip(*(log[c] for c in OUT_COLUMNS)))
with spark_session("local[2]") as spark:
    mapped = log_checks_spark(spark, t, local=True, shuffle=False)
    grouped = log_checks_spark(spark, t, local=True, shuffle=True)
local = log_checks_local(t)
assert rows(mapped) == rows(grouped) == rows(local)
assert any(tag == "c" for tag in mapped["tag"])  # the example has anomalies to agree on
print("same")
"""


@pytest.mark.skipif(not (EXAMPLES / "truncated").exists(), reason="shared examples not found")
def test_mapped_and_grouped_jobs_agree_with_the_local_loop() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(EXAMPLES / "truncated")],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and done.stdout.strip() == "same", done.stderr[-3000:]
