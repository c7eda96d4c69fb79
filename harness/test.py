"""Test: the typed parts of one run, assembled once from its spec (Jepsen's test map, typed).

`assemble` looks every part up in harness.registry and lets the system refuse
what it cannot honour, so a spec error surfaces before a folder, a process or a
rule exists. Below the assembly nothing looks parts up again: the runner, the
interpreter and the nemesis get what they need from the Test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness import registry
from harness.faultplan import NEMESIS_PACKAGE
from harness.spec import SpecError, TestSpec

if TYPE_CHECKING:
    from harness.protocols import Backend, Checker, NemesisPackage, System, Workload


@dataclass(frozen=True)
class Test:
    """One run's parts: what is tested, where, how it is driven and faulted, how judged."""

    spec: TestSpec
    system: System
    workload: Workload
    nemesis: NemesisPackage | None
    backend: Backend

    def checkers(self) -> Sequence[Checker]:
        """The workload's checkers, then the nemesis package's (liveness)."""
        extra: Sequence[Checker] = self.nemesis.checkers() if self.nemesis is not None else ()
        return [*self.workload.checkers(self), *extra]


def assemble(spec: TestSpec) -> Test:
    """The parts of spec, or SpecError naming the option that is wrong; starts nothing."""
    from harness.backends import make_backend
    from harness.protocols import ChecksSpec

    spec.validate()
    system: System = registry.get("system", spec.system)
    workload: Workload = registry.get("workload", spec.workload)
    system.check(spec)
    if isinstance(workload, ChecksSpec):
        workload.check(spec)
    nemesis: NemesisPackage | None = None
    if spec.nemesis_plan and not spec.nemesis:
        raise SpecError("nemesis_plan: a plan to replay needs the faults that inject it "
                        "(`nemesis`, e.g. [\"kill\", \"partition\"])")
    if spec.nemesis:
        package: Callable[[TestSpec], NemesisPackage] = registry.get("nemesis",
                                                                        NEMESIS_PACKAGE)
        nemesis = package(spec)
    return Test(spec=spec, system=system, workload=workload, nemesis=nemesis,
                backend=make_backend(spec))
