"""A real file system on a served array: libnbd's `nbdfuse` exposes the
NBD export as a file, `mkfs.ext4` formats it, the kernel mounts it through
a loop device, and a tree of files is written while a member fails, is
replaced and rebuilt. Then `e2fsck -fn` must find the file system clean and
every file must read back with its checksum — also after the server is
restarted (the array reopened from its member files) and with another
member failed (so the rebuilt spare's bytes are what parity is solved from).
And the server killed with SIGKILL while files are written and fsync'd:
after a restart every file whose fsync returned is there, right.
Both also run on a served stack (`real create --stack`): host cache layers
in front of RAID-5 — write-back, so fsync's FLUSH must destage them — and a
write-back host cache over a write-back SSD tier (`tier.img`) over RAID-5,
whose dirty blocks a FLUSH commits to the tier's journal instead (after kill
-9 the restart writes them back before ext4's journal replays).

Needs root, `/dev/fuse` and loop devices (skipped, saying which, only where
one of them does not exist). `make tools` installs libnbd-bin (nbdfuse) and
e2fsprogs; mounts are taken down with `umount` (root needs no fusermount3).
Every subprocess has a timeout and every mount is taken down in `finally`
(lazily if need be), so a failure never leaves the suite hanging on a mount.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from realkit import CACHE_MODES, Server, cache, js, make_served, rebuild_in_background, run, stack_file, tear_down, tier

MIB = 1 << 20


def _probe() -> str | None:
    """Why this machine cannot mount a file system on an NBD export, or None."""
    if os.geteuid() != 0:
        return "not root: mounting needs root"
    try:
        if not stat.S_ISCHR(os.stat("/dev/fuse").st_mode):
            return "/dev/fuse is not a character device"
    except OSError:
        return "/dev/fuse does not exist (no FUSE in this kernel or container)"
    if not os.path.exists("/dev/loop-control"):
        return "/dev/loop-control does not exist (no loop devices)"
    p = subprocess.run(["losetup", "--find"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        return f"no free loop device: {p.stderr.strip()}"
    return None


@pytest.fixture(scope="module", autouse=True)
def can_mount():
    why = _probe()
    if why:
        pytest.skip(f"cannot mount a file system here: {why}")
    missing = [t for t in ("nbdfuse", "mkfs.ext4", "e2fsck", "losetup") if shutil.which(t) is None
               and not os.path.exists(f"/usr/sbin/{t}") and not os.path.exists(f"/sbin/{t}")]
    assert not missing, f"missing {missing}: `make tools` installs libnbd-bin and e2fsprogs"


def sh(*args, timeout=120, check=True) -> subprocess.CompletedProcess:
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def _is_mounted(path: Path) -> bool:
    target = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == target for line in f)


def _umount(path: Path) -> None:
    """Unmount, falling back to a lazy unmount: never wait on a stuck mount."""
    if not _is_mounted(path):
        return
    try:
        if sh("umount", path, timeout=60, check=False).returncode == 0:
            return
    except subprocess.TimeoutExpired:
        pass
    sh("umount", "-l", path, timeout=30, check=False)


@contextlib.contextmanager
def nbdfuse(uri: str, where: Path, read_only: bool = False):
    """The export as the file `where/dev` (nbdfuse in the background).

    nbdfuse's output goes to `where.log`, not a pipe: it prints a line per
    failed read, and a pipe nobody reads would fill and stall every reader
    of the device in the kernel."""
    where.mkdir(exist_ok=True)
    dev = where / "dev"
    log_path = Path(f"{where}.log")
    with open(log_path, "w") as log:
        p = subprocess.Popen(["nbdfuse", *(["-r"] if read_only else []), str(dev), uri], stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + 30
            while not (_is_mounted(where) and dev.exists()):
                assert p.poll() is None, f"nbdfuse exited {p.returncode}: {log_path.read_text()}"
                assert time.monotonic() < deadline, "nbdfuse did not expose the export within 30 s"
                time.sleep(0.05)
            yield dev
        finally:
            _umount(where)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)


@contextlib.contextmanager
def loop_mounted(dev: Path, where: Path, read_only: bool = False):
    where.mkdir(exist_ok=True)
    sh("mount", "-o", "loop,ro" if read_only else "loop", dev, where, timeout=120)
    try:
        yield where
    finally:
        _umount(where)


class Tree:
    """A tree of files with seeded random sizes (many tiny, some of a few
    hundred KiB, a few of several MiB) and their SHA-256 sums."""

    def __init__(self, root: Path, seed: int):
        self.root = root
        self.rng = random.Random(seed)
        self.sums: dict[str, str] = {}
        self.serial = 0

    def _size(self) -> int:
        r = self.rng.random()
        if r < 0.6:
            return self.rng.randrange(0, 4097)
        if r < 0.95:
            return self.rng.randrange(4097, 256 * 1024)
        return self.rng.randrange(2 * MIB, 6 * MIB)

    def _next(self) -> tuple[str, bytes]:
        depth = self.rng.randrange(0, 4)
        parts = [f"d{self.rng.randrange(6)}" for _ in range(depth)]
        rel = "/".join([*parts, f"f{self.serial:05d}.bin"])
        self.serial += 1
        return rel, self.rng.randbytes(self._size())

    def write(self, files: int) -> None:
        for _ in range(files):
            rel, data = self._next()
            p = self.root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
            self.sums[rel] = hashlib.sha256(data).hexdigest()

    def write_durably(self, stop) -> None:
        """Files one at a time, each counted only once it and the directories
        above it are fsync'd; until `stop()` or the first I/O error (the
        server gone). A file being written when it ends is in `maybe`."""
        self.maybe: set[str] = set()
        self.ended: OSError | None = None
        try:
            while not stop():
                rel, data = self._next()
                self.maybe = {rel}
                p = self.root / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                with open(p, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                q = p.parent
                while True:
                    fd = os.open(q, os.O_RDONLY | os.O_DIRECTORY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    if q == self.root:
                        break
                    q = q.parent
                self.sums[rel] = hashlib.sha256(data).hexdigest()
                self.maybe = set()
        except OSError as e:
            self.ended = e

    def churn(self, n: int) -> None:
        """Overwrite some files with new contents and delete others."""
        for rel in self.rng.sample(sorted(self.sums), n):
            if self.rng.random() < 0.5:
                (self.root / rel).unlink()
                del self.sums[rel]
            else:
                data = self.rng.randbytes(self._size())
                (self.root / rel).write_bytes(data)
                self.sums[rel] = hashlib.sha256(data).hexdigest()

    def sync(self) -> None:
        sh("sync", "-f", self.root, timeout=120)

    def check(self, root: Path) -> None:
        found = {str(p.relative_to(root)) for p in root.rglob("*.bin")}
        extra = found - set(self.sums) - getattr(self, "maybe", set())
        assert set(self.sums) <= found and not extra, (sorted(extra)[:5], sorted(set(self.sums) - found)[:5])
        bad = [rel for rel, h in self.sums.items() if hashlib.sha256((root / rel).read_bytes()).hexdigest() != h]
        assert not bad, f"{len(bad)} file(s) with wrong contents, e.g. {bad[:5]}"


@contextlib.contextmanager
def new_ext4(uri: str, tmp: Path, seed: int, files: int):
    """mkfs.ext4 on the export, mounted at tmp/fs, `files` files written and synced."""
    with nbdfuse(uri, tmp / "fuse") as dev:
        sh("mkfs.ext4", "-q", "-F", dev, timeout=300)
        with loop_mounted(dev, tmp / "fs") as fs:
            tree = Tree(fs, seed)
            tree.write(files)
            tree.sync()
            yield tree


def fsck_clean(uri: str, where: Path) -> None:
    with nbdfuse(uri, where, read_only=True) as dev:
        p = sh("e2fsck", "-fn", dev, timeout=300, check=False)
    assert p.returncode == 0, f"e2fsck -fn: exit {p.returncode}\n{p.stdout}\n{p.stderr}"


def check_through_export(uri: str, tmp: Path, tree: Tree) -> None:
    """e2fsck clean, then every file's checksum from a read-only mount."""
    fsck_clean(uri, tmp / "fuse")
    with nbdfuse(uri, tmp / "fuse", read_only=True) as dev, loop_mounted(dev, tmp / "ro", read_only=True) as ro:
        tree.check(ro)


