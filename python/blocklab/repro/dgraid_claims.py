"""D-GRAID's verdict tables (`blocklab.repro.verdicts`): the paper's claims beside the counted
recipe's numbers (`claims`) and the timed recipe's (`timed_claims`).

The rows read the tables the recipes derive (`dgraid.run_all`'s and `dgraid_timed.run_all`'s
results); claims neither recipe measures are `missing` with the reason. The paper's numbers are
the shared evaluation section's (Table 2, Fig 9, the playback) and the research note's quotes of
§3 (Table 1, Figs 2 and 3).
"""

from __future__ import annotations

# The paper measured ext2 on the HP traces' volumes; a user holding a listing of such a file
# system gives it in place of ours (the recipe still grafts its seeded user tree under /home).
WITH_PAPERS_DATA = ("blocklab repro dgraid --tree LISTING   # LISTING: find DIR -printf '%y %s %p\\n' of the file "
                    "system measured")
WHY_TREE = ("the HP traces' volumes are not available: our namespace is data/debian-tree.lst with a seeded user "
            "tree under /home; run `--tree` (below)")
WHY_POSTMARK = ("a Postmark-like model of the run (5,000 operations, 512 B-10 KB files) on our ext2 model, not "
                "Postmark on Linux 2.2's ext2")
# Fig 7 and Table 2 run on the model of Linux 2.2's ext2 allocator (fsmodel/linux22.rs: the 8-block free-byte
# search, preallocation, directories spread over the groups), as the paper's prototype did.
WHY_SAME_WRITES = ("a layout moves blocks, it does not add writes: on Linux 2.2's allocator (modelled) RAID-0 and "
                   "D-GRAID1 write the same blocks, and RAID-0 fewer disk operations; nothing we model makes the "
                   "paper's RAID-0 write 7.8 % more")
WHY_SPREAD = ("on Linux 2.2's allocator (modelled) Postmark's directories spread over the block groups: RAID-0 "
              "seeks between them, D-GRAID packs each home site, so D-GRAID1 is faster, by less than in the "
              "paper; our trace replays every request synchronously, without the buffer cache that batched the "
              "paper's writes")
# Item 4 of issue 24: the paper does not say whether a block's copies went out in turn or in parallel, so
# the row's reason is the paper's silence, not a serial mode we would have to invent.
WHY_COPIES = ("the paper says Alexander \"writes to all of the copies\" of a metadata block, synchronously, but not "
              "whether in turn or in parallel; it puts the cost on the extra disk writes (\"roughly accounts for the "
              "difference in performance\": D-GRAID4 writes 20.5 % more blocks and runs 28 % longer); our copies go "
              "to different disks in one operation each, in parallel, so a write waits for the slowest copy and "
              "extra writes cost less time than their share")
# Fig 7's 4 KiB read, taken apart per disk (run minus prefix, 2026-11-27): the inode-table block is a
# drive-cache hit on both arrays and the data block costs the same seek; only its rotational delay differs.
WHY_SMALL = ("the paper's Fig 7 is \"a set of sequential file reads, over files of increasing size\", D-GRAID ahead "
             "on small files \"due to better physical block layout\"; it does not say how many files of a size were "
             "read, nor how they were written or how aged the volume was; its Table 2 text names the cause (ext2's "
             "search for a free chunk of 8 blocks leaves small files apart, which D-GRAID packs per home site), "
             "which needs many small files; ours writes and reads one file per size on a fresh volume (Linux 2.2's "
             "allocator, modelled), contiguous on both arrays: its 4 KiB read is a drive-cache hit (the inode-table "
             "block) and one data-block read with the same 0.74 ms seek on both, the gap being that read's "
             "rotational delay (5.2 against 4.2 ms of a 6 ms turn, one request in flight), and a 64 KiB file "
             "spans two RAID-0 chunks read on two disks at once; neither is layout")
WHY_TIME = ("every request of the trace is replayed synchronously on four disk models; the paper's Linux buffer "
            "cache absorbed and batched writes")
# Within this many points of the linear (D - k) / D line counts as "proportional".
LINEAR_PTS = 5.0
# A share of the Fig 2 / Fig 3 failure counts where an ordering must hold ("in most cases").
SLACK = 0.02


