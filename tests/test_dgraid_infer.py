"""`blocklab dgraid infer`: ext2 images, and ext4 made with `-O ^extents,^64bit` (journal, checksums,
flex_bg), made by `mke2fs -d` written through the inference classifier in several orders; every in-use
block's inferred owner and kind must equal debugfs's (the truth module `blocklab.repro.ext2_truth`),
extended-attribute blocks and the journal's included, and every parent too (a hard-linked file's is
the lowest directory naming it). Bad input, and ext4 with extents, exit 2 with one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from blocklab.repro import ext2_truth

ORDERS = "sequential,reverse,seeded:7,seeded:8,files"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from blocklab.cli import main; main()", *args],
                          capture_output=True, text=True)


def infer(*args: str) -> list[dict]:
    r = run("dgraid", "infer", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def mke2fs() -> str:
    return shutil.which("mke2fs") or "/usr/sbin/mke2fs"


def make_tree(root: Path, bs: int) -> None:
    """Deep directories, a file past the direct pointers, one past the single indirect block (double
    indirect), fast and slow symlinks, empty files, hard links, a directory of many entries."""
    deep = root / "a" / "b" / "c" / "d" / "e" / "f"
    deep.mkdir(parents=True)
    (root / "many").mkdir()
    per = bs // 4
    rnd = __import__("random").Random(5)
    (root / "a" / "small").write_bytes(rnd.randbytes(bs * 3 + 17))
    (root / "a" / "b" / "past-direct").write_bytes(rnd.randbytes(bs * 20))
    (root / "a" / "b" / "c" / "double").write_bytes(rnd.randbytes(bs * (12 + per + 40)))
    (deep / "leaf").write_bytes(rnd.randbytes(bs * 2))
    (root / "empty").write_bytes(b"")
    (deep / "empty2").write_bytes(b"")
    os.symlink("small", root / "a" / "fast-link")
    os.symlink("x" * 120 + "/target", root / "a" / "slow-link")
    os.link(root / "a" / "small", root / "many" / "hard")
    os.link(root / "a" / "small", deep / "hard2")
    for i in range(150):
        (root / "many" / f"entry-with-a-long-name-{i:04d}").write_bytes(rnd.randbytes(i * 37))


def add_xattrs(root: Path) -> int:
    """Attributes too large for the inode (an xattr block each) on a file, an empty file and a directory;
    each value differs (a kernel would share equal blocks; mke2fs -d never does). How many were set."""
    n = 0
    for i, rel in enumerate(["a/small", "empty", "a/b"]):
        try:
            os.setxattr(root / rel, "user.blocklab", bytes([65 + i]) * 700)
            n += 1
        except OSError:
            pass  # a tmp file system without user xattrs: the blocks are simply not there
    return n


EXT4 = ["-t", "ext4", "-O", "^extents,^64bit"]


@pytest.fixture(scope="module", params=[(1024, 24 * 1024, ["-t", "ext2"]),
                                        (4096, 6000, ["-t", "ext2", "-g", "2048", "-O", "flex_bg"]),
                                        (1024, 24 * 1024, EXT4),
                                        # with the orphan file (e2fsprogs 1.47.1's ext4 default)
                                        (4096, 6000, ["-t", "ext4", "-O", "^extents,^64bit,orphan_file", "-g", "2048"])],
                ids=["1k-3groups", "4k-flexbg", "ext4-1k", "ext4-4k"])
def image(request, tmp_path_factory) -> tuple[Path, int]:
    bs, blocks, extra = request.param
    d = tmp_path_factory.mktemp(f"img{bs}")
    make_tree(d / "tree", bs)
    add_xattrs(d / "tree")
    img = d / "fs.img"
    subprocess.run([mke2fs(), "-q", "-F", *extra, "-b", str(bs), "-d", str(d / "tree"), str(img),
                    str(blocks)], check=True, capture_output=True)
    return img, bs


def test_truth_covers_every_in_use_block(image):
    img, bs = image
    truth, facts = ext2_truth.extract(str(img))
    _, header = ext2_truth.static_blocks(str(img))
    first = int(header["First block"])
    in_use = int(header["Block count"]) - first - int(header["Free blocks"])
    assert len(truth) == in_use
    kinds = {t.kind for t in truth.values()}
    assert {"indirect", "directory", "data", "inode-table", "superblock"} <= kinds
    # The double-indirect file: 12 direct, one IND, a DIND with one IND under it.
    per = bs // 4
    owners = [o for o in {t.owner for t in truth.values()}
              if sum(1 for t in truth.values() if t.owner == o and t.kind == "data") == 12 + per + 40]
    assert len(owners) == 1
    assert sum(1 for t in truth.values() if t.owner == owners[0] and t.kind == "indirect") == 3
    # Each attribute set above has its own block, owned by its inode.
    xattrs = [t for t in truth.values() if t.kind == "xattr"]
    assert len(xattrs) == len({t.owner for t in xattrs}) == add_xattrs(img.parent / "tree")
    if "has_journal" in header.get("Filesystem features", ""):
        # ext4's journal: the data and indirect blocks of inode 8, as any file's.
        jdata = sum(1 for t in truth.values() if t.owner == 8 and t.kind == "data")
        assert jdata == int(header["Total journal blocks"]) > 0, jdata
        assert any(t.owner == 8 and t.kind == "indirect" for t in truth.values())


def test_every_order_infers_every_block(image):
    img, _ = image
    for r in infer(str(img), "--order", ORDERS):
        assert r["written"] > 0
        bad = [e for e in r["examples"]]
        assert (r["correct"], r["wrong"], r["unknown"]) == (r["in_use"], 0, 0), (r["order"], bad)
        assert r["misplaced_inferred"] == 0, r["order"]
        assert r["misplaced_truth"] == 0, r["order"]
        assert r["counts"]["bad_pointers"] == 0


def test_a_small_deferred_list_overflows_and_is_corrected(image):
    img, _ = image
    (r,) = infer(str(img), "--order", "files", "--deferred-max", "8")
    # Data first, metadata last: almost every data block waits; the list of 8 overflows, the oldest are
    # placed by default and retagged when their inodes are written.
    assert r["counts"]["overflow_placed"] > 100
    assert r["counts"]["retags"] >= r["counts"]["overflow_placed"] - 8
    assert (r["correct"], r["wrong"], r["unknown"]) == (r["in_use"], 0, 0), r["examples"]
    assert r["misplaced_inferred"] == 0
    # Without the remapping, the blocks first placed by default would have stayed off their home site.
    assert 0 < r["misplaced_without_remap"] <= r["counts"]["overflow_placed"]
    assert r["remaps_inferred"] >= r["misplaced_without_remap"]


def test_grouping_by_directory_uses_the_inferred_parents(image):
    img, _ = image
    # /a/small has three links (a, many, a/b/c/d/e/f): its parent is the lowest directory inode naming
    # it, for the inferrer (whatever order it saw the entries in) as for the truth. Every block's parent
    # is right, and with grouping by directory nothing is misplaced.
    truth, _ = ext2_truth.extract(str(img))
    linked = ext2_truth.inode_of(str(img), "/a/small")
    linked_blocks = [t for t in truth.values() if t.owner == linked]
    assert len(linked_blocks) == 4 + ("xattr" in {t.kind for t in truth.values()})
    assert {t.parent for t in linked_blocks} == {ext2_truth.inode_of(str(img), "/a")}
    for r in infer(str(img), "--order", "sequential,reverse,seeded:3,files", "--grouping", "dir", "--disks", "6",
                   "--meta-copies", "3"):
        assert r["correct"] == r["in_use"], r["order"]
        assert r["parent_correct"] == r["in_use"], (r["order"], r["examples"])
        assert r["misplaced_truth"] == 0
        assert r["misplaced_inferred"] == 0, r["order"]


def test_refused_and_bad_input_exit_2(tmp_path):
    junk = tmp_path / "junk.img"
    junk.write_bytes(b"\0" * 65536)
    r = run("dgraid", "infer", str(junk))
    assert r.returncode == 2 and "junk.img" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    # ext4 with extents (mke2fs's default) is refused, saying how to make one that is inferred.
    ext4 = tmp_path / "ext4.img"
    subprocess.run([mke2fs(), "-q", "-F", "-t", "ext4", "-O", "64bit", str(ext4), "8192"], check=True,
                   capture_output=True)
    r = run("dgraid", "infer", str(ext4))
    assert r.returncode == 2 and "extents (0x40)" in r.stderr and "s_feature_incompat" in r.stderr, r.stderr
    assert "-O ^extents,^64bit" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    ok = tmp_path / "ok.img"
    subprocess.run([mke2fs(), "-q", "-F", "-t", "ext2", str(ok), "2048"], check=True, capture_output=True)
    trunc, junk_log = tmp_path / "trunc.log", tmp_path / "junk.log"
    trunc.write_bytes(b"F" + b"W" + (1024).to_bytes(8, "little"))
    junk_log.write_bytes(b"FFX")
    for log, field in [(trunc, "record 1: field `header`"), (junk_log, "record 2: field `type`")]:
        r = run("dgraid", "infer", str(ok), "--order", f"stream:{log}")
        assert r.returncode == 2 and str(log) in r.stderr and field in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    for args, word in [(["--order", "backwards"], "order"), (["--order", "seeded:x"], "order"),
                       (["--disks", "1"], "disks"), (["--grouping", "inode"], "grouping")]:
        r = run("dgraid", "infer", str(ok), *args)
        assert r.returncode == 2 and word in r.stderr, (args, r.stderr)
        assert "Traceback" not in r.stderr
