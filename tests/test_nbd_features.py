"""What NBD clients and mdadm users expect of `blocklab real`: the disk of
`real fail` / `real replace` given positionally, the export listed with a
human description, and structured replies with `base:allocation` through
real clients (nbdinfo, qemu-img, nbdcopy) on a served array.
"""

from __future__ import annotations

import json
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
