"""`blocklab report DIR`: one self-contained HTML page of a sweep's results.

Plots are PNG images inlined as data URIs and the page has no script, so it
needs no network and nothing else when viewed. For each metric: the metric
against each varied parameter, one line per policy (or strategy, or the
first other varied parameter), one panel per combination of the remaining
parameters; seeds are replicates (mean, with min–max bars). Timed sweeps get
the CDFs of response time (`response.cdf_ms`); results with several
per-request distributions (`*_ms` lists, e.g. measured and simulated times
of a drive) get one panel per cell with one curve per distribution. Under
each figure: the command, the columns drawn and the provenance of its cells.
Then a table of every cell, with the `blocklab run` command that reruns it.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from blocklab.sweeps import results as res

# Figures a reader looks for first, in this order (regular expressions on column names).
HEADLINE = (r"layers\.\d+\.miss_ratio", r"array\.rgr", r"array\.surviving_reads", r"response\.avg_ms",
            r"response\.p99_ms", r"rebuild\.rebuild_ms", r"timing\.utilization", r"demerit_ms", r"demerit_pct")
MAX_DEFAULT_METRICS = 6
MAX_PANELS = 24
SERIES_NAMES = re.compile(r"(^|\.)(policy|strategy)$")
# Columns that are not figures.
NOT_FIGURES = set(res.HEAD) | set(res.PROVENANCE) | {"case", "trace", "trace_label", "executor"}


@dataclass
class Section:
    """An extra part of a report (a recipe's own analysis): a title, an HTML
    fragment (trusted: the recipe writes it), an optional matplotlib figure
    (embedded as PNG) and a caption."""

    title: str
    html: str = ""
    figure: Any = None
    caption: str = ""


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _norm(v):
    """A cell value usable as a group key (lists from Parquet come back as arrays)."""
    if hasattr(v, "tolist") and not isinstance(v, (str, bytes)):
        v = v.tolist()
    if isinstance(v, list):
        return tuple(_norm(x) for x in v)
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _text(v) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_text(x) for x in v) + "]"
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else str(v)


def _number(v) -> float | None:
    """A parameter value as a position on a numeric axis: numbers, `10%`, `64MiB`."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        s = v.strip()
        if s.endswith("%"):
            try:
                return float(s[:-1])
            except ValueError:
                return None
        try:
            from blocklab import _core

            return float(_core.parse_bytes(s))
        except Exception:
            return None
    return None


class _Data:
    """The results and what the report needs to know about them."""

    def __init__(self, folder: Path):
        self.df = res.load(folder)
        self.meta = res.load_meta(folder)
        sweep = self.meta.get("sweep", {})
        self.grid = sweep.get("grid", {})
        self.param_keys = [k for k in self.meta.get("param_keys", []) if k in self.df.columns]
        varied = [v for v in self.meta.get("varied", []) if v in self.df.columns or v == "trace"]
        self.varied = ["trace_label" if v == "trace" else v for v in varied]
        self.ok = self.df[self.df["status"] == "ok"] if len(self.df) else self.df
        self.rows = [{c: _norm(v) for c, v in r.items()} for r in self.ok.to_dict("records")]

    def order(self, key: str) -> list:
        """The values of a parameter in the order the sweep gives them."""
        seen = list(dict.fromkeys(r.get(key) for r in self.rows))
        if key in self.grid:
            given = [_norm(v) for v in self.grid[key]]
            return [v for v in given if v in seen] + [v for v in seen if v not in given]
        if key == "trace_label":
            labels = [t.get("label") or Path(t["path"]).name for t in self.meta.get("sweep", {}).get("traces", [])]
            return [v for v in labels if v in seen] + [v for v in seen if v not in labels]
        nums = [_number(v) for v in seen]
        if all(n is not None for n in nums):
            return [v for _, v in sorted(zip(nums, seen), key=lambda p: p[0])]
        return seen

    def is_scalar_number(self, col: str) -> bool:
        vals = [r.get(col) for r in self.rows if r.get(col) is not None]
        return bool(vals) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)

    def figures(self) -> list[str]:
        """Numeric figures that change between cells."""
        out = []
        for c in self.df.columns:
            if c in NOT_FIGURES or c in self.param_keys or not self.is_scalar_number(c):
                continue
            if len({r.get(c) for r in self.rows}) > 1:
                out.append(c)
        return out

    def distributions(self) -> list[str]:
        """Columns holding a distribution per cell: lists of numbers named `*_ms`."""
        out = []
        for c in self.df.columns:
            if not c.endswith("_ms") or c in self.param_keys:
                continue
            vals = [r.get(c) for r in self.rows if r.get(c) is not None]
            if vals and all(isinstance(v, tuple) and len(v) > 1 for v in vals):
                out.append(c)
        return out


