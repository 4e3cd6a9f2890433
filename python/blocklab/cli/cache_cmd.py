"""`blocklab cache` (counted cache simulation) and `blocklab mrc` (LRU miss-ratio curves).

Imports stay lazy: only typer at module load, so that `blocklab cache ... --json`
starts fast; rich is imported only to draw a table or a progress bar.
"""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from blocklab.cli.common import BlockSizeOpt, FormatOpt, JsonOpt, ReadsOnlyOpt, SkipBadOpt, footprint_caption, print_json

CELL_KEYS = ("policy", "cache_blocks", "accesses", "hits", "misses", "miss_ratio")


def _progress_bar(label: str):
    """A rich progress display on a terminal (stderr), else None."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn(label),
        TextColumn("{task.completed:,.0f} accesses"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )


def _report_skipped(skipped: int, skip_bad: bool) -> None:
    if skip_bad:
        print(f"blocklab: skipped {skipped} malformed record(s)", file=sys.stderr)


RATIO_DIGITS = 4


def _fmt_ratio(x) -> str:
    return "-" if x is None else f"{x:.{RATIO_DIGITS}f}"


def cache(
    trace: str = typer.Argument(..., help="Trace file (compressed inputs are read transparently), or - for standard input (a pipe: name --format; sizes in blocks or bytes)."),
    format: str = FormatOpt,
    policy: str = typer.Option("lru", "--policy", "-p", help="Comma-separated policies, e.g. lru,fifo,arc."),
    size: str = typer.Option("5%", "--size", "-s", help="Comma-separated cache sizes: blocks (100), bytes (64MiB, 1GiB) or a share of the unique blocks (5%)."),
    block_size: int = BlockSizeOpt,
    reads_only: bool = ReadsOnlyOpt,
    skip_bad: bool = SkipBadOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Counted cache simulation: every (policy, size) cell in one pass over the trace."""
    from blocklab import _core

    if trace == "-":
        trace = "/dev/stdin"  # streamed: read once, as it comes
    bar = _progress_bar("simulating")
    if bar is None:
        out = _core.simulate_cache(trace, format, policy, size, block_size, reads_only, skip_bad, None)
    else:
        with bar:
            task = bar.add_task("sim", total=None)
            out = _core.simulate_cache(trace, format, policy, size, block_size, reads_only, skip_bad,
                                       lambda n: bar.update(task, completed=n))
    report = json.loads(out)
    _report_skipped(report["skipped"], skip_bad)
    cells = [{k: c[k] for k in CELL_KEYS} for c in report["cells"]]
    if json_out:
        print_json(cells)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{trace}: counted cache simulation")
    for col in ("policy", "cache blocks", "accesses", "hits", "misses", "miss ratio"):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for c in cells:
        table.add_row(c["policy"], f"{c['cache_blocks']:,}", f"{c['accesses']:,}", f"{c['hits']:,}",
                      f"{c['misses']:,}", _fmt_ratio(c["miss_ratio"]))
    Console().print(table)
    if report["unique_blocks"] is not None:
        print(footprint_caption(size, report["unique_blocks"], report["footprint_of"]))


def mrc(
    trace: str = typer.Argument(..., help="Trace file (compressed inputs are read transparently)."),
    format: str = FormatOpt,
    method: str = typer.Option("exact", "--method", "-m", help="exact (Mattson stack distances) or shards (sampled)."),
    rate: Optional[float] = typer.Option(None, "--rate", help="SHARDS fixed-rate sampling rate in (0, 1] (default 0.01)."),
    max_samples: Optional[int] = typer.Option(None, "--max-samples", help="SHARDS fixed-size: keep at most this many sampled blocks."),
    size: Optional[str] = typer.Option(None, "--size", "-s", help="Comma-separated sizes (as for `cache`); default: the whole curve."),
    block_size: int = BlockSizeOpt,
    reads_only: bool = ReadsOnlyOpt,
    skip_bad: bool = SkipBadOpt,
    json_out: bool = JsonOpt,
) -> None:
    """LRU miss-ratio curve in one pass: exact, or SHARDS (fixed-rate or fixed-size)."""
    from blocklab import _core

    if max_samples is not None and max_samples < 1:
        from blocklab.cli.common import fail

        fail("--max-samples must be at least 1")
    out = json.loads(_core.mrc(trace, format, method, rate, max_samples, size, block_size, reads_only, skip_bad))
    _report_skipped(out["skipped"], skip_bad)
    result = {"method": out["method"], "points": out["points"]}
    if out.get("rate") is not None:
        # A SHARDS estimate carries the digits the table shows: more would be sampling noise.
        # (Exact points are exact: they keep every digit, equal to `cache --policy lru`'s.)
        result["points"] = [dict(p, miss_ratio=None if p["miss_ratio"] is None else round(p["miss_ratio"], RATIO_DIGITS))
                            for p in out["points"]]
        result["rate"] = out["rate"]
        result["trusted_from_blocks"] = out["trusted_from_blocks"]
        result["warnings"] = out["warnings"]
    for w in out["warnings"]:
        print(f"blocklab: warning: {w}", file=sys.stderr)
    if json_out:
        print_json(result)
        return
    from rich.console import Console
    from rich.table import Table

    points = result["points"]
    shown = points
    if size is None and len(points) > 40:
        # The whole curve can hold one point per distinct distance: show 40.
        step = (len(points) - 1) / 39
        shown = [points[round(i * step)] for i in range(40)]
    title = f"{trace}: LRU miss-ratio curve ({result['method']}, {out['accesses']:,} accesses)"
    table = Table(title=title)
    table.add_column("cache blocks", justify="right")
    table.add_column("miss ratio", justify="right")
    for p in shown:
        table.add_row(f"{p['cache_blocks']:,}", _fmt_ratio(p["miss_ratio"]))
    console = Console()
    console.print(table)
    if shown is not points:
        console.print(f"{len(shown)} of {len(points)} points shown; --json prints them all.")


def register(app: typer.Typer) -> None:
    """Add `cache` and `mrc` to the main app."""
    app.command("cache")(cache)
    app.command("mrc")(mrc)
