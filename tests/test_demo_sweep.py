"""`make demo`'s last question (examples/sweeps/demo-vdf-zipf.toml), on a small Zipf
trace of the same kind: the report's first figure is RGR against the host-cache
size, one line per policy, and the effect shows in it (RGR falls as the cache
grows, for every policy)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from test_sweep_report import blocklab_cli

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "examples" / "sweeps" / "demo-vdf-zipf.toml"


def test_the_demo_sweep_answers_in_its_first_figure(tmp_path):
    spec = tomllib.loads(DEMO.read_text())
    r = blocklab_cli("trace", "synth", tmp_path / "z.csv", "--accesses", "20000", "--universe", "4000", "--alpha",
                     "0.9", "--seed", "1")
    assert r.returncode == 0, r.stderr
    # The demo's file as it is, its trace swapped for the small one.
    text = DEMO.read_text().replace(spec["traces"][0]["path"], str(tmp_path / "z.csv"))
    text = text.replace(f'stack = "{spec["stack"]}"', f'stack = "{(DEMO.parent / spec["stack"]).resolve()}"')
    (tmp_path / "demo.toml").write_text(text)
    r = blocklab_cli("sweep", tmp_path / "demo.toml", "--out", tmp_path / "out", "--jobs", "2", "-q")
    assert r.returncode == 0, r.stderr
    assert "16 ok, 0 failed" in r.stdout
    r = blocklab_cli("report", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "out" / "report.html").read_text()
    first = re.search(r'<figure><img alt="([^"]*)" title="([^"]*)"', page)
    assert first and first.group(2) == "array.rgr against cache.0.size", first and first.groups()
    import blocklab

    df = blocklab.load(tmp_path / "out")
    for policy, g in df.groupby("cache.0.policy"):
        rgr = [float(g[g["cache.0.size"] == s]["array.rgr"].iloc[0]) for s in ("1%", "5%", "10%", "20%")]
        assert rgr == sorted(rgr, reverse=True) and rgr[0] > 1.5 * rgr[-1], (policy, rgr)
