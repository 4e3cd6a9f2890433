//! Inference of ext2 structure from the block writes alone: Alexander's
//! semantically-smart disk (D-GRAID, FAST'04 §6), as a [`Classifier`].
//!
//! * [`superblock`]: the layout from the superblock and descriptor writes;
//! * [`inode`]: what an inode record points to;
//! * [`dirent`]: the children a directory block names (their parent);
//! * [`deferred`]: the bounded list of blocks written before their owner;
//! * [`measure`]: an ext2 image written through the inferrer in an order,
//!   against the truth (`debugfs`'s), and the placement it leads to.
//!
//! How a write is handled:
//! * before the layout is known (mke2fs zeroes the superblock area first,
//!   and writes its inode tables and bitmaps before its primary
//!   superblock) every write is held, newest contents,
//!   without bound (nothing can be placed before the layout: at most the
//!   volume). Once the superblock and the whole primary descriptor table
//!   have been written, `Geometry` is answered and the held writes are
//!   replayed: the static metadata first (so the inode tables name the
//!   owners of the rest), then the others in their arrival order;
//! * static blocks (by address) are stored as shared metadata. An
//!   inode-table write is compared with its previous contents (block
//!   differencing); each changed inode's pointers are classified by the
//!   inode's type and the pointer's index: direct pointers of a directory
//!   name directory blocks, of a file or slow symlink data blocks; pointer
//!   12 an indirect block, 13 a double and 14 a triple indirect block, whose
//!   children are indirect blocks one level down, and at the last level data
//!   (directory blocks for a directory). Fast symlinks, devices, fifos and
//!   sockets have no pointers; an inode owning no sectors (`i_blocks` 0) is
//!   taken as having none; an inode with the extents flag is skipped (its
//!   blocks stay unknown). A directory block's entries give their inodes'
//!   parent (0 until seen); a block-bitmap write that shows a block free
//!   drops what was inferred of it and answers `Free` if it was stored;
//! * a data-region block is stored under its owner's tag when a pointer to
//!   it has been seen; else it waits on the deferred list (newest contents)
//!   until one is, and is then answered as `Store`;
//! * **overflow policy** (the paper gives none): when the list holds more
//!   than `deferred_max` blocks, its oldest block is stored now under a
//!   default tag ([`default_tag`]: data of a pseudo owner shared by 64
//!   consecutive blocks, so that unknown blocks spread over the disks) and
//!   answered again as `Retag` when its owner appears. A flush does the
//!   same for the whole list;
//! * **block reuse**: a pointer to a block already stored under another
//!   tag (another owner, kind or parent) answers `Retag`. Every pointer
//!   seen is kept as a claim (per owner and place: inode or indirect
//!   block); when differencing shows an owner dropped it (truncate,
//!   delete, an indirect block rewritten), the block falls back to the
//!   newest remaining claim, so a stale pointer written late is undone. The classifier
//!   keeps the contents of indirect and directory blocks (and of blocks it
//!   placed by default that parse as either) so that a block's pointers or
//!   entries are followed when its owner becomes known or changes.
//!
//! Blocks are the file system's (`block_size` bytes, which the array is
//! configured with; a superblock saying otherwise is refused). An error
//! (a superblock or descriptor table that is not inferred) is kept
//! ([`Classifier::refused`]); from then on every write is ignored.

pub mod deferred;
pub mod dirent;
pub mod inode;
pub mod measure;
pub mod superblock;

#[cfg(test)]
mod tests;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

use crate::dgraid::classify::{Action, Classifier};
use crate::error::{Error, Result};
use crate::fsmodel::geometry::{Geometry, StaticKind};
use crate::fsmodel::kind::{BlockKind, Tag};

use deferred::Deferred;
use inode::InodeView;
use superblock::{u32_at, Superblock, SUPERBLOCK_OFFSET};

/// Owners from here up are not inodes (ext2 has at most 2^32) but the
/// default placement units of blocks placed before their owner is known.
pub const DEFAULT_OWNER_BASE: u64 = 1 << 40;
/// Consecutive blocks sharing one default placement unit.
pub const DEFAULT_RUN: u64 = 64;

/// The tag of a block placed before its owner is known: data of a pseudo
/// owner shared by the `DEFAULT_RUN` blocks around it, so that unknown
/// blocks spread over the disks (each run gets a home site by the layer's
/// greedy rule) instead of filling one, and runs of a file stay together.
pub fn default_tag(block: u64) -> Tag {
    Tag::of(DEFAULT_OWNER_BASE + block / DEFAULT_RUN, BlockKind::Data, 0)
}

