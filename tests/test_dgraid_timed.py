"""`blocklab repro dgraid --timed` at a cut-down size: the shapes the paper reports, in simulated time;
its stack runs are the cells of a sweep (results.parquet, report.html) and the figures derive from them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import blocklab
from blocklab.repro import dgraid_timed as dt
from blocklab.sweeps.results import Journal, load_meta
from blocklab.sweeps.spec import toml_value

# Cells at --quick: Fig 8 (2 caps x (MD + 4 layouts x 3 shares)), Fig 9 (healthy, MD, live, D-GRAID-1 pair,
# RAID-10 pair with and without allow_loss), Table 2 (2 replays x 5 configs), Fig 7 (2 sizes x 2 replays x
# 4 configs x the trace and its prefix).
QUICK_CELLS = 2 * (1 + 4 * 3) + 6 + 2 * 5 + 2 * 2 * 4 * 2


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("dgraid-timed")
    return out, dt.run_all(out, quick=True, bar=False)


@pytest.fixture(scope="module")
def res(run):
    return run[1]


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
    # Fig 9 again, as a sweep of its own, in folders named relative to the current directory (the
    # cells must still find the traces and the live map).
    from blocklab.sweeps import run_sweep

    monkeypatch.chdir(tmp_path)
    (tmp_path / "again").mkdir()
    plans = {"fig9": dt.fig9_plan(Path("again"), quick=True)}
    df = run_sweep(dt.sweep_spec(plans), "again-out", progress=False)
    again = dt.fig9(plans["fig9"], dt.results_by_case(Path("again-out"), df))
    strip = lambda d: {k: v for k, v in d.items() if k != "series"}  # noqa: E731
    assert {k: strip(v) if isinstance(v, dict) else v for k, v in again.items()} == \
        {k: strip(v) if isinstance(v, dict) else v for k, v in res["fig9"].items()}


PROVENANCE = ("blocklab_version", "git_commit", "stack_sha256", "trace_sha256", "trace_format", "started_at", "wall_s",
              "host", "cell")


def test_the_stack_runs_are_a_sweep(run):
    """The output folder loads as a sweep: one row per cell, every cell with its provenance, all of
    them ok but the one whose refusal is Fig 9's answer for MD (a mirror pair lost without allow_loss)."""
    out, _ = run
    df = blocklab.load(out)
    assert len(df) == QUICK_CELLS == df["cell"].nunique() == df["case"].nunique()
    assert (out / "report.html").stat().st_size > 0
    for col in PROVENANCE:
        assert df[col].notna().all(), col
    assert (df["trace_format"] == "csv").all() and (df["executor"] == "timed").all()
    assert df["stack_sha256"].nunique() == 1
    bad = df[df["status"] != "ok"]
    assert list(bad["case"]) == ["fig9 raid10 pair md"]
    assert "allow_loss" in bad["error"].iloc[0]
    # Every figure's rows come from its cells: Table 2's run times are the cells' simulated times.
    ok = df.set_index("case")
    for r in run[1]["table2"]:
        assert r["run_time_s"] == ok.loc[f"table2 {r['replay']} {r['config']}", "timing.sim_time_ms"] / 1e3


def test_a_cell_is_its_stack_run_alone(run):
    """A cell's result is what `blocklab run` of the recipe's stack gives with that cell's --set
    overrides (Fig 9's live rebuild: the live map named by the cell)."""
    from typer.testing import CliRunner

    from blocklab.cli import app

    out, _ = run
    meta = load_meta(out)
    case = next(c for c in meta["sweep"]["cases"] if c["name"] == "fig9 live")
    df = blocklab.load(out)
    row = df[df["case"] == "fig9 live"].iloc[0]
    args = ["run", meta["sweep"]["stack"], "--trace", row["trace"], "--format", "csv", "--executor", "timed", "--json"]
    for k, v in case.items():
        if k not in ("name", "trace"):
            args += ["--set", f"{k}={toml_value(v)}"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    alone = json.loads(r.output)
    assert alone == Journal(out).records()[row["cell"]]["result"]
    assert alone["rebuild"]["order_stats"]["copied_blocks"] > 0  # the live order ran, with the map
    assert not math.isnan(row["rebuild.rebuild_ms"]) and row["rebuild.rebuild_ms"] == alone["rebuild"]["rebuild_ms"]


def test_cli_timed_writes_the_report(res, tmp_path, monkeypatch, capsys):
    """`blocklab repro dgraid --timed`: the option parsed, the recipe's tables saved, plotted, reported
    (the run itself replaced by the cut-down one above)."""
    from typer.testing import CliRunner

    from blocklab.cli import app

    seen = {}

    def fake_run_all(out, quick=False, progress=None, *, jobs=None, ray=None, bar=True, command=None):
        seen.update(quick=quick, jobs=jobs, ray=ray, command=command)
        return {k: v for k, v in res.items() if k != "out"}

    monkeypatch.setattr(dt, "run_all", fake_run_all)
    r = CliRunner().invoke(app, ["repro", "dgraid", "--timed", "--quick", "--jobs", "2", "-o", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert seen["quick"] is True and seen["jobs"] == 2 and seen["ray"] is None
    assert "Our numbers (in simulated time):" in r.output and "Fig 9: with the reader running" in r.output
    report = (tmp_path / "o" / "dgraid-timed-report.md").read_text()
    assert "### Fig 9 in time" in report
    assert "Verdict in time, claim by claim:" in r.output and "### Verdict in time, claim by claim" in report
    for f in ("fig8", "fig9", "fig9-profile", "table2", "fig7"):
        assert (tmp_path / "o" / f"dgraid-timed-{f}.parquet").stat().st_size > 0
