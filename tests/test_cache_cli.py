"""`blocklab cache` / `blocklab mrc` and the Python API over the counted simulator."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections import OrderedDict

import pytest
from hypothesis import given, settings, strategies as st

import blocklab
from blocklab import _core

BS = 4096


def run(*args):
    """Run the CLI as a user would (through main(), which maps errors to exit 2)."""
    return subprocess.run([sys.executable, "-c", "from blocklab.cli import main; main()", *map(str, args)], capture_output=True, text=True)


def keys_of(path) -> list[int]:
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return [int(r["offset"]) // BS for r in rows]


def write_keys(path, keys, ops=None) -> None:
    with open(path, "w") as f:
        f.write("timestamp,op,offset,size,tenant\n")
        for i, k in enumerate(keys):
            f.write(f"{i * 0.001:.3f},{'R' if ops is None else ops[i]},{k * BS},{BS},0\n")


def lru_misses(keys, size) -> int:
    """Brute-force LRU."""
    cache: OrderedDict[int, None] = OrderedDict()
    misses = 0
    for k in keys:
        if k in cache:
            cache.move_to_end(k)
        else:
            misses += 1
            cache[k] = None
            if len(cache) > size:
                cache.popitem(last=False)
    return misses


@pytest.fixture(scope="module")
def zipf(tmp_path_factory):
    p = tmp_path_factory.mktemp("cache") / "zipf.csv"
    _core.write_zipf_csv(str(p), 20_000, 2_000, 0.9, 5, BS)
    return p


def test_cache_json_shape_and_sizes(zipf):
    r = run("cache", zipf, "--format", "csv", "--policy", "lru", "--size", "100,64KiB,5%", "--json")
    assert r.returncode == 0, r.stderr
    cells = json.loads(r.stdout)
    unique = len(set(keys_of(zipf)))
    assert [c["cache_blocks"] for c in cells] == [100, 16, unique * 5 // 100]
    keys = keys_of(zipf)
    for c in cells:
        assert list(c) == ["policy", "cache_blocks", "accesses", "hits", "misses", "miss_ratio"]
        assert c["policy"] == "lru" and c["accesses"] == len(keys)
        assert c["misses"] == lru_misses(keys, c["cache_blocks"])
        assert c["hits"] + c["misses"] == c["accesses"]
        assert c["miss_ratio"] == pytest.approx(c["misses"] / c["accesses"])


def test_cache_every_policy_one_pass(zipf):
    policies = _core.cache_policies()
    r = run("cache", zipf, "--format", "csv", "--policy", ",".join(policies), "--size", "50,500", "--json")
    assert r.returncode == 0, r.stderr
    cells = json.loads(r.stdout)
    assert [(c["policy"], c["cache_blocks"]) for c in cells] == [(p, s) for p in policies for s in (50, 500)]


def test_cache_table(zipf):
    r = run("cache", zipf, "--format", "csv", "--policy", "lru", "--size", "100")
    assert r.returncode == 0, r.stderr
    assert "miss ratio" in r.stdout and "lru" in r.stdout and "20,000" in r.stdout


@pytest.mark.parametrize("size,needle", [("abc", "`abc`"), ("100,1KiB", "`1KiB`"), ("0", "`0`"), ("12XB", "`12XB`")])
def test_bad_size_exits_2(zipf, size, needle):
    r = run("cache", zipf, "--format", "csv", "--policy", "lru", "--size", size)
    assert r.returncode == 2
    assert "blocklab: error:" in r.stderr and needle in r.stderr and "bad cache size" in r.stderr
    assert "Traceback" not in r.stderr


def test_unknown_policy_exits_2_listing_valid_names(zipf):
    r = run("cache", zipf, "--format", "csv", "--policy", "lru,belady9", "--size", "10")
    assert r.returncode == 2
    assert "`belady9`" in r.stderr
    for name in _core.cache_policies():
        assert name in r.stderr
    assert "Traceback" not in r.stderr


def test_missing_file_and_bad_format_exit_2(tmp_path):
    r = run("cache", tmp_path / "nope.csv", "--format", "csv", "--size", "10")
    assert r.returncode == 2 and "nope.csv" in r.stderr and "Traceback" not in r.stderr
    r = run("mrc", tmp_path / "nope.csv", "--format", "csv")
    assert r.returncode == 2 and "nope.csv" in r.stderr


def test_bad_record_names_line_and_skip_bad_counts(tmp_path):
    p = tmp_path / "bad.csv"
    write_keys(p, [1, 2, 3, 1])
    lines = p.read_text().splitlines()
    lines.insert(3, "0.5,X,0,4096,0")
    p.write_text("\n".join(lines) + "\n")
    r = run("cache", p, "--format", "csv", "--size", "10", "--json")
    assert r.returncode == 2 and "line 4" in r.stderr and "op" in r.stderr
    r = run("cache", p, "--format", "csv", "--size", "10", "--json", "--skip-bad")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["accesses"] == 4
    assert "skipped 1" in r.stderr


def test_exact_mrc_equals_cache_lru(zipf):
    sizes = "1,10,37,100,333,1000,1%,25%"
    m = run("mrc", zipf, "--format", "csv", "--method", "exact", "--size", sizes, "--json")
    c = run("cache", zipf, "--format", "csv", "--policy", "lru", "--size", sizes, "--json")
    assert m.returncode == 0 and c.returncode == 0, m.stderr + c.stderr
    curve = json.loads(m.stdout)
    assert list(curve) == ["method", "points"] and curve["method"] == "exact"
    cells = json.loads(c.stdout)
    assert [(p["cache_blocks"], p["miss_ratio"]) for p in curve["points"]] == \
        [(x["cache_blocks"], x["miss_ratio"]) for x in cells]


def test_whole_curve_and_shards(zipf):
    r = run("mrc", zipf, "--format", "csv", "--json")
    assert r.returncode == 0, r.stderr
    pts = json.loads(r.stdout)["points"]
    assert len(pts) > 10
    xs = [p["cache_blocks"] for p in pts]
    ys = [p["miss_ratio"] for p in pts]
    assert xs == sorted(set(xs)) and ys == sorted(ys, reverse=True)
    keys = keys_of(zipf)
    assert ys[-1] == pytest.approx(len(set(keys)) / len(keys))  # only cold misses left
    s = run("mrc", zipf, "--format", "csv", "--method", "shards", "--rate", "1.0", "--json")
    assert s.returncode == 0, s.stderr
    # SHARDS at rate 1 is the exact curve, to the four digits a SHARDS estimate is given with.
    assert json.loads(s.stdout) == {"method": "shards", "points": [dict(p, miss_ratio=round(p["miss_ratio"], 4))
                                                                   for p in pts],
                                    "rate": 1.0, "trusted_from_blocks": 0, "warnings": []}
    s = run("mrc", zipf, "--format", "csv", "--method", "shards", "--max-samples", "300", "--size", "500", "--json")
    assert s.returncode == 0, s.stderr
    exact = run("mrc", zipf, "--format", "csv", "--size", "500", "--json")
    assert abs(json.loads(s.stdout)["points"][0]["miss_ratio"] - json.loads(exact.stdout)["points"][0]["miss_ratio"]) < 0.1
    t = run("mrc", zipf, "--format", "csv")
    assert t.returncode == 0 and "miss ratio" in t.stdout


@pytest.mark.parametrize("args,needle", [
    (["--method", "olken"], "exact, shards"),
    (["--method", "shards", "--rate", "2"], "(0, 1]"),
    (["--method", "shards", "--rate", "0.1", "--max-samples", "5"], "not both"),
    (["--method", "shards", "--max-samples", "0"], "at least 1"),
    (["--size", "1KiB"], "`1KiB`"),
])
def test_mrc_bad_options_exit_2(zipf, args, needle):
    r = run("mrc", zipf, "--format", "csv", *args)
    assert r.returncode == 2 and needle in r.stderr, r.stderr


def test_python_api(zipf):
    seen = []
    df = blocklab.simulate_cache(zipf, ["lru"], [10, "5%"], format="csv", progress=seen.append)
    assert list(df.columns) == ["policy", "cache_blocks", "accesses", "hits", "misses", "miss_ratio"]
    assert len(df) == 2 and seen and seen[-1] == 20_000
    m = blocklab.mrc(zipf, format="csv", sizes=[10])
    assert list(m.columns) == ["cache_blocks", "miss_ratio"]
    assert m.miss_ratio[0] == df.miss_ratio[0]
    with pytest.raises(blocklab.BlocklabError, match="unknown policy"):
        blocklab.simulate_cache(zipf, "nope", "10", format="csv")


def test_progress_exception_stops_the_run(zipf):
    def boom(n):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _core.simulate_cache(str(zipf), "csv", "lru", "10", BS, False, False, boom)


def test_empty_trace_has_no_miss_ratio(tmp_path):
    p = tmp_path / "empty.csv"
    write_keys(p, [])
    r = run("cache", p, "--format", "csv", "--size", "10", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0] == {"policy": "lru", "cache_blocks": 10, "accesses": 0, "hits": 0, "misses": 0,
                                       "miss_ratio": None}
    r = run("mrc", p, "--format", "csv", "--size", "10", "--json")
    assert json.loads(r.stdout) == {"method": "exact", "points": [{"cache_blocks": 10, "miss_ratio": None}]}
    r = run("mrc", p, "--format", "csv", "--json")
    assert json.loads(r.stdout) == {"method": "exact", "points": []}


@settings(max_examples=25, deadline=None)
@given(keys=st.lists(st.integers(0, 30), min_size=1, max_size=300),
       writes=st.lists(st.booleans(), min_size=300, max_size=300),
       sizes=st.lists(st.integers(1, 35), min_size=1, max_size=4))
def test_lru_matches_brute_force(tmp_path_factory, keys, writes, sizes):
    p = tmp_path_factory.mktemp("h") / "t.csv"
    ops = ["W" if w else "R" for w in writes]
    write_keys(p, keys, ops)
    size_list = ",".join(map(str, sizes))
    out = json.loads(_core.simulate_cache(str(p), "csv", "lru", size_list, BS, False, False, None))
    assert [c["misses"] for c in out["cells"]] == [lru_misses(keys, s) for s in sizes]
    reads = [k for k, o in zip(keys, ops) if o == "R"]
    out = json.loads(_core.simulate_cache(str(p), "csv", "lru", size_list, BS, True, False, None))
    assert [c["accesses"] for c in out["cells"]] == [len(reads)] * len(sizes)
    assert [c["misses"] for c in out["cells"]] == [lru_misses(reads, s) for s in sizes]
    curve = json.loads(_core.mrc(str(p), "csv", "exact", None, None, size_list, BS, False, False))
    assert [pt["miss_ratio"] for pt in curve["points"]] == [lru_misses(keys, s) / len(keys) for s in sizes]
