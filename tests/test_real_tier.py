"""The SSD tier on real bytes never returns a frame's stale contents.

`tier.img` keeps a block's old bytes after the tier lets the block go; a
frame is only ever read while the tier's map says it holds that block's
newest contents. Each round writes blocks through a served tier (so they are
cached, for write-back dirty), then overwrites them by every path that can
leave the tier's copy behind — a write the policy sends around the SSD
(`ro`, `pt`, `wa` of a block not cached), a sequential stream past
`sequential_cutoff`, WRITE_ZEROES and TRIM, a write of part of a block, a
write after the block was evicted dirty, the windows of `adaptive` — and
reads every block back: always the newest bytes. Then the same across a
clean restart and after kill -9 and a restart (the tier's journal replay
must not write a committed but since overwritten block back over the newer
bytes). A model of the volume (block → bytes) says what each read must be.
The same with two tenants, one export each, under every partitioner: windows
of 0.3 s re-size the partitions while the rounds run (a partition given
back evicts its blocks, dirty ones destaged).
"""

from __future__ import annotations

import random
import time

import pytest

from nbd_stamp import Nbd
from realkit import TIER_POLICIES, Server, js, run, stack_file, tier
from test_real_tenants import TWO

BS = 4096
CMD_TRIM, CMD_WRITE_ZEROES = 4, 6
ZERO = bytes(BS)


class Volume:
    """An NBD connection to a served stack and what every block must read."""

    def __init__(self, srv: Server, blocks: int, seed: int, export: str | None = None):
        self.srv = srv
        self.export = export or srv.name
        self.c = Nbd(srv.host, srv.port, self.export)
        self.want: dict[int, bytes] = {}
        self.blocks = blocks
        self.rng = random.Random(seed)
        self.version = 0

    def reconnect(self, srv: Server) -> None:
        self.srv = srv
        self.c = Nbd(srv.host, srv.port, self.export)

    def fresh(self, b: int) -> bytes:
        """New contents for block b: its number, a version, random bytes."""
        self.version += 1
        return b.to_bytes(8, "big") + self.version.to_bytes(8, "big") + self.rng.randbytes(BS - 16)

    def write(self, first: int, n: int = 1) -> None:
        data = [self.fresh(b) for b in range(first, first + n)]
        self.c.write(first * BS, b"".join(data))
        for i, d in enumerate(data):
            self.want[first + i] = d

    def write_part(self, b: int, at: int, length: int) -> None:
        """Bytes at..at+length of block b (a write of part of a block)."""
        new = self.rng.randbytes(length)
        self.c.write(b * BS + at, new)
        old = self.want.get(b, ZERO)
        self.want[b] = old[:at] + new + old[at + length:]

    def zero(self, cmd: int, first: int, n: int) -> None:
        self.c.call(cmd, first * BS, n * BS)
        for b in range(first, first + n):
            self.want[b] = ZERO

    def read(self, first: int, n: int = 1) -> None:
        got = self.c.read(first * BS, n * BS)
        for i in range(n):
            b = first + i
            have = got[i * BS:(i + 1) * BS]
            if have != self.want.get(b, ZERO):
                raise AssertionError(f"block {b}: {describe(have)}, the newest is {describe(self.want.get(b, ZERO))}")

    def read_scattered(self, blocks) -> None:
        """Each block read alone, in a shuffled order (never a sequential stream)."""
        blocks = list(blocks)
        self.rng.shuffle(blocks)
        for b in blocks:
            self.read(b)

    def check_all(self) -> None:
        self.read_scattered(sorted(self.want))


def describe(data: bytes) -> str:
    if data == ZERO:
        return "zeroes"
    return f"block {int.from_bytes(data[:8], 'big')} version {int.from_bytes(data[8:16], 'big')}"


def served_tier(tmp_path, name: str, policy: str, extra: str) -> tuple:
    s = stack_file(tmp_path, name, tier(policy, 64, extra), "5", 4, "16KiB")
    d = tmp_path / name
    run("real", "create", d, "--stack", s)
    return d, Server(d)


