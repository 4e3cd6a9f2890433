"""A small NBD client that stamps what it writes, for crash tests over the
real server (`blocklab real serve`, and whatever stack it serves).

It speaks the protocol itself — fixed newstyle handshake, `NBD_OPT_GO`,
simple replies, `NBD_CMD_WRITE` / `READ` / `FLUSH`, many requests in flight
on one connection — so that it knows exactly which write was acknowledged
when, and which `FLUSH` covered it:

- every 4 KiB block it writes carries a stamp: a magic, the block's number,
  the write's sequence number (unique over the run) and a CRC-32 over the
  rest of the block, so a read tells a block's last write apart from an
  older one, from another block's data, and from garbage;
- a `FLUSH` covers the writes acknowledged before it was sent (NBD's rule);
  when its reply comes, those writes become *durable*; so does a write sent
  with `FUA` once acknowledged;
- a block has at most one write in flight, so its writes land in the order
  they were sent.

`Stamper.verify_block` then says what a block may hold after a crash: the
stamp of its last durable write, or of any write to it sent later (which
may or may not have landed); zeroes when nothing durable was written to it;
never an older stamp, another block's, or bytes no write produced.
"""

from __future__ import annotations

import random
import socket
import struct
import zlib
from dataclasses import dataclass, field

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPLY_MAGIC = 0x3E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698
OPT_GO = 7
REP_ACK, REP_INFO = 1, 3
INFO_EXPORT = 0
FLAG_SEND_FLUSH, FLAG_SEND_FUA = 1 << 2, 1 << 3
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH = 0, 1, 2, 3
CMD_FLAG_FUA = 1
EIO = 5
BLOCK = 4096
STAMP_MAGIC = b"BLSTAMP1"


class NbdError(Exception):
    pass


def recv_exact(s: socket.socket, n: int) -> bytes:
    b = bytearray()
    while len(b) < n:
        k = s.recv(n - len(b))
        if not k:
            raise ConnectionError("server closed the connection")
        b += k
    return bytes(b)


class Nbd:
    """One NBD connection in the transmission phase, requests pipelined:
    `send` returns a cookie, `recv` returns the next reply (in the server's
    completion order); `read` / `write` / `flush` send one request as given
    (never split or merged) and wait for it."""

    def __init__(self, host: str, port: int, name: str, timeout: float = 60):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        magic, opt, hflags = struct.unpack(">QQH", recv_exact(self.s, 18))
        if (magic, opt) != (NBDMAGIC, IHAVEOPT):
            raise NbdError("not a fixed newstyle NBD server")
        self.s.sendall(struct.pack(">I", 1 | (hflags & 2)))  # FIXED_NEWSTYLE, NO_ZEROES if offered
        raw = name.encode()
        body = struct.pack(">I", len(raw)) + raw + struct.pack(">H", 0)
        self.s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, len(body)) + body)
        self.size = self.flags = None
        while True:
            rmagic, _, rtype, rlen = struct.unpack(">QIII", recv_exact(self.s, 20))
            data = recv_exact(self.s, rlen)
            if rmagic != REPLY_MAGIC:
                raise NbdError(f"bad option reply magic {rmagic:#x}")
            if rtype & (1 << 31):
                raise NbdError(f"NBD_OPT_GO refused: reply type {rtype:#x} {data!r}")
            if rtype == REP_INFO and struct.unpack(">H", data[:2])[0] == INFO_EXPORT:
                self.size, self.flags = struct.unpack(">QH", data[2:12])
            if rtype == REP_ACK:
                break
        if self.size is None:
            raise NbdError("no NBD_INFO_EXPORT before NBD_REP_ACK")
        self.next_cookie = 1
        self.pending: dict[int, tuple[int, int]] = {}  # cookie -> (command, length)

    def send(self, cmd: int, offset: int, length: int, data: bytes = b"", flags: int = 0) -> int:
        cookie = self.next_cookie
        self.next_cookie += 1
        self.pending[cookie] = (cmd, length)
        self.s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, flags, cmd, cookie, offset, length) + data)
        return cookie

    def recv(self) -> tuple[int, int, bytes]:
        """(cookie, error, data): a read's data follows only a reply without an error."""
        magic, err, cookie = struct.unpack(">IIQ", recv_exact(self.s, 16))
        if magic != SIMPLE_REPLY_MAGIC or cookie not in self.pending:
            raise NbdError(f"bad reply: magic {magic:#x}, cookie {cookie}")
        cmd, length = self.pending.pop(cookie)
        data = recv_exact(self.s, length) if cmd == CMD_READ and err == 0 else b""
        return cookie, err, data

    def call(self, cmd: int, offset: int, length: int, data: bytes = b"", flags: int = 0) -> bytes:
        """One request, waited for (nothing else in flight); its data, or NbdError."""
        cookie = self.send(cmd, offset, length, data, flags)
        got, err, body = self.recv()
        if got != cookie or err:
            raise NbdError(f"command {cmd} at {offset}+{length}: error {err}")
        return body

    def read(self, offset: int, length: int) -> bytes:
        return self.call(CMD_READ, offset, length)

    def write(self, offset: int, data: bytes) -> None:
        self.call(CMD_WRITE, offset, len(data), data)

    def flush(self) -> None:
        self.call(CMD_FLUSH, 0, 0)

    def close(self) -> None:
        try:
            if not self.pending:
                self.s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_DISC, 0, 0, 0))
        except OSError:
            pass
        self.s.close()


