//! The ext2 file-system model: allocation, directories, files, and the block
//! I/O each operation emits, tagged with owner and kind.
//!
//! Allocation follows libext2fs (what `mke2fs -d` uses), so that a model
//! populated from a tree puts every block where `mke2fs -t ext2 -d` does:
//!
//! * a new inode is the first free one from the start of its parent's group;
//! * a block is the first free one at or after a goal, wrapping to the start:
//!   a file's first block aims at the first block of its inode's group, each
//!   next block at the previous one, an indirect block at the pointer before
//!   it (so a file is laid out 0–11, IND, 12…, DIND, IND, …); a directory
//!   that grows aims at its last block;
//! * directory entries take `8 + name length` bytes rounded up to 4, placed
//!   first-fit in the slack after the last entry of a block; a full
//!   directory grows by one block.
//!
//! With [`Allocator::Linux22`] the operations after mkfs allocate as the
//! Linux 2.2 kernel did instead ([`super::linux22`]: free-byte search, 8-block
//! preallocation released at close, directories spread over the groups);
//! mkfs itself is always mke2fs's.
//!
//! Data blocks are written when the operation writes them; metadata blocks
//! (superblock, descriptors, bitmaps, inode tables, directories, indirect
//! blocks) are marked dirty and written back by [`FileSystem::sync`], as a
//! buffer cache would. `flush_every` syncs every that many operations.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use super::bitmap::Bitmap;
use super::geometry::{Geometry, MkfsParams, StaticKind, FIRST_INO, RESIZE_INO, ROOT_INO};
use super::kind::{BlockIo, BlockKind, Tag};
use super::linux22::{self, Allocator, PREALLOC_BLOCKS};
use super::namespace::{EntryType, Namespace};
use crate::error::{Error, Result};
use crate::trace::Op;

/// Pointers held in the inode itself.
pub const NDIR: u64 = 12;
/// Bytes of a directory entry header (inode, rec_len, name_len, type).
const DIRENT_HEADER: u64 = 8;
/// A symlink target shorter than this lives in the inode ("fast" symlink).
const FAST_SYMLINK_MAX: u64 = 60;

/// Bytes a directory entry with a name of `len` bytes needs.
pub fn rec_len(len: u64) -> u64 {
    (len + DIRENT_HEADER + 3) & !3
}

/// The blocks of an inode: data in logical order and the pointer blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockMap {
    pub data: Vec<u64>,
    /// Single-indirect blocks in logical order: the inode's IND, then the
    /// children of DIND, then the grandchildren of TIND.
    pub ind: Vec<u64>,
    /// Double-indirect blocks: the inode's DIND, then the children of TIND.
    pub dind: Vec<u64>,
    /// The triple-indirect block (0 = none).
    pub tind: u64,
}

impl BlockMap {
    /// Every pointer block, in the order of the tree.
    pub fn pointer_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.ind
            .iter()
            .chain(self.dind.iter())
            .copied()
            .chain((self.tind != 0).then_some(self.tind))
    }

    /// All blocks: pointers then data.
    pub fn all_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.pointer_blocks().chain(self.data.iter().copied())
    }

    pub fn block_count(&self) -> u64 {
        self.data.len() as u64 + self.ind.len() as u64 + self.dind.len() as u64 + (self.tind != 0) as u64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DirEnt {
    ino: u64,
    name_len: u64,
    rec_len: u64,
}

/// A directory's entries, block by block, and its name index.
#[derive(Debug, Clone, Default)]
pub struct DirData {
    blocks: Vec<Vec<DirEnt>>,
    names: FxHashMap<Box<str>, (u64, usize)>,
}

impl DirData {
    /// Entries other than `.` and `..`.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// (name, inode, index of the directory block holding the entry).
    pub fn entries(&self) -> impl Iterator<Item = (&str, u64, usize)> {
        self.names.iter().map(|(n, &(i, b))| (&**n, i, b))
    }

    pub fn get(&self, name: &str) -> Option<(u64, usize)> {
        self.names.get(name).copied()
    }
}

#[derive(Debug, Clone)]
pub struct Inode {
    pub kind: EntryType,
    pub size: u64,
    /// The directory holding the inode's (first) name; the root is its own.
    pub parent: u64,
    pub links: u32,
    pub map: BlockMap,
    pub dir: Option<Box<DirData>>,
}

/// Options of a model file system.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FsOptions {
    pub mkfs: MkfsParams,
    /// Write back dirty metadata every this many operations (0: only on `sync`).
    pub flush_every: u64,
    /// Whose allocator the operations after mkfs follow.
    pub allocator: Allocator,
}

impl FsOptions {
    /// libext2fs's allocator, no periodic flush.
    pub fn new(mkfs: MkfsParams) -> FsOptions {
        FsOptions {
            mkfs,
            flush_every: 0,
            allocator: Allocator::Libext2fs,
        }
    }
}

/// What the Linux 2.2 allocator keeps of an inode in memory.
#[derive(Debug, Clone, Copy, Default)]
struct InCore {
    /// The block given last (`i_next_alloc_goal`): the next one aims after it.
    last: Option<u64>,
    /// The block given last in the current mapping (a pointer block the
    /// blocks under it aim at).
    chain: Option<u64>,
    /// The preallocation window: its first block and length.
    window: u64,
    window_len: u64,
}

/// Counters of what the model has emitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoCounts {
    pub reads: u64,
    pub writes: u64,
    pub data_writes: u64,
    pub metadata_writes: u64,
    pub syncs: u64,
}

pub struct FileSystem {
    geo: Geometry,
    bmap: Bitmap,
    imap: Bitmap,
    inodes: FxHashMap<u64, Inode>,
    dirty: BTreeMap<u64, Tag>,
    io: Vec<BlockIo>,
    flush_every: u64,
    ops: u64,
    counts: IoCounts,
    lost_found: u64,
    allocator: Allocator,
    in_core: FxHashMap<u64, InCore>,
}

fn full(what: &str) -> Error {
    Error::config(format!("the model file system is out of {what}: give it a larger size"))
}

