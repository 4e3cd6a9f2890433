"""Reproduce PRO on Linux MD (Tian, Jiang, Feng, Xin, Shu): Tables 3 and 4, Fig. 2's U mode,
PRO's own parameters (not given by any source we have), and DOR.

Setting, as in the paper's §3.1-3.2 where it says, chosen where it does not (docs/repro-pro.md):
Seagate ST3300831AS model (`examples/disks/sata-7200.toml`), 64 KiB chunks, disk 0 failed
and its spare arriving at t = 0, MD's limits 10,000 / 30,000 KiB/s ("L") or 100,000 /
100,000 ("U", Fig. 2), the idle test of the paper's kernel (2.6.11, `md2611`). Traces: the
shipped WebSearch-like sample and an MSR Cambridge OLTP cut standing in for Financial, their
volumes folded onto one address space (as RAIDmeter replayed one device) and that space
mapped linearly onto the array (`array.fit = "scale"`), open loop at a speed-up calibrated
once so that MD's response on RAID-5 of 3 matches the paper's PR figure. Members are cut so
that the rebuild ends inside the trace (600 MB and 1 GB; the paper used 5 GB).

The runs are a sweep (`blocklab.sweeps`: the stack `stacks/pro.toml`, timed, every trace x
every run as a case; results.parquet with provenance, report.html); this module lays out
the cells, shapes the results, and sets them beside the paper's numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from blocklab.repro.shared import repo_root, shared_dir

# Table 3 (average user response time during recovery, ms) and Table 4 (reconstruction
# time, s) of the paper: (PR, PRO, improvement as printed) per (level, disks) and trace.
PAPER_T3 = {
    ("raid5", 3): {"ws": (225.67, 183.37, 18.74), "fin": (92.44, 63.95, 30.82)},
    ("raid5", 5): {"ws": (252.98, 210.67, 16.72), "fin": (68.34, 54.46, 20.31)},
    ("raid5", 7): {"ws": (258.06, 230.25, 7.85), "fin": (71.36, 55.93, 21.62)},
    ("raid5", 9): {"ws": (257.86, 236.55, 8.26), "fin": (62.62, 48.55, 22.47)},
    ("raid10", 4): {"ws": (235.61, 233.91, 0.72), "fin": (50.75, 48.81, 3.82)},
    ("raid10", 6): {"ws": (238.45, 239.66, -0.51), "fin": (59.88, 51.50, 13.99)},
}
PAPER_T4 = {
    ("raid5", 3): {"ws": (488.23, 487.95, 0.06), "fin": (247.73, 236.57, 4.5)},
    ("raid5", 5): {"ws": (483.20, 484.22, -0.21), "fin": (313.63, 244.23, 22.13)},
    ("raid5", 7): {"ws": (487.29, 489.41, -0.44), "fin": (315.89, 251.66, 20.33)},
    ("raid5", 9): {"ws": (488.36, 487.66, 1.43), "fin": (315.75, 284.63, 9.86)},
    ("raid10", 4): {"ws": (487.53, 487.98, -0.09), "fin": (418.11, 418.74, -0.15)},
    ("raid10", 6): {"ws": (489.31, 486.86, 5.03), "fin": (421.33, 442.52, -5.03)},
}
PAPER_CLAIMS = [
    "RAID-5: PRO improves the response during recovery by up to 30.82 % (Financial) and 18.74 % (WebSearch)",
    "RAID-5: reconstruction time improves by up to 22.13 % (Financial); WebSearch negligible (MD held at 10 MB/s)",
    "RAID-10: little change either way (-5.03 % ... +13.99 %)",
    "Fig. 2 (RAID-5 of 3, limits 100 MB/s, 'U'): PRO better by up to 4.44 % in rebuild time, 27.65-47.17 % in response",
    "FAST'07 (PRO in RAIDframe's DOR, web traces): response 3.6-23.9 % better, rebuild up to 44.7 % better than DOR",
]

ARRAYS = (("raid5", 3), ("raid5", 5), ("raid5", 7), ("raid5", 9), ("raid10", 4), ("raid10", 6))
LIMITS = {"L": (10_000, 30_000), "U": (100_000, 100_000)}
# PRO's own parameters around the defaults (one at a time), on RAID-5 of 5.
SWEEP = (
    ("pro.zone", ("1MiB", "4MiB", "16MiB", "64MiB")),
    ("pro.threads", (4, 8, 0)),
    ("pro.slice_ms", (100, 1000, 5000)),
    ("pro.count", ("all", "lost")),
    ("pro.half_life_s", (0, 10, 60)),
)
PRO_DEFAULTS = {"pro.zone": "16MiB", "pro.threads": 8, "pro.slice_ms": 1000, "pro.count": "all",
                "pro.half_life_s": 0}


@dataclass
class TraceSpec:
    key: str
    label: str
    path: str
    format: str
    speedup: float
    disk_size: int
    note: str = ""


def traces(root: Path | None = None) -> list[TraceSpec]:
    """The WebSearch-like sample, and the Financial stand-in when ../shared is present."""
    root = root or repo_root()
    out = [TraceSpec("ws", "WebSearch (wsrch-small)", str(root / "data" / "wsrch-small.trace"), "mqsim", 0.65,
                     600_000_000, "412.7 IOPS x 0.65 = 268 IOPS (paper 323.75); 100 % reads")]
    shared = shared_dir("traces", root)
    if shared is not None:
        fin = shared / "msr_cambridge" / "msr.cut.per_10k.rw_40_60.1370.trace"
        if fin.exists():
            out.append(TraceSpec("fin", "Financial stand-in (MSR 1370)", str(fin), "msr-cut", 0.3, 1_000_000_000,
                                 "116.4 IOPS x 0.3 = 35 IOPS (paper 64.06); 40.5 % reads (paper 35.91 %)"))
    return out


STACK = Path(__file__).resolve().parent / "stacks" / "pro.toml"


@dataclass
class Cell:
    """One run of the reproduction (on every trace): the array, the rebuild order, MD's
    limits (`mode` L or U) and idle test, and one of PRO's parameters moved off its default."""

    level: str
    disks: int
    order: str
    mode: str = "L"
    idle: str = "md2611"
    param: str = ""
    value: str = ""

    @property
    def name(self) -> str:
        """The case's name in the sweep (e.g. `raid5x3 pro L`, `raid5x5 pro L pro.zone=1MiB`)."""
        text = f"{self.level}x{self.disks} {self.order} {self.mode}"
        if self.idle != "md2611":
            text += f" idle={self.idle}"
        return text + (f" {self.param}={self.value}" if self.param else "")

    def case(self) -> dict:
        """The cell as a case of the sweep: its name and its stack keys."""
        lo, hi = LIMITS[self.mode]
        keys = {"name": self.name, "array.raid": self.level, "array.disks": self.disks,
                "array.rebuild.order": self.order, "array.rebuild.min": lo, "array.rebuild.max": hi,
                "array.rebuild.idle": self.idle}
        if self.param:
            keys[f"array.rebuild.{self.param}"] = int(self.value) if self.value.isdigit() else self.value
        return keys


