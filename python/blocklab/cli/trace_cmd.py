"""`blocklab trace ...`: trace statistics, reuse analysis, partition plans, conversion, merging and
the list of formats."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from blocklab import _core
from blocklab.cli.common import BlkparseEventOpt, BlockSizeOpt, FormatOpt, JsonOpt, SkipBadOpt, print_json

app = typer.Typer(help="Inspect and convert traces.", no_args_is_help=True)


def _report_skipped(skipped: int) -> None:
    if skipped:
        print(f"blocklab: skipped {skipped} malformed record{'s' if skipped != 1 else ''} (--skip-bad)", file=sys.stderr)


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" or n == int(n) else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f} %" if whole else "-"


@app.command()
def stats(
    trace: Path = typer.Argument(..., help="Trace file (compressed .gz/.zst/.bz2/.xz is fine)."),
    format: str = FormatOpt,
    block_size: int = BlockSizeOpt,
    skip_bad: bool = SkipBadOpt,
    blkparse_event: str = BlkparseEventOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Statistics of a trace in one streaming pass: requests, reads/writes, block accesses,
    unique blocks, span, IOPS, request sizes, sequentiality and access classes."""
    if block_size <= 0:
        raise ValueError(f"block size must be positive, not {block_size}")
    s = json.loads(_core.trace_stats(str(trace), format, block_size, skip_bad, blkparse_event))
    _report_skipped(s["skipped"])
    if json_out:
        print_json(s)
        return
    console = Console()
    n = s["requests"]
    t = Table(title=f"{trace}  (block size {s['block_size']} B)", show_header=False)
    t.add_column("", style="bold")
    t.add_column("", justify="right")
    t.add_row("requests", f"{n:,}")
    t.add_row("reads", f"{s['reads']:,}  ({_pct(s['reads'], n)})")
    t.add_row("writes", f"{s['writes']:,}  ({_pct(s['writes'], n)})")
    t.add_row("bytes read / written", f"{_human_bytes(s['bytes_read'])} / {_human_bytes(s['bytes_written'])}")
    t.add_row("tenants", f"{s['tenants']:,}")
    t.add_row("block accesses", f"{s['block_accesses']:,}")
    t.add_row("unique blocks", f"{s['unique_blocks']:,}  ({_human_bytes(s['unique_blocks'] * s['block_size'])})")
    if s["start"] is not None:
        t.add_row("time", f"{s['start']:.6g} s → {s['end']:.6g} s")
    t.add_row("span", f"{s['span']:.3f} s")
    t.add_row("IOPS", "-" if s["iops"] is None else f"{s['iops']:,.1f}")
    t.add_row("sequential", f"{s['sequential']:,}  ({_pct(s['sequential'], n)})")
    console.print(t)

    c = s["classes"]
    total = s["block_accesses"]
    ct = Table(title="access classes (block accesses)")
    ct.add_column("class")
    ct.add_column("accesses", justify="right")
    ct.add_column("share", justify="right")
    for name, key in (("cold read", "cold_read"), ("cold write", "cold_write"), ("RAR", "rar"),
                      ("RAW (read after write)", "raw"), ("WAR (write after read)", "war"), ("WAW", "waw")):
        ct.add_row(name, f"{c[key]:,}", _pct(c[key], total))
    console.print(ct)

    ht = Table(title="request sizes")
    ht.add_column("size", justify="right")
    ht.add_column("requests", justify="right")
    ht.add_column("share", justify="right")
    for b in s["size_histogram"]:
        label = "0" if b["lo"] == 0 else f"[{_human_bytes(b['lo'])}, {_human_bytes(b['hi']) if b['hi'] else '∞'})"
        ht.add_row(label, f"{b['count']:,}", _pct(b["count"], n))
    console.print(ht)


