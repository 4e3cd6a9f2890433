"""`mrc --method shards` flags sizes holding too few sampled blocks (issue 27, case 9), and
its JSON carries the table's digits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "wsrch-small.trace"


def blocklab(*args):
    cmd = [sys.executable, "-c", "from blocklab.cli import main; main()", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True)


def test_shards_warns_at_sizes_with_too_few_sampled_blocks():
    r = blocklab("mrc", SAMPLE, "--format", "mqsim", "--method", "shards", "--size", "1,100,300,20000", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert abs(out["rate"] - 0.01) < 1e-6 and out["trusted_from_blocks"] == 10_000
    assert len(out["warnings"]) == 1 and "size(s) 1, 100, 300 blocks" in out["warnings"][0]
    warned = [l for l in r.stderr.splitlines() if l.startswith("blocklab: warning: SHARDS at rate 0.0100")]
    assert len(warned) == 1 and "fewer than 100 sampled blocks" in warned[0], r.stderr
    # Rounded like the table: four digits.
    for p in out["points"]:
        assert p["miss_ratio"] == round(p["miss_ratio"], 4)
    # The table run warns too; exact never does.
    r = blocklab("mrc", SAMPLE, "--format", "mqsim", "--method", "shards", "--size", "1,100")
    assert r.returncode == 0 and "blocklab: warning: SHARDS" in r.stderr
    r = blocklab("mrc", SAMPLE, "--format", "mqsim", "--size", "1,100", "--json")
    assert r.returncode == 0 and "warning" not in r.stderr and "warnings" not in json.loads(r.stdout)


def test_large_enough_sizes_are_not_flagged():
    r = blocklab("mrc", SAMPLE, "--format", "mqsim", "--method", "shards", "--rate", "0.5", "--size", "200,1000",
                 "--json")
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    assert json.loads(r.stdout)["warnings"] == []
