"""Reproduce ECI-Cache (Ahmadian, Mutlu, Asadi, SIGMETRICS 2018) against Centaur (Koller et al., ICAC 2015).

Setting as in the paper (§6.1-6.3): an SSD cache shared by the tenants (the
paper's VMs) of one trace, in front of a RAID-5 of four 10K-RPM disks
(Ultrastar 73LZX models), 8 KiB blocks, partitions re-sized every 10
minutes. Centaur sizes each tenant's partition from traditional reuse
distance and writes back; ECI-Cache sizes from useful reuse distance and
picks write-back or read-only per tenant every window (θ = 0.5: its value is
lost from the paper's text). Beside them, what production SSD caches ship:
one global LRU written back (EnhanceIO / flashcache / dm-cache), bcache's
write-back with its 4 MiB sequential cutoff, Open CAS's write-through with
NHIT promotion and a 1 MiB cutoff, dm-writecache's write-only cache with its
watermarks, EnhanceIO's read-only cache, and equal static shares.

The tenants come from the traces at hand (the shipped sample, the shared MSR,
Tencent, CloudPhysics and SYSTOR traces), each time line rescaled onto one
hour and merged (`blocklab trace merge`), or from the paper's sixteen MSR
Cambridge volumes when the user points at them (times as recorded).

The engine does the work: every run is `blocklab run` of the stack file this
module writes (`eci-stack.toml`) with `--set` overrides, counted (the paper's
latency model, Eq. 2) and, for a few schemes, in simulated time: a sweep over
the merged trace (`blocklab.sweeps`: each run a named case; results.parquet
with provenance, report.html). The reuse analysis (TRD / URD per tenant) is not
a cell: it is one pass over the mix whatever the scheme or size. This module
builds the mix, picks the runs, shapes the results and sets the paper's
numbers beside ours.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from blocklab.repro.shared import repo_root, set_keys, shared_dir

BLOCK_SIZE = 8192
WINDOW_S = 600.0
SPAN_S = 3600.0
# c_min: lost from the paper's text; the research note's prototype used 100.
INITIAL_BLOCKS = 100
THETA = 0.5
SIZES = ("unlimited", "40000", "10000", "5000")
TIMED_SIZE = "10000"

# The paper's sixteen VMs (Table 2), one MSR Cambridge volume each.
PAPER_VOLUMES = ("wdev_0", "web_1", "stg_1", "ts_0", "hm_1", "mds_0", "proj_0", "prxy_0", "rsrch_0", "src1_2",
                 "prn_1", "src2_0", "web_0", "usr_0", "rsrch_2", "mds_1")
PAPER_SIZE = "3000000"

# Each scheme: overrides of the stack file's [tier], and what it stands for.
SCHEMES = {
    "centaur": (["tier.partitioner=centaur", "tier.write_policy=wb"],
                "Centaur: partitions from traditional reuse distance, write-back"),
    "eci": (["tier.partitioner=eci", "tier.write_policy=adaptive"],
            "ECI-Cache: partitions from useful reuse distance, write-back or read-only per window"),
    "eci-wb": (["tier.partitioner=eci", "tier.write_policy=wb"],
               "ECI-Cache's sizing alone (write-back for all)"),
    "static-wb": (["tier.partitioner=static", "tier.write_policy=wb"], "equal static shares, write-back"),
    "global-wb": (["tier.partitioner=global", "tier.write_policy=wb"],
                  "one shared LRU, write-back (EnhanceIO, flashcache, dm-cache)"),
    "global-ro": (["tier.partitioner=global", "tier.write_policy=ro"], "one shared LRU, read-only (EnhanceIO)"),
    "bcache": (["tier.partitioner=global", "tier.write_policy=wb", "tier.sequential_cutoff=4MiB"],
               "bcache write-back: 4 MiB sequential cutoff"),
    "opencas": (["tier.partitioner=global", "tier.write_policy=wt", "tier.promote_after=3",
                 "tier.promote_trigger=0.8", "tier.sequential_cutoff=1MiB"],
                "Open CAS defaults: write-through, NHIT promotion (3 hits above 80 %), 1 MiB cutoff"),
    "writecache": (["tier.partitioner=global", "tier.write_policy=wo", "tier.clean_high=0.5", "tier.clean_low=0.45"],
                   "dm-writecache: write-only, cleaning between 50 % and 45 % dirty"),
}
TIMED_SCHEMES = ("centaur", "eci-wb", "eci", "global-wb")
MSR_SCHEMES = ("centaur", "eci-wb", "eci", "global-wb")

# What the paper reports (numbers that survive in its text; figures are lost).
PAPER = {
    "latency_gain": 17.08,  # % lower latency than Centaur, infeasible state (§6.3, Fig. 14/15)
    "ppc_gain": 30.0,  # % performance-per-cost over Centaur (§6.3, §6.5)
    "ssd_write_reduction": 65.0,  # % fewer SSD writes, average over VMs (§6.6, Fig. 16)
    "ro_write_reduction": 44.0,  # % fewer writes with RO than WB (§6.6)
    "ro_hit_loss": 1.5,  # % hit-ratio loss on RAW with RO (§6.6)
    "feasible_alloc_reduction": 29.45,  # % less space than Centaur, unlimited SSD (App. A, Fig. 17/18)
}
# Per VM (§6.6): change of SSD writes and of cache space, ECI vs Centaur, in %.
PAPER_PER_VM = {
    "hm_1": {"writes": 0.0, "cache": -50.0}, "stg_1": {"writes": 0.0}, "mds_1": {"writes": 0.0},
    "prn_1": {"writes": 0.0}, "mds_0": {"writes": -80.0, "cache": -25.0}, "ts_0": {"writes": -90.0, "cache": -18.0},
    "proj_0": {"writes": -46.0, "cache": -22.0}, "prxy_0": {"writes": -90.0}, "wdev_0": {"writes": -85.0},
    "rsrch_0": {"writes": -87.0}, "src2_0": {"writes": -85.0}, "src1_2": {"writes": -88.0},
}


@dataclass
class Input:
    path: str
    format: str
    label: str


MIXES = ("all", "note")


def default_inputs(root: Path | None = None, mix: str = "all") -> list[Input]:
    """The traces at hand: `all` = the shipped sample plus the shared traces when present; `note` = the
    eleven single-volume shared traces of the research note's mix (E8: the hm_0 sample, three MSR and five
    Tencent cuts, two SYSTOR samples), to set our numbers beside its prototype's."""
    root = root or repo_root()
    out = []
    sample = root / "data" / "wsrch-small.trace"
    if sample.exists() and mix == "all":
        out.append(Input(str(sample), "mqsim", "wsrch-small"))
    shared = shared_dir("traces", root)
    if shared is None:
        return out
    msr = shared / "msr_cambridge"
    if (msr / "msr-cambridge1-sample.csv").exists():
        out.append(Input(str(msr / "msr-cambridge1-sample.csv"), "msr", "msr hm_0 (sample)"))
    for p in sorted(msr.glob("msr.cut.per_10k.*.trace")):
        out.append(Input(str(p), "msr-cut", "msr " + p.name.split(".")[-3]))
    for p in sorted((shared / "tencent_cbs").glob("tencent.cut.per_50k.*.trace")):
        out.append(Input(str(p), "tencent-cut", "tencent " + p.name.split(".")[-3]))
    for p in sorted((shared / "systor17").glob("systor17-*.csv.gz")):
        out.append(Input(str(p), "systor", "systor " + p.name.split("-")[1].split(".")[0]))
    cp = shared / "cloudphysics" / "cloudPhysicsIO.csv"
    if cp.exists() and mix == "all":
        out.append(Input(str(cp), "cloudphysics", "cloudphysics"))
    return out


