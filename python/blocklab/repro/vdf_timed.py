"""VDF in time (the paper's §6 prototype): a fault-aware host cache in front of a degraded
RAID-5 in one stack, run by the timed executor.

* Open loop with the rebuild at full bandwidth (MD's min = max = 100 MB/s, the paper's
  "utilize all remaining bandwidth for reconstruction"): the rebuild time under each policy,
  and the users' response meanwhile.
* Open loop degraded without a rebuild: the survivors' utilization u under each policy, from
  which Eq. 4 predicts the rebuild speed-up, (u_base - u_vdf) / (1 - u_vdf).
* Closed loop degraded without a rebuild, T requests outstanding: the service rate, against
  the paper's model RGR_base / RGR_vdf - 1.

The paper replayed pre-filtered miss traces (the cache simulated offline, warm-up misses
dropped) on MD; here the cache is a layer of the stack, so it is warmed by the trace itself
and sees the array's failure and the rebuild's progress (blocks of rebuilt rows cost one
read). Reads only, as in the paper.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from blocklab.repro.shared import repo_root, shared_dir

POLICIES = ("lru", "vdf-lru", "lfu", "vdf-lfu")
DISKS = (5, 6, 7, 8)
SIZES = ("10%", "40%")
THREADS = (20, 80)
# Tencent 222 issues 540 reads/s of 28 KiB on average: one I/O per missed 4 KiB block is far
# more than 5 to 8 disks serve, so the trace is replayed at a fifth of its rate (the survivors
# then about 26 % busy with LRU on 5 disks, 15 % on 8).
SPEEDUP = 0.2

CLAIMS = [
    "open loop, rebuild at full bandwidth: VDF-LFU speeds the recovery up by up to 46.3 %, VDF-LRU by up to 34.6 %",
    "the speed-up decreases from 5 to 8 disks 'in most cases'",
    "Eq. 4: RD improvement = BW_U (RGR_ORI - RGR_VDF) / (BW - BW_U RGR_VDF) = (u_ORI - u_VDF) / (1 - u_VDF)",
    "closed loop, degraded: service rate up by up to 46.8 % (VDF-LFU, 60 threads, 8 disks; 47.7 % in the abstract) "
    "and 28.4 % (VDF-LRU, 80 threads, 8 disks), growing with the threads toward the simulated value",
]


@dataclass
class Trace:
    path: str
    format: str
    label: str


def default_trace(root: Path | None = None) -> Trace | None:
    """Tencent CBS cut 222, the shared trace where VDF cuts RGR most (docs/repro-vdf.md)."""
    shared = shared_dir("traces", root or repo_root())
    if shared is None:
        return None
    p = shared / "tencent_cbs" / "tencent.cut.per_50k.most_size_thpt.222.trace"
    return Trace(str(p), "tencent-cut", "tencent 222") if p.exists() else None


def stack(model: Path, rebuild: bool, speedup: float = 0.2) -> str:
    text = f"""# VDF in time: one cell of `blocklab repro vdf --timed` (varied with --set).
tenant_map = "ignore"

[replay]
mode = "open"
reads_only = true              # the paper's setting
speedup = {speedup}            # the trace's rate times this (see docs/repro-vdf.md)

[[cache]]
policy = "lru"
size = "10%"
hit_ms = 0.0
merge_misses = false           # one 4 KiB I/O per missed block, as the paper's miss traces

[array]
raid = 5
disks = 5
failed = [0]
disk_size = 1000000000
fit = "scale"                  # the trace's footprint spread over the whole array

[device]
model = "{model}"
"""
    if rebuild:
        text += """
