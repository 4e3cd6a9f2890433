"""`blocklab repro ...`: reproduce published results; `register(app)` adds the `repro` group."""

from __future__ import annotations

import math
import shlex
import sys
from typing import List, Optional

import typer

repro_app = typer.Typer(help="Reproduce the papers' results on the traces at hand.", no_args_is_help=True)


def _command_line() -> str:
    """This command as typed, for the results' provenance and the report's re-run lines."""
    return "blocklab " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def _run_recipe(outdir, run, errors: tuple = (), failed_runs: Optional[str] = None):
    """`run(command)` (the recipe's sweep into `outdir`) and what it returns. A sweep error (or
    one of `errors`) -> one-line error, exit 2; Ctrl-C -> leave as `blocklab sweep` does (the
    finished cells stay). With `failed_runs` ("case", or "trace" to name the trace too), a run
    that failed -> exit 2 naming the first one."""
    from blocklab.cli.common import fail
    from blocklab.sweeps import SweepError, load

    try:
        result = run(_command_line())
    except (SweepError, *errors) as e:
        fail(str(e))
    except KeyboardInterrupt:
        from blocklab.cli.sweep_cmd import interrupted

        interrupted(outdir)
    if failed_runs is not None:
        res = load(outdir)
        failed = res[res["status"] != "ok"]
        if len(failed):
            first = failed.iloc[0]
            where = f" on {first['trace_label']}" if failed_runs == "trace" else ""
            fail(f"{len(failed)} of {len(res)} runs failed, e.g. {first['case']}{where}: {first['error']} "
                 f"(see {outdir}/results.parquet)")
    return result


def _wrote(outdir, files: list[str], md: Optional[str] = None) -> None:
    """Print the recipe's Markdown report (when given), then the files it wrote in `outdir`."""
    if md is not None:
        print(md, end="")
    print(f"wrote {outdir}/" + ", ".join(files))
    sys.stdout.flush()


@repro_app.command("vdf")
def vdf(
    traces: Optional[List[str]] = typer.Option(None, "--traces", "-t", help="Extra traces, PATH or PATH:FORMAT (repeatable). The shipped sample and ../shared/traces are always included unless --only."),
    only: bool = typer.Option(False, "--only", help="Use only the traces given with --traces."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="Output directory (default repro-vdf; --timed: repro-vdf-timed): results.parquet (every cell, resumable), report.html, vdf-reduction.csv/.png, vdf-report.md (--timed: vdf-timed-summary.csv, vdf-timed.png, vdf-timed-report.md)."),
    disks: Optional[str] = typer.Option(None, "--disks", help="Numbers of disks (RAID-5, one failed); default 5,6,7,8 (--real: 5,8)."),
    sizes: Optional[str] = typer.Option(None, "--sizes", help="Cache sizes (share of unique blocks, or blocks, or bytes); default 1%,2%,5%,10%,20%,40%,70% (--timed: 10%,40%; --real: one size, 40%)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Cells run at once (see `blocklab sweep`)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run the cells as Ray tasks: `local` or a cluster address."),
    ship_traces: bool = typer.Option(False, "--ship-traces", help="With --ray: send the traces to the workers."),
    timed: bool = typer.Option(False, "--timed", help="§6 in time: rebuild time and response under each policy, Eq. 4, closed-loop service rate (one trace: the first --traces, default Tencent 222)."),
    speedup: Optional[float] = typer.Option(None, "--speedup", help="--timed: replay the trace at this times its rate (default 0.2); --real with --load open: the rebuild part's requests at this times the trace's rate (default 6; the simulator 15 times slower)."),
    threads: str = typer.Option("20,80", "--threads", help="--timed: requests outstanding in the closed-loop runs."),
    warmup: float = typer.Option(15.0, "--warmup", help="--timed: seconds of the trace replayed to warm the cache, not measured (the rebuild starts after them); 0: none."),
    stripe_cache: int = typer.Option(256, "--stripe-cache", help="--timed: MD's stripe cache of the degraded array, in stripe heads (MD's default 256); 0: none."),
    real: bool = typer.Option(False, "--real", help="§6 on real bytes: the stack on member files served over NBD, the trace replayed through it while the server rebuilds at full bandwidth; beside the timed simulator on the same stack and trace (one trace: the first --traces, default Tencent 222, else a built-in one)."),
    outstanding: str = typer.Option("20,80", "--outstanding", help="--real: requests outstanding in the closed-loop parts (the largest also during the rebuild)."),
    repeat: int = typer.Option(3, "--repeat", help="--real: rounds of every policy (alternating within a round); the spread is printed."),
    policies: str = typer.Option("lru,vdf-lru,lfu,vdf-lfu", "--policies", help="--real: the policies (a base and its VDF variant make a pair)."),
    part: int = typer.Option(4000, "--part", help="--real: requests in each measured part after the warm-up."),
    member_size: Optional[str] = typer.Option(None, "--member-size", help="--real: bytes per member (default 256MiB, or the trace's span over the data members if more; the built-in trace: its span). The trace is stretched over the array's data chunk by chunk."),
    load: str = typer.Option("open", "--load", help="--real: the users' load during the rebuild: `open` (the paper's: the rest of the trace at its times / --speedup) or `closed` (one more --part at the largest --outstanding)."),
    builtin: bool = typer.Option(False, "--builtin", help="--real: the built-in synthetic trace even when ../shared is present."),
) -> None:
    """VDF paper §5: RGR of LRU vs VDF-LRU and LFU vs VDF-LFU, 5 to 8 disks, RAID-5, one failed disk, reads only.
    With --timed, §6: the same caches in front of the degraded array in simulated time."""
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from blocklab.cli.common import fail
    from blocklab.repro import vdf as rv

    if real and timed:
        fail("--real and --timed are two recipes: give one")
    if real:
        _vdf_real(traces, disks or "5,8", sizes or "40%", outstanding, repeat, policies, part, warmup, member_size,
                  builtin, out or "repro-vdf-real", load, speedup)
        return
    disks = disks or "5,6,7,8"
    if timed:
        _vdf_timed(traces, disks, sizes, 0.2 if speedup is None else speedup, threads, out or "repro-vdf-timed", jobs,
                   ray, warmup, stripe_cache)
        return
    out = out or "repro-vdf"
    sizes = sizes or "1%,2%,5%,10%,20%,40%,70%"

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
    outdir = Path(out)
    df, red = _run_recipe(outdir, lambda command: rv.run(specs, outdir, disks=ndisks, sizes=size_list, jobs=jobs,
                                                         ray=ray, ship=ship_traces, command=command))
    if red.empty:
        fail(f"no cell finished: see the `error` column of {outdir}/results.parquet")
    red.to_csv(outdir / "vdf-reduction.csv", index=False)
    rv.plot(red, outdir / "vdf-reduction.png")
    verdict = rv.verdict(red)
    claim_rows = rv.claims(red)
    (outdir / "vdf-report.md").write_text(rv.markdown(red, verdict, claim_rows))

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
    from blocklab.repro.verdicts import print_table

    print_table(claim_rows, out_console)
    out_console.print(f"wrote {outdir}/results.parquet, report.html, vdf-reduction.csv, vdf-reduction.png, vdf-report.md")
    sys.stdout.flush()


