"""Fixtures that start real broker processes (python -m broker --config ...) in tmp dirs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from broker.localcluster import LocalCluster


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., LocalCluster]]:
    """Build LocalClusters on free ports; every process is SIGKILLed at teardown."""
    made: list[LocalCluster] = []

    def make(**kw: Any) -> LocalCluster:
        c = LocalCluster(tmp_path / f"cluster{len(made)}", **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
