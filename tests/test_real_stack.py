"""A stack on real bytes (`blocklab real create DIR --stack STACK.toml`): the stack file's host cache layers
in front of an array of member files, served over NBD or replayed. Its decisions are a counted run's
(counted == real through the CLI), a member failed while served changes VDF-LFU as in the counted run, and
after `kill -9` every write acknowledged before the last completed FLUSH reads back.
"""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from nbd_stamp import Nbd
from realkit import Server, cache, js, nbdcopy, run, stack_file

ROOT = Path(__file__).resolve().parent.parent


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
    for raid, disks in (("5", 4), ("6", 5)):
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
        c = Nbd(srv.host, srv.port, srv.name)
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
    c = Nbd(srv.host, srv.port, srv.name)
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
    c = Nbd(srv.host, srv.port, srv.name)
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
    if not (shutil.which("nbdcopy") and shutil.which("nbdinfo")):
        pytest.skip("libnbd-bin (nbdcopy, nbdinfo) is not installed: `make test` installs it")
    s = stack_file(tmp_path, "wb", cache("lru", 1024, "back") + cache("arc", 512, "through"))
    d = tmp_path / "wb"
    run("real", "create", d, "--stack", s)
    data = random.Random(4).randbytes(12 << 20)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    srv = Server(d)
    assert "the stack of" in srv.banner, srv.banner
    uri = srv.uri
    info = subprocess.run(["nbdinfo", uri], capture_output=True, text=True, check=True, timeout=60).stdout
    assert "blocklab stack" in info and "12582912" in info
    for step in ("healthy", "degraded"):
        if step == "degraded":
            run("real", "fail", d, "1")
        else:
            nbdcopy(str(src), uri)
        out = tmp_path / f"{step}.bin"
        nbdcopy(uri, str(out))
        assert out.read_bytes() == data, step
    srv.stop()  # SIGTERM: the dirty blocks are destaged before the array closes
    srv = Server(d)
    out = tmp_path / "restarted.bin"
    nbdcopy(srv.uri, str(out))
    srv.stop()
    assert out.read_bytes() == data
