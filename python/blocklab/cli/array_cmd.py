"""`blocklab array ...`: RAID layouts (as Linux MD) and the I/O plans of reads and writes.

`register(app)` adds the commands of this area; `blocklab rgr` (fault-aware
caching, issue 3) registers next to them in its own function.
"""

from __future__ import annotations

import json
from typing import List, Optional

import typer

from blocklab import _core
from blocklab.cli.common import BlockSizeOpt, JsonOpt, fail, print_json

RaidOpt = typer.Option(..., "--raid", help="RAID level: 0, 1, 10, 4, 5, 6 (or raid5, ...).")
DisksOpt = typer.Option(..., "--disks", help="Number of member disks.")
ChunkOpt = typer.Option("64KiB", "--chunk", help="Chunk size (bytes, or 64KiB, 512k, 1MiB).")
LayoutOpt = typer.Option(
    None,
    "--layout",
    help="MD layout (as mdadm). RAID-5/6: left-symmetric (default), left-asymmetric, right-symmetric, "
    "right-asymmetric, parity-first, parity-last; RAID-6 also ddf-zero-restart, ddf-n-restart, "
    "ddf-n-continue, left-symmetric-6, ... RAID-10: n2 (default), n3, f2, o2, n2f2, ... "
    "(near / far / offset copies; far layouts need --disk-size).",
)
DiskSizeOpt = typer.Option(
    None,
    "--disk-size",
    help="Each member disk's size (4GiB, 512MiB, bytes): needed by RAID-10 far layouts (f2, n2f2), "
    "and bounds the blocks to the array's size.",
)


def disk_bytes(text: Optional[str]) -> int:
    """--disk-size -> bytes; 0 when not given."""
    return _core.parse_bytes(text) if text else 0


def parse_disk_list(text: Optional[str]) -> list[int]:
    """`0,3` -> [0, 3]; empty or None -> []."""
    if not text:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            fail(f"--failed: `{part}` is not a disk number (expected e.g. 0 or 0,3)")
        out.append(int(part))
    return out


def _register_array(app: typer.Typer) -> None:
    group = typer.Typer(help="RAID arrays: MD layouts and I/O plans.", no_args_is_help=True)

    @group.command("map")
    def map_cmd(
        blocks: List[int] = typer.Argument(..., help="Logical block numbers."),
        raid: str = RaidOpt,
        disks: int = DisksOpt,
        chunk: str = ChunkOpt,
        layout: Optional[str] = LayoutOpt,
        disk_size: Optional[str] = DiskSizeOpt,
        block_size: int = BlockSizeOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Where each logical block lives: its disk(s), disk block and its stripe's parity disks."""
        if any(b < 0 for b in blocks):
            fail("block numbers must be non-negative")
        chunk_bytes = _core.parse_bytes(chunk)
        rows = json.loads(_core.array_map(raid, disks, chunk_bytes, blocks, layout=layout, block_size=block_size,
                                          disk_bytes=disk_bytes(disk_size)))
        if as_json:
            print_json(rows)
            return
        print(f"{'block':>12}  {'disks':<12} {'disk_block':>12}  parity")
        for r in rows:
            d = ",".join(map(str, r["disks"]))
            p = ",".join(map(str, r["parity"])) or "-"
            db = r["disk_block"] if len(set(r["disk_blocks"])) == 1 else ",".join(map(str, r["disk_blocks"]))
            print(f"{r['block']:>12}  {d:<12} {db:>12}  {p}")

    @group.command("plan")
    def plan_cmd(
        raid: str = RaidOpt,
        disks: int = DisksOpt,
        chunk: str = ChunkOpt,
        layout: Optional[str] = LayoutOpt,
        disk_size: Optional[str] = DiskSizeOpt,
        block_size: int = BlockSizeOpt,
        failed: Optional[str] = typer.Option(None, "--failed", help="Failed disks, e.g. 0 or 0,3."),
        read: Optional[int] = typer.Option(None, "--read", help="Plan a read starting at this logical block."),
        write: Optional[int] = typer.Option(None, "--write", help="Plan a write starting at this logical block."),
        count: int = typer.Option(1, "--count", help="Number of blocks to read or write."),
        as_json: bool = JsonOpt,
    ) -> None:
        """The I/O plan (disk reads/writes, XOR/P+Q steps) of one logical read or write."""
        if (read is None) == (write is None):
            fail("give exactly one of --read BLOCK or --write BLOCK")
        op, block = ("read", read) if read is not None else ("write", write)
        if block < 0 or count < 1:
            fail("the block must be non-negative and --count at least 1")
        chunk_bytes = _core.parse_bytes(chunk)
        out = json.loads(
            _core.array_plan(
                raid, disks, chunk_bytes, op, block, nblocks=count,
                failed=parse_disk_list(failed), layout=layout, block_size=block_size,
                disk_bytes=disk_bytes(disk_size),
            )
        )
        if as_json:
            print_json(out)
            return
        failed_txt = ",".join(map(str, out["failed"])) or "none"
        print(f"{out['level']} {out['disks']} disks, {out['layout']}, chunk {out['chunk_bytes']} B, "
              f"failed: {failed_txt}; {op} of {count} block(s) from {block}")
        for n in out["plan"]:
            deps = f"  after {n['deps']}" if n["deps"] else ""
            if n["op"] in ("read", "write"):
                print(f"  [{n['id']}] {n['op']:<5} disk {n['disk']} blocks {n['block']}+{n['nblocks']} ({n['cause']}){deps}")
            elif n["op"] == "unreadable":
                print(f"  [{n['id']}] UNREADABLE logical block {n['block']}")
            else:
                print(f"  [{n['id']}] {n['op']} of {n['units']} units{deps}")
        c = out["counts"]
        print(f"disk blocks read {c['read']['blocks']}, written {c['write']['blocks']}, "
              f"unreadable {c['unreadable_blocks']}")

    app.add_typer(group, name="array")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""
    _register_array(app)
