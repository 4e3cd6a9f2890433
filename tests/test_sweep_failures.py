"""Sweeps that fail loudly (issue 27, case 6): a sweep with a failed cell exits non-zero and
its Parquet still has every cell; a policy, format or model name that does not exist stops
the sweep before its first cell runs, with one line and exit status 2; `unset` in cases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

STACK = """\
tenant_map = "key"
[[cache]]
policy = "lru"
size = 100
[array]
raid = 5
disks = 5
failed = [0]
disk_size = "4MiB"
wrap = true
[array.rebuild]
at = 0
[device]
model = "const:0"
"""


def blocklab(*args):
    cmd = [sys.executable, "-c", "from blocklab.cli import main; main()", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweepfail")
    (d / "s.toml").write_text(STACK)
    r = blocklab("trace", "synth", d / "a.csv", "--accesses", "3000", "--universe", "800", "--alpha", "0.9",
                 "--seed", "5")
    assert r.returncode == 0, r.stderr
    return d


def sweep(d: Path, body: str, name: str) -> Path:
    p = d / name
    p.write_text('stack = "s.toml"\nexecutor = "count"\n[[traces]]\npath = "a.csv"\nformat = "csv"\n' + body)
    return p


def test_a_failed_cell_makes_the_sweep_exit_non_zero_and_parquet_has_every_cell(work, tmp_path):
    # 0.001% of the footprint is less than one block: that cell fails when it runs.
    p = sweep(work, '[grid]\n"cache.0.size" = [50, "0.001%", 200]\n', "one-fails.toml")
    r = blocklab("sweep", p, "--out", tmp_path / "o", "-q")
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "3 cells" in r.stdout and "2 ok, 1 failed" in r.stdout
    t = pq.read_table(tmp_path / "o" / "results.parquet").to_pandas()
    assert list(t["status"]) == ["ok", "error", "ok"]
    assert "less than one block" in t["error"][1]
    # `sweep && report` stops at the sweep.
    r = subprocess.run(f"{sys.executable} -c 'from blocklab.cli import main; main()' sweep {p} --out {tmp_path / 'o'} -q "
                       f"&& echo REPORTED", shell=True, capture_output=True, text=True)
    assert r.returncode == 1 and "REPORTED" not in r.stdout


@pytest.mark.parametrize("body, says", [
    ('[grid]\n"cache.0.policy" = ["lru", "lfu", "lru3"]\n', "unknown policy `lru3`"),
    ('[[cases]]\n"device.model" = "const:0"\n[[cases]]\n"device.model" = "no-such-disk.toml"\n', "device.model"),
    ('[[cases]]\n"array.rebuild.order" = "md"\n[[cases]]\n"array.rebuild.order" = "fastest"\n', "fastest"),
])
def test_an_unknown_name_stops_the_sweep_before_any_cell_runs(work, tmp_path, body, says):
    p = sweep(work, body, "names.toml")
    out = tmp_path / "o"
    r = blocklab("sweep", p, "--out", out, "-q")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert says in r.stderr and str(p) in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    # Nothing ran: no cell in the journal, no Parquet.
    assert not (out / "results.parquet").exists()
    journal = out / "cells.jsonl"
    assert not journal.exists() or journal.read_text().strip() == ""


def test_an_unknown_trace_format_is_refused_when_the_sweep_is_read(work, tmp_path):
    p = work / "fmt.toml"
    p.write_text('stack = "s.toml"\n[[traces]]\npath = "a.csv"\nformat = "cvs"\n')
    r = blocklab("sweep", p, "--out", tmp_path / "o", "-q")
    assert r.returncode == 2 and "key `traces.0.format`: unknown trace format `cvs`" in r.stderr, r.stderr


def test_cases_unset_a_section(work, tmp_path):
    body = ('[[cases]]\nname = "rebuild"\n[[cases]]\nname = "degraded"\nunset = ["array.rebuild"]\n'
            '[[cases]]\nname = "typo"\nunset = "array.rebuidl"\n')
    p = sweep(work, body, "unset.toml")
    r = blocklab("sweep", p, "--out", tmp_path / "o", "-q")
    # A key that is not there is a cell that cannot load (not a name), so the others run.
    assert r.returncode == 1, r.stderr
    t = pq.read_table(tmp_path / "o" / "results.parquet").to_pandas()
    assert list(t["status"]) == ["ok", "ok", "error"]
    assert "--unset array.rebuidl" in t["error"][2] and "nothing to remove" in t["error"][2]
    # Counted, the rebuild is done at once: the rebuild case's array ends healthy, the degraded one does not.
    assert list(t["array.failed"][0]) == [] and list(t["array.failed"][1]) == [0]
    assert t["rebuild.rebuild_rows"].notna()[0] and t["rebuild.rebuild_rows"].isna()[1]
