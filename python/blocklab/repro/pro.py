"""Reproduce PRO on Linux MD (Tian, Jiang, Feng, Xin, Shu): Tables 3 and 4, Fig. 2's U mode,
Fig. 3's 16 KB chunks, PRO's own parameters (not given by any source we have), and DOR; and
the verdict, claim by claim.

Setting, as in the paper's §3.1-3.2 where it says, chosen where it does not (docs/repro-pro.md):
Seagate ST3300831AS model (`examples/disks/sata-7200.toml`), 64 KiB chunks, disk 0 failed
and its spare arriving at t = 0, MD's limits 10,000 / 30,000 KiB/s ("L") or 100,000 /
100,000 ("U", Fig. 2), the idle test of the paper's kernel (2.6.11, `md2611`). Traces: the
shipped WebSearch-like sample and an MSR Cambridge OLTP cut standing in for Financial.

Layout (`LAYOUTS`): the trace's volumes laid end to end (`concat`, the default: RAIDmeter
replayed one trace onto one MD device, so SPC's volumes had to sit side by side to stay
distinct data) or folded onto one address space (`fold`: every volume's block b is the same
array block), that space mapped linearly onto the array (`array.fit = "scale"`).

Load (`load`): the paper's PR response is the same on all six arrays (226-258 ms) and MD held
WebSearch at its floor on every one (Table 4), so the arrays were equally busy per member.
`per-member` keeps that: the speed-up grows with the disks (s x N / 3) and the members shrink
(m x 3 / N, so the rebuild keeps its share of the trace); s is calibrated once per trace on
RAID-5 of 3 against the paper's PR rebuild speed there. `fixed` is one speed-up and member
size for every array.

The runs are a sweep (`blocklab.sweeps`: the stack `stacks/pro.toml`, timed, every trace x
its runs as cases; results.parquet with provenance, report.html); this module lays out the
cells, shapes the results, and sets them beside the paper's numbers.
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


LAYOUTS = {"concat": "concat", "fold": "ignore"}  # the recipe's name -> `tenant_map`
LOADS = ("per-member", "fixed")
CHUNKS = ("64KiB", "16KiB")  # Fig. 3; the first is every other run's


@dataclass
class TraceSpec:
    """A trace of the recipe. `speedup` and `disk_size` are its replay speed-up and member size
    on RAID-5 of 3 (the calibration); `load` says how they move with the array (`load_for`);
    `volumes`: the trace has several volumes, so the two layouts differ."""

    key: str
    label: str
    path: str
    format: str
    speedup: float
    disk_size: int
    note: str = ""
    load: str = "per-member"
    volumes: bool = False


def traces(root: Path | None = None, load: str = "per-member") -> list[TraceSpec]:
    """The WebSearch-like sample, and the Financial stand-in when ../shared is present.
    Speed-ups calibrated on RAID-5 of 3 with md so that the rebuild runs at the paper's PR
    speed there (Table 4: 5 GB in 488.23 s, 10.0 MB/s, held at the floor; 247.73 s, 19.7 MB/s).
    With `load = "fixed"` the former calibration (md's response on RAID-5 of 3 against PR's)."""
    root = root or repo_root()
    ws_s = 0.45 if load == "per-member" else 0.65
    out = [TraceSpec("ws", "WebSearch (wsrch-small)", str(root / "data" / "wsrch-small.trace"), "mqsim", ws_s,
                     600_000_000, f"412.7 IOPS x {ws_s} = {412.7 * ws_s:.0f} IOPS on RAID-5 of 3 (paper 323.75); "
                                  "100 % reads; 6 volumes", load, True)]
    shared = shared_dir("traces", root)
    if shared is not None:
        fin = shared / "msr_cambridge" / "msr.cut.per_10k.rw_40_60.1370.trace"
        if fin.exists():
            out.append(TraceSpec("fin", "Financial stand-in (MSR 1370)", str(fin), "msr-cut", 0.3, 1_000_000_000,
                                 "116.4 IOPS x 0.3 = 35 IOPS on RAID-5 of 3 (paper 64.06); 40.5 % reads "
                                 "(paper 35.91 %); one volume", load))
    return out


PAPERS = {"ws": ("WebSearch (SPC WebSearch1)", 323.75), "fin": ("Financial (SPC Financial1)", 64.06)}


def papers_trace(arg: str) -> TraceSpec:
    """`KEY=PATH[:FORMAT]` (`--trace`): the paper's own trace for KEY (ws, fin), replayed as the
    paper did: its own rate (speed-up 1) on 5 GB members on every array (`load = "fixed"`)."""
    key, sep, rest = arg.partition("=")
    if not sep or key not in PAPERS:
        raise ValueError(f"`{arg}`: expected KEY=PATH[:FORMAT] with KEY one of {', '.join(PAPERS)}")
    path, _, fmt = rest.partition(":")
    if not Path(path).is_file():
        raise ValueError(f"`{path}`: no such file")
    label, iops = PAPERS[key]
    return TraceSpec(key, label, str(Path(path).resolve()), fmt or "spc", 1.0, 5_000_000_000,
                     f"the paper's own trace at its own rate (paper: {iops} IOPS)", "fixed", True)


def load_for(spec: TraceSpec, disks: int) -> tuple[float, int]:
    """The replay speed-up and member size (bytes) of `spec` on an array of `disks` (the spare
    not counted). `per-member`: with one member lost, each survivor of a RAID-5 of N serves
    2/N of the user reads (its own and its share of the reconstructions), and so does the lost
    member's mirror in a RAID-10 of N; holding that equal to RAID-5 of 3's means a speed-up of
    s x N / 3. The trace then lasts 3 / N as long, and the members shrink by as much so that
    the rebuild at a given speed keeps its share of the trace (rounded to the MB)."""
    if spec.load == "fixed":
        return spec.speedup, spec.disk_size
    if spec.load != "per-member":
        raise ValueError(f"load `{spec.load}`: expected one of {', '.join(LOADS)}")
    return round(spec.speedup * disks / 3, 4), round(spec.disk_size * 3 / disks / 1e6) * 1_000_000


STACK = Path(__file__).resolve().parent / "stacks" / "pro.toml"


@dataclass
class Cell:
    """One run of the reproduction (on every trace): the array, the rebuild order, MD's
    limits (`mode` L or U) and idle test, the volumes' layout, the chunk, and one of PRO's
    parameters moved off its default."""

    level: str
    disks: int
    order: str
    mode: str = "L"
    idle: str = "md2611"
    param: str = ""
    value: str = ""
    layout: str = "concat"
    chunk: str = CHUNKS[0]
    default_layout: str = "concat"

    @property
    def name(self) -> str:
        """The case's name in the sweep (e.g. `raid5x3 pro L`, `raid5x5 pro L pro.zone=1MiB`,
        `raid5x3 md L layout=fold`, `raid5x3 md L chunk=16KiB`)."""
        text = f"{self.level}x{self.disks} {self.order} {self.mode}"
        if self.idle != "md2611":
            text += f" idle={self.idle}"
        if self.layout != self.default_layout:
            text += f" layout={self.layout}"
        if self.chunk != CHUNKS[0]:
            text += f" chunk={self.chunk}"
        return text + (f" {self.param}={self.value}" if self.param else "")

    def case(self, spec: TraceSpec | None = None) -> dict:
        """The cell as a case of the sweep: its name and its stack keys (with `spec`: for that
        trace only, with its speed-up and member size on this array)."""
        lo, hi = LIMITS[self.mode]
        keys = {"name": self.name, "array.raid": self.level, "array.disks": self.disks,
                "array.rebuild.order": self.order, "array.rebuild.min": lo, "array.rebuild.max": hi,
                "array.rebuild.idle": self.idle, "tenant_map": LAYOUTS[self.layout]}
        if self.chunk != CHUNKS[0]:
            keys["array.chunk"] = self.chunk
        if self.param:
            keys[f"array.rebuild.{self.param}"] = int(self.value) if self.value.isdigit() else self.value
        if spec is not None:
            speedup, size = load_for(spec, self.disks)
            keys = {"name": self.name, "trace": spec.key, "replay.speedup": speedup, "array.disk_size": size,
                    **{k: v for k, v in keys.items() if k != "name"}}
        return keys


def cells(sweep: bool = True, orders: bool = True, idle: str = "md2611", layout: str = "concat",
          volumes: bool = True) -> list[Cell]:
    """The runs of one trace: Tables 3/4 (md and pro on every array), Fig. 2's U limits,
    Fig. 3's 16 KiB chunks, DOR and PRO-in-DOR on RAID-5 of 5, PRO's parameters one at a time,
    and (`volumes`: a trace with several volumes) Tables 3/4 with the other layout."""
    def cell(level, n, order, **kw):
        return Cell(level, n, order, idle=idle, layout=kw.pop("layout", layout), default_layout=layout, **kw)

    out = []
    for level, n in ARRAYS:
        for order in ("md", "pro"):
            out.append(cell(level, n, order))
    for order in ("md", "pro"):
        out.append(cell("raid5", 3, order, mode="U"))
    for order in ("md", "pro"):
        out.append(cell("raid5", 3, order, chunk=CHUNKS[1]))
    if orders:
        for order in ("dor", "pro-dor"):
            out.append(cell("raid5", 5, order))
    if sweep:
        for param, values in SWEEP:
            for v in values:
                if str(v) != str(PRO_DEFAULTS[param]):
                    out.append(cell("raid5", 5, "pro", param=param, value=str(v)))
    if volumes:
        other = next(k for k in LAYOUTS if k != layout)
        for level, n in ARRAYS:
            for order in ("md", "pro"):
                out.append(cell(level, n, order, layout=other))
    return out


def sweep_spec(specs: list[TraceSpec], sweep: bool = True, orders: bool = True, idle: str = "md2611",
               model: Path | None = None, layout: str = "concat"):
    """The reproduction as a sweep: the stack `stacks/pro.toml`, timed, every trace x its runs
    (`cells`; each a case for that trace alone, with the trace's speed-up and member size on
    that array)."""
    from blocklab.sweeps import Sweep, TraceRef

    traces = [TraceRef(t.path, t.format, t.key) for t in specs]
    grid = {"device.model": [str(Path(model).resolve())]} if model is not None else {}
    cases = [c.case(t) for t in specs for c in cells(sweep, orders, idle, layout, t.volumes)]
    return Sweep(stack=str(STACK), executor="timed", traces=traces, grid=grid, name="repro-pro", cases=cases,
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

    layout_of = {v: k for k, v in LAYOUTS.items()}
    return pd.DataFrame({
        "trace": ok["trace_label"], "level": ok["array.raid"], "disks": ok["array.disks"].astype(int),
        "layout": ok["tenant_map"].map(layout_of), "alt_layout": ok["case"].str.contains(" layout=", regex=False),
        "chunk": col("array.chunk", CHUNKS[0]),
        "speedup": ok["replay.speedup"], "disk_size": ok["array.disk_size"],
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
        command: str | None = None, layout: str = "concat"):
    """Every run, as a sweep into `out` (results.parquet with provenance, report.html with the
    tables beside the paper's; finished cells are kept on a re-run); returns the runs as a
    pandas DataFrame, one row per run (`rows`)."""
    from blocklab.sweeps import run_recipe

    sw = sweep_spec(specs, sweep=sweep, orders=orders, idle=idle, model=model, layout=layout)
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
    from blocklab.repro import verdicts

    try:
        t3, um, ot, sw = tables(runs), u_mode(runs), orders_table(runs), sweep_table(runs)
        lay, f3 = layouts_table(runs), fig3_table(runs)
        rows_ = claims(t3, um, ot, sw, f3)
        md = markdown(specs, t3, um, ot, sw, verdict(t3, um, sw), lay, f3)
    except (IndexError, KeyError, ValueError) as e:  # some cells failed: the tables need pairs
        return [Section("PRO against MD", f"<p>tables not drawn: {html.escape(str(e))}</p>")]
    return [Section("The paper against our numbers, claim by claim", verdicts.html(rows_)),
            Section("Tables 3 and 4, layouts, Fig. 2 and 3, orders and PRO's parameters beside the paper",
                    f"<pre>{html.escape(md)}</pre>")]


def improvement(base: float, new: float) -> float:
    """(base - new) / base in percent (the papers' "improved")."""
    return 100.0 * (base - new) / base if base else float("nan")


def tables(df):
    """Tables 3 and 4 side by side with the paper: one row per (trace, level, disks)."""
    import pandas as pd

    main = _main(df)[lambda d: (d["mode"] == "L") & (d["param"] == "") & d["order"].isin(["md", "pro"])]
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
            "speedup": md.get("speedup"), "disk_size": md.get("disk_size"),
        })
    return pd.DataFrame(rows)


