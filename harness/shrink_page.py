"""shrink.html: the minimal plan, and links to the original run, every trial and the minimal
run's report; a static page that opens from disk like a run's report."""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Any


def stopped_text(stopped: str | None) -> str:
    """Why a shrink ended early, as its summary and page say it."""
    if stopped is None:
        return ""
    if stopped in ("budget", "interrupted"):
        why = "the budget ended the search" if stopped == "budget" else "interrupted"
        return f" ({why}: best so far)"
    return f" (stopped: {stopped}; best so far)"


def _link(run: str | None, here: Path, text: str) -> str:
    """A relative link to a run's report (or its folder when it has none)."""
    if not run:
        return escape(text)
    p = Path(run)
    target = p / "report.html" if (p / "report.html").exists() else p
    return f'<a href="{escape(os.path.relpath(target, here))}">{escape(text)}</a>'


def render(s: dict[str, Any], here: Path) -> str:
    m, o = s["minimal"], s["original"]
    rows = "".join(
        f"<tr><td>{escape(r['fault'])}</td><td>{escape(r['target'])}</td>"
        f"<td>{r['from_s']:.2f} s</td><td>{r['to_s']:.2f} s</td></tr>" for r in m["rows"])
    trials = "".join(
        f"<tr><td>{t['n']}</td><td>{escape(t['stage'])}</td><td>{len(t['windows'])}</td>"
        f"<td>{t['time_limit_s']:g} s</td>"
        f"<td class=\"{'bad' if t['reproduced'] else 'ok'}\">"
        f"{'interrupted' if t['interrupted'] else 'reproduced' if t['reproduced'] else 'no'}"
        f"</td><td>{escape(', '.join(t['bad_anomaly_types']) or '-')}</td>"
        f"<td>{_link(t['run'], here, 'report')}</td></tr>" for t in s["trials"])
    stopped = stopped_text(s["stopped"])
    bad = escape(", ".join(s["bad_anomaly_types"]))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>undertow shrink: {bad}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #ccc; padding: 3px 8px; text-align: left; }}
td.bad {{ background: #fdd; }} td.ok {{ background: #efe; }}
</style></head><body>
<h1>Shrink: {bad}{escape(stopped)}</h1>
<p>{_link(s['original_run'], here, 'The original run')} had {o['windows']} fault windows
({o['steps']} nemesis steps) in {o['time_limit_s']:g} s. The minimal plan keeps
<b>{m['windows']}</b> ({m['steps']} steps) in {m['time_limit_s']:g} s, found in
{len(s['trials'])} trials ({s['minutes']:.1f} min), and failed as the original in
<b>{m['reproduced']} of {m['runs']}</b> runs ({escape(', '.join(m['found'])) or 'none found'}).
{_link(m['run'], here, 'The minimal run')}'s report shows it;
<a href="minimal.toml">minimal.toml</a> replays it (<code>undertow run --config
minimal.toml</code>).</p>
<h2>Minimal plan</h2>
<table id="minimal-plan"><tr><th>fault</th><th>target</th><th>from</th><th>to</th></tr>
{rows}</table>
<h2>Trials</h2>
<table id="trials"><tr><th>#</th><th>stage</th><th>windows</th><th>time limit</th>
<th>reproduced</th><th>bad types found</th><th>run</th></tr>
{trials}</table>
</body></html>
"""
