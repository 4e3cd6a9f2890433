//! The block -> slot index of the policies that keep per-slot vectors (LFU,
//! CLOCK, OPT, and through [`super::slab::Slab`] ARC, 2Q, S3-FIFO, MQ).
//!
//! An open-addressing table (linear probing, Fibonacci hashing, at most half
//! full) of `(block, slot)` pairs, on the same table functions as LRU's own
//! table (`find_in`, `vacant_in`, `shift_back`): a look-up reads one
//! cache line in the common case, and [`BlockIndex::prefetch`] lets a policy's
//! `access_all` start loading the line of an access a few ahead, since the
//! table is larger than the CPU's caches and a miss on it is most of the cost
//! of an access. Deleting shifts later entries of the probe chain back (no
//! tombstones). The table doubles as it fills, so a huge nominal cache costs
//! nothing until it holds blocks. Nothing iterates it: its order cannot leak
//! into a decision.

use super::{Access, Policy};

const MIN_BITS: u32 = 4;

/// What an index maps blocks to: a slot (`u32`), or an access index (`u64`,
/// the next-use pre-pass); its largest value marks an empty entry.
pub(crate) trait Value: Copy + Eq {
    const VACANT: Self;
}

impl Value for u32 {
    const VACANT: u32 = u32::MAX;
}

impl Value for u64 {
    const VACANT: u64 = u64::MAX;
}

#[derive(Debug, Clone, Copy)]
struct Entry<V> {
    key: u64,
    slot: V,
}

impl<V: Value> TableEntry for Entry<V> {
    #[inline]
    fn key(&self) -> u64 {
        self.key
    }
    #[inline]
    fn is_vacant(&self) -> bool {
        self.slot == V::VACANT
    }
}

// The table primitives below are LRU's too (`super::lru`, whose entries
// carry list links and so cannot be a `BlockIndex`).

/// An entry of an open-addressing table of blocks: the index's, or LRU's.
pub(super) trait TableEntry: Copy {
    fn key(&self) -> u64;
    fn is_vacant(&self) -> bool;
}

/// The home entry of `key` in a table of 2^(64 - `shift`) entries (Fibonacci
/// hashing keeps the high bits of the product).
#[inline]
pub(super) fn home(key: u64, shift: u32) -> usize {
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize
}

/// Table bits so that `n` entries fill at most half of it.
pub(super) fn bits_for(n: usize) -> u32 {
    ((2 * n.max(1)).next_power_of_two().trailing_zeros()).max(MIN_BITS)
}

/// Where `key` is in `table` (of 2^(64 - `shift`) entries), if there.
#[inline]
pub(super) fn find_in<E: TableEntry>(table: &[E], shift: u32, key: u64) -> Option<usize> {
    let mask = table.len() - 1;
    let mut i = home(key, shift);
    loop {
        let e = &table[i];
        if e.is_vacant() {
            return None;
        }
        if e.key() == key {
            return Some(i);
        }
        i = (i + 1) & mask;
    }
}

/// Where an absent `key` goes: the first vacant entry of its probe chain.
#[inline]
pub(super) fn vacant_in<E: TableEntry>(table: &[E], shift: u32, key: u64) -> usize {
    let mask = table.len() - 1;
    let mut i = home(key, shift);
    while !table[i].is_vacant() {
        i = (i + 1) & mask;
    }
    i
}

/// Backward-shift deletion of entry `i` (no tombstones): every later entry
/// of its probe chain that the hole would cut off from its home moves back
/// into the hole by `move_entry(table, from, to)`, leaving a new hole. Returns
/// the last hole, for the caller to mark vacant.
#[inline]
pub(super) fn shift_back<E: TableEntry>(
    table: &mut [E],
    shift: u32,
    mut i: usize,
    mut move_entry: impl FnMut(&mut [E], usize, usize),
) -> usize {
    let mask = table.len() - 1;
    let mut j = i;
    loop {
        j = (j + 1) & mask;
        if table[j].is_vacant() {
            return i;
        }
        let h = home(table[j].key(), shift);
        // Entry j may stay iff its home lies cyclically in (i, j].
        let stays = if i <= j { i < h && h <= j } else { i < h || h <= j };
        if !stays {
            move_entry(table, j, i);
            i = j;
        }
    }
}

/// Start loading `table[i]` into the CPU cache (a hint only).
#[inline(always)]
pub(super) fn prefetch_entry<T>(table: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let entry = table[i..].as_ptr();
        // SAFETY: a prefetch hint of an address inside the table; it
        // neither reads into the program nor faults.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(entry.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (table, i);
}

/// How far ahead `access_all` prefetches (see [`BlockIndex::prefetch`]).
pub(crate) const PREFETCH_AHEAD: usize = 8;