impl FileSystem {
    /// A freshly made file system: the layout of `mke2fs -t ext2`, the root
    /// directory, `lost+found` and the resize inode, written back.
    pub fn mkfs(opts: &FsOptions) -> Result<FileSystem> {
        let geo = Geometry::mke2fs(&opts.mkfs)?;
        let mut fs = FileSystem {
            bmap: Bitmap::new(geo.blocks),
            imap: Bitmap::new(geo.inodes + 1),
            inodes: FxHashMap::default(),
            dirty: BTreeMap::new(),
            io: Vec::new(),
            flush_every: opts.flush_every,
            ops: 0,
            counts: IoCounts::default(),
            lost_found: 0,
            // mke2fs's own allocation is libext2fs's whatever mounts it later.
            allocator: Allocator::Libext2fs,
            in_core: FxHashMap::default(),
            geo,
        };
        fs.imap.set(0); // inode numbers start at 1
        if fs.geo.first_data_block == 1 {
            fs.bmap.set(0);
        }
        for g in 0..fs.geo.group_count() {
            let grp = fs.geo.groups[g as usize].clone();
            let mark = |fs: &mut FileSystem, a: u64, b: u64, tag: Tag| {
                for blk in a..=b {
                    fs.bmap.set(blk);
                    fs.dirty.insert(blk, tag);
                }
            };
            if let Some(sb) = grp.superblock {
                mark(&mut fs, sb, sb, Tag::shared(BlockKind::Superblock));
            }
            if let Some([a, b]) = grp.descriptors {
                mark(&mut fs, a, b, Tag::shared(BlockKind::Descriptors));
            }
            if let Some([a, b]) = grp.reserved_descriptors {
                mark(&mut fs, a, b, Tag::of(RESIZE_INO, BlockKind::ReservedDescriptors, 0));
            }
            mark(
                &mut fs,
                grp.block_bitmap,
                grp.block_bitmap,
                Tag::shared(BlockKind::BlockBitmap),
            );
            mark(
                &mut fs,
                grp.inode_bitmap,
                grp.inode_bitmap,
                Tag::shared(BlockKind::InodeBitmap),
            );
            let [a, b] = grp.inode_table;
            for blk in a..=b {
                fs.bmap.set(blk);
            }
        }
        // The root directory (its own parent), then lost+found grown to
        // 16 KiB (at least 2 blocks, at most 12), as mke2fs does.
        fs.make_dir(ROOT_INO, Some(ROOT_INO))?;
        let lpf = fs.mkdir(ROOT_INO, "lost+found")?;
        fs.lost_found = lpf;
        let bs = fs.geo.block_size;
        let mut lpf_size = 0;
        for _ in 1..NDIR {
            lpf_size += bs;
            if lpf_size >= 16 * 1024 && lpf_size >= 2 * bs {
                break;
            }
            fs.expand_dir(lpf)?;
        }
        // Reserved inodes 1 and 3..=10; the resize inode owns a DIND block
        // and the reserved descriptor blocks.
        for ino in (1..FIRST_INO).filter(|&i| i != ROOT_INO) {
            fs.imap.set(ino);
            fs.touch_inode(ino);
        }
        let sb_blk = fs.geo.superblock();
        let goal = sb_blk + fs.geo.desc_blocks + fs.geo.reserved_gdt_blocks + 2 + fs.geo.inode_blocks_per_group;
        let dind = fs.alloc_block(goal)?;
        fs.dirty.insert(dind, Tag::of(RESIZE_INO, BlockKind::Indirect, 0));
        fs.inodes.insert(
            RESIZE_INO,
            Inode {
                kind: EntryType::File,
                size: 0,
                parent: 0,
                links: 1,
                map: BlockMap {
                    dind: vec![dind],
                    ..BlockMap::default()
                },
                dir: None,
            },
        );
        fs.sync();
        fs.allocator = opts.allocator;
        Ok(fs)
    }

    pub fn allocator(&self) -> Allocator {
        self.allocator
    }

    /// The preallocation window of `ino` (first block, length), if any.
    pub fn prealloc_window(&self, ino: u64) -> Option<(u64, u64)> {
        self.in_core
            .get(&ino)
            .filter(|c| c.window_len > 0)
            .map(|c| (c.window, c.window_len))
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    pub fn inode(&self, ino: u64) -> Option<&Inode> {
        self.inodes.get(&ino)
    }

    pub fn inodes(&self) -> impl Iterator<Item = (u64, &Inode)> {
        self.inodes.iter().map(|(&i, n)| (i, n))
    }

    pub fn lost_found(&self) -> u64 {
        self.lost_found
    }

    pub fn counts(&self) -> IoCounts {
        self.counts
    }

    pub fn free_blocks(&self) -> u64 {
        self.geo.blocks - self.bmap.count_ones()
    }

    pub fn free_inodes(&self) -> u64 {
        self.geo.inodes + 1 - self.imap.count_ones()
    }

    pub fn block_in_use(&self, b: u64) -> bool {
        self.bmap.get(b)
    }

    pub fn inode_in_use(&self, ino: u64) -> bool {
        self.imap.get(ino)
    }

    /// The block bitmap of group `g`, one bit per block from its first block.
    pub fn group_bitmap(&self, g: u64) -> Box<[u64]> {
        let grp = &self.geo.groups[g as usize];
        self.bmap.extract(grp.start, grp.end - grp.start + 1)
    }

    /// The block I/O emitted since the last call.
    pub fn drain_io(&mut self) -> Vec<BlockIo> {
        std::mem::take(&mut self.io)
    }

    /// Dirty metadata blocks not yet written back.
    pub fn dirty_blocks(&self) -> impl Iterator<Item = (u64, Tag)> + '_ {
        self.dirty.iter().map(|(&b, &t)| (b, t))
    }

    // ---------------------------------------------------------------- I/O

    fn emit(&mut self, op: Op, block: u64, tag: Tag) {
        match op {
            Op::Read => self.counts.reads += 1,
            Op::Write => {
                self.counts.writes += 1;
                if tag.kind == BlockKind::Data {
                    self.counts.data_writes += 1;
                } else {
                    self.counts.metadata_writes += 1;
                }
            }
        }
        self.io.push(BlockIo {
            op,
            block,
            tag,
            bitmap: None,
        });
    }

    /// Write back every dirty metadata block (ascending block order).
    pub fn sync(&mut self) {
        self.counts.syncs += 1;
        let dirty = std::mem::take(&mut self.dirty);
        for (block, tag) in dirty {
            self.emit(Op::Write, block, tag);
            if tag.kind == BlockKind::BlockBitmap {
                if let Some(g) = self.geo.group_of_block(block) {
                    let bits = self.group_bitmap(g);
                    self.io.last_mut().expect("just emitted").bitmap = Some(bits);
                }
            }
        }
    }

    /// One operation is complete: write back if the flush interval is due.
    fn op_done(&mut self) {
        self.ops += 1;
        if self.flush_every > 0 && self.ops.is_multiple_of(self.flush_every) {
            self.sync();
        }
    }

    fn parent_of(&self, ino: u64) -> u64 {
        self.inodes.get(&ino).map_or(0, |i| i.parent)
    }

    fn touch_inode(&mut self, ino: u64) {
        let b = self.geo.inode_block(ino);
        self.dirty.insert(b, Tag::shared(BlockKind::InodeTable));
    }

    fn touch_block_stats(&mut self, block: u64) {
        if let Some(g) = self.geo.group_of_block(block) {
            let grp = &self.geo.groups[g as usize];
            let (bb, desc) = (grp.block_bitmap, self.geo.descriptor_block_of_group(g));
            self.dirty.insert(bb, Tag::shared(BlockKind::BlockBitmap));
            self.dirty.insert(desc, Tag::shared(BlockKind::Descriptors));
            self.dirty
                .insert(self.geo.superblock(), Tag::shared(BlockKind::Superblock));
        }
    }

    fn touch_inode_stats(&mut self, ino: u64) {
        let g = self.geo.group_of_inode(ino);
        let ib = self.geo.inode_bitmap_of(ino);
        let desc = self.geo.descriptor_block_of_group(g);
        self.dirty.insert(ib, Tag::shared(BlockKind::InodeBitmap));
        self.dirty.insert(desc, Tag::shared(BlockKind::Descriptors));
        self.dirty
            .insert(self.geo.superblock(), Tag::shared(BlockKind::Superblock));
    }

    // --------------------------------------------------------- allocation

    /// First free block at or after `goal`, wrapping (libext2fs's rule).
    fn find_block(&self, goal: u64) -> Result<u64> {
        let fdb = self.geo.first_data_block;
        let last = self.geo.blocks - 1;
        let goal = if goal == 0 || goal > last { fdb } else { goal };
        self.bmap
            .first_zero(goal, last)
            .or_else(|| (goal > fdb).then(|| self.bmap.first_zero(fdb, goal - 1)).flatten())
            .ok_or_else(|| full("blocks"))
    }

