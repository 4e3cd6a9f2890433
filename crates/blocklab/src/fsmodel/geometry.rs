//! The on-disk geometry of an ext2 file system as `mke2fs -t ext2` lays it
//! out for a size and a block size (e2fsprogs 1.47 with its stock
//! `mke2fs.conf`: sparse_super, resize_inode, 256-byte inodes, no flex_bg).
//!
//! The rules, in the order mke2fs applies them:
//!
//! * the size class picks the inode ratio: under 3 MiB "floppy" (8192 bytes
//!   per inode), under 512 MiB "small" (4096), under 4 TiB the default
//!   (16384), then "big" (32768) and "huge" (65536); never below the block
//!   size;
//! * blocks per group = 8 × block size (at most 65528); 1 KiB file systems
//!   start at block 1 (block 0 is the boot block);
//! * inodes = bytes / ratio, spread evenly over the groups, rounded up to
//!   fill whole inode-table blocks and down to a multiple of 8; a group
//!   whose inodes would not fit one bitmap block shrinks the groups by 8
//!   blocks and starts again;
//! * reserved descriptor blocks (for online growth) cover 1024 × the size
//!   (capped at 2^32 blocks), at most one indirect block's worth;
//! * a last group too small for its own tables plus 50 blocks is dropped;
//! * groups 0, 1 and the powers of 3, 5 and 7 hold a superblock copy, the
//!   descriptors and the reserved descriptors; every group then holds its
//!   block bitmap, inode bitmap and inode table at its first free blocks.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsmodel::kind::BlockKind;

/// Bytes of one group descriptor (no 64bit feature).
const DESC_SIZE: u64 = 32;
/// The first inode an ordinary file may use (inodes 1..=10 are reserved).
pub const FIRST_INO: u64 = 11;
/// ext2's root directory inode.
pub const ROOT_INO: u64 = 2;
/// The resize inode that owns the reserved descriptor blocks.
pub const RESIZE_INO: u64 = 7;

/// What mke2fs is asked for; `None` fields take mke2fs's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MkfsParams {
    pub size_bytes: u64,
    pub block_size: u64,
    /// Bytes per inode (`-i`); default from the size class.
    pub inode_ratio: Option<u64>,
    /// Bytes of one on-disk inode (`-I`); default 256.
    pub inode_size: Option<u64>,
}

impl MkfsParams {
    pub fn new(size_bytes: u64, block_size: u64) -> Self {
        MkfsParams {
            size_bytes,
            block_size,
            inode_ratio: None,
            inode_size: None,
        }
    }
}

/// One block group: `[first, last]` ranges are inclusive, as dumpe2fs prints them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub group: u64,
    pub start: u64,
    pub end: u64,
    pub superblock: Option<u64>,
    pub descriptors: Option<[u64; 2]>,
    pub reserved_descriptors: Option<[u64; 2]>,
    pub block_bitmap: u64,
    pub inode_bitmap: u64,
    pub inode_table: [u64; 2],
}

/// What a block holds by its address alone (the static part of the layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaticKind {
    /// Block 0 of a 1 KiB file system (outside every group).
    Boot,
    Superblock,
    Descriptors,
    ReservedDescriptors,
    BlockBitmap,
    InodeBitmap,
    InodeTable,
    /// Free for files, directories and indirect blocks.
    Dynamic,
}

impl StaticKind {
    /// The block kind a static block is tagged with (the boot block counts
    /// as superblock); `None` for a dynamic block, whose kind its owner says.
    pub fn block_kind(self) -> Option<BlockKind> {
        Some(match self {
            StaticKind::Boot | StaticKind::Superblock => BlockKind::Superblock,
            StaticKind::Descriptors => BlockKind::Descriptors,
            StaticKind::ReservedDescriptors => BlockKind::ReservedDescriptors,
            StaticKind::BlockBitmap => BlockKind::BlockBitmap,
            StaticKind::InodeBitmap => BlockKind::InodeBitmap,
            StaticKind::InodeTable => BlockKind::InodeTable,
            StaticKind::Dynamic => return None,
        })
    }
}

/// The whole layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Geometry {
    pub block_size: u64,
    pub blocks: u64,
    pub first_data_block: u64,
    pub blocks_per_group: u64,
    pub inodes_per_group: u64,
    pub inode_size: u64,
    pub inode_blocks_per_group: u64,
    pub inodes: u64,
    pub desc_blocks: u64,
    pub reserved_gdt_blocks: u64,
    pub groups: Vec<Group>,
}