def cells(sweep: bool = True, orders: bool = True, idle: str = "md2611") -> list[Cell]:
    """The runs of one trace: Tables 3/4 (md and pro on every array), Fig. 2's U limits,
    DOR and PRO-in-DOR on RAID-5 of 5, and PRO's parameters one at a time."""
    out = []
    for level, n in ARRAYS:
        for order in ("md", "pro"):
            out.append(Cell(level, n, order, idle=idle))
    for order in ("md", "pro"):
        out.append(Cell("raid5", 3, order, mode="U", idle=idle))
    if orders:
        for order in ("dor", "pro-dor"):
            out.append(Cell("raid5", 5, order, idle=idle))
    if sweep:
        for param, values in SWEEP:
            for v in values:
                if str(v) != str(PRO_DEFAULTS[param]):
                    out.append(Cell("raid5", 5, "pro", idle=idle, param=param, value=str(v)))
    return out


def sweep_spec(specs: list[TraceSpec], sweep: bool = True, orders: bool = True, idle: str = "md2611",
               model: Path | None = None):
    """The reproduction as a sweep: the stack `stacks/pro.toml`, timed, every trace (its
    speed-up and member size as the trace's parameters) x every run of `cells` (a case)."""
    from blocklab.sweeps import Sweep, TraceRef

    traces = [TraceRef(t.path, t.format, t.key, params=(("replay.speedup", t.speedup),
                                                          ("array.disk_size", t.disk_size)))
              for t in specs]
    grid = {"device.model": [str(Path(model).resolve())]} if model is not None else {}
    return Sweep(stack=str(STACK), executor="timed", traces=traces, grid=grid, name="repro-pro",
                 cases=[c.case() for c in cells(sweep, orders, idle)],
                 report={"metrics": ["rebuild.user_during.avg_response_ms", "rebuild.rebuild_ms"]})


