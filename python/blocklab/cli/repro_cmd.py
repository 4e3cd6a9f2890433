"""`blocklab repro ...`: reproduce published results; `register(app)` adds the `repro` group."""

from __future__ import annotations

import shlex
import sys
from typing import List, Optional

import typer

repro_app = typer.Typer(help="Reproduce the papers' results on the traces at hand.", no_args_is_help=True)


@repro_app.command("vdf")
def vdf(
    traces: Optional[List[str]] = typer.Option(None, "--traces", "-t", help="Extra traces, PATH or PATH:FORMAT (repeatable). The shipped sample and ../shared/traces are always included unless --only."),
    only: bool = typer.Option(False, "--only", help="Use only the traces given with --traces."),
    out: str = typer.Option("repro-vdf", "--out", "-o", help="Output directory: results.parquet (every cell, resumable), report.html, vdf-reduction.csv/.png, vdf-report.md."),
    disks: str = typer.Option("5,6,7,8", "--disks", help="Numbers of disks (RAID-5, one failed)."),
    sizes: str = typer.Option("1%,2%,5%,10%,20%,40%,70%", "--sizes", help="Cache sizes (share of unique blocks, or blocks, or bytes)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Cells run at once (see `blocklab sweep`)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run the cells as Ray tasks: `local` or a cluster address."),
    ship_traces: bool = typer.Option(False, "--ship-traces", help="With --ray: send the traces to the workers."),
) -> None:
    """VDF paper §5: RGR of LRU vs VDF-LRU and LFU vs VDF-LFU, 5 to 8 disks, RAID-5, one failed disk, reads only."""
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from blocklab.cli.common import fail
    from blocklab.repro import vdf as rv

    specs = [] if only else rv.default_traces()
    for t in traces or []:
        specs.append(rv.parse_trace_arg(t))
    if not specs:
        fail("no traces: give --traces PATH[:FORMAT]")
    try:
        ndisks = [int(x) for x in disks.split(",") if x.strip()]
    except ValueError:
        fail(f"bad --disks `{disks}`: expected e.g. 5,6,7,8")
    if any(n < 3 for n in ndisks):
        fail("RAID-5 with a failed disk needs at least 3 disks")
    size_list = [s.strip() for s in sizes.split(",") if s.strip()]
    for t in specs:
        if not Path(t.path).is_file():
            fail(f"--traces: {t.path}: no such file")
    from blocklab.sweeps import SweepError

    command = "blocklab " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    outdir = Path(out)
    try:
        df, red = rv.run(specs, outdir, disks=ndisks, sizes=size_list, jobs=jobs, ray=ray, ship=ship_traces,
                         command=command)
    except SweepError as e:
        fail(str(e))
    except KeyboardInterrupt:
        from blocklab.cli.sweep_cmd import interrupted

        interrupted(outdir)
    if red.empty:
        fail(f"no cell finished: see the `error` column of {outdir}/results.parquet")
    red.to_csv(outdir / "vdf-reduction.csv", index=False)
    rv.plot(red, outdir / "vdf-reduction.png")
    verdict = rv.verdict(red)
    (outdir / "vdf-report.md").write_text(rv.markdown(red, verdict))

    table = Table(title="RGR reduction by VDF (RAID-5, one failed disk, reads only)")
    for col in ("trace", "disks", "size", "cache blocks", "LRU", "VDF-LRU", "red. %", "LFU", "VDF-LFU", "red. %"):
        table.add_column(col, justify="left" if col == "trace" else "right")
    for _, r in red.iterrows():
        table.add_row(r["trace"], str(r["disks"]), r["size"], f"{int(r['cache_blocks']):,}", f"{r['lru']:.4f}",
                      f"{r['vdf-lru']:.4f}", f"{r['red_lru']:.1f}", f"{r['lfu']:.4f}", f"{r['vdf-lfu']:.4f}",
                      f"{r['red_lfu']:.1f}")
    out_console = Console(width=None if sys.stdout.isatty() else 150)
    out_console.print(table)
    out_console.print("[bold]The paper reports:[/bold]")
    for c in rv.PAPER["claims"]:
        out_console.print(f"  - {c}")
    out_console.print("[bold]Our numbers:[/bold]")
    for line in verdict:
        out_console.print(f"  - {line}")
    out_console.print(f"wrote {outdir}/results.parquet, report.html, vdf-reduction.csv, vdf-reduction.png, vdf-report.md")
    sys.stdout.flush()


@repro_app.command("disks")
def disks(
    folder: Optional[str] = typer.Option(None, "--dir", help="DiskSim's disksim-valid folder (default: ../shared/disk-models/disksim-valid)."),
    drives: Optional[str] = typer.Option(None, "--drives", help="Comma-separated drive files to run (default: all ten), e.g. ibm18es,hp_c2247a."),
    out: str = typer.Option("repro-disks", "--out", "-o", help="Output directory: results.parquet, report.html, disks-validation.csv/.md, disks-cdf.png."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Drives validated at once (see `blocklab sweep`)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run the drives as Ray tasks: `local` or a cluster address."),
) -> None:
    """Disk models against ten real drives: our demerit figure beside DiskSim 4.0's, and the response-time CDFs."""
    from pathlib import Path

    from blocklab.cli.common import fail
    from blocklab.repro import disks as rd

    base = Path(folder) if folder else rd.default_dir()
    if base is None or not base.is_dir():
        fail(f"--dir: `{folder}` is not a folder" if folder else
             "no disksim-valid folder found: give --dir (or set BLOCKLAB_SHARED)")
    chosen = rd.DRIVES
    if drives:
        names = [x.strip() for x in drives.split(",") if x.strip()]
        known = {d.file: d for d in rd.DRIVES}
        bad = [n for n in names if n not in known]
        if bad:
            fail(f"--drives: unknown drive `{bad[0]}`; valid: {', '.join(known)}")
        chosen = tuple(known[n] for n in names)
    outdir = Path(out)
    command = "blocklab " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    try:
        table, samples = rd.run(base, chosen, outdir, jobs=jobs, ray=ray, command=command)
    except FileNotFoundError as e:
        fail(str(e))
    except KeyboardInterrupt:
        from blocklab.cli.sweep_cmd import interrupted

        interrupted(outdir)
    table.to_csv(outdir / "disks-validation.csv", index=False)
    md = rd.markdown(table)
    (outdir / "disks-validation.md").write_text(md)
    rd.plot(table, samples, outdir / "disks-cdf.png")
    print(md, end="")
    print(f"wrote {outdir}/results.parquet, report.html, disks-validation.csv, disks-validation.md, disks-cdf.png")
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    """Add the `repro` group to the main app."""
    app.add_typer(repro_app, name="repro")