def choose_metrics(d: _Data, asked: Sequence[str] | None) -> list[str]:
    if asked:
        missing = [m for m in asked if m not in d.df.columns]
        if missing:
            figs = d.figures()
            raise ValueError(f"no column `{missing[0]}` in the results; figures that vary: "
                             f"{', '.join(figs[:20]) or 'none'}")
        return list(asked)
    figs = d.figures()
    out = []
    for pat in HEADLINE:
        out += [f for f in figs if re.fullmatch(pat, f) and f not in out]
    return out[:MAX_DEFAULT_METRICS] if out else figs[:MAX_DEFAULT_METRICS]


def _series_param(varied: list[str], x: str | None) -> str | None:
    for v in varied:
        if v != x and SERIES_NAMES.search(v):
            return v
    return None


def _provenance(rows: list[dict], meta: dict) -> str:
    """Where the cells of a figure come from, in words."""
    def uniq(col):
        return sorted({str(r.get(col)) for r in rows if r.get(col) is not None})

    traces = {}
    for r in rows:
        if r.get("trace_label") is not None:
            traces[r["trace_label"]] = (r.get("trace_format"), r.get("trace_sha256"))
    starts = uniq("started_at")
    parts = [
        f"{len(rows)} cell(s)",
        "blocklab " + ", ".join(uniq("blocklab_version")) + " at git " + ", ".join(c[:12] + ("+dirty" if c.endswith("+dirty") else "") for c in uniq("git_commit")),
    ]
    stacks = uniq("stack_sha256")
    if stacks:
        stack_file = meta.get("sweep", {}).get("stack")
        parts.append(f"stack {Path(stack_file).name if stack_file else ''} sha256 " + ", ".join(s[:12] for s in stacks))
    if traces:
        parts.append("trace(s) " + "; ".join(f"{k} ({f}, sha256 {(s or '')[:12]})" for k, (f, s) in traces.items()))
    if starts:
        parts.append(f"run {starts[0][:19]} – {starts[-1][:19]} UTC on " + ", ".join(uniq("host")))
    return "; ".join(parts)


def _caption(command: str, drawn: str, rows: list[dict], meta: dict, note: str = "") -> str:
    return (f"<figcaption><code>{html.escape(command)}</code><br>{html.escape(drawn)}"
            f"{('<br>' + html.escape(note)) if note else ''}<br><small>{html.escape(_provenance(rows, meta))}</small>"
            "</figcaption>")


def _panels(d: _Data, keys: list[str]) -> list[tuple[tuple, list[dict]]]:
    """Rows grouped by the values of `keys`, in sweep order."""
    if not keys:
        return [((), d.rows)]
    combos = itertools.product(*(d.order(k) for k in keys))
    out = []
    for combo in combos:
        rs = [r for r in d.rows if all(r.get(k) == v for k, v in zip(keys, combo))]
        if rs:
            out.append((combo, rs))
    return out


def _grid_fig(n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, n)
    rows = math.ceil(n / cols)
    w, h = (6.4, 4.0) if n == 1 else (4.8, 3.4) if n <= 3 else (3.8, 2.9)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    return fig, list(axes.flat)


def _short(key: str) -> str:
    return "trace" if key == "trace_label" else key


