"""A minimal NBD server over one file that records every write, in order, for the inference tests:
`python nbd_logserver.py IMAGE LOG` prints `port N` and serves `nbd://127.0.0.1:N` (fixed newstyle,
NBD_OPT_GO / INFO / EXPORT_NAME, simple replies; read, write, flush, disconnect) until killed.

The log (what `blocklab dgraid infer --order stream:LOG` replays): per write `W`, u64 offset, u32
length (little-endian), the bytes; per flush `F`. Connections are served one request at a time
under one lock, so the log is the order the device saw.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading

from nbd_stamp import IHAVEOPT, NBDMAGIC, REPLY_MAGIC, REQUEST_MAGIC, SIMPLE_REPLY_MAGIC, recv_exact

ERR_UNSUP = 0x80000001
TX_FLAGS = 1 | 4  # HAS_FLAGS, SEND_FLUSH


class Export:
    def __init__(self, image: str, log: str):
        self.fd = os.open(image, os.O_RDWR)
        self.size = os.fstat(self.fd).st_size
        self.log = open(log, "ab")
        self.lock = threading.Lock()

    def serve(self, s: socket.socket) -> None:
        s.sendall(struct.pack(">QQH", NBDMAGIC, IHAVEOPT, 1 | 2))
        (cflags,) = struct.unpack(">I", recv_exact(s, 4))
        while True:
            magic, opt, length = struct.unpack(">QII", recv_exact(s, 16))
            data = recv_exact(s, length)
            if opt == 1:  # EXPORT_NAME
                s.sendall(struct.pack(">QH", self.size, TX_FLAGS) + (b"" if cflags & 2 else b"\0" * 124))
                break
            if opt in (6, 7):  # INFO, GO
                info = struct.pack(">HQH", 0, self.size, TX_FLAGS)
                s.sendall(struct.pack(">QIII", REPLY_MAGIC, opt, 3, len(info)) + info)
                s.sendall(struct.pack(">QIII", REPLY_MAGIC, opt, 1, 0))
                if opt == 7:
                    break
            elif opt == 2:  # ABORT
                s.sendall(struct.pack(">QIII", REPLY_MAGIC, opt, 1, 0))
                return
            else:
                s.sendall(struct.pack(">QIII", REPLY_MAGIC, opt, ERR_UNSUP, 0))
        while True:
            magic, _flags, typ, cookie, off, length = struct.unpack(">IHHQQI", recv_exact(s, 28))
            if magic != REQUEST_MAGIC:
                return
            if typ == 0:  # READ
                with self.lock:
                    data = os.pread(self.fd, length, off)
                s.sendall(struct.pack(">IIQ", SIMPLE_REPLY_MAGIC, 0, cookie) + data)
            elif typ == 1:  # WRITE
                data = recv_exact(s, length)
                with self.lock:
                    os.pwrite(self.fd, data, off)
                    self.log.write(b"W" + struct.pack("<QI", off, length) + data)
                s.sendall(struct.pack(">IIQ", SIMPLE_REPLY_MAGIC, 0, cookie))
            elif typ == 3:  # FLUSH
                with self.lock:
                    os.fsync(self.fd)
                    self.log.write(b"F")
                    self.log.flush()
                s.sendall(struct.pack(">IIQ", SIMPLE_REPLY_MAGIC, 0, cookie))
            elif typ == 2:  # DISC
                with self.lock:
                    self.log.flush()
                return
            else:
                s.sendall(struct.pack(">IIQ", SIMPLE_REPLY_MAGIC, 22, cookie))


def main() -> None:
    image, log = sys.argv[1], sys.argv[2]
    exp = Export(image, log)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    print(f"port {ls.getsockname()[1]}", flush=True)

    def handle(c: socket.socket) -> None:
        try:
            exp.serve(c)
        except ConnectionError:
            pass
        finally:
            with exp.lock:
                exp.log.flush()
            c.close()

    while True:
        c, _ = ls.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