def parse_input(text: str) -> Input:
    """`PATH` or `PATH:FORMAT` (format `auto` when absent)."""
    if ":" in text and not os.path.exists(text):
        path, fmt = text.rsplit(":", 1)
    else:
        path, fmt = text, "auto"
    return Input(path, fmt, Path(path).name)


def msr_inputs(folder: Path) -> list[Input]:
    """The paper's sixteen volumes in `folder` (`wdev_0.csv`, `.csv.gz`, ...); a missing one is an error."""
    out, missing = [], []
    for v in PAPER_VOLUMES:
        found = sorted(p for p in folder.glob(f"{v}.csv*") if p.is_file())
        if not found:
            found = sorted(p for p in folder.glob(f"*{v}.csv*") if p.is_file())
        if found:
            out.append(Input(str(found[0]), "msr", v))
        else:
            missing.append(v)
    if missing:
        raise FileNotFoundError(f"{folder}: no {', '.join(missing)} (expected files such as wdev_0.csv or wdev_0.csv.gz)")
    return out


def stack_text(root: Path | None = None, outstanding: int = 16) -> str:
    """The stack every run starts from (runs differ by `--set`)."""
    root = root or repo_root()
    disks = root / "examples" / "disks"
    return f"""\
# ECI-Cache's setting: an SSD tier over a RAID-5 of four 10K-RPM disks, 8 KiB blocks.
# Written by `blocklab repro eci`; each run overrides tier.size and the scheme with --set.
block_size = {BLOCK_SIZE}
tenant_map = "concat"

[replay]
mode = "closed"        # in time: the tenants keep {outstanding} requests in flight
outstanding = {outstanding}

[tier]
size = 10000
partitioner = "eci"
window_s = {WINDOW_S:g}
solver = "exact"
initial_blocks = {INITIAL_BLOCKS}
write_policy = "adaptive"
theta = {THETA}
model = "{disks / 'ssd.toml'}"
ssd_ms = 0.1
hdd_ms = 7.0

[array]
raid = 5
disks = 4
chunk = "64KiB"
wrap = true

[device]
model = "{disks / 'ultrastar-73lzx.toml'}"
"""


