"""Rebuild orders from the command line and the recipes: `disk run --rebuild-order / --rebuild-idle
/ --fit`, the stack keys by `--set`, the PRO recipe's tables against the paper's own columns."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest

from blocklab.cli import main


def cli(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["blocklab", *args])
    with pytest.raises(SystemExit) as e:
        main()
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def _base(t):
    # RAID-5 of 3 constant 10 ms disks, 64 KiB chunks, members of 8 chunk rows.
    return ["disk", "run", "const:10", "-t", str(t), "-f", "csv", "--raid", "5", "--disks", "3",
            "--disk-size", "512KiB", "--failed", "0", "--rebuild", "--json"]


@pytest.mark.parametrize("order", ["md", "pro", "dor", "pro-dor"])
def test_every_order_takes_mds_time_on_an_idle_array(monkeypatch, capsys, tmp_path, order):
    # No request during the rebuild (the one read is served before it starts at 1 s): the
    # survivors read one row per 10 ms and the spare writes row r at 10(r+1)..10(r+2): 90 ms.
    t = tmp_path / "one.csv"
    t.write_text("timestamp,op,offset,size\n0.0,R,65536,4096\n")
    code, out, err = cli(monkeypatch, capsys, *_base(t), "--rebuild-at", "1000", "--rebuild-order", order)
    assert code in (0, None), err
    rb = json.loads(out)["rebuild"]
    assert rb["order"] == order and rb["finished"]
    assert rb["rebuild_ms"] == pytest.approx(90.0)
    assert (rb["rebuild_reads"], rb["rebuild_writes"]) == (16, 8)
    assert rb["priority"] == ("low" if "dor" in order else "same")
    assert rb["throttled"] == ("dor" not in order)
    # The time series ends with the rebuild, every row rebuilt.
    assert rb["series"][-1]["t_ms"] == pytest.approx(1090.0) and rb["series"][-1]["rebuilt_fraction"] == 1.0


def test_pro_redirects_reads_of_hot_rows_to_the_spare(tmp_path):
    # RAID-5 of 3, 8 rows of two 16-block data chunks; row 7's parity is on disk 1 and its
    # chunk 1 (blocks 240..255) on disk 0, the lost disk. Reads of block 240 every 10 ms while
    # the rebuild is held at its 1 MB/s floor (a row every 64 ms): md reaches row 7 last and
    # reconstructs them; pro (one-row zones) rebuilds row 7 second (row 0 went before the first
    # read) and then reads it from the spare.
    import blocklab

    t = tmp_path / "hot.csv"
    t.write_text("timestamp,op,offset,size\n" + "".join(f"{i * 0.01:.3f},R,{240 * 4096},4096\n" for i in range(60)))
    s = tmp_path / "s.toml"
    s.write_text('tenant_map = "ignore"\n[array]\nraid = 5\ndisks = 3\nfailed = [0]\ndisk_size = "512KiB"\n'
                 '[array.rebuild]\nmin = 1000\nwindow = 1\n[array.rebuild.pro]\nzone = "64KiB"\n'
                 '[device]\nmodel = "const:2"\n')
    md = blocklab.run_stack(s, t, format="csv", sets=["array.rebuild.order=md"])["rebuild"]
    pro = blocklab.run_stack(s, t, format="csv", sets=["array.rebuild.order=pro"])["rebuild"]
    assert md["lost_reads"]["blocks"] == pro["lost_reads"]["blocks"] > 20
    assert md["lost_reads"]["share_from_spare"] < 0.1
    assert pro["lost_reads"]["share_from_spare"] > 0.7
    assert pro["order_stats"]["zones_hot_max"] == 1 and pro["order_stats"]["zone_rows"] == 1


def test_fit_scale_runs_a_trace_larger_than_the_array(monkeypatch, capsys, tmp_path):
    t = tmp_path / "far.csv"
    t.write_text("timestamp,op,offset,size\n0.0,R,0,4096\n0.01,R,1073741824,4096\n")
    args = ["disk", "run", "const:1", "-t", str(t), "-f", "csv", "--raid", "5", "--disks", "3",
            "--disk-size", "512KiB", "--json"]
    code, _, err = cli(monkeypatch, capsys, *args)
    assert code == 2 and "beyond the array" in err
    code, out, err = cli(monkeypatch, capsys, *args, "--fit", "scale")
    assert code in (0, None), err
    assert json.loads(out)["requests"] == 2


@pytest.mark.parametrize("args,msg", [
    (["--rebuild-order", "lifo"], "--rebuild-order: unknown rebuild order `lifo`; valid: md, pro, dor, pro-dor, live"),
    (["--rebuild-idle", "often"], "--rebuild-idle: unknown rebuild idle rule `often`"),
    (["--fit", "fold"], "--fit: unknown address fit `fold`"),
    (["--fit", "scale", "--wrap"], "contradicts"),
])
def test_bad_flags_exit_2(monkeypatch, capsys, tmp_path, args, msg):
    t = tmp_path / "one.csv"
    t.write_text("timestamp,op,offset,size\n0.0,R,65536,4096\n")
    code, _, err = cli(monkeypatch, capsys, *_base(t), *args)
    assert code == 2, err
    assert err.startswith("blocklab: error:") and msg in err, err


def test_stack_keys_by_set_are_deterministic(tmp_path):
    import blocklab

    t = tmp_path / "t.csv"
    t.write_text("timestamp,op,offset,size\n" + "".join(f"{i * 0.005:.3f},R,{(i * 37 % 200) * 4096},8192\n"
                                                       for i in range(200)))
    s = tmp_path / "s.toml"
    s.write_text('tenant_map = "ignore"\n[array]\nraid = 5\ndisks = 4\nfailed = [1]\ndisk_size = "2MiB"\n'
                 '[array.rebuild]\nmin = 1000\n[device]\nmodel = "toy:base=2,cyl=0.01,spc=64"\n')
    sets = ["array.rebuild.order=pro-dor", "array.rebuild.idle=md6", "array.rebuild.pro.zone=256KiB",
            "array.rebuild.dor.lead=4", "array.rebuild.map_unit=128KiB"]
    a = blocklab.run_stack(s, t, format="csv", sets=sets)
    assert a == blocklab.run_stack(s, t, format="csv", sets=sets)
    rb = a["rebuild"]
    assert (rb["order"], rb["idle"], rb["map_unit_rows"], rb["order_stats"]["lead"]) == ("pro-dor", "md6", 2, 4)
    assert rb["order_stats"]["active_max"] <= 4 and rb["finished"]
    # Counted: the whole rebuild at once, the same rebuild work.
    c = blocklab.run_stack(s, t, format="csv", executor="count", sets=sets)
    assert (c["rebuild"]["rebuild_reads"], c["rebuild"]["rebuild_writes"]) == (rb["rebuild_reads"], rb["rebuild_writes"])


def test_pro_recipe_tables_and_the_papers_misprints():
    from blocklab.repro import pro as rp

    assert rp.misprints() == [
        "Table 3 ws raid5 of 7: printed 7.85 %, recomputed 10.78 %",
        "Table 4 ws raid5 of 9: printed 1.43 %, recomputed 0.14 %",
        "Table 4 ws raid10 of 6: printed 5.03 %, recomputed 0.50 %",
    ]
    rows = []
    for level, n in rp.ARRAYS:
        for order, resp, rb in (("md", 100.0, 50.0), ("pro", 80.0, 45.0)):
            rows.append({"trace": "ws", "level": level, "disks": n, "order": order, "mode": "L", "param": "",
                         "value": "", "resp_during_ms": resp, "rebuild_s": rb, "avg_kbps": 10000.0,
                         "share_from_spare": 0.5})
    t3 = rp.tables(pd.DataFrame(rows))
    assert len(t3) == 6
    assert t3["resp_impr"].tolist() == pytest.approx([20.0] * 6)
    assert t3["rebuild_impr"].tolist() == pytest.approx([10.0] * 6)
    r = t3[(t3["level"] == "raid5") & (t3["disks"] == 3)].iloc[0]
    assert (r["paper_pr_ms"], r["paper_pro_ms"]) == (225.67, 183.37)
    assert r["paper_resp_impr_recomputed"] == pytest.approx(18.74, abs=0.005)


def test_vdf_timed_summary_and_eq4():
    from blocklab.repro import vdf_timed as vt

    rows = []
    for pol, rgr, u, rb, thr in (("lru", 0.5, 0.4, 100.0, 100.0), ("vdf-lru", 0.4, 0.3, 80.0, 125.0),
                                  ("lfu", 0.6, 0.5, 120.0, 90.0), ("vdf-lfu", 0.45, 0.35, 90.0, 120.0)):
        base = {"disks": 5, "size": "10%", "policy": pol, "rgr": rgr, "u_survivors": u, "cache_blocks": 100,
                "resp_ms": 1.0, "throughput": thr}
        rows.append({**base, "kind": "rebuild", "threads": 0, "rebuild_s": rb, "resp_during_ms": 2.0})
        rows.append({**base, "kind": "degraded", "threads": 0})
        rows.append({**base, "kind": "closed", "threads": 20})
    s = vt.summary(pd.DataFrame(rows))
    lru = s[s["base"] == "lru"].iloc[0]
    assert lru["rd_impr"] == pytest.approx(20.0)
    assert lru["eq4"] == pytest.approx(100 * (0.4 - 0.3) / (1 - 0.3))
    assert lru["rate_20"] == pytest.approx(25.0)
    assert lru["rate_model"] == pytest.approx(25.0)


# --- repro pro and repro vdf --timed as sweeps ---------------------------------------------------

def _small_trace(tmp_path):
    # 1,500 reads and writes over 3 MiB, 4 ms apart: the rebuild of small members ends inside it.
    t = tmp_path / "small.csv"
    t.write_text("timestamp,op,offset,size\n" + "".join(
        f"{i * 0.004:.3f},{'W' if i % 5 == 4 else 'R'},{(i * 37 % 750) * 4096},{4096 * (1 + i % 2)}\n"
        for i in range(1500)))
    return t


def _assert_one_row_per_cell_with_provenance(out, ncells):
    import blocklab
    from blocklab.sweeps.results import PROVENANCE

    df = blocklab.load(out)
    assert len(df) == ncells and df["cell"].is_unique
    assert (df["status"] == "ok").all(), df.loc[df["status"] != "ok", "error"].tolist()
    for c in PROVENANCE:
        assert c in df.columns and df[c].notna().all(), c
    assert (out / "report.html").stat().st_size > 0
    return df


def test_repro_pro_runs_as_a_sweep_and_each_cell_is_its_stack_alone(tmp_path):
    import blocklab
    from blocklab.repro import pro as rp

    t = _small_trace(tmp_path)
    spec = rp.TraceSpec("ws", "small", str(t), "csv", 1.0, 4_000_000)
    out = tmp_path / "o"
    runs = rp.run([spec], out, sweep=False, workers=2, progress=False)
    cells = rp.cells(sweep=False, volumes=False)
    df = _assert_one_row_per_cell_with_provenance(out, len(cells))
    assert list(df["case"]) == [c.name for c in cells]
    # Every array at the same load per member: speed-up x N/3, members x 3/N (to the MB).
    for n, speedup, size in ((3, 1.0, 4_000_000), (4, 1.3333, 3_000_000), (5, 1.6667, 2_000_000),
                             (6, 2.0, 2_000_000), (9, 3.0, 1_000_000)):
        assert set(df.loc[df["array.disks"] == n, "replay.speedup"]) == {speedup}
        assert set(df.loc[df["array.disks"] == n, "array.disk_size"]) == {size}
    assert set(df["tenant_map"]) == {"concat"}
    # A cell is the stack file with the cell's keys, run alone.
    c = next(c for c in cells if (c.level, c.disks, c.order) == ("raid10", 6, "pro"))
    lo, hi = rp.LIMITS[c.mode]
    alone = blocklab.run_stack(rp.STACK, t, format="csv", executor="timed", sets=[
        "replay.speedup=2.0", "array.disk_size=2000000", f"array.raid={c.level}", f"array.disks={c.disks}",
        f"array.rebuild.order={c.order}", f"array.rebuild.min={lo}", f"array.rebuild.max={hi}",
        f"array.rebuild.idle={c.idle}", "tenant_map=\"concat\""])
    r = runs[(runs["level"] == "raid10") & (runs["disks"] == 6) & (runs["order"] == "pro")].iloc[0]
    assert r["rebuild_s"] == alone["rebuild"]["rebuild_ms"] / 1e3
    assert r["resp_during_ms"] == alone["rebuild"]["user_during"]["avg_response_ms"]
    assert r["user_reads"] == alone["rebuild"]["ops_by_cause"]["user"]["reads"]
    # The tables come out of the sweep's rows: one per array, U and L for RAID-5 of 3, four
    # orders, 16 and 64 KiB chunks; Fig. 3's cells stay out of the other tables.
    assert len(rp.tables(runs)) == 6 and len(rp.u_mode(runs)) == 2
    assert sorted(rp.orders_table(runs)["order"]) == ["dor", "md", "pro", "pro-dor"]
    f3 = rp.fig3_table(runs)
    assert list(f3["chunk"]) == ["16KiB", "64KiB"]
    assert set(runs.loc[runs["chunk"] == "16KiB", "rows"]) == {4 * (4_000_000 // 65536)}
    assert rp.layouts_table(runs).empty  # one volume: one layout run
    # What the recipe prints: the tables, Fig. 3, and the verdict claim by claim.
    t3, um, ot, sw = rp.tables(runs), rp.u_mode(runs), rp.orders_table(runs), rp.sweep_table(runs)
    md = rp.markdown([spec], t3, um, ot, sw, rp.verdict(t3, um, sw), rp.layouts_table(runs), f3,
                     rp.claims(t3, um, ot, sw, f3))
    assert "## Fig. 3 analogue" in md and "## Verdict, claim by claim" in md
    assert "| Table 3, WebSearch, RAID-5 of 3: PRO lowers the response during recovery | 18.74 % |" in md
    assert "raid5 of 9 x 3 / 1 MB" in md  # the speed-up and members per array
    # A re-run finds every cell done.
    again = rp.run([spec], out, sweep=False, workers=1, progress=False)
    assert again.equals(runs)
    assert len((out / "cells.jsonl").read_text().splitlines()) == len(cells)


def test_pro_load_per_member_by_hand():
    from blocklab.repro import pro as rp

    ws = rp.TraceSpec("ws", "ws", "t", "mqsim", 0.45, 600_000_000)
    # Each survivor serves 2/N of the reads with one member lost: N/3 times RAID-5 of 3's rate
    # keeps its share equal; the trace lasts 3/N as long, and so does the rebuild (members x 3/N).
    assert rp.load_for(ws, 3) == (0.45, 600_000_000)
    assert rp.load_for(ws, 5) == (0.75, 360_000_000)
    assert rp.load_for(ws, 7) == (1.05, 257_000_000)  # 257.14 MB, to the MB
    assert rp.load_for(ws, 9) == (1.35, 200_000_000)
    assert rp.load_for(ws, 4) == (0.6, 450_000_000)  # RAID-10 of 4: the lost member's mirror
    fixed = rp.TraceSpec("ws", "ws", "t", "mqsim", 0.65, 600_000_000, load="fixed")
    assert rp.load_for(fixed, 9) == (0.65, 600_000_000)
    with pytest.raises(ValueError, match="load `heavy`"):
        rp.load_for(rp.TraceSpec("ws", "ws", "t", "mqsim", 1.0, 1, load="heavy"), 3)


def test_pro_cells_run_table_3_in_both_layouts_for_traces_with_volumes():
    from blocklab.repro import pro as rp

    multi = rp.TraceSpec("ws", "ws", "t", "mqsim", 0.45, 600_000_000, volumes=True)
    one = rp.TraceSpec("fin", "fin", "f", "msr-cut", 0.3, 1_000_000_000)
    cases = rp.sweep_spec([multi, one], sweep=False).cases
    ws = [c for c in cases if c["trace"] == "ws"]
    fin = [c for c in cases if c["trace"] == "fin"]
    assert len(ws) == len(fin) + 12  # md and pro on the six arrays, folded
    folded = [c for c in ws if c["tenant_map"] == "ignore"]
    assert [c["name"] for c in folded][:2] == ["raid5x3 md L layout=fold", "raid5x3 pro L layout=fold"]
    assert all(c["tenant_map"] == "concat" for c in fin)
    f3 = [c for c in ws if c.get("array.chunk") == "16KiB"]
    assert [c["name"] for c in f3] == ["raid5x3 md L chunk=16KiB", "raid5x3 pro L chunk=16KiB"]
    # The recipe's layout is the one named; the other is run beside it.
    other = rp.sweep_spec([multi], sweep=False, layout="fold").cases
    assert {c["tenant_map"] for c in other if "layout=" not in c["name"]} == {"ignore"}
    assert {c["tenant_map"] for c in other if "layout=concat" in c["name"]} == {"concat"}


def test_pro_papers_own_trace_runs_at_its_rate_on_5gb_members(tmp_path):
    from blocklab.repro import pro as rp

    f = tmp_path / "ws.spc"
    f.write_text("0,100,8192,R,0.0\n")
    t = rp.papers_trace(f"ws={f}")
    assert (t.format, t.speedup, t.disk_size, t.load, t.volumes) == ("spc", 1.0, 5_000_000_000, "fixed", True)
    assert rp.load_for(t, 9) == (1.0, 5_000_000_000)
    with pytest.raises(ValueError, match="KEY one of ws, fin"):
        rp.papers_trace(f"tpcc={f}")
    with pytest.raises(ValueError, match="no such file"):
        rp.papers_trace(f"fin={tmp_path / 'nope.spc'}:spc")


def test_repro_pro_bad_layout_load_or_trace_is_one_line_exit_2(monkeypatch, capsys, tmp_path):
    for args, text in ((["--layout", "stack"], "--layout: unknown layout `stack`; valid: concat, fold"),
                       (["--load", "heavy"], "--load: unknown rule `heavy`; valid: per-member, fixed"),
                       (["--trace", f"ws={tmp_path / 'none.spc'}"], "--trace: `")):
        code, out, err = cli(monkeypatch, capsys, "repro", "pro", "--out", str(tmp_path / "o"), *args)
        assert code == 2 and text in err and len(err.strip().splitlines()) == 1, err


def test_repro_vdf_timed_runs_as_a_sweep(tmp_path, monkeypatch, capsys):
    import blocklab
    from blocklab.repro import vdf_timed as vt

    t = _small_trace(tmp_path)
    out = tmp_path / "o"
    code, stdout, err = cli(monkeypatch, capsys, "repro", "vdf", "--timed", "--traces", f"{t}:csv", "--disks", "4",
                            "--sizes", "20%", "--threads", "4", "--speedup", "1", "--warmup", "1", "--out", str(out))
    assert code in (0, None), err
    assert "| 4 | 20% |" in stdout and "The paper reports:" in stdout
    df = _assert_one_row_per_cell_with_provenance(out, 4 * 3)
    assert set(df["case"]) == {"rebuild", "degraded", "closed 4"}
    runs = vt.rows(df)
    s = vt.summary(runs)
    assert list(s["base"]) == ["lru", "lfu"] and "rate_4" in s.columns
    # The rebuild cell of VDF-LFU is the stack with its keys, run alone.
    alone = blocklab.run_stack(vt.STACK, t, format="csv", executor="timed", sets=[
        "replay.speedup=1.0", "replay.warmup=1.0", "array.stripe_cache=256", "array.disks=4", "cache.0.size=20%",
        "cache.0.policy=vdf-lfu", "array.rebuild.at=1000.0", "array.rebuild.min=100000", "array.rebuild.max=100000"])
    r = runs[(runs["policy"] == "vdf-lfu") & (runs["kind"] == "rebuild")].iloc[0]
    assert r["rebuild_s"] == alone["rebuild"]["rebuild_ms"] / 1e3 and r["rgr"] == alone["array"]["rgr"]
    surv = [d["utilization"] for d in alone["devices"][1:]]
    assert r["u_survivors"] == sum(surv) / len(surv)
    # The first second (requests 0..249) is the warm-up: of the 1,250 after it, 1,000 are reads.
    assert alone["requests"] == 1000 and r["requests"] == alone["requests"]
    for f in ("vdf-timed-summary.csv", "vdf-timed.png", "vdf-timed-report.md"):
        assert (out / f).stat().st_size > 0, f
