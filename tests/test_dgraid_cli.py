"""`blocklab fs ...` and `blocklab dgraid ...`: JSON contracts, closed forms, real mke2fs, bad input exits 2."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LISTING = ROOT / "data" / "debian-tree.lst"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from blocklab.cli import main; main()", *args],
                          capture_output=True, text=True)


def ok_json(*args: str):
    r = run(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


GROUP_KEYS = {"group", "start", "end", "superblock", "descriptors", "reserved_descriptors", "block_bitmap",
              "inode_bitmap", "inode_table"}


def test_geometry_json_contract_and_values():
    groups = ok_json("fs", "geometry", "--size", "8MiB", "--block-size", "1024")
    assert [set(g) for g in groups] == [GROUP_KEYS]
    # dumpe2fs of `mke2fs -t ext2 -b 1024 img 8192` (e2fsprogs 1.47).
    assert groups[0] == {"group": 0, "start": 1, "end": 8191, "superblock": 1, "descriptors": [2, 2],
                         "reserved_descriptors": [3, 33], "block_bitmap": 34, "inode_bitmap": 35,
                         "inode_table": [36, 547]}
    groups = ok_json("fs", "geometry", "--size", "300MiB", "--block-size", "4096")
    assert len(groups) == 3 and groups[2]["superblock"] is None and groups[1]["superblock"] == 32768


def _mke2fs_groups(tmp_path: Path, size: int, bs: int) -> list[dict]:
    mke2fs = shutil.which("mke2fs") or "/usr/sbin/mke2fs"
    dumpe2fs = shutil.which("dumpe2fs") or "/usr/sbin/dumpe2fs"
    img = tmp_path / "x.img"
    subprocess.run([mke2fs, "-q", "-F", "-t", "ext2", "-b", str(bs), str(img), str(size // bs)], check=True,
                   env={"LC_ALL": "C", "PATH": "/usr/sbin:/sbin:/usr/bin:/bin"})
    text = subprocess.run([dumpe2fs, str(img)], check=True, capture_output=True, text=True).stdout
    groups, g = [], None

    def rng(s):
        a, _, b = s.strip().partition("-")
        return [int(a), int(b or a)]

    for line in text.splitlines():
        s = line.strip()
        if s.startswith("Group "):
            a, b = rng(s.split("(Blocks ")[1].split(")")[0])
            g = {"group": len(groups), "start": a, "end": b, "superblock": None, "descriptors": None,
                 "reserved_descriptors": None}
            groups.append(g)
        elif g is None:
            continue
        elif "superblock at" in s:
            sb, desc = s.split(", Group descriptors at ")
            g["superblock"] = int(sb.split("at ")[1])
            g["descriptors"] = rng(desc)
        elif s.startswith("Reserved GDT blocks at "):
            g["reserved_descriptors"] = rng(s.split(" at ")[1])
        elif s.startswith("Block bitmap at "):
            g["block_bitmap"] = int(s.split()[3])
        elif s.startswith("Inode bitmap at "):
            g["inode_bitmap"] = int(s.split()[3])
        elif s.startswith("Inode table at "):
            g["inode_table"] = rng(s.split()[3])
    return groups


@pytest.mark.parametrize("size, bs", [(70 << 20, 1024), (96 << 20, 2048), (600 << 20, 4096)])
def test_geometry_equals_real_mke2fs(tmp_path, size, bs):
    assert ok_json("fs", "geometry", "--size", str(size), "--block-size", str(bs)) == _mke2fs_groups(tmp_path, size, bs)


def test_geometry_bad_input_exits_2():
    for args, needle in [(["--size", "64MiB", "--block-size", "3000"], "power of two"),
                         (["--size", "10KiB", "--block-size", "1024"], "too small"),
                         (["--size", "lots", "--block-size", "1024"], "bad size")]:
        r = run("fs", "geometry", *args)
        assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def _dense_listing(tmp_path: Path) -> Path:
    """Every directory, the root included, holds at least one file."""
    lines = ["f 5000 /top.txt"]
    for i in range(9):
        parent = f"/d{i // 3}" if i >= 3 else ""
        lines.append(f"d 4096 {parent}/d{i}")
        for f in range(1 + i % 3):
            lines.append(f"f {3000 + 7000 * f} {parent}/d{i}/f{f}")
    p = tmp_path / "dense.lst"
    p.write_text("\n".join(lines) + "\n")
    return p


AVAIL_KEYS = {"failed_count", "files_available", "dirs_available", "processes_available", "namespace_navigable"}


def test_avail_json_contract_and_full_replication_closed_form(tmp_path):
    tree = _dense_listing(tmp_path)
    d = 6
    args = ["dgraid", "avail", "--tree", str(tree), "--disks", str(d), "--meta-copies", str(d), "--grouping", "dir",
            "--failed-count", f"0..{d - 1}", "--trials", "50", "--seed", "3", "--block-size", "1024"]
    rows = ok_json(*args)
    assert [r["failed_count"] for r in rows] == list(range(d))
    for r in rows:
        assert AVAIL_KEYS <= set(r)
        assert all(0.0 <= r[k] <= 1.0 for k in AVAIL_KEYS - {"failed_count"})
        # Full replication, directory grouping: a directory is lost exactly when its home disk is.
        assert r["dirs_available"] == pytest.approx((d - r["failed_count"]) / d, abs=1e-12)
        assert r["namespace_navigable"] == 1.0
    assert rows == ok_json(*args), "same seed, same output"


def test_raid10_md_closed_form_and_raid0(tmp_path):
    tree = _dense_listing(tmp_path)
    rows = ok_json("dgraid", "avail", "--tree", str(tree), "--level", "raid10", "--disks", "8", "--failed-count", "0..5",
                   "--trials", "10", "--seed", "1", "--semantics", "md")
    for r in rows:
        k = r["failed_count"]
        want = math.comb(4, k) * 2 ** k / math.comb(8, k) if k <= 4 else 0.0
        assert r["files_available"] == pytest.approx(want, abs=1e-12)
    r0 = ok_json("dgraid", "avail", "--tree", str(tree), "--level", "raid0", "--disks", "4", "--failed-count", "0,1,2",
                 "--trials", "10", "--seed", "1")
    assert [r["files_available"] for r in r0] == [1.0, 0.0, 0.0]


def test_popular_replication_helps_processes():
    base = ["dgraid", "avail", "--tree", str(LISTING), "--disks", "8", "--meta-copies", "8", "--failed-count", "2",
            "--trials", "50", "--seed", "1", "--processes", "300"]
    plain = ok_json(*base)[0]
    popular = ok_json(*base, "--popular-copies", "8")[0]
    assert popular["processes_available"] > plain["processes_available"] + 0.2


@pytest.mark.parametrize("args, needle", [
    (["--level", "raid7"], "raid10"),
    (["--failed-count", "9"], "exceeds"),
    (["--failed-count", "x"], "--failed-count"),
    (["--meta-copies", "5"], "meta-copies"),
    (["--semantics", "md"], "block"),
    (["--grouping", "disk"], "grouping"),
    (["--level", "dgraid1", "--disks", "3"], "even"),
])
def test_avail_bad_input_exits_2(tmp_path, args, needle):
    tree = _dense_listing(tmp_path)
    base = {"--disks": "4", "--failed-count": "1"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    flat = [x for kv in base.items() for x in kv]
    r = run("dgraid", "avail", "--tree", str(tree), *flat)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_malformed_listing_names_file_line_field(tmp_path):
    bad = tmp_path / "bad.lst"
    bad.write_text("d 4096 /a\nf big /a/b\n")
    r = run("dgraid", "avail", "--tree", str(bad), "--disks", "4", "--failed-count", "1")
    assert r.returncode == 2
    assert "bad.lst: line 2: field `size`" in r.stderr, r.stderr
    r = run("dgraid", "avail", "--disks", "4", "--failed-count", "1")
    assert r.returncode == 2 and "no tree" in r.stderr


def test_space_is_linear_in_copies(tmp_path):
    rows = ok_json("dgraid", "space", "--dirs", "40", "--files", "400", "--block-size", "1KiB,4KiB",
                   "--meta-copies", "1,4,16")
    for bs in (1024, 4096):
        one = next(r for r in rows if r["block_size"] == bs and r["meta_copies"] == 1)
        for r in (x for x in rows if x["block_size"] == bs):
            assert r["dir_block_copies"] == r["meta_copies"] * r["dir_blocks"]
            assert r["overhead_pct"] == pytest.approx(r["meta_copies"] * one["overhead_pct"], rel=1e-12)


def test_space_vfat_rows_and_the_allocator_flag():
    rows = ok_json("dgraid", "space", "--dirs", "10", "--files", "60", "--meta-copies", "1,4", "--vfat", "1KiB,4KiB")
    vfat = [r for r in rows if r["fs"] == "vfat"]
    assert sorted({r["block_size"] for r in vfat}) == [1024, 4096] and len(rows) == 8
    for r in vfat:
        one = next(x for x in vfat if x["block_size"] == r["block_size"] and x["meta_copies"] == 1)
        assert r["overhead_pct"] == pytest.approx(r["meta_copies"] * one["overhead_pct"], rel=1e-12)
    # Linux 2.2's allocator writes the same blocks, elsewhere: the counts stay k-fold.
    pm = ok_json("dgraid", "postmark", "--meta-copies", "1,2", "--files", "60", "--transactions", "100",
                 "--size", "256MiB", "--allocator", "linux22")
    assert pm[2]["unique_metadata"] == 2 * pm[1]["unique_metadata"]
    bad = run("dgraid", "postmark", "--allocator", "linux26")
    assert bad.returncode == 2 and "--allocator" in bad.stderr and "linux22" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_postmark_unique_metadata_scales_exactly():
    rows = ok_json("dgraid", "postmark", "--disks", "4", "--meta-copies", "1..4", "--files", "100",
                   "--transactions", "300", "--size", "64MiB")
    assert rows[0]["config"] == "raid0"
    one = rows[1]
    for r in rows[1:]:
        k = r["meta_copies"]
        assert r["unique_metadata"] == k * one["unique_metadata"]
        assert r["metadata_writes"] == k * one["metadata_writes"]
        assert r["blocks_written"] - one["blocks_written"] == (k - 1) * one["metadata_writes"]


def test_fs_trace_is_an_annotated_native_csv(tmp_path):
    out = tmp_path / "t.csv"
    s = ok_json("fs", "trace", str(out), "--dirs", "5", "--files", "30", "--block-size", "1024")
    lines = out.read_text().splitlines()
    assert lines[0] == "timestamp,op,offset,size,tenant,owner,kind,parent"
    assert len(lines) - 1 == s["requests"]
    kinds = {line.split(",")[6] for line in lines[1:]}
    assert {"superblock", "directory", "data", "inode-table", "block-bitmap"} <= kinds
    r = run("trace", "stats", str(out), "--format", "csv", "--json")
    assert r.returncode == 0, r.stderr


def test_place_an_annotated_trace(tmp_path):
    out = tmp_path / "t.csv"
    s = ok_json("fs", "trace", str(out), "--dirs", "5", "--files", "40", "--block-size", "1024")
    reps = [ok_json("dgraid", "place", str(out), "--fs-size", str(s["fs_bytes"]), "--block-size", "1024",
                    "--disks", "4", "--meta-copies", str(r)) for r in (1, 2)]
    assert reps[1]["counts"]["unique_metadata_blocks"] == 2 * reps[0]["counts"]["unique_metadata_blocks"]
    assert reps[0]["counts"]["logical_writes"] == s["writes"]
    bad = tmp_path / "bad.csv"
    bad.write_text("0,W,0,1024,0,3,dir,2\n")
    r = run("dgraid", "place", str(bad), "--fs-size", "8MiB", "--block-size", "1024")
    assert r.returncode == 2 and "bad.csv: line 1: field `kind`" in r.stderr, r.stderr


def test_live_synthetic_and_model():
    rows = ok_json("dgraid", "live", "--live-frac", "0.25", "--layout", "spread", "--disk-blocks", "1000",
                   "--disks", "2")
    assert rows[0]["live_blocks"] == 250 and rows[0]["live"]["runs"][0] == [3, 1]
    rows = ok_json("dgraid", "live", "--dirs", "10", "--files", "100", "--disks", "4", "--level", "dgraid1")
    assert len(rows) == 4 and all(0 < r["live_fraction"] < 1 for r in rows)
    r = run("dgraid", "live", "--live-frac", "0.5", "--disks", "2")
    assert r.returncode == 2 and "disk-blocks" in r.stderr


def test_diffusion_counted():
    rows = ok_json("dgraid", "diffusion", "--sizes", "4KiB,8MiB")
    assert rows[0]["dgraid_parallelism"] == 1.0
    assert rows[1]["dgraid_parallelism"] == pytest.approx(1.0)
    assert rows[1]["diffused_parallelism"] > 0.9 * rows[1]["raid0_parallelism"]


def test_seqread_reads_the_flush_files_before_the_measured_read(tmp_path):
    out = tmp_path / "seq.csv"
    s = ok_json("dgraid", "seqread", str(out), "--file-size", "256KiB", "--passes", "1", "--flush-files", "2",
                "--flush-size", "1MiB")
    assert [p[0] for p in s["phases"]] == ["write", "pass1", "flush", "measured"]
    rows = out.read_text().splitlines()[1:]
    assert len(rows) == s["requests"]
    start = sum(p[1] for p in s["phases"][:2])
    flush = rows[start:start + s["phases"][2][1]]
    # The flush phase reads both flush files whole (2 x 1 MiB of data), nothing of the file.
    data = [r.split(",") for r in flush if r.split(",")[6] == "data"]
    assert sum(int(r[3]) for r in data) == 2 << 20
    measured_owner = {r.split(",")[5] for r in rows[-s["phases"][3][1]:] if r.split(",")[6] == "data"}
    assert not measured_owner & {r[5] for r in data}
