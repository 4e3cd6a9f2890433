"""Session 22's served and persisted features attacked the way a crash, an operator's mistake or a bad
client would: D-GRAID's staging log (`dgraid.stage`) crafted, cut, bit-flipped, swapped with another
array's, restored stale over a map that holds newer contents, and left non-empty by a kill -9 with a
member then missing; NBD replies (`nbd/outbox.rs`) to a client that pipelines large reads and never
reads them, to one that disconnects mid-reply, and to many clients mixing writes and reads at once.

The outcome asserted is always one of: the bytes written (or, after a crash, the bytes of the last
completed FLUSH), a one-line error naming the file and exit status 2, or an NBD error — never other
bytes, a traceback or a hang. (TRIM's attacks are Rust tests: `exec::real::trim_attack_tests`.)
"""

from __future__ import annotations

import random
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from nbd_stamp import CMD_READ, CMD_WRITE, Nbd
from realkit import Server, js, make_array, run, within

STACK = """[array]
raid = "{raid}"
disks = 4
block_size = 1024
[array.dgraid]
fs_size = "8MiB"
meta_copies = 4
[device]
model = "const:1"
"""
BS = 1024
HEADER = 8 + 16 + 8 + 8 + 4  # stage.rs: magic, UUID, block size, the map epoch it is bound to, CRC
RECORD = 12 + BS
MIB = 1 << 20


def dgraid(tmp: Path, name: str, raid: str = "dgraid1") -> Path:
    stack = tmp / f"{name}.toml"
    stack.write_text(STACK.format(raid=raid))
    d = tmp / name
    run("real", "create", d, "--stack", stack)
    return d


def block(seed: int) -> bytes:
    return random.Random(seed).randbytes(BS)


def staged_then_killed(d: Path, blocks: dict[int, bytes]) -> None:
    """Write `blocks` before any superblock (the layout unknown: all staged), FLUSH, kill -9."""
    srv = Server(d)
    try:
        c = Nbd(srv.host, srv.port, srv.name)
        for b, data in blocks.items():
            c.write(b * BS, data)
        c.flush()
        srv.kill9()
        c.s.close()
    finally:
        srv.ensure_dead()
    assert (d / "dgraid.stage").stat().st_size == HEADER + len(blocks) * RECORD


def read_blocks(d: Path, blocks) -> dict[int, bytes]:
    srv = Server(d)
    try:
        c = Nbd(srv.host, srv.port, srv.name)
        got = {b: c.read(b * BS, BS) for b in blocks}
        c.close()
        srv.stop()
    finally:
        srv.ensure_dead()
    return got


def refused(d: Path, *needles: str) -> str:
    """`real status` and `real serve` both refuse the directory: one line naming `needles`, exit 2."""
    for args in (("status", d), ("serve", d, "--listen", "127.0.0.1:0")):
        p = run("real", *args, check=False, timeout=60)
        err = p.stderr.strip()
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        for n in needles:
            assert n in err, err
    return err


STAGED = {b: block(b) for b in (40, 41, 300, 7000)}


# --- dgraid.stage -------------------------------------------------------------


def test_a_staged_write_survives_kill9_and_reads_back(tmp_path):
    d = dgraid(tmp_path, "a")
    staged_then_killed(d, STAGED)
    assert read_blocks(d, STAGED) == STAGED


@pytest.mark.parametrize("where", ["magic", "uuid", "block-size", "header-crc"])
def test_a_crafted_stage_header_is_refused_in_one_line(tmp_path, where):
    d = dgraid(tmp_path, "a")
    staged_then_killed(d, STAGED)
    at = {"magic": 3, "uuid": 8 + 5, "block-size": 8 + 16 + 1, "header-crc": 8 + 16 + 8 + 2}[where]
    p = d / "dgraid.stage"
    raw = bytearray(p.read_bytes())
    raw[at] ^= 0x40
    p.write_bytes(bytes(raw))
    refused(d, "dgraid.stage", "header")


def test_a_stage_cut_inside_its_header_is_refused(tmp_path):
    d = dgraid(tmp_path, "a")
    staged_then_killed(d, STAGED)
    with open(d / "dgraid.stage", "r+b") as f:
        f.truncate(HEADER - 5)
    refused(d, "dgraid.stage", "header")


