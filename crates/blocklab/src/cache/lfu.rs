//! LFU: evict the block with the fewest accesses since it entered the cache.
//!
//! The count starts at 1 on insertion and is forgotten on eviction. Among
//! blocks with the same count the least recently accessed one goes first
//! (libCacheSim `LFU` appends a block to the tail of its frequency bucket on
//! every access and evicts from the bucket head: the same order).
//!
//! A binary min-heap keyed by (count, time of last access) with lazy deletion
//! ([`LazyHeap`]): every access pushes a fresh entry stamped with its time
//! (times are unique), so the cost is O(log n) per access.
//!
//! `remove` drops the block and its count (LFU keeps no history: a removed
//! block that comes back starts again at 1, as after an eviction).

use super::lazy_heap::LazyHeap;
use super::{Access, Policy};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;

pub struct Lfu {
    capacity: usize,
    map: FxHashMap<u64, u32>,
    blocks: Vec<u64>,
    freq: Vec<u64>,
    /// (count, time of last access, slot), smallest first.
    heap: LazyHeap<Reverse<(u64, u64, u32)>>,
    /// Slots of removed blocks.
    free: Vec<u32>,
    now: u64,
    evicted: Option<u64>,
}

impl Lfu {
    pub fn new(capacity: usize) -> Self {
        let reserve = capacity.min(1 << 20);
        let mut map = FxHashMap::default();
        map.reserve(reserve);
        Lfu {
            capacity,
            map,
            blocks: Vec::with_capacity(reserve),
            freq: Vec::with_capacity(reserve),
            heap: LazyHeap::with_capacity(reserve),
            free: Vec::new(),
            now: 0,
            evicted: None,
        }
    }
}

impl Policy for Lfu {
    #[inline]
    fn access(&mut self, a: &Access) -> bool {
        self.now += 1;
        self.evicted = None;
        let now = self.now;
        if let Some(&slot) = self.map.get(&a.block) {
            let s = slot as usize;
            self.freq[s] += 1;
            self.heap.push(Reverse((self.freq[s], now, slot)));
            return true;
        }
        let slot = if self.map.len() >= self.capacity {
            let s = self.heap.pop_live();
            let old = self.blocks[s as usize];
            self.evicted = Some(old);
            self.map.remove(&old);
            self.blocks[s as usize] = a.block;
            self.freq[s as usize] = 1;
            s
        } else if let Some(s) = self.free.pop() {
            self.blocks[s as usize] = a.block;
            self.freq[s as usize] = 1;
            s
        } else {
            self.blocks.push(a.block);
            self.freq.push(1);
            (self.blocks.len() - 1) as u32
        };
        self.map.insert(a.block, slot);
        self.heap.push(Reverse((1, now, slot)));
        false
    }

    fn contains(&self, block: u64) -> bool {
        self.map.contains_key(&block)
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        match self.map.remove(&block) {
            Some(s) => {
                self.heap.kill(s);
                self.free.push(s);
                true
            }
            None => false,
        }
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}
