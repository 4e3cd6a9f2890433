//! LRU: evict the least recently used block.
//!
//! Speed matters here (it is the baseline every sweep runs), so the index and
//! the recency list share one array: an open-addressing hash table (linear
//! probing, at most half full) whose entries carry their own `prev`/`next`
//! links. A hit touches the entry's cache line and its two neighbours'; no
//! separate map bucket or slab node. Deleting the evicted entry shifts later
//! probe-chain entries back (no tombstones) and repairs the links of every
//! entry it moves. The table grows by doubling up to what `capacity` needs,
//! so a huge nominal cache costs nothing until it fills. 16 bytes an entry.
//!
//! The table's hashing, probing, sizing, backward-shift deletion and prefetch
//! are `cache::index`'s (LRU supplies the entry type and the link repair).
//!
//! `remove` deletes the entry like an eviction does; LRU keeps no history.

use super::index::{
    access_all_prefetching, bits_for, find_in, home, prefetch_entry, shift_back, vacant_in, TableEntry,
};
use super::{Access, Policy};

const NIL: u32 = u32::MAX;
/// `prev` of an empty entry.
const VACANT: u32 = u32::MAX - 1;

#[derive(Debug, Clone, Copy)]
struct Entry {
    key: u64,
    prev: u32,
    next: u32,
}

impl TableEntry for Entry {
    #[inline]
    fn key(&self) -> u64 {
        self.key
    }
    #[inline]
    fn is_vacant(&self) -> bool {
        self.prev == VACANT
    }
}

const EMPTY: Entry = Entry {
    key: 0,
    prev: VACANT,
    next: NIL,
};

pub struct Lru {
    capacity: usize,
    len: usize,
    table: Vec<Entry>,
    /// 64 - log2(table.len()): Fibonacci hashing keeps the high bits.
    shift: u32,
    /// Most recent end.
    head: u32,
    /// Eviction end.
    tail: u32,
    /// Block the last access evicted.
    evicted: Option<u64>,
}

impl Lru {
    pub fn new(capacity: usize) -> Self {
        let bits = bits_for(capacity.min(1 << 16));
        Lru {
            capacity,
            len: 0,
            table: vec![EMPTY; 1 << bits],
            shift: 64 - bits,
            head: NIL,
            tail: NIL,
            evicted: None,
        }
    }

    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        find_in(&self.table, self.shift, key)
    }

    #[inline]
    fn unlink(&mut self, i: usize) {
        let Entry { prev, next, .. } = self.table[i];
        if prev != NIL {
            self.table[prev as usize].next = next;
        } else {
            self.head = next;
        }
        if next != NIL {
            self.table[next as usize].prev = prev;
        } else {
            self.tail = prev;
        }
    }

    #[inline]
    fn push_head(&mut self, i: usize) {
        let old = self.head;
        self.table[i].prev = NIL;
        self.table[i].next = old;
        if old != NIL {
            self.table[old as usize].prev = i as u32;
        } else {
            self.tail = i as u32;
        }
        self.head = i as u32;
    }

    /// Vacate entry `i` (already unlinked), shifting back the entries of its
    /// probe chain that would otherwise become unreachable, links and all.
    fn remove_at(&mut self, i: usize) {
        let Lru {
            table,
            shift,
            head,
            tail,
            ..
        } = self;
        let hole = shift_back(table, *shift, i, |t, from, to| move_linked(t, head, tail, from, to));
        self.table[hole] = EMPTY;
    }

    /// Place `key` in its first free slot (the key is absent).
    #[inline]
    fn insert_slot(&mut self, key: u64) -> usize {
        let i = vacant_in(&self.table, self.shift, key);
        self.table[i].key = key;
        i
    }

    /// Start loading `key`'s home slot into the CPU cache (a hint only).
    #[inline(always)]
    fn prefetch(&self, key: u64) {
        prefetch_entry(&self.table, home(key, self.shift));
    }

    /// Double the table, re-inserting from the LRU end so the order survives.
    fn grow(&mut self) {
        let bits = 64 - self.shift + 1;
        let old = std::mem::replace(&mut self.table, vec![EMPTY; 1 << bits]);
        self.shift = 64 - bits;
        let mut cur = self.tail;
        self.head = NIL;
        self.tail = NIL;
        while cur != NIL {
            let e = old[cur as usize];
            let i = self.insert_slot(e.key);
            self.push_head(i);
            cur = e.prev;
        }
    }
}

