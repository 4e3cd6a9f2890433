//! Slot bookkeeping shared by the list-based policies that keep ghost ids
//! (ARC, 2Q, S3-FIFO, MQ): block -> slot map, the block of each slot, and
//! the free list of slots to reuse.
//!
//! A slot is a dense `u32` index, so a policy's per-slot data (queue tag,
//! counters, links) lives in plain vectors indexed by it. When [`Slab::insert`]
//! hands out a new slot, the caller grows its own vectors by one.

use super::index::BlockIndex;

pub(crate) struct Slab {
    map: BlockIndex,
    blocks: Vec<u64>,
    free: Vec<u32>,
}

impl Slab {
    /// Room for `n` slots without reallocating.
    pub fn with_capacity(n: usize) -> Self {
        Slab {
            map: BlockIndex::with_capacity(n),
            blocks: Vec::with_capacity(n),
            free: Vec::new(),
        }
    }

    /// The slot of `block`, if the policy holds it (cached or ghost).
    #[inline]
    pub fn get(&self, block: u64) -> Option<u32> {
        self.map.get(block)
    }

    /// Start loading the index entry of `block` (see [`BlockIndex::prefetch`]).
    #[inline(always)]
    pub fn prefetch(&self, block: u64) {
        self.map.prefetch(block);
    }

    /// The block of slot `s` (cached or ghost).
    #[inline]
    pub fn block(&self, s: u32) -> u64 {
        self.blocks[s as usize]
    }

    /// Give `block` a slot: a freed one when there is one, else a new one.
    /// Returns the slot and whether it is new (then it is the last index and
    /// the caller must push that slot's entries onto its own vectors).
    #[inline]
    pub fn insert(&mut self, block: u64) -> (u32, bool) {
        let (s, new) = match self.free.pop() {
            Some(s) => {
                self.blocks[s as usize] = block;
                (s, false)
            }
            None => {
                self.blocks.push(block);
                ((self.blocks.len() - 1) as u32, true)
            }
        };
        self.map.insert(block, s);
        (s, new)
    }

    /// Forget slot `s` and its block for good; the slot will be reused.
    #[inline]
    pub fn forget(&mut self, s: u32) {
        self.map.remove(self.blocks[s as usize]);
        self.free.push(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_after_forget() {
        let mut s = Slab::with_capacity(2);
        assert_eq!(s.insert(10), (0, true));
        assert_eq!(s.insert(11), (1, true));
        s.forget(0);
        assert_eq!(s.get(10), None);
        assert_eq!(s.insert(12), (0, false));
        assert_eq!(s.get(12), Some(0));
        assert_eq!(s.block(0), 12);
        assert_eq!(s.get(11), Some(1));
        assert_eq!(s.insert(13), (2, true));
    }
}
