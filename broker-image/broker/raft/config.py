"""Kafka's `process.roles` and `controller.quorum.voters`, parsed and checked against each other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ROLES = frozenset({"broker", "controller"})


class QuorumConfigError(ValueError):
    """A bad roles/voters setting; the text names the key and the value."""


@dataclass(frozen=True)
class Voter:
    node_id: str
    address: str | None = None  # "host:port" when given as Kafka's id@host:port


def parse_process_roles(value: str | Sequence[str]) -> frozenset[str]:
    """"broker,controller" or ["broker", "controller"] -> the set; empty or unknown is an error."""
    items = value.split(",") if isinstance(value, str) else list(value)
    roles = [str(r).strip() for r in items if str(r).strip()]
    bad = sorted(set(roles) - ROLES)
    if bad or not roles:
        raise QuorumConfigError(
            f"process.roles: {value!r} must name one or both of broker, controller"
            + (f" (unknown: {', '.join(bad)})" if bad else "")
        )
    return frozenset(roles)


def parse_quorum_voters(value: str | Sequence[str]) -> tuple[Voter, ...]:
    """Kafka's "1@host:9093,2@host:9093" or a list of node ids (or id@host:port strings)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    voters: list[Voter] = []
    for raw in items:
        item = str(raw).strip()
        if not item:
            continue
        node, sep, addr = item.partition("@")
        if not node or (sep and not _is_host_port(addr)):
            raise QuorumConfigError(
                f"controller.quorum.voters: bad entry {item!r} (expected ID or ID@HOST:PORT)"
            )
        voters.append(Voter(node, addr if sep else None))
    ids = [v.node_id for v in voters]
    if not voters:
        raise QuorumConfigError("controller.quorum.voters: at least one voter is needed")
    if len(set(ids)) != len(ids):
        raise QuorumConfigError(f"controller.quorum.voters: duplicate voter in {ids}")
    return tuple(voters)


def _is_host_port(addr: str) -> bool:
    host, sep, port = addr.rpartition(":")
    return bool(sep and host and port.isdigit() and 0 < int(port) < 65536)


def quorum_membership(node_id: str, roles: frozenset[str], voters: Sequence[Voter]) -> str:
    """"voter" or "observer", as Kafka requires: controllers are voters and voters controllers."""
    ids = [v.node_id for v in voters]
    if "controller" in roles and node_id not in ids:
        raise QuorumConfigError(
            f"node {node_id!r} has process.roles controller but is not in "
            f"controller.quorum.voters {ids}"
        )
    if "controller" not in roles and node_id in ids:
        raise QuorumConfigError(
            f"node {node_id!r} is in controller.quorum.voters {ids} but process.roles "
            f"{sorted(roles)} lacks controller"
        )
    return "voter" if node_id in ids else "observer"
