"""`blocklab run`: run a stack file (host caches, array, rebuild, devices) over traces,
counted or in simulated time. The engine does the work (crates/blocklab/src/stack);
this module converts arguments and prints the result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from blocklab.cli.common import FormatOpt, JsonOpt, SkipBadOpt, fail, literal, place_timeseries, print_json, reordered_line

EXECUTORS = ("count", "timed")


def run(
    stack: Path = typer.Argument(..., help=literal("Stack file (TOML): [replay], [[cache]], [array], [array.rebuild], [device].")),
    trace: List[Path] = typer.Option(..., "--trace", "-t", help="Trace file; repeat to replay several traces as independent streams."),
    format: str = FormatOpt,
    executor: str = typer.Option("timed", "--executor", "-x", help="timed (simulated time) or count (no time: every plan completes at once)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a key of the stack file by its dotted path: cache.0.size=10%, array.failed=[0]. Repeatable."),
    unset: Optional[List[str]] = typer.Option(None, "--unset", help=literal("Remove a key or a whole section of the stack file by its dotted path, e.g. array.rebuild (the array stays degraded, no rebuild). Applied before --set. Repeatable.")),
    sort: bool = typer.Option(False, "--sort", help=literal("Put requests whose times go back in time order within --sort-window and report how many moved (default: such a trace is an error naming the line). Same as [replay] sort = true.")),
    sort_window: Optional[float] = typer.Option(None, "--sort-window", help="Seconds of trace time --sort may move a request (default 1; replay.sort_window). Implies --sort."),
    timeseries: Optional[Path] = typer.Option(None, "--timeseries", help="timed: write the per-interval series (replay.interval ms, default 1000) to this CSV."),
    skip_bad: bool = SkipBadOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Run a stack file over traces; print per-layer hits, array and device work, response times."""
    from blocklab import _core

    if executor not in EXECUTORS:
        fail(f"unknown executor `{executor}`; valid: {', '.join(EXECUTORS)}")
    for k in unset or []:
        if "=" in k or not k.strip():
            fail(f"--unset {k}: give a dotted key (e.g. array.rebuild), not KEY=VALUE")
    sets = [f"-{k.strip()}" for k in unset or []]
    sets += list(set_ or [])
    if sort or sort_window is not None:
        sets.append("replay.sort=true")
    if sort_window is not None:
        sets.append(f"replay.sort_window={float(sort_window)!r}")
    if timeseries is not None and not any(s.split("=", 1)[0].strip() == "replay.interval" for s in sets):
        sets.append("replay.interval=1000.0")
    out = json.loads(_core.run_stack(str(stack), [str(t) for t in trace], format=format, executor=executor,
                                     sets=sets, skip_bad=skip_bad))
    timing = out.get("timing") or {}
    place_timeseries(timing, timing.pop("timeseries", None), timeseries)
    if json_out:
        print_json(out)
        return
    print_result(out, stack)