    fn alloc_block(&mut self, goal: u64) -> Result<u64> {
        let b = self.find_block(goal)?;
        self.bmap.set(b);
        self.touch_block_stats(b);
        Ok(b)
    }

    fn free_block(&mut self, b: u64) {
        if self.bmap.clear(b) {
            self.touch_block_stats(b);
        }
        self.dirty.remove(&b);
    }

    /// A block for `ino` by the allocator in force: libext2fs's aims at
    /// `lib_goal`; Linux 2.2's at the block after the one given last (or
    /// the pointer block just given in this mapping), from the file's
    /// preallocation window when it can.
    fn alloc_for(&mut self, ino: u64, lib_goal: u64) -> Result<u64> {
        if self.allocator == Allocator::Libext2fs {
            return self.alloc_block(lib_goal);
        }
        let c = self.in_core.get(&ino).copied().unwrap_or_default();
        let goal = match (c.chain, c.last) {
            (Some(p), _) => p,
            (None, Some(l)) => l + 1,
            // Not allocated since mount: the last block it has (i_data's scan).
            (None, None) => match self.inodes.get(&ino).and_then(|i| i.map.data.last()) {
                Some(&b) => b,
                None => self.group_first_block(ino),
            },
        };
        let file = self.inodes.get(&ino).is_some_and(|i| i.kind == EntryType::File);
        let b = self.alloc_block_22(ino, goal, file)?;
        let c = self.in_core.entry(ino).or_default();
        c.chain = Some(b);
        c.last = Some(b);
        Ok(b)
    }

    /// `ext2_alloc_block`: the window's next block when `goal` aims at it;
    /// else the window is dropped and `ext2_new_block` searches, reserving
    /// a new window after the block for a regular file (`prealloc`).
    fn alloc_block_22(&mut self, ino: u64, goal: u64, prealloc: bool) -> Result<u64> {
        if let Some(c) = self.in_core.get_mut(&ino) {
            if c.window_len > 0 && (goal == c.window || goal + 1 == c.window) {
                let b = c.window;
                c.window += 1;
                c.window_len -= 1;
                return Ok(b);
            }
        }
        self.discard_prealloc(ino);
        let b = linux22::new_block(&self.bmap, &self.geo, goal).ok_or_else(|| full("blocks"))?;
        self.bmap.set(b);
        self.touch_block_stats(b);
        if prealloc {
            let end = self.geo.groups[self.geo.group_of_block(b).expect("a data block") as usize].end;
            let mut n = 0;
            while n + 1 < PREALLOC_BLOCKS && b + 1 + n <= end && self.bmap.set(b + 1 + n) {
                n += 1;
            }
            if n > 0 {
                let c = self.in_core.entry(ino).or_default();
                c.window = b + 1;
                c.window_len = n;
            }
        }
        Ok(b)
    }

    /// `ext2_discard_prealloc`: free what is left of `ino`'s window.
    fn discard_prealloc(&mut self, ino: u64) {
        if let Some(c) = self.in_core.get_mut(&ino) {
            let (w, n) = (c.window, c.window_len);
            c.window_len = 0;
            for b in w..w + n {
                self.free_block(b);
            }
        }
    }

    /// A new mapping of `ino` starts (its pointer chain aims afresh).
    fn begin_mapping(&mut self, ino: u64) {
        if let Some(c) = self.in_core.get_mut(&ino) {
            c.chain = None;
        }
    }

    /// First free inode from the start of `parent`'s group, wrapping.
    fn find_inode(&self, parent: u64) -> Result<u64> {
        let ipg = self.geo.inodes_per_group;
        let start = (((parent.max(1) - 1) / ipg) * ipg + 1).max(FIRST_INO);
        let last = self.geo.inodes;
        if start > last {
            return Err(full("inodes"));
        }
        self.imap
            .first_zero(start, last)
            .or_else(|| {
                (start > FIRST_INO)
                    .then(|| self.imap.first_zero(FIRST_INO, start - 1))
                    .flatten()
            })
            .ok_or_else(|| full("inodes"))
    }

    /// Linux 2.2's inode for a new directory: the first free one of
    /// [`linux22::dir_group`]'s group.
    fn find_dir_inode(&self) -> Result<u64> {
        let g = linux22::dir_group(&self.bmap, &self.imap, &self.geo).ok_or_else(|| full("inodes"))?;
        let ipg = self.geo.inodes_per_group;
        self.imap
            .first_zero((g * ipg + 1).max(FIRST_INO), (g + 1) * ipg)
            .ok_or_else(|| full("inodes"))
    }

    fn take_inode(&mut self, ino: u64, kind: EntryType, parent: u64) {
        self.imap.set(ino);
        self.touch_inode_stats(ino);
        self.touch_inode(ino);
        self.inodes.insert(
            ino,
            Inode {
                kind,
                size: 0,
                parent,
                links: 1,
                map: BlockMap::default(),
                dir: None,
            },
        );
    }

    fn group_first_block(&self, ino: u64) -> u64 {
        self.geo.groups[self.geo.group_of_inode(ino) as usize].start
    }

    fn tag_of(&self, ino: u64, kind: BlockKind) -> Tag {
        Tag::of(ino, kind, self.parent_of(ino))
    }

    /// The pointer block `existing`, or a new one allocated near `goal()` and
    /// recorded as a new block of indirection `level` in `new_ind`.
    fn pointer_block(
        &mut self,
        ino: u64,
        existing: Option<u64>,
        level: usize,
        new_ind: &mut Vec<(usize, u64)>,
        goal: impl FnOnce() -> u64,
    ) -> Result<u64> {
        if let Some(b) = existing {
            return Ok(b);
        }
        let b = self.alloc_for(ino, goal())?;
        new_ind.push((level, b));
        Ok(b)
    }

    /// Map logical block `n` (= the current length, files only grow at the
    /// end) of `ino`, allocating pointer blocks on the way with libext2fs's
    /// goals. Returns the data block.
    fn append_block(&mut self, ino: u64) -> Result<u64> {
        self.begin_mapping(ino);
        let apb = self.geo.addr_per_block();
        let ind_tag = self.tag_of(ino, BlockKind::Indirect);
        let map = self.inodes[&ino].map.clone();
        let n = map.data.len() as u64;
        let first_goal = map.data.first().copied().unwrap_or_else(|| self.group_first_block(ino));
        let prev = |k: u64| map.data[(k - 1) as usize];
        let mut new_ind: Vec<(usize, u64)> = Vec::new(); // (level, block)
        let data_goal;
        if n < NDIR {
            data_goal = if n > 0 { prev(n) } else { first_goal };
        } else if n < NDIR + apb {
            let ind = self.pointer_block(ino, map.ind.first().copied(), 1, &mut new_ind, || {
                map.data[(NDIR - 1) as usize]
            })?;
            data_goal = if n > NDIR { prev(n) } else { ind };
        } else if n < NDIR + apb + apb * apb {
            let k = n - NDIR - apb;
            let (i, j) = (k / apb, k % apb);
            let dind = self.pointer_block(ino, map.dind.first().copied(), 2, &mut new_ind, || map.ind[0])?;
            let slot = (1 + i) as usize;
            let child = self.pointer_block(ino, map.ind.get(slot).copied(), 1, &mut new_ind, || {
                if i > 0 {
                    map.ind[slot - 1]
                } else {
                    dind
                }
            })?;
            data_goal = if j > 0 { prev(n) } else { child };
        } else {
            let k = n - NDIR - apb - apb * apb;
            let (a, rem) = (k / (apb * apb), k % (apb * apb));
            let (b2, j) = (rem / apb, rem % apb);
            if a >= apb {
                return Err(Error::config("file larger than ext2's triple-indirect limit"));
            }
            let tind = self.pointer_block(ino, (map.tind != 0).then_some(map.tind), 3, &mut new_ind, || {
                map.dind[0]
            })?;
            let dslot = (1 + a) as usize;
            let dchild = self.pointer_block(ino, map.dind.get(dslot).copied(), 2, &mut new_ind, || {
                if a > 0 {
                    map.dind[dslot - 1]
                } else {
                    tind
                }
            })?;
            let islot = (1 + apb + a * apb + b2) as usize;
            let ichild = self.pointer_block(ino, map.ind.get(islot).copied(), 1, &mut new_ind, || {
                if b2 > 0 {
                    map.ind[islot - 1]
                } else {
                    dchild
                }
            })?;
            data_goal = if j > 0 { prev(n) } else { ichild };
        }
        let blk = self.alloc_for(ino, data_goal)?;
        let inode = self.inodes.get_mut(&ino).expect("inode exists");
        for &(level, b) in &new_ind {
            match level {
                1 => inode.map.ind.push(b),
                2 => inode.map.dind.push(b),
                _ => inode.map.tind = b,
            }
        }
        inode.map.data.push(blk);
        for &(_, b) in &new_ind {
            self.dirty.insert(b, ind_tag);
        }
        // The block's pointer lives in the inode or in an indirect block.
        if n < NDIR {
            self.touch_inode(ino);
        } else {
            let ind = self.inodes[&ino].map.ind[((n - NDIR) / apb) as usize];
            self.dirty.insert(ind, ind_tag);
        }
        Ok(blk)
    }

