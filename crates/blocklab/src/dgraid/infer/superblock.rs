//! The layout from the bytes the file system writes: its superblock (magic
//! 0xEF53 at byte 1024 + 0x38) and its primary group-descriptor table give
//! a [`Geometry`], the same structure the ext2 model derives from mke2fs's
//! rules, so the placement layer is built the same way in both modes.
//!
//! What is not inferred is refused with an error naming the field, never
//! guessed: extents (every file's blocks would stay unknown: placed by
//! default, D-GRAID's fault isolation silently gone), 64bit (64-byte
//! descriptors, 48-bit block numbers; mke2fs allows it only with extents),
//! meta_bg (descriptors spread over the meta-groups), sparse_super2 and
//! bigalloc (other backup and allocation rules), inline data and the other
//! incompat features that change what a block holds. So ext4 is inferred
//! when made with `-O ^extents,^64bit`: its journal is a file like any other
//! (inode 8, block-mapped), its checksums move nothing, and flex_bg is
//! accepted: the descriptors say where each group's bitmaps and table are.

use crate::error::{Error, Location, Result};
use crate::fsmodel::geometry::{group_has_super, Geometry, Group};

/// Byte offset of the superblock on the device.
pub const SUPERBLOCK_OFFSET: u64 = 1024;
const MAGIC: u16 = 0xEF53;
/// Bytes of one group descriptor without the 64bit feature.
const DESC_SIZE: u64 = 32;

const RO_COMPAT_SPARSE_SUPER: u32 = 0x0001;
const RO_COMPAT_BIGALLOC: u32 = 0x0200;
const COMPAT_SPARSE_SUPER2: u32 = 0x0200;

/// incompat features and whether we infer under them.
const INCOMPAT: &[(u32, &str, bool)] = &[
    (0x0001, "compression", false),
    (0x0002, "filetype", true),
    (0x0004, "needs_recovery", true),
    (0x0008, "journal_dev", false),
    (0x0010, "meta_bg", false),
    (0x0040, "extents", false),
    (0x0080, "64bit", false),
    (0x0100, "mmp", true),
    (0x0200, "flex_bg", true),
    (0x0400, "ea_inode", false),
    (0x1000, "dirdata", false),
    (0x2000, "metadata_csum_seed", true),
    (0x4000, "large_dir", true),
    (0x8000, "inline_data", false),
    (0x10000, "encrypt", true),
    (0x20000, "casefold", true),
];

fn u16_at(b: &[u8], off: usize) -> u64 {
    u16::from_le_bytes([b[off], b[off + 1]]) as u64
}

pub(crate) fn u32_at(b: &[u8], off: usize) -> u64 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]) as u64
}

/// Whether the 1024 superblock bytes carry ext2's magic.
pub fn has_magic(sb: &[u8]) -> bool {
    sb.len() >= 1024 && u16_at(sb, 0x38) as u16 == MAGIC
}

fn bad(block: u64, field: &str, message: impl Into<String>) -> Error {
    Error::parse("superblock", Location::Record(block), field, message)
}

/// What the superblock alone says (the groups' bitmaps and tables come from
/// the descriptors).
#[derive(Debug, Clone, PartialEq)]
pub struct Superblock {
    pub block_size: u64,
    pub blocks: u64,
    pub inodes: u64,
    pub first_data_block: u64,
    pub blocks_per_group: u64,
    pub inodes_per_group: u64,
    pub inode_size: u64,
    pub reserved_gdt_blocks: u64,
    pub sparse_super: bool,
    /// incompat filetype: directory entries carry a type byte.
    pub filetype: bool,
}