def rows(df):
    """The sweep's rows in the recipe's terms (one per run): what the tables and plots need."""
    import pandas as pd

    ok = df[df["status"] == "ok"].reset_index(drop=True)
    param = pd.Series([""] * len(ok))
    value = pd.Series([""] * len(ok))
    for p, _ in SWEEP:
        col = f"array.rebuild.{p}"
        if col in ok.columns:
            has = ok[col].notna()
            param[has] = p
            value[has] = ok.loc[has, col].map(lambda v: str(int(v)) if isinstance(v, float) else str(v))

    def col(name, default=0):
        return ok[name].fillna(default) if name in ok.columns else pd.Series([default] * len(ok))

    return pd.DataFrame({
        "trace": ok["trace_label"], "level": ok["array.raid"], "disks": ok["array.disks"].astype(int),
        "order": ok["array.rebuild.order"], "mode": [_mode(lo, hi) for lo, hi in zip(ok["array.rebuild.min"],
                                                                                      ok["array.rebuild.max"])],
        "idle": ok["array.rebuild.idle"], "param": param, "value": value,
        "rebuild_s": ok["rebuild.rebuild_ms"] / 1e3, "finished": ok["rebuild.finished"],
        "avg_kbps": ok["rebuild.avg_kbps"], "pauses": ok["rebuild.pauses"], "rows": ok["rebuild.rows_total"],
        "resp_before_ms": ok["rebuild.user_before.avg_response_ms"],
        "resp_during_ms": ok["rebuild.user_during.avg_response_ms"],
        "resp_after_ms": ok["rebuild.user_after.avg_response_ms"],
        "requests_during": ok["rebuild.user_during.requests"], "resp_all_ms": ok["response.avg_ms"],
        "lost_read_blocks": ok["rebuild.lost_reads.blocks"], "lost_from_spare": ok["rebuild.lost_reads.from_spare"],
        "share_from_spare": ok["rebuild.lost_reads.share_from_spare"],
        "reconstruct_reads": col("rebuild.ops_by_cause.reconstruct-read.reads").astype(int),
        "user_reads": col("rebuild.ops_by_cause.user.reads").astype(int),
        "user_writes": col("rebuild.ops_by_cause.user.writes").astype(int),
        "rebuild_reads": ok["rebuild.rebuild_reads"], "rebuild_writes": ok["rebuild.rebuild_writes"],
        "series": ok["rebuild.series"],
    })


def _mode(lo, hi) -> str:
    for name, limits in LIMITS.items():
        if (lo, hi) == limits:
            return name
    return f"{lo}/{hi}"