/// `Policy::access_all` for a policy whose index is larger than the CPU's
/// caches: `prefetch(policy, block)` starts loading the index entry of the
/// access [`PREFETCH_AHEAD`] ahead before each access is presented.
#[inline(always)]
pub(super) fn access_all_prefetching<P: Policy>(
    policy: &mut P,
    accesses: &[Access],
    prefetch: impl Fn(&P, u64),
) -> u64 {
    let mut hits = 0;
    for (i, a) in accesses.iter().enumerate() {
        if let Some(ahead) = accesses.get(i + PREFETCH_AHEAD) {
            prefetch(policy, ahead.block);
        }
        hits += policy.access(a) as u64;
    }
    hits
}

pub(crate) struct BlockIndex<V: Value = u32> {
    table: Vec<Entry<V>>,
    /// 64 - log2(table.len()).
    shift: u32,
    len: usize,
}

impl<V: Value> BlockIndex<V> {
    const EMPTY: Entry<V> = Entry {
        key: 0,
        slot: V::VACANT,
    };

    /// Room for `n` blocks before the first growth (the table itself starts
    /// small when `n` is huge: it grows as blocks arrive).
    pub fn with_capacity(n: usize) -> Self {
        let bits = bits_for(n.min(1 << 16));
        BlockIndex {
            table: vec![Self::EMPTY; 1 << bits],
            shift: 64 - bits,
            len: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn find(&self, key: u64) -> Option<usize> {
        find_in(&self.table, self.shift, key)
    }

    /// The slot of `key`, if indexed.
    #[inline]
    pub fn get(&self, key: u64) -> Option<V> {
        self.find(key).map(|i| self.table[i].slot)
    }

    #[inline]
    pub fn contains(&self, key: u64) -> bool {
        self.find(key).is_some()
    }

    /// Index `key` (which must be absent) at `slot`.
    #[inline]
    pub fn insert(&mut self, key: u64, slot: V) {
        debug_assert!(slot != V::VACANT && self.find(key).is_none());
        if 2 * (self.len + 1) > self.table.len() {
            self.grow();
        }
        self.place(Entry { key, slot });
        self.len += 1;
    }

    #[inline]
    fn place(&mut self, e: Entry<V>) {
        let i = vacant_in(&self.table, self.shift, e.key);
        self.table[i] = e;
    }

    /// Map `key` to `value` whether or not it was indexed; its old value.
    #[inline]
    pub fn replace(&mut self, key: u64, value: V) -> Option<V> {
        match self.find(key) {
            Some(i) => Some(std::mem::replace(&mut self.table[i].slot, value)),
            None => {
                self.insert(key, value);
                None
            }
        }
    }

    /// Drop `key`; its slot, if it was indexed.
    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        let i = self.find(key)?;
        let slot = self.table[i].slot;
        let hole = shift_back(&mut self.table, self.shift, i, |t, from, to| t[to] = t[from]);
        self.table[hole] = Self::EMPTY;
        self.len -= 1;
        Some(slot)
    }

    /// Start loading `key`'s home entry into the CPU cache (a hint only).
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        prefetch_entry(&self.table, home(key, self.shift));
    }

    // Rare (each doubles the table): kept out of `insert`, which every miss
    // of LFU, CLOCK and OPT inlines.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let bits = 64 - self.shift + 1;
        let old = std::mem::replace(&mut self.table, vec![Self::EMPTY; 1 << bits]);
        self.shift = 64 - bits;
        for e in old.into_iter().filter(|e| e.slot != V::VACANT) {
            self.place(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    /// Against a hash map, on keys that collide in a small table (many
    /// deletions in the middle of probe chains) and through growth.
    #[test]
    fn agrees_with_a_hash_map_under_churn() {
        let mut idx: BlockIndex = BlockIndex::with_capacity(4);
        let mut model: FxHashMap<u64, u32> = FxHashMap::default();
        let mut x: u64 = 12345;
        for step in 0..200_000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            // Keys in a few ranges, including multiples of a power of two.
            let key = match (x >> 60) % 3 {
                0 => (x >> 33) % 300,
                1 => ((x >> 33) % 300) << 20,
                _ => x >> 40,
            };
            if (x >> 32) % 5 < 2 {
                assert_eq!(idx.remove(key), model.remove(&key), "step {step}");
            } else if model.contains_key(&key) {
                assert_eq!(idx.get(key), model.get(&key).copied());
            } else {
                idx.insert(key, step);
                model.insert(key, step);
            }
            assert_eq!(idx.len(), model.len());
        }
        for (&k, &v) in &model {
            assert_eq!(idx.get(k), Some(v));
        }
        assert!(!idx.contains(u64::MAX));
    }

    #[test]
    fn replace_returns_the_old_value() {
        let mut idx: BlockIndex<u64> = BlockIndex::with_capacity(1);
        for k in 0..100u64 {
            assert_eq!(idx.replace(k, k), None);
        }
        for k in 0..100u64 {
            assert_eq!(idx.replace(k, k + 1000), Some(k));
        }
        assert_eq!(idx.len(), 100);
        assert_eq!(idx.get(7), Some(1007));
    }
}