@pytest.mark.parametrize("raid,disks,extra", [("5", 4, ()), ("6", 5, ("--checksums",))],
                         ids=["raid5", "raid6-checksums"])
def test_ext4_on_a_served_array_through_failure_rebuild_and_restart(tmp_path, raid, disks, extra, stack=None):
    d, srv = make_served(tmp_path, raid, disks, stack, "64MiB", "64KiB", *extra)
    rebuild = None
    try:
        with new_ext4(srv.uri, tmp_path, seed=21, files=250) as tree:
            # A member fails while the file system is mounted; writing goes on.
            run("real", "fail", d, "1")
            assert js("real", "status", d)["health"] == "degraded"
            tree.write(80)
            tree.churn(40)
            tree.sync()
            # A spare, rebuilt by the server while more files are written.
            run("real", "replace", d, "1")
            rebuild = rebuild_in_background(d, 8000, 16000)
            time.sleep(0.5)
            assert rebuild.poll() is None, "the rebuild ended before the writes during it began"
            tree.write(40)
            tree.sync()
            still_rebuilding = rebuild.poll() is None
            tree.write(40)
            tree.churn(30)
            tree.sync()
            out, err = rebuild.communicate(timeout=300)
            assert rebuild.returncode == 0, err
            report = json.loads(out)
            assert report["finished"] and report["user_requests_seen"] > 0, report
            assert still_rebuilding, "the rebuild finished before the first writes during it reached the array"
            assert js("real", "status", d)["health"] == "healthy"
            tree.check(tree.root)
        check_through_export(srv.uri, tmp_path, tree)
        chk = js("real", "check", d)
        assert (chk["mismatches"], chk["unrecoverable"]) == (0, 0), chk
        srv.stop()
        # The array reopened from its files; then without another member, so
        # the rebuilt spare takes part in every reconstruction.
        srv = Server(d)
        check_through_export(srv.uri, tmp_path, tree)
        run("real", "fail", d, "0")
        check_through_export(srv.uri, tmp_path, tree)
        srv.stop()
    finally:
        for m in ("ro", "fs", "fuse"):
            _umount(tmp_path / m)
        tear_down(srv, rebuild)