def stamped(block: int, seq: int) -> bytes:
    """Block `block`'s contents as written by write `seq`."""
    filler = random.Random(seq).randbytes(BLOCK - 28)
    head = STAMP_MAGIC + struct.pack("<QQ", block, seq)
    return head + struct.pack("<I", zlib.crc32(head + filler)) + filler


def parse_stamp(data: bytes) -> tuple[int, int] | None:
    """(block, seq) of a well-formed stamp, else None."""
    if data[:8] != STAMP_MAGIC:
        return None
    if struct.unpack("<I", data[24:28])[0] != zlib.crc32(data[:24] + data[28:]):
        return None
    return struct.unpack("<QQ", data[8:24])


@dataclass
class Stamper:
    """The write workload and its ledger. `blocks` is how many 4 KiB blocks
    from the start of the export it writes."""

    blocks: int
    seed: int
    depth: int = 32
    flush_every: int = 64  # writes between FLUSHes
    fua_one_in: int = 16
    seq: int = 0
    written: dict[int, list[int]] = field(default_factory=dict)  # block -> seqs sent, in order
    acked: dict[int, int] = field(default_factory=dict)  # block -> last acknowledged seq
    durable: dict[int, int] = field(default_factory=dict)  # block -> last seq a FLUSH/FUA made durable
    flushes_done: int = 0
    writes_acked: int = 0
    error: str | None = None  # how the run ended (the server killed, or a failure)

    def run(self, nbd: Nbd, stop) -> None:
        """Write until `stop()` or until the connection dies (the server was
        killed); what was acknowledged is in the ledger either way."""
        rng = random.Random(self.seed)
        busy: set[int] = set()  # blocks with a write in flight
        inflight: dict[int, tuple] = {}  # cookie -> ("w", blocks, seqs, fua) | ("f", snapshot)
        since_flush = 0
        fua_ok = bool(nbd.flags & FLAG_SEND_FUA)
        try:
            while not stop():
                while len(inflight) < self.depth:
                    if since_flush >= self.flush_every and nbd.flags & FLAG_SEND_FLUSH:
                        # Covers exactly what is acknowledged now.
                        inflight[nbd.send(CMD_FLUSH, 0, 0)] = ("f", dict(self.acked))
                        since_flush = 0
                        continue
                    n = 1 if rng.random() < 0.75 else rng.randint(2, 16)
                    first = rng.randrange(self.blocks - n + 1)
                    span = range(first, first + n)
                    if any(b in busy for b in span):
                        continue  # one write per block in flight: they land in order
                    seqs = []
                    for b in span:
                        self.seq += 1
                        seqs.append(self.seq)
                        self.written.setdefault(b, []).append(self.seq)
                    fua = fua_ok and rng.randrange(self.fua_one_in) == 0
                    data = b"".join(stamped(b, s) for b, s in zip(span, seqs))
                    cookie = nbd.send(CMD_WRITE, first * BLOCK, n * BLOCK, data, CMD_FLAG_FUA if fua else 0)
                    inflight[cookie] = ("w", span, seqs, fua)
                    busy.update(span)
                    since_flush += 1
                cookie, err, _ = nbd.recv()
                what = inflight.pop(cookie)
                if err:
                    raise NbdError(f"{'write' if what[0] == 'w' else 'flush'} failed with error {err}")
                if what[0] == "w":
                    _, span, seqs, fua = what
                    for b, s in zip(span, seqs):
                        self.acked[b] = s
                        if fua:
                            self.durable[b] = s
                    busy.difference_update(span)
                    self.writes_acked += 1
                else:
                    for b, s in what[1].items():
                        if s > self.durable.get(b, 0):
                            self.durable[b] = s
                    self.flushes_done += 1
        except (OSError, ConnectionError, NbdError, struct.error) as e:
            self.error = f"{type(e).__name__}: {e}"

    def allowed(self, block: int) -> set[int]:
        """The stamps `block` may hold after a crash (0: all zeroes)."""
        seqs = self.written.get(block, [])
        d = self.durable.get(block, 0)
        later = {s for s in seqs if s > d}
        return later | {d}

    def verify_block(self, block: int, data: bytes) -> str | None:
        """None when `data` is a state `block` may be in after a crash, else why not."""
        ok = self.allowed(block)
        if data == bytes(BLOCK):
            return None if 0 in ok else f"block {block}: zeroes, but write {self.durable[block]} was flushed"
        st = parse_stamp(data)
        if st is None:
            return f"block {block}: garbage (no valid stamp)"
        b, s = st
        if b != block:
            return f"block {block}: holds block {b}'s write {s}"
        if s not in ok:
            if s in self.written.get(block, []):
                return f"block {block}: older write {s}, but write {self.durable.get(block)} was flushed"
            return f"block {block}: stamp {s} was never written here"
        return None


def read_all(nbd: Nbd, blocks: int, depth: int = 32) -> dict[int, bytes | int]:
    """Every block's bytes, or its error number, 4 KiB reads pipelined."""
    out: dict[int, bytes | int] = {}
    inflight: dict[int, int] = {}
    nxt = 0
    while nxt < blocks or inflight:
        while nxt < blocks and len(inflight) < depth:
            inflight[nbd.send(CMD_READ, nxt * BLOCK, BLOCK)] = nxt
            nxt += 1
        cookie, err, data = nbd.recv()
        out[inflight.pop(cookie)] = err if err else data
    return out