def _ints(text: str, flag: str) -> list[int]:
    from blocklab.cli.common import fail

    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"bad {flag} `{text}`: expected e.g. 5,6,7,8")


def _member_bytes(text: str) -> int:
    """`--member-size` of a real recipe in bytes: a positive multiple of its arrays' 64 KiB chunk."""
    from blocklab import _core
    from blocklab.cli.common import fail

    try:
        member = _core.parse_bytes(text)
    except Exception as e:  # noqa: BLE001 - the engine's parse error, one line
        fail(f"--member-size: {e}")
    if member <= 0 or member % (64 * 1024):
        fail(f"--member-size `{text}`: a positive multiple of the 64 KiB chunk")
    return member


def _vdf_timed(traces, disks: str, sizes, speedup: float, threads: str, out: str, jobs, ray, warmup: float,
               stripe_cache: int) -> None:
    from pathlib import Path

    from blocklab.cli.common import fail
    from blocklab.repro import vdf as rv
    from blocklab.repro import vdf_timed as vt

    if traces:
        t = rv.parse_trace_arg(traces[0])
        trace = vt.Trace(t.path, t.format, t.label)
        if not Path(trace.path).is_file():
            fail(f"--traces: {trace.path}: no such file")
    else:
        trace = vt.default_trace()
        if trace is None:
            fail("--timed: no trace: give --traces PATH[:FORMAT] (the default, Tencent CBS cut 222, is in ../shared)")
    ndisks = _ints(disks, "--disks")
    if any(n < 3 for n in ndisks):
        fail("RAID-5 with a failed disk needs at least 3 disks")
    nthreads = _ints(threads, "--threads")
    if any(t < 1 for t in nthreads):
        fail("--threads: at least 1 request outstanding")
    if not speedup > 0:
        fail("--speedup must be positive")
    if not warmup >= 0:
        fail(f"--warmup: {warmup} is not a number of seconds >= 0")
    if stripe_cache < 0:
        fail(f"--stripe-cache: {stripe_cache} is not a number of stripe heads >= 0")
    if jobs is not None and jobs < 1:
        fail(f"--jobs must be at least 1, not {jobs}")
    size_list = [s.strip() for s in (sizes or ",".join(vt.SIZES)).split(",") if s.strip()]
    outdir = Path(out)
    df = _run_recipe(outdir, lambda command: vt.run(trace, outdir, disks=ndisks, sizes=size_list, threads=nthreads,
                                                    speedup=speedup, workers=jobs or 2, ray=ray, command=command,
                                                    warmup_s=warmup, stripe_cache=stripe_cache),
                     failed_runs="case")
    s = vt.summary(df)
    s.to_csv(outdir / "vdf-timed-summary.csv", index=False)
    vt.plot(s, outdir / "vdf-timed.png")
    md = vt.markdown(trace, s, vt.verdict(s), vt.claims(s))
    (outdir / "vdf-timed-report.md").write_text(md)
    _wrote(outdir, ["results.parquet", "report.html", "vdf-timed-summary.csv", "vdf-timed.png", "vdf-timed-report.md"],
           md)


