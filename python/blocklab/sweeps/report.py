"""`blocklab report DIR`: one self-contained HTML page of a sweep's results.

Plots are PNG images inlined as data URIs and the page has no script, so it
needs no network and nothing else when viewed. For each metric: the metric
against each varied parameter, one line per policy (or strategy, or the
first other varied parameter), one panel per combination of the remaining
parameters; seeds are replicates (mean, with min–max bars). Timed sweeps get
the CDFs of response time (`response.cdf_ms`); results with several
per-request distributions (`*_ms` lists, e.g. measured and simulated times
of a drive) get one panel per cell with one curve per distribution. Under
each figure: the command, the columns drawn (their raw keys) and the provenance
of its cells. Then a table of every cell, with the `blocklab run` command that
reruns it.

Figures are drawn for reading: human labels with units (labels.py), y axes of
ratios, shares and counts from 0, one marker and line style per series (equal
series stay visible, and the caption says which are equal within the stated
resolution), the legend outside the plots, ticks at the grid's values, and
many categories (cases) listed down the y axis. Every figure is also written
to `<report>-figures/<metric>-vs-<parameter>.png` (and `.svg`, `.pdf` with
`formats`), one stable name per figure, linked under it.
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
from blocklab.sweeps.labels import label, resolution, starts_at_zero

# Figures a reader looks for first, in this order (regular expressions on column names).
HEADLINE = (r"layers\.\d+\.miss_ratio", r"array\.rgr", r"array\.surviving_reads", r"response\.avg_ms",
            r"response\.p99_ms", r"rebuild\.rebuild_ms", r"timing\.utilization", r"demerit_ms", r"demerit_pct")
MAX_DEFAULT_METRICS = 6
MAX_PANELS = 24
# More categories than this on one axis: listed down the y axis, one per row.
MAX_CATEGORIES_ACROSS = 12
# One look per series: equal series stay visible as nested hollow markers.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
LINESTYLES = ("-", "--", ":", "-.")
FIGURE_FORMATS = ("png", "svg", "pdf")
# Inches at 100 dpi: a figure is as wide as the page (1350 px at 1400 px).
PAGE_WIDTH_IN = 13.5
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


class Figures:
    """Where the report's figures go: each is inlined as PNG and written as
    `<dir>/<name>.<format>` for every asked format; the links under it."""

    def __init__(self, folder: Path | None, formats: Sequence[str] = ("png",)):
        self.folder = folder
        self.formats = ["png"] + [f for f in formats if f != "png"]
        self.names: set[str] = set()

    def save(self, fig, name: str) -> tuple[str, str]:
        """The PNG data URI of `fig` and the HTML links to its files."""
        import matplotlib.pyplot as plt

        name = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "figure"
        base, n = name, 2
        while name in self.names:  # the same figure twice (a recipe's section): keep both
            name, n = f"{base}-{n}", n + 1
        self.names.add(name)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        links = []
        if self.folder is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            for f in self.formats:
                path = self.folder / f"{name}.{f}"
                if f == "png":
                    path.write_bytes(buf.getvalue())
                else:  # no date in the file: the same results give the same bytes
                    fig.savefig(path, format=f, bbox_inches="tight", metadata={"Date": None})
                rel = f"{self.folder.name}/{path.name}"
                links.append(f'<a href="{html.escape(rel)}">{f.upper()}</a>')
        plt.close(fig)
        uri = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
        return uri, (f'<p class="files">{html.escape(name)}: ' + " · ".join(links) + "</p>") if links else ""


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


STYLE = {"font.size": 11, "axes.titlesize": 12, "axes.labelsize": 12, "xtick.labelsize": 10,
         "ytick.labelsize": 10, "legend.fontsize": 11, "legend.title_fontsize": 11,
         "svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "blocklab"}


def _grid_fig(n: int, rows_per_panel: int = 0):
    """A figure of `n` panels as wide as the page. `rows_per_panel`: category rows
    listed down each panel's y axis (its height grows with them)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(STYLE)
    cols = 1 if n == 1 else 2 if (n <= 4 or rows_per_panel) else 3
    rows = math.ceil(n / cols)
    h = max(3.0, 0.28 * rows_per_panel + 1.2) if rows_per_panel else 4.6 if n == 1 else 3.8
    fig, axes = plt.subplots(rows, cols, figsize=(PAGE_WIDTH_IN, h * rows), squeeze=False)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    return fig, list(axes.flat)


