//! ARC (Megiddo & Modha, FAST'03), in blocks.
//!
//! T1 holds blocks seen once recently, T2 blocks seen at least twice; B1 and
//! B2 are their ghost lists (ids only). The target size p of T1 adapts: a hit
//! in B1 grows it by max(|B2|/|B1|, 1), a hit in B2 shrinks it by
//! max(|B1|/|B2|, 1), clamped to [0, c]. p is real-valued as in the paper
//! (libCacheSim's `ARC` also uses a double; integer division would differ).
//!
//! REPLACE moves the LRU block of T1 to B1 when |T1| > p (or |T1| = p and the
//! request hit in B2), else the LRU block of T2 to B2. On a miss outside the
//! ghosts with a full cache: if |T1|+|B1| = c, drop the LRU of B1 and REPLACE
//! (or, when B1 is empty, drop the LRU of T1 outright); otherwise, when the
//! directory holds 2c blocks drop the LRU of B2, then REPLACE.
//!
//! All four lists are threaded through one slab (at most 2c slots).
//!
//! [`ArcOf`] is ARC with a [`Victim`] hook: told of every move of a slot
//! between lists, it may name another block of the list REPLACE takes from.
//! Plain ARC ([`Arc`]) takes the tail; VDF-ARC (`fault::vdf_arc`) picks among
//! the per-disk tails when a disk has failed.
//!
//! Invalidation (`remove`) is not in the paper; what we do keeps its
//! invariants (|T1|+|B1| <= c, |T1|+|T2|+|B1|+|B2| <= 2c):
//! - `remove` forgets a cached block outright: it does not enter B1/B2 (an
//!   invalidation says nothing about the list sizes, which is what ghost hits
//!   measure), p is left alone; B1 and B2 are kept.
//! - A cache that is not full may then hold ghosts, which the paper never
//!   meets. A ghost hit adapts p as usual but calls REPLACE only when the cache
//!   is full (REPLACE frees a slot; with room there is nothing to free). A miss
//!   outside the ghosts with room evicts nothing but trims the directory as
//!   case IV would: it drops the LRU of B1 when |T1|+|B1| = c, else the LRU of
//!   B2 when the directory holds 2c blocks. Without removals the cache is
//!   full whenever a ghost exists, so none of this changes ARC.

use super::index::access_all_prefetching;
use super::list::{Ends, Links32};
use super::slab::Slab;
use super::{Access, Policy};

pub const T1: u8 = 0;
pub const T2: u8 = 1;
const B1: u8 = 2;
const B2: u8 = 3;
/// Not on any list (a new slot, or a forgotten one).
pub const NONE: u8 = 4;

/// Which block of T1 or T2 ARC demotes (or drops), and what it needs to know
/// to decide: every move of a slot between lists.
///
/// The block of a slot is ARC's to keep: a hook that needs it asks
/// `block_of` (plain ARC's hook never does, so it pays nothing for it).
pub trait Victim: Send {
    /// Slot `s` moved from list `from` to list `to` (either may be
    /// [`NONE`]; `from == to` for a hit in T2, moved to its head). A move
    /// into T1 or T2 is an access of the slot's block.
    fn moved(&mut self, s: u32, from: u8, to: u8, block_of: impl Fn(u32) -> u64);
    /// The slot to take from resident list `list` (T1 or T2, not empty),
    /// whose LRU end is `tail`.
    fn pick(&mut self, list: u8, tail: u32, block_of: impl Fn(u32) -> u64) -> u32;
}

/// Plain ARC's choice: the LRU end.
pub struct Tail;

impl Victim for Tail {
    #[inline]
    fn moved(&mut self, _s: u32, _from: u8, _to: u8, _block_of: impl Fn(u32) -> u64) {}
    #[inline]
    fn pick(&mut self, _list: u8, tail: u32, _block_of: impl Fn(u32) -> u64) -> u32 {
        tail
    }
}

/// ARC.
pub type Arc = ArcOf<Tail>;

pub struct ArcOf<V: Victim> {
    victim: V,
    c: usize,
    p: f64,
    slots: Slab,
    which: Vec<u8>,
    links: Links32,
    lists: [Ends; 4],
    evicted: Option<u64>,
}

impl Arc {
    pub fn new(capacity: usize) -> Self {
        ArcOf::with_victim(capacity, Tail)
    }
}

impl<V: Victim> ArcOf<V> {
    pub fn with_victim(capacity: usize, victim: V) -> Self {
        let reserve = (2 * capacity).min(1 << 21);
        ArcOf {
            victim,
            c: capacity,
            p: 0.0,
            slots: Slab::with_capacity(reserve),
            which: Vec::with_capacity(reserve),
            links: Links32::with_capacity(reserve),
            lists: [Ends::default(); 4],
            evicted: None,
        }
    }

    #[inline]
    fn size(&self, l: u8) -> usize {
        self.lists[l as usize].len
    }

