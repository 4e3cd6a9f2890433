//! OPT (Belady's MIN), offline: on a miss with a full cache, evict the cached
//! block whose next use lies farthest in the future (`Access::next_use`).
//! The missing block is always inserted (demand paging), as libCacheSim's
//! `Belady` does; blocks never used again (`NEVER`) go first, ties among them
//! broken by the most recent access first (ties cannot change hits or misses
//! when next uses are exact).
//!
//! A binary max-heap keyed by (next use, access stamp) with lazy deletion
//! ([`LazyHeap`]): each access pushes a new entry stamped with its (unique)
//! access count.
//!
//! `remove` drops the block (OPT keeps no history; a removed block that comes
//! back is a miss like any other).

use super::index::{BlockIndex, PREFETCH_AHEAD};
use super::lazy_heap::LazyHeap;
use super::{Access, Policy};

pub struct Opt {
    capacity: usize,
    map: BlockIndex,
    blocks: Vec<u64>,
    /// (next use, access stamp, slot), largest first.
    heap: LazyHeap<(u64, u64, u32)>,
    /// Slots of removed blocks.
    free: Vec<u32>,
    now: u64,
    evicted: Option<u64>,
}

impl Opt {
    pub fn new(capacity: usize) -> Self {
        let reserve = capacity.min(1 << 20);
        Opt {
            capacity,
            map: BlockIndex::with_capacity(reserve),
            blocks: Vec::with_capacity(reserve),
            heap: LazyHeap::with_capacity(reserve),
            free: Vec::new(),
            now: 0,
            evicted: None,
        }
    }
}

impl Policy for Opt {
    #[inline]
    fn access(&mut self, a: &Access) -> bool {
        self.now += 1;
        self.evicted = None;
        let now = self.now;
        if let Some(slot) = self.map.get(a.block) {
            self.heap.push((a.next_use, now, slot));
            return true;
        }
        let slot = if self.map.len() >= self.capacity {
            let s = self.heap.pop_live();
            let old = self.blocks[s as usize];
            self.evicted = Some(old);
            self.map.remove(old);
            self.blocks[s as usize] = a.block;
            s
        } else if let Some(s) = self.free.pop() {
            self.blocks[s as usize] = a.block;
            s
        } else {
            self.blocks.push(a.block);
            (self.blocks.len() - 1) as u32
        };
        self.map.insert(a.block, slot);
        self.heap.push((a.next_use, now, slot));
        false
    }

    fn access_all(&mut self, accesses: &[Access]) -> u64 {
        let mut hits = 0;
        for (i, a) in accesses.iter().enumerate() {
            if let Some(ahead) = accesses.get(i + PREFETCH_AHEAD) {
                self.map.prefetch(ahead.block);
            }
            hits += self.access(a) as u64;
        }
        hits
    }

    fn contains(&self, block: u64) -> bool {
        self.map.contains(block)
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        match self.map.remove(block) {
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
