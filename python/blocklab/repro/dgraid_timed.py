"""D-GRAID in time (`blocklab repro dgraid --timed`): everything through the composed stack
and the timed executor, on four 10,000-RPM IBM drives (examples/disks/ultrastar-73lzx.toml,
the Hsu-Smith model of the Ultrastar 73LZX; the paper used "four 10K-RPM IBM disks").

* Fig 8 — live-block recovery: the time to rebuild a lost member of a RAID-10 of 4 when only
  a share of it is live (the `live` rebuild order), compact (the member's first blocks) or
  spread (whole 32 KiB files interleaved evenly; and single blocks), against the full rebuild
  (MD's `md` order: the paper's "idealized RAID Level 1"); disk-bound (MD's default cap,
  200 MB/s) and at the paper's 10 MB/s.
* Fig 9 — the availability profile: a process reading random whole 32 KB files of a 1.3 GB
  working set on a 3 GB volume (the model's ext2, Fig 9's tree); a disk fails; the spare is
  rebuilt at 10 MB/s by MD (whole member) or live-block recovery (the live map of the model
  run's D-GRAID-1 member); then, on a D-GRAID-1 array and on RAID-10, a whole mirror pair fails
  while the process reads on: the share of its file reads that still succeed.
* Table 2 — the Postmark-like workload's trace replayed on RAID-0 and D-GRAID with 1 to 4
  metadata copies: run times.
* Fig 7 — sequential whole-file reads of growing files on RAID-0, D-GRAID and D-GRAID with
  the file diffused: throughput.

Every stack run is a cell of one sweep (`run_all`): the shipped stack `stacks/dgraid-timed.toml`,
timed, one named case per run (`fig8 ...`, `fig9 ...`, `table2 ...`, `fig7 ...`), each on its own
trace. The model runs that make the traces and Fig 9's live map (`dgraid_workload`,
`dgraid_live`) come first, in `--out`/timed-work; the figures' rows are derived from the cells'
results (the journal's JSON of each run), and so are the Parquet tables `save` writes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from blocklab.repro.shared import repo_root

MODEL = repo_root() / "examples" / "disks" / "ultrastar-73lzx.toml"
CHUNK = 64 << 10
VOLUME = 3_000_000_000  # Fig 9's 3 GB volume
MEMBER = (VOLUME // 2) // CHUNK * CHUNK  # a member of the RAID-10 of 4 holding it
CAP_KBPS = 10_000  # "both D-GRAID and RAID-10 limit their reconstruction rate to 10 MB/s"
MD_MAX_KBPS = 200_000  # MD's default sync_speed_max

PAPER = {
    "fig8": ["live-block recovery reduces recovery time, particularly when a disk is less than half full",
             "the worst case (live data spread throughout the disk) is slower than the best (compacted)"],
    "fig9": {"dgraid_rebuild_s": 68.0, "raid10_rebuild_s": 160.0, "dgraid_after_pair_loss": 0.5,
             "raid10_after_pair_loss": "near zero"},
    "table2": {"raid0": 69.25, "dgraid1": 61.57, "dgraid2": 66.50, "dgraid3": 73.50, "dgraid4": 78.79},  # run time, s
    "fig7": ["without diffusion, sequential reads of large files run at the rate of one disk",
             "with diffusion, performance is much improved (reads go to the diffused copies on all disks)",
             "D-GRAID beats RAID-0 on small files (better layout than ext2's 8-block preallocation)"],
}


def _core():
    from blocklab import _core as c

    return c


def _api():
    from blocklab import api

    return api


# The stack every cell starts from (RAID-10 of four Ultrastar 73LZX, closed loop, FCFS); each
# cell sets what its figure varies.
STACK = Path(__file__).resolve().parent / "stacks" / "dgraid-timed.toml"


class RecipeError(ValueError):
    """A cell the figures need failed, or its result contradicts the recipe's own check."""


@dataclass
class Plan:
    """One figure as sweep cells: the traces it generated (before the sweep: the model's
    workloads are not stack runs), its named cases (each for one trace: `--set` keys), and what
    its rows are derived with (`ctx`)."""

    cases: list[dict] = field(default_factory=list)
    traces: dict[str, Path] = field(default_factory=dict)
    ctx: dict = field(default_factory=dict)

    def case(self, name: str, trace: Path, keys: dict) -> None:
        self.traces.setdefault(trace.name, trace)
        self.cases.append({"name": name, "trace": trace.name, **keys})


def _closed(outstanding: int, scheduler: str) -> dict:
    return {"replay.mode": "closed", "replay.outstanding": outstanding, "device.scheduler": scheduler}


def _dgraid(raid: str, fs: int, meta_copies: int, **extra) -> dict:
    keys = {"array.raid": raid, "array.dgraid.fs_size": fs, "array.dgraid.meta_copies": meta_copies}
    keys.update({f"array.dgraid.{k}": v for k, v in extra.items()})
    return keys


def _result(results: dict, name: str) -> dict:
    """The stack's JSON result of the cell of case `name` (a failed cell stops the recipe)."""
    rec = results.get(name)
    if rec is None:
        raise RecipeError(f"cell `{name}` did not run")
    if rec["status"] != "ok":
        raise RecipeError(f"cell `{name}` failed: {rec['error']}")
    return rec["result"]


def _workload(kind: str, params: dict, out: Path, max_request: int = 0) -> dict:
    return json.loads(_core().dgraid_workload(kind, json.dumps(params), str(out), max_request))


