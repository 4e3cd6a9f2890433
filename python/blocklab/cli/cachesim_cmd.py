"""`blocklab cachesim TRACE TYPE ALGO SIZE[,SIZE...]`: libCacheSim's `cachesim`
command line on blocklab's counted simulator, so that scripts can swap the tools.

Their argument order, trace-type names and policy names (case-insensitive), their
cache sizes (bytes with optional KB/MB/GB/TB suffixes, which libCacheSim reads as
binary units; a number with a dot is a fraction of the working set; `auto` or `0`
picks sizes), and one line per cell in the format of their multi-cache run:

    TRACE ALGO cache size     SIZE, N req, miss ratio R, byte miss ratio B

Only the translation lives here; the simulation is `blocklab cache`'s
(`_core.simulate_cache`), every (policy, size) cell in one pass -- except for
vscsi, whose requests libCacheSim takes as one object each (id the LBN, size
the length in bytes): those run on `cache::objects` (`_core.cachesim_vscsi`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import typer

from blocklab.cli.common import BlockSizeOpt, fail, print_json

# libCacheSim trace type -> blocklab format. libCacheSim matches the names
# without regard to case; so do we. blocklab's own format names work too.
# `txt` is libCacheSim's plain text (one object id per line), blocklab's `txt`;
# `csv` is blocklab's native CSV, not libCacheSim's configurable one.
TRACE_TYPES = {
    "oraclegeneral": "oracle",
    "oraclegeneralbin": "oracle",
    "vscsi": "vscsi",
    "csv": "csv",
    "txt": "txt",
}
# Trace types whose records carry no object size: libCacheSim then counts the
# cache in objects, not bytes (its `--ignore-obj-size`).
SIZELESS_TYPES = {"csv", "txt"}
# Policies blocklab runs on objects of different sizes in a cache of bytes (vscsi; cache::objects).
SIZED_POLICIES = {"lru", "fifo", "clock"}

# libCacheSim's policy names (lower case, with their aliases) -> blocklab's, and the
# name libCacheSim prints for it.
POLICIES = {
    "lru": ("lru", "LRU"),
    "fifo": ("fifo", "FIFO"),
    "lfu": ("lfu", "LFU"),
    "arc": ("arc", "ARC"),
    "sieve": ("sieve", "Sieve"),
    "lirs": ("lirs", "LIRS"),
    "clock": ("clock", "Clock"),
    "fifo-reinsertion": ("clock", "Clock"),
    "second-chance": ("clock", "Clock"),
    "twoq": ("2q", "TwoQ"),
    "2q": ("2q", "TwoQ"),
    "s3fifo": ("s3fifo", "S3FIFO"),
    "s3-fifo": ("s3fifo", "S3FIFO"),
    "belady": ("opt", "Belady"),
    "opt": ("opt", "Belady"),
    "mq": ("mq", "MQ"),
    "lru2": ("lru2", "LRU-2"),
}

KiB, MiB, GiB, TiB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
# libCacheSim's `auto`: these fractions of the working set, those that hold at
# least 100 objects (more than 4 when sizes are counted in objects).
AUTO_FRACTIONS = (0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.4, 0.8)


@dataclass
class Size:
    """One cache size: what libCacheSim would report (bytes, or objects) and the
    blocks blocklab simulates."""

    amount: int
    blocks: int


def policy_list(algo: str) -> list[tuple[str, str]]:
    out = []
    for name in algo.split(","):
        key = name.strip().lower()
        if key not in POLICIES:
            fail(f"ALGO: unknown policy `{name.strip()}`; valid (any case): {', '.join(POLICIES)}")
        out.append(POLICIES[key])
    return out


def trace_format(trace_type: str) -> str:
    from blocklab import _core

    key = trace_type.lower()
    if key in TRACE_TYPES:
        return TRACE_TYPES[key]
    if key in dict(_core.trace_formats()):
        return key
    fail(f"TYPE: unknown trace type `{trace_type}`; valid: oracleGeneral, vscsi, csv, txt, "
         "or a blocklab format (blocklab trace formats)")
    raise AssertionError  # fail() exits


def _bytes(token: str) -> int:
    """libCacheSim's integer size: a number, optionally followed by k/kb/m/mb/g/gb/t/tb
    (any case; all binary units). Only the leading digits count, as strtoul reads them."""
    t = token.strip()
    low = t.lower()
    mult = 1
    for units, m in (("kb", KiB), ("mb", MiB), ("gb", GiB), ("tb", TiB)):
        if units in low or low.endswith(units[0]):
            mult = m
            break
    digits = ""
    for c in t.lstrip("+"):
        if not c.isdigit():
            break
        digits += c
    if not digits:
        fail(f"SIZE: `{token}` is not a cache size (bytes, 100MB, 1GB, 0.1 of the working set, or auto)")
    return int(digits) * mult


def cache_sizes(text: str, per_block: int | None, unique_blocks) -> list[Size]:
    """The cells' sizes. `per_block`: bytes per object, or None when sizes count
    objects; `unique_blocks()`: the working set in blocks (a pass over the trace)."""
    tokens = _size_tokens(text)
    unit = per_block or 1
    sizes: list[Size] = []
    if tokens is None:
        wss_obj = unique_blocks()
        floor = 4 if per_block is None else 99
        for f in AUTO_FRACTIONS:
            if int(wss_obj * f) > floor:
                amount = int(wss_obj * unit * f)
                sizes.append(Size(amount, amount // unit))
        if not sizes:
            fail(f"SIZE: working set {wss_obj * unit} too small for the automatic sizes")
        return sizes
    for tok in tokens:
        if "." in tok:
            frac = _fraction(tok)
            amount = int(unique_blocks() * unit * frac)
        else:
            amount = _bytes(tok)
        if amount // unit < 1:
            what = "objects" if per_block is None else f"bytes, less than one {per_block}-byte block"
            fail(f"SIZE: `{tok.strip()}` is {amount} {what}: the cache needs at least one")
        sizes.append(Size(amount, amount // unit))
    return sizes


def _size_tokens(text: str) -> list[str] | None:
    """SIZE's comma-separated sizes, or None for libCacheSim's automatic ones (`auto`, or a lone 0)."""
    tokens = [t for t in text.split(",") if t.strip()]
    if not tokens:
        fail("SIZE: no cache size given")
    if len(tokens) == 1 and (tokens[0].strip().lower() == "auto" or _is_zero(tokens[0])):
        return None
    return tokens


def _is_zero(token: str) -> bool:
    t = token.strip()
    return t.isdigit() and int(t) == 0


def _fraction(token: str) -> float:
    """A size with a dot: a fraction of the working set."""
    try:
        return float(token)
    except ValueError:
        fail(f"SIZE: `{token}` is not a fraction of the working set")


def size_unit(first: int, counts_objects: bool) -> tuple[int, str]:
    """libCacheSim's unit for printing every size, chosen by the first one."""
    if counts_objects:
        return 1, ""
    for u, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if first > u:
            return u, name
    return 1, "B"


