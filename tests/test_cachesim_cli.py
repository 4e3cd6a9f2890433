"""`blocklab cachesim TRACE TYPE ALGO SIZE[,SIZE...]`, libCacheSim's command line:
the miss counts are libCacheSim's own (the libcachesim package run access by
access on the same oracleGeneral trace, as tests/test_libcachesim.py does), and
each cell prints libCacheSim's line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

lcs = pytest.importorskip("libcachesim")
from blocklab import _core  # noqa: E402
from test_libcachesim import EXACT, MATCHED, libcachesim_hits, next_uses  # noqa: E402

ORACLE = np.dtype([("time", "<u4"), ("obj_id", "<u8"), ("obj_size", "<u4"), ("next", "<i8")])
LINE = re.compile(r"^(\S+) (\S+) cache size +(\d+)(\w*), (\d+) req, miss ratio (\d\.\d{4}), byte miss ratio (\d\.\d{4})$")


def cli(*args):
    cmd = [sys.executable, "-c", "from blocklab.cli import main; main()", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    """A seeded Zipf trace of 4 KiB objects in libCacheSim's oracleGeneral format."""
    p = tmp_path_factory.mktemp("cachesim") / "zipf.oracleGeneral.bin"
    _core.write_zipf_oracle(str(p), 20_000, 5_000, 0.9, 7, obj_size=4096)
    return p


def theirs(trace: Path, policy: str, capacity: int) -> int:
    """libCacheSim's misses with a cache of `capacity` objects."""
    blocks = np.fromfile(trace, dtype=ORACLE)["obj_id"].astype(np.int64)
    make = {**EXACT, **MATCHED}[policy]
    hits = libcachesim_hits(make, capacity, blocks, next_uses(blocks))
    return len(blocks) - sum(hits)


