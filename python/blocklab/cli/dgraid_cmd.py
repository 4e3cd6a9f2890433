"""`blocklab dgraid ...`: D-GRAID (file-aware fault-isolated placement) against RAID: availability, space, write cost, live blocks, diffusion."""

from __future__ import annotations

import json
from typing import Optional

import typer

from blocklab.cli.common import JsonOpt, fail, print_json
from blocklab.cli.fs_cmd import DirsOpt, FilesOpt, TreeOpt, TreeSeedOpt, UnderOpt, size_bytes, tree_spec

# The fsmodel allocators (`fsmodel::Allocator`).
ALLOCATORS = ("libext2fs", "linux22")

AVAIL_KEYS = ("failed_count", "files_available", "dirs_available", "processes_available", "namespace_navigable")
LEVELS = ("dgraid0", "dgraid1", "raid0", "raid1", "raid10", "raid5", "raid6")


def int_list(text: str, what: str) -> list[int]:
    """`1,4,16` or `1..4` (inclusive) -> ints; bad input exits with status 2."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if ".." in part:
            a, _, b = part.partition("..")
            if not (a.isdigit() and b.isdigit()) or int(a) > int(b):
                fail(f"bad {what} `{text}`: expected e.g. 1,4,16 or 1..4")
            out.extend(range(int(a), int(b) + 1))
        elif part.isdigit():
            out.append(int(part))
        else:
            fail(f"bad {what} `{text}`: expected e.g. 1,4,16 or 1..4")
    if not out:
        fail(f"bad {what} `{text}`: empty")
    return out


def sizes_list(text: str, what: str) -> list[int]:
    return [size_bytes(p.strip(), what) for p in text.split(",") if p.strip()] or fail(f"{what}: empty")


def _table(title: str, cols: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for i, c in enumerate(cols):
        t.add_column(c, justify="left" if i == 0 else "right")
    for r in rows:
        t.add_row(*r)
    Console().print(t)


def _workload_summary(summary: dict, out: str, as_json: bool) -> None:
    if as_json:
        print_json(summary)
        return
    phases = ", ".join(f"{n} {c:,}" for n, c in summary["phases"])
    print(f"{out}: {summary['requests']:,} requests ({summary['read_requests']:,} reads of {summary['read_blocks']:,} "
          f"blocks, {summary['write_requests']:,} writes of {summary['write_blocks']:,} blocks); phases: {phases}; "
          f"file system {summary['fs_bytes']:,} B of {summary['block_size']} B blocks")


def _register(app: typer.Typer) -> None:
    group = typer.Typer(help="D-GRAID: file-aware fault-isolated placement, metadata replication, availability.",
                        no_args_is_help=True)

    @group.command("avail")
    def avail(
        tree: Optional[str] = TreeOpt,
        dirs: Optional[int] = DirsOpt,
        files: Optional[int] = FilesOpt,
        tree_seed: int = TreeSeedOpt,
        under: str = UnderOpt,
        level: str = typer.Option("dgraid0", "--level", help="dgraid0, dgraid1 (data mirrored on disk pairs), raid0, raid1, raid10, raid5, raid6."),
        disks: int = typer.Option(..., "--disks", help="Number of disks (at most 64)."),
        meta_copies: str = typer.Option("1", "--meta-copies", help="Copies of naming and system metadata (D-GRAID); a list runs each: 1,4,8."),
        grouping: str = typer.Option("file", "--grouping", help="Unit of fault isolation: file, or dir (a directory's files share a disk)."),
        failed_count: Optional[str] = typer.Option(None, "--failed-count", help="Failed disks: 4, a list 0,2,4 or an inclusive range 0..16 (0..16:2)."),
        failed: Optional[str] = typer.Option(None, "--failed", help="Instead of --failed-count: these disks failed (e.g. 0,1)."),
        trials: int = typer.Option(200, "--trials", help="Random failure sets per count when there are more than --exact-limit."),
        seed: int = typer.Option(1, "--seed", help="Seed of the failure sets and of the processes."),
        semantics: Optional[str] = typer.Option(None, "--semantics", help="RAID levels: md (the volume is lost beyond the redundancy; default) or block (what a file needs is readable)."),
        exact_limit: int = typer.Option(5000, "--exact-limit", help="Enumerate every failure set when there are at most this many."),
        placement: str = typer.Option("rotate", "--placement", help="Replica disks: rotate (consecutive from a start disk) or random (seeded)."),
        popular_copies: int = typer.Option(1, "--popular-copies", help="Copies of the files under the popular directories (bin, sbin, lib, usr/bin, ...)."),
        popular_dirs: Optional[str] = typer.Option(None, "--popular-dirs", help="Comma-separated popular directories (default bin,sbin,usr/bin,usr/sbin,lib,lib64,usr/lib,usr/lib64)."),
        processes: int = typer.Option(1000, "--processes", help="Processes (an executable, 2-6 libraries, 0-3 user files) to check."),
        block_size: int = typer.Option(4096, "--block-size", help="File-system block size."),
        size: Optional[str] = typer.Option(None, "--size", help="File-system size (default: fitted to the tree, half full)."),
        chunk: str = typer.Option("64KiB", "--chunk", help="RAID chunk size."),
        as_json: bool = JsonOpt,
    ) -> None:
        """Share of files, directories and processes still whole, and whether the namespace is navigable, with k failed disks."""
        from blocklab import _core

        if level not in LEVELS:
            fail(f"unknown level `{level}`; valid: {', '.join(LEVELS)}")
        if trials < 1:
            fail("--trials must be at least 1")
        if (failed_count is None) == (failed is None):
            fail("give --failed-count K (or a list or range), or --failed DISKS")
        spec = tree_spec(tree, dirs, files, tree_seed, under)
        params = {
            "tree": spec, "level": level, "disks": disks, "grouping": grouping, "failed_counts": failed_count or "0", "failed_disks": failed,
            "trials": trials, "seed": seed, "semantics": semantics, "exact_limit": exact_limit,
            "placement": placement, "popular_copies": popular_copies, "processes": processes,
            "block_size": block_size, "size": size_bytes(size) if size else 0, "chunk_bytes": size_bytes(chunk, "--chunk"),
        }
        if popular_dirs is not None:
            params["popular_dirs"] = [d.strip() for d in popular_dirs.split(",") if d.strip()]
        copies = int_list(meta_copies, "--meta-copies") if level.startswith("dgraid") else [1]
        rows = []
        for r in copies:
            params["meta_copies"] = r
            rep = json.loads(_core.dgraid_avail(json.dumps(params)))
            rows.extend(rep["rows"])
        if as_json:
            print_json(rows)
            return
        tr = rep["tree"]
        _table(f"{level} x {disks} disks ({rows[0]['semantics']} semantics), tree of {tr['files']:,} files in "
               f"{tr['dirs']:,} directories, {rep['fs_bytes'] / 2**20:,.0f} MiB file system"
               + (f", {rep['spills']} blocks spilled" if rep["spills"] else ""),
               ["copies", "failed", "files", "dirs", "processes", "navigable", "method", "sets"],
               [[str(x["meta_copies"]), str(x["failed_count"]), f"{x['files_available']:.4f}", f"{x['dirs_available']:.4f}",
                 f"{x['processes_available']:.4f}", f"{x['namespace_navigable']:.4f}", x["method"], f"{x['sets']:,}"]
                for x in rows])

    def check_allocator(name: str) -> str:
        if name not in ALLOCATORS:
            fail(f"--allocator: unknown `{name}`; valid: {', '.join(ALLOCATORS)}")
        return name

    AllocatorOpt = typer.Option("libext2fs", "--allocator", help="Whose ext2 allocator writes the files: libext2fs (as `mke2fs -d`) or linux22 (the Linux 2.2 kernel's: free-byte search, 8-block preallocation, directories spread; the paper's prototype ran on it).")

    @group.command("space")
    def space(
        tree: Optional[str] = TreeOpt,
        dirs: Optional[int] = DirsOpt,
        files: Optional[int] = FilesOpt,
        tree_seed: int = TreeSeedOpt,
        under: str = UnderOpt,
        block_size: str = typer.Option("1KiB,4KiB", "--block-size", help="Block sizes, comma-separated."),
        meta_copies: str = typer.Option("1,4,16", "--meta-copies", help="Copy counts, comma-separated (or 1..4)."),
        fill: float = typer.Option(0.5, "--fill", help="How full the file system is made (its size is fitted to the tree)."),
        vfat: Optional[str] = typer.Option(None, "--vfat", help="VFAT (FAT32) rows too, for these cluster sizes, e.g. 1KiB,4KiB: directories' clusters and the FAT blocks in use."),
        as_json: bool = JsonOpt,
    ) -> None:
        """Table 1: space overhead of replicating the namespace r ways, per block size."""
        from blocklab import _core

        if not 0 < fill <= 1:
            fail("--fill must be in (0, 1]")
        params = {"tree": tree_spec(tree, dirs, files, tree_seed, under),
                  "block_sizes": sizes_list(block_size, "--block-size"),
                  "copies": int_list(meta_copies, "--meta-copies"), "fill": fill,
                  "vfat_cluster_sizes": sizes_list(vfat, "--vfat") if vfat else []}
        rows = json.loads(_core.dgraid_space(json.dumps(params)))
        if as_json:
            print_json(rows)
            return
        _table("namespace replication: space overhead (directory blocks and inodes, all copies) / tree size",
               ["fs", "block", "copies", "dirs", "dir blocks", "copies held", "overhead %", "static metadata % of volume"],
               [[x["fs"], str(x["block_size"]), str(x["meta_copies"]), f"{x['dirs']:,}", f"{x['dir_blocks']:,}",
                 f"{x['dir_block_copies']:,}", f"{x['overhead_pct']:.3f}", f"{x['static_overhead_pct']:.2f}"] for x in rows])

    @group.command("postmark")
    def postmark(
        disks: int = typer.Option(4, "--disks", help="Disks of the D-GRAID array."),
        meta_copies: str = typer.Option("1..4", "--meta-copies", help="Copy counts to run."),
        files: int = typer.Option(5000, "--files", help="Files created before the transactions."),
        transactions: int = typer.Option(30000, "--transactions", help="Transactions (read or append, then create or delete)."),
        min_size: str = typer.Option("512", "--min-size", help="Smallest file."),
        max_size: str = typer.Option("10KiB", "--max-size", help="Largest file."),
        subdirs: int = typer.Option(10, "--subdirs", help="Directories the files are spread over."),
        flush_every: int = typer.Option(5000, "--flush-every", help="Write back dirty metadata every this many operations (0: only at the syncs); the default flushes about 13 times, as Linux 2.2's 5 s bdflush did during the paper's run."),
        block_size: int = typer.Option(4096, "--block-size", help="File-system block size."),
        size: str = typer.Option("2GiB", "--size", help="File-system size."),
        seed: int = typer.Option(1, "--seed", help="Seed of the workload."),
        allocator: str = AllocatorOpt,
        trace: Optional[str] = typer.Option(None, "--trace", help="Write the run's block I/O as an annotated native CSV trace (for `blocklab run` on a D-GRAID or RAID array) instead of counting."),
        max_request: str = typer.Option("128KiB", "--max-request", help="--trace: adjacent blocks of one owner and kind are joined into requests up to this size."),
        as_json: bool = JsonOpt,
    ) -> None:
        """Table 2 (counted): blocks written, metadata writes and unique metadata blocks per copy count."""
        from blocklab import _core

        params = {"disks": disks, "copies": int_list(meta_copies, "--meta-copies"), "files": files,
                  "transactions": transactions, "min_size": size_bytes(min_size, "--min-size"),
                  "max_size": size_bytes(max_size, "--max-size"), "subdirs": subdirs, "flush_every": flush_every,
                  "block_size": block_size, "size": size_bytes(size), "seed": seed, "allocator": check_allocator(allocator)}
        if trace is not None:
            summary = json.loads(_core.dgraid_workload("postmark", json.dumps(params), trace,
                                                       size_bytes(max_request, "--max-request")))
            _workload_summary(summary, trace, as_json)
            return
        rows = json.loads(_core.dgraid_postmark(json.dumps(params)))
        if as_json:
            print_json(rows)
            return
        fmt = lambda v: "-" if v is None else f"{v:,}"  # noqa: E731
        _table(f"Postmark-like workload over {disks} disks (counted)",
               ["config", "blocks written", "metadata writes", "unique metadata", "if replicas lazy"],
               [[x["config"], f"{x['blocks_written']:,}", fmt(x["metadata_writes"]), fmt(x["unique_metadata"]),
                 fmt(x["lazy_blocks_written"])] for x in rows])

    @group.command("seqread")
    def seqread(
        out: str = typer.Argument(..., help="The trace to write (annotated native CSV)."),
        file_size: str = typer.Option("1MiB", "--file-size", help="Size of the file written then read."),
        passes: int = typer.Option(2, "--passes", help="Whole-file reads before the measured one (they diffuse the file)."),
        block_size: int = typer.Option(4096, "--block-size", help="File-system block size."),
        size: Optional[str] = typer.Option(None, "--size", help="File-system size (default: 8x the file and the flush files, at least 64 MiB)."),
        max_request: str = typer.Option("256KiB", "--max-request", help="Adjacent blocks of one owner and kind are joined into requests up to this size."),
        flush_files: int = typer.Option(4, "--flush-files", help="Files written with it and read just before the measured read, so that the drives' caches no longer hold the file."),
        flush_size: str = typer.Option("16MiB", "--flush-size", help="Size of each flush file."),
        as_json: bool = JsonOpt,
    ) -> None:
        """Fig 7's experiment as a trace: one file written, read whole --passes times, flush files read, the file read again (phases write, pass1.., flush, measured)."""
        from blocklab import _core

        params = {"file_bytes": size_bytes(file_size, "--file-size"), "passes": passes, "block_size": block_size,
                  "fs_size": size_bytes(size) if size else 0, "max_request": size_bytes(max_request, "--max-request"),
                  "flush_files": flush_files, "flush_bytes": size_bytes(flush_size, "--flush-size")}
        summary = json.loads(_core.dgraid_workload("seqread", json.dumps(params), out, 0))
        _workload_summary(summary, out, as_json)

    @group.command("readers")
    def readers(
        out: str = typer.Argument(..., help="The trace to write (annotated native CSV)."),
        tree: Optional[str] = TreeOpt,
        dirs: Optional[int] = DirsOpt,
        files: Optional[int] = FilesOpt,
        tree_seed: int = TreeSeedOpt,
        under: str = UnderOpt,
        reads: int = typer.Option(10000, "--reads", help="Whole-file reads of random files after the tree is copied in."),
        seed: int = typer.Option(1, "--seed", help="Seed of the file draws."),
        block_size: int = typer.Option(4096, "--block-size", help="File-system block size."),
        size: Optional[str] = typer.Option(None, "--size", help="File-system size (default: fitted to the tree, half full)."),
        max_request: str = typer.Option("128KiB", "--max-request", help="Adjacent blocks of one owner and kind are joined into requests up to this size."),
        as_json: bool = JsonOpt,
    ) -> None:
        """Fig 9's workload as a trace: the tree copied in (phase populate), then random whole-file reads (phase reads)."""
        from blocklab import _core

        params = {"tree": tree_spec(tree, dirs, files, tree_seed, under), "reads": reads, "seed": seed,
                  "block_size": block_size, "size": size_bytes(size) if size else 0,
                  "max_request": size_bytes(max_request, "--max-request")}
        summary = json.loads(_core.dgraid_workload("readers", json.dumps(params), out, 0))
        _workload_summary(summary, out, as_json)

    @group.command("live")
    def live(
        tree: Optional[str] = TreeOpt,
        dirs: Optional[int] = DirsOpt,
        files: Optional[int] = FilesOpt,
        tree_seed: int = TreeSeedOpt,
        under: str = UnderOpt,
        level: str = typer.Option("dgraid1", "--level", help="dgraid0 or dgraid1."),
        disks: int = typer.Option(4, "--disks", help="Disks."),
        meta_copies: int = typer.Option(4, "--meta-copies", help="Copies of metadata."),
        grouping: str = typer.Option("file", "--grouping", help="file or dir."),
        disk_blocks: int = typer.Option(0, "--disk-blocks", help="Blocks per member (0: sized from the volume)."),
        live_frac: Optional[float] = typer.Option(None, "--live-frac", help="Synthetic instead of a tree: this share of each member is live."),
        layout: str = typer.Option("compact", "--layout", help="Synthetic layout: compact (at the start) or spread (evenly interleaved)."),
        max_io: int = typer.Option(128, "--max-io", help="Largest rebuild I/O in blocks (extents are cut to it)."),
        block_size: int = typer.Option(4096, "--block-size", help="File-system block size."),
        size: Optional[str] = typer.Option(None, "--size", help="File-system size (default: fitted to the tree, half full)."),
        as_json: bool = JsonOpt,
    ) -> None:
        """Live blocks of each member: what a live-block rebuild copies (the input of a timed rebuild)."""
        from blocklab import _core

        params = {"level": level, "disks": disks, "meta_copies": meta_copies, "grouping": grouping,
                  "disk_blocks": disk_blocks, "live_frac": live_frac, "layout": layout, "max_io": max_io,
                  "block_size": block_size, "size": size_bytes(size) if size else 0}
        if live_frac is None:
            params["tree"] = tree_spec(tree, dirs, files, tree_seed, under)
        rows = json.loads(_core.dgraid_live(json.dumps(params)))
        if as_json:
            print_json(rows)
            return
        _table("live member blocks", ["disk", "member blocks", "live", "share", f"extents (<= {max_io})"],
               [[str(x["disk"]), f"{x['member_blocks']:,}", f"{x['live_blocks']:,}", f"{x['live_fraction']:.4f}",
                 f"{x['extents']:,}"] for x in rows])

    @group.command("place")
    def place(
        trace: str = typer.Argument(..., help="Annotated native CSV trace (owner, kind, parent columns), e.g. from `blocklab fs trace`."),
        fs_size: str = typer.Option(..., "--fs-size", help="Size of the ext2 file system the trace addresses."),
        block_size: int = typer.Option(4096, "--block-size", help="Its block size."),
        level: str = typer.Option("dgraid0", "--level", help="dgraid0 or dgraid1."),
        disks: int = typer.Option(4, "--disks", help="Disks."),
        meta_copies: int = typer.Option(1, "--meta-copies", help="Copies of metadata."),
        grouping: str = typer.Option("file", "--grouping", help="file or dir (needs the parent column)."),
        as_json: bool = JsonOpt,
    ) -> None:
        """Place an annotated block trace on a D-GRAID array: physical writes, metadata copies, space and live blocks per disk."""
        from blocklab import _core

        params = {"trace": trace, "fs_size": size_bytes(fs_size, "--fs-size"), "block_size": block_size, "level": level,
                  "disks": disks, "meta_copies": meta_copies, "grouping": grouping}
        rep = json.loads(_core.dgraid_place(json.dumps(params)))
        if as_json:
            print_json(rep)
            return
        c = rep["counts"]
        print(f"{rep['requests']:,} requests: {c['logical_writes']:,} block writes became {c['physical_writes']:,} "
              f"physical writes ({c['metadata_writes']:,} to metadata replicas, {c['unique_metadata_blocks']:,} distinct); "
              f"{c['spills']} spilled, {c['remaps']} remapped")
        _table(f"members of {rep['member_blocks']:,} blocks", ["disk", "used", "live"],
               [[str(d), f"{u:,}", f"{l:,}"] for d, (u, l) in enumerate(zip(rep["used"], rep["live"]))])

    @group.command("infer")
    def infer(
        image: str = typer.Argument(..., help="An ext2 image (e.g. from `mke2fs -t ext2 -d TREE`), or an ext4 "
                                              "made with `-O ^extents,^64bit`."),
        order: str = typer.Option("sequential", "--order",
                                  help="Write orders, comma-separated: sequential, reverse, seeded:N, files, "
                                  "stream:LOG (a recorded write stream; IMAGE is the device after it)."),
        deferred_max: int = typer.Option(1024, "--deferred-max", help="Blocks the deferred list holds before "
                                         "its oldest is placed by default."),
        level: str = typer.Option("dgraid0", "--level", help="dgraid0 or dgraid1."),
        disks: int = typer.Option(4, "--disks", help="Disks."),
        meta_copies: int = typer.Option(1, "--meta-copies", help="Copies of metadata."),
        grouping: str = typer.Option("file", "--grouping", help="file or dir."),
        truth_csv: Optional[str] = typer.Option(None, "--truth-csv", help="Also write the truth (debugfs's) "
                                                "to this CSV: block,owner,kind,parent."),
        as_json: bool = JsonOpt,
    ) -> None:
        """Inference (Alexander's): write an ext2 image's blocks through the inferrer in an order and compare
        each block's inferred owner and kind with debugfs's; misplaced blocks against the truth-fed placement."""
        import os
        import tempfile

        from blocklab import _core
        from blocklab.repro import ext2_truth

        orders = [o.strip() for o in order.split(",") if o.strip()] or fail("--order: empty")
        if deferred_max < 0:
            fail(f"--deferred-max must be >= 0, got {deferred_max}")
        if not os.path.isfile(image):
            fail(f"{image}: no such file")
        try:
            truth, facts = ext2_truth.extract(image)
        except ext2_truth.TruthError as e:
            fail(str(e))
        reports = []
        with tempfile.TemporaryDirectory(prefix="blocklab-infer-") as tmp:
            path = truth_csv or os.path.join(tmp, "truth.csv")
            ext2_truth.write_csv(truth, path)
            for o in orders:
                params = {"image": image, "truth": path, "block_size": facts["block_size"], "order": o,
                          "deferred_max": deferred_max, "level": level, "disks": disks, "meta_copies": meta_copies,
                          "grouping": grouping}
                reports.append(json.loads(_core.dgraid_infer(json.dumps(params))))
        if as_json:
            print_json(reports)
            return
        print(f"{image}: {facts['blocks']:,} blocks of {facts['block_size']} B; in use {reports[0]['in_use']:,}; "
              f"deferred list of {deferred_max} blocks; {disks} disks {level}, grouping {grouping}")
        _table("inferred owner and kind of the in-use blocks against debugfs; misplaced: share of in-use blocks "
               "off their home site at the end (no remap: where first placed), inference-fed vs truth-fed layer",
               ["order", "written", "correct", "wrong", "unknown", "overflow", "retags", "misplaced", "no remap",
                "truth-fed"],
               [[r["order"], f"{r['written']:,}", f"{r['correct']:,}", f"{r['wrong']:,}", f"{r['unknown']:,}",
                 f"{r['counts']['overflow_placed']:,}", f"{r['counts']['retags']:,}",
                 f"{100 * r['misplaced_inferred_share']:.2f} %", f"{100 * r['misplaced_without_remap_share']:.2f} %",
                 f"{100 * r['misplaced_truth_share']:.2f} %"] for r in reports])

    @group.command("diffusion")
    def diffusion(
        disks: int = typer.Option(4, "--disks", help="Disks."),
        sizes: str = typer.Option("4KiB,16KiB,64KiB,256KiB,1MiB,4MiB,16MiB,64MiB", "--sizes", help="File sizes."),
        chunk: str = typer.Option("64KiB", "--chunk", help="RAID-0 chunk and diffusion stripe unit."),
        segment: str = typer.Option("1MiB", "--segment", help="Diffusion segment."),
        threshold: int = typer.Option(2, "--threshold", help="Whole-segment reads before a segment is diffused."),
        block_size: int = typer.Option(4096, "--block-size", help="File-system block size."),
        allocator: str = AllocatorOpt,
        as_json: bool = JsonOpt,
    ) -> None:
        """Fig 7 (counted): disks a sequential whole-file read keeps busy, RAID-0 vs D-GRAID with and without diffusion."""
        from blocklab import _core

        params = {"disks": disks, "sizes": sizes_list(sizes, "--sizes"), "chunk_bytes": size_bytes(chunk, "--chunk"),
                  "segment_bytes": size_bytes(segment, "--segment"), "threshold": threshold, "block_size": block_size,
                  "allocator": check_allocator(allocator)}
        rows = json.loads(_core.dgraid_diffusion(json.dumps(params)))
        if as_json:
            print_json(rows)
            return
        _table(f"sequential whole-file reads over {disks} disks: blocks read / busiest disk's blocks",
               ["file bytes", "blocks", "RAID-0", "D-GRAID", "D-GRAID diffused"],
               [[f"{x['file_bytes']:,}", f"{x['blocks']:,}", f"{x['raid0_parallelism']:.2f}",
                 f"{x['dgraid_parallelism']:.2f}", f"{x['diffused_parallelism']:.2f}"] for x in rows])

    app.add_typer(group, name="dgraid")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""
    _register(app)
