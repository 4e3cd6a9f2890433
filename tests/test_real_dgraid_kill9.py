"""`kill -9` of the server while files are copied into an ext2 mounted on a served D-GRAID export
(nbdfuse, then a loop mount), the array placing every block by inference. ext2 has no journal, so
after a restart `e2fsck -fn` may find the file system unclean; what must hold is that every file
whose data and directories were fsync'd before the kill reads back identical."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

from realkit import Server, js, run
from test_real_fs import Tree, _umount, can_mount, loop_mounted, nbdfuse, sh  # noqa: F401  (can_mount: autouse skip)
from test_dgraid_infer import mke2fs

STACK = """[array]
raid = "dgraid0"
disks = 4
block_size = 4096
[array.dgraid]
fs_size = "48MiB"
meta_copies = 4
[device]
model = "const:1"
"""


class SmallTree(Tree):
    """The harness's trees, with files of at most 256 KiB (the file system is small)."""

    def _size(self) -> int:
        return self.rng.randrange(0, 4097) if self.rng.random() < 0.6 else self.rng.randrange(4097, 256 * 1024)


def test_ext2_on_a_served_dgraid_export_keeps_every_fsynced_file_through_a_kill9_mid_copy(tmp_path):
    stack = tmp_path / "dg.toml"
    stack.write_text(STACK)
    d = tmp_path / "arr"
    run("real", "create", d, "--stack", stack)
    srv = Server(d)
    try:
        with nbdfuse(srv.uri, tmp_path / "fuse") as dev:
            sh(mke2fs(), "-q", "-F", "-t", "ext2", "-b", "4096", dev)
            with loop_mounted(dev, tmp_path / "fs") as fs:
                tree = SmallTree(fs, 41)
                tree.write(20)
                tree.sync()
                synced = len(tree.sums)
                stop = threading.Event()
                writer = threading.Thread(target=tree.write_durably, args=(stop.is_set,), daemon=True)
                writer.start()
                time.sleep(random.Random(7).uniform(1.0, 2.0))  # the kill: a seeded moment mid-copy
                srv.kill9()
                stop.set()
                writer.join(60)
                assert not writer.is_alive(), "a write or fsync hung after the server died"
        assert len(tree.sums) > synced, "no file was fsync'd before the kill"
        print(f"{len(tree.sums) - synced} files fsync'd before the kill, then {tree.ended}")
        srv = Server(d)
        st = js("real", "status", d)["dgraid"]
        assert st["refused"] is None and st["layout_known"], st
        with nbdfuse(srv.uri, tmp_path / "fuse", read_only=True) as dev:
            fsck = sh("e2fsck", "-fn", dev, timeout=120, check=False)
            # 0 clean, 4 errors left uncorrected (-n): an unclean ext2 is allowed; 8 and up are e2fsck's
            # own failures (it could not read the file system).
            assert fsck.returncode in (0, 4), f"e2fsck -fn: exit {fsck.returncode}\n{fsck.stdout}\n{fsck.stderr}"
            print(f"e2fsck -fn after the kill: exit {fsck.returncode}")
            with loop_mounted(dev, tmp_path / "ro", read_only=True) as ro:
                tree.check(ro)
        srv.stop()
    finally:
        for m in ("ro", "fs", "fuse"):
            _umount(tmp_path / m)
        srv.ensure_dead()