def print_result(out: dict, stack) -> None:
    """A readable summary of a stack result."""
    import sys

    from rich.console import Console
    from rich.table import Table

    # Off a terminal (pipes, logs) rich would wrap at 80 columns.
    con = Console() if sys.stdout.isatty() else Console(width=120)
    head = f"{stack}: {out['executor']} executor, {out['requests']:,} requests, {out['block_accesses']:,} block accesses"
    if out.get("skipped"):
        head += f", {out['skipped']} malformed records skipped"
    con.print(head)
    layout = f"layout: tenant map {out['tenant_map']}, fit {out['fit']}"
    if out.get("unique_blocks") is not None:
        layout += f"; footprint {out['unique_blocks']:,} unique stack blocks (what `%` sizes are shares of)"
    con.print(layout)
    print_reordered(con, out.get("reordered"))
    if out["layers"]:
        t = Table(title="cache layers")
        for c in ("layer", "policy", "write", "blocks", "accesses", "hits", "miss ratio", "read hits", "dirty evictions", "flushed"):
            t.add_column(c, justify="left" if c in ("layer", "policy", "write") else "right")
        for l in out["layers"]:
            t.add_row(l["name"], l["policy"], l["write"], f"{l['cache_blocks']:,}", f"{l['accesses']:,}", f"{l['hits']:,}",
                      f"{l['miss_ratio']:.4f}", f"{l['read_hits']:,}", f"{l['dirty_evictions']:,}", f"{l['flushed_blocks']:,}")
        con.print(t)
    if out.get("tier"):
        print_tier(con, out["tier"])
    a = out.get("array")
    if a:
        con.print(f"array: {a['level']} x {a['disks']} ({a['layout']}, chunk {a['chunk_bytes'] // 1024} KiB), "
                  f"{failure_state(a, out.get('rebuild'))}; surviving-disk blocks read {a['surviving_reads']:,}, "
                  f"written {a['surviving_writes']:,}; RGR {a['rgr']:.4f}")
        if a["unreadable_blocks"]:
            con.print(f"  unreadable {a['unreadable_blocks']:,} blocks: data lost past the array's redundancy")
        causes = ", ".join(f"{c} {v['reads']:,}r/{v['writes']:,}w ({v['blocks']:,} blocks)"
                           for c, v in a["ops_by_cause"].items())
        con.print(f"  ops by cause: {causes}")
    for d in out["devices"]:
        line = f"  disk {d['disk']}: ops {d['ops']:,} ({d['reads']:,} reads, {d['writes']:,} writes)"
        if d.get("busy_ms") is not None:
            line += f", busy {d['busy_ms']:.1f} ms, util {d['utilization']:.3f}, mean queue {d['mean_queue']:.2f}"
            if d.get("seek_ms") is not None and d["ops"]:
                per = {k: d[k] / d["ops"] for k in ("seek_ms", "rotation_ms", "transfer_ms", "overhead_ms")}
                line += (f"; per op: seek {per['seek_ms']:.2f}, rotation {per['rotation_ms']:.2f}, "
                         f"transfer {per['transfer_ms']:.2f}, overhead {per['overhead_ms']:.2f} ms")
        con.print(line)
    for b in out.get("write_buffers") or []:
        con.print(f"write buffer of {b['name']}: {b['buffer_blocks']:,} blocks, {b['write_requests']:,} writes, "
                  f"{b['rewrites']:,} rewrites, {b['destages']:,} destages ({b['destaged_blocks']:,} blocks, "
                  f"{b['age_destages']:,} by age), {b['full_waits']:,} waits for room, "
                  f"{b['read_hits']:,} read hits")
    r = out.get("response")
    if r:
        t = Table(title="response time (ms)" + (", served requests only" if r["covers"] == "served" else ""))
        for c in ("requests", "count", "avg", "p50", "p95", "p99", "max"):
            t.add_column(c, justify="left" if c == "requests" else "right")
        total = r["reads"]["requests"] + r["writes"]["requests"]
        t.add_row("all", f"{total:,}", *(f"{r[k]:.3f}" for k in ("avg_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms")))
        for k in ("reads", "writes"):
            s = r[k]
            t.add_row(k, f"{s['requests']:,}", *(f"{s[m]:.3f}" for m in ("avg_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms")))
        # A real replay of a stack with tenants: each tenant's export.
        for x in (out.get("real") or {}).get("tenants") or []:
            s = x["response"]
            t.add_row(f"tenant {x['tenant']} ({x['name']})", f"{s['requests']:,}",
                      *(f"{s[m]:.3f}" for m in ("avg_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms")))
        con.print(t)
        tm = out.get("timing")
        real = out.get("real")
        if tm:
            if r["covers"] == "served":
                con.print(f"  response times of served requests only: {tm['unreadable']:,} unreadable requests "
                          f"({(a or {}).get('unreadable_blocks', 0):,} blocks) left out")
            con.print(f"simulated {tm['sim_time_ms']:.1f} ms, utilization {tm['utilization']:.3f}, "
                      f"replay {tm['replay']}, scheduler {tm['scheduler']}")
        elif real:
            if r["covers"] == "served":
                con.print(f"  response times of served requests only: {real['errors']:,} refused requests left out")
            con.print(f"wall {real['wall_s']:.3f} s, replay {real['replay']}, {real['partial_block_reads']:,} blocks "
                      f"read to complete partial writes, {real['flushes']:,} flushes")
    rb = out.get("rebuild")
    if rb:
        state = f"{rb['rebuild_ms']:.1f} ms" if rb["finished"] else "unfinished"
        con.print(f"rebuild of disk(s) {','.join(map(str, rb['disks']))} from {rb['start_ms']:.1f} ms: {state}, "
                  f"{rb['rebuild_rows']}/{rb['rows_total']} rows, {rb['rebuild_reads']:,} reads, {rb['rebuild_writes']:,} writes")
        for k in ("user_before", "user_during", "user_after"):
            p = rb[k]
            if p["requests"]:
                con.print(f"  {k:12} requests {p['requests']:,}, avg {p['avg_response_ms']:.3f} ms, max {p['max_response_ms']:.3f} ms")