def _vdf_real(traces, disks: str, sizes: str, outstanding: str, repeat: int, policies: str, part: int, warmup: float,
              member_size, builtin: bool, out: str, load: str = "open", speedup: Optional[float] = None) -> None:
    from pathlib import Path

    from blocklab.cli.common import fail
    from blocklab.repro import vdf as rv
    from blocklab.repro import vdf_real as vr

    if traces:
        t = rv.parse_trace_arg(traces[0])
        if not Path(t.path).is_file():
            fail(f"--traces: {t.path}: no such file")
        trace = vr.Trace(t.path, t.format, t.label)
    else:
        trace = vr.default_trace(builtin)
    ndisks = _ints(disks, "--disks")
    if any(n < 5 or n > 8 for n in ndisks):
        fail(f"--disks `{disks}`: the paper's RAID-5 has 5 to 8 members")
    nout = _ints(outstanding, "--outstanding")
    if not nout or any(t < 1 for t in nout):
        fail("--outstanding: at least 1 request outstanding")
    pols = [x.strip() for x in policies.split(",") if x.strip()]
    bad = [x for x in pols if x not in vr.POLICIES]
    if bad:
        fail(f"--policies: unknown policy `{bad[0]}`; valid: {', '.join(vr.POLICIES)}")
    if not vr.pairs(pols):
        fail("--policies: give a base and its VDF variant (e.g. lru,vdf-lru)")
    if repeat < 1:
        fail(f"--repeat must be at least 1, not {repeat}")
    if part < 1:
        fail(f"--part must be at least 1, not {part}")
    if not warmup >= 0:
        fail(f"--warmup: {warmup} is not a number of seconds >= 0")
    if load not in vr.LOADS:
        fail(f"--load `{load}`: expected one of {', '.join(vr.LOADS)}")
    speedup = vr.SPEEDUP if speedup is None else speedup
    if not (speedup > 0 and math.isfinite(speedup)):
        fail(f"--speedup: {speedup} is not a factor > 0")
    size = sizes.split(",")[0].strip()
    try:
        vr.cache_blocks(size, 100)
    except ValueError:
        fail(f"--sizes `{sizes}`: expected a share (40%) or a number of blocks")
    member = None if member_size is None else _member_bytes(member_size)
    outdir = Path(out)
    try:
        p, runs, sims = vr.run(trace, outdir, disks=ndisks, policies=pols, outstanding=nout, repeat=repeat, part=part,
                               warmup_s=warmup, size=size, member=member, load=load, speedup=speedup,
                               progress=lambda m: print(m, file=sys.stderr, flush=True))
    except (RuntimeError, ValueError, OSError) as e:
        fail(str(e))
    rows = vr.summary(p, runs, sims)
    md = vr.markdown(p, runs, rows, vr.claims(p, rows), _command_line())
    from blocklab.repro.real_runs import write_csv

    write_csv(runs, outdir / "vdf-real-runs.csv")
    write_csv(sims, outdir / "vdf-real-sim.csv")
    (outdir / "vdf-real-report.md").write_text(md)
    _wrote(outdir, ["vdf-real-runs.csv", "vdf-real-sim.csv", "vdf-real-report.md"], md)


@repro_app.command("pro")
def pro(
    out: str = typer.Option("repro-pro", "--out", "-o", help="Output directory: results.parquet (every run, resumable), report.html, pro-tables.csv, pro-sensitivity.csv, PNG, pro-report.md (--real: repro-pro-real: pro-real-runs.csv, pro-real-sim.csv, pro-real-report.md)."),
    only: Optional[str] = typer.Option(None, "--only", help="Run only these traces: ws, fin (comma-separated)."),
    idle: str = typer.Option("md2611", "--idle", help="MD's idle test for every run: md2611 (the paper's kernel), md6, simple."),
    sweep: bool = typer.Option(True, "--sweep/--no-sweep", help="The sensitivity sweep over PRO's own parameters (RAID-5 of 5)."),
    workers: int = typer.Option(2, "--workers", "--jobs", "-j", help="Runs at once (see `blocklab sweep`)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run the cells as Ray tasks: `local` or a cluster address."),
    real: bool = typer.Option(False, "--real", help="One or two cells of Tables 3/4 on real bytes: md and pro rebuilding member files in the server while the trace is replayed through it; beside the timed simulator on the same array and trace (--out default repro-pro-real)."),
    cells: Optional[str] = typer.Option(None, "--cells", help="--real: the cells, TRACE:DISKS of a RAID-5 (default ws:5, and fin:5 when ../shared holds it)."),
    repeat: int = typer.Option(3, "--repeat", help="--real: rounds of md and pro (alternating within a round); the spread is printed."),
    member_size: str = typer.Option("64MiB", "--member-size", help="--real: bytes per member file."),
    layout: str = typer.Option("concat", "--layout", help="The trace's volumes on the array: concat (end to end, the paper's one device) or fold (one shared address space); Table 3 also runs in the other."),
    load: str = typer.Option("per-member", "--load", help="Load per array: per-member (speed-up x N/3, members x 3/N: every survivor as busy as on RAID-5 of 3) or fixed (one speed-up and member size)."),
    trace: Optional[List[str]] = typer.Option(None, "--trace", help="KEY=PATH[:FORMAT] (KEY ws or fin): the paper's own trace in place of the stand-in, replayed at its own rate on 5 GB members on every array (repeatable)."),
) -> None:
    """PRO on MD (Tian et al.): Tables 3 and 4 beside the paper's, both layouts, Fig. 2's U mode, Fig. 3's chunks,
    DOR, PRO's own parameters, and the verdict claim by claim."""
    from pathlib import Path

    from blocklab.cli.common import fail
    from blocklab.repro import pro as rp

    if real:
        _pro_real(cells, repeat, member_size, out if out != "repro-pro" else "repro-pro-real")
        return

    if idle not in ("md2611", "md6", "simple"):
        fail(f"--idle: unknown rule `{idle}`; valid: md2611, md6, simple")
    if workers < 1:
        fail(f"--workers must be at least 1, not {workers}")
    if layout not in rp.LAYOUTS:
        fail(f"--layout: unknown layout `{layout}`; valid: {', '.join(rp.LAYOUTS)}")
    if load not in rp.LOADS:
        fail(f"--load: unknown rule `{load}`; valid: {', '.join(rp.LOADS)}")
    specs = rp.traces(load=load)
    for t in trace or []:
        try:
            own = rp.papers_trace(t)
        except ValueError as e:
            fail(f"--trace: {e}")
        specs = [s for s in specs if s.key != own.key] + [own]
        specs.sort(key=lambda s: ("ws", "fin").index(s.key))
    if only:
        keys = [k.strip() for k in only.split(",") if k.strip()]
        bad = [k for k in keys if k not in ("ws", "fin")]
        if bad:
            fail(f"--only: unknown trace `{bad[0]}`; valid: ws, fin")
        specs = [t for t in specs if t.key in keys]
        if not specs:
            fail("--only: none of these traces is available (fin needs ../shared/traces)")
    outdir = Path(out)
    df = _run_recipe(outdir, lambda command: rp.run(specs, outdir, sweep=sweep, idle=idle, workers=workers, ray=ray,
                                                    command=command, layout=layout),
                     failed_runs="trace")
    t3, um, ot, sw = rp.tables(df), rp.u_mode(df), rp.orders_table(df), rp.sweep_table(df)
    lay, f3 = rp.layouts_table(df), rp.fig3_table(df)
    t3.to_csv(outdir / "pro-tables.csv", index=False)
    lay.to_csv(outdir / "pro-layouts.csv", index=False)
    sw.to_csv(outdir / "pro-sensitivity.csv", index=False)
    rp.plot(df, outdir)
    md = rp.markdown(specs, t3, um, ot, sw, rp.verdict(t3, um, sw), lay, f3, rp.claims(t3, um, ot, sw, f3))
    (outdir / "pro-report.md").write_text(md)
    _wrote(outdir, ["results.parquet", "report.html", "pro-tables.csv", "pro-layouts.csv", "pro-sensitivity.csv",
                    "pro-fig1.png", "pro-sensitivity.png", "pro-report.md"], md)


