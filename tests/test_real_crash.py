"""Crash rounds through the real server: a stamping NBD client
(`nbd_stamp.py`) writes with 32 requests in flight and a FLUSH every 64
writes while `blocklab real serve` is killed with SIGKILL at a seeded
moment; then the array is reopened and every block is read back. A block
must hold the stamp of its last write made durable (acknowledged before a
FLUSH that completed, or acknowledged with FUA) or of a later write that
was sent; never an older stamp, another block's, zeroes after a durable
write, or garbage. Past the redundancy a read is an EIO, never data.
Rounds: several levels healthy, a member failed before the crash, the
server killed during a served rebuild, a member image missing at restart.

Unlike `real integrity` (Rust, in process: a fault hook stops member writes
at a chosen write, and the API's acknowledgements are the ledger), these
rounds go through the NBD server a client talks to, with a real `kill -9`
of its process at a moment it does not choose: the replies on the wire are
the ledger, FLUSH is the NBD command, recovery is `real serve`'s own open.

Stack rounds: the same on a served stack whose two host cache layers are
write-back (an LRU over an ARC, smaller than the blocks written), so a
FLUSH must destage both before it completes, and what a kill -9 loses is
only what no completed FLUSH covered.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from pathlib import Path

import pytest

from nbd_stamp import BLOCK, EIO, Nbd, Stamper, read_all, stamped
from realkit import Server, cache, js, make_served, rebuild_in_background, run, stack_file, tear_down


def crash_under_writes(srv: Server, seed: int) -> Stamper:
    """Stamped writes until the server is killed (after a seeded 0.5–2 s,
    and two FLUSHes done)."""
    nbd = Nbd(srv.host, srv.port, srv.name)
    st = Stamper(blocks=nbd.size // BLOCK, seed=seed)
    t = threading.Thread(target=st.run, args=(nbd, lambda: False), daemon=True)
    t.start()
    time.sleep(random.Random(seed).uniform(0.5, 2.0))
    # A slow server (a loaded machine, a stack destaging at each FLUSH) gets
    # until two FLUSHes completed: the crash must find some writes durable.
    deadline = time.monotonic() + 30
    while st.flushes_done < 2 and t.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    srv.kill9()
    t.join(60)
    nbd.close()
    assert not t.is_alive(), "the client did not notice the server's death"
    # The crash hit a running workload: FLUSHes done, writes in flight.
    assert st.error and "failed with error" not in st.error, st.error
    assert st.flushes_done > 0 and st.writes_acked > st.flushes_done, (st.flushes_done, st.writes_acked)
    at_risk = sum(1 for b, seqs in st.written.items() if seqs[-1] > st.durable.get(b, 0))
    print(f"seed {seed}: {st.writes_acked} writes acknowledged, {st.flushes_done} FLUSHes, "
          f"{len(st.durable)} blocks durable, {at_risk} with a later write not made durable")
    return st


def verify(srv: Server, st: Stamper, errors_allowed: bool = False) -> int:
    """Read every block and check it against the ledger; the number of EIOs."""
    nbd = Nbd(srv.host, srv.port, srv.name)
    try:
        got = read_all(nbd, st.blocks)
    finally:
        nbd.close()
    errs = [b for b, v in got.items() if isinstance(v, int)]
    assert all(got[b] == EIO for b in errs), {got[b] for b in errs}
    assert errors_allowed or not errs, f"{len(errs)} block(s) read as errors within redundancy, e.g. {errs[:5]}"
    wrong = [why for b, v in got.items() if isinstance(v, bytes) for why in [st.verify_block(b, v)] if why]
    assert not wrong, f"{len(wrong)} block(s) wrong after the crash: {wrong[:5]}"
    return len(errs)


def dirty_bitmap(d: Path) -> bool:
    st = json.loads((d / "array.json").read_text().rsplit("\n# crc32", 1)[0])
    return bool(st["bitmap"].strip("0"))


ROUNDS = [
    # id, level, members, seed, what happens around the crash, extra create flags
    ("raid5-1", "5", 4, 1, "healthy", ()),
    ("raid5-2", "5", 4, 2, "healthy", ()),
    ("raid6-checksums", "6", 5, 3, "healthy", ("--checksums",)),
    ("raid10", "10", 4, 4, "healthy", ()),
    ("raid1", "1", 2, 5, "healthy", ()),
    ("raid5-failed-before", "5", 4, 6, "failed-before", ()),
    ("raid6-failed-before", "6", 5, 7, "failed-before", ()),
    ("raid5-missing-at-restart", "5", 4, 8, "missing-at-restart", ()),
    ("raid6-rebuilding", "6", 5, 9, "rebuilding", ()),
]
REDUNDANCY = {"1": 1, "5": 1, "6": 2, "10": 1}


@pytest.mark.parametrize("raid,disks,seed,scenario,extra", [r[1:] for r in ROUNDS], ids=[r[0] for r in ROUNDS])
def test_kill9_under_stamped_writes_loses_no_flushed_write(tmp_path, raid, disks, seed, scenario, extra, stack=None):
    d, srv = make_served(tmp_path, raid, disks, stack, "8MiB", "16KiB", *extra)
    try:
        rebuild = None
        if scenario in ("failed-before", "rebuilding"):
            run("real", "fail", d, "1")
        if scenario == "rebuilding":
            # A served rebuild of a spare, slow enough to be under way at the kill.
            run("real", "replace", d, "1")
            rebuild = rebuild_in_background(d, 1000, 2000)
            time.sleep(1.5)  # past its first checkpoint (about one a second)
        st = crash_under_writes(srv, seed)
        if rebuild is not None:
            rebuild.communicate(timeout=60)  # its server is gone
        if scenario == "missing-at-restart":
            dirty = dirty_bitmap(d)
            (d / "disk-1.img").rename(tmp_path / "disk-1.aside")
            if dirty:
                # docs/real.md, "Dirty degraded start": refused, one line, exit 2.
                p = run("real", "serve", d, "--listen", "127.0.0.1:0", check=False, timeout=60)
                assert p.returncode == 2 and "dirty degraded array" in p.stderr, (p.returncode, p.stderr)
                assert p.stderr.count("\n") == 1, p.stderr
                # Forced (on a copy): lost units are EIO, everything else its stamp.
                forced = tmp_path / "forced"
                subprocess.run(["cp", "-a", "--sparse=always", d, forced], check=True, timeout=120)
                srv = Server(forced, "--start-dirty-degraded")
                lost = verify(srv, st, errors_allowed=True)
                assert lost > 0, "a dirty RAID-5 lost no unit: nothing was forced"
                srv.stop()
                print(f"dirty degraded: refused; forced: {lost} of {st.blocks} blocks EIO, the rest right")
                # The member back: every stamp, no error.
                (tmp_path / "disk-1.aside").rename(d / "disk-1.img")
                srv = Server(d)
            else:
                # A clean bitmap: served degraded (a missing image fails the member).
                srv = Server(d)
                assert js("real", "status", d)["failed"] == [1]
                print("clean bitmap at the crash: served degraded")
        else:
            srv = Server(d)
        verify(srv, st)
        if scenario == "rebuilding":
            status = js("real", "status", d)
            # Killed mid-rebuild: what was recorded (about once a second) resumes.
            assert status["recovering"] == [1] and status["rebuilt_rows"] < status["member_rows"], status
            print(f"rebuilt rows recorded at the kill: {status['rebuilt_rows']} of {status['member_rows']}")
            r = js("real", "rebuild", d, "--speed-max", "1000000")
            assert r["finished"] and r["resumed_from"] == status["rebuilt_rows"], r
            verify(srv, st)
        chk = js("real", "check", d)
        assert (chk["mismatches"], chk["unrecoverable"]) == (0, 0), chk
        # What the resync left must be what the parity (or the other copy) gives.
        failed = js("real", "status", d)["failed"]
        present = [i for i in range(disks) if i not in failed]
        for i in present[: REDUNDANCY[raid] - len(failed)]:
            run("real", "fail", d, i)
        verify(srv, st)
        # One member more than the level survives: errors, never data.
        if raid != "1":
            run("real", "fail", d, [i for i in range(disks) if i not in js("real", "status", d)["failed"]][0])
            assert verify(srv, st, errors_allowed=True) > 0
        srv.stop()
    finally:
        tear_down(srv, rebuild)


def test_the_stamp_checker_rejects_stale_foreign_and_garbage_blocks():
    """The checker the crash rounds rely on, on hand-made ledgers."""
    st = Stamper(blocks=4, seed=0)
    st.written = {0: [3, 7, 9], 1: [4], 2: [5]}
    st.durable = {0: 7, 2: 5}  # write 7 flushed on block 0; 9 sent after it
    zero = bytes(BLOCK)
    assert st.verify_block(0, stamped(0, 7)) is None
    assert st.verify_block(0, stamped(0, 9)) is None  # in flight or acknowledged later: may have landed
    assert "older write 3" in st.verify_block(0, stamped(0, 3))
    assert "zeroes" in st.verify_block(0, zero)
    assert st.verify_block(1, zero) is None  # write 4 never flushed: may be lost
    assert st.verify_block(1, stamped(1, 4)) is None
    assert "block 2's write 5" in st.verify_block(1, stamped(2, 5))
    assert "never written here" in st.verify_block(2, stamped(2, 6))
    torn = bytearray(stamped(2, 5))
    torn[2048:2052] = b"\0\0\0\0"
    assert "garbage" in st.verify_block(2, bytes(torn))
    assert "garbage" in st.verify_block(3, b"\x01" * BLOCK)
    assert st.verify_block(3, zero) is None


WRITE_BACK = cache("lru", 512, "back") + cache("arc", 1024, "back")
STACK_ROUNDS = [r for r in ROUNDS if r[0] in ("raid5-1", "raid5-failed-before", "raid6-rebuilding")]


@pytest.mark.parametrize("raid,disks,seed,scenario,extra", [r[1:] for r in STACK_ROUNDS],
                         ids=[f"wb-stack-{r[0]}" for r in STACK_ROUNDS])
def test_kill9_of_a_write_back_stack_loses_no_flushed_write(tmp_path, raid, disks, seed, scenario, extra):
    stack = stack_file(tmp_path, "wb", WRITE_BACK, raid, disks, "16KiB")
    test_kill9_under_stamped_writes_loses_no_flushed_write(tmp_path, raid, disks, seed + 100, scenario, extra,
                                                           stack=stack)