def _main(df):
    """The runs in the recipe's own layout (not the other one's, shown beside) and 64 KiB chunks."""
    keep = _all(df)
    if "alt_layout" in df.columns:
        keep &= ~df["alt_layout"]
    if "chunk" in df.columns:
        keep &= df["chunk"] == CHUNKS[0]
    return df[keep]


def _all(df):
    import pandas as pd

    return pd.Series(True, index=df.index)


def _md_against_pro(h) -> dict:
    """Response during the rebuild and rebuild time of md and pro in `h` (one run of each), with
    pro's improvement on both: the columns Fig. 2 and Fig. 3 share."""
    md = h[h["order"] == "md"].iloc[0]
    pro = h[h["order"] == "pro"].iloc[0]
    return {"md_resp_ms": md["resp_during_ms"], "pro_resp_ms": pro["resp_during_ms"],
            "resp_impr": improvement(md["resp_during_ms"], pro["resp_during_ms"]),
            "md_rebuild_s": md["rebuild_s"], "pro_rebuild_s": pro["rebuild_s"],
            "rebuild_impr": improvement(md["rebuild_s"], pro["rebuild_s"])}


def u_mode(df):
    """Fig. 2: RAID-5 of 3, L against U limits, md and pro."""
    import pandas as pd

    df = _main(df)
    g = df[(df["level"] == "raid5") & (df["disks"] == 3) & (df["param"] == "") & df["order"].isin(["md", "pro"])]
    rows = []
    for (trace, mode), h in g.groupby(["trace", "mode"], sort=False):
        rows.append({"trace": trace, "mode": mode, **_md_against_pro(h)})
    return pd.DataFrame(rows)


