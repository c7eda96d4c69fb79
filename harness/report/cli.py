"""`undertow report RUN_DIR` and `undertow serve`: render reports and serve the results folder.

`serve` binds 127.0.0.1 by default: the results hold a cluster's data and logs,
so exposing them needs an explicit --host.
"""

from __future__ import annotations

import functools
import http.server
from pathlib import Path

import click


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--index/--no-index", default=True,
              help="Also refresh index.html of the results folder holding the run.")
def report(run_dirs: tuple[Path, ...], index: bool) -> None:
    """Render report.html (and junit.xml) for each RUN_DIR from its files alone."""
    from harness.report.render import render_index, render_run
    from harness.runfiles import HistoryError

    failed = False
    for run_dir in run_dirs:
        try:
            out = render_run(run_dir)
        except HistoryError as e:
            click.echo(f"undertow report: {e}", err=True)
            failed = True
            continue
        except OSError as e:
            click.echo(f"undertow report: {run_dir}: {e}", err=True)
            failed = True
            continue
        click.echo(str(out))
        # results/<test>/<stamp>/: refresh results/index.html when it is there
        results_dir = run_dir.resolve().parent.parent
        if index and (results_dir / "index.html").is_file():
            render_index(results_dir)
    if failed:
        raise SystemExit(2)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        click.echo(f"{self.address_string()} {format % args}", err=True)


@click.command("serve")
@click.option("--results-dir", default="results", show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="The folder of runs.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but localhost exposes the runs' data.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
def serve(results_dir: Path, host: str, port: int) -> None:
    """Serve the results folder (index.html refreshed first) until Ctrl-C."""
    from harness.report.render import render_index

    if not results_dir.is_dir():
        raise click.ClickException(f"--results-dir {results_dir}: no such folder "
                                   "(run `undertow run` first, or name the folder)")
    render_index(results_dir)
    handler = functools.partial(_QuietHandler, directory=str(results_dir))
    try:
        httpd = http.server.ThreadingHTTPServer((host, port), handler)
    except OSError as e:
        raise click.ClickException(f"cannot listen on {host}:{port}: {e}") from e
    bound_host, bound_port = httpd.server_address[:2]
    click.echo(f"serving {results_dir} on http://{bound_host!s}:{bound_port}/ (Ctrl-C stops)",
               err=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


@click.command("trends")
@click.argument("results_dir", required=False, default="results",
                type=click.Path(path_type=Path))
def trends(results_dir: Path) -> None:
    """Write RESULTS_DIR/trends.html and trends.json: every run folder under RESULTS_DIR
    (default: results), a row per scenario, a column per run, unstable scenarios marked."""
    from harness.report.render import render_index, render_trends
    from harness.runfiles import EXIT_USAGE

    if not results_dir.is_dir():
        click.echo(f"undertow trends: {results_dir}: no such folder (name the results folder "
                   "that `undertow run --results-dir` wrote)", err=True)
        raise SystemExit(EXIT_USAGE)
    page, data = render_trends(results_dir)
    render_index(results_dir)  # it links to the page
    click.echo(f"{page} {data}")
