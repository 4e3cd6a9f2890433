"""CLI tests of `blocklab trace reuse / partition / merge`: JSON shapes, figures checked by hand or
against `trace stats` and a Python brute force, bad input exits with status 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import blocklab

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "data" / "wsrch-small.trace"
SHARED = Path(os.environ.get("BLOCKLAB_SHARED", REPO.parent / "shared")) / "traces"
ROW_KEYS = {"tenant", "accesses", "classes", "trd_size", "urd_size", "trd_p99_size", "urd_p99_size", "trd_reuses",
            "urd_reuses", "write_ratio"}
CLASS_KEYS = {"cold_read", "cold_write", "rar", "raw", "war", "waw"}


def run(*args: str) -> subprocess.CompletedProcess:
    code = "import sys; sys.argv[0] = 'blocklab'; from blocklab.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO)


def run_json(*args: str) -> dict:
    p = run(*args, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def write_csv(path: Path, rows) -> Path:
    """rows: (time, op, block, tenant) with 4 KiB blocks."""
    path.write_text("timestamp,op,offset,size,tenant\n" + "".join(f"{t},{op},{b * 4096},4096,{ten}\n" for t, op, b, ten in rows))
    return path


def brute(rows):
    """Per tenant: (trd_size, urd_size) by rescanning the history (one 4 KiB block per row)."""
    out = {}
    for i, (_, op, b, ten) in enumerate(rows):
        trd, urd = out.setdefault(ten, [0, 0])
        prev = next((j for j in range(i - 1, -1, -1) if rows[j][3] == ten and rows[j][2] == b), None)
        if prev is None:
            continue
        d = len({rows[j][2] for j in range(prev + 1, i + 1) if rows[j][3] == ten})
        out[ten][0] = max(trd, d)
        if op == "R":
            out[ten][1] = max(urd, d)
    return {t: tuple(v) for t, v in out.items()}


def test_reuse_json_shape_and_classes_on_sample():
    s = run_json("trace", "reuse", str(SAMPLE), "--format", "mqsim", "--per-tenant")
    assert {"block_size", "per_tenant", "window_s", "history", "requests", "accesses", "tenants", "totals", "windows",
            "skipped"} <= s.keys()
    assert s["windows"] is None and s["per_tenant"] is True and s["history"] == "all"
    assert [r["tenant"] for r in s["tenants"]] == [0, 1, 2, 3, 4, 5]
    for r in s["tenants"]:
        assert set(r) == ROW_KEYS and set(r["classes"]) == CLASS_KEYS
        assert r["urd_size"] <= r["trd_size"] and r["urd_p99_size"] <= r["urd_size"]
        assert sum(r["classes"].values()) == r["accesses"]
    # Per tenant, the classes add up to those of `trace stats` (the same classification).
    st = run_json("trace", "stats", str(SAMPLE), "--format", "mqsim")
    for k in CLASS_KEYS:
        assert sum(r["classes"][k] for r in s["tenants"]) == st["classes"][k]
    assert s["accesses"] == st["block_accesses"]
    # Measured on the sample (docs/eci.md): only volume 2 re-reads.
    t2 = s["tenants"][2]
    assert (t2["trd_size"], t2["urd_size"], t2["urd_p99_size"]) == (16_595, 4_529, 348)
    assert s["totals"]["trd_size"] == sum(r["trd_size"] for r in s["tenants"])
    # Pooled: one row, tenant null; a shared stack needs at least the largest tenant's size.
    p = run_json("trace", "reuse", str(SAMPLE), "--format", "mqsim")
    assert len(p["tenants"]) == 1 and p["tenants"][0]["tenant"] is None
    assert p["tenants"][0]["trd_size"] >= t2["trd_size"]
    # The readable table names the sizes.
    t = run("trace", "reuse", str(SAMPLE), "--format", "mqsim", "--per-tenant")
    assert t.returncode == 0 and "urd_size" in t.stdout and "16,595" in t.stdout


def test_reuse_against_brute_force_with_windows(tmp_path):
    import random

    rng = random.Random(7)
    rows = [(i * 0.5, rng.choice("RW"), rng.randrange(12), rng.randrange(2)) for i in range(150)]
    f = write_csv(tmp_path / "r.csv", rows)
    s = run_json("trace", "reuse", str(f), "--format", "csv", "--per-tenant")
    want = brute(rows)
    assert {r["tenant"]: (r["trd_size"], r["urd_size"]) for r in s["tenants"]} == want
    # Windows of 10 s with history all: each window's maximum is at most the whole trace's, and
    # the largest over the windows equals it.
    w = run_json("trace", "reuse", str(f), "--format", "csv", "--per-tenant", "--window", "10")
    assert [x["window"] for x in w["windows"]] == list(range(8))
    for ten, (trd, urd) in want.items():
        per = [r for x in w["windows"] for r in x["tenants"] if r["tenant"] == ten]
        assert max(r["trd_size"] for r in per) == trd and max(r["urd_size"] for r in per) == urd
    assert w["windows"][1]["start"] == 10.0 and w["windows"][1]["end"] == 20.0
    # History window: no distance longer than a window's distinct blocks.
    h = run_json("trace", "reuse", str(f), "--format", "csv", "--per-tenant", "--window", "10", "--history", "window")
    assert h["history"] == "window"
    assert all(r["trd_size"] <= 12 for x in h["windows"] for r in x["tenants"])
    # The Python API gives the same rows.
    df = blocklab.reuse(f, format="csv", window=10)
    assert len(df) == sum(len(x["tenants"]) for x in w["windows"])
    assert {"window", "tenant", "trd_size", "urd_size", "rar", "waw"} <= set(df.columns)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--window", "0"], "--window"),
        (["--window", "-5"], "--window"),
        (["--history", "forever"], "history"),
        (["--block-size", "0"], "block size"),
        (["--format", "nosuch"], "nosuch"),
    ],
)
def test_reuse_bad_options_exit_2(args, needle):
    p = run("trace", "reuse", str(SAMPLE), "--format", "mqsim", *args)
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr and "Traceback" not in p.stderr


def test_reuse_malformed_line_names_file_line_field(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("timestamp,op,offset,size\n0.1,R,0,4096\n0.2,Q,0,4096\n")
    p = run("trace", "reuse", str(f), "--format", "csv")
    assert p.returncode == 2
    assert str(f) in p.stderr and "line 3" in p.stderr and "`op`" in p.stderr


def test_partition_json_and_table(tmp_path):
    # Tenant 0 re-reads (TRD = URD = 4); tenant 1 re-writes (TRD 3, URD 0, all re-writes).
    rows = [(i, "R", b, 0) for i, b in enumerate([1, 2, 3, 4, 1, 2, 3, 4])]
    rows += [(i + 0.5, "W", b, 1) for i, b in enumerate([5, 6, 7, 5, 6, 7])]
    rows.sort()
    f = write_csv(tmp_path / "p.csv", rows)
    s = run_json("trace", "partition", str(f), "--format", "csv", "--capacity", "5")
    assert {"capacity", "solver", "estimator", "objective", "theta", "windows", "summary", "initial_blocks"} <= s.keys()
    (w,) = s["windows"]
    assert (w["centaur"]["wanted"], w["centaur"]["feasible"], w["centaur"]["allocated"]) == (7, False, 5)
    assert (w["eci"]["wanted"], w["eci"]["feasible"], w["eci"]["allocated"]) == (4, True, 4)
    assert [(a["tenant"], a["want"], a["blocks"]) for a in w["eci"]["tenants"]] == [(0, 4, 4), (1, 0, 0)]
    # Tenant 1: 3 WAW of 6 accesses = 0.5 >= theta 0.5 -> read-only.
    assert [p["write_policy"] for p in w["write_policies"]] == ["wb", "ro"]
    assert s["summary"]["eci_reduction"] == pytest.approx(1 - 4 / 5)
    # A byte capacity is whole blocks; greedy gives the same here.
    g = run_json("trace", "partition", str(f), "--format", "csv", "--capacity", "20KiB", "--solver", "greedy")
    assert g["capacity"] == 5 and g["windows"][0]["centaur"]["allocated"] == 5
    t = run("trace", "partition", str(f), "--format", "csv", "--capacity", "5")
    assert t.returncode == 0 and "ECI" in t.stdout and "mean allocation" in t.stdout
    assert blocklab.partition_plan(f, format="csv", capacity=5)["windows"][0]["eci"]["allocated"] == 4


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--solver", "fmincon"], "fmincon"),
        (["--estimator", "p200"], "estimator"),
        (["--theta", "1.5"], "theta"),
        (["--capacity", "5%"], "percentage"),
        (["--capacity", "100B"], "less than one block"),
        (["--objective", "speed"], "objective"),
        (["--solver", "greedy", "--units", "8"], "--units"),
        (["--capacity", "1", "--min-blocks", "1"], "exceed the capacity"),
    ],
)
def test_partition_bad_options_exit_2(args, needle):
    p = run("trace", "partition", str(SAMPLE), "--format", "mqsim", *args)
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr and "Traceback" not in p.stderr


def test_merge_interleaves_and_maps_tenants(tmp_path):
    a = write_csv(tmp_path / "a.csv", [(100, "R", 1, 7), (101, "R", 2, 8), (103, "W", 1, 7)])
    b = write_csv(tmp_path / "b.csv", [(5, "R", 1, 7), (6, "R", 1, 7)])
    out = tmp_path / "m.csv"
    s = run_json("trace", "merge", str(out), f"{a}:csv", f"{b}:csv")
    assert {"destination", "requests", "out_of_order", "inputs", "tenants"} <= s.keys()
    assert s["requests"] == 5 and s["out_of_order"] == 0
    assert s["tenants"] == [{"tenant": 0, "input": 0, "input_tenant": None},
                            {"tenant": 1, "input": 1, "input_tenant": None}]
    df = blocklab.read_trace(out, "csv")
    assert df["time"].tolist() == [0, 0, 1, 1, 3]
    assert df["tenant"].tolist() == [0, 1, 0, 1, 0]
    # Merged, each input is its own tenant with its own reuse sizes: input 0 re-touches block 1
    # over block 2 (its tenants 7 and 8 now share a stack), input 1 re-reads block 1 at once.
    r = run_json("trace", "reuse", str(out), "--format", "csv", "--per-tenant")
    assert [(x["tenant"], x["trd_size"]) for x in r["tenants"]] == [(0, 2), (1, 1)]
    # Pairs keep the input's tenants apart.
    s = run_json("trace", "merge", str(out), f"{a}:csv", f"{b}:csv", "--tenants", "pair")
    assert [(t["input"], t["input_tenant"]) for t in s["tenants"]] == [(0, 7), (1, 7), (0, 8)]
    r = run_json("trace", "reuse", str(out), "--format", "csv", "--per-tenant")
    assert [(x["tenant"], x["trd_size"]) for x in r["tenants"]] == [(0, 1), (1, 1), (2, 0)]
    p = run("trace", "merge", str(out), f"{a}:csv", f"{b}:csv")
    assert p.returncode == 0 and "tenant 1:" in p.stdout


def test_merge_bad_input_exit_2_leaves_no_output(tmp_path):
    a = write_csv(tmp_path / "a.csv", [(0, "R", 1, 0)])
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,op,offset,size\n0,R,0,512\n1,X,0,512\n")
    out = tmp_path / "m.csv"
    p = run("trace", "merge", str(out), f"{a}:csv", f"{bad}:csv")
    assert p.returncode == 2 and "line 3" in p.stderr and "bad.csv" in p.stderr
    assert not out.exists()
    for args, needle in ((["--tenants", "each"], "tenant mapping"), (["--span", "-1"], "--span"),
                         (["--align", "middle"], "alignment")):
        p = run("trace", "merge", str(out), f"{a}:csv", *args)
        assert p.returncode == 2 and needle in p.stderr, p.stderr
    p = run("trace", "merge", str(out), str(tmp_path / "missing.csv") + ":csv")
    assert p.returncode == 2 and "no such file" in p.stderr


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/traces not present")
def test_msr_volumes_stay_apart_when_merged(tmp_path):
    # The hm_0 sample as itself and renamed to web_0: two tenants (256 and 3328), each with the
    # research note's sizes at 8 KiB (TRD 881, URD 373).
    src = SHARED / "msr_cambridge" / "msr-cambridge1-sample.csv"
    web = tmp_path / "web_0.csv"
    web.write_text("".join(line.replace(",hm,", ",web,") for line in src.read_text().splitlines(keepends=True)))
    both = tmp_path / "both.csv"
    both.write_text(src.read_text() + web.read_text())
    r = run_json("trace", "reuse", str(both), "--format", "msr", "--per-tenant", "--block-size", "8192")
    assert [(x["tenant"], x["trd_size"], x["urd_size"]) for x in r["tenants"]] == [(256, 881, 373), (3328, 881, 373)]


def test_outputs_are_deterministic(tmp_path):
    args = ("trace", "partition", str(SAMPLE), "--format", "mqsim", "--window", "20", "--capacity", "3000", "--json")
    assert run(*args).stdout == run(*args).stdout
    args = ("trace", "reuse", str(SAMPLE), "--format", "mqsim", "--per-tenant", "--window", "7", "--json")
    assert run(*args).stdout == run(*args).stdout
    outs = []
    for name in ("m1.csv", "m2.csv"):
        out = tmp_path / name
        assert run("trace", "merge", str(out), f"{SAMPLE}:mqsim", f"{SAMPLE}:mqsim", "--tenants", "pair").returncode == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0].count(b"\n") == 1 + 2 * 24_783


def test_sizing_time_rows_are_the_windows_of_the_reuse_analysis():
    # `blocklab.sizing_time` (ECI App. B) times the tier's analysis per tenant and window; its rows
    # must be the windows `trace reuse --per-tenant --window` reports: same tenants, accesses and
    # TRD / URD sizes (history "all", as the tier). The seconds are measured, not checked.
    times = blocklab.sizing_time(SAMPLE, window=10.0, format="mqsim", block_size=8192)
    reuse = blocklab.reuse(SAMPLE, format="mqsim", per_tenant=True, window=10.0, block_size=8192)
    key = ["window", "tenant"]
    a = times.sort_values(key).reset_index(drop=True)
    b = reuse.sort_values(key).reset_index(drop=True)
    assert len(a) == len(b) > 6
    for col in ("window", "tenant", "accesses", "trd_size", "urd_size"):
        assert list(a[col]) == list(b[col]), col
    assert (a["seconds"] >= 0).all()


def test_sizing_time_needs_a_positive_window(tmp_path):
    trace = write_csv(tmp_path / "t.csv", [(0.0, "R", 1, 0), (1.0, "R", 1, 0)])
    with pytest.raises(blocklab.BlocklabError, match="window"):
        blocklab.sizing_time(trace, window=0.0, format="csv")
