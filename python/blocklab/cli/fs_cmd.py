"""`blocklab fs ...`: the ext2 file-system model (geometry as mke2fs lays it out, trees, annotated traces)."""

from __future__ import annotations

import json
from typing import Optional

import typer

from blocklab.cli.common import JsonOpt, fail, print_json

# Tree options shared with `blocklab dgraid`.
TreeOpt = typer.Option(None, "--tree", help="Namespace listing: the output of `find DIR -printf '%y %s %p\\n'`.")
DirsOpt = typer.Option(None, "--dirs", help="Generate a seeded tree with this many directories (with --files).")
FilesOpt = typer.Option(None, "--files", help="Generate a seeded tree with this many files (with --dirs).")
TreeSeedOpt = typer.Option(1, "--tree-seed", help="Seed of the generated tree.")
UnderOpt = typer.Option("", "--under", help="Graft the generated tree under this directory (e.g. home) of the listing.")


def size_bytes(text: str, what: str = "--size") -> int:
    """`64MiB`, `1GiB`, bytes -> bytes; bad input exits with status 2."""
    from blocklab import _core

    try:
        return _core.parse_bytes(text)
    except Exception as e:  # BlocklabError
        fail(f"{what}: {e}")


def tree_spec(tree: Optional[str], dirs: Optional[int], files: Optional[int], tree_seed: int, under: str) -> dict:
    """The engine's TreeSpec from the CLI options."""
    if (dirs is None) != (files is None):
        fail("give both --dirs and --files to generate a tree")
    if tree is None and dirs is None:
        fail("no tree: give --tree LISTING, or --dirs N --files M to generate one")
    if dirs is not None and (dirs < 0 or files < 0):
        fail("--dirs and --files must be non-negative")
    spec: dict = {"listing": tree, "generate_under": under}
    if dirs is not None:
        spec["generate"] = {"dirs": dirs, "files": files, "seed": tree_seed}
    return spec


def _register_fs(app: typer.Typer) -> None:
    group = typer.Typer(help="The ext2 file-system model: mke2fs geometry, trees, annotated traces.", no_args_is_help=True)

    @group.command("geometry")
    def geometry(
        size: str = typer.Option(..., "--size", help="Device size (bytes, or 64MiB, 1GiB)."),
        block_size: int = typer.Option(4096, "--block-size", help="Block size: 1024, 2048, 4096, ... 65536."),
        inode_ratio: Optional[int] = typer.Option(None, "--inode-ratio", help="Bytes per inode (mke2fs -i); default from the size class."),
        inode_size: Optional[int] = typer.Option(None, "--inode-size", help="Bytes per inode (mke2fs -I); default 256."),
        as_json: bool = JsonOpt,
    ) -> None:
        """The layout `mke2fs -t ext2 -b B` gives a device: one object per block group."""
        from blocklab import _core

        g = json.loads(_core.fs_geometry(size_bytes(size), block_size, inode_ratio, inode_size))
        if as_json:
            print_json(g["groups"])
            return
        print(f"{g['blocks']:,} blocks of {g['block_size']} B, {len(g['groups'])} groups of {g['blocks_per_group']} blocks, "
              f"{g['inodes']:,} inodes ({g['inodes_per_group']} per group, {g['inode_size']} B, "
              f"{g['inode_blocks_per_group']} table blocks), {g['desc_blocks']} descriptor + "
              f"{g['reserved_gdt_blocks']} reserved descriptor blocks")
        rng = lambda r: "-" if r is None else (str(r[0]) if r[0] == r[1] else f"{r[0]}-{r[1]}")  # noqa: E731
        print(f"{'group':>6} {'blocks':>19} {'super':>9} {'descriptors':>15} {'reserved':>15} {'bbitmap':>9} {'ibitmap':>9} {'inode table':>17}")
        for x in g["groups"]:
            sb = "-" if x["superblock"] is None else str(x["superblock"])
            print(f"{x['group']:>6} {x['start']:>9}-{x['end']:<9} {sb:>9} {rng(x['descriptors']):>15} "
                  f"{rng(x['reserved_descriptors']):>15} {x['block_bitmap']:>9} {x['inode_bitmap']:>9} {rng(x['inode_table']):>17}")

    @group.command("tree")
    def tree_cmd(
        tree: Optional[str] = TreeOpt,
        dirs: Optional[int] = DirsOpt,
        files: Optional[int] = FilesOpt,
        tree_seed: int = TreeSeedOpt,
        under: str = UnderOpt,
        out: Optional[str] = typer.Option(None, "--out", "-o", help="Write the tree as a find-style listing."),
        as_json: bool = JsonOpt,
    ) -> None:
        """Statistics of a listing or a generated tree (and write it as a listing)."""
        from blocklab import _core

        stats = json.loads(_core.fs_tree(json.dumps(tree_spec(tree, dirs, files, tree_seed, under)), out))
        if as_json:
            print_json(stats)
            return
        for k, v in stats.items():
            print(f"  {k:<16} {v:,.2f}" if isinstance(v, float) else f"  {k:<16} {v:,}")
        if out:
            print(f"wrote {out}")

    @group.command("trace")
    def trace_cmd(
        out: str = typer.Argument(..., help="Output trace (native CSV with owner, kind and parent columns)."),
        tree: Optional[str] = TreeOpt,
        dirs: Optional[int] = DirsOpt,
        files: Optional[int] = FilesOpt,
        tree_seed: int = TreeSeedOpt,
        under: str = UnderOpt,
        block_size: int = typer.Option(4096, "--block-size", help="File-system block size."),
        size: Optional[str] = typer.Option(None, "--size", help="File-system size (default: fitted to the tree, half full)."),
        as_json: bool = JsonOpt,
    ) -> None:
        """The annotated block trace of making the file system and copying the tree in (one request per block)."""
        from blocklab import _core

        params = {"tree": tree_spec(tree, dirs, files, tree_seed, under), "block_size": block_size,
                  "size": size_bytes(size) if size else 0}
        summary = json.loads(_core.fs_trace(json.dumps(params), out))
        if as_json:
            print_json(summary)
            return
        print(f"wrote {out}: {summary['requests']:,} requests ({summary['writes']:,} writes, {summary['reads']:,} reads) "
              f"on a {summary['fs_bytes']:,} B file system of {summary['block_size']} B blocks")

    app.add_typer(group, name="fs")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""
    _register_fs(app)