def build_mix(inputs: list[Input], dst: Path, span: float | None = SPAN_S):
    """Merge the inputs by time into one trace whose tenants are their volumes; a DataFrame
    (tenant, label, source, requests) of the tenants."""
    import pandas as pd

    import blocklab

    s = blocklab.merge_traces(dst, [f"{i.path}:{i.format}" for i in inputs], tenants="pair", span=span)
    per_input: dict[int, int] = {}
    for t in s["tenants"]:
        per_input[t["input"]] = per_input.get(t["input"], 0) + 1
    rows = []
    for t in s["tenants"]:
        i = inputs[t["input"]]
        label = i.label if per_input[t["input"]] == 1 else f"{i.label}/{t['input_tenant']}"
        rows.append({"tenant": t["tenant"], "label": label, "source": i.path})
    return pd.DataFrame(rows).sort_values("tenant").reset_index(drop=True), s


def reuse(mix: Path, labels):
    """Per tenant over the whole trace: accesses, classes, TRD and URD sizes (`blocklab trace reuse`)."""
    import blocklab

    df = blocklab.reuse(mix, format="csv", per_tenant=True, block_size=BLOCK_SIZE)
    return labels[["tenant", "label"]].merge(df, on="tenant", how="right")


def _tier_rows(run: str, size: str, scheme: str, r: dict, labels: dict[int, str]):
    t = r["tier"]
    reads = t["reads"]
    hit = t["read_hits"] / reads if reads else 0.0
    total = {
        "run": run, "size": size, "scheme": scheme, "executor": r["executor"],
        "ssd_blocks": t["size"], "read_hit_ratio": hit,
        "latency_ms": t["latency_ms"], "read_latency_ms": t["read_latency_ms"],
        "write_latency_ms": t["write_latency_ms"],
        # The paper's Eq. 2 per access: h T_SSD + (1 - h) T_HDD.
        "eq2_read_latency_ms": hit * 0.1 + (1 - hit) * 7.0,
        "ssd_writes": t["ssd_writes"], "array_writes": t["array_writes"], "destaged": t["destaged"],
        "bypassed": t["bypassed"], "mean_allocated_blocks": t["mean_allocated_blocks"],
        "windows": t["windows"], "infeasible_windows": t["infeasible_windows"],
        "performance_per_cost": t["performance_per_cost"],
    }
    resp = r.get("response")
    if resp:
        total.update({"response_ms": resp["avg_ms"], "read_response_ms": resp["reads"]["avg_ms"],
                      "write_response_ms": resp["writes"]["avg_ms"], "p99_ms": resp["p99_ms"],
                      "timed_performance_per_cost": t.get("timed_performance_per_cost"),
                      "array_utilization": sum(d.get("utilization") or 0 for d in r["devices"][:-1]) / max(1, len(r["devices"]) - 1),
                      "ssd_utilization": r["devices"][t["ssd_disk"]].get("utilization")})
    tenants = []
    for x in t["tenants"]:
        tenants.append({
            "run": run, "size": size, "scheme": scheme, "tenant": x["tenant"], "label": labels.get(x["tenant"], ""),
            "allocated_blocks": x["allocated_blocks"], "mean_allocated_blocks": x["mean_allocated_blocks"],
            "accesses": x["accesses"], "reads": x["reads"], "read_hits": x["read_hits"],
            "read_hit_ratio": x["read_hits"] / x["reads"] if x["reads"] else 0.0,
            "ssd_writes": x["ssd_writes"], "array_writes": x["array_writes"], "destaged": x["destaged"],
            "write_policy": x["write_policy"], "read_only_windows": x["read_only_windows"],
            "latency_ms": x["latency_ms"], "read_latency_ms": x["read_latency_ms"],
            "write_latency_ms": x["write_latency_ms"], "performance_per_cost": x["performance_per_cost"],
        })
    timeline = []
    for w in t["timeline"]:
        for x in w["tenants"]:
            timeline.append({
                "run": run, "size": size, "scheme": scheme, "window": w["window"], "end_s": w["end_s"],
                "feasible": w["feasible"], "tenant": x["tenant"], "label": labels.get(x["tenant"], ""),
                "allocated_blocks": x["allocated_blocks"], "held_blocks": x["held_blocks"], "want": x["want"],
                "write_policy": x["write_policy"], "accesses": x["accesses"], "reads": x["reads"],
                "read_hits": x["read_hits"], "ssd_writes": x["ssd_writes"], "latency_ms": x["latency_ms"],
            })
    return total, tenants, timeline


