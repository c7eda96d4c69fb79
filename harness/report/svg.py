"""Tiny server-side SVG plotting: axes, point clouds, lines, bands. No JS, no network.

Points are drawn as one <path> of zero-length round-capped strokes per colour,
which costs ~12 bytes a point, so a downsampled plot of thousands of points
stays small. Every text that may come from a run goes through `esc`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from markupsafe import escape

F64 = npt.NDArray[np.float64]

PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
           "#7f7f7f", "#393b79", "#637939")
KIND_COLOURS = {"ok": "#2ca02c", "fail": "#d62728", "info": "#ff7f0e"}
# each client operation type keeps its colour in every report (HISTORY.md's verbs)
OP_COLOURS = {"send": "#1f77b4", "poll": "#9467bd", "txn": "#8c564b", "assign": "#17becf",
              "subscribe": "#bcbd22", "commit": "#e377c2", "committed": "#393b79",
              "crash": "#7f7f7f"}


def op_colour(f: str) -> str:
    """An operation type's fixed colour; a verb HISTORY.md does not name gets one by hash."""
    if f in OP_COLOURS:
        return OP_COLOURS[f]
    return PALETTE[sum(f.encode()) % len(PALETTE)]
LANE_H = 9


def esc(text: object) -> str:
    return str(escape(str(text)))


def nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    """Round tick values covering [lo, hi]."""
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def fmt_num(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 1e6:
        return f"{x / 1e6:g}M"
    if abs(x) >= 1e4:
        return f"{x / 1e3:g}k"
    return f"{x:g}"


@dataclass(frozen=True, slots=True)
class Frame:
    """A plot area mapping data (x, y) to pixels; y may be logarithmic."""

    x0: float
    x1: float
    y0: float
    y1: float
    width: int = 900
    height: int = 260
    left: int = 64
    right: int = 16
    top: int = 22
    bottom: int = 34
    log_y: bool = False
    lanes: Sequence[str] = ()  # fault lanes drawn under the x axis, one per node

    @property
    def total_height(self) -> int:
        return self.height + (len(self.lanes) * LANE_H + 6 if self.lanes else 0)

    def _ty(self, y: Any) -> Any:
        if self.log_y:
            return np.log10(np.maximum(y, 1e-9))
        return y

    def sx(self, x: Any) -> Any:
        """Pixels of x (an array, or a number)."""
        span = (self.x1 - self.x0) or 1.0
        return self.left + (x - self.x0) / span * (self.width - self.left - self.right)

    def sy(self, y: Any) -> Any:
        """Pixels of y (an array, or a number)."""
        lo, hi = self._ty(self.y0), self._ty(self.y1)
        span = float(hi - lo) or 1.0
        plot_h = self.height - self.top - self.bottom
        return self.height - self.bottom - (self._ty(y) - lo) / span * plot_h


def open_svg(fr: Frame, title: str) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{fr.width}" '
            f'height="{fr.total_height}" viewBox="0 0 {fr.width} {fr.total_height}" '
            f'class="plot" role="img"><title>{esc(title)}</title>']


def axes(fr: Frame, x_label: str, y_label: str,
         x_fmt: Callable[[float], str] = fmt_num, y_ticks: bool = True) -> list[str]:
    """Frame box, ticks, grid and labels."""
    out: list[str] = []
    bottom = fr.height - fr.bottom
    right = fr.width - fr.right
    out.append(f'<rect x="{fr.left}" y="{fr.top}" width="{right - fr.left}" '
               f'height="{bottom - fr.top}" fill="none" stroke="#999"/>')
    for t in nice_ticks(fr.x0, fr.x1, 8):
        x = float(fr.sx(np.float64(t)))
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{fr.top}" y2="{bottom}" class="grid"/>'
                   f'<text x="{x:.1f}" y="{bottom + 13}" class="tick" text-anchor="middle">'
                   f'{esc(x_fmt(t))}</text>')
    if not y_ticks:
        yticks: list[float] = []
    elif fr.log_y:
        lo = math.floor(math.log10(max(fr.y0, 1e-9)))
        hi = math.ceil(math.log10(max(fr.y1, 1e-9)))
        yticks = [10.0 ** e for e in range(lo, hi + 1) if fr.y0 <= 10.0 ** e <= fr.y1]
    else:
        yticks = nice_ticks(fr.y0, fr.y1, 5)
    for t in yticks:
        y = float(fr.sy(np.float64(t)))
        out.append(f'<line x1="{fr.left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{fr.left - 4}" y="{y + 3:.1f}" class="tick" text-anchor="end">'
                   f'{esc(fmt_num(t))}</text>')
    out.append(f'<text x="{(fr.left + right) / 2:.0f}" y="{bottom + 28}" class="label" '
               f'text-anchor="middle">{esc(x_label)}</text>')
    out.append(f'<text x="12" y="{(fr.top + bottom) / 2:.0f}" class="label" '
               f'transform="rotate(-90 12 {(fr.top + bottom) / 2:.0f})" '
               f'text-anchor="middle">{esc(y_label)}</text>')
    return out


