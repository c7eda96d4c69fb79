"""python -m bench.java_bridge [--calls 20000]: JPype against Py4J, the two Java bridges from PyPI
that could run Kafka's Java client in the harness (docs/architecture.md, "The Java client").

Both call the same static Java method (java.lang.System.nanoTime) `--calls` times from
one Python thread, then from 20 threads at once (the workload's concurrency), and report
microseconds per call: JPype in this process's own JVM (JNI), Py4J in a JVM it launches
(a socket round trip per call; PySpark's bundled py4j jar).
"""

from __future__ import annotations

import argparse
import glob
import os
import threading
import time
from collections.abc import Callable
from typing import Any


def per_call_us(call: Callable[[], Any], calls: int, threads: int) -> float:
    def loop() -> None:
        for _ in range(calls // threads):
            call()

    ts = [threading.Thread(target=loop) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return (time.perf_counter() - t0) / calls * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    import jpype
    import pyspark
    from py4j.java_gateway import (  # type: ignore[import-untyped]
        GatewayParameters,
        JavaGateway,
        launch_gateway,
    )

    jpype.startJVM("-Xrs")
    system = jpype.JClass("java.lang.System")
    jar = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "py4j-*.jar"))[0]
    port = launch_gateway(jarpath=jar, die_on_exit=True)
    gw = JavaGateway(gateway_parameters=GatewayParameters(port=port))
    p4 = gw.jvm.java.lang.System
    for name, call in (("jpype", system.nanoTime), ("py4j", p4.nanoTime)):
        call()
        one = per_call_us(call, a.calls, 1)
        twenty = per_call_us(call, a.calls, 20)
        print(f"{name:6} {one:8.1f} us/call (1 thread)  {twenty:8.1f} us/call (20 threads)")
    gw.shutdown()


if __name__ == "__main__":
    main()
