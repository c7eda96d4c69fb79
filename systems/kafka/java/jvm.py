"""The JVM inside the harness's process (JPype) that runs Kafka's Java client.

JPype starts one JVM per process, its classpath fixed at start: the first run to
ask for the Java client starts it with that client version's jars, and a later
run in the same process that asks for another version is refused (one line).
`-Xrs` leaves SIGINT and SIGTERM to the harness's own handlers (its Stopper); the
client's own threads are daemons, so the JVM's shutdown at exit does not wait for a
client a crashed process left open. Every Python thread that calls in is attached
by JPype on its first call.

A cold JVM takes seconds to load and compile the client's classes (on a loaded
2-core machine the first send of a run took 5 to 9 s, beyond a 5 s delivery
timeout): `start` loads them in a background thread while the cluster comes up
(`preloaded` waits for it), and systems/kafka/java/client.py `warm_up` sends once
to the cluster before the first operation.
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

from systems.kafka.java import calls
from systems.kafka.java.jars import ClientJars, ClientJarsError

HEAP = "-Xmx1g"
# C1 only, as the brokers (systems/kafka/config.py): C2 compiled the client's paths for the
# whole of a run, about half the harness process's CPU on the 2 cores the brokers share
OPTIONS = ("-Xrs", HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
_lock = threading.Lock()
_version: str | None = None
_preloaded = threading.Event()
_classes: dict[str, Any] = {}


def start(jars: ClientJars) -> None:
    """The JVM with `jars` and the client's hot calls (calls.py) on its classpath, once per
    process."""
    global _version
    import jpype

    with _lock:
        if jpype.isJVMStarted():
            if _version is not None and _version != jars.version:
                raise ClientJarsError(f"--kafka-client-version {jars.version}: this process "
                                      f"already runs Kafka's Java client {_version} (one "
                                      "version per harness process)")
            return
        import jpype.config

        jpype.config.destroy_jvm = True
        jpype.startJVM(*OPTIONS, classpath=[*jars.jars, str(calls.classes(jars))],
                       convertStrings=True, interrupt=False)
        _version = jars.version
        threading.Thread(target=_preload, name="kafka-client-preload", daemon=True).start()
        # a process that ends at once (bad input found after this) lets the preload finish
        # first: a JVM thread calling into a Python that is shutting down crashes it
        atexit.register(_preloaded.wait, 60.0)


def _preload() -> None:
    """A producer and a consumer made and closed against a port nothing listens on: the
    JVM loads and links their classes."""
    from systems.kafka.java import settings

    try:
        p = cls("org.apache.kafka.clients.producer.KafkaProducer")(
            properties(settings.producer("127.0.0.1:1", "all", timeout_s=1)))
        c = cls("org.apache.kafka.clients.consumer.KafkaConsumer")(
            properties(settings.consumer("127.0.0.1:1", timeout_s=1)))
        p.close(duration_ms(0))
        c.close(duration_ms(0))
    except Exception:  # only a warm-up: the real clients will say what is wrong
        pass
    finally:
        _preloaded.set()


def preloaded(timeout_s: float = 60.0) -> None:
    """Wait for the background preload (started with the JVM)."""
    _preloaded.wait(timeout_s)


def running_version() -> str | None:
    return _version


def properties(settings: dict[str, Any]) -> Any:
    """A java.util.Properties of the settings (values as strings, as Kafka parses them)."""
    import jpype

    props = jpype.JClass("java.util.Properties")()
    for k, v in settings.items():
        if v is None:
            continue
        props.setProperty(k, str(v).lower() if isinstance(v, bool) else str(v))
    return props


def cls(name: str) -> Any:
    """A Java class by its full name, looked up once: every send and poll names a few, and
    JPype's lookup by name costs more than the call it serves."""
    found = _classes.get(name)
    if found is None:
        import jpype

        found = _classes[name] = jpype.JClass(name)
    return found


def duration_ms(ms: int) -> Any:
    return cls("java.time.Duration").ofMillis(int(ms))


def exception_type() -> type[BaseException]:
    """The Python type of every Java exception (to catch them)."""
    import jpype

    t: type[BaseException] = jpype.JException
    return t


def jlist(items: list[Any]) -> Any:
    """A java.util.ArrayList of the items."""
    out = cls("java.util.ArrayList")()
    for x in items:
        out.add(x)
    return out