def failure_state(a: dict, rb) -> str:
    """What failed and what became of it: `failed [1]`, or `disk(s) 1 failed, rebuilt onto a spare from
    0.0 ms in 262632.3 ms` once a rebuild finished (the array's `failed` is then empty)."""
    parts = []
    if a["rebuilt"]:
        disks = ",".join(map(str, a["rebuilt"]))
        when = ""
        if rb and rb["rebuild_ms"] > 0:
            when = f" from {rb['start_ms']:.1f} ms in {rb['rebuild_ms']:.1f} ms"
        elif rb:  # counted: the whole rebuild at once
            when = f" at {rb['start_ms']:.1f} ms (at once, counted)"
        parts.append(f"disk(s) {disks} failed, rebuilt onto a spare{when}")
    if a["failed"] or not parts:
        parts.append(f"failed {a['failed'] or 'none'}")
    return ", ".join(parts)


def print_reordered(con, r: dict | None) -> None:
    """What --sort did to requests whose times went back."""
    if r is not None:
        con.print(reordered_line(r))


def print_tier(con, t: dict) -> None:
    """The SSD tier: one row per tenant and the totals."""
    from rich.table import Table

    def ratio(a, b):
        return f"{a / b:.4f}" if b else "-"

    tab = Table(title=f"SSD tier: {t['size']:,} blocks, {t['partitioner']}, windows of {t['window_s']:g} s "
                      f"({t['windows']} closed, {t['infeasible_windows']} infeasible)")
    cols = ("tenant", "allocated", "mean alloc", "accesses", "read hit", "SSD writes", "array writes", "destaged",
            "policy", "latency ms")
    for c in cols:
        tab.add_column(c, justify="right")
    rows = t["tenants"] + [dict(t, tenant="all", allocated_blocks=t["allocated_blocks"], write_policy="")]
    for x in rows:
        tab.add_row(str(x["tenant"]), f"{x['allocated_blocks']:,}", f"{x['mean_allocated_blocks']:,.1f}",
                    f"{x['accesses']:,}", ratio(x["read_hits"], x["reads"]), f"{x['ssd_writes']:,}",
                    f"{x['array_writes']:,}", f"{x['destaged']:,}", x["write_policy"], f"{x['latency_ms']:.3f}")
    con.print(tab)
    ppc = t.get("performance_per_cost")
    line = (f"  latency model (ssd/hdd ms): reads {t['read_latency_ms']:.3f} ms, writes {t['write_latency_ms']:.3f} ms; "
            f"performance-per-cost {ppc:.4g}" if ppc is not None else "  performance-per-cost -")
    if t.get("timed_performance_per_cost") is not None:
        line += f" (timed: {t['timed_performance_per_cost']:.4g})"
    eq2, eq2_ppc = t.get("eq2_latency_ms"), t.get("eq2_performance_per_cost")
    if eq2 is not None:
        # The paper's Eq. 2 per block access: a write costs hdd_ms whatever the policy.
        line += f"; the paper's Eq. 2 {eq2:.3f} ms per access" + (f", per cost {eq2_ppc:.4g}" if eq2_ppc else "")
    con.print(line + f"; SSD disk {t['ssd_disk']}, {t['dirty_blocks']:,} dirty blocks at the end")


def register(app: typer.Typer) -> None:
    """Add `run` to the main app."""
    app.command("run")(run)
