//! S3-FIFO (Yang et al., SOSP'23): a small FIFO S, a main FIFO M and a ghost
//! FIFO G of ids.
//!
//! Parameters (libCacheSim `S3FIFO` defaults): |S| = ⌊0.1·c⌋, |M| = c − |S|,
//! |G| = ⌊0.9·c⌋ ids (the size of M), move-to-main threshold 2.
//! - a hit increments the block's counter (M saturates it at 3 when it
//!   reinserts); nothing moves.
//! - a miss on an id in G inserts into M; any other miss inserts into S
//!   (before the first eviction, into M once S is full).
//! - to make room: if M is over its share (or S is empty) evict from M, else
//!   from S. S: the oldest block moves to M when its counter is ≥ 2 (counter
//!   reset), else it is evicted and its id enters G; repeat until one is
//!   evicted. M: the oldest block with counter > 0 is reinserted at the head
//!   with min(counter, 3) − 1; the first with counter 0 is evicted.
//!
//! Unlike libCacheSim, which refuses blocks as large as S (so caches of fewer
//! than 20 blocks admit nothing into S), tiny caches still work here.
//! From 20 blocks up it agrees with libCacheSim `S3FIFO` access for access
//! (tests/test_libcachesim.py).
//!
//! Making room evicts exactly one block: moving S's oldest to M frees nothing,
//! so the loop runs until one block has left S or M.
//!
//! `remove` forgets a cached block outright, in S or M, counter and all: it
//! does not enter G (G remembers what S judged a one-hit wonder, and an
//! invalidation is no such judgement); G is kept.

use super::ghost::Ghosts;
use super::list::{Ends, Links32};
use super::slab::Slab;
use super::{Access, Policy};

const S: u8 = 0;
const M: u8 = 1;
/// `which` of a slot remembered in G.
const G: u8 = 2;
const MOVE_TO_MAIN: u8 = 2;

pub struct S3Fifo {
    c: usize,
    small_cap: usize,
    main_cap: usize,
    has_evicted: bool,
    slots: Slab,
    which: Vec<u8>,
    freq: Vec<u8>,
    links: Links32,
    /// S, M.
    lists: [Ends; 2],
    ghosts: Ghosts,
    evicted: Option<u64>,
}

impl S3Fifo {
    pub fn new(capacity: usize) -> Self {
        let small_cap = (capacity as f64 * 0.1) as usize;
        let ghost_cap = (capacity as f64 * 0.9) as usize;
        let reserve = (capacity + ghost_cap).min(1 << 21);
        S3Fifo {
            c: capacity,
            small_cap,
            main_cap: capacity - small_cap,
            has_evicted: false,
            slots: Slab::with_capacity(reserve),
            which: Vec::with_capacity(reserve),
            freq: Vec::with_capacity(reserve),
            links: Links32::with_capacity(reserve),
            lists: [Ends::default(); 2],
            ghosts: Ghosts::new(ghost_cap),
            evicted: None,
        }
    }

    #[inline]
    fn size(&self, l: u8) -> usize {
        self.lists[l as usize].len
    }

    fn move_to(&mut self, s: u32, to: u8) {
        let from = self.which[s as usize];
        self.links.unlink(&mut self.lists[from as usize], s);
        self.links.push_head(&mut self.lists[to as usize], s);
        self.which[s as usize] = to;
    }

    fn evict_small(&mut self) {
        while self.size(S) > 0 {
            let t = self.lists[S as usize].tail;
            if self.freq[t as usize] >= MOVE_TO_MAIN {
                self.move_to(t, M);
                self.freq[t as usize] = 0;
            } else {
                self.links.unlink(&mut self.lists[S as usize], t);
                self.evicted = Some(self.slots.block(t));
                self.which[t as usize] = G;
                if let Some(gone) = self.ghosts.remember(&mut self.links, t) {
                    self.slots.forget(gone);
                }
                return;
            }
        }
    }

    fn evict_main(&mut self) {
        while self.size(M) > 0 {
            let t = self.lists[M as usize].tail;
            let f = self.freq[t as usize];
            if f >= 1 {
                self.freq[t as usize] = f.min(3) - 1;
                self.links.move_to_head(&mut self.lists[M as usize], t);
            } else {
                self.links.unlink(&mut self.lists[M as usize], t);
                self.evicted = Some(self.slots.block(t));
                self.slots.forget(t);
                return;
            }
        }
    }

    fn evict(&mut self) {
        self.has_evicted = true;
        if self.size(M) > self.main_cap || self.size(S) == 0 {
            self.evict_main();
        } else {
            self.evict_small();
        }
    }
}

impl Policy for S3Fifo {
    fn access(&mut self, a: &Access) -> bool {
        self.evicted = None;
        let mut ghost = None;
        if let Some(s) = self.slots.get(a.block) {
            if self.which[s as usize] != G {
                let f = &mut self.freq[s as usize];
                *f = f.saturating_add(1);
                return true;
            }
            self.ghosts.take(&mut self.links, s);
            ghost = Some(s);
        }
        while self.size(S) + self.size(M) + 1 > self.c {
            self.evict();
        }
        let to = if ghost.is_some() || (!self.has_evicted && self.size(S) >= self.small_cap) {
            M
        } else {
            S
        };
        let s = match ghost {
            Some(s) => s,
            None => {
                let (s, new) = self.slots.insert(a.block);
                if new {
                    self.which.push(0);
                    self.freq.push(0);
                }
                s
            }
        };
        self.which[s as usize] = to;
        self.freq[s as usize] = 0;
        self.links.push_head(&mut self.lists[to as usize], s);
        false
    }

    fn contains(&self, block: u64) -> bool {
        self.slots.get(block).is_some_and(|s| self.which[s as usize] != G)
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        match self.slots.get(block) {
            Some(s) if self.which[s as usize] != G => {
                let l = self.which[s as usize];
                self.links.unlink(&mut self.lists[l as usize], s);
                self.slots.forget(s);
                true
            }
            _ => false,
        }
    }

    fn len(&self) -> usize {
        self.size(S) + self.size(M)
    }

    fn capacity(&self) -> usize {
        self.c
    }
}