@app.command()
def convert(
    src: Path = typer.Argument(..., help="Source trace."),
    dst: Path = typer.Argument(..., help="Destination file (.gz or .zst compresses)."),
    format: str = FormatOpt,
    to: str = typer.Option("auto", "--to", help="Output format: csv (native), oracle (libCacheSim oracleGeneral) or spc (SPC/UMass); auto (default): by DST's name, .csv / .oracle (or oracleGeneral in the name) / .spc, before .gz or .zst."),
    block_size: int = BlockSizeOpt,
    skip_bad: bool = SkipBadOpt,
    blkparse_event: str = BlkparseEventOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Convert a trace to native CSV or SPC (one line per request) or to oracleGeneral
    (one record per block access of --block-size, with next-access indexes)."""
    if block_size <= 0:
        raise ValueError(f"block size must be positive, not {block_size}")
    s = json.loads(_core.trace_convert(str(src), format, str(dst), to, block_size, skip_bad, blkparse_event))
    _report_skipped(s["skipped"])
    if json_out:
        print_json(s)
        return
    what = "requests" if s["to"] == "csv" else "block accesses"
    extra = "" if s["unique_blocks"] is None else f", {s['unique_blocks']:,} unique blocks of {s['block_size']} B"
    print(f"{s['destination']}: {s['records']:,} {what} from {s['requests']:,} requests ({s['to']}{extra})")


_CLASSES = (("cold R", "cold_read"), ("cold W", "cold_write"), ("RAR", "rar"), ("RAW", "raw"), ("WAR", "war"), ("WAW", "waw"))


def _tenant(t) -> str:
    return "all" if t is None else str(t)


@app.command()
def reuse(
    trace: Path = typer.Argument(..., help="Trace file."),
    format: str = FormatOpt,
    per_tenant: bool = typer.Option(False, "--per-tenant", help="One LRU stack per tenant (else one shared stack)."),
    window: float = typer.Option(None, "--window", help="Also report per window of this many seconds."),
    history: str = typer.Option("all", "--history", help="all: distances reach into earlier windows; window: each window starts afresh."),
    block_size: int = BlockSizeOpt,
    skip_bad: bool = SkipBadOpt,
    blkparse_event: str = BlkparseEventOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Reuse analysis in one pass: per tenant (and window) the access classes and the LRU sizes
    in which every reuse hits (trd_size) and every read reuse hits (urd_size, ECI-Cache's useful
    reuse distance), with their 99th percentiles. Sizes are in blocks."""
    if block_size <= 0:
        raise ValueError(f"block size must be positive, not {block_size}")
    s = json.loads(_core.trace_reuse(str(trace), format, block_size, per_tenant, window, history, skip_bad, blkparse_event))
    _report_skipped(s["skipped"])
    if json_out:
        print_json(s)
        return
    windowed = s["windows"] is not None
    # Twelve to fourteen columns: wider than the 80 columns rich assumes off a terminal.
    console = Console(width=max(Console().width, 150 if windowed else 132))
    t = Table(title=f"{trace}: reuse (block size {s['block_size']} B, sizes in blocks)")
    if windowed:
        t.add_column("window", justify="right")
        t.add_column("start s", justify="right")
    t.add_column("tenant", justify="right")
    t.add_column("accesses", justify="right")
    for name, _ in _CLASSES:
        t.add_column(name, justify="right")
    for name in ("trd_size", "urd_size", "trd_p99_size", "urd_p99_size"):
        t.add_column(name, justify="right", style="bold" if "p99" not in name else None)

    def row(prefix, r):
        c = r["classes"]
        t.add_row(*prefix, _tenant(r["tenant"]), f"{r['accesses']:,}", *(f"{c[k]:,}" for _, k in _CLASSES),
                  f"{r['trd_size']:,}", f"{r['urd_size']:,}", f"{r['trd_p99_size']:,}", f"{r['urd_p99_size']:,}")

    if windowed:
        for w in s["windows"]:
            for r in w["tenants"]:
                row((str(w["window"]), f"{w['start']:.6g}"), r)
    else:
        for r in s["tenants"]:
            row((), r)
    console.print(t)
    tot = s["totals"]
    if s["per_tenant"]:
        print(f"whole trace, summed over {tot['rows']:,} tenant{'s' if tot['rows'] != 1 else ''}: trd_size {tot['trd_size']:,}, urd_size {tot['urd_size']:,}"
              f" (p99: {tot['trd_p99_size']:,} / {tot['urd_p99_size']:,}) blocks")


@app.command()
def partition(
    trace: Path = typer.Argument(..., help="Trace file."),
    format: str = FormatOpt,
    capacity: str = typer.Option(None, "--capacity", help="Cache size: blocks, or bytes (64MiB, 1GiB). Default: unlimited."),
    window: float = typer.Option(None, "--window", help="Re-size every this many seconds (default: the whole trace is one window)."),
    history: str = typer.Option("all", "--history", help="all | window (see `trace reuse`)."),
    solver: str = typer.Option("exact", "--solver", help="exact (dynamic programming on a grid) or greedy (UCP lookahead)."),
    units: int = typer.Option(None, "--units", help="Grid of the exact solver (default 4096 units)."),
    estimator: str = typer.Option("max", "--estimator", help="max (the paper) or pNN (e.g. p99)."),
    objective: str = typer.Option("hit-ratio", "--objective", help="hit-ratio (sum of per-tenant hit ratios, Eq. 2) or hits."),
    min_blocks: int = typer.Option(0, "--min-blocks", help="Least blocks every active tenant gets."),
    theta: float = typer.Option(0.5, "--theta", help="ECI write policy: read-only when (WAR+WAW)/accesses >= theta."),
    block_size: int = BlockSizeOpt,
    skip_bad: bool = SkipBadOpt,
    blkparse_event: str = BlkparseEventOpt,
    json_out: bool = JsonOpt,
) -> None:
    """What Centaur (reuse distance) and ECI-Cache (useful reuse distance) would allocate per tenant,
    window by window, and ECI's write policy: the sizing side of the SSD tier, without a cache."""
    if block_size <= 0:
        raise ValueError(f"block size must be positive, not {block_size}")
    if min_blocks < 0:
        raise ValueError(f"--min-blocks must not be negative, not {min_blocks}")
    if units is not None and units < 0:
        raise ValueError(f"--units must be positive, not {units}")
    s = json.loads(_core.trace_partition(str(trace), format, block_size, capacity, window, history, solver, units,
                                         estimator, objective, min_blocks, theta, skip_bad, blkparse_event))
    _report_skipped(s["skipped"])
    if json_out:
        print_json(s)
        return
    cap = "unlimited" if s["capacity"] is None else f"{s['capacity']:,} blocks"
    t = Table(title=f"{trace}: capacity {cap}, block {s['block_size']} B, solver {s['solver']}, estimator {s['estimator']}")
    for name in ("window", "start s", "tenants", "Centaur wants", "Centaur gets", "ECI wants", "ECI gets", "read-only"):
        t.add_column(name, justify="right")
    for w in s["windows"]:
        def cell(d, key):
            return f"{d[key]:,}" + ("" if d["feasible"] or key == "wanted" else " *")
        ro = sum(p["write_policy"] == "ro" for p in w["write_policies"])
        t.add_row(str(w["window"]), f"{w['start']:.6g}", f"{len(w['write_policies']):,}",
                  cell(w["centaur"], "wanted"), cell(w["centaur"], "allocated"),
                  cell(w["eci"], "wanted"), cell(w["eci"], "allocated"), f"{ro:,}")
    Console(width=max(Console().width, 120)).print(t)
    m = s["summary"]
    red = "-" if m["eci_reduction"] is None else f"{100 * m['eci_reduction']:.1f} %"
    print(f"mean allocation over {m['windows']} window(s): Centaur {m['centaur_mean_allocated']:,.1f}, "
          f"ECI {m['eci_mean_allocated']:,.1f} blocks (ECI {red} smaller); infeasible windows: "
          f"Centaur {m['centaur_infeasible_windows']}, ECI {m['eci_infeasible_windows']} (* = shared by the solver); "
          f"read-only decisions: {m['read_only_decisions']}")


@app.command()
def merge(
    dst: Path = typer.Argument(..., help="Output: native CSV (.gz or .zst compresses)."),
    inputs: list[str] = typer.Argument(..., help="Input traces, each PATH or PATH:FORMAT."),
    format: str = typer.Option("auto", "--format", "-f", help="Format of the inputs given without :FORMAT."),
    tenants: str = typer.Option("input", "--tenants", help="input: tenant = input index; pair: one tenant per (input, input tenant)."),
    align: str = typer.Option("start", "--align", help="start: every input starts at 0 s; none: times as read."),
    span: float = typer.Option(None, "--span", help="Rescale every input's time line onto [0, SPAN] seconds (reads each input twice)."),
    skip_bad: bool = SkipBadOpt,
    blkparse_event: str = BlkparseEventOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Interleave traces by time into one native CSV trace whose tenants are the inputs
    (a streaming k-way merge)."""
    s = json.loads(_core.trace_merge(str(dst), inputs, format, tenants, align, span, skip_bad, blkparse_event))
    _report_skipped(sum(i["skipped"] for i in s["inputs"]))
    if json_out:
        print_json(s)
        return
    print(f"{s['destination']}: {s['requests']:,} requests from {len(s['inputs'])} inputs, {len(s['tenants']):,} tenants"
          + (f", {s['out_of_order']:,} out of time order" if s["out_of_order"] else ""))
    if len(s["tenants"]) <= 40:
        for t in s["tenants"]:
            src = s["inputs"][t["input"]]["source"]
            of = "" if t["input_tenant"] is None else f" tenant {t['input_tenant']}"
            print(f"  tenant {t['tenant']}: {src}{of}")


@app.command()
def formats(json_out: bool = JsonOpt) -> None:
    """List the trace formats (`--format` names) with a one-line description."""
    rows = _core.trace_formats()
    if json_out:
        print_json([{"name": n, "description": d} for n, d in rows])
        return
    t = Table(show_header=True)
    t.add_column("format", style="bold")
    t.add_column("description")
    t.add_row("auto", "sniff by file name, then by content (ambiguous shapes ask for --format)")
    for name, desc in rows:
        t.add_row(name, desc)
    Console().print(t)


@app.command()
def synth(
    dst: Path = typer.Argument(..., help="Output file, or - for standard output (csv only: drawn and written as it goes, e.g. piped into `blocklab cache -`)."),
    accesses: int = typer.Option(1_000_000, "--accesses", help="Number of block accesses."),
    universe: int = typer.Option(100_000, "--universe", help="Number of distinct blocks to draw from."),
    alpha: float = typer.Option(1.0, "--alpha", help="Zipf skew (0 = uniform)."),
    seed: int = typer.Option(42, "--seed", help="Seed of the generator: the same seed gives the same file."),
    to: str = typer.Option("csv", "--to", help="csv (native; one 4 KiB access each, blocks that are multiples of 4 written) or oracle (oracleGeneral, reads)."),
) -> None:
    """Write a seeded synthetic Zipf(alpha) block trace, one block per access."""
    if accesses <= 0 or universe <= 0:
        raise ValueError("--accesses and --universe must be positive")
    to_stdout = str(dst) == "-"
    if to == "csv":
        _core.write_zipf_csv(str(dst), accesses, universe, alpha, seed)
    elif to == "oracle":
        if to_stdout:
            # Each record names its block's next access: the whole trace is drawn before the first is written.
            raise ValueError("--to oracle cannot write to standard output (-): give a file")
        _core.write_zipf_oracle(str(dst), accesses, universe, alpha, seed, 1)
    else:
        raise ValueError(f"unknown --to `{to}`; valid: csv, oracle")
    # On stdout the trace is the output: the summary goes beside it.
    print(f"{'standard output' if to_stdout else dst}: {accesses:,} accesses, Zipf({alpha}) over {universe:,} blocks, "
          f"seed {seed} ({to})", file=sys.stderr if to_stdout else sys.stdout)


def register(parent: typer.Typer) -> None:
    """Add the `trace` group to the main app."""
    parent.add_typer(app, name="trace")
