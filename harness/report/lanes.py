"""Per-process lanes of one example's operations, for ops.html (Jepsen's timeline.html is
the model): each operation a bar from its invocation to its completion on its process's
lane, filled with its type's fixed colour and outlined by its outcome; hover says what it
did. The bars are few (an example's operations), so they are drawn as they are."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from harness.report import svg
from harness.report.sentences import op_words

MAX_OPS = 80  # an example with more operations is listed, not drawn
LANE_H = 18
WIDTH = 900
LEFT = 70


def _op(ops: Sequence[dict[str, Any]], i: int) -> dict[str, Any] | None:
    if 0 <= i < len(ops) and ops[i].get("index") == i:
        return ops[i]
    return None


def example_lanes(ops: Sequence[dict[str, Any]], indices: Iterable[int],
                  pairs: dict[int, int]) -> str:
    """The SVG of an example's operations on per-process lanes; "" when none can be drawn."""
    bars: dict[int, tuple[int, dict[str, Any], dict[str, Any]]] = {}  # invoke -> bar
    for i in indices:
        op = _op(ops, i)
        if op is None or type(op.get("process")) is not int:
            continue
        j = pairs.get(i)
        other = _op(ops, j) if j is not None else None
        inv, done = (op, other) if op.get("type") == "invoke" else (other, op)
        if inv is None or done is None:
            continue
        bars[inv["index"]] = (int(op["process"]), inv, done)
    if not bars or len(bars) > MAX_OPS:
        return ""
    procs = sorted({p for p, _, _ in bars.values()})
    t0 = min(inv["time"] for _, inv, _ in bars.values())
    t1 = max(done["time"] for _, _, done in bars.values())
    span = max(t1 - t0, 1)
    scale = (WIDTH - LEFT - 10) / span
    height = len(procs) * LANE_H + 24
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="lanes" width="{WIDTH}" '
           f'height="{height}" role="img"><title>operations per process</title>']
    for n, p in enumerate(procs):
        out.append(f'<text x="{LEFT - 6}" y="{n * LANE_H + 13}" class="tick" '
                   f'text-anchor="end">process {p}</text>')
    for p, inv, done in sorted(bars.values(), key=lambda b: b[1]["time"]):
        y = procs.index(p) * LANE_H + 2
        x = LEFT + (inv["time"] - t0) * scale
        w = max(2.0, (done["time"] - inv["time"]) * scale)
        f = str(inv.get("f"))
        typ = str(done.get("type"))
        edge = svg.KIND_COLOURS.get(typ, "#000")
        words = op_words(f, done.get("value"))
        out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{LANE_H - 5}" '
                   f'fill="{svg.op_colour(f)}" fill-opacity="0.55" stroke="{edge}" '
                   f'stroke-width="2"><title>op {inv["index"]}..{done["index"]} {svg.esc(typ)}: '
                   f'{svg.esc(words)}</title></rect>')
    out.append(f'<text x="{LEFT}" y="{height - 4}" class="tick">'
               f'{t0 / 1e9:.3f} s</text><text x="{WIDTH - 10}" y="{height - 4}" class="tick" '
               f'text-anchor="end">{t1 / 1e9:.3f} s</text></svg>')
    return "".join(out)
