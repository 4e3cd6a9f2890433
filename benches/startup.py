"""Start-up: whole-process time of every `blocklab COMMAND --help` and of a
one-access `blocklab cache` run, and where the time of `blocklab cache --help`
goes (`python -X importtime`, summed by top-level package).

$BENCH_BASELINE may name another build's `blocklab` executable (an older
checkout's .venv/bin/blocklab, $BENCH_BASELINE_LABEL says which): it is then
measured in the same run, alternating with this one.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import peers

RUNS = int(os.environ.get("BENCH_STARTUP_RUNS", 9))


def _python_of(blocklab: str) -> str:
    """The interpreter of a `blocklab` console script (its shebang)."""
    first = Path(blocklab).read_text().splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else sys.executable


def cases(one: Path) -> dict[str, list[str]]:
    sys.path.insert(0, str(peers.ROOT / "python"))
    from blocklab.cli.commands import COMMANDS

    out = {"--help": ["--help"]}
    out.update({f"{name} --help": [name, "--help"] for name in COMMANDS})
    out["cache ONE --json"] = ["cache", str(one), "--format", "csv", "--size", "1", "--json"]
    out["cache ONE (table)"] = ["cache", str(one), "--format", "csv", "--size", "1"]
    return out


def importtime(blocklab: str, args: list[str]) -> tuple[int, float, list[tuple[str, float]]]:
    """Modules imported, their total import time (ms) and that time by top-level package,
    largest first, for `blocklab ARGS` (median profile of 5 by total)."""
    code = "import sys; sys.argv = ['blocklab', *sys.argv[1:]]; from blocklab.cli import main; main()"
    profiles = []
    for _ in range(5):
        err = subprocess.run([_python_of(blocklab), "-X", "importtime", "-c", code, *args], capture_output=True,
                             text=True).stderr
        by_pkg: dict[str, float] = defaultdict(float)
        n = 0
        for line in err.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+\d+ \|( *)(\S+)", line)
            if m:
                n += 1
                by_pkg[m.group(3).split(".")[0]] += int(m.group(1)) / 1000
        profiles.append((sum(by_pkg.values()), n, by_pkg))
    total, n, by_pkg = sorted(profiles, key=lambda p: p[0])[len(profiles) // 2]
    return n, total, sorted(by_pkg.items(), key=lambda kv: -kv[1])


def section(blocklab: str) -> list[str]:
    one = peers.OUT / "one.csv"
    one.parent.mkdir(parents=True, exist_ok=True)
    one.write_text("timestamp,op,offset,size\n0,R,0,4096\n")
    tools = {"this build": blocklab}
    baseline = os.environ.get("BENCH_BASELINE")
    if baseline:
        tools[os.environ.get("BENCH_BASELINE_LABEL", "baseline")] = baseline
    load_before = os.getloadavg()[0]
    times: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for name, args in cases(one).items():
        for tool in tools.values():
            peers.run([tool, *args])  # warm-up
        for _ in range(RUNS):
            for label, tool in tools.items():
                wall, cpu, _, _ = peers.run([tool, *args])
                times[(name, label)].append((wall, cpu))
    load_after = os.getloadavg()[0]

    def cell(name: str, label: str) -> str:
        runs = times[(name, label)]
        wall = statistics.median(w for w, _ in runs) * 1000
        cpu = statistics.median(c for _, c in runs) * 1000
        mark = "**" if wall <= 100 else ""
        return f"{mark}{wall:.0f}{mark} ({cpu:.0f})"

    head = " | ".join(f"{label}: wall (CPU) ms" for label in tools)
    lines = [
        "## Start-up",
        "",
        f"Measured {peers.today()} by `python benches/run.py startup` (part of `make bench`) at blocklab "
        f"{peers.commit()}; {peers.machine()}; load average {load_before:.1f} before, {load_after:.1f} after. "
        f"Whole process, median of {RUNS} runs (CPU time, user + system, in brackets); the builds alternate. "
        "ONE is a one-access CSV trace. Bold: within the 100 ms target."
        + (" The second column: the `blocklab` given in BENCH_BASELINE, named by BENCH_BASELINE_LABEL."
           if len(tools) > 1 else ""),
        "",
        f"| command | {head} |",
        "|---|" + "---|" * len(tools),
    ]
    for name in cases(one):
        lines.append(f"| `blocklab {name}` | " + " | ".join(cell(name, label) for label in tools) + " |")
    lines += ["", "Where `blocklab cache --help` spends its imports (`python -X importtime`, self time summed by "
              "top-level package, median of 5 profiles; the profiler itself slows imports down):", ""]
    for label, tool in tools.items():
        n, total, by_pkg = importtime(tool, ["cache", "--help"])
        top = ", ".join(f"{pkg} {ms:.0f}" for pkg, ms in by_pkg[:8])
        lines.append(f"- {label}: {n} modules, {total:.0f} ms: {top} (ms)")
    return lines + [""]
