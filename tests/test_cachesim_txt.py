"""libCacheSim's plain `txt` trace (one object id per line) in `blocklab cachesim` and
`blocklab cache --format txt`: miss counts worked out by hand, and a malformed line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# 10 requests (the blank line is skipped): 1 2 3 1 x 1 2 x 3 1, x non-numeric.
TRACE = "1\n2\n3\n1\nobj-x\n\n1\n2\nobj-x\n3\n1\n"
# By hand (objects; a cache of c objects):
#   LRU c=2: only the 6th request (1, after x) hits -> 9 misses
#   LRU c=3: hits at 1 (4th), 1 (6th), x (8th) -> 7 misses
#   FIFO c=2: [1,x] then 1 hits, [x,2] then x hits -> 8 misses
#   FIFO c=3: 1 (4th) hits; x, 1, 2 evict 1, 2, 3; x hits; 3 evicts x; 1 hits -> 7 misses
MISSES = {("lru", 2): 9, ("lru", 3): 7, ("fifo", 2): 8, ("fifo", 3): 7}


def cli(*args):
    cmd = [sys.executable, "-c", "from blocklab.cli import main; main()", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture
def trace(tmp_path) -> Path:
    p = tmp_path / "ids.txt"
    p.write_text(TRACE)
    return p


def test_cachesim_txt_counts_objects_by_hand(trace):
    r = cli("cachesim", trace, "txt", "LRU,fifo", "2,3", "--json")
    assert r.returncode == 0, r.stderr
    got = {(c["policy"], c["cache_size"]): (c["requests"], c["misses"]) for c in json.loads(r.stdout)}
    assert got == {cell: (10, m) for cell, m in MISSES.items()}
    lines = cli("cachesim", trace, "TXT", "lru", "2").stdout.splitlines()
    assert lines == [f"{trace} LRU cache size        2, 10 req, miss ratio 0.9000, byte miss ratio 0.9000"]


def test_cache_format_txt_by_hand(trace):
    r = cli("cache", trace, "--format", "txt", "--policy", "lru,fifo", "--size", "2,3", "--json")
    assert r.returncode == 0, r.stderr
    got = {(c["policy"], c["cache_blocks"]): c["misses"] for c in json.loads(r.stdout)}
    assert got == MISSES


@pytest.mark.parametrize("how", [("cachesim", "{t}", "txt", "lru", "2"), ("cache", "{t}", "--format", "txt")])
def test_txt_malformed_line_is_one_error(tmp_path, how):
    t = tmp_path / "bad.txt"
    t.write_text("1\n2\n3 4\n5\n")
    r = cli(*(a.format(t=t) for a in how))
    assert r.returncode == 2, (r.stdout, r.stderr)
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in r.stderr, r.stderr
    assert str(t) in err[0] and "line 3" in err[0] and "obj_id" in err[0], err[0]
