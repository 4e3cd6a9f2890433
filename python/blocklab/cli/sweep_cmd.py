"""`blocklab sweep` (run a sweep file's cells, locally or on Ray, into Parquet)
and `blocklab report` (its HTML page). The work is in `blocklab.sweeps`."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import List, Optional

import typer

from blocklab.cli.common import fail, literal

# Exit status when cells failed while running (2 is bad input, found before any cell runs).
EXIT_FAILED_CELLS = 1


def sweep(
    sweep_file: Path = typer.Argument(..., help=literal("Sweep file (TOML): stack, executor, [[traces]], [grid], [[cases]] (their `unset` drops keys), seeds.")),
    out: Path = typer.Option(..., "--out", "-o", help="Results folder: results.parquet, cells.jsonl (the journal a re-run resumes from), meta.json."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Cells run at once: threads here (default 1); with --ray local, the CPUs of the local Ray (default: all)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run each cell as a Ray task: `local` starts a local Ray, else the address of a running cluster (auto, host:6379 or ray://host:10001; docs/sweeps.md)."),
    ship_traces: bool = typer.Option(False, "--ship-traces", help="With --ray: send the traces' bytes to the workers (else they read the traces' paths: shared storage)."),
    no_batch: bool = typer.Option(False, "--no-batch", help="Run every counted cell alone (default: cells sharing a trace share its passes; results are the same)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Run every cell of a sweep not yet finished in --out; write --out/results.parquet."""
    from blocklab.sweeps import SweepError, load_sweep, run_sweep

    try:
        sw = load_sweep(sweep_file)
        command = "blocklab " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        df = run_sweep(sw, out, jobs=jobs, ray=ray, batch=not no_batch, ship=ship_traces, progress=not quiet,
                       command=command)
    except SweepError as e:
        fail(str(e))
    except KeyboardInterrupt:
        interrupted(out)
    failed = df[df["status"] != "ok"] if len(df) else df
    print(f"{len(df)} cells in {out}/results.parquet: {len(df) - len(failed)} ok, {len(failed)} failed")
    for _, r in failed.head(5).iterrows():
        print(f"  failed {r['cell']}: {r['error']}")
    if len(failed) > 5:
        print(f"  ... and {len(failed) - 5} more (column `error`)")
    if len(failed):
        # `sweep && report` must not go on as if every cell had run; the
        # Parquet still has every cell, the failed ones with their error.
        raise SystemExit(EXIT_FAILED_CELLS)


def interrupted(out: Path) -> None:
    """Ctrl-C: the finished cells are in the journal and results.parquet. Leave at once:
    cells still inside the engine would hold up (and trouble) the interpreter's exit."""
    import os

    print(f"interrupted: the finished cells are in {out}/results.parquet; run the same command again to resume",
          file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(130)


def report(
    folder: Path = typer.Argument(..., help="A sweep's results folder (blocklab sweep --out)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="HTML file to write (default: FOLDER/report.html)."),
    metric: Optional[List[str]] = typer.Option(None, "--metric", "-m", help="A result column to plot (repeatable; default: the headline figures that vary)."),
    title: Optional[str] = typer.Option(None, "--title", help="Page title."),
    format: str = typer.Option("png", "--format", help="Figure files to write besides the inline PNGs, comma-separated: png, svg, pdf (into OUT's folder, `<name>-figures/`, linked from the page)."),
    zoom: bool = typer.Option(False, "--zoom", help="Fit y axes to the data (default: ratios, shares and counts from 0)."),
) -> None:
    """Write one self-contained HTML page of a sweep: plots of each metric against each varied parameter, response-time CDFs, a table of cells."""
    from blocklab.sweeps import write_report

    if not (folder / "results.parquet").exists():
        fail(f"{folder}: no results.parquet (run `blocklab sweep SWEEP.toml --out {folder}` first)")
    formats = [f.strip().lower() for f in format.split(",") if f.strip()]
    path = write_report(folder, out, metrics=metric or None, title=title, formats=formats, zoom=zoom)
    print(f"wrote {path}")


def register(app: typer.Typer) -> None:
    """Add `sweep` and `report` to the main app."""
    app.command("sweep")(sweep)
    app.command("report")(report)