# Seconds the timed replay may move a request of the mix back: every input's time line is
# stretched onto --span (3600 s by default), so a step back can reach as far.
SORT_WINDOW_S = 1e6


def cases(sizes=SIZES, schemes=tuple(SCHEMES), timed_size: str | None = None, timed_schemes=()) -> list[dict]:
    """The runs as the sweep's cases: every (size, scheme) counted (`count:SCHEME@SIZE`), then
    `timed_schemes` at `timed_size` in simulated time (`timed:SCHEME@SIZE`)."""
    out = []
    for size in sizes:
        for scheme in schemes:
            out.append({"name": f"count:{scheme}@{size}", **set_keys([f"tier.size={size}", *SCHEMES[scheme][0]])})
    for scheme in timed_schemes:
        # In time the mix must be in time order: its inputs step back (Tencent by 1 s, SYSTOR
        # by 0.1 s, before the span stretches them), so the replay sorts it whole.
        out.append({"name": f"timed:{scheme}@{timed_size}", "executor": "timed",
                    **set_keys([f"tier.size={timed_size}", *SCHEMES[scheme][0], "replay.sort=true",
                                f"replay.sort_window={SORT_WINDOW_S}"])})
    return out


def sweep_spec(stack: Path, mix: Path, cases_: list[dict]):
    """The reproduction as a sweep: the stack written by the recipe, over the merged trace,
    counted (the timed cases say so)."""
    from blocklab.sweeps import Sweep, TraceRef

    metrics = ["tier.read_hits", "tier.latency_ms", "tier.ssd_writes", "tier.performance_per_cost"]
    if any(c.get("executor") == "timed" for c in cases_):
        metrics.append("response.avg_ms")
    return Sweep(stack=str(stack), executor="count", traces=[TraceRef(str(mix), "csv", "eci mix")], cases=cases_,
                 name="repro-eci", report={"metrics": metrics})


def run(stack: Path, mix: Path, labels, out: Path, sizes=SIZES, schemes=tuple(SCHEMES), timed_size: str | None = None,
        timed_schemes=(), jobs: int | None = None, ray: str | None = None, progress=True, command: str | None = None,
        sections=None):
    """Every (size, scheme) run counted and `timed_schemes` at `timed_size` in time, as a sweep
    into `out` (results.parquet with provenance, report.html; finished cells are kept on a
    re-run). Returns {"count": (totals, tenants, timeline), "timed": (...)} as DataFrames;
    `sections(runs)` adds the recipe's part to the report."""
    from blocklab.sweeps import run_recipe

    sw = sweep_spec(stack, mix, cases(sizes, schemes, timed_size, timed_schemes))
    df = run_recipe(sw, out, jobs=jobs, ray=ray, progress=progress, command=command,
                    title="ECI-Cache against Centaur (and global, static, the production caches' options)",
                    sections=(lambda df: sections(shape(df, labels, out))) if sections is not None else None)
    return shape(df, labels, out)


