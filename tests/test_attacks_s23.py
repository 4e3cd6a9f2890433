"""Session 23's attacks on a served stack whose member I/O runs outside its mutex (docs/real.md, "Requests
in parallel"): several clients with deep queues of stamped writes and periodic FLUSHes through a
write-back cache and tier over RAID-5, killed with SIGKILL mid-flight, then started again as it was,
with a member file deleted, or with a member put back from an older stop; SIGTERM with a stalled peer;
two tenants' partial-block writers while a member is failed, replaced and rebuilt; a FLUSH over NBD
after a destage failed past the redundancy. (More failed-destage attacks, a fill that fails, a tier
frame reused under an old read, one block's halves raced: Rust, `exec::real::stack_attack_tests`.)

The outcome asserted: every block reads the write a completed FLUSH covered or one sent after it; or
the start is refused in one line with exit status 2; or the read is an NBD error — never other bytes.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from nbd_stamp import CMD_FLUSH, CMD_READ, CMD_WRITE, Nbd, NbdError, parse_stamp, stamped
from realkit import BLOCKLAB, Server, cache, run, stack_file, tier

BS = 4096
BLOCKS = 1536  # 6 MiB of the 12 MiB array
CLIENTS = 4
DEPTH = 16
FULL = os.environ.get("BLOCKLAB_FULL_MATRIX") == "1"


class Ledger:
    """What every client sent and was told, on one logical clock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clock = 0
        self.writes: dict[int, list[list]] = {}  # block -> [seq, acked at or None], in send order
        self.flush_sent_done = 0  # the newest send time of a completed FLUSH

    def tick(self) -> int:
        with self.lock:
            self.clock += 1
            return self.clock


def client(srv: Server, me: int, led: Ledger, stop: threading.Event, seed: int) -> None:
    """Pipelined writes of its own blocks (b % CLIENTS == me, never two in flight on one block), a FLUSH
    every 64 of them (its queue drained first), until `stop` or the server dies."""
    rnd = random.Random(seed)
    try:
        c = Nbd(srv.host, srv.port, srv.name, timeout=20)
    except OSError:
        return
    mine = [b for b in range(BLOCKS) if b % CLIENTS == me]
    busy: dict[int, tuple[int, list]] = {}  # cookie -> (block, ledger entry)
    seq = me << 40
    sent = 0
    try:
        while not stop.is_set():
            while len(busy) < DEPTH and not stop.is_set():
                b = mine[int(rnd.random() ** 2 * len(mine))]
                if any(blk == b for blk, _ in busy.values()):
                    continue
                seq += 1
                entry = [seq, None]
                with led.lock:
                    led.writes.setdefault(b, []).append(entry)
                busy[c.send(CMD_WRITE, b * BS, BS, stamped(b, seq))] = (b, entry)
                sent += 1
                if sent % 64 == 0:
                    break
            while busy and (len(busy) >= DEPTH or sent % 64 == 0):
                cookie, err, _ = c.recv()
                _, entry = busy.pop(cookie)
                if err == 0:
                    entry[1] = led.tick()
            if sent % 64 == 0 and not busy:
                at = led.tick()
                cookie = c.send(CMD_FLUSH, 0, 0)
                got, err, _ = c.recv()
                if got == cookie and err == 0:
                    with led.lock:
                        led.flush_sent_done = max(led.flush_sent_done, at)
                sent += 1  # one FLUSH per 64 writes
    except (OSError, NbdError, ConnectionError):
        pass


def killed_mid_flight(d: Path, secs: float, seed: int) -> Ledger:
    led = Ledger()
    srv = Server(d)
    stop = threading.Event()
    ts = [threading.Thread(target=client, args=(srv, i, led, stop, seed * 10 + i)) for i in range(CLIENTS)]
    try:
        for t in ts:
            t.start()
        time.sleep(secs)
        srv.kill9()
    finally:
        stop.set()
        srv.ensure_dead()
        for t in ts:
            t.join(timeout=60)
    assert led.flush_sent_done > 0, "no FLUSH completed before the kill"
    return led


