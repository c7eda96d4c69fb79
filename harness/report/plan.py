"""A step of test.json's fault plan (`nemesis_plan`) in words, for the fault timeline
(report.faultlog): whom it aims at (a target rule) and the nodes or the grudge it
names, said the way a person would; no cell holds raw JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DYNAMIC = {"leader": "the leader of {key}", "followers": "the followers of {key}",
           "controller": "the controller", "coordinator": "the group coordinator"}


def _names(xs: Any) -> str:
    xs = [str(x) for x in xs] if isinstance(xs, list | tuple) else [str(xs)]
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1] if xs else "none"


def _secs(ns: Any) -> str:
    return f"{ns / 1e9:+.2f} s" if isinstance(ns, int | float) else str(ns)


def describe(value: Mapping[str, Any]) -> tuple[str, str]:
    """(target, nodes or grudge in words) of one plan step's value."""
    target = str(value.get("target") or value.get("kind") or "")
    key = value.get("key")
    said: list[str] = []
    if isinstance(value.get("nodes"), list):
        said.append(_names(value["nodes"]))
    elif target in DYNAMIC and key is not None:
        which = "a key being written" if key in ("live", "auto", "fresh") else f"key {key}"
        said.append(DYNAMIC[target].format(key=which) + ", found when injected")
    elif key in ("live", "auto", "fresh"):
        said.append("a key chosen when injected")
    grudge = value.get("grudge")
    if isinstance(grudge, Mapping):
        said.append("; ".join(f"{n} drops traffic from {_names(f)}"
                              for n, f in sorted(grudge.items())))
    if value.get("as"):
        said.append(f"called {value['as']}" + (f", its leader {value['leader_as']}"
                                               if value.get("leader_as") else ""))
    if value.get("role"):
        said.append(f"the node called {value['role']}")
    if value.get("shorter_of"):
        said.append(f"whichever of {_names(value['shorter_of'])} has the shorter log"
                    + (f" of {value['key_of']}'s key" if value.get("key_of") else ""))
    if value.get("cut_clients"):
        said.append("clients cut off too")
    if "delta_ns" in value:
        said.append(f"clock moved {_secs(value['delta_ns'])}")
    if isinstance(value.get("offsets_ns"), Mapping):
        said.append("clocks: " + ", ".join(f"{n} {_secs(o)}"
                                           for n, o in sorted(value["offsets_ns"].items())))
    known = {"target", "kind", "key", "nodes", "grudge", "as", "leader_as", "role",
             "shorter_of", "key_of", "cut_clients", "delta_ns", "offsets_ns"}
    for k, v in sorted(value.items()):
        if k not in known:
            said.append(f"{k.replace('_', ' ')} {_names(v) if isinstance(v, list) else v}")
    if value.get("kind") and value.get("target") and value["kind"] != value["target"]:
        target = f"{value['target']} ({value['kind']})"
    return target or "—", "; ".join(said) or ("all nodes" if not value else "—")
