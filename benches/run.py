"""`make bench`: blocklab's speed, against its peers where it has them.

Generates (once, cached under out/bench/) a 10-million-access Zipf(1.0) trace
over 1 million blocks as a libCacheSim oracleGeneral file, then writes
BENCHMARKS.md: start-up (`startup.py`: every `COMMAND --help` and a one-access
run, whole process); `blocklab cache` against libCacheSim's `cachesim` built
here, runs alternating (`counted.py`: the LRU cell of 100,000 blocks, then
every policy both have, and the engine's own rate per policy from `cargo
bench`); accesses/s of every policy (one blocklab run, per-cell time measured
by the engine); bytes per cached block of LRU (peak RSS difference between two
cache sizes); SHARDS accuracy, the timed engine (and DiskSim 4.0 built here replaying the
same trace, whole process), the composed stack, the real executor over NBD
and sweeps.

Timings are real measurements of this machine at this moment; the load
average is recorded next to them because the machine may be shared.

The real executor section (`real_nbd`) serves RAID-5 and RAID-6 arrays of
member files with `blocklab real serve --direct` and drives them with fio's
nbd engine, against fio on the raw member files (O_DIRECT, libaio) on the
same file system; `real-stack` reads through a host cache at 100 % hits against
the array alone; `nbd-peer` (`nbd_peer.py`) serves a RAID-0 and a RAID-5 of 4 against
nbdkit's file plugin and qemu-nbd on one raw file, the same fio jobs through
each. `python benches/run.py real` (or `real-stack`, `nbd-peer`; `timed`: the timed engine beside DiskSim; `stack`: the composed stack against `rgr` and
`cache`, and the timed stack's speed; `startup`; `counted`: the libCacheSim
comparison and the engine's rates; `sweeps`; `runvalid`: each line of DiskSim's runvalid table;
`overload`: doubling an overloaded trace; `sweeps-cluster`: sweeps on two Ray nodes of this machine,
`cluster.py`; `stream-rss`: peak RSS of `cache` at 20M and 200M piped accesses, `stream_rss.py`) runs only
that section and replaces it in BENCHMARKS.md.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import cluster
import counted
import nbd_peer
import peers
import startup
import stream_rss
from peers import OUT, ROOT
VENV_BIN = ROOT / ".venv" / "bin"
BLOCKLAB = str(VENV_BIN / "blocklab") if (VENV_BIN / "blocklab").exists() else "blocklab"
PYTHON = str(VENV_BIN / "python") if (VENV_BIN / "python").exists() else sys.executable

ACCESSES = int(os.environ.get("BENCH_ACCESSES", 10_000_000))
UNIVERSE = int(os.environ.get("BENCH_UNIVERSE", 1_000_000))
ALPHA = 1.0
SEED = 42
CACHE = 100_000
RUNS = int(os.environ.get("BENCH_RUNS", 5))
TRACE = OUT / f"zipf{ALPHA}-{ACCESSES}-{UNIVERSE}-seed{SEED}.oracleGeneral"


def ensure_trace() -> None:
    if TRACE.exists() and TRACE.stat().st_size == 24 * ACCESSES:
        return
    OUT.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    tmp = TRACE.with_suffix(".tmp")
    # In a child process: Linux hands a forked child the parent's peak RSS as its
    # starting ru_maxrss, so a large parent would hide the children's memory.
    subprocess.run([BLOCKLAB, "trace", "synth", str(tmp), "--accesses", str(ACCESSES), "--universe", str(UNIVERSE),
                    "--alpha", str(ALPHA), "--seed", str(SEED), "--to", "oracle"], check=True, stdout=subprocess.DEVNULL)
    tmp.rename(TRACE)
    print(f"generated {TRACE} in {time.perf_counter() - t:.1f} s", file=sys.stderr)


def shards_accuracy() -> list[str]:
    """SHARDS against the exact curve on a 1M-access Zipf(1.0) trace over 100k blocks, 100 sizes."""
    from blocklab import _core

    f = OUT / "zipf1.0-1000000-100000-seed42.oracleGeneral"
    if not f.exists() or f.stat().st_size != 24 * 1_000_000:
        _core.write_zipf_oracle(str(f), 1_000_000, 100_000, 1.0, 42, 1)
    t = time.perf_counter()
    whole = json.loads(_core.mrc(str(f), "oracle", "exact", None, None, None, 4096, False, False))
    t_exact = time.perf_counter() - t
    unique = max(p["cache_blocks"] for p in whole["points"])
    sizes = ",".join(str(max(1, i * unique // 100)) for i in range(1, 101))
    exact = json.loads(_core.mrc(str(f), "oracle", "exact", None, None, sizes, 4096, False, False))["points"]
    rows = [
        "## SHARDS accuracy",
        "",
        f"1,000,000 accesses, Zipf(1.0) over 100,000 blocks (seed 42); error of the SHARDS_adj curve against the "
        f"exact one at 100 cache sizes evenly spread up to the footprint ({unique:,} blocks). Exact curve: "
        f"{t_exact:.2f} s in process.",
        "",
        "| SHARDS | mean absolute error | max absolute error | time in process (s) |",
        "|---|---|---|---|",
    ]
    for label, rate, k in [("fixed-rate R=0.1", 0.1, None), ("fixed-rate R=0.01", 0.01, None),
                           ("fixed-rate R=0.001", 0.001, None), ("fixed-size 8192 samples", None, 8192),
                           ("fixed-size 2048 samples", None, 2048)]:
        t = time.perf_counter()
        pts = json.loads(_core.mrc(str(f), "oracle", "shards", rate, k, sizes, 4096, False, False))["points"]
        dt = time.perf_counter() - t
        errs = [abs(a["miss_ratio"] - b["miss_ratio"]) for a, b in zip(exact, pts)]
        rows.append(f"| {label} | {sum(errs) / len(errs):.4f} | {max(errs):.4f} | {dt:.2f} |")
    return rows + [""]


TIMED_RUNS = int(os.environ.get("BENCH_TIMED_RUNS", 7))
TIMED_REQUESTS = 100_000


def timed_trace(capacity_sectors: int) -> Path:
    """The timed bench's workload as a DiskSim ASCII trace (`time_ms device block sectors flags`), so
    that DiskSim and `blocklab disk run` replay the same requests: 100,000 uniformly random 4 KiB reads
    arriving at exponential gaps of mean 10 ms, drawn as `benches/timed.rs`'s `workload` draws them
    (the same xorshift and the same doubles: its "open" case)."""
    path = OUT / f"rand4k-{TIMED_REQUESTS}-cap{capacity_sectors}.disksim"
    if path.exists():
        return path
    mask = (1 << 64) - 1
    x = 0x2545_F491_4F6C_DD1D

    def nxt() -> int:
        nonlocal x
        x ^= (x << 13) & mask
        x ^= x >> 7
        x ^= (x << 17) & mask
        return x

    slots, t, lines = capacity_sectors // 8, 0.0, []
    for _ in range(TIMED_REQUESTS):
        u = ((nxt() >> 11) + 0.5) / float(1 << 53)
        t += -10.0 * math.log(u) / 1000.0
        # repr: the shortest text that reads back as the same double.
        lines.append(f"{t * 1000.0!r}\t0\t{(nxt() % slots) * 8}\t8\t1\n")
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(lines))
    tmp.rename(path)
    return path


def engine_example() -> str:
    """`examples/disk_run.rs` built (release): `blocklab disk run` without the Python front end."""
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "blocklab", "--example", "disk_run"], cwd=ROOT,
                   check=True)
    return str(ROOT / "target" / "release" / "examples" / "disk_run")


def timed_engine() -> list[str]:
    """The timed executor on 100,000 random 4 KiB reads of one Cheetah 9LP: the engine's cases
    (`cargo bench -p blocklab --bench timed`, one JSON line per case), then the open case whole process
    against DiskSim 4.0 built here, the same requests from one trace file, runs alternating."""
    cmd = ["cargo", "bench", "-q", "-p", "blocklab", "--bench", "timed"]
    sys.path.insert(0, str(ROOT / "python"))
    from blocklab.repro.disks import default_dir

    env = dict(os.environ)
    folder = default_dir()
    if folder is not None and "BLOCKLAB_SHARED" not in env:
        # The bench looks in <repo>/../shared only; Python also finds a worktree's ../../shared.
        env["BLOCKLAB_SHARED"] = str(folder.parent.parent)
    load_before = os.getloadavg()[0]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True, env=env).stdout
    model = next((line for line in out.splitlines() if line.startswith("model ")), "model ?")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    lines = [
        "## Timed engine",
        "",
        f"Measured {peers.today()} by `python benches/run.py timed` (part of `make bench`) at blocklab "
        f"{peers.commit()}; {peers.machine()}; load average {load_before:.1f} before.",
        "",
        f"`{' '.join(cmd)}`: 100,000 uniformly random 4 KiB reads, fixed seed; {model.split(' (')[0].split('/')[-1]} "
        "(DiskSim's validated model when `../shared` is present, else the Ultrastar 73LZX TOML spec); the engine "
        "alone, in process (one run per case after a warm-up).",
        "",
        "| case | wall (s) | CPU (s) | events per CPU second | mean response (ms) | mean service (ms) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['case']} | {r['wall_s']:.3f} | {r['cpu_s']:.3f} | {r['events_per_cpu_s']:,} | "
                     f"{r['avg_response_ms']:.3f} | {r['avg_service_ms']:.3f} |")
    m = re.search(r"\((\d+) sectors\)", model)
    if not model.split(" (")[0].endswith("cheetah9LP.parv") or m is None:
        return lines + ["", "Side by side with DiskSim: skipped (`../shared/disk-models/disksim-valid` is not "
                            "present).", ""]
    return lines + [""] + timed_against_disksim(Path(model.split(" (")[0][len("model "):]), int(m.group(1)))


def timed_against_disksim(parv: Path, capacity: int) -> list[str]:
    """`blocklab disk run` against DiskSim's `disksim` on the same .parv and trace, whole process."""
    disksim, _ = peers.disksim()
    stock, _ = peers.disksim(stock=True)
    trace = timed_trace(capacity)
    engine = engine_example()
    outv = OUT / "disksim-timed.outv"
    tools = {
        "DiskSim 4.0 (`-O2`)": ([disksim, parv.name, str(outv), "ascii", str(trace), "0"], parv.parent),
        "DiskSim 4.0 as its Makefiles build it (no `-O`)": (
            [stock, parv.name, str(OUT / "disksim-stock-timed.outv"), "ascii", str(trace), "0"], parv.parent),
        "blocklab": ([BLOCKLAB, "disk", "run", str(parv), "--trace", str(trace), "--format", "disksim", "--json"],
                     None),
        "blocklab's engine alone (`examples/disk_run.rs`)": ([engine, str(parv), str(trace), "disksim"], None),
    }
    load_before = os.getloadavg()[0]
    runs: dict[str, list] = {k: [] for k in tools}
    for _ in range(TIMED_RUNS):
        for name, (cmd, cwd) in tools.items():  # alternating: each round runs every tool once
            runs[name].append(peers.run(cmd, cwd=cwd))
    load_after = os.getloadavg()[0]
    ours = json.loads(runs["blocklab"][0][2])
    theirs = {"response": peers.disksim_figure(outv, "IOdriver Response time average"),
              "service": peers.disksim_figure(outv, "IOdriver Physical access time average")}
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in runs.items()}
    ds_wall, ds_cpu = med["DiskSim 4.0 (`-O2`)"]
    lines = [
        "Side by side with DiskSim 4.0 (https://github.com/benh/disksim at "
        f"{peers.disksim_version()}, a copy of 4.0 that builds on Linux; built here by `benches/peers.py` with "
        f"`{peers.DISKSIM_CC}` in front of its Makefiles' own `-g -DASSERTS`; and as those Makefiles build it, "
        "without `-O`, with only the flags a current gcc needs). The "
        "cargo bench's open case written as a DiskSim ASCII trace (`benches/run.py` `timed_trace`: the same "
        f"{TIMED_REQUESTS:,} requests), replayed on the unchanged `cheetah9LP.parv` (FCFS at the driver, as the "
        "file says) by `disksim cheetah9LP.parv OUT ascii TRACE 0` and `blocklab disk run cheetah9LP.parv "
        "--trace TRACE --format disksim --json`; whole process, "
        f"{TIMED_RUNS} rounds alternating the tools, medians; load average {load_before:.1f} before, "
        f"{load_after:.1f} after (on a loaded machine wall time is mostly waiting for a core: compare CPU times).",
        "",
        "| tool | median wall (s) | median CPU (s) | DiskSim's CPU / this CPU | DiskSim's wall / this wall "
        "| events per CPU second | mean response (ms) | mean service (ms) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in tools:
        wall, cpu = med[name]
        if name.startswith("DiskSim"):
            lines.append(f"| {name} | {wall:.3f} | {cpu:.3f} | {ds_cpu / cpu:.2f} | {ds_wall / wall:.2f} | — | "
                         f"{theirs['response']:.3f} | {theirs['service']:.3f} |")
            continue
        lines.append(f"| {name} | {wall:.3f} | {cpu:.3f} | **{ds_cpu / cpu:.1f}×** | {ds_wall / wall:.1f}× | "
                     f"{ours['events'] / cpu:,.0f} | {ours['avg_response_ms']:.3f} | {ours['avg_service_ms']:.3f} |")
    return lines + [""]


# DiskSim's names of the trace formats and of the figures runvalid greps.
DISKSIM_FORMATS = {"disksim": "ascii", "hpsrt": "hpl"}
DISKSIM_FIGURES = {"avg_response_ms": "IOdriver Response time average",
                   "overall_response_ms": "Overall I/O System Response time average"}


def runvalid_bench() -> list[str]:
    """Each line of DiskSim's runvalid table (beyond the ten drives) as `blocklab disk run ... --json`,
    whole process, beside DiskSim 4.0 built here running the same file as runvalid runs it."""
    sys.path.insert(0, str(ROOT / "python"))
    from blocklab.repro.disks import DRIVES, RUNVALID, default_dir

    folder = default_dir()
    lines = ["## DiskSim's runvalid table", ""]
    if folder is None:
        return lines + ["Skipped: `../shared/disk-models/disksim-valid` is not present.", ""]
    disksim, rms = peers.disksim()
    outv = OUT / "disksim-runvalid.outv"
    load_before = os.getloadavg()[0]
    drive_rows = []
    for d in DRIVES:
        # runvalid's first ten lines: each drive's validation trace, then `rms` of the two
        # access-time distributions in DiskSim's output (blocklab: `disk validate`'s demerit).
        parv, trace = folder / f"{d.file}.parv", folder / f"{d.file}.trace"
        cmd = [BLOCKLAB, "disk", "validate", str(parv), "--trace", str(trace), "--json"]
        theirs = [disksim, parv.name, str(outv), "validate", trace.name, "0"]
        runs, peer = [], []
        for _ in range(3):  # alternating
            runs.append(peers.run(cmd))
            peer.append(peers.run(theirs, cwd=folder))
        m = re.search(r"rms = ([0-9.]+)", peers.run([rms, str(outv), str(outv), "-1", "-1", "1"])[2])
        out = json.loads(runs[0][2])
        drive_rows.append(
            f"| {d.file} | {out['requests']:,} | {statistics.median(r[0] for r in runs):.3f} | "
            f"{statistics.median(r[1] for r in runs):.3f} | {statistics.median(r[0] for r in peer):.3f} | "
            f"{statistics.median(r[1] for r in peer):.3f} | {out['demerit_ms']:.3f} | "
            f"{float(m.group(1)) if m else float('nan'):.3f} | {d.disksim_ms} |")
    rows = []
    for ln in RUNVALID:
        parv = folder / f"{ln.parv}.parv"
        cmd = [BLOCKLAB, "disk", "run", str(parv), "--json"]
        if ln.trace is None:
            cmd.append("--synthetic")
            theirs = [disksim, parv.name, str(outv), "ascii", "0", "1"]
        else:
            trace = folder.parent.parent / ln.trace
            if not trace.exists():
                rows.append(f"| {ln.parv} | — | (trace `{ln.trace}` not present) | — | — | — | — | {ln.disksim_ms} |")
                continue
            cmd += ["--trace", str(trace), "--format", ln.format]
            theirs = [disksim, parv.name, str(outv), DISKSIM_FORMATS[ln.format], str(trace), "0"]
        runs, peer = [], []
        for _ in range(3):  # alternating
            runs.append(peers.run(cmd))
            peer.append(peers.run(theirs, cwd=folder))
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        p_wall = statistics.median(r[0] for r in peer)
        p_cpu = statistics.median(r[1] for r in peer)
        their_ms = peers.disksim_figure(outv, DISKSIM_FIGURES[ln.figure])
        try:
            out = json.loads(runs[0][2])
        except json.JSONDecodeError:
            rows.append(f"| {ln.parv} | — | {wall:.3f} (refused) | — | {p_wall:.3f} | {p_cpu:.3f} | — | "
                        f"{their_ms:.3f} | {ln.disksim_ms} |")
            continue
        rows.append(f"| {ln.parv} | {out['requests']:,} | {wall:.3f} | {cpu:.3f} | {p_wall:.3f} | {p_cpu:.3f} | "
                    f"{out[ln.figure]:.3f} | {their_ms:.3f} | {ln.disksim_ms} |")
    load_after = os.getloadavg()[0]
    return lines + [
        f"Measured {peers.today()} by `python benches/run.py runvalid` (part of `make bench`) at blocklab "
        f"{peers.commit()}; {peers.machine()}; load average {load_before:.1f} before, {load_after:.1f} after. "
        "Each `.parv` of DiskSim's validation folder unchanged, run as `runvalid` runs it: "
        "`blocklab disk run FILE.parv --synthetic --json` (or `--trace` with its trace) against DiskSim 4.0 built "
        f"here (`{peers.disksim_version()}` of https://github.com/benh/disksim, `{peers.DISKSIM_CC}`; "
        "`disksim FILE.parv OUT ascii 0 1`, or with its trace); whole process, 3 runs alternating the tools, "
        "medians. The last column is what runvalid says DiskSim should print; the one before it what DiskSim "
        "printed here (the figure runvalid greps).",
        "",
        "| line | requests | blocklab wall (s) | blocklab CPU (s) | DiskSim wall (s) | DiskSim CPU (s) | ours (ms) "
        "| DiskSim here (ms) | runvalid says (ms) |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "runvalid's first ten lines, the drives: `blocklab disk validate FILE.parv --trace FILE.trace --json` "
        "(its demerit) against `disksim FILE.parv OUT validate FILE.trace 0` (timed) and DiskSim's `rms OUT OUT "
        "-1 -1 1` (the figure runvalid prints: the same root-mean-square distance of the simulated and the traced "
        "access-time distributions); the last column is DiskSim 4.0's value as `blocklab repro disks` quotes it.",
        "",
        "| drive | requests | blocklab wall (s) | blocklab CPU (s) | DiskSim wall (s) | DiskSim CPU (s) "
        "| ours, demerit (ms) | DiskSim here, rms (ms) | DiskSim 4.0 (ms) |",
        "|---|---|---|---|---|---|---|---|---|",
        *drive_rows,
        "",
    ]


STACK_CELL = """\
# One rgr cell as a stack file: LRU over a RAID-5 of 6 disks with disk 0 failed.
tenant_map = "key"
[replay]
reads_only = true
[[cache]]
policy = "lru"
size = {size}
merge_misses = false
[array]
raid = 5
disks = 6
failed = [0]
[device]
model = "const:0"
"""


PRESTACK_KEY = "blocklab rgr before the stack (ed6daa2)"


def stack_bench() -> list[str]:
    """The composed stack: counted (one cache layer over an array) against `rgr` and `cache`
    on the same cell, and the timed stack's requests per second."""
    cell = OUT / "rgr-cell.toml"
    cell.write_text(STACK_CELL.format(size=CACHE))
    cmds = {
        "blocklab run (stack, counted)": [BLOCKLAB, "run", str(cell), "--trace", str(TRACE), "--format", "oracle",
                                          "--executor", "count", "--json"],
        "blocklab rgr": [BLOCKLAB, "rgr", str(TRACE), "--format", "oracle", "--raid", "5", "--disks", "6", "--failed",
                         "0", "--reads-only", "--policy", "lru", "--size", str(CACHE), "--json"],
        "blocklab cache (no array)": [BLOCKLAB, "cache", str(TRACE), "--format", "oracle", "--policy", "lru", "--size",
                                      str(CACHE), "--reads-only", "--json"],
    }
    # The peer the speed target is about: `rgr` as it was before it became a front end of the
    # stack (its own cache-plus-array loop), from a checkout of commit ed6daa2 built with
    # `make install`; give its CLI in BLOCKLAB_PRESTACK (e.g. out/prestack/.venv/bin/blocklab).
    prestack = os.environ.get("BLOCKLAB_PRESTACK")
    if prestack:
        cmds[PRESTACK_KEY] = [prestack] + cmds["blocklab rgr"][1:]
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for k, c in cmds.items():
        peers.run(c)  # warm-up
    for _ in range(max(3, RUNS // 2 + 1)):
        for k, c in cmds.items():
            times[k].append(peers.run(c)[0])
    med = {k: statistics.median(v) for k, v in times.items()}
    run_key, rgr_key, cache_key = list(cmds)[:3]
    lines = [
        "## The composed stack",
        "",
        f"Counted: one LRU layer of {CACHE:,} blocks over a RAID-5 of 6 disks with disk 0 failed, reads only, "
        f"on the trace above (`{cell.relative_to(ROOT)}`); runs alternate, median of {len(times[run_key])}.",
        "",
        "| command | median wall (s) | runs (s) | M accesses/s |",
        "|---|---|---|---|",
    ]
    for k in cmds:
        lines.append(f"| {k} | {med[k]:.3f} | {', '.join(f'{t:.3f}' for t in times[k])} | {ACCESSES / med[k] / 1e6:.1f} |")
    lines += [
        "",
        f"**Speed of the stack / speed of `rgr` on the same cell: {med[rgr_key] / med[run_key]:.2f}** (target: at "
        f"least 0.7; `rgr` is itself a front end of the stack now); against the cache simulator alone, which plans "
        f"no array I/O: {med[cache_key] / med[run_key]:.2f}.",
        "",
    ]
    if PRESTACK_KEY in med:
        lines[-1:-1] = [
            "",
            f"**Speed of the stack / speed of the pre-stack `rgr` (commit ed6daa2, its own loop): "
            f"{med[PRESTACK_KEY] / med[run_key]:.2f}** (target: at least 0.7).",
        ]
    else:
        lines[-1:-1] = ["", "(Set BLOCKLAB_PRESTACK to a pre-stack build to compare with `rgr`'s own loop.)"]
    # Timed: a host cache over a RAID-5 of Ultrastar 73LZX.
    stack = ROOT / "examples" / "stacks" / "host-lru-raid5.toml"
    synth = OUT / "zipf-1M-timed.csv"
    if not synth.exists():
        subprocess.run([BLOCKLAB, "trace", "synth", str(synth), "--accesses", "1000000", "--universe", "200000",
                        "--alpha", "0.9", "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
    rows = []
    for label, trace, fmt in [("shipped sample (wsrch-small, 24,783 requests)", ROOT / "data" / "wsrch-small.trace", "mqsim"),
                              ("synthetic Zipf(0.9), 1,000,000 requests at 1,000/s", synth, "csv")]:
        cmd = [BLOCKLAB, "run", str(stack), "--trace", str(trace), "--format", fmt, "--json"]
        runs = [peers.run(cmd) for _ in range(3)]
        wall = statistics.median(r[0] for r in runs)
        out = json.loads(runs[0][2])
        rows.append(f"| {label} | {wall:.2f} | {out['requests'] / wall:,.0f} | {out['timing']['events']:,} | "
                    f"{out['layers'][0]['miss_ratio']:.4f} | {out['response']['avg_ms']:.3f} |")
    lines += [
        f"Timed: `blocklab run {stack.relative_to(ROOT)} --trace T` (a 64 MiB LRU write-back host cache over a RAID-5 "
        "of six Ultrastar 73LZX, open replay); whole process, median of 3.",
        "",
        "| trace | wall (s) | requests per second | engine events | miss ratio | mean response (ms) |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    return lines


OVERLOAD_SECTION = "## No slowdown under overload"
OVERLOAD_SIZES = (100_000, 200_000, 400_000)
OVERLOAD_STACK = ROOT / "benches" / "overload" / "raid6-lru-failed.toml"


def overload_bench() -> list[str]:
    """Doubling an overloaded trace: a Zipf trace at 1,000 requests/s outpaces one 7,200 RPM disk and a
    degraded RAID-6 behind a host cache, so the device queues grow for the whole run; the time per
    request must not grow with them (target: at most 2.3x per doubling)."""
    disk = ROOT / "examples" / "disks" / "sata-7200.toml"
    configs = {
        "one sata-7200 disk, FCFS": lambda t: [BLOCKLAB, "disk", "run", str(disk), "--trace", str(t), "--format",
                                               "csv", "--wrap", "--json"],
        "RAID-6 of 6 sata-7200, disk 0 failed, 64 MiB host LRU": lambda t: [
            BLOCKLAB, "run", str(OVERLOAD_STACK), "--trace", str(t), "--format", "csv", "--json"],
    }
    load_before = os.getloadavg()
    traces = {}
    for n in OVERLOAD_SIZES:
        traces[n] = OUT / f"zipf0.9-overload-{n}.csv"
        if not traces[n].exists():
            OUT.mkdir(parents=True, exist_ok=True)
            subprocess.run([BLOCKLAB, "trace", "synth", str(traces[n]), "--accesses", str(n), "--universe",
                            "2000000", "--alpha", "0.9", "--seed", "42"], check=True, stdout=subprocess.DEVNULL)
    rows = []
    for label, cmd in configs.items():
        prev = None
        for n in OVERLOAD_SIZES:
            runs = [peers.run(cmd(traces[n])) for _ in range(3)]
            wall = statistics.median(r[0] for r in runs)
            # The least disturbed run: on a shared machine others' work only adds to a run's CPU time
            # (cache and memory-bus contention), and it adds more the larger the run's working set.
            cpu = min(r[1] for r in runs)
            rss = max(r[3] for r in runs) / 1024
            out = json.loads(runs[0][2])
            resp = out["avg_response_ms"] if "avg_response_ms" in out else out["response"]["avg_ms"]
            peak = out.get("max_outstanding", out.get("timing", {}).get("max_outstanding", "?"))
            ratio = f"{cpu / prev:.2f}" if prev else "–"
            prev = cpu
            rows.append(f"| {label} | {n:,} | {wall:.2f} | {cpu:.2f} | {ratio} | {rss:.0f} | {peak:,} | "
                        f"{resp / 1000:,.1f} |")
            print(f"overload {label} {n}: {wall:.2f} s wall, {cpu:.2f} s CPU, {rss:.0f} MiB", file=sys.stderr)
    long_rows = long_rebuild_rows()
    load_after = os.getloadavg()
    return [
        OVERLOAD_SECTION,
        "",
        f"`python benches/run.py overload` (part of `make bench`); machine: {peers.machine()}; load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after. Traces: `blocklab trace synth T --accesses N "
        "--universe 2000000 --alpha 0.9 --seed 42` (one 4 KiB request per millisecond: 1,000 requests/s, "
        "more than the disks serve, so the queues grow for the whole run). Commands: "
        f"`blocklab disk run {disk.relative_to(ROOT)} --trace T --format csv --wrap --json` and "
        f"`blocklab run {OVERLOAD_STACK.relative_to(ROOT)} --trace T --format csv --json`; whole process, "
        "3 runs: the median wall time, the least CPU time (user + system; others' work on a shared machine only "
        "adds to it); the ratio is the CPU time over the previous row's (target: at most 2.3 per doubling).",
        "",
        "| configuration | requests | median wall (s) | least CPU (s) | CPU / previous | peak RSS (MiB) | max outstanding "
        "| mean response (s) |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "A long run the array keeps up with (issue 26, target 3): `blocklab run examples/stacks/vdf-rebuild.toml "
        "--trace T --format csv --set array.disk_size=8GiB --json` (a VDF-LFU host cache of 10 % of the footprint "
        "over a RAID-5 of five Ultrastar 73LZX, disk 1 rebuilt onto a spare from t = 0 at MD's default speeds; "
        "members of 8 GiB) on `blocklab trace synth T --accesses N "
        "--universe 200000 --alpha 0.9 --seed 1`; whole process, one run each.",
        "",
        "| requests | wall (s) | CPU (s) | requests per CPU second | engine events | peak RSS (MiB) "
        "| max outstanding | simulated time (s) | rebuild (rows, simulated s) | mean response (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *long_rows,
        "",
    ]


LONG_SIZES = tuple(int(x) for x in os.environ.get("BENCH_LONG_SIZES", "1000000,10000000").split(","))


def long_rebuild_rows() -> list[str]:
    """Rate and memory of a long RAID-5 run with a rebuild (memory must not grow with the trace)."""
    stack = ROOT / "examples" / "stacks" / "vdf-rebuild.toml"
    rows = []
    for n in LONG_SIZES:
        trace = OUT / f"zipf0.9-{n}-u200000-seed1.csv"
        if not trace.exists():
            OUT.mkdir(parents=True, exist_ok=True)
            subprocess.run([BLOCKLAB, "trace", "synth", str(trace), "--accesses", str(n), "--universe", "200000",
                            "--alpha", "0.9", "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
        wall, cpu, out, rss = peers.run([BLOCKLAB, "run", str(stack), "--trace", str(trace), "--format", "csv",
                                         "--set", "array.disk_size=8GiB", "--json"])
        j = json.loads(out)
        t, rb = j["timing"], j.get("rebuild") or {}
        rows.append(f"| {n:,} | {wall:.1f} | {cpu:.1f} | {n / cpu:,.0f} | {t['events']:,} | {rss / 1024:.0f} | "
                    f"{t['max_outstanding']:,} | {t['sim_time_ms'] / 1000:,.0f} | "
                    f"{rb.get('rebuild_rows', 0):,} of {rb.get('rows_total', 0):,}, "
                    f"{rb.get('rebuild_ms', 0) / 1000:,.0f} s{'' if rb.get('finished') else ' (unfinished)'} | "
                    f"{j['response']['avg_ms']:.2f} |")
        print(f"long rebuild {n}: {wall:.1f} s wall, {cpu:.1f} s CPU, {rss / 1024:.0f} MiB", file=sys.stderr)
    return rows


REAL_MEMBER_MIB = int(os.environ.get("BENCH_REAL_MEMBER_MIB", 256))
REAL_SECONDS = int(os.environ.get("BENCH_REAL_SECONDS", 8))
REAL_SECTION = "## Real executor over NBD"
# (name, fio rw, block size): large sequential and 4 KiB random.
# Both arrays have three data members and 64 KiB chunks: 768 KiB is four
# whole stripes, so those writes need no reads of old data.
REAL_JOBS = [("seq read 1 MiB", "read", "1M"), ("seq write 1 MiB", "write", "1M"),
             ("seq write 768 KiB (whole stripes)", "write", "768k"),
             ("rand read 4 KiB", "randread", "4k"), ("rand write 4 KiB", "randwrite", "4k")]


def _fio(args: list[str]) -> dict:
    out = subprocess.run(["fio", "--output-format=json", *args], capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{"):])


def _rate(j: dict, rw: str) -> tuple[float, float]:
    """(MiB/s, IOPS) summed over the jobs of one fio run."""
    side = "write" if "write" in rw else "read"
    bw = sum(job[side]["bw_bytes"] for job in j["jobs"])
    iops = sum(job[side]["iops"] for job in j["jobs"])
    return bw / 2**20, iops


def _sectors_written(path: Path) -> int | None:
    """Sectors the block device holding `path` has written so far (None: not
    a plain block device)."""
    st = os.stat(path)
    try:
        return int(Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat").read_text().split()[6])
    except (OSError, IndexError, ValueError):
        return None


def _fio_on_device(args: list[str], where: Path) -> tuple[dict, float | None]:
    """A fio run and what the device under `where` wrote meanwhile (MiB/s of
    wall time): the bytes that reached the disk, parity included."""
    s0, t0 = _sectors_written(where), time.perf_counter()
    j = _fio(args)
    s1, t1 = _sectors_written(where), time.perf_counter()
    return j, None if s0 is None or s1 is None else (s1 - s0) * 512 / 2**20 / (t1 - t0)


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _gib(j: dict, rw: str) -> float:
    side = "write" if "write" in rw else "read"
    return sum(job[side]["io_bytes"] for job in j["jobs"]) / 2**30


def _common(rw: str, bs: str) -> list[str]:
    return [f"--rw={rw}", f"--bs={bs}", "--iodepth=16", f"--runtime={REAL_SECONDS}", "--time_based",
            "--randrepeat=1", "--norandommap"]


REAL_ROUNDS = int(os.environ.get("BENCH_REAL_ROUNDS", 3))


def _serve(d: Path, blocklab: str = BLOCKLAB) -> tuple[subprocess.Popen, str]:
    srv = subprocess.Popen([blocklab, "real", "serve", str(d), "--listen", "127.0.0.1:0", "--direct"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = srv.stdout.readline()
    m = re.search(r"nbd://([\d.]+:\d+/\S+)", line)
    if not m:
        raise RuntimeError(f"server did not start: {line} {srv.stderr.read()}")
    return srv, "nbd://" + m.group(1)


# (key, level, disks, the raw aggregate it is held against). The wide
# RAID-6 runs the large sequential cases only.
REAL_ARRAYS = [("raid5", "raid5", 4, "raw5"), ("raid6", "raid6", 5, "raw5"), ("raid6x10", "raid6", 10, "raw10")]
REAL_WIDE = {"raw10", "raid6x10"}


def real_nbd() -> list[str]:
    """fio through `blocklab real serve` (RAID-5 of 4, RAID-6 of 5, RAID-6 of 10
    member files) against fio on raw member-sized files on the same file system,
    in rounds: in each, every array runs between two runs of its raw aggregate,
    and its ratio is over their mean, so each ratio compares runs made minutes
    apart at most on a disk whose speed drifts."""
    work = OUT / "real"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    size = f"{REAL_MEMBER_MIB}M"
    load_before = os.getloadavg()
    # Raw files, written in full first (reads of holes would not touch the disk).
    for i in range(10):
        _fio(["--name=fill", f"--filename={work / f'raw{i}'}", "--rw=write", "--bs=1M", f"--size={size}",
              "--direct=1", "--ioengine=libaio", "--iodepth=16"])
    servers = {}
    for key, level, disks, _ in REAL_ARRAYS:
        d = work / key
        subprocess.run([BLOCKLAB, "real", "create", str(d), "--raid", level, "--disks", str(disks), "--chunk", "64KiB",
                        "--disk-size", size], check=True, capture_output=True)
        servers[key] = _serve(d)
        _fio(["--name=fill", "--ioengine=nbd", f"--uri={servers[key][1]}", "--rw=write", "--bs=1M", "--iodepth=16"])
    # rate[(config, case)] = [(MiB/s, IOPS) per run]; base[(array, case)] =
    # [MiB/s of its raw aggregate per round: the mean of the raw runs just
    # before and just after the array's run]; cpu[(array, case)] = [server
    # CPU seconds per GiB per round]: the load of the shared machine moves
    # the bandwidths, much less what each byte costs the server.
    rate: dict = {}
    base: dict = {}
    cpu: dict = {}
    # disk_rate[(config, case)] = [MiB/s the disk under the files wrote per run]
    disk_rate: dict = {}
    against = {key: raw for key, _, _, raw in REAL_ARRAYS}

    def raw_run(n: int, name: str, rw: str, bs: str) -> tuple[float, float]:
        args = ["--name=raw", "--direct=1", "--ioengine=libaio", f"--size={size}", *_common(rw, bs)]
        if n == 1:
            args.append(f"--filename={work / 'raw0'}")
        else:
            # One job per file, all at once: the files' aggregate.
            args += [f"--numjobs={n}", "--filename_format=" + str(work / "raw$jobnum"), "--group_reporting"]
        j, dev = _fio_on_device(args, work)
        disk_rate.setdefault((f"raw{n}", name), []).append(dev)
        return _rate(j, rw)

    for rnd in range(REAL_ROUNDS):
        for name, rw, bs in REAL_JOBS:
            wide = bs == "1M"
            rate.setdefault(("raw1", name), []).append(raw_run(1, name, rw, bs))
            # Each array runs between two runs of its raw aggregate (the run
            # after one array is the run before the next): this VM's disk
            # drifts within minutes, so the baseline is taken around the run.
            last = None
            for key, (srv, uri) in servers.items():
                if key in REAL_WIDE and not wide:
                    continue
                cfg = against[key]
                n = int(cfg.removeprefix("raw"))
                fresh = not (last and last[0] == cfg)
                before = raw_run(n, name, rw, bs) if fresh else last[1]
                c0 = _proc_cpu(srv.pid)
                j, dev = _fio_on_device(["--name=nbd", "--ioengine=nbd", f"--uri={uri}", *_common(rw, bs)], work)
                disk_rate.setdefault((key, name), []).append(dev)
                cpu.setdefault((key, name), []).append((_proc_cpu(srv.pid) - c0) / _gib(j, rw))
                rate.setdefault((key, name), []).append(_rate(j, rw))
                after = raw_run(n, name, rw, bs)
                last = (cfg, after)
                rate.setdefault((cfg, name), []).extend([before, after] if fresh else [after])
                base.setdefault((key, name), []).append((before[0] + after[0]) / 2)
            print(f"round {rnd + 1} {name}: " + ", ".join(f"{k[0]} {v[-1][0]:.0f}" for k, v in rate.items()
                                                           if k[1] == name) + " MiB/s", file=sys.stderr)
    for srv, _ in servers.values():
        srv.send_signal(signal.SIGTERM)
        srv.wait(timeout=120)
    load_after = os.getloadavg()
    shutil.rmtree(work, ignore_errors=True)
    parity = {key: (disks, 2 if level == "raid6" else 1) for key, level, disks, _ in REAL_ARRAYS}

    def med(xs: list[float]) -> float:
        return statistics.median(xs)

    def mib(cfg: str, name: str) -> float:
        return med([r[0] for r in rate[(cfg, name)]])

    def iops(cfg: str, name: str) -> float:
        return med([r[1] for r in rate[(cfg, name)]])

    def ratios(key: str, name: str) -> list[float]:
        """The array against the raw aggregate around its run, round by round."""
        return [a[0] / b for a, b in zip(rate[(key, name)], base[(key, name)])]

    def ratio_cell(key: str, name: str) -> str:
        rs = ratios(key, name)
        return f"{med(rs):.2f} ({min(rs):.2f}–{max(rs):.2f})"

    def ceiling(key: str) -> str:
        """The share of the device a full-stripe writer leaves for user data."""
        n, p = parity[key]
        return f"{(n - p) / n:.0%}"

    def amplification(key: str) -> str:
        """Member bytes a writer of whole stripes writes per user byte."""
        n, p = parity[key]
        return f"{n / (n - p):.2f}"

    def r(key: str, i: int) -> str:
        return f"{med(ratios(key, REAL_JOBS[i][0])):.0%}"

    def device(key: str, i: int) -> str:
        """Member bytes written per second (user bytes × N / (N - parity)) over the raw aggregate."""
        n, p = parity[key]
        return f"{med(ratios(key, REAL_JOBS[i][0])) * n / (n - p):.0%}"

    def disk(cfg: str, i: int) -> str:
        """Median MiB/s the disk wrote during the runs of `cfg` in case `i`."""
        xs = [x for x in disk_rate.get((cfg, REAL_JOBS[i][0]), []) if x is not None]
        return f"{med(xs):.0f}" if xs else "–"

    def spread(cfg: str, i: int) -> str:
        xs = [x[0] for x in rate[(cfg, REAL_JOBS[i][0])]]
        return f"{min(xs):.0f} to {max(xs):.0f}"

    fio_version = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
    lines = [
        REAL_SECTION,
        "",
        f"`python benches/run.py real` (part of `make bench`); {fio_version}; machine: {peers.machine()}; load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after. Member files of {REAL_MEMBER_MIB} MiB on the same "
        "ext4 file system, 64 KiB chunks, left-symmetric. Server: `blocklab real serve DIR --listen 127.0.0.1:0 "
        "--direct` (O_DIRECT on the members, 16 worker threads); clients: `fio --ioengine=nbd --uri=nbd://...` "
        f"with iodepth 16, {REAL_SECONDS} s per case, after writing the whole array once. Raw: `fio --direct=1 "
        "--ioengine=libaio --iodepth=16` on one member-sized file, and on five (ten) such files at once (one job per "
        f"file, summed: the files' aggregate bandwidth). {REAL_ROUNDS} rounds; in each, every case runs on one raw "
        "file, then on each array between two runs of its raw aggregate (the run after one array is the run "
        "before the next). Bandwidths are medians over all runs; a ratio is the median (min–max) over the rounds "
        "of the array's bandwidth over the mean of the two raw runs around it.",
        "",
        "| case | raw file (MiB/s) | 5 raw files at once (MiB/s) | RAID-5 of 4 over NBD (MiB/s) | RAID-6 of 5 over NBD (MiB/s) | RAID-5 / aggregate | RAID-6 / aggregate |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rw, bs in REAL_JOBS:
        cfgs = ("raw1", "raw5", "raid5", "raid6")
        extra = "" if bs != "4k" else " (" + " / ".join(f"{iops(c, name):,.0f}" for c in cfgs) + " IOPS)"
        lines.append(f"| {name}{extra} | " + " | ".join(f"{mib(c, name):.0f}" for c in cfgs) + " | "
                     f"{ratio_cell('raid5', name)} | {ratio_cell('raid6', name)} |")
    lines += [
        "",
        "A wide RAID-6 (8 data members + P + Q: 1 MiB is two whole stripes) against ten raw files at once, large "
        "sequential cases:",
        "",
        "| case | 10 raw files at once (MiB/s) | RAID-6 of 10 over NBD (MiB/s) | RAID-6 of 10 / aggregate |",
        "|---|---|---|---|",
        *[f"| {name} | {mib('raw10', name):.0f} | {mib('raid6x10', name):.0f} | {ratio_cell('raid6x10', name)} |"
          for name, _, bs in REAL_JOBS if bs == "1M"],
        "",
        f"Large sequential reads through the NBD server reach **{r('raid5', 0)} (RAID-5 of 4), {r('raid6', 0)} "
        f"(RAID-6 of 5) and {r('raid6x10', 0)} (RAID-6 of 10)** of the raw files' aggregate bandwidth (target: "
        f"70 %); large sequential writes **{r('raid5', 1)}, {r('raid6', 1)} and {r('raid6x10', 1)}** (whole "
        f"stripes of 768 KiB on the arrays of three data members: {r('raid5', 2)}, {r('raid6', 2)}). All member "
        "files share one device, so the parity goes to the same device as the data: a writer of whole stripes "
        f"writes {amplification('raid5')} member bytes per user byte on a RAID-5 of 4, {amplification('raid6')} "
        f"on a RAID-6 of 5 and {amplification('raid6x10')} on a RAID-6 of 10, and counting them the arrays' "
        f"sequential 1 MiB writes put {device('raid5', 1)}, {device('raid6', 1)} and {device('raid6x10', 1)} of "
        "the raw aggregate's bandwidth on the members. The disk under the files wrote (sectors written, from "
        f"`/sys/dev/block/.../stat`, over each run's wall time; medians) {disk('raw5', 1)} MiB/s during the five "
        f"raw files' 1 MiB writes and {disk('raw10', 1)} during the ten's, {disk('raid5', 1)}, "
        f"{disk('raid6', 1)} and {disk('raid6x10', 1)} MiB/s during the arrays'. User data is "
        f"{ceiling('raid5')}, {ceiling('raid6')} and {ceiling('raid6x10')} of what a writer of whole stripes puts on the "
        "disk, "
        "and the RAID-6 of 5 reaches the 70 % target only if its members take "
        f"{0.7 * parity['raid6'][0] / (parity['raid6'][0] - parity['raid6'][1]):.0%} of the raw aggregate's "
        "bandwidth. On the arrays of three data members 1 MiB writes do not "
        "cover whole stripes of 192 KiB: the partial stripes at each request's ends are gathered with the "
        "neighbouring requests of the stream (`exec/real/gather.rs`, as MD's stripe cache does), so a sequential "
        "stream writes whole stripes without reading old data. The server, fio's NBD client and the loopback "
        "TCP between them share the two cores (NBD over loopback copies every byte twice in the kernel), so "
        "small requests are CPU-bound and the machine's load weighs on every NBD number. The raw baseline of "
        "this VM's host-cached disk moves by tens of percent within minutes (1 MiB writes on five raw files: "
        f"{spread('raw5', 1)} MiB/s over this run), which is why each ratio is taken against the raw runs just "
        "before and after the array's.",
        "",
        "What each byte costs the server (CPU seconds, user + system, of the `real serve` process per GiB "
        "moved, from /proc over each case, median over the rounds; less sensitive to the machine's load than the "
        "bandwidths):",
        "",
        "| case | RAID-5 of 4 (CPU s per GiB) | RAID-6 of 5 (CPU s per GiB) | RAID-6 of 10 (CPU s per GiB) |",
        "|---|---|---|---|",
        *[f"| {name} | {med(cpu[('raid5', name)]):.2f} | {med(cpu[('raid6', name)]):.2f} | "
          + (f"{med(cpu[('raid6x10', name)]):.2f} |" if ("raid6x10", name) in cpu else "– |")
          for name, _, _ in REAL_JOBS],
        "",
    ]
    return lines


STACK_HIT_MIB = int(os.environ.get("BENCH_STACK_HIT_MIB", 64))
STACK_MEMBER_MIB = int(os.environ.get("BENCH_STACK_MEMBER_MIB", 64))
# Another build's `blocklab` (e.g. main's), served beside this one's on stacks of their own: before / after.
STACK_BASELINE = os.environ.get("BENCH_STACK_BASELINE")
STACK_BASELINE_LABEL = os.environ.get("BENCH_STACK_BASELINE_LABEL", "baseline")
STACK_SEQ = ("seq read 1 MiB", "read", "1M")
STACK_RAND = ("rand read 4 KiB", "randread", "4k")


def _layers(d: Path, blocklab: str = BLOCKLAB) -> dict:
    """The served stack's live figures (`real status --json`): hits and misses of its host cache or tier."""
    out = subprocess.run([blocklab, "real", "status", str(d), "--json"], capture_output=True, text=True,
                         check=True).stdout
    st = json.loads(out)["stack"]
    if st.get("layers"):
        return {"hits": st["layers"][0]["hits"], "misses": st["layers"][0]["misses"]}
    t = st["tier"]
    return {"hits": t.get("read_hits", 0) + t.get("write_hits", 0), "misses": t.get("read_misses", 0)}


def real_stack_hits() -> list[str]:
    """Reads through NBD: the same RAID-5 of 4 member files (O_DIRECT) served
    bare and with stacks in front — a write-back LRU holding the region fio
    reads (100 % hits), a small one (about 0 % hits), an SSD tier holding it —
    each warmed by one sequential pass; with BENCH_STACK_BASELINE, the stacks
    also served by that build's `blocklab` (before / after). In each round
    every case runs once, in the other order the next round."""
    work = OUT / "real-stack"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    size = f"{STACK_MEMBER_MIB}M"
    region = f"{STACK_HIT_MIB}M"
    blocks = STACK_HIT_MIB * 256 + 1024
    small = 256
    array = '[array]\nraid = "raid5"\ndisks = 4\nchunk = "64KiB"\n[device]\nmodel = "const:1"\n'
    stacks = {
        "hit": f'[[cache]]\npolicy = "lru"\nsize = {blocks}\nwrite = "back"\n' + array,
        "miss": f'[[cache]]\npolicy = "lru"\nsize = {small}\nwrite = "back"\n' + array,
        "tier": f'[tier]\nsize = {blocks}\nwrite_policy = "wt"\n' + array,
    }
    builds = [("", BLOCKLAB)] + ([("@base", STACK_BASELINE)] if STACK_BASELINE else [])
    load_before = os.getloadavg()
    dirs: dict = {"array": (work / "array", BLOCKLAB)}
    subprocess.run([BLOCKLAB, "real", "create", str(dirs["array"][0]), "--raid", "5", "--disks", "4", "--chunk",
                    "64KiB", "--disk-size", size], check=True, capture_output=True)
    for k, text in stacks.items():
        f = work / f"{k}.toml"
        f.write_text(text)
        for suffix, exe in builds:
            d = work / f"{k}{suffix}"
            subprocess.run([exe, "real", "create", str(d), "--stack", str(f), "--disk-size", size],
                           check=True, capture_output=True)
            dirs[k + suffix] = (d, exe)
    cases = [(k, STACK_RAND) for k in dirs] + [(k, STACK_SEQ) for k in dirs if k.split("@")[0] in ("array", "hit")]
    servers = {k: _serve(d, exe) for k, (d, exe) in dirs.items()}
    try:
        for k, (_, uri) in servers.items():
            # The region written (reads of holes would not touch the disk), then read once: the caches warm.
            _fio(["--name=fill", "--ioengine=nbd", f"--uri={uri}", "--rw=write", "--bs=1M", "--iodepth=16",
                  f"--size={region}"])
            _fio(["--name=warm", "--ioengine=nbd", f"--uri={uri}", "--rw=read", "--bs=1M", "--iodepth=16",
                  f"--size={region}"])
        rate: dict = {}
        cpu: dict = {}
        hits: dict = {}
        for rnd in range(REAL_ROUNDS):
            # The order alternates over the rounds: a drift of the machine's load favours no case.
            for k, (name, rw, bs) in cases if rnd % 2 == 0 else cases[::-1]:
                srv, uri = servers[k]
                d, exe = dirs[k]
                before = _layers(d, exe) if k != "array" else None
                c0 = _proc_cpu(srv.pid)
                j = _fio(["--name=read", "--ioengine=nbd", f"--uri={uri}", f"--size={region}", *_common(rw, bs)])
                c1 = _proc_cpu(srv.pid)
                if before is not None:
                    after = _layers(d, exe)
                    h = hits.setdefault((k, name), [0, 0])
                    h[0] += after["hits"] - before["hits"]
                    h[1] += after["misses"] - before["misses"]
                rate.setdefault((k, name), []).append(_rate(j, rw))
                cpu.setdefault((k, name), []).append((c1 - c0) / _gib(j, rw))
    finally:
        for srv, _ in servers.values():
            srv.send_signal(signal.SIGTERM)
            srv.wait(timeout=120)
    load_after = os.getloadavg()
    med = statistics.median

    def cell(k: str, name: str) -> str:
        if (k, name) not in rate:
            return "–"
        return f"{med(r[0] for r in rate[(k, name)]):.0f} ({med(r[1] for r in rate[(k, name)]):,.0f} IOPS)"

    def share(k: str, name: str) -> str:
        h = hits.get((k, name))
        return "–" if not h or h[0] + h[1] == 0 else f"{h[0] / (h[0] + h[1]):.0%}"

    def cpu_cell(k: str, name: str) -> str:
        return f"{med(cpu[(k, name)]):.2f}" if (k, name) in cpu else "–"

    label = STACK_BASELINE_LABEL
    what = {"array": "array alone", "hit": "host cache, 100 % hits", "miss": f"host cache of {small} blocks, ~0 % hits",
            "tier": f"SSD tier (`wt`, {blocks:,} frames) holding the region"}
    head = "| served | hits | " + " | ".join(f"{n}: MiB/s (IOPS)" + (", this build" if STACK_BASELINE else "")
                                            + (f" | {n}: {label}" if STACK_BASELINE else "") + f" | {n}: CPU s per GiB"
                                            for n, _, _ in (STACK_RAND, STACK_SEQ)) + " |"
    rows = []
    for k in ("array", "hit", "miss", "tier"):
        cols = []
        for n, _, _ in (STACK_RAND, STACK_SEQ):
            cols.append(cell(k, n))
            if STACK_BASELINE:
                cols.append(cell(k + "@base", n) if k != "array" else "(same)")
            cols.append(cpu_cell(k, n) + (f" ({label}: {cpu_cell(k + '@base', n)})"
                                          if STACK_BASELINE and k != "array" and (k + "@base", n) in cpu else ""))
        rows.append(f"| {what[k]} | {share(k, STACK_RAND[0]) if k != 'array' else '–'} | " + " | ".join(cols) + " |")
    lines = [
        "## Real stack over NBD: host cache hits against the array alone",
        "",
        f"Measured {peers.today()} by `python benches/run.py real-stack` (part of `make bench`) at blocklab "
        f"{peers.commit()}; machine: {peers.machine()}; load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after. A RAID-5 of 4 member files of {STACK_MEMBER_MIB} "
        "MiB (64 KiB chunks), served with `blocklab real serve DIR --listen 127.0.0.1:0 --direct` (16 worker "
        "threads), bare and with a stack in front (`real create --stack`); fio's nbd engine reads the first "
        f"{STACK_HIT_MIB} MiB, iodepth 16, {REAL_SECONDS} s per case, after writing it and reading it once "
        f"sequentially (the caches warm). {REAL_ROUNDS} rounds, every case once per round (the other order every "
        "second round); bandwidths are medians over the rounds; CPU is the server's (user + system, from /proc) "
        "per GiB read, median over the rounds; hits: the cache's (or the tier's) share of hits during the "
        "measured 4 KiB runs."
        + (f" Beside this build, each stack is also served by {label} (`{STACK_BASELINE}`), on a directory of "
           "its own, in the same rounds." if STACK_BASELINE else ""),
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
        *rows,
        "",
        "A host cache hit costs the server a policy update and a look-up under the stack's mutex, and one copy of "
        "its bytes into the reply outside it (`exec/real/blocks.rs`); a miss, and every read of the tier's cache "
        "device, is a job run outside the mutex, so the requests fio keeps in flight overlap on the member files "
        "and `tier.img` (docs/real.md, \"Requests in parallel\"). The array alone waits on O_DIRECT reads of the "
        "member files; on large sequential reads the host-cached files are about as fast as memory. Bandwidths move "
        "with the machine's load; CPU per GiB much less.",
        "",
    ]
    return lines


def replace_section(text: str, lines: list[str]) -> str:
    """Put `lines` (a section starting with its `## ` title) in place of the same section of `text`
    (the title as a whole line: one title may begin another)."""
    m = re.search(rf"(?m)^{re.escape(lines[0])}$", text)
    new = "\n".join(lines)
    if m is None:
        return text.rstrip("\n") + "\n\n" + new
    nxt = text.find("\n## ", m.end())
    return text[:m.start()] + new + ("\n" + text[nxt + 1:] if nxt >= 0 else "")


def kept_sections(old: str, new: str) -> list[str]:
    """The sections of `old` that `new` lacks: those measured by hand ("not by `make bench`"),
    which a whole run keeps rather than drops."""
    titles = set(re.findall(r"(?m)^## .*$", new))
    return [p.rstrip("\n") for p in re.split(r"(?m)^(?=## )", old)[1:] if p.splitlines()[0] not in titles]


SWEEP_STACK = """\
# One-access cells: LRU over a RAID-5 of 6 constant-time disks (no model to build).
[[cache]]
policy = "lru"
size = 10
[array]
raid = 5
disks = 6
[device]
model = "const:1"
"""


def _sweep_file(path: Path, stack: Path, trace: Path, fmt: str, executor: str, sizes: list) -> Path:
    path.write_text(f'stack = "{stack}"\nexecutor = "{executor}"\n[[traces]]\npath = "{trace}"\nformat = "{fmt}"\n'
                    f'[grid]\n"cache.0.size" = {json.dumps(sizes)}\n')
    return path


def sweep_bench() -> list[str]:
    """`blocklab sweep`: the per-cell overhead (one-access trace, whole process, 1 against 500 cells),
    Ray's per-task cost, and the VDF reproduction grid with 1 and 2 jobs, batched and cell by cell."""
    import shutil
    import tempfile

    from blocklab import _core
    from blocklab.repro import vdf
    from blocklab.sweeps import run_sweep
    from blocklab.sweeps.runner import MAX_BATCH

    work = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    one = work / "one.csv"
    one.write_text("timestamp,op,offset,size\n0,R,0,4096\n")
    stack = work / "const.toml"
    stack.write_text(SWEEP_STACK)
    load0 = os.getloadavg()[0]
    rows = []
    n_big = 2000
    for executor, extra in (("timed", []), ("count", []), ("count", ["--no-batch"])):
        walls, cpus = {}, {}
        for n in (1, n_big):
            f = _sweep_file(work / f"{executor}{n}.toml", stack, one, "csv", executor, list(range(1, n + 1)))
            runs = []
            for _ in range(3):
                shutil.rmtree(work / "o", ignore_errors=True)
                w, cpu, _, _ = peers.run([BLOCKLAB, "sweep", str(f), "--out", str(work / "o"), "-q", *extra])
                runs.append((w, cpu))
            walls[n] = statistics.median(r[0] for r in runs)
            cpus[n] = statistics.median(r[1] for r in runs)
        rows.append(f"| {executor}{' ' + extra[0] if extra else ''} | {walls[1]:.2f} ({cpus[1]:.2f}) | "
                    f"{walls[n_big]:.2f} ({cpus[n_big]:.2f}) | **{(walls[n_big] - walls[1]) / (n_big - 1) * 1000:.2f}** "
                    f"({(cpus[n_big] - cpus[1]) / (n_big - 1) * 1000:.2f}) |")
    # The engine alone on a one-access trace, for a stack with a mechanical disk model (built per run).
    host = ROOT / "examples" / "stacks" / "host-lru-raid5.toml"
    eng = {}
    for ex in ("count", "timed"):
        t = time.perf_counter()
        for _ in range(5):
            _core.run_stack(str(host), [str(one)], format="csv", executor=ex, sets=[])
        eng[ex] = (time.perf_counter() - t) / 5
    # Ray: one local Ray of 2 CPUs kept up for the runs (its start is timed apart), 1 against 1000
    # one-access cells, in this process.
    ray_rows = []
    try:
        import logging

        import ray

        from blocklab.sweeps import load_sweep

        t = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        ray_start = time.perf_counter() - t
        rw = {}
        for n in (1, 1000):
            f = _sweep_file(work / f"ray{n}.toml", stack, one, "csv", "count", list(range(1, n + 1)))
            runs = []
            for _ in range(3):
                shutil.rmtree(work / "o", ignore_errors=True)
                t = time.perf_counter()
                run_sweep(load_sweep(f), work / "o", ray="local", progress=False)
                runs.append(time.perf_counter() - t)
            rw[n] = statistics.median(runs)
        ray.shutdown()
        ray_rows = [f"Ray (`--ray local --jobs 2`, one task per cell): starting the local Ray took {ray_start:.1f} s; "
                    f"then a sweep of 1 one-access cell {rw[1]:.2f} s, of 1000 cells {rw[1000]:.2f} s (median of 3): "
                    f"**{(rw[1000] - rw[1]) / 999 * 1000:.1f} ms per cell** through Ray's scheduler (2 workers).", ""]
    except ImportError:
        ray_rows = ["Ray is not installed (`pip install 'blocklab[ray]'`): not measured.", ""]

    # The VDF reproduction grid (the default traces: the sample, and ../shared/traces when present).
    traces = vdf.default_traces()
    sw = vdf.sweep_spec(traces)
    ncells = len(sw.cells())
    grid = {}
    for jobs in (1, 2):
        out = work / f"vdf{jobs}"
        c, t = time.process_time(), time.perf_counter()
        df = run_sweep(sw, out, jobs=jobs, progress=False)
        grid[jobs] = (time.perf_counter() - t, time.process_time() - c)
        assert (df["status"] == "ok").all()
    # What `repro vdf` did before it was a sweep: one `rgr` call (one pass, 28 cells) per trace and disk count.
    c, t = time.process_time(), time.perf_counter()
    for tr in traces:
        for n in vdf.DISKS:
            _core.rgr(tr.path, tr.format, False, 4096, True, "5", n, "64KiB", None, [0], None, ",".join(vdf.POLICIES),
                      ",".join(vdf.SIZES), "key", None)
    loop = (time.perf_counter() - t, time.process_time() - c)
    # Cell by cell (what one Ray task per cell costs): a sample of cells, unbatched, extrapolated.
    sample = vdf.sweep_spec(traces, disks=[5], sizes=list(vdf.SIZES))
    sample.grid["cache.0.policy"] = ["lru", "vdf-lfu"]
    c, t = time.process_time(), time.perf_counter()
    dfs = run_sweep(sample, work / "alone", jobs=1, batch=False, progress=False)
    alone = (time.perf_counter() - t, time.process_time() - c)
    per_cell = alone[1] / len(dfs)  # CPU: what a core of an idle cluster node spends
    serial = per_cell * ncells
    load1 = os.getloadavg()[0]
    shutil.rmtree(work, ignore_errors=True)
    ntr = len(traces)
    lines = [
        "## Sweeps",
        "",
        f"`blocklab sweep` (`python/blocklab/sweeps/`); load average {load0:.1f} before, {load1:.1f} after.",
        "",
        "Per-cell overhead: a sweep over a one-access trace of a stack with constant-time disks (the engine's "
        f"own work is a few µs), whole `blocklab sweep` process with 1 and with {n_big} cells (`--jobs 1`), median "
        "of 3, wall time (CPU time, user + system, in brackets); the difference per added cell is what a sweep "
        "adds per cell (start-up, imports, hashing, Parquet are paid once).",
        "",
        f"| executor | 1 cell: wall (CPU) s | {n_big} cells: wall (CPU) s | per added cell: wall (CPU) ms |",
        "|---|---|---|---|",
        *rows,
        "",
        f"(A stack of mechanical disks costs more in the engine itself: `examples/stacks/host-lru-raid5.toml` on "
        f"the one-access trace takes {eng['count'] * 1000:.0f} ms counted and {eng['timed'] * 1000:.0f} ms timed "
        "per run, building the six Ultrastar models.)",
        "",
        *ray_rows,
        f"The VDF reproduction grid (`blocklab repro vdf`: {ntr} traces x 4 disk counts x 4 policies x "
        f"{len(vdf.SIZES)} sizes = {ncells} counted cells, reads only):",
        "",
        "| run | wall (s) | CPU (s) |",
        "|---|---|---|",
        f"| `--jobs 1` (up to {MAX_BATCH} cells of a trace share a pass) | {grid[1][0]:.1f} | {grid[1][1]:.1f} |",
        f"| `--jobs 2` | {grid[2][0]:.1f} | {grid[2][1]:.1f} |",
        f"| before sweeps: one `rgr` pass (28 cells) per trace and disk count, in a loop | {loop[0]:.1f} | "
        f"{loop[1]:.1f} |",
        f"| cell by cell, one job (measured on {len(dfs)} cells: {alone[0]:.1f} s wall, {alone[1]:.1f} s CPU; "
        f"extrapolated at {per_cell * 1000:.0f} ms CPU per cell) | | {serial:.0f} |",
        "",
        f"On a cluster, each cell is one Ray task run alone: about {per_cell * 1000:.0f} ms of CPU per cell "
        f"here, so {ncells} cells take about {serial:.0f} core-seconds; with C cores, about {serial:.0f}/C s plus "
        "Ray's start and per-task cost (above), and shipping traces when asked.",
        "",
    ]
    return lines


def main() -> None:
    ensure_trace()
    load_before = os.getloadavg()
    body = startup.section(BLOCKLAB)
    for section in counted_sections():
        body += section
    load_after = os.getloadavg()
    lines = [
        "# Benchmarks",
        "",
        "Measured by `make bench` (`benches/run.py`); each section says when and at which commit it was measured "
        "where it differs from the run below (`python benches/run.py SECTION` re-runs one part).",
        "",
        f"- Run of {peers.today()} at blocklab {peers.commit()}.",
        f"- Machine: {peers.machine()}; load average {load_before[0]:.1f} before, {load_after[0]:.1f} after the counted "
        "sections (the machine may be shared: compare the two tools within one run, not across runs).",
        f"- Trace: {ACCESSES:,} accesses, Zipf(alpha={ALPHA}) over {UNIVERSE:,} blocks, seed {SEED}, "
        f"libCacheSim oracleGeneral (`{TRACE.relative_to(ROOT)}`, {TRACE.stat().st_size / 2**20:.0f} MiB), "
        "generated by `blocklab trace synth --to oracle`.",
        f"- Cache: {CACHE:,} blocks (libCacheSim: {CACHE:,} objects, `--ignore-obj-size 1`).",
        "",
        *body,
    ]
    lines += timed_engine()
    lines += runvalid_bench()
    lines += stack_bench()
    lines += real_nbd()
    lines += nbd_peer.section(BLOCKLAB)
    lines += real_stack_hits()
    lines += sweep_bench()
    lines += cluster.section(BLOCKLAB)
    lines += stream_rss_section()
    lines += overload_bench()
    text = "\n".join(lines)
    path = ROOT / "BENCHMARKS.md"
    for kept in kept_sections(path.read_text() if path.exists() else "", text):
        text = text.rstrip("\n") + "\n\n" + kept + "\n"
    path.write_text(text)
    print(text)


def in_process_rates() -> list[str]:
    """Accesses/s of every policy, one run of all cells, per-cell time measured by the engine."""
    from blocklab import _core

    policies = list(_core.cache_policies())
    script = ("import sys, json; from blocklab import _core; "
              "print(_core.simulate_cache(sys.argv[1], 'oracle', sys.argv[2], sys.argv[3], 4096, False, False, None))")
    load = os.getloadavg()[0]
    w_all, _, out, _ = peers.run([PYTHON, "-c", script, str(TRACE), ",".join(policies), str(CACHE)])
    lines = [
        "## Accesses per second of every policy",
        "",
        f"One run of all policies at {CACHE:,} blocks over the same trace ({w_all:.2f} s whole process, cells "
        f"in parallel on the cores; measured {peers.today()} at blocklab {peers.commit()}, load average {load:.1f} "
        "before); the rate is accesses divided by the wall time the engine spent feeding that cell (on a loaded or "
        "shared machine this undercounts). `opt`'s next-use pre-pass (8 bytes per access) is not in its cell time.",
        "",
        "| policy | miss ratio | M accesses/s |",
        "|---|---|---|",
    ]
    for c in json.loads(out)["cells"]:
        rate = c["accesses"] / c["seconds"] / 1e6 if c.get("seconds") else float("nan")
        lines.append(f"| {c['policy']} | {c['miss_ratio']:.6f} | {rate:.1f} |")
    return lines + [""]


def memory() -> list[str]:
    """Bytes per cached block of LRU: peak RSS at two sizes."""
    small, big = 100_000, 500_000
    rss = {}
    for s in (small, big):
        rss[s] = min(peers.run([BLOCKLAB, "cache", str(TRACE), "--format", "oracle", "--policy", "lru", "--size", str(s),
                                "--json"])[3] for _ in range(2))
    bytes_per_block = (rss[big] - rss[small]) * 1024 / (big - small)
    return [
        "## Memory",
        "",
        f"LRU peak RSS ({peers.today()}): {rss[small] / 1024:.1f} MiB at {small:,} blocks, "
        f"{rss[big] / 1024:.1f} MiB at {big:,} blocks: **{bytes_per_block:.1f} bytes per cached block** "
        "(target: 64 or less; the mapped trace file is shared page cache, counted in RSS as it is read).",
        "",
    ]


def counted_sections() -> list[list[str]]:
    """The sections `python benches/run.py counted` re-runs: blocklab against libCacheSim's
    `cachesim` (LRU, then every shared policy), the rates of every policy (in one run, and
    the engine alone from `cargo bench`), memory and SHARDS."""
    ensure_trace()
    return [counted.lru_cell(BLOCKLAB, PYTHON, TRACE, ACCESSES, CACHE),
            counted.every_policy(BLOCKLAB, TRACE, ACCESSES, CACHE),
            in_process_rates(),
            [*ENGINE_TITLE, *counted.engine_rates()],
            memory(),
            shards_accuracy()]


ENGINE_TITLE = ["## The engine alone, per policy", ""]


def stream_rss_section() -> list[str]:
    ensure_trace()
    return stream_rss.section(BLOCKLAB, TRACE, ACCESSES)


SECTIONS = {"timed": lambda: [timed_engine()], "real": lambda: [real_nbd()], "nbd-peer": lambda: [nbd_peer.section(BLOCKLAB)], "real-stack": lambda: [real_stack_hits()], "stack": lambda: [stack_bench()],
            "sweeps": lambda: [sweep_bench()], "sweeps-cluster": lambda: [cluster.section(BLOCKLAB)],
            "stream-rss": lambda: [stream_rss_section()],
            "startup": lambda: [startup.section(BLOCKLAB)], "counted": counted_sections,
            "runvalid": lambda: [runvalid_bench()], "overload": lambda: [overload_bench()]}

if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] in SECTIONS:
        # One section (or a few) alone, each put in place of the same section of BENCHMARKS.md.
        if sys.argv[1] == "stack":
            ensure_trace()
        path = ROOT / "BENCHMARKS.md"
        text = path.read_text() if path.exists() else "# Benchmarks\n"
        for lines in SECTIONS[sys.argv[1]]():
            text = replace_section(text, lines)
            print("\n".join(lines))
        path.write_text(text)
    else:
        main()
