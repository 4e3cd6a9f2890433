"""Validate the disk model against ten real drives, as DiskSim 4.0 was.

Each `NAME.trace` of DiskSim's `disksim-valid` folder is a measurement of a
real drive (one request outstanding); `NAME.parv` is DiskSim's validated
model of it. The engine replays the trace on the model
(`blocklab._core.disk_validate`) and computes the Ruemmler–Wilkes demerit
figure; this module runs every drive as a cell of a sweep (`blocklab.sweeps`:
Parquet, HTML report), puts DiskSim's own demerit beside ours, and plots the
measured and simulated response-time distributions.

`runvalid` runs the rest of DiskSim's own validation script (`runvalid`): its
synthetic workloads, RAID-5 at the device driver, sets of arrays, controller
caches, the simple disk, several disks, the HP srt and ASCII traces, each
`.parv` unchanged, run the way the script runs it, beside the value the
script says it should be about.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from blocklab.repro.shared import shared_dir


@dataclass(frozen=True)
class Drive:
    file: str
    name: str
    disksim_ms: float  # DiskSim 4.0's demerit on the same trace


# DiskSim 4.0's demerits, measured with the unmodified 4.0 on these traces
# (the table of ../shared/disk-models/README.md).
DRIVES = (
    Drive("atlas_III", "Quantum Atlas III", 0.378),
    Drive("barracuda", "Seagate Barracuda ST32171W", 0.348),
    Drive("cheetah4LP", "Seagate Cheetah 4LP", 0.318),
    Drive("cheetah9LP", "Seagate Cheetah 9LP", 0.107),
    Drive("ibm18es", "IBM 18ES", 0.136),
    Drive("atlas10k", "Quantum Atlas 10K", 0.268),
    Drive("hp_c2247a", "HP C2247A", 0.090),
    Drive("hp_c3323a", "HP C3323A", 0.306),
    Drive("hp_c2490a", "HP C2490A", 0.254),
    Drive("dec_rz26", "DEC RZ26", 0.340),
)


@dataclass(frozen=True)
class RunvalidLine:
    label: str  # runvalid's own description
    parv: str
    disksim_ms: float  # "should be about ..."
    figure: str = "avg_response_ms"  # the JSON field runvalid's grep corresponds to
    trace: str | None = None  # None: the file's synthetic workload (`ascii 0 1`)
    format: str = "disksim"


# runvalid's lines after the ten drives (syssim, an external program driving
# DiskSim, is left out). "IOdriver Response time average" is `avg_response_ms`,
# "Overall I/O System Response time average" `overall_response_ms`.
RUNVALID = (
    RunvalidLine("Open synthetic workload", "synthopen", 10.9),
    RunvalidLine("Closed synthetic workload", "synthclosed", 87.6),
    RunvalidLine("Mixed synthetic workload", "synthmixed", 22.08),
    RunvalidLine("RAID 5 at device driver", "synthraid5", 22.8),
    RunvalidLine("Set of disk arrays at device driver", "syntharrays", 34.3, figure="overall_response_ms"),
    RunvalidLine("Memory cache at controller", "synthcachemem", 24.6),
    RunvalidLine("Cache device managed at controller", "synthcachedev", 28.9),
    RunvalidLine("Simpledisk instead of original model", "synthsimpledisk", 13.5),
    RunvalidLine("3 different disks", "3disks", 10.937),
    RunvalidLine("3 disks on separate controllers", "3disks2", 10.937),
    RunvalidLine("HP srt trace input", "hplajw", 48.8, trace="traces/hp_hplajw_1992/ajw.1week.srt", format="hpsrt"),
    RunvalidLine("ASCII input", "ascii", 13.8, trace="disk-models/disksim-valid/ascii.trace"),
)


def runvalid_line(folder: Path, line: RunvalidLine) -> dict:
    """One runvalid line: ours (or the error that refuses the file) beside DiskSim's value, and its run time."""
    import time

    from blocklab import api
    from blocklab._core import BlocklabError

    row = {"line": line.label, "file": f"{line.parv}.parv", "figure": line.figure, "disksim_ms": line.disksim_ms,
           "ours_ms": None, "diff_pct": None, "within_5pct": False, "requests": None, "seconds": None, "error": ""}
    if line.trace is None:
        traces, synthetic = [], True
    else:
        trace = folder.parent.parent / line.trace
        if not trace.exists():
            row["error"] = f"{trace}: not present"
            return row
        traces, synthetic = [str(trace)], False
    t = time.perf_counter()
    try:
        out = api.disk_run(str(folder / f"{line.parv}.parv"), traces, format=line.format, synthetic=synthetic)
    except (BlocklabError, ValueError) as e:  # the one-line refusal (a block or key not modelled); a bug still raises
        row["error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
        return row
    row["seconds"] = time.perf_counter() - t
    ours = out[line.figure]
    row.update(ours_ms=ours, diff_pct=100.0 * (ours - line.disksim_ms) / line.disksim_ms,
               within_5pct=abs(ours - line.disksim_ms) <= 0.05 * line.disksim_ms, requests=out["requests"])
    return row


def runvalid(folder: Path, lines=RUNVALID):
    """Every runvalid line as a DataFrame row (see `runvalid_line`)."""
    import pandas as pd

    return pd.DataFrame([runvalid_line(folder, ln) for ln in lines])


def runvalid_markdown(table) -> str:
    lines = ["| runvalid line | file | figure | DiskSim says | ours (ms) | diff | within 5 %? | requests | run time (s) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        if r["ours_ms"] is None or r["ours_ms"] != r["ours_ms"]:
            lines.append(f"| {r['line']} | {r['file']} | {r['figure']} | {r['disksim_ms']} | — | — | **no**: "
                         f"{r['error']} | — | — |")
            continue
        lines.append(f"| {r['line']} | {r['file']} | {r['figure']} | {r['disksim_ms']} | {r['ours_ms']:.3f} "
                     f"| {r['diff_pct']:+.1f} % | {'yes' if r['within_5pct'] else '**no**'} | {int(r['requests']):,} "
                     f"| {r['seconds']:.2f} |")
    lines.append("")
    lines.append(f"{int(table['within_5pct'].sum())} of {len(table)} runvalid lines within 5 % of DiskSim's stated value.")
    return "\n".join(lines) + "\n"


def default_dir() -> Path | None:
    """`disk-models/disksim-valid` of the shared data, when present."""
    return shared_dir("disk-models/disksim-valid")


def validate(folder: Path, drive: Drive) -> dict:
    """One drive: the summary plus the per-request measured and simulated times."""
    from blocklab import _core

    return json.loads(_core.disk_validate(str(folder / f"{drive.file}.parv"), str(folder / f"{drive.file}.trace"),
                                          None, True))


def _model_of(cell) -> str:
    return str(Path(cell.trace.path).with_suffix(".parv"))


def _validate_cell(cell) -> dict:
    from blocklab import _core

    return json.loads(_core.disk_validate(_model_of(cell), cell.trace.path, None, True))


def _inputs(cell) -> list[str]:
    # The model and the files it reads (NAME.diskspecs, NAME.model, NAME.seek, ...).
    trace = Path(cell.trace.path)
    return sorted(str(p) for p in trace.parent.glob(f"{trace.stem}.*") if p != trace and p.is_file())


def _task():
    from blocklab.sweeps import Task

    return Task(run=_validate_cell, inputs=_inputs)


def __getattr__(name):
    # The sweep task (`blocklab.repro.disks:VALIDATE`), made on first use so
    # that importing this module does not import the sweep machinery.
    if name == "VALIDATE":
        return _task()
    raise AttributeError(name)


def sweep_spec(folder: Path, drives=DRIVES):
    """Each drive a cell: its measured trace (`NAME.trace`) replayed on its model (`NAME.parv`)."""
    from blocklab.sweeps import Sweep, TraceRef

    return Sweep(stack=None, executor="disk-validate", task="blocklab.repro.disks:VALIDATE", name="repro-disks",
                 traces=[TraceRef(str(folder / f"{d.file}.trace"), "disksim-valid", d.file) for d in drives],
                 report={"metrics": ["demerit_ms", "demerit_pct", "mean_simulated_ms"]})


def run(folder: Path, drives=DRIVES, out: Path | None = None, *, jobs: int | None = None, ray: str | None = None,
        progress=True, command: str | None = None):
    """Validate every drive as a sweep into `out` (results.parquet, report.html);
    returns (table, samples) where `table` is a DataFrame with one row per drive
    and `samples` maps the file name to (measured, simulated) arrays in ms."""
    import tempfile

    import numpy as np
    import pandas as pd

    from blocklab.sweeps import Section, run_recipe

    for d in drives:
        for ext in ("parv", "trace"):
            if not (folder / f"{d.file}.{ext}").exists():
                raise FileNotFoundError(f"{folder / f'{d.file}.{ext}'}: no such file")
    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="repro-disks-"))

    def sections(df):
        t, _ = _table(df, drives)
        return [Section("Demerit figure against DiskSim 4.0", t.to_html(index=False, border=0,
                                                                          float_format=lambda x: f"{x:.3f}"))]

    df = run_recipe(sweep_spec(folder, drives), out, jobs=jobs, ray=ray, progress=progress, command=command,
                    title="Disk models against ten real drives (DiskSim 4.0's validation traces)", sections=sections)
    failed = df[df["status"] != "ok"]
    if len(failed):
        raise ValueError(f"{failed.iloc[0]['trace_label']}: {failed.iloc[0]['error']}")
    table, samples = _table(df, drives)
    return table, {k: (np.asarray(m), np.asarray(s)) for k, (m, s) in samples.items()}


