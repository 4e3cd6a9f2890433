"""A stack on real bytes (`blocklab real create DIR --stack STACK.toml`): the stack file's host cache layers
in front of an array of member files, served over NBD or replayed. Its decisions are a counted run's
(counted == real through the CLI), a member failed while served changes VDF-LFU as in the counted run, and
after `kill -9` every write acknowledged before the last completed FLUSH reads back.
"""

from __future__ import annotations

import json
import random
import re
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

BLOCKLAB = [sys.executable, "-c", "from blocklab.cli import main; main()"]
ROOT = Path(__file__).resolve().parent.parent


def run(*args, check=True, timeout=300) -> subprocess.CompletedProcess:
    p = subprocess.run([*BLOCKLAB, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"blocklab {' '.join(map(str, args))} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def js(*args) -> dict:
    return json.loads(run(*args, "--json").stdout)


STACK = """tenant_map = "ignore"
{caches}
[array]
raid = "{raid}"
disks = {disks}
chunk = "16KiB"
disk_size = "4MiB"
[device]
model = "const:1"
"""


def cache(policy: str, size: int, write: str) -> str:
    return f'[[cache]]\npolicy = "{policy}"\nsize = {size}\nwrite = "{write}"\n'


def stack_file(tmp: Path, name: str, caches: str, raid: str = "raid5", disks: int = 4) -> Path:
    p = tmp / f"{name}.toml"
    p.write_text(STACK.format(caches=caches, raid=raid, disks=disks))
    return p


def folded_trace(tmp: Path, size: int, n: int, seed: int) -> Path:
    """The first `n` requests of data/wsrch-small.trace (MQSim's DiskSim ASCII form) folded into `size`
    bytes, a third of them turned into writes (seeded)."""
    rnd = random.Random(seed)
    out = []
    for line in (ROOT / "data" / "wsrch-small.trace").read_text().splitlines()[:n]:
        t, dev, lba, sectors, flags = line.split()
        lba, sectors = int(lba), int(sectors)
        lba %= size // 512 - sectors
        flags = "0" if rnd.random() < 0.33 else "1"
        out.append(f"{t} {dev} {lba} {sectors} {flags}")
    p = tmp / "folded.trace"
    p.write_text("\n".join(out) + "\n")
    return p


def decisions(r: dict) -> dict:
    keys = ("accesses", "hits", "misses", "read_hits", "dirty_evictions", "flushed_blocks", "fetched_blocks",
            "written_below_blocks")
    return {"layers": [{k: l[k] for k in keys} for l in r["layers"]], "ops_by_cause": r["array"]["ops_by_cause"],
            "block_accesses": r["block_accesses"], "requests": r["requests"]}


class Nbd:
    """A minimal NBD client (fixed newstyle, NBD_OPT_EXPORT_NAME, simple replies): one request at a time,
    exactly as given (no splitting or merging)."""

    def __init__(self, host: str, port: int, name: str):
        self.s = socket.create_connection((host, port), timeout=60)
        magic, opt, _flags = struct.unpack(">QQH", self._recv(18))
        assert magic == 0x4E42444D41474943 and opt == 0x49484156454F5054
        self.s.sendall(struct.pack(">I", 3))  # fixed newstyle, no zeroes
        n = name.encode()
        self.s.sendall(struct.pack(">QII", 0x49484156454F5054, 1, len(n)) + n)
        self.size, _tflags = struct.unpack(">QH", self._recv(10))
        self.handle = 0

    def _recv(self, n: int) -> bytes:
        b = b""
        while len(b) < n:
            c = self.s.recv(n - len(b))
            assert c, "connection closed"
            b += c
        return b

    def _cmd(self, typ: int, off: int, length: int, data: bytes = b"", flags: int = 0) -> tuple[int, bytes]:
        self.handle += 1
        self.s.sendall(struct.pack(">IHHQQI", 0x25609513, flags, typ, self.handle, off, length) + data)
        magic, err, handle = struct.unpack(">IIQ", self._recv(16))
        assert magic == 0x67446698 and handle == self.handle
        body = self._recv(length) if typ == 0 and err == 0 else b""
        return err, body

    def read(self, off: int, n: int) -> bytes:
        err, b = self._cmd(0, off, n)
        assert err == 0, f"read error {err}"
        return b

    def write(self, off: int, data: bytes) -> None:
        err, _ = self._cmd(1, off, len(data), data)
        assert err == 0, f"write error {err}"

    def flush(self) -> None:
        err, _ = self._cmd(3, 0, 0)
        assert err == 0, f"flush error {err}"

    def close(self) -> None:
        self.s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 2, 0, 0, 0))
        self.s.close()