    /// Grow directory `dir` by one empty block (libext2fs's expand_dir: every
    /// new block, pointer blocks included, aims at the last data block).
    fn expand_dir(&mut self, dir: u64) -> Result<()> {
        self.begin_mapping(dir);
        let apb = self.geo.addr_per_block();
        let bs = self.geo.block_size;
        let map = self.inodes[&dir].map.clone();
        let n = map.data.len() as u64;
        let goal = *map.data.last().expect("a directory has a block");
        let mut new_ind: Vec<(usize, u64)> = Vec::new();
        let need = |have: usize, idx: u64| (idx as usize) >= have;
        if n >= NDIR && n < NDIR + apb {
            if map.ind.is_empty() {
                new_ind.push((1, self.alloc_for(dir, goal)?));
            }
        } else if n >= NDIR + apb {
            let k = n - NDIR - apb;
            if k >= apb * apb {
                return Err(Error::config(
                    "directory larger than the model supports (triple-indirect)",
                ));
            }
            if map.dind.is_empty() {
                new_ind.push((2, self.alloc_for(dir, goal)?));
            }
            if need(map.ind.len(), 1 + k / apb) {
                new_ind.push((1, self.alloc_for(dir, goal)?));
            }
        }
        let blk = self.alloc_for(dir, goal)?;
        let tag_ind = self.tag_of(dir, BlockKind::Indirect);
        let tag_dir = self.tag_of(dir, BlockKind::Directory);
        let inode = self.inodes.get_mut(&dir).expect("dir exists");
        for &(level, b) in &new_ind {
            if level == 1 {
                inode.map.ind.push(b);
            } else {
                inode.map.dind.push(b);
            }
        }
        inode.map.data.push(blk);
        inode.size += bs;
        inode.dir.as_mut().expect("a directory").blocks.push(vec![DirEnt {
            ino: 0,
            name_len: 0,
            rec_len: bs,
        }]);
        for &(_, b) in &new_ind {
            self.dirty.insert(b, tag_ind);
        }
        self.dirty.insert(blk, tag_dir);
        if n >= NDIR {
            let ind = self.inodes[&dir].map.ind[((n - NDIR) / apb) as usize];
            self.dirty.insert(ind, tag_ind);
        }
        self.touch_inode(dir);
        Ok(())
    }