def _prefix(trace: Path, requests: int, out: Path) -> Path:
    """The first `requests` requests of an annotated trace (its header kept)."""
    with open(trace) as f, open(out, "w") as g:
        g.write(f.readline())
        for i, line in enumerate(f):
            if i >= requests:
                break
            g.write(line)
    return out


def _suffix(trace: Path, skip: int, out: Path) -> Path:
    """The requests after the first `skip` (header kept)."""
    with open(trace) as f, open(out, "w") as g:
        g.write(f.readline())
        for i, line in enumerate(f):
            if i >= skip:
                g.write(line)
    return out


# ---------------------------------------------------------------- Fig 8


# Compact (the paper's best case); live data spread over the member in runs of 1 MiB (large files),
# 32 KiB (Fig 9's small files) and single blocks (the extreme worst case).
FIG8_LAYOUTS = (("compact", None), ("spread", 1 << 20), ("spread", 32 << 10), ("spread", 4096))


def _fig8_name(cap: int, layout: str | None = None, unit: int | None = None, frac: float | None = None) -> str:
    return f"fig8 {cap} md" if layout is None else f"fig8 {cap} live {layout} {unit or 4096} {frac}"


def fig8_plan(workdir: Path, quick: bool = False) -> Plan:
    """Rebuild of one member of a RAID-10 of 4 against its live share, on an idle array (an empty
    trace): the cells are `disk run --rebuild` as a stack (open replay, the member's size)."""
    member = (32 << 20) if quick else MEMBER
    fracs = (0.25, 0.5, 1.0) if quick else tuple(round(0.1 * i, 1) for i in range(1, 11))
    empty = workdir / "empty.csv"
    empty.write_text("timestamp,op,offset,size,tenant\n")
    plan = Plan(ctx={"member": member, "fracs": fracs})
    for cap in (MD_MAX_KBPS, CAP_KBPS):
        base = {"replay.mode": "open", "array.raid": "raid10", "array.chunk": "64KiB", "array.failed": [0],
                "array.disk_size": member, "array.block_size": 4096, "array.rebuild.at": 0,
                "array.rebuild.max": cap}
        plan.case(_fig8_name(cap), empty, {**base, "array.rebuild.order": "md"})
        for layout, unit in FIG8_LAYOUTS:
            for f in fracs:
                keys = {**base, "array.rebuild.order": "live", "array.rebuild.live_frac": f,
                        "array.rebuild.live_layout": layout}
                if unit is not None:
                    keys["array.rebuild.live_unit"] = unit
                plan.case(_fig8_name(cap, layout, unit, f), empty, keys)
    return plan


def fig8(plan: Plan, results: dict) -> list[dict]:
    member = plan.ctx["member"]
    rows = []
    for cap in (MD_MAX_KBPS, CAP_KBPS):
        full = _result(results, _fig8_name(cap))["rebuild"]
        rows.append({"cap_kbps": cap, "order": "md", "layout": "full", "unit_bytes": 0, "live_frac": 1.0,
                     "rebuild_s": full["rebuild_ms"] / 1e3, "full_s": full["rebuild_ms"] / 1e3, "extents": full["rebuild_reads"],
                     "copied_bytes": full["rebuild_write_blocks"] * 4096, "member_bytes": member})
        for layout, unit in FIG8_LAYOUTS:
            for f in plan.ctx["fracs"]:
                rb = _result(results, _fig8_name(cap, layout, unit, f))["rebuild"]
                st = rb["order_stats"]
                rows.append({"cap_kbps": cap, "order": "live", "layout": layout, "unit_bytes": unit or 4096,
                             "live_frac": f, "rebuild_s": rb["rebuild_ms"] / 1e3, "full_s": full["rebuild_ms"] / 1e3,
                             "extents": st["extents"], "copied_bytes": st["copied_blocks"] * 4096, "member_bytes": member})
    return rows


# ---------------------------------------------------------------- Fig 9


FIG9_INTERVAL_MS = 1000