def shape(df, labels, out: Path) -> dict:
    """The sweep's cells as the recipe's tables, per executor: totals, per tenant, per window
    and tenant; the results are read from the sweep's journal (each cell's JSON result)."""
    import pandas as pd

    from blocklab.sweeps.results import Journal

    names = dict(zip(labels["tenant"], labels["label"]))
    records = Journal(Path(out)).records()
    got: dict[str, tuple[list, list, list]] = {"count": ([], [], []), "timed": ([], [], [])}
    for cell, case in zip(df["cell"], df["case"]):
        rec = records.get(cell)
        if rec is None or rec["status"] != "ok":
            continue
        executor, _, rest = case.partition(":")
        scheme, _, size = rest.rpartition("@")
        a, b, c = _tier_rows(case, size, scheme, rec["result"], names)
        totals, tenants, timeline = got[executor]
        totals.append(a)
        tenants += b
        timeline += c
    return {k: tuple(pd.DataFrame(x) for x in v) for k, v in got.items()}


def analysis(labels, reuse_df, runs: dict, sizes, timed: bool):
    """The comparison, the verdict lines and the Markdown report from the shaped runs."""
    totals, tenants, timeline = runs["count"]
    timed_df = runs["timed"][0] if timed else None
    cmp = comparison(totals, tenants)
    lines = verdict(cmp, tenant_effects(tenants), totals, timed_df)
    for s in sizes:
        lines += per_vm(tenants, timeline, s)
    return cmp, lines, markdown(labels, reuse_df, totals, cmp, lines, timed_df)


def report_sections(labels, reuse_df, runs: dict, sizes, timed: bool):
    """The recipe's part of the HTML report: its tables and the paper beside us."""
    import html

    from blocklab.sweeps import Section

    try:
        md = analysis(labels, reuse_df, runs, sizes, timed)[2]
    except (IndexError, KeyError, TypeError, ValueError) as e:  # cells missing: the tables need their pairs
        return [Section("ECI-Cache against Centaur", f"<p>tables not drawn: {html.escape(str(e))}</p>")]
    return [Section("ECI-Cache against Centaur, the paper beside us", f"<pre>{html.escape(md)}</pre>")]


def _pct(new, old):
    return 100.0 * (new / old - 1.0) if old else float("nan")


def comparison(totals, tenants) -> "object":
    """ECI against Centaur per SSD size: the paper's headline figures, ours beside them."""
    import pandas as pd

    rows = []
    for size, g in totals.groupby("size", sort=False):
        by = g.set_index("scheme")
        if not {"centaur", "eci"} <= set(by.index):
            continue
        c, e = by.loc["centaur"], by.loc["eci"]
        w = by.loc["eci-wb"] if "eci-wb" in by.index else None
        tc = tenants[(tenants["size"] == size) & (tenants["scheme"] == "centaur")].set_index("tenant")
        te = tenants[(tenants["size"] == size) & (tenants["scheme"] == "eci")].set_index("tenant")
        both = tc.join(te, lsuffix="_c", rsuffix="_e", how="inner")
        both = both[both["ssd_writes_c"] > 0]
        per_vm = (100.0 * (1 - both["ssd_writes_e"] / both["ssd_writes_c"])).mean() if len(both) else float("nan")
        rows.append({
            "size": size,
            "centaur_infeasible": int(c["infeasible_windows"]), "eci_infeasible": int(e["infeasible_windows"]),
            "windows": int(c["windows"]),
            "read_hit_centaur": c["read_hit_ratio"], "read_hit_eci": e["read_hit_ratio"],
            "latency_gain_pct": -_pct(e["latency_ms"], c["latency_ms"]),
            "read_latency_gain_pct": -_pct(e["read_latency_ms"], c["read_latency_ms"]),
            "eq2_read_latency_gain_pct": -_pct(e["eq2_read_latency_ms"], c["eq2_read_latency_ms"]),
            "ppc_gain_pct": _pct(e["performance_per_cost"], c["performance_per_cost"]),
            "ppc_gain_wb_pct": _pct(w["performance_per_cost"], c["performance_per_cost"]) if w is not None else None,
            "alloc_reduction_pct": -_pct(e["mean_allocated_blocks"], c["mean_allocated_blocks"]),
            "ssd_write_reduction_pct": -_pct(e["ssd_writes"], c["ssd_writes"]),
            "ssd_write_reduction_per_tenant_pct": per_vm,
            "ro_write_reduction_pct": -_pct(e["ssd_writes"], w["ssd_writes"]) if w is not None else None,
            "ro_read_hit_loss_pct": -_pct(e["read_hit_ratio"], w["read_hit_ratio"]) if w is not None else None,
            "ro_write_latency_ms": (w["write_latency_ms"], e["write_latency_ms"]) if w is not None else None,
            "array_write_change_pct": _pct(e["array_writes"], c["array_writes"]),
        })
    return pd.DataFrame(rows)


