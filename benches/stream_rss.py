"""`python benches/run.py stream-rss`: memory flat in trace length. `blocklab
cache` (LRU, 100,000 blocks) reads a Zipf trace of 20M and of 200M accesses
from a pipe (`blocklab trace synth - ... | blocklab cache - ...`: nothing is
stored; 200M accesses of native CSV are about 7 GB), and the 10M-access
oracleGeneral file of the counted sections by memory map beside a file of
twice its length; the peak RSS of each `cache` process (wait4's ru_maxrss)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import peers
from peers import OUT

TITLE = "## Memory flat in trace length"
PIPED = (20_000_000, 200_000_000)
UNIVERSE = 1_000_000
CACHE = 100_000


def _piped(blocklab: str, accesses: int) -> tuple[float, float, int, int, str]:
    """Wall, CPU and peak RSS (KiB) of `cache` reading `synth`'s pipe, synth's peak RSS, cache's output."""
    synth = subprocess.Popen([blocklab, "trace", "synth", "-", "--accesses", str(accesses), "--universe",
                              str(UNIVERSE), "--alpha", "1.0", "--seed", "42"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
    t = time.perf_counter()
    cache = subprocess.Popen([blocklab, "cache", "-", "--format", "csv", "--policy", "lru", "--size", str(CACHE),
                              "--json"], stdin=synth.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    synth.stdout.close()  # the pipe's read end belongs to `cache` now
    out = cache.stdout.read()
    err = cache.stderr.read()
    _, status, ru = os.wait4(cache.pid, 0)
    wall = time.perf_counter() - t
    _, s_status, s_ru = os.wait4(synth.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or os.waitstatus_to_exitcode(s_status) != 0:
        raise SystemExit(f"piped run of {accesses:,} accesses failed: {err.strip()}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, s_ru.ru_maxrss, out


def section(blocklab: str, trace: Path, accesses: int) -> list[str]:
    import json

    load0 = os.getloadavg()[0]
    rows = []
    for n in PIPED:
        wall, cpu, rss, synth_rss, out = _piped(blocklab, n)
        cell = json.loads(out)[0]
        assert cell["accesses"] == n, cell
        rows.append(f"| pipe, native CSV | {n / 1e6:.0f}M | {wall:.1f} | {cpu:.1f} | {n / cpu / 1e6:.1f} | "
                    f"{cell['miss_ratio']:.6f} | **{rss / 1024:.1f}** | {synth_rss / 1024:.1f} |")
    # The memory map: the counted sections' file, and one of twice its length (deleted after).
    double = OUT / f"stream-rss-{2 * accesses}.oracleGeneral"
    try:
        subprocess.run([blocklab, "trace", "synth", str(double), "--accesses", str(2 * accesses), "--universe",
                        str(UNIVERSE), "--alpha", "1.0", "--seed", "42", "--to", "oracle"], check=True,
                       stdout=subprocess.DEVNULL)
        for path, n in ((trace, accesses), (double, 2 * accesses)):
            wall, cpu, out, rss = peers.run([blocklab, "cache", str(path), "--format", "oracle", "--policy", "lru",
                                             "--size", str(CACHE), "--json"])
            cell = json.loads(out)[0]
            rows.append(f"| file, oracleGeneral by memory map ({path.stat().st_size / 2**20:.0f} MiB) | "
                        f"{n / 1e6:.0f}M | {wall:.1f} | {cpu:.1f} | {n / cpu / 1e6:.1f} | {cell['miss_ratio']:.6f} | "
                        f"**{rss / 1024:.1f}** | |")
    finally:
        double.unlink(missing_ok=True)
    load1 = os.getloadavg()[0]
    return [
        TITLE,
        "",
        f"Measured {peers.today()} at blocklab {peers.commit()} (`python benches/run.py stream-rss`); load average "
        f"{load0:.1f} before, {load1:.1f} after. `blocklab cache --policy lru --size {CACHE:,}` over Zipf(1.0) "
        f"traces of {UNIVERSE:,} blocks (seed 42), one run each. Piped: `blocklab trace synth - --accesses N "
        f"--universe {UNIVERSE:,} | blocklab cache - --format csv ...`, nothing stored (200M accesses of native CSV "
        "would be about 7 GB); the generator draws and writes as it goes (its memory is the Zipf CDF, 8 bytes "
        "per block of the universe). Peak RSS is the process's high-water mark of resident pages (wait4's "
        "ru_maxrss): its heap (the cache) and the pages of a mapped file it has touched and not released; the "
        "oracleGeneral reader drops the pages behind it every 4 MiB (`trace/oracle.rs`), so a mapped trace adds "
        "at most 8 MiB whatever its length. Piped, the wall time is the generator's pace (it formats the CSV "
        "text); the CPU time is `cache`'s own. The file of 2x10M accesses holds the same keys as the piped 20M "
        "(same seed): the miss ratios agree.",
        "",
        "| input | accesses | wall (s) | CPU (s) | M accesses per CPU s | miss ratio | `cache` peak RSS (MiB) | "
        "`synth` peak RSS (MiB) |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
