"""Sweeps: grid expansion and cell keys (properties), Parquet schema and
provenance, every row equal to the stack run alone, resume and skip, failing
cells, the CLI, local against Ray bit for bit, repro vdf as a sweep."""

from __future__ import annotations

import hashlib
import itertools
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import blocklab
from blocklab.sweeps import Sweep, SweepError, TraceRef, load_sweep, run_sweep
from blocklab.sweeps.results import PROVENANCE, VOLATILE, flatten
from blocklab.sweeps.spec import canonical, cell_key, from_dict, toml_value

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "wsrch-small.trace"

RGR_STACK = """\
tenant_map = "key"
[replay]
reads_only = true
[[cache]]
policy = "lru"
size = 100
merge_misses = false
[array]
raid = 5
disks = 5
failed = [0]
[device]
model = "const:0"
"""


def blocklab_cli(*args):
    cmd = [sys.executable, "-c", "from blocklab.cli import main; main()", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A stack file and two small seeded traces (Zipf, with reuse)."""
    d = tmp_path_factory.mktemp("sweep")
    (d / "rgr.toml").write_text(RGR_STACK)
    for name, seed in (("a.csv", 3), ("b.csv", 4)):
        r = blocklab_cli("trace", "synth", d / name, "--accesses", "6000", "--universe", "1500", "--alpha", "0.9",
                         "--seed", seed)
        assert r.returncode == 0, r.stderr
    return d


def sweep_file(d: Path, body: str, name: str = "s.toml") -> Path:
    p = d / name
    p.write_text(body)
    return p


BASIC = """\
name = "basic"
stack = "rgr.toml"
executor = "count"
[[traces]]
path = "a.csv"
format = "csv"
[[traces]]
path = "b.csv"
format = "csv"
label = "trace b"
[grid]
"cache.0.policy" = ["lru", "vdf-lru"]
"cache.0.size" = [50, "10%"]
"array.disks" = [5, 6]
"""


# --- grid expansion and cell keys -------------------------------------------------------------

scalar = st.one_of(st.integers(-10**6, 10**6), st.text(max_size=6), st.booleans(),
                   st.floats(allow_nan=False, allow_infinity=False, width=32))
grids = st.dictionaries(st.sampled_from(["cache.0.policy", "cache.0.size", "array.disks", "array.chunk", "replay.speedup"]),
                        st.lists(scalar, min_size=1, max_size=4, unique_by=canonical), min_size=0, max_size=3)


@settings(max_examples=60, deadline=None)
@given(grid=grids, ntraces=st.integers(1, 2), seeds=st.one_of(st.none(), st.lists(st.integers(0, 99), min_size=1,
                                                                                        max_size=3, unique=True)),
       ncases=st.integers(0, 3))
def test_cells_are_the_cartesian_product_in_order(work, grid, ntraces, seeds, ncases):
    data = {"stack": "rgr.toml", "executor": "count", "traces": [{"path": p} for p in ("a.csv", "b.csv")[:ntraces]],
            "grid": grid}
    cases = [{"name": f"c{i}", "replay.window": 10 + i} for i in range(ncases)]
    if cases:
        data["cases"] = cases
    if seeds is not None:
        data["seeds"] = seeds
    sw = from_dict(data, work, "s.toml")
    cells = sw.cells()
    keys = list(grid)
    points = list(itertools.product(*(grid[k] for k in keys)))
    want = [(t, c.get("name"), tuple((k, v) for k, v in c.items() if k != "name") + tuple(zip(keys, p)), s)
            for t in sw.traces for c in (cases or [{}]) for p in points for s in (seeds or [None])]
    got = [(c.trace, c.case, c.params, c.seed) for c in cells]
    assert [(t, n, tuple((k, canonical(v)) for k, v in ps), s) for t, n, ps, s in got] == \
        [(t, n, tuple((k, canonical(v)) for k, v in ps), s) for t, n, ps, s in want]
    assert len(cells) == ntraces * max(1, ncases) * len(points) * len(seeds or [None])
    assert [c.index for c in cells] == list(range(len(cells)))


@settings(max_examples=200, deadline=None)
@given(params=st.dictionaries(st.text(min_size=1, max_size=8), scalar, max_size=5), data=st.data())
def test_cell_key_ignores_parameter_order_and_sees_every_value(params, data):
    items = list(params.items())
    shuffled = data.draw(st.permutations(items))
    base = {"params": dict(items), "trace_sha256": "ab" * 32, "seed": 1}
    assert cell_key(base) == cell_key({**base, "params": dict(shuffled)})
    if items:
        k, v = data.draw(st.sampled_from(items))
        other = data.draw(scalar.filter(lambda x: canonical(x) != canonical(v)))
        assert cell_key(base) != cell_key({**base, "params": {**params, k: other}})
    assert cell_key(base) != cell_key({**base, "seed": 2})
    assert cell_key(base) != cell_key({**base, "trace_sha256": "cd" * 32})


def test_cell_key_tells_types_apart_and_is_stable():
    keys = {cell_key({"params": {"x": v}}) for v in (5, 5.0, "5", True, [5], None)}
    assert len(keys) == 6
    # The recipe of the key is part of every results folder: changing it re-runs every sweep.
    assert cell_key({"params": {"cache.0.policy": "lru"}, "seed": None}) == "5b32bfa0d0e8fd3f"


@settings(max_examples=200, deadline=None)
@given(v=st.recursive(scalar, lambda inner: st.lists(inner, max_size=3), max_leaves=6))
def test_toml_values_read_back_as_given(v):
    assert tomllib.loads(f"v = {toml_value(v)}")["v"] == v


def test_sweep_file_errors_name_the_file_and_key(work):
    bad = {
        'stack = "rgr.toml"\ntraces = [{path = "a.csv"}]\nexecuter = "count"\n': "key `executer`: unknown key",
        'stack = "rgr.toml"\ntraces = [{path = "a.csv"}]\n[grid]\n"cache.0.policy" = "lru"\n':
            "key `grid.cache.0.policy`: must be a non-empty list",
        'stack = "rgr.toml"\ntraces = [{path = "nope.csv"}]\n': "key `traces.0.path`",
        'stack = "nope.toml"\ntraces = [{path = "a.csv"}]\n': "key `stack`",
        'stack = "rgr.toml"\nexecutor = "fast"\ntraces = [{path = "a.csv"}]\n': "unknown executor `fast`",
        'stack = "rgr.toml"\ntraces = [{path = "a.csv"}]\n[grid]\nseed = [1, 2]\n': "`seeds`",
        'stack = "rgr.toml"\ntraces = [{path = "a.csv"}]\nseeds = [1, 1]\n': "lists a seed twice",
        'stack = "rgr.toml"\ntraces = [{path = "a.csv"}]\n[grid]\n"array.disks" = [5]\n[[cases]]\n"array.disks" = 6\n':
            "also a grid key",
        'stack = "rgr.toml"\ntraces = [{path = "a.csv", fromat = "csv"}]\n': "key `traces.0.fromat`",
    }
    for i, (text, msg) in enumerate(bad.items()):
        p = sweep_file(work, text, f"bad{i}.toml")
        with pytest.raises(SweepError) as e:
            load_sweep(p)
        assert str(p) in str(e.value) and msg in str(e.value), str(e.value)
        r = blocklab_cli("sweep", p, "--out", work / "never", "-q")
        assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_unquoted_dotted_grid_keys_mean_the_same(work):
    a = load_sweep(sweep_file(work, BASIC, "q1.toml"))
    b = load_sweep(sweep_file(work, BASIC.replace('"cache.0.policy"', "cache.0.policy"), "q2.toml"))
    assert a.grid == b.grid and [c.params for c in a.cells()] == [c.params for c in b.cells()]


def test_a_traces_params_reach_its_cells_only(work, tmp_path):
    text = BASIC.replace('label = "trace b"\n', 'label = "trace b"\nparams = { "array.chunk" = "128KiB", replay = { speedup = 2.0 } }\n')
    sw = load_sweep(sweep_file(work, text, "tp.toml"))
    cells = sw.cells()
    a = [c for c in cells if c.trace.name == "a.csv"]
    b = [c for c in cells if c.trace.name == "trace b"]
    assert len(a) == len(b) == 8
    assert all("array.chunk" not in c.param_dict for c in a)
    assert all(c.params[:2] == (("array.chunk", "128KiB"), ("replay.speedup", 2.0)) for c in b)
    assert b[0].sets()[:2] == ['array.chunk="128KiB"', "replay.speedup=2.0"]
    assert "trace" in sw.varied() and "array.chunk" not in sw.varied()
    # In the results: a column of its own, set on that trace's rows; the cell keys see it.
    df = run_sweep(sw, tmp_path / "o", progress=False)
    assert (df["status"] == "ok").all()
    assert df.loc[df["trace_label"] == "trace b", "array.chunk"].eq("128KiB").all()
    assert df.loc[df["trace_label"] == "a.csv", "array.chunk"].isna().all()
    assert (df.loc[df["trace_label"] == "trace b", "array.chunk_bytes"] == 128 * 1024).all()
    plain = run_sweep(load_sweep(sweep_file(work, BASIC, "tp0.toml")), tmp_path / "p", progress=False)
    assert set(df["cell"][8:]).isdisjoint(plain["cell"][8:]) and list(df["cell"][:8]) == list(plain["cell"][:8])
    # A key set by a trace and by the grid is a mistake.
    bad = BASIC.replace('label = "trace b"\n', 'label = "trace b"\nparams = { "array.disks" = 7 }\n')
    with pytest.raises(SweepError, match="traces.1.params.array.disks"):
        load_sweep(sweep_file(work, bad, "tp2.toml"))


def test_a_case_can_be_for_one_trace_and_name_its_executor(work, tmp_path):
    text = BASIC.replace("[grid]\n", "[[cases]]\nname = \"timed\"\nexecutor = \"timed\"\n\"array.chunk\" = \"64KiB\"\n"
                                      "[[cases]]\nname = \"b only\"\ntrace = \"trace b\"\n\"array.chunk\" = \"32KiB\"\n[grid]\n")
    sw = load_sweep(sweep_file(work, text, "ce.toml"))
    cells = sw.cells()
    assert [(c.trace.name, c.case, c.executor) for c in cells[::8]] == [
        ("a.csv", "timed", "timed"), ("trace b", "timed", "timed"), ("trace b", "b only", None)]
    assert all("trace" not in c.param_dict and "executor" not in c.param_dict for c in cells)
    df = run_sweep(sw, tmp_path / "o", progress=False)
    assert len(df) == 24 and (df["status"] == "ok").all()
    assert list(df["executor"]) == ["timed"] * 16 + ["count"] * 8
    # Each row is its stack alone with its own executor.
    for i in (0, 20):
        c = cells[i]
        alone = blocklab.run_stack(work / "rgr.toml", c.trace.path, format="csv", executor=c.executor or "count",
                                   sets=c.sets())
        assert df.iloc[i]["array.rgr"] == alone["array"]["rgr"] and df.iloc[i]["requests"] == alone["requests"]
    assert "timing.sim_time_ms" in df.columns and df["timing.sim_time_ms"].iloc[16:].isna().all()
    # The executor is in the cell key: the same keys counted are other cells.
    plain = run_sweep(load_sweep(sweep_file(work, BASIC.replace("[grid]\n", "[[cases]]\n\"array.chunk\" = \"64KiB\"\n[grid]\n"),
                                            "ce0.toml")), tmp_path / "p", progress=False)
    assert set(plain["cell"]).isdisjoint(df["cell"][:16])
    for bad, msg in (('trace = "c.csv"', "cases.0.trace"), ('executor = "fast"', "cases.0.executor")):
        with pytest.raises(SweepError, match=msg):
            load_sweep(sweep_file(work, BASIC.replace("[grid]\n", f"[[cases]]\n{bad}\n[grid]\n"), "ce2.toml"))


# --- results ------------------------------------------------------------------------------------

def test_flatten_walks_records_and_keeps_lists_and_series_whole():
    r = {"requests": 3, "layers": [{"hits": 1, "policy": "lru"}, {"hits": 2, "policy": "arc"}],
         "array": {"failed": [0], "ops_by_cause": {"user": {"reads": 4}}},
         "response": {"p99_ms": 1.5, "cdf_ms": [1.0, 2.0]},
         "timing": {"timeseries": [{"t_ms": 0.0, "issued": 1}]},
         "rebuild": {"series": [{"t_ms": 5.0}], "disks": [1]},
         "tier": {"timeline": [{"window": 0, "tenants": [{"tenant": 1}]}], "tenants": [{"tenant": 1, "hits": 9}]},
         "other": [{"t_ms": 1.0, "x": 2}]}
    assert flatten(r) == {
        "requests": 3, "layers.0.hits": 1, "layers.0.policy": "lru", "layers.1.hits": 2, "layers.1.policy": "arc",
        "array.failed": [0], "array.ops_by_cause.user.reads": 4, "response.p99_ms": 1.5, "response.cdf_ms": [1.0, 2.0],
        "timing.timeseries": '[{"t_ms": 0.0, "issued": 1}]', "rebuild.series": '[{"t_ms": 5.0}]', "rebuild.disks": [1],
        "tier.timeline": '[{"window": 0, "tenants": [{"tenant": 1}]}]', "tier.tenants.0.tenant": 1,
        "tier.tenants.0.hits": 9, "other": '[{"t_ms": 1.0, "x": 2}]'}


def test_results_schema_provenance_and_every_row_equals_the_stack_alone(work, tmp_path):
    sw = load_sweep(sweep_file(work, BASIC))
    df = run_sweep(sw, tmp_path / "out", jobs=2, progress=False, command="test")
    cells = sw.cells()
    assert len(df) == len(cells) == 16 and (df["status"] == "ok").all()
    assert df["cell"].is_unique
    t = pq.read_table(tmp_path / "out" / "results.parquet")
    for col in PROVENANCE + ("cache.0.policy", "cache.0.size", "array.disks", "layers.0.miss_ratio", "array.rgr"):
        assert col in t.column_names, col
    assert t.schema.field("layers.0.miss_ratio").type == pa.float64()
    assert t.schema.field("layers.0.hits").type == pa.int64()
    assert t.schema.field("array.failed").type == pa.list_(pa.int64())
    assert t.schema.field("wall_s").type == pa.float64()
    # A figure named like a parameter is kept beside it.
    assert "result.array.disks" in t.column_names
    # A grid of 50 and "10%" is stored as text.
    assert t.schema.field("cache.0.size").type == pa.string()
    meta = json.loads(t.schema.metadata[b"blocklab.sweep"])
    assert meta["varied"] == ["cache.0.policy", "cache.0.size", "array.disks", "trace"]
    stack_sha = hashlib.sha256((work / "rgr.toml").read_bytes()).hexdigest()
    assert set(df["stack_sha256"]) == {stack_sha}
    for name in ("a.csv", "b.csv"):
        rows = df[df["trace"] == str(work / name)]
        assert set(rows["trace_sha256"]) == {hashlib.sha256((work / name).read_bytes()).hexdigest()}
    assert set(df["trace_label"]) == {"a.csv", "trace b"}
    assert set(df["trace_format"]) == {"csv"} and set(df["blocklab_version"]) == {blocklab.__version__}
    assert df["git_commit"].str.len().min() >= 7 and (df["wall_s"] >= 0).all()
    # Every row is what `blocklab run` gives for the cell alone (the cells of a trace shared passes).
    for c, (_, r) in zip(cells, df.iterrows()):
        alone = flatten(blocklab.run_stack(work / "rgr.toml", c.trace.path, format="csv", executor="count",
                                           sets=c.sets()))
        for k, v in alone.items():
            col = f"result.{k}" if k in ("array.disks",) else k
            if k in ("seed", "executor"):
                continue
            got = r[col]
            assert (list(got) if hasattr(got, "tolist") else got) == v, (c.params, k)
    assert blocklab.load(tmp_path / "out").equals(df)


def test_batched_and_one_by_one_and_the_api_agree(work, tmp_path):
    sw = load_sweep(sweep_file(work, BASIC))
    run_sweep(sw, tmp_path / "batched", jobs=1, progress=False)
    run_sweep(sw, tmp_path / "alone", jobs=2, batch=False, progress=False)
    a = pq.read_table(tmp_path / "batched" / "results.parquet").drop_columns(list(VOLATILE))
    b = pq.read_table(tmp_path / "alone" / "results.parquet").drop_columns(list(VOLATILE))
    assert a.equals(b)


def test_run_stacks_count_equals_run_stack_cell_by_cell(work):
    from blocklab import _core

    stack = str(work / "rgr.toml")
    sets = [["cache.0.policy=lfu"], ["cache.0.size=\"0.001%\""], ["cache.0.policy=opt", "cache.0.size=200"],
            ["cache.0.policy=nope"], ["array.disks=7", "cache.0.size=\"5%\""], []]
    out = _core.run_stacks_count([(stack, s) for s in sets], [str(work / "a.csv")], "csv", False)
    for s, (js, err) in zip(sets, out):
        try:
            alone = _core.run_stack(stack, [str(work / "a.csv")], format="csv", executor="count", sets=s)
            assert err is None and js == alone
        except blocklab.BlocklabError as e:
            assert js is None and err == str(e)
    assert sum(e is not None for _, e in out) == 2


# --- resume, skip, failures ---------------------------------------------------------------------

def test_rerun_skips_finished_cells_and_runs_new_ones(work, tmp_path):
    out = tmp_path / "out"
    sw = load_sweep(sweep_file(work, BASIC))
    first = run_sweep(sw, out, progress=False)
    calls = []
    again = run_sweep(sw, out, progress=lambda done, total, failed: calls.append(total))
    assert calls == [] and again.equals(first)
    # One more size: only its cells run; the others keep their rows (and start times).
    sw2 = load_sweep(sweep_file(work, BASIC.replace('[50, "10%"]', '[50, "10%", 200]'), "s2.toml"))
    ran = []
    third = run_sweep(sw2, out, progress=lambda done, total, failed: ran.append((done, total)))
    assert ran[-1] == (8, 8) and len(third) == 24
    old = third[third["cell"].isin(first["cell"])].set_index("cell")["started_at"]
    assert old.equals(first.set_index("cell")["started_at"].loc[old.index])


def test_an_interrupted_sweep_resumes_where_it_stopped(work, tmp_path):
    out = tmp_path / "out"
    sw = load_sweep(sweep_file(work, BASIC))

    def stop_after_5(done, total, failed):
        if done == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(sw, out, batch=False, progress=stop_after_5)
    part = blocklab.load(out)
    assert len(part) == 5  # the Parquet has what finished
    # A crash in the middle of a journal line: the line is ignored, the next run appends cleanly.
    with open(out / "cells.jsonl", "a") as f:
        f.write('{"cell": "torn')
    ran = []
    full = run_sweep(sw, out, progress=lambda done, total, failed: ran.append(total))
    assert ran and ran[0] == 11 and len(full) == 16 and (full["status"] == "ok").all()
    ref = run_sweep(sw, tmp_path / "ref", progress=False)
    a = pq.read_table(out / "results.parquet").drop_columns(list(VOLATILE))
    b = pq.read_table(tmp_path / "ref" / "results.parquet").drop_columns(list(VOLATILE))
    assert a.equals(b)


def test_ctrl_c_keeps_the_finished_cells_and_a_rerun_runs_the_rest(work, tmp_path):
    import signal
    import time

    one = tmp_path / "one.csv"
    one.write_text("timestamp,op,offset,size\n0,R,0,4096\n")
    # Timed cells on six mechanical disk models: a few hundred ms each, one job.
    p = sweep_file(tmp_path, f'stack = "{ROOT / "examples" / "stacks" / "host-lru-raid5.toml"}"\nexecutor = "timed"\n'
                             f'[[traces]]\npath = "one.csv"\nformat = "csv"\n[grid]\n"cache.0.size" = {list(range(1, 13))}\n')
    out = tmp_path / "o"
    cmd = [sys.executable, "-c", "from blocklab.cli import main; main()", "sweep", str(p), "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    journal = out / "cells.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (journal.exists() and journal.read_text().count("\n") >= 2):
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    done = journal.read_text().count("\n")
    assert proc.returncode == 130 and "run the same command again to resume" in err, (proc.returncode, err)
    assert 2 <= done < 12
    assert len(blocklab.load(out)) == done
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0 and f"({done} done before)" in r.stderr and "12 ok, 0 failed" in r.stdout


def test_the_api_runs_files_and_keywords_alike(work, tmp_path):
    a = blocklab.sweep(sweep_file(work, BASIC, "api.toml"), tmp_path / "a")
    b = blocklab.sweep(stack=work / "rgr.toml", executor="count", out=tmp_path / "b",
                       traces=[(work / "a.csv", "csv"), (work / "b.csv", "csv", "trace b")],
                       grid={"cache.0.policy": ["lru", "vdf-lru"], "cache.0.size": [50, "10%"], "array.disks": [5, 6]})
    cols = [c for c in a.columns if c not in VOLATILE]
    assert a[cols].equals(b[cols]) and len(a) == 16


def test_a_failing_cell_records_its_error_and_the_sweep_goes_on(work, tmp_path):
    body = """\
stack = "rgr.toml"
executor = "count"
[[traces]]
path = "a.csv"
format = "csv"
[grid]
"cache.0.size" = [50, "0.001%"]
[[cases]]
name = "one failed"
"array.failed" = [0]
[[cases]]
name = "two failed"
"array.failed" = [0, 1]
"array.allow_loss" = false
"""
    sw = load_sweep(sweep_file(work, body, "fail.toml"))
    df = run_sweep(sw, tmp_path / "out", progress=False)
    assert list(df["case"]) == ["one failed", "one failed", "two failed", "two failed"]
    assert list(df["status"]) == ["ok", "error", "error", "error"]
    assert "cache.0.size" in df["error"][1] and "less than one block" in df["error"][1]
    assert "array.failed" in df["error"][2] and "data would be lost" in df["error"][2]
    assert df["layers.0.miss_ratio"][0] > 0 and df["layers.0.miss_ratio"][1:].isna().all()
    # Failed cells are tried again on a re-run; finished ones are not.
    ran = []
    run_sweep(sw, tmp_path / "out", progress=lambda done, total, failed: ran.append((total, failed)))
    assert ran[-1] == (3, 3)


def test_a_sweep_none_of_whose_cells_can_load_is_bad_input(work, tmp_path):
    p = sweep_file(work, BASIC.replace('"cache.0.policy"', '"cache.0.polcy"'), "typo.toml")
    r = blocklab_cli("sweep", p, "--out", tmp_path / "o", "-q")
    assert r.returncode == 2, r.stderr
    assert "cell 0 (" in r.stderr and "cache.0.polcy" in r.stderr and str(p) in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_cli_sweep_and_report(work, tmp_path):
    p = sweep_file(work, BASIC)
    r = blocklab_cli("sweep", p, "--out", tmp_path / "o", "--jobs", "2")
    assert r.returncode == 0, r.stderr
    assert "16 cells" in r.stdout and "16 ok, 0 failed" in r.stdout
    assert "16/16" in r.stderr  # the progress bar's last state
    meta = json.loads((tmp_path / "o" / "meta.json").read_text())
    assert meta["command"].startswith("blocklab sweep ") and "--jobs 2" in meta["command"]
    r = blocklab_cli("report", tmp_path / "o", "--out", tmp_path / "r.html", "--metric", "array.rgr")
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "r.html").read_text()
    assert "array.rgr" in page and meta["command"] in page
    r = blocklab_cli("report", tmp_path, "--out", tmp_path / "x.html")
    assert r.returncode == 2 and "no results.parquet" in r.stderr
    r = blocklab_cli("report", tmp_path / "o", "--metric", "array.rgx")
    assert r.returncode == 2 and "no column `array.rgx`" in r.stderr


# --- Ray ----------------------------------------------------------------------------------------

def test_ray_local_gives_the_local_results_bit_for_bit(work, tmp_path):
    import ray  # installed by `make test` (blocklab[ray])

    body = BASIC.replace('label = "trace b"', 'label = "trace b"\nship = true')
    sw = load_sweep(sweep_file(work, body, "ray.toml"))
    assert sw.traces[1].ship
    local = run_sweep(sw, tmp_path / "local", jobs=2, progress=False)
    remote = run_sweep(sw, tmp_path / "ray", jobs=2, ray="local", progress=False)
    assert not ray.is_initialized()  # the local Ray it started is shut down
    a = pq.read_table(tmp_path / "local" / "results.parquet").drop_columns(list(VOLATILE))
    b = pq.read_table(tmp_path / "ray" / "results.parquet").drop_columns(list(VOLATILE))
    assert a.equals(b) and len(remote) == len(local) == 16
    # The shipped trace reached the workers as bytes: a copy named by its digest.
    import tempfile

    sha = hashlib.sha256((work / "b.csv").read_bytes()).hexdigest()
    assert (Path(tempfile.gettempdir()) / "blocklab-shipped" / f"{sha[:16]}-b.csv").exists()


# --- repro vdf as a sweep -----------------------------------------------------------------------

def test_repro_vdf_cells_equal_rgr(tmp_path):
    from blocklab.repro import vdf

    t = vdf.TraceSpec(str(SAMPLE), "mqsim", "sample")
    cells, red = vdf.run([t], tmp_path / "o", disks=[6], sizes=["2%", "10%"], progress=False)
    assert len(cells) == 8 and len(red) == 2
    for n in (6,):
        old = blocklab.rgr(SAMPLE, ",".join(vdf.POLICIES), ["2%", "10%"], format="mqsim", disks=n, failed=[0])
        new = cells[cells["disks"] == n]
        key = ["policy", "cache_blocks"]
        o, m = old.sort_values(key).reset_index(drop=True), new.sort_values(key).reset_index(drop=True)
        for col in ("cache_blocks", "accesses", "misses", "surviving_reads", "surviving_writes", "rgr", "miss_ratio"):
            assert list(o[col]) == list(m[col]), col
    assert (tmp_path / "o" / "report.html").exists()


def test_a_cell_past_redundancy_runs_only_when_allowed_and_says_what_was_lost(work, tmp_path):
    # Issue 27 cases 1 and 8 in sweeps: an allowed loss is in the cell's figures (unreadable requests and
    # blocks, response figures of served requests only), and every row states its layout.
    body = """\
stack = "rgr.toml"
executor = "timed"
[[traces]]
path = "a.csv"
format = "csv"
[[cases]]
name = "one failed"
"array.failed" = [0]
[[cases]]
name = "two failed, allowed"
"array.failed" = [0, 1]
"array.allow_loss" = true
"""
    sw = load_sweep(sweep_file(work, body, "loss.toml"))
    df = run_sweep(sw, tmp_path / "out", progress=False)
    assert list(df["status"]) == ["ok", "ok"]
    one, two = df.iloc[0], df.iloc[1]
    assert (one["array.unreadable_blocks"], one["timing.unreadable"], one["response.covers"]) == (0, 0, "all")
    assert two["array.unreadable_blocks"] > 0 and two["timing.unreadable"] > 0
    assert two["response.covers"] == "served"
    assert list(df["tenant_map"]) == ["key", "key"] and list(df["fit"]) == ["none", "none"]
