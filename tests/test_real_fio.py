"""fio's own verification through the real server: `--verify=crc32c
--verify_fatal=1` over fio's nbd engine, for RAID-1, 5, 6 and 10, on a
healthy array (and RAID-6 with checksums), a degraded one (a member failed before), during a rebuild
(fio passes while `real rebuild` fills a spare) and with a member failed
while fio writes. fio must exit 0 and its verify phase must have read back
every byte it wrote. After a rebuild, another member is failed and fio
verifies again, so the rebuilt spare's bytes are the ones read or solved
from. The same job runs through a served stack (`real create --stack`):
every host cache write mode (back, through, around, two layers, VDF-LFU)
in front of RAID-5 or RAID-6, each mode once, each state at least once on
write-back (`BLOCKLAB_FULL_MATRIX=1`: every mode in every state). And through
a served SSD tier (`[tier]`, its frames in `tier.img`) of 4 MiB in front of
RAID-5 for every tier write policy (wb, wt, ro, wa, wo, pt, adaptive): fio's
16 MiB overflow it, so blocks are evicted, dirty ones destaged, and cleaned
past the watermarks; each policy once, each state at least once on `wb`.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from realkit import CACHE_MODES, FULL_MATRIX, TIER_MODES, cache, js, make_served, rebuild_in_background, run, stack_file, tear_down

SIZE = 16 << 20


def fio(uri: str, cwd, seed: int, *extra: str, verify_only: bool = False, wait=True):
    """One fio job: random writes of 4–64 KiB over the first 16 MiB, then
    fio reads all of it back and checks every block's CRC-32C."""
    args = ["fio", "--name=v", "--ioengine=nbd", f"--uri={uri}", "--rw=randwrite", "--bsrange=4k-64k",
            f"--size={SIZE}", "--iodepth=8", "--verify=crc32c", "--verify_fatal=1", f"--randseed={seed}",
            "--output-format=json", *extra]
    args.append("--verify_only=1" if verify_only else "--do_verify=1")
    # cwd: fio leaves its verify state file where it runs.
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    return finish(p) if wait else p


def finish(p: subprocess.Popen) -> dict:
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, out + err
    job = json.loads(out[out.index("{"):])["jobs"][0]
    assert job["error"] == 0, job["error"]
    # The verify phase read back everything written (fio counts its reads).
    assert job["read"]["io_bytes"] >= SIZE, job["read"]["io_bytes"]
    return job


LEVELS = [("1", 2, ()), ("5", 4, ()), ("6", 5, ()), ("10", 4, ()), ("6", 5, ("--checksums",))]
STATES = ["healthy", "degraded", "rebuilding", "fail-while-writing"]


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("raid,disks,extra", LEVELS, ids=[f"raid{r}{'-checksums' if x else ''}" for r, _, x in LEVELS])
def test_fio_verifies_through_the_server(tmp_path, raid, disks, extra, state, stack=None, tier_destages=False):
    d, srv = make_served(tmp_path, raid, disks, stack, "16MiB", "64KiB", *extra)
    rebuild = None
    try:
        if state == "healthy":
            job = fio(srv.uri, tmp_path, 1)
            assert job["write"]["io_bytes"] == SIZE
        elif state == "degraded":
            run("real", "fail", d, "1")
            fio(srv.uri, tmp_path, 2)
        elif state == "fail-while-writing":
            # Writes limited to 8 MiB/s: the 16 MiB take about 2 s, the member fails after 0.7.
            p = fio(srv.uri, tmp_path, 3, "--rate=,8m", wait=False)
            time.sleep(0.7)
            assert p.poll() is None, "fio ended before the member failed"
            run("real", "fail", d, "0")
            finish(p)
            assert js("real", "status", d)["failed"] == [0]
        else:
            fio(srv.uri, tmp_path, 4)
            run("real", "fail", d, "1")
            run("real", "replace", d, "1")
            rebuild = rebuild_in_background(d, 4000, 8000)
            passes = 0
            while rebuild.poll() is None and passes < 20:
                fio(srv.uri, tmp_path, 5 + passes)
                passes += 1
            out, err = rebuild.communicate(timeout=300)
            assert rebuild.returncode == 0, err
            report = json.loads(out)
            assert report["finished"] and report["user_requests_seen"] > 0, report
            # Every pass started while the rebuild ran; the rebuild saw their requests.
            assert passes >= 1
            print(f"{passes} fio passes during the rebuild ({report['seconds']:.1f} s)")
            # The rebuilt spare holds the last pass: verify it with another member gone.
            run("real", "fail", d, "0")
            fio(srv.uri, tmp_path, 5 + passes - 1, verify_only=True)
        chk = js("real", "check", d)
        assert (chk["mismatches"], chk["unrecoverable"]) == (0, 0), chk
        if stack is not None:
            # The requests went through the cache, and it was too small to hold them all.
            st = js("real", "status", d)["stack"]
            for layer in st["layers"][:1]:
                assert layer["accesses"] > 0 and layer["misses"] > 0, layer
            if st.get("tier"):
                t = st["tier"]
                assert t["accesses"] > 0 and t["array_reads"] + t["array_writes"] > 0, t
                # A write-back tier's dirty blocks left their frames: evicted and destaged, or cleaned.
                assert t["destaged"] > 0 or not tier_destages, t
        srv.stop()
    finally:
        tear_down(srv, rebuild)


