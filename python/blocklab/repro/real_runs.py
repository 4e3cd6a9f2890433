"""What the recipes' runs on real bytes share (`repro vdf --real`, `repro pro --real`).

A run here is the real executor driven as a user would drive it: an array (or a stack)
made with `real create`, filled once so that the rebuild and the reads move real bytes
(never-written blocks are holes that read as zeroes without touching the disk), a member
failed and replaced, `real serve --direct` in a process of its own, and `real replay`
(through the server, one NBD connection per request in flight) while `real rebuild` runs
in the server. The replay's per-request log (`real replay --log`) and the rebuild's
`started_unix_s` / `finished_unix_s` share the Unix clock, so the users' figures *during*
the rebuild are cut from the log afterwards.

The engine does the work (serving, replay, rebuild, check); this module only prepares the
trace file a run replays, starts and stops the server, and reads the logs.
"""

from __future__ import annotations

import json
import re
import signal
import statistics
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

# Said beside every real figure (docs/repro-vdf.md, docs/repro-pro.md).
ONE_DISK = ("real figures: member files on this machine's one virtual disk (they share its bandwidth and "
            "the host's caches), so absolute times are this machine's, not a drive's; policies and orders are "
            "compared within one run, alternating, repeated")


@dataclass
class Prepared:
    """A trace written for a real run: `path` (native CSV), its request count, the trace
    seconds it spans, and the highest byte it touches (after any fit)."""

    path: str
    requests: int
    seconds: float
    span: int
    unique_blocks: int
    times: list


