"""The counted simulator against libCacheSim, whole process against whole process.

`blocklab cache` and libCacheSim's `cachesim` (built here, see peers.py) on the
same oracleGeneral file, cache sizes counted in objects (libCacheSim's
`--ignore-obj-size 1`: every object one unit, so 100,000 means 100,000 blocks):
the LRU cell with runs alternating between the tools (medians of 7 after one
warm-up each), then every policy both tools have, and the engine's own rate
per policy from `cargo bench`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import peers

# blocklab policy -> libCacheSim's `cachesim` name. `mq` and `lru2` have no
# counterpart in libCacheSim's `cachesim` (its Python package has them).
LCS_POLICIES = {"lru": "lru", "fifo": "fifo", "lfu": "lfu", "clock": "clock", "sieve": "sieve", "arc": "arc",
                "2q": "twoq", "lirs": "lirs", "s3fifo": "s3fifo", "opt": "belady"}

# libCacheSim's Python package (pip `libcachesim`, a build of its own), when installed.
LCS_PYTHON = """
import sys
import libcachesim as lcs
reader = lcs.TraceReader(sys.argv[1], lcs.TraceType.ORACLE_GENERAL_TRACE)
cache = lcs.LRU(int(sys.argv[2]))
obj_miss_ratio, byte_miss_ratio = cache.process_trace(reader)
print(obj_miss_ratio)
"""


def _blocklab(blocklab: str, trace: Path, policy: str, cache: int) -> list[str]:
    return [blocklab, "cache", str(trace), "--format", "oracle", "--policy", policy, "--size", str(cache), "--json"]


def _cachesim(binary: str, trace: Path, policy: str, cache: int) -> list[str]:
    return [binary, str(trace), "oracleGeneral", policy, str(cache), "--ignore-obj-size", "1"]


def _miss(tool: str, out: str) -> float:
    if tool == "blocklab":
        return json.loads(out)[0]["miss_ratio"]
    if tool == "cachesim":
        return peers.cachesim_miss_ratio(out)
    return float(out.strip())


def _alternate(cmds: dict[str, list[str]], runs: int) -> dict[str, dict]:
    """Run the commands in turn `runs` times (after one warm-up each): wall and CPU times, miss ratio."""
    for c in cmds.values():
        peers.run(c)
    res = {k: {"wall": [], "cpu": [], "miss": None} for k in cmds}
    for i in range(runs):
        for k, c in cmds.items():
            wall, cpu, out, _ = peers.run(c)
            res[k]["wall"].append(wall)
            res[k]["cpu"].append(cpu)
            res[k]["miss"] = _miss(k.split(" ")[0], out)
        print(f"run {i + 1}: " + ", ".join(f"{k} {res[k]['wall'][-1]:.3f} s" for k in cmds), file=sys.stderr)
    for r in res.values():
        r["wall_med"], r["cpu_med"] = statistics.median(r["wall"]), statistics.median(r["cpu"])
    return res


def lru_cell(blocklab: str, python: str, trace: Path, accesses: int, cache: int, runs: int = 7) -> list[str]:
    binary = peers.cachesim()
    cmds = {"blocklab": _blocklab(blocklab, trace, "lru", cache), "cachesim": _cachesim(binary, trace, "lru", cache)}
    has_python = subprocess.run([python, "-c", "import libcachesim"], capture_output=True).returncode == 0
    if has_python:
        cmds["python libcachesim"] = [python, "-c", LCS_PYTHON, str(trace), str(cache)]
    load_before = os.getloadavg()[0]
    res = _alternate(cmds, runs)
    load_after = os.getloadavg()[0]
    bl, lc = res["blocklab"], res["cachesim"]
    rows = {
        "blocklab": ("blocklab", f"`blocklab cache TRACE --format oracle --policy lru --size {cache} --json`"),
        "cachesim": (f"libCacheSim `cachesim` ({peers.lcs_version()}, built here)",
                     f"`cachesim TRACE oracleGeneral lru {cache} --ignore-obj-size 1`"),
        "python libcachesim": (f"libCacheSim's Python package {_lcs_python_version(python)}",
                               f"`python -c '...LRU({cache}).process_trace(TraceReader(TRACE, ORACLE_GENERAL_TRACE))'`"),
    }
    lines = [
        "## blocklab against libCacheSim (whole process against whole process)",
        "",
        f"Measured {peers.today()} by `python benches/run.py counted` (part of `make bench`) at blocklab "
        f"{peers.commit()}; {peers.machine()}; load average {load_before:.1f} before, {load_after:.1f} after. "
        f"Trace: `{trace.relative_to(peers.ROOT)}` ({accesses:,} accesses, oracleGeneral); cache {cache:,} objects. "
        f"Runs alternate between the tools, one warm-up run each first; medians of {runs}.",
        "",
        "| tool | command | median wall time (s) | wall times of the runs (s) | median CPU time, user+sys (s) | miss ratio |",
        "|---|---|---|---|---|---|",
    ]
    for k, r in res.items():
        label, cmd = rows[k]
        lines.append(f"| {label} | {cmd} | {r['wall_med']:.3f} | {', '.join(f'{t:.3f}' for t in r['wall'])} | "
                     f"{r['cpu_med']:.3f} | {r['miss']:.7g} |")
    lines += [
        "",
        f"**libCacheSim's `cachesim` takes {lc['wall_med'] / bl['wall_med']:.1f}× blocklab's wall time "
        f"({lc['cpu_med'] / bl['cpu_med']:.1f}× its CPU time)** (target: at least 5×). Whole process, start-up "
        f"included: blocklab {accesses / bl['wall_med'] / 1e6:.1f} M accesses/s, `cachesim` "
        f"{accesses / lc['wall_med'] / 1e6:.1f} M accesses/s.",
        "",
    ]
    return lines


def _lcs_python_version(python: str) -> str:
    r = subprocess.run([python, "-c", "from importlib.metadata import version; print(version('libcachesim'))"],
                       capture_output=True, text=True)
    return r.stdout.strip()


def every_policy(blocklab: str, trace: Path, accesses: int, cache: int, runs: int = 3) -> list[str]:
    """Every policy both tools have; $BENCH_RUNS_EVERY sets the runs per policy."""
    runs = int(os.environ.get("BENCH_RUNS_EVERY", runs))
    binary = peers.cachesim()
    load_before = os.getloadavg()[0]
    rows = []
    for ours, theirs in LCS_POLICIES.items():
        res = _alternate({"blocklab": _blocklab(blocklab, trace, ours, cache),
                          "cachesim": _cachesim(binary, trace, theirs, cache)}, runs)
        bl, lc = res["blocklab"], res["cachesim"]
        rows.append(f"| {ours} | {theirs} | {bl['wall_med']:.3f} | {lc['wall_med']:.3f} | "
                    f"**{lc['wall_med'] / bl['wall_med']:.1f}×** | {bl['cpu_med']:.3f} | {lc['cpu_med']:.3f} | "
                    f"{lc['cpu_med'] / bl['cpu_med']:.1f}× | {accesses / bl['wall_med'] / 1e6:.1f} | "
                    f"{bl['miss']:.4f} | {lc['miss']:.4f} |")
    load_after = os.getloadavg()[0]
    return [
        "## Every policy against libCacheSim",
        "",
        f"The same file and cache ({cache:,} objects), each policy both tools have, whole process, "
        f"runs alternating, medians of {runs}; measured {peers.today()} at blocklab {peers.commit()}; "
        f"load average {load_before:.1f} before, {load_after:.1f} after. "
        "`cachesim` prints miss ratios to 4 digits. `opt` is Belady's (both tools look ahead: libCacheSim "
        "reads the file's next-access field, blocklab computes next uses in a first pass). `mq` and `lru2` "
        "have no `cachesim` counterpart. CPU time is user + system of the whole process (blocklab reads the "
        "trace on a second thread, so on a loaded machine its wall time suffers more than `cachesim`'s).",
        "",
        "| policy | `cachesim` name | blocklab wall (s) | `cachesim` wall (s) | `cachesim` / blocklab | blocklab CPU (s) "
        "| `cachesim` CPU (s) | CPU ratio | blocklab M accesses/s | blocklab miss ratio | `cachesim` miss ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def engine_rates() -> list[str]:
    """Each policy alone in the engine: `cargo bench -p blocklab --bench policies` (criterion)."""
    cmd = ["cargo", "bench", "-q", "-p", "blocklab", "--bench", "policies", "--", "policy access"]
    load = os.getloadavg()[0]
    subprocess.run(cmd, cwd=peers.ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = peers.ROOT / "target" / "criterion" / "policy access"
    rows = []
    for bench in sorted(base.iterdir()):
        est = bench / "new" / "estimates.json"
        if est.exists():
            ns = json.loads(est.read_text())["median"]["point_estimate"]
            rows.append(f"| {bench.name} | {1_000_000 / (ns / 1e9) / 1e6:.1f} |")
    return [
        f"The engine alone, each policy on its own: `{' '.join(cmd[:7])} -- 'policy access'` (criterion, median "
        "of 10 samples; 1,000,000 accesses of Zipf(1.0) over 100,000 blocks in memory, cache 10,000 blocks; "
        f"measured {peers.today()} at blocklab {peers.commit()}, load average {load:.1f} before):",
        "",
        "| policy | M accesses/s |",
        "|---|---|",
        *rows,
        "",
    ]