[array.rebuild]
at = 0.0
min = 100000                   # KiB/s: MD never throttles (the paper's full-bandwidth mode)
max = 100000
"""
    return text


def run(trace: Trace, out: Path, disks=DISKS, sizes=SIZES, threads=THREADS, model: Path | None = None,
        speedup: float = SPEEDUP, workers: int = 2, progress=None):
    """Every (disks, size, policy) cell: the rebuild run, the degraded open run and the closed runs."""
    import pandas as pd

    from blocklab import run_stack

    model = (model or repo_root() / "examples" / "disks" / "sata-7200.toml").resolve()
    out.mkdir(parents=True, exist_ok=True)
    with_rb, without = out / "vdf-rebuild-stack.toml", out / "vdf-degraded-stack.toml"
    with_rb.write_text(stack(model, True, speedup))
    without.write_text(stack(model, False, speedup))
    jobs = []
    for n in disks:
        for size in sizes:
            for pol in POLICIES:
                base = [f"array.disks={n}", f"cache.0.size={size}", f"cache.0.policy={pol}"]
                jobs.append((n, size, pol, "rebuild", 0, with_rb, base))
                jobs.append((n, size, pol, "degraded", 0, without, base))
                for t in threads:
                    jobs.append((n, size, pol, "closed", t, without,
                                 base + ["replay.mode=closed", f"replay.outstanding={t}"]))
    done = 0

    def one(job):
        nonlocal done
        n, size, pol, kind, t, path, sets = job
        r = run_stack(path, trace.path, format=trace.format, executor="timed", sets=sets)
        surv = [d["utilization"] for d in r["devices"][1:]]
        row = {"disks": n, "size": size, "policy": pol, "kind": kind, "threads": t,
               "requests": r["requests"], "miss_ratio": r["layers"][0]["miss_ratio"], "rgr": r["array"]["rgr"],
               "cache_blocks": r["layers"][0]["cache_blocks"], "resp_ms": r["response"]["avg_ms"],
               "sim_s": r["timing"]["sim_time_ms"] / 1e3, "u_survivors": sum(surv) / len(surv),
               "throughput": r["requests"] / (r["timing"]["sim_time_ms"] / 1e3)}
        if kind == "rebuild":
            b = r["rebuild"]
            row.update({"rebuild_s": b["rebuild_ms"] / 1e3, "finished": b["finished"],
                        "resp_during_ms": b["user_during"]["avg_response_ms"],
                        "share_from_spare": b["lost_reads"]["share_from_spare"]})
        done += 1
        if progress:
            progress(f"[{done}/{len(jobs)}] {n} disks {size} {pol} {kind}{' ' + str(t) if t else ''}")
        return row

    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        rows = list(ex.map(one, jobs))
    return pd.DataFrame(rows)


def summary(df):
    """Per (disks, size, base policy): rebuild speed-up measured and by Eq. 4, service-rate gains."""
    import pandas as pd

    rows = []
    for (n, size), g in df.groupby(["disks", "size"], sort=False):
        for base in ("lru", "lfu"):
            vdf = "vdf-" + base

            def pick(kind, pol, t=0):
                m = g[(g["kind"] == kind) & (g["policy"] == pol) & (g["threads"] == t)]
                return m.iloc[0] if not m.empty else None

            rb, rv = pick("rebuild", base), pick("rebuild", vdf)
            db, dv = pick("degraded", base), pick("degraded", vdf)
            row = {"disks": n, "size": size, "base": base, "cache_blocks": int(db["cache_blocks"]),
                   "rgr_base": db["rgr"], "rgr_vdf": dv["rgr"],
                   "rd_base_s": rb["rebuild_s"], "rd_vdf_s": rv["rebuild_s"],
                   "rd_impr": 100 * (rb["rebuild_s"] - rv["rebuild_s"]) / rb["rebuild_s"],
                   "u_base": db["u_survivors"], "u_vdf": dv["u_survivors"],
                   "eq4": 100 * (db["u_survivors"] - dv["u_survivors"]) / (1 - dv["u_survivors"]),
                   "resp_during_base": rb["resp_during_ms"], "resp_during_vdf": rv["resp_during_ms"],
                   "rate_model": 100 * (db["rgr"] / dv["rgr"] - 1) if dv["rgr"] > 0 else float("nan")}
            for t in sorted(set(g["threads"]) - {0}):
                cb, cv = pick("closed", base, t), pick("closed", vdf, t)
                row[f"rate_{t}"] = 100 * (cv["throughput"] / cb["throughput"] - 1)
            rows.append(row)
    return pd.DataFrame(rows)


def verdict(s) -> list[str]:
    lines = []
    for base in ("lru", "lfu"):
        g = s[s["base"] == base]
        if g.empty:
            continue
        best = g.loc[g["rd_impr"].idxmax()]
        lines.append(f"VDF-{base.upper()} rebuild speed-up: {g['rd_impr'].min():+.1f} .. {g['rd_impr'].max():+.1f} % "
                     f"(best {best['disks']} disks, {best['size']}); paper up to "
                     f"{46.3 if base == 'lfu' else 34.6} %")
        err = (g["rd_impr"] - g["eq4"]).abs()
        lines.append(f"Eq. 4 for VDF-{base.upper()}: predicted {g['eq4'].min():+.1f} .. {g['eq4'].max():+.1f} %, "
                     f"|measured - predicted| {err.mean():.1f} points on average, at most {err.max():.1f}")
        dec = []
        for _size, h in g.groupby("size"):
            h = h.sort_values("disks")
            if len(h) > 1:
                dec.append(h["rd_impr"].iloc[-1] < h["rd_impr"].iloc[0])
        if dec:
            lines.append(f"VDF-{base.upper()}: speed-up smaller with {g['disks'].max()} than with {g['disks'].min()} "
                         f"disks in {sum(dec)} of {len(dec)} sizes (paper: decreasing 'in most cases')")
        rates = [c for c in g.columns if c.startswith("rate_") and c != "rate_model"]
        if rates:
            last = rates[-1]
            lines.append(f"VDF-{base.upper()} service rate: {', '.join(f'{c[5:]} threads {g[c].max():+.1f} %' for c in rates)} "
                         f"(best cells); RGR model {g['rate_model'].min():+.1f} .. {g['rate_model'].max():+.1f} %; "
                         f"mean gap to the model at {last[5:]} threads {(g[last] - g['rate_model']).abs().mean():.1f} points")
    return lines


def plot(s, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(dict.fromkeys(s["size"]))
    fig, axes = plt.subplots(1, 2 + 0, figsize=(10, 3.4))
    for base, mk in (("lru", "o"), ("lfu", "s")):
        for size in sizes:
            g = s[(s["base"] == base) & (s["size"] == size)].sort_values("disks")
            axes[0].plot(g["disks"], g["rd_impr"], marker=mk, label=f"VDF-{base.upper()} {size}")
            axes[0].plot(g["disks"], g["eq4"], marker=mk, ls=":", color=axes[0].lines[-1].get_color())
            rates = [c for c in g.columns if c.startswith("rate_") and c != "rate_model"]
            if rates:
                axes[1].plot(g["disks"], g[rates[-1]], marker=mk, label=f"VDF-{base.upper()} {size} ({rates[-1][5:]} thr.)")
                axes[1].plot(g["disks"], g["rate_model"], marker=mk, ls=":", color=axes[1].lines[-1].get_color())
    axes[0].set_title("rebuild speed-up (solid) and Eq. 4 (dotted)", fontsize=9)
    axes[1].set_title("service-rate gain (solid) and RGR model (dotted)", fontsize=9)
    for ax in axes:
        ax.set_xlabel("disks (RAID-5, one failed)")
        ax.set_ylabel("%")
        ax.axhline(0, color="grey", lw=0.5)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(trace: Trace, s, lines) -> str:
    rates = [c for c in s.columns if c.startswith("rate_") and c != "rate_model"]
    head = ("| disks | size | blocks | base | RGR base / VDF | rebuild base s | VDF s | speed-up % | Eq. 4 % | "
            "resp. during base / VDF ms | " + " | ".join(f"rate {c[5:]} thr. %" for c in rates) + " | RGR model % |")
    L = [f"Trace: {trace.label} (`{Path(trace.path).name}`), reads only.", "", head,
         "|" + "---:|" * (10 + len(rates) + 1)]
    for _, r in s.iterrows():
        L.append(f"| {r['disks']} | {r['size']} | {r['cache_blocks']:,} | {r['base']} | {r['rgr_base']:.3f} / "
                 f"{r['rgr_vdf']:.3f} | {r['rd_base_s']:.1f} | {r['rd_vdf_s']:.1f} | {r['rd_impr']:+.1f} | {r['eq4']:+.1f} | "
                 f"{r['resp_during_base']:.1f} / {r['resp_during_vdf']:.1f} | "
                 + " | ".join(f"{r[c]:+.1f}" for c in rates) + f" | {r['rate_model']:+.1f} |")
    L += ["", "The paper reports:"] + [f"- {c}" for c in CLAIMS] + ["", "Our numbers:"] + [f"- {x}" for x in lines]
    return "\n".join(L) + "\n"