def cachesim(
    trace: str = typer.Argument(..., help="Trace file."),
    trace_type: str = typer.Argument(..., metavar="TYPE", help="libCacheSim's trace type: oracleGeneral, vscsi, csv, txt (any case), or a blocklab format."),
    algo: str = typer.Argument(..., metavar="ALGO", help="Comma-separated policies, libCacheSim's names in any case: lru, fifo, lfu, arc, clock, sieve, lirs, twoq, s3fifo, belady, mq."),
    size: str = typer.Argument(..., metavar="SIZE[,SIZE...]", help="Cache sizes as libCacheSim takes them: bytes (1048576, 100MB, 1GB: binary units), a fraction of the working set (0.01), or auto."),
    ignore_obj_size: bool = typer.Option(False, "--ignore-obj-size", help="Count the cache in objects (blocks), not bytes (libCacheSim's option; implied for csv and txt)."),
    block_size: int = BlockSizeOpt,
    json_out: bool = typer.Option(False, "--json", help="Print the cells as JSON (with miss counts) instead of libCacheSim's lines."),
) -> None:
    """libCacheSim's `cachesim` command line: same arguments, same output lines, blocklab's simulator."""
    from blocklab import _core

    fmt = trace_format(trace_type)
    pols = policy_list(algo)
    if fmt == "vscsi":
        vscsi_objects(trace, pols, size, ignore_obj_size, json_out)
        return
    counts_objects = ignore_obj_size or trace_type.lower() in SIZELESS_TYPES
    per_block = None if counts_objects else block_size
    unique: list[int] = []

    def unique_blocks() -> int:
        if not unique:
            unique.append(int(json.loads(_core.trace_stats(trace, fmt, block_size))["unique_blocks"]))
        return unique[0]

    policies = ",".join(dict.fromkeys(p for p, _ in pols))
    try:
        sizes = cache_sizes(size, per_block, unique_blocks)
        blocks = ",".join(str(b) for b in dict.fromkeys(s.blocks for s in sizes))
        out = json.loads(_core.simulate_cache(trace, fmt, policies, blocks, block_size, False, False, None))
    except _core.BlocklabError as e:
        # The readers' advice names `cache`'s --format; here the format is TYPE.
        fail(str(e).replace("pass --format", "give its blocklab format as TYPE (blocklab trace formats)"))
    by_cell = {(c["policy"], c["cache_blocks"]): c for c in out["cells"]}
    unit, unit_name = size_unit(sizes[0].amount, counts_objects)
    rows = []
    for policy, shown in pols:
        for s in sizes:
            c = by_cell[(policy, s.blocks)]
            rows.append({"algo": shown, "policy": policy, "cache_size": s.amount, "cache_blocks": s.blocks,
                         "requests": c["accesses"], "misses": c["misses"], "miss_ratio": c["miss_ratio"]})
    if json_out:
        print_json(rows)
        return
    for r in rows:
        # Every request is one block of the same size: the byte miss ratio is the miss ratio.
        ratio = r["misses"] / r["requests"] if r["requests"] else 0.0
        print(f"{trace} {r['algo']} cache size {r['cache_size'] // unit:8d}{unit_name}, {r['requests']} req, "
              f"miss ratio {ratio:.4f}, byte miss ratio {ratio:.4f}")


