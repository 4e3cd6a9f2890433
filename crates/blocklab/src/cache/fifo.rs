//! FIFO: evict the block that entered the cache first; hits change nothing.
//!
//! The cache is a ring of `capacity` block ids; once full, the slot under the
//! hand holds the oldest block, which the newcomer overwrites.

use super::{Access, Policy};
use rustc_hash::FxHashMap;

pub struct Fifo {
    capacity: usize,
    /// block -> ring slot
    map: FxHashMap<u64, u32>,
    ring: Vec<u64>,
    /// Next slot to overwrite once the ring is full (the oldest block).
    hand: usize,
}

impl Fifo {
    pub fn new(capacity: usize) -> Self {
        let reserve = capacity.min(1 << 20);
        let mut map = FxHashMap::default();
        map.reserve(reserve);
        Fifo {
            capacity,
            map,
            ring: Vec::with_capacity(reserve),
            hand: 0,
        }
    }
}

impl Policy for Fifo {
    #[inline]
    fn access(&mut self, a: &Access) -> bool {
        if self.map.contains_key(&a.block) {
            return true;
        }
        if self.ring.len() < self.capacity {
            self.map.insert(a.block, self.ring.len() as u32);
            self.ring.push(a.block);
        } else {
            let slot = self.hand;
            self.map.remove(&self.ring[slot]);
            self.ring[slot] = a.block;
            self.map.insert(a.block, slot as u32);
            self.hand = if slot + 1 == self.capacity { 0 } else { slot + 1 };
        }
        false
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}
