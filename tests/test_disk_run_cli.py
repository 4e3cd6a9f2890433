"""`blocklab disk run`: JSON shape, hand-computed numbers, bad input -> exit 2."""

from __future__ import annotations

import csv
import json
import sys

import pytest

from blocklab.cli import main

TRACE = "timestamp,op,offset,size,tenant\n0.000,R,0,4096,0\n0.002,R,4096,4096,0\n0.004,W,8192,4096,0\n0.030,R,409600,4096,0\n"


def cli(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["blocklab", *args])
    with pytest.raises(SystemExit) as e:
        main()
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.fixture
def trace(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text(TRACE)
    return str(p)


def test_json_shape_and_open_loop_numbers(monkeypatch, capsys, trace):
    code, out, _ = cli(monkeypatch, capsys, "disk", "run", "const:10", "--trace", trace, "--format", "csv", "--json")
    assert code in (0, None)
    r = json.loads(out)
    for k in ("requests", "avg_response_ms", "p50_ms", "p95_ms", "p99_ms", "avg_service_ms", "utilization"):
        assert k in r
    # Constant 10 ms, arrivals 0, 2, 4, 30 ms: responses 10, 18, 26, 10.
    assert r["requests"] == 4
    assert r["avg_response_ms"] == pytest.approx(16.0)
    assert r["p99_ms"] == pytest.approx(26.0, rel=1e-3)
    assert r["avg_service_ms"] == pytest.approx(10.0)
    assert r["utilization"] == pytest.approx(1.0)
    assert r["devices"][0]["max_queue"] == 2


def test_closed_loop_and_timeseries(monkeypatch, capsys, trace, tmp_path):
    ts = tmp_path / "ts.csv"
    code, out, _ = cli(monkeypatch, capsys, "disk", "run", "const:10", "-t", trace, "-f", "csv", "--replay", "closed",
                       "--outstanding", "1", "--timeseries", str(ts), "--interval", "10", "--json")
    assert code in (0, None)
    r = json.loads(out)
    assert r["avg_response_ms"] == pytest.approx(10.0)
    assert r["sim_time_ms"] == pytest.approx(40.0)
    rows = list(csv.DictReader(open(ts)))
    assert [int(x["completed"]) for x in rows] == [0, 1, 1, 1, 1]
    assert sum(float(x["utilization"]) for x in rows) == pytest.approx(4.0)


def test_closed_loop_think_time(monkeypatch, capsys, trace):
    # Constant 10 ms, one outstanding, 5 ms think: issues at 0, 15, 30, 45; the
    # run ends with the fourth completion at 55 ms.
    code, out, _ = cli(monkeypatch, capsys, "disk", "run", "const:10", "-t", trace, "-f", "csv", "--replay", "closed",
                       "--think-ms", "5", "--json")
    assert code in (0, None)
    r = json.loads(out)
    assert r["avg_response_ms"] == pytest.approx(10.0)
    assert r["sim_time_ms"] == pytest.approx(55.0)
    assert r["utilization"] == pytest.approx(40.0 / 55.0)


def test_feedback_merges_traces(monkeypatch, capsys, trace):
    code, out, _ = cli(monkeypatch, capsys, "disk", "run", "const:1", "-t", trace, "-t", trace, "-f", "csv",
                       "--replay", "feedback", "--reference", "const:10", "--infinitely-fast", "--json")
    assert code in (0, None)
    r = json.loads(out)
    assert r["requests"] == 8 and r["streams"] == 2 and r["replay"] == "feedback"


@pytest.mark.parametrize("args", [
    ["--replay", "bogus"],
    ["--scheduler", "elevator"],
    ["--replay", "open", "--speedup", "0"],
    ["--replay", "closed", "--outstanding", "0"],
    ["--replay", "closed", "--think-ms", "-1"],
])
def test_bad_options_exit_2(monkeypatch, capsys, trace, args):
    code, _, err = cli(monkeypatch, capsys, "disk", "run", "const:1", "-t", trace, "-f", "csv", *args)
    assert code == 2
    assert err.startswith("blocklab: error:")


def test_bad_model_and_trace_exit_2(monkeypatch, capsys, trace, tmp_path):
    assert cli(monkeypatch, capsys, "disk", "run", "const:abc", "-t", trace, "-f", "csv")[0] == 2
    assert cli(monkeypatch, capsys, "disk", "run", str(tmp_path / "none.parv"), "-t", trace, "-f", "csv")[0] == 2
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,op,offset,size\n0.0,X,0,512\n")
    code, _, err = cli(monkeypatch, capsys, "disk", "run", "const:1", "-t", str(bad), "-f", "csv")
    assert code == 2 and "line 2" in err


def test_raid5_degraded_read(monkeypatch, capsys, tmp_path):
    # One 4 KiB read of logical block 0 on RAID-5 of 4 constant 10 ms disks with
    # a 1 ms XOR: 10 ms normally, 11 ms (3 survivor reads + XOR) with its disk failed.
    t = tmp_path / "one.csv"
    t.write_text("timestamp,op,offset,size\n0.0,R,0,4096\n")
    base = ["disk", "run", "const:10", "-t", str(t), "-f", "csv", "--raid", "raid5", "--disks", "4", "--xor-ms", "1", "--json"]
    r = json.loads(cli(monkeypatch, capsys, *base)[1])
    assert r["avg_response_ms"] == pytest.approx(10.0)
    disk = [i for i, d in enumerate(r["devices"]) if d["ops"] == 1][0]
    r = json.loads(cli(monkeypatch, capsys, *base, "--failed", str(disk))[1])
    assert r["avg_response_ms"] == pytest.approx(11.0)
    assert sum(d["ops"] for d in r["devices"]) == 3
    code, _, err = cli(monkeypatch, capsys, "disk", "run", "const:10", "-t", str(t), "-f", "csv", "--failed", "1")
    assert code == 2 and "--raid" in err


SHARED = __import__("pathlib").Path(__file__).resolve().parents[1].parent / "shared" / "disk-models" / "disksim-valid"


@pytest.mark.skipif(not (SHARED / "cheetah9LP.parv").exists(), reason="needs ../shared")
def test_cheetah9lp_disksim_ascii(monkeypatch, capsys, tmp_path):
    lines = (SHARED / "ascii.trace").read_text().splitlines()[:300]
    t = tmp_path / "a.trace"
    t.write_text("\n".join(lines) + "\n")
    code, out, _ = cli(monkeypatch, capsys, "disk", "run", str(SHARED / "cheetah9LP.parv"), "-t", str(t),
                       "-f", "disksim", "--scheduler", "satf", "--json")
    r = json.loads(out)
    assert r["requests"] == 300
    assert 0 < r["avg_service_ms"] < 30 and 0 < r["utilization"] < 1