def _pro_real(cells: Optional[str], repeat: int, member_size: str, out: str) -> None:
    from pathlib import Path

    from blocklab.cli.common import fail
    from blocklab.repro import pro_real as pr

    try:
        chosen = pr.parse_cells(cells) if cells else pr.default_cells()
    except ValueError as e:
        fail(str(e))
    if not chosen:
        fail("--cells: no cell given")
    if repeat < 1:
        fail(f"--repeat must be at least 1, not {repeat}")
    member = _member_bytes(member_size)
    outdir = Path(out)
    try:
        runs, sims, notes = pr.run(chosen, outdir, repeat=repeat, member=member,
                                   progress=lambda m: print(m, file=sys.stderr, flush=True))
    except (RuntimeError, ValueError, OSError) as e:
        fail(str(e))
    rows = pr.summary(chosen, runs, sims)
    md = pr.markdown(rows, runs, pr.claims(rows), notes, member, _command_line())
    from blocklab.repro.real_runs import write_csv

    write_csv(runs, outdir / "pro-real-runs.csv")
    write_csv(sims, outdir / "pro-real-sim.csv")
    (outdir / "pro-real-report.md").write_text(md)
    _wrote(outdir, ["pro-real-runs.csv", "pro-real-sim.csv", "pro-real-report.md"], md)


