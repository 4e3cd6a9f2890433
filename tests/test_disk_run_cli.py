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


# ---------- --rebuild ----------

def _rebuild_base(t):
    # RAID-5 of 3 constant 10 ms disks, 64 KiB chunks, members of 4 chunk rows.
    return ["disk", "run", "const:10", "-t", str(t), "-f", "csv", "--raid", "5", "--disks", "3",
            "--disk-size", "256KiB", "--failed", "0", "--json"]


def test_rebuild_idle_and_max_speed(monkeypatch, capsys, tmp_path):
    # The only request reads block 16 (disk 1, row 0) at 0; the rebuild starts
    # 1 s later on an idle array: 4 rows x (10 ms parallel reads + 10 ms write).
    t = tmp_path / "one.csv"
    t.write_text("timestamp,op,offset,size\n0.0,R,65536,4096\n")
    base = _rebuild_base(t) + ["--rebuild", "--rebuild-at", "1000", "--rebuild-window", "1"]
    code, out, _ = cli(monkeypatch, capsys, *base)
    assert code in (0, None)
    r = json.loads(out)
    for k in ("requests", "avg_response_ms", "p50_ms", "p95_ms", "p99_ms", "avg_service_ms", "utilization", "devices"):
        assert k in r
    rb = r["rebuild"]
    assert rb["finished"] and rb["rebuild_rows"] == 4 == rb["rows_total"]
    assert rb["rebuild_ms"] == pytest.approx(80.0)
    assert (rb["rebuild_reads"], rb["rebuild_writes"]) == (8, 4)
    assert r["requests"] == 1 and r["avg_response_ms"] == pytest.approx(10.0)
    assert r["sim_time_ms"] == pytest.approx(1080.0)
    assert [rb[k]["requests"] for k in ("user_before", "user_during", "user_after")] == [1, 0, 0]
    # 1600 KB/s: a 64 KiB row every 40 ms -> rows start at 0, 40, 80, 120: 140 ms.
    r = json.loads(cli(monkeypatch, capsys, *base, "--rebuild-max", "1600")[1])
    assert r["rebuild"]["rebuild_ms"] == pytest.approx(140.0)
    # Without --rebuild: no rebuild key, the degraded run as before.
    r = json.loads(cli(monkeypatch, capsys, *_rebuild_base(t))[1])
    assert "rebuild" not in r


def test_rebuild_text_output(monkeypatch, capsys, tmp_path):
    t = tmp_path / "one.csv"
    t.write_text("timestamp,op,offset,size\n0.0,R,65536,4096\n")
    args = [a for a in _rebuild_base(t) if a != "--json"] + ["--rebuild"]
    code, out, _ = cli(monkeypatch, capsys, *args)
    assert code in (0, None)
    assert "rebuild of disk(s) 0" in out and "4/4 rows" in out


@pytest.mark.parametrize("args,msg", [
    (["--raid", "5", "--disks", "3", "--rebuild"], "--failed"),
    (["--raid", "0", "--disks", "3", "--failed", "0", "--rebuild"], "redundancy"),
    (["--raid", "5", "--disks", "4", "--failed", "0,1", "--rebuild"], "survives 1"),
    (["--raid", "6", "--disks", "5", "--failed", "0,1,2", "--rebuild"], "survives 2"),
    (["--rebuild", "--failed", "0"], "--raid"),
    (["--raid", "5", "--disks", "3", "--failed", "0", "--rebuild", "--rebuild-window", "0"], "window"),
])
def test_rebuild_errors_exit_2(monkeypatch, capsys, trace, args, msg):
    code, _, err = cli(monkeypatch, capsys, "disk", "run", "const:1", "-t", trace, "-f", "csv",
                       "--disk-size", "1MiB", *args)
    assert code == 2, err
    assert err.startswith("blocklab: error:") and msg in err, err


def test_rebuild_api_is_deterministic(tmp_path):
    from blocklab import api
    t = tmp_path / "t.csv"
    t.write_text(TRACE)
    kw = dict(format="csv", raid="raid6", disks=5, failed=[2], disk_size="1MiB", rebuild=True, rebuild_window=2)
    a = api.disk_run("toy:base=2,cyl=0.01,spc=64", str(t), **kw)
    assert a == api.disk_run("toy:base=2,cyl=0.01,spc=64", str(t), **kw)
    assert a["rebuild"]["finished"] and a["rebuild"]["rebuild_rows"] == 16
    # RAID-6 with one lost disk reads k = 3 survivors per row.
    assert a["rebuild"]["rebuild_reads"] == 3 * 16


ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _lossy_trace(tmp_path):
    # RAID-5 of 6, 64 KiB chunks: block 0 is on disk 0, block 32 (chunk 2) on disk 2.
    t = tmp_path / "lossy.csv"
    t.write_text("timestamp,op,offset,size\n0.0,R,0,4096\n0.1,R,131072,4096\n")
    return str(t)


def test_past_redundancy_refused_unless_allowed(monkeypatch, capsys, tmp_path):
    # Issue 27 case 1: two failed disks of a RAID-5 used to run and report a better mean than one.
    code, out, err = cli(monkeypatch, capsys, "disk", "run", str(ROOT / "examples" / "disks" / "ultrastar-73lzx.toml"),
                         "--trace", str(ROOT / "data" / "wsrch-small.trace"), "--format", "mqsim",
                         "--raid", "5", "--disks", "6", "--failed", "0,1")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--failed" in err and "survives 1" in err and "--allow-loss" in err
    base = ["disk", "run", "const:10", "-t", _lossy_trace(tmp_path), "-f", "csv", "--raid", "5", "--disks", "6",
            "--failed", "0,1", "--allow-loss"]
    code, out, _ = cli(monkeypatch, capsys, *base, "--json")
    assert code in (0, None)
    r = json.loads(out)
    assert (r["requests"], r["unreadable"], r["unreadable_blocks"]) == (2, 1, 1)
    assert r["response_covers"] == "served"
    assert r["avg_response_ms"] == pytest.approx(10.0)  # the one served read
    code, out, _ = cli(monkeypatch, capsys, *base)
    assert code in (0, None)
    assert "unreadable         1 requests, 1 blocks" in out
    assert "avg_response_ms    10.0000  (served requests only)" in out


def test_summary_states_tenant_map_and_fit(monkeypatch, capsys, tmp_path):
    # Issue 27 case 8: disk run shares one volume among tenants; say so.
    base = ["disk", "run", "const:10", "-t", _lossy_trace(tmp_path), "-f", "csv", "--raid", "5", "--disks", "6"]
    r = json.loads(cli(monkeypatch, capsys, *base, "--json")[1])
    assert (r["tenant_map"], r["fit"], r["response_covers"]) == ("ignore", "none", "all")
    r = json.loads(cli(monkeypatch, capsys, *base, "--wrap", "--json")[1])
    assert r["fit"] == "wrap"
    out = cli(monkeypatch, capsys, *base, "--fit", "scale")[1]
    assert out.splitlines()[0].endswith("tenant map ignore, fit scale")
    assert "unreadable" not in out and "served requests only" not in out