def test_lines_and_miss_counts_match_libcachesim(trace):
    unique = len(np.unique(np.fromfile(trace, dtype=ORACLE)["obj_id"]))
    # libCacheSim's sizes: bytes with binary KB/MB, and a fraction of the working set (bytes).
    sizes = {"400KB": 100, "4MB": 1024, "0.1": int(unique * 4096 * 0.1) // 4096}
    algos = {"LRU": "lru", "s3fifo": "s3fifo", "Belady": "opt", "ARC": "arc", "clock": "clock"}
    r = cli("cachesim", trace, "oracleGeneral", ",".join(algos), ",".join(sizes))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(algos) * len(sizes)
    rj = cli("cachesim", trace, "oracleGeneral", ",".join(algos), ",".join(sizes), "--json")
    assert rj.returncode == 0, rj.stderr
    cells = json.loads(rj.stdout)
    i = 0
    for algo, policy in algos.items():  # algorithm-major, sizes in the order given, as libCacheSim
        for text, capacity in sizes.items():
            m = LINE.match(lines[i])
            assert m, lines[i]
            path, name, shown, unit, n_req, ratio, byte_ratio = m.groups()
            expected = theirs(trace, policy, capacity)
            assert cells[i]["misses"] == expected, (algo, text, cells[i], expected)
            assert cells[i]["cache_blocks"] == capacity
            assert path == str(trace) and int(n_req) == 20_000
            assert ratio == byte_ratio == f"{expected / 20_000:.4f}"
            # Sizes printed in the unit libCacheSim picks from the first one (400 KiB: KiB).
            assert unit == "KiB" and int(shown) == cells[i]["cache_size"] // 1024
            i += 1
    assert [ln.split()[1] for ln in lines[::3]] == ["LRU", "S3FIFO", "Belady", "ARC", "Clock"]


def test_auto_sizes_follow_libcachesim(trace):
    unique = len(np.unique(np.fromfile(trace, dtype=ORACLE)["obj_id"]))
    r = cli("cachesim", trace, "oracleGeneral", "lru", "auto", "--json")
    assert r.returncode == 0, r.stderr
    got = [c["cache_size"] for c in json.loads(r.stdout)]
    # libCacheSim: these fractions of the working set in bytes, those holding >= 100 objects.
    want = [int(unique * 4096 * f) for f in (0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.4, 0.8) if int(unique * f) >= 100]
    assert got == want and len(want) >= 3


def test_counted_in_objects_with_ignore_obj_size(trace):
    r = cli("cachesim", trace, "oracleGeneral", "lru", "100,1000", "--ignore-obj-size")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    m0, m1 = LINE.match(lines[0]), LINE.match(lines[1])
    assert m0.group(3, 4) == ("100", "") and m1.group(3, 4) == ("1000", "")
    assert m0.group(6) == f"{theirs(trace, 'lru', 100) / 20_000:.4f}"


@pytest.mark.parametrize("args, where", [
    (("oracleGeneral", "lru3", "1MB"), "ALGO: unknown policy `lru3`"),
    (("parquet", "lru", "1MB"), "TYPE: unknown trace type `parquet`"),
    (("oracleGeneral", "lru", "1000"), "SIZE: `1000` is 1000 bytes"),
    (("oracleGeneral", "lru", "lots"), "SIZE: `lots` is not a cache size"),
])
def test_bad_arguments_are_one_line_and_status_2(trace, args, where):
    r = cli("cachesim", trace, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert where in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("algo, make", [("lru", "LRU"), ("belady", "Belady"), ("fifo", "FIFO"), ("Sieve", "Sieve"), ("LFU", "LFU")])
def test_libcachesims_own_reader_and_byte_sizes_agree(trace, algo, make):
    """libCacheSim reading the file itself, its cache sized in bytes (1 MiB = 256 objects of 4 KiB).
    (Not ARC: libCacheSim's ARC sized in bytes adapts differently from ARC sized in objects,
    by 49 misses of 20,000 here; the object-sized comparison above is exact.)"""
    reader = lcs.TraceReader(str(trace), lcs.TraceType.ORACLE_GENERAL_TRACE)
    ratio, _ = getattr(lcs, make)(1 << 20).process_trace(reader)
    r = cli("cachesim", trace, "oracleGeneral", algo, "1MB", "--json")
    assert r.returncode == 0, r.stderr
    cell = json.loads(r.stdout)[0]
    assert cell["misses"] == round(ratio * cell["requests"]) and cell["cache_blocks"] == 256


# vscsi: libCacheSim takes every record as one object, id its LBN, size its length in bytes
# (traceReader/customizedReader/vscsi.h), in a cache of bytes; blocklab's `cache` counts blocks.
VSCSI_V1 = np.dtype([("sn", "<u4"), ("len", "<u4"), ("nsg", "<u4"), ("cmd", "<u2"), ("ver", "<u2"),
                     ("lbn", "<u8"), ("ts", "<u8")])
SHARED = Path(os.environ.get("BLOCKLAB_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
CLOUDPHYSICS = SHARED / "traces" / "cloudphysics" / "cloudPhysicsIO.vscsi"


@pytest.fixture(scope="module")
def vscsi(tmp_path_factory) -> Path:
    """A seeded vscsi v1 trace: skewed LBNs, requests of 512 B to 64 KiB whose size changes between
    accesses of one LBN, a few non-data commands of length 0, and requests larger than small caches."""
    rng = np.random.default_rng(23)
    n = 6000
    rec = np.zeros(n, dtype=VSCSI_V1)
    rec["sn"] = np.arange(n)
    rec["lbn"] = (rng.zipf(1.3, n) % 800) * 8
    rec["len"] = rng.choice([512, 4096, 8192, 16384, 65536], n, p=[0.1, 0.4, 0.3, 0.15, 0.05])
    rec["cmd"] = rng.choice([0x28, 0x2a], n)
    tur = rng.choice(n, 40, replace=False)  # TEST UNIT READY: no data, still a request to libCacheSim
    rec["cmd"][tur], rec["len"][tur] = 0x00, 0
    rec["ver"] = 1 << 8
    rec["ts"] = np.arange(n) * 1000
    p = tmp_path_factory.mktemp("vscsi") / "t.vscsi"
    rec.tofile(p)
    return p


@pytest.mark.parametrize("algo, make", [("lru", "LRU"), ("fifo", "FIFO"), ("clock", "Clock")])
def test_vscsi_counts_one_object_per_request_as_libcachesim(vscsi, algo, make):
    """libCacheSim's reader on the same vscsi file, its cache in bytes: equal miss counts and byte misses."""
    sizes = [48 << 10, 1 << 20, 3 << 20]  # 48 KiB: 64 KiB requests do not fit and are not inserted
    r = cli("cachesim", vscsi, "vscsi", algo, ",".join(map(str, sizes)), "--json")
    assert r.returncode == 0, r.stderr
    cells = json.loads(r.stdout)
    for cell, size in zip(cells, sizes):
        reader = lcs.TraceReader(str(vscsi), lcs.TraceType.VSCSI_TRACE)
        ratio, byte_ratio = getattr(lcs, make)(size).process_trace(reader)
        assert cell["requests"] == 6000 and cell["cache_size"] == size
        assert cell["misses"] == round(ratio * 6000), (algo, size, cell, ratio)
        assert cell["miss_bytes"] == round(byte_ratio * cell["request_bytes"]), (algo, size, cell, byte_ratio)
    assert len({c["misses"] for c in cells}) == 3


@pytest.mark.skipif(not CLOUDPHYSICS.exists(), reason="needs ../shared/traces")
def test_vscsi_lines_are_libcachesims_cachesim_lines():
    """What libCacheSim's own `cachesim` printed on cloudPhysicsIO.vscsi, recorded once (libCacheSim
    aa0fc40, built Release: `cachesim cloudPhysicsIO.vscsi vscsi ALGO 1MB,16MB,128MB,0.1`, and with
    `--ignore-obj-size=true` for sizes 100,1000,10000): size, requests, miss ratio, byte miss ratio."""
    theirs = {
        "LRU": [("1024KiB", "0.8646", "0.9813"), ("16384KiB", "0.8346", "0.9763"),
                ("131072KiB", "0.8180", "0.9594"), ("198219KiB", "0.8038", "0.9436")],
        "FIFO": [("1024KiB", "0.8766", "0.9827"), ("16384KiB", "0.8375", "0.9766"),
                 ("131072KiB", "0.8183", "0.9593"), ("198219KiB", "0.7999", "0.9420")],
        "Clock": [("1024KiB", "0.8627", "0.9811"), ("16384KiB", "0.8332", "0.9761"),
                  ("131072KiB", "0.8174", "0.9594"), ("198219KiB", "0.8028", "0.9438")],
    }
    r = cli("cachesim", CLOUDPHYSICS, "vscsi", "lru,FIFO,clock", "1MB,16MB,128MB,0.1")
    assert r.returncode == 0, r.stderr
    got = {}
    for line in r.stdout.splitlines():
        m = LINE.match(line)
        assert m and m.group(5) == "113872", line
        got.setdefault(m.group(2), []).append((m.group(3) + m.group(4), m.group(6), m.group(7)))
    assert got == theirs
    r = cli("cachesim", CLOUDPHYSICS, "vscsi", "lru", "100,1000,10000", "--ignore-obj-size")
    assert r.returncode == 0, r.stderr
    assert [LINE.match(x).group(6) for x in r.stdout.splitlines()] == ["0.8801", "0.8327", "0.6976"]


def test_vscsi_with_ignore_obj_size_runs_every_policy_on_objects(vscsi):
    """Every size 1: a cache of N objects, each request one object (its LBN), any policy."""
    lbns = np.fromfile(vscsi, dtype=VSCSI_V1)["lbn"].astype(np.int64)
    r = cli("cachesim", vscsi, "vscsi", "lru,arc,belady", "50,200", "--ignore-obj-size", "--json")
    assert r.returncode == 0, r.stderr
    cells = json.loads(r.stdout)
    want = [theirs_on(lbns, p, c) for p in ("lru", "arc", "opt") for c in (50, 200)]
    assert [c["misses"] for c in cells] == want


def theirs_on(keys: np.ndarray, policy: str, capacity: int) -> int:
    make = {**EXACT, **MATCHED}[policy]
    return len(keys) - sum(libcachesim_hits(make, capacity, keys, next_uses(keys)))


def test_vscsi_policies_without_sizes_are_refused_on_bytes(vscsi):
    r = cli("cachesim", vscsi, "vscsi", "lru,ARC", "1MB")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "ARC" in r.stderr and "--ignore-obj-size" in r.stderr and len(r.stderr.strip().splitlines()) == 1
