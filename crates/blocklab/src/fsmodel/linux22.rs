//! The Linux 2.2 kernel's ext2 allocator, the alternative to libext2fs's for
//! what a mounted file system does after mke2fs made it (the D-GRAID paper's
//! prototype ran under Linux 2.2). Read from 2.2-era `fs/ext2/balloc.c`
//! (`ext2_new_block`), `inode.c` (`ext2_alloc_block`, the goals of
//! `ext2_getblk`), `file.c` (`ext2_release_file`) and `ialloc.c`
//! (`ext2_new_inode`):
//!
//! * a block for `goal` ([`new_block`]): the goal itself if free; else, when
//!   the goal is not the first block of its group, the first free block up
//!   to the next 64-block boundary of the group; else the first wholly free
//!   *byte* of the group's bitmap (8 free blocks aligned on 8) from the
//!   goal's byte on, moved back over up to 7 free blocks before it; else any
//!   free block after the goal in its group; else the next groups in turn
//!   (those with free blocks), each searched for a free byte, then a free
//!   block. A new file's first block aims at the first block of its inode's
//!   group, which is never free: it goes to the first free byte, so holes of
//!   fewer than 8 aligned blocks are skipped ("ext2 looks for a contiguous
//!   free chunk of 8 blocks to allocate a new file", the paper says);
//! * preallocation (`EXT2_PREALLOCATE`): a regular file's block found by
//!   that search also reserves the up to [`PREALLOC_BLOCKS`]` - 1` free
//!   blocks after it in its group (stopping at the first one in use); the
//!   file's next block is taken from the window when it aims at the window's
//!   start, the window is dropped (its blocks freed) on a miss and when the
//!   file is closed. Directories and symlinks get none;
//! * goals: a file's (or directory's) block aims at the block after the one
//!   it was given last (the in-core `i_next_alloc_goal`); in one mapping, a
//!   block under a newly allocated pointer block aims at that pointer block;
//! * a new directory's inode goes to the group with the most free blocks of
//!   those with at least the average number of free inodes ([`dir_group`]),
//!   so directories spread over the volume; other inodes go to their
//!   parent's group, first free inode (as libext2fs's do).

use serde::Serialize;

use super::bitmap::Bitmap;
use super::geometry::Geometry;
use crate::error::{Error, Result};

/// `EXT2_DEFAULT_PREALLOC_BLOCKS`: the block allocated and up to 7 reserved after it.
pub const PREALLOC_BLOCKS: u64 = 8;

/// Whose allocation rules the operations after mkfs follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Allocator {
    /// libext2fs (what `mke2fs -d` and debugfs use): first free block at or
    /// after the goal, no preallocation.
    #[default]
    Libext2fs,
    /// The Linux 2.2 kernel's ext2 (this module).
    Linux22,
}

