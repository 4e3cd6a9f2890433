"""Shared by the bench sections that time whole processes side by side: one
child's wall and CPU time, the machine, the peer tools libCacheSim and DiskSim
built here.

libCacheSim's `cachesim` is built on this machine from its source (CMake, with
glib and zstd: `make bench` installs them when missing). The source is, in
order: $LIBCACHESIM_SRC (a source tree, or a git directory whose HEAD is
exported), out/bench/libCacheSim-src from an earlier run, or a clone of
https://github.com/1a1a11a/libCacheSim.

DiskSim 4.0's `disksim` (and its `rms`) is built the same way from a public
copy of its source that builds on Linux: $DISKSIM_SRC (a source tree, or a git
directory whose HEAD is exported), else out/bench/disksim-src from an earlier
run, else the mirror of https://github.com/benh/disksim at DISKSIM_MIRRORS when
present. It is 32-bit C of 2008 and needs bison, flex and gcc-multilib
(`make bench-tools`); no source change, only compiler flags (DISKSIM_CC).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "out" / "bench"
LCS_SRC = OUT / "libCacheSim-src"
LCS_URL = "https://github.com/1a1a11a/libCacheSim"


def run(cmd: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[float, float, str, int]:
    """Wall time, CPU time (user + system), stdout and peak RSS (KiB) of one child process
    (run in out/bench/ unless `cwd` says otherwise: `cachesim` writes a result file into its
    working directory; `disksim` reads a .parv's included files relative to its own)."""
    OUT.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                         cwd=cwd or OUT)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"command failed ({code}): {' '.join(cmd)}")
    return wall, ru.ru_utime + ru.ru_stime, out, ru.ru_maxrss