def metric_figure(d: _Data, metric: str, x: str, command: str) -> str | None:
    """`metric` against parameter `x`: lines per series, panels per the other parameters."""
    series = _series_param(d.varied, x)
    if series is None:
        series = next((v for v in d.varied if v not in (x, "seed")), None)
    facet = [v for v in d.varied if v not in (x, series, "seed")]
    panels = _panels(d, facet)
    rows_with = [r for r in d.rows if isinstance(r.get(metric), (int, float)) and r.get(metric) is not None]
    if not rows_with:
        return None
    shown = panels[:MAX_PANELS]
    fig, axes = _grid_fig(len(shown))
    xs_order = d.order(x)
    nums = [_number(v) for v in xs_order]
    numeric = all(n is not None for n in nums)
    pos = {v: (n if numeric else i) for i, (v, n) in enumerate(zip(xs_order, nums))}
    logx = numeric and min(nums) > 0 and max(nums) / min(nums) >= 20
    s_order = d.order(series) if series else [None]
    for ax, (combo, rs) in zip(axes, shown):
        for j, s in enumerate(s_order):
            # Categories: each series a little to the side, so that equal values stay visible.
            dodge = 0.0 if numeric else (j - (len(s_order) - 1) / 2) * min(0.12, 0.6 / max(1, len(s_order)))
            pts = []
            for xv in xs_order:
                ys = [r[metric] for r in rs if r.get(x) == xv and (series is None or r.get(series) == s)
                      and isinstance(r.get(metric), (int, float))]
                if ys:
                    pts.append((pos[xv] + dodge, sum(ys) / len(ys), min(ys), max(ys)))
            if not pts:
                continue
            px, py, lo, hi = zip(*pts)
            label = _text(s) if series else None
            # Categories (policies, traces) are not a scale: points, no line between them.
            style = dict(marker="o", ms=3 if numeric else 5, lw=1.2, ls="-" if numeric else "none", label=label)
            if any(h > l for l, h in zip(lo, hi)):  # seeds: min–max bars
                ax.errorbar(px, py, yerr=[[a - b for a, b in zip(py, lo)], [b - a for a, b in zip(py, hi)]],
                            capsize=2, **style)
            else:
                ax.plot(px, py, **style)
        if logx:
            ax.set_xscale("log")
        if not numeric:
            ax.set_xlim(-0.5, len(xs_order) - 0.5)
            ax.set_xticks(range(len(xs_order)))
            ax.set_xticklabels([_text(v) for v in xs_order], rotation=30, ha="right", fontsize=7)
        elif all(isinstance(v, str) for v in xs_order) and len(xs_order) <= 10:
            ax.set_xticks([pos[v] for v in xs_order])
            ax.set_xticklabels([_text(v) for v in xs_order], fontsize=7)
            ax.minorticks_off()
        ax.set_title(", ".join(f"{_short(k)}={_text(v)}" for k, v in zip(facet, combo)) or metric, fontsize=8)
        ax.set_xlabel(_short(x), fontsize=8)
        ax.set_ylabel(metric, fontsize=8)
        try:
            ax.ticklabel_format(axis="y", useOffset=False)  # 0.99721, not 1e-5 + 0.997
        except AttributeError:
            pass
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    if series:
        axes[0].legend(fontsize=7, title=_short(series), title_fontsize=7)
    fig.tight_layout()
    src = _png(fig)
    drawn = (f"y: {metric}; x: {_short(x)}" + (f"; lines: {_short(series)}" if series else "")
             + (f"; panels: {', '.join(_short(f) for f in facet)}" if facet else "")
             + ("; mean over seeds, bars min–max" if "seed" in d.varied else ""))
    note = (f"first {MAX_PANELS} of {len(panels)} panels shown; every cell is in the table below and in "
            "results.parquet") if len(panels) > MAX_PANELS else ""
    used = [r for _, rs in shown for r in rs]
    return (f'<figure><img alt="{html.escape(metric)} against {html.escape(_short(x))}" src="{src}">'
            f"{_caption(command, drawn, used, d.meta, note)}</figure>")