def test_a_bit_flip_in_an_early_record_is_refused_naming_it_and_a_torn_last_one_is_cut(tmp_path):
    d = dgraid(tmp_path, "a")
    staged_then_killed(d, STAGED)
    p = d / "dgraid.stage"
    good = p.read_bytes()
    raw = bytearray(good)
    raw[HEADER + RECORD + 100] ^= 1  # inside record 2's data
    p.write_bytes(bytes(raw))
    refused(d, "dgraid.stage", "record 2")
    # A crash mid-append: the last record torn. Only it is lost; the rest come back.
    p.write_bytes(good[:-300])
    want = {b: v for b, v in STAGED.items() if b != 7000}
    got = read_blocks(d, STAGED)
    assert {b: got[b] for b in want} == want
    assert got[7000] == bytes(BS)


def test_a_crafted_record_naming_a_block_past_the_file_system_is_refused(tmp_path):
    """A record appended with a right CRC but a block past the file system (8 MiB of 1 KiB blocks). On
    main it opened, and when mke2fs's superblock then made the layout known, placing the held writes
    failed on it: the superblock's write got EIO and 18 of the 20 flushed blocks read back wrong."""
    import zlib

    d = dgraid(tmp_path, "a")
    staged_then_killed(d, STAGED)
    p = d / "dgraid.stage"
    data = b"\x55" * BS
    blk = struct.pack("<Q", 8192 + 5)
    p.write_bytes(p.read_bytes() + blk + struct.pack("<I", zlib.crc32(blk + data)) + data)
    refused(d, "dgraid.stage", f"record {len(STAGED) + 1}", "block")


def test_a_stage_swapped_with_another_arrays_is_refused_not_replayed(tmp_path):
    a, b = dgraid(tmp_path, "a"), dgraid(tmp_path, "b")
    staged_then_killed(a, STAGED)
    other = {b_: block(1000 + b_) for b_ in STAGED}
    staged_then_killed(b, other)
    sa, sb = a / "dgraid.stage", b / "dgraid.stage"
    tmp = tmp_path / "swap"
    sa.rename(tmp)
    sb.rename(sa)
    tmp.rename(sb)
    refused(a, "dgraid.stage", "not the staging log of this array")
    refused(b, "dgraid.stage", "not the staging log of this array")
    # Put back, each array has its own writes.
    sa.rename(tmp)
    sb.rename(sa)
    tmp.rename(sb)
    assert read_blocks(a, STAGED) == STAGED
    assert read_blocks(b, STAGED) == other


def mkfs_image(tmp: Path) -> bytes:
    img = tmp / "fs.img"
    with open(img, "wb") as f:
        f.truncate(8 * MIB)
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext2", str(img)], check=True, capture_output=True, timeout=60)
    return img.read_bytes()


