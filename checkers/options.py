"""The checkers' own options: which Spark checks a run (checkers/spark_server.py `resolve`).

Declared here once (harness/options.py): `undertow run --help` lists them under
`Options of the checkers`, a TOML file sets them in its `[checkers]` table, and test.json
records them under `options.checkers` (the part's name, harness/options.py `CHECKERS`).
The part is the run-file checker suite (checkers/suite.py `RunFileChecker`, whose
`options` this is); `undertow run` resolves the Spark they name before anything starts
(a warm one that is not up: exit 2), the suite again when it checks. They were TestSpec
fields before (`spark`, `spark_master`, `spark_remote`): each names that key
(`formerly`), so old TOML files, scenarios and test.json files still set them.
`undertow check DIR` has its own flags of the same names (checkers/cli.py): a check
chooses its Spark, not the run it checks.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.options import CheckerOptions, option
from harness.spec import SPARK_CHOICES


@dataclass(frozen=True, slots=True)
class SparkOptions(CheckerOptions):
    """Which Spark the run's checkers use: checkers.spark_server.resolve's rule."""

    spark: str = option(
        "auto", "Which Spark checks the run: auto (the warm one of `undertow spark start` "
        "when it is up, else cold), cold, or warm (exit 2 if none is up).",
        choices=SPARK_CHOICES, formerly="spark")
    spark_master: str = option(
        "local[2]", "Spark master of a cold check (a non-local one is used as given).",
        metavar="TEXT", formerly="spark_master")
    spark_remote: str | None = option(
        None, "A Spark Connect server (sc://HOST:PORT) to check on.", metavar="TEXT",
        formerly="spark_remote")