def cdf_figure(d: _Data, dists: list[str], command: str) -> str | None:
    """CDFs: with one distribution column, one panel per combination of the
    parameters besides the series, one curve per series value; with several
    (measured vs simulated), one panel per cell, one curve per column."""
    if not dists or not d.rows:
        return None
    if len(dists) == 1:
        col = dists[0]
        series = _series_param(d.varied, None) or next((v for v in d.varied if v != "seed"), None)
        facet = [v for v in d.varied if v not in (series, "seed")]
    else:
        series, facet = None, [v for v in d.varied if v != "seed"]
    panels = _panels(d, facet)
    shown = panels[:MAX_PANELS]
    fig, axes = _grid_fig(len(shown))
    import numpy as np

    for ax, (combo, rs) in zip(axes, shown):
        curves = []
        if len(dists) == 1:
            for s in (d.order(series) if series else [None]):
                vals = [r[col] for r in rs if (series is None or r.get(series) == s) and r.get(col)]
                if vals:
                    curves.append((_text(s) if series else col, vals))
        else:
            for c in dists:
                vals = [r[c] for r in rs if r.get(c)]
                if vals:
                    curves.append((c, vals))
        for label, vals in curves:
            # seeds: the mean of each quantile when the lists have one length, else the first
            arrs = [np.sort(np.asarray(v, dtype=float)) for v in vals]
            xs = np.mean(arrs, axis=0) if len({len(a) for a in arrs}) == 1 else arrs[0]
            ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs), lw=1.2, label=label, drawstyle="steps-post")
        ax.set_title(", ".join(f"{_short(k)}={_text(v)}" for k, v in zip(facet, combo)) or "all cells", fontsize=8)
        ax.set_xlabel("response time (ms)", fontsize=8)
        ax.set_ylabel("fraction of requests", fontsize=8)
        ax.set_ylim(0, 1.01)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if curves and (len(dists) > 1 or series):
            ax.legend(fontsize=7, title=_short(series) if series else None, title_fontsize=7)
    fig.tight_layout()
    src = _png(fig)
    drawn = (f"CDF of {', '.join(dists)}" + (f"; lines: {_short(series)}" if series else "")
             + (f"; panels: {', '.join(_short(f) for f in facet)}" if facet else ""))
    note = f"first {MAX_PANELS} of {len(panels)} panels shown" if len(panels) > MAX_PANELS else ""
    used = [r for _, rs in shown for r in rs]
    return (f'<figure><img alt="CDF of response time" src="{src}">{_caption(command, drawn, used, d.meta, note)}'
            "</figure>")


def rerun_command(meta: dict, r: dict) -> str:
    """The `blocklab run` command of one cell."""
    from blocklab.sweeps.spec import UNSET, toml_value, unset_keys

    sw = meta.get("sweep", {})
    if sw.get("task", "stack") != "stack":
        return f"(task {sw.get('task')}: {', '.join(f'{k}={_text(r.get(k))}' for k in meta.get('param_keys', []))})"
    parts = ["blocklab run", sw.get("stack", "STACK"), "--trace", str(r.get("trace")), "--format",
             str(r.get("trace_format")), "--executor", str(r.get("executor") or sw.get("executor"))]
    for k in meta.get("param_keys", []):
        v = r.get(k)
        if v is not None and not (isinstance(v, float) and math.isnan(v)):  # NaN: a key this cell's case does not set
            v = v.tolist() if hasattr(v, "tolist") else list(v) if isinstance(v, tuple) else v
            if k == UNSET:
                parts += [a for key in unset_keys(v) for a in ("--unset", key)]
            else:
                parts += ["--set", f"'{k}={toml_value(v)}'"]
    if r.get("seed") is not None and sw.get("seeds"):
        parts += ["--set", f"seed={r['seed']}"]
    if sw.get("skip_bad"):
        parts.append("--skip-bad")
    return " ".join(parts) + " --json"