def _share(pairs) -> float | None:
    """The share of (a, b) pairs with a strictly above b; None without pairs."""
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    return sum(a > b for a, b in pairs) / len(pairs) if pairs else None


def _at(rows, k, **kw):
    for r in rows:
        if r["failed_count"] == k and all(r.get(a) == b for a, b in kw.items()):
            return r
    return None


def _ks(res) -> list[int]:
    """The failure counts the availability claims are judged at: 1 up to half the disks."""
    d = res["disks"]
    return sorted({r["failed_count"] for r in res["fig2"] if 0 < r["failed_count"] <= d // 2})


def claims(res: dict) -> list:
    """The counted recipe's table: Table 1, Figs 2, 3, 7 (parallelism), Table 2 (writes), Fig 9
    (arithmetic at the cap), and what neither recipe measures."""
    from blocklab.repro.verdicts import Claim, judge, judge_share

    out = []
    t1 = [r for r in res["table1"] if r.get("fs", "ext2") == "ext2"]
    pct = {(r["block_size"], r["meta_copies"]): r["overhead_pct"] for r in t1}
    for bs, paper in ((1024, 0.15), (4096, 0.43)):
        if (bs, 1) in pct:
            out.append(Claim(f"Table 1, ext2 {bs // 1024} KB blocks: namespace overhead, 1 copy", f"{paper:.2f} %",
                             f"{pct[(bs, 1)]:.3f} %", judge(paper, pct[(bs, 1)]), "data", WHY_TREE))
    lin = [pct[(bs, r)] / (r * pct[(bs, 1)]) for (bs, r) in pct if r > 1 and pct.get((bs, 1))]
    if lin:
        worst = max(abs(x - 1) for x in lin)
        out.append(Claim("Table 1: the overhead is linear in the copies (4-way 4 x, 16-way 16 x)", "exactly",
                         f"within {100 * worst:.2f} % of r x the 1-copy overhead",
                         "matched" if worst <= 0.01 else "trend", "model", "our replicas are whole blocks per copy"))
    if (1024, 1) in pct and (4096, 1) in pct:
        out.append(Claim("Table 1, ext2: 4 KB blocks cost more than 1 KB (larger directory blocks)", "x 2.87",
                         f"x {pct[(4096, 1)] / pct[(1024, 1)]:.2f}",
                         judge(0.43 / 0.15, pct[(4096, 1)] / pct[(1024, 1)]), "data", WHY_TREE))
    vfat = {(r["block_size"], r["meta_copies"]): r["overhead_pct"] for r in res["table1"] if r.get("fs") == "vfat"}
    for kb, paper, paper16 in ((1, 0.52, 8.29), (4, 0.50, 8.03)):
        got = vfat.get((kb * 1024, 1))
        if got is None:
            out.append(Claim(f"Table 1, VFAT {kb} KB clusters: namespace and FAT overhead, 1 copy (16: {paper16:.2f} %)",
                             f"{paper:.2f} %", "not run", "missing", "model", "the run had no VFAT rows"))
            continue
        sixteen = vfat.get((kb * 1024, 16))
        out.append(Claim(f"Table 1, VFAT {kb} KB clusters: namespace and FAT overhead, 1 copy (16: {paper16:.2f} %)",
                         f"{paper:.2f} %", f"{got:.3f} %" + (f" (16: {sixteen:.2f} %)" if sixteen is not None else ""),
                         judge(paper, got), "data", WHY_TREE + "; FAT32 as mkfs.fat lays it out (fsmodel/fat.rs)"))
    if (1024, 1) in vfat and (4096, 1) in vfat:
        out.append(Claim("Table 1, VFAT: 1 KB and 4 KB clusters cost about the same (a smaller FAT, larger directories)",
                         "x 0.96", f"x {vfat[(4096, 1)] / vfat[(1024, 1)]:.2f}",
                         judge(0.50 / 0.52, vfat[(4096, 1)] / vfat[(1024, 1)]), "data", WHY_TREE))

    d = res["disks"]
    f2 = res["fig2"]
    ks = _ks(res)
    off = [100 * (_at(f2, k, level="dgraid0", grouping="dir", meta_copies=d)["nonempty_dirs_available"] - (d - k) / d)
           for k in ks]
    if off:
        worst = max(off, key=abs)
        out.append(Claim(f"Fig 2 ({d} disks, {d}-way namespace, directory grouping): available data proportional to "
                         "the working disks", "linear, slightly above",
                         f"directories holding files {worst:+.1f} points from (D - k) / D at worst (k = 1..{max(ks)})",
                         "matched" if abs(worst) <= LINEAR_PTS else "trend", "data",
                         "about 10 % of the data blocks spill off their home when a large directory fills a member; "
                         + WHY_TREE))
        def close(kk):
            return _share((_at(f2, k, level="dgraid0", grouping="dir", meta_copies=4)["dirs_available"] + SLACK,
                           _at(f2, k, level="dgraid0", grouping="dir", meta_copies=d)["dirs_available"]) for k in kk)

        # "Very good" is the paper's word: as good as full replication up to a quarter of the disks
        # failed is a trend, up to half of them a match.
        quarter = [k for k in ks if k <= max(1, d // 4)]
        few, all_ = close(quarter), close(ks)
        out.append(Claim("Fig 2: 4-way namespace replication is very good (as good as full)", "yes",
                         f"within {100 * SLACK:.0f} points of {d}-way in {100 * few:.0f} % of k = 1..{max(quarter)}, "
                         f"{100 * all_:.0f} % of k = 1..{max(ks)}",
                         "matched" if judge_share(all_) == "matched" else
                         "trend" if judge_share(few) == "matched" else "contradicted", "data", WHY_TREE))
        files = _share((_at(f2, k, level="dgraid0", grouping="dir", meta_copies=d)["dirs_available"],
                        _at(f2, k, level="dgraid0", grouping="file", meta_copies=d)["dirs_available"]) for k in ks)
        out.append(Claim("Fig 2: file grouping loses more directories than directory grouping", "yes",
                         f"fewer directories in {100 * files:.0f} % of k = 1..{max(ks)}", judge_share(files), "data",
                         WHY_TREE))
    f3 = res["fig3"]
    if f3 and ks:
        worse = _share((_at(f3, k, popular_copies=1)["files_available"],
                        _at(f3, k, popular_copies=1)["processes_available"]) for k in ks)
        out.append(Claim("Fig 3: without the popular directories replicated, processes fare worse than files", "yes",
                         f"below the files in {100 * worse:.0f} % of k = 1..{max(ks)}", judge_share(worse), "data",
                         WHY_TREE))
        better = _share((_at(f3, k, popular_copies=d)["processes_available"],
                         _at(f3, k, popular_copies=1)["processes_available"]) for k in ks)
        out.append(Claim("Fig 3: with them replicated, many more processes run clean", "yes",
                         f"more in {100 * better:.0f} % of k = 1..{max(ks)}", judge_share(better), "data", WHY_TREE))
    pop = res.get("popular")
    if pop:
        share = 100 * pop["share"]
        out.append(Claim("Fig 3: the popular directories are a tiny part of the file system", "143 MB, < 0.1 %",
                         f"{pop['popular_bytes'] / 1e6:,.0f} MB, {share:.1f} % of the file bytes",
                         "matched" if share < 0.1 else "trend", "data",
                         "our system listing is large next to the generated user tree; the paper's were 250 GB of "
                         "HP volumes; run `--tree` (below)"))

    f7 = res["fig7"]
    big = f7[-1]
    out.append(Claim("Fig 7: without diffusion a large file is read at one disk's rate",
                     "one disk", f"{big['dgraid_parallelism']:.2f} disks busy ({big['file_bytes'] >> 20} MiB, counted)",
                     "matched" if big["dgraid_parallelism"] <= 1.05 else "contradicted", "model",
                     "the counted recipe counts the disks a read keeps busy, not its rate"))
    ratio = big["diffused_parallelism"] / big["raid0_parallelism"]
    out.append(Claim("Fig 7: with diffusion, performance is much improved (close to striping)", "yes",
                     f"{big['diffused_parallelism']:.2f} disks busy against RAID-0's {big['raid0_parallelism']:.2f}",
                     "matched" if ratio >= 0.8 else "trend" if big["diffused_parallelism"] > big["dgraid_parallelism"]
                     else "contradicted", "model", "the counted recipe counts the disks a read keeps busy, not its rate"))
    out.append(Claim("Fig 7: D-GRAID beats RAID-0 on small files (better layout)", "yes",
                     "not counted (one disk either way; `--timed` measures it)", "missing", "model",
                     "counted runs have no time; the timed recipe's table has this row"))

    t2 = {r["config"]: r for r in res["table2"]}
    if {"dgraid1", "dgraid4", "raid0"} <= set(t2):
        d1, d4, r0 = t2["dgraid1"], t2["dgraid4"], t2["raid0"]
        uniq = [t2[f"dgraid{k}"]["unique_metadata"] for k in (1, 2, 3, 4) if f"dgraid{k}" in t2]
        exact = all(u == (k + 1) * uniq[0] for k, u in enumerate(uniq))
        out.append(Claim("Table 2: unique metadata blocks written = k x those of one copy", "k x 1,599",
                         f"k x {uniq[0]:,}" + ("" if exact else " (not exactly)"), "matched" if exact else "contradicted",
                         "data", WHY_POSTMARK))
        if res["fig9"]["scale"] == 1:  # --quick runs a smaller Postmark: no count to set beside the paper's
            out.append(Claim("Table 2: blocks written by D-GRAID1", "93,981", f"{d1['blocks_written']:,}",
                             judge(93_981, d1["blocks_written"]), "model", WHY_POSTMARK))
        grow = 100 * (d4["blocks_written"] / d1["blocks_written"] - 1)
        out.append(Claim("Table 2: D-GRAID4 writes more blocks than D-GRAID1", "+20.5 %", f"{grow:+.1f} %",
                         judge(100 * (113_222 / 93_981 - 1), grow), "model", WHY_POSTMARK))
        per = d1["metadata_writes"] / d1["unique_metadata"]
        out.append(Claim("Table 2: metadata writes per unique metadata block (D-GRAID1)", "3.73", f"{per:.2f}",
                         judge(5962 / 1599, per), "model",
                         WHY_POSTMARK + "; our flushes every 400 operations stand in for bdflush's 5 s"))
        lazy = 100 * (d4["lazy_blocks_written"] / d1["blocks_written"] - 1)
        out.append(Claim("Table 2: with replicas updated once, D-GRAID4 writes only about 4 % more", "about 4 %",
                         f"{lazy:+.1f} %", judge(4.0, lazy, tolerance=0.5), "paper",
                         "the paper does not say over which base (4.2 % of D-GRAID4's writes, 5.1 % of D-GRAID1's)"))
        extra = 100 * (r0["blocks_written"] / d1["blocks_written"] - 1)
        out.append(Claim("Table 2: RAID-0 writes more blocks than D-GRAID1", "+7.8 % (101,297 vs 93,981)",
                         f"{extra:+.1f} %", judge(100 * (101_297 / 93_981 - 1), extra), "model", WHY_SAME_WRITES))
    out.append(Claim("Table 2: run time, D-GRAID4 / D-GRAID1 = 1.28, RAID-0 / D-GRAID1 = 1.125", "1.28 / 1.125",
                     "not counted (`blocklab repro dgraid --timed`)", "missing", "model",
                     "counted runs have no time; the timed recipe's table has these rows"))

    f9 = res["fig9"]
    scale = f9["scale"]
    at = "" if scale == 1 else f" (volume x {scale:g}: paper's seconds scaled)"
    out.append(Claim("Fig 9: live-block recovery of D-GRAID-1 at 10 MB/s" + at, f"{68 * scale:.0f} s",
                     f"{f9['dgraid_rebuild_s_at_cap']:.0f} s (live bytes / cap)",
                     judge(68 * scale, f9["dgraid_rebuild_s_at_cap"]), "data",
                     "our 3 GB volume of 32 KB files is generated as the paper describes it"))
    out.append(Claim("Fig 9: RAID-10's whole-member rebuild at 10 MB/s" + at, f"{160 * scale:.0f} s",
                     f"{f9['raid10_rebuild_s_at_cap']:.0f} s (member / cap)",
                     judge(160 * scale, f9["raid10_rebuild_s_at_cap"]), "model",
                     "the paper's MD rebuild took 7 % longer than a member at the cap; ours is the arithmetic"))
    dg = 100 * f9["dgraid_files_after_pair_loss"]
    out.append(Claim("Fig 9: D-GRAID-1 after a mirror pair is lost", "about 50 % available", f"{dg:.1f} % of files",
                     judge(50.0, dg), "data", "our volume of 32 KB files is generated as the paper describes it"))
    md = 100 * f9["raid10_md_files_after_pair_loss"]
    out.append(Claim("Fig 9: RAID-10 after a mirror pair is lost", "near zero",
                     f"{md:.0f} % as MD ({100 * f9['raid10_block_files_after_pair_loss']:.1f} % with block semantics)",
                     "matched" if md <= 5 else "contradicted", "model", "MD stops an array missing a mirror pair"))

    out.append(Claim("Fig 5: blocks misplaced by inference, worst hour of the HP traces", "about 1 % (remapped)",
                     "not run here (`blocklab dgraid infer` measures images we write: docs/dgraid-infer.md)", "missing",
                     "data", "the HP traces are not available"))
    out.append(Claim("Fig 6: time overheads of allocating writes (CPU of the 550 MHz host)", "slower; reads equal",
                     "not modelled", "missing", "model", "no CPU model: our arrays cost no time to place a block"))
    out.append(Claim("HP traces played back at 3 x: D-GRAID up to 19.2 % slower, then catches up", "19.2 %",
                     "not run", "missing", "data", "the HP traces are not available"))
    return out


def timed_claims(res: dict) -> list:
    """The timed recipe's table: Fig 8, Fig 9, Table 2's run times and Fig 7's throughput."""
    from blocklab.repro.dgraid_timed import FIG7_REPLAYS, MD_MAX_KBPS
    from blocklab.repro.verdicts import Claim, judge

    out = []
    sub = [r for r in res["fig8"] if r["cap_kbps"] == MD_MAX_KBPS]
    full = next((r["rebuild_s"] for r in sub if r["order"] == "md"), None)
    half = {(r["layout"], r["unit_bytes"]): r["rebuild_s"] for r in sub if r["order"] == "live" and r["live_frac"] == 0.5}
    compact, spread = half.get(("compact", 4096)), half.get(("spread", 4096))
    if full and compact is not None:
        share = compact / full
        out.append(Claim("Fig 8: live-block recovery cuts the rebuild, a disk half full (best case, disk-bound)",
                         "much shorter", f"{100 * share:.0f} % of the full rebuild ({compact:.1f} / {full:.1f} s)",
                         "matched" if share <= 0.6 else "trend" if share < 1 else "contradicted", "data",
                         "the paper gives Fig 8's curves without numbers"))
    if compact is not None and spread is not None:
        out.append(Claim("Fig 8: the worst case (live blocks spread) is slower than the best (compact)", "yes",
                         f"{spread:.1f} against {compact:.1f} s (single blocks, half live)",
                         "matched" if spread > compact else "contradicted", "data",
                         "the paper gives Fig 8's curves without numbers"))
    f9 = res["fig9"]
    md, lv = f9["md"], f9["live"]
    # --quick runs a twentieth of the 3 GB volume: the paper's seconds scaled, its run times not compared.
    scale = f9.get("volume_bytes", 3e9) / 3e9
    at = "" if abs(scale - 1) < 0.01 else f" (volume x {scale:.2g}: paper's seconds scaled)"
    out.append(Claim("Fig 9 in time: D-GRAID's live-block rebuild with the reader running" + at, f"{68 * scale:.0f} s",
                     f"{lv['rebuild_s']:.0f} s", judge(68.0 * scale, lv["rebuild_s"]), "model",
                     "the live order on a RAID-10 with D-GRAID-1's live map, not a D-GRAID-1 member rebuilt by the target"))
    out.append(Claim("Fig 9 in time: RAID-10's rebuild with the reader running" + at, f"{160 * scale:.0f} s",
                     f"{md['rebuild_s']:.0f} s", judge(160.0 * scale, md["rebuild_s"]), "model",
                     "MD's rate rule at the 10 MB/s cap on our disk models"))
    dg = 100 * f9["dgraid1_pair"]["file_reads_ok"]
    out.append(Claim("Fig 9 in time: D-GRAID-1's whole-file reads after a mirror pair is lost", "about 50 %",
                     f"{dg:.1f} %", judge(50.0, dg), "data", "our volume of 32 KB files is generated as the paper "
                     "describes it"))
    r10 = 100 * f9["raid10_pair"]["file_reads_ok"]
    out.append(Claim("Fig 9 in time: RAID-10's file reads after a mirror pair is lost", "near zero",
                     f"0 % as MD, {r10:.1f} % with block semantics", "matched", "model",
                     "MD stops the array; block semantics keeps the files wholly on the surviving pair"))
    paper_t2 = {"raid0": 69.25, "dgraid1": 61.57, "dgraid4": 78.79}
    for label in ("closed-1", "closed-8"):
        rows = {r["config"]: r["run_time_s"] for r in res["table2"] if r["replay"] == label}
        if not {"raid0", "dgraid1", "dgraid4"} <= set(rows):
            continue
        d4d1 = rows["dgraid4"] / rows["dgraid1"]
        out.append(Claim(f"Table 2 in time ({label}): D-GRAID4 / D-GRAID1 run time", "1.280", f"{d4d1:.3f}",
                         judge(100 * (paper_t2["dgraid4"] / paper_t2["dgraid1"] - 1), 100 * (d4d1 - 1)), "paper",
                         WHY_COPIES))
        r0d1 = rows["raid0"] / rows["dgraid1"]
        out.append(Claim(f"Table 2 in time ({label}): RAID-0 / D-GRAID1 run time (D-GRAID1 faster)", "1.125",
                         f"{r0d1:.3f}", judge(100 * (paper_t2["raid0"] / paper_t2["dgraid1"] - 1), 100 * (r0d1 - 1)),
                         "model", WHY_SPREAD))
        if not at:
            out.append(Claim(f"Table 2 in time ({label}): D-GRAID1's run time", "61.57 s", f"{rows['dgraid1']:.1f} s",
                             judge(paper_t2["dgraid1"], rows["dgraid1"]), "model", WHY_TIME))
    for label, _, _ in FIG7_REPLAYS:
        f7 = [r for r in res["fig7"] if r["replay"] == label]
        if not f7:
            continue
        big, small = f7[-1], f7[0]
        size = f"{big['file_bytes'] >> 20} MiB"
        out.append(Claim(f"Fig 7 in time ({label}): without diffusion a large file reads at one disk's rate",
                         "one disk", f"{big['dgraid_mb_s']:.0f} MB/s against RAID-0's {big['raid0_mb_s']:.0f} ({size})",
                         "matched" if big["raid0_mb_s"] >= 1.5 * big["dgraid_mb_s"] else "contradicted", "model",
                         "one request in flight keeps one disk busy on RAID-0 too" if label == "closed-1" else
                         "the disks' rate is the model's"))
        best = max(big["dgraid_diffused_mb_s"], big["dgraid_diffused_4m_mb_s"])
        out.append(Claim(f"Fig 7 in time ({label}): with diffusion, performance is much improved", "yes",
                         f"{best:.0f} MB/s against {big['dgraid_mb_s']:.0f} without ({size})",
                         "matched" if best >= 1.5 * big["dgraid_mb_s"] else "trend" if best > big["dgraid_mb_s"]
                         else "contradicted", "model", "the segment size is not given by the paper (1 MiB, 4 MiB here)"))
        small_size = f"{small['file_bytes'] >> 10} KiB"
        out.append(Claim(f"Fig 7 in time ({label}): D-GRAID beats RAID-0 on small files", "yes",
                         f"{small['dgraid_mb_s']:.1f} against {small['raid0_mb_s']:.1f} MB/s ({small_size})",
                         "matched" if small["dgraid_mb_s"] > small["raid0_mb_s"] else "contradicted", "paper",
                         WHY_SMALL))
    return out
