"""`--unset` (issue 27, case 5) and times that go back (case 10), through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VDF_REBUILD = ROOT / "examples" / "stacks" / "vdf-rebuild.toml"


def blocklab(*args):
    cmd = [sys.executable, "-c", "from blocklab.cli import main; main()", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True)


def ok_json(*args):
    r = blocklab(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def zipf(tmp_path_factory):
    p = tmp_path_factory.mktemp("z") / "zipf.csv"
    r = blocklab("trace", "synth", p, "--accesses", "3000", "--universe", "2000", "--alpha", "0.9", "--seed", "1")
    assert r.returncode == 0, r.stderr
    return p


def test_unset_drops_the_rebuild_of_the_shipped_stack(zipf):
    args = ("run", VDF_REBUILD, "--trace", zipf, "--format", "csv")
    with_rebuild = ok_json(*args)
    assert with_rebuild["rebuild"] is not None
    degraded = ok_json(*args, "--unset", "array.rebuild")
    assert degraded.get("rebuild") is None
    assert degraded["array"]["failed"] == [1]
    assert degraded["array"]["ops_by_cause"].get("rebuild", {"reads": 0})["reads"] == 0
    # --unset then --set: the section comes back.
    again = ok_json(*args, "--unset", "array.rebuild", "--set", "array.rebuild.at=0")
    assert again["rebuild"] is not None


def test_an_empty_rebuild_table_is_an_error_not_a_silent_rebuild(zipf):
    r = blocklab("run", VDF_REBUILD, "--trace", zipf, "--format", "csv", "--unset", "array.rebuild",
                 "--set", "array.rebuild={}")
    assert r.returncode == 2, r.stderr
    assert "key `array.rebuild`: empty table" in r.stderr and "--unset array.rebuild" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_unset_of_a_missing_key_is_an_error(zipf):
    r = blocklab("run", VDF_REBUILD, "--trace", zipf, "--format", "csv", "--unset", "array.rebuidl")
    assert r.returncode == 2 and "--unset array.rebuidl: `array.rebuidl` is not in the stack" in r.stderr, r.stderr


BACKWARDS = "0.5,R,0,4096\n0.2,R,4096,4096\n0.9,W,8192,4096\n0.1,R,0,4096\n"
STACK = 'tenant_map = "ignore"\n[device]\nmodel = "const:1"\n'


@pytest.fixture()
def backwards(tmp_path):
    t = tmp_path / "b.csv"
    t.write_text(BACKWARDS)
    s = tmp_path / "s.toml"
    s.write_text(STACK)
    return s, t


@pytest.mark.parametrize("executor, sets", [("timed", ()), ("count", ("--set", "replay.warmup=0.01"))])
def test_run_refuses_times_that_go_back_naming_the_line(backwards, executor, sets):
    # (counted: a warm-up makes the run read trace times; without one it reads the file as it is)
    s, t = backwards
    r = blocklab("run", s, "--trace", t, "--format", "csv", "--executor", executor, *sets)
    assert r.returncode == 2, r.stderr
    assert f"{t}: line 2: field `time`: time goes back: 0.2 s after 0.5 s at line 1" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_run_sort_reorders_and_reports(backwards):
    s, t = backwards
    out = ok_json("run", s, "--trace", t, "--format", "csv", "--sort")
    assert out["requests"] == 4
    assert out["reordered"] == {"moved": 2, "max_behind_ms": pytest.approx(800.0), "window_ms": 1000.0}
    # Sorted, the replay starts at 0.1 s: 0.8 s of trace time, not 0.4 s measured from 0.5 s.
    assert out["timing"]["sim_time_ms"] == pytest.approx(801.0, abs=0.5)
    r = blocklab("run", s, "--trace", t, "--format", "csv", "--sort")
    assert r.returncode == 0 and "sorted within 1 s: 2 requests moved, the farthest 800.000 ms behind" in r.stdout
    # The window is a bound: 0.1 s is 0.8 s behind 0.9 s.
    r = blocklab("run", s, "--trace", t, "--format", "csv", "--sort-window", "0.5")
    assert r.returncode == 2 and "line 4: field `time`" in r.stderr and "sort window of 0.5 s" in r.stderr
    # The stack file says the same.
    s.write_text(STACK.replace("[device]", "[replay]\nsort = true\n\n[device]"))
    assert ok_json("run", s, "--trace", t, "--format", "csv")["reordered"]["moved"] == 2


def test_disk_run_applies_the_rule(backwards):
    _, t = backwards
    r = blocklab("disk", "run", "const:1", "--trace", t, "--format", "csv")
    assert r.returncode == 2 and "line 2: field `time`: time goes back" in r.stderr, r.stderr
    out = ok_json("disk", "run", "const:1", "--trace", t, "--format", "csv", "--sort")
    assert out["requests"] == 4 and out["reordered"]["moved"] == 2


def test_cache_mrc_and_a_timeless_count_read_the_file_as_it_is(backwards):
    # No time in a cache simulation: the order of the file is the access order.
    _, t = backwards
    r = blocklab("cache", t, "--format", "csv", "--policy", "lru", "--size", "2", "--json")
    assert r.returncode == 0, r.stderr
    r = blocklab("mrc", t, "--format", "csv", "--json")
    assert r.returncode == 0, r.stderr
    s, _ = backwards
    out = ok_json("run", s, "--trace", t, "--format", "csv", "--executor", "count")
    assert out["requests"] == 4 and "reordered" not in out


@pytest.mark.parametrize("mode", ["open", "closed"])
def test_real_replay_applies_the_rule(backwards, tmp_path, mode):
    _, t = backwards
    d = tmp_path / "arr"
    r = blocklab("real", "create", d, "--raid", "5", "--disks", "4", "--chunk", "16KiB", "--disk-size", "1MiB")
    assert r.returncode == 0, r.stderr
    r = blocklab("real", "replay", d, "--trace", t, "--format", "csv", "--replay", mode, "--no-direct")
    assert r.returncode == 2 and "line 2: field `time`: time goes back" in r.stderr, r.stderr
    out = ok_json("real", "replay", d, "--trace", t, "--format", "csv", "--replay", mode, "--no-direct", "--sort")
    assert out["requests"] == 4 and out["errors"] == 0
    assert out["reordered"]["moved"] == 2