def fig9_plan(workdir: Path, quick: bool = False, progress=None) -> Plan:
    """The reader's traces and the D-GRAID-1 member's live map (model runs, before the sweep); the
    cells: the reader on a healthy RAID-10, the rebuild in time with the reader running (MD vs live
    blocks), then a mirror pair lost on D-GRAID-1 and on RAID-10."""
    workdir = workdir.resolve()  # the cells name the live map by absolute path
    from blocklab.repro.dgraid import fig9_listing

    say = progress or (lambda m: None)
    scale = 0.05 if quick else 1.0
    volume = int(VOLUME * scale) // (1 << 20) << 20
    member = (volume // 2) // CHUNK * CHUNK
    nfiles = int(1.3e9 * scale) // (32 << 10)
    reads = 1500 if quick else 16000
    listing = workdir / "fig9-tree.lst"
    fig9_listing(listing, nfiles)
    tree = {"listing": str(listing)}
    say("fig 9: the model's live map of a D-GRAID-1 member, the readers' trace")
    live = json.dumps(json.loads(_core().dgraid_live(json.dumps({
        "tree": tree, "level": "dgraid1", "disks": 4, "meta_copies": 4, "size": volume, "block_size": 4096,
        "disk_blocks": member // 4096}))))
    # Named by its content: the cell key hashes the path, not the file, so new contents get new cells.
    live_map = workdir / f"fig9-live-{hashlib.sha256(live.encode()).hexdigest()[:16]}.json"
    live_map.write_text(live)
    trace = workdir / "fig9-readers.csv"
    summary = _workload("readers", {"tree": tree, "size": volume, "reads": reads, "seed": 1}, trace)
    populate = summary["phases"][0][1]
    reads_csv = _suffix(trace, populate, workdir / "fig9-reads.csv")
    n_reads = summary["requests"] - populate
    fail_after = 200 if quick else 1000  # read requests before the (first) failure
    out = {"volume_bytes": volume, "member_bytes": member, "files": nfiles, "file_reads": reads,
           "read_requests": n_reads, "fail_after_requests": fail_after, "scale": scale}
    plan = Plan()
    plan.case("fig9 healthy", reads_csv, {"array.disk_size": member})
    # The rebuild with the reader running: disk 0 fails, a spare arrives at once, rebuilt at 10 MB/s.
    failed = {"array.disk_size": member, "array.failed": [0], "array.fail_at": f"{fail_after}req",
              "array.rebuild.at": 0, "array.rebuild.min": CAP_KBPS, "array.rebuild.max": CAP_KBPS,
              "array.rebuild.interval": 2000}
    plan.case("fig9 md", reads_csv, {**failed, "array.rebuild.order": "md"})
    plan.case("fig9 live", reads_csv, {**failed, "array.rebuild.order": "live", "array.rebuild.live_map": str(live_map)})
    # A whole mirror pair lost while the process reads: D-GRAID-1 (the whole trace: the tree is
    # placed by the array as it is written) and RAID-10 (block semantics: what survives is read).
    # Every inode-table block has 4 copies (2 survive), so on D-GRAID-1 a file read fails exactly when
    # its data request does and the timed run's count of unreadable requests counts failed file reads.
    # That needs one data request per file read: the rare reads of a file in two runs are left out
    # (file_reads_dropped) of both pair-loss runs.
    pair_reads, dropped = _single_run_reads(reads_csv, fail_after, workdir / "fig9-pair-reads.csv")
    pair_trace = _concat(_prefix(trace, populate, workdir / "fig9-populate.csv"), pair_reads,
                         workdir / "fig9-pair-trace.csv")
    groups = _file_reads(pair_reads, fail_after)
    assert all(len(g) == 2 for g in groups)
    # A time series of requests issued and served (an unreadable request is not served).
    pair = {"replay.interval": FIG9_INTERVAL_MS, "array.disk_size": member, "array.failed": [0, 1]}
    plan.case("fig9 dgraid1 pair", pair_trace, {**pair, **_dgraid("dgraid1", volume, 4),
                                                "array.fail_at": f"{populate + fail_after}req"})
    plan.case("fig9 raid10 pair", pair_reads, {**pair, "array.fail_at": f"{fail_after}req", "array.allow_loss": True})
    # Under MD's semantics the array is lost with a mirror pair: the stack refuses to run it
    # without allow_loss (this cell's expected outcome is that refusal), and then no read succeeds.
    plan.case("fig9 raid10 pair md", pair_reads, {**pair, "array.fail_at": f"{fail_after}req", "array.allow_loss": False})
    plan.ctx = {"out": out, "populate": populate, "groups": groups, "dropped": dropped}
    return plan


def _md_refused(results: dict, name: str) -> bool:
    """Whether the stack refused cell `name` for losing data without allow_loss (else its result is used)."""
    rec = results.get(name)
    if rec is not None and rec["status"] != "ok" and "allow_loss" in (rec["error"] or ""):
        return True
    _result(results, name)
    return False


def fig9(plan: Plan, results: dict) -> dict:
    out = dict(plan.ctx["out"])
    populate, groups, dropped = plan.ctx["populate"], plan.ctx["groups"], plan.ctx["dropped"]
    out["healthy_ms"] = _result(results, "fig9 healthy")["response"]["avg_ms"]
    for name in ("md", "live"):
        r = _result(results, f"fig9 {name}")
        rb = r["rebuild"]
        out[name] = {"rebuild_s": rb["rebuild_ms"] / 1e3, "start_s": rb["start_ms"] / 1e3, "finished": rb["finished"],
                     "copied_bytes": rb["rebuild_write_blocks"] * 4096,
                     "during_ms": rb["user_during"]["avg_response_ms"], "during_requests": rb["user_during"]["requests"],
                     "after_ms": rb["user_after"]["avg_response_ms"], "after_requests": rb["user_after"]["requests"],
                     "series": rb["series"], "sim_time_s": r["timing"]["sim_time_ms"] / 1e3,
                     "order_stats": rb["order_stats"]}
    dg = _result(results, "fig9 dgraid1 pair")
    bad = dg["timing"]["unreadable"]
    out["dgraid1_pair"] = {"unreadable_requests": bad, "file_reads_after": len(groups), "file_reads_dropped": dropped,
                           "file_reads_ok": 1.0 - bad / max(1, len(groups)),
                           "unmapped_reads": dg["dgraid"]["unmapped_reads"], "spills": dg["dgraid"]["counts"]["spills"]}
    r10 = _result(results, "fig9 raid10 pair")
    # Which requests fail on RAID-10 is where MD maps them (array_map); their number must be the
    # timed run's, then a file read is OK when its inode-table block and its data both are.
    lost = _lost_requests(groups, "raid10", {0, 1})
    if sum(lost) != r10["timing"]["unreadable"]:
        raise RecipeError(f"fig 9: RAID-10 lost {r10['timing']['unreadable']} requests in time, {sum(lost)} by the map")
    ok = sum(1 for g, l in zip(groups, _chunks(lost, groups)) if not any(l))
    md_ok = 0.0 if _md_refused(results, "fig9 raid10 pair md") else ok / max(1, len(groups))
    out["raid10_pair"] = {"unreadable_requests": r10["timing"]["unreadable"], "file_reads_after": len(groups),
                          "file_reads_dropped": dropped, "file_reads_ok": ok / max(1, len(groups)),
                          "md_file_reads_ok": md_ok, "requests": r10["requests"]}
    # The profile: share of the reader's requests served per interval, from the reads' start (the
    # D-GRAID-1 run's populate phase cut off).
    start = _reads_start_ms(dg, populate)
    for key, r, t0 in (("dgraid1_pair", dg, start), ("raid10_pair", r10, 0.0)):
        out[key]["profile"] = [{"t_ms": p["t_ms"] - t0, "issued": p["issued"], "served": p["completed"],
                                "served_share": p["completed"] / p["issued"] if p["issued"] else None}
                               for p in r["timing"]["timeseries"] if p["t_ms"] >= t0]
    return out


def _reads_start_ms(run: dict, populate: int) -> float:
    """Start of the first interval whose requests are all the reader's (issued counts past `populate`)."""
    n = 0
    for p in run["timing"]["timeseries"]:
        if n >= populate:
            return p["t_ms"]
        n += p["issued"]
    return 0.0


def _file_reads(trace: Path, skip: int, lines: bool = False) -> list:
    """The whole-file reads after the first `skip` requests, each a list of (offset, size) requests
    (or of their trace lines): one starts at each inode-table read (the readers' trace reads a
    file's inode block, then its data)."""
    groups: list = []
    with open(trace) as f:
        f.readline()
        for i, line in enumerate(f):
            if i < skip:
                continue
            cols = line.rstrip("\n").split(",")
            item = line if lines else (int(cols[2]), int(cols[3]))
            if cols[6] == "inode-table" or not groups:
                groups.append([item])
            else:
                groups[-1].append(item)
    return groups


def _single_run_reads(trace: Path, skip: int, out: Path) -> tuple[Path, int]:
    """The trace with the file reads after the first `skip` requests that are not one inode-table
    read and one data read left out; returns it and how many were left out."""
    with open(trace) as f:
        header = f.readline()
        head = [next(f) for _ in range(skip)]
    kept, dropped = [], 0
    for g in _file_reads(trace, skip, lines=True):
        if len(g) == 2:
            kept += g
        else:
            dropped += 1
    out.write_text(header + "".join(head) + "".join(kept))
    return out, dropped


def _concat(first: Path, second: Path, out: Path) -> Path:
    """Two traces with one header: `first`'s requests then `second`'s."""
    with open(out, "w") as g:
        g.write(first.read_text())
        with open(second) as f:
            f.readline()
            for line in f:
                g.write(line)
    return out


def _lost_requests(groups, raid: str, failed: set[int]) -> list[bool]:
    """Per request (in order), whether one of its blocks has every copy on a failed disk."""
    reqs = [r for g in groups for r in g]
    blocks = sorted({b for off, size in reqs for b in range(off // 4096, (off + size - 1) // 4096 + 1)})
    dead = {m["block"] for m in _api().array_map(raid, 4, blocks) if set(m["disks"]) <= failed}
    return [any(b in dead for b in range(off // 4096, (off + size - 1) // 4096 + 1)) for off, size in reqs]


def _chunks(flat: list, groups: list) -> list:
    out, i = [], 0
    for g in groups:
        out.append(flat[i:i + len(g)])
        i += len(g)
    return out



# ---------------------------------------------------------------- Table 2


T2_REPLAYS = (("closed-1", 1, "fcfs"), ("closed-8", 8, "clook"))
T2_CONFIGS = ("raid0", "dgraid1", "dgraid2", "dgraid3", "dgraid4")


def table2_plan(workdir: Path, quick: bool = False) -> Plan:
    """The Postmark-like trace (a model run, before the sweep) on RAID-0 and D-GRAID with 1..4
    metadata copies, one and eight requests in flight."""
    from blocklab.repro.dgraid import PAPER_KERNEL

    params = {"files": 300, "transactions": 2000, "size": 128 << 20, "flush_every": 400} if quick else {}
    params["allocator"] = PAPER_KERNEL
    trace = workdir / "postmark.csv"
    fs = _workload("postmark", params, trace, 128 << 10)["fs_bytes"]
    plan = Plan()
    for label, outstanding, sched in T2_REPLAYS:
        plan.case(f"table2 {label} raid0", trace, {**_closed(outstanding, sched), "array.raid": "raid0",
                                                    "array.chunk": "64KiB"})
        for k in (1, 2, 3, 4):
            plan.case(f"table2 {label} dgraid{k}", trace, {**_closed(outstanding, sched), **_dgraid("dgraid0", fs, k)})
    return plan


def table2(plan: Plan, results: dict) -> list[dict]:
    """Run times of the Postmark-like trace on RAID-0 and D-GRAID with 1..4 metadata copies."""
    rows = []
    for label, _, _ in T2_REPLAYS:
        for config in T2_CONFIGS:
            r = _result(results, f"table2 {label} {config}")
            u = r["array"]["ops_by_cause"]["user"]
            rows.append({"replay": label, "config": config, "run_time_s": r["timing"]["sim_time_ms"] / 1e3,
                         "requests": r["requests"], "blocks_written": u["write_blocks"], "blocks_read": u["read_blocks"],
                         "utilization": r["timing"]["utilization"], "paper_run_time_s": PAPER["table2"][config]})
    return rows


# ---------------------------------------------------------------- Fig 7


FIG7_SIZES = (4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20)
# One request at a time (a reader with no readahead), and four in flight with C-LOOK (the kernel's
# readahead keeping the drives busy, as under the paper's Linux host).
FIG7_REPLAYS = (("closed-1", 1, "fcfs"), ("closed-4", 4, "clook"))
FIG7_CONFIGS = ("raid0", "dgraid", "dgraid_diffused", "dgraid_diffused_4m")


def _fig7_keys(config: str, fs: int) -> dict:
    if config == "raid0":
        return {"array.raid": "raid0", "array.chunk": "64KiB"}
    if config == "dgraid":
        return _dgraid("dgraid0", fs, 4)
    # Diffused in 1 MiB segments; in 4 MiB ones: fewer, longer segments, fewer runs to seek
    # between, but files under about 8 MiB are hardly diffused (only whole segments read are).
    segment = "4MiB" if config == "dgraid_diffused_4m" else "1MiB"
    return _dgraid("dgraid0", fs, 4, diffuse_segment=segment, diffuse_threshold=2)


def fig7_plan(workdir: Path, quick: bool = False, sizes=FIG7_SIZES) -> Plan:
    """Per file size, the sequential-read trace and the same without its measured read (model
    runs, before the sweep); every configuration and replay runs both."""
    from blocklab.repro.dgraid import PAPER_KERNEL

    sizes = (64 << 10, 4 << 20) if quick else sizes
    plan = Plan(ctx={"sizes": sizes})
    for size in sizes:
        trace = workdir / f"seq-{size}.csv"
        s = _workload("seqread", {"file_bytes": size, "passes": 2, "flush_files": 4,
                                  "flush_bytes": (8 if quick else 16) << 20, "allocator": PAPER_KERNEL}, trace)
        prefix = _prefix(trace, s["requests"] - s["phases"][-1][1], workdir / f"seq-{size}-prefix.csv")
        for label, outstanding, sched in FIG7_REPLAYS:
            for config in FIG7_CONFIGS:
                keys = {**_closed(outstanding, sched), **_fig7_keys(config, s["fs_bytes"])}
                plan.case(f"fig7 {size} {label} {config}", trace, keys)
                plan.case(f"fig7 {size} {label} {config} prefix", prefix, keys)
    return plan


def fig7(plan: Plan, results: dict) -> list[dict]:
    """Throughput of a sequential whole-file read (drives' caches flushed first), 4 disks: the
    read's time is the run's simulated time minus that of the run without it."""
    rows = []
    for size in plan.ctx["sizes"]:
        for label, _, _ in FIG7_REPLAYS:
            row = {"replay": label, "file_bytes": size}
            for name in FIG7_CONFIGS:
                t = (_result(results, f"fig7 {size} {label} {name}")["timing"]["sim_time_ms"]
                     - _result(results, f"fig7 {size} {label} {name} prefix")["timing"]["sim_time_ms"])
                row[f"{name}_ms"] = t
                row[f"{name}_mb_s"] = size / 1e6 / (t / 1e3) if t > 0 else float("inf")
            rows.append(row)
    return rows


# ---------------------------------------------------------------- the sweep


FIGURES = ("fig8", "fig9", "table2", "fig7")


def plan_all(work: Path, quick: bool = False, progress=None) -> dict[str, Plan]:
    """Every figure's inputs and cells (the model runs that make the traces and the live map run here)."""
    say = progress or (lambda m: None)
    say("fig 8: an empty trace (the rebuild on an idle array)")
    plans = {"fig8": fig8_plan(work, quick)}
    plans["fig9"] = fig9_plan(work, quick, say)
    say("table 2: the Postmark-like trace")
    plans["table2"] = table2_plan(work, quick)
    say("fig 7: the sequential-read traces")
    plans["fig7"] = fig7_plan(work, quick)
    return plans


def sweep_spec(plans: dict[str, Plan]):
    """The recipe as one sweep: the shipped stack, timed, every figure's named cases on their traces."""
    from blocklab.sweeps import Sweep, TraceRef

    traces: dict[str, Path] = {}
    for p in plans.values():
        traces.update(p.traces)
    return Sweep(stack=str(STACK), executor="timed", name="repro-dgraid-timed",
                 traces=[TraceRef(str(path), "csv", label) for label, path in traces.items()],
                 cases=[c for p in plans.values() for c in p.cases],
                 report={"metrics": ["timing.sim_time_ms", "rebuild.rebuild_ms", "response.avg_ms"]})


def results_by_case(out: Path, df) -> dict[str, dict]:
    """The journal's record (status, the stack's JSON result or the error) of each cell of `df`, by case."""
    from blocklab.sweeps.results import Journal

    records = Journal(Path(out)).records()
    return {case: records[cell] for cell, case in zip(df["cell"], df["case"]) if cell in records}


def derive(plans: dict[str, Plan], results: dict[str, dict]) -> dict:
    """The figures' rows from the cells' results."""
    return {"fig8": fig8(plans["fig8"], results), "fig9": fig9(plans["fig9"], results),
            "table2": table2(plans["table2"], results), "fig7": fig7(plans["fig7"], results)}


def _sections(res: dict | None, error: str | None):
    import html

    from blocklab.sweeps import Section

    if res is None:
        return [Section("D-GRAID in time", f"<p>tables not drawn: {html.escape(error or '')}</p>")]
    md = markdown(res, verdict(res))
    from blocklab.repro import verdicts
    from blocklab.repro.dgraid_claims import timed_claims

    return [Section("The paper against our numbers in time, claim by claim", verdicts.html(timed_claims(res))),
            Section("Figs 8, 9, Table 2 and Fig 7 in time, beside the paper", f"<pre>{html.escape(md)}</pre>")]


def run_all(out: Path, quick: bool = False, progress=None, *, jobs: int | None = None, ray: str | None = None,
            bar: bool = True, command: str | None = None) -> dict:
    """The traces and live map made in `out/timed-work`, every cell run as a sweep into `out`
    (results.parquet with provenance, cells.jsonl, report.html; finished cells are kept on a
    re-run), the figures' rows derived from the cells' results."""
    from blocklab.sweeps import run_recipe

    # Absolute: the cells name the traces and the live map by path.
    work = (Path(out) / "timed-work").resolve()
    work.mkdir(parents=True, exist_ok=True)
    plans = plan_all(work, quick, progress)
    derived: dict = {}

    def sections(df):
        try:
            derived["res"] = derive(plans, results_by_case(out, df))
        except RecipeError as e:
            derived["error"] = str(e)
        return _sections(derived.get("res"), derived.get("error"))

    run_recipe(sweep_spec(plans), out, jobs=jobs, ray=ray, progress=bar, command=command, sections=sections,
               title="D-GRAID (Sivathanu et al., FAST'04) in time")
    if "res" not in derived:
        raise RecipeError(f"{derived['error']} (see {out}/results.parquet)")
    return derived["res"]


# ---------------------------------------------------------------- output


def save(res: dict, out: Path) -> list[str]:
    import pandas as pd

    written = []
    for key in ("fig8", "table2", "fig7"):
        pd.DataFrame(res[key]).to_parquet(out / f"dgraid-timed-{key}.parquet", index=False)
        written.append(f"dgraid-timed-{key}.parquet")
    f9 = res["fig9"]
    series = [dict(order=o, **p) for o in ("md", "live") for p in f9[o]["series"]]
    pd.DataFrame(series).to_parquet(out / "dgraid-timed-fig9-series.parquet", index=False)
    flat = {k: v for k, v in f9.items() if not isinstance(v, dict)}
    for o in ("md", "live", "dgraid1_pair", "raid10_pair"):
        for k, v in f9[o].items():
            if not isinstance(v, (list, dict)):
                flat[f"{o}_{k}"] = v
    pd.DataFrame([flat]).to_parquet(out / "dgraid-timed-fig9.parquet", index=False)
    profile = [dict(array=k.split("_")[0], **p) for k in ("dgraid1_pair", "raid10_pair") for p in f9[k]["profile"]]
    pd.DataFrame(profile).to_parquet(out / "dgraid-timed-fig9-profile.parquet", index=False)
    written += ["dgraid-timed-fig9-series.parquet", "dgraid-timed-fig9.parquet", "dgraid-timed-fig9-profile.parquet"]
    return written


def plot(res: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    files = []
    f8 = pd.DataFrame(res["fig8"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, cap in zip(axes, (MD_MAX_KBPS, CAP_KBPS)):
        sub = f8[f8.cap_kbps == cap]
        full = sub[sub.order == "md"].rebuild_s.iloc[0]
        for (layout, unit), g in sub[sub.order == "live"].groupby(["layout", "unit_bytes"]):
            lab = "compact (best case)" if layout == "compact" else f"spread, runs of {unit >> 10} KiB"
            ax.plot(100 * g.live_frac, g.rebuild_s, marker="o", ms=3, label=lab)
        ax.axhline(full, color="k", ls="--", label="full rebuild (MD, RAID-10)")
        ax.set_xlabel("live data (% of the member)")
        ax.set_title("disk-bound (MD's default cap)" if cap == MD_MAX_KBPS else "capped at 10 MB/s")
        ax.grid(alpha=0.3)
        if cap == CAP_KBPS:
            ax.legend(fontsize=7)
    axes[0].set_ylabel("rebuild time (s)")
    for ax in axes:
        ax.set_yscale("log")
    fig.suptitle("Fig 8 in time: live-block recovery of a RAID-10 member, Ultrastar 73LZX")
    fig.tight_layout()
    fig.savefig(out / "dgraid-timed-fig8.png", dpi=120)
    plt.close(fig)
    files.append("dgraid-timed-fig8.png")

    f9 = res["fig9"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for o, lab in (("md", "RAID-10 (MD, whole member)"), ("live", "live blocks (D-GRAID-1's live map)")):
        s = pd.DataFrame(f9[o]["series"])
        if len(s):
            axes[0].plot(s.t_ms / 1e3, 100 * s.rebuilt_fraction, label=lab)
            axes[1].plot(s.t_ms / 1e3, s.avg_response_ms, label=lab)
    axes[1].axhline(f9["healthy_ms"], color="k", ls="--", lw=1, label="healthy array")
    axes[1].legend(fontsize=8)
    for key, lab, color in (("dgraid1_pair", "D-GRAID-1", "tab:green"),
                            ("raid10_pair", "RAID-10 (block semantics)", "tab:red")):
        p = pd.DataFrame(f9[key]["profile"])
        if len(p):
            axes[2].step(p.t_ms / 1e3, 100 * p.served_share, where="post", label=lab, color=color)
    axes[2].set_ylim(0, 105)
    axes[2].set_ylabel("reader's requests served (%)")
    axes[2].set_title(f"a mirror pair fails after {f9['fail_after_requests']} requests", fontsize=9)
    axes[2].legend(fontsize=8)
    axes[0].set_ylabel("member in sync (%)")
    axes[1].set_ylabel("mean response of the reader (ms)")
    for ax in axes:
        ax.set_xlabel("simulated time (s)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Fig 9 in time: rebuild at 10 MB/s with a 32 KB-file reader; after a pair is lost: D-GRAID-1 "
                 f"{100 * f9['dgraid1_pair']['file_reads_ok']:.0f} %, RAID-10 {100 * f9['raid10_pair']['file_reads_ok']:.0f} % "
                 f"of file reads OK", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "dgraid-timed-fig9.png", dpi=120)
    plt.close(fig)
    files.append("dgraid-timed-fig9.png")

    f7 = pd.DataFrame(res["fig7"])
    fig, axes = plt.subplots(1, len(FIG7_REPLAYS), figsize=(11, 4.2), sharey=True)
    for ax, (label, outstanding, sched) in zip(axes, FIG7_REPLAYS):
        sub = f7[f7.replay == label]
        for col, lab in (("raid0_mb_s", "RAID-0"), ("dgraid_mb_s", "D-GRAID"),
                         ("dgraid_diffused_mb_s", "D-GRAID, diffused (1 MiB segments)"),
                         ("dgraid_diffused_4m_mb_s", "D-GRAID, diffused (4 MiB segments)")):
            ax.plot(sub.file_bytes, sub[col], marker="o", ms=3, label=lab)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("file size (bytes)")
        ax.set_title(f"{outstanding} request(s) in flight, {sched}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("throughput (MB/s)")
    axes[0].legend()
    fig.suptitle("Fig 7 in time: sequential whole-file reads, 4 Ultrastar 73LZX")
    fig.tight_layout()
    fig.savefig(out / "dgraid-timed-fig7.png", dpi=120)
    plt.close(fig)
    files.append("dgraid-timed-fig7.png")
    return files


def verdict(res: dict) -> list[str]:
    out = []
    f8 = res["fig8"]
    for cap in (MD_MAX_KBPS, CAP_KBPS):
        sub = [r for r in f8 if r["cap_kbps"] == cap]
        full = next(r for r in sub if r["order"] == "md")["rebuild_s"]
        half = {(r["layout"], r["unit_bytes"]): r["rebuild_s"] for r in sub if r["order"] == "live" and r["live_frac"] == 0.5}
        what = "disk-bound" if cap == MD_MAX_KBPS else "at 10 MB/s"
        out.append(f"Fig 8 ({what}): full rebuild {full:.1f} s; half live: compact {half.get(('compact', 4096), float('nan')):.1f} s, "
                   f"spread in 1 MiB runs {half.get(('spread', 1 << 20), float('nan')):.1f} s, spread in 32 KiB files {half.get(('spread', 32768), float('nan')):.1f} s, spread in single blocks "
                   f"{half.get(('spread', 4096), float('nan')):.1f} s.")
    f9 = res["fig9"]
    md, lv = f9["md"], f9["live"]
    out.append(f"Fig 9: with the reader running, RAID-10's rebuild takes {md['rebuild_s']:.0f} s, live-block recovery "
               f"{lv['rebuild_s']:.0f} s (ratio {lv['rebuild_s'] / md['rebuild_s']:.2f}; paper 160 / 68 s, 0.43); reader's mean "
               f"response healthy {f9['healthy_ms']:.1f} ms, during / after the rebuild: MD {md['during_ms']:.1f} / "
               f"{md['after_ms']:.1f} ms, live {lv['during_ms']:.1f} / {lv['after_ms']:.1f} ms. After a mirror pair is lost, "
               f"{100 * f9['dgraid1_pair']['file_reads_ok']:.1f} % of whole-file reads succeed on D-GRAID-1 (paper about 50 %), "
               f"{100 * f9['raid10_pair']['file_reads_ok']:.1f} % on RAID-10 with block semantics (MD stops the array: 0 %; "
               f"paper near zero; the reader's path walk is taken as cached).")
    t2 = res["table2"]
    for label in ("closed-1", "closed-8"):
        rows = {r["config"]: r for r in t2 if r["replay"] == label}
        d1, d4, r0 = rows["dgraid1"]["run_time_s"], rows["dgraid4"]["run_time_s"], rows["raid0"]["run_time_s"]
        out.append(f"Table 2 in time ({label}): RAID-0 {r0:.1f} s, D-GRAID1..4 "
                   + " / ".join(f"{rows[f'dgraid{k}']['run_time_s']:.1f}" for k in (1, 2, 3, 4))
                   + f" s; D-GRAID4 / D-GRAID1 = {d4 / d1:.3f} (paper 1.280), RAID-0 / D-GRAID1 = {r0 / d1:.3f} (paper 1.125).")
    for label, _, _ in FIG7_REPLAYS:
        f7 = [r for r in res["fig7"] if r["replay"] == label]
        big, small = f7[-1], f7[0]
        out.append(f"Fig 7 in time ({label}): a {_size_text(big['file_bytes'])} read runs at {big['dgraid_mb_s']:.0f} MB/s on "
                   f"D-GRAID, {big['dgraid_diffused_mb_s']:.0f} MB/s diffused in 1 MiB segments, "
                   f"{big['dgraid_diffused_4m_mb_s']:.0f} MB/s in 4 MiB ones, {big['raid0_mb_s']:.0f} MB/s on RAID-0; a "
                   f"{_size_text(small['file_bytes'])} file {small['dgraid_mb_s']:.1f} / {small['dgraid_diffused_mb_s']:.1f} / "
                   f"{small['raid0_mb_s']:.1f} MB/s.")
    return out


def _size_text(b: int) -> str:
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def _md_table(cols, rows) -> str:
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)


def markdown(res: dict, lines: list[str]) -> str:
    parts = ["## In time (`--timed`)", "", "Four Ultrastar 73LZX models (10,000 RPM), the composed stack, the timed executor.", ""]
    parts += [f"- {v}" for v in lines]
    f8 = res["fig8"]
    fracs = sorted({r["live_frac"] for r in f8 if r["order"] == "live"})
    for cap in (MD_MAX_KBPS, CAP_KBPS):
        sub = [r for r in f8 if r["cap_kbps"] == cap]
        full = next(r for r in sub if r["order"] == "md")["rebuild_s"]
        parts += ["", f"### Fig 8: rebuild time (s) of a {sub[0]['member_bytes'] / 1e9:.2f} GB member, "
                      f"{'disk-bound (max 200 MB/s)' if cap == MD_MAX_KBPS else 'capped at 10 MB/s'}; full rebuild {full:.1f} s", ""]
        rows = []
        for layout, unit in FIG8_LAYOUTS:
            u = unit or 4096
            vals = {r["live_frac"]: r["rebuild_s"] for r in sub if r["order"] == "live" and r["layout"] == layout
                    and r["unit_bytes"] == u}
            name = "compact" if layout == "compact" else f"spread, {u >> 10} KiB runs"
            rows.append([name] + [f"{vals[f]:.1f}" for f in fracs])
        parts.append(_md_table(["live share"] + [f"{100 * f:.0f} %" for f in fracs], rows))
    parts += ["", "![fig 8](dgraid-timed-fig8.png)", ""]
    f9 = res["fig9"]
    parts += ["### Fig 9 in time", "", _md_table(["quantity", "ours", "paper"], [
        ["volume, files read", f"{f9['volume_bytes'] / 1e9:.2f} GB, {f9['files']:,} files of 32 KB, {f9['file_reads']:,} reads", "3 GB, 1.3 GB of 32 KB files"],
        ["rebuild at 10 MB/s, RAID-10 (MD)", f"{f9['md']['rebuild_s']:.0f} s", "160 s"],
        ["rebuild at 10 MB/s, live blocks", f"{f9['live']['rebuild_s']:.0f} s ({f9['live']['copied_bytes'] / 1e9:.2f} GB copied)", "68 s"],
        ["reader's mean response during the rebuild, MD / live", f"{f9['md']['during_ms']:.1f} / {f9['live']['during_ms']:.1f} ms", "-"],
        ["file reads OK after a mirror pair is lost, D-GRAID-1", f"{100 * f9['dgraid1_pair']['file_reads_ok']:.1f} %", "about 50 %"],
        ["same, RAID-10 (block semantics; MD: 0 %)", f"{100 * f9['raid10_pair']['file_reads_ok']:.1f} %", "near zero"],
    ]), "", "![fig 9](dgraid-timed-fig9.png)", ""]
    parts += ["### Table 2 in time: run time of the Postmark-like trace (s)", ""]
    t2 = res["table2"]
    configs = ["raid0", "dgraid1", "dgraid2", "dgraid3", "dgraid4"]
    rows = []
    for label in ("closed-1", "closed-8"):
        vals = {r["config"]: r["run_time_s"] for r in t2 if r["replay"] == label}
        rows.append([f"ours, {label}"] + [f"{vals[c]:.1f}" for c in configs])
    rows.append(["paper"] + [f"{PAPER['table2'][c]:.2f}" for c in configs])
    parts.append(_md_table(["replay"] + configs, rows))
    parts += ["", "### Fig 7 in time: sequential whole-file read throughput (MB/s), 4 disks", ""]
    parts.append(_md_table(["replay", "file", "RAID-0", "D-GRAID", "D-GRAID diffused, 1 MiB segments", "4 MiB segments"],
                           [[r["replay"], f"{r['file_bytes']:,} B", f"{r['raid0_mb_s']:.1f}", f"{r['dgraid_mb_s']:.1f}",
                             f"{r['dgraid_diffused_mb_s']:.1f}", f"{r['dgraid_diffused_4m_mb_s']:.1f}"] for r in res["fig7"]]))
    parts += ["", "![fig 7](dgraid-timed-fig7.png)", ""]
    from blocklab.repro.dgraid_claims import timed_claims
    from blocklab.repro.verdicts import markdown as verdict_table

    parts += ["### Verdict in time, claim by claim", "", verdict_table(timed_claims(res))]
    return "\n".join(parts) + "\n"