def test_a_stale_stage_restored_over_a_map_holding_newer_contents_brings_no_old_bytes_back(tmp_path):
    """The file system's blocks written before its superblock (staged, FLUSHed), the stage file copied
    aside; then the superblock (the layout known: the staged writes placed), newer contents of two staged
    blocks, a FLUSH (the log emptied), a clean stop. The old log put back is the same array's, so it
    opens, but a block the map holds is not replayed over: the newer contents read back."""
    fs = mkfs_image(tmp_path)
    d = dgraid(tmp_path, "a")
    nz = [b for b in range(2, len(fs) // BS) if fs[b * BS:(b + 1) * BS] != bytes(BS)]
    srv = Server(d)
    try:
        c = Nbd(srv.host, srv.port, srv.name)
        for b in nz:
            c.write(b * BS, fs[b * BS:(b + 1) * BS])
        c.flush()
        stale = (d / "dgraid.stage").read_bytes()
        assert len(stale) > HEADER
        c.write(0, fs[:2 * BS])  # boot block and the primary superblock
        c.flush()
        st = js("real", "status", d)["dgraid"]
        assert st["layout_known"], st
        # Two blocks the stale log holds, rewritten: a group descriptor block and a bitmap.
        newer = {b: bytes(fs[b * BS:(b + 1) * BS][:-8]) + b"NEWER!!!" for b in nz[:2]}
        for b, v in newer.items():
            c.write(b * BS, v)
        c.flush()
        c.close()
        srv.stop()
    finally:
        srv.ensure_dead()
    assert (d / "dgraid.stage").stat().st_size == HEADER, "the log was emptied"
    (d / "dgraid.stage").write_bytes(stale)
    got = read_blocks(d, newer)
    assert got == newer


@pytest.mark.parametrize("raid", ["dgraid1", "dgraid0"])
def test_kill9_with_a_non_empty_stage_then_a_member_deleted(tmp_path, raid):
    """Staged writes live in the log, not on the members: with a member gone they still read back (the
    layout unknown, nothing was placed), or the start is refused in one line — never other bytes."""
    d = dgraid(tmp_path, "a", raid)
    staged_then_killed(d, STAGED)
    (d / "disk-1.img").unlink()
    p = run("real", "status", d, check=False, timeout=60)
    if p.returncode == 2:
        assert len(p.stderr.strip().splitlines()) == 1 and "disk-1" in p.stderr, p.stderr
        return
    assert p.returncode == 0, p.stderr
    got = read_blocks(d, STAGED)
    assert got == STAGED


# --- NBD replies (nbd/outbox.rs) ----------------------------------------------


def transmitting(srv: Server) -> socket.socket:
    s = socket.create_connection((srv.host, srv.port), timeout=30)
    s.recv(18, socket.MSG_WAITALL)
    s.sendall(struct.pack(">I", 3))
    name = srv.name.encode()
    s.sendall(struct.pack(">QII", 0x49484156454F5054, 1, len(name)) + name)
    s.recv(10, socket.MSG_WAITALL)
    return s


def hdr(typ: int, cookie: int, offset: int, length: int) -> bytes:
    return struct.pack(">IHHQQI", 0x25609513, 0, typ, cookie, offset, length)


@pytest.fixture
def served(tmp_path):
    d = make_array(tmp_path, "md", "5", 4, "16MiB")
    srv = Server(d)
    yield d, srv
    srv.ensure_dead()


def test_clients_that_disconnect_mid_reply_leave_the_server_serving_and_stoppable(served):
    """Ten clients each pipeline 16 large reads, take part of the first reply, and close (some with
    a reset): the replies in flight are dropped; a new client is served the right bytes at once and
    SIGTERM still ends the server cleanly."""
    d, srv = served
    c = Nbd(srv.host, srv.port, srv.name)
    want = random.Random(3).randbytes(MIB)
    c.write(5 * MIB, want)
    for i in range(10):
        s = transmitting(srv)
        for k in range(16):
            s.sendall(hdr(CMD_READ, k, 0, 16 * MIB))
        s.recv(100_000, socket.MSG_WAITALL)
        if i % 2:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
        s.close()
    assert within(15, lambda: c.read(5 * MIB, MIB)) == want
    other = within(15, lambda: Nbd(srv.host, srv.port, srv.name))
    assert within(15, lambda: other.read(5 * MIB, MIB)) == want
    other.close()
    c.close()
    within(30, srv.stop)


def test_a_reader_that_never_reads_replies_stalls_only_itself_while_others_write_and_read(served):
    """One client pipelines 40 reads of 16 MiB and never reads a reply; four others meanwhile write
    their own regions and read them back, many requests in flight each: every byte right, within time;
    then SIGTERM ends the server with the stalled peer still connected."""
    d, srv = served
    bad = transmitting(srv)
    for k in range(40):
        bad.sendall(hdr(CMD_READ, k, 0, 16 * MIB))
    errors: list[str] = []

    def client(n: int) -> None:
        try:
            c = Nbd(srv.host, srv.port, srv.name)
            rnd = random.Random(n)
            base = 16 * MIB + n * 4 * MIB
            blocks = {}
            for rnd_round in range(3):
                cookies = {}
                # Distinct offsets: two writes to one place in flight at once may land in either order.
                for slot in rnd.sample(range(4 * MIB // 65536), 32):
                    off = base + slot * 65536
                    data = rnd.randbytes(65536)
                    blocks[off] = data
                    cookies[c.send(CMD_WRITE, off, len(data), data)] = off
                while c.pending:
                    _, err, _ = c.recv()
                    assert err == 0
                # Reads pipelined, replies checked by cookie.
                want = {c.send(CMD_READ, off, 65536): off for off in blocks}
                while c.pending:
                    cookie, err, data = c.recv()
                    assert err == 0 and data == blocks[want[cookie]], f"client {n}: wrong bytes at {want[cookie]}"
            c.close()
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(f"client {n}: {e!r}")

    ts = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts), "a client stalled behind the one not reading"
    assert not errors, errors
    t0 = time.monotonic()
    srv.p.send_signal(signal.SIGTERM)
    try:
        srv.p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        raise AssertionError("the server did not end after SIGTERM with a peer not reading")
    assert srv.p.returncode == 0, srv.p.stderr.read()
    print(f"stopped in {time.monotonic() - t0:.1f} s")
    bad.close()
    assert js("real", "check", d)["mismatches"] == 0


# --- TRIM while served (the engine-level attacks: exec::real::trim_attack_tests) ------------------


def test_served_trims_racing_a_member_failure_then_replace_and_rebuild(tmp_path):
    """A client streams whole-stripe TRIMs while `real fail` takes a member out through the server:
    every trimmed stripe reads as zeroes (punched while whole, zeroes written once degraded), every
    other block as written; after `real replace` and `real rebuild`, the same, and `real check` clean."""
    d = make_array(tmp_path, "md", "5", 4, "4MiB", "64KiB")
    size, stripe = 12 * MIB, 192 * 1024
    data = random.Random(8).randbytes(size)
    srv = Server(d)
    try:
        c = Nbd(srv.host, srv.port, srv.name)
        for off in range(0, size, MIB):
            c.write(off, data[off:off + MIB])
        c.flush()
        trimmed = list(range(0, size // stripe, 3))
        failer = threading.Thread(target=lambda: run("real", "fail", d, "1"), daemon=True)
        failer.start()
        rounds = 0
        while failer.is_alive() or rounds < 2:  # TRIMs before, during and after the failure
            for s in trimmed:
                c.call(4, s * stripe, stripe)  # NBD_CMD_TRIM
            rounds += 1
        failer.join(60)
        print(f"{rounds} rounds of {len(trimmed)} TRIMs")
        assert js("real", "status", d)["failed"] == [1]
        want = bytearray(data)
        for s in trimmed:
            want[s * stripe:(s + 1) * stripe] = bytes(stripe)
        assert c.read(0, size) == bytes(want)
        c.close()
        run("real", "replace", d, "1")
        run("real", "rebuild", d)
        c = Nbd(srv.host, srv.port, srv.name)
        assert c.read(0, size) == bytes(want)
        c.close()
        srv.stop()
    finally:
        srv.ensure_dead()
    assert js("real", "check", d)["mismatches"] == 0


def test_sigterm_with_a_stalled_peer_keeps_the_stage_and_its_writes(tmp_path):
    """A D-GRAID export with writes staged (the layout unknown) and a peer stalled mid-payload: SIGTERM
    ends the server cleanly within seconds, the log keeps the staged writes, and they read back."""
    d = dgraid(tmp_path, "a")
    srv = Server(d)
    try:
        c = Nbd(srv.host, srv.port, srv.name)
        for b, v in STAGED.items():
            c.write(b * BS, v)
        c.flush()
        stalled = transmitting(srv)
        stalled.sendall(hdr(CMD_WRITE, 9, 0, 64 * BS) + b"\x33" * 5000)
        time.sleep(0.3)
        srv.p.send_signal(signal.SIGTERM)
        try:
            srv.p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            raise AssertionError("server still running 15 s after SIGTERM with a stalled peer")
        assert srv.p.returncode == 0, srv.p.stderr.read()
        stalled.close()
        c.s.close()
    finally:
        srv.ensure_dead()
    assert (d / "dgraid.stage").stat().st_size >= HEADER + len(STAGED) * RECORD
    assert read_blocks(d, STAGED) == STAGED
