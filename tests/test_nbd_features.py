"""What NBD clients and mdadm users expect of `blocklab real`: the disk of
`real fail` / `real replace` given positionally, the export listed with a
human description, and structured replies with `base:allocation` through
real clients (nbdinfo, qemu-img, nbdcopy) on a served array.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from realkit import Server, js, make_array, random_file, read_export, run


def nbd_map(uri: str) -> list:
    """`nbdinfo --map` as (offset, length, type) extents of base:allocation."""
    m = json.loads(subprocess.run(["nbdinfo", "--map", "--json", uri], check=True, capture_output=True, text=True,
                                  timeout=60).stdout)
    return [(e["offset"], e["length"], e["type"]) for e in m]


def _one_line_exit_2(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    for n in needles:
        assert n in p.stderr, p.stderr


def test_fail_and_replace_take_the_disk_positionally(tmp_path):
    d = make_array(tmp_path, "arr", "6", 5, "1MiB")
    run("real", "fail", d, "1")  # as `mdadm --fail /dev/md0 /dev/sdb`: the disk last
    assert js("real", "status", d)["failed"] == [1]
    run("real", "fail", d, "3", "--disk", "3")  # both, agreeing: fine
    assert js("real", "status", d)["failed"] == [1, 3]
    st = json.loads(run("real", "replace", d, "1", "--json").stdout)
    assert st["recovering"] == [1]
    run("real", "replace", d, "--disk", "3")  # the flag still works
    assert js("real", "status", d)["recovering"] == [1, 3]
    _one_line_exit_2(run("real", "fail", d, "2", "--disk", "4", check=False), "DISK 2", "--disk 4", "disagree")
    _one_line_exit_2(run("real", "fail", d, check=False), "which disk")
    _one_line_exit_2(run("real", "fail", d, "9", check=False), "DISK 9", "cannot fail disk 9")
    _one_line_exit_2(run("real", "replace", d, "0", check=False), "not failed")
    st = js("real", "status", d)
    assert (st["failed"], st["recovering"]) == ([1, 3], [1, 3])  # the refused commands changed nothing


def test_nbdinfo_list_shows_the_export_with_its_chunk_in_human_units(tmp_path):
    d = make_array(tmp_path, "arr", "5", 4, "1MiB", "64KiB")
    srv = Server(d)
    try:
        out = subprocess.run(["nbdinfo", "--list", "--json", f"nbd://{srv.host}:{srv.port}"], check=True,
                             capture_output=True, text=True, timeout=60).stdout
        exports = json.loads(out)["exports"]
        assert [e["export-name"] for e in exports] == ["blocklab"]
        assert exports[0]["description"].startswith("blocklab raid5 of 4, chunk 64 KiB ("), exports[0]
    finally:
        srv.stop()


def test_structured_clients_map_copy_and_see_eio_past_redundancy(tmp_path):
    """nbdinfo --map, qemu-img map and nbdcopy negotiate structured replies
    and base:allocation on the real array: never-written regions are holes,
    written ones data; nbdcopy's sparse copy reproduces the image byte for
    byte; degraded, everything is data; a read past redundancy is an error
    the client sees (a structured ERROR chunk), never wrong bytes."""
    d = make_array(tmp_path, "arr", "5", 4, "1MiB")
    srv = Server(d)
    size = 3 << 20
    hz = 3  # NBD_STATE_HOLE | NBD_STATE_ZERO
    try:
        # A fresh array is one hole; one written region (qemu-io) is data between holes.
        assert nbd_map(srv.uri) == [(0, size, hz)]
        subprocess.run(["qemu-io", "-f", "raw", "-c", "write -P 0x55 1M 64k", srv.uri], check=True,
                       capture_output=True, timeout=60)
        assert nbd_map(srv.uri) == [(0, 1 << 20, hz), (1 << 20, 65536, 0), ((1 << 20) + 65536, size - (1 << 20) - 65536, hz)]
        q = json.loads(subprocess.run(["qemu-img", "map", "--output=json", "-f", "raw", srv.uri], check=True,
                                      capture_output=True, text=True, timeout=60).stdout)
        assert [(e["start"], e["length"], e["data"]) for e in q] == [
            (0, 1 << 20, False), (1 << 20, 65536, True), ((1 << 20) + 65536, size - (1 << 20) - 65536, False)]
        sparse = tmp_path / "sparse.bin"
        subprocess.run(["nbdcopy", srv.uri, str(sparse)], check=True, capture_output=True, timeout=120)
        assert sparse.read_bytes() == bytes(1 << 20) + b"\x55" * 65536 + bytes(size - (1 << 20) - 65536)
        # Written all over: all data.
        data = random_file(tmp_path / "in.bin", size, seed=3)
        subprocess.run(["nbdcopy", str(tmp_path / "in.bin"), srv.uri], check=True, capture_output=True, timeout=120)
        assert nbd_map(srv.uri) == [(0, size, 0)]
        q = json.loads(subprocess.run(["qemu-img", "map", "--output=json", "-f", "raw", srv.uri], check=True,
                                      capture_output=True, text=True, timeout=60).stdout)
        assert [(e["start"], e["length"], e["data"]) for e in q] == [(0, size, True)]
        out = tmp_path / "out.bin"
        subprocess.run(["nbdcopy", srv.uri, str(out)], check=True, capture_output=True, timeout=120)
        assert out.read_bytes() == data
        run("real", "fail", d, "0")
        assert read_export(srv, out) == data  # degraded: still every byte
        assert nbd_map(srv.uri) == [(0, size, 0)]
        run("real", "fail", d, "1")  # past RAID-5's redundancy
        p = subprocess.run(["nbdcopy", srv.uri, str(tmp_path / "lost.bin")], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode != 0 and "Input/output error" in p.stderr, p.stderr
    finally:
        srv.stop()


# --- TRIM as holes -------------------------------------------------------------

CMD_TRIM, CMD_WRITE_ZEROES, FLAG_NO_HOLE = 4, 6, 2
KiB, MiB = 1 << 10, 1 << 20


def data_runs(m: list) -> list:
    """The data extents of an nbdinfo map, adjacent ones merged, as (offset, length)."""
    out: list = []
    for off, length, typ in m:
        if typ & 1:
            continue
        if out and out[-1][0] + out[-1][1] == off:
            out[-1] = (out[-1][0], out[-1][1] + length)
        else:
            out.append((off, length))
    return out


@pytest.mark.parametrize("checksums", [False, True], ids=["plain", "checksums"])
def test_trimmed_whole_stripes_are_holes_and_stay_zeroes_through_check_and_rebuild(tmp_path, checksums):
    """RAID-5 of 4 x 16 MiB, 64 KiB chunks (a stripe: 192 KiB of data). After data all over, a TRIM of whole
    stripes becomes a hole for nbdinfo / qemu-img / nbdcopy; a TRIM of part of a stripe, and WRITE_ZEROES with
    NO_HOLE, stay data (zeroes); everything reads back; the parity scrub is clean; a failed member rebuilt onto
    a spare holds what the lost one held, and the trimmed ranges still read as zeroes."""
    from nbd_stamp import Nbd

    d = make_array(tmp_path, "arr", "5", 4, "16MiB", "64KiB", *(["--checksums"] if checksums else []))
    size, stripe = 48 * MiB, 192 * KiB
    srv = Server(d)
    try:
        data = bytearray(random_file(tmp_path / "in.bin", size, seed=23))
        subprocess.run(["nbdcopy", str(tmp_path / "in.bin"), srv.uri], check=True, capture_output=True, timeout=120)
        assert nbd_map(srv.uri) == [(0, size, 0)]
        c = Nbd(srv.host, srv.port, srv.name)
        ops = [
            (CMD_TRIM, 2 * stripe, 5 * stripe, 0),                      # stripes 2-6: holes
            (CMD_TRIM, 10 * stripe + 4096, 100 * KiB, 0),               # inside stripe 10: zeroes, data
            (CMD_TRIM, 20 * stripe + 8192, 3 * stripe, 0),              # partial 20, whole 21-22, partial 23
            (CMD_WRITE_ZEROES, 30 * stripe, 3 * stripe, FLAG_NO_HOLE),  # must not punch: data
            (CMD_WRITE_ZEROES, 40 * stripe, 2 * stripe, 0),             # may punch: holes
            (CMD_TRIM, 255 * stripe + 1000, size - 255 * stripe - 1000, 0),  # the last stripe, from a byte in
        ]
        for cmd, off, length, flags in ops:
            c.call(cmd, off, length, flags=flags)
            data[off:off + length] = bytes(length)
        c.flush()
        c.close()
        holes = [(2 * stripe, 5 * stripe), (21 * stripe, 2 * stripe), (40 * stripe, 2 * stripe)]
        want_data, at = [], 0
        for off, length in holes:
            want_data.append((at, off - at))
            at = off + length
        want_data.append((at, size - at))
        m = nbd_map(srv.uri)
        assert data_runs(m) == want_data, m
        q = json.loads(subprocess.run(["qemu-img", "map", "--output=json", "-f", "raw", srv.uri], check=True,
                                      capture_output=True, text=True, timeout=60).stdout)
        assert [(e["start"], e["length"]) for e in q if not e["data"]] == holes
        out = tmp_path / "out.bin"
        assert read_export(srv, out) == bytes(data)
        assert os.stat(out).st_blocks * 512 < size - 8 * stripe  # nbdcopy skipped the holes: a sparse copy
    finally:
        srv.ensure_dead()
    srv.stop()
    # The member files have holes there: every member's chunk rows 2-6 (data, P) were punched.
    for disk in range(4):
        f = d / f"disk-{disk}.img"
        with open(f, "rb") as fh:
            assert os.lseek(fh.fileno(), 2 * 64 * KiB, os.SEEK_HOLE) == 2 * 64 * KiB, (disk, "row 2 is not a hole")
    chk = js("real", "check", d)
    assert chk["mismatches"] == 0 and chk["unrecoverable"] == 0, chk
    lost = (d / "disk-1.img").read_bytes()[:16 * MiB]
    run("real", "fail", d, "1")
    run("real", "replace", d, "1")
    run("real", "rebuild", d)
    assert (d / "disk-1.img").read_bytes()[:16 * MiB] == lost
    srv = Server(d)
    try:
        assert read_export(srv, tmp_path / "after.bin") == bytes(data)
    finally:
        srv.ensure_dead()
    srv.stop()
    chk = js("real", "check", d)
    assert chk["mismatches"] == 0 and chk["unrecoverable"] == 0, chk


def test_a_degraded_array_trims_by_writing_zeroes(tmp_path):
    """With a member failed nothing is punched (the survivors keep reconstructing the lost units): TRIM reads
    back as zeroes, also after the member is rebuilt."""
    from nbd_stamp import Nbd

    d = make_array(tmp_path, "arr", "5", 4, "4MiB", "64KiB")
    size, stripe = 12 * MiB, 192 * KiB
    srv = Server(d)
    try:
        data = bytearray(random_file(tmp_path / "in.bin", size, seed=5))
        subprocess.run(["nbdcopy", str(tmp_path / "in.bin"), srv.uri], check=True, capture_output=True, timeout=120)
        run("real", "fail", d, "2")
        c = Nbd(srv.host, srv.port, srv.name)
        c.call(CMD_TRIM, 3 * stripe, 4 * stripe)
        data[3 * stripe:7 * stripe] = bytes(4 * stripe)
        c.flush()
        c.close()
        assert nbd_map(srv.uri) == [(0, size, 0)]
        assert read_export(srv, tmp_path / "out.bin") == bytes(data)
    finally:
        srv.ensure_dead()
    srv.stop()
    run("real", "replace", d, "2")
    run("real", "rebuild", d)
    srv = Server(d)
    try:
        assert read_export(srv, tmp_path / "after.bin") == bytes(data)
        # Whole again: the same TRIM now punches.
        c = Nbd(srv.host, srv.port, srv.name)
        c.call(CMD_TRIM, 3 * stripe, 4 * stripe)
        c.close()
        assert data_runs(nbd_map(srv.uri)) == [(0, 3 * stripe), (7 * stripe, size - 7 * stripe)]
    finally:
        srv.ensure_dead()
    srv.stop()
    assert js("real", "check", d)["mismatches"] == 0


def test_kill9_during_trims_and_writes_leaves_no_wrong_bytes(tmp_path):
    """A stream of whole-stripe TRIMs and writes, the server killed mid-stream: after recovery every block
    holds its first contents, zeroes (if a TRIM covering it was sent) or one of the writes sent to it;
    the parity scrub is clean."""
    import random
    import threading

    from nbd_stamp import Nbd, NbdError

    d = make_array(tmp_path, "arr", "5", 4, "8MiB", "64KiB")
    size, stripe, bs = 24 * MiB, 192 * KiB, 4096
    srv = Server(d)
    base = random_file(tmp_path / "in.bin", size, seed=9)
    subprocess.run(["nbdcopy", str(tmp_path / "in.bin"), srv.uri], check=True, capture_output=True, timeout=120)
    allowed: dict[int, set[bytes]] = {}
    sent = threading.Event()
    stop = threading.Event()

    def stream():
        rnd = random.Random(4)
        c = Nbd(srv.host, srv.port, srv.name)
        i = 0
        try:
            while not stop.is_set():
                i += 1
                if rnd.random() < 0.4:
                    s = rnd.randrange(0, size // stripe - 4)
                    n = rnd.randint(1, 4)
                    for b in range(s * stripe // bs, (s + n) * stripe // bs):
                        allowed.setdefault(b, set()).add(bytes(bs))
                    c.send(CMD_TRIM, s * stripe, n * stripe)
                else:
                    b = rnd.randrange(0, size // bs - 16)
                    k = rnd.randint(1, 16)
                    body = b"".join(i.to_bytes(4, "little") * (bs // 4) for _ in range(k))
                    for j in range(k):
                        allowed.setdefault(b + j, set()).add(body[j * bs:(j + 1) * bs])
                    c.send(1, b * bs, len(body), body)
                if len(c.pending) > 8:
                    c.recv()
                if i == 200:
                    sent.set()
        except (OSError, NbdError):
            pass

    t = threading.Thread(target=stream, daemon=True)
    t.start()
    assert sent.wait(120)
    srv.kill9()
    stop.set()
    t.join(30)
    srv = Server(d)
    try:
        got = read_export(srv, tmp_path / "after.bin")
        # Recovered and whole: a TRIM punches again.
        c = Nbd(srv.host, srv.port, srv.name)
        c.call(CMD_TRIM, 0, 4 * stripe)
        c.close()
        first = nbd_map(srv.uri)[0]
        assert first[0] == 0 and first[1] >= 4 * stripe and first[2] == 3, first
    finally:
        srv.ensure_dead()
    srv.stop()
    wrong = [b for b in range(size // bs)
             if got[b * bs:(b + 1) * bs] != base[b * bs:(b + 1) * bs]
             and got[b * bs:(b + 1) * bs] not in allowed.get(b, set())]
    assert not wrong, f"{len(wrong)} blocks hold bytes never written there, e.g. {wrong[:5]}"
    assert js("real", "check", d)["mismatches"] == 0


@pytest.mark.parametrize("raid, disks, layout", [("0", 3, None), ("1", 2, None), ("10", 3, "n2"), ("10", 4, "f2"),
                                                 ("10", 4, "o2")], ids=["raid0", "raid1", "raid10-n2of3", "raid10-f2",
                                                                        "raid10-o2"])
def test_without_parity_every_whole_block_is_punched_on_every_copy(tmp_path, raid, disks, layout):
    """RAID-0/1/10 (every layout): a TRIM of part of a chunk punches its whole blocks on every copy: holes for
    nbdinfo exactly there, every byte reads back, check is clean, and on mirrors a rebuilt member (from the
    punched survivors) serves the same bytes."""
    from nbd_stamp import Nbd

    d = make_array(tmp_path, "arr", raid, disks, "4MiB", "64KiB", *(["--layout", layout] if layout else []))
    srv = Server(d)
    try:
        probe = Nbd(srv.host, srv.port, srv.name)
        size = probe.size
        probe.close()
        data = bytearray(random_file(tmp_path / "in.bin", size, seed=11))
        subprocess.run(["nbdcopy", str(tmp_path / "in.bin"), srv.uri], check=True, capture_output=True, timeout=120)
        c = Nbd(srv.host, srv.port, srv.name)
        off, end = 12 * KiB + 100, 200 * KiB  # whole blocks 16 KiB..200 KiB: within chunk 0, then chunks 1-2
        c.call(CMD_TRIM, off, end - off)
        data[off:end] = bytes(end - off)
        c.flush()
        c.close()
        assert data_runs(nbd_map(srv.uri)) == [(0, 16 * KiB), (200 * KiB, size - 200 * KiB)]
        assert read_export(srv, tmp_path / "out.bin") == bytes(data)
    finally:
        srv.ensure_dead()
    srv.stop()
    assert js("real", "check", d)["mismatches"] == 0
    if raid != "0":
        run("real", "fail", d, "1")
        run("real", "replace", d, "1")
        run("real", "rebuild", d)
        srv = Server(d)
        try:
            assert read_export(srv, tmp_path / "after.bin") == bytes(data)
        finally:
            srv.ensure_dead()
        srv.stop()
        assert js("real", "check", d)["mismatches"] == 0
