"""`blocklab repro dgraid` pieces on tiny inputs: every table is produced, saved, plotted and reported."""

from __future__ import annotations

import pytest

from blocklab.repro import dgraid as rd


@pytest.fixture(scope="module")
def pieces(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("dgraid-repro")
    listing = tmp_path / "sys.lst"
    listing.write_text("l 7 /bin\nf 90000 /usr/bin/ls\nf 150000 /usr/bin/ps\nf 40000 /usr/sbin/init\n"
                       "f 900000 /usr/lib/x86_64-linux-gnu/libc.so.6\nf 300000 /usr/lib/x86_64-linux-gnu/libm.so.6\n"
                       "f 2000 /etc/passwd\n")
    tree = rd.tree_spec(str(listing), {"dirs": 20, "files": 150, "seed": 2, "max_file": 1 << 20})
    res = {
        "table1": [dict(r) for r in rd.table1(tree)],
        "fig2": rd.fig2(tree, disks=4, ks="0..3", trials=20, copies=(1, 4)),
        "fig3": rd.fig3(tree, disks=4, ks="0..3", trials=20, processes=50),
        "fig7": rd.fig7(sizes=(4096, 4 << 20)),
        "table2": rd.table2(quick=True),
        "fig9": rd.fig9(tmp_path, quick=True),
        "disks": 4,
        "popular": rd.popular_share(tree),
    }
    return res


def test_repro_pieces_report_and_files(pieces, tmp_path):
    res = pieces
    # Table 1 is linear in the copies; Table 2's unique metadata too.
    one = {(r["fs"], r["block_size"]): r["overhead_pct"] for r in res["table1"] if r["meta_copies"] == 1}
    assert all(abs(r["overhead_pct"] - r["meta_copies"] * one[(r["fs"], r["block_size"])]) < 1e-9 for r in res["table1"])
    assert sorted(one) == [("ext2", 1024), ("ext2", 4096), ("vfat", 1024), ("vfat", 4096)]
    t2 = {r["config"]: r for r in res["table2"]}
    assert t2["dgraid3"]["unique_metadata"] == 3 * t2["dgraid1"]["unique_metadata"]
    # Losing a mirror pair of 4: D-GRAID-1 keeps about half the files, RAID-10 (MD) none.
    assert 0.35 < res["fig9"]["dgraid_files_after_pair_loss"] < 0.65
    assert res["fig9"]["raid10_md_files_after_pair_loss"] == 0.0
    written = rd.save(res, tmp_path) + rd.plot(res, tmp_path)
    assert all((tmp_path / f).stat().st_size > 0 for f in written)
    lines = rd.verdict(res)
    md = rd.markdown(res, lines)
    assert "Table 1" in md and "Fig 9" in md and "| dgraid4 |" in md
    assert len(lines) >= 6


def test_counted_calls_are_sweep_cells(tmp_path):
    """`repro dgraid`'s engine calls run as the cells of a sweep: the folder loads with
    `blocklab.load`, one row per call, provenance filled, and each cell's output is the call's
    own (run here, outside the sweep); the tables derived from them equal the direct ones."""
    import json

    import blocklab
    from blocklab.sweeps import run_sweep
    from blocklab.sweeps.results import Journal

    listing = tmp_path / "sys.lst"
    listing.write_text("f 90000 /usr/bin/ls\nf 40000 /usr/sbin/init\nf 2000 /etc/passwd\n")
    tree = rd.tree_spec(str(listing), {"dirs": 10, "files": 60, "seed": 3, "max_file": 1 << 20})
    fig2 = rd.fig2_calls(tree, disks=4, ks="0..2", trials=10, copies=(1, 4))
    calls = rd.table1_calls(tree) + fig2 + rd.table2_calls(quick=True)
    out = tmp_path / "sweep"
    df = run_sweep(rd.sweep_spec(calls), out, progress=False)
    back = blocklab.load(out)
    assert len(back) == len(calls) == back["cell"].nunique()
    assert list(back["case"]) == [name for name, _, _ in calls]
    assert (back["status"] == "ok").all()
    for col in ("blocklab_version", "git_commit", "started_at", "wall_s", "host", "cell", "analysis", "params"):
        assert back[col].notna().all(), col
    records = Journal(out).records()
    outs = {case: records[cell]["result"]["output"] for cell, case in zip(df["cell"], df["case"])}
    # A cell is its engine call alone.
    name, analysis, params = fig2[1]
    assert outs[name] == json.loads(getattr(rd._core(), f"dgraid_{analysis}")(json.dumps(params)))
    assert rd.table1_rows(outs) == rd.table1(tree)
    assert rd._rows_of(fig2, outs) == rd.fig2(tree, disks=4, ks="0..2", trials=10, copies=(1, 4))
    assert rd.table2_rows(outs) == rd.table2(quick=True)
    # The listing is an input: editing it makes new cells (the key hashes its content).
    listing.write_text("f 90000 /usr/bin/ls\nf 2000 /etc/passwd\n")
    again = run_sweep(rd.sweep_spec(rd.table1_calls(tree)), out, progress=False)
    assert again["cell"].iloc[0] != df["cell"].iloc[0]


def test_cli_counted_passes_the_sweep_flags(pieces, tmp_path, monkeypatch):
    """`blocklab repro dgraid`: --jobs / --ray reach the sweep, the tables are saved and reported
    (the run itself replaced by the tiny one above)."""
    from typer.testing import CliRunner

    from blocklab.cli import app

    seen = {}

    def fake_run_all(out, listing=None, quick=False, progress=None, *, jobs=None, ray=None, bar=True, command=None):
        seen.update(quick=quick, jobs=jobs, ray=ray, command=command)
        return pieces

    monkeypatch.setattr(rd, "run_all", fake_run_all)
    r = CliRunner().invoke(app, ["repro", "dgraid", "--quick", "-j", "2", "-o", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert seen["quick"] is True and seen["jobs"] == 2 and seen["ray"] is None
    assert "Our numbers:" in r.output and "results.parquet, report.html" in r.output
    assert "Verdict, claim by claim:" in r.output and "| Fig 9: D-GRAID-1 after a mirror pair is lost |" in r.output
    assert "## Verdict, claim by claim" in (tmp_path / "o" / "dgraid-report.md").read_text()
    assert (tmp_path / "o" / "dgraid-table2.parquet").stat().st_size > 0
