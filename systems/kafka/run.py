"""One run on local Apache Kafka through the harness's own pipeline (harness.core)."""

from __future__ import annotations

from harness import core, store
from harness.spec import TestSpec
from systems.kafka.backend import KafkaLocalBackend, check_spec, workload


def run_kafka(spec: TestSpec) -> core.Outcome:
    """As harness.core.run, with Kafka's backend and client; SpecError before anything starts."""
    spec.validate()
    check_spec(spec)
    wl, pkg = workload(spec), core._nemesis_package(spec)
    stopper = core.Stopper()
    with stopper.installed():
        watch = core.Watch()
        watch.time_limit_s = spec.time_limit_s
        stopper.watch = watch
        stored = store.create_run(spec)
        try:
            return core._run_stored(spec, stored, KafkaLocalBackend(), wl, pkg, stopper, watch)
        finally:
            stored.close()