def points(fr: Frame, xs: F64, ys: F64, colour: str, size: float = 3.0,
           cls: str = "pts") -> str:
    """A cloud of dots as one path; pixels rounded to 0.1 to keep the file small."""
    if len(xs) == 0:
        return ""
    px = np.round(fr.sx(xs), 1)
    py = np.round(fr.sy(ys), 1)
    d = "".join(f"M{x:g} {y:g}h0" for x, y in zip(px.tolist(), py.tolist(), strict=True))
    return (f'<path d="{d}" stroke="{colour}" stroke-width="{size}" '
            f'stroke-linecap="round" fill="none" class="{cls}"/>')


def line(fr: Frame, xs: F64, ys: F64, colour: str, width: float = 1.5,
         dash: str | None = None) -> str:
    if len(xs) == 0:
        return ""
    px = np.round(fr.sx(xs), 1)
    py = np.round(fr.sy(ys), 1)
    pts = " ".join(f"{x:g},{y:g}" for x, y in zip(px.tolist(), py.tolist(), strict=True))
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<polyline points="{pts}" fill="none" stroke="{colour}" '
            f'stroke-width="{width}"{dash_attr}/>')


def legend(fr: Frame, items: Sequence[tuple[str, str]]) -> str:
    """Coloured labels in a row above the plot area."""
    out: list[str] = []
    x = fr.left
    for label, colour in items:
        out.append(f'<rect x="{x}" y="6" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{x + 14}" y="15" class="tick">{esc(label)}</text>')
        x += 24 + 7 * len(label)
    return "".join(out)


def fault_bands(fr: Frame, windows: Sequence[tuple[str, str, str, float, float]]) -> list[str]:
    """Faint shading across the plot, plus a lane per node under it:
    (node, label, colour, x0, x1), the colour being the fault kind's own."""
    out: list[str] = []
    top, bottom = fr.top, fr.height - fr.bottom
    lane_top = fr.height + 2
    for i, node in enumerate(fr.lanes):
        y = lane_top + i * LANE_H
        out.append(f'<text x="{fr.left - 4}" y="{y + 7}" class="tick" text-anchor="end">'
                   f'{esc(node)}</text><line x1="{fr.left}" x2="{fr.width - fr.right}" '
                   f'y1="{y + LANE_H - 1}" y2="{y + LANE_H - 1}" class="grid"/>')
    lane_of = {n: i for i, n in enumerate(fr.lanes)}
    for node, label, raw_colour, a, b in windows:
        colour = esc(raw_colour)  # a run's test.json may name it
        xa = float(fr.sx(np.float64(a)))
        xb = max(float(fr.sx(np.float64(b))), xa + 1.5)
        tip = f"<title>{esc(label)} {esc(node)}</title>"
        out.append(f'<rect x="{xa:.1f}" y="{top}" width="{xb - xa:.1f}" height="{bottom - top}" '
                   f'fill="{colour}" opacity="0.07"/>')
        if node in lane_of:
            y = lane_top + lane_of[node] * LANE_H
            out.append(f'<rect x="{xa:.1f}" y="{y}" width="{xb - xa:.1f}" height="{LANE_H - 2}" '
                       f'fill="{colour}" opacity="0.8" class="fault">{tip}</rect>')
    return out