impl Superblock {
    /// Parse the 1024 superblock bytes (`sb`), found in fs block `block`
    /// of a device the array serves with `block_size`-byte blocks.
    pub fn parse(sb: &[u8], block: u64, block_size: u64) -> Result<Superblock> {
        if sb.len() < 1024 {
            return Err(bad(block, "superblock", format!("{} bytes, need 1024", sb.len())));
        }
        let magic = u16_at(sb, 0x38) as u16;
        if magic != MAGIC {
            return Err(bad(
                block,
                "s_magic",
                format!("0x{magic:04X}, not 0xEF53: not an ext2/3/4 file system"),
            ));
        }
        let log = u32_at(sb, 0x18);
        if log > 6 {
            return Err(bad(
                block,
                "s_log_block_size",
                format!("{log}: blocks of 1024 << {log} B are impossible"),
            ));
        }
        let bs = 1024u64 << log;
        if bs != block_size {
            return Err(bad(
                block,
                "s_log_block_size",
                format!("{bs}-byte blocks, but the array serves {block_size}-byte blocks"),
            ));
        }
        let incompat = u32_at(sb, 0x60) as u32;
        for &(bit, name, ok) in INCOMPAT {
            if incompat & bit != 0 && !ok {
                let hint = match name {
                    "extents" | "64bit" => " (ext4 is inferred when made with -O ^extents,^64bit)",
                    _ => "",
                };
                return Err(bad(
                    block,
                    "s_feature_incompat",
                    format!("{name} (0x{bit:X}) is set: its layout is not inferred{hint}"),
                ));
            }
        }
        let known: u32 = INCOMPAT.iter().map(|x| x.0).fold(0, |a, b| a | b);
        if incompat & !known != 0 {
            return Err(bad(
                block,
                "s_feature_incompat",
                format!("unknown feature bits 0x{:X}", incompat & !known),
            ));
        }
        let ro = u32_at(sb, 0x64) as u32;
        if ro & RO_COMPAT_BIGALLOC != 0 {
            return Err(bad(
                block,
                "s_feature_ro_compat",
                "bigalloc (0x200) is set: clusters are not inferred",
            ));
        }
        let compat = u32_at(sb, 0x5C) as u32;
        if compat & COMPAT_SPARSE_SUPER2 != 0 {
            return Err(bad(
                block,
                "s_feature_compat",
                "sparse_super2 (0x200) is set: its backup groups are not inferred",
            ));
        }
        let rev = u32_at(sb, 0x4C);
        let inode_size = if rev == 0 { 128 } else { u16_at(sb, 0x58) };
        if inode_size < 128 || inode_size > bs || !inode_size.is_power_of_two() {
            return Err(bad(
                block,
                "s_inode_size",
                format!("{inode_size}: not a power of two from 128 to {bs}"),
            ));
        }
        let blocks = u32_at(sb, 0x04);
        let first_data_block = u32_at(sb, 0x14);
        if first_data_block != u64::from(bs == 1024) {
            return Err(bad(
                block,
                "s_first_data_block",
                format!(
                    "{first_data_block}, but {bs}-byte blocks start at {}",
                    u64::from(bs == 1024)
                ),
            ));
        }
        if blocks <= first_data_block {
            return Err(bad(block, "s_blocks_count", format!("{blocks}: no blocks")));
        }
        let bpg = u32_at(sb, 0x20);
        if bpg == 0 || bpg > 8 * bs {
            return Err(bad(
                block,
                "s_blocks_per_group",
                format!("{bpg}: must be 1..={}", 8 * bs),
            ));
        }
        let ipg = u32_at(sb, 0x28);
        if ipg == 0 || ipg > 8 * bs {
            return Err(bad(
                block,
                "s_inodes_per_group",
                format!("{ipg}: must be 1..={}", 8 * bs),
            ));
        }
        let groups = (blocks - first_data_block).div_ceil(bpg);
        let inodes = u32_at(sb, 0x00);
        if inodes != ipg * groups {
            return Err(bad(
                block,
                "s_inodes_count",
                format!("{inodes}, but {groups} groups of {ipg} inodes hold {}", ipg * groups),
            ));
        }
        Ok(Superblock {
            block_size: bs,
            blocks,
            inodes,
            first_data_block,
            blocks_per_group: bpg,
            inodes_per_group: ipg,
            inode_size,
            reserved_gdt_blocks: u16_at(sb, 0xCE),
            sparse_super: ro & RO_COMPAT_SPARSE_SUPER != 0,
            filetype: incompat & 0x0002 != 0,
        })
    }

    pub fn groups(&self) -> u64 {
        (self.blocks - self.first_data_block).div_ceil(self.blocks_per_group)
    }

    /// Blocks of the primary descriptor table.
    pub fn desc_blocks(&self) -> u64 {
        self.groups().div_ceil(self.block_size / DESC_SIZE)
    }

    /// The fs blocks holding the primary descriptor table, `[first, last]`.
    pub fn descriptor_blocks(&self) -> [u64; 2] {
        let first = self.first_data_block + 1;
        [first, first + self.desc_blocks() - 1]
    }

    fn has_super(&self, g: u64) -> bool {
        !self.sparse_super || group_has_super(g)
    }

    /// The whole layout, from this superblock and the primary descriptor
    /// table `gdt` (its blocks, concatenated).
    pub fn geometry(&self, gdt: &[u8]) -> Result<Geometry> {
        let groups = self.groups();
        let desc_blocks = self.desc_blocks();
        let itb = (self.inodes_per_group * self.inode_size).div_ceil(self.block_size);
        let rsv = self.reserved_gdt_blocks;
        let gdt_first = self.descriptor_blocks()[0];
        let mut out = Vec::with_capacity(groups as usize);
        for g in 0..groups {
            let start = self.first_data_block + g * self.blocks_per_group;
            let end = (start + self.blocks_per_group - 1).min(self.blocks - 1);
            let (superblock, descriptors, reserved) = if self.has_super(g) {
                let sb = start;
                (
                    Some(sb),
                    Some([sb + 1, sb + desc_blocks]),
                    (rsv > 0).then(|| [sb + desc_blocks + 1, sb + desc_blocks + rsv]),
                )
            } else {
                (None, None, None)
            };
            let d = (g * DESC_SIZE) as usize;
            let desc_block = gdt_first + g * DESC_SIZE / self.block_size;
            let field = |off: usize, name: &str| -> Result<u64> {
                let v = u32_at(gdt, d + off);
                if v < self.first_data_block || v >= self.blocks {
                    return Err(Error::parse(
                        "group descriptors",
                        Location::Record(desc_block),
                        name,
                        format!(
                            "group {g}: block {v} is outside the file system ({} blocks)",
                            self.blocks
                        ),
                    ));
                }
                Ok(v)
            };
            let block_bitmap = field(0, "bg_block_bitmap")?;
            let inode_bitmap = field(4, "bg_inode_bitmap")?;
            let table = field(8, "bg_inode_table")?;
            if table + itb > self.blocks {
                return Err(Error::parse(
                    "group descriptors",
                    Location::Record(desc_block),
                    "bg_inode_table",
                    format!("group {g}: its {itb} blocks from {table} pass the end of the file system"),
                ));
            }
            out.push(Group {
                group: g,
                start,
                end,
                superblock,
                descriptors,
                reserved_descriptors: reserved,
                block_bitmap,
                inode_bitmap,
                inode_table: [table, table + itb - 1],
            });
        }
        Ok(Geometry {
            block_size: self.block_size,
            blocks: self.blocks,
            first_data_block: self.first_data_block,
            blocks_per_group: self.blocks_per_group,
            inodes_per_group: self.inodes_per_group,
            inode_size: self.inode_size,
            inode_blocks_per_group: itb,
            inodes: self.inodes,
            desc_blocks,
            reserved_gdt_blocks: rsv,
            groups: out,
        })
    }
}