def orders_table(df):
    """md, pro, dor, pro-dor on RAID-5 of 5 (L limits for md and pro; DOR unthrottled, low priority)."""
    import pandas as pd

    df = _main(df)
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

    df = _main(df)
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


def layouts_table(df):
    """Table 3 (RAID-5 and RAID-10, md and pro) in both layouts, for the traces run in both:
    one row per (trace, array, layout), the recipe's layout first."""
    import pandas as pd

    g = df[(df["mode"] == "L") & (df["param"] == "") & (df["chunk"] == CHUNKS[0]) & df["order"].isin(["md", "pro"])]
    both = [t for t, h in g.groupby("trace", sort=False) if h["alt_layout"].any()]
    rows = []
    for trace in both:
        h = g[g["trace"] == trace]
        for alt in (False, True):
            for (level, n), a in h[h["alt_layout"] == alt].groupby(["level", "disks"], sort=False):
                md = a[a["order"] == "md"].iloc[0]
                pro = a[a["order"] == "pro"].iloc[0]
                rows.append({"trace": trace, "layout": md["layout"], "level": level, "disks": n,
                             "md_resp_ms": md["resp_during_ms"], "pro_resp_ms": pro["resp_during_ms"],
                             "resp_impr": improvement(md["resp_during_ms"], pro["resp_during_ms"]),
                             "md_kbps": md["avg_kbps"], "md_share_spare": md["share_from_spare"],
                             "pro_share_spare": pro["share_from_spare"],
                             "rebuild_impr": improvement(md["rebuild_s"], pro["rebuild_s"]),
                             "paper_resp_impr": improvement(*PAPER_T3[(level, n)][trace][:2])})
    return pd.DataFrame(rows)


