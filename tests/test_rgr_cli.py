"""`blocklab rgr` and `blocklab repro vdf`: JSON shape, invariants, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "wsrch-small.trace"
KEYS = {"policy", "cache_blocks", "accesses", "misses", "surviving_reads", "surviving_writes", "rgr"}


def blocklab(*args):
    cmd = [sys.executable, "-c", "from blocklab.cli import main; main()", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True)


def native(tmp_path, rows):
    p = tmp_path / "t.csv"
    p.write_text("timestamp,op,offset,size,tenant\n" + "".join(f"{t},{op},{o},{s},0\n" for t, op, o, s in rows))
    return p


def test_json_shape_and_rgr():
    r = blocklab("rgr", SAMPLE, "--format", "mqsim", "--raid", "5", "--disks", "5", "--chunk", "64KiB",
                 "--failed", "0", "--policy", "lru,vdf-lru,lfu,vdf-lfu", "--size", "1%,10%", "--reads-only", "--json")
    assert r.returncode == 0, r.stderr
    cells = json.loads(r.stdout)
    assert len(cells) == 8
    for c in cells:
        assert set(c) == KEYS
        assert c["accesses"] > 0 and 0 <= c["misses"] <= c["accesses"]
        assert c["surviving_writes"] == 0  # reads only
        # every miss costs at least one surviving read and at most n-1 = 4
        assert c["misses"] <= c["surviving_reads"] <= 4 * c["misses"]
        assert c["rgr"] == pytest.approx((c["surviving_reads"] + c["surviving_writes"]) / c["accesses"])
    by = {(c["policy"], c["cache_blocks"]): c for c in cells}
    for size in {c["cache_blocks"] for c in cells}:
        # same accesses for every cell
        assert len({by[(p, size)]["accesses"] for p in ("lru", "vdf-lru", "lfu", "vdf-lfu")}) == 1


def test_no_failure_rgr_is_miss_ratio():
    r = blocklab("rgr", SAMPLE, "--format", "mqsim", "--disks", "6", "--failed", "", "--policy", "lru,vdf-lru,gds",
                 "--size", "500", "--reads-only", "--json")
    assert r.returncode == 0, r.stderr
    for c in json.loads(r.stdout):
        assert c["surviving_reads"] == c["misses"]
        assert c["rgr"] == pytest.approx(c["misses"] / c["accesses"])


def test_figure_1_single_misses(tmp_path):
    # 5-disk RAID-5, disk 0 failed. Block 0 (chunk 0) lives on disk 0 in the
    # left-symmetric layout: a read miss costs 4 surviving reads (Figure 1(a));
    # block 16 (chunk 1, disk 1) costs 1 (Figure 1(b)).
    t = native(tmp_path, [(0, "R", 0, 4096), (1, "R", 16 * 4096, 4096)])
    r = blocklab("rgr", t, "--format", "csv", "--disks", "5", "--failed", "0", "--policy", "lru", "--size", "8", "--json")
    assert r.returncode == 0, r.stderr
    (c,) = json.loads(r.stdout)
    assert (c["misses"], c["surviving_reads"], c["rgr"]) == (2, 5, 2.5)


def test_miss_trace(tmp_path):
    t = native(tmp_path, [(0, "R", 0, 8192), (1, "R", 0, 4096), (2, "R", 65536, 4096)])
    out = tmp_path / "m.csv"
    r = blocklab("rgr", t, "--format", "csv", "--failed", "0", "--policy", "lru", "--size", "8", "--miss-trace", out, "--json")
    assert r.returncode == 0, r.stderr
    assert out.read_text().splitlines() == ["timestamp,op,offset,size,tenant", "0,R,0,8192,0", "2,R,65536,4096,0"]


@pytest.mark.parametrize("failed", ["9", "x", "0,a"])
def test_bad_failed_exits_2(failed):
    r = blocklab("rgr", SAMPLE, "--format", "mqsim", "--disks", "5", "--failed", failed, "--json")
    assert r.returncode == 2
    assert r.stderr.startswith("blocklab: error:")


def test_bad_policy_exits_2():
    r = blocklab("rgr", SAMPLE, "--format", "mqsim", "--policy", "nope", "--size", "10", "--json")
    assert r.returncode == 2
    assert "vdf-lru" in r.stderr


def test_bad_fail_at_exits_2():
    r = blocklab("rgr", SAMPLE, "--format", "mqsim", "--fail-at", "soon", "--size", "10", "--json")
    assert r.returncode == 2


def test_repro_vdf_small(tmp_path):
    r = blocklab("repro", "vdf", "--only", "--traces", f"{SAMPLE}:mqsim", "--disks", "5,8", "--sizes", "2%,10%",
                 "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "The paper reports" in r.stdout and "Our numbers" in r.stdout
    assert (tmp_path / "results.parquet").exists() and (tmp_path / "vdf-reduction.png").exists()
    assert "VDF-LRU" in (tmp_path / "vdf-report.md").read_text()
    # The cells are a sweep: 2 disks x 4 policies x 2 sizes rows, and its report with the recipe's sections.
    import pandas as pd

    df = pd.read_parquet(tmp_path / "results.parquet")
    assert len(df) == 16 and (df["status"] == "ok").all() and set(df["array.disks"]) == {5, 8}
    page = (tmp_path / "report.html").read_text()
    assert "The paper against our numbers" in page and "blocklab repro vdf" in page
    # A re-run finds every cell done.
    r = blocklab("repro", "vdf", "--only", "--traces", f"{SAMPLE}:mqsim", "--disks", "5,8", "--sizes", "2%,10%",
                 "--out", tmp_path)
    assert r.returncode == 0 and "(16 done before)" in r.stderr


def test_api_rgr():
    from blocklab import api

    df = api.rgr(SAMPLE, "lru,vdf-lru", [100, 1000], format="mqsim", disks=6, failed=[2])
    assert list(df["policy"]) == ["lru", "lru", "vdf-lru", "vdf-lru"]
    assert (df["rgr"] >= df["miss_ratio"]).all()


def test_past_redundancy_refused_unless_allowed():
    # Issue 27 case 1: RAID-6 with three failed disks used to give RGRs without a word.
    args = ["rgr", SAMPLE, "--format", "mqsim", "--raid", "6", "--disks", "6", "--failed", "0,1,2",
            "--policy", "lru", "--size", "100"]
    r = blocklab(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "--failed" in r.stderr and "survives 2" in r.stderr
    assert "--allow-loss" in r.stderr
    r = blocklab(*args, "--allow-loss", "--json")
    assert r.returncode == 0, r.stderr
    (cell,) = json.loads(r.stdout)
    assert cell["unreadable_blocks"] > 0
    r = blocklab(*args, "--allow-loss")
    assert r.returncode == 0, r.stderr
    assert "unreadable blocks" in r.stdout and f"{cell['unreadable_blocks']:,}" in r.stdout


@pytest.mark.parametrize("flags,basis,unique", [([], "reads and writes", 93_029), (["--reads-only"], "reads only", None)])
def test_percent_footprint_printed_and_equal_to_cache(flags, basis, unique):
    # Issue 27 case 7: rgr and cache take a % of the same footprint given the same flags, and say of what.
    r = blocklab("rgr", SAMPLE, "--format", "mqsim", "--failed", "0", "--policy", "lru", "--size", "1%", *flags)
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stdout.splitlines() if "unique blocks" in x][0]
    n = int(line.split(" of ")[1].split(" unique")[0].replace(",", ""))
    assert line == f"1% of {n:,} unique blocks ({basis}); tenant map key, fit none"
    if unique is not None:
        assert n == unique  # trace stats: 93,029 unique blocks
    c = blocklab("cache", SAMPLE, "--format", "mqsim", "--policy", "lru", "--size", "1%", *flags)
    assert c.returncode == 0, c.stderr
    assert f"1% of {n:,} unique blocks ({basis})" in c.stdout.splitlines()
    rj = blocklab("rgr", SAMPLE, "--format", "mqsim", "--failed", "0", "--policy", "lru", "--size", "1%", *flags, "--json")
    cj = blocklab("cache", SAMPLE, "--format", "mqsim", "--policy", "lru", "--size", "1%", *flags, "--json")
    assert json.loads(rj.stdout)[0]["cache_blocks"] == json.loads(cj.stdout)[0]["cache_blocks"]


def test_api_refuses_past_redundancy_unless_allowed():
    # Issue 27 case 1 for the Python API's front ends.
    import blocklab
    from blocklab import api

    with pytest.raises(blocklab._core.BlocklabError, match="--allow-loss"):
        api.rgr(SAMPLE, "lru", [100], format="mqsim", raid="6", disks=6, failed=[0, 1, 2])
    df = api.rgr(SAMPLE, "lru", [100], format="mqsim", raid="6", disks=6, failed=[0, 1, 2], allow_loss=True)
    assert df["unreadable_blocks"].iloc[0] > 0
    with pytest.raises(blocklab._core.BlocklabError, match="--allow-loss"):
        api.disk_run("const:1", str(SAMPLE), format="mqsim", raid="5", disks=6, failed=[0, 1])