def _table(df, drives):
    """The per-drive table (ours beside DiskSim's demerit) and the samples, from the sweep's rows."""
    import pandas as pd

    rows, samples = [], {}
    by = {r["trace_label"]: r for r in df[df["status"] == "ok"].to_dict("records")}
    for d in drives:
        r = by.get(d.file)
        if r is None:
            continue
        samples[d.file] = (r["measured_ms"], r["simulated_ms"])
        rows.append({
            "drive": d.name, "file": d.file, "requests": r["requests"],
            "demerit_ms": r["demerit_ms"], "demerit_pct": r["demerit_pct"],
            "disksim_demerit_ms": d.disksim_ms,
            "disksim_demerit_pct": 100.0 * d.disksim_ms / r["mean_measured_ms"],
            "mean_measured_ms": r["mean_measured_ms"], "mean_simulated_ms": r["mean_simulated_ms"],
            "at_most_disksim": r["demerit_ms"] <= d.disksim_ms,
        })
    return pd.DataFrame(rows), samples


def markdown(table) -> str:
    lines = ["| drive | file | ours (ms) | ours (%) | DiskSim 4.0 (ms) | DiskSim (%) | mean measured (ms) "
             "| mean simulated (ms) | ≤ DiskSim? |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        lines.append(f"| {r['drive']} | {r['file']} | {r['demerit_ms']:.3f} | {r['demerit_pct']:.1f} "
                     f"| {r['disksim_demerit_ms']:.3f} | {r['disksim_demerit_pct']:.1f} | {r['mean_measured_ms']:.3f} "
                     f"| {r['mean_simulated_ms']:.3f} | {'yes' if r['at_most_disksim'] else '**no**'} |")
    passed = int(table["at_most_disksim"].sum())
    lines.append("")
    lines.append(f"{passed} of {len(table)} drives at or under DiskSim 4.0's own demerit.")
    return "\n".join(lines) + "\n"


def plot(table, samples, path: Path) -> None:
    """Measured and simulated response-time CDFs, one panel per drive."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n = len(table)
    cols = min(5, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.7 * rows), squeeze=False)
    for ax, (_, r) in zip(axes.flat, table.iterrows()):
        meas, sim = samples[r["file"]]
        for xs, label, style in ((meas, "measured", "-"), (sim, "blocklab", "--")):
            xs = np.sort(xs)
            ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs), style, lw=1, label=label)
        ax.set_title(f"{r['drive']}\ndemerit {r['demerit_ms']:.3f} ms (DiskSim {r['disksim_demerit_ms']:.3f})",
                     fontsize=8)
        ax.set_xlabel("response time (ms)", fontsize=7)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
