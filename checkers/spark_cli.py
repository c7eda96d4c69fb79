"""`undertow spark start|status|stop`: the warm Spark that check, run and nightly use when
it is up (checkers.spark_server says the rule and runs the processes)."""

from __future__ import annotations

import signal
import time
from typing import Any

import click

from harness.runfiles import EXIT_USAGE


@click.group()
def spark() -> None:
    """A warm Spark Connect server on 127.0.0.1 for many checks (cold local is the default)."""


@spark.command()
@click.option("--port", type=click.IntRange(0, 65535), default=15002, show_default=True,
              help="Port on 127.0.0.1 for the Spark Connect server (0: a free one).")
@click.option("--master", default="local[*]", show_default=True,
              help="The server's Spark master (local[N], or spark://HOST:PORT).")
@click.option("--driver-memory", default="3g", show_default=True,
              help="The server JVM's heap (where the check's jobs run in local mode).")
def start(port: int, master: str, driver_memory: str) -> None:
    """Start the warm server (or say it is up) and wait until it answers."""
    from checkers.spark_server import SparkError, read_state, start_server

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM too stops what was started, as Ctrl-C does

    signal.signal(signal.SIGTERM, interrupted)
    before = read_state()
    t0 = time.monotonic()
    try:
        state = start_server(port, master, driver_memory)
    except SparkError as e:
        click.echo(f"undertow spark start: {e}", err=True)
        raise SystemExit(EXIT_USAGE) from e
    if before is not None and before.get("pid") == state["pid"]:
        click.echo(f"already up: {_describe(state)}")
    else:
        click.echo(f"started in {time.monotonic() - t0:.1f} s: {_describe(state)}")


@spark.command()
def status() -> None:
    """Whether the warm server is up (exit 0) or not (exit 3), and where."""
    from checkers.spark_server import alive, read_state, spark_dir

    state = read_state()
    if state is not None and alive(state):
        click.echo(f"up: {_describe(state)}")
        return
    click.echo(f"down (state folder {spark_dir()}); checks use a cold local session"
               + ("; a stale record is there: `undertow spark stop` clears it"
                  if state is not None else ""))
    raise SystemExit(3)


@spark.command()
def stop() -> None:
    """Stop the warm server and every process it started."""
    from checkers.spark_server import stop_server

    state = stop_server()
    click.echo("nothing to stop" if state is None else f"stopped {state['address']}")


def _describe(state: dict[str, Any]) -> str:
    return (f"{state['address']} (pid {state['pid']}, master {state['master']}, "
            f"Python {state['python']}; log {state['log']})")