def fig3_table(df):
    """Fig. 3: RAID-5 of 3 with 16 KiB and 64 KiB chunks, md and pro (L limits)."""
    import pandas as pd

    g = df[(df["level"] == "raid5") & (df["disks"] == 3) & (df["mode"] == "L") & (df["param"] == "")
           & ~df["alt_layout"] & df["order"].isin(["md", "pro"])]
    rows = []
    for trace in dict.fromkeys(g["trace"]):
        for chunk in CHUNKS[::-1]:  # 16 KiB first, as the paper's figure
            h = g[(g["trace"] == trace) & (g["chunk"] == chunk)]
            if h.empty:
                continue
            rows.append({"trace": trace, "chunk": chunk, **_md_against_pro(h)})
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


# With the paper's traces (SPC's first 200,000 requests), one command gives the paper's own rows:
# its rate (speed-up 1) and 5 GB members on every array.
WITH_PAPERS_TRACES = ("head -n 200000 WebSearch1.spc > ws.spc; head -n 200000 Financial1.spc > fin.spc; "
                      "blocklab repro pro --trace ws=ws.spc:spc --trace fin=fin.spc:spc")
WHY_DATA = {
    "ws": "a WebSearch-like sample (60 s, 6 volumes), not SPC WebSearch1: run with `--trace ws=...` (below)",
    "fin": "an MSR Cambridge OLTP cut (60 % writes, 86 s) stands in for SPC Financial1: run with `--trace fin=...` "
           "(below)",
}
WHY_BOTH = "neither of the paper's traces is shared: run with `--trace` (below)"
WHY_LEVEL = ("our disks alone cannot give it: above ~20-50 ms on RAID-5 of 3 the survivors saturate and md falls "
             "below its 10 MB/s floor, while the paper's md held its floor at 226-258 ms; no one load rule gives it "
             "on every array either (per member x 0.7: 427 / 188 / 115 / 84 ms on RAID-5 of 3 / 5 / 7 / 9, md at "
             "6.5-6.7 MB/s: an overload whose mean grows with its length, docs/repro-pro.md); the rest of the "
             "paper's time is spent outside the disks (replay tool, elevator, host: not stated)")


