"""D-GRAID as a real array (`real create --stack` with `raid = "dgraid0|1"`):
an ext2 image made by `mke2fs -d` written through the served export, read
back across restarts, a kill -9 mid-write, swapped members, failures past
the redundancy (with the file system mounted read-only on what survives)
and a live-block rebuild. Blocks are placed by inference (the default
classifier) from the file system's own writes."""

from __future__ import annotations

import errno
import os
import random
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from realkit import Server, js, nbdcopy, read_export, run

BS = 4096
STACK = """[array]
raid = "{raid}"
disks = {disks}
[array.dgraid]
fs_size = "{fs}"
meta_copies = {meta}
{extra}
[device]
model = "const:1"
"""

pytestmark = pytest.mark.skipif(shutil.which("mke2fs") is None and not os.path.exists("/usr/sbin/mke2fs")
                                or shutil.which("nbdcopy") is None, reason="needs mke2fs and nbdcopy")


def stack(tmp: Path, raid="dgraid0", disks=4, meta=4, fs="16MiB", extra="") -> Path:
    p = tmp / f"dg-{raid}-{disks}-{meta}.toml"
    p.write_text(STACK.format(raid=raid, disks=disks, meta=meta, fs=fs, extra=extra))
    return p


def make_tree(root: Path, seed: int) -> dict[str, bytes]:
    """Directories, small files and files with indirect blocks; returns path -> contents."""
    rng = random.Random(seed)
    files = {}
    for d in range(5):
        for f in range(10):
            rel = f"d{d}/sub{f % 2}/f{f}" if f % 3 else f"d{d}/f{f}"
            data = rng.randbytes(rng.choice([200, 6000, 30_000, 90_000, 250_000]))
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
            files[rel] = data
    return files


def ext2_image(tmp: Path, name: str, seed: int, size: str = "16M") -> tuple[Path, dict[str, bytes]]:
    tree = tmp / f"tree-{name}"
    files = make_tree(tree, seed)
    img = tmp / f"{name}.img"
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext2", "-b", "4096", "-d", str(tree), str(img), size],
                   check=True, capture_output=True, timeout=60)
    return img, files


def blocks(data: bytes) -> list[bytes]:
    return [data[i:i + BS] for i in range(0, len(data), BS)]


