"""The sweep report's figures as a paper needs them, checked in the files and in a
real headless browser (Debian's chromium, installed by `make tools`): human
labels with units (no raw `layers.0.miss_ratio` on an axis), integer ticks for
integer parameters, ratio axes from 0, equal series named as equal, the legend
outside every plot area, SVG and PDF files linked from the page, 74 case names
on one axis without overlap, and a sweep started from Python that records a
`blocklab sweep` command which runs again."""

from __future__ import annotations

import html
import json
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from test_sweep_report import CHROMIUM, blocklab_cli, chromium

ROOT = Path(__file__).resolve().parents[1]
STACK = ROOT / "python" / "blocklab" / "repro" / "stacks" / "vdf-rgr.toml"
SVG_NS = "{http://www.w3.org/2000/svg}"


def svg_texts(path: Path) -> list[str]:
    """Every text element of an SVG (matplotlib writes text as text: svg.fonttype none)."""
    root = ET.parse(path).getroot()
    return ["".join(t.itertext()).strip() for t in root.iter(f"{SVG_NS}text")]


def tick_texts(path: Path, axis: str) -> list[str]:
    """The tick labels of every `axis` ("x" or "y") of an SVG figure."""
    root = ET.parse(path).getroot()
    return ["".join(t.itertext()).strip() for g in root.iter(f"{SVG_NS}g")
            if g.get("id", "").startswith(f"{axis}tick_") for t in g.iter(f"{SVG_NS}text")]