/// Whether `tag` is a default placement's.
pub fn is_default(tag: &Tag) -> bool {
    tag.owner >= DEFAULT_OWNER_BASE
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct InferConfig {
    /// Bytes of one fs block (the array's block).
    pub block_size: u64,
    /// Blocks the deferred list may hold before its oldest is placed by default.
    pub deferred_max: usize,
}

/// What the inferrer did.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct InferCounts {
    /// Fs blocks written to it.
    pub writes: u64,
    /// Writes held because the layout was not known yet.
    pub held_before_layout: u64,
    /// Writes of data-region blocks whose owner was unknown (deferred).
    pub deferred: u64,
    /// Most blocks on the deferred list at once.
    pub deferred_peak: u64,
    /// Deferred blocks stored once their owner became known.
    pub released: u64,
    /// Deferred blocks placed by default because the list was full.
    pub overflow_placed: u64,
    /// Deferred blocks placed by default at a flush.
    pub flush_placed: u64,
    pub retags: u64,
    pub frees: u64,
    /// Inodes skipped because their block map is an extent tree.
    pub extent_inodes: u64,
    /// Pointers naming a block outside the file system (ignored).
    pub bad_pointers: u64,
}

/// What is known of a data-region block: its tag, and for an indirect
/// block its level (1 single, 2 double, 3 triple; 0 otherwise).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Known {
    tag: Tag,
    level: u8,
    /// The kind of the blocks at the bottom of the owner's tree: directory
    /// blocks for a directory, data otherwise.
    leaf: BlockKind,
    /// Where the pointer is: 0 in the owner's inode, else the indirect
    /// block holding it (an owner may point at a block from both).
    via: u64,
}

/// The layout, once inferred.
struct Layout {
    geo: Geometry,
    sb: Superblock,
    /// Static extents `[first, last]`, kind, group; ascending.
    extents: Vec<(u64, u64, StaticKind, u64)>,
}

impl Layout {
    fn new(geo: Geometry, sb: Superblock) -> Layout {
        let mut extents = Vec::new();
        for grp in &geo.groups {
            let g = grp.group;
            let mut push = |r: [u64; 2], k| extents.push((r[0], r[1], k, g));
            if let Some(s) = grp.superblock {
                push([s, s], StaticKind::Superblock);
            }
            if let Some(d) = grp.descriptors {
                push(d, StaticKind::Descriptors);
            }
            if let Some(r) = grp.reserved_descriptors {
                push(r, StaticKind::ReservedDescriptors);
            }
            push([grp.block_bitmap; 2], StaticKind::BlockBitmap);
            push([grp.inode_bitmap; 2], StaticKind::InodeBitmap);
            push(grp.inode_table, StaticKind::InodeTable);
        }
        extents.sort_by_key(|e| e.0);
        Layout { geo, sb, extents }
    }

    /// Kind by address, and the group whose table or bitmap it is.
    fn classify(&self, block: u64) -> (StaticKind, u64) {
        if block == 0 && self.geo.first_data_block == 1 {
            return (StaticKind::Boot, 0);
        }
        let i = self.extents.partition_point(|e| e.0 <= block);
        if i > 0 {
            let e = self.extents[i - 1];
            if block <= e.1 {
                return (e.2, e.3);
            }
        }
        (StaticKind::Dynamic, 0)
    }

    fn in_data_region(&self, block: u64) -> bool {
        block >= self.geo.first_data_block && block < self.geo.blocks && self.classify(block).0 == StaticKind::Dynamic
    }
}

/// The block pointers an inode record holds itself (none for records
/// without pointers), and its xattr block.
fn root_pointers(rec: &[u8]) -> Vec<u64> {
    let mut out = match inode::view(rec) {
        InodeView::Pointers { ptrs, .. } => ptrs.iter().copied().filter(|&p| p != 0).collect(),
        _ => Vec::new(),
    };
    match inode::xattr_block(rec) {
        0 => {}
        x => out.push(x),
    }
    out
}