    /// Add `name → ino` to directory `dir` first-fit; false when no block
    /// has room (libext2fs's link_proc).
    fn link(&mut self, dir: u64, name: &str, ino: u64) -> Result<bool> {
        let need = rec_len(name.len() as u64);
        let bs = self.geo.block_size;
        let d = self
            .inodes
            .get_mut(&dir)
            .and_then(|i| i.dir.as_mut())
            .ok_or_else(|| Error::config(format!("inode {dir} is not a directory")))?;
        if d.names.contains_key(name) {
            return Err(Error::config(format!(
                "`{name}` already exists in directory inode {dir}"
            )));
        }
        let mut placed = None;
        'blocks: for (bi, block) in d.blocks.iter_mut().enumerate() {
            let mut j = 0;
            while j < block.len() {
                // Absorb an unused entry that follows.
                if j + 1 < block.len() && block[j + 1].ino == 0 {
                    block[j].rec_len += block[j + 1].rec_len;
                    block.remove(j + 1);
                }
                let e = block[j];
                if e.ino != 0 {
                    let min = rec_len(e.name_len);
                    if e.rec_len >= min + need {
                        block[j].rec_len = min;
                        block.insert(
                            j + 1,
                            DirEnt {
                                ino: 0,
                                name_len: 0,
                                rec_len: e.rec_len - min,
                            },
                        );
                    }
                } else if e.rec_len >= need {
                    block[j] = DirEnt {
                        ino,
                        name_len: name.len() as u64,
                        rec_len: e.rec_len,
                    };
                    debug_assert_eq!(block.iter().map(|x| x.rec_len).sum::<u64>(), bs);
                    placed = Some(bi);
                    break 'blocks;
                }
                j += 1;
            }
        }
        let Some(bi) = placed else {
            return Ok(false);
        };
        d.names.insert(name.into(), (ino, bi));
        let blk = self.inodes[&dir].map.data[bi];
        let tag = self.tag_of(dir, BlockKind::Directory);
        self.dirty.insert(blk, tag);
        Ok(true)
    }

    /// Remove `name` from `dir` (merging its space into the entry before it).
    fn unlink_entry(&mut self, dir: u64, name: &str) -> Result<u64> {
        let d = self
            .inodes
            .get_mut(&dir)
            .and_then(|i| i.dir.as_mut())
            .ok_or_else(|| Error::config(format!("inode {dir} is not a directory")))?;
        let (ino, bi) = d
            .names
            .remove(name)
            .ok_or_else(|| Error::config(format!("no `{name}` in directory inode {dir}")))?;
        let block = &mut d.blocks[bi];
        let j = block
            .iter()
            .position(|e| e.ino == ino)
            .expect("the index names an entry of the block");
        if j > 0 {
            block[j - 1].rec_len += block[j].rec_len;
            block.remove(j);
        } else {
            block[0].ino = 0;
            block[0].name_len = 0;
        }
        let blk = self.inodes[&dir].map.data[bi];
        let tag = self.tag_of(dir, BlockKind::Directory);
        self.dirty.insert(blk, tag);
        Ok(ino)
    }

    /// The inode, its first block and `.`/`..` of a new directory `ino`
    /// (given, or the first free inode of the parent's group).
    fn make_dir(&mut self, parent: u64, ino: Option<u64>) -> Result<u64> {
        let linux22 = self.allocator == Allocator::Linux22;
        let ino = match ino {
            Some(i) => i,
            None if linux22 => self.find_dir_inode()?,
            None => self.find_inode(parent)?,
        };
        let goal = self.group_first_block(ino);
        let blk = if linux22 {
            let b = linux22::new_block(&self.bmap, &self.geo, goal).ok_or_else(|| full("blocks"))?;
            self.in_core.insert(
                ino,
                InCore {
                    last: Some(b),
                    ..InCore::default()
                },
            );
            b
        } else {
            self.find_block(goal)?
        };
        self.bmap.set(blk);
        self.touch_block_stats(blk);
        self.take_inode(ino, EntryType::Dir, parent);
        let bs = self.geo.block_size;
        let inode = self.inodes.get_mut(&ino).expect("just made");
        inode.links = 2;
        inode.size = bs;
        inode.map.data.push(blk);
        inode.dir = Some(Box::new(DirData {
            blocks: vec![vec![
                DirEnt {
                    ino,
                    name_len: 1,
                    rec_len: 12,
                },
                DirEnt {
                    ino: parent,
                    name_len: 2,
                    rec_len: bs - 12,
                },
            ]],
            names: FxHashMap::default(),
        }));
        let tag = self.tag_of(ino, BlockKind::Directory);
        self.dirty.insert(blk, tag);
        Ok(ino)
    }

    /// Undo a make_dir / make_symlink whose link failed.
    fn drop_inode(&mut self, ino: u64) {
        self.discard_prealloc(ino);
        self.in_core.remove(&ino);
        if let Some(i) = self.inodes.remove(&ino) {
            for b in i.map.all_blocks() {
                self.free_block(b);
            }
        }
        if self.imap.clear(ino) {
            self.touch_inode_stats(ino);
        }
    }

    fn check_dir(&self, dir: u64) -> Result<()> {
        match self.inodes.get(&dir) {
            Some(i) if i.kind == EntryType::Dir => Ok(()),
            _ => Err(Error::config(format!("inode {dir} is not a directory"))),
        }
    }

    // --------------------------------------------------------- operations

    /// `mkdir`: a new directory `name` in `parent` (mke2fs -d's order: when
    /// the parent is full the attempt is undone, the parent grown, and the
    /// directory made again).
    pub fn mkdir(&mut self, parent: u64, name: &str) -> Result<u64> {
        self.check_dir(parent)?;
        let mut ino = self.make_dir(parent, None)?;
        if !self.link(parent, name, ino)? {
            self.drop_inode(ino);
            self.expand_dir(parent)?;
            ino = self.make_dir(parent, None)?;
            if !self.link(parent, name, ino)? {
                return Err(Error::config(format!("`{name}` does not fit a directory block")));
            }
        }
        self.inodes.get_mut(&parent).expect("parent").links += 1;
        self.touch_inode(parent);
        let g = self.geo.group_of_inode(ino);
        let desc = self.geo.descriptor_block_of_group(g);
        self.dirty.insert(desc, Tag::shared(BlockKind::Descriptors));
        self.op_done();
        Ok(ino)
    }

    /// Create an empty inode of `kind` linked as `name` in `parent` (growing
    /// the parent when full).
    fn new_entry(&mut self, parent: u64, name: &str, kind: EntryType) -> Result<u64> {
        self.check_dir(parent)?;
        let ino = self.find_inode(parent)?;
        if !self.link(parent, name, ino)? {
            self.expand_dir(parent)?;
            if !self.link(parent, name, ino)? {
                return Err(Error::config(format!("`{name}` does not fit a directory block")));
            }
        }
        self.take_inode(ino, kind, parent);
        self.touch_inode(parent);
        Ok(ino)
    }

    /// `creat` + `write` of `size` bytes + `close`.
    pub fn create(&mut self, parent: u64, name: &str, size: u64) -> Result<u64> {
        let ino = self.new_entry(parent, name, EntryType::File)?;
        self.write_blocks(ino, size)?;
        self.discard_prealloc(ino);
        self.op_done();
        Ok(ino)
    }

    /// `creat` alone: an empty file `name` in `parent`, left open (write
    /// it with [`write`](Self::write), release it with [`close`](Self::close)).
    pub fn creat(&mut self, parent: u64, name: &str) -> Result<u64> {
        let ino = self.new_entry(parent, name, EntryType::File)?;
        self.op_done();
        Ok(ino)
    }

    /// `write` of `bytes` at the end of file `ino`, which stays open: its
    /// preallocation window (Linux 2.2) is kept for the next write.
    pub fn write(&mut self, ino: u64, bytes: u64) -> Result<()> {
        self.check_file(ino)?;
        let size = self.inodes[&ino].size;
        self.write_blocks(ino, size + bytes)?;
        self.op_done();
        Ok(())
    }

    /// `close` of a file opened for writing: what is left of its
    /// preallocation window is freed (`ext2_release_file`).
    pub fn close(&mut self, ino: u64) {
        self.discard_prealloc(ino);
    }

    /// A special file (device, fifo, socket): an inode and no blocks.
    pub fn mknod(&mut self, parent: u64, name: &str) -> Result<u64> {
        let ino = self.new_entry(parent, name, EntryType::Special)?;
        self.op_done();
        Ok(ino)
    }

    /// A symbolic link with a target of `len` bytes: in the inode when
    /// shorter than 60 bytes, else one data block (allocated, as libext2fs
    /// does, before the inode, from the start of the volume).
    pub fn symlink(&mut self, parent: u64, name: &str, len: u64) -> Result<u64> {
        self.check_dir(parent)?;
        if len >= self.geo.block_size {
            return Err(Error::config(format!(
                "symlink `{name}`: a target of {len} bytes does not fit one block"
            )));
        }
        let make = |fs: &mut FileSystem| -> Result<u64> {
            let slow = len >= FAST_SYMLINK_MAX;
            let linux22 = fs.allocator == Allocator::Linux22;
            let early = if slow && !linux22 {
                Some(fs.find_block(0)?)
            } else {
                None
            };
            let ino = fs.find_inode(parent)?;
            // Linux 2.2 maps the target's block after the inode, aiming at its group.
            let blk = if slow && linux22 {
                let goal = fs.group_first_block(ino);
                Some(linux22::new_block(&fs.bmap, &fs.geo, goal).ok_or_else(|| full("blocks"))?)
            } else {
                early
            };
            if let Some(b) = blk {
                fs.bmap.set(b);
                fs.touch_block_stats(b);
            }
            fs.take_inode(ino, EntryType::Symlink, parent);
            let i = fs.inodes.get_mut(&ino).expect("just made");
            i.size = len;
            if let Some(b) = blk {
                i.map.data.push(b);
                let tag = fs.tag_of(ino, BlockKind::Data);
                fs.emit(Op::Write, b, tag);
            }
            Ok(ino)
        };
        let mut ino = make(self)?;
        if !self.link(parent, name, ino)? {
            self.drop_inode(ino);
            self.expand_dir(parent)?;
            ino = make(self)?;
            if !self.link(parent, name, ino)? {
                return Err(Error::config(format!("`{name}` does not fit a directory block")));
            }
        }
        self.touch_inode(parent);
        self.op_done();
        Ok(ino)
    }

    /// Grow file `ino` to `new_size` bytes, writing the blocks it touches.
    fn write_blocks(&mut self, ino: u64, new_size: u64) -> Result<()> {
        let bs = self.geo.block_size;
        let old = self.inodes[&ino].size;
        let have = self.inodes[&ino].map.data.len() as u64;
        let want = new_size.div_ceil(bs);
        let tag = self.tag_of(ino, BlockKind::Data);
        // A partial last block is rewritten.
        if !old.is_multiple_of(bs) && new_size > old && have > 0 {
            let b = self.inodes[&ino].map.data[(have - 1) as usize];
            self.emit(Op::Write, b, tag);
        }
        for _ in have..want {
            let b = self.append_block(ino)?;
            self.emit(Op::Write, b, tag);
        }
        let i = self.inodes.get_mut(&ino).expect("inode");
        i.size = i.size.max(new_size);
        self.touch_inode(ino);
        Ok(())
    }

    /// Append `bytes` to file `ino`.
    pub fn append(&mut self, ino: u64, bytes: u64) -> Result<()> {
        self.check_file(ino)?;
        let size = self.inodes[&ino].size;
        self.write_blocks(ino, size + bytes)?;
        self.discard_prealloc(ino);
        self.op_done();
        Ok(())
    }

    /// Overwrite bytes `offset..offset+len` of file `ino` (growing it when
    /// the range runs past the end).
    pub fn overwrite(&mut self, ino: u64, offset: u64, len: u64) -> Result<()> {
        self.check_file(ino)?;
        let bs = self.geo.block_size;
        let size = self.inodes[&ino].size;
        let tag = self.tag_of(ino, BlockKind::Data);
        if len > 0 {
            let first = offset / bs;
            let last = ((offset + len - 1) / bs).min(size.div_ceil(bs).saturating_sub(1));
            if offset < size {
                for k in first..=last {
                    let b = self.inodes[&ino].map.data[k as usize];
                    self.emit(Op::Write, b, tag);
                }
            }
            if offset + len > size {
                self.write_blocks(ino, offset + len)?;
                self.discard_prealloc(ino);
            }
        }
        self.touch_inode(ino);
        self.op_done();
        Ok(())
    }

    fn check_file(&self, ino: u64) -> Result<()> {
        match self.inodes.get(&ino) {
            Some(i) if i.kind == EntryType::File => Ok(()),
            _ => Err(Error::config(format!("inode {ino} is not a regular file"))),
        }
    }

    /// Read the whole of `ino`: its inode block, then each pointer block
    /// before the data it leads to, then the data.
    pub fn read_whole(&mut self, ino: u64) -> Result<()> {
        let inode = self
            .inodes
            .get(&ino)
            .ok_or_else(|| Error::config(format!("no inode {ino}")))?;
        let map = inode.map.clone();
        let kind = if inode.kind == EntryType::Dir {
            BlockKind::Directory
        } else {
            BlockKind::Data
        };
        let ib = self.geo.inode_block(ino);
        self.emit(Op::Read, ib, Tag::shared(BlockKind::InodeTable));
        let ind_tag = self.tag_of(ino, BlockKind::Indirect);
        let tag = self.tag_of(ino, kind);
        let apb = self.geo.addr_per_block();
        let base3 = NDIR + apb + apb * apb;
        for (n, &b) in map.data.iter().enumerate() {
            let n = n as u64;
            if n == base3 {
                self.emit(Op::Read, map.tind, ind_tag);
            }
            if n >= base3 && (n - base3).is_multiple_of(apb * apb) {
                self.emit(Op::Read, map.dind[(1 + (n - base3) / (apb * apb)) as usize], ind_tag);
            } else if n == NDIR + apb {
                self.emit(Op::Read, map.dind[0], ind_tag);
            }
            if n >= NDIR && (n - NDIR).is_multiple_of(apb) {
                self.emit(Op::Read, map.ind[((n - NDIR) / apb) as usize], ind_tag);
            }
            self.emit(Op::Read, b, tag);
        }
        self.op_done();
        Ok(())
    }

    /// Look `name` up in `dir`: the directory's inode block, then its blocks
    /// up to the one holding the entry (a linear scan, as ext2 does).
    pub fn lookup(&mut self, dir: u64, name: &str) -> Result<Option<u64>> {
        self.check_dir(dir)?;
        let ib = self.geo.inode_block(dir);
        self.emit(Op::Read, ib, Tag::shared(BlockKind::InodeTable));
        let d = self.inodes[&dir].dir.as_ref().expect("a directory");
        let found = d.get(name);
        let upto = found.map_or(d.blocks.len(), |(_, bi)| bi + 1);
        let blocks: Vec<u64> = self.inodes[&dir].map.data[..upto].to_vec();
        let tag = self.tag_of(dir, BlockKind::Directory);
        for b in blocks {
            self.emit(Op::Read, b, tag);
        }
        Ok(found.map(|(i, _)| i))
    }

    /// Resolve a `/`-separated path from the root, reading what a lookup reads.
    pub fn lookup_path(&mut self, path: &str) -> Result<Option<u64>> {
        let mut ino = ROOT_INO;
        for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
            match self.inodes.get(&ino) {
                Some(i) if i.kind == EntryType::Dir => {}
                _ => return Ok(None),
            }
            match self.lookup(ino, part)? {
                Some(i) => ino = i,
                None => return Ok(None),
            }
        }
        Ok(Some(ino))
    }

    /// The inode of a path without emitting any I/O.
    pub fn resolve(&self, path: &str) -> Option<u64> {
        let mut ino = ROOT_INO;
        for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
            ino = self.inodes.get(&ino)?.dir.as_ref()?.get(part)?.0;
        }
        Some(ino)
    }

    /// `unlink`: remove `name` from `parent`; the inode and its blocks are
    /// freed when the last link goes. Freed blocks are not written.
    pub fn unlink(&mut self, parent: u64, name: &str) -> Result<()> {
        self.check_dir(parent)?;
        let ino = self.inodes[&parent]
            .dir
            .as_ref()
            .and_then(|d| d.get(name))
            .map(|(i, _)| i)
            .ok_or_else(|| Error::config(format!("no `{name}` in directory inode {parent}")))?;
        if self.inodes[&ino].kind == EntryType::Dir {
            return Err(Error::config(format!("`{name}` is a directory: use rmdir")));
        }
        self.unlink_entry(parent, name)?;
        self.touch_inode(parent);
        let i = self.inodes.get_mut(&ino).expect("inode");
        i.links -= 1;
        if i.links == 0 {
            self.drop_inode(ino);
        }
        self.touch_inode(ino);
        self.op_done();
        Ok(())
    }

    /// `rmdir` of an empty directory.
    pub fn rmdir(&mut self, parent: u64, name: &str) -> Result<()> {
        self.check_dir(parent)?;
        let ino = self.inodes[&parent]
            .dir
            .as_ref()
            .and_then(|d| d.get(name))
            .map(|(i, _)| i)
            .ok_or_else(|| Error::config(format!("no `{name}` in directory inode {parent}")))?;
        match self.inodes.get(&ino) {
            Some(i) if i.kind == EntryType::Dir => {
                if !i.dir.as_ref().expect("dir").is_empty() {
                    return Err(Error::config(format!("directory `{name}` is not empty")));
                }
            }
            _ => return Err(Error::config(format!("`{name}` is not a directory"))),
        }
        self.unlink_entry(parent, name)?;
        self.inodes.get_mut(&parent).expect("parent").links -= 1;
        self.touch_inode(parent);
        self.drop_inode(ino);
        self.touch_inode(ino);
        self.op_done();
        Ok(())
    }

    /// Copy a namespace in, as `mke2fs -d` does (depth first, names in byte
    /// order), then write everything back. Returns each entry's inode
    /// (entry 0, the root, is inode 2).
    pub fn populate(&mut self, ns: &Namespace) -> Result<Vec<u64>> {
        let inos = self.populate_each(ns, |_, _, _| Ok(()))?;
        self.sync();
        Ok(inos)
    }

    /// As [`populate`](Self::populate) without the final write-back, calling
    /// `after(entry, inode, fs)` once each entry is made (to drain its I/O,
    /// or to mark it).
    pub fn populate_each(
        &mut self,
        ns: &Namespace,
        mut after: impl FnMut(usize, u64, &mut FileSystem) -> Result<()>,
    ) -> Result<Vec<u64>> {
        let mut inos = vec![0u64; ns.len()];
        inos[0] = ROOT_INO;
        after(0, ROOT_INO, self)?;
        for id in ns.creation_order() {
            let e = &ns.entries[id];
            let parent = inos[e.parent];
            let path = || ns.path(id);
            let ino = match e.kind {
                EntryType::Dir if parent == ROOT_INO && e.name == "lost+found" => Ok(self.lost_found),
                EntryType::Dir => self.mkdir(parent, &e.name),
                EntryType::File => self.create(parent, &e.name, e.size),
                EntryType::Symlink => self.symlink(parent, &e.name, e.size),
                EntryType::Special => self.mknod(parent, &e.name),
            }
            .map_err(|err| Error::config(format!("{}: {err}", path())))?;
            inos[id] = ino;
            after(id, ino, self)?;
        }
        Ok(inos)
    }

    /// Owner and kind of every block in use (static blocks from the layout,
    /// the others from the inodes that point to them).
    pub fn block_tags(&self) -> FxHashMap<u64, Tag> {
        let mut out = FxHashMap::default();
        for (&ino, i) in &self.inodes {
            let parent = i.parent;
            let kind = if i.kind == EntryType::Dir {
                BlockKind::Directory
            } else {
                BlockKind::Data
            };
            for &b in &i.map.data {
                out.insert(b, Tag::of(ino, kind, parent));
            }
            for b in i.map.pointer_blocks() {
                out.insert(b, Tag::of(ino, BlockKind::Indirect, parent));
            }
        }
        for g in &self.geo.groups {
            for b in g.start..=g.end {
                let kind = match self.geo.classify(b) {
                    StaticKind::Superblock => BlockKind::Superblock,
                    StaticKind::Descriptors => BlockKind::Descriptors,
                    StaticKind::ReservedDescriptors => {
                        out.insert(b, Tag::of(RESIZE_INO, BlockKind::ReservedDescriptors, 0));
                        continue;
                    }
                    StaticKind::BlockBitmap => BlockKind::BlockBitmap,
                    StaticKind::InodeBitmap => BlockKind::InodeBitmap,
                    StaticKind::InodeTable => BlockKind::InodeTable,
                    StaticKind::Boot | StaticKind::Dynamic => continue,
                };
                out.insert(b, Tag::shared(kind));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsmodel::namespace::parse_listing;

    fn small(bs: u64) -> FileSystem {
        FileSystem::mkfs(&FsOptions {
            mkfs: MkfsParams::new(8 << 20, bs),
            flush_every: 0,
            allocator: Allocator::Libext2fs,
        })
        .unwrap()
    }

    fn small22(bs: u64) -> FileSystem {
        FileSystem::mkfs(&FsOptions {
            allocator: Allocator::Linux22,
            ..FsOptions::new(MkfsParams::new(8 << 20, bs))
        })
        .unwrap()
    }

    // The fresh 8 MiB, 1 KiB-block file system (one group) uses blocks
    // 1..=561: a new file's first block goes to the first free byte of the
    // bitmap (blocks 569..576) moved back over the free blocks before it, 562.

    #[test]
    fn linux22_a_growing_file_takes_its_window_and_close_releases_the_rest() {
        let mut fs = small22(1024);
        let a = fs.creat(ROOT_INO, "a").unwrap();
        fs.write(a, 1024).unwrap();
        // 562, and 563..569 reserved.
        assert_eq!(fs.inode(a).unwrap().map.data, vec![562]);
        assert_eq!(fs.prealloc_window(a), Some((563, 7)));
        assert_eq!(fs.free_blocks(), 7630 - 8);
        for _ in 1..10 {
            fs.write(a, 1024).unwrap();
        }
        // 563..569 from the window; 570 (the window spent, the goal free)
        // reserves 571..577, of which 571 is taken.
        assert_eq!(fs.inode(a).unwrap().map.data, (562..572).collect::<Vec<_>>());
        assert_eq!(fs.prealloc_window(a), Some((572, 6)));
        assert_eq!(fs.free_blocks(), 7630 - 16);
        fs.close(a);
        assert_eq!(fs.prealloc_window(a), None);
        assert_eq!(fs.free_blocks(), 7630 - 10);
        assert!(!fs.block_in_use(572) && !fs.block_in_use(577));
    }

    #[test]
    fn linux22_files_written_interleaved_get_interleaved_8_block_runs() {
        let write_alternately = |fs: &mut FileSystem| -> (Vec<u64>, Vec<u64>) {
            let a = fs.creat(ROOT_INO, "a").unwrap();
            let b = fs.creat(ROOT_INO, "b").unwrap();
            for _ in 0..10 {
                fs.write(a, 1024).unwrap();
                fs.write(b, 1024).unwrap();
            }
            fs.close(a);
            fs.close(b);
            (
                fs.inode(a).unwrap().map.data.clone(),
                fs.inode(b).unwrap().map.data.clone(),
            )
        };
        let mut fs = small22(1024);
        let (a, b) = write_alternately(&mut fs);
        // a: 562 + window 563..569. b: the first free byte is now 577..584,
        // back to 570, window 571..577. a's 9th aims at 570 (b's): no free
        // block up to the 64-block boundary (576), the next free byte
        // 585..592 moved back to 578. b's 9th aims at 578 (a's): the near
        // search finds 586 (after a's window 579..585).
        let want_a: Vec<u64> = (562..570).chain([578, 579]).collect();
        let want_b: Vec<u64> = (570..578).chain([586, 587]).collect();
        assert_eq!((a, b), (want_a, want_b));
        // Both windows released at close: 20 blocks in use.
        assert_eq!(fs.free_blocks(), 7630 - 20);
        // libext2fs (no windows): the two files alternate block by block.
        let mut lib = small(1024);
        let (a, b) = write_alternately(&mut lib);
        assert_eq!(a, (0..10).map(|i| 562 + 2 * i).collect::<Vec<_>>());
        assert_eq!(b, (0..10).map(|i| 563 + 2 * i).collect::<Vec<_>>());
    }

    #[test]
    fn linux22_new_files_skip_holes_smaller_than_an_aligned_byte() {
        for (alloc, d_first) in [(Allocator::Libext2fs, 565), (Allocator::Linux22, 571)] {
            let mut fs = FileSystem::mkfs(&FsOptions {
                allocator: alloc,
                ..FsOptions::new(MkfsParams::new(8 << 20, 1024))
            })
            .unwrap();
            // a 562..564, b 565..567, c 568..570 either way (2.2: b's free
            // byte 569..576 moved back to 565; c's moved back to 568).
            for name in ["a", "b", "c"] {
                fs.create(ROOT_INO, name, 3 * 1024).unwrap();
            }
            let c = fs.resolve("c").unwrap();
            assert_eq!(fs.inode(c).unwrap().map.data, vec![568, 569, 570], "{alloc:?}");
            fs.unlink(ROOT_INO, "b").unwrap();
            // d: libext2fs fills b's hole; 2.2 looks for 8 free aligned
            // blocks (577..584) and moves back to 571, after c.
            let d = fs.create(ROOT_INO, "d", 2 * 1024).unwrap();
            assert_eq!(fs.inode(d).unwrap().map.data, vec![d_first, d_first + 1], "{alloc:?}");
        }
    }

    #[test]
    fn linux22_directories_spread_over_the_emptiest_groups() {
        // 64 MiB, 1 KiB blocks: 8 groups; 1, 3, 5, 7 hold superblock copies
        // and group 0 the root: new directories go to 2, 4, 6 in turn, each
        // with its first block the first free one of its group.
        for alloc in [Allocator::Libext2fs, Allocator::Linux22] {
            let mut fs = FileSystem::mkfs(&FsOptions {
                allocator: alloc,
                ..FsOptions::new(MkfsParams::new(64 << 20, 1024))
            })
            .unwrap();
            let groups: Vec<u64> = ["x", "y", "z", "w"]
                .iter()
                .map(|n| {
                    let d = fs.mkdir(ROOT_INO, n).unwrap();
                    let g = fs.geometry().group_of_inode(d);
                    let first = fs.inode(d).unwrap().map.data[0];
                    assert_eq!(fs.geometry().group_of_block(first), Some(g));
                    g
                })
                .collect();
            let want = if alloc == Allocator::Linux22 {
                vec![2, 4, 6, 2]
            } else {
                vec![0; 4]
            };
            assert_eq!(groups, want, "{alloc:?}");
        }
        let mut fs = FileSystem::mkfs(&FsOptions {
            allocator: Allocator::Linux22,
            ..FsOptions::new(MkfsParams::new(64 << 20, 1024))
        })
        .unwrap();
        let x = fs.mkdir(ROOT_INO, "x").unwrap();
        let g2 = fs.geometry().groups[2].clone();
        assert_eq!(x, 2 * fs.geometry().inodes_per_group + 1);
        assert_eq!(fs.inode(x).unwrap().map.data, vec![g2.inode_table[1] + 1]);
        // A file in it: its inode and blocks in group 2 too.
        let f = fs.create(x, "f", 5000).unwrap();
        assert_eq!(fs.geometry().group_of_inode(f), 2);
        assert_eq!(fs.inode(f).unwrap().map.data[0], g2.inode_table[1] + 2);
    }

    #[test]
    fn fresh_file_system_matches_mke2fs_usage() {
        // mke2fs -t ext2 -b 1024 img 8192: 7630 free blocks (root 1 block,
        // lost+found 12, resize DIND 1 after the 548 static blocks), 2037
        // free inodes; used blocks 548..=561.
        let fs = small(1024);
        assert_eq!(fs.free_blocks(), 7630);
        assert_eq!(fs.free_inodes(), 2037);
        assert_eq!(fs.inode(ROOT_INO).unwrap().map.data, vec![548]);
        assert_eq!(fs.inode(11).unwrap().map.data, (549..561).collect::<Vec<_>>());
        assert_eq!(fs.inode(RESIZE_INO).unwrap().map.dind, vec![561]);
    }

    #[test]
    fn files_grow_through_indirect_blocks_contiguously() {
        let mut fs = small(1024);
        let apb = 256;
        let n = NDIR + apb + 300;
        let ino = fs.create(ROOT_INO, "big", n * 1024).unwrap();
        let m = &fs.inode(ino).unwrap().map;
        assert_eq!(m.data.len() as u64, n);
        assert_eq!(m.ind.len(), 1 + 2);
        assert_eq!(m.dind.len(), 1);
        // 0-11, IND, 12..267, DIND, IND, 268..523, IND, 524..
        let d0 = m.data[0];
        assert_eq!(m.data[11], d0 + 11);
        assert_eq!(m.ind[0], d0 + 12);
        assert_eq!(m.data[12], d0 + 13);
        assert_eq!(m.dind[0], m.data[267] + 1);
        assert_eq!(m.ind[1], m.dind[0] + 1);
        assert_eq!(m.data[268], m.ind[1] + 1);
        assert_eq!(m.ind[2], m.data[523] + 1);
        let used = fs.geometry().blocks - fs.free_blocks();
        fs.unlink(ROOT_INO, "big").unwrap();
        assert_eq!(fs.geometry().blocks - fs.free_blocks(), used - n - 4);
        assert!(fs.inode(ino).is_none());
    }

    #[test]
    fn directories_fill_first_fit_and_grow() {
        let mut fs = small(1024);
        let d = fs.mkdir(ROOT_INO, "d").unwrap();
        // 1024 - 24 bytes after `.` and `..`; 16-byte entries ("fNNNN" = 5 chars → 16).
        for i in 0..62 {
            fs.create(d, &format!("f{i:04}"), 0).unwrap();
        }
        assert_eq!(fs.inode(d).unwrap().map.data.len(), 1);
        fs.create(d, "f9999", 0).unwrap();
        assert_eq!(fs.inode(d).unwrap().map.data.len(), 2);
        // Freeing an entry in block 0 makes room there again.
        fs.unlink(d, "f0010").unwrap();
        fs.create(d, "x", 0).unwrap();
        assert_eq!(fs.inode(d).unwrap().dir.as_ref().unwrap().get("x").unwrap().1, 0);
    }

    #[test]
    fn metadata_is_written_back_on_sync_with_bitmaps() {
        let mut fs = small(4096);
        fs.drain_io();
        fs.create(ROOT_INO, "a", 10_000).unwrap();
        let io = fs.drain_io();
        assert_eq!(io.len(), 3);
        assert!(io.iter().all(|x| x.op == Op::Write && x.tag.kind == BlockKind::Data));
        fs.sync();
        let io = fs.drain_io();
        let kinds: Vec<BlockKind> = io.iter().map(|x| x.tag.kind).collect();
        for k in [
            BlockKind::Superblock,
            BlockKind::Descriptors,
            BlockKind::BlockBitmap,
            BlockKind::InodeBitmap,
            BlockKind::InodeTable,
            BlockKind::Directory,
        ] {
            assert!(kinds.contains(&k), "{k:?} in {kinds:?}");
        }
        let bm = io.iter().find(|x| x.tag.kind == BlockKind::BlockBitmap).unwrap();
        let bits = bm.bitmap.as_ref().unwrap();
        let first_data = fs.inode(fs.resolve("a").unwrap()).unwrap().map.data[0];
        assert_eq!(bits[(first_data / 64) as usize] >> (first_data % 64) & 1, 1);
    }

    #[test]
    fn populate_follows_the_listing() {
        let ns = parse_listing(
            &b"d 1 /b\nf 3000 /b/x\nl 80 /b/lnk\nl 5 /b/short\np 0 /fifo\nd 1 /a\n"[..],
            "t",
        )
        .unwrap();
        let mut fs = small(1024);
        let inos = fs.populate(&ns).unwrap();
        // Depth first in name order: a (12), b (13), b/lnk (14), b/short (15), b/x (16), fifo (17).
        assert_eq!(fs.resolve("a"), Some(12));
        assert_eq!(fs.resolve("b/x"), Some(16));
        assert_eq!(fs.resolve("fifo"), Some(17));
        assert_eq!(fs.inode(16).unwrap().map.data.len(), 3);
        assert_eq!(fs.inode(14).unwrap().map.data.len(), 1);
        assert_eq!(fs.inode(15).unwrap().map.data.len(), 0);
        assert!(inos.iter().all(|&i| i != 0));
        let tags = fs.block_tags();
        let used: u64 = (0..fs.geometry().blocks).filter(|&b| fs.block_in_use(b)).count() as u64;
        assert_eq!(tags.len() as u64, used - 1 /* boot block */);
    }
}