def browser_boxes(svg: Path, tmp: Path, prefixes: tuple[str, ...]) -> dict[str, list[float]]:
    """Lay the SVG out in chromium and return the boxes (left, top, right, bottom) of its
    elements whose id starts with one of `prefixes`, as the browser measures them."""
    text = svg.read_text()
    text = text[text.index("<svg"):]
    script = ("const out={};for(const e of document.querySelectorAll('[id]')){"
              f"if({json.dumps(list(prefixes))}.some(p=>e.id.startsWith(p))){{"
              "const r=e.getBoundingClientRect();out[e.id]=[r.left,r.top,r.right,r.bottom];}}"
              "document.body.setAttribute('data-boxes',JSON.stringify(out));")
    page = tmp / f"{svg.stem}-harness.html"
    page.write_text(f'<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body style="margin:0">{text}'
                    f"<script>{script}</script></body></html>")
    assert CHROMIUM, "chromium is not installed (make tools installs it)"
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.resolve().as_uri()],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r'data-boxes="([^"]*)"', r.stdout)
    assert m, r.stderr[-2000:]
    return json.loads(html.unescape(m.group(1)))


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    """A counted VDF sweep started from Python (built in code, no sweep file), reported
    with SVG and PDF figures."""
    d = tmp_path_factory.mktemp("paper")
    r = blocklab_cli("trace", "synth", d / "z.csv", "--accesses", "6000", "--universe", "1500", "--alpha", "0.9",
                     "--seed", "3")
    assert r.returncode == 0, r.stderr
    code = f"""
import blocklab
blocklab.sweep(out={str(d / 'out')!r}, stack={str(STACK)!r}, executor="count",
               traces=[({str(d / 'z.csv')!r}, "csv")],
               grid={{"array.disks": [4, 5, 6], "cache.0.policy": ["lru", "arc", "s3fifo"],
                      "cache.0.size": ["5%", "100%"]}})
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=d)
    assert r.returncode == 0, r.stderr
    r = blocklab_cli("report", d / "out", "--out", d / "report.html", "--format", "svg,pdf",
                     "--metric", "layers.0.miss_ratio", "--metric", "array.rgr")
    assert r.returncode == 0, r.stderr
    return d


def test_a_python_sweep_records_a_command_that_runs_again(paper):
    meta = json.loads((paper / "out" / "meta.json").read_text())
    cmd = meta["command"]
    assert cmd.startswith("blocklab sweep ") and "--out" in cmd and "blocklab.sweep(" not in cmd, cmd
    args = shlex.split(cmd)
    assert Path(args[2]).name == "sweep.toml" and Path(args[2]).is_file()
    # Run as written: the same cells (same keys), so every one is already done.
    r = blocklab_cli(*args[1:], "-q")
    assert r.returncode == 0, r.stderr
    assert "18 cells in" in r.stdout and "18 ok, 0 failed" in r.stdout, r.stdout
    rows = [json.loads(line) for line in (paper / "out" / "cells.jsonl").read_text().splitlines()]
    assert len(rows) == 18  # nothing ran twice


def test_every_figure_is_written_as_png_svg_and_pdf_and_linked(paper):
    page = (paper / "report.html").read_text()
    figdir = paper / "report-figures"
    names = ["layers.0.miss_ratio-vs-array.disks", "layers.0.miss_ratio-vs-cache.0.size",
             "array.rgr-vs-array.disks", "array.rgr-vs-cache.0.size"]
    for n in names:
        for ext in ("png", "svg", "pdf"):
            f = figdir / f"{n}.{ext}"
            assert f.is_file() and f.stat().st_size > 1000, f
            assert f'href="report-figures/{n}.{ext}"' in page
    assert (figdir / f"{names[0]}.pdf").read_bytes().startswith(b"%PDF")
    # The page itself needs nothing else: its images are inline; the links are the files.
    assert not re.search(r'src="(?!data:)', page)
    assert set(re.findall(r'href="([^"]+)"', page)) - {"data:,"} == {
        f"report-figures/{n}.{ext}" for n in names for ext in ("png", "svg", "pdf")}


def test_axes_have_human_labels_integer_ticks_and_start_at_zero(paper):
    figdir = paper / "report-figures"
    texts = svg_texts(figdir / "layers.0.miss_ratio-vs-array.disks.svg")
    # (a long y label is set on two lines: text, then unit)
    assert "Miss ratio, cache layer 0 (fraction of accesses)" in " ".join(texts)
    assert "Disks in the array" in texts
    assert "Replacement policy (layer 0)" in texts  # the legend's title
    # No raw key as a label anywhere in the figure.
    assert not any(re.fullmatch(r"[a-z_]+\.\d+\.[a-z_.]+|array\.disks", t) for t in texts), texts
    # Integer parameter: ticks at 4, 5, 6 only (no 4.5).
    assert set(tick_texts(figdir / "layers.0.miss_ratio-vs-array.disks.svg", "x")) == {"4", "5", "6"}
    # Readable sizes: no text under 10 px (10 pt at 72 dpi).
    root = ET.parse(figdir / "layers.0.miss_ratio-vs-array.disks.svg").getroot()
    sizes = [float(m) for t in root.iter(f"{SVG_NS}text")
             for m in re.findall(r"font-size: ([\d.]+)px", t.get("style", ""))]
    assert sizes and min(sizes) >= 10, sizes
    # A ratio's axis starts at 0.
    rgr = svg_texts(figdir / "array.rgr-vs-cache.0.size.svg")
    assert "RGR: surviving-disk I/O per access (blocks per block accessed)" in " ".join(rgr)
    assert float(tick_texts(figdir / "array.rgr-vs-cache.0.size.svg", "y")[0]) == 0
    assert "Host cache size (layer 0)" in rgr and "5%" in rgr and "100%" in rgr


def test_equal_series_are_named_in_the_caption(paper):
    page = html.unescape((paper / "report.html").read_text())
    # A cache of the whole footprint misses only cold blocks, whatever the policy.
    assert re.search(r"lru = arc = s3fifo in 1 of 2 panels \(differ by less than 0\.001", page), page[:3000]
    assert "resolution 0.001: smaller differences are not differences here" in page
    # The raw keys stay in the caption and tooltips.
    assert "[layers.0.miss_ratio]" in page and 'title="layers.0.miss_ratio against array.disks"' in page


def test_the_legend_covers_no_plot_area_in_the_browser(paper, tmp_path):
    for svg in sorted((paper / "report-figures").glob("*.svg")):
        boxes = browser_boxes(svg, tmp_path, ("legend", "plotarea-"))
        areas = {k: v for k, v in boxes.items() if k.startswith("plotarea-")}
        assert "legend" in boxes and areas, (svg.name, boxes)
        for k, a in areas.items():
            assert not overlap(boxes["legend"], a), (svg.name, k, boxes)


def test_the_report_page_renders_at_1400px(paper):
    shot = paper / "shot.png"
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--screenshot={shot}", "--window-size=1400,3000", (paper / "report.html").resolve().as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert shot.is_file(), r.stderr
    assert chromium(paper / "report.html", paper / "shot-console.png") == []
    # The cell table scrolls inside the page instead of widening it.
    assert '<div class="scroll"><table class="cells">' in (paper / "report.html").read_text()


def test_74_case_names_stay_readable(tmp_path):
    r = blocklab_cli("trace", "synth", tmp_path / "z.csv", "--accesses", "3000", "--universe", "900", "--alpha",
                     "0.9", "--seed", "4")
    assert r.returncode == 0, r.stderr
    cases = "".join(f'\n[[cases]]\nname = "cache of {n} blocks, case {i:02d}"\n"cache.0.size" = {n}\n'
                    for i, n in enumerate(range(10, 750, 10)))
    (tmp_path / "s.toml").write_text(f"""\
name = "many cases"
stack = "{STACK}"
executor = "count"
[[traces]]
path = "z.csv"
format = "csv"
[report]
metrics = ["layers.0.miss_ratio"]
{cases}""")
    r = blocklab_cli("sweep", tmp_path / "s.toml", "--out", tmp_path / "out", "-q")
    assert r.returncode == 0, r.stderr
    r = blocklab_cli("report", tmp_path / "out", "--format", "svg")
    assert r.returncode == 0, r.stderr
    svg = tmp_path / "out" / "report-figures" / "layers.0.miss_ratio-vs-case.svg"
    texts = svg_texts(svg)
    names = [f"cache of {n} blocks, case {i:02d}" for i, n in enumerate(range(10, 750, 10))]
    assert all(n in texts for n in names)  # every name written out, none dropped or abbreviated
    boxes = browser_boxes(svg, tmp_path, ("ytick_",))
    rows = sorted(boxes.values(), key=lambda b: b[1])
    assert len(rows) >= 74
    # One name per row: no two tick labels overlap.
    for a, b in zip(rows, rows[1:]):
        assert not overlap(a, b), (a, b)
