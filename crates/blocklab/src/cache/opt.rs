//! OPT (Belady's MIN), offline: on a miss with a full cache, evict the cached
//! block whose next use lies farthest in the future (`Access::next_use`).
//! The missing block is always inserted (demand paging), as libCacheSim's
//! `Belady` does; blocks never used again (`NEVER`) go first, ties among them
//! broken by the most recent access first (ties cannot change hits or misses
//! when next uses are exact).
//!
//! A binary max-heap keyed by (next use, access stamp) with lazy deletion: each
//! access pushes a new entry; an entry is live while its stamp is the block's
//! latest (stamps are unique). Stale entries are swept when they outnumber the
//! live ones, so the heap stays within about twice the cache size.

use super::{Access, Policy};
use rustc_hash::FxHashMap;
use std::collections::BinaryHeap;

pub struct Opt {
    capacity: usize,
    map: FxHashMap<u64, u32>,
    blocks: Vec<u64>,
    stamp: Vec<u64>,
    heap: BinaryHeap<(u64, u64, u32)>,
    now: u64,
}

impl Opt {
    pub fn new(capacity: usize) -> Self {
        let reserve = capacity.min(1 << 20);
        let mut map = FxHashMap::default();
        map.reserve(reserve);
        Opt {
            capacity,
            map,
            blocks: Vec::with_capacity(reserve),
            stamp: Vec::with_capacity(reserve),
            heap: BinaryHeap::with_capacity(2 * reserve + 64),
            now: 0,
        }
    }

    fn sweep_if_needed(&mut self) {
        if self.heap.len() > 2 * self.map.len() + 64 {
            let stamp = &self.stamp;
            self.heap.retain(|e| stamp[e.2 as usize] == e.1);
        }
    }

    fn evict(&mut self) -> u32 {
        loop {
            let (_, st, slot) = self.heap.pop().expect("full cache has live heap entries");
            if self.stamp[slot as usize] == st {
                self.map.remove(&self.blocks[slot as usize]);
                return slot;
            }
        }
    }
}

impl Policy for Opt {
    #[inline]
    fn access(&mut self, a: &Access) -> bool {
        self.now += 1;
        let now = self.now;
        if let Some(&slot) = self.map.get(&a.block) {
            self.stamp[slot as usize] = now;
            self.heap.push((a.next_use, now, slot));
            self.sweep_if_needed();
            return true;
        }
        let slot = if self.map.len() >= self.capacity {
            let s = self.evict();
            self.blocks[s as usize] = a.block;
            self.stamp[s as usize] = now;
            s
        } else {
            self.blocks.push(a.block);
            self.stamp.push(now);
            (self.blocks.len() - 1) as u32
        };
        self.map.insert(a.block, slot);
        self.heap.push((a.next_use, now, slot));
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