def tenant_effects(tenants, floor: float = 0.05):
    """Tenants whose read hit ratio falls by at least `floor` under ECI, and why: its sizing (ECI's sizing
    alone, `eci-wb`, below Centaur: the wish read off the window before was too small) or its read-only
    choice (`eci` below `eci-wb`: the writes dropped cached blocks that were read again)."""
    out = []
    for size in tenants["size"].unique():
        by = {s: tenants[(tenants["size"] == size) & (tenants["scheme"] == s)].set_index("tenant")
              for s in ("centaur", "eci-wb", "eci")}
        if any(v.empty for v in by.values()):
            continue
        for t in by["centaur"].index.intersection(by["eci"].index).intersection(by["eci-wb"].index):
            c, w, e = by["centaur"].loc[t], by["eci-wb"].loc[t], by["eci"].loc[t]
            for cause, before, after in (("sizing", c, w), ("read-only", w, e)):
                if before["read_hit_ratio"] - after["read_hit_ratio"] >= floor:
                    out.append({"size": size, "tenant": int(t), "label": c["label"], "cause": cause,
                                "hit_before": before["read_hit_ratio"], "hit_after": after["read_hit_ratio"],
                                "alloc_before": before["mean_allocated_blocks"],
                                "alloc_after": after["mean_allocated_blocks"], "ro_windows": int(e["read_only_windows"])})
    return out


def verdict(cmp, effects, totals, timed=None) -> list[str]:
    """The paper's claims, ours beside them, in words."""
    lines = []
    if cmp.empty:
        return ["no run of both Centaur and ECI"]
    for _, r in cmp.iterrows():
        where = "an unlimited SSD (feasible)" if r["size"] == "unlimited" else f"an SSD of {int(r['size']):,} blocks"
        lines.append(
            f"{where}: wishes did not fit in {r['centaur_infeasible']} of {r['windows']} windows for Centaur, "
            f"{r['eci_infeasible']} for ECI (paper at 3M blocks: Centaur yes, ECI never); ECI's mean allocation "
            f"{-r['alloc_reduction_pct']:+.1f} % (paper, unlimited: -29.45 %); read hit ratio "
            f"{r['read_hit_eci']:.4f} vs {r['read_hit_centaur']:.4f}")
        lines.append(
            f"{where}: latency (model) of ECI vs Centaur {-r['latency_gain_pct']:+.1f} % over all requests, "
            f"{-r['read_latency_gain_pct']:+.1f} % over reads, {-r['eq2_read_latency_gain_pct']:+.1f} % by Eq. 2 "
            f"per access (paper: -17 % when infeasible); performance-per-cost {r['ppc_gain_pct']:+.1f} % "
            f"(ECI's sizing alone {r['ppc_gain_wb_pct']:+.1f} %; paper +30 %)")
        lines.append(
            f"{where}: SSD writes {-r['ssd_write_reduction_pct']:+.1f} % in total, "
            f"{-r['ssd_write_reduction_per_tenant_pct']:+.1f} % on average per tenant (paper -65 %); read-only "
            f"against write-back under ECI's sizing: SSD writes {-r['ro_write_reduction_pct']:+.1f} % (paper -44 %), "
            f"read hit ratio {-r['ro_read_hit_loss_pct']:+.2f} % (paper: -1.5 % on RAW)")
    for size, g in totals.groupby("size", sort=False):
        by = g.set_index("scheme")
        if not {"centaur", "eci-wb", "eci"} <= set(by.index):
            continue
        c, w, e = by.loc["centaur"], by.loc["eci-wb"], by.loc["eci"]
        lines.append(
            f"not in the paper, at {size}: mean write latency (model) {c['write_latency_ms']:.3f} ms under Centaur, "
            f"{w['write_latency_ms']:.3f} with ECI's sizing (a tenant that re-read nothing gets no space and "
            f"writes to the array), {e['write_latency_ms']:.3f} with read-only tenants too; blocks written to the "
            f"array {c['array_writes']:,} / {w['array_writes']:,} / {e['array_writes']:,}")
    for x in effects:
        starved = x["hit_after"] < 0.01 or x["alloc_after"] < 0.5 * x["alloc_before"]
        why = (("is starved by reactive sizing (its wish, read off the window before, was too small for the next)"
                if starved else "loses read hits under ECI's sizing")
               if x["cause"] == "sizing" else
               f"loses its read-after-write hits to read-only ({x['ro_windows']} read-only windows)")
        before = "Centaur" if x["cause"] == "sizing" else "ECI's sizing alone"
        after = "ECI's sizing" if x["cause"] == "sizing" else "ECI"
        lines.append(f"not in the paper, at {x['size']}: tenant {x['tenant']} ({x['label']}) {why}: read hit "
                     f"{x['hit_before']:.3f} under {before}, {x['hit_after']:.3f} under {after} "
                     f"({x['alloc_before']:.0f} -> {x['alloc_after']:.0f} blocks on average)")
    if timed is not None and len(timed):
        by = timed.set_index("scheme")
        if {"centaur", "eci"} <= set(by.index):
            c, e = by.loc["centaur"], by.loc["eci"]
            ppc = _pct(e["timed_performance_per_cost"], c["timed_performance_per_cost"])
            lines.append(f"in time at {c['size']} blocks (closed loop): mean response {e['response_ms']:.2f} ms (ECI) "
                         f"vs {c['response_ms']:.2f} ms (Centaur), {_pct(e['response_ms'], c['response_ms']):+.1f} % "
                         f"(paper: -17 %); reads {e['read_response_ms']:.2f} vs {c['read_response_ms']:.2f} ms, writes "
                         f"{e['write_response_ms']:.2f} vs {c['write_response_ms']:.2f} ms; performance-per-cost "
                         f"{ppc:+.1f} %; array utilization {e['array_utilization']:.2f} vs {c['array_utilization']:.2f}")
    return lines


