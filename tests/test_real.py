"""The real executor with real clients: `blocklab real serve` driven by
fio's nbd engine, qemu-img / qemu-io and nbdinfo / nbdcopy; `kill -9` of
the server mid-write and of a rebuild; the integrity suite (a cut).

`make test` installs fio, qemu-utils and libnbd-bin when they are missing.
"""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from realkit import BLOCKLAB, Server, js, make_array, nbdcopy, random_file, read_export, run

TOOLS = ("fio", "qemu-img", "qemu-io", "nbdinfo", "nbdcopy")


@pytest.fixture(scope="module", autouse=True)
def tools_present():
    missing = [t for t in TOOLS if subprocess.run(["sh", "-c", f"command -v {t}"], capture_output=True).returncode]
    assert not missing, f"missing {missing}: `make test` installs fio, qemu-utils and libnbd-bin"


# --- the command line --------------------------------------------------------

def test_create_status_check_and_bad_input(tmp_path):
    d = tmp_path / "a"
    st = js("real", "create", d, "--raid", "6", "--disks", "5", "--chunk", "16KiB", "--disk-size", "1MiB", "--checksums")
    assert (st["level"], st["disks"], st["size_bytes"], st["checksums"]) == ("raid6", 5, 3 * 1024 * 1024, True)
    assert sorted(p.name for p in d.iterdir() if p.suffix in (".img", ".sum")) == sorted(
        [f"disk-{i}.img" for i in range(5)] + [f"disk-{i}.sum" for i in range(5)])
    chk = js("real", "check", d)
    for k in ("stripes_checked", "mismatches", "repaired", "unrecoverable"):
        assert isinstance(chk[k], int)
    assert chk["stripes_checked"] == 64 and chk["mismatches"] == 0
    # Bad input: one line, exit 2.
    for args, msg in [
        (("real", "create", tmp_path / "b", "--raid", "7", "--disks", "4", "--disk-size", "1MiB"), "unknown"),
        (("real", "create", d, "--raid", "5", "--disks", "4", "--disk-size", "1MiB"), "already holds an array"),
        (("real", "create", tmp_path / "c", "--raid", "6", "--disks", "3", "--disk-size", "1MiB"), "at least 4 disks"),
        (("real", "fail", d, "--disk", "9"), "cannot fail disk 9"),
        (("real", "replace", d, "--disk", "1"), "not failed"),
        (("real", "rebuild", d), "nothing to rebuild"),
        (("real", "rebuild", d, "--rebuild-order", "random"), "rebuild order"),
        (("real", "rebuild", d, "--rebuild-order", "live"), "live map"),
        (("real", "rebuild", d, "--rebuild-idle", "often"), "idle rule"),
        (("real", "status", tmp_path / "nope"), "no array here"),
    ]:
        p = run(*args, check=False)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert msg in p.stderr and p.stderr.count("\n") == 1, p.stderr



def _craft_state(d: Path, edit) -> None:
    """Rewrite array.json's body with `edit` and make its CRC valid again."""
    import zlib
    p = d / "array.json"
    text = p.read_text()
    body = text[:text.rindex("\n# crc32 ")]
    st = json.loads(body)
    edit(st)
    body = json.dumps(st, indent=2)
    p.write_text(f"{body}\n# crc32 {zlib.crc32(body.encode()):08x}\n")


def _journal_record(places, block_size: int = 4096) -> bytes:
    """One journal record (magic, sequence, units, CRC, places, units' bytes)."""
    import struct
    import zlib
    head = struct.pack("<QI", 0, len(places))
    body = b"".join(struct.pack("<IQ", disk, block) for disk, block in places) + b"\x07" * block_size * len(places)
    return b"BLJ1" + head + struct.pack("<I", zlib.crc32(head + body)) + body


