"""A counted and a timed sweep on a Ray cluster of two nodes started on this
machine (`ray start --head` and `ray start --address`, each with a resource of
its own): both nodes run cells, and the results are those of `--jobs 1` bit
for bit (every column but the time and place of each cell). One trace is read
by path, one shipped through Ray's object store; a trace a node does not have
fails its cell with a message that says to ship it.

The nodes are stopped by their process groups even when the test fails
(tests/raycluster.py says why not `ray stop`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from blocklab.sweeps.results import VOLATILE

pytest.importorskip("ray", reason="Ray is not installed (pip install 'blocklab[ray]')")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from raycluster import Cluster, RayUnavailable  # noqa: E402

STACK = """\
[[cache]]
policy = "lru"
size = 100
[array]
raid = 5
disks = 5
[device]
model = "const:1"
"""


def sweep_toml(executor: str, grid: str) -> str:
    return f"""\
stack = "stack.toml"
executor = "{executor}"
[[traces]]
path = "a.csv"
format = "csv"
[[traces]]
path = "b.csv"
format = "csv"
ship = true
[grid]
{grid}
"""


SWEEPS = {
    "count": sweep_toml("count", '"cache.0.policy" = ["lru", "arc", "lfu"]\n"cache.0.size" = [50, 200, "10%"]'),
    "timed": sweep_toml("timed", '"cache.0.policy" = ["lru", "arc"]\n"array.failed" = [[], [0]]'),
}


def cli(*args, **kw):
    cmd = [sys.executable, "-c", "from blocklab.cli import main; main()", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster()
    try:
        c.start()
    except RayUnavailable as e:
        c.stop()
        pytest.skip(f"no two-node Ray here: {e}")
    except BaseException:
        c.stop()
        raise
    yield c
    c.stop()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("cluster")
    (d / "stack.toml").write_text(STACK)
    for name, seed in (("a.csv", 3), ("b.csv", 4)):
        r = cli("trace", "synth", d / name, "--accesses", "3000", "--universe", "800", "--alpha", "0.9", "--seed", seed)
        assert r.returncode == 0, r.stderr
    for ex, body in SWEEPS.items():
        (d / f"{ex}.toml").write_text(body)
    return d


@pytest.mark.parametrize("executor", ["count", "timed"])
def test_a_sweep_on_two_ray_nodes_equals_jobs_1(cluster, work, tmp_path, executor):
    sweep = work / f"{executor}.toml"
    r = cli("sweep", sweep, "--out", tmp_path / "here", "--jobs", "1", "-q")
    assert r.returncode == 0, r.stderr
    r = cli("sweep", sweep, "--out", tmp_path / "ray", "--ray", cluster.address, "-q", env=cluster.env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    here = pq.read_table(tmp_path / "here" / "results.parquet")
    ray = pq.read_table(tmp_path / "ray" / "results.parquet")
    assert here.num_rows == ray.num_rows == (9 if executor == "count" else 4) * 2
    assert set(ray.column("status").to_pylist()) == {"ok"}
    # Every cell ran on one of the two nodes started here, and both ran cells.
    nodes = ray.column("node").to_pylist()
    assert set(nodes) == set(cluster.nodes), (nodes, cluster.nodes)
    assert sorted(cluster.nodes.values()) == [["node_a"], ["node_b"]]
    assert set(here.column("node").to_pylist()) == {""}  # not run on Ray
    # Bit for bit: every column but when, how long and where.
    assert here.drop_columns(list(VOLATILE)).equals(ray.drop_columns(list(VOLATILE)))


# Runs two cells on the cluster through the runner: one whose trace is not on the nodes, read
# by path, and the same trace shipped from the driver's bytes (the file exists when shipped).
MISSING = """
import json, sys
from blocklab.sweeps.runner import Job, run_ray
from blocklab.sweeps.spec import Cell, TraceRef

address, stack, trace = sys.argv[1:4]
gone = TraceRef(path=trace + ".elsewhere", format="csv", label="gone")
ok = TraceRef(path=trace, format="csv", label="here", ship=True)
jobs = [Job(Cell(0, (), gone), "k-gone", stack, "count", "stack", False),
        Job(Cell(1, (), ok), "k-shipped", stack, "count", "stack", False)]
records = run_ray(jobs, address, None, False, {trace: "0" * 64})
print(json.dumps(sorted((r["cell"], r["status"], r["error"], r["node"]) for r in records)))
"""


def test_a_trace_a_node_does_not_have_fails_its_cell_saying_to_ship_it(cluster, work):
    r = subprocess.run([sys.executable, "-c", MISSING, cluster.address, str(work / "stack.toml"), str(work / "a.csv")],
                       capture_output=True, text=True, env=cluster.env, timeout=600)
    assert r.returncode == 0, r.stderr
    (gone, gone_status, gone_error, gone_node), (shipped, ok_status, _, ok_node) = json.loads(r.stdout.splitlines()[-1])
    assert (gone, gone_status, shipped, ok_status) == ("k-gone", "error", "k-shipped", "ok")
    assert gone_error.startswith(f"{work / 'a.csv'}.elsewhere: no such file on Ray node {gone_node[:12]} (")
    assert "ship it (`ship = true` on the trace, or --ship-traces)" in gone_error
    assert {gone_node, ok_node} <= set(cluster.nodes)