def run(specs: list[TraceSpec], out: Path, sweep: bool = True, orders: bool = True, idle: str = "md2611",
        model: Path | None = None, workers: int = 2, ray: str | None = None, progress=True,
        command: str | None = None):
    """Every run, as a sweep into `out` (results.parquet with provenance, report.html with the
    tables beside the paper's; finished cells are kept on a re-run); returns the runs as a
    pandas DataFrame, one row per run (`rows`)."""
    from blocklab.sweeps import run_recipe

    sw = sweep_spec(specs, sweep=sweep, orders=orders, idle=idle, model=model)
    df = run_recipe(sw, out, jobs=workers, ray=ray, progress=progress, command=command,
                    title="PRO on MD: Tables 3 and 4, Fig. 2's U limits, DOR, PRO's own parameters",
                    sections=lambda df: report_sections(specs, rows(df)))
    return rows(df)


def report_sections(specs, runs):
    """The recipe's part of the HTML report: the tables beside the paper's, and the verdict."""
    import html

    from blocklab.sweeps import Section

    if runs.empty:
        return [Section("PRO against MD", "<p>no cell finished</p>")]
    try:
        t3, um, ot, sw = tables(runs), u_mode(runs), orders_table(runs), sweep_table(runs)
        md = markdown(specs, t3, um, ot, sw, verdict(t3, um, sw))
    except (IndexError, KeyError, ValueError) as e:  # some cells failed: the tables need pairs
        return [Section("PRO against MD", f"<p>tables not drawn: {html.escape(str(e))}</p>")]
    return [Section("Tables 3 and 4, Fig. 2, orders and PRO's parameters beside the paper",
                    f"<pre>{html.escape(md)}</pre>")]


def improvement(base: float, new: float) -> float:
    """(base - new) / base in percent (the papers' "improved")."""
    return 100.0 * (base - new) / base if base else float("nan")


def tables(df):
    """Tables 3 and 4 side by side with the paper: one row per (trace, level, disks)."""
    import pandas as pd

    main = df[(df["mode"] == "L") & (df["param"] == "") & df["order"].isin(["md", "pro"])]
    rows = []
    for (trace, level, n), g in main.groupby(["trace", "level", "disks"], sort=False):
        md = g[g["order"] == "md"].iloc[0]
        pro = g[g["order"] == "pro"].iloc[0]
        p3 = PAPER_T3[(level, n)][trace]
        p4 = PAPER_T4[(level, n)][trace]
        rows.append({
            "trace": trace, "level": level, "disks": n,
            "md_resp_ms": md["resp_during_ms"], "pro_resp_ms": pro["resp_during_ms"],
            "resp_impr": improvement(md["resp_during_ms"], pro["resp_during_ms"]),
            "paper_pr_ms": p3[0], "paper_pro_ms": p3[1], "paper_resp_impr": p3[2],
            "paper_resp_impr_recomputed": improvement(p3[0], p3[1]),
            "md_rebuild_s": md["rebuild_s"], "pro_rebuild_s": pro["rebuild_s"],
            "rebuild_impr": improvement(md["rebuild_s"], pro["rebuild_s"]),
            "paper_pr_s": p4[0], "paper_pro_s": p4[1], "paper_rebuild_impr": p4[2],
            "paper_rebuild_impr_recomputed": improvement(p4[0], p4[1]),
            "md_kbps": md["avg_kbps"], "pro_kbps": pro["avg_kbps"],
            "md_share_spare": md["share_from_spare"], "pro_share_spare": pro["share_from_spare"],
        })
    return pd.DataFrame(rows)


def u_mode(df):
    """Fig. 2: RAID-5 of 3, L against U limits, md and pro."""
    import pandas as pd

    g = df[(df["level"] == "raid5") & (df["disks"] == 3) & (df["param"] == "") & df["order"].isin(["md", "pro"])]
    rows = []
    for (trace, mode), h in g.groupby(["trace", "mode"], sort=False):
        md = h[h["order"] == "md"].iloc[0]
        pro = h[h["order"] == "pro"].iloc[0]
        rows.append({"trace": trace, "mode": mode, "md_resp_ms": md["resp_during_ms"],
                     "pro_resp_ms": pro["resp_during_ms"],
                     "resp_impr": improvement(md["resp_during_ms"], pro["resp_during_ms"]),
                     "md_rebuild_s": md["rebuild_s"], "pro_rebuild_s": pro["rebuild_s"],
                     "rebuild_impr": improvement(md["rebuild_s"], pro["rebuild_s"])})
    return pd.DataFrame(rows)


