"""`blocklab repro dgraid --timed` at a cut-down size: the shapes the paper reports, in simulated time."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocklab.repro import dgraid_timed as dt


@pytest.fixture(scope="module")
def res(tmp_path_factory):
    work = tmp_path_factory.mktemp("dgraid-timed")
    return {"fig8": dt.fig8(work, quick=True), "fig9": dt.fig9(work, quick=True),
            "table2": dt.table2(work, quick=True), "fig7": dt.fig7(work, quick=True), "out": work}


def _f8(rows, cap, layout, unit, frac):
    return next(r for r in rows if r["cap_kbps"] == cap and r["order"] == "live" and r["layout"] == layout
                and r["unit_bytes"] == unit and r["live_frac"] == frac)


def test_fig8_live_rebuild_follows_the_live_share(res):
    rows = res["fig8"]
    for cap in (dt.MD_MAX_KBPS, dt.CAP_KBPS):
        full = next(r for r in rows if r["cap_kbps"] == cap and r["order"] == "md")
        assert full["copied_bytes"] == full["member_bytes"]
        # Compact live data: the time is the share's (half live, about half the full rebuild's).
        for f in (0.25, 0.5):
            r = _f8(rows, cap, "compact", 4096, f)
            assert r["copied_bytes"] == pytest.approx(f * r["member_bytes"], rel=1e-3)
            assert r["rebuild_s"] / full["rebuild_s"] == pytest.approx(f, abs=0.05)
        # All live: the live order copies what MD copies, in about the same time.
        assert _f8(rows, cap, "compact", 4096, 1.0)["rebuild_s"] == pytest.approx(full["rebuild_s"], rel=0.05)
        # The worst case (live blocks spread one by one) is slower than the best (compacted).
        assert _f8(rows, cap, "spread", 4096, 0.5)["rebuild_s"] > 2 * _f8(rows, cap, "compact", 4096, 0.5)["rebuild_s"]
    # At the 10 MB/s cap the rate, not the layout of 32 KiB files, sets the time.
    assert (_f8(rows, dt.CAP_KBPS, "spread", 32768, 0.5)["rebuild_s"]
            == pytest.approx(_f8(rows, dt.CAP_KBPS, "compact", 4096, 0.5)["rebuild_s"], rel=0.05))


def test_fig9_live_recovery_and_a_lost_mirror_pair(res):
    f9 = res["fig9"]
    md, live = f9["md"], f9["live"]
    assert md["finished"] and live["finished"]
    assert md["copied_bytes"] == f9["member_bytes"]
    share = live["copied_bytes"] / md["copied_bytes"]
    assert 0.2 < share < 0.8
    # Rebuild time at the cap follows the bytes copied.
    assert live["rebuild_s"] / md["rebuild_s"] == pytest.approx(share, abs=0.05)
    # A mirror pair lost: D-GRAID-1 still serves about half the file reads (the files homed on the
    # other pair); RAID-10 under MD none, and under block semantics far fewer than D-GRAID-1.
    assert f9["dgraid1_pair"]["file_reads_after"] > 1000
    assert 0.35 < f9["dgraid1_pair"]["file_reads_ok"] < 0.65
    assert f9["raid10_pair"]["md_file_reads_ok"] == 0.0
    assert f9["raid10_pair"]["file_reads_ok"] < f9["dgraid1_pair"]["file_reads_ok"] / 2
    assert f9["dgraid1_pair"]["unmapped_reads"] == 0
    # The profile: every interval's requests, served or not, sum to the reader's requests, and
    # D-GRAID-1 serves a larger share than RAID-10 after the loss.
    r10 = f9["raid10_pair"]["profile"]
    assert sum(p["issued"] for p in r10) == f9["raid10_pair"]["requests"]
    assert sum(p["issued"] - p["served"] for p in r10) == f9["raid10_pair"]["unreadable_requests"]
    last = {k: f9[k]["profile"][-2]["served_share"] for k in ("dgraid1_pair", "raid10_pair")}
    assert last["dgraid1_pair"] > last["raid10_pair"]


def test_table2_metadata_copies_cost_writes_and_time(res):
    for label in ("closed-1", "closed-8"):
        rows = {r["config"]: r for r in res["table2"] if r["replay"] == label}
        written = [rows[f"dgraid{k}"]["blocks_written"] for k in (1, 2, 3, 4)]
        steps = {b - a for a, b in zip(written, written[1:])}
        assert len(steps) == 1 and steps.pop() > 0, written  # each copy adds the same metadata writes
        assert rows["dgraid4"]["run_time_s"] > rows["dgraid1"]["run_time_s"]
        assert rows["raid0"]["blocks_written"] == rows["dgraid1"]["blocks_written"]


def test_fig7_one_disk_without_diffusion(res):
    for label, outstanding, _ in dt.FIG7_REPLAYS:
        big = max((r for r in res["fig7"] if r["replay"] == label), key=lambda r: r["file_bytes"])
        # Without diffusion a large file is on its home disk: RAID-0's striping reads it faster.
        assert big["raid0_mb_s"] > 1.5 * big["dgraid_mb_s"], label
        # The diffused copy (striped over all disks, consecutive segments ascending) helps.
        assert big["dgraid_diffused_mb_s"] > 1.2 * big["dgraid_mb_s"], label
    # Requests in flight keep the stripes busy; one home disk gains nothing from them.
    by = {(r["replay"], r["file_bytes"]): r for r in res["fig7"]}
    size = max(r["file_bytes"] for r in res["fig7"])
    assert by[("closed-4", size)]["raid0_mb_s"] > 1.5 * by[("closed-1", size)]["raid0_mb_s"]
    assert by[("closed-4", size)]["dgraid_mb_s"] == pytest.approx(by[("closed-1", size)]["dgraid_mb_s"], rel=0.1)


def test_outputs_report_and_determinism(res, tmp_path, monkeypatch):
    out = tmp_path
    written = dt.save(res, out) + dt.plot(res, out)
    assert all((out / f).stat().st_size > 0 for f in written)
    lines = dt.verdict(res)
    md = dt.markdown(res, lines)
    assert "Fig 8" in md and "Fig 9" in md and "Table 2" in md and "Fig 7" in md
    # Again, in a work folder named relative to the current directory (the stack files must still
    # find the live map).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "again").mkdir()
    again = dt.fig9(Path("again"), quick=True)
    strip = lambda d: {k: v for k, v in d.items() if k != "series"}  # noqa: E731
    assert {k: strip(v) if isinstance(v, dict) else v for k, v in again.items()} == \
        {k: strip(v) if isinstance(v, dict) else v for k, v in res["fig9"].items()}


def test_cli_timed_writes_the_report(res, tmp_path, monkeypatch, capsys):
    """`blocklab repro dgraid --timed`: the option parsed, the recipe's tables saved, plotted, reported
    (the run itself replaced by the cut-down one above)."""
    from typer.testing import CliRunner

    from blocklab.cli import app

    seen = {}

    def fake_run_all(out, quick=False, progress=None):
        seen["quick"] = quick
        return {k: v for k, v in res.items() if k != "out"}

    monkeypatch.setattr(dt, "run_all", fake_run_all)
    r = CliRunner().invoke(app, ["repro", "dgraid", "--timed", "--quick", "-o", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert seen["quick"] is True
    assert "Our numbers (in simulated time):" in r.output and "Fig 9: with the reader running" in r.output
    report = (tmp_path / "o" / "dgraid-timed-report.md").read_text()
    assert "### Fig 9 in time" in report
    for f in ("fig8", "fig9", "fig9-profile", "table2", "fig7"):
        assert (tmp_path / "o" / f"dgraid-timed-{f}.parquet").stat().st_size > 0