def test_an_ext2_image_reads_back_through_a_restart_and_kill9_leaves_old_or_new_blocks(tmp_path):
    d = tmp_path / "arr"
    r = run("real", "create", d, "--stack", stack(tmp_path))
    assert "dgraid0" in r.stdout and "classifier infer" in r.stdout, r.stdout
    a_img, _ = ext2_image(tmp_path, "a", 1)
    b_img, _ = ext2_image(tmp_path, "b", 2)
    srv = Server(d)
    try:
        assert srv.banner.split()[2:4] == ["(dgraid0,", "4"], srv.banner
        nbdcopy(str(a_img), srv.uri)
        srv.stop()
        srv = Server(d)
        assert read_export(srv, tmp_path / "back.img") == a_img.read_bytes()
        st = js("real", "status", d)
        assert st["dgraid"]["refused"] is None and st["dgraid"]["counts"]["relearned_blocks"] > 0, st
        # kill -9 while images A and B are copied over each other.
        a, b = blocks(a_img.read_bytes()), blocks(b_img.read_bytes())
        loop = subprocess.Popen(["sh", "-c", f"while :; do nbdcopy {b_img} {srv.uri}; nbdcopy {a_img} {srv.uri}; done"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2.5)
        srv.kill9()
        loop.kill()
        loop.wait()
        srv = Server(d)
        got = blocks(read_export(srv, tmp_path / "after.img"))
        bad = [i for i, g in enumerate(got) if g not in (a[i], b[i])]
        assert not bad, f"{len(bad)} block(s) hold neither image's bytes, first {bad[:5]}"
    finally:
        srv.ensure_dead()


def _files_after_failure(mnt: Path, files: dict[str, bytes]) -> tuple[int, int]:
    """Every directory lists as it was; every file reads identical or fails with EIO."""
    names: dict[str, set[str]] = {}
    for rel in files:
        parts = rel.split("/")
        for i in range(len(parts)):
            names.setdefault("/".join(parts[:i]), set()).add(parts[i])
    for dir_, want in names.items():
        assert set(os.listdir(mnt / dir_)) - {"lost+found"} == want, dir_
    whole = lost = 0
    for rel, data in files.items():
        try:
            got = (mnt / rel).read_bytes()
        except OSError as e:
            assert e.errno == errno.EIO, (rel, e)
            lost += 1
            continue
        assert got == data, f"{rel}: other bytes"
        whole += 1
    return whole, lost


def test_after_two_of_four_members_fail_ext2_mounts_read_only_and_files_read_whole_or_eio(tmp_path):
    from test_real_fs import _probe, loop_mounted, nbdfuse

    d = tmp_path / "arr"
    run("real", "create", d, "--stack", stack(tmp_path, "dgraid0", 4, 4))
    img, files = ext2_image(tmp_path, "a", 3)
    srv = Server(d)
    try:
        nbdcopy(str(img), srv.uri)
        run("real", "fail", d, "1")
        run("real", "fail", d, "--disk", "3")
        st = js("real", "status", d)
        assert st["health"] == "partial" and st["failed"] == [1, 3], st
        why = _probe()
        if why:
            pytest.skip(f"cannot mount here: {why}")
        want = blocks(img.read_bytes())
        with nbdfuse(srv.uri, tmp_path / "fuse", read_only=True) as dev:
            # Block level: every block reads back as written or fails (EIO), never other bytes.
            fd = os.open(dev, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                eio = 0
                for i, w in enumerate(want):
                    try:
                        assert os.pread(fd, BS, i * BS) == w, f"block {i}: other bytes"
                    except OSError as e:
                        assert e.errno == errno.EIO, (i, e)
                        eio += 1
            finally:
                os.close(fd)
            assert 0 < eio < len(want) // 2, eio
            with loop_mounted(dev, tmp_path / "mnt", read_only=True) as mnt:
                whole, lost = _files_after_failure(mnt, files)
        assert whole > 0 and lost > 0, (whole, lost)
        # D-GRAID's promise: about (D - k) / D of the files whole (here 2 of 4 members left).
        assert 0.25 <= whole / len(files) <= 0.8, (whole, lost)
    finally:
        srv.ensure_dead()


def test_ext4_without_extents_mounts_read_only_after_any_two_of_four_members_fail(tmp_path):
    """ext4 (`-O ^extents,^64bit`: journal, checksums, flex_bg) inferred like ext2; its journal is
    replicated with the metadata, or the kernel could not mount it without the journal's home site."""
    from test_real_fs import _probe, loop_mounted, nbdfuse

    tree = tmp_path / "tree"
    files = make_tree(tree, 4)
    img = tmp_path / "e4.img"
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-O", "^extents,^64bit", "-b", "4096", "-d", str(tree),
                    str(img), "16M"], check=True, capture_output=True, timeout=60)
    pristine = tmp_path / "arr"
    run("real", "create", pristine, "--stack", stack(tmp_path, "dgraid0", 4, 4))
    srv = Server(pristine)
    try:
        nbdcopy(str(img), srv.uri)
        srv.stop()
    finally:
        srv.ensure_dead()
    why = _probe()
    if why:
        pytest.skip(f"cannot mount here: {why}")
    whole_total = 0
    for failed in [(0, 1), (2, 3)]:  # every member is among the failed once
        d = tmp_path / f"trial{failed[0]}"
        shutil.copytree(pristine, d)
        for disk in failed:
            run("real", "fail", d, "--disk", str(disk))
        srv = Server(d)
        try:
            with nbdfuse(srv.uri, tmp_path / f"fuse{failed[0]}", read_only=True) as dev:
                with loop_mounted(dev, tmp_path / f"mnt{failed[0]}", read_only=True) as mnt:
                    whole, lost = _files_after_failure(mnt, files)
        finally:
            srv.ensure_dead()
        assert whole > 0 and lost > 0, (failed, whole, lost)
        whole_total += whole
    # Each file's home site is in exactly one of the two failure sets.
    assert whole_total == len(files), whole_total