def overwrite_every_way(v: Volume, policy: str) -> None:
    """Cache blocks, then overwrite them by every path; read back after each."""
    hot = range(100, 132)
    # Written, then read scattered: every policy that fills reads has them now.
    for b in hot:
        v.write(b)
    v.read_scattered(hot)
    v.read_scattered(hot)
    # Overwritten one by one (the policy's own write path), read back.
    for b in list(hot)[::3]:
        v.write(b)
    v.read_scattered(hot)
    # A sequential stream of 4 KiB writes over them: past the cutoff
    # (64 KiB), the rest bypass the SSD whatever the policy.
    v.read_scattered(hot)
    for b in range(90, 132):
        v.write(b)
    v.read_scattered(range(90, 132))
    # Cached again, then zeroed (WRITE_ZEROES, TRIM), then part-written.
    v.read_scattered(hot)
    v.zero(CMD_WRITE_ZEROES, 104, 4)
    v.zero(CMD_TRIM, 120, 2)
    v.read_scattered(hot)
    v.write_part(110, 512, 1024)
    v.write_part(104, 0, 512)  # over zeroes
    v.read_scattered(hot)
    # Evicted by other traffic (64 frames, 300 other blocks), dirty ones
    # destaged; then overwritten while not cached, cached again, read.
    for b in v.rng.sample(range(400, min(v.blocks, 2000)), 300):
        v.write(b) if v.rng.random() < 0.5 else v.read(b)
    v.read_scattered(hot)
    for b in list(hot)[1::4]:
        v.write(b)
    v.read_scattered(hot)
    if policy == "adaptive":
        # A second window: writes over reads make ECI choose read-only or
        # write-back anew (windows of 1 s on the wall clock).
        time.sleep(1.1)
        for b in hot:
            v.write(b)
        time.sleep(1.1)
        v.read_scattered(hot)
    v.check_all()


TIER_EXTRA = 'sequential_cutoff = "64KiB"\nclean_high = 0.5\nclean_low = 0.25\nwindow_s = 1\n'


@pytest.mark.parametrize("policy", TIER_POLICIES)
def test_no_stale_frame_is_returned_after_an_overwrite_or_a_restart(tmp_path, policy):
    d, srv = served_tier(tmp_path, policy, policy, TIER_EXTRA)
    try:
        v = Volume(srv, 3072, seed=TIER_POLICIES.index(policy))
        overwrite_every_way(v, policy)
        st = js("real", "status", d)["stack"]["tier"]
        assert st["read_hits"] > 0 or policy in ("pt", "wo"), st
        v.c.flush()
        v.c.close()
        srv.stop()
        # A clean restart: the tier starts empty, the array has every block.
        srv = Server(d)
        v.reconnect(srv)
        v.check_all()
        # Cache them again (dirty for write-back), commit with a FLUSH, then
        # overwrite by the bypassing paths, FLUSH, kill -9: the journal's
        # older committed copies must not come back.
        hot = range(100, 132)
        for b in hot:
            v.write(b)
        v.read_scattered(hot)
        v.c.flush()
        for b in range(96, 132):  # sequential: bypasses past 64 KiB
            v.write(b)
        v.zero(CMD_WRITE_ZEROES, 126, 2)
        v.c.flush()
        v.read_scattered(hot)
        v.c.close()
        srv.kill9()
        srv = Server(d)
        v.reconnect(srv)
        v.check_all()
        v.c.close()
        srv.stop()
        chk = js("real", "check", d)
        assert (chk["mismatches"], chk["unrecoverable"]) == (0, 0), chk
    finally:
        srv.ensure_dead()


def test_a_journaled_dirty_block_overwritten_around_the_tier_stays_overwritten_after_kill9(tmp_path):
    """Write-back: a block dirty and committed (FLUSH), then overwritten by a
    sequential stream that bypasses the SSD, FLUSH, kill -9. Without a
    tombstone for it the restart would write the committed old copy back."""
    d, srv = served_tier(tmp_path, "wbcut", "wb", 'sequential_cutoff = "16KiB"\n')
    try:
        v = Volume(srv, 3072, seed=9)
        v.write(50)
        v.c.flush()
        for b in range(44, 52):  # the stream passes 16 KiB before block 50
            v.write(b)
        v.c.flush()
        v.read(50)
        v.c.close()
        srv.kill9()
        srv = Server(d)
        v.reconnect(srv)
        v.check_all()
        v.c.close()
        srv.stop()
    finally:
        srv.ensure_dead()


@pytest.mark.parametrize("partitioner", ["global", "static", "centaur", "eci"])
def test_no_stale_frame_for_two_tenants_under_every_partitioner(tmp_path, partitioner):
    s = tmp_path / "two.toml"
    s.write_text(TWO.format(tier=f'[tier]\nsize = 64\npartitioner = "{partitioner}"\nwrite_policy = "wb"\n'
                                 'window_s = 0.3\ninitial_blocks = 16\nsequential_cutoff = "64KiB"\n'))
    d = tmp_path / "two"
    run("real", "create", d, "--stack", s)
    srv = Server(d)
    try:
        # web: 4 MiB, db: 3 MiB (1,024 and 768 blocks).
        vols = [Volume(srv, 1024, 1, "web"), Volume(srv, 768, 2, "db")]
        for v in vols:
            overwrite_every_way(v, "wb")
            time.sleep(0.35)  # the next request closes a window
        for v in vols:
            v.check_all()
        assert js("real", "status", d)["stack"]["tier"]["windows"] > 0, "no window closed"
        for v in vols:
            v.c.flush()
            v.c.close()
        srv.kill9()
        srv = Server(d)
        for v in vols:
            v.reconnect(srv)
            v.check_all()
            v.c.close()
        srv.stop()
    finally:
        srv.ensure_dead()
