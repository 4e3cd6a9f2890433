"""Tenants as NBD exports (`[[tenant]]` in a stack file, or `real create --tenants`): `real serve` offers one
export per tenant, laid out as the counted stack's `concat` lays out the declared volumes, with the SSD tier's
per-tenant partitioners (`static`, `centaur`, `eci`) on real bytes. Listed by `nbdinfo --list`; no default
export; an unknown name is refused; a tenant's writes never change another's bytes; `kill -9` loses nothing a
completed FLUSH covered; `real replay` of per-tenant traces decides as `blocklab run` does.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from nbd_stamp import CMD_READ, Nbd, NbdError, Stamper, read_all
from realkit import Server, js, nbd_exports, run, within

TWO = """tenant_map = "concat"
[[tenant]]
name = "web"
size = "4MiB"
[[tenant]]
name = "db"
size = "3MiB"
{tier}
[array]
raid = "raid5"
disks = 4
chunk = "16KiB"
disk_size = "4MiB"
[device]
model = "const:1"
"""


def tier(partitioner: str, policy: str = "wb", size: int = 512, window: float = 0.5) -> str:
    return (f'[tier]\nsize = {size}\npartitioner = "{partitioner}"\nwrite_policy = "{policy}"\n'
            f'window_s = {window}\ninitial_blocks = 64\nsolver = "exact"\n')


def two_tenants(tmp: Path, name: str, tier_text: str) -> tuple[Path, Path]:
    s = tmp / f"{name}.toml"
    s.write_text(TWO.format(tier=tier_text))
    d = tmp / name
    run("real", "create", d, "--stack", s)
    return s, d


def need_nbdinfo():
    if not shutil.which("nbdinfo"):
        pytest.skip("libnbd-bin (nbdinfo) is not installed: `make test` installs it")


def test_serve_offers_one_export_per_tenant_and_no_default(tmp_path):
    need_nbdinfo()
    _, d = two_tenants(tmp_path, "two", tier("centaur"))
    srv = Server(d)
    try:
        assert f"nbd://{srv.host}:{srv.port}/web nbd://{srv.host}:{srv.port}/db" in srv.banner, srv.banner
        assert srv.name == "web" and "2 tenants" in srv.banner
        url = f"nbd://{srv.host}:{srv.port}"
        exports = nbd_exports(srv)
        assert set(exports) == {"web", "db"}, exports
        assert exports["web"]["export-size"] == 4 << 20 and exports["db"]["export-size"] == 3 << 20
        assert "tenant db" in exports["db"]["description"]
        # An unknown name, and the empty one (no tenant is the default): NBD_REP_ERR_UNKNOWN.
        for name in ("nosuch", ""):
            with pytest.raises(NbdError, match="0x80000006"):
                Nbd(srv.host, srv.port, name)
        # base:allocation in the tenant's own offsets: what it wrote is data (held dirty in the tier), the rest holes.
        c = Nbd(srv.host, srv.port, "db")
        c.write(1 << 20, b"\x5a" * (64 << 10))
        c.flush()
        c.close()
        m = json.loads(subprocess.run(["nbdinfo", "--map", "--json", f"{url}/db"], capture_output=True, text=True,
                                      check=True, timeout=60).stdout)
        data = [(e["offset"], e["length"]) for e in m if e["type"] & 1 == 0]
        assert data == [(1 << 20, 64 << 10)], m
        p = subprocess.run(["nbdinfo", f"{url}/nosuch"], capture_output=True, text=True, timeout=60)
        # libnbd reports NBD_REP_ERR_UNKNOWN as ENOENT.
        assert p.returncode != 0 and "no such file or directory for export: nosuch" in p.stderr.lower(), p.stderr
    finally:
        srv.ensure_dead()
    srv.stop()


def test_create_tenants_flag_and_one_volume_default(tmp_path):
    s = tmp_path / "plain.toml"
    s.write_text(TWO.replace('[[tenant]]\nname = "web"\nsize = "4MiB"\n[[tenant]]\nname = "db"\nsize = "3MiB"\n', "")
                 .format(tier=tier("eci")))
    d = tmp_path / "t"
    run("real", "create", d, "--stack", s, "--tenants", "alpha=1MiB,beta=2MiB")
    assert "[[tenant]]" in (d / "stack.toml").read_text()
    st = js("real", "status", d)["stack"]["real"]["exports"]
    assert [(e["name"], e["offset_bytes"], e["size_bytes"]) for e in st] == [("alpha", 0, 1 << 20),
                                                                             ("beta", 1 << 20, 2 << 20)]
    assert "export 'beta'" in run("real", "status", d).stdout
    srv = Server(d)
    try:
        a, b = Nbd(srv.host, srv.port, "alpha"), Nbd(srv.host, srv.port, "beta")
        assert (a.size, b.size) == (1 << 20, 2 << 20)
        a.close(), b.close()
    finally:
        srv.ensure_dead()
    srv.stop()
    # Without tenants the stack is one export, also under the empty name, as before.
    d2 = tmp_path / "one"
    run("real", "create", d2, "--stack", s)
    srv = Server(d2)
    try:
        c = Nbd(srv.host, srv.port, "")
        assert c.size == 12 << 20
        c.close()
    finally:
        srv.ensure_dead()
    srv.stop()
    # Bad input: one line, exit 2.
    for bad, what in (("alpha", "NAME=SIZE"), ("alpha=1000", "tenant.0.size"), ("a=1MiB,a=1MiB", "tenant.1.name")):
        p = run("real", "create", tmp_path / f"bad{len(what)}", "--stack", s, "--tenants", bad, check=False)
        assert p.returncode == 2 and what in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_plain_array_serves_one_export_per_tenant(tmp_path):
    """`real create --raid ... --tenants`: no stack file, no cache; two exports listed with their own sizes
    and sensible descriptions, laid out by `concat`, and neither tenant's writes reach the other's bytes."""
    need_nbdinfo()
    d = tmp_path / "plain"
    run("real", "create", d, "--raid", "5", "--disks", "4", "--chunk", "64KiB", "--disk-size", "16MiB",
        "--tenants", "a=8MiB,b=20MiB")
    kept = (d / "stack.toml").read_text()
    assert 'tenant_map = "concat"' in kept and "[cache" not in kept and "[tier]" not in kept
    st = js("real", "status", d)["stack"]["real"]["exports"]
    assert [(e["name"], e["offset_bytes"], e["size_bytes"]) for e in st] == [("a", 0, 8 << 20), ("b", 8 << 20, 20 << 20)]
    srv = Server(d)
    try:
        exports = nbd_exports(srv)
        assert set(exports) == {"a", "b"}, exports
        assert exports["a"]["export-size"] == 8 << 20 and exports["b"]["export-size"] == 20 << 20
        assert exports["b"]["description"] == f"blocklab tenant b (2 of 2, 20 MiB at 8 MiB) of raid5 of 4, chunk 64 KiB ({d})"
        for name in ("nosuch", ""):
            with pytest.raises(NbdError, match="0x80000006"):
                Nbd(srv.host, srv.port, name)
        a, b = Nbd(srv.host, srv.port, "a"), Nbd(srv.host, srv.port, "b")
        rnd = random.Random(5)
        a_bytes, b_bytes = rnd.randbytes(8 << 20), rnd.randbytes(20 << 20)
        for off in range(0, 8 << 20, 1 << 20):
            a.write(off, a_bytes[off:off + (1 << 20)])
        for off in range(0, 20 << 20, 1 << 20):
            b.write(off, b_bytes[off:off + (1 << 20)])
        with pytest.raises(NbdError):  # past a's volume: refused, never b's first bytes
            a.write((8 << 20) - 4096, bytes(8192))
        a.flush()
        assert b"".join(b.read(off, 1 << 20) for off in range(0, 20 << 20, 1 << 20)) == b_bytes
        assert b"".join(a.read(off, 1 << 20) for off in range(0, 8 << 20, 1 << 20)) == a_bytes
        a.close(), b.close()
    finally:
        srv.ensure_dead()
    srv.stop()
    # The array underneath is consistent (parity scrub), and bad tenants are one line, exit 2.
    assert js("real", "check", d)["mismatches"] == 0
    for bad, what in (("a=1MiB,a=1MiB", "tenant.1.name"), ("a=64MiB", "tenant"), ("a", "NAME=SIZE")):
        p = run("real", "create", tmp_path / f"bad{len(bad)}", "--raid", "5", "--disks", "4", "--disk-size", "16MiB",
                "--tenants", bad, check=False)
        assert p.returncode == 2 and what in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_tenants_writes_never_change_another_tenants_bytes(tmp_path):
    _, d = two_tenants(tmp_path, "iso", tier("static", "wb", 256))
    srv = Server(d)
    try:
        web, db = Nbd(srv.host, srv.port, "web"), Nbd(srv.host, srv.port, "db")
        rnd = random.Random(8)
        db_bytes = rnd.randbytes(3 << 20)
        for off in range(0, 3 << 20, 256 << 10):
            db.write(off, db_bytes[off:off + (256 << 10)])
        db.flush()
        # The other tenant writes all over its volume, past its end too (refused), and flushes.
        for i in range(600):
            off = rnd.randrange(0, (4 << 20) - 8192, 512)
            web.write(off, rnd.randbytes(rnd.choice((512, 4096, 8192))))
        with pytest.raises(NbdError):
            web.write((4 << 20) - 4096, bytes(8192))
        web.flush()
        got = b"".join(db.read(off, 256 << 10) for off in range(0, 3 << 20, 256 << 10))
        assert got == db_bytes
        web.close(), db.close()
    finally:
        srv.ensure_dead()
    srv.stop()


def stalled_on(srv: Server, name: str) -> Nbd:
    """A client of export `name` that pipelines reads of the whole volume and never reads the replies."""
    bad = Nbd(srv.host, srv.port, name)
    for _ in range(20):
        bad.send(CMD_READ, 0, bad.size)
    return bad


def test_a_client_not_reading_replies_on_one_tenant_does_not_stall_another(tmp_path):
    _, d = two_tenants(tmp_path, "stall", tier("static", "wb", 256))
    srv = Server(d)
    try:
        db = Nbd(srv.host, srv.port, "db")
        db.write(8192, b"\x07" * 4096)
        bad = stalled_on(srv, "web")
        time.sleep(0.5)
        assert within(10, lambda: db.read(8192, 4096)) == b"\x07" * 4096
        # A new client of either tenant gets in and is served.
        for name, want in (("db", b"\x07" * 4096), ("web", None)):
            c = within(10, lambda: Nbd(srv.host, srv.port, name))
            got = within(10, lambda: c.read(8192, 4096))
            assert want is None or got == want, name
            c.close()
        bad.s.close()
        db.close()
    finally:
        srv.ensure_dead()
    srv.stop()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_stop_with_a_stalled_tenant_client_exits_cleanly_and_keeps_every_tenants_flushed_writes(tmp_path, sig):
    _, d = two_tenants(tmp_path, "stop", tier("centaur", "wb", 256, window=0.3))
    rnd = random.Random(5)
    data = {"web": rnd.randbytes(1 << 20), "db": rnd.randbytes(1 << 20)}
    srv = Server(d)
    conns = {n: Nbd(srv.host, srv.port, n) for n in data}
    for n, c in conns.items():
        for off in range(0, 1 << 20, 64 << 10):
            c.write(off, data[n][off:off + (64 << 10)])
        c.flush()  # held dirty in the write-back tier: the FLUSH commits them to its journal
    peer = stalled_on(srv, "web")
    time.sleep(0.5)
    srv.p.send_signal(sig)
    try:
        srv.p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        srv.p.kill()
        srv.p.wait()
        raise AssertionError(f"server still running 10 s after {sig.name} with a tenant's client not reading")
    err = srv.p.stderr.read()
    assert srv.p.returncode == 0 and "closed cleanly" in err, err
    peer.s.close()
    for c in conns.values():
        c.s.close()
    assert not (d / "serve.json").exists()
    again = Server(d)
    try:
        for n, want in data.items():
            c = Nbd(again.host, again.port, n)
            assert c.read(0, 1 << 20) == want, n
            c.close()
    finally:
        again.ensure_dead()
    again.stop()
    assert "unclean" not in again.p.stderr.read()


@pytest.mark.parametrize("partitioner", ["centaur", "eci"])
def test_kill9_with_a_partitioned_tier_loses_nothing_a_flush_covered(tmp_path, partitioner):
    policy = "adaptive" if partitioner == "eci" else "wb"
    _, d = two_tenants(tmp_path, partitioner, tier(partitioner, policy, 384, window=0.3))
    sizes = {"web": 4 << 20, "db": 3 << 20}
    srv = Server(d)
    stampers = {n: Stamper(blocks=min(1024, sizes[n] // 4096), seed=i + 1, depth=8, flush_every=40)
                for i, n in enumerate(sizes)}
    conns = {n: Nbd(srv.host, srv.port, n) for n in sizes}
    threads = [threading.Thread(target=stampers[n].run, args=(conns[n], lambda: False)) for n in sizes]
    for t in threads:
        t.start()
    time.sleep(4)  # several windows of 0.3 s: partitions re-sized under the writes
    live = js("real", "status", d)["stack"]["tier"]
    srv.kill9()
    assert live["windows"] >= 3 and live["destaged"] > 0 and len(live["tenants"]) == 2, live
    for t in threads:
        t.join(timeout=60)
    for n, st in stampers.items():
        assert st.flushes_done > 2 and st.error, (n, st.flushes_done, st.error)
    srv = Server(d)
    try:
        for n, st in stampers.items():
            c = Nbd(srv.host, srv.port, n)
            got = read_all(c, st.blocks)
            bad = [m for b, data in got.items() if (m := (f"EIO {data}" if isinstance(data, int)
                                                          else st.verify_block(b, data)))]
            c.close()
            assert not bad, f"{n}: {bad[:5]}"
    finally:
        srv.ensure_dead()
    srv.stop()


def tenant_trace(path: Path, tenant: int, size: int, n: int, seed: int, writes: float) -> Path:
    """A csv trace of one tenant: skewed 4-8 KiB requests over `size` bytes, its tenant column `tenant`."""
    rnd = random.Random(seed)
    lines = []
    for i in range(n):
        b = int(rnd.random() ** 2 * (size // 4096 - 2))
        op = "W" if rnd.random() < writes else "R"
        lines.append(f"{i * 0.002:.4f},{op},{b * 4096},{rnd.choice((4096, 8192))},{tenant}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_real_replay_of_per_tenant_traces_decides_as_the_counted_run(tmp_path):
    for partitioner in ("centaur", "eci", "static"):
        policy = "adaptive" if partitioner == "eci" else "wb"
        s, d = two_tenants(tmp_path, partitioner, tier(partitioner, policy, 300, window=0.5))
        t0 = tenant_trace(tmp_path / "web.csv", 0, 4 << 20, 1500, 1, 0.2)
        t1 = tenant_trace(tmp_path / "db.csv", 1, 3 << 20, 1500, 2, 0.6)
        counted = js("run", s, "-t", t0, "-t", t1, "--format", "csv", "--executor", "count")
        real = js("real", "replay", d, "-t", t0, "-t", t1, "--format", "csv", "--replay", "closed")
        ct, rt = counted["tier"], real["tier"]
        assert ct["read_hits"] > 0 and len(ct["tenants"]) == 2, partitioner
        keys = ("accesses", "reads", "read_hits", "ssd_reads", "ssd_writes", "array_reads", "array_writes",
                "destaged", "windows")
        assert {k: ct[k] for k in keys} == {k: rt[k] for k in keys}, partitioner
        assert ct["tenants"] == rt["tenants"] and ct["timeline"] == rt["timeline"], partitioner
        assert counted["array"]["ops_by_cause"] == real["array"]["ops_by_cause"], partitioner
        assert [x["name"] for x in real["real"]["tenants"]] == ["web", "db"]
        assert real["real"]["tenants"][1]["response"]["requests"] == 1500
    # Bad input: a tenant the stack does not declare, a request past its tenant's volume: one line, exit 2.
    (tmp_path / "t3.csv").write_text("0.1,R,0,4096,0\n0.2,R,0,4096,3\n")
    (tmp_path / "past.csv").write_text("0.1,R,3145728,4096,1\n")
    for t, what in (("t3.csv", "tenant 3: the stack declares 2 tenants"), ("past.csv", "past the end of tenant 1's volume")):
        p = run("real", "replay", d, "-t", tmp_path / t, "--format", "csv", "--replay", "closed", check=False)
        assert p.returncode == 2 and what in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_real_replay_of_a_served_stack_with_tenants_is_one_line_exit_2(tmp_path):
    # Its server has no default export: a replay through it would send every tenant's requests to one export.
    _, d = two_tenants(tmp_path, "served", tier("static", "wb", 256))
    t = tenant_trace(tmp_path / "db.csv", 1, 3 << 20, 20, 3, 0.5)
    srv = Server(d)
    try:
        p = run("real", "replay", d, "-t", t, "--format", "csv", "--replay", "closed", check=False, timeout=60)
    finally:
        srv.ensure_dead()
    srv.stop()
    assert p.returncode == 2 and "exports web, db" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    # Stopped, the same trace replays here, to tenant 1's volume.
    real = js("real", "replay", d, "-t", t, "--format", "csv", "--replay", "closed")
    assert real["real"]["tenants"][1]["response"]["requests"] == 20


def test_repro_eci_real_end_to_end_small(tmp_path):
    out = tmp_path / "eci"
    p = run("repro", "eci", "--real", "--synthetic", "--requests", "400", "--repeats", "2", "--tier-blocks", "300",
            "--out", out, timeout=600)
    assert "| centaur | yes |" in p.stdout and "| eci | yes |" in p.stdout, p.stdout
    assert "share one VM disk" in p.stdout and "paper" in p.stdout
    res = json.loads((out / "eci-real.json").read_text())
    assert res["same_decisions"] == {"centaur": True, "eci": True}
    assert len(res["real"]["eci"]) == 2 and len(res["real"]["eci"][0]["real"]["tenants"]) == 3
    assert "[[tenant]]" in (out / "eci-real-eci.toml").read_text()
    # The stack the recipe wrote runs counted from the command line as well, with the same tier figures.
    c = js("run", out / "eci-real-eci.toml", "-t", out / "eci-real-mix.csv", "--format", "csv", "--executor", "count")
    assert c["tier"]["ssd_writes"] == res["counted"]["eci"]["tier"]["ssd_writes"]
    p = run("repro", "eci", "--real", "--repeats", "0", "--out", out, check=False)
    assert p.returncode == 2 and "--repeats" in p.stderr
