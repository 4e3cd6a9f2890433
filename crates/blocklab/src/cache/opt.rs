//! OPT (Belady's MIN), offline: on a miss with a full cache, evict the cached
//! block whose next use lies farthest in the future (`Access::next_use`).
//! The missing block is always inserted (demand paging), as libCacheSim's
//! `Belady` does; blocks never used again (`NEVER`) go first, ties among them
//! broken by the most recent access first (ties cannot change hits or misses
//! when next uses are exact).
//!
//! A binary max-heap of the cached blocks keyed by (next use, access stamp)
//! that knows where each slot sits (`pos`), so an access re-keys its block's
//! entry in place: a hit moves it up or down, a miss with a full cache gives
//! the victim's entry at the root to the newcomer and moves it down. One
//! entry per cached block, no stale entries to skip or sweep.
//!
//! `remove` drops the block (OPT keeps no history; a removed block that comes
//! back is a miss like any other).

use super::index::{access_all_prefetching, BlockIndex};
use super::{Access, Policy};

/// A cached block's place in the eviction order: the largest goes first.
#[derive(Debug, Clone, Copy)]
struct Entry {
    next_use: u64,
    /// Access count of its last access (unique: no two entries tie).
    stamp: u64,
    slot: u32,
}

impl Entry {
    #[inline]
    fn key(&self) -> (u64, u64) {
        (self.next_use, self.stamp)
    }
}

pub struct Opt {
    capacity: usize,
    map: BlockIndex,
    /// Per slot: its block and its entry's index in `heap`.
    blocks: Vec<u64>,
    pos: Vec<u32>,
    heap: Vec<Entry>,
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
            pos: Vec::with_capacity(reserve),
            heap: Vec::with_capacity(reserve),
            free: Vec::new(),
            now: 0,
            evicted: None,
        }
    }

    #[inline]
    fn place(&mut self, i: usize, e: Entry) {
        self.heap[i] = e;
        self.pos[e.slot as usize] = i as u32;
    }

    fn sift_up(&mut self, mut i: usize) {
        let e = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[parent].key() >= e.key() {
                break;
            }
            self.place(i, self.heap[parent]);
            i = parent;
        }
        self.place(i, e);
    }

    fn sift_down(&mut self, mut i: usize) {
        let e = self.heap[i];
        let n = self.heap.len();
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child = if right < n && self.heap[right].key() > self.heap[left].key() {
                right
            } else {
                left
            };
            if self.heap[child].key() <= e.key() {
                break;
            }
            self.place(i, self.heap[child]);
            i = child;
        }
        self.place(i, e);
    }

    /// Give the entry at `i` a new key and restore the heap order.
    #[inline]
    fn rekey(&mut self, i: usize, e: Entry) {
        let up = e.key() > self.heap[i].key();
        self.heap[i] = e;
        if up {
            self.sift_up(i);
        } else {
            self.sift_down(i);
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
            let i = self.pos[slot as usize] as usize;
            self.rekey(
                i,
                Entry {
                    next_use: a.next_use,
                    stamp: now,
                    slot,
                },
            );
            return true;
        }
        if self.map.len() >= self.capacity {
            // The victim is the root; the newcomer takes its slot and entry.
            let slot = self.heap[0].slot;
            let old = self.blocks[slot as usize];
            self.evicted = Some(old);
            self.map.remove(old);
            self.blocks[slot as usize] = a.block;
            self.map.insert(a.block, slot);
            self.rekey(
                0,
                Entry {
                    next_use: a.next_use,
                    stamp: now,
                    slot,
                },
            );
            return false;
        }
        let slot = match self.free.pop() {
            Some(s) => {
                self.blocks[s as usize] = a.block;
                s
            }
            None => {
                self.blocks.push(a.block);
                self.pos.push(0);
                (self.blocks.len() - 1) as u32
            }
        };
        self.map.insert(a.block, slot);
        self.heap.push(Entry {
            next_use: a.next_use,
            stamp: now,
            slot,
        });
        self.pos[slot as usize] = (self.heap.len() - 1) as u32;
        self.sift_up(self.heap.len() - 1);
        false
    }

    fn access_all(&mut self, accesses: &[Access]) -> u64 {
        access_all_prefetching(self, accesses, |p, block| p.map.prefetch(block))
    }

    fn contains(&self, block: u64) -> bool {
        self.map.contains(block)
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        let Some(slot) = self.map.remove(block) else {
            return false;
        };
        let i = self.pos[slot as usize] as usize;
        let last = self.heap.pop().expect("a cached block has an entry");
        if i < self.heap.len() {
            self.rekey(i, last);
        }
        self.free.push(slot);
        true
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}
