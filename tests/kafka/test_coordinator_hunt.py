"""The KAFKA-20634 hunt: the scenario assembles with commits as operations on the Java
client, its cuts and heals, what each release is expected to show, and the releases it
names as fixed or not, read from their jars."""

from __future__ import annotations

import itertools
import zipfile
from typing import Any

import pytest

from harness.run_cli import _scenario_layer
from harness.spec import build_spec
from harness.test import assemble
from nemesis.packages import nemesis_package
from systems.kafka import coordinator_hunt, jars
from systems.kafka.options import KafkaOptions

NAME = "kafka-coordinator-isolation"


def test_the_scenario_commits_as_operations_and_waits_longer_than_the_coordinator() -> None:
    test = assemble(build_spec(_scenario_layer(NAME)))
    client: Any = test.system.client(test)
    assert client.offset_ops  # commit / committed operations, judged as registers
    # a commit waits 10 s, past the coordinator's own 5 s (offsets.commit.timeout.ms), so
    # an answer the old coordinator gives at the heal reaches the operation
    assert client.inner.timeout_s == 10.0
    opts = KafkaOptions.of(test.spec)
    assert (opts.client, opts.kafka_client_version, opts.kafka_version) == \
        ("java", coordinator_hunt.CLIENT, coordinator_hunt.UNFIXED)


@pytest.mark.parametrize("seed", [1, 7])
def test_each_cycle_cuts_the_coordinator_off_and_heals_4_to_8_s_later(seed: int) -> None:
    spec = build_spec(_scenario_layer(NAME), {"seed": seed})
    plan = nemesis_package(spec).plan
    cuts, heals = plan[0::2], plan[1::2]
    # the last cycle's heal may fall after the time limit: the run's final heal ends it
    assert len(cuts) - len(heals) in (0, 1)
    for cut, heal in zip(cuts, heals, strict=False):
        assert cut.f == "partition" and cut.value == {"kind": "coordinator", "as": "C"}
        assert heal.f == "heal"
        assert 4.0 <= heal.at_s - cut.at_s <= 8.0
    starts = [c.at_s for c in cuts]
    assert all(b - a >= coordinator_hunt.PERIOD_S - 1e-9 for a, b in itertools.pairwise(starts))
    assert len(cuts) >= 7  # cycles every 15 s of the 120 s


@pytest.mark.parametrize(("release", "expected"), [
    ("4.1.2", ("stale-committed-offset",)), ("4.2.1", ("stale-committed-offset",)),
    ("4.2.2", ()), ("4.3.0", ("stale-committed-offset",)), ("4.3.1", ()), ("4.4.0", ())])
def test_what_each_release_must_show(release: str, expected: tuple[str, ...]) -> None:
    sc = coordinator_hunt.SCENARIOS[NAME]
    assert sc.expected_on(release) == expected
    assert sc.fixed_by == ("--kafka-version", coordinator_hunt.FIXED)


@pytest.mark.parametrize(("release", "fixed"), [
    (coordinator_hunt.UNFIXED, False), (coordinator_hunt.FIXED, True), ("4.4.0", True)])
def test_the_fix_is_in_the_releases_named_fixed(release: str, fixed: bool) -> None:
    """The pull request's gate: ListenerAdapter holds an AtomicBoolean `active` that
    stops high watermarks once the partition follows; the releases before it have none.
    Each release is resolved the first time (Maven, a few seconds)."""
    jar = jars.resolve(release).libs / f"kafka_2.13-{release}.jar"
    with zipfile.ZipFile(jar) as z:
        adapter = z.read("kafka/coordinator/group/ListenerAdapter.class")
    assert (b"java/util/concurrent/atomic/AtomicBoolean" in adapter) == fixed