    /// Move slot `s` from the list it is on to the head of list `to`.
    #[inline]
    fn move_to(&mut self, s: u32, to: u8) {
        let from = self.which[s as usize];
        self.links.unlink(&mut self.lists[from as usize], s);
        self.links.push_head(&mut self.lists[to as usize], s);
        self.which[s as usize] = to;
        let slots = &self.slots;
        self.victim.moved(s, from, to, |s| slots.block(s));
    }

    /// Forget slot `s` (on a list) entirely.
    fn forget(&mut self, s: u32) {
        let from = self.which[s as usize];
        self.links.unlink(&mut self.lists[from as usize], s);
        self.which[s as usize] = NONE;
        let slots = &self.slots;
        self.victim.moved(s, from, NONE, |s| slots.block(s));
        self.slots.forget(s);
    }

    /// Forget the LRU block of ghost list `l` entirely.
    fn drop_tail(&mut self, l: u8) {
        let s = self.lists[l as usize].tail;
        self.forget(s);
    }

    /// The slot to take from resident list `l` (not empty).
    fn pick(&mut self, l: u8) -> u32 {
        let tail = self.lists[l as usize].tail;
        let slots = &self.slots;
        self.victim.pick(l, tail, |s| slots.block(s))
    }

    /// REPLACE of the paper: demote one cached block to its ghost list.
    fn replace(&mut self, hit_in_b2: bool) {
        let t1 = self.size(T1) as f64;
        let from_t1 = t1 > 0.0 && (t1 > self.p || (t1 == self.p && hit_in_b2));
        let from_t1 = from_t1 || self.size(T2) == 0;
        let (src, dst) = if from_t1 { (T1, B1) } else { (T2, B2) };
        let s = self.pick(src);
        self.evicted = Some(self.slots.block(s));
        self.move_to(s, dst);
    }

    /// Make room for one block on a miss that is not a ghost hit (full cache).
    fn evict(&mut self) {
        let (t1, b1) = (self.size(T1), self.size(B1));
        if t1 + b1 >= self.c {
            if t1 < self.c {
                self.drop_tail(B1);
                self.replace(false);
            } else {
                let s = self.pick(T1);
                self.evicted = Some(self.slots.block(s));
                self.forget(s);
            }
        } else {
            if t1 + b1 + self.size(T2) + self.size(B2) >= 2 * self.c {
                self.drop_tail(B2);
            }
            self.replace(false);
        }
    }

    /// Case IV on a cache with room (only after removals): keep the
    /// directory within its bounds by dropping a ghost, evict nothing.
    fn trim_ghosts(&mut self) {
        let (t1, b1) = (self.size(T1), self.size(B1));
        if t1 + b1 >= self.c {
            self.drop_tail(B1);
        } else if t1 + b1 + self.size(T2) + self.size(B2) >= 2 * self.c {
            self.drop_tail(B2);
        }
    }

    fn cached(&self) -> usize {
        self.size(T1) + self.size(T2)
    }

    fn new_slot(&mut self, block: u64, list: u8) {
        let (s, new) = self.slots.insert(block);
        if new {
            self.which.push(list);
        } else {
            self.which[s as usize] = list;
        }
        self.links.push_head(&mut self.lists[list as usize], s);
        let slots = &self.slots;
        self.victim.moved(s, NONE, list, |s| slots.block(s));
    }
}

impl<V: Victim> Policy for ArcOf<V> {
    fn access(&mut self, a: &Access) -> bool {
        self.evicted = None;
        let full = self.cached() >= self.c;
        if let Some(s) = self.slots.get(a.block) {
            match self.which[s as usize] {
                T1 | T2 => {
                    self.move_to(s, T2);
                    return true;
                }
                B1 => {
                    let delta = (self.size(B2) as f64 / self.size(B1) as f64).max(1.0);
                    self.p = (self.p + delta).min(self.c as f64);
                    if full {
                        self.replace(false);
                    }
                }
                _ => {
                    let delta = (self.size(B1) as f64 / self.size(B2) as f64).max(1.0);
                    self.p = (self.p - delta).max(0.0);
                    if full {
                        self.replace(true);
                    }
                }
            }
            // The ghost comes back as a frequent block.
            self.move_to(s, T2);
            return false;
        }
        if full {
            self.evict();
        } else {
            self.trim_ghosts();
        }
        self.new_slot(a.block, T1);
        false
    }

    fn access_all(&mut self, accesses: &[Access]) -> u64 {
        access_all_prefetching(self, accesses, |p, block| p.slots.prefetch(block))
    }

    fn contains(&self, block: u64) -> bool {
        self.slots.get(block).is_some_and(|s| self.which[s as usize] <= T2)
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        match self.slots.get(block) {
            Some(s) if self.which[s as usize] <= T2 => {
                self.forget(s);
                true
            }
            _ => false,
        }
    }

    fn len(&self) -> usize {
        self.cached()
    }

    fn capacity(&self) -> usize {
        self.c
    }
}