def test_crafted_state_and_journal_exit_2_naming_file_and_field(tmp_path):
    d = make_array(tmp_path, "arr", "5", 4, "1MiB", "16KiB")
    good = (d / "array.json").read_text()
    sizes = [(d / f"disk-{i}.img").stat().st_size for i in range(4)]

    def refused(field: str, where: str) -> None:
        p = run("real", "status", d, check=False)
        assert p.returncode == 2, (field, p.stdout, p.stderr)
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
        assert where in p.stderr and f"field `{field}`" in p.stderr, p.stderr
        assert [(d / f"disk-{i}.img").stat().st_size for i in range(4)] == sizes

    for field, edit in [
        ("bitmap_rows", lambda st: st.update(bitmap_rows=0)),
        ("failed", lambda st: st.update(failed=[4294967296])),
        ("failed", lambda st: st.update(failed=[4])),
        ("disk", lambda st: st.update(bad_blocks=[{"disk": 2**32, "block": 0, "blocks": 1}])),
        ("bad_blocks", lambda st: st.update(bad_blocks=[{"disk": 1, "block": 2**40, "blocks": 1}])),
        ("bitmap", lambda st: st.update(bitmap="f" * 5000)),
    ]:
        (d / "array.json").write_text(good)
        _craft_state(d, edit)
        refused(field, "array.json")
    (d / "array.json").write_text(good)
    # A CRC-valid journal record for member block 2^30 (4 TiB into a member).
    (d / "journal").write_bytes(_journal_record([(0, 2**30)]))
    refused("block", "journal: record 0")
    (d / "journal").write_bytes(_journal_record([(2**31, 0)]))
    refused("disk", "journal: record 0")
    (d / "journal").write_bytes(b"")
    assert js("real", "status", d)["health"] == "healthy"


def test_raid6_repair_leaves_an_unrecoverable_row_as_it_is_and_lists_it(tmp_path):
    d = make_array(tmp_path, "arr", "6", 5, "1MiB", "16KiB")
    # Two units of block row 0 wrong at different bytes: no single unit explains P and Q.
    for disk, at in [(0, 10), (1, 900)]:
        with open(d / f"disk-{disk}.img", "r+b") as f:
            f.seek(at)
            f.write(b"\x5a" * 20)
    before = [(d / f"disk-{i}.img").read_bytes() for i in range(5)]
    for args in [(), ("--repair",), ()]:
        chk = js("real", "check", d, *args)
        assert (chk["mismatches"], chk["repaired"], chk["unrecoverable"]) == (1, 0, 1), chk
        assert chk["unrecoverable_at"] == [0], chk
        assert [(d / f"disk-{i}.img").read_bytes() for i in range(5)] == before, args
    out = run("real", "check", d, "--repair").stdout
    assert "unrecoverable at member block(s) 0 (left as they are)" in out, out

# --- real clients ---------------------------------------------------------------