def per_vm(tenants, timeline, size: str) -> list[str]:
    """The paper's per-VM figures (§6.4, §6.6) beside ours, for tenants named as its volumes."""
    tc = tenants[(tenants["size"] == size) & (tenants["scheme"] == "centaur")].set_index("label")
    te = tenants[(tenants["size"] == size) & (tenants["scheme"] == "eci")].set_index("label")
    lines = []
    for vm in PAPER_VOLUMES:
        if vm not in tc.index or vm not in te.index:
            continue
        c, e = tc.loc[vm], te.loc[vm]
        paper = PAPER_PER_VM.get(vm, {})
        w = _pct(e["ssd_writes"], c["ssd_writes"])
        a = _pct(e["mean_allocated_blocks"], c["mean_allocated_blocks"])
        pw = f" (paper {paper['writes']:+.0f} %)" if "writes" in paper else ""
        pa = f" (paper {paper['cache']:+.0f} %)" if "cache" in paper else ""
        ro = timeline[(timeline["size"] == size) & (timeline["scheme"] == "eci") & (timeline["label"] == vm)
                      & (timeline["write_policy"] == "ro")]
        first_ro = f"read-only from minute {ro['end_s'].min() / 60:.0f}" if len(ro) else "write-back throughout"
        lines.append(f"{vm} at {size}: SSD writes {w:+.1f} %{pw}, cache {a:+.1f} %{pa}, read hit "
                     f"{e['read_hit_ratio']:.3f} vs {c['read_hit_ratio']:.3f}; {first_ro}")
    return lines


