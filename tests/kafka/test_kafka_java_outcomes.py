"""--client java: each row of the exception table, judged on the real Java exception (built in
the harness's JVM from kafka-clients' own classes), and the bad input refused up front."""

from __future__ import annotations

from typing import Any

import pytest

from harness.spec import SpecError, build_spec
from harness.test import assemble
from systems.kafka.java import jars, jvm, outcomes

PACKAGES = ("org.apache.kafka.common.errors", "org.apache.kafka.common",
            "org.apache.kafka.clients.producer", "java.lang")


@pytest.fixture(scope="module")
def java() -> None:
    jvm.start(jars.resolve(jvm.running_version()))


# abstract classes of the table: judged on a subclass the table does not list
STAND_INS = {"RetriableException": "CoordinatorLoadInProgressException"}


def _exception(name: str) -> Any:
    """A new instance of the named exception class (the first package that has it)."""
    import jpype

    if name in STAND_INS:
        assert STAND_INS[name] not in outcomes.EXCEPTIONS
        e = _exception(STAND_INS[name])
        assert name in outcomes.class_names(e)
        return e
    for package in PACKAGES:
        try:
            cls = jpype.JClass(f"{package}.{name}")
        except TypeError:
            continue
        try:
            e = cls("from the test")
        except TypeError:  # RetriableException's, ApiException's constructors vary
            e = cls()
        jpype.JClass("java.lang.Thread").interrupted()  # InterruptException sets the flag
        return e
    raise AssertionError(f"no Java class {name} in {PACKAGES}")


@pytest.mark.parametrize(("name", "expected"), sorted(outcomes.EXCEPTIONS.items()))
def test_each_row_judges_the_real_exception(java: None, name: str, expected: str) -> None:
    e = _exception(name)
    assert outcomes.outcome(e) == expected
    # a send's Future wraps it in an ExecutionException: judged by its cause
    wrapped = jvm.cls("java.util.concurrent.ExecutionException")(e)
    assert outcomes.outcome(wrapped) == expected
    assert outcomes.text(wrapped).startswith(f"{STAND_INS.get(name, name)}: ")


def test_an_exception_the_table_lacks_is_judged_by_its_superclass(java: None) -> None:
    # LeaderNotAvailableException is an InvalidMetadataException, a RetriableException
    assert "LeaderNotAvailableException" not in outcomes.EXCEPTIONS
    assert outcomes.outcome(_exception("LeaderNotAvailableException")) == "info"
    assert outcomes.outcome(jvm.cls("java.lang.RuntimeException")("?")) == "info"


def test_a_commit_that_timed_out_is_tried_again_then_info() -> None:
    from systems.kafka.java.txn import COMMIT_TRIES, fatal

    assert COMMIT_TRIES > 1
    assert not fatal(_exception("TimeoutException"))
    assert fatal(_exception("ProducerFencedException"))
    # its javadoc: abort the transaction, which re-initialises the producer (KIP-588)
    assert not fatal(_exception("InvalidProducerEpochException"))


def _spec(**over: Any) -> Any:
    extra = {"client": "java", **over.pop("extra", {})}
    return build_spec({"system": "kafka", "nemesis": ("kill",), **over, "extra": extra})


@pytest.mark.parametrize(("over", "says"), [
    ({"extra": {"kafka_client_version": "four"}}, "not a release number"),
    ({"extra": {"client": "jvm"}}, "--client .kafka.client.: 'jvm' is not one of librdkafka"),
    ({"sub_via": "subscribe", "consumer": {"commit": "auto"}}, "--commit auto: Kafka's Java"),
])
def test_refused_before_anything_starts(over: dict[str, Any], says: str) -> None:
    with pytest.raises(SpecError, match=says):
        assemble(_spec(**over))


def test_the_command_line_refuses_in_one_line_with_exit_2() -> None:
    from click.testing import CliRunner

    from harness.cli import main

    r = CliRunner().invoke(main, ["run", "--system", "undertow", "--client", "java"])
    assert r.exit_code == 2 and "only --system kafka has them" in r.output
    r = CliRunner().invoke(main, ["run", "--system", "kafka", "--client", "java", "--nemesis",
                                  "kill", "--kafka-client-version", "9.9.9"])
    assert r.exit_code == 2, r.output
    assert "org.apache.kafka:kafka-clients:9.9.9 does not resolve" in r.output
    assert len(r.output.strip().splitlines()) == 1, r.output


def test_client_options_add_to_a_scenarios_extra() -> None:
    import json

    from click.testing import CliRunner

    from harness.cli import main

    r = CliRunner().invoke(main, ["run", "--scenario", "kafka-acks-1", "--client", "java",
                                  "--print-spec"])
    extra = json.loads(r.output)["extra"]
    assert extra == {"controller_voters": 1, "client": "java"}


def test_a_second_client_version_in_one_harness_process_is_refused(java: None) -> None:
    """One JVM per process, its classpath fixed at its start: a run asking for another
    client version is refused at setup (exit 2), naming the one that runs."""
    running = jvm.running_version()
    other = "4.3.0" if running != "4.3.0" else "4.4.0"
    with pytest.raises(SpecError, match=f"already runs Kafka's Java client {running}"):
        assemble(_spec(extra={"kafka_client_version": other}))


def test_each_workload_assembles_its_java_client(java: None) -> None:
    from systems.kafka.java.group import JavaGroupClient
    from systems.kafka.java.txn import JavaTxnClient

    txn = assemble(_spec(workload="txn", sub_via="subscribe"))
    client: Any = txn.system.client(txn)
    # offsets are committed inside its transactions only
    assert isinstance(client, JavaTxnClient) and client.group is not None
    assert client.group.in_txn and client.group.settings.commit == "off"
    crash = assemble(_spec(crash_client_interval_s=5.0))  # crashes rejoin the group
    assert isinstance(crash.system.client(crash), JavaGroupClient)