def judge_band(lo: float, hi: float, values, slack: float = 0.0) -> str:
    """Values against the paper's range [lo, hi] (widened by `slack` either side): `matched` if
    all fall in it; `trend` if some do, or if none does but some are on the range's side of
    zero (a range not across zero); else `contradicted`; `missing` with no value."""
    vals = [v for v in values if v == v]
    if not vals:
        return "missing"
    inside = [lo - slack <= v <= hi + slack for v in vals]
    if all(inside):
        return "matched"
    same_side = (lo > 0 and any(v > 0 for v in vals)) or (hi < 0 and any(v < 0 for v in vals))
    return "trend" if any(inside) or same_side else "contradicted"


def _span(values, fmt="{:+.1f}") -> str:
    vals = list(values)
    return " / ".join(fmt.format(v) for v in vals)


def claims(t3, um, ot, sw, f3) -> list:
    """The verdict table (`blocklab.repro.verdicts`): one `Claim` per claim of the paper."""
    from blocklab.repro.verdicts import Claim, judge, judge_share

    out = []
    r5 = t3[t3["level"] == "raid5"]
    for trace, name in (("ws", "WebSearch"), ("fin", "Financial")):
        g = r5[r5["trace"] == trace]
        if g.empty:
            continue
        why = WHY_DATA[trace]
        for _, r in g.iterrows():
            paper = r["paper_resp_impr_recomputed"]
            printed = "" if abs(paper - r["paper_resp_impr"]) <= 0.05 else f" (printed {r['paper_resp_impr']:.2f} %)"
            out.append(Claim(f"Table 3, {name}, RAID-5 of {r['disks']}: PRO lowers the response during recovery",
                             f"{paper:.2f} %{printed}", f"{r['resp_impr']:+.1f} %", judge(paper, r["resp_impr"]),
                             "data", why))
        if trace == "ws":
            gains = list(g.sort_values("disks")["resp_impr"])
            down = sum(b < a for a, b in zip(gains, gains[1:])) / max(1, len(gains) - 1)
            out.append(Claim("Table 3, WebSearch: the gain shrinks as disks are added (3 to 9)",
                             "18.74 / 16.72 / 10.78 / 8.26 %", _span(gains) + " %", judge_share(down), "data", why))
            out.append(Claim("Table 4, WebSearch, RAID-5: rebuild time unchanged (MD at its floor)",
                             "-0.44 .. +0.14 %", _span(g["rebuild_impr"]) + " %",
                             judge_band(-0.44, 0.14, g["rebuild_impr"], slack=1.0), "data", why))
            out.append(Claim("Table 4, WebSearch: MD rebuilds at its 10 MB/s floor on every array",
                             "10-11 MB/s (483-489 s for 5 GB)",
                             f"{t3[t3['trace'] == 'ws']['md_kbps'].min():.0f} .. "
                             f"{t3[t3['trace'] == 'ws']['md_kbps'].max():.0f} KiB/s",
                             judge_band(10_000, 10_742, t3[t3["trace"] == "ws"]["md_kbps"], slack=300), "model",
                             "a survivor too busy to give MD its floor (our disks saturate sooner than the paper's)"))
            ws = t3[t3["trace"] == "ws"]
            lo, hi = ws["md_resp_ms"].min(), ws["md_resp_ms"].max()
            out.append(Claim("Table 3, WebSearch: PR's response about the same on all six arrays",
                             "225.67 .. 258.06 ms (x 1.14)", f"{lo:.1f} .. {hi:.1f} ms (x {hi / lo:.2f})",
                             "matched" if hi / lo <= 1.5 else "trend", "model", WHY_LEVEL))
            out.append(Claim("Table 3, WebSearch: PR's response level during recovery", "225.67 .. 258.06 ms",
                             f"{lo:.1f} .. {hi:.1f} ms", judge(240.0, (lo + hi) / 2), "model", WHY_LEVEL))
        else:
            out.append(Claim("Table 4, Financial, RAID-5: PRO shortens the rebuild by up to 22.13 %",
                             "4.50 / 22.13 / 20.33 / 9.86 %", _span(g["rebuild_impr"]) + " %",
                             judge(22.13, g["rebuild_impr"].max()), "data", why))
            out.append(Claim("Table 4, Financial, RAID-5: MD runs between its limits (15.8-20.2 MB/s)",
                             "15,400 .. 19,700 KiB/s", f"{g['md_kbps'].min():.0f} .. {g['md_kbps'].max():.0f} KiB/s",
                             judge_band(15_400, 19_700, g["md_kbps"], slack=1_000), "data", why))
    r10 = t3[t3["level"] == "raid10"]
    for trace, g in r10.groupby("trace", sort=False):
        vals = list(g["resp_impr"]) + list(g["rebuild_impr"])
        out.append(Claim(f"RAID-10 ({trace}, 4 and 6 disks): little change in response or rebuild time",
                         "-5.03 .. +13.99 %", _span(vals) + " % (response, then rebuild)",
                         judge_band(-5.03, 13.99, vals, slack=2.0), "data", WHY_DATA.get(trace, WHY_BOTH)))
    if not um.empty:
        u = um[um["mode"] == "U"]
        out.append(Claim("Fig. 2 (RAID-5 of 3, limits 100 MB/s): PRO lowers the response by 27.65-47.17 %",
                         "27.65 .. 47.17 %", _span(u["resp_impr"]) + " % (" + ", ".join(u["trace"]) + ")",
                         judge_band(27.65, 47.17, u["resp_impr"], slack=3.0), "data", WHY_DATA["ws"]))
        out.append(Claim("Fig. 2: PRO shortens the rebuild by up to 4.44 %", "4.44 %",
                         _span(u["rebuild_impr"]) + " %", judge(4.44, u["rebuild_impr"].max(), tolerance=0.5),
                         "data", WHY_DATA["ws"]))
    for trace, g in (f3.groupby("trace", sort=False) if not f3.empty else ()):
        wins = (g["resp_impr"] > 0).mean()
        out.append(Claim(f"Fig. 3 ({trace}, RAID-5 of 3): PRO beats PR in response with 16 KB and 64 KB chunks",
                         "at every chunk size", ", ".join(f"{r['chunk']} {r['resp_impr']:+.1f} %"
                                                          for _, r in g.iterrows()),
                         "matched" if wins == 1 else "trend" if wins > 0 else "contradicted", "data",
                         WHY_DATA.get(trace, WHY_BOTH)))
    dor = ot[ot["trace"] == "ws"] if not ot.empty else ot
    if not dor.empty and {"dor", "pro-dor"} <= set(dor["order"]):
        d = dor[dor["order"] == "dor"].iloc[0]
        p = dor[dor["order"] == "pro-dor"].iloc[0]
        resp, rb = improvement(d["resp_during_ms"], p["resp_during_ms"]), improvement(d["rebuild_s"], p["rebuild_s"])
        out.append(Claim("FAST'07: PRO in DOR lowers the response by 3.6-23.9 % (web traces)", "3.6 .. 23.9 %",
                         f"{resp:+.1f} % (ws, RAID-5 of 5)", judge_band(3.6, 23.9, [resp]), "data", WHY_DATA["ws"]))
        out.append(Claim("FAST'07: PRO in DOR shortens the rebuild by up to 44.7 %", "44.7 %",
                         f"{rb:+.1f} % (ws, RAID-5 of 5)", judge(44.7, rb), "data",
                         "FAST'07's RAIDframe arrays and traces are not described in the paper we have"))
    if not sw.empty:
        for trace, g in sw.groupby("trace", sort=False):
            gain = bool((g["resp_impr"] > 0).all())
            loss = bool((g["resp_impr"] < 0).all())
            out.append(Claim(f"PRO's gain does not hinge on its own parameters ({trace}, RAID-5 of 5)",
                             "zones, threads, slice: in FAST'07 (not available)",
                             f"{g['resp_impr'].min():+.1f} .. {g['resp_impr'].max():+.1f} %, "
                             + ("a gain for every value" if gain else "a loss for every value" if loss
                                else "the sign changes"),
                             "matched" if gain else "contradicted" if loss else "trend", "data" if loss else "paper",
                             WHY_DATA.get(trace, WHY_BOTH) if loss else
                             "FAST'07's parameters (zone, threads, slice, aging) are lost to us: ours are choices"))
    for (level, n), by in PAPER_T4.items():
        for trace, (pr, pro, printed) in by.items():
            row = t3[(t3["trace"] == trace) & (t3["level"] == level) & (t3["disks"] == n)]
            if row.empty or abs(improvement(pr, pro) - printed) <= 0.05:
                continue
            ours = row.iloc[0]["rebuild_impr"]
            out.append(Claim(f"Table 4, {trace} {level} of {n}: rebuild {printed:.2f} % better, as printed",
                             f"{printed:.2f} %", f"{ours:+.2f} %", judge(printed, ours), "paper",
                             f"a misprint: the paper's own columns give {improvement(pr, pro):.2f} %"))
    return out


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
    main = _main(df)
    main = main[(main["mode"] == "L") & (main["param"] == "")]
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


