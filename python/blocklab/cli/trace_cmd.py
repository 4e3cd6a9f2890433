"""`blocklab trace ...`: trace statistics, conversion and the list of formats."""

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
    to: str = typer.Option(..., "--to", help="Output format: csv (native) or oracle (libCacheSim oracleGeneral)."),
    block_size: int = BlockSizeOpt,
    skip_bad: bool = SkipBadOpt,
    blkparse_event: str = BlkparseEventOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Convert a trace to native CSV (one line per request) or to oracleGeneral
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
    dst: Path = typer.Argument(..., help="Output file."),
    accesses: int = typer.Option(1_000_000, "--accesses", help="Number of block accesses."),
    universe: int = typer.Option(100_000, "--universe", help="Number of distinct blocks to draw from."),
    alpha: float = typer.Option(1.0, "--alpha", help="Zipf skew (0 = uniform)."),
    seed: int = typer.Option(42, "--seed", help="Seed of the generator: the same seed gives the same file."),
    to: str = typer.Option("csv", "--to", help="csv (native; one 4 KiB access each, blocks that are multiples of 4 written) or oracle (oracleGeneral, reads)."),
) -> None:
    """Write a seeded synthetic Zipf(alpha) block trace, one block per access."""
    if accesses <= 0 or universe <= 0:
        raise ValueError("--accesses and --universe must be positive")
    if to == "csv":
        _core.write_zipf_csv(str(dst), accesses, universe, alpha, seed)
    elif to == "oracle":
        _core.write_zipf_oracle(str(dst), accesses, universe, alpha, seed, 1)
    else:
        raise ValueError(f"unknown --to `{to}`; valid: csv, oracle")
    print(f"{dst}: {accesses:,} accesses, Zipf({alpha}) over {universe:,} blocks, seed {seed} ({to})")
