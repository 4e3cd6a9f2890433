"""`blocklab real ...`: arrays on real member files, served over NBD.

The engine (array plans, real XOR / P+Q, NBD server, rebuild, scrub,
crash recovery, the integrity suite) is Rust (`exec/real`, `nbd`); this
module converts arguments and prints. See docs/real.md.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import List, Optional

import typer

from blocklab import _core
from blocklab.cli.common import (FormatOpt, JsonOpt, SkipBadOpt, SortOpt, SortWindowOpt, fail, print_json, reordered_line,
                                 sort_window)

app = typer.Typer(
    help="Arrays on real member files: create, serve over NBD, fail, replace, rebuild, check, replay.",
    no_args_is_help=True,
)

DirArg = typer.Argument(..., help="The array's directory (member images disk-I.img, state array.json).")
DiskArg = typer.Argument(None, metavar="DISK", help="Member number (0-based), as in `mdadm --fail`; or --disk.")
DiskOpt = typer.Option(None, "--disk", help="Member number (0-based); same as the DISK argument.")
DirtyDegradedOpt = typer.Option(
    False, "--start-dirty-degraded",
    help="Start although a member is missing (or stale) while bitmap regions are dirty after a crash (MD's "
         "start_dirty_degraded): the lost units of those rows then read as errors, never from doubtful parity.")

CHECK_KEYS = ("stripes_checked", "mismatches", "repaired", "unrecoverable")


def _array_dir(d: Path) -> str:
    if not _core.real_exists(str(d)):
        fail(f"{d}: no array here (create one with `blocklab real create`)")
    return str(d)


def _member(d: str, disk_arg: Optional[int], disk_opt: Optional[int], verb: str) -> int:
    """The member from DISK or `--disk` (one of them; both only if equal), checked against the
    array's members (the engine takes 32 bits)."""
    if disk_arg is None and disk_opt is None:
        fail(f"real {verb}: which disk? give it as DISK (`blocklab real {verb} DIR 2`) or --disk")
    if disk_arg is not None and disk_opt is not None and disk_arg != disk_opt:
        fail(f"real {verb}: DISK {disk_arg} and --disk {disk_opt} disagree; give one of them")
    disk = disk_arg if disk_arg is not None else disk_opt
    n = json.loads(_core.real_status(d))["disks"]
    if not 0 <= disk < n:
        given = f"DISK {disk}" if disk_arg is not None else f"--disk {disk}"
        fail(f"{given}: cannot {verb} disk {disk}: the array has disks 0..{n - 1}")
    return disk


def _print_status(st: dict) -> None:
    print(f"  level            {st['level']} ({st['layout']}), {st['disks']} disks, chunk {st['chunk_bytes']} B")
    print(f"  size             {st['size_bytes']} bytes ({st['disk_bytes']} B per member)")
    print(f"  health           {st['health']}")
    print(f"  failed           {', '.join(map(str, st['failed'])) or '-'}")
    if st["recovering"]:
        print(f"  recovering       {', '.join(map(str, st['recovering']))}: row {st['recovered_rows']} of {st['member_rows']}")
    print(f"  checksums        {'yes' if st['checksums'] else 'no'}")
    print(f"  dirty regions    {st['dirty_regions']}")
    print(f"  bad blocks       {st['bad_blocks']}")
    if st.get("unreadable_rows"):
        print(f"  unreadable rows  {_runs(st['unreadable_rows'])}")


def _runs(runs: list) -> str:
    """Member-row runs [start, end) as `a-b, c`."""
    return ", ".join(f"{s}" if e == s + 1 else f"{s}-{e - 1}" for s, e in runs)


def _tenants(text: Optional[str]) -> list[tuple[str, str]]:
    """`--tenants NAME=SIZE,...` as (name, size) pairs (sizes are checked by the engine, by key)."""
    if text is None:
        return []
    out = []
    for i, part in enumerate(text.split(",")):
        name, eq, size = part.partition("=")
        if not eq or not name.strip() or not size.strip():
            fail(f"--tenants: item {i + 1} ({part!r}): expected NAME=SIZE, e.g. web=64MiB")
        out.append((name.strip(), size.strip()))
    return out


