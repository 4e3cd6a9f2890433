//! The D-GRAID placement layer, in oracle mode: every write arrives with the
//! owner and kind of its block (from the file-system model or an annotated
//! trace), as a semantically-smart disk would infer them.
//!
//! Choices where the paper is silent (each is an option):
//! * level 1 mirrors a home site on a fixed pair of disks (2p, 2p+1), so the
//!   number of disks must be even;
//! * replica disks: `Rotate` puts the r copies on r consecutive disks (mod
//!   D) from a start disk, `Random` on r distinct disks drawn from a seeded
//!   hash of the block; the start disk is the owner's home site for
//!   directory blocks and a seeded hash of the block for static metadata;
//! * a directory's indirect blocks are replicated like its entries;
//! * the journal's blocks (inode 8, ext3/ext4) are replicated like the
//!   static metadata: the kernel reads its block map, and its superblock
//!   unless `noload`, to mount at all, so a journal on one home site would
//!   make the whole file system unmountable when that disk fails;
//! * physical blocks on a member are allocated first-free from a goal: the
//!   block after the previous logical block when that one is on the same
//!   disk (logical runs stay physical runs), else the member's fill cursor
//!   (so a member fills from its start, as a fresh file system does);
//! * a full home site spills to the least used disk with room (counted);
//!   file data may not take the last blocks of a member, kept for metadata
//!   replicas (the static metadata's share plus 1/32 of the member); a
//!   replica that finds every other disk full is dropped (counted);
//! * a mapped block is remapped only when it is reused by another unit of
//!   fault isolation or changes between data and replicated metadata (the
//!   paper's block-reuse detection); otherwise it stays where it is.
//! * diffusion copies stripe a segment over all disks in chunks; they are
//!   performance replicas, never counted for availability nor rebuilt.

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use crate::error::{Error, Result};