/// The inference classifier.
pub struct Inferrer {
    cfg: InferConfig,
    refused: Option<Error>,
    sb: Option<Superblock>,
    /// Writes before the layout is known.
    early: Deferred,
    layout: Option<Layout>,
    known: FxHashMap<u64, Known>,
    /// Every pointer seen to a block and not withdrawn since, oldest
    /// first, one per owner and place (inode or indirect block): the
    /// block's tag is the newest. When an owner
    /// drops its pointer (truncate, delete, an indirect block rewritten),
    /// its claim goes and the block falls back to the newest other claim
    /// — a stale pointer written late (an inode deleted after its blocks
    /// went to another file) is undone when its deletion is written.
    claims: FxHashMap<u64, Vec<Known>>,
    /// Whose indirect block the kept contents of a block were followed
    /// for: the claims made through them are that owner's.
    followed_for: FxHashMap<u64, u64>,
    /// The tag each data-region block is stored under in the array.
    stored: FxHashMap<u64, Tag>,
    /// Last contents of inode-table blocks, primary descriptors, and of
    /// indirect and directory blocks (or blocks that look like them).
    shadow: FxHashMap<u64, Vec<u8>>,
    parent: FxHashMap<u64, u64>,
    /// Every (directory, directory block) whose entries name an inode: a
    /// hard-linked file has several; its parent is the lowest directory.
    named_by: FxHashMap<u64, Vec<(u64, u64)>>,
    /// The children each directory block named when last read.
    names_in: FxHashMap<u64, (u64, Vec<u64>)>,
    blocks_of: FxHashMap<u64, FxHashSet<u64>>,
    deferred: Deferred,
    counts: InferCounts,
}

impl Inferrer {
    pub fn new(cfg: InferConfig) -> Result<Inferrer> {
        if !(1024..=65536).contains(&cfg.block_size) || !cfg.block_size.is_power_of_two() {
            return Err(Error::config(format!(
                "block size must be a power of two from 1024 to 65536 bytes, got {}",
                cfg.block_size
            )));
        }
        Ok(Inferrer {
            cfg,
            refused: None,
            sb: None,
            early: Deferred::default(),
            layout: None,
            known: FxHashMap::default(),
            claims: FxHashMap::default(),
            followed_for: FxHashMap::default(),
            stored: FxHashMap::default(),
            shadow: FxHashMap::default(),
            parent: FxHashMap::default(),
            named_by: FxHashMap::default(),
            names_in: FxHashMap::default(),
            blocks_of: FxHashMap::default(),
            deferred: Deferred::default(),
            counts: InferCounts::default(),
        })
    }

    pub fn counts(&self) -> &InferCounts {
        &self.counts
    }

    /// The layout, once inferred.
    pub fn geometry(&self) -> Option<&Geometry> {
        self.layout.as_ref().map(|l| &l.geo)
    }

    /// Blocks on the deferred list now.
    pub fn deferred_len(&self) -> usize {
        self.deferred.len()
    }

    /// The inferred tag of a data-region block, if any.
    pub fn tag_of(&self, block: u64) -> Option<Tag> {
        self.known.get(&block).map(|k| k.tag)
    }

    /// A write of whole blocks, or the error that makes the inferrer refuse
    /// this file system.
    pub fn write_checked(&mut self, block: u64, data: &[u8]) -> Result<Vec<Action>> {
        if let Some(e) = &self.refused {
            return Err(Error::config(e.to_string()));
        }
        let bs = self.cfg.block_size as usize;
        if !data.len().is_multiple_of(bs) {
            return Err(Error::config(format!(
                "a write of {} bytes at block {block} is not whole {bs}-byte blocks",
                data.len()
            )));
        }
        let mut out = Vec::new();
        for (i, chunk) in data.chunks(bs).enumerate() {
            if let Err(e) = self.write_block(block + i as u64, chunk, &mut out) {
                let msg = e.to_string();
                self.refused = Some(e);
                return Err(Error::config(msg));
            }
        }
        Ok(out)
    }

    fn write_block(&mut self, b: u64, data: &[u8], out: &mut Vec<Action>) -> Result<()> {
        self.counts.writes += 1;
        if self.layout.is_none() {
            self.counts.held_before_layout += 1;
            self.early.put(b, data.to_vec());
            let bs = self.cfg.block_size;
            if b == SUPERBLOCK_OFFSET / bs {
                let off = (SUPERBLOCK_OFFSET % bs) as usize;
                let raw = &data[off..off + 1024];
                // mke2fs first zeroes the old superblock area: a write there
                // without the magic is not a superblock (yet), nor an error.
                self.sb = if superblock::has_magic(raw) {
                    Some(Superblock::parse(raw, b, bs)?)
                } else {
                    None
                };
            }
            return self.try_layout(out);
        }
        self.write_known(b, data, out)
    }

