//! Where a D-GRAID array learns what a block is: the seam between the
//! placement layer ([`super::layer::Dgraid`]) on real bytes and whatever
//! tells it each block's owner and kind.
//!
//! The simulators read tags from annotated traces or from the ext2 model.
//! On real bytes nothing is annotated: a [`Classifier`] sees every write of
//! the file system's blocks, as the paper's semantically-smart disk does, and
//! answers with [`Action`]s the array carries out. Two classifiers exist or
//! will: inference from the bytes alone (`infer`, Alexander's), and one that
//! is told the answer (from `debugfs` of the finished image), the
//! annotation-driven placement inference is measured against.

use crate::error::Error;
use crate::fsmodel::geometry::Geometry;
use crate::fsmodel::kind::Tag;

/// What the array must do after a write (or at a flush).
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// The file system's layout became known (its superblock was written
    /// and parsed): the placement layer can be built from it.
    Geometry(Geometry),
    /// Store these contents of fs block `block` as `tag` says (a first
    /// placement or an overwrite). A block the classifier had deferred comes
    /// back this way, with the contents it held.
    Store { block: u64, tag: Tag, data: Vec<u8> },
    /// Fs block `block`, already stored, belongs elsewhere (its owner became
    /// known, or it was freed and reused by another file): move its stored
    /// contents to where `tag` places it.
    Retag { block: u64, tag: Tag },
    /// The file system's block bitmap shows `block` free: the live-block
    /// map drops it (its copies may be released).
    Free { block: u64 },
}

/// The file system's writes in, the array's actions out. Blocks are fs
/// blocks (`Geometry::block_size` bytes each, the block size the array is
/// configured with); `data` is whole blocks: the array turns an NBD
/// request (any 512-byte-aligned extent) into whole fs blocks first,
/// reading the rest of a partly written block (from its store, or
/// [`Classifier::deferred`]) and passing the whole block.
pub trait Classifier: Send {
    /// A write of `data` (a whole number of blocks) starting at fs block
    /// `block`. Blocks it cannot place yet are held (deferred) and not in
    /// the answer; the classifier keeps their newest contents.
    fn write(&mut self, block: u64, data: &[u8]) -> Vec<Action>;

    /// The newest contents of a block held deferred, so that a read of it
    /// returns what was written.
    fn deferred(&self, block: u64) -> Option<&[u8]>;

    /// The file system asked for a flush: every deferred block must reach
    /// the array (placed as well as the classifier can; a later write may
    /// retag it).
    fn flush(&mut self) -> Vec<Action>;

    /// Whether the classifier knows the file system's layout. Until it
    /// does, it holds every write (nothing can be placed) and a flush
    /// places nothing: the array must keep those writes durable itself.
    fn layout_known(&self) -> bool {
        true
    }

    /// Why the classifier gave up on this file system (a layout it does
    /// not infer, e.g. ext4's 64bit), if it did. From then on it answers
    /// nothing and holds nothing new: the array must stop accepting writes
    /// (fail them) and report this error.
    fn refused(&self) -> Option<&Error> {
        None
    }
}

/// The answer of a classifier that defers nothing: the layout at its first
/// write (`announced` remembers that it was given), then every block of
/// `data` (fs blocks from `block` on) stored with the tag `tag` gives it.
pub fn store_each(
    geo: &Geometry,
    announced: &mut bool,
    block: u64,
    data: &[u8],
    mut tag: impl FnMut(u64) -> Tag,
) -> Vec<Action> {
    let bs = geo.block_size as usize;
    let mut out = Vec::with_capacity(data.len() / bs + 1);
    if !*announced {
        *announced = true;
        out.push(Action::Geometry(geo.clone()));
    }
    for (i, d) in data.chunks(bs).enumerate() {
        let b = block + i as u64;
        out.push(Action::Store {
            block: b,
            tag: tag(b),
            data: d.to_vec(),
        });
    }
    out
}