def prepare_trace(src: str, fmt: str, dst: Path, *, limit: int | None = None, reads_only: bool = False,
                  keep: int | None = None, capacity: int | None = None, block: int = 4096,
                  chunk: int | None = None, stretch: int | None = None) -> Prepared:
    """Write `src`'s first `limit` requests (reads only, if asked) as native CSV
    (`timestamp,op,offset,size`), in time order (a stable sort: some cuts step back by up
    to a second), so that the real replay and the simulator read the very same requests;
    `keep` of them at most.
    With `capacity`, offsets are mapped linearly onto it (as `array.fit = "scale"` maps a
    trace's span; a request kept whole and inside), for traces wider than the array.
    With `chunk`, a request that crosses a multiple of `chunk` bytes is split there (pieces
    at the same time; `keep` counts pieces), as the array splits it anyway. With `stretch`
    (and `chunk`), a span narrower than it is then spread over it chunk by chunk (chunk c of
    the trace onto chunk ⌊c · stretch / span⌋, the offset within it kept, as the stack's
    `stretch_block`), so that the trace's reads meet every region of a larger array while
    every block keeps one place (the same blocks hit and miss)."""
    from blocklab import api

    df = api.read_trace(src, fmt, limit=limit)
    if reads_only:
        df = df[df["op"] == "R"]
    df = df.sort_values("time", kind="stable").reset_index(drop=True)
    if chunk is not None:
        df = _split_at(df, chunk)
    if keep is not None:
        df = df.iloc[:keep]
    off = df["offset"].astype("int64")
    ln = df["len"].astype("int64").clip(lower=512)
    if capacity is not None:
        span = int((off + ln).max())
        if span > capacity:
            off = (off * (capacity / span)).astype("int64") // block * block
            off = off.where(off + ln <= capacity, (capacity - ln) // block * block)
    if stretch is not None and chunk is not None and len(df):
        span = int((off + ln).max())
        if span < stretch:
            c = off // chunk
            off = (c * chunk * stretch // span) // chunk * chunk + off % chunk
    with open(dst, "w") as f:
        f.write("timestamp,op,offset,size\n")
        for t, op, o, n in zip(df["time"], df["op"], off, ln):
            f.write(f"{t:.6f},{op},{o},{n}\n")
    first = (off // block)
    last = ((off + ln - 1) // block)
    unique = set()
    for a, b in zip(first, last):
        unique.update(range(a, b + 1))
    times = list(df["time"])
    return Prepared(str(dst), len(df), (times[-1] - times[0]) if times else 0.0, int((off + ln).max()) if len(df) else 0,
                    len(unique), times)


def _split_at(df, chunk: int):
    """`df`'s requests split where they cross a multiple of `chunk` bytes, in order."""
    import pandas as pd

    rows = []
    for t, op, o, n in zip(df["time"], df["op"], df["offset"].astype("int64"), df["len"].astype("int64")):
        end = o + max(int(n), 512)
        while o < end:
            cut = min(end, (o // chunk + 1) * chunk)
            rows.append((t, op, o, cut - o))
            o = cut
    return pd.DataFrame(rows, columns=["time", "op", "offset", "len"])


def synthetic_reads(dst: Path, requests: int, universe: int, alpha: float = 0.9, seed: int = 1,
                    rate: float = 500.0) -> Path:
    """A seeded Zipf read trace (the engine's generator, `blocklab trace synth`), 4 KiB per
    request, `rate` requests per second: the built-in trace when ../shared is absent."""
    from blocklab import _core

    raw = dst.with_suffix(".zipf.csv")
    _core.write_zipf_csv(str(raw), requests, universe, alpha, seed)
    with open(raw) as f, open(dst, "w") as out:
        out.write("timestamp,op,offset,size\n")
        next(f)
        for i, line in enumerate(f):
            _t, _op, offset, size = line.strip().split(",")[:4]
            out.write(f"{i / rate:.6f},R,{offset},{size}\n")
    raw.unlink()
    return dst


def write_fill(dst: Path, capacity: int, chunk: int = 1 << 20) -> Path:
    """Sequential writes of `chunk` bytes covering `capacity` bytes: one pass makes every
    block of the array data (members are created sparse)."""
    with open(dst, "w") as f:
        f.write("timestamp,op,offset,size\n")
        for off in range(0, capacity, chunk):
            f.write(f"0,W,{off},{min(chunk, capacity - off)}\n")
    return dst


BLOCKLAB = [sys.executable, "-c", "from blocklab.cli import main; main()"]


def cli(*args, timeout: float = 600) -> str:
    """`blocklab ARGS` in a process of its own; its output, or RuntimeError with its error line."""
    p = subprocess.run([*BLOCKLAB, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"blocklab {' '.join(map(str, args))}: {p.stderr.strip() or p.stdout.strip()}")
    return p.stdout


class Server:
    """`blocklab real serve DIR --listen 127.0.0.1:0 --direct`, in a process of its own; a
    context manager that stops it (SIGTERM: the array is closed cleanly)."""

    def __init__(self, d: Path, direct: bool = True, extra: tuple = ()):
        args = [*BLOCKLAB, "real", "serve", str(d), "--listen", "127.0.0.1:0"] + (["--direct"] if direct else []) \
            + [str(a) for a in extra]
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not re.search(r"nbd://[\d.]+:\d+/", line):
            err = self.p.stderr.read() if self.p.wait(timeout=30) is not None else ""
            raise RuntimeError(f"real serve {d}: {err.strip() or line.strip()}")
        self.banner = line.strip()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def replay(d: Path, trace: str, **kw) -> dict:
    """`real replay DIR --trace TRACE` (native CSV) with `kw` as its options; through the
    server when `d` is served."""
    from blocklab import _core

    return json.loads(_core.real_replay(str(d), [trace], format="csv", **kw))


def replay_during_rebuild(d: Path, trace: str, rebuild: dict, **kw) -> tuple[dict, dict]:
    """The replay (`kw`, usually with `log=`) and `real rebuild` (`rebuild`: its options) at
    once on the served `d`: the replay starts first, the rebuild right after. Returns both
    reports."""
    from blocklab import _core

    out: dict = {}

    def go():
        try:
            out["replay"] = replay(d, trace, **kw)
        except Exception as e:  # noqa: BLE001 - handed to the caller below
            out["error"] = e

    t = threading.Thread(target=go)
    t.start()
    try:
        rb = json.loads(_core.real_rebuild(str(d), **rebuild))
    finally:
        t.join()
    if "error" in out:
        raise out["error"]
    return rb, out["replay"]


def check(d: Path) -> dict:
    """`real check DIR` (the array not served): every stripe compared, nothing repaired."""
    from blocklab import _core

    return json.loads(_core.real_check(str(d), False))


def stack_figures(d: Path) -> dict | None:
    """The served stack's first layer and array figures so far (`real status`)."""
    from blocklab import _core

    s = _core.real_stack_status(str(d))
    if s is None:
        return None
    s = json.loads(s)
    layer = s["layers"][0]
    arr = s.get("array") or {}
    return {"accesses": layer["accesses"], "hits": layer["hits"], "misses": layer["misses"],
            "surviving_reads": arr.get("surviving_reads", 0)}


def delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


def window(log: str, t0: float, t1: float) -> dict:
    """The requests of a replay log (`real replay --log`) issued in [t0, t1] (Unix seconds):
    how many, their mean and p95 response (ms), and the rate they were served at."""
    rows = []
    with open(log) as f:
        next(f)
        for line in f:
            at, _op, _off, _n, ms, ok = line.rstrip("\n").split(",")
            at = float(at)
            if t0 <= at <= t1 and ok == "1":
                rows.append(float(ms))
    n = len(rows)
    rows.sort()
    span = max(t1 - t0, 1e-9)
    return {"requests": n, "avg_ms": sum(rows) / n if n else float("nan"),
            "p95_ms": rows[min(n - 1, int(0.95 * n))] if n else float("nan"), "rate": n / span}


def log_end(log: str) -> float:
    """When the last request of a replay log was issued (Unix seconds)."""
    last = 0.0
    with open(log) as f:
        next(f)
        for line in f:
            last = max(last, float(line.split(",", 1)[0]))
    return last


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """`median (min–max)` of repeated measurements."""
    v = [x for x in values if x == x]
    if not v:
        return "–"
    if len(v) == 1:
        return fmt.format(v[0])
    return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}–{fmt.format(max(v))})"


def median(values: list[float]) -> float:
    v = [x for x in values if x == x]
    return statistics.median(v) if v else float("nan")


def noisy(gains: list[float]) -> bool:
    """Whether repeated gains disagree in sign: the effect is within this machine's noise."""
    v = [x for x in gains if x == x]
    return len(v) > 1 and min(v) < 0 < max(v)


def judge_repeated(paper: float, gains: list[float], judge=None) -> tuple[str, str]:
    """The verdict on the median of repeated gains (`verdicts.judge`, or `judge`), and a note:
    when the repeats disagree in sign a median near the paper's is luck, not a match, so
    `matched` becomes `trend` and the note says so."""
    from blocklab.repro import verdicts

    v = (judge or verdicts.judge)(paper, median(gains))
    if noisy(gains):
        return ("trend" if v == "matched" else v), "; the repeats disagree in sign: within this machine's noise"
    return v, ""


def order_for(repeat: int, items: list) -> list:
    """`items` rotated by `repeat`, so that over the repeats each runs first, second, ...
    equally often (drift of the machine spreads over all of them)."""
    k = repeat % len(items)
    return items[k:] + items[:k]


def write_csv(rows: list[dict], path: Path) -> None:
    """Rows (dicts) as CSV, one column per key any row has."""
    import csv

    keys = sorted({k for r in rows for k in r})
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