    /// With the superblock and the whole primary descriptor table held,
    /// build the layout and replay what was held.
    fn try_layout(&mut self, out: &mut Vec<Action>) -> Result<()> {
        let Some(sb) = self.sb.clone() else { return Ok(()) };
        let [a, z] = sb.descriptor_blocks();
        if !(a..=z).all(|d| self.early.get(d).is_some()) {
            return Ok(());
        }
        let mut gdt = Vec::with_capacity(((z - a + 1) * sb.block_size) as usize);
        for d in a..=z {
            gdt.extend_from_slice(self.early.get(d).expect("held"));
        }
        let geo = sb.geometry(&gdt)?;
        out.push(Action::Geometry(geo.clone()));
        let layout = Layout::new(geo, sb);
        let held = self.early.drain();
        let (statics, rest): (Vec<_>, Vec<_>) = held
            .into_iter()
            .partition(|(b, _)| !matches!(layout.classify(*b).0, StaticKind::Dynamic | StaticKind::BlockBitmap));
        self.layout = Some(layout);
        for (b, d) in statics.into_iter().chain(rest) {
            self.write_known(b, &d, out)?;
        }
        Ok(())
    }

    fn layout(&self) -> &Layout {
        self.layout.as_ref().expect("layout known")
    }

    fn write_known(&mut self, b: u64, data: &[u8], out: &mut Vec<Action>) -> Result<()> {
        let (kind, group) = self.layout().classify(b);
        match kind {
            StaticKind::Dynamic => return self.write_dynamic(b, data, out),
            StaticKind::Superblock if b == self.layout().geo.superblock() => {
                let bs = self.cfg.block_size;
                let off = (SUPERBLOCK_OFFSET % bs) as usize;
                let sb = Superblock::parse(&data[off..off + 1024], b, bs)?;
                if sb != self.layout().sb {
                    return Err(Error::config(format!(
                        "superblock rewritten at block {b} with another layout (resized?): not inferred"
                    )));
                }
            }
            StaticKind::Descriptors if group == 0 => {
                self.shadow.insert(b, data.to_vec());
                let [a, z] = self.layout().sb.descriptor_blocks();
                if (a..=z).all(|d| self.shadow.contains_key(&d)) {
                    let gdt: Vec<u8> = (a..=z).flat_map(|d| self.shadow[&d].iter().copied()).collect();
                    if self.layout().sb.geometry(&gdt)? != self.layout().geo {
                        return Err(Error::config(format!(
                            "group descriptors rewritten at block {b} moved a bitmap or inode table: not inferred"
                        )));
                    }
                }
            }
            _ => {}
        }
        out.push(Action::Store {
            block: b,
            tag: Tag::shared(kind.block_kind().unwrap_or(BlockKind::Data)),
            data: data.to_vec(),
        });
        match kind {
            StaticKind::InodeTable => self.inode_table_written(b, group, data, out),
            StaticKind::BlockBitmap => self.bitmap_written(group, data, out),
            _ => {}
        }
        Ok(())
    }

    fn write_dynamic(&mut self, b: u64, data: &[u8], out: &mut Vec<Action>) -> Result<()> {
        if !self.layout().in_data_region(b) {
            // Past the file system's end: nothing can own it.
            out.push(Action::Store {
                block: b,
                tag: default_tag(b),
                data: data.to_vec(),
            });
            return Ok(());
        }
        if let Some(k) = self.known.get(&b).copied() {
            self.stored.insert(b, k.tag);
            out.push(Action::Store {
                block: b,
                tag: k.tag,
                data: data.to_vec(),
            });
            self.follow(b, k, data.to_vec(), out);
            return Ok(());
        }
        self.counts.deferred += 1;
        self.deferred.put(b, data.to_vec());
        self.counts.deferred_peak = self.counts.deferred_peak.max(self.deferred.len() as u64);
        while self.deferred.len() > self.cfg.deferred_max {
            let (ob, od) = self.deferred.pop_oldest().expect("over the bound");
            self.counts.overflow_placed += 1;
            self.place_default(ob, od, out);
        }
        Ok(())
    }

