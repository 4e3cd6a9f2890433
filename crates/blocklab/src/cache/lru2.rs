//! LRU-K with K = 2 (O'Neil, O'Neil & Weikum, SIGMOD'93).
//!
//! The victim is the block with the largest backward 2-distance, i.e. the
//! oldest second-to-last access. Blocks accessed only once since they entered
//! the cache have an infinite distance and go first, oldest first (as
//! libCacheSim's `LRUK` describes). History is kept only while a block is
//! cached (no retained-information period, no correlated-reference period).
//! It agrees with libCacheSim `LRUK(k=2)` access for access
//! (tests/test_libcachesim.py).
//!
//! Once-seen blocks sit in a FIFO list (O(1)); the others in a min-heap keyed
//! by their penultimate access time with lazy deletion (O(log n)).
//!
//! `remove` drops the block and its history, as an eviction does (no
//! retained-information period here either).

use super::list::{Ends, Links32};
use super::{Access, Policy};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub struct Lru2 {
    c: usize,
    now: u64,
    map: FxHashMap<u64, u32>,
    blocks: Vec<u64>,
    /// Time of the last access; also the stamp that validates heap entries.
    last: Vec<u64>,
    twice: Vec<bool>,
    links: Links32,
    once: Ends,
    /// (penultimate access time, last access time, slot)
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    /// Slots of removed blocks.
    free: Vec<u32>,
    evicted: Option<u64>,
}

impl Lru2 {
    pub fn new(capacity: usize) -> Self {
        let reserve = capacity.min(1 << 20);
        let mut map = FxHashMap::default();
        map.reserve(reserve);
        Lru2 {
            c: capacity,
            now: 0,
            map,
            blocks: Vec::with_capacity(reserve),
            last: Vec::with_capacity(reserve),
            twice: Vec::with_capacity(reserve),
            links: Links32::with_capacity(reserve),
            once: Ends::default(),
            heap: BinaryHeap::with_capacity(2 * reserve + 64),
            free: Vec::new(),
            evicted: None,
        }
    }

    fn evict(&mut self) -> u32 {
        let s = match self.links.pop_tail(&mut self.once) {
            Some(s) => s,
            None => loop {
                let Reverse((_, stamp, s)) = self.heap.pop().expect("full cache");
                if self.twice[s as usize] && self.last[s as usize] == stamp {
                    break s;
                }
            },
        };
        let old = self.blocks[s as usize];
        self.evicted = Some(old);
        self.map.remove(&old);
        s
    }
}

impl Policy for Lru2 {
    fn access(&mut self, a: &Access) -> bool {
        self.now += 1;
        self.evicted = None;
        let now = self.now;
        if let Some(&s) = self.map.get(&a.block) {
            let i = s as usize;
            if !self.twice[i] {
                self.links.unlink(&mut self.once, s);
                self.twice[i] = true;
            }
            self.heap.push(Reverse((self.last[i], now, s)));
            self.last[i] = now;
            if self.heap.len() > 2 * self.map.len() + 64 {
                let (last, twice) = (&self.last, &self.twice);
                self.heap
                    .retain(|Reverse(e)| twice[e.2 as usize] && last[e.2 as usize] == e.1);
            }
            return true;
        }
        let s = if self.map.len() >= self.c {
            let s = self.evict();
            self.blocks[s as usize] = a.block;
            s
        } else if let Some(s) = self.free.pop() {
            self.blocks[s as usize] = a.block;
            s
        } else {
            self.blocks.push(a.block);
            self.last.push(0);
            self.twice.push(false);
            (self.blocks.len() - 1) as u32
        };
        self.last[s as usize] = now;
        self.twice[s as usize] = false;
        self.links.push_head(&mut self.once, s);
        self.map.insert(a.block, s);
        false
    }

    fn contains(&self, block: u64) -> bool {
        self.map.contains_key(&block)
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        let Some(s) = self.map.remove(&block) else {
            return false;
        };
        if self.twice[s as usize] {
            // Its heap entries die with the flag (see `evict`).
            self.twice[s as usize] = false;
        } else {
            self.links.unlink(&mut self.once, s);
        }
        self.free.push(s);
        true
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.c
    }
}
