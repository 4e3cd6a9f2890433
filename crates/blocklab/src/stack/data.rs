//! What a stack does with block *contents*, when an executor moves real
//! bytes (the real executor); counted and timed runs have no data path.
//!
//! The layers decide (hits, fills, evictions, destages) exactly as in a
//! counted run and tell the data path, block by block, what they did with a
//! block's contents; the bottom of the stack tells it what reached the
//! target. Within one request everything happens in call order, so the data
//! path needs only a *frame* of block contents per piece of work: the
//! request's own, and one per background piece (a destage) while it is
//! handled (see `layer::Below::background`).
//!
//! A layer's store is a device of the data path, addressed by the layer's
//! index in the stack and the block; `slot` is where in the device the
//! block lives, for stores that are files addressed by frame (the SSD tier,
//! later); a host cache passes `None`.

use super::layer::Io;
use crate::error::Result;

/// The contents side of a stack run (see the module comment). Every hook
/// about a block the store should hold and does not is an error, never
/// zero bytes.
pub trait DataPath {
    /// A hit on `block` in layer `layer`: the frame gets the store's copy.
    fn hit(&mut self, layer: usize, block: u64, slot: Option<u64>) -> Result<()>;
    /// Layer `layer` keeps `block` (a fill after a miss, a write into the
    /// cache): the store gets the frame's copy.
    fn keep(&mut self, layer: usize, block: u64, slot: Option<u64>) -> Result<()>;
    /// Layer `layer` no longer holds `block` (a clean eviction, an
    /// invalidation).
    fn forget(&mut self, layer: usize, block: u64, slot: Option<u64>);
    /// Layer `layer` evicted dirty `block`: its contents leave the store for
    /// the destage that the layer sends below next.
    fn evict_dirty(&mut self, layer: usize, block: u64, slot: Option<u64>) -> Result<()>;
    /// Layer `layer` destages `block` and keeps it (clean): a copy for the
    /// destage that the layer sends below next.
    fn stage(&mut self, layer: usize, block: u64, slot: Option<u64>) -> Result<()>;
    /// A background piece of work of layer `layer` made of `ios` starts: a
    /// frame of its own, holding the contents that layer staged for its blocks.
    fn begin_background(&mut self, layer: usize, ios: &[Io]);
    /// A read ahead by layer `layer` starts: a frame of its own, empty (a
    /// read takes no staged contents of the layer's: its destages need
    /// them), whose blocks the layer keeps before the piece ends. Its reads
    /// fail only the blocks they bring: no request waits for them, a later
    /// hit on such a block does (and gets the error, never zeroes).
    fn begin_read_ahead(&mut self, layer: usize);
    /// The background piece is done: back to the frame of the work that made it.
    fn end_background(&mut self);
    /// `io` reached the target: a read fills the frame from the storage, a
    /// write stores the frame's blocks.
    fn target(&mut self, io: &Io) -> Result<()>;
}

/// The index of the layer whose background work is tagged `tag` (see
/// `runtime::layer_tag`): the address of its store.
pub fn layer_of(tag: u64) -> usize {
    ((tag >> 48) & 0x7fff) as usize
}