def machine() -> str:
    """CPU model and logical CPUs, e.g. `Intel(R) Xeon(R) Processor, 2 logical CPUs`."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        return f"{fields.get('Model name', '?').strip()}, {os.cpu_count()} logical CPUs"
    except OSError:
        return f"{platform.processor()}, {os.cpu_count()} logical CPUs"


def commit() -> str:
    """blocklab's commit (short hash; `+` when the work tree differs from it)."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        # BENCHMARKS.md itself changes as the sections are written.
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":!BENCHMARKS.md"], capture_output=True, text=True).stdout.strip()
        return head + ("+" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "?"


def today() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def _export_source() -> None:
    """Put a libCacheSim source tree at LCS_SRC (see the module notes)."""
    src = os.environ.get("LIBCACHESIM_SRC")
    if src and (Path(src) / "CMakeLists.txt").exists():
        LCS_SRC.parent.mkdir(parents=True, exist_ok=True)
        if not LCS_SRC.exists():
            LCS_SRC.symlink_to(Path(src).resolve())
        return
    if src:
        # A git directory (a bare mirror, say): export HEAD without the sample data.
        LCS_SRC.mkdir(parents=True)
        archive = subprocess.run(["git", "--git-dir", src, "archive", "HEAD", "--", ".", ":!data", ":!doc"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(LCS_SRC)], input=archive, check=True)
        info = subprocess.run(["git", "--git-dir", src, "log", "-1", "--format=%h %cs"], capture_output=True,
                              text=True, check=True).stdout.strip()
        (LCS_SRC / "BLOCKLAB_SOURCE").write_text(f"{info} (exported from {src})\n")
        return
    print(f"cloning {LCS_URL} into {LCS_SRC}", file=sys.stderr)
    r = subprocess.run(["git", "clone", "--depth", "1", LCS_URL, str(LCS_SRC)])
    if r.returncode != 0:
        raise SystemExit(f"no libCacheSim source: set LIBCACHESIM_SRC to a source tree or git directory "
                         f"(cloning {LCS_URL} failed)")


def lcs_version() -> str:
    """The libCacheSim source built: `commit date`."""
    marker = LCS_SRC / "BLOCKLAB_SOURCE"
    if marker.exists():
        return marker.read_text().split(" (")[0].strip()
    if not (LCS_SRC / ".git").exists():
        return "?"  # not a clone: `git log` would name blocklab's own commit
    r = subprocess.run(["git", "-C", str(LCS_SRC), "log", "-1", "--format=%h %cs"], capture_output=True, text=True)
    return r.stdout.strip() or "?"


def cachesim() -> str:
    """Path of libCacheSim's `cachesim`, built here (Release) on first use."""
    binary = LCS_SRC / "_build" / "bin" / "cachesim"
    if binary.exists():
        return str(binary)
    if not LCS_SRC.exists():
        _export_source()
    build = LCS_SRC / "_build"
    build.mkdir(exist_ok=True)
    t = time.perf_counter()
    subprocess.run(["cmake", "-DCMAKE_BUILD_TYPE=Release", "-DENABLE_TESTS=OFF", ".."], cwd=build, check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["make", f"-j{os.cpu_count() or 1}", "cachesim"], cwd=build, check=True, stdout=subprocess.DEVNULL)
    print(f"built {binary} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return str(binary)


def cachesim_miss_ratio(out: str) -> float:
    """The miss ratio of `cachesim`'s result line (`..., miss ratio 0.2230, ...`)."""
    found = re.findall(r"req, miss ratio ([0-9.]+)", out)
    if not found:
        raise SystemExit(f"no result line in cachesim's output: {out[-300:]!r}")
    return float(found[-1])


DISKSIM_SRC = OUT / "disksim-src"
# Where this project's machines keep a mirror of github.com/benh/disksim (a bare
# git directory, or a clone's .git inside it).
DISKSIM_MIRRORS = (Path("/work/.mirror/benh+disksim"), Path("/work/.mirror/benh+disksim/repo/.git"))
# The source is 32-bit only (pointers kept in ints: its Makefiles say -m32). What a
# 2020s gcc needs besides: -fcommon (globals defined in headers, the pre-GCC 10
# default), -fgnu89-inline (its `inline` functions are meant to be emitted once,
# GNU89 style; C99 semantics leave them undefined at link time) and
# --no-as-needed (it names -lm before the archives that need it). -O2 (before
# its Makefiles' own -g -DASSERTS): the peer at its best; those Makefiles build
# without optimization, which runs about half as fast (BENCHMARKS.md, "Timed
# engine", measures both).
DISKSIM_CC = "gcc -m32 -O2 -fcommon -fgnu89-inline -MD -w -Wl,--no-as-needed"
DISKSIM_CXX = "g++ -m32 -O2 -w"
# As its Makefiles build it (their own -g -DASSERTS, no -O), with only what a
# 2020s gcc needs: a second build, in its own tree.
DISKSIM_STOCK_CC = "gcc -m32 -fcommon -fgnu89-inline -MD -w -Wl,--no-as-needed"
DISKSIM_STOCK_CXX = "g++ -m32 -w"


def _disksim_source() -> str:
    """A git directory or source tree of DiskSim 4.0 (see the module notes)."""
    src = os.environ.get("DISKSIM_SRC")
    if src:
        # A clone: its git directory (a source tree is copied as it is).
        return str(Path(src) / ".git") if (Path(src) / ".git").is_dir() else src
    for mirror in DISKSIM_MIRRORS:
        if (mirror / "HEAD").exists():
            return str(mirror)
    raise SystemExit("no DiskSim source: set DISKSIM_SRC to a DiskSim 4.0 source tree that builds on Linux, or "
                     "to a git directory of one (e.g. `git clone --bare https://github.com/benh/disksim`)")


def disksim_version() -> str:
    """The DiskSim source built: `commit date` (or `?`)."""
    marker = DISKSIM_SRC / "BLOCKLAB_SOURCE"
    return marker.read_text().split(" (")[0].strip() if marker.exists() else "?"


def disksim(stock: bool = False) -> tuple[str, str]:
    """Paths of DiskSim's `disksim` and `rms`, built here on first use (`stock`: without optimization,
    as DiskSim's own Makefiles build it, in out/bench/disksim-src-stock)."""
    tree = DISKSIM_SRC.with_name("disksim-src-stock") if stock else DISKSIM_SRC
    binary, rms = tree / "src" / "disksim", tree / "src" / "rms"
    if binary.exists() and rms.exists():
        return str(binary), str(rms)
    if not tree.exists():
        src = _disksim_source()
        if (Path(src) / "src" / "disksim_main.c").exists():
            shutil.copytree(src, tree, symlinks=True)
            info = f"? (copied from {src})"
        else:
            tree.mkdir(parents=True)
            archive = subprocess.run(["git", "--git-dir", src, "archive", "HEAD"], capture_output=True,
                                     check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
            info = subprocess.run(["git", "--git-dir", src, "log", "-1", "--format=%h %cs"], capture_output=True,
                                  text=True, check=True).stdout.strip() + f" (exported from {src})"
        (tree / "BLOCKLAB_SOURCE").write_text(info + "\n")
    t = time.perf_counter()
    cc, cxx = (DISKSIM_STOCK_CC, DISKSIM_STOCK_CXX) if stock else (DISKSIM_CC, DISKSIM_CXX)
    r = subprocess.run(["make", f"CC={cc}", f"CXX={cxx}"], cwd=tree, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0 or not binary.exists():
        raise SystemExit(f"building DiskSim in {tree} failed (bison, flex and gcc-multilib installed? "
                         f"`make bench-tools`): {r.stderr[-500:]}")
    print(f"built {binary} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return str(binary), str(rms)


def disksim_figure(outv: Path, name: str) -> float:
    """A `NAME: value` statistic of a DiskSim output file (the first, as runvalid's grep shows it)."""
    m = re.search(rf"(?m)^{re.escape(name)}:\s+([-0-9.e+]+)", outv.read_text(errors="replace"))
    if m is None:
        raise SystemExit(f"{outv}: no `{name}` line")
    return float(m.group(1))
