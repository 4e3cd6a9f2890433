//! LIRS (Jiang & Zhang, SIGMETRICS'02).
//!
//! Parameters: HIR share 1% (L_hirs = max(1, ⌊0.01·c⌋) resident HIR blocks,
//! L_lirs = c − L_hirs LIR blocks), and stack S is held to 2c entries: after
//! each access, while S is longer, the non-resident entry that left the cache
//! earliest is forgotten (the paper leaves this bound open; libCacheSim's
//! `LIRS` uses the same 2c limit and order).
//!
//! Stack S orders LIR blocks and HIR entries (resident or not) by recency and
//! always has an LIR block at its bottom, or is empty (pruning removes HIR
//! entries there; an HIR entry pushed while no block is LIR is pruned at once,
//! which happens only with c = 1 or after removals).
//! List Q holds the resident HIR blocks; its LRU end is the victim.
//! - LIR hit: to the top of S (prune if it was the bottom).
//! - resident HIR hit: if in S, it becomes LIR (leaves Q) and the bottom LIR
//!   of S is demoted to a resident HIR at Q's MRU end, then prune; if not in
//!   S, it goes to the top of S and to Q's MRU end.
//! - miss: if the cache is full, evict Q's LRU block (it stays in S as a
//!   non-resident entry if it is there). While fewer than L_lirs blocks are
//!   LIR the block becomes LIR. A block with a non-resident entry in S
//!   becomes LIR (demoting the bottom LIR as above); any other becomes a
//!   resident HIR at the top of S and Q's MRU end.
//!
//! libCacheSim's `LIRS` is a different construction (three LRU caches). It
//! agrees on 99.8–100% of accesses (miss ratios within 0.0004 on 20k-access
//! Zipf/uniform/loop sequences, 20–1500 blocks). Known difference: on a hit to
//! a resident HIR block that is not in S, libCacheSim also demotes the bottom
//! LIR block whenever the LIR set is full; the paper (and this file) leaves
//! the LIR set alone there.
//!
//! `remove` forgets a cached block outright, LIR or resident HIR: it leaves S
//! and Q and does not stay in S as a non-resident entry (an invalidation says
//! nothing about its reuse distance). Removing the LIR block at the bottom of
//! S prunes S, as an LIR hit there does (pruning forgets the non-resident
//! entries it uncovers); the LIR set is then one short, and the next misses
//! fill it as on a cold start. Non-resident entries are kept otherwise.

use super::list::{Ends, Links32, NIL};
use super::{Access, Policy};
use rustc_hash::FxHashMap;

pub struct Lirs {
    c: usize,
    lirs_limit: usize,
    n_lir: usize,
    map: FxHashMap<u64, u32>,
    blocks: Vec<u64>,
    lir: Vec<bool>,
    resident: Vec<bool>,
    in_s: Vec<bool>,
    /// Stack S.
    s_links: Links32,
    s: Ends,
    /// Q (resident HIR) and NR (non-resident HIR, by time of leaving the
    /// cache) share one set of links: an entry is on at most one of them.
    q_links: Links32,
    q: Ends,
    nr: Ends,
    free: Vec<u32>,
    evicted: Option<u64>,
}

impl Lirs {
    pub fn new(capacity: usize) -> Self {
        let hirs = ((capacity as f64 * 0.01) as usize).max(1);
        let reserve = (2 * capacity).min(1 << 21);
        let mut map = FxHashMap::default();
        map.reserve(reserve);
        Lirs {
            c: capacity,
            lirs_limit: capacity.saturating_sub(hirs),
            n_lir: 0,
            map,
            blocks: Vec::with_capacity(reserve),
            lir: Vec::with_capacity(reserve),
            resident: Vec::with_capacity(reserve),
            in_s: Vec::with_capacity(reserve),
            s_links: Links32::with_capacity(reserve),
            s: Ends::default(),
            q_links: Links32::with_capacity(reserve),
            q: Ends::default(),
            nr: Ends::default(),
            free: Vec::new(),
            evicted: None,
        }
    }

    fn forget(&mut self, x: u32) {
        self.map.remove(&self.blocks[x as usize]);
        self.free.push(x);
    }

    /// Remove HIR entries from the bottom of S.
    fn prune(&mut self) {
        loop {
            let b = self.s.tail;
            if b == NIL || self.lir[b as usize] {
                return;
            }
            self.s_links.unlink(&mut self.s, b);
            self.in_s[b as usize] = false;
            if !self.resident[b as usize] {
                self.q_links.unlink(&mut self.nr, b);
                self.forget(b);
            }
        }
    }

    fn push_s_top(&mut self, x: u32) {
        if self.in_s[x as usize] {
            self.s_links.move_to_head(&mut self.s, x);
        } else {
            self.s_links.push_head(&mut self.s, x);
            self.in_s[x as usize] = true;
        }
    }