def object_sizes(text: str, ignore_obj_size: bool, working_set) -> list[int]:
    """The cells' sizes on objects (libCacheSim's `conv_cache_sizes` and `set_cache_size`): bytes, or
    objects with --ignore-obj-size; `working_set()` is (objects, bytes)."""
    tokens = _size_tokens(text)
    if tokens is None:
        wss_obj, wss_byte = working_set()
        wss = wss_obj if ignore_obj_size else wss_byte
        sizes = [int(wss * f) for f in AUTO_FRACTIONS if (int(wss_obj * f) > 4 if ignore_obj_size else int(wss_obj * f) >= 100)]
        if not sizes:
            fail(f"SIZE: working set {wss} too small for the automatic sizes")
        return sizes
    sizes = []
    for tok in tokens:
        if "." in tok:
            frac = _fraction(tok)
            wss_obj, wss_byte = working_set()
            amount = int((wss_obj if ignore_obj_size else wss_byte) * frac)
        else:
            amount = _bytes(tok)
        if amount < 1:
            fail(f"SIZE: `{tok.strip()}` is {amount} {'objects' if ignore_obj_size else 'bytes'}: the cache needs some")
        sizes.append(amount)
    return sizes


def vscsi_objects(trace: str, pols: list[tuple[str, str]], size: str, ignore_obj_size: bool, json_out: bool) -> None:
    """vscsi as libCacheSim reads it: one object per request, id its LBN, size its length in bytes, and
    a cache of bytes (of objects with --ignore-obj-size) -- not blocks (`cache::objects`)."""
    from blocklab import _core

    if not ignore_obj_size:
        bad = [shown for p, shown in pols if p not in SIZED_POLICIES]
        if bad:
            fail(f"ALGO: {bad[0]} is not offered on vscsi objects of different sizes (LRU, FIFO, Clock are); "
                 "--ignore-obj-size counts objects and runs every policy")
    ws: list[tuple[int, int]] = []

    def working_set() -> tuple[int, int]:
        if not ws:
            ws.append(tuple(_core.vscsi_working_set(trace)))
        return ws[0]

    try:
        sizes = object_sizes(size, ignore_obj_size, working_set)
        policies = list(dict.fromkeys(p for p, _ in pols))
        cells = json.loads(_core.cachesim_vscsi(trace, policies, list(dict.fromkeys(sizes)), ignore_obj_size))
    except _core.BlocklabError as e:
        fail(str(e))
    by_cell = {(c["policy"], c["cache_size"]): c for c in cells}
    unit, unit_name = size_unit(sizes[0], ignore_obj_size)
    rows = []
    for policy, shown in pols:
        for s in sizes:
            c = by_cell[(policy, s)]
            rows.append({"algo": shown, "policy": policy, "cache_size": s, "requests": c["requests"],
                         "request_bytes": c["request_bytes"], "misses": c["misses"], "miss_bytes": c["miss_bytes"],
                         "miss_ratio": c["misses"] / c["requests"] if c["requests"] else None})
    if json_out:
        print_json(rows)
        return
    for r in rows:
        ratio = r["misses"] / r["requests"] if r["requests"] else 0.0
        byte_ratio = r["miss_bytes"] / r["request_bytes"] if r["request_bytes"] else 0.0
        print(f"{trace} {r['algo']} cache size {r['cache_size'] // unit:8d}{unit_name}, {r['requests']} req, "
              f"miss ratio {ratio:.4f}, byte miss ratio {byte_ratio:.4f}")


def register(app: typer.Typer) -> None:
    """Add `cachesim` to the main app."""
    app.command("cachesim")(cachesim)