def orders_table(df):
    """md, pro, dor, pro-dor on RAID-5 of 5 (L limits for md and pro; DOR unthrottled, low priority)."""
    import pandas as pd

    g = df[(df["level"] == "raid5") & (df["disks"] == 5) & (df["mode"] == "L") & (df["param"] == "")]
    rows = []
    for trace, h in g.groupby("trace", sort=False):
        for _, r in h.iterrows():
            rows.append({"trace": trace, "order": r["order"], "resp_during_ms": r["resp_during_ms"],
                         "rebuild_s": r["rebuild_s"], "avg_kbps": r["avg_kbps"],
                         "share_from_spare": r["share_from_spare"]})
    return pd.DataFrame(rows)


def sweep_table(df):
    """PRO's improvement over md on RAID-5 of 5 as each of its parameters moves (others at defaults)."""
    import pandas as pd

    g = df[(df["level"] == "raid5") & (df["disks"] == 5) & (df["mode"] == "L")]
    rows = []
    for trace, h in g.groupby("trace", sort=False):
        md = h[(h["order"] == "md") & (h["param"] == "")].iloc[0]
        default = h[(h["order"] == "pro") & (h["param"] == "")].iloc[0]
        for param, values in SWEEP:
            for v in values:
                if str(v) == str(PRO_DEFAULTS[param]):
                    r = default
                else:
                    m = h[(h["param"] == param) & (h["value"] == str(v))]
                    if m.empty:
                        continue
                    r = m.iloc[0]
                rows.append({"trace": trace, "param": param, "value": str(v),
                             "default": str(v) == str(PRO_DEFAULTS[param]),
                             "resp_impr": improvement(md["resp_during_ms"], r["resp_during_ms"]),
                             "rebuild_impr": improvement(md["rebuild_s"], r["rebuild_s"]),
                             "share_from_spare": r["share_from_spare"]})
    return pd.DataFrame(rows)


def verdict(t3, um, sw) -> list[str]:
    """The paper's claims against our numbers, in words."""
    lines = []
    r5 = t3[t3["level"] == "raid5"]
    r10 = t3[t3["level"] == "raid10"]
    for trace, g in r5.groupby("trace", sort=False):
        best = g.loc[g["resp_impr"].idxmax()]
        lines.append(f"RAID-5 response, {trace}: PRO vs md {g['resp_impr'].min():+.1f} % .. {g['resp_impr'].max():+.1f} % "
                     f"(best {best['disks']} disks); paper {g['paper_resp_impr_recomputed'].min():.1f} .. "
                     f"{g['paper_resp_impr_recomputed'].max():.1f} %")
        lines.append(f"RAID-5 rebuild time, {trace}: {g['rebuild_impr'].min():+.1f} % .. {g['rebuild_impr'].max():+.1f} %; "
                     f"paper {g['paper_rebuild_impr_recomputed'].min():.2f} .. {g['paper_rebuild_impr_recomputed'].max():.2f} %; "
                     f"md's speed {g['md_kbps'].min():.0f} .. {g['md_kbps'].max():.0f} KiB/s")
    if not r10.empty:
        lines.append(f"RAID-10: response {r10['resp_impr'].min():+.1f} .. {r10['resp_impr'].max():+.1f} %, rebuild "
                     f"{r10['rebuild_impr'].min():+.1f} .. {r10['rebuild_impr'].max():+.1f} % (paper: -5.03 .. +13.99 %)")
    for _, r in um.iterrows():
        lines.append(f"{r['trace']} RAID-5 of 3, limits {r['mode']}: response {r['resp_impr']:+.1f} %, rebuild "
                     f"{r['rebuild_impr']:+.1f} %")
    for trace, g in sw.groupby("trace", sort=False):
        lines.append(f"sensitivity ({trace}, RAID-5 of 5): response improvement {g['resp_impr'].min():+.1f} .. "
                     f"{g['resp_impr'].max():+.1f} % over PRO's parameters; sign "
                     + ("unchanged" if (g['resp_impr'] > 0).all() or (g['resp_impr'] < 0).all() else "changes"))
    return lines


