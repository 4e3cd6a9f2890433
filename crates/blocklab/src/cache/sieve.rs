//! SIEVE (Zhang et al., NSDI'24).
//!
//! One FIFO queue (new blocks enter at the head) with a visited bit per block
//! and a hand that walks from the tail toward the head. A hit only sets the
//! bit. To evict, the hand clears and skips visited blocks (they stay in
//! place), wrapping from the head back to the tail, and evicts the first
//! unvisited block; the hand then rests on the evicted block's newer
//! neighbour. The newcomer reuses the victim's slot.
//!
//! `remove` unlinks the block (SIEVE keeps no history); if the hand rested on
//! it, the hand moves to its newer neighbour, as after an eviction.

use super::list::{Ends, Links32, NIL};
use super::{Access, Policy};
use rustc_hash::FxHashMap;

pub struct Sieve {
    capacity: usize,
    map: FxHashMap<u64, u32>,
    blocks: Vec<u64>,
    visited: Vec<bool>,
    links: Links32,
    queue: Ends,
    hand: u32,
    /// Slots of removed blocks.
    free: Vec<u32>,
    evicted: Option<u64>,
}

impl Sieve {
    pub fn new(capacity: usize) -> Self {
        let reserve = capacity.min(1 << 20);
        let mut map = FxHashMap::default();
        map.reserve(reserve);
        Sieve {
            capacity,
            map,
            blocks: Vec::with_capacity(reserve),
            visited: Vec::with_capacity(reserve),
            links: Links32::with_capacity(reserve),
            queue: Ends::default(),
            hand: NIL,
            free: Vec::new(),
            evicted: None,
        }
    }

    /// Evict one block and return its (now free) slot.
    fn evict(&mut self) -> u32 {
        let mut o = if self.hand == NIL { self.queue.tail } else { self.hand };
        while self.visited[o as usize] {
            self.visited[o as usize] = false;
            let p = self.links.prev(o);
            o = if p == NIL { self.queue.tail } else { p };
        }
        self.hand = self.links.prev(o);
        self.links.unlink(&mut self.queue, o);
        let old = self.blocks[o as usize];
        self.evicted = Some(old);
        self.map.remove(&old);
        o
    }
}

impl Policy for Sieve {
    #[inline]
    fn access(&mut self, a: &Access) -> bool {
        self.evicted = None;
        if let Some(&slot) = self.map.get(&a.block) {
            self.visited[slot as usize] = true;
            return true;
        }
        let slot = if self.map.len() >= self.capacity {
            let s = self.evict();
            self.blocks[s as usize] = a.block;
            self.visited[s as usize] = false;
            s
        } else if let Some(s) = self.free.pop() {
            self.blocks[s as usize] = a.block;
            self.visited[s as usize] = false;
            s
        } else {
            self.blocks.push(a.block);
            self.visited.push(false);
            (self.blocks.len() - 1) as u32
        };
        self.links.push_head(&mut self.queue, slot);
        self.map.insert(a.block, slot);
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
        if self.hand == s {
            self.hand = self.links.prev(s);
        }
        self.links.unlink(&mut self.queue, s);
        self.free.push(s);
        true
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}