def _short(key: str) -> str:
    return "trace" if key == "trace_label" else key


def _human(key: str) -> str:
    return label(_short(key)).axis()


def _panel_title(facet: list[str], combo: tuple) -> str:
    """`Case = healthy, Host cache size (layer 0) = 50`: one line per parameter when
    that is too long for a panel (three panels share the page's width)."""
    parts = [f"{label(_short(k)).text} = {_text(v)}" for k, v in zip(facet, combo)]
    one = ", ".join(parts)
    return one if len(one) <= 40 else "\n".join(parts)


def _series_look(j: int) -> dict:
    """Marker, line style and size of the j-th series: hollow markers shrinking with j,
    so that series drawn on top of each other stay visible as nested shapes."""
    return dict(marker=MARKERS[j % len(MARKERS)], ls=LINESTYLES[j % len(LINESTYLES)],
                ms=max(4.0, 11.0 - 1.6 * j), mfc="none", mew=1.6, lw=1.6)


def _equal_series(per_series: dict, res_: float) -> list[list[str]]:
    """Groups of series whose values differ by less than `res_` at every point they
    share (and share at least one): drawn on top of each other."""
    names = list(per_series)
    groups: list[list[str]] = []
    placed: set[str] = set()
    for i, a in enumerate(names):
        if a in placed:
            continue
        group = [a]
        for b in names[i + 1:]:
            if b in placed:
                continue
            common = [k for k in per_series[a] if k in per_series[b]]
            if common and all(abs(per_series[a][k] - per_series[b][k]) < res_ for k in common):
                group.append(b)
        if len(group) > 1:
            groups.append(group)
            placed.update(group)
    return groups


def _legend_outside(fig, axes, title: str | None):
    """One legend for the figure, above the panels: it never covers data."""
    handles, labels = [], []
    for ax in axes:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    if not handles:
        return None
    fig.tight_layout()
    leg = fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=min(len(labels), 6),
                     title=title, frameon=True)
    leg.set_gid("legend")
    return leg