@app.command("create")
def create(
    dir: Path = DirArg,
    raid: Optional[str] = typer.Option(None, "--raid", help="RAID level: 0, 1, 10, 4, 5, 6 (or raid5, ...)."),
    disks: Optional[int] = typer.Option(None, "--disks", help="Number of member files."),
    chunk: Optional[str] = typer.Option(None, "--chunk", help="Chunk size (65536, 64KiB, ...; default 64KiB)."),
    disk_size: Optional[str] = typer.Option(None, "--disk-size", help="Size of each member file (64MiB, 1GiB, ...); with --stack, instead of the stack's array.disk_size."),
    layout: Optional[str] = typer.Option(None, "--layout", help="MD layout (mdadm names): RAID-5/6 left-symmetric (default), ...; RAID-10 n2 (default), f2, o2, ..."),
    checksums: bool = typer.Option(False, "--checksums", help="Keep a checksum per block (disk-I.sum): silent corruption is found and repaired on read, on any level."),
    block_size: Optional[int] = typer.Option(None, "--block-size", help="Array block size in bytes (default 4096)."),
    stack: Optional[Path] = typer.Option(None, "--stack", help="A stack file (as for `blocklab run`): lay out its [array] and serve its host cache layers in front of it (kept as DIR/stack.toml)."),
    tenants: Optional[str] = typer.Option(None, "--tenants", help="The tenants' volumes, NAME=SIZE,... (e.g. web=64MiB,db=64MiB), over a plain array (--raid ...) or a stack (--stack): kept as [[tenant]] tables of DIR/stack.toml; tenant i of a trace is the i-th, served as the export NAME."),
    json_out: bool = JsonOpt,
) -> None:
    """Make the member files and the state file of a new array (or of a stack file's array, with its caches)."""
    if stack is not None:
        given = [f for f, v in (("--raid", raid), ("--disks", disks), ("--chunk", chunk), ("--layout", layout),
                                ("--block-size", block_size)) if v is not None]
        if given:
            fail(f"{given[0]}: the stack file's [array] says it; give one or the other")
        if not stack.exists():
            fail(f"{stack}: no such file")
        r = json.loads(_core.real_create_stack(str(dir), str(stack),
                                               disk_bytes=_core.parse_bytes(disk_size) if disk_size else None,
                                               checksums=checksums, tenants=_tenants(tenants)))
        for n in r["notes"]:
            print(f"note: {n}", file=sys.stderr)
        st = r["status"]
        if json_out:
            print_json(st)
            return
        kept = f", kept as {dir / 'stack.toml'}" if _core.real_has_stack(str(dir)) else ""
        print(f"created {dir} (stack {stack}{kept})")
        _print_status(st)
        return
    missing = [f for f, v in (("--raid", raid), ("--disks", disks), ("--disk-size", disk_size)) if v is None]
    if missing:
        fail(f"real create: {missing[0]} is needed (or --stack STACK.toml)")
    if disks < 1:
        fail("--disks must be at least 1")
    # With tenants, a plain array whose tenants are volumes: kept as a stack file of no cache layer (the
    # engine writes it).
    r = json.loads(_core.real_create(str(dir), raid, disks, _core.parse_bytes(chunk or "64KiB"),
                                     _core.parse_bytes(disk_size), layout=layout, checksums=checksums,
                                     block_size=block_size or 4096,
                                     tenants=_tenants(tenants)))
    if json_out:
        print_json(r["status"])
        return
    if tenants is None:
        print(f"created {dir}")
    else:
        print(f"created {dir} (tenants {', '.join(n for n, _ in _tenants(tenants))}: one export each, "
              f"kept as {dir / 'stack.toml'})")
    _print_status(r["status"])


