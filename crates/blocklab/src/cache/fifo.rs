//! FIFO: evict the block that entered the cache first; hits change nothing.
//!
//! The cache is a queue of slots ([`SlotQueue`]); once full, the oldest
//! block's slot is handed to the newcomer, which becomes the newest.
//!
//! `remove` drops the block from the queue; FIFO keeps no history, and the
//! next newcomer still enters as the newest block.

use super::slot_queue::SlotQueue;
use super::{Access, Policy};
use rustc_hash::FxHashMap;

pub struct Fifo {
    capacity: usize,
    /// block -> slot
    map: FxHashMap<u64, u32>,
    blocks: Vec<u64>,
    queue: SlotQueue,
    evicted: Option<u64>,
}

impl Fifo {
    pub fn new(capacity: usize) -> Self {
        let reserve = capacity.min(1 << 20);
        let mut map = FxHashMap::default();
        map.reserve(reserve);
        Fifo {
            capacity,
            map,
            blocks: Vec::with_capacity(reserve),
            queue: SlotQueue::with_capacity(reserve),
            evicted: None,
        }
    }
}

impl Policy for Fifo {
    #[inline]
    fn access(&mut self, a: &Access) -> bool {
        self.evicted = None;
        if self.map.contains_key(&a.block) {
            return true;
        }
        let slot = if self.queue.len() >= self.capacity {
            let s = self.queue.pop_front().expect("full cache");
            let old = self.blocks[s as usize];
            self.evicted = Some(old);
            self.map.remove(&old);
            self.blocks[s as usize] = a.block;
            s
        } else {
            let (s, new) = self.queue.alloc();
            if new {
                self.blocks.push(a.block);
            } else {
                self.blocks[s as usize] = a.block;
            }
            s
        };
        self.queue.push_back(slot);
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
        match self.map.remove(&block) {
            Some(s) => {
                self.queue.kill(s);
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