@pytest.mark.parametrize("raid,disks", [("5", 4), ("6", 5)])
def test_nbdinfo_nbdcopy_and_fail_while_served(tmp_path, raid, disks):
    d = make_array(tmp_path, "arr", raid, disks)
    srv = Server(d)
    try:
        info = json.loads(subprocess.run(["nbdinfo", "--json", srv.uri], check=True, capture_output=True,
                                         text=True).stdout)
        size = (disks - (1 if raid == "5" else 2)) * 4 * 1024 * 1024
        exp = info["exports"][0]
        assert exp["export-size"] == size
        assert exp["can_flush"] and exp["can_fua"] and exp["can_trim"] and exp["can_zero"]
        lst = subprocess.run(["nbdinfo", "--list", "--json", f"nbd://{srv.host}:{srv.port}"], check=True,
                             capture_output=True, text=True).stdout
        assert "blocklab" in lst
        data = random_file(tmp_path / "in.bin", size, seed=int(raid))
        nbdcopy(str(tmp_path / "in.bin"), srv.uri)
        assert read_export(srv, tmp_path / "out.bin") == data
        # Fail a member while served: the server keeps serving the same bytes.
        run("real", "fail", d, "--disk", "1")
        assert js("real", "status", d)["health"] == "degraded"
        assert read_export(srv, tmp_path / "out.bin") == data
        if raid == "6":
            run("real", "fail", d, "--disk", "3")
            assert read_export(srv, tmp_path / "out.bin") == data
        # Writes while degraded, a spare, a rebuild through the server.
        half = random.Random(7).randbytes(size // 2)
        (tmp_path / "half.bin").write_bytes(half)
        nbdcopy(str(tmp_path / "half.bin"), srv.uri)
        data = half + data[size // 2:]
        run("real", "replace", d, "--disk", "1")
        # The timed executor's orders, by `disk run`'s flag (the server runs them).
        order = "dor" if raid == "5" else "pro-dor"
        r = js("real", "rebuild", d, "--speed-max", "1000000", "--rebuild-order", order)
        assert r["finished"] and r["order"] == order and r["priority"] == "low"
        assert js("real", "check", d)["mismatches"] == 0
        assert read_export(srv, tmp_path / "out.bin") == data
    finally:
        srv.stop()
    assert not (d / "serve.json").exists()


def test_qemu_img_and_qemu_io(tmp_path):
    d = make_array(tmp_path, "arr", "10", 4, "2MiB", "64KiB", "--layout", "f2")
    srv = Server(d)
    try:
        info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", srv.uri], check=True,
                                         capture_output=True, text=True).stdout)
        assert info["virtual-size"] == 4 * 1024 * 1024
        qio = ["qemu-io", "-f", "raw", srv.uri]
        out = subprocess.run([*qio, "-c", "write -P 0xab 4096 1M", "-c", "read -P 0xab 4096 1M",
                              "-c", "write -z 8192 4096", "-c", "read -P 0 8192 4096",
                              "-c", "write -P 0x11 1000 5", "-c", "read -P 0x11 1000 5", "-c", "flush"],
                             check=True, capture_output=True, text=True).stdout
        assert "Pattern verification failed" not in out and out.count("read ") == 3, out
        data = random_file(tmp_path / "img.raw", 4 * 1024 * 1024, seed=3)
        subprocess.run(["qemu-img", "convert", "-n", "-f", "raw", "-O", "raw", str(tmp_path / "img.raw"), srv.uri],
                       check=True, capture_output=True)
        subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "raw", srv.uri, str(tmp_path / "back.raw")],
                       check=True, capture_output=True)
        assert (tmp_path / "back.raw").read_bytes() == data
        cmp = subprocess.run(["qemu-img", "compare", "-f", "raw", "-F", "raw", str(tmp_path / "img.raw"), srv.uri],
                             capture_output=True, text=True)
        assert cmp.returncode == 0, cmp.stdout + cmp.stderr
    finally:
        srv.stop()