    /// Store a block whose owner is unknown under the default tag, keeping
    /// its contents if it may turn out to be an indirect or directory block.
    fn place_default(&mut self, b: u64, data: Vec<u8>, out: &mut Vec<Action>) {
        self.stored.insert(b, default_tag(b));
        if self.may_be_pointers(&data) || dirent::is_dir_block(&data, self.layout().sb.filetype) {
            self.shadow.insert(b, data.clone());
            self.followed_for.remove(&b);
        }
        out.push(Action::Store {
            block: b,
            tag: default_tag(b),
            data,
        });
    }

    /// Every word 0 or a block of the file system, and one not 0.
    fn may_be_pointers(&self, data: &[u8]) -> bool {
        let geo = &self.layout().geo;
        let mut any = false;
        for w in data.chunks_exact(4) {
            let p = u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as u64;
            if p != 0 {
                if p < geo.first_data_block || p >= geo.blocks {
                    return false;
                }
                any = true;
            }
        }
        any
    }

    /// Block differencing of an inode-table block of `group`.
    fn inode_table_written(&mut self, b: u64, group: u64, data: &[u8], out: &mut Vec<Action>) {
        let (isz, ipg, first) = {
            let geo = &self.layout().geo;
            (
                geo.inode_size as usize,
                geo.inodes_per_group,
                geo.groups[group as usize].inode_table[0],
            )
        };
        let per_block = data.len() / isz;
        let old = self.shadow.insert(b, data.to_vec());
        for i in 0..per_block {
            let rec = &data[i * isz..(i + 1) * isz];
            let unchanged = match &old {
                Some(o) => &o[i * isz..(i + 1) * isz] == rec,
                None => rec.iter().all(|&x| x == 0),
            };
            if unchanged {
                continue;
            }
            let index = (b - first) * per_block as u64 + i as u64;
            if index >= ipg {
                continue;
            }
            let ino = group * ipg + index + 1;
            let before = old.as_ref().map(|o| &o[i * isz..(i + 1) * isz]);
            let gone = before.map(root_pointers).unwrap_or_default();
            let now = root_pointers(rec);
            for p in gone.into_iter().filter(|p| !now.contains(p)) {
                self.withdraw(p, ino, 0, out);
            }
            self.inode_changed(ino, rec, out);
        }
    }

    fn inode_changed(&mut self, ino: u64, rec: &[u8], out: &mut Vec<Action>) {
        let x = inode::xattr_block(rec);
        if x != 0 {
            let parent = self.parent.get(&ino).copied().unwrap_or(0);
            self.assign(x, Tag::of(ino, BlockKind::Xattr, parent), 0, BlockKind::Xattr, 0, out);
        }
        match inode::view(rec) {
            InodeView::NoBlocks => {}
            InodeView::Extents => self.counts.extent_inodes += 1,
            InodeView::Pointers { dir, ptrs } => {
                let parent = self.parent.get(&ino).copied().unwrap_or(0);
                let leaf = if dir { BlockKind::Directory } else { BlockKind::Data };
                for (i, &p) in ptrs.iter().enumerate() {
                    if p == 0 {
                        continue;
                    }
                    let (kind, level) = match i {
                        0..=11 => (leaf, 0),
                        12 => (BlockKind::Indirect, 1),
                        13 => (BlockKind::Indirect, 2),
                        _ => (BlockKind::Indirect, 3),
                    };
                    self.assign(p, Tag::of(ino, kind, parent), level, leaf, 0, out);
                }
            }
        }
    }

    /// A pointer says `p` holds `tag` (at indirect `level`).
    fn assign(&mut self, p: u64, tag: Tag, level: u8, leaf: BlockKind, via: u64, out: &mut Vec<Action>) {
        let layout = self.layout();
        if p < layout.geo.first_data_block || p >= layout.geo.blocks {
            self.counts.bad_pointers += 1;
            return;
        }
        if !layout.in_data_region(p) {
            // The resize inode points at the reserved descriptors: static.
            return;
        }
        let k = Known { tag, level, leaf, via };
        let cl = self.claims.entry(p).or_default();
        cl.retain(|c| (c.tag.owner, c.via) != (tag.owner, via));
        cl.push(k);
        self.make_effective(p, k, out);
    }