@pytest.mark.parametrize("state,seed", [("healthy", 1), ("degraded", 2)], ids=["healthy", "degraded"])
def test_ext4_survives_a_kill9_of_the_server_while_mounted(tmp_path, state, seed, stack=None):
    """The server killed while files are written and fsync'd: after a restart
    the ext4 journal replays at mount, every file whose fsync returned reads
    back with its checksum, and e2fsck finds the file system clean."""
    d, srv = make_served(tmp_path, "5", 4, stack, "32MiB")
    try:
        if state == "degraded":
            run("real", "fail", d, "2")  # the array's own journal covers every write
        with new_ext4(srv.uri, tmp_path, seed=31, files=100) as tree:
            synced = len(tree.sums)
            stop = threading.Event()
            writer = threading.Thread(target=tree.write_durably, args=(stop.is_set,), daemon=True)
            writer.start()
            time.sleep(random.Random(seed).uniform(1.0, 2.0))  # the kill: a seeded moment
            srv.kill9()
            stop.set()
            writer.join(120)
            assert not writer.is_alive(), "a write or fsync hung after the server died"
            assert len(tree.sums) > synced, "no file was fsync'd before the kill"
        print(f"{state}: {len(tree.sums) - synced} files fsync'd before the kill, then {tree.ended}")
        srv = Server(d)
        # Mounting replays ext4's journal.
        with nbdfuse(srv.uri, tmp_path / "fuse") as dev, loop_mounted(dev, tmp_path / "fs") as fs:
            tree.check(fs)
        fsck_clean(srv.uri, tmp_path / "fuse")
        chk = js("real", "check", d)
        assert (chk["mismatches"], chk["unrecoverable"]) == (0, 0), chk
        srv.stop()
    finally:
        for m in ("fs", "fuse"):
            _umount(tmp_path / m)
        srv.ensure_dead()



# A write-back LRU of 16 MiB over a write-through ARC of 32 MiB: the tree
# (tens of MiB) overflows both, so dirty blocks are destaged by eviction as
# well as by FLUSH.
FS_STACK = "two-layers", CACHE_MODES["two-layers"].replace("512", "4096").replace("1024", "8192")


def test_ext4_on_a_served_stack_through_failure_rebuild_and_restart(tmp_path):
    stack = stack_file(tmp_path, FS_STACK[0], FS_STACK[1], "5", 4, "64KiB")
    test_ext4_on_a_served_array_through_failure_rebuild_and_restart(tmp_path, "5", 4, (), stack=stack)


def test_ext4_on_a_write_back_stack_survives_a_kill9_of_the_server(tmp_path):
    stack = stack_file(tmp_path, "wb-lru", CACHE_MODES["wb-lru"], "5", 4, "64KiB")
    test_ext4_survives_a_kill9_of_the_server_while_mounted(tmp_path, "healthy", 3, stack=stack)


# A write-back LRU host cache of 8 MiB over a write-back SSD tier of 16 MiB,
# cleaned past half dirty: the tree (tens of MiB) overflows both, so the
# tier evicts and destages while the member is failed and while it rebuilds.
TIER_FS_STACK = cache("lru", 2048, "back") + tier("wb", 4096, "clean_high = 0.5\nclean_low = 0.25\n")


def test_ext4_on_a_served_stack_with_a_tier_through_failure_rebuild_and_restart(tmp_path):
    stack = stack_file(tmp_path, "cache-tier", TIER_FS_STACK, "5", 4, "64KiB")
    test_ext4_on_a_served_array_through_failure_rebuild_and_restart(tmp_path, "5", 4, (), stack=stack)


def test_ext4_on_a_write_back_tier_survives_a_kill9_of_the_server(tmp_path):
    # The tier keeps what fsync covered in its journal; the restart writes it back.
    stack = stack_file(tmp_path, "wb-tier", cache("lru", 256, "back") + tier("wb", 2048), "5", 4, "64KiB")
    test_ext4_survives_a_kill9_of_the_server_while_mounted(tmp_path, "healthy", 4, stack=stack)