/// Move the linked entry at `from` to the vacant slot `to`, repointing its
/// neighbours (or the list's ends) at it.
#[inline]
fn move_linked(table: &mut [Entry], head: &mut u32, tail: &mut u32, from: usize, to: usize) {
    let e = table[from];
    table[to] = e;
    if e.prev != NIL {
        table[e.prev as usize].next = to as u32;
    } else {
        *head = to as u32;
    }
    if e.next != NIL {
        table[e.next as usize].prev = to as u32;
    } else {
        *tail = to as u32;
    }
}

impl Policy for Lru {
    #[inline]
    fn access(&mut self, a: &Access) -> bool {
        self.evicted = None;
        if let Some(i) = self.find(a.block) {
            if self.head != i as u32 {
                self.unlink(i);
                self.push_head(i);
            }
            return true;
        }
        if self.len >= self.capacity {
            let victim = self.tail as usize;
            self.evicted = Some(self.table[victim].key);
            self.unlink(victim);
            self.remove_at(victim);
            self.len -= 1;
        } else if 2 * (self.len + 1) > self.table.len() {
            self.grow();
        }
        let i = self.insert_slot(a.block);
        self.push_head(i);
        self.len += 1;
        false
    }

    fn access_all(&mut self, accesses: &[Access]) -> u64 {
        access_all_prefetching(self, accesses, Lru::prefetch)
    }

    fn contains(&self, block: u64) -> bool {
        self.find(block).is_some()
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        let Some(i) = self.find(block) else {
            return false;
        };
        self.unlink(i);
        self.remove_at(i);
        self.len -= 1;
        true
    }

