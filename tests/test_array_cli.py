"""`blocklab array map|plan`: JSON shape, MD placement, errors exit 2 with valid names."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from blocklab import _core


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from blocklab.cli import main; main()", *args],
        capture_output=True,
        text=True,
    )


def test_map_json_shape_and_left_symmetric_table():
    r = run("array", "map", "--raid", "5", "--disks", "4", "--chunk", "4KiB", "--json", *map(str, range(6)))
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [set(x) >= {"block", "disks", "disk_block", "parity"} for x in rows] == [True] * 6
    # MD left-symmetric, 4 disks: "D0 D1 D2 P" then "D4 D5 P D3".
    got = [(x["block"], x["disks"], x["disk_block"], x["parity"]) for x in rows]
    assert got == [
        (0, [0], 0, [3]),
        (1, [1], 0, [3]),
        (2, [2], 0, [3]),
        (3, [3], 1, [2]),
        (4, [0], 1, [2]),
        (5, [1], 1, [2]),
    ]


def test_map_mirrors_list_every_copy_and_raid6_has_p_and_q():
    rows = json.loads(run("array", "map", "--raid", "1", "--disks", "3", "--json", "7").stdout)
    assert rows[0]["disks"] == [0, 1, 2] and rows[0]["parity"] == []
    rows = json.loads(run("array", "map", "--raid", "6", "--disks", "5", "--chunk", "4096", "--json", "0").stdout)
    assert rows[0]["disks"] == [1] and rows[0]["parity"] == [4, 0]


def test_bad_level_exits_2_listing_valid_names():
    r = run("array", "map", "--raid", "7", "--disks", "4", "0")
    assert r.returncode == 2
    assert "raid5" in r.stderr and "raid10" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--raid", "5", "--disks", "4", "--layout", "sideways"], "left-symmetric"),
        (["--raid", "6", "--disks", "3"], "at least 4"),
        (["--raid", "5", "--disks", "4", "--chunk", "6000"], "multiple of the block size"),
        (["--raid", "5", "--disks", "4", "--chunk", "lots"], "bad size"),
    ],
)
def test_bad_configs_exit_2(args, needle):
    r = run("array", "map", *args, "0")
    assert r.returncode == 2
    assert needle in r.stderr


def test_plan_degraded_read_json():
    r = run("array", "plan", "--raid", "5", "--disks", "4", "--chunk", "4KiB", "--failed", "0", "--read", "0", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    reads = [(n["disk"], n["cause"]) for n in out["plan"] if n["op"] == "read"]
    assert reads == [(1, "reconstruct-read"), (2, "reconstruct-read"), (3, "reconstruct-read")]
    assert [n["op"] for n in out["plan"]][-1] == "xor"
    assert out["read_penalty"] == [3]
    assert out["counts"]["read"]["blocks"] == 3


def test_plan_needs_exactly_one_operation_and_valid_disks():
    assert run("array", "plan", "--raid", "5", "--disks", "4").returncode == 2
    r = run("array", "plan", "--raid", "5", "--disks", "4", "--failed", "9", "--read", "0")
    assert r.returncode == 2 and "disk 9" in r.stderr


@settings(max_examples=30, deadline=None)
@given(
    level=st.sampled_from(["0", "1", "10", "4", "5", "6"]),
    disks=st.integers(4, 8),
    chunk_blocks=st.integers(1, 4),
)
def test_map_places_blocks_without_collisions(level, disks, chunk_blocks):
    blocks = list(range(4 * disks * chunk_blocks))
    rows = json.loads(_core.array_map(level, disks, chunk_blocks * 4096, blocks))
    seen = set()
    for r in rows:
        for d, db in zip(r["disks"], r["disk_blocks"]):
            assert (d, db) not in seen
            seen.add((d, db))
        assert not set(r["parity"]) & set(r["disks"])


def test_python_api_wrappers():
    from blocklab import api

    rows = api.array_map(10, 3, [0, 1], chunk=4096)
    assert [(r["disks"], r["disk_blocks"]) for r in rows] == [([0, 1], [0, 0]), ([2, 0], [0, 1])]
    out = api.array_plan("raid1", 2, "write", 5, count=2, failed=[1], chunk="4KiB")
    writes = [(n["disk"], n["block"], n["nblocks"]) for n in out["plan"] if n["op"] == "write"]
    assert writes == [(0, 5, 2)]
    with pytest.raises(_core.BlocklabError, match="valid: read, write"):
        api.array_plan(5, 4, "erase", 0)


def test_map_raid10_far2_table():
    # f2 on 4 disks of 4 chunks (one 4 KiB block per chunk), worked out by hand from
    # MD's raid10 rules: region 0 (rows 0-1) is RAID-0, region 1 (rows 2-3) the same
    # shifted one disk right:  D0 D1 D2 D3 / D4 D5 D6 D7 / D3 D0 D1 D2 / D7 D4 D5 D6.
    r = run("array", "map", "--raid", "10", "--disks", "4", "--chunk", "4KiB", "--layout", "f2",
            "--disk-size", "16KiB", "--json", *map(str, range(8)))
    assert r.returncode == 0, r.stderr
    got = [(x["disks"], x["disk_blocks"]) for x in json.loads(r.stdout)]
    assert got == [
        ([0, 1], [0, 2]),
        ([1, 2], [0, 2]),
        ([2, 3], [0, 2]),
        ([3, 0], [0, 2]),
        ([0, 1], [1, 3]),
        ([1, 2], [1, 3]),
        ([2, 3], [1, 3]),
        ([3, 0], [1, 3]),
    ]
    # Text output lists each copy's offset when they differ.
    r = run("array", "map", "--raid", "10", "--disks", "4", "--chunk", "4KiB", "--layout", "far2",
            "--disk-size", "16KiB", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1].split() == ["3", "3,0", "0,2", "-"]


def test_plan_raid10_far_degraded_reads_far_copy():
    r = run("array", "plan", "--raid", "10", "--disks", "4", "--chunk", "4KiB", "--layout", "f2",
            "--disk-size", "16KiB", "--failed", "0", "--read", "0", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["layout"] == "f2"
    assert [(n["op"], n["disk"], n["block"]) for n in out["plan"]] == [("read", 1, 2)]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--layout", "f2"], "--disk-size"),
        (["--layout", "n2f2"], "--disk-size"),
        (["--layout", "f2", "--disk-size", "4KiB"], "far regions"),
        (["--layout", "f5", "--disk-size", "1MiB"], "at least 5 disks"),
        (["--layout", "sideways"], "n2"),
        (["--layout", "o2", "--disk-size", "16KiB", "--chunk", "4KiB", "--json"], None),
    ],
)
def test_raid10_layout_errors_exit_2(args, needle):
    r = run("array", "map", "--raid", "10", "--disks", "4", *args, "0")
    if needle is None:
        assert r.returncode == 0, r.stderr
        return
    assert r.returncode == 2, r.stdout
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_map_beyond_a_sized_array_exits_2():
    r = run("array", "map", "--raid", "10", "--disks", "4", "--chunk", "4KiB", "--layout", "f2",
            "--disk-size", "16KiB", "8")
    assert r.returncode == 2
    assert "beyond the array" in r.stderr


def test_rgr_takes_raid10_layouts_and_needs_the_size():
    from pathlib import Path

    sample = Path(__file__).resolve().parents[1] / "data" / "wsrch-small.trace"
    base = ["rgr", str(sample), "--format", "mqsim", "--raid", "10", "--disks", "4", "--layout", "f2",
            "--failed", "0", "--size", "1%", "--policy", "lru"]
    r = run(*base)
    assert r.returncode == 2 and "--disk-size" in r.stderr
    r = run(*base, "--disk-size", "4GiB", "--json")
    assert r.returncode == 0, r.stderr
    # f2 survives any single failure: every miss reads one block on a survivor.
    cell = json.loads(r.stdout)[0]
    assert cell["surviving_reads"] + cell["surviving_writes"] >= cell["misses"] > 0