    /// `k` becomes what `p` holds: store it if deferred, retag it if
    /// stored under another tag, follow its contents.
    fn make_effective(&mut self, p: u64, k: Known, out: &mut Vec<Action>) {
        let tag = k.tag;
        let prev = self.known.insert(p, k);
        if prev == Some(k) {
            return;
        }
        if let Some(pk) = prev {
            if pk.tag.owner != tag.owner {
                if let Some(s) = self.blocks_of.get_mut(&pk.tag.owner) {
                    s.remove(&p);
                }
            }
        }
        self.blocks_of.entry(tag.owner).or_default().insert(p);
        if let Some(data) = self.deferred.take(p) {
            self.counts.released += 1;
            self.stored.insert(p, tag);
            out.push(Action::Store {
                block: p,
                tag,
                data: data.clone(),
            });
            self.follow(p, k, data, out);
        } else if let Some(&t) = self.stored.get(&p) {
            if t != tag {
                self.counts.retags += 1;
                self.stored.insert(p, tag);
                out.push(Action::Retag { block: p, tag });
            }
            if let Some(data) = self.shadow.get(&p).cloned() {
                self.follow(p, k, data, out);
            }
        }
    }

    /// `owner` no longer points at `p`: its claim goes (with those it made
    /// through `p` if `p` is its indirect block); if it was `p`'s tag, the
    /// newest other claim takes over, else `p` is unknown again (it stays
    /// where it is stored until a bitmap frees it or a pointer claims it).
    fn withdraw(&mut self, p: u64, owner: u64, via: u64, out: &mut Vec<Action>) {
        let Some(cl) = self.claims.get_mut(&p) else { return };
        let Some(i) = cl.iter().position(|c| (c.tag.owner, c.via) == (owner, via)) else {
            return;
        };
        let gone = cl.remove(i);
        let next = cl.last().copied();
        if cl.is_empty() {
            self.claims.remove(&p);
        }
        if self.known.get(&p).map(|k| (k.tag.owner, k.via)) != Some((owner, via)) {
            return;
        }
        if gone.level > 0 {
            if let Some(d) = self.shadow.get(&p).cloned() {
                for c in d.chunks_exact(4).map(|w| u32_at(w, 0)).filter(|&c| c != 0) {
                    self.withdraw(c, owner, p, out);
                }
            }
        }
        match next {
            Some(mut k) => {
                if let Some(&par) = self.parent.get(&k.tag.owner) {
                    k.tag.parent = par;
                }
                self.make_effective(p, k, out);
            }
            None => {
                self.known.remove(&p);
                if let Some(s) = self.blocks_of.get_mut(&owner) {
                    s.remove(&p);
                }
            }
        }
    }

    /// The contents of a block whose tag is known: an indirect block's
    /// pointers, a directory block's entries.
    fn follow(&mut self, b: u64, k: Known, data: Vec<u8>, out: &mut Vec<Action>) {
        if k.level > 0 {
            let ptrs: Vec<u64> = data.chunks_exact(4).map(|w| u32_at(w, 0)).filter(|&p| p != 0).collect();
            let old = self.shadow.insert(b, data);
            let old_owner = self.followed_for.insert(b, k.tag.owner);
            if let (Some(old), Some(o)) = (old, old_owner) {
                // Pointers the block no longer holds, or all it held when it
                // was another owner's: that owner's claims through it go.
                let now: FxHashSet<u64> = if o == k.tag.owner {
                    ptrs.iter().copied().collect()
                } else {
                    FxHashSet::default()
                };
                for c in old.chunks_exact(4).map(|w| u32_at(w, 0)) {
                    if c != 0 && !now.contains(&c) {
                        self.withdraw(c, o, b, out);
                    }
                }
            }
            for p in ptrs {
                let (kind, level) = if k.level == 1 {
                    (k.leaf, 0)
                } else {
                    (BlockKind::Indirect, k.level - 1)
                };
                self.assign(p, Tag::of(k.tag.owner, kind, k.tag.parent), level, k.leaf, b, out);
            }
        } else if k.tag.kind == BlockKind::Directory {
            let kids = dirent::children(&data, self.layout().sb.filetype);
            self.shadow.insert(b, data);
            self.followed_for.remove(&b);
            self.names(b, k.tag.owner, kids, out);
        } else {
            self.shadow.remove(&b);
            self.followed_for.remove(&b);
            self.names(b, 0, Vec::new(), out);
        }
    }

