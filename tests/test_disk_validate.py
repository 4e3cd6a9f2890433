"""`blocklab disk validate` end to end (skipped without ../shared)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from blocklab.repro.disks import DRIVES

ROOT = Path(__file__).resolve().parents[1]
VALID = Path(os.environ.get("BLOCKLAB_SHARED", ROOT.parent / "shared")) / "disk-models" / "disksim-valid"


def run(*args: str) -> subprocess.CompletedProcess:
    code = "import sys; from blocklab.cli import main; sys.argv = [\"blocklab\", *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


@pytest.mark.skipif(not VALID.exists(), reason="../shared not present")
def test_validate_writes_one_response_per_request(tmp_path):
    out = tmp_path / "resp.txt"
    r = run("disk", "validate", str(VALID / "atlas10k.parv"), "--trace", str(VALID / "atlas10k.trace"),
            "--responses", str(out), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert set(res) >= {"demerit_ms", "demerit_pct", "mean_measured_ms", "mean_simulated_ms"}
    assert res["demerit_ms"] <= 0.268  # DiskSim 4.0's own figure on this drive
    lines = out.read_text().split()
    assert len(lines) == 10_000
    mean = sum(map(float, lines)) / len(lines)
    assert abs(mean - res["mean_simulated_ms"]) < 1e-3


# DiskSim 4.0's own demerit figures (ms) on the ten validation traces
# (../shared/disk-models/README.md): the target for every drive.
DISKSIM_DEMERIT = {d.file: d.disksim_ms for d in DRIVES}


@pytest.mark.skipif(not VALID.exists(), reason="../shared not present")
@pytest.mark.parametrize("drive", sorted(DISKSIM_DEMERIT))
def test_every_drive_is_at_most_disksims_demerit(drive):
    r = run("disk", "validate", str(VALID / f"{drive}.parv"), "--trace", str(VALID / f"{drive}.trace"), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["demerit_ms"] <= DISKSIM_DEMERIT[drive]
    # The model's mean is close to the drive's (within 5 %).
    assert abs(res["mean_simulated_ms"] / res["mean_measured_ms"] - 1) < 0.05


def test_bad_trace_line_is_reported_with_its_line(tmp_path):
    spec = ROOT / "examples" / "disks" / "ultrastar-73lzx.toml"
    trace = tmp_path / "bad.trace"
    trace.write_text("R Hit 100 8 5000.0 20000.0\nR Hit 200 x 5000.0 20000.0\n")
    r = run("disk", "validate", str(spec), "--trace", str(trace), "--json")
    assert r.returncode == 2
    assert "line 2" in r.stderr and "bcount" in r.stderr


def test_native_spec_validates_a_synthetic_trace(tmp_path):
    spec = ROOT / "examples" / "disks" / "ultrastar-73lzx.toml"
    trace = tmp_path / "ok.trace"
    trace.write_text("".join(f"R Hit {i * 100_003 % 70_000_000} 8 6000.0 20000.0\n" for i in range(50)))
    r = run("disk", "validate", str(spec), "--trace", str(trace), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    # Random 4 KiB reads on a 10K RPM, 4.9 ms-seek drive: a few ms each.
    assert 3.0 < res["mean_simulated_ms"] < 15.0


@pytest.mark.skipif(not VALID.exists(), reason="../shared not present")
def test_repro_disks_writes_the_table_and_the_plot(tmp_path):
    out = tmp_path / "rd"
    r = run("repro", "disks", "--dir", str(VALID), "--drives", "ibm18es,hp_c2247a", "--out", str(out))
    assert r.returncode == 0, r.stderr
    import pandas as pd

    t = pd.read_csv(out / "disks-validation.csv")
    assert list(t["file"]) == ["ibm18es", "hp_c2247a"]
    assert list(t["disksim_demerit_ms"]) == [0.136, 0.090]
    assert list(t["requests"]) == [10_000, 9_999]  # the C2247A trace has 9,999 lines
    assert t["at_most_disksim"].all()
    # The printed Markdown is the file's, and names both drives.
    md = (out / "disks-validation.md").read_text()
    assert md in r.stdout and "IBM 18ES" in md and "2 of 2 drives" in md
    assert (out / "disks-cdf.png").stat().st_size > 10_000
    # Then DiskSim's runvalid table beside the values it states.
    rv = (out / "disks-runvalid.md").read_text()
    assert rv in r.stdout
    assert "| ASCII input | ascii.parv | avg_response_ms | 13.8 |" in rv
    assert "| Set of disk arrays at device driver | syntharrays.parv | overall_response_ms | 34.3 |" in rv
    rt = pd.read_csv(out / "disks-runvalid.csv")
    assert len(rt) == 12 and rt["within_5pct"].sum() >= 10


def test_repro_disks_bad_options_exit_2(tmp_path):
    r = run("repro", "disks", "--dir", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--dir" in r.stderr
    r = run("repro", "disks", "--dir", str(tmp_path), "--drives", "floppy", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "unknown drive `floppy`" in r.stderr
    # A folder without the drive's files names the missing file.
    r = run("repro", "disks", "--dir", str(tmp_path), "--drives", "ibm18es", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "ibm18es.parv" in r.stderr
