"""CLI tests of `blocklab trace`: bad input gives exit status 2 and a message
naming file, line and field; stats and convert on real traces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import blocklab
from blocklab import _core

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "data" / "wsrch-small.trace"
SHARED = Path(os.environ.get("BLOCKLAB_SHARED", REPO.parent / "shared")) / "traces"


def run(*args: str) -> subprocess.CompletedProcess:
    # The CLI entry point, as the `blocklab` script runs it.
    code = "import sys; sys.argv[0] = 'blocklab'; from blocklab.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO)


def stats_json(*args: str) -> dict:
    p = run("trace", "stats", *args, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_malformed_line_names_file_line_and_field(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("timestamp,op,offset,size\n0.1,R,0,4096\n0.2,R,12x,4096\n")
    p = run("trace", "stats", str(f), "--format", "csv")
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert str(f) in p.stderr and "line 3" in p.stderr and "offset" in p.stderr


@pytest.mark.parametrize(
    "fmt,text,line,field",
    [
        ("spc", "0,1,512,r,0.1\n0,1,512,X,0.2\n", 2, "Opcode"),
        ("mqsim", "1000 0 8 8 1\n2000 0 8 -8 1\n", 2, "bcount"),
        ("tencent", "1,2,3,0,5\n1,2,3\n", 2, "type"),
    ],
)
def test_bad_records_of_other_formats(tmp_path, fmt, text, line, field):
    f = tmp_path / "bad.trace"
    f.write_text(text)
    p = run("trace", "stats", str(f), "--format", fmt)
    assert p.returncode == 2
    assert f"line {line}" in p.stderr and f"`{field}`" in p.stderr, p.stderr


def test_truncated_binary_record_names_record(tmp_path):
    f = tmp_path / "t.oracle"
    f.write_bytes(b"\0" * 24 + b"\0" * 10)
    p = run("trace", "stats", str(f), "--format", "oracle")
    assert p.returncode == 2
    assert "record 1" in p.stderr and "truncated" in p.stderr, p.stderr


def test_skip_bad_reports_count(tmp_path):
    f = tmp_path / "s.csv"
    f.write_text("0.1,R,0,4096\n0.2,Q,0,4096\n0.3,W,4096,4096\n")
    p = run("trace", "stats", str(f), "--format", "csv", "--skip-bad", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["requests"] == 2
    assert "skipped 1 malformed record" in p.stderr


def test_unknown_format_lists_valid_names(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("0.1,R,0,4096\n")
    p = run("trace", "stats", str(f), "--format", "nosuch")
    assert p.returncode == 2
    for name in ("nosuch", "auto", "csv", "spc", "msr", "blkparse", "oracle", "vscsi", "hpsrt"):
        assert name in p.stderr


def test_missing_file_is_a_clear_error(tmp_path):
    p = run("trace", "stats", str(tmp_path / "nope.trace"), "--format", "csv")
    assert p.returncode == 2
    assert "nope.trace" in p.stderr and "no such file" in p.stderr and "Traceback" not in p.stderr


def test_ambiguous_auto_asks_for_format():
    p = run("trace", "stats", str(SAMPLE))
    assert p.returncode == 2
    assert "ambiguous" in p.stderr and "mqsim" in p.stderr and "--format" in p.stderr


def test_stats_on_sample():
    s = stats_json(str(SAMPLE), "--format", "mqsim")
    # 24,783 records (wc -l says 24,782: the last line has no newline).
    assert s["requests"] == 24_783
    assert s["reads"] == 24_779 and s["writes"] == 4
    assert s["tenants"] == 6
    assert 60.0 < s["span"] < 60.1
    c = s["classes"]
    assert c["cold_read"] + c["cold_write"] == s["unique_blocks"]
    assert sum(c.values()) == s["block_accesses"]
    assert sum(b["count"] for b in s["size_histogram"]) == s["requests"]
    # The readable table works too.
    p = run("trace", "stats", str(SAMPLE), "--format", "mqsim")
    assert p.returncode == 0 and "24,783" in p.stdout


def test_formats_lists_every_name():
    p = run("trace", "formats")
    assert p.returncode == 0
    for name, _ in _core.trace_formats():
        assert name in p.stdout


def test_convert_csv_and_oracle(tmp_path):
    out = tmp_path / "w.csv"
    p = run("trace", "convert", str(SAMPLE), str(out), "--format", "mqsim", "--to", "csv", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["records"] == 24_783
    a = blocklab.read_trace(SAMPLE, "mqsim")
    b = blocklab.read_trace(out, "auto")
    assert a.equals(b)
    ora = tmp_path / "w.oracleGeneral.bin"
    p = run("trace", "convert", str(out), str(ora), "--to", "oracle", "--json")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    s = stats_json(str(SAMPLE), "--format", "mqsim")
    assert summary["records"] == s["block_accesses"]
    assert summary["unique_blocks"] == s["unique_blocks"]
    assert ora.stat().st_size == 24 * s["block_accesses"]
    o = stats_json(str(ora))  # auto: by name
    assert o["unique_blocks"] == s["unique_blocks"]


def test_oracle_matches_libcachesim_reader(tmp_path):
    lcs = pytest.importorskip("libcachesim")
    ora = tmp_path / "w.oracleGeneral.bin"
    p = run("trace", "convert", str(SAMPLE), str(ora), "--format", "mqsim", "--to", "oracle")
    assert p.returncode == 0, p.stderr
    reader = lcs.TraceReader(str(ora), lcs.TraceType.ORACLE_GENERAL_TRACE)
    ids = [req.obj_id for req in reader]
    import numpy as np

    raw = np.fromfile(ora, dtype=np.dtype([("t", "<u4"), ("id", "<u8"), ("sz", "<u4"), ("next", "<i8")]))
    assert ids == raw["id"].tolist()


def test_read_trace_api_and_limit():
    df = blocklab.read_trace(SAMPLE, "mqsim", limit=10)
    assert list(df.columns) == ["time", "op", "offset", "len", "tenant"]
    assert len(df) == 10
    assert df["offset"][0] == 657728 * 512 and df["len"][0] == 16 * 512 and df["op"][0] == "R"


SHARED_TRACES = [
    ("cloudphysics/cloudPhysicsIO.csv", "cloudphysics", 113_872),
    ("cloudphysics/cloudPhysicsIO.vscsi", "vscsi", 113_872),
    ("cloudphysics/w106.lbn_u32le.xz", "lbn32", 5_292_456),
    ("tencent_cbs/cloud_storage-sample.bz2", "tencent", 50_000),
    ("tencent_cbs/tencent.cut.per_50k.rw_60_40.490.trace", "tencent-cut", 50_000),
    ("msr_cambridge/msr.cut.per_10k.rw_20_80.105.trace", "msr-cut", 10_000),
    ("msr_cambridge/msr-cambridge1-sample.csv", "msr", 1_000),
    ("mqsim_umass_like/tpcc-small.trace", "mqsim", 6_999),
    ("hp_hplajw_1992/ajw.1week.srt", "hpsrt", 44_519),
    ("hp_hplajw_1992/ajw.1week.converted.csv", "hpsrt-csv", 44_519),
    ("systor17/systor17-traces-sample.csv.gz", "systor", 999),
    ("blktrace/apress_hadoop_blkparse.txt", "blkparse", 15_524),
]


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/traces not present")
@pytest.mark.parametrize("file,fmt,requests", SHARED_TRACES)
def test_every_shared_trace_parses(file, fmt, requests):
    s = json.loads(_core.trace_stats(str(SHARED / file), fmt, 4096, False, "Q"))
    assert s["requests"] == requests


def _opt_misses(seq, cap):
    """Brute-force Belady: evict the cached block whose next use is farthest."""
    import heapq

    nxt, last = [0] * len(seq), {}
    for i in range(len(seq) - 1, -1, -1):
        nxt[i] = last.get(seq[i], float("inf"))
        last[seq[i]] = i
    cache, heap, misses = {}, [], 0
    for i, b in enumerate(seq):
        if b not in cache:
            misses += 1
            if len(cache) >= cap:
                while True:
                    neg, v = heapq.heappop(heap)
                    if cache.get(v) == -neg:
                        del cache[v]
                        break
        cache[b] = nxt[i]
        heapq.heappush(heap, (-nxt[i], b))
    return misses


def test_oracle_next_access_drives_libcachesim_belady(tmp_path):
    """libCacheSim's Belady reads our next_access_vtime: its miss ratio must be OPT's."""
    lcs = pytest.importorskip("libcachesim")
    import random

    rng = random.Random(7)
    seq = [int(rng.paretovariate(0.8)) % 300 for _ in range(4000)]
    src = tmp_path / "z.csv"
    src.write_text("".join(f"{i},R,{b * 4096},4096\n" for i, b in enumerate(seq)))
    ora = tmp_path / "z.oracleGeneral.bin"
    _core.trace_convert(str(src), "csv", str(ora), "oracle", 4096, False, "Q")
    for cap in (5, 20, 80):
        reader = lcs.TraceReader(str(ora), lcs.TraceType.ORACLE_GENERAL_TRACE)
        miss_ratio = lcs.Belady(cache_size=cap * 4096).process_trace(reader)[0]
        assert miss_ratio == pytest.approx(_opt_misses(seq, cap) / len(seq), abs=1e-9)


def test_read_trace_round_trips_random_csv(tmp_path):
    """Random requests written as native CSV read back exactly (hypothesis)."""
    hyp = pytest.importorskip("hypothesis")
    st = pytest.importorskip("hypothesis.strategies")

    row = st.tuples(
        st.floats(min_value=0, max_value=1e9, allow_nan=False),
        st.sampled_from(["R", "W"]),
        st.integers(0, 2**62),
        st.integers(0, 2**32),
        st.integers(0, 2**32 - 1),
    )

    @hyp.settings(max_examples=40, deadline=None)
    @hyp.given(st.lists(row, max_size=30))
    def check(rows):
        f = tmp_path / "h.csv"
        f.write_text("timestamp,op,offset,size,tenant\n" + "".join(f"{t!r},{o},{a},{n},{k}\n" for t, o, a, n, k in rows))
        cols = _core.read_trace(str(f), "csv", False, "Q", None)
        assert list(zip(cols["time"], cols["op"], cols["offset"], cols["len"], cols["tenant"])) == rows

    check()