def cells_table(d: _Data, metrics: list[str]) -> str:
    cols = ["cell", "status"] + (["case"] if "case" in d.df.columns else []) + \
        [k for k in d.param_keys] + ["trace_label"] + (["seed"] if "seed" in d.varied else []) + metrics + ["wall_s"]
    head = "".join(f"<th>{html.escape(_short(c))}</th>" for c in cols) + "<th>error / command</th>"
    body = []
    for r in d.df.to_dict("records"):
        r = {c: _norm(v) for c, v in r.items()}
        tds = []
        for c in cols:
            v = r.get(c)
            if c == "cell":
                v = str(v)[:8]
            elif c == "wall_s" and isinstance(v, float):
                v = f"{v:.3f}"
            tds.append(f"<td>{html.escape(_text(v))}</td>")
        extra = html.escape(r.get("error") or "")
        cmd = html.escape(rerun_command(d.meta, r))
        last = (f'<span class="err">{extra}</span>' if extra else "") + f"<details><summary>rerun</summary><code>{cmd}</code></details>"
        cls = ' class="failed"' if r.get("status") != "ok" else ""
        body.append(f"<tr{cls}>{''.join(tds)}<td>{last}</td></tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:1.5em;color:#222;max-width:1600px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
figure{margin:1em 0;padding:.5em;border:1px solid #eee}figure img{max-width:100%}
figcaption{font-size:.85em;color:#444;margin-top:.4em}code{font-size:.9em;background:#f5f5f5;padding:0 .2em}
table{border-collapse:collapse;font-size:.8em}td,th{border:1px solid #ddd;padding:2px 6px;text-align:right}
th{background:#f0f0f0;position:sticky;top:0}tr.failed{background:#fde8e8}.err{color:#a00}
details summary{cursor:pointer;color:#555}dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}
dt{font-weight:600}dd{margin:0}
"""


def write_report(folder: str | Path, out: str | Path | None = None, *, metrics: Sequence[str] | None = None,
                 title: str | None = None, sections: Sequence[Section] = (), command: str | None = None) -> Path:
    """Write the HTML report of the sweep in `folder` (default `folder/report.html`); its path."""
    folder = Path(folder)
    out = Path(out) if out is not None else folder / "report.html"
    d = _Data(folder)
    meta = d.meta
    sw = meta.get("sweep", {})
    metrics = choose_metrics(d, metrics or sw.get("report", {}).get("metrics"))
    run_cmd = command or meta.get("command") or f"blocklab.sweep(...) into {folder}"
    title = title or sw.get("report", {}).get("title") or f"Sweep {sw.get('name') or folder.name}"
    parts = [f"<h1>{html.escape(title)}</h1>"]
    nok = int((d.df["status"] == "ok").sum()) if len(d.df) else 0
    info = {
        "command": run_cmd,
        "cells": f"{len(d.df)} in results ({nok} ok, {len(d.df) - nok} failed) of {meta.get('cells', len(d.df))} in the sweep",
        "stack": f"{sw.get('stack')} ({sw.get('executor')} executor)" if sw.get("task", "stack") == "stack" else f"task {sw.get('task')}",
        "varied": ", ".join(_short(v) for v in d.varied) or "nothing",
        "grid": "; ".join(f"{k} = {json.dumps(v)}" for k, v in sw.get("grid", {}).items()) or "none",
        "metrics drawn": ", ".join(metrics) or "none",
    }
    parts.append("<dl>" + "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(str(v))}</dd>" for k, v in info.items())
                 + "</dl>")
    traces = sw.get("traces", [])
    if traces:
        sha = {r.get("trace"): r.get("trace_sha256") for r in d.df.to_dict("records")}
        parts.append("<table><thead><tr><th>trace</th><th>path</th><th>format</th><th>sha256</th></tr></thead><tbody>"
                     + "".join(f"<tr><td>{html.escape(t.get('label') or Path(t['path']).name)}</td>"
                               f"<td>{html.escape(t['path'])}</td><td>{html.escape(t.get('format', 'auto'))}</td>"
                               f"<td><code>{html.escape(str(sha.get(t['path']) or ''))}</code></td></tr>" for t in traces)
                     + "</tbody></table>")
    for s in sections:
        parts.append(f"<h2>{html.escape(s.title)}</h2>{s.html}")
        if s.figure is not None:
            parts.append(f'<figure><img alt="{html.escape(s.title)}" src="{_png(s.figure)}">'
                         f"<figcaption><code>{html.escape(run_cmd)}</code><br>{html.escape(s.caption)}<br>"
                         f"<small>{html.escape(_provenance(d.rows, meta))}</small></figcaption></figure>")
    xs = [v for v in d.varied if v != "seed"]
    for m in metrics:
        figs = []
        for x in xs:
            if x == _series_param(d.varied, None) and len(xs) > 1:
                continue  # it is the lines of the other plots
            f = metric_figure(d, m, x, run_cmd)
            if f:
                figs.append(f)
        if not xs and d.rows:  # nothing varied: one value per cell
            vals = ", ".join(_text(r.get(m)) for r in d.rows)
            figs.append(f"<p>{html.escape(m)} = {html.escape(vals)}</p>")
        if figs:
            parts.append(f"<h2>{html.escape(m)}</h2>" + "".join(figs))
    cdf = cdf_figure(d, d.distributions(), run_cmd)
    if cdf:
        parts.append("<h2>Response-time distributions</h2>" + cdf)
    parts.append(f"<h2>Cells</h2>{cells_table(d, metrics)}")
    page = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><link rel=\"icon\" href=\"data:,\"><style>{CSS}</style></head>"
            f"<body>{''.join(parts)}</body></html>\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return out
