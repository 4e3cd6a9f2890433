"""`blocklab disk run`: replay traces in simulated time on a drive model.

The command joins the `disk` group of `disk_cmd` (its `disk_app`) when that
group exists, and creates a minimal `disk` group otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from blocklab import _core
from blocklab.cli import disk_cmd
from blocklab.cli.common import (FormatOpt, JsonOpt, SkipBadOpt, SortOpt, SortWindowOpt, fail, place_timeseries,
                                 print_json, reordered_line, sort_window)

REPLAYS = ("open", "closed", "feedback")
SUMMARY = ("requests", "avg_response_ms", "p50_ms", "p95_ms", "p99_ms", "max_response_ms",
           "avg_service_ms", "utilization", "sim_time_ms", "mean_outstanding", "max_outstanding")


def run(
    model: str = typer.Argument(..., help="Drive model: a DiskSim .parv or a TOML spec; or const:MS, toy:base=MS,cyl=MS,..."),
    trace: Optional[List[Path]] = typer.Option(None, "--trace", "-t", help="Trace file; repeat to merge several traces as independent streams."),
    synthetic: bool = typer.Option(False, "--synthetic", help="Run the DiskSim .parv's own disksim_synthio workload (DiskSim's `disksim FILE.parv OUT ascii 0 1`) instead of a trace."),
    seed: Optional[int] = typer.Option(None, "--seed", help="--synthetic: seed of the generators (default: the file's Real Seed)."),
    format: str = FormatOpt,
    replay: str = typer.Option("open", "--replay", help="open (trace times), closed (N outstanding) or feedback (Hsu-Smith)."),
    speedup: float = typer.Option(1.0, "--speedup", help="open: divide trace times by X; feedback: processor speed-up n."),
    outstanding: int = typer.Option(1, "--outstanding", help="closed: requests kept in flight per stream."),
    think: float = typer.Option(0.0, "--think-ms", help="closed: think time between a completion and the stream's next issue (ms)."),
    infinitely_fast: bool = typer.Option(False, "--infinitely-fast", help="feedback: replace each think time x by x[1-f(x)]."),
    window: int = typer.Option(64, "--window", help="feedback: issue window (requests) per stream."),
    reference: Optional[str] = typer.Option(None, "--reference", help="feedback: model of the traced system giving the original completion times (default MODEL)."),
    scheduler: str = typer.Option("auto", "--scheduler", help="fcfs, sstf, clook or satf; auto: a DiskSim .parv's driver policy, else fcfs."),
    queue_depth: int = typer.Option(0, "--queue-depth", help="Requests handed to the device at once (0: unlimited)."),
    wrap: bool = typer.Option(False, "--wrap", help="Fold addresses beyond the device's capacity back onto it."),
    raid: Optional[str] = typer.Option(None, "--raid", help="Run an array of MODEL disks: raid0, raid1, raid10, raid4, raid5, raid6."),
    disks: int = typer.Option(4, "--disks", help="Disks in the array."),
    chunk: str = typer.Option("64KiB", "--chunk", help="Array chunk size (65536, 64KiB, ...)."),
    layout: Optional[str] = typer.Option(None, "--layout", help="Array layout (mdadm names): RAID-5/6 left-symmetric (default), ...; RAID-10 n2 (default), f2, o2, n2f2 (far regions sized by the model's capacity)."),
    failed: Optional[str] = typer.Option(None, "--failed", help="Failed disks of the array, comma-separated (degraded mode)."),
    allow_loss: bool = typer.Option(False, "--allow-loss", help="Run with more --failed disks than the level tolerates: requests of lost blocks are unreadable and left out of the response figures."),
    block_size: int = typer.Option(4096, "--block-size", help="Array block size in bytes."),
    disk_size: Optional[str] = typer.Option(None, "--disk-size", help="Bytes of each member the array uses (4GiB, ...; default: the whole model disk)."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Replace the --failed disks by spares and rebuild them in the background (MD recovery)."),
    rebuild_at: float = typer.Option(0.0, "--rebuild-at", help="--rebuild: when the spares arrive (ms of simulated time)."),
    rebuild_window: int = typer.Option(4, "--rebuild-window", help="--rebuild: rebuild steps (chunk rows) in flight at most."),
    rebuild_min: int = typer.Option(1000, "--rebuild-min", help="--rebuild: MD sync_speed_min (KB/s): the speed kept while user I/O is present."),
    rebuild_max: int = typer.Option(200000, "--rebuild-max", help="--rebuild: MD sync_speed_max (KB/s): the speed cap."),
    rebuild_order: str = typer.Option("md", "--rebuild-order", help="--rebuild: md (sequential, MD), pro (popular zones first), dor (disk-oriented, low priority), pro-dor, live (live blocks only; mirrors)."),
    rebuild_idle: str = typer.Option("simple", "--rebuild-idle", help="--rebuild: MD's idle test and speed rule: simple (default), md2611 (the PRO paper's kernel), md6 (today's md.c)."),
    live_frac: Optional[float] = typer.Option(None, "--live-frac", help="--rebuild: copy only live blocks (D-GRAID's live-block recovery, RAID-1/10): this share of each lost member is live (selects --rebuild-order live)."),
    live_layout: str = typer.Option("compact", "--live-layout", help="--live-frac: compact (the member's first blocks) or spread (evenly interleaved)."),
    live_unit: Optional[str] = typer.Option(None, "--live-unit", help="--live-layout spread: the live share comes in runs of this size (32KiB: files; default one block)."),
    live_map: Optional[Path] = typer.Option(None, "--live-map", help="--rebuild: live member blocks of a model run (the JSON of `blocklab dgraid live --json`; selects --rebuild-order live)."),
    fit: Optional[str] = typer.Option(None, "--fit", help="Fit trace addresses onto the array: none, wrap (as --wrap), scale (compress the trace's span linearly, keeping hot regions in place)."),
    xor_ms: float = typer.Option(0.0, "--xor-ms", help="Compute time of an XOR / P+Q step (arrays)."),
    interval: float = typer.Option(0.0, "--interval", help="Time-series interval in ms (default 1000 with --timeseries)."),
    timeseries: Optional[Path] = typer.Option(None, "--timeseries", help="Write the per-interval time series to this CSV."),
    sort: bool = SortOpt,
    sort_window_s: Optional[float] = SortWindowOpt,
    skip_bad: bool = SkipBadOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Replay traces in time on a disk; print response times, service time and utilization."""
    if not trace and not synthetic:
        fail("give a trace (--trace) or --synthetic (a DiskSim .parv's own workload)")
    if seed is not None and seed < 0:
        fail("--seed must be a non-negative integer")
    if replay.lower() not in REPLAYS:
        fail(f"unknown replay discipline `{replay}`; valid: {', '.join(REPLAYS)}")
    try:
        failed_disks = [int(x) for x in failed.split(",") if x.strip()] if failed else []
    except ValueError:
        fail(f"--failed: `{failed}` is not a comma-separated list of disk numbers")
    if any(d < 0 for d in failed_disks) or disks < 1:
        fail("disk numbers and counts must be non-negative")
    if rebuild:
        if not raid:
            fail("--rebuild needs an array (--raid) with failed disks (--failed)")
        if not failed_disks:
            fail("--rebuild needs failed disks to rebuild (--failed)")
        if rebuild_window < 1:
            fail("--rebuild-window must be at least 1")
        if rebuild_min < 0 or rebuild_max < 1 or rebuild_at < 0:
            fail("--rebuild-min must be >= 0, --rebuild-max >= 1 and --rebuild-at >= 0")
    if timeseries is not None and interval <= 0:
        interval = 1000.0
    out = json.loads(_core.disk_run(
        model, [str(t) for t in trace or []], format=format, replay=replay.lower(), speedup=speedup,
        outstanding=outstanding, think_ms=think, infinitely_fast=infinitely_fast, window=window, scheduler=scheduler,
        queue_depth=queue_depth, wrap=wrap, interval_ms=interval, xor_ms=xor_ms,
        reference_model=reference, skip_bad=skip_bad, raid=raid, disks=disks, chunk=chunk,
        failed=failed_disks, block_size=block_size, layout=layout, disk_size=disk_size,
        rebuild=rebuild, rebuild_at_ms=rebuild_at, rebuild_window=rebuild_window,
        rebuild_min_kbps=rebuild_min, rebuild_max_kbps=rebuild_max,
        rebuild_order=rebuild_order.lower(), rebuild_idle=rebuild_idle.lower(), fit=fit,
        live_frac=live_frac, live_layout=live_layout.lower(), live_map=None if live_map is None else str(live_map),
        live_unit=live_unit, allow_loss=allow_loss,
        sort_window=sort_window(sort, sort_window_s), synthetic=synthetic, seed=seed,
    ))
    place_timeseries(out, out.pop("timeseries", None), timeseries)
    if json_out:
        print_json(out)
        return
    print(f"replay {out['replay']}, scheduler {out['scheduler']}, {out['streams']} stream(s), "
          f"tenant map {out['tenant_map']}, fit {out['fit']}")
    syn = out.get("synthetic")
    if syn:
        print(f"synthetic workload: seed {syn['seed']}, {syn['processes']} process(es) on {syn['cpus']} CPU(s), "
              f"{syn['generated']} requests issued ({syn['reads']} reads)")
    served_only = out["response_covers"] == "served"
    if out.get("reordered"):
        print(reordered_line(out["reordered"]))
    for k in SUMMARY:
        v = out[k]
        line = f"  {k:18} {v:.4f}" if isinstance(v, float) else f"  {k:18} {v}"
        if served_only and k == "avg_response_ms":
            line += "  (served requests only)"
        print(line)
        if k == "avg_response_ms" and out.get("overall_response_ms") not in (None, v):
            # A DiskSim system with arrays: the IOdriver average counts member-disk
            # operations; the logical requests' average is what runvalid reads for sets of arrays.
            print(f"  {'overall_response_ms':18} {out['overall_response_ms']:.4f}  (logical requests, DiskSim's overall I/O system)")
        if k == "requests" and (out["unreadable"] or out["unreadable_blocks"]):
            print(f"  {'unreadable':18} {out['unreadable']} requests, {out['unreadable_blocks']} blocks "
                  f"(data lost: left out of the response figures)")
    for i, d in enumerate(out["devices"]):
        print(f"  disk {i}: ops {d['ops']}, busy {d['busy_ms']:.1f} ms, util {d['utilization']:.3f}, "
              f"mean queue {d['mean_queue']:.2f}, max queue {d['max_queue']}")
    rb = out.get("rebuild")
    if rb:
        state = f"{rb['rebuild_ms']:.1f} ms" if rb["finished"] else "unfinished"
        print(f"rebuild of disk(s) {','.join(map(str, rb['disks']))} from {rb['start_ms']:.1f} ms: {state}, "
              f"{rb['rebuild_rows']}/{rb['rows_total']} rows of {rb['row_kib']} KiB, {rb['avg_kbps']:.0f} KB/s, "
              f"{rb['pauses']} pauses")
        if rb.get("order") == "live":
            st = rb["order_stats"]
            print(f"  live blocks {st['live_blocks']} of {st['member_blocks']} per member "
                  f"({100 * st['live_blocks'] / max(1, st['member_blocks'] * len(rb['disks'])):.1f} %), "
                  f"{st['extents']} extents copied ({st['copied_blocks']} blocks, {st['late_blocks']} written during the rebuild)")
        if rb.get("order", "md") != "md" or rb.get("idle", "simple") != "simple":
            print(f"  order {rb['order']}, idle rule {rb['idle']}, throttled {str(rb['throttled']).lower()}, "
                  f"priority {rb['priority']}")
        print(f"  rebuild ops: {rb['rebuild_reads']} reads ({rb['rebuild_read_blocks']} blocks), "
              f"{rb['rebuild_writes']} writes ({rb['rebuild_write_blocks']} blocks)")
        causes = ", ".join(f"{c} {o['reads']}r/{o['writes']}w" for c, o in rb["ops_by_cause"].items())
        print(f"  ops by cause: {causes}")
        for k in ("user_before", "user_during", "user_after"):
            p = rb[k]
            print(f"  {k:12} requests {p['requests']}, avg {p['avg_response_ms']:.4f} ms, max {p['max_response_ms']:.4f} ms")
        lr = rb.get("lost_reads")
        if lr and lr["blocks"]:
            print(f"  lost-unit reads during the rebuild: {lr['blocks']} blocks, {lr['from_spare']} from the spare "
                  f"({100 * lr['share_from_spare']:.1f} %)")


def register(app: typer.Typer) -> None:
    """Add `run` to the `disk` group of `disk_cmd`."""
    disk_cmd.disk_app.command("run")(run)