def plot_allocation(timeline, sizes, path: Path) -> None:
    """Allocation per tenant over time, Centaur above ECI (the paper's Fig. 10, 17, 18)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [s for s in sizes if len(timeline[timeline["size"] == s])]
    if not sizes:
        return
    fig, axes = plt.subplots(2, len(sizes), figsize=(4.2 * len(sizes) + 3, 6), squeeze=False, sharex=True)
    labels = sorted(timeline["tenant"].unique())
    names = dict(zip(timeline["tenant"], timeline["label"]))
    for j, size in enumerate(sizes):
        for i, scheme in enumerate(("centaur", "eci")):
            ax = axes[i][j]
            g = timeline[(timeline["size"] == size) & (timeline["scheme"] == scheme)]
            if g.empty:
                continue
            piv = g.pivot_table(index="end_s", columns="tenant", values="allocated_blocks", fill_value=0)
            piv = piv.reindex(columns=labels, fill_value=0)
            colors = [plt.get_cmap("tab20")(k % 20) for k in range(len(labels))]
            ax.stackplot(piv.index / 60.0, piv.T.values, step="post", colors=colors, labels=[names[t] for t in labels])
            ax.set_title(f"{scheme}, SSD {size}", fontsize=9)
            ax.set_ylabel("blocks allocated")
            if size != "unlimited":
                ax.axhline(int(size), color="black", lw=0.8, ls="--")
            if i == 1:
                ax.set_xlabel("minutes (decisions at window ends)")
    handles, names_ = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names_, loc="center right", fontsize=7)
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_summary(totals, path: Path) -> None:
    """Read hit ratio, latency, SSD writes and performance-per-cost of every scheme and size (Fig. 14-16)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [("read_hit_ratio", "read hit ratio"), ("latency_ms", "latency (model, ms)"),
               ("ssd_writes", "SSD writes (blocks)"), ("performance_per_cost", "performance per cost")]
    sizes = list(dict.fromkeys(totals["size"]))
    schemes = list(dict.fromkeys(totals["scheme"]))
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.5 * len(metrics), 4))
    width = 0.8 / max(1, len(schemes))
    for ax, (col, name) in zip(axes, metrics):
        for k, scheme in enumerate(schemes):
            g = totals[totals["scheme"] == scheme].set_index("size").reindex(sizes)
            ax.bar([x + k * width for x in range(len(sizes))], g[col].fillna(0), width, label=scheme)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(sizes))])
        ax.set_xticklabels(sizes, fontsize=8)
        ax.set_title(name, fontsize=9)
        if col == "performance_per_cost":
            ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_tenants(tenants, size: str, path: Path) -> None:
    """Per tenant: mean allocation and SSD writes, Centaur vs ECI (the paper's Fig. 14 and 16)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = tenants[(tenants["size"] == size) & tenants["scheme"].isin(["centaur", "eci"])]
    if g.empty:
        return
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, (col, name) in zip(axes, (("mean_allocated_blocks", "mean allocation (blocks)"),
                                      ("ssd_writes", "SSD writes (blocks)"), ("read_hit_ratio", "read hit ratio"))):
        piv = g.pivot_table(index="label", columns="scheme", values=col)
        piv.plot.bar(ax=ax, fontsize=7)
        ax.set_title(f"{name}, SSD {size}", fontsize=9)
        ax.set_xlabel("")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(labels, reuse_df, totals, cmp, lines, timed=None) -> str:
    """Tables and verdict as Markdown."""
    out = ["## Tenants: TRD and URD sizes (8 KiB blocks, whole trace)", "",
           "| tenant | trace | accesses | RAR | RAW | WAR | WAW | trd_size | urd_size | URD / TRD |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for _, r in reuse_df.iterrows():
        ratio = f"{r['urd_size'] / r['trd_size']:.2f}" if r["trd_size"] else "-"
        out.append(f"| {r['tenant']} | {r['label']} | {r['accesses']:,} | {r['rar']:,} | {r['raw']:,} | {r['war']:,} | "
                   f"{r['waw']:,} | {r['trd_size']:,} | {r['urd_size']:,} | {ratio} |")
    out += ["", "## Every scheme (counted; latency from the model: SSD 0.1 ms, array 7 ms)", "",
            "| SSD blocks | scheme | read hit | latency ms | read ms | write ms | SSD writes | array writes | "
            "destaged | mean alloc | infeasible | perf/cost |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for _, r in totals.iterrows():
        ppc = f"{r['performance_per_cost']:.3g}" if r["performance_per_cost"] == r["performance_per_cost"] and r["performance_per_cost"] is not None else "-"
        out.append(f"| {r['size']} | {r['scheme']} | {r['read_hit_ratio']:.4f} | {r['latency_ms']:.3f} | "
                   f"{r['read_latency_ms']:.3f} | {r['write_latency_ms']:.3f} | {r['ssd_writes']:,} | "
                   f"{r['array_writes']:,} | {r['destaged']:,} | {r['mean_allocated_blocks']:,.0f} | "
                   f"{r['infeasible_windows']}/{r['windows']} | {ppc} |")
    if timed is not None and len(timed):
        out += ["", "## In time (closed loop; RAID-5 of four Ultrastar 73LZX, SSD model examples/disks/ssd.toml)", "",
                "| SSD blocks | scheme | response ms | reads ms | writes ms | p99 ms | array util | SSD util | read hit |",
                "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
        for _, r in timed.iterrows():
            out.append(f"| {r['size']} | {r['scheme']} | {r['response_ms']:.3f} | {r['read_response_ms']:.3f} | "
                       f"{r['write_response_ms']:.3f} | {r['p99_ms']:.2f} | {r['array_utilization']:.3f} | "
                       f"{r['ssd_utilization']:.3f} | {r['read_hit_ratio']:.4f} |")
    out += ["", "## ECI against Centaur, the paper beside us", ""]
    out += [f"- {x}" for x in lines]
    return "\n".join(out) + "\n"