@repro_app.command("disks")
def disks(
    folder: Optional[str] = typer.Option(None, "--dir", help="DiskSim's disksim-valid folder (default: ../shared/disk-models/disksim-valid)."),
    drives: Optional[str] = typer.Option(None, "--drives", help="Comma-separated drive files to run (default: all ten), e.g. ibm18es,hp_c2247a."),
    out: str = typer.Option("repro-disks", "--out", "-o", help="Output directory: results.parquet, report.html, disks-validation.csv/.md, disks-cdf.png, disks-runvalid.csv/.md."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Drives validated at once (see `blocklab sweep`)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run the drives as Ray tasks: `local` or a cluster address."),
) -> None:
    """Disk models against ten real drives: our demerit figure beside DiskSim 4.0's, and the response-time CDFs;
    then the rest of DiskSim's runvalid table beside the values it states."""
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
    table, samples = _run_recipe(outdir, lambda command: rd.run(base, chosen, outdir, jobs=jobs, ray=ray,
                                                                command=command), errors=(FileNotFoundError,))
    table.to_csv(outdir / "disks-validation.csv", index=False)
    md = rd.markdown(table)
    (outdir / "disks-validation.md").write_text(md)
    rd.plot(table, samples, outdir / "disks-cdf.png")
    # The rest of DiskSim's runvalid script, beside the values it states.
    rv = rd.runvalid(base)
    rv.to_csv(outdir / "disks-runvalid.csv", index=False)
    rv_md = rd.runvalid_markdown(rv)
    (outdir / "disks-runvalid.md").write_text(rv_md)
    _wrote(outdir, ["results.parquet", "report.html", "disks-validation.csv", "disks-validation.md", "disks-cdf.png",
                    "disks-runvalid.csv", "disks-runvalid.md"], md + "\n" + rv_md)


@repro_app.command("dgraid")
def dgraid(
    out: str = typer.Option("repro-dgraid", "--out", "-o", help="Output directory: results.parquet (every cell, resumable), report.html, the shaped Parquet tables, PNG, Markdown report."),
    tree: Optional[str] = typer.Option(None, "--tree", help="System listing to use (default: data/debian-tree.lst); a seeded user tree is grafted under /home."),
    quick: bool = typer.Option(False, "--quick", help="Small trees, 8 disks, few trials (a smoke run, not the reproduction); with --timed: a 32 MiB member, 5 % of Fig 9's volume, a small Postmark, two file sizes."),
    timed: bool = typer.Option(False, "--timed", help="In simulated time on four Ultrastar 73LZX models: Fig 8 (live-block vs full rebuild), Fig 9 (rebuild with a reader, then a mirror pair lost), Table 2's run times, Fig 7's throughput. Its stack runs are a sweep: results.parquet (every run, resumable) and report.html in --out."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Cells run at once (see `blocklab sweep`)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run the cells as Ray tasks: `local` or a cluster address."),
    real: bool = typer.Option(False, "--real", help="On real bytes: ext2 of a namespace on a real D-GRAID array, k of D members failed, files and directories whole beside `dgraid avail`; Fig 9's live-block rebuild at three fills. --tree is then a directory copied in beside the generated tree."),
    full: bool = typer.Option(False, "--full", help="--real: the larger namespace, more seeds and a 256 MiB Fig 9 file system (the default is a short run)."),
    repeat: Optional[int] = typer.Option(None, "--repeat", help="--real: seeds of the generated tree (default 1, --full 3)."),
    disks: int = typer.Option(4, "--disks", help="--real: members D (failure sets: all of them for D = 4, a seeded sample otherwise)."),
    seed: int = typer.Option(1, "--seed", help="--real: seed of the first generated tree (and of the failure-set sample)."),
    dirs: Optional[int] = typer.Option(None, "--dirs", help="--real: directories of the generated tree (default 12, --full 60; 0 with --files 0: no generated tree)."),
    files: Optional[int] = typer.Option(None, "--files", help="--real: files of the generated tree (default 80, --full 600)."),
    mount: bool = typer.Option(False, "--mount", help="--real: make ext2 through the mounted export (mke2fs on the nbdfuse file, mount -o loop, needs root and FUSE) and cp the tree in, instead of copying an `mke2fs -d` image; Fig 5 (blocks misplaced by inference) on the export's recorded write stream."),
    fills: Optional[str] = typer.Option(None, "--fills", help="--real: Fig 9's fills of the file system in percent (default 25,50,75; `none` skips Fig 9)."),
) -> None:
    """D-GRAID (FAST'04): Table 1, Figs 2, 3, 7, Table 2 and the counted part of Fig 9, beside the paper's numbers.

    With --timed, Figs 7, 8, 9 and Table 2's run times through the composed stack and the timed executor."""
    from pathlib import Path

    from rich.console import Console

    console = Console(stderr=True)
    outdir = Path(out)
    if real:
        if timed:
            from blocklab.cli.common import fail

            fail("--real and --timed are two recipes: give one")
        _dgraid_real(outdir, tree, full, repeat, disks, seed, dirs, files, fills, mount)
        return
    outdir.mkdir(parents=True, exist_ok=True)
    if timed:
        _dgraid_timed(outdir, quick, console, jobs, ray)
        return

    from blocklab.repro import dgraid as rd

    res = _run_recipe(outdir, lambda command: rd.run_all(outdir, listing=tree, quick=quick,
                                                         progress=lambda m: console.log(m), jobs=jobs, ray=ray,
                                                         command=command), errors=(rd.RecipeError,))
    written = rd.save(res, outdir) + rd.plot(res, outdir)
    lines = rd.verdict(res)
    (outdir / "dgraid-report.md").write_text(rd.markdown(res, lines))
    print("The paper reports:")
    for part, claims in rd.PAPER["claims"].items():
        for c in claims:
            print(f"  - [{part}] {c}")
    print("Our numbers:")
    for line in lines:
        print(f"  - {line}")
    from blocklab.repro.dgraid_claims import WITH_PAPERS_DATA, claims
    from blocklab.repro.verdicts import markdown as verdict_table

    print("\nVerdict, claim by claim:\n\n" + verdict_table(claims(res)) + f"\nWith the paper's own file system: `{WITH_PAPERS_DATA}`")
    _wrote(outdir, ["results.parquet", "report.html"] + written + ["dgraid-report.md"])


def _dgraid_real(outdir, tree, full: bool, repeat, disks: int, seed: int, dirs, files, fills, mount: bool) -> None:
    import os
    import platform
    from pathlib import Path

    from blocklab.cli.common import fail
    from blocklab.repro import dgraid_real as dr
    from blocklab.repro.real_runs import write_csv
    if not 2 <= disks <= 16:
        fail(f"--disks {disks}: D-GRAID on member files takes 2 to 16 members")
    if repeat is not None and repeat < 1:
        fail(f"--repeat must be at least 1, not {repeat}")
    if tree is not None and not Path(tree).is_dir():
        fail(f"--tree {tree}: not a directory (with --real, --tree is a tree to copy in)")
    kw = {"disks": disks, "seed": seed, "tree": tree, "mount": mount}
    if repeat is not None:
        kw["repeat"] = repeat
    if (dirs is None) != (files is None):
        fail("--dirs and --files go together (the generated tree's size)")
    if dirs is not None:
        if dirs < 0 or files < 0 or (files > 0) != (dirs > 0):
            fail(f"--dirs {dirs} --files {files}: both positive, or both 0 (no generated tree, with --tree)")
        if files == 0 and tree is None:
            fail("--dirs 0 --files 0: no namespace; give --tree DIR")
        kw["dirs"], kw["files"] = dirs, files
    if fills is not None:
        if fills.strip() == "none":
            kw["fills"] = ()
        else:
            try:
                kw["fills"] = tuple(int(x) / 100 for x in fills.split(",") if x.strip())
            except ValueError:
                fail(f"--fills `{fills}`: percentages such as 25,50,75, or none")
            if not kw["fills"] or any(not 0 < f < 1 for f in kw["fills"]):
                fail(f"--fills `{fills}`: percentages between 1 and 99")
    plan = dr.full_plan(**kw) if full else dr.quick_plan(**kw)
    try:
        av, f9, f5 = dr.run(plan, outdir, progress=lambda m: print(m, file=sys.stderr, flush=True))
    except (dr.RecipeError, RuntimeError, OSError) as e:
        fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
    rows = dr.summary(av)
    cl = dr.claims(rows, f9, f5, av)
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"
    md = dr.markdown(rows, f9, cl, _command_line(), machine, f5, plan.notes)
    write_csv([{k: v for k, v in r.items() if k != "lost"} | {"lost": ";".join(r["lost"])} for r in av],
              outdir / "dgraid-real-avail.csv")
    if f9:
        write_csv(f9, outdir / "dgraid-real-fig9.csv")
    if f5:
        write_csv(f5, outdir / "dgraid-real-fig5.csv")
    (outdir / "dgraid-real-report.md").write_text(md)
    _wrote(outdir, ["dgraid-real-avail.csv"] + (["dgraid-real-fig9.csv"] if f9 else [])
           + (["dgraid-real-fig5.csv"] if f5 else []) + ["dgraid-real-report.md"], md)


def _dgraid_timed(outdir, quick: bool, console, jobs: Optional[int] = None, ray: Optional[str] = None) -> None:
    from blocklab.repro import dgraid_timed as dt

    res = _run_recipe(outdir, lambda command: dt.run_all(outdir, quick=quick, progress=lambda m: console.log(m),
                                                         jobs=jobs, ray=ray, command=command),
                      errors=(dt.RecipeError,))
    written = dt.save(res, outdir) + dt.plot(res, outdir)
    lines = dt.verdict(res)
    (outdir / "dgraid-timed-report.md").write_text(dt.markdown(res, lines))
    print("The paper reports:")
    for part, claims in dt.PAPER.items():
        items = claims if isinstance(claims, list) else [
            f"{k}: {v}" + (" s" if part == "table2" else "") for k, v in claims.items()]
        for c in items:
            print(f"  - [{part}] {c}")
    print("Our numbers (in simulated time):")
    for line in lines:
        print(f"  - {line}")
    from blocklab.repro.dgraid_claims import timed_claims
    from blocklab.repro.verdicts import markdown as verdict_table

    print("\nVerdict in time, claim by claim:\n\n" + verdict_table(timed_claims(res)), end="")
    _wrote(outdir, ["results.parquet", "report.html"] + written + ["dgraid-timed-report.md"])


@repro_app.command("eci")
def eci(
    traces: Optional[List[str]] = typer.Option(None, "--traces", "-t", help="Extra traces as tenants, PATH or PATH:FORMAT (repeatable). The shipped sample and ../shared/traces are included unless --only."),
    only: bool = typer.Option(False, "--only", help="Use only the traces given with --traces."),
    mix_name: str = typer.Option("all", "--mix", help="Traces at hand: all (the shipped sample and every shared trace) or note (the research note's eleven, to compare with its prototype)."),
    msr_dir: Optional[str] = typer.Option(None, "--msr-dir", help="Folder with the paper's sixteen MSR Cambridge volumes (wdev_0.csv[.gz], web_1, ...): run those instead, times as recorded."),
    out: str = typer.Option("repro-eci", "--out", "-o", help="Output directory: results.parquet (every run, resumable), report.html, the mix, the stack file, the shaped Parquet tables, PNG, Markdown."),
    sizes: Optional[str] = typer.Option(None, "--sizes", help="SSD sizes in blocks (or unlimited), comma-separated. Default unlimited,40000,10000,5000 (MSR: unlimited,3000000)."),
    schemes: Optional[str] = typer.Option(None, "--schemes", help="Schemes to run (default all but eci-seq, ECI with §5's sequential-VM classifier; MSR: centaur,eci-wb,eci,global-wb)."),
    timed_size: str = typer.Option("10000", "--timed-size", help="SSD size of the runs in simulated time (MSR: 3000000)."),
    timed: bool = typer.Option(True, "--timed/--no-timed", help="Also run Centaur, ECI, ECI's sizing alone and a global LRU in simulated time."),
    span: float = typer.Option(3600.0, "--span", help="Seconds each input's time line is rescaled onto (not for --msr-dir)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Runs at once (see `blocklab sweep`)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run the cells as Ray tasks: `local` or a cluster address."),
    real: bool = typer.Option(False, "--real", help="Centaur vs ECI on real bytes: tenants as NBD exports (volumes of their own) over an SSD tier in a real file and a RAID-5 of member files, counted beside real (same decisions), measured times repeated (a minute or two; --full for more)."),
    repeats: int = typer.Option(3, "--repeats", help="--real: real runs per scheme (the spread of the times)."),
    requests: Optional[int] = typer.Option(None, "--requests", help="--real: requests per tenant (default 3000; --full 40000)."),
    full: bool = typer.Option(False, "--full", help="--real: every single-volume shared trace of the note's mix and more requests per tenant."),
    synthetic: bool = typer.Option(False, "--synthetic", help="--real: synthetic per-tenant traces even when ../shared is present."),
    tier_blocks: int = typer.Option(1500, "--tier-blocks", help="--real: frames of the SSD tier (8 KiB each)."),
    latency_model: str = typer.Option("eq2", "--latency-model", help="Latency the all-request claims are judged on: eq2 (the paper's Eq. 2 per access, from the read hit ratio: a write costs T_HDD under either policy) or requests (ours: a read-only tenant's write to the array costs T_HDD, a written-back one T_SSD). Both are shown."),
) -> None:
    """ECI-Cache vs Centaur (and global, static, and the production caches' options): SSD tier per tenant, hit ratio, latency, SSD writes, performance-per-cost."""
    from pathlib import Path

    from rich.console import Console

    from blocklab.cli.common import fail
    from blocklab.repro import eci as re

    console = Console(stderr=True)
    if real:
        from blocklab.repro import eci_real

        if repeats < 1 or tier_blocks < 1 or (requests is not None and requests < 1):
            fail("--repeats, --tier-blocks and --requests must be positive")
        n = requests or (eci_real.FULL_REQUESTS if full else eci_real.SHORT_REQUESTS)
        outdir = Path(out)
        res = eci_real.run(outdir, requests=n, repeats=repeats, full=full, tier_blocks=tier_blocks,
                           synthetic=True if synthetic else None, progress=lambda m: console.log(m))
        md = eci_real.markdown(res)
        (outdir / "eci-real-report.md").write_text(md)
        _wrote(outdir, ["eci-real-mix.csv", "eci-real-centaur.toml", "eci-real-eci.toml", "eci-real.json",
                        "eci-real-report.md"], md)
        if not all(res["same_decisions"].values()):
            fail("the real runs did not decide as the counted runs (see the table)")
        return
    if latency_model not in re.LATENCY_MODELS:
        fail(f"--latency-model: unknown model `{latency_model}`; valid: {', '.join(re.LATENCY_MODELS)}")
    if msr_dir is not None:
        folder = Path(msr_dir)
        if not folder.is_dir():
            fail(f"--msr-dir: `{msr_dir}` is not a folder")
        try:
            inputs = re.msr_inputs(folder)
        except FileNotFoundError as e:
            fail(f"--msr-dir: {e}")
        mix_span = None
        default_sizes, default_schemes, timed_size = ("unlimited", re.PAPER_SIZE), re.MSR_SCHEMES, (
            timed_size if timed_size != "10000" else re.PAPER_SIZE)
    else:
        if mix_name not in re.MIXES:
            fail(f"--mix: unknown mix `{mix_name}`; valid: {', '.join(re.MIXES)}")
        inputs = [] if only else re.default_inputs(mix=mix_name)
        for t in traces or []:
            inputs.append(re.parse_input(t))
        mix_span = span
        default_sizes, default_schemes = re.SIZES, re.DEFAULT_SCHEMES
    if not inputs:
        fail("no traces: give --traces PATH[:FORMAT] or --msr-dir")
    size_list = [s.strip() for s in sizes.split(",") if s.strip()] if sizes else list(default_sizes)
    for s in size_list + [timed_size]:
        if s != "unlimited" and not s.isdigit():
            fail(f"bad SSD size `{s}`: blocks (e.g. 10000) or unlimited")
    scheme_list = [s.strip() for s in schemes.split(",") if s.strip()] if schemes else list(default_schemes)
    bad = [s for s in scheme_list if s not in re.SCHEMES]
    if bad:
        fail(f"--schemes: unknown scheme `{bad[0]}`; valid: {', '.join(re.SCHEMES)}")
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    mix = outdir / "eci-mix.csv.zst"
    console.log(f"merging {len(inputs)} traces into {mix}")
    labels, _summary = re.build_mix(inputs, mix, span=mix_span)
    stack = outdir / "eci-stack.toml"
    stack.write_text(re.stack_text(outstanding=max(1, len(labels))))
    console.log("reuse analysis (TRD / URD per tenant)")
    reuse_df = re.reuse(mix, labels)
    console.log("sizing analysis timed per tenant and window (App. B)")
    times = re.sizing_times(mix, labels)
    times.to_csv(outdir / "eci-analysis-time.csv", index=False)
    ts = [s for s in re.TIMED_SCHEMES if s in scheme_list] if timed else []
    runs = _run_recipe(outdir, lambda command: re.run(
        stack, mix, labels, outdir, sizes=size_list, schemes=scheme_list, timed_size=timed_size, timed_schemes=ts,
        jobs=jobs, ray=ray, command=command,
        sections=lambda runs: re.report_sections(labels, reuse_df, runs, size_list, timed, latency_model, times)),
        failed_runs="case")
    totals, tenants, timeline = runs["count"]
    timed_df = None
    if timed:
        timed_df, timed_tenants, _ = runs["timed"]
        timed_tenants.to_parquet(outdir / "eci-timed-tenants.parquet", index=False)
        timed_df.to_parquet(outdir / "eci-timed.parquet", index=False)
    cmp, lines, md = re.analysis(labels, reuse_df, runs, size_list, timed, latency_model, times)
    labels.to_csv(outdir / "eci-tenants.csv", index=False)
    reuse_df.to_parquet(outdir / "eci-reuse.parquet", index=False)
    totals.to_parquet(outdir / "eci-runs.parquet", index=False)
    tenants.to_parquet(outdir / "eci-run-tenants.parquet", index=False)
    timeline.to_parquet(outdir / "eci-timeline.parquet", index=False)
    cmp.to_csv(outdir / "eci-comparison.csv", index=False)
    re.policy_switches(timeline).to_csv(outdir / "eci-switches.csv", index=False)
    re.plot_allocation(timeline, [s for s in size_list if s in ("unlimited", size_list[-1])], outdir / "eci-allocation.png")
    re.plot_summary(totals, outdir / "eci-summary.png")
    re.plot_tenants(tenants, size_list[-1], outdir / "eci-tenants.png")
    (outdir / "eci-report.md").write_text(md)
    _wrote(outdir, ["results.parquet", "report.html", "eci-mix.csv.zst", "eci-stack.toml", "eci-reuse.parquet",
                    "eci-runs.parquet", "eci-run-tenants.parquet", "eci-timeline.parquet"]
           + (["eci-timed.parquet"] if timed else [])
           + ["eci-comparison.csv", "eci-switches.csv", "eci-analysis-time.csv", "eci-allocation.png", "eci-summary.png", "eci-tenants.png", "eci-report.md"], md)


@repro_app.command("hsu-smith")
def hsu_smith(
    traces: Optional[List[str]] = typer.Option(None, "--traces", "-t", help="Extra traces, PATH, PATH:FORMAT or PATH:FORMAT:pc|server (repeatable). The shipped sample and the shared HP, CloudPhysics and MSR traces are included unless --only."),
    only: bool = typer.Option(False, "--only", help="Use only the traces given with --traces."),
    all_traces: bool = typer.Option(False, "--all", help="Also the MSR cut at 10,000 IOPS and the five Tencent cuts (each far beyond one disk; slower)."),
    out: str = typer.Option("repro-hsu-smith", "--out", "-o", help="Output directory: results.parquet (every run, resumable), report.html, hsu-smith.parquet (the paper's figures per run), CSV tables, PNG, Markdown report."),
    replay: str = typer.Option("feedback", "--replay", help="feedback (the paper's) or open."),
    warmup: float = typer.Option(0.1, "--warmup", help="Share of each trace replayed as warm-up, not measured."),
    years: str = typer.Option("5,10", "--years", help="Years of disk progress for the technology study (comma-separated)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", help="Runs at once (see `blocklab sweep`)."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Run the cells as Ray tasks: `local` or a cluster address."),
    merged: bool = typer.Option(False, "--merged", help="Also the paper's merged and speeded-up workloads: Sm (the MSR cuts merged as independent streams) and Ps (each PC trace with an infinitely fast processor)."),
    figures: bool = typer.Option(False, "--figures", help="Also the parameter sweeps of Figures 5-8 (34 more runs per trace, some shared with the tables; hsu-smith-figures.png)."),
) -> None:
    """Hsu & Smith (IBM J. R&D 2004): read caching, prefetch, opportunistic prefetch, write buffering, scheduling, striping, short-stroking and disk scaling on our traces, beside the paper's Tables 2–5."""
    from pathlib import Path

    from rich.console import Console

    from blocklab.cli.common import fail
    from blocklab.repro import hsu_smith as hs

    if replay not in ("feedback", "open"):
        fail(f"--replay: `{replay}` is not feedback or open")
    if not (0.0 <= warmup < 1.0):
        fail(f"--warmup: {warmup} is not a share in [0, 1)")
    try:
        year_list = tuple(int(y) for y in years.split(",") if y.strip())
    except ValueError:
        fail(f"--years: `{years}` is not a list of whole years")
    specs = [] if only else hs.default_traces(all_traces)
    for t in traces or []:
        specs.append(hs.parse_trace_arg(t))
    if not specs:
        fail("no traces: give --traces PATH[:FORMAT]")
    if jobs is not None and jobs < 1:
        fail(f"--jobs must be at least 1, not {jobs}")
    for t in specs:
        if not Path(t.path).is_file():
            fail(f"--traces: {t.path}: no such file")
    console = Console(stderr=True)
    outdir = Path(out)
    if merged:
        outdir.mkdir(parents=True, exist_ok=True)
        specs = specs + hs.derived_traces(specs, outdir)
    df = _run_recipe(outdir, lambda command: hs.run(specs, outdir, replay=replay, warmup_share=warmup, years=year_list,
                                                    jobs=jobs, ray=ray, progress=lambda m: console.log(m),
                                                    command=command, figures=figures),
                     errors=(ValueError,), failed_runs="trace")
    if df.empty:
        fail("no trace could be run")
    tabs = hs.tables(df)
    verdict = hs.verdict(df, tabs)
    df.to_parquet(outdir / "hsu-smith.parquet", index=False)
    for name, tab in tabs.items():
        tab.to_csv(outdir / f"hsu-smith-{name}.csv", index=False)
    hs.plot(tabs, outdir / "hsu-smith.png")
    pngs = ["hsu-smith.png"] + (["hsu-smith-figures.png"] if hs.plot_figures(tabs, outdir / "hsu-smith-figures.png") else [])
    info = df.drop_duplicates("trace")[["trace", "kind", "requests", "reads", "span_s", "storage_used", "member_gb"]]
    md = hs.markdown(df, tabs, verdict, info.to_dict("records"))
    (outdir / "hsu-smith-report.md").write_text(md)
    # The Figures 5-8 and merged rows, for the default run's verdict table to carry
    # (copied to python/blocklab/repro/recorded/ to refresh them).
    extras = hs.extras_record(tabs, " ".join(["blocklab repro hsu-smith"] + (["--figures"] if figures else [])
                                             + (["--merged"] if merged else [])))
    if extras:
        import json

        (outdir / "hsu-smith-extras.json").write_text(json.dumps(extras, indent=1, ensure_ascii=False) + "\n")
    _wrote(outdir, ["results.parquet", "report.html", "hsu-smith.parquet", "hsu-smith-*.csv", *pngs,
                    "hsu-smith-report.md"] + (["hsu-smith-extras.json"] if extras else []), md)


def register(app: typer.Typer) -> None:
    """Add the `repro` group to the main app."""
    app.add_typer(repro_app, name="repro")
