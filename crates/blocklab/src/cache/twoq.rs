//! 2Q (Johnson & Shasha, VLDB'94), the "full" version with A1in, A1out and Am.
//!
//! Parameters (libCacheSim `TwoQ` defaults): Kin = ⌊0.25·c⌋ blocks for the
//! FIFO A1in, Kout = ⌊0.5·c⌋ ghost ids for the FIFO A1out, and Am (LRU) is
//! capped at c − Kin.
//! - hit in A1in: nothing moves (correlated references); hit in Am: to MRU.
//! - miss on an id remembered in A1out: the id leaves A1out and the block
//!   enters Am; any other miss enters A1in.
//! - to make room: if A1in holds more than Kin blocks its oldest block moves
//!   to A1out (dropping A1out's oldest id when A1out is full), else Am's LRU
//!   block is dropped. Am never exceeds c − Kin (its own LRU is dropped first).
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
    am_cap: usize,
    slots: Slab,
    which: Vec<u8>,
    links: Links32,
    /// A1in, Am.
    lists: [Ends; 2],
    /// A1out.
    aout: Ghosts,
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
            am_cap: capacity - kin,
            slots: Slab::with_capacity(reserve),
            which: Vec::with_capacity(reserve),
            links: Links32::with_capacity(reserve),
            lists: [Ends::default(); 2],
            aout: Ghosts::new(kout),
        }
    }

    #[inline]
    fn size(&self, l: u8) -> usize {
        self.lists[l as usize].len
    }

    fn forget_tail(&mut self, l: u8) {
        let s = self
            .links
            .pop_tail(&mut self.lists[l as usize])
            .expect("non-empty list");
        self.slots.forget(s);
    }

    fn evict(&mut self) {
        if self.size(AIN) > self.kin {
            let s = self
                .links
                .pop_tail(&mut self.lists[AIN as usize])
                .expect("A1in non-empty");
            self.which[s as usize] = AOUT;
            if let Some(gone) = self.aout.remember(&mut self.links, s) {
                self.slots.forget(gone);
            }
        } else {
            self.forget_tail(AM);
        }
    }
}

impl Policy for TwoQ {
    fn access(&mut self, a: &Access) -> bool {
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
        while self.size(AIN) + self.size(AM) + 1 > self.c {
            self.evict();
        }
        match ghost {
            Some(s) => {
                if self.size(AM) + 1 > self.am_cap {
                    self.forget_tail(AM);
                }
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

    fn len(&self) -> usize {
        self.size(AIN) + self.size(AM)
    }

    fn capacity(&self) -> usize {
        self.c
    }
}
