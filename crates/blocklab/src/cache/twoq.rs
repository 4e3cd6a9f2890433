//! 2Q (Johnson & Shasha, VLDB'94), the "full" version with A1in, A1out and Am.
//!
//! Parameters (libCacheSim `TwoQ` defaults): Kin = ⌊0.25·c⌋ blocks for the
//! FIFO A1in, Kout = ⌊0.5·c⌋ ghost ids for the FIFO A1out; Am (LRU) holds the
//! rest.
//! - hit in A1in: nothing moves (correlated references); hit in Am: to MRU.
//! - miss on an id remembered in A1out: the id leaves A1out and the block
//!   enters Am; any other miss enters A1in.
//! - to make room (the paper's `reclaimfor`, only when the cache is full): if
//!   A1in holds more than Kin blocks its oldest block moves to A1out (dropping
//!   A1out's oldest id when A1out is full), else Am's LRU block is dropped.
//!
//! libCacheSim also caps Am at c − Kin. Without invalidations that cap never
//! changes a choice: a block comes back from A1out only into a full cache
//! (A1out fills only by evictions, and a full cache stays full), where A1in
//! holds at least Kin blocks, so Am is at its cap exactly when A1in holds Kin
//! and the rule above drops Am's LRU block anyway. With invalidations the cap
//! would evict while the cache has room, so it is not kept.
//!
//! `remove` forgets a cached block outright, in A1in or Am: it does not enter
//! A1out (an invalidation is not a sign of a correlated reference); A1out is
//! kept.
//!
//! Unlike libCacheSim, which admits nothing when Kin = 0 (c < 4), blocks
//! still pass through A1in on such tiny caches. Otherwise it agrees with
//! libCacheSim `TwoQ` access for access (tests/test_libcachesim.py, ≥ 20 blocks).

use super::ghost::Ghosts;
use super::list::{Ends, Links32};
use super::slab::Slab;
use super::{Access, Policy};

const AIN: u8 = 0;
const AM: u8 = 1;
/// `which` of a slot remembered in A1out.
const AOUT: u8 = 2;

pub struct TwoQ {
    c: usize,
    kin: usize,
    slots: Slab,
    which: Vec<u8>,
    links: Links32,
    /// A1in, Am.
    lists: [Ends; 2],
    /// A1out.
    aout: Ghosts,
    evicted: Option<u64>,
}

impl TwoQ {
    pub fn new(capacity: usize) -> Self {
        Self::with_ratios(capacity, 0.25, 0.5)
    }

    pub fn with_ratios(capacity: usize, kin: f64, kout: f64) -> Self {
        let kin = (capacity as f64 * kin) as usize;
        let kout = (capacity as f64 * kout) as usize;
        let reserve = (capacity + kout).min(1 << 21);
        TwoQ {
            c: capacity,
            kin,
            slots: Slab::with_capacity(reserve),
            which: Vec::with_capacity(reserve),
            links: Links32::with_capacity(reserve),
            lists: [Ends::default(); 2],
            aout: Ghosts::new(kout),
            evicted: None,
        }
    }

    #[inline]
    fn size(&self, l: u8) -> usize {
        self.lists[l as usize].len
    }

    /// Evict the LRU block of Am for good.
    fn forget_am_tail(&mut self) {
        let s = self
            .links
            .pop_tail(&mut self.lists[AM as usize])
            .expect("non-empty list");
        self.evicted = Some(self.slots.block(s));
        self.slots.forget(s);
    }

    fn evict(&mut self) {
        if self.size(AIN) > self.kin {
            let s = self
                .links
                .pop_tail(&mut self.lists[AIN as usize])
                .expect("A1in non-empty");
            self.evicted = Some(self.slots.block(s));
            self.which[s as usize] = AOUT;
            if let Some(gone) = self.aout.remember(&mut self.links, s) {
                self.slots.forget(gone);
            }
        } else {
            self.forget_am_tail();
        }
    }
}

impl Policy for TwoQ {
    fn access(&mut self, a: &Access) -> bool {
        self.evicted = None;
        let mut ghost = None;
        if let Some(s) = self.slots.get(a.block) {
            match self.which[s as usize] {
                AIN => return true,
                AM => {
                    self.links.move_to_head(&mut self.lists[AM as usize], s);
                    return true;
                }
                _ => {
                    self.aout.take(&mut self.links, s);
                    ghost = Some(s);
                }
            }
        }
        if self.size(AIN) + self.size(AM) + 1 > self.c {
            self.evict();
        }
        match ghost {
            Some(s) => {
                self.links.push_head(&mut self.lists[AM as usize], s);
                self.which[s as usize] = AM;
            }
            None => {
                let (s, new) = self.slots.insert(a.block);
                if new {
                    self.which.push(AIN);
                } else {
                    self.which[s as usize] = AIN;
                }
                self.links.push_head(&mut self.lists[AIN as usize], s);
            }
        }
        false
    }

    fn contains(&self, block: u64) -> bool {
        self.slots.get(block).is_some_and(|s| self.which[s as usize] != AOUT)
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        match self.slots.get(block) {
            Some(s) if self.which[s as usize] != AOUT => {
                let l = self.which[s as usize];
                self.links.unlink(&mut self.lists[l as usize], s);
                self.slots.forget(s);
                true
            }
            _ => false,
        }
    }

    fn len(&self) -> usize {
        self.size(AIN) + self.size(AM)
    }

    fn capacity(&self) -> usize {
        self.c
    }
}