/// ext3/ext4's journal inode (`EXT2_JOURNAL_INO`, the superblock's
/// `s_journal_inum` as mke2fs makes it).
pub const JOURNAL_INO: u64 = 8;
use crate::fsmodel::bitmap::Bitmap;
use crate::fsmodel::kind::{BlockKind, Tag};
use crate::fsmodel::Geometry;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DgraidLevel {
    /// Data on one disk (RAID-0-like).
    L0,
    /// Data mirrored on a pair of disks (RAID-1-like).
    L1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Grouping {
    /// Each file is its own unit of fault isolation.
    File,
    /// All files of a directory share a home site.
    Dir,
}

impl Grouping {
    pub fn parse(s: &str) -> Result<Grouping> {
        match s.trim() {
            "file" => Ok(Grouping::File),
            "dir" | "directory" => Ok(Grouping::Dir),
            other => Err(Error::unknown("grouping", other, &["file", "dir"])),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplicaPlacement {
    Rotate,
    Random,
}

impl ReplicaPlacement {
    pub fn parse(s: &str) -> Result<ReplicaPlacement> {
        match s.trim() {
            "rotate" => Ok(ReplicaPlacement::Rotate),
            "random" => Ok(ReplicaPlacement::Random),
            other => Err(Error::unknown("replica placement", other, &["rotate", "random"])),
        }
    }
}

/// Segments' worth of free blocks left above a diffused run that does not
/// continue its predecessor's, for the segments after it (our choice: a
/// sequential scan of up to 16 segments ascends on every disk).
const DIFFUSE_HEADROOM: u64 = 16;

/// Access-driven diffusion settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Diffusion {
    /// Logical blocks per segment.
    pub segment_blocks: u64,
    /// A segment is diffused after this many whole-segment reads (block
    /// reads of the segment ≥ threshold × segment size).
    pub threshold: u64,
    /// Stripe unit of the diffused copy, in blocks.
    pub chunk_blocks: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DgraidConfig {
    pub level: DgraidLevel,
    pub disks: u32,
    /// Copies of naming and system metadata (1..=disks).
    pub meta_copies: u32,
    pub grouping: Grouping,
    pub placement: ReplicaPlacement,
    /// Copies of the data of files marked popular (1 = as any file).
    pub popular_copies: u32,
    pub seed: u64,
    /// Blocks of each member disk (0: sized from the volume, see [`Dgraid::new`]).
    pub disk_blocks: u64,
    pub diffusion: Option<Diffusion>,
}

impl DgraidConfig {
    pub fn new(level: DgraidLevel, disks: u32, meta_copies: u32) -> DgraidConfig {
        DgraidConfig {
            level,
            disks,
            meta_copies,
            grouping: Grouping::File,
            placement: ReplicaPlacement::Rotate,
            popular_copies: 1,
            seed: 1,
            disk_blocks: 0,
            diffusion: None,
        }
    }

    pub fn parse_level(s: &str) -> Result<DgraidLevel> {
        match s.trim() {
            "dgraid0" | "0" => Ok(DgraidLevel::L0),
            "dgraid1" | "1" => Ok(DgraidLevel::L1),
            other => Err(Error::unknown("D-GRAID level", other, &["dgraid0", "dgraid1"])),
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.disks < 2 || self.disks > 64 {
            return Err(Error::config(format!("D-GRAID needs 2..=64 disks, got {}", self.disks)));
        }
        if self.level == DgraidLevel::L1 && !self.disks.is_multiple_of(2) {
            return Err(Error::config(format!(
                "dgraid1 mirrors on pairs of disks: the number of disks must be even, got {}",
                self.disks
            )));
        }
        if self.meta_copies == 0 || self.meta_copies > self.disks {
            return Err(Error::config(format!(
                "--meta-copies must be 1..={} (the number of disks), got {}",
                self.disks, self.meta_copies
            )));
        }
        if self.popular_copies == 0 || self.popular_copies > self.disks {
            return Err(Error::config(format!(
                "popular copies must be 1..={}, got {}",
                self.disks, self.popular_copies
            )));
        }
        if let Some(d) = &self.diffusion {
            if d.segment_blocks == 0 || d.threshold == 0 || d.chunk_blocks == 0 {
                return Err(Error::config(
                    "diffusion: segment, threshold and chunk must be positive",
                ));
            }
        }
        Ok(())
    }
}

/// One physical copy: disk and block on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Copy {
    pub disk: u32,
    pub block: u64,
}

const UNMAPPED: u16 = u16::MAX;

#[derive(Debug, Clone, Copy)]
struct Slot {
    disk: u16,
    phys: u32,
}

const EMPTY: Slot = Slot {
    disk: UNMAPPED,
    phys: 0,
};

/// Counters of the layer.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DgraidCounts {
    pub logical_writes: u64,
    pub logical_reads: u64,
    /// Physical block writes, all copies.
    pub physical_writes: u64,
    /// Physical writes of metadata (everything but file data and file
    /// indirect blocks), all copies.
    pub metadata_writes: u64,
    /// Distinct physical blocks that ever received a metadata write.
    pub unique_metadata_blocks: u64,
    pub physical_reads: u64,
    pub reads_from_diffused: u64,
    pub remaps: u64,
    pub spills: u64,
    /// Metadata replicas that found no disk with room.
    pub dropped_replicas: u64,
    pub freed: u64,
    pub diffused_segments: u64,
    pub per_disk_writes: Vec<u64>,
    pub per_disk_reads: Vec<u64>,
}

/// The layer's state.
pub struct Dgraid {
    cfg: DgraidConfig,
    volume_blocks: u64,
    disk_blocks: u64,
    /// Logical blocks holding static metadata, by address.
    is_static: Bitmap,
    primary: Vec<Slot>,
    second: Vec<Slot>,
    more: FxHashMap<u64, Vec<Slot>>,
    /// Kind of what each mapped block holds was replicated as metadata.
    replicated: Bitmap,
    /// Unit of fault isolation each mapped block was placed for.
    unit: Vec<u64>,
    /// Blocks of a member file data may use (the rest is kept for replicas).
    data_limit: u64,
    home: FxHashMap<u64, u32>,
    dirs: FxHashSet<u64>,
    popular: FxHashSet<u64>,
    used: Vec<u64>,
    cursor: Vec<u64>,
    phys: Vec<Bitmap>,
    meta_written: Vec<Bitmap>,
    live: Bitmap,
    seg_reads: FxHashMap<u64, u64>,
    diffused: FxHashMap<u64, Vec<Slot>>,
    counts: DgraidCounts,
    /// Hold released copies instead of freeing them (`hold_frees`): on real
    /// bytes a copy the durable map still names must not be reused before
    /// the map's change is on disk.
    holding: bool,
    held: Vec<Slot>,
}

fn mix(seed: u64, x: u64) -> u64 {
    let mut z = seed ^ x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Dgraid {
    /// A layer over `cfg.disks` members for a volume of `volume_blocks`
    /// logical blocks laid out as `geo` (whose static blocks are metadata by
    /// address). With `disk_blocks` 0 each member holds its share of the
    /// data copies plus its share of the metadata replicas, plus 1/8 slack.
    pub fn new(cfg: DgraidConfig, geo: &Geometry) -> Result<Dgraid> {
        cfg.validate()?;
        let volume_blocks = geo.blocks;
        let mut is_static = Bitmap::new(volume_blocks);
        for ([a, b], _) in geo.static_extents() {
            for blk in a..=b.min(volume_blocks.saturating_sub(1)) {
                is_static.set(blk);
            }
        }
        let disk_blocks = if cfg.disk_blocks > 0 {
            cfg.disk_blocks
        } else {
            Dgraid::member_blocks_for(&cfg, geo, 0)
        };
        let static_blocks: u64 = (0..geo.group_count()).map(|g| geo.static_blocks_of_group(g)).sum();
        let reserve = (static_blocks * cfg.meta_copies as u64).div_ceil(cfg.disks as u64) + disk_blocks / 32;
        let data_limit = disk_blocks.saturating_sub(reserve).max(disk_blocks / 2);
        if disk_blocks > u32::MAX as u64 {
            return Err(Error::config("members of more than 2^32 blocks are not supported"));
        }
        let n = cfg.disks as usize;
        Ok(Dgraid {
            volume_blocks,
            disk_blocks,
            is_static,
            primary: vec![EMPTY; volume_blocks as usize],
            second: vec![EMPTY; volume_blocks as usize],
            more: FxHashMap::default(),
            replicated: Bitmap::new(volume_blocks),
            unit: vec![0; volume_blocks as usize],
            data_limit,
            home: FxHashMap::default(),
            dirs: FxHashSet::default(),
            popular: FxHashSet::default(),
            used: vec![0; n],
            cursor: vec![0; n],
            phys: (0..n).map(|_| Bitmap::new(disk_blocks)).collect(),
            meta_written: (0..n).map(|_| Bitmap::new(disk_blocks)).collect(),
            live: Bitmap::new(volume_blocks),
            seg_reads: FxHashMap::default(),
            diffused: FxHashMap::default(),
            counts: DgraidCounts {
                per_disk_writes: vec![0; n],
                per_disk_reads: vec![0; n],
                ..DgraidCounts::default()
            },
            cfg,
            holding: false,
            held: Vec::new(),
        })
    }

    /// The default member size: each member's share of the data copies of
    /// the whole volume and of the metadata replicas, plus `extra` blocks of
    /// further copies spread over the members, plus 1/8 slack.
    pub fn member_blocks_for(cfg: &DgraidConfig, geo: &Geometry, extra: u64) -> u64 {
        let d = cfg.disks.max(1) as u64;
        let data_copies: u64 = match cfg.level {
            DgraidLevel::L0 => 1,
            DgraidLevel::L1 => 2,
        };
        let static_blocks: u64 = (0..geo.group_count()).map(|g| geo.static_blocks_of_group(g)).sum();
        let base =
            (geo.blocks * data_copies + extra).div_ceil(d) + (static_blocks * cfg.meta_copies as u64).div_ceil(d);
        base + base / 8 + 64
    }

    pub fn config(&self) -> &DgraidConfig {
        &self.cfg
    }

    pub fn disk_blocks(&self) -> u64 {
        self.disk_blocks
    }

    pub fn counts(&self) -> DgraidCounts {
        let mut c = self.counts.clone();
        c.unique_metadata_blocks = self.meta_written.iter().map(|b| b.count_ones()).sum();
        c
    }

    /// Physical blocks in use on each member.
    pub fn used(&self) -> &[u64] {
        &self.used
    }

    /// Mark `owner` popular: its data gets `popular_copies` copies.
    pub fn mark_popular(&mut self, owner: u64) {
        self.popular.insert(owner);
    }

    /// The home site (first disk of the pair for level 1) of a unit, if set.
    pub fn home_of(&self, unit: u64) -> Option<u32> {
        self.home.get(&unit).copied()
    }

    /// The fault-isolation unit of a tag. Grouping by directory, an xattr
    /// block goes with its owner's parent even when the owner is a
    /// directory: the layer learns that an owner is a directory from its
    /// directory blocks, and its xattr block may come first.
    pub fn unit_of(&self, tag: &Tag) -> u64 {
        match self.cfg.grouping {
            Grouping::File => tag.owner,
            Grouping::Dir if tag.kind == BlockKind::Xattr && tag.parent != 0 => tag.parent,
            Grouping::Dir if self.dirs.contains(&tag.owner) || tag.parent == 0 => tag.owner,
            Grouping::Dir => tag.parent,
        }
    }

    fn pick_home(&mut self, unit: u64) -> u32 {
        if let Some(&h) = self.home.get(&unit) {
            return h;
        }
        let h = match self.cfg.level {
            DgraidLevel::L0 => (0..self.cfg.disks)
                .min_by_key(|&d| (self.used[d as usize], d))
                .expect("disks"),
            DgraidLevel::L1 => {
                let p = (0..self.cfg.disks / 2)
                    .min_by_key(|&p| (self.used[2 * p as usize] + self.used[2 * p as usize + 1], p))
                    .expect("pairs");
                2 * p
            }
        };
        self.home.insert(unit, h);
        h
    }

    /// `n` distinct disks for a block, from `start` (rotate) or a seeded draw.
    fn spread(&self, start: u32, n: u32, block: u64) -> Vec<u32> {
        let d = self.cfg.disks;
        match self.cfg.placement {
            ReplicaPlacement::Rotate => (0..n).map(|i| (start + i) % d).collect(),
            ReplicaPlacement::Random => {
                let mut out = vec![start];
                let mut k = 0u64;
                while (out.len() as u32) < n {
                    k += 1;
                    let c = (mix(self.cfg.seed ^ 0x7265_706c, block.wrapping_mul(131) + k) % d as u64) as u32;
                    if !out.contains(&c) {
                        out.push(c);
                    }
                }
                out
            }
        }
    }

    /// The unit `block` is placed for: 0 for replicated static metadata
    /// (it belongs to no file), else the tag's fault-isolation unit.
    fn placement_unit(&self, block: u64, tag: &Tag, replicated: bool) -> u64 {
        if replicated && (tag.kind.is_static() || self.is_static.get(block)) {
            0
        } else {
            self.unit_of(tag)
        }
    }

    /// `block` is mapped (its slots set) for `unit`: it is live.
    fn mark_mapped(&mut self, block: u64, unit: u64, replicated: bool) {
        self.unit[block as usize] = unit;
        if replicated {
            self.replicated.set(block);
        } else {
            self.replicated.clear(block);
        }
        self.live.set(block);
    }

    /// Whether a block with this tag is replicated as metadata.
    fn is_replicated(&self, block: u64, tag: &Tag) -> bool {
        self.is_static.get(block)
            || tag.kind.is_static()
            || tag.kind == BlockKind::Directory
            || tag.owner == JOURNAL_INO
            || (matches!(tag.kind, BlockKind::Indirect | BlockKind::Xattr) && self.dirs.contains(&tag.owner))
    }

    /// The disks a block written with `tag` belongs on.
    pub fn wanted_disks(&mut self, block: u64, tag: &Tag) -> Vec<u32> {
        if tag.kind == BlockKind::Directory {
            self.dirs.insert(tag.owner);
        }
        let d = self.cfg.disks as u64;
        if self.is_replicated(block, tag) {
            let start = if tag.kind.is_static() || self.is_static.get(block) || tag.owner == 0 {
                (mix(self.cfg.seed, block) % d) as u32
            } else {
                let unit = self.unit_of(tag);
                self.pick_home(unit)
            };
            return self.spread(start, self.cfg.meta_copies, block);
        }
        let unit = self.unit_of(tag);
        let home = self.pick_home(unit);
        let base = match self.cfg.level {
            DgraidLevel::L0 => 1,
            DgraidLevel::L1 => 2,
        };
        let n = if self.popular.contains(&tag.owner) {
            self.cfg.popular_copies.max(base)
        } else {
            base
        };
        if self.cfg.level == DgraidLevel::L1 && n == 2 {
            return vec![home, home + 1];
        }
        let mut out = self.spread(home, n, block);
        if self.cfg.level == DgraidLevel::L1 && !out.contains(&(home + 1)) {
            out[1] = home + 1;
        }
        out
    }

    fn slots(&self, block: u64) -> Vec<Slot> {
        let i = block as usize;
        let mut v = Vec::new();
        if self.primary[i].disk != UNMAPPED {
            v.push(self.primary[i]);
        }
        if self.second[i].disk != UNMAPPED {
            v.push(self.second[i]);
        }
        if let Some(m) = self.more.get(&block) {
            v.extend(m.iter().copied());
        }
        v
    }

    fn set_slots(&mut self, block: u64, s: &[Slot]) {
        let i = block as usize;
        self.primary[i] = s.first().copied().unwrap_or(EMPTY);
        self.second[i] = s.get(1).copied().unwrap_or(EMPTY);
        if s.len() > 2 {
            self.more.insert(block, s[2..].to_vec());
        } else {
            self.more.remove(&block);
        }
    }

    /// Every physical copy of a logical block (none when unmapped).
    pub fn copies(&self, block: u64) -> Vec<Copy> {
        if block >= self.volume_blocks {
            return Vec::new();
        }
        self.slots(block)
            .into_iter()
            .map(|s| Copy {
                disk: s.disk as u32,
                block: s.phys as u64,
            })
            .collect()
    }

    /// The disks holding copies of `block`, as a bit mask.
    pub fn disk_mask(&self, block: u64) -> u64 {
        self.slots(block).iter().fold(0, |m, s| m | 1 << s.disk)
    }

    fn alloc_phys(&mut self, disk: u32, block: u64, replica: bool) -> Option<u32> {
        if !replica && self.used[disk as usize] >= self.data_limit {
            return None;
        }
        let bm = &self.phys[disk as usize];
        let prev = block
            .checked_sub(1)
            .map(|p| self.slots(p))
            .unwrap_or_default()
            .into_iter()
            .find(|s| s.disk as u32 == disk);
        let last = self.disk_blocks - 1;
        let goal = match prev {
            Some(s) => (s.phys as u64 + 1).min(last),
            None => self.cursor[disk as usize].min(last),
        };
        let p = bm
            .first_zero(goal, last)
            .or_else(|| goal.checked_sub(1).and_then(|g| bm.first_zero(0, g)))?;
        self.phys[disk as usize].set(p);
        self.used[disk as usize] += 1;
        self.cursor[disk as usize] = p + 1;
        Some(p as u32)
    }

    fn free_phys(&mut self, s: Slot) {
        if self.holding {
            self.held.push(s);
        } else {
            self.clear_phys(s);
        }
    }

    fn clear_phys(&mut self, s: Slot) {
        if self.phys[s.disk as usize].clear(s.phys as u64) {
            self.used[s.disk as usize] -= 1;
        }
    }

    /// Place `block` on `disks` (or the least used disks with room).
    /// `replica`: replicated metadata (may use the reserve; a copy with no
    /// room anywhere is dropped as long as one copy is placed).
    fn place(&mut self, block: u64, disks: &[u32], replica: bool) -> Result<Vec<Slot>> {
        let mut out: Vec<Slot> = Vec::with_capacity(disks.len());
        for &d in disks {
            let mut placed = self.alloc_phys(d, block, replica).map(|p| (d, p));
            if placed.is_none() {
                // Spill: the least used disk with room not holding a copy.
                self.counts.spills += 1;
                let mut cands: Vec<u32> = (0..self.cfg.disks)
                    .filter(|c| !out.iter().any(|s| s.disk as u32 == *c) && !disks.contains(c))
                    .collect();
                cands.sort_by_key(|&c| (self.used[c as usize], c));
                for c in cands {
                    if let Some(p) = self.alloc_phys(c, block, replica) {
                        placed = Some((c, p));
                        break;
                    }
                }
            }
            match placed {
                Some((disk, p)) => out.push(Slot {
                    disk: disk as u16,
                    phys: p,
                }),
                None if replica => self.counts.dropped_replicas += 1,
                None => {}
            }
        }
        if out.is_empty() || (!replica && out.len() < disks.len()) {
            for s in out {
                self.free_phys(s);
            }
            return Err(Error::config(format!(
                "the D-GRAID members are full ({} blocks each): give larger members",
                self.disk_blocks
            )));
        }
        Ok(out)
    }

    /// A write of logical `block` holding `tag`: maps it (remapping a reused
    /// block whose copies sit elsewhere), marks it live, and returns the
    /// physical writes (every copy, plus a diffused copy if any).
    pub fn write(&mut self, block: u64, tag: &Tag) -> Result<Vec<Copy>> {
        if block >= self.volume_blocks {
            return Err(Error::config(format!(
                "block {block} is beyond the volume ({} blocks)",
                self.volume_blocks
            )));
        }
        self.counts.logical_writes += 1;
        let wanted = self.wanted_disks(block, tag);
        let replicated = self.is_replicated(block, tag);
        let have = self.slots(block);
        let unit = self.placement_unit(block, tag, replicated);
        let same = !have.is_empty() && self.unit[block as usize] == unit && self.replicated.get(block) == replicated;
        let slots = if same {
            have
        } else {
            if !have.is_empty() {
                self.counts.remaps += 1;
                for s in have {
                    self.free_phys(s);
                }
            }
            let s = self.place(block, &wanted, replicated)?;
            self.set_slots(block, &s);
            s
        };
        self.mark_mapped(block, unit, replicated);
        let mut out: Vec<Copy> = slots
            .iter()
            .map(|s| Copy {
                disk: s.disk as u32,
                block: s.phys as u64,
            })
            .collect();
        if let Some(df) = self.cfg.diffusion {
            if let Some(dc) = self.diffused.get(&(block / df.segment_blocks)) {
                let s = dc[(block % df.segment_blocks) as usize];
                out.push(Copy {
                    disk: s.disk as u32,
                    block: s.phys as u64,
                });
            }
        }
        let meta = replicated;
        for c in &out {
            self.counts.physical_writes += 1;
            self.counts.per_disk_writes[c.disk as usize] += 1;
            if meta {
                self.counts.metadata_writes += 1;
                self.meta_written[c.disk as usize].set(c.block);
            }
        }
        Ok(out)
    }

    /// The file system wrote the block bitmap of the group starting at
    /// `first`: the live map takes its contents (one bit per block) and the
    /// copies of blocks it shows free are released.
    pub fn bitmap_written(&mut self, first: u64, bits: &[u64], nblocks: u64) {
        for j in 0..nblocks {
            let b = first + j;
            if b >= self.volume_blocks || self.is_static.get(b) {
                continue;
            }
            let set = bits[(j / 64) as usize] >> (j % 64) & 1 == 1;
            if set {
                self.live.set(b);
            } else if self.live.clear(b) || self.primary[b as usize].disk != UNMAPPED {
                for s in self.slots(b) {
                    self.free_phys(s);
                    self.counts.freed += 1;
                }
                self.set_slots(b, &[]);
                self.replicated.clear(b);
            }
        }
    }

    /// A read of logical `block`: the copy it is served from (the diffused
    /// copy when its segment is diffused, else the first copy on a disk not
    /// in `failed`), or None when no copy is readable.
    pub fn read(&mut self, block: u64, failed: u64) -> Option<Copy> {
        if block >= self.volume_blocks {
            return None;
        }
        self.counts.logical_reads += 1;
        let mut from = None;
        if let Some(df) = self.cfg.diffusion {
            let seg = block / df.segment_blocks;
            if let Some(dc) = self.diffused.get(&seg) {
                let s = dc[(block % df.segment_blocks) as usize];
                if failed >> s.disk & 1 == 0 {
                    self.counts.reads_from_diffused += 1;
                    from = Some(s);
                }
            } else {
                let n = self.seg_reads.entry(seg).or_insert(0);
                *n += 1;
                if *n >= df.threshold * df.segment_blocks {
                    self.diffuse(seg);
                }
            }
        }
        let from = from.or_else(|| self.slots(block).into_iter().find(|s| failed >> s.disk & 1 == 0))?;
        self.counts.physical_reads += 1;
        self.counts.per_disk_reads[from.disk as usize] += 1;
        Some(Copy {
            disk: from.disk as u32,
            block: from.phys as u64,
        })
    }

    /// Give segment `seg` a copy striped over all disks.
    fn diffuse(&mut self, seg: u64) {
        let Some(df) = self.cfg.diffusion else { return };
        // Diffused copies sit among each member's last free blocks, given
        // out in ascending order, so that a segment's chunks on one disk are
        // one physical run (a sequential read of them is one operation). A
        // segment with a diffused predecessor at most `DIFFUSE_HEADROOM`
        // segments back continues after it (room left for those between)
        // when those blocks are free; otherwise its run starts below room
        // for `DIFFUSE_HEADROOM` more segments, so that the copies of a
        // sequential scan's segments ascend on every disk (no seek back
        // between segments).
        let n = self.cfg.disks as usize;
        let disk_of = |o: u64| (((seg * df.segment_blocks + o) / df.chunk_blocks) % n as u64) as usize;
        let mut need = vec![0u64; n];
        for o in 0..df.segment_blocks {
            need[disk_of(o)] += 1;
        }
        let mut places: Vec<std::vec::IntoIter<u64>> = Vec::with_capacity(n);
        for (d, &k) in need.iter().enumerate() {
            let bm = &self.phys[d];
            // After the nearest diffused predecessor, room left for the
            // segments between them.
            let after = (1..=DIFFUSE_HEADROOM.min(seg))
                .find_map(|j| self.diffused.get(&(seg - j)).map(|c| (j, c)))
                .and_then(|(j, c)| {
                    let end = c
                        .iter()
                        .filter(|s| s.disk as usize == d)
                        .map(|s| s.phys as u64 + 1)
                        .max()?;
                    Some(end + (j - 1) * k)
                });
            if let Some(p) = after.filter(|&p| p + k <= self.disk_blocks && (p..p + k).all(|b| !bm.get(b))) {
                places.push((p..p + k).collect::<Vec<_>>().into_iter());
                continue;
            }
            let mut free: Vec<u64> = (0..self.disk_blocks)
                .rev()
                .filter(|&p| !bm.get(p))
                .take((k * (1 + DIFFUSE_HEADROOM)) as usize)
                .collect();
            if (free.len() as u64) < k {
                return;
            }
            free.reverse();
            if free.len() as u64 == k * (1 + DIFFUSE_HEADROOM) {
                free.truncate(k as usize);
            } else {
                // Not enough room for the headroom: the last k free blocks.
                free.drain(..free.len() - k as usize);
            }
            places.push(free.into_iter());
        }
        let mut copy = Vec::with_capacity(df.segment_blocks as usize);
        for o in 0..df.segment_blocks {
            let d = disk_of(o);
            let p = places[d].next().expect("counted");
            self.phys[d].set(p);
            self.used[d] += 1;
            copy.push(Slot {
                disk: d as u16,
                phys: p as u32,
            });
        }
        self.counts.diffused_segments += 1;
        self.diffused.insert(seg, copy);
    }

    /// Whether the conservative map holds `block` live.
    pub fn is_live(&self, block: u64) -> bool {
        self.live.get(block)
    }

    /// The live member blocks of `disk` (copies of live logical blocks;
    /// diffused copies excluded), ascending: what a live-block rebuild of
    /// that disk must copy.
    pub fn live_member_blocks(&self, disk: u32) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .live
            .ones()
            .flat_map(|b| self.slots(b))
            .filter(|s| s.disk as u32 == disk)
            .map(|s| s.phys as u64)
            .collect();
        v.sort_unstable();
        v
    }

    /// The live-block rebuild of member `disk` with the disks in `failed`
    /// lost (`disk` among them): for each live member block, ascending, a
    /// surviving copy to read it from (None: no copy survives, e.g. level 0
    /// file data). The timed rebuild copies exactly these blocks.
    pub fn rebuild_sources(&self, disk: u32, failed: u64) -> Vec<(u64, Option<Copy>)> {
        let mut v: Vec<(u64, Option<Copy>)> = self
            .live
            .ones()
            .filter_map(|b| {
                let slots = self.slots(b);
                let on = slots.iter().find(|s| s.disk as u32 == disk)?;
                let src = slots
                    .iter()
                    .find(|s| s.disk as u32 != disk && failed >> s.disk & 1 == 0)
                    .map(|s| Copy {
                        disk: s.disk as u32,
                        block: s.phys as u64,
                    });
                Some((on.phys as u64, src))
            })
            .collect();
        v.sort_unstable_by_key(|x| x.0);
        v
    }

    /// From now on, copies released by a remap or a free are held (still
    /// allocated) until [`Dgraid::release_held`]: the real executor's map on
    /// disk may still name them.
    pub fn hold_frees(&mut self) {
        self.holding = true;
    }

    /// Copies held now (see [`Dgraid::hold_frees`]).
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Free the copies held since the last call (the map naming their
    /// release is durable now).
    pub fn release_held(&mut self) {
        for s in std::mem::take(&mut self.held) {
            self.clear_phys(s);
        }
    }

    /// The file system freed `block` (its bitmap says so): the live map
    /// drops it and its copies are released.
    pub fn free(&mut self, block: u64) {
        if block >= self.volume_blocks {
            return;
        }
        self.live.clear(block);
        for s in self.slots(block) {
            self.free_phys(s);
            self.counts.freed += 1;
        }
        self.set_slots(block, &[]);
        self.replicated.clear(block);
    }

    /// Put back a mapping saved earlier (the real executor's map at open):
    /// `block` holding `tag` lives at `copies`. Home sites, directories and
    /// the allocation follow from what is put back.
    pub fn restore(&mut self, block: u64, tag: &Tag, copies: &[Copy]) -> Result<()> {
        if block >= self.volume_blocks || copies.is_empty() {
            return Err(Error::config(format!(
                "restore: block {block} is beyond the volume or has no copy"
            )));
        }
        if let Some(c) = copies
            .iter()
            .find(|c| c.disk >= self.cfg.disks || c.block >= self.disk_blocks)
        {
            return Err(Error::config(format!(
                "restore: block {block}: copy on disk {} block {} is outside the members",
                c.disk, c.block
            )));
        }
        if !self.slots(block).is_empty() {
            return Err(Error::config(format!("restore: block {block} is mapped twice")));
        }
        if let Some(c) = copies.iter().find(|c| self.phys[c.disk as usize].get(c.block)) {
            return Err(Error::config(format!(
                "restore: block {block}: disk {} block {} already holds another block",
                c.disk, c.block
            )));
        }
        if tag.kind == BlockKind::Directory {
            self.dirs.insert(tag.owner);
        }
        let replicated = self.is_replicated(block, tag);
        let unit = self.placement_unit(block, tag, replicated);
        if !replicated {
            let first = copies[0].disk;
            let home = match self.cfg.level {
                DgraidLevel::L0 => first,
                DgraidLevel::L1 => first & !1,
            };
            self.home.entry(unit).or_insert(home);
        }
        let slots: Vec<Slot> = copies
            .iter()
            .map(|c| Slot {
                disk: c.disk as u16,
                phys: c.block as u32,
            })
            .collect();
        for s in &slots {
            if self.phys[s.disk as usize].set(s.phys as u64) {
                self.used[s.disk as usize] += 1;
            }
            let c = &mut self.cursor[s.disk as usize];
            *c = (*c).max(s.phys as u64 + 1);
        }
        self.set_slots(block, &slots);
        self.mark_mapped(block, unit, replicated);
        Ok(())
    }
}
