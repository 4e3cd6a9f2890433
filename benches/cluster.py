"""`python benches/run.py sweeps-cluster`: a counted and a timed sweep on a Ray
cluster of two nodes started on this machine (tests/raycluster.py: `ray start
--head` and `ray start --address`, one CPU each), against `--jobs 1`: wall
time of the whole `blocklab sweep` process, the cells each node ran, and
whether the results are equal bit for bit (every column but time and place)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import peers
from peers import ROOT

sys.path.insert(0, str(ROOT / "tests"))
from raycluster import Cluster, RayUnavailable  # noqa: E402

SWEEPS = (("count", ROOT / "examples" / "sweeps" / "vdf-small.toml"),
          ("timed", ROOT / "examples" / "sweeps" / "host-cache.toml"))
TITLE = "## Sweeps on two Ray nodes"


def section(blocklab: str) -> list[str]:
    import pyarrow.parquet as pq

    from blocklab.sweeps.results import VOLATILE

    work = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    load0 = os.getloadavg()[0]
    c = Cluster()
    rows = []
    try:
        t = time.perf_counter()
        c.start()
        started = time.perf_counter() - t
        names = {n: res[0] if res else n[:8] for n, res in c.nodes.items()}
        for executor, sweep in SWEEPS:
            walls = {}
            for how, extra in (("jobs1", ["--jobs", "1"]), ("jobs2", ["--jobs", "2"]), ("ray", ["--ray", c.address])):
                out = work / f"{executor}-{how}"
                # The cluster's environment: its token (and worker prestart).
                w, _, _, _ = peers.run([blocklab, "sweep", str(sweep), "--out", str(out), "-q", *extra], env=c.env)
                walls[how] = w
            here = pq.read_table(work / f"{executor}-jobs1" / "results.parquet")
            ray = pq.read_table(work / f"{executor}-ray" / "results.parquet")
            same = here.drop_columns(list(VOLATILE)).equals(ray.drop_columns(list(VOLATILE)))
            per_node = Counter(names.get(n, str(n)) for n in ray.column("node").to_pylist())
            rows.append(f"| {executor} | `{sweep.relative_to(ROOT)}` | {here.num_rows} | {walls['jobs1']:.1f} | "
                        f"{walls['jobs2']:.1f} | {walls['ray']:.1f} | "
                        f"{', '.join(f'{k} {v}' for k, v in sorted(per_node.items()))} | {'yes' if same else '**no**'} |")
    except RayUnavailable as e:
        return [TITLE, "", f"Not measured: no two-node Ray here ({e}).", ""]
    finally:
        c.stop()
        shutil.rmtree(work, ignore_errors=True)
    load1 = os.getloadavg()[0]
    return [
        TITLE,
        "",
        f"Measured {peers.today()} at blocklab {peers.commit()} (`python benches/run.py sweeps-cluster`); load "
        f"average {load0:.1f} before, {load1:.1f} after. Two Ray nodes on this machine "
        "(`ray start --head --num-cpus=1 --resources='{\"node_a\": 1}'` and `ray start --address=... --num-cpus=1 "
        "--resources='{\"node_b\": 1}'`, each with its own ports and `--temp-dir`; docs/sweeps.md), started in "
        f"{started:.1f} s. Whole `blocklab sweep` process, wall time, one run each; `--ray` connects to the running "
        "cluster (its connection is in the time). The machine has 2 cores: the two nodes share them with the "
        "driver, so this shows the cluster working, not a speed-up.",
        "",
        "| executor | sweep | cells | `--jobs 1` (s) | `--jobs 2` (s) | `--ray HEAD:PORT` (s) | cells per node | "
        "equal to `--jobs 1` |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
