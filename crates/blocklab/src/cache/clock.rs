//! CLOCK (second chance) with one reference bit per block.
//!
//! A hit sets the block's bit; a newly inserted block starts with the bit
//! clear (libCacheSim `Clock` with its defaults `init-freq=0, n-bit-counter=1`).
//! On a miss with a full cache the hand sweeps the ring: a block with its bit
//! set gets the bit cleared and is passed over, the first block with a clear
//! bit is evicted and the newcomer takes its place (so it is the last one the
//! hand will reach, exactly like FIFO-reinsertion at the queue head).
//!
//! The ring is a queue of slots ([`SlotQueue`]) whose front is the hand:
//! passing a block over moves it from the front to the back. `remove` drops
//! the block from the ring (bit and all; CLOCK keeps no history); a later
//! newcomer enters just behind the hand, as every newcomer does.

use super::index::{access_all_prefetching, BlockIndex};
use super::slot_queue::SlotQueue;
use super::{Access, Policy};

pub struct Clock {
    capacity: usize,
    /// block -> slot
    map: BlockIndex,
    blocks: Vec<u64>,
    referenced: Vec<bool>,
    ring: SlotQueue,
    evicted: Option<u64>,
}

impl Clock {
    pub fn new(capacity: usize) -> Self {
        let reserve = capacity.min(1 << 20);
        Clock {
            capacity,
            map: BlockIndex::with_capacity(reserve),
            blocks: Vec::with_capacity(reserve),
            referenced: Vec::with_capacity(reserve),
            ring: SlotQueue::with_capacity(reserve),
            evicted: None,
        }
    }
}

impl Policy for Clock {
    #[inline]
    fn access(&mut self, a: &Access) -> bool {
        self.evicted = None;
        if let Some(slot) = self.map.get(a.block) {
            self.referenced[slot as usize] = true;
            return true;
        }
        let slot = if self.ring.len() >= self.capacity {
            let mut h = self.ring.pop_front().expect("full cache");
            while self.referenced[h as usize] {
                self.referenced[h as usize] = false;
                self.ring.push_back(h);
                h = self.ring.pop_front().expect("full cache");
            }
            let old = self.blocks[h as usize];
            self.evicted = Some(old);
            self.map.remove(old);
            self.blocks[h as usize] = a.block;
            h
        } else {
            let (s, new) = self.ring.alloc();
            if new {
                self.blocks.push(a.block);
                self.referenced.push(false);
            } else {
                self.blocks[s as usize] = a.block;
                self.referenced[s as usize] = false;
            }
            s
        };
        self.ring.push_back(slot);
        self.map.insert(a.block, slot);
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
        match self.map.remove(block) {
            Some(s) => {
                self.ring.kill(s);
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