def _md_against_pro_cells(r) -> str:
    """The last six cells of a Fig. 2 or Fig. 3 row (`_md_against_pro`'s columns)."""
    return (f"{r['md_resp_ms']:.1f} | {r['pro_resp_ms']:.1f} | {r['resp_impr']:+.1f} | "
            f"{r['md_rebuild_s']:.1f} | {r['pro_rebuild_s']:.1f} | {r['rebuild_impr']:+.1f} |")


def markdown(specs, t3, um, ot, sw, verdict_lines, lay=None, f3=None, claim_rows=None) -> str:
    """Everything as Markdown (written next to the Parquet file and the plots)."""
    L = ["## Traces", ""]
    for t in specs:
        L.append(f"- {t.key}: {t.label}, `{Path(t.path).name}` ({t.format}), speed-up {t.speedup}, members "
                 f"{t.disk_size / 1e9:g} GB on RAID-5 of 3, load `{t.load}`; {t.note}")
    if not t3.empty and "speedup" in t3.columns:
        L += ["", "Speed-up and members per array (`per-member`: s x N / 3 and m x 3 / N, every survivor as busy "
                  "as on RAID-5 of 3):", ""]
        for trace, g in t3.groupby("trace", sort=False):
            L.append(f"- {trace}: " + ", ".join(f"{r['level']} of {r['disks']} x {r['speedup']:g} / "
                                                 f"{r['disk_size'] / 1e6:.0f} MB" for _, r in g.iterrows()))
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
    if lay is not None and not lay.empty:
        L += ["", "## Layouts: the volumes end to end (concat) or folded onto one space (fold), Table 3's runs", "",
              "| trace | layout | array | md ms | pro ms | impr. % | md KiB/s | lost-unit reads from the spare md / pro "
              "| rebuild impr. % | paper impr. % |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for _, r in lay.iterrows():
            L.append(f"| {r['trace']} | {r['layout']} | {r['level']} of {r['disks']} | {r['md_resp_ms']:.1f} | "
                     f"{r['pro_resp_ms']:.1f} | {r['resp_impr']:+.1f} | {r['md_kbps']:.0f} | "
                     f"{r['md_share_spare']:.2f} / {r['pro_share_spare']:.2f} | {r['rebuild_impr']:+.2f} | "
                     f"{r['paper_resp_impr']:.2f} |")
    L += ["", "## Fig. 2 analogue: RAID-5 of 3, limits L (10/30 MB/s) and U (100/100 MB/s)", "",
          "| trace | limits | md resp. | pro resp. | impr. % | md rebuild s | pro rebuild s | impr. % |",
          "|---|---|---:|---:|---:|---:|---:|---:|"]
    for _, r in um.iterrows():
        L.append(f"| {r['trace']} | {r['mode']} | {_md_against_pro_cells(r)}")
    if f3 is not None and not f3.empty:
        L += ["", "## Fig. 3 analogue: RAID-5 of 3, 16 KiB and 64 KiB chunks (limits L)", "",
              "| trace | chunk | md resp. | pro resp. | impr. % | md rebuild s | pro rebuild s | impr. % |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
        for _, r in f3.iterrows():
            L.append(f"| {r['trace']} | {r['chunk']} | {_md_against_pro_cells(r)}")
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
    if claim_rows:
        from blocklab.repro.verdicts import markdown as verdict_table

        L += ["", "## Verdict, claim by claim", "", verdict_table(claim_rows).rstrip("\n"), "",
              f"With the paper's own traces: `{WITH_PAPERS_TRACES}`"]
    return "\n".join(L) + "\n"