def test_swapped_members_are_put_back_and_a_foreign_one_refused(tmp_path):
    d = tmp_path / "arr"
    run("real", "create", d, "--stack", stack(tmp_path, "dgraid1", 4, 2))
    img, _ = ext2_image(tmp_path, "a", 4)
    srv = Server(d)
    try:
        nbdcopy(str(img), srv.uri)
    finally:
        srv.stop()
    (d / "disk-0.img").rename(d / "x")
    (d / "disk-2.img").rename(d / "disk-0.img")
    (d / "x").rename(d / "disk-2.img")
    srv = Server(d)
    try:
        assert read_export(srv, tmp_path / "back.img") == img.read_bytes()
    finally:
        srv.stop()
    other = tmp_path / "other"
    run("real", "create", other, "--stack", stack(tmp_path, "dgraid1", 4, 2))
    shutil.copy(other / "disk-1.img", d / "disk-1.img")
    p = run("real", "serve", d, "--listen", "127.0.0.1:0", check=False, timeout=60)
    assert p.returncode == 2 and "disk-1.img" in p.stderr and "another array" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_live_block_rebuild_copies_only_live_blocks_and_the_image_reads_back(tmp_path):
    d = tmp_path / "arr"
    run("real", "create", d, "--stack", stack(tmp_path, "dgraid1", 4, 2, fs="32MiB"))
    img, _ = ext2_image(tmp_path, "a", 5, "32M")
    srv = Server(d)
    try:
        nbdcopy(str(img), srv.uri)
        run("real", "fail", d, "2")
        run("real", "replace", d, "2")
        r = js("real", "rebuild", d)
        o = r["order_stats"]
        assert r["finished"] and r["order"] == "live" and r["unrecoverable_blocks"] == 0, r
        assert 0 < o["live_blocks"] < o["member_blocks"], o
        assert o["whole_member_copy_us"] > 0 and o["live_copy_us"] > 0, o
        # The rebuilt member alone now holds its pair's copies.
        run("real", "fail", d, "3")
        assert read_export(srv, tmp_path / "back.img") == img.read_bytes()
    finally:
        srv.ensure_dead()


@pytest.mark.parametrize("extra,key,why", [
    ("infer = false", "array.dgraid.infer", "needs `tags`"),
    ('tags = "t.csv"', "array.dgraid.tags", "only with `infer = false`"),
    ('diffuse_segment = "1MiB"', "array.dgraid.diffuse_segment", "does not diffuse"),
    ("deferred_max = 0", "array.dgraid.deferred_max", "must be 1..="),
])
def test_impossible_dgraid_stacks_are_refused_naming_the_key(tmp_path, extra, key, why):
    p = run("real", "create", tmp_path / "arr", "--stack", stack(tmp_path, extra=extra), check=False)
    assert p.returncode == 2 and key in p.stderr and why in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "arr" / "dgraid.json").exists()


# --- the served array attacked: stalled peers, SIGTERM, kill -9 with a member gone or stale


def _served_image(tmp_path: Path, raid="dgraid0", meta=4) -> tuple[Path, Server, Path]:
    """A D-GRAID array served with an ext2 image copied onto it."""
    d = tmp_path / "arr"
    run("real", "create", d, "--stack", stack(tmp_path, raid, 4, meta))
    img, _ = ext2_image(tmp_path, "a", 7)
    srv = Server(d)
    nbdcopy(str(img), srv.uri)
    return d, srv, img


def test_a_dgraid_client_not_reading_replies_does_not_stall_another(tmp_path):
    from test_nbd_attacks import CMD_READ, header, read_block, transmitting, within
    d, srv, img_path = _served_image(tmp_path)
    img = img_path.read_bytes()
    try:
        good = transmitting(srv)
        assert read_block(good, 8 * BS, BS) == img[8 * BS:9 * BS]
        bad = transmitting(srv)
        for i in range(20):
            bad.sendall(header(CMD_READ, i, 0, 16 << 20))
        time.sleep(0.5)
        assert within(10, lambda: read_block(good, 8 * BS, BS)) == img[8 * BS:9 * BS]
        other = within(10, lambda: transmitting(srv))
        assert within(10, lambda: read_block(other, 8 * BS, BS)) == img[8 * BS:9 * BS]
    finally:
        srv.ensure_dead()