    /// Demote the bottom LIR block of S to a resident HIR at Q's MRU end.
    fn demote_bottom(&mut self) {
        // With a tiny cache (L_lirs = 0) HIR entries can sit at the bottom.
        self.prune();
        let b = self.s.tail;
        self.s_links.unlink(&mut self.s, b);
        self.in_s[b as usize] = false;
        self.lir[b as usize] = false;
        self.n_lir -= 1;
        self.q_links.push_head(&mut self.q, b);
        self.prune();
    }

    /// Make `x` (already at the top of S, not on Q or NR) an LIR block.
    fn promote(&mut self, x: u32) {
        self.lir[x as usize] = true;
        self.n_lir += 1;
        if self.n_lir > self.lirs_limit {
            self.demote_bottom();
        }
    }

    fn cached(&self) -> usize {
        self.n_lir + self.q.len
    }

    fn evict(&mut self) {
        let v = self
            .q_links
            .pop_tail(&mut self.q)
            .expect("full cache has a resident HIR");
        self.evicted = Some(self.blocks[v as usize]);
        self.resident[v as usize] = false;
        if self.in_s[v as usize] {
            self.q_links.push_head(&mut self.nr, v);
        } else {
            self.forget(v);
        }
    }
}

impl Lirs {
    /// Keep S within 2c entries by forgetting the oldest non-resident ones.
    fn limit_stack(&mut self) {
        while self.s.len > 2 * self.c {
            let Some(old) = self.q_links.pop_tail(&mut self.nr) else {
                return;
            };
            self.s_links.unlink(&mut self.s, old);
            self.in_s[old as usize] = false;
            self.forget(old);
        }
    }

    fn access_inner(&mut self, a: &Access) -> bool {
        let found = self.map.get(&a.block).copied();
        if let Some(x) = found {
            let i = x as usize;
            if self.lir[i] {
                let was_bottom = self.s.tail == x;
                self.s_links.move_to_head(&mut self.s, x);
                if was_bottom {
                    self.prune();
                }
                return true;
            }
            if self.resident[i] {
                if self.in_s[i] {
                    self.s_links.move_to_head(&mut self.s, x);
                    self.q_links.unlink(&mut self.q, x);
                    self.promote(x);
                } else {
                    self.push_s_top(x);
                    self.q_links.move_to_head(&mut self.q, x);
                    self.keep_bottom_lir();
                }
                return true;
            }
        }
        // Miss.
        if self.cached() >= self.c {
            self.evict();
        }
        let x = match self.map.get(&a.block).copied() {
            Some(x) => {
                // Non-resident HIR entry still in S.
                self.q_links.unlink(&mut self.nr, x);
                self.resident[x as usize] = true;
                self.s_links.move_to_head(&mut self.s, x);
                self.promote(x);
                return false;
            }
            None => match self.free.pop() {
                Some(x) => {
                    self.blocks[x as usize] = a.block;
                    x
                }
                None => {
                    self.blocks.push(a.block);
                    self.lir.push(false);
                    self.resident.push(false);
                    self.in_s.push(false);
                    (self.blocks.len() - 1) as u32
                }
            },
        };
        self.map.insert(a.block, x);
        self.resident[x as usize] = true;
        self.lir[x as usize] = false;
        self.in_s[x as usize] = false;
        self.push_s_top(x);
        if self.n_lir < self.lirs_limit {
            self.lir[x as usize] = true;
            self.n_lir += 1;
        } else {
            self.q_links.push_head(&mut self.q, x);
            self.keep_bottom_lir();
        }
        false
    }

    /// After pushing an HIR entry onto S: with no LIR block, S held nothing
    /// and the entry sits at the bottom, which must be LIR; prune it.
    #[inline]
    fn keep_bottom_lir(&mut self) {
        if self.n_lir == 0 {
            self.prune();
        }
    }
}

impl Policy for Lirs {
    fn access(&mut self, a: &Access) -> bool {
        self.evicted = None;
        let hit = self.access_inner(a);
        self.limit_stack();
        hit
    }

    fn contains(&self, block: u64) -> bool {
        self.map.get(&block).is_some_and(|&x| self.resident[x as usize])
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        let Some(&x) = self.map.get(&block) else {
            return false;
        };
        let i = x as usize;
        if !self.resident[i] {
            return false;
        }
        let lir_at_bottom = self.lir[i] && self.s.tail == x;
        if self.lir[i] {
            self.lir[i] = false;
            self.n_lir -= 1;
        } else {
            self.q_links.unlink(&mut self.q, x);
        }
        if self.in_s[i] {
            self.s_links.unlink(&mut self.s, x);
            self.in_s[i] = false;
        }
        self.resident[i] = false;
        self.forget(x);
        if lir_at_bottom {
            self.prune();
        }
        true
    }

    fn len(&self) -> usize {
        self.cached()
    }

    fn capacity(&self) -> usize {
        self.c
    }
}
