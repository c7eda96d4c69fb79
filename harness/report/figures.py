"""The report's plots, as inline SVG strings, downsampled so a million operations stay light.

Latency (raw scatter, log scale, and quantiles per time bucket) and throughput
over time with the fault windows shaded per node; a per-process timeline drawn
as a raster of time columns; per-key log pictures (offset against time, colour
by writer process) with lost and divergent offsets marked and records of aborted
transactions haloed.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from harness.report import svg
from harness.report.groups import Held
from harness.report.scan import Scan
from harness.runfiles.walk import KINDS, KeyLog

SCATTER_POINTS = 6000  # raw latency points drawn, at most
BUCKETS = 120  # time buckets for quantiles and throughput
TIMELINE_COLUMNS = 600
TIMELINE_ROWS = 64
KEY_POINTS = 1500  # records drawn per key, at most (marked ones always)
ABORTED_COLOUR = "#f7b6d2"  # the halo of a record an aborted transaction wrote
MAX_KEYS = 24


def _s(ns: float) -> float:
    return ns / 1e9


def _lanes(scan: Scan) -> list[str]:
    return list(scan.nodes)


def _fault_rows(scan: Scan) -> list[tuple[str, str, str, float, float]]:
    return [(w.node, w.label or w.kind, w.colour, _s(w.start_ns), _s(w.end_ns))
            for w in scan.faults]


def _sample(n: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    if n <= cap:
        return np.arange(n)
    return np.sort(rng.choice(n, size=cap, replace=False))


def latency_scatter(scan: Scan) -> str:
    c = scan.completions
    t_s = c.invoke_ns / 1e9
    lat_ms = np.maximum(c.latency_ns / 1e6, 1e-3)
    fr = svg.Frame(0.0, max(_s(scan.end_ns), 1e-3), float(lat_ms.min()) if len(lat_ms) else 0.01,
                   float(lat_ms.max()) if len(lat_ms) else 1.0, log_y=True, lanes=_lanes(scan))
    if fr.y1 <= fr.y0:
        fr = svg.Frame(fr.x0, fr.x1, fr.y0 / 2, fr.y0 * 2, log_y=True, lanes=fr.lanes)
    out = svg.open_svg(fr, "latency of each operation")
    out += svg.fault_bands(fr, _fault_rows(scan))
    out += svg.axes(fr, "time (s)", "latency (ms, log)")
    rng = np.random.default_rng(0)
    groups = [(fi, k) for fi in range(len(c.f_names)) for k in range(3)]
    per_group = max(SCATTER_POINTS // max(len(groups), 1), 200)
    items: list[tuple[str, str]] = []
    for fi, k in groups:
        sel = np.flatnonzero((c.f_code == fi) & (c.kind == k))
        if len(sel) == 0:
            continue
        sel = sel[_sample(len(sel), per_group, rng)]
        colour = svg.op_colour(c.f_names[fi]) if k == 0 else svg.KIND_COLOURS[KINDS[k]]
        label = f"{c.f_names[fi]} {KINDS[k]}"
        items.append((label, colour))
        out.append(svg.points(fr, t_s[sel], lat_ms[sel], colour, 2.5 if k == 0 else 3.5))
    out.append(svg.legend(fr, items))
    out.append("</svg>")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Buckets:
    edges_s: np.ndarray
    index: np.ndarray  # bucket of each completion (by completion time)


def _buckets(scan: Scan, by_invoke: bool) -> Buckets:
    c = scan.completions
    end_s = max(_s(scan.end_ns), 1e-3)
    edges = np.linspace(0.0, end_s, BUCKETS + 1)
    t = (c.invoke_ns if by_invoke else c.complete_ns) / 1e9
    idx = np.clip((t / end_s * BUCKETS).astype(np.int64), 0, BUCKETS - 1)
    return Buckets(edges, idx)


def latency_quantiles(scan: Scan) -> str:
    c = scan.completions
    b = _buckets(scan, by_invoke=True)
    lat_ms = np.maximum(c.latency_ns / 1e6, 1e-3)
    mids = (b.edges_s[:-1] + b.edges_s[1:]) / 2
    series: list[tuple[str, str, str | None, np.ndarray, np.ndarray]] = []
    qs = ((0.5, None), (0.95, "5,3"), (0.99, "2,2"), (1.0, "1,3"))
    for fi, name in enumerate(c.f_names):
        mask = c.f_code == fi
        if not mask.any():
            continue
        bucket = b.index[mask]
        lat = lat_ms[mask]
        order = np.argsort(bucket, kind="stable")
        bucket, lat = bucket[order], lat[order]
        bounds = np.searchsorted(bucket, np.arange(BUCKETS + 1))
        for q, dash in qs:
            xs, ys = [], []
            for i in range(BUCKETS):
                seg = lat[bounds[i]:bounds[i + 1]]
                if len(seg):
                    xs.append(mids[i])
                    ys.append(float(np.quantile(seg, q)))
            label = f"{name} {'max' if q == 1.0 else f'p{round(q * 100)}'}"
            series.append((label, svg.op_colour(name), dash,
                           np.asarray(xs), np.asarray(ys)))
    ymax = max((float(s[4].max()) for s in series if len(s[4])), default=1.0)
    ymin = min((float(s[4].min()) for s in series if len(s[4])), default=0.01)
    fr = svg.Frame(0.0, float(b.edges_s[-1]), ymin, max(ymax, ymin * 2), log_y=True,
                   lanes=_lanes(scan))
    out = svg.open_svg(fr, "latency quantiles over time")
    out += svg.fault_bands(fr, _fault_rows(scan))
    out += svg.axes(fr, "time (s)", "latency (ms, log)")
    out += [svg.line(fr, xs, ys, colour, dash=dash) for _, colour, dash, xs, ys in series]
    out.append(svg.legend(fr, [(label, colour) for label, colour, dash, _, _ in series
                               if dash is None] + [("dashes: p95 p99 max", "#fff")]))
    out.append("</svg>")
    return "".join(out)


def throughput(scan: Scan) -> str:
    c = scan.completions
    b = _buckets(scan, by_invoke=False)
    width_s = float(b.edges_s[1] - b.edges_s[0]) or 1.0
    mids = (b.edges_s[:-1] + b.edges_s[1:]) / 2
    series = []
    for fi, name in enumerate(c.f_names):
        for k in range(3):
            mask = (c.f_code == fi) & (c.kind == k)
            if not mask.any():
                continue
            rate = np.bincount(b.index[mask], minlength=BUCKETS)[:BUCKETS] / width_s
            colour = svg.op_colour(c.f_names[fi]) if k == 0 else svg.KIND_COLOURS[KINDS[k]]
            series.append((f"{name} {KINDS[k]}", colour, None if k == 0 else "4,2", rate))
    ymax = max((float(s[3].max()) for s in series), default=1.0)
    fr = svg.Frame(0.0, float(b.edges_s[-1]), 0.0, max(ymax, 1.0) * 1.05, lanes=_lanes(scan))
    out = svg.open_svg(fr, "throughput over time")
    out += svg.fault_bands(fr, _fault_rows(scan))
    out += svg.axes(fr, "time (s)", "operations / s")
    out += [svg.line(fr, mids, rate, colour, dash=dash) for _, colour, dash, rate in series]
    out.append(svg.legend(fr, [(label, colour) for label, colour, _, _ in series]))
    out.append("</svg>")
    return "".join(out)


def timeline(scan: Scan, concurrency: int | None) -> tuple[str, str]:
    """Per-process rows of time columns, each the worst outcome in it: ok < fail < info.

    With the test's concurrency known, process p is drawn on row p mod concurrency
    (the worker thread, since a worker continues under p + concurrency after an info).
    Returns (svg, a note saying what a row is).
    """
    c = scan.completions
    if len(c.process) == 0:
        return "", "no client operations"
    if concurrency:
        row_of = c.process % concurrency
        note = f"rows are worker threads (process mod {concurrency})"
    else:
        uniq, row_of = np.unique(c.process, return_inverse=True)
        note = "rows are processes"
    rows = int(row_of.max()) + 1
    shown = min(rows, TIMELINE_ROWS)
    if shown < rows:
        note += f"; the first {shown} of {rows} rows are shown"
    end = max(scan.end_ns, 1)
    c0 = np.clip(c.invoke_ns * TIMELINE_COLUMNS // end, 0, TIMELINE_COLUMNS - 1)
    c1 = np.clip(c.complete_ns * TIMELINE_COLUMNS // end, 0, TIMELINE_COLUMNS - 1)
    sev = c.kind + 1  # 1 ok, 2 fail, 3 info
    grid = np.zeros((rows, TIMELINE_COLUMNS), dtype=np.int8)
    np.maximum.at(grid, (row_of, c0), sev.astype(np.int8))
    for i in np.flatnonzero(c1 > c0):  # operations spanning columns (few: slow ones)
        r = row_of[i]
        grid[r, c0[i]:c1[i] + 1] = np.maximum(grid[r, c0[i]:c1[i] + 1], sev[i])
    row_h = 10
    fr = svg.Frame(0.0, _s(end), 0.0, 1.0, height=22 + shown * row_h + 34, lanes=_lanes(scan))
    out = svg.open_svg(fr, "operations per process over time")
    out += svg.fault_bands(fr, _fault_rows(scan))
    out += svg.axes(fr, "time (s)", "", y_ticks=False)
    colours = {1: svg.KIND_COLOURS["ok"], 2: svg.KIND_COLOURS["fail"], 3: svg.KIND_COLOURS["info"]}
    px_per_col = (fr.width - fr.left - fr.right) / TIMELINE_COLUMNS
    for r in range(shown):
        y = fr.top + r * row_h + 1
        label = r if concurrency else int(uniq[r])
        out.append(f'<text x="{fr.left - 4}" y="{y + 8}" class="tick" text-anchor="end">'
                   f'{svg.esc(label)}</text>')
        row = grid[r]
        change = np.flatnonzero(np.diff(np.concatenate(([0], row, [0]))) != 0)
        for a, z in itertools.pairwise(change.tolist()):
            v = int(row[a])
            if v:
                out.append(f'<rect x="{fr.left + a * px_per_col:.1f}" y="{y}" '
                           f'width="{(z - a) * px_per_col:.1f}" height="{row_h - 2}" '
                           f'fill="{colours[v]}"/>')
    out.append(svg.legend(fr, [(k, svg.KIND_COLOURS[k]) for k in KINDS]))
    out.append("</svg>")
    return "".join(out), note


def group_lanes(scan: Scan, held: list[Held], concurrency: int | None) -> tuple[str, str]:
    """A lane per worker thread (as the timeline's rows): the stretches over which its
    process held an assignment of the consumer group, coloured by generation and labelled
    with the keys where they fit; each stretch's tooltip says process, generation, keys."""
    if not held:
        return "", "no poll reported an assignment"
    rows = sorted({h.process % concurrency if concurrency else h.process for h in held})
    note = (f"rows are worker threads (process mod {concurrency})" if concurrency
            else "rows are processes")
    shown = rows[:TIMELINE_ROWS]
    if len(shown) < len(rows):
        note += f"; the first {len(shown)} of {len(rows)} rows are shown"
    row_h = 14
    end = max(scan.end_ns, 1)
    fr = svg.Frame(0.0, _s(end), 0.0, 1.0, height=22 + len(shown) * row_h + 34,
                   lanes=_lanes(scan))
    out = svg.open_svg(fr, "group generation and assigned keys per process over time")
    out += svg.fault_bands(fr, _fault_rows(scan))
    out += svg.axes(fr, "time (s)", "", y_ticks=False)
    px_per_s = (fr.width - fr.left - fr.right) / _s(end)
    index = {r: i for i, r in enumerate(shown)}
    for r, i in index.items():
        out.append(f'<text x="{fr.left - 4}" y="{fr.top + i * row_h + 10}" class="tick" '
                   f'text-anchor="end">{svg.esc(r)}</text>')
    for h in held:
        row = index.get(h.process % concurrency if concurrency else h.process)
        if row is None:
            continue
        x = fr.left + _s(h.start_ns) * px_per_s
        w = max(1.0, _s(h.end_ns - h.start_ns) * px_per_s)
        y = fr.top + row * row_h + 1
        colour = svg.PALETTE[(h.generation or 0) % len(svg.PALETTE)]
        keys = ",".join(map(str, h.keys))
        gen = "?" if h.generation is None else str(h.generation)
        out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 2}" '
                   f'fill="{colour}" fill-opacity="0.75"><title>process {h.process}, '
                   f'generation {gen}, keys {svg.esc(keys)}</title></rect>')
        label = f"g{gen}: {keys}"
        if w > 6 * len(label):
            out.append(f'<text x="{x + 2:.1f}" y="{y + 10}" class="tick">'
                       f'{svg.esc(label)}</text>')
    out.append("</svg>")
    return "".join(out), note