def test_sigterm_with_a_stalled_dgraid_peer_exits_cleanly_and_keeps_flushed_writes(tmp_path):
    from test_nbd_attacks import stall
    d, srv, img_path = _served_image(tmp_path)
    img = img_path.read_bytes()
    peer = stall("not-reading", srv, d)
    time.sleep(0.5)
    srv.p.send_signal(signal.SIGTERM)
    try:
        srv.p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        srv.p.kill()
        srv.p.wait()
        raise AssertionError("server still running 10 s after SIGTERM with a peer not reading")
    err = srv.p.stderr.read()
    assert srv.p.returncode == 0 and "closed cleanly" in err, err
    peer.close()
    again = Server(d)
    try:
        assert read_export(again, tmp_path / "back.img") == img
    finally:
        again.stop()
    assert "unclean" not in again.p.stderr.read()


def _kill9_mid_copy(srv: Server, images: list[Path]) -> None:
    loop = subprocess.Popen(["sh", "-c", "while :; do " + " ".join(f"nbdcopy {i} {srv.uri};" for i in images)
                             + " done"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2.5)
    srv.kill9()
    loop.kill()
    loop.wait()


def _blocks_or_eio(d: Path, allowed: list[list[bytes]]) -> tuple[str, int]:
    """Serve `d` again: either it refuses with one clear line (exit 2), or
    every block reads as one of the `allowed` images' or fails with EIO.
    Returns the verdict (the refusal, or "served" with what the server said) and the blocks lost."""
    from nbd_stamp import Nbd, read_all
    from realkit import BLOCKLAB
    p = subprocess.Popen([*BLOCKLAB, "real", "serve", str(d), "--listen", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    m = re.search(r"nbd://([\d.]+):(\d+)/(\S+)", p.stdout.readline())
    if m is None:
        p.wait(timeout=30)
        err = p.stderr.read()
        assert p.returncode == 2 and len(err.strip().splitlines()) == 1, (p.returncode, err)
        return "refused: " + err.strip(), 0
    try:
        nbd = Nbd(m.group(1), int(m.group(2)), m.group(3))
        got = read_all(nbd, len(allowed[0]))
        nbd.close()
        lost = [i for i, g in got.items() if g == errno.EIO]
        other = [i for i, g in got.items() if isinstance(g, int) and g != errno.EIO]
        wrong = [i for i, g in got.items() if isinstance(g, bytes) and all(g != a[i] for a in allowed)]
        assert not other, f"errors other than EIO at {other[:5]}"
        assert not wrong, f"{len(wrong)} block(s) hold bytes of no acknowledged image, first {wrong[:5]}"
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    return "served (" + " / ".join(p.stderr.read().strip().splitlines()) + ")", len(lost)


def test_kill9_then_a_deleted_member_gives_an_error_or_eio_never_wrong_bytes(tmp_path):
    d, srv, a_img = _served_image(tmp_path)
    b_img, _ = ext2_image(tmp_path, "b", 8)
    try:
        _kill9_mid_copy(srv, [b_img, a_img])
    finally:
        srv.ensure_dead()
    (d / "disk-2.img").unlink()
    verdict, lost = _blocks_or_eio(d, [blocks(a_img.read_bytes()), blocks(b_img.read_bytes())])
    print(f"member deleted after kill -9: {verdict}, {lost} block(s) EIO")


def test_kill9_then_a_stale_member_gives_an_error_or_eio_never_wrong_bytes(tmp_path):
    # The stale copy holds image C; afterwards only A and B are written, so
    # a block reading C's bytes (and neither A's nor B's) came from the stale member.
    d, srv, a_img = _served_image(tmp_path)
    c_img, _ = ext2_image(tmp_path, "c", 9)
    b_img, _ = ext2_image(tmp_path, "b", 8)
    try:
        nbdcopy(str(c_img), srv.uri)
        srv.stop()
        shutil.copy(d / "disk-2.img", tmp_path / "stale-disk-2.img")
        srv = Server(d)
        _kill9_mid_copy(srv, [b_img, a_img])
    finally:
        srv.ensure_dead()
    shutil.copy(tmp_path / "stale-disk-2.img", d / "disk-2.img")
    verdict, lost = _blocks_or_eio(d, [blocks(a_img.read_bytes()), blocks(b_img.read_bytes())])
    print(f"stale member after kill -9: {verdict}, {lost} block(s) EIO")
