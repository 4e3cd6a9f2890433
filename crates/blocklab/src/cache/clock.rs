//! CLOCK (second chance) with one reference bit per block.
//!
//! A hit sets the block's bit; a newly inserted block starts with the bit
//! clear (libCacheSim `Clock` with its defaults `init-freq=0, n-bit-counter=1`).
//! On a miss with a full cache the hand sweeps the ring: a block with its bit
//! set gets the bit cleared and is passed over, the first block with a clear
//! bit is evicted and the newcomer takes its slot (so it is the last one the
//! hand will reach, exactly like FIFO-reinsertion at the queue head).

use super::{Access, Policy};
use rustc_hash::FxHashMap;

pub struct Clock {
    capacity: usize,
    /// block -> ring slot
    map: FxHashMap<u64, u32>,
    ring: Vec<u64>,
    referenced: Vec<bool>,
    hand: usize,
}

impl Clock {
    pub fn new(capacity: usize) -> Self {
        let reserve = capacity.min(1 << 20);
        let mut map = FxHashMap::default();
        map.reserve(reserve);
        Clock {
            capacity,
            map,
            ring: Vec::with_capacity(reserve),
            referenced: Vec::with_capacity(reserve),
            hand: 0,
        }
    }
}

impl Policy for Clock {
    #[inline]
    fn access(&mut self, a: &Access) -> bool {
        if let Some(&slot) = self.map.get(&a.block) {
            self.referenced[slot as usize] = true;
            return true;
        }
        if self.ring.len() < self.capacity {
            self.map.insert(a.block, self.ring.len() as u32);
            self.ring.push(a.block);
            self.referenced.push(false);
            return false;
        }
        let mut h = self.hand;
        while self.referenced[h] {
            self.referenced[h] = false;
            h = if h + 1 == self.capacity { 0 } else { h + 1 };
        }
        self.map.remove(&self.ring[h]);
        self.ring[h] = a.block;
        self.map.insert(a.block, h as u32);
        self.hand = if h + 1 == self.capacity { 0 } else { h + 1 };
        false
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}