    fn len(&self) -> usize {
        self.len
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::super::index::PREFETCH_AHEAD;
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// Brute-force LRU: a queue, most recent at the front.
    fn brute(keys: &[u64], cap: usize) -> Vec<bool> {
        let mut q: VecDeque<u64> = VecDeque::new();
        keys.iter()
            .map(|&k| {
                if let Some(p) = q.iter().position(|&x| x == k) {
                    q.remove(p);
                    q.push_front(k);
                    true
                } else {
                    if q.len() == cap {
                        q.pop_back();
                    }
                    q.push_front(k);
                    false
                }
            })
            .collect()
    }

    fn run(keys: &[u64], cap: usize) -> Vec<bool> {
        let mut l = Lru::new(cap);
        let out = keys.iter().map(|&k| l.access(&Access::read(k))).collect();
        assert!(l.len() <= cap);
        out
    }

    #[test]
    fn by_hand() {
        // cap 2: 1 2 1 3 2 1 -> miss miss hit miss(evict 2) miss(evict 1) miss(evict 3)
        assert_eq!(
            run(&[1, 2, 1, 3, 2, 1], 2),
            vec![false, false, true, false, false, false]
        );
    }

    /// `access_all` (which prefetches ahead) counts the hits `access` gives
    /// one by one, across runs of every length around the look-ahead, and
    /// leaves the same cache behind (the next run continues it).
    #[test]
    fn access_all_equals_access_one_by_one() {
        let keys: Vec<u64> = (0..5000u64).map(|i| ((i * 7919) % 700) << 40 | (i % 5)).collect();
        let want = brute(&keys, 300);
        for run_len in [
            1,
            PREFETCH_AHEAD - 1,
            PREFETCH_AHEAD,
            PREFETCH_AHEAD + 1,
            1000,
            keys.len(),
        ] {
            let mut l = Lru::new(300);
            let mut at = 0;
            for run in keys.chunks(run_len) {
                let hits = l.access_all(&run.iter().map(|&k| Access::read(k)).collect::<Vec<_>>());
                let expect = want[at..at + run.len()].iter().filter(|&&h| h).count() as u64;
                assert_eq!(hits, expect, "runs of {run_len}, at {at}");
                at += run.len();
            }
            assert_eq!(l.len(), 300);
        }
    }

    #[test]
    fn colliding_keys_and_growth() {
        // Keys that share a home slot (multiples of a large power of two) stress
        // probe chains and backward-shift deletion; 3000 distinct keys force growth.
        let keys: Vec<u64> = (0..20_000u64).map(|i| ((i * 7919) % 3000) << 40 | (i % 3)).collect();
        for cap in [1, 2, 7, 100, 2999, 5000] {
            assert_eq!(run(&keys, cap), brute(&keys, cap), "cap {cap}");
        }
    }

    /// Run ops, (remove?, key), on `Lru` and on a brute-force queue in
    /// lockstep: same hit (or removed) and evicted block after every op; every
    /// `sweep` ops (and at the end) every cached key must be found through its
    /// probe chain after the backward shifts, and `len` agree.
    fn check_ops(ops: &[(bool, u64)], cap: usize, sweep: usize) -> Result<(), TestCaseError> {
        let mut q: VecDeque<u64> = VecDeque::new();
        let mut l = Lru::new(cap);
        let mut ev = None;
        for (i, &(rm, k)) in ops.iter().enumerate() {
            let p = q.iter().position(|&x| x == k);
            if let Some(p) = p {
                q.remove(p);
            }
            let want = if rm {
                p.is_some()
            } else {
                ev = None;
                if p.is_none() && q.len() == cap {
                    ev = q.pop_back();
                }
                q.push_front(k);
                p.is_some()
            };
            let got = if rm { l.remove(k) } else { l.access(&Access::read(k)) };
            prop_assert_eq!((got, l.evicted()), (want, ev), "cap {} op {}", cap, i);
            if i % sweep == 0 || i + 1 == ops.len() {
                for &x in &q {
                    prop_assert!(l.contains(x), "cap {} op {}: key {:#x} lost", cap, i, x);
                }
                prop_assert_eq!(l.len(), q.len());
            }
        }
        Ok(())
    }

    /// Key `i` of 32 groups whose keys share one home slot at every table
    /// size (of at least 32 slots): key x 0x9e37...7c15 (the hash multiplier)
    /// is the group in the top 5 bits and i / 32 in the low bits, so the
    /// hash's top bits are the group.
    fn same_home(i: u64) -> u64 {
        let c: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut inv = c; // Newton's iteration for c^-1 mod 2^64
        for _ in 0..6 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(c.wrapping_mul(inv)));
        }
        ((i % 32) << 59 | (i / 32)).wrapping_mul(inv)
    }

    #[test]
    fn removes_in_colliding_chains_and_growth() {
        let l = Lru::new(2500);
        assert_eq!(home(same_home(3), l.shift), home(same_home(3 + 32 * 40), l.shift));
        assert_ne!(home(same_home(3), l.shift), home(same_home(4), l.shift));
        // 1500 keys in 32 clusters of ~47 entries; every third op removes the
        // key accessed 500 ops before, which a large cache still holds in the
        // middle of its cluster: backward shifts move many entries.
        let key = |j: u64| same_home((j * 7919) % 1500);
        let ops: Vec<(bool, u64)> = (500..12_000u64)
            .map(|i| {
                if i % 3 == 2 {
                    (true, key(i - 500))
                } else {
                    (false, key(i))
                }
            })
            .collect();
        for cap in [1, 2, 7, 100, 1499, 2500] {
            check_ops(&ops, cap, 5).unwrap();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn removes_equal_brute_force(
            ops in prop::collection::vec((any::<bool>(), prop_oneof![0u64..40, (0u64..200).prop_map(same_home), any::<u64>()]), 0..600),
            cap in 1usize..50,
        ) {
            check_ops(&ops, cap, 1)?;
        }
        #[test]
        fn equals_brute_force(keys in prop::collection::vec(prop_oneof![0u64..40, any::<u64>()], 0..600), cap in 1usize..50) {
            prop_assert_eq!(run(&keys, cap), brute(&keys, cap));
        }
    }
}