def metric_figure(d: _Data, metric: str, x: str, command: str, figs: Figures | None = None,
                  zoom: bool = False) -> str | None:
    """`metric` against parameter `x`: lines per series, panels per the other parameters."""
    figs = figs or Figures(None)
    series = _series_param(d.varied, x)
    if series is None:
        series = next((v for v in d.varied if v not in (x, "seed")), None)
    facet = [v for v in d.varied if v not in (x, series, "seed")]
    panels = _panels(d, facet)
    rows_with = [r for r in d.rows if isinstance(r.get(metric), (int, float)) and r.get(metric) is not None]
    if not rows_with:
        return None
    shown = panels[:MAX_PANELS]
    xs_order = d.order(x)
    nums = [_number(v) for v in xs_order]
    numeric = all(n is not None for n in nums)
    across = numeric or len(xs_order) <= MAX_CATEGORIES_ACROSS  # else: categories down the y axis
    fig, axes = _grid_fig(len(shown), 0 if across else len(xs_order))
    pos = {v: (n if numeric else i) for i, (v, n) in enumerate(zip(xs_order, nums))}
    logx = numeric and min(nums) > 0 and max(nums) / min(nums) >= 20
    s_order = d.order(series) if series else [None]
    values = [float(r[metric]) for r in rows_with]
    res_ = resolution(metric, values)
    integral = all(float(v).is_integer() for v in values)
    # Times spanning orders of magnitude (a saturated cell next to idle ones): a log axis,
    # else the small ones sit flat on the floor.
    logy = not starts_at_zero(metric) and min(values) > 0 and max(values) / min(values) >= 20
    equal_groups: dict[tuple, list[str]] = {}
    flat_panels = 0
    for i, (ax, (combo, rs)) in enumerate(zip(axes, shown)):
        ax.patch.set_gid(f"plotarea-{i}")
        per_series: dict[str, dict] = {}
        for j, s in enumerate(s_order):
            pts = []
            for xv in xs_order:
                ys = [r[metric] for r in rs if r.get(x) == xv and (series is None or r.get(series) == s)
                      and isinstance(r.get(metric), (int, float))]
                if ys:
                    pts.append((pos[xv], sum(ys) / len(ys), min(ys), max(ys)))
            if not pts:
                continue
            px, py, lo, hi = zip(*pts)
            name = _text(s) if series else label(metric).text
            per_series[name] = dict(zip(px, py))
            look = _series_look(j)
            if not numeric:
                look["ls"] = "none"  # categories (policies, traces) are not a scale: no line between them
            look["label"] = name if series else None  # one series: no legend
            err = [[a - b for a, b in zip(py, lo)], [b - a for a, b in zip(py, hi)]]
            seeds = any(h > l for l, h in zip(lo, hi))
            if across:
                if seeds:  # seeds: min–max bars
                    ax.errorbar(px, py, yerr=err, capsize=3, **look)
                else:
                    ax.plot(px, py, **look)
            elif seeds:
                ax.errorbar(py, px, xerr=err, capsize=3, **look)
            else:
                ax.plot(py, px, **look)
        for g in _equal_series(per_series, res_):
            equal_groups.setdefault(tuple(g), []).append(i)
        ys_here = [v for p in per_series.values() for v in p.values()]
        if len(per_series) > 1 and ys_here and max(ys_here) - min(ys_here) < res_:
            flat_panels += 1
            ax.text(0.5, 0.04, f"all within {res_:.3g}: no difference at this resolution", transform=ax.transAxes,
                    ha="center", va="bottom", fontsize=10, color="#555")
        value_axis, cat_axis = (ax.yaxis, ax.xaxis) if across else (ax.xaxis, ax.yaxis)
        if not zoom and starts_at_zero(metric) and min(values) >= 0:
            # From 0 to a little above the highest point (whole markers, error bars included).
            tops = [r[metric] for r in rs if isinstance(r.get(metric), (int, float))]
            top = (max(tops) if tops else 0) * 1.07 or 1.0
            if across:
                ax.set_ylim(0, top)
            else:
                ax.set_xlim(0, top)
        if logy:
            (ax.set_yscale if across else ax.set_xscale)("log")
        if integral and not logy:
            from matplotlib.ticker import MaxNLocator

            value_axis.set_major_locator(MaxNLocator(integer=True))
        if logx:
            ax.set_xscale("log")
        if not numeric:
            lim = (-0.5, len(xs_order) - 0.5)
            (ax.set_xlim if across else ax.set_ylim)(*(lim if across else lim[::-1]))
            cat_axis.set_ticks(range(len(xs_order)))
            if across:
                ax.set_xticklabels([_text(v) for v in xs_order], rotation=30, ha="right")
            else:
                ax.set_yticklabels([_text(v) for v in xs_order])
        elif len(xs_order) <= MAX_CATEGORIES_ACROSS:
            # ticks at the grid's values, written as the sweep gives them (5, 8; 1%; 64MiB)
            ax.set_xticks([pos[v] for v in xs_order])
            ax.set_xticklabels([_text(v) for v in xs_order])
            ax.minorticks_off()
        elif all(isinstance(v, int) for v in xs_order) and not logx:
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # many disk counts: 4, 6, 8, not 4.5
        ax.set_title(_panel_title(facet, combo) or label(metric).text)
        (ax.set_xlabel if across else ax.set_ylabel)(_human(x))
        (ax.set_ylabel if across else ax.set_xlabel)(label(metric).axis(wrap=32 if across else 0))
        try:
            ax.ticklabel_format(axis="y" if across else "x", useOffset=False)  # 0.99721, not 1e-5 + 0.997
        except AttributeError:
            pass
        ax.grid(alpha=0.3)
    _legend_outside(fig, axes[:len(shown)], label(_short(series)).text if series else None)
    if not series:
        fig.tight_layout()
    src, links = figs.save(fig, f"{metric}-vs-{_short(x)}")
    drawn = (f"y: {label(metric).axis()} [{metric}]; x: {_human(x)} [{_short(x)}]"
             + (f"; lines: {label(_short(series)).text} [{_short(series)}]" if series else "")
             + (f"; panels: {', '.join(_short(f) for f in facet)}" if facet else "")
             + ("; mean over seeds, bars min–max" if "seed" in d.varied else ""))
    if not across:
        drawn = drawn.replace("y: ", "values (x): ", 1).replace("; x: ", "; rows (y): ", 1)
    notes = []
    if len(panels) > MAX_PANELS:
        notes.append(f"first {MAX_PANELS} of {len(panels)} panels shown; every cell is in the table below and in "
                     "results.parquet")
    if not zoom and starts_at_zero(metric):
        notes.append("axis from 0 (blocklab report --zoom fits it to the data)")
    if logy:
        notes.append(f"log axis: the values span {max(values) / min(values):.3g}×")
    unit = f" {label(metric).unit}" if label(metric).kind == "time" else ""
    notes.append(f"resolution {res_:.3g}{unit}: smaller differences are not differences here")
    for g, where in equal_groups.items():
        scope = "in every panel" if len(where) == len(shown) else f"in {len(where)} of {len(shown)} panels"
        notes.append(f"{' = '.join(g)} {scope} (differ by less than {res_:.3g}; drawn on top of each other, "
                     "told apart by marker)")
    if flat_panels:
        notes.append(f"{flat_panels} panel(s) with every series within {res_:.3g} of each other")
    used = [r for _, rs in shown for r in rs]
    alt = f"{label(metric).text} against {label(_short(x)).text}"
    return (f'<figure><img alt="{html.escape(alt)}" title="{html.escape(metric)} against {html.escape(_short(x))}" '
            f'src="{src}">{links}{_caption(command, drawn, used, d.meta, "; ".join(notes))}</figure>')


