"""Start-up: whole-process time of every `blocklab COMMAND --help` (and two
subcommands') and of a one-access `blocklab cache` run, and where the time of
`blocklab cache --help` and of the one-access run goes (`python -X importtime`,
summed by top-level package).

This build's help pages are measured twice: served from the help cache
(blocklab/cli/help_cache.py; a fresh cache under out/bench/, filled by each
case's warm-up run, which renders the page) and rendered live with the cache
off (BLOCKLAB_HELP_CACHE=0: what the first run of a page, or any run with
another key, costs, less the few hundred microseconds of writing the entry).

$BENCH_BASELINE may name another build's `blocklab` executable (an older
checkout's .venv/bin/blocklab, $BENCH_BASELINE_LABEL says which): it is then
measured in the same run, alternating with this one.
"""

from __future__ import annotations

import os
import re
import shutil
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
    out["real serve --help"] = ["real", "serve", "--help"]
    out["trace synth --help"] = ["trace", "synth", "--help"]
    out["cache ONE --json"] = ["cache", str(one), "--format", "csv", "--size", "1", "--json"]
    out["cache ONE (table)"] = ["cache", str(one), "--format", "csv", "--size", "1"]
    return out


def importtime(blocklab: str, args: list[str], env: dict | None = None) -> tuple[int, float, list[tuple[str, float]]]:
    """Modules imported, their total import time (ms) and that time by top-level package,
    largest first, for `blocklab ARGS` (median profile of 5 by total)."""
    code = "import sys; sys.argv = ['blocklab', *sys.argv[1:]]; from blocklab.cli import main; main()"
    profiles = []
    for _ in range(5):
        err = subprocess.run([_python_of(blocklab), "-X", "importtime", "-c", code, *args], capture_output=True,
                             text=True, env=env, cwd=peers.OUT).stderr
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
    help_cache = peers.OUT / "help-cache"
    shutil.rmtree(help_cache, ignore_errors=True)
    cached = dict(os.environ, XDG_CACHE_HOME=str(help_cache))
    cached.pop("BLOCKLAB_HELP_CACHE", None)
    live = dict(cached, BLOCKLAB_HELP_CACHE="0")
    # label -> (blocklab, environment, help pages only)
    tools = {"this build (help pages from the cache)": (blocklab, cached, False),
             "this build, help cache off (pages rendered live)": (blocklab, live, True)}
    baseline = os.environ.get("BENCH_BASELINE")
    if baseline:
        tools[os.environ.get("BENCH_BASELINE_LABEL", "baseline")] = (baseline, cached, False)
    load_before = os.getloadavg()[0]
    times: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for name, args in cases(one).items():
        measured = {label: (tool, env) for label, (tool, env, helps) in tools.items() if "--help" in args or not helps}
        for tool, env in measured.values():
            peers.run([tool, *args], env)  # warm-up (and the help page rendered into the cache)
        for _ in range(RUNS):
            for label, (tool, env) in measured.items():
                wall, cpu, _, _ = peers.run([tool, *args], env)
                times[(name, label)].append((wall, cpu))
    load_after = os.getloadavg()[0]

    def cell(name: str, label: str) -> str:
        runs = times[(name, label)]
        if not runs:
            return "–"
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
        f"Whole process, median of {RUNS} runs (CPU time, user + system, in brackets); the columns alternate. "
        "ONE is a one-access CSV trace. Bold: within the 100 ms target. Help pages from the cache: the page "
        "the case's warm-up run rendered, written back by `blocklab/cli/help_cache.py` without typer, click or "
        "rich; help cache off: BLOCKLAB_HELP_CACHE=0, what a page's first run (or a run under another key: "
        "arguments, width, colours) costs."
        + (" The last column: the `blocklab` given in BENCH_BASELINE, named by BENCH_BASELINE_LABEL."
           if len(tools) > 2 else ""),
        "",
        f"| command | {head} |",
        "|---|" + "---|" * len(tools),
    ]
    for name in cases(one):
        lines.append(f"| `blocklab {name}` | " + " | ".join(cell(name, label) for label in tools) + " |")
    lines += ["", "Where the time goes (`python -X importtime`: modules imported, total import time, self time summed "
              "by top-level package, median of 5 profiles; the profiler itself slows imports down):", ""]
    profiled = [("`cache --help`", ["cache", "--help"], True), ("`cache ONE (table)`", cases(one)["cache ONE (table)"], False)]
    for what, args, helps in profiled:
        for label, (tool, env, help_only) in tools.items():
            if help_only and not helps:
                continue
            n, total, by_pkg = importtime(tool, args, env)
            top = ", ".join(f"{pkg} {ms:.0f}" for pkg, ms in by_pkg[:8])
            lines.append(f"- {what}, {label}: {n} modules, {total:.0f} ms: {top} (ms)")
    return lines + [""]
