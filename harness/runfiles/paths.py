"""The names of a run folder's files (shared/HISTORY.md), in one place: `RunPaths`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HISTORY_JSONL = "history.jsonl"
REPLICAS_JSONL = "replicas.jsonl"
RESULTS_JSON = "results.json"
TEST_JSON = "test.json"


@dataclass(frozen=True, slots=True)
class RunPaths:
    """Where one run's files go: results/<test>/<timestamp>/."""

    root: Path

    @property
    def history(self) -> Path:
        return self.root / HISTORY_JSONL

    @property
    def replicas(self) -> Path:
        return self.root / REPLICAS_JSONL

    @property
    def results(self) -> Path:
        return self.root / RESULTS_JSON

    @property
    def test_json(self) -> Path:
        return self.root / TEST_JSON

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @property
    def harness_log(self) -> Path:
        return self.root / "harness.log"

    def node_dir(self, node: str) -> Path:
        return self.root / "nodes" / node