def _aborted(scan: Scan, log: KeyLog) -> npt.NDArray[np.bool_]:
    """Which of the key's records a failed (aborted) transaction wrote: read anyway."""
    values = scan.txns.aborted_values
    if not values:
        return np.zeros(len(log.value), dtype=bool)
    return np.isin(log.value, np.fromiter(values, dtype=np.int64, count=len(values)))


def aborted_offsets(scan: Scan, log: KeyLog) -> list[int]:
    """The offsets of the key's records written by aborted transactions, for the caption."""
    return sorted(set(log.offset[_aborted(scan, log)].tolist()))


def divergent_offsets(log: KeyLog) -> npt.NDArray[np.int64]:
    """The key's offsets seen holding two or more values (inconsistent-offsets), all of them."""
    offs, counts = np.unique(log.offset, return_counts=True)
    return offs[counts > 1]


def key_log(scan: Scan, key: int, log: KeyLog, lost_values: Collection[int]) -> str:
    """Offsets against first-seen time, coloured by writer; every lost acknowledged write
    (red) and every offset holding two values (black) marked, from the full sets; records
    of aborted transactions ringed."""
    n = len(log.offset)
    lost = np.isin(log.value, np.fromiter(lost_values, dtype=np.int64, count=len(lost_values)))
    divergent = np.isin(log.offset, divergent_offsets(log))
    marked = lost | divergent
    aborted = _aborted(scan, log)
    keep = np.zeros(n, dtype=bool)
    keep[:: max(1, n // KEY_POINTS)] = True
    for sel in (lost, divergent):  # marks thinned the same way past KEY_POINTS each
        idx = np.flatnonzero(sel)
        keep[idx[:: max(1, len(idx) // KEY_POINTS)]] = True
    keep |= aborted
    t_s = log.time_ns / 1e9
    omax = float(log.offset.max()) if n else 1.0
    fr = svg.Frame(0.0, max(_s(scan.end_ns), 1e-3), 0.0, max(omax, 1.0) * 1.02, height=190,
                   width=380, lanes=())
    out = svg.open_svg(fr, f"key {key}: offset against time")
    out += svg.fault_bands(fr, _fault_rows(scan))
    out += svg.axes(fr, "time first seen (s)", "offset")
    if aborted.any():  # a halo under each record an aborted transaction wrote
        out.append(f'<g class="aborted"><title>records of aborted transactions, read: '
                   f'{int(aborted.sum())}</title>')
        out.append(svg.points(fr, t_s[aborted], log.offset[aborted].astype(np.float64),
                              ABORTED_COLOUR, 8, cls="aborted"))
        out.append("</g>")
    writers = log.writer
    for w in np.unique(writers[keep]):
        sel = keep & (writers == w) & ~marked
        colour = "#aaa" if w < 0 else svg.PALETTE[int(w) % len(svg.PALETTE)]
        out.append(svg.points(fr, t_s[sel], log.offset[sel].astype(np.float64), colour, 2.5))
    for sel, colour, name in ((divergent & ~lost, "#000", "divergent"), (lost, "#d62728", "lost")):
        if sel.any():
            out.append(f'<g class="mark-{name}" data-count="{int(sel.sum())}"><title>{name}: '
                       f'{int(sel.sum())} records</title>')
            out.append(svg.points(fr, t_s[sel & keep], log.offset[sel & keep].astype(np.float64),
                                  colour, 5, cls="marked"))
            out.append("</g>")
    out.append("</svg>")
    return "".join(out)