@pytest.mark.parametrize("raid,disks,extra", [("5", 4, ()), ("6", 6, ("--checksums",))])
def test_fio_nbd_engine_verifies_through_a_failure(tmp_path, raid, disks, extra):
    d = make_array(tmp_path, "arr", raid, disks, "8MiB", "64KiB", *extra)
    srv = Server(d)
    try:
        fio = ["fio", "--name=v", "--ioengine=nbd", f"--uri={srv.uri}", "--rw=randwrite", "--bs=4k",
               "--bsrange=4k-64k", "--size=16M", "--iodepth=8", "--numjobs=1", "--verify=crc32c",
               "--verify_fatal=1", "--do_verify=1", "--randseed=5", "--output-format=json"]
        # cwd: fio leaves its verify state file (local-v-0-verify.state) where it runs.
        p = subprocess.run(fio, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
        job = json.loads(p.stdout[p.stdout.index("{"):])["jobs"][0]
        assert job["error"] == 0 and job["write"]["io_bytes"] >= 16 * 1024 * 1024
        # Lose a member, then have fio verify what it wrote (no new writes).
        run("real", "fail", d, "--disk", "2")
        verify = [*fio[:4], "--rw=randwrite", "--bs=4k", "--bsrange=4k-64k", "--size=16M", "--iodepth=8",
                  "--verify=crc32c", "--verify_fatal=1", "--verify_only=1", "--randseed=5"]
        p = subprocess.run(verify, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
    finally:
        srv.stop()


# --- crashes ------------------------------------------------------------------

def _dirty_regions(d):
    """The array's on-disk bitmap has a dirty region (array.json may be mid-replace: retry)."""
    try:
        st = json.loads((d / "array.json").read_text().rsplit("\n# crc32", 1)[0])
    except (OSError, ValueError):
        return False
    return bool(st.get("bitmap", "").strip("0"))


def test_kill9_mid_write_leaves_no_stale_parity(tmp_path):
    d = make_array(tmp_path, "arr", "5", 4, "8MiB", "16KiB")
    for attempt in range(3):
        srv = Server(d)
        fio = subprocess.Popen(["fio", "--name=w", "--ioengine=nbd", f"--uri={srv.uri}", "--rw=randwrite",
                                "--bsrange=4k-256k", "--size=24M", "--iodepth=16", "--time_based",
                                "--runtime=30", f"--randseed={attempt}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Kill only once fio's writes have dirtied the bitmap (polled, not a
        # fixed sleep: under load fio may take seconds to start writing).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _dirty_regions(d):
            time.sleep(0.1)
        time.sleep(0.3 + attempt * 0.5)
        srv.kill9()  # mid-write: the bitmap regions being written are dirty
        fio.kill()
        fio.wait()
        st = json.loads((d / "array.json").read_text().rsplit("\n# crc32", 1)[0])
        assert st["bitmap"].strip("0"), "the crash left no dirty region: the test did not crash mid-write"
        # Opening the array resyncs the dirty regions: no stale parity.
        chk = js("real", "check", d)
        assert (chk["mismatches"], chk["unrecoverable"]) == (0, 0), chk
    # And the parity reconstructs the very same bytes.
    srv = Server(d)
    try:
        before = read_export(srv, tmp_path / "a.bin")
        run("real", "fail", d, "--disk", "0")
        assert read_export(srv, tmp_path / "b.bin") == before
    finally:
        srv.stop()


@pytest.mark.parametrize("order", ["md", "pro"])
def test_kill9_mid_rebuild_resumes(tmp_path, order):
    d = make_array(tmp_path, "arr", "6", 5, "4MiB", "64KiB")
    srv = Server(d)
    data = random_file(tmp_path / "in.bin", 12 * 1024 * 1024, seed=11)
    try:
        nbdcopy(str(tmp_path / "in.bin"), srv.uri)
    finally:
        srv.stop()
    run("real", "fail", d, "--disk", "1")
    run("real", "fail", d, "--disk", "4")
    run("real", "replace", d, "--disk", "1")
    run("real", "replace", d, "--disk", "4")
    # A slow rebuild (256 KiB/s: 16 s for 4 MiB), killed after about 2.5 s.
    p = subprocess.Popen([*BLOCKLAB, "real", "rebuild", str(d), "--speed-min", "0", "--speed-max", "256",
                          "--rebuild-order", order], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(3.5)
    p.send_signal(signal.SIGKILL)
    p.wait()
    st = js("real", "status", d)
    assert st["recovering"] == [1, 4]
    # Rows rebuilt are recorded: MD's offset and the runs beyond it (PRO's
    # order, steps completed out of order).
    assert 0 < st["rebuilt_rows"] < st["member_rows"], st
    assert st["recovered_rows"] <= st["rebuilt_rows"]
    r = js("real", "rebuild", d, "--speed-max", "1000000", "--rebuild-order", order)
    assert r["finished"] and r["resumed_from"] == st["rebuilt_rows"]
    assert r["rows_done"] == st["member_rows"] - st["rebuilt_rows"]
    assert js("real", "status", d)["health"] == "healthy"
    # The spares hold the data: lose the two others and read it all.
    run("real", "fail", d, "--disk", "0")
    run("real", "fail", d, "--disk", "2")
    srv = Server(d)
    try:
        assert read_export(srv, tmp_path / "out.bin") == data
    finally:
        srv.stop()


def test_beyond_redundancy_reads_are_errors_not_data(tmp_path):
    d = make_array(tmp_path, "arr", "5", 3, "1MiB", "64KiB")
    srv = Server(d)
    try:
        data = random_file(tmp_path / "in.bin", 2 * 1024 * 1024, seed=2)
        nbdcopy(str(tmp_path / "in.bin"), srv.uri)
        run("real", "fail", d, "--disk", "0")
        run("real", "fail", d, "--disk", "1")
        qio = ["qemu-io", "-f", "raw", srv.uri]
        # Left-symmetric RAID-5 of 3: chunk 0 is on disk 0 (lost), chunk 2 on disk 2 (kept).
        p = subprocess.run([*qio, "-c", "read 0 4096"], capture_output=True, text=True)
        assert "Input/output error" in p.stdout + p.stderr, p.stdout + p.stderr
        off = 2 * 64 * 1024
        p = subprocess.run([*qio, "-c", f"read -v {off} 16"], capture_output=True, text=True)
        m = re.search(r"^[0-9a-f]+:\s+((?:[0-9a-f]{2} ){16})", p.stdout, re.M)
        assert m, p.stdout + p.stderr
        got = bytes.fromhex(m.group(1).replace(" ", ""))
        assert got == data[off:off + 16], p.stdout
        # A whole-device copy fails instead of returning wrong bytes.
        c = subprocess.run(["nbdcopy", srv.uri, str(tmp_path / "out.bin")], capture_output=True, text=True)
        assert c.returncode != 0
    finally:
        srv.stop()


def test_replay_reports_the_timed_schema(tmp_path):
    d = make_array(tmp_path, "arr", "5", 4, "2MiB", "64KiB")
    tr = tmp_path / "t.csv"
    rows = ["timestamp,op,offset,size"] + [
        f"{i * 0.001:.3f},{'W' if i % 4 == 0 else 'R'},{(i * 37 % 400) * 4096},{4096 * (1 + i % 4)}" for i in range(400)]
    tr.write_text("\n".join(rows) + "\n")
    r = js("real", "replay", d, "--trace", tr, "--format", "csv", "--replay", "open", "--speedup", "4")
    assert (r["requests"], r["errors"], r["reads"], r["writes"]) == (400, 0, 300, 100)
    for part in (r["response"], r["response"]["reads"], r["response"]["writes"]):
        assert set(part) >= {"avg_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"}
        assert 0 < part["p50_ms"] <= part["p99_ms"] <= part["max_ms"] * 1.001
    assert r["wall_s"] >= 0.399 / 4


def test_replay_runs_the_timed_executors_disciplines(tmp_path):
    """`real replay` runs the disciplines the timed executor runs (one code,
    exec/discipline.rs): closed with a think time keeps the trace's order with
    one outstanding (the log shows it), and Hsu-Smith feedback reports its
    measured pass."""
    d = make_array(tmp_path, "arr", "5", 4, "2MiB", "64KiB")
    tr = tmp_path / "t.csv"
    rows = ["timestamp,op,offset,size"] + [
        f"{i * 0.0005:.4f},{'W' if i % 4 == 0 else 'R'},{(i * 37 % 400) * 4096},4096" for i in range(60)]
    tr.write_text("\n".join(rows) + "\n")
    log = tmp_path / "closed.log"
    r = js("real", "replay", d, "--trace", tr, "--format", "csv", "--replay", "closed", "--think-ms", "0.2",
           "--log", log)
    assert (r["replay"], r["requests"], r["errors"]) == ("closed", 60, 0)
    offsets = [int(line.split(",")[2]) // 4096 for line in log.read_text().splitlines()[1:]]
    assert offsets == [i * 37 % 400 for i in range(60)]
    r = js("real", "replay", d, "--trace", tr, "--format", "csv", "--replay", "feedback", "--window", "4",
           "--infinitely-fast")
    assert (r["replay"], r["requests"], r["writes"], r["errors"]) == ("feedback", 60, 15, 0)
    bad = run("real", "replay", d, "--trace", tr, "--format", "csv", "--replay", "closed", "--think-ms", "-1",
              check=False)
    assert bad.returncode == 2 and "think time" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_integrity_cut(tmp_path):
    r = js("real", "integrity", "--rounds", "240", "--seed", "2", "--dir", tmp_path / "scratch")
    assert r["rounds"] == 240 and r["nbd_rounds"] == 60
    assert (r["bytes_lost"], r["beyond_wrong_bytes"], r["stale_rows_after_recovery"]) == (0, 0, 0), r
    assert r["failed_rounds"] == []
    assert r["bytes_verified"] > 80 * 1024 * 1024
    assert r["beyond_errors_reported"] > 0
    kinds = set(r["faults"])
    assert {"fail", "truncate", "flip", "zero", "delete", "crash-write", "crash-rebuild", "fail-beyond",
            "crash-missing", "crash-stale", "swap-rebuild"} <= kinds, kinds
    assert r["dirty_degraded_refused"] > 0, r


# --- member identity, dirty degraded, the lock ------------------------------

def qemu_read(srv: Server, off: int, n: int) -> bool:
    """Whether a read through qemu-io succeeds (an EIO reply fails it)."""
    p = subprocess.run(["qemu-io", "-f", "raw", "-c", f"read {off} {n}", srv.uri],
                       capture_output=True, text=True, timeout=60)
    return p.returncode == 0 and "error" not in (p.stdout + p.stderr).lower()


def test_swapped_and_stale_members_through_the_cli(tmp_path):
    d = make_array(tmp_path, "arr", "5", 4, "2MiB", "16KiB", "--checksums")
    data = random_file(tmp_path / "data.bin", 6 * 1024 * 1024, 20)
    srv = Server(d)
    try:
        nbdcopy(str(tmp_path / "data.bin"), srv.uri)
    finally:
        srv.stop()
    # Swapped images (their checksum files stay): put back, every byte right.
    a, b = d / "disk-0.img", d / "disk-1.img"
    a.rename(d / "x"), b.rename(a), (d / "x").rename(b)
    srv = Server(d)
    try:
        assert read_export(srv, tmp_path / "out.bin") == data
        assert js("real", "status", d)["health"] == "healthy"
    finally:
        srv.stop()
    assert "assembled by identity" in srv.p.stderr.read()
    # A stale copy of disk 2 put back after a rewrite: left out, not served.
    old = (d / "disk-2.img").read_bytes()
    data = random_file(tmp_path / "data2.bin", 6 * 1024 * 1024, 21)
    srv = Server(d)
    try:
        nbdcopy(str(tmp_path / "data2.bin"), srv.uri)
    finally:
        srv.stop()
    (d / "disk-2.img").write_bytes(old)
    srv = Server(d)
    try:
        st = js("real", "status", d)
        assert (st["health"], st["failed"]) == ("degraded", [2]), st
        assert read_export(srv, tmp_path / "out.bin") == data
    finally:
        srv.stop()
    assert "stale member(s) left out" in srv.p.stderr.read()
    # A member of another array is refused, naming it (exit 2).
    e = make_array(tmp_path, "other", "5", 4, "2MiB", "16KiB", "--checksums")
    (d / "disk-3.img").write_bytes((e / "disk-3.img").read_bytes())
    p = run("real", "check", d, check=False)
    assert p.returncode == 2 and "disk-3.img" in p.stderr and "another array" in p.stderr, p.stderr


def test_dirty_degraded_start_is_refused_or_serves_eio(tmp_path):
    d = make_array(tmp_path, "arr", "5", 4, "8MiB", "16KiB")
    srv = Server(d)
    fio = subprocess.Popen(["fio", "--name=w", "--ioengine=nbd", f"--uri={srv.uri}", "--rw=randwrite",
                            "--bsrange=4k-256k", "--size=24M", "--iodepth=16", "--time_based", "--runtime=30"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    srv.kill9()
    fio.kill()
    fio.wait()
    st = json.loads((d / "array.json").read_text().rsplit("\n# crc32", 1)[0])
    assert st["bitmap"].strip("0"), "the crash left no dirty region"
    (d / "disk-1.img").rename(tmp_path / "aside.img")
    for cmd in (("serve", "--listen", "127.0.0.1:0"), ("check",), ("rebuild",)):
        p = run("real", *cmd[:1], d, *cmd[1:], check=False, timeout=60)
        assert p.returncode == 2 and "dirty degraded array" in p.stderr, (cmd, p.returncode, p.stderr)
        assert "Traceback" not in p.stderr
    srv = Server(d, "--start-dirty-degraded")
    try:
        # Row 0 (left-symmetric, 4 disks): chunks 0, 1, 2 on disks 0, 1, 2.
        assert qemu_read(srv, 0, 16384), "a unit on a present member reads"
        assert not qemu_read(srv, 16384, 4096), "a lost unit of a dirty row must be EIO"
        st = js("real", "status", d)
        assert st["unreadable_rows"] and st["unreadable_rows"][0][0] == 0, st
    finally:
        srv.stop()
    assert "started dirty and degraded" in srv.p.stderr.read()
    chk = js("real", "check", d)
    assert chk["unreadable_rows"] == st["unreadable_rows"], chk


def test_a_deleted_lock_file_never_admits_a_second_server(tmp_path):
    d = make_array(tmp_path, "arr", "5", 4, "1MiB", "16KiB")
    srv = Server(d)
    try:
        (d / "lock").unlink(missing_ok=True)
        p = run("real", "serve", d, "--listen", "127.0.0.1:0", check=False, timeout=60)
        assert p.returncode == 2 and "open in another process" in p.stderr, p.stderr
    finally:
        srv.stop()
    # The lock died with the server: a new one starts at once.
    srv = Server(d)
    srv.stop()