def cdf_figure(d: _Data, dists: list[str], command: str, figs: Figures | None = None) -> str | None:
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
    figs = figs or Figures(None)
    panels = _panels(d, facet)
    shown = panels[:MAX_PANELS]
    fig, axes = _grid_fig(len(shown))
    import numpy as np

    for i, (ax, (combo, rs)) in enumerate(zip(axes, shown)):
        ax.patch.set_gid(f"plotarea-{i}")
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
        for j, (name, vals) in enumerate(curves):
            # seeds: the mean of each quantile when the lists have one length, else the first
            arrs = [np.sort(np.asarray(v, dtype=float)) for v in vals]
            xs = np.mean(arrs, axis=0) if len({len(a) for a in arrs}) == 1 else arrs[0]
            look = _series_look(j)
            ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs), label=name, drawstyle="steps-post", ls=look["ls"],
                    lw=look["lw"])
        ax.set_title(_panel_title(facet, combo) or "all cells")
        ax.set_xlabel("Response time (ms)")
        ax.set_ylabel("Fraction of requests")
        ax.set_ylim(0, 1.01)
        ax.grid(alpha=0.3)
    if len(dists) > 1 or series:
        _legend_outside(fig, axes[:len(shown)], label(_short(series)).text if series else None)
    else:
        fig.tight_layout()
    src, links = figs.save(fig, "response-time-cdf")
    drawn = (f"CDF of {', '.join(dists)}" + (f"; lines: {label(_short(series)).text} [{_short(series)}]" if series else "")
             + (f"; panels: {', '.join(_short(f) for f in facet)}" if facet else ""))
    note = f"first {MAX_PANELS} of {len(panels)} panels shown" if len(panels) > MAX_PANELS else ""
    used = [r for _, rs in shown for r in rs]
    return (f'<figure><img alt="CDF of response time" title="{html.escape(", ".join(dists))}" src="{src}">{links}'
            f"{_caption(command, drawn, used, d.meta, note)}</figure>")


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
    def th(c):
        if c in ("cell", "status"):
            return f"<th>{c}</th>"
        return f'<th title="{html.escape(_short(c))}">{html.escape(_human(c))}</th>'

    head = "".join(th(c) for c in cols) + "<th>error / command</th>"
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
    return (f'<div class="scroll"><table class="cells"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
            "</table></div>")


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:1.5em;color:#222;max-width:1600px;
font-size:16px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
figure{margin:1em 0;padding:.5em;border:1px solid #eee}figure img{max-width:100%;height:auto}
.scroll{overflow-x:auto;max-width:100%}p.files{font-size:.85em;margin:.2em 0}
figcaption{font-size:.85em;color:#444;margin-top:.4em}code{font-size:.9em;background:#f5f5f5;padding:0 .2em}
table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ddd;padding:2px 6px;text-align:right}
th{background:#f0f0f0;position:sticky;top:0}tr.failed{background:#fde8e8}.err{color:#a00}
details summary{cursor:pointer;color:#555}dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}
dt{font-weight:600}dd{margin:0}
"""


def write_report(folder: str | Path, out: str | Path | None = None, *, metrics: Sequence[str] | None = None,
                 title: str | None = None, sections: Sequence[Section] = (), command: str | None = None,
                 formats: Sequence[str] = ("png",), zoom: bool = False) -> Path:
    """Write the HTML report of the sweep in `folder` (default `folder/report.html`); its path.
    Its figures also go to `<report>-figures/` in `formats` (png always; svg, pdf); `zoom`
    fits y axes to the data instead of drawing ratios, shares and counts from 0."""
    folder = Path(folder)
    out = Path(out) if out is not None else folder / "report.html"
    bad = [f for f in formats if f not in FIGURE_FORMATS]
    if bad:
        raise ValueError(f"--format: unknown figure format `{bad[0]}`; valid: {', '.join(FIGURE_FORMATS)}")
    figs = Figures(out.parent / f"{out.stem}-figures", formats)
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
        "metrics drawn": ", ".join(f"{label(m).axis()} [{m}]" for m in metrics) or "none",
        "figure files": f"{figs.folder.name}/ ({', '.join(figs.formats)})",
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
            src, links = figs.save(s.figure, s.title)
            parts.append(f'<figure><img alt="{html.escape(s.title)}" src="{src}">{links}'
                         f"<figcaption><code>{html.escape(run_cmd)}</code><br>{html.escape(s.caption)}<br>"
                         f"<small>{html.escape(_provenance(d.rows, meta))}</small></figcaption></figure>")
    xs = [v for v in d.varied if v != "seed"]
    for m in metrics:
        blocks = []
        for x in xs:
            if x == _series_param(d.varied, None) and len(xs) > 1:
                continue  # it is the lines of the other plots
            f = metric_figure(d, m, x, run_cmd, figs, zoom)
            if f:
                blocks.append(f)
        if not xs and d.rows:  # nothing varied: one value per cell
            vals = ", ".join(_text(r.get(m)) for r in d.rows)
            blocks.append(f"<p>{html.escape(label(m).axis())} [{html.escape(m)}] = {html.escape(vals)}</p>")
        if blocks:
            parts.append(f'<h2 title="{html.escape(m)}">{html.escape(label(m).axis())}</h2>' + "".join(blocks))
    cdf = cdf_figure(d, d.distributions(), run_cmd, figs)
    if cdf:
        parts.append("<h2>Response-time distributions</h2>" + cdf)
    parts.append(f"<h2>Cells</h2>{cells_table(d, metrics)}")
    page = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><link rel=\"icon\" href=\"data:,\"><style>{CSS}</style></head>"
            f"<body>{''.join(parts)}</body></html>\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page)
    return out
