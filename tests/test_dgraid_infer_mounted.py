"""Inference on the write stream of a really mounted ext2 (and ext4 made with `-O ^extents,^64bit`,
mounted by the kernel's ext4 with its journal): `mke2fs` on an NBD export (exposed as
a file by nbdfuse), mounted through a loop device, trees copied in file by file, a directory deleted
and its blocks reused by the next copy, a file overwritten and truncated, unmounted. The export is a
plain file served by `nbd_logserver.py`, which records every write and flush in order; the log is
replayed through the inferrer (`--order stream:LOG`) and every in-use block it wrote must get
debugfs's owner and kind. Skipped where this machine cannot mount (as tests/test_real_fs.py)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from test_real_fs import can_mount, loop_mounted, nbdfuse, sh  # noqa: F401  (can_mount: autouse skip)
from test_dgraid_infer import make_tree, mke2fs, run

HERE = Path(__file__).resolve().parent


class LogServer:
    def __init__(self, image: Path, log: Path):
        self.p = subprocess.Popen([sys.executable, str(HERE / "nbd_logserver.py"), str(image), str(log)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        assert line.startswith("port "), (line, self.p.stderr.read() if self.p.poll() is not None else "")
        self.uri = f"nbd://127.0.0.1:{int(line.split()[1])}"

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.terminate()
            self.p.wait(timeout=30)


def populate(mnt: Path, bs: int) -> None:
    make_tree(mnt / "one", bs)
    sh("sync")
    # Free a directory's blocks, then let the next tree reuse them.
    sh("rm", "-rf", mnt / "one" / "many")
    sh("sync")
    make_tree(mnt / "two", bs)
    rnd = random.Random(9)
    big = mnt / "two" / "a" / "b" / "past-direct"
    big.write_bytes(rnd.randbytes(bs * 40))
    os.truncate(mnt / "two" / "a" / "b" / "c" / "double", bs * 5)
    sh("sync")
    # Freed and reused before the bitmap is written (no sync between): inodes written late still
    # point at blocks the next tree has taken, until their deletion is written.
    sh("rm", "-rf", mnt / "one")
    make_tree(mnt / "three", bs)
    sh("rm", "-rf", mnt / "two" / "many")
    make_tree(mnt / "four", bs)
    sh("sync")


@pytest.mark.parametrize("fs,bs,blocks", [("ext2", 1024, 32768), ("ext2", 4096, 8192), ("ext4", 4096, 8192)],
                         ids=["1k", "4k", "ext4-4k"])
def test_a_mounted_file_systems_write_stream_is_inferred(tmp_path, fs, bs, blocks):
    img, log = tmp_path / "export.img", tmp_path / "writes.log"
    with open(img, "wb") as f:
        f.truncate(bs * blocks)
    log.write_bytes(b"")
    srv = LogServer(img, log)
    try:
        with nbdfuse(srv.uri, tmp_path / "fuse") as dev:
            feats = ["-O", "^extents,^64bit"] if fs == "ext4" else []
            sh(mke2fs(), "-q", "-F", "-t", fs, *feats, "-b", str(bs), "-E", "nodiscard", dev, str(blocks))
            with loop_mounted(dev, tmp_path / "mnt") as mnt:
                populate(mnt, bs)
    finally:
        srv.stop()
    r = run("dgraid", "infer", str(img), "--order", f"stream:{log}", "--json")
    assert r.returncode == 0, r.stderr
    (rep,) = json.loads(r.stdout)
    assert rep["written"] > 0 and rep["in_use"] - rep["unwritten"] > 1000
    # Every in-use block the stream wrote: owner and kind as debugfs says.
    assert (rep["correct"], rep["wrong"], rep["unknown"]) == (rep["in_use"] - rep["unwritten"], 0, 0), \
        rep["examples"]
    assert {"directory", "indirect", "data", "inode-table"} <= {k["kind"] for k in rep["by_kind"]}
    assert all(k["blocks"] == k["correct"] for k in rep["by_kind"]), rep["by_kind"]
    assert rep["misplaced_inferred"] == 0 and rep["misplaced_truth"] == 0
    # (bad_pointers may be > 0 here: blocks followed as indirect blocks after their contents became
    # something else — ignored words, documented.)
