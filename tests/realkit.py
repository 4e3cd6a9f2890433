"""What the tests of the real executor share: the CLI run as a subprocess,
`blocklab real serve` as a `Server`, arrays made on a temporary directory
(`make_array`, or `make_served` for the tests that also run on a stack
directory), stack files with host cache layers in front of an array
(`stack_file`, `CACHE_MODES`), and moving whole exports with nbdcopy.

Every subprocess here has a timeout: a hang fails the test, it never stalls
the suite.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

BLOCKLAB = [sys.executable, "-c", "from blocklab.cli import main; main()"]


def nbd_exports(srv) -> dict:
    """What `nbdinfo --list` says `srv` exports, by export name."""
    out = subprocess.run(["nbdinfo", "--list", "--json", f"nbd://{srv.host}:{srv.port}"], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    return {e["export-name"]: e for e in json.loads(out)["exports"]}


def run(*args, check=True, timeout=300) -> subprocess.CompletedProcess:
    p = subprocess.run([*BLOCKLAB, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"blocklab {' '.join(map(str, args))} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def js(*args) -> dict:
    return json.loads(run(*args, "--json").stdout)


def within(secs: float, f):
    """f()'s result, or raise if it has not returned after `secs` seconds (tells a hang from a success)."""
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("v", f()), daemon=True)
    t.start()
    t.join(secs)
    assert "v" in out, f"did not complete within {secs} s"
    return out["v"]


class Server:
    """`blocklab real serve DIR --listen 127.0.0.1:0`, its address parsed from its first line."""

    def __init__(self, d: Path, *extra: str):
        self.p = subprocess.Popen([*BLOCKLAB, "real", "serve", str(d), "--listen", "127.0.0.1:0", *extra],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.banner = line = self.p.stdout.readline()
        m = re.search(r"nbd://([\d.]+):(\d+)/(\S+)", line)
        assert m, f"no address in {line!r}: {self.p.stderr.read() if self.p.poll() is not None else ''}"
        self.host, self.port, self.name = m.group(1), int(m.group(2)), m.group(3)
        self.uri = f"nbd://{self.host}:{self.port}/{self.name}"

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            self.p.wait(timeout=60)
        assert self.p.returncode == 0, self.p.stderr.read()

    def kill9(self) -> None:
        self.p.send_signal(signal.SIGKILL)
        self.p.wait(timeout=30)

    def ensure_dead(self) -> None:
        """For `finally`: stop a server a failed test left running, without asserting."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill9()


def make_array(tmp: Path, name: str, raid: str, disks: int, size: str = "4MiB", chunk: str = "64KiB", *extra) -> Path:
    d = tmp / name
    run("real", "create", d, "--raid", raid, "--disks", disks, "--chunk", chunk, "--disk-size", size, *extra)
    return d


def make_served(tmp: Path, raid: str, disks: int, stack: Path | None = None, size: str = "16MiB",
                chunk: str = "64KiB", *extra) -> tuple[Path, Server]:
    """An array directory and its server. With `stack`, the directory is laid
    out from that stack file (`real create DIR --stack FILE`: the stack's own
    `[array]` then decides level and members), so a test written over this
    runs unchanged on the whole stack."""
    if stack is None:
        d = make_array(tmp, "arr", raid, disks, size, chunk, *extra)
    else:
        d = tmp / "arr"
        run("real", "create", d, "--stack", stack, "--disk-size", size, *extra)
    return d, Server(d)


STACK = """tenant_map = "ignore"
{caches}
[array]
raid = "raid{raid}"
disks = {disks}
chunk = "{chunk}"
disk_size = "4MiB"
[device]
model = "const:1"
"""


def cache(policy: str, size: int, write: str) -> str:
    """One `[[cache]]` layer of a stack file: `size` in 4 KiB blocks."""
    return f'[[cache]]\npolicy = "{policy}"\nsize = {size}\nwrite = "{write}"\n'


def stack_file(tmp: Path, name: str, caches: str, raid: str = "5", disks: int = 4, chunk: str = "16KiB") -> Path:
    """A stack file `tmp/name.toml`: the layers `caches` over an array (its
    members' size comes from `real create --disk-size` or is 4 MiB)."""
    p = tmp / f"{name}.toml"
    p.write_text(STACK.format(caches=caches, raid=raid, disks=disks, chunk=chunk))
    return p


# The host cache modes the real-tool tests run through, each smaller than
# the data the tests write (so blocks are evicted, dirty ones destaged):
# write-back LRU, write-through ARC, write-around LRU, two layers (a
# write-back LRU over a write-through ARC) and fault-aware VDF-LFU, write-back.
CACHE_MODES = {
    "wb-lru": cache("lru", 1024, "back"),
    "wt-arc": cache("arc", 1024, "through"),
    "wa-lru": cache("lru", 1024, "around"),
    "two-layers": cache("lru", 512, "back") + cache("arc", 1024, "through"),
    "vdf-lfu": cache("vdf-lfu", 1024, "back"),
}

def tier(policy: str, size: int, extra: str = "") -> str:
    """The `[tier]` of a stack file: `size` frames of 4 KiB, write policy `policy`."""
    return f'[tier]\nsize = {size}\nwrite_policy = "{policy}"\n{extra}'


# Every write policy of the SSD tier (`tier.write_policy` in docs/stack.md).
TIER_POLICIES = ("wb", "wt", "ro", "wa", "wo", "pt", "adaptive")

# The tier as the real-tool tests run it: 1,024 frames (4 MiB), smaller than
# what they write, so blocks are evicted (dirty ones destaged) and, past the
# cleaning watermarks, written back early; `adaptive` re-chooses wb or ro
# every second (its windows follow the wall clock when served).
TIER_MODES = {
    p: tier(p, 1024, "clean_high = 0.5\nclean_low = 0.25\n" + ("window_s = 1\n" if p == "adaptive" else ""))
    for p in TIER_POLICIES
}

# `BLOCKLAB_FULL_MATRIX=1` (or `make test-real-matrix`) runs every cache mode
# in every state; by default each mode runs once and each state at least once.
FULL_MATRIX = os.environ.get("BLOCKLAB_FULL_MATRIX") == "1"


def rebuild_in_background(d: Path, speed_min: int, speed_max: int) -> subprocess.Popen:
    """`real rebuild DIR --json` paced between the two speeds (KiB/s), running
    while the test goes on (through the server when one serves DIR)."""
    return subprocess.Popen([*BLOCKLAB, "real", "rebuild", str(d), "--json", "--speed-min", str(speed_min),
                             "--speed-max", str(speed_max)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def tear_down(srv: Server, *procs: subprocess.Popen | None) -> None:
    """For `finally`: kill what a failed test left running, then its server."""
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait(timeout=30)
    srv.ensure_dead()


def random_file(path: Path, size: int, seed: int) -> bytes:
    data = random.Random(seed).randbytes(size)
    path.write_bytes(data)
    return data


def nbdcopy(src: str, dst: str) -> None:
    subprocess.run(["nbdcopy", src, dst], check=True, capture_output=True, timeout=120)


def read_export(srv: Server, out: Path) -> bytes:
    if out.exists():
        out.unlink()
    nbdcopy(srv.uri, str(out))
    return out.read_bytes()