def allowed(led: Ledger, b: int) -> set[int]:
    """The stamps block `b` may hold: the last write acknowledged before the newest completed FLUSH
    was sent (0: none) and every write of it sent after that one."""
    ws = led.writes.get(b, [])
    floor = max((i for i, (_, acked) in enumerate(ws) if acked is not None and acked < led.flush_sent_done),
                default=None)
    ok = {seq for seq, _ in ws[(floor or 0):]}
    if floor is None:
        ok.add(0)
    return ok


def check_served(d: Path, led: Ledger) -> tuple[int, int]:
    """Serve `d` again and read every written block: (wrong, eio). A start refused in one line (a dirty
    array missing a member) is served with `--start-dirty-degraded`: its lost units must read as errors."""
    p = run("real", "status", d, check=False, timeout=120)
    extra: tuple[str, ...] = ()
    if p.returncode != 0:
        err = p.stderr.strip()
        assert p.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, p.stderr
        assert "--start-dirty-degraded" in err, err
        extra = ("--start-dirty-degraded",)
        # With a write-back tier that start may be refused too (its journal's write-back meets the
        # lost units): one line, exit 2.
        p = subprocess.Popen([*BLOCKLAB, "real", "serve", str(d), "--listen", "127.0.0.1:0", *extra],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        banner = p.stdout.readline()
        if not banner:
            p.wait(timeout=60)
            err = p.stderr.read().strip()
            assert p.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
            return 0, -1
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    srv = Server(d, *extra)
    wrong = eio = 0
    try:
        c = Nbd(srv.host, srv.port, srv.name)
        for b in sorted(led.writes):
            try:
                data = c.read(b * BS, BS)
            except NbdError:
                eio += 1
                continue
            st = (0, 0) if data == bytes(BS) else parse_stamp(data)
            seq = st[1] if st else -1
            if st is None or (seq and st[0] != b) or seq not in allowed(led, b):
                wrong += 1
        c.close()
        srv.stop()
    finally:
        srv.ensure_dead()
    return wrong, eio


LAYERS = {
    "wb-lru": cache("lru", 256, "back"),
    "wb-lru-wb-tier": cache("lru", 128, "back") + tier("wb", 512),
}


def created(tmp: Path, name: str, layers: str) -> Path:
    s = stack_file(tmp, name, layers)
    d = tmp / name
    run("real", "create", d, "--stack", s)
    return d


@pytest.mark.parametrize("layers", sorted(LAYERS) if FULL else ["wb-lru-wb-tier"])
@pytest.mark.parametrize("restart", ["as-is", "member-deleted", "member-stale"])
def test_kill9_of_deep_queues_with_flushes_loses_nothing_a_flush_covered(tmp_path, layers, restart):
    d = created(tmp_path, "a", LAYERS[layers])
    if restart == "member-stale":
        # An older copy of member 1: the array as it was at a clean stop before the run.
        srv = Server(d)
        c = Nbd(srv.host, srv.port, srv.name)
        for b in range(0, BLOCKS, 7):
            c.write(b * BS, stamped(b, 1 << 50 | b))
        c.flush()
        c.close()
        srv.stop()
        shutil.copy(d / "disk-1.img", tmp_path / "old-disk-1.img")
    led = killed_mid_flight(d, 4.0 if FULL else 2.0, seed=len(restart))
    if restart == "member-deleted":
        (d / "disk-1.img").unlink()
    elif restart == "member-stale":
        shutil.copy(tmp_path / "old-disk-1.img", d / "disk-1.img")
        # Its writes before the run were acknowledged and flushed: they count as block contents too.
        for b in range(0, BLOCKS, 7):
            led.writes.setdefault(b, []).insert(0, [1 << 50 | b, 0])
    wrong, eio = check_served(d, led)
    assert wrong == 0, f"{wrong} blocks read bytes no allowed write made (eio {eio})"


def test_sigterm_with_a_stalled_peer_and_jobs_in_flight_exits_and_keeps_every_acknowledged_write(tmp_path):
    """A client pipelines large writes over the hot blocks and never reads a reply (its replies fill the
    socket); another hammers the same blocks with reads, writes and FLUSHes. SIGTERM: the server exits
    (no hang on the stalled peer or on jobs in flight), and every write acknowledged to the second client
    reads back after a restart (or one sent after it, or the stalled client's)."""
    d = created(tmp_path, "a", LAYERS["wb-lru-wb-tier"])
    srv = Server(d)
    hot = 256
    stalled_seqs: dict[int, set[int]] = {}
    try:
        stalled = Nbd(srv.host, srv.port, srv.name, timeout=5)
        stalled.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        seq = 1 << 48
        for k in range(48):  # 48 writes of 64 KiB over the hot blocks, reads of them too: never read back
            first = (k * 16) % hot
            data = b"".join(stamped(b, seq + b) for b in range(first, first + 16))
            for b in range(first, first + 16):
                stalled_seqs.setdefault(b, set()).add(seq + b)
            stalled.send(CMD_WRITE, first * BS, len(data), data)
            stalled.send(CMD_READ, first * BS, len(data))
            seq += 1 << 20
        c = Nbd(srv.host, srv.port, srv.name)
        rnd = random.Random(7)
        last: dict[int, int] = {}
        for i in range(1, 1500):
            b = rnd.randrange(hot)
            if i % 5 == 0:
                got = c.read(b * BS, BS)
                assert got == bytes(BS) or parse_stamp(got) is not None and parse_stamp(got)[0] == b
            else:
                c.write(b * BS, stamped(b, i))
                last[b] = i
            if i % 200 == 0:
                c.flush()
        srv.p.send_signal(signal.SIGTERM)
        srv.p.wait(timeout=60)  # a hang, not a time measurement
        assert srv.p.returncode == 0, srv.p.stderr.read()
        stalled.s.close()
        c.s.close()
    finally:
        srv.ensure_dead()
    srv = Server(d)
    try:
        c = Nbd(srv.host, srv.port, srv.name)
        wrong = []
        for b, seq in last.items():
            st = parse_stamp(c.read(b * BS, BS))
            if st is None or st[0] != b or (st[1] != seq and st[1] not in stalled_seqs.get(b, ())):
                wrong.append((b, seq, st))
        c.close()
        srv.stop()
    finally:
        srv.ensure_dead()
    assert not wrong, f"{len(wrong)} acknowledged writes lost after SIGTERM: {wrong[:5]}"


TENANTS = """tenant_map = "concat"
[[tenant]]
name = "web"
size = "4MiB"
[[tenant]]
name = "db"
size = "3MiB"
[[cache]]
policy = "lru"
size = 48
write = "back"
[tier]
size = 192
write_policy = "wb"
[array]
raid = "raid5"
disks = 4
chunk = "16KiB"
disk_size = "4MiB"
[device]
model = "const:1"
"""
SECTOR = 512


def sector_bytes(wid: int, s: int) -> bytes:
    return struct.pack(">QQ", wid, s) * (SECTOR // 16)


def partial_writer(srv: Server, export: str, me: int, span: int, stop: threading.Event, errors: list) -> None:
    """Synchronous reads and writes of 512-byte-aligned ranges across the two blocks of its own pairs
    (pairs p with p % 2 == me: the other client of the export has the rest), a FLUSH now and then; each
    read checked sector by sector against what this client wrote (nobody else writes those sectors)."""
    rnd = random.Random(export + str(me))
    model: dict[int, int] = {}
    try:
        c = Nbd(srv.host, srv.port, export, timeout=120)
        pairs = [p for p in range(span // 2) if p % 2 == me]
        wid = me << 40
        while not stop.is_set():
            p = pairs[int(rnd.random() ** 2 * len(pairs))]
            first = p * 2 * BS // SECTOR + rnd.randrange(16)  # sectors of the pair: 16 blocks' worth
            n = 1 + rnd.randrange(2 * BS // SECTOR - first % 16)
            k = rnd.randrange(10)
            if k == 0:
                c.flush()
            elif k < 6:
                wid += 1
                c.write(first * SECTOR, b"".join(sector_bytes(wid, s) for s in range(first, first + n)))
                for s in range(first, first + n):
                    model[s] = wid
            else:
                got = c.read(first * SECTOR, n * SECTOR)
                for i, s in enumerate(range(first, first + n)):
                    want = sector_bytes(model[s], s) if s in model else bytes(SECTOR)
                    if got[i * SECTOR:(i + 1) * SECTOR] != want:
                        errors.append(f"{export} client {me}: sector {s} is not its last write {model.get(s)}")
                        return
        c.close()
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.append(f"{export} client {me}: {e!r}")


def test_tenants_partial_writes_and_a_member_failed_replaced_and_rebuilt_while_served_never_hang(tmp_path):
    """Two tenants' exports, two clients each writing partial blocks across block pairs through a shared
    write-back cache and tier over RAID-5 (destages of evicted victims in any block order), while a
    member is failed, replaced and rebuilt: no request hangs, every read is the client's own last write."""
    stackf = tmp_path / "two.toml"
    stackf.write_text(TENANTS)
    d = tmp_path / "a"
    run("real", "create", d, "--stack", stackf)
    srv = Server(d)
    stop = threading.Event()
    errors: list[str] = []
    spans = {"web": 1024, "db": 768}
    ts = [threading.Thread(target=partial_writer, args=(srv, e, me, spans[e], stop, errors), daemon=True)
          for e in spans for me in (0, 1)]
    reb = None
    try:
        for t in ts:
            t.start()
        time.sleep(1.0)
        run("real", "fail", d, "1", timeout=120)
        time.sleep(0.5)
        run("real", "replace", d, "1", timeout=120)
        reb = subprocess.Popen([*BLOCKLAB, "real", "rebuild", str(d), "--json"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        reb.wait(timeout=300)
        assert reb.returncode == 0, reb.stderr
        time.sleep(0.5)
        stop.set()
        for t in ts:
            t.join(timeout=120)
            assert not t.is_alive(), "a client hung"
        assert not errors, errors
        srv.stop()
    finally:
        stop.set()
        if reb is not None and reb.poll() is None:
            reb.kill()
        srv.ensure_dead()


def test_a_flush_over_nbd_after_a_destage_failed_past_the_redundancy_is_an_error(tmp_path):
    """A write acknowledged into a write-back cache; two members failed through the server (the block's
    row past the redundancy); another request evicts it, its destage fails: the client's next FLUSH gets
    an NBD error, not success, and a read of the block an error, not its older bytes."""
    d = created(tmp_path, "a", cache("lru", 2, "back"))
    srv = Server(d)
    try:
        c = Nbd(srv.host, srv.port, srv.name)
        c.write(0, stamped(0, 1))
        c.flush()
        c.write(0, stamped(0, 2))  # dirty in the cache only
        for disk in ("0", "1"):
            p = run("real", "fail", d, disk, check=False, timeout=120)
            assert p.returncode in (0, 2), p.stderr
        if p.returncode != 0:
            pytest.skip(f"the second failure was refused: {p.stderr.strip()}")
        for b in (8, 9):  # evict block 0 (on member 0)
            try:
                c.read(b * BS, BS)
            except NbdError:
                pass
        with pytest.raises(NbdError):
            c.flush()
        try:
            got = parse_stamp(c.read(0, BS))
            assert got == (0, 2), f"block 0 read {got} after its destage failed"
        except NbdError:
            pass
        c.close()
        srv.stop()
    finally:
        srv.ensure_dead()
