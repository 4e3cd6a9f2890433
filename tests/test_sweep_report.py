"""`blocklab report`: one self-contained HTML page, loaded in a real headless
browser (Debian's chromium, installed by `make test`): no console errors, and
a screenshot that shows the plots."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
STACK = ROOT / "examples" / "stacks" / "host-lru-raid5.toml"

CHROMIUM = shutil.which("chromium")


def blocklab_cli(*args):
    cmd = [sys.executable, "-c", "from blocklab.cli import main; main()", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True)


def chromium(page: Path, shot: Path, height: int = 2600) -> list[str]:
    """Load `page` headless, save a screenshot; the console messages it logged."""
    assert CHROMIUM, "chromium is not installed (make test installs it)"
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--enable-logging=stderr", "--v=0", f"--screenshot={shot}", f"--window-size=1280,{height}",
                        page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.exists(), r.stderr
    return [line for line in r.stderr.splitlines() if ":CONSOLE" in line]


def pixels(shot: Path) -> np.ndarray:
    import matplotlib.image as mpimg

    return (mpimg.imread(shot)[:, :, :3] * 255).round().astype(int)


def near(img: np.ndarray, hex_color: str, tol: int = 40) -> int:
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(img - rgb).sum(axis=2) < tol).sum())


def test_the_console_check_sees_errors(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body>x'
                   '<script>console.error("marker-42"); notAFunction();</script></body></html>')
    msgs = chromium(bad, tmp_path / "bad.png", 400)
    assert any("marker-42" in m for m in msgs) and any("notAFunction" in m for m in msgs), msgs
    # ... and the pixel checks below see that a page without plots has none.
    img = pixels(tmp_path / "bad.png")
    assert near(img, "#1f77b4") == 0 and (img.sum(axis=2) < 3 * 245).mean() < 0.01


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("rep")
    r = blocklab_cli("trace", "synth", d / "z.csv", "--accesses", "3000", "--universe", "800", "--alpha", "0.9",
                     "--seed", "5")
    assert r.returncode == 0, r.stderr
    (d / "s.toml").write_text(f"""\
name = "host cache"
stack = "{STACK}"
executor = "timed"
[[traces]]
path = "z.csv"
format = "csv"
[grid]
"cache.0.policy" = ["lru", "arc"]
"cache.0.size" = [50, 200, 400]
""")
    r = blocklab_cli("sweep", d / "s.toml", "--out", d / "out", "-q")
    assert r.returncode == 0, r.stderr
    r = blocklab_cli("report", d / "out", "--out", d / "report.html")
    assert r.returncode == 0, r.stderr
    return d


def test_the_page_is_self_contained_and_complete(report):
    page = (report / "report.html").read_text()
    # Nothing to fetch at view time: no external URL, every image inline; the only links
    # are to the figures' own files, written next to the page.
    assert not re.search(r'src="(?!data:)', page)
    assert not re.search(r'href="(?!data:|report-figures/[^"/]+\.png")', page)
    imgs = re.findall(r'<img [^>]*src="data:image/png;base64,', page)
    # miss ratio, RGR, surviving reads, mean and p99 response, utilization against the size (lines per
    # policy), and the response-time CDFs.
    assert len(imgs) == 7, len(imgs)
    for m in ("layers.0.miss_ratio", "response.avg_ms", "response.p99_ms", "Response-time distributions"):
        assert m in page
    # Each figure carries the command and the provenance of its cells.
    assert page.count("<figcaption><code>blocklab sweep ") == 7
    assert page.count("6 cell(s); blocklab ") == 7 and "sha256" in page
    # One table row per cell, each with the command that reruns it.
    assert page.count("<summary>rerun</summary>") == 6
    assert page.count("--set &#x27;cache.0.policy=&quot;arc&quot;&#x27;") == 3


def test_chromium_loads_it_without_console_errors_and_shows_the_plots(report):
    shot = report / "shot.png"
    msgs = chromium(report / "report.html", shot)
    assert msgs == [], msgs
    img = pixels(shot)
    nonwhite = (img.sum(axis=2) < 3 * 245).mean()
    assert nonwhite > 0.03, nonwhite
    # The two policies' lines in matplotlib's first two colours.
    assert near(img, "#1f77b4") > 300 and near(img, "#ff7f0e") > 300