    /// Directory block `b` of `dir` names `kids` now (none: it is no
    /// directory block any more). Entries it named before and not now are
    /// gone (unlink, rename); every inode whose namings changed takes the
    /// lowest directory still naming it as its parent — a hard-linked file
    /// belongs with the lowest-numbered directory holding a link, whatever
    /// the order the directory blocks were written in. An inode no
    /// directory names any more keeps its last parent.
    fn names(&mut self, b: u64, dir: u64, kids: Vec<u64>, out: &mut Vec<Action>) {
        let old = if kids.is_empty() {
            self.names_in.remove(&b)
        } else {
            self.names_in.insert(b, (dir, kids.clone()))
        };
        let mut touched: Vec<u64> = Vec::new();
        if let Some((odir, okids)) = old {
            for c in okids {
                if odir == dir && kids.contains(&c) {
                    continue;
                }
                if let Some(v) = self.named_by.get_mut(&c) {
                    v.retain(|&n| n != (odir, b));
                    touched.push(c);
                }
            }
        }
        for &c in &kids {
            let v = self.named_by.entry(c).or_default();
            if !v.contains(&(dir, b)) {
                v.push((dir, b));
            }
            touched.push(c);
        }
        touched.sort_unstable();
        touched.dedup();
        for c in touched {
            match self.named_by.get(&c).and_then(|v| v.iter().map(|n| n.0).min()) {
                Some(p) => self.set_parent(c, p, out),
                None => {
                    self.named_by.remove(&c);
                }
            }
        }
    }

    /// `child`'s parent directory is `dir`: retag its blocks if their
    /// parent changes.
    fn set_parent(&mut self, child: u64, dir: u64, out: &mut Vec<Action>) {
        if self.parent.insert(child, dir) == Some(dir) {
            return;
        }
        let Some(blocks) = self.blocks_of.get(&child) else {
            return;
        };
        let mut blocks: Vec<u64> = blocks.iter().copied().collect();
        blocks.sort_unstable();
        for b in blocks {
            let Some(k) = self.known.get_mut(&b) else { continue };
            if k.tag.owner != child {
                continue;
            }
            k.tag.parent = dir;
            let tag = k.tag;
            if let Some(t) = self.stored.get_mut(&b) {
                if *t != tag {
                    *t = tag;
                    self.counts.retags += 1;
                    out.push(Action::Retag { block: b, tag });
                }
            }
        }
    }

    /// A block bitmap of `group` was written: every block it shows free
    /// loses what was inferred of it; those the array holds are freed.
    fn bitmap_written(&mut self, group: u64, data: &[u8], out: &mut Vec<Action>) {
        let (start, end) = {
            let g = &self.layout().geo.groups[group as usize];
            (g.start, g.end)
        };
        for j in 0..=(end - start) {
            let set = data.get((j / 8) as usize).is_some_and(|x| x >> (j % 8) & 1 == 1);
            if set {
                continue;
            }
            let b = start + j;
            if let Some(k) = self.known.remove(&b) {
                if let Some(s) = self.blocks_of.get_mut(&k.tag.owner) {
                    s.remove(&b);
                }
            }
            self.shadow.remove(&b);
            self.followed_for.remove(&b);
            if self.names_in.contains_key(&b) {
                self.names(b, 0, Vec::new(), out);
            }
            self.claims.remove(&b);
            self.deferred.take(b);
            if self.stored.remove(&b).is_some() {
                self.counts.frees += 1;
                out.push(Action::Free { block: b });
            }
        }
    }

    /// Place every deferred block by default (a flush).
    fn flush_deferred(&mut self) -> Vec<Action> {
        let mut out = Vec::new();
        if self.layout.is_none() || self.refused.is_some() {
            return out;
        }
        for (b, d) in self.deferred.drain() {
            self.counts.flush_placed += 1;
            self.place_default(b, d, &mut out);
        }
        out
    }
}

impl Classifier for Inferrer {
    fn write(&mut self, block: u64, data: &[u8]) -> Vec<Action> {
        self.write_checked(block, data).unwrap_or_default()
    }

    fn deferred(&self, block: u64) -> Option<&[u8]> {
        self.early.get(block).or_else(|| self.deferred.get(block))
    }

    fn flush(&mut self) -> Vec<Action> {
        self.flush_deferred()
    }

    fn layout_known(&self) -> bool {
        self.layout.is_some()
    }

    fn refused(&self) -> Option<&Error> {
        self.refused.as_ref()
    }
}