impl Allocator {
    pub const NAMES: &'static [&'static str] = &["libext2fs", "linux22"];

    pub fn parse(name: &str) -> Result<Allocator> {
        match name {
            "libext2fs" => Ok(Allocator::Libext2fs),
            "linux22" => Ok(Allocator::Linux22),
            other => Err(Error::unknown("allocator", other, Self::NAMES)),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Allocator {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Allocator::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// First `k` (relative to the group start `s`, a multiple of 8, at or after
/// the byte holding `j`) whose eight blocks `s+k ..= s+k+7` are free and
/// inside the group (`..= e`): the kernel's `memscan` for a zero byte.
fn free_byte(bmap: &Bitmap, s: u64, j: u64, e: u64) -> Option<u64> {
    let mut i = s + j / 8 * 8;
    loop {
        let z = bmap.first_zero(i, e)?;
        let k = (z - s).div_ceil(8) * 8;
        if s + k + 7 > e {
            return None;
        }
        match bmap.first_one(s + k, s + k + 7) {
            None => return Some(k),
            Some(o) => i = o + 1,
        }
    }
}

/// From a free byte at `k`, back over up to 7 free blocks before it.
fn search_back(bmap: &Bitmap, s: u64, mut k: u64) -> u64 {
    for _ in 0..7 {
        if k > 0 && !bmap.get(s + k - 1) {
            k -= 1;
        } else {
            break;
        }
    }
    s + k
}

/// The block `ext2_new_block` takes for `goal` (None: the volume is full).
pub fn new_block(bmap: &Bitmap, geo: &Geometry, goal: u64) -> Option<u64> {
    let fdb = geo.first_data_block;
    let goal = if goal < fdb || goal >= geo.blocks { fdb } else { goal };
    let g0 = geo.group_of_block(goal)? as usize;
    let (s, e) = (geo.groups[g0].start, geo.groups[g0].end);
    if bmap.first_zero(s, e).is_some() {
        if !bmap.get(goal) {
            return Some(goal);
        }
        let j = goal - s;
        if j > 0 {
            // Up to the next 64-block boundary (none when j is on one).
            let end = (j + 63) & !63;
            if end > j {
                if let Some(b) = bmap.first_zero(goal, (s + end - 1).min(e)) {
                    return Some(b);
                }
            }
        }
        if let Some(k) = free_byte(bmap, s, j, e) {
            return Some(search_back(bmap, s, k));
        }
        if let Some(b) = bmap.first_zero(goal, e) {
            return Some(b);
        }
    }
    // The other groups in turn, ending with the goal's own from its start.
    let n = geo.groups.len();
    for step in 1..=n {
        let g = &geo.groups[(g0 + step) % n];
        let Some(first) = bmap.first_zero(g.start, g.end) else {
            continue;
        };
        return Some(match free_byte(bmap, g.start, 0, g.end) {
            Some(k) => search_back(bmap, g.start, k),
            None => first,
        });
    }
    None
}

/// The group `ext2_new_inode` gives a new directory: of the groups with
/// free inodes, at least the average number, the one with the most free
/// blocks (the first of equals).
pub fn dir_group(bmap: &Bitmap, imap: &Bitmap, geo: &Geometry) -> Option<u64> {
    let ipg = geo.inodes_per_group;
    let free_inodes = |g: u64| ipg - imap.count_ones_in(g * ipg + 1, (g + 1) * ipg);
    let n = geo.group_count();
    let average = (0..n).map(free_inodes).sum::<u64>() / n;
    let mut best: Option<(u64, u64)> = None;
    for (g, grp) in geo.groups.iter().enumerate() {
        let fi = free_inodes(g as u64);
        if fi == 0 || fi < average {
            continue;
        }
        let fb = grp.end - grp.start + 1 - bmap.count_ones_in(grp.start, grp.end);
        if best.is_none_or(|(_, b)| fb > b) {
            best = Some((g as u64, fb));
        }
    }
    best.map(|(g, _)| g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsmodel::geometry::MkfsParams;

    /// One group of 8192 blocks (8 MiB, 1 KiB blocks), the half-open ranges `used` taken.
    fn one_group(used: &[(u64, u64)]) -> (Bitmap, Geometry) {
        let geo = Geometry::mke2fs(&MkfsParams::new(8 << 20, 1024)).unwrap();
        let mut b = Bitmap::new(geo.blocks);
        b.set(0);
        for &(a, z) in used {
            for x in a..z {
                b.set(x);
            }
        }
        (b, geo)
    }

    #[test]
    fn a_goal_at_the_group_start_takes_the_first_free_byte_moved_back() {
        // Blocks 1..=561 in use: the first free byte of group 0 (relative
        // 568..575, blocks 569..576) moved back over 562..568.
        let (b, geo) = one_group(&[(1, 562)]);
        assert_eq!(new_block(&b, &geo, 1), Some(562));
        // A 3-block hole at 562..564 before a used block: skipped for a
        // goal at the group start (the free byte is at 577..584 (relative
        // 576); back over 570..576).
        let (b, geo) = one_group(&[(1, 562), (565, 570)]);
        assert_eq!(new_block(&b, &geo, 1), Some(570));
        // ...but taken by a goal inside it, and found by the near search
        // from a used goal before it.
        assert_eq!(new_block(&b, &geo, 563), Some(563));
        assert_eq!(new_block(&b, &geo, 561), Some(562));
    }

    #[test]
    fn the_near_search_stops_at_the_next_64_block_boundary() {
        // Goal 600 (relative 599) used, blocks 600..=640 used: the near
        // window is relative 599..639 (blocks 600..640), all used; the free
        // byte from relative 592 on is at relative 640 (blocks 641..648),
        // nothing free before it to move back over.
        let (b, geo) = one_group(&[(1, 641)]);
        assert_eq!(new_block(&b, &geo, 600), Some(641));
        // A free block at 630 inside the window is found first.
        let (b, geo) = one_group(&[(1, 630), (631, 641)]);
        assert_eq!(new_block(&b, &geo, 600), Some(630));
        // Relative 640 is on a boundary: no near window (it would find
        // 645), straight to the free byte (relative 648, blocks 649..656),
        // moved back over 647..648 to the used 646.
        let (b, geo) = one_group(&[(1, 645), (646, 647)]);
        assert_eq!(new_block(&b, &geo, 641), Some(647));
    }

    #[test]
    fn directories_go_to_the_emptiest_group_with_average_free_inodes() {
        // 64 MiB, 1 KiB blocks: 8 groups; 1, 3, 5, 7 hold superblock
        // copies, 0 the root: 2, 4 and 6 are the emptiest, the first wins.
        let geo = Geometry::mke2fs(&MkfsParams::new(64 << 20, 1024)).unwrap();
        let mut bmap = Bitmap::new(geo.blocks);
        let mut imap = Bitmap::new(geo.inodes + 1);
        for ([a, z], _) in geo.static_extents() {
            for b in a..=z {
                bmap.set(b);
            }
        }
        for i in 0..=11 {
            imap.set(i);
        }
        assert_eq!(dir_group(&bmap, &imap, &geo), Some(2));
        bmap.set(geo.groups[2].end);
        assert_eq!(dir_group(&bmap, &imap, &geo), Some(4));
        // A group below the average of free inodes is passed over.
        let ipg = geo.inodes_per_group;
        for i in 4 * ipg + 1..=5 * ipg - 1 {
            imap.set(i);
        }
        assert_eq!(dir_group(&bmap, &imap, &geo), Some(6));
    }

    #[test]
    fn allocator_names_parse() {
        assert_eq!(Allocator::parse("linux22").unwrap(), Allocator::Linux22);
        let e = Allocator::parse("linux26").unwrap_err().to_string();
        assert!(e.contains("linux26") && e.contains("libext2fs"), "{e}");
    }
}