fn div_ceil(a: u64, b: u64) -> u64 {
    a.div_ceil(b)
}

/// `a` is a power of `b` (b^1, b^2, ...).
fn is_power_of(mut a: u64, b: u64) -> bool {
    loop {
        if a < b {
            return false;
        }
        if a == b {
            return true;
        }
        if !a.is_multiple_of(b) {
            return false;
        }
        a /= b;
    }
}

/// sparse_super: groups 0, 1 and the powers of 3, 5, 7 keep a superblock copy.
pub fn group_has_super(g: u64) -> bool {
    g <= 1 || (g & 1 == 1 && (is_power_of(g, 3) || is_power_of(g, 5) || is_power_of(g, 7)))
}

/// The inode ratio of mke2fs.conf's size classes (bytes per inode).
pub fn default_inode_ratio(size_bytes: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    if size_bytes < 3 * MIB {
        8192
    } else if size_bytes < 512 * MIB {
        4096
    } else if size_bytes < 4 * (1 << 40) {
        16384
    } else if size_bytes < 16 * (1 << 40) {
        32768
    } else {
        65536
    }
}

impl Geometry {
    /// The layout `mke2fs -t ext2 -b B` gives a device of `size_bytes`.
    pub fn mke2fs(p: &MkfsParams) -> Result<Geometry> {
        let bs = p.block_size;
        if !(1024..=65536).contains(&bs) || !bs.is_power_of_two() {
            return Err(Error::config(format!(
                "block size must be a power of two from 1024 to 65536 bytes, got {bs}"
            )));
        }
        let blocks_param = p.size_bytes / bs;
        if blocks_param > u32::MAX as u64 {
            return Err(Error::config(format!(
                "{} blocks of {bs} B: ext2 without the 64bit feature holds at most 2^32 blocks",
                blocks_param
            )));
        }
        // The size class is judged on the requested size, before any trimming.
        let ratio = p
            .inode_ratio
            .unwrap_or_else(|| default_inode_ratio(blocks_param * bs))
            .max(bs);
        if !(1024..=65536 * 1024).contains(&ratio) {
            return Err(Error::config(format!(
                "inode ratio must be 1024..=67108864 bytes, got {ratio}"
            )));
        }
        let isz = p.inode_size.unwrap_or(256);
        if isz < 128 || isz > bs || !isz.is_power_of_two() {
            return Err(Error::config(format!(
                "inode size must be a power of two from 128 to the block size {bs}, got {isz}"
            )));
        }
        let inodes_param = blocks_param * bs / ratio;
        if inodes_param > u32::MAX as u64 {
            return Err(Error::config(format!(
                "too many inodes ({inodes_param}): raise the inode ratio"
            )));
        }
        if inodes_param * isz >= blocks_param * bs {
            return Err(Error::config(format!(
                "{inodes_param} inodes of {isz} B do not fit {blocks_param} blocks: raise the inode ratio"
            )));
        }
        let fdb: u64 = if bs == 1024 { 1 } else { 0 };
        let max_bpg = 65536 - 8;
        let mut bpg = (bs * 8).min(max_bpg);
        let mut blocks = blocks_param;
        let gdpb = bs / DESC_SIZE;
        let too_small = || Error::config(format!("{} B is too small for an ext2 file system", p.size_bytes));
        'retry: loop {
            if blocks <= fdb {
                return Err(too_small());
            }
            let groups = div_ceil(blocks - fdb, bpg);
            let desc_blocks = div_ceil(groups, gdpb);
            let mut inodes = inodes_param;
            if inodes < FIRST_INO + 1 {
                inodes = FIRST_INO + 1;
            }
            let mut ipg = div_ceil(inodes, groups);
            if ipg > bs * 8 {
                if bpg >= 256 {
                    bpg -= 8;
                    blocks = blocks_param;
                    continue 'retry;
                }
                return Err(Error::config("too many inodes for the block groups"));
            }
            let inodes_per_block = bs / isz;
            ipg = ipg.min(65536 - inodes_per_block);
            let (ipg, itb) = loop {
                let itb = div_ceil(ipg * isz, bs);
                let mut n = itb * bs / isz;
                if n < 8 {
                    n = 8;
                }
                n &= !7;
                if n * groups > u32::MAX as u64 {
                    ipg -= 1;
                    continue;
                }
                break (n, div_ceil(n * isz, bs));
            };
            // Reserved descriptor blocks: room to grow to 1024 × the size.
            let max_blocks: u64 = if blocks < 0xffff_ffff / 1024 {
                blocks * 1024
            } else {
                0xffff_ffff
            };
            let rsv_groups = div_ceil(max_blocks - fdb, bpg);
            let rsv = (div_ceil(rsv_groups, gdpb).saturating_sub(desc_blocks)).min(bs / 4);
            if rsv + desc_blocks > bpg * 3 / 4 {
                return Err(Error::config(
                    "this size needs the meta_bg feature (descriptors over 3/4 of a group), which is not modelled",
                ));
            }
            if 3 + itb + rsv + desc_blocks > bpg {
                return Err(Error::config("too many inodes for the block groups"));
            }
            // A last group too small for its tables (+50 blocks) is dropped.
            let mut overhead = 2 + itb;
            if group_has_super(groups - 1) {
                overhead += 1 + desc_blocks + rsv;
            }
            let rem = (blocks - fdb) % bpg;
            if groups == 1 && rem != 0 && rem < overhead {
                return Err(too_small());
            }
            if rem != 0 && rem < overhead + 50 {
                blocks -= rem;
                continue 'retry;
            }
            let mut out = Vec::with_capacity(groups as usize);
            for g in 0..groups {
                let start = fdb + g * bpg;
                let end = (start + bpg - 1).min(blocks - 1);
                let mut next = start;
                let (superblock, descriptors, reserved) = if group_has_super(g) {
                    let sb = start;
                    let d = [sb + 1, sb + desc_blocks];
                    let r = (rsv > 0).then(|| [sb + desc_blocks + 1, sb + desc_blocks + rsv]);
                    next = sb + 1 + desc_blocks + rsv;
                    (Some(sb), Some(d), r)
                } else {
                    (None, None, None)
                };
                out.push(Group {
                    group: g,
                    start,
                    end,
                    superblock,
                    descriptors,
                    reserved_descriptors: reserved,
                    block_bitmap: next,
                    inode_bitmap: next + 1,
                    inode_table: [next + 2, next + 1 + itb],
                });
            }
            return Ok(Geometry {
                block_size: bs,
                blocks,
                first_data_block: fdb,
                blocks_per_group: bpg,
                inodes_per_group: ipg,
                inode_size: isz,
                inode_blocks_per_group: itb,
                inodes: ipg * groups,
                desc_blocks,
                reserved_gdt_blocks: rsv,
                groups: out,
            });
        }
    }

    pub fn group_count(&self) -> u64 {
        self.groups.len() as u64
    }

    /// The group holding `block` (None for the boot block and past the end).
    pub fn group_of_block(&self, block: u64) -> Option<u64> {
        if block < self.first_data_block || block >= self.blocks {
            return None;
        }
        Some((block - self.first_data_block) / self.blocks_per_group)
    }

    /// The group of inode `ino` (1-based).
    pub fn group_of_inode(&self, ino: u64) -> u64 {
        (ino - 1) / self.inodes_per_group
    }

    /// The inode-table block holding inode `ino`.
    pub fn inode_block(&self, ino: u64) -> u64 {
        let g = self.group_of_inode(ino);
        let idx = (ino - 1) % self.inodes_per_group;
        self.groups[g as usize].inode_table[0] + idx * self.inode_size / self.block_size
    }

    /// The block-bitmap block covering `block`.
    pub fn block_bitmap_of(&self, block: u64) -> Option<u64> {
        self.group_of_block(block).map(|g| self.groups[g as usize].block_bitmap)
    }

    /// The inode-bitmap block covering inode `ino`.
    pub fn inode_bitmap_of(&self, ino: u64) -> u64 {
        self.groups[self.group_of_inode(ino) as usize].inode_bitmap
    }

    /// The primary descriptor block describing group `g`.
    pub fn descriptor_block_of_group(&self, g: u64) -> u64 {
        self.groups[0].descriptors.expect("group 0 has descriptors")[0] + g / (self.block_size / DESC_SIZE)
    }

    /// The primary superblock.
    pub fn superblock(&self) -> u64 {
        self.groups[0].superblock.expect("group 0 has the superblock")
    }

    /// Pointers per indirect block.
    pub fn addr_per_block(&self) -> u64 {
        self.block_size / 4
    }

    /// What `block` holds by address.
    pub fn classify(&self, block: u64) -> StaticKind {
        let Some(g) = self.group_of_block(block) else {
            return if block == 0 && self.first_data_block == 1 {
                StaticKind::Boot
            } else {
                StaticKind::Dynamic
            };
        };
        let grp = &self.groups[g as usize];
        let within = |r: Option<[u64; 2]>| r.is_some_and(|[a, b]| (a..=b).contains(&block));
        if grp.superblock == Some(block) {
            StaticKind::Superblock
        } else if within(grp.descriptors) {
            StaticKind::Descriptors
        } else if within(grp.reserved_descriptors) {
            StaticKind::ReservedDescriptors
        } else if block == grp.block_bitmap {
            StaticKind::BlockBitmap
        } else if block == grp.inode_bitmap {
            StaticKind::InodeBitmap
        } else if within(Some(grp.inode_table)) {
            StaticKind::InodeTable
        } else {
            StaticKind::Dynamic
        }
    }

    /// Every static extent `[first, last]` with its kind, ascending. Read
    /// from the groups' own fields, so it holds also when a group's bitmaps
    /// and inode table sit in another group (flex_bg), where
    /// [`Geometry::classify`] (which looks only at the block's own group)
    /// would not see them. The boot block of a 1 KiB file system is not listed.
    pub fn static_extents(&self) -> Vec<([u64; 2], StaticKind)> {
        let mut v = Vec::with_capacity(self.groups.len() * 6);
        for grp in &self.groups {
            if let Some(sb) = grp.superblock {
                v.push(([sb, sb], StaticKind::Superblock));
            }
            if let Some(d) = grp.descriptors {
                v.push((d, StaticKind::Descriptors));
            }
            if let Some(r) = grp.reserved_descriptors {
                v.push((r, StaticKind::ReservedDescriptors));
            }
            v.push(([grp.block_bitmap, grp.block_bitmap], StaticKind::BlockBitmap));
            v.push(([grp.inode_bitmap, grp.inode_bitmap], StaticKind::InodeBitmap));
            v.push((grp.inode_table, StaticKind::InodeTable));
        }
        v.sort_by_key(|(r, _)| r[0]);
        v
    }

    /// Blocks of group `g` taken by its static layout.
    pub fn static_blocks_of_group(&self, g: u64) -> u64 {
        let grp = &self.groups[g as usize];
        let span = |r: Option<[u64; 2]>| r.map_or(0, |[a, b]| b - a + 1);
        grp.superblock.map_or(0, |_| 1)
            + span(grp.descriptors)
            + span(grp.reserved_descriptors)
            + 2
            + span(Some(grp.inode_table))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_super_groups() {
        let with: Vec<u64> = (0..100).filter(|&g| group_has_super(g)).collect();
        assert_eq!(with, vec![0, 1, 3, 5, 7, 9, 25, 27, 49, 81]);
    }

    #[test]
    fn eight_mib_one_kib_blocks_matches_dumpe2fs() {
        // dumpe2fs of `mke2fs -t ext2 -b 1024 img 8192` (e2fsprogs 1.47.0):
        // Group 0: (Blocks 1-8191) Primary superblock at 1, Group descriptors at 2-2,
        // Reserved GDT blocks at 3-33, Block bitmap at 34, Inode bitmap at 35,
        // Inode table at 36-547; 2048 inodes, 31 reserved GDT blocks.
        let g = Geometry::mke2fs(&MkfsParams::new(8 << 20, 1024)).unwrap();
        assert_eq!(g.blocks, 8192);
        assert_eq!(g.inodes, 2048);
        assert_eq!(g.reserved_gdt_blocks, 31);
        assert_eq!(
            g.groups,
            vec![Group {
                group: 0,
                start: 1,
                end: 8191,
                superblock: Some(1),
                descriptors: Some([2, 2]),
                reserved_descriptors: Some([3, 33]),
                block_bitmap: 34,
                inode_bitmap: 35,
                inode_table: [36, 547],
            }]
        );
        assert_eq!(g.classify(0), StaticKind::Boot);
        assert_eq!(g.classify(33), StaticKind::ReservedDescriptors);
        assert_eq!(g.classify(547), StaticKind::InodeTable);
        assert_eq!(g.classify(548), StaticKind::Dynamic);
        assert_eq!(g.inode_block(2), 36);
        assert_eq!(g.inode_block(5), 37);
    }

    #[test]
    fn impossible_parameters_are_errors() {
        assert!(Geometry::mke2fs(&MkfsParams::new(8 << 20, 3000)).is_err());
        assert!(Geometry::mke2fs(&MkfsParams::new(10 * 1024, 1024)).is_err());
        assert!(Geometry::mke2fs(&MkfsParams::new(1 << 46, 1024)).is_err());
    }
}
