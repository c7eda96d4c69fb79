"""Both Kafka clients of an end-to-end test: the default suite runs one, the nightly both.

Each workload's short run is the same test with librdkafka and with Kafka's Java client.
The suite runs each workload with one of them, alternating, so that both clients run
end to end in the suite (and every client path has its own faster tests); the other
client's run of the same workload is marked `nightly` (`just test-soak`, the nightly)."""

from __future__ import annotations

from typing import Any

import pytest

CLIENTS = ("librdkafka", "java")


def clients(in_the_suite: str) -> list[Any]:
    """`@pytest.mark.parametrize("client", clients("java"))`: java in the suite,
    librdkafka in the nightly."""
    assert in_the_suite in CLIENTS, in_the_suite
    return [pytest.param(c, marks=() if c == in_the_suite else pytest.mark.nightly)
            for c in CLIENTS]