@app.command("serve")
def serve(
    dir: Path = DirArg,
    listen: str = typer.Option("127.0.0.1:10809", "--listen", help="Address to listen on (HOST:PORT; port 0 picks a free one)."),
    threads: int = typer.Option(16, "--threads", help="Worker threads shared by all clients (requests served at once)."),
    direct: bool = typer.Option(False, "--direct", help="O_DIRECT on the member files when the file system allows it."),
    name: str = typer.Option("blocklab", "--name", help="Export name (the default empty name is accepted too). A stack with [[tenant]] serves one export per tenant, by its name, and no default export."),
    start_dirty_degraded: bool = DirtyDegradedOpt,
    record_writes: Path = typer.Option(None, "--record-writes", metavar="LOG",
                                       help="D-GRAID: record every write and flush the export sees into LOG, the "
                                            "stream `blocklab dgraid infer --order stream:LOG` replays."),
) -> None:
    """Serve the array over NBD until Ctrl-C or SIGTERM (then close it cleanly)."""
    d = _array_dir(dir)
    if threads < 1:
        fail("--threads must be at least 1")

    def ready(info: str, status: str, recovery: str) -> None:
        i, st, rec = json.loads(info), json.loads(status), json.loads(recovery)
        what = "the stack of " if _core.real_has_stack(d) else ""
        exports = i.get("exports") or [i["export"]]
        where = " ".join(f"nbd://{i['nbd']}/{e}" for e in exports)  # (one URI per word)
        tenants = f", {len(exports)} tenants, one export each," if exports != [name] else ""
        print(f"serving {what}{dir} ({st['level']}, {st['disks']} disks, {st['size_bytes']} bytes, {st['health']})"
              f"{tenants} on {where}", flush=True)
        for m in rec.get("reassembled", []):
            print(f"assembled by identity: {m}", file=sys.stderr, flush=True)
        if rec.get("stale_members"):
            print(f"stale member(s) left out (older events than the array): {rec['stale_members']}; "
                  f"replace and rebuild them", file=sys.stderr, flush=True)
        if rec.get("dirty_degraded_rows"):
            print(f"started dirty and degraded: the lost units of member rows {_runs(rec['dirty_degraded_rows'])} "
                  f"read as errors", file=sys.stderr, flush=True)
        if rec["journal_records"] or rec["dirty_regions"] or rec["missing_members"]:
            print(f"recovered from an unclean shutdown: {rec['journal_records']} journal record(s) replayed, "
                  f"{rec['dirty_regions']} bitmap region(s) resynced ({rec['resync']['repaired']} block row(s) "
                  f"rewritten), missing member(s): {rec['missing_members'] or 'none'}", file=sys.stderr, flush=True)

    def on_term(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        _core.real_serve(d, listen, ready, threads=threads, direct=direct, name=name,
                         start_dirty_degraded=start_dirty_degraded,
                         record_writes=str(record_writes) if record_writes else None)
    except KeyboardInterrupt:
        print("stopped; array closed cleanly", file=sys.stderr)


@app.command("tags")
def tags(dir: Path = DirArg) -> None:
    """D-GRAID: what the array placed each mapped block as, `block,owner,kind,parent` lines (the truth CSV's
    format of `dgraid infer --truth-csv`), from the server when it is served."""
    d = _array_dir(dir)
    if not (Path(d) / "dgraid.json").exists():
        fail(f"{dir}: not a D-GRAID array (only D-GRAID places blocks by owner; see `real status`)")
    sys.stdout.write(_core.real_dgraid_tags(d))


@app.command("status")
def status(dir: Path = DirArg, json_out: bool = JsonOpt) -> None:
    """The array's state: health, failed and recovering members, dirty bitmap regions; a stack's layers."""
    d = _array_dir(dir)
    st = json.loads(_core.real_status(d))
    stack = _core.real_stack_status(d)
    if stack is not None:
        st["stack"] = json.loads(stack)
    if json_out:
        print_json(st)
        return
    _print_status(st)
    if stack is not None:
        _print_layers(st["stack"])


def _print_layers(s: dict) -> None:
    """A stack's cache layers and what they did (since the server started, when served)."""
    print(f"  stack            {len(s['layers'])} cache layer(s) (stack.toml)")
    for l in s["layers"]:
        print(f"    {l['name']:<14} {l['policy']} {l['write']}, {l['cache_blocks']} blocks: {l['accesses']} accesses, "
              f"{l['hits']} hits, {l['dirty_evictions']} dirty evictions, {l['flushed_blocks']} flushed")
    t = s.get("tier")
    if t:
        print(f"    {'tier':<14} {t['partitioner']}, {t['size']} frames (tier.img): {t['accesses']} accesses, "
              f"{t['read_hits']} read hits, {t['ssd_writes']} SSD writes, {t['destaged']} destaged, "
              f"{t['windows']} windows")
    for e in (s.get("real") or {}).get("exports") or []:
        print(f"    export {e['name']!r:<8} tenant {e['tenant']}, {e['size_bytes']} bytes at stack byte {e['offset_bytes']}")


@app.command("fail")
def fail_cmd(dir: Path = DirArg, disk_arg: Optional[int] = DiskArg, disk_opt: Optional[int] = DiskOpt,
             json_out: bool = JsonOpt) -> None:
    """Mark a member failed (also while served: the server sees it at once and serves degraded)."""
    d = _array_dir(dir)
    disk = _member(d, disk_arg, disk_opt, "fail")
    st = json.loads(_core.real_fail(d, disk))
    if json_out:
        print_json(st)
    else:
        print(f"disk {disk} failed")
        _print_status(st)


@app.command("replace")
def replace(dir: Path = DirArg, disk_arg: Optional[int] = DiskArg, disk_opt: Optional[int] = DiskOpt,
            json_out: bool = JsonOpt) -> None:
    """Put a fresh, empty spare in place of a failed member (then `real rebuild` fills it)."""
    d = _array_dir(dir)
    disk = _member(d, disk_arg, disk_opt, "replace")
    st = json.loads(_core.real_replace(d, disk))
    if json_out:
        print_json(st)
    else:
        print(f"disk {disk} replaced by a spare")
        _print_status(st)


@app.command("rebuild")
def rebuild(
    dir: Path = DirArg,
    rebuild_order: str = typer.Option("md", "--rebuild-order", help="The order, as in `disk run`: md (sequential, MD), pro (popular zones first), dor (disk-oriented, low priority), pro-dor."),
    rebuild_idle: str = typer.Option("simple", "--rebuild-idle", help="MD's idle test and speed rule, as in `disk run`: simple (default), md2611, md6."),
    rebuild_window: int = typer.Option(4, "--rebuild-window", help="Rebuild steps (chunk rows) in flight at most (DOR bounds its own)."),
    speed_min: int = typer.Option(1000, "--speed-min", "--rebuild-min", help="MD sync_speed_min (KiB/s): the pace kept while users are active."),
    speed_max: int = typer.Option(200000, "--speed-max", "--rebuild-max", help="MD sync_speed_max (KiB/s): the cap."),
    start_dirty_degraded: bool = DirtyDegradedOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Rebuild the spares in any order of the timed executor, paced by MD's speed rule; resumes where a crash left it."""
    if speed_min < 0 or speed_max < 1:
        fail("--speed-min must be >= 0 and --speed-max >= 1 (KiB/s)")
    if rebuild_window < 1:
        fail("--rebuild-window must be at least 1")
    r = json.loads(_core.real_rebuild(_array_dir(dir), min_kbps=speed_min, max_kbps=speed_max,
                                      order=rebuild_order.lower(), idle=rebuild_idle.lower(), window=rebuild_window,
                                      start_dirty_degraded=start_dirty_degraded))
    if json_out:
        print_json(r)
        return
    state = "finished" if r["finished"] else "stopped"
    if r["order"] == "live":  # D-GRAID: live blocks only, beside a whole-member copy on the same files
        o = r["order_stats"]
        print(f"live-block rebuild of disk(s) {', '.join(map(str, r['disks']))} {state}: {o['live_blocks']} live "
              f"blocks of {o['member_blocks']} in {o['live_copy_us'] / 1e6:.3f} s; a whole-member copy took "
              f"{o['whole_member_copy_us'] / 1e6:.3f} s (this machine's files, not a drive's)")
    else:
        print(f"rebuild ({r['order']}) of disk(s) {', '.join(map(str, r['disks']))} {state}: {r['rows_done']} rows "
              f"(from row {r['resumed_from']} of {r['rows_total']}) in {r['seconds']:.2f} s, {r['avg_kbps']:.0f} KiB/s")
    if r["unrecoverable_blocks"]:
        print(f"  {r['unrecoverable_blocks']} block(s) could not be rebuilt (now on the bad-block list: reads of them fail)")


@app.command("check")
def check(
    dir: Path = DirArg,
    repair: bool = typer.Option(False, "--repair", help="Rewrite what is wrong (MD's repair; RAID-6 and --checksums locate the bad unit)."),
    start_dirty_degraded: bool = DirtyDegradedOpt,
    json_out: bool = JsonOpt,
) -> None:
    """MD's check: compare data with parity (or copies, or checksums) on every stripe."""
    d = _array_dir(dir)
    r = json.loads(_core.real_check(d, repair, start_dirty_degraded=start_dirty_degraded))
    # The rows whose lost units are unreadable (the bad-block list), as `status` lists them.
    r["unreadable_rows"] = json.loads(_core.real_status(d)).get("unreadable_rows", [])
    if json_out:
        print_json(r)
        return
    for k in CHECK_KEYS + ("degraded_skipped",):
        print(f"  {k:<18} {r[k]}")
    if r["unrecoverable_at"]:
        more = r["unrecoverable"] - len(r["unrecoverable_at"])
        print(f"  unrecoverable at member block(s) {', '.join(map(str, r['unrecoverable_at']))}"
              + (f" and {more} more" if more > 0 else "") + " (left as they are)")
    if r["unreadable_rows"]:
        print(f"  {'unreadable_rows':<18} {_runs(r['unreadable_rows'])}")


@app.command("replay")
def replay(
    dir: Path = DirArg,
    trace: List[Path] = typer.Option(..., "--trace", "-t", help="Trace file; repeat for several independent streams. On a stack: merged by time as `blocklab run` merges them, each request to the volume (export) of its trace's tenant column."),
    format: str = FormatOpt,
    replay: str = typer.Option("open", "--replay", help="open (trace times), closed (N outstanding per stream) or feedback (Hsu-Smith; not on a stack): the timed executor's disciplines."),
    speedup: float = typer.Option(1.0, "--speedup", help="open: divide trace times by X; feedback: processor speed-up n."),
    outstanding: int = typer.Option(1, "--outstanding", help="closed: requests in flight per stream."),
    think: float = typer.Option(0.0, "--think-ms", help="closed: think time between a completion and the stream's next issue (ms)."),
    infinitely_fast: bool = typer.Option(False, "--infinitely-fast", help="feedback: replace each think time x by x[1-f(x)]."),
    window: int = typer.Option(64, "--window", help="feedback: issue window (requests) per stream."),
    threads: int = typer.Option(32, "--threads", help="open, feedback: worker threads (requests in flight at most)."),
    direct: bool = typer.Option(True, "--direct/--no-direct", help="O_DIRECT on the member files where the file system allows."),
    wrap: bool = typer.Option(False, "--wrap", help="Fold offsets past the array's end back into it."),
    limit: int = typer.Option(0, "--limit", help="Stop after this many requests per stream (0: all; counted after --skip)."),
    skip: int = typer.Option(0, "--skip", help="Leave out each stream's first N requests (e.g. a warm-up replayed before with --limit N)."),
    log: Optional[Path] = typer.Option(None, "--log", help="Write one CSV line per request: issued_unix_s,op,offset,bytes,response_ms,ok (cut it at a rebuild's started_unix_s / finished_unix_s)."),
    sort: bool = SortOpt,
    sort_window_s: Optional[float] = SortWindowOpt,
    skip_bad: bool = SkipBadOpt,
    start_dirty_degraded: bool = DirtyDegradedOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Issue a trace's requests against the array; response times in the timed executor's schema. On a stack
    directory: through the stack, reported in `blocklab run`'s schema (executor `real`); on a served one, through
    its server (the layers' figures are the server's: `real status`)."""
    for t in trace:
        if not t.exists():
            fail(f"{t}: no such file")
    if limit < 0 or skip < 0:
        fail("--limit and --skip must be >= 0")
    d = _array_dir(dir)
    # The engine replays through the stack when the directory has one (and reports in `run`'s schema).
    r = json.loads(_core.real_replay(d, [str(t) for t in trace], format=format, replay=replay,
                                     speedup=speedup, outstanding=outstanding, threads=threads, direct=direct,
                                     wrap=wrap, limit=limit, skip_bad=skip_bad,
                                     sort_window=sort_window(sort, sort_window_s),
                                     start_dirty_degraded=start_dirty_degraded, skip=skip,
                                     log=str(log) if log else None, think_ms=think, window=window,
                                     infinitely_fast=infinitely_fast))
    if json_out:
        print_json(r)
        return
    # A stack replayed here reports in `run`'s schema; a served one goes through its server.
    if "layers" in r:
        from blocklab.cli.run_cmd import print_result

        print_result(r, dir / "stack.toml")
        return
    print(f"replay {r['replay']}, {r['streams']} stream(s), {r['target']}{' O_DIRECT' if r['direct'] else ''}")
    if r.get("reordered"):
        print(reordered_line(r["reordered"]))
    for k in ("requests", "reads", "writes", "errors", "bytes_read", "bytes_written"):
        print(f"  {k:<16} {r[k]}")
    print(f"  {'wall_s':<16} {r['wall_s']:.3f}")
    resp = r["response"]
    for name, s in (("all", resp), ("reads", resp["reads"]), ("writes", resp["writes"])):
        print(f"  {name:<7} avg {s['avg_ms']:.3f} ms  p50 {s['p50_ms']:.3f}  p95 {s['p95_ms']:.3f}  "
              f"p99 {s['p99_ms']:.3f}  max {s['max_ms']:.3f}")


@app.command("integrity")
def integrity(
    rounds: int = typer.Option(10000, "--rounds", help="Seeded rounds."),
    seed: int = typer.Option(1, "--seed", help="Seed of the rounds (same seed, same rounds)."),
    dir: Optional[Path] = typer.Option(None, "--dir", help="Scratch directory (default: a temporary one)."),
    nbd_every: int = typer.Option(4, "--nbd-every", help="Every n-th round goes through an NBD server (0: none)."),
    stack_every: int = typer.Option(0, "--stack-every", help="After every n-th round, a stack round: a write-back host cache in front of an array, writes and FLUSHes, a crash; nothing a completed FLUSH covered may be lost (0: none)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Also write the JSON report to this file."),
    json_out: bool = JsonOpt,
) -> None:
    """Seeded rounds of write, inject faults, recover, verify every byte. Exit 1 if anything was lost."""
    if rounds < 1:
        fail("--rounds must be at least 1")
    if stack_every < 0:
        fail("--stack-every must be >= 0")

    def progress(i: int, rep: str) -> None:
        r = json.loads(rep)
        print(f"  {i}/{rounds} rounds, {r['bytes_verified']} bytes verified, {r['bytes_lost']} lost",
              file=sys.stderr, flush=True)

    r = json.loads(_core.real_integrity(rounds, seed=seed, dir=str(dir) if dir else None, nbd_every=nbd_every,
                                        progress=None if json_out else progress, every=max(1, rounds // 10),
                                        stack_every=stack_every))
    if out:
        out.write_text(json.dumps(r, indent=2) + "\n")
    if json_out:
        print_json(r)
    else:
        print(f"integrity: {r['rounds']} rounds (seed {r['seed']}, {r['nbd_rounds']} through NBD) in {r['seconds']:.1f} s")
        print(f"  levels            {', '.join(f'{k} {v}' for k, v in r['rounds_by_level'].items())}")
        if r.get("stack_rounds"):
            print(f"  stack rounds      {r['stack_rounds']} (failed: {r['failed_stack_rounds'][:20] or 'none'})")
        print(f"  faults            {', '.join(f'{k} {v}' for k, v in r['faults'].items())}")
        print(f"  within / beyond   {r['within_redundancy_rounds']} / {r['beyond_redundancy_rounds']} rounds")
        print(f"  bytes written     {r['bytes_written']}")
        print(f"  bytes verified    {r['bytes_verified']}")
        print(f"  bytes lost        {r['bytes_lost']}")
        print(f"  stale rows        {r['stale_rows_after_recovery']}")
        print(f"  dirty degraded    {r['dirty_degraded_refused']} restart(s) refused; forced: "
              f"{r['dirty_degraded_blocks_read']} blocks read, {r['dirty_degraded_errors']} refused with an error")
        print(f"  beyond: {r['beyond_blocks_read']} blocks read, {r['beyond_errors_reported']} refused with an error, "
              f"{r['beyond_wrong_bytes']} wrong bytes returned")
    bad = (r["bytes_lost"] or r["beyond_wrong_bytes"] or r["stale_rows_after_recovery"] or r["failed_rounds"]
           or r.get("failed_stack_rounds"))
    if bad:
        print(f"integrity: FAILED rounds {r['failed_rounds'][:20]}", file=sys.stderr)
        raise typer.Exit(1)


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="real")
