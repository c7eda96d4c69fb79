"""Render report.html for a run folder and index.html for a results folder.

Both are single files that open from disk with no network: CSS and the index's
small filter script are inlined, plots are server-side SVG. Everything that comes
from a run passes through Jinja's autoescape; only our own SVG and CSS are
marked safe, and the SVG code escapes every run-derived text itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
from markupsafe import Markup

from harness.report import figures, sections
from harness.report.availability import availability_line
from harness.report.causes import causes
from harness.report.faultlog import fault_rows, legend
from harness.report.faults import run_kinds
from harness.report.glossary import define
from harness.report.groups import GroupFeed
from harness.report.lanes import example_lanes
from harness.report.liveness import liveness_section
from harness.report.losses import KeyLoss, Losses, losses, replica_losses, safety_line
from harness.report.scan import Scan, scan
from harness.report.verdictbox import headline, verdict_box
from harness.runfiles import RunFiles, load_run, no_gc
from harness.runfiles.walk import KINDS

_HERE = Path(__file__).parent
OPS_PAGE = "ops.html"  # the operations the examples name, beside report.html
SHOWN_KEYS = 6  # key plots open on the page (those that lost most); the rest folded
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(_HERE / "templates"),
                          autoescape=True, undefined=jinja2.StrictUndefined,
                          trim_blocks=True, lstrip_blocks=True)


def _static(name: str) -> Markup:
    return Markup((_HERE / "static" / name).read_text())


def _op_counts(s: Scan) -> list[tuple[str, list[int]]]:
    c = s.completions
    rows = []
    for fi, name in enumerate(c.f_names):
        rows.append((name, [int(np.count_nonzero((c.f_code == fi) & (c.kind == k)))
                            for k in range(len(KINDS))]))
    return rows


@dataclass(frozen=True, slots=True)
class KeyPlot:
    key: int
    svg: Markup
    records: int
    loss: KeyLoss | None  # its lost acknowledged writes, from the full sets
    divergent: int  # offsets seen holding two or more values
    aborted: list[int]


def _concurrency(test: Mapping[str, Any] | None) -> int | None:
    c = (test or {}).get("concurrency")
    return c if isinstance(c, int) and not isinstance(c, bool) and c > 0 else None


def _key_order(s: Scan, loss: Losses, focus: list[int]) -> list[int]:
    """Keys that lost most first, then those the examples name, then those with offsets
    holding two values, then the rest."""
    ranked = [k.key for k in loss.keys if k.key in s.keys]
    div = [k for k in s.keys if len(figures.divergent_offsets(s.keys[k]))]
    return list(dict.fromkeys([*ranked, *(k for k in focus if k in s.keys), *div, *s.keys]))


def report_context(run: RunFiles) -> dict[str, Any]:
    """Everything the report template shows, computed from the run's files alone."""
    anomalies_raw = (run.results or {}).get("anomalies")
    test = run.test or {}
    kinds = run_kinds(test)
    feed = GroupFeed()  # the group-delivery section, gathered in the scan's own pass
    s = scan(run.ops, anomalies_raw if isinstance(anomalies_raw, dict) else None, kinds,
             feed.add)
    loss = losses(s.acked, run.replicas)
    focus = sections.anomaly_keys(run.results)
    key_plots = [KeyPlot(k, Markup(figures.key_log(s, k, s.keys[k], loss.values_of(k))),
                         len(s.keys[k].offset), next((x for x in loss.keys if x.key == k), None),
                         len(figures.divergent_offsets(s.keys[k])),
                         figures.aborted_offsets(s, s.keys[k]))
                 for k in _key_order(s, loss, focus)[: figures.MAX_KEYS]]
    timeline_svg, timeline_note = figures.timeline(s, _concurrency(test))
    group = feed.delivery()
    lanes_svg, lanes_note = figures.group_lanes(s, feed.membership(), _concurrency(test)) \
        if group is not None else ("", "")
    replica_keys, replica_key_count = sections.replica_divergence(run.replicas, focus)
    anomalies = sections.anomalies(run.results, s, run.ops)
    linked = {i for a in anomalies for ex in a.examples
              for part in [ex.parts, *ex.steps] for _, i in part if i is not None}
    ops_table = sections.op_rows(run.ops, sorted(set(s.involved) | linked), s.txns)
    liveness = liveness_section(run.results, s.nemesis_ops, run.test, run.run_dir)
    fault_table = fault_rows(test, s.nemesis_ops, kinds, s.end_ns)
    explained = causes(anomalies, anomalies_raw if isinstance(anomalies_raw, dict) else None,
                       loss, s.acked, s.faults, run.ops)
    return {
        "title": str(test.get("name") or run.run_dir.name),
        "run_dir": str(run.run_dir),
        "verdict": sections.verdict(run.results),
        "headline": headline(run.test, run.results, sections.verdict(run.results).label),
        "box": verdict_box(run.test, run.results, run.run_dir, s.nemesis_ops,
                           {k.start for k in kinds}),
        "safety_line": safety_line(loss),
        "availability_line": availability_line((run.results or {}).get("availability"),
                                               liveness),
        "loss": loss,
        "replica_losses": replica_losses(run.replicas, loss),
        "glossary": [(a.name, define(a.name)) for a in anomalies],
        "define": define,
        "results": run.results,
        "error": (run.results or {}).get("error"),
        "seed": test.get("seed", "not recorded") if run.test else "not recorded (no test.json)",
        "settings": sections.settings(run.test),
        "has_test": run.test is not None,
        "anomalies": anomalies,
        "events": explained.events,
        "notes": explained.notes,
        "stats": sections.stats(run.results),
        "fault_rows": fault_table,
        "fault_legend": legend(fault_table, kinds),
        "ops_table": ops_table,
        "txn_outcomes": any(r.outcome for r in ops_table),
        "op_count": s.op_count,
        "client_ops": s.client_ops,
        "duration_s": f"{s.end_ns / 1e9:.1f}",
        "op_counts": _op_counts(s),
        "kinds": KINDS,
        "nodes": s.nodes,
        "faults": s.faults,
        "liveness": liveness,
        "group": group,
        "eos": feed.exactly_once() if group is not None else None,
        "group_lanes_svg": Markup(lanes_svg),
        "group_lanes_note": lanes_note,
        "latency_svg": Markup(figures.latency_scatter(s)),
        "quantiles_svg": Markup(figures.latency_quantiles(s)),
        "throughput_svg": Markup(figures.throughput(s)),
        "timeline_svg": Markup(timeline_svg),
        "timeline_note": timeline_note,
        "key_plots": key_plots,
        "key_count": len(s.keys),
        "max_keys": figures.MAX_KEYS,
        "shown_keys": SHOWN_KEYS,
        "has_replicas": run.replicas is not None,
        "replica_keys": replica_keys,
        "replica_key_count": replica_key_count,
        "node_logs": sections.node_logs(run.run_dir),
        "op_pairs": s.pairs,
        "css": _static("report.css"),
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }


def render_run(run_dir: Path) -> Path:
    """Write run_dir/report.html (and junit.xml when results.json exists); return the report."""
    from harness.junit import write_junit

    run_dir = Path(run_dir)
    with no_gc():
        run = load_run(run_dir)
        ctx = report_context(run)
        html = _ENV.get_template("report.html.j2").render(**ctx)
        pairs = ctx["op_pairs"].of(i for a in ctx["anomalies"] for ex in a.examples
                                   for i in ex.ops)
        ops_html = _ENV.get_template("ops.html.j2").render(
            **ctx, lanes={(a.name, n): Markup(example_lanes(run.ops, ex.ops, pairs))
                          for a in ctx["anomalies"] for n, ex in enumerate(a.examples, 1)})
        del ctx
        results, test = run.results, run.test
        # free the history while the GC is still off: once it is on again, a million
        # live dicts would make its first collection cost seconds
        del run
    out = run_dir / "report.html"
    _write(run_dir / OPS_PAGE, ops_html)
    _write(out, html)
    write_junit(run_dir, results, test)
    return out


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def render_index(results_dir: Path) -> Path:
    """Write results_dir/index.html listing every run folder under it; return its path."""
    from harness.report.index import index_rows

    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    rows = index_rows(results_dir)
    html = _ENV.get_template("index.html.j2").render(
        rows=rows, tests=sorted({r.test for r in rows}),
        trends=(results_dir / "trends.html").is_file(),
        verdicts=["valid", "invalid", "unknown", "not checked"],
        css=_static("report.css"), script=_static("index.js"),
        generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    out = results_dir / "index.html"
    _write(out, html)
    return out


def render_trends(results_dir: Path) -> tuple[Path, Path]:
    """Write results_dir/trends.html and trends.json over every run folder under it."""
    import orjson

    from harness.report.trends import trends, trends_json

    results_dir = Path(results_dir)
    columns, rows = trends(results_dir)
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    html = _ENV.get_template("trends.html.j2").render(
        columns=columns, rows=rows, css=_static("report.css"), generated=generated,
        runs=sum(len(r.cells) for r in rows))
    page, data = results_dir / "trends.html", results_dir / "trends.json"
    _write(page, html)
    _write(data, orjson.dumps({"generated": generated, **trends_json(results_dir, columns, rows)},
                              option=orjson.OPT_INDENT_2).decode())
    return page, data
