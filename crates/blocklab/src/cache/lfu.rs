//! LFU: evict the block with the fewest accesses since it entered the cache.
//!
//! The count starts at 1 on insertion and is forgotten on eviction. Among
//! blocks with the same count the least recently accessed one goes first
//! (libCacheSim `LFU` appends a block to the tail of its frequency bucket on
//! every access and evicts from the bucket head: the same order).
//!
//! A binary min-heap keyed by (count, time of last access) with lazy deletion:
//! every access pushes a fresh entry and an entry is live only while its time
//! equals the block's last-access time (times are unique). Stale entries are
//! swept when they outnumber the live ones, so the heap stays within about
//! twice the cache size and the cost is O(log n) per access.

use super::{Access, Policy};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub struct Lfu {
    capacity: usize,
    map: FxHashMap<u64, u32>,
    blocks: Vec<u64>,
    freq: Vec<u64>,
    last: Vec<u64>,
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    now: u64,
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
            last: Vec::with_capacity(reserve),
            heap: BinaryHeap::with_capacity(2 * reserve + 64),
            now: 0,
        }
    }

    #[inline]
    fn live(&self, e: &(u64, u64, u32)) -> bool {
        self.last[e.2 as usize] == e.1
    }

    fn sweep_if_needed(&mut self) {
        if self.heap.len() > 2 * self.map.len() + 64 {
            let last = &self.last;
            self.heap.retain(|Reverse(e)| last[e.2 as usize] == e.1);
        }
    }

    fn evict(&mut self) -> u32 {
        loop {
            let Reverse(e) = self.heap.pop().expect("full cache has live heap entries");
            if self.live(&e) {
                let slot = e.2;
                self.map.remove(&self.blocks[slot as usize]);
                return slot;
            }
        }
    }
}

impl Policy for Lfu {
    #[inline]
    fn access(&mut self, a: &Access) -> bool {
        self.now += 1;
        let now = self.now;
        if let Some(&slot) = self.map.get(&a.block) {
            let s = slot as usize;
            self.freq[s] += 1;
            self.last[s] = now;
            self.heap.push(Reverse((self.freq[s], now, slot)));
            self.sweep_if_needed();
            return true;
        }
        let slot = if self.map.len() >= self.capacity {
            let s = self.evict();
            self.blocks[s as usize] = a.block;
            self.freq[s as usize] = 1;
            self.last[s as usize] = now;
            s
        } else {
            self.blocks.push(a.block);
            self.freq.push(1);
            self.last.push(now);
            (self.blocks.len() - 1) as u32
        };
        self.map.insert(a.block, slot);
        self.heap.push(Reverse((1, now, slot)));
        self.sweep_if_needed();
        false
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}
