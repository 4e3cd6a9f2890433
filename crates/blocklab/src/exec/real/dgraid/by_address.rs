//! The stand-in classifier: each block tagged by its address alone, until
//! inference from the bytes (`dgraid::infer`) is wired in.
//!
//! The layout is mke2fs's for the export's size (`fs_size`, the array's
//! block size), announced at the first write: its static blocks
//! (superblocks, descriptors, bitmaps, inode tables) are system metadata,
//! replicated `meta_copies` times; every other block is file data of a
//! made-up owner, one per `SPAN` consecutive blocks (so runs of a file stay
//! on one home site as mke2fs -d and ext2's allocator lay them out). It
//! defers nothing. A file system made with other parameters than mke2fs's
//! defaults has its metadata placed as data: what the real classifier fixes.

use crate::dgraid::classify::{store_each, Action, Classifier};
use crate::dgraid::infer::DEFAULT_OWNER_BASE;
use crate::fsmodel::kind::{BlockKind, Tag};
use crate::fsmodel::Geometry;

/// Blocks per made-up owner.
pub const SPAN: u64 = 64;

pub struct ByAddress {
    geo: Geometry,
    announced: bool,
}

impl ByAddress {
    pub fn new(geo: Geometry) -> ByAddress {
        ByAddress { geo, announced: false }
    }

    /// The tag this classifier gives `block`.
    pub fn tag(geo: &Geometry, block: u64) -> Tag {
        match geo.classify(block).block_kind() {
            Some(kind) => Tag::shared(kind),
            // Made-up owners above every inode number (as inference's
            // default placements), so none is taken for an inode with a
            // role in the layer (the journal, 8).
            None => Tag::of(DEFAULT_OWNER_BASE + block / SPAN, BlockKind::Data, 0),
        }
    }
}

impl Classifier for ByAddress {
    fn write(&mut self, block: u64, data: &[u8]) -> Vec<Action> {
        store_each(&self.geo, &mut self.announced, block, data, |b| {
            ByAddress::tag(&self.geo, b)
        })
    }

    fn deferred(&self, _block: u64) -> Option<&[u8]> {
        None
    }

    fn flush(&mut self) -> Vec<Action> {
        Vec::new()
    }
}
