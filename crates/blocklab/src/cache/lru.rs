//! LRU: evict the least recently used block.

use super::list::{Ends, Links32};
use super::{Access, Policy};
use rustc_hash::FxHashMap;

pub struct Lru {
    capacity: usize,
    /// block -> slot
    map: FxHashMap<u64, u32>,
    /// slot -> block
    blocks: Vec<u64>,
    links: Links32,
    order: Ends,
}

impl Lru {
    pub fn new(capacity: usize) -> Self {
        let reserve = capacity.min(1 << 20);
        let mut map = FxHashMap::default();
        map.reserve(reserve);
        Lru {
            capacity,
            map,
            blocks: Vec::with_capacity(reserve),
            links: Links32::with_capacity(reserve),
            order: Ends::default(),
        }
    }
}

impl Policy for Lru {
    #[inline]
    fn access(&mut self, a: &Access) -> bool {
        if let Some(&slot) = self.map.get(&a.block) {
            self.links.move_to_head(&mut self.order, slot);
            return true;
        }
        // Miss: reuse the victim's slot when full.
        let slot = if self.map.len() >= self.capacity {
            let victim = self.links.pop_tail(&mut self.order).expect("full cache has a tail");
            self.map.remove(&self.blocks[victim as usize]);
            self.blocks[victim as usize] = a.block;
            victim
        } else {
            self.blocks.push(a.block);
            (self.blocks.len() - 1) as u32
        };
        self.links.push_head(&mut self.order, slot);
        self.map.insert(a.block, slot);
        false
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}
