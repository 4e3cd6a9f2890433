//! A binary heap of per-slot entries with lazy deletion, used by
//! OPT, which keeps its eviction order in a heap.
//!
//! Re-keying a cached block pushes a fresh entry instead of finding and
//! changing the old one: each entry carries the stamp of the access that made
//! it, and it is live only while that stamp is still its slot's latest (stamps
//! must be unique). Dropping a block ([`LazyHeap::kill`]) just gives its slot a
//! stamp no entry carries. Stale entries are skipped when popped and swept when
//! they outnumber the slots, so the heap stays within about twice the number of
//! slots and every operation is O(log n) amortized.
//!
//! The entry type fixes the order: a plain tuple for a max-heap, `Reverse` for
//! a min-heap. Everything is monomorphized: no dynamic dispatch.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A heap entry `(key, stamp, slot)`; its `Ord` is the eviction order.
pub(crate) trait Stamped: Ord {
    fn stamp(&self) -> u64;
    fn slot(&self) -> u32;
}

/// Max-heap entry: the largest `(key, stamp)` pops first.
impl Stamped for (u64, u64, u32) {
    #[inline]
    fn stamp(&self) -> u64 {
        self.1
    }
    #[inline]
    fn slot(&self) -> u32 {
        self.2
    }
}

/// Min-heap entry: the smallest `(key, stamp)` pops first.
impl Stamped for Reverse<(u64, u64, u32)> {
    #[inline]
    fn stamp(&self) -> u64 {
        self.0 .1
    }
    #[inline]
    fn slot(&self) -> u32 {
        self.0 .2
    }
}

/// Stamp of a killed slot; no entry may carry it.
const DEAD: u64 = u64::MAX;

pub(crate) struct LazyHeap<E> {
    heap: BinaryHeap<E>,
    /// Latest stamp of each slot; slots are numbered densely from 0.
    stamps: Vec<u64>,
}

impl<E: Stamped> LazyHeap<E> {
    /// Room for `slots` slots without reallocating.
    pub fn with_capacity(slots: usize) -> Self {
        LazyHeap {
            heap: BinaryHeap::with_capacity(2 * slots + 64),
            stamps: Vec::with_capacity(slots),
        }
    }

    /// Make `e` its slot's live entry (superseding any older one). A slot not
    /// seen before must be the next one, `slots()`.
    #[inline]
    pub fn push(&mut self, e: E) {
        debug_assert!(e.stamp() != DEAD);
        let s = e.slot() as usize;
        if s == self.stamps.len() {
            self.stamps.push(e.stamp());
        } else {
            self.stamps[s] = e.stamp();
        }
        self.heap.push(e);
        self.sweep_if_needed();
    }

    /// Remove and return the slot of the first live entry in heap order. Its
    /// slot keeps its stamp until the caller pushes the slot's new entry.
    pub fn pop_live(&mut self) -> u32 {
        loop {
            let e = self.heap.pop().expect("full cache has live heap entries");
            if self.stamps[e.slot() as usize] == e.stamp() {
                return e.slot();
            }
        }
    }

    /// Drop `slot`'s live entry (its block left the cache); the slot has no
    /// live entry until the caller pushes one for it again.
    pub fn kill(&mut self, slot: u32) {
        self.stamps[slot as usize] = DEAD;
    }

    /// Every slot has at most one live entry (a slot popped by `pop_live` is
    /// reused by the caller's next `push`), so `stamps.len()` bounds them.
    fn sweep_if_needed(&mut self) {
        if self.heap.len() > 2 * self.stamps.len() + 64 {
            let stamps = &self.stamps;
            self.heap.retain(|e| stamps[e.slot() as usize] == e.stamp());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_entries_are_skipped_and_swept() {
        let mut h: LazyHeap<Reverse<(u64, u64, u32)>> = LazyHeap::with_capacity(2);
        h.push(Reverse((5, 1, 0)));
        h.push(Reverse((7, 2, 1)));
        h.push(Reverse((9, 3, 0))); // slot 0 re-keyed: (5, 1) is stale
        assert_eq!(h.pop_live(), 1); // not the stale (5, 1, 0)
        h.push(Reverse((8, 4, 1)));
        assert_eq!(h.pop_live(), 1);
        // Many re-keys of two slots: the heap stays bounded by the sweep.
        for t in 5..10_000u64 {
            h.push(Reverse((t, t, (t % 2) as u32)));
            assert!(h.heap.len() <= 2 * 2 + 64 + 1);
        }
        let mut max: LazyHeap<(u64, u64, u32)> = LazyHeap::with_capacity(2);
        max.push((3, 1, 0));
        max.push((1, 2, 1));
        max.push((0, 3, 0)); // slot 0 now has the smaller key
        assert_eq!(max.pop_live(), 1);
    }

    #[test]
    fn killed_slots_never_pop_until_pushed_again() {
        let mut h: LazyHeap<Reverse<(u64, u64, u32)>> = LazyHeap::with_capacity(3);
        h.push(Reverse((1, 1, 0)));
        h.push(Reverse((2, 2, 1)));
        h.push(Reverse((3, 3, 2)));
        h.kill(0);
        assert_eq!(h.pop_live(), 1);
        h.push(Reverse((9, 4, 0))); // slot 0 reused: only its new entry counts
        assert_eq!(h.pop_live(), 2);
        assert_eq!(h.pop_live(), 0);
    }
}
