"""`undertow matrix`: scenarios x releases x seeds, one run folder each, one page and JSON.

    undertow matrix --scenario kafka-last-replica-standing --kafka-versions 3.9.1,4.0.2,4.1.2 \\
        --runs 10 --control

Everything is checked first (scenarios known, releases resolved, each scenario able to
run on each release): a mistake is one line and exit 2 before any run. Then each
missing (cell, seed) runs as `undertow run` in a child process; the page
(`<out>/matrix.html`) and `<out>/matrix.json` are written after every run. Started
again with the same options, it runs only what is missing. Exit 0: every cell as its
scenario expects; 1: some cell differs; 130: interrupted (what ran is kept).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click

from harness.runfiles import EXIT_USAGE

EXIT_INTERRUPTED = 130


class BadUsage(click.ClickException):
    exit_code = EXIT_USAGE


@click.command("matrix")
@click.option("--scenario", "scenarios", multiple=True, required=True,
              help="A named scenario (a column); repeat for more.")
@click.option("--kafka-versions", required=True, metavar="A,B,...",
              help="The releases (rows), comma separated: 3.9.1,4.0.2,4.1.2.")
@click.option("--runs", type=click.IntRange(1), default=3, show_default=True,
              help="Seeded runs per cell (seeds --first-seed, +1, ...).")
@click.option("--first-seed", type=int, default=1, show_default=True)
@click.option("--control", is_flag=True,
              help="Add each scenario's control (its fixed_by options) as a column.")
@click.option("--backend", type=click.Choice(["local", "docker", "ssh"]), default="local",
              show_default=True)
@click.option("--time-limit", type=float,
              help="Seconds of each run's workload (default: the scenario's).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("results/matrix"), show_default=True,
              help="The matrix's folder: its page, JSON and every run folder.")
def matrix(scenarios: tuple[str, ...], kafka_versions: str, runs: int, first_seed: int,
           control: bool, backend: str, time_limit: float | None, out: Path) -> None:
    """Run scenarios on several releases with the same seeds; one page compares them.

    A row per release, a column per scenario (and, with --control, its control); each
    cell runs seeds --first-seed.. as ordinary run folders under OUT/cells/ and shows
    its verdicts (`lost-write 9/10`), anomaly counts, the median time of the first
    anomaly, client ops/s and a link to every run's report (OUT/matrix.html,
    OUT/matrix.json). A cell differs from its scenario's expectation on that release
    when an expected bug shows in fewer than half its runs, or a cell expected valid
    has a run that is not. Started again, it runs only what is missing.

    \b
    undertow matrix --scenario kafka-last-replica-standing \\
        --kafka-versions 3.9.1,4.0.2,4.1.2 --runs 10 --control

    Exit 0: every cell as expected; 1: some cell differs; 2: bad input (nothing ran);
    130: interrupted.
    """
    from harness import matrix as m
    from harness.spec import SpecError

    releases = [v.strip() for v in kafka_versions.split(",") if v.strip()]
    try:
        resolved, cells = m.plan(scenarios, releases, control=control, backend=backend,
                                 time_limit_s=time_limit)
    except SpecError as e:
        raise BadUsage(str(e)) from e
    seeds = list(range(first_seed, first_seed + runs))
    columns = list(dict.fromkeys(c.column.label for c in cells))
    out.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    old = signal.signal(signal.SIGINT, lambda *_: stop.set())  # the child ends its own run
    try:
        for cell in cells:
            if stop.is_set():
                break
            m.run_cells(out, [cell], seeds, say=lambda s: click.echo(s, err=True),
                        stop=stop.is_set)
            write(out, resolved, columns, seeds, cells)
    finally:
        signal.signal(signal.SIGINT, old)
    page, data = write(out, resolved, columns, seeds, cells)
    click.echo(f"matrix: {page}")
    if stop.is_set():
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(1 if data["differs"] else 0)


def write(out: Path, releases: list[str], columns: list[str], seeds: list[int],
          cells: list[Any]) -> tuple[Path, dict[str, Any]]:
    """matrix.html and matrix.json from the run folders there now."""
    import orjson

    from harness import matrix as m
    from harness.report.render import _ENV, _static

    summaries = [m.summarize(out, c, seeds) for c in cells]
    data = m.matrix_json(releases, columns, seeds, summaries)
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    data["generated"] = generated
    html = _ENV.get_template("matrix.html.j2").render(
        rows=m.grid(releases, columns, summaries), columns=columns, seeds=seeds,
        differs=data["differs"], complete=data["complete"], generated=generated,
        css=_static("report.css"))
    page = out / "matrix.html"
    page.write_text(html)
    (out / "matrix.json").write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    return page, data