class Server:
    def __init__(self, d: Path):
        self.p = subprocess.Popen([*BLOCKLAB, "real", "serve", str(d), "--listen", "127.0.0.1:0"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        m = re.search(r"nbd://([\d.]+):(\d+)/(\S+)", line)
        assert m, f"no address in {line!r}: {self.p.stderr.read() if self.p.poll() is not None else ''}"
        assert "the stack of" in line, line
        self.host, self.port, self.name = m.group(1), int(m.group(2)), m.group(3)

    def client(self) -> Nbd:
        return Nbd(self.host, self.port, self.name)

    def stop(self) -> None:
        self.p.send_signal(signal.SIGTERM)
        self.p.wait(timeout=60)
        assert self.p.returncode == 0, self.p.stderr.read()

    def kill9(self) -> None:
        self.p.send_signal(signal.SIGKILL)
        self.p.wait(timeout=30)


def test_create_refuses_what_it_cannot_honour_in_one_line(tmp_path):
    s = stack_file(tmp_path, "tier", cache("lru", 64, "back") + "[tier]\nsize = \"10%\"\n")
    p = run("real", "create", tmp_path / "a", "--stack", s, check=False)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "tier.toml" in p.stderr and "`tier.size`" in p.stderr and "a share needs a pass" in p.stderr
    assert not (tmp_path / "a" / "array.json").exists()
    s = stack_file(tmp_path, "failat", cache("lru", 64, "back"))
    p = run("real", "create", tmp_path / "b", "--stack", s, "--raid", "5", check=False)
    assert p.returncode == 2 and "--raid" in p.stderr
    p = run("real", "create", tmp_path / "c", "--stack", s, check=False)
    assert p.returncode == 0, p.stderr
    assert "note:" in p.stderr and "device.model" in p.stderr
    assert (tmp_path / "c" / "stack.toml").read_text() == s.read_text()
    st = js("real", "status", tmp_path / "c")
    assert [l["policy"] for l in st["stack"]["layers"]] == ["lru"]


def test_counted_and_real_replay_report_the_same_decisions(tmp_path):
    caches = cache("lru", 48, "back") + cache("arc", 160, "through")
    for raid, disks in (("raid5", 4), ("raid6", 5)):
        s = stack_file(tmp_path, f"s{raid}", caches, raid, disks)
        d = tmp_path / raid
        run("real", "create", d, "--stack", s)
        size = js("real", "status", d)["size_bytes"]
        t = folded_trace(tmp_path, size, 3000, 5)
        counted = js("run", s, "-t", t, "--format", "mqsim", "--executor", "count")
        real = js("real", "replay", d, "-t", t, "--format", "mqsim", "--replay", "closed")
        assert real["executor"] == "real" and real["response"]["reads"]["requests"] > 0
        assert counted["layers"][0]["hits"] > 0 and counted["layers"][0]["dirty_evictions"] > 0
        assert decisions(counted) == decisions(real), raid


def test_a_member_failed_while_served_changes_vdf_lfu_as_in_the_counted_run(tmp_path):
    s = stack_file(tmp_path, "vdf", cache("vdf-lfu", 64, "back"))
    d = tmp_path / "vdf"
    run("real", "create", d, "--stack", s)
    size = js("real", "status", d)["size_bytes"]
    t = folded_trace(tmp_path, size, 3000, 9)
    reqs = [line.split() for line in t.read_text().splitlines()]
    srv = Server(d)
    try:
        c = srv.client()
        for i, (_, _, lba, sectors, flags) in enumerate(reqs):
            if i == 1000:
                run("real", "fail", d, "1")
            off, n = int(lba) * 512, int(sectors) * 512
            if flags == "1":
                c.read(off, n)
            else:
                c.write(off, bytes([i % 251]) * n)
        c.flush()
        served = js("real", "status", d)["stack"]
        c.close()
    finally:
        srv.stop()
    failed = js("run", s, "-t", t, "--format", "mqsim", "--executor", "count",
                "--set", "array.failed=[1]", "--set", 'array.fail_at="1000req"')
    healthy = js("run", s, "-t", t, "--format", "mqsim", "--executor", "count")
    assert decisions(served) == decisions(failed)
    assert healthy["layers"][0]["hits"] != served["layers"][0]["hits"], "VDF-LFU saw no failure"


def kill9_round(tmp_path: Path, name: str, layers: str) -> None:
    """Stamped writes with a FLUSH every 250 through a served stack of `layers`, kill -9, serve again:
    every block reads its stamp of the last completed FLUSH or one acknowledged after it."""
    s = stack_file(tmp_path, name, layers)
    d = tmp_path / name
    run("real", "create", d, "--stack", s)
    blocks = 2048  # 8 MiB of the 12 MiB array
    rnd = random.Random(3)
    flushed: dict[int, int] = {}  # block -> stamp acknowledged before the last completed FLUSH
    after: dict[int, set[int]] = {}  # block -> stamps acknowledged since
    srv = Server(d)
    c = srv.client()
    for seq in range(1, 3101):
        b = int(rnd.random() ** 3 * blocks)  # skewed: hot blocks stay cached, cold ones are destaged
        c.write(b * 4096, struct.pack(">QQ", seq, b) * 256)
        after.setdefault(b, set()).add(seq)
        if seq % 250 == 0:
            c.flush()
            for k, v in after.items():
                flushed[k] = max(v)
            after.clear()
    assert after, "writes after the last FLUSH"
    srv.kill9()
    srv = Server(d)
    c = srv.client()
    lost = 0
    for b in set(flushed) | set(after):
        seq, blk = struct.unpack(">QQ", c.read(b * 4096, 16))
        ok = {flushed[b]} if b in flushed else {0}
        ok |= after.get(b, set())
        if seq not in ok or (seq and blk != b):
            lost += 1
    c.close()
    srv.stop()
    assert lost == 0, f"{lost} blocks lost what a completed FLUSH covered"


def test_kill9_loses_only_writes_no_flush_covered(tmp_path):
    kill9_round(tmp_path, "wb", cache("lru", 512, "back") + cache("arc", 1024, "back"))


def test_kill9_through_a_write_back_tier_loses_only_writes_no_flush_covered(tmp_path):
    # The tier keeps its dirty blocks past a FLUSH (journaled); the restart writes them back.
    kill9_round(tmp_path, "wbtier", cache("lru", 256, "back") + '[tier]\nsize = 1536\nwrite_policy = "wb"\n')
    assert (tmp_path / "wbtier" / "tier.img").stat().st_size == 1536 * 4096


def test_counted_and_real_replay_of_a_tier_report_the_same_decisions(tmp_path):
    for policy in ("wt", "wb"):
        s = stack_file(tmp_path, policy, cache("lru", 48, "back") + f'[tier]\nsize = 256\nwrite_policy = "{policy}"\n')
        d = tmp_path / policy
        run("real", "create", d, "--stack", s)
        size = js("real", "status", d)["size_bytes"]
        t = folded_trace(tmp_path, size, 3000, 7)
        counted = js("run", s, "-t", t, "--format", "mqsim", "--executor", "count")
        real = js("real", "replay", d, "-t", t, "--format", "mqsim", "--replay", "closed")
        assert counted["tier"]["read_hits"] > 0, policy
        assert decisions(counted) == decisions(real), policy
        keys = ("accesses", "hits", "read_hits", "ssd_reads", "ssd_writes", "array_reads", "array_writes", "destaged")
        assert {k: counted["tier"][k] for k in keys} == {k: real["tier"][k] for k in keys}, policy


def test_integrity_stack_rounds_cut(tmp_path):
    r = js("real", "integrity", "--rounds", "6", "--stack-every", "2", "--nbd-every", "0", "--seed", "5",
           "--dir", tmp_path)
    assert r["stack_rounds"] == 3 and r["faults"]["crash-stack"] == 3
    assert r["failed_stack_rounds"] == [] and r["bytes_lost"] == 0 and r["stale_rows_after_recovery"] == 0
    p = run("real", "integrity", "--rounds", "2", "--stack-every", "-1", check=False)
    assert p.returncode == 2 and "--stack-every" in p.stderr


def test_nbdcopy_through_a_served_stack_degraded_and_after_a_clean_stop(tmp_path):
    import shutil

    import pytest

    if not (shutil.which("nbdcopy") and shutil.which("nbdinfo")):
        pytest.skip("libnbd-bin (nbdcopy, nbdinfo) is not installed: `make test` installs it")
    s = stack_file(tmp_path, "wb", cache("lru", 1024, "back") + cache("arc", 512, "through"))
    d = tmp_path / "wb"
    run("real", "create", d, "--stack", s)
    data = random.Random(4).randbytes(12 << 20)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    srv = Server(d)
    uri = f"nbd://{srv.host}:{srv.port}/{srv.name}"
    info = subprocess.run(["nbdinfo", uri], capture_output=True, text=True, check=True).stdout
    assert "blocklab stack" in info and "12582912" in info
    for step in ("healthy", "degraded"):
        if step == "degraded":
            run("real", "fail", d, "1")
        else:
            subprocess.run(["nbdcopy", str(src), uri], check=True, capture_output=True, timeout=120)
        out = tmp_path / f"{step}.bin"
        subprocess.run(["nbdcopy", uri, str(out)], check=True, capture_output=True, timeout=120)
        assert out.read_bytes() == data, step
    srv.stop()  # SIGTERM: the dirty blocks are destaged before the array closes
    srv = Server(d)
    uri = f"nbd://{srv.host}:{srv.port}/{srv.name}"
    out = tmp_path / "restarted.bin"
    subprocess.run(["nbdcopy", uri, str(out)], check=True, capture_output=True, timeout=120)
    srv.stop()
    assert out.read_bytes() == data
