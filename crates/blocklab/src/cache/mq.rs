//! MQ, Multi-Queue (Zhou, Philbin & Li, USENIX ATC'01).
//!
//! Parameters (libCacheSim `MQ` defaults): m = 8 LRU queues, lifetime = 10,000
//! (in MQ's virtual time, which ticks once per hit and once per insertion),
//! and a FIFO history Qout of ⌊4·c⌋ ids that remembers evicted blocks'
//! frequencies.
//! - a block with frequency f lives in queue min(⌊log2 f⌋, m − 1); a hit
//!   increments f, moves the block to the MRU end of its queue and sets its
//!   expiry to now + lifetime;
//! - a miss on an id in Qout restores its frequency (+1), else f = 1;
//! - after every hit and insertion the clock ticks and, in each queue k ≥ 1,
//!   the LRU block whose expiry has passed is demoted to queue k − 1;
//! - the victim is the LRU block of the lowest non-empty queue; its id and
//!   frequency enter Qout (dropping Qout's oldest when full).
//!
//! It agrees with libCacheSim `MQ` access for access (tests/test_libcachesim.py).
//!
//! `remove` forgets a cached block outright, frequency and all: it does not
//! enter Qout (Qout remembers the blocks MQ chose to evict); Qout is kept, and
//! the virtual clock does not tick.

use super::ghost::Ghosts;
use super::list::{Ends, Links32, NIL};
use super::slab::Slab;
use super::{Access, Policy};

const N_QUEUES: usize = 8;
const LIFETIME: u64 = 10_000;
const QOUT: u8 = u8::MAX;

pub struct Mq {
    c: usize,
    vtime: u64,
    cached: usize,
    slots: Slab,
    which: Vec<u8>,
    freq: Vec<u32>,
    expire: Vec<u64>,
    links: Links32,
    queues: [Ends; N_QUEUES],
    qout: Ghosts,
    evicted: Option<u64>,
}

#[inline]
fn queue_num(mut f: u32) -> u8 {
    let mut q = 0;
    while f > 1 && q < N_QUEUES as u8 - 1 {
        f >>= 1;
        q += 1;
    }
    q
}

impl Mq {
    pub fn new(capacity: usize) -> Self {
        let qout_cap = capacity.saturating_mul(4);
        let reserve = (capacity + qout_cap).min(1 << 21);
        Mq {
            c: capacity,
            vtime: 0,
            cached: 0,
            slots: Slab::with_capacity(reserve),
            which: Vec::with_capacity(reserve),
            freq: Vec::with_capacity(reserve),
            expire: Vec::with_capacity(reserve),
            links: Links32::with_capacity(reserve),
            queues: [Ends::default(); N_QUEUES],
            qout: Ghosts::new(qout_cap),
            evicted: None,
        }
    }

    fn link(&mut self, s: u32, q: u8) {
        self.links.push_head(&mut self.queues[q as usize], s);
        self.which[s as usize] = q;
    }

    fn adjust(&mut self) {
        self.vtime += 1;
        for k in 1..N_QUEUES {
            let t = self.queues[k].tail;
            if t != NIL && self.expire[t as usize] < self.vtime {
                self.links.unlink(&mut self.queues[k], t);
                self.link(t, k as u8 - 1);
                self.expire[t as usize] = self.vtime + LIFETIME;
            }
        }
    }

    fn evict(&mut self) {
        let k = (0..N_QUEUES).find(|&k| self.queues[k].len > 0).expect("full cache");
        let t = self.links.pop_tail(&mut self.queues[k]).expect("non-empty queue");
        self.evicted = Some(self.slots.block(t));
        self.cached -= 1;
        self.which[t as usize] = QOUT;
        if let Some(gone) = self.qout.remember(&mut self.links, t) {
            self.slots.forget(gone);
        }
    }
}

impl Policy for Mq {
    fn access(&mut self, a: &Access) -> bool {
        self.evicted = None;
        let mut ghost = None;
        if let Some(s) = self.slots.get(a.block) {
            let q = self.which[s as usize];
            if q != QOUT {
                self.links.unlink(&mut self.queues[q as usize], s);
                let f = self.freq[s as usize].saturating_add(1);
                self.freq[s as usize] = f;
                self.link(s, queue_num(f));
                self.expire[s as usize] = self.vtime + LIFETIME;
                self.adjust();
                return true;
            }
            self.qout.take(&mut self.links, s);
            ghost = Some(s);
        }
        while self.cached + 1 > self.c {
            self.evict();
        }
        let (s, f) = match ghost {
            Some(s) => (s, self.freq[s as usize].saturating_add(1)),
            None => {
                let (s, new) = self.slots.insert(a.block);
                if new {
                    self.which.push(0);
                    self.freq.push(0);
                    self.expire.push(0);
                }
                (s, 1)
            }
        };
        self.freq[s as usize] = f;
        self.link(s, queue_num(f));
        self.expire[s as usize] = self.vtime + LIFETIME;
        self.cached += 1;
        self.adjust();
        false
    }

    fn contains(&self, block: u64) -> bool {
        self.slots.get(block).is_some_and(|s| self.which[s as usize] != QOUT)
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        match self.slots.get(block) {
            Some(s) if self.which[s as usize] != QOUT => {
                let q = self.which[s as usize];
                self.links.unlink(&mut self.queues[q as usize], s);
                self.slots.forget(s);
                self.cached -= 1;
                true
            }
            _ => false,
        }
    }

    fn len(&self) -> usize {
        self.cached
    }

    fn capacity(&self) -> usize {
        self.c
    }
}
