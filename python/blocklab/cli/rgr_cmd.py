"""`blocklab rgr`: Requests Generation Ratio of caches above a (failed) RAID array.

RGR (VDF paper, §3.1) = block operations on surviving disks caused by the
cache's misses / block accesses presented to the cache. The engine runs every
(policy, size) cell in one pass over the trace (see analysis/rgr.rs).
"""

from __future__ import annotations

import json
from typing import Optional

import typer

from blocklab.cli.common import (BlockSizeOpt, FormatOpt, JsonOpt, ReadsOnlyOpt, SkipBadOpt, fail,
                                 footprint_caption, print_json)

CELL_KEYS = ("policy", "cache_blocks", "accesses", "misses", "surviving_reads", "surviving_writes", "rgr")


def parse_failed(text: str) -> list[int]:
    """`0` or `0,3` -> [0, 3]; '' -> [] (no failure). Bad input exits with status 2."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit():
            fail(f"bad --failed `{text}`: expected disk numbers like 0 or 0,3")
        out.append(int(part))
    return out


def rgr(
    trace: str = typer.Argument(..., help="Trace file (compressed inputs are read transparently)."),
    format: str = FormatOpt,
    raid: str = typer.Option("5", "--raid", help="RAID level: 0, 1, 10, 4, 5, 6."),
    disks: int = typer.Option(5, "--disks", "-n", help="Number of disks in the array."),
    chunk: str = typer.Option("64KiB", "--chunk", help="Chunk size (bytes, or 64KiB, 1MiB)."),
    layout: Optional[str] = typer.Option(None, "--layout", help="MD layout: RAID-5/6 left-symmetric (default), ...; RAID-10 n2 (default), f2, o2, n2f2, ..."),
    disk_size: Optional[str] = typer.Option(None, "--disk-size", help="Each member disk's size (4GiB, ...): needed by RAID-10 far layouts (f2, n2f2)."),
    failed: str = typer.Option("0", "--failed", help="Failed disks, comma-separated (empty string: none)."),
    allow_loss: bool = typer.Option(False, "--allow-loss", help="Run with more --failed disks than the level tolerates: lost blocks cost nothing and are counted as unreadable."),
    fail_at: Optional[str] = typer.Option(None, "--fail-at", help="When the disks fail: seconds (30, 2.5s) or a request index (1000req); default: from the start."),
    policy: str = typer.Option("lru,vdf-lru,lfu,vdf-lfu", "--policy", "-p", help="Comma-separated policies (lru, lfu, vdf-lru, vdf-lfu, gds, ...)."),
    size: str = typer.Option("5%", "--size", "-s", help="Comma-separated cache sizes: blocks, bytes (64MiB) or a share of the unique blocks (5%)."),
    tenant_map: str = typer.Option("key", "--tenant-map", help="key: each tenant is its own volume (tenant<<40|block); ignore: tenants share one volume."),
    miss_trace: Optional[str] = typer.Option(None, "--miss-trace", help="Write the misses (with times) as native CSV; several cells write OUT.stem.POLICY.SIZE.ext."),
    block_size: int = BlockSizeOpt,
    reads_only: bool = ReadsOnlyOpt,
    skip_bad: bool = SkipBadOpt,
    json_out: bool = JsonOpt,
) -> None:
    """RGR of each (policy, size) cell over a RAID array with failed disks."""
    from blocklab import _core

    failed_disks = parse_failed(failed)
    if disks < 1:
        fail("--disks must be at least 1")
    for d in failed_disks:
        if d >= disks:
            fail(f"failed disk {d} does not exist: the array has disks 0..{disks - 1}")
    out = json.loads(_core.rgr(trace, format, skip_bad, block_size, reads_only, raid, disks, chunk, layout,
                               failed_disks, fail_at, policy, size, tenant_map, miss_trace, disk_size=disk_size,
                               allow_loss=allow_loss))
    lossy = any(c["unreadable_blocks"] for c in out["cells"])
    keys = CELL_KEYS + (("unreadable_blocks",) if lossy else ())
    cells = [{k: c[k] for k in keys} for c in out["cells"]]
    if json_out:
        print_json(cells)
        return
    from rich.console import Console
    from rich.table import Table

    title = (f"{trace}: RGR, RAID-{raid} x {disks} disks, failed {failed_disks or 'none'}"
             + (f" at {fail_at}" if fail_at else ""))
    table = Table(title=title)
    cols = ("policy", "cache blocks", "accesses", "misses", "surv. reads", "surv. writes", "RGR")
    for col in cols + (("unreadable blocks",) if lossy else ()):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for c in cells:
        row = [c["policy"], f"{c['cache_blocks']:,}", f"{c['accesses']:,}", f"{c['misses']:,}",
               f"{c['surviving_reads']:,}", f"{c['surviving_writes']:,}", f"{c['rgr']:.4f}"]
        if lossy:
            row.append(f"{c['unreadable_blocks']:,}")
        table.add_row(*row)
    Console().print(table)
    print(footprint_caption(size, out["unique_blocks"], out["footprint_of"],
                            f"tenant map {out['tenant_map']}, fit {out['fit']}"))
    if lossy:
        print("unreadable blocks: data lost past the array's redundancy; they cost nothing in RGR")


def register(app: typer.Typer) -> None:
    """Add `rgr` to the main app."""
    app.command("rgr")(rgr)