# (cache mode, state, level, members)
STACK_CASES = [("wb-lru", state, "5", 4) for state in STATES] + [
    ("wt-arc", "rebuilding", "5", 4),
    ("wa-lru", "fail-while-writing", "5", 4),
    ("two-layers", "degraded", "6", 5),
    ("vdf-lfu", "fail-while-writing", "5", 4),
]
if FULL_MATRIX:
    STACK_CASES = [(m, state, "5", 4) for m in CACHE_MODES for state in STATES] + [("two-layers", "degraded", "6", 5)]


@pytest.mark.parametrize("mode,state,raid,disks", STACK_CASES, ids=[f"{m}-raid{r}-{s}" for m, s, r, _ in STACK_CASES])
def test_fio_verifies_through_a_served_stack(tmp_path, mode, state, raid, disks):
    stack = stack_file(tmp_path, mode, CACHE_MODES[mode], raid, disks, "64KiB")
    test_fio_verifies_through_the_server(tmp_path, raid, disks, (), state, stack=stack)


# (tier write policy, state)
TIER_CASES = [("wb", state) for state in STATES] + [
    ("wt", "rebuilding"),
    ("ro", "degraded"),
    ("wa", "fail-while-writing"),
    ("wo", "healthy"),
    ("pt", "degraded"),
    ("adaptive", "fail-while-writing"),
]
if FULL_MATRIX:
    TIER_CASES = [(p, state) for p in TIER_MODES for state in STATES]


@pytest.mark.parametrize("policy,state", TIER_CASES, ids=[f"{p}-raid5-{s}" for p, s in TIER_CASES])
def test_fio_verifies_through_a_served_tier(tmp_path, policy, state):
    stack = stack_file(tmp_path, f"tier-{policy}", TIER_MODES[policy], "5", 4, "64KiB")
    test_fio_verifies_through_the_server(tmp_path, "5", 4, (), state, stack=stack,
                                         tier_destages=policy in ("wb", "wo"))


@pytest.mark.parametrize("state", ["healthy", "fail-while-writing"])
def test_fio_verifies_at_iodepth_16_through_a_write_back_cache_over_a_write_back_tier(tmp_path, state):
    """16 requests in flight through one served stack, whose decisions are
    one at a time and whose member I/O overlaps (docs/real.md, "Requests in
    parallel"): a write-back host cache smaller than the tier, over a
    write-back tier smaller than fio's 16 MiB, over RAID-5 — fills, hits on
    blocks still on their way, destages of both layers and partial stripes
    race, and fio's verify reads back every block it wrote."""
    from realkit import cache

    layers = cache("lru", 256, "back") + TIER_MODES["wb"]
    stack = stack_file(tmp_path, "cache-over-tier", layers, "5", 4, "64KiB")
    d, srv = make_served(tmp_path, "5", 4, stack, "16MiB", "64KiB")
    try:
        if state == "healthy":
            job = fio(srv.uri, tmp_path, 11, "--iodepth=16")
            assert job["write"]["io_bytes"] == SIZE
        else:
            p = fio(srv.uri, tmp_path, 12, "--iodepth=16", "--rate=,8m", wait=False)
            time.sleep(0.7)
            assert p.poll() is None, "fio ended before the member failed"
            run("real", "fail", d, "2")
            finish(p)
        st = js("real", "status", d)["stack"]
        assert st["layers"][0]["dirty_evictions"] > 0, st["layers"][0]
        assert st["tier"]["destaged"] > 0, st["tier"]
        chk = js("real", "check", d)
        assert (chk["mismatches"], chk["unrecoverable"]) == (0, 0), chk
        srv.stop()
    finally:
        tear_down(srv)


def test_fio_verifies_sequential_io_through_a_read_ahead_cache(tmp_path):
    """Sequential 16 KiB writes, then fio's sequential verify reads, through
    a write-back LRU of 4 MiB that reads 128 KiB ahead of every read miss
    (Hsu–Smith's read-ahead) in front of RAID-5: healthy, then degraded. The
    verify reads hit blocks read ahead (their bytes on the way or landed)
    and miss those evicted since; every byte must check."""
    caches = cache("lru", 1024, "back") + 'prefetch = "readahead"\nreadahead = "128KiB"\n'
    stack = stack_file(tmp_path, "readahead", caches, "5", 4, "64KiB")
    d, srv = make_served(tmp_path, "5", 4, stack, "16MiB", "64KiB")
    try:
        fio(srv.uri, tmp_path, 1, "--rw=write", "--bs=16k")
        run("real", "fail", d, "1")
        fio(srv.uri, tmp_path, 2, "--rw=write", "--bs=16k")
        layer = js("real", "status", d)["stack"]["layers"][0]
        assert layer["prefetch_ops"] > 0 and layer["prefetched_blocks"] > 0, layer
        assert layer["read_hits"] > 0, layer
        srv.stop()
    finally:
        tear_down(srv)