def misprints() -> list[str]:
    """Where the paper's printed improvement differs from its own PR and PRO columns."""
    out = []
    for name, table in (("Table 3", PAPER_T3), ("Table 4", PAPER_T4)):
        for (level, n), by in table.items():
            for trace, (pr, pro, printed) in by.items():
                re = improvement(pr, pro)
                if abs(re - printed) > 0.05:
                    out.append(f"{name} {trace} {level} of {n}: printed {printed:.2f} %, recomputed {re:.2f} %")
    return out


def plot(df, out: Path) -> list[Path]:
    """Fig. 1 analogues (response and lost-unit reads served by the spare over the rebuild,
    RAID-5 of 3 and RAID-10 of 6, md against pro) and the sensitivity sweep."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    main = df[(df["mode"] == "L") & (df["param"] == "")]
    traces_ = list(dict.fromkeys(main["trace"]))
    fig, axes = plt.subplots(len(traces_), 3, figsize=(13, 3.2 * len(traces_)), squeeze=False)
    for i, t in enumerate(traces_):
        for j, (level, n) in enumerate((("raid5", 3), ("raid10", 6))):
            ax = axes[i][j]
            for order in ("md", "pro"):
                g = main[(main["trace"] == t) & (main["level"] == level) & (main["disks"] == n) & (main["order"] == order)]
                if g.empty:
                    continue
                s = json.loads(g.iloc[0]["series"])
                ax.plot([p["t_ms"] / 1e3 for p in s], [p["avg_response_ms"] for p in s], label=order)
            ax.set_title(f"{t}: {level} of {n}, response during the rebuild", fontsize=9)
            ax.set_xlabel("s since the failure")
            ax.set_ylabel("mean response (ms, per second)")
            ax.legend(fontsize=7)
        ax = axes[i][2]
        for order in ("md", "pro"):
            g = main[(main["trace"] == t) & (main["level"] == "raid5") & (main["disks"] == 3) & (main["order"] == order)]
            if g.empty:
                continue
            s = json.loads(g.iloc[0]["series"])
            lost = [p["lost_reads"] for p in s]
            spare = [p["from_spare"] for p in s]
            cum = [sum(spare[:k + 1]) / max(1, sum(lost[:k + 1])) for k in range(len(s))]
            ax.plot([p["t_ms"] / 1e3 for p in s], cum, label=order)
        ax.set_title(f"{t}: raid5 of 3, lost-unit reads from the spare (cum. share)", fontsize=9)
        ax.set_xlabel("s since the failure")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7)
    fig.tight_layout()
    p = out / "pro-fig1.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)

    sw = sweep_table(df)
    if not sw.empty:
        params = [p for p, _ in SWEEP]
        fig, axes = plt.subplots(1, len(params), figsize=(3.2 * len(params), 3), sharey=True)
        for ax, param in zip(axes, params):
            for t, g in sw[sw["param"] == param].groupby("trace", sort=False):
                ax.plot(g["value"], g["resp_impr"], marker="o", label=t)
            ax.axhline(0, color="grey", lw=0.5)
            ax.set_title(param, fontsize=9)
            ax.tick_params(labelsize=7)
        axes[0].set_ylabel("response improvement over md (%)")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        p = out / "pro-sensitivity.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


def _recomputed(r, col: str) -> str:
    """The paper's improvement `col` recomputed from its own PR and PRO columns, and the printed
    one beside it when they differ by more than the rounding (a misprint)."""
    rec = r[f"{col}_recomputed"]
    return f"{rec:.2f}" + ("" if abs(rec - r[col]) <= 0.05 else f" (printed {r[col]:.2f})")


def markdown(specs, t3, um, ot, sw, verdict_lines) -> str:
    """Everything as Markdown (written next to the Parquet file and the plots)."""
    L = ["## Traces", ""]
    for t in specs:
        L.append(f"- {t.key}: {t.label}, `{Path(t.path).name}` ({t.format}), speed-up {t.speedup}, members "
                 f"{t.disk_size / 1e9:g} GB; {t.note}")
    L += ["", "## Table 3 analogue: mean user response during the rebuild (ms)", "",
          "| trace | array | md | pro | impr. % | paper PR | paper PRO | paper impr. % (recomputed) |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
    for _, r in t3.iterrows():
        L.append(f"| {r['trace']} | {r['level']} of {r['disks']} | {r['md_resp_ms']:.1f} | {r['pro_resp_ms']:.1f} | "
                 f"{r['resp_impr']:+.1f} | {r['paper_pr_ms']:.2f} | {r['paper_pro_ms']:.2f} | "
                 f"{_recomputed(r, 'paper_resp_impr')} |")
    L += ["", "## Table 4 analogue: reconstruction time (s)", "",
          "| trace | array | md | pro | impr. % | md KiB/s | paper PR | paper PRO | paper impr. % (recomputed) |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for _, r in t3.iterrows():
        L.append(f"| {r['trace']} | {r['level']} of {r['disks']} | {r['md_rebuild_s']:.1f} | {r['pro_rebuild_s']:.1f} | "
                 f"{r['rebuild_impr']:+.2f} | {r['md_kbps']:.0f} | {r['paper_pr_s']:.2f} | {r['paper_pro_s']:.2f} | "
                 f"{_recomputed(r, 'paper_rebuild_impr')} |")
    L += ["", "## Fig. 2 analogue: RAID-5 of 3, limits L (10/30 MB/s) and U (100/100 MB/s)", "",
          "| trace | limits | md resp. | pro resp. | impr. % | md rebuild s | pro rebuild s | impr. % |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
    for _, r in um.iterrows():
        L.append(f"| {r['trace']} | {r['mode']} | {r['md_resp_ms']:.1f} | {r['pro_resp_ms']:.1f} | {r['resp_impr']:+.1f} | "
                 f"{r['md_rebuild_s']:.1f} | {r['pro_rebuild_s']:.1f} | {r['rebuild_impr']:+.1f} |")
    if not ot.empty:
        L += ["", "## Orders on RAID-5 of 5 (md and pro at L limits; dor and pro-dor unthrottled, low priority)", "",
              "| trace | order | resp. during (ms) | rebuild (s) | KiB/s | lost-unit reads from the spare |",
              "|---|---|---:|---:|---:|---:|"]
        for _, r in ot.iterrows():
            L.append(f"| {r['trace']} | {r['order']} | {r['resp_during_ms']:.1f} | {r['rebuild_s']:.1f} | "
                     f"{r['avg_kbps']:.0f} | {r['share_from_spare']:.2f} |")
    if not sw.empty:
        L += ["", "## PRO's own parameters (RAID-5 of 5, one at a time; * = default)", "",
              "| trace | parameter | value | response impr. % | rebuild impr. % | lost-unit reads from the spare |",
              "|---|---|---|---:|---:|---:|"]
        for _, r in sw.iterrows():
            L.append(f"| {r['trace']} | {r['param']} | {r['value']}{' *' if r['default'] else ''} | "
                     f"{r['resp_impr']:+.1f} | {r['rebuild_impr']:+.2f} | {r['share_from_spare']:.2f} |")
    L += ["", "The paper reports:"] + [f"- {c}" for c in PAPER_CLAIMS]
    L += ["", "Misprints in the paper's tables (its own PR and PRO columns recomputed):"]
    L += [f"- {m}" for m in misprints()]
    L += ["", "Our numbers:"] + [f"- {v}" for v in verdict_lines]
    return "\n".join(L) + "\n"
