//! VDF-LFU: Victim Disk(s) First LFU (Algorithm 2 of the VDF paper).
//!
//! Same two kinds of stacks as VDF-LRU (see `vdf_lru.rs`): the global stack
//! GS and one local stack LS_k per disk, both kept in LFU order. Each cached
//! block has a frequency F and a timestamp TS: "Initialize the frequency F and
//! TS of xi, by F = 1 and TS = GTS; Move xi to right place of LS_k and GS
//! according to F and TS. Update GTS, by GTS = GTS + 1". A hit adds one to F
//! and sets TS = GTS; F is forgotten when the block is evicted (plain LFU,
//! no history). "in VDF based LFU-like algorithms, the access sequence number
//! is also employed for choosing which block to evict with the same access
//! frequency": the stacks are ordered by (F, TS).
//!
//! Eviction:
//! - fault-free: the bottom of GS, i.e. the smallest (F, TS): plain LFU with
//!   ties broken least-recently-accessed first.
//! - faulty: the candidate of each LS_j is its smallest (F, TS); its weight is
//!   W = F x MP with MP = n - 1 for a block of the failed disk and 1 otherwise
//!   (the paper's p_i x MP_i with p_i measured by F); "Delete the block with
//!   minimum W and GTS - TS to obtain a free block": the smallest W, ties
//!   broken by the older TS (largest GTS - TS), as in LFU's own tie rule.
//!   MP is the array's real penalty (`FaultMap::penalty`), which for RAID-5
//!   with one failure is exactly n - 1 / 1; a block that cannot be read at all
//!   (MP = 0) has W = 0 and goes first. The failed disk's stack is a candidate
//!   like the others; empty stacks have none.
//! - The mode is read from the array at every eviction: a failure in the
//!   middle of a run switches the policy with no loss of state.
//!
//! `remove` (an invalidation, not in the paper) drops the block from GS and
//! its LS with its F and TS; as after an eviction, no frequency is kept. GTS
//! does not tick.
//!
//! Stacks are ordered maps keyed by (F, TS); TS values are unique, so keys are.

use super::FaultMap;
use crate::cache::{Access, Policy};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Clone, Copy)]
struct Entry {
    disk: u32,
    f: u64,
    ts: u64,
}

pub struct VdfLfu {
    capacity: usize,
    faults: Arc<dyn FaultMap>,
    map: FxHashMap<u64, Entry>,
    /// GS: (F, TS) -> block
    global: BTreeMap<(u64, u64), u64>,
    /// LS_k: (F, TS) -> block
    local: Vec<BTreeMap<(u64, u64), u64>>,
    gts: u64,
    evicted: Option<u64>,
}

impl VdfLfu {
    pub fn new(capacity: usize, faults: Arc<dyn FaultMap>) -> Self {
        let n = faults.ndisks() as usize;
        VdfLfu {
            capacity,
            faults,
            map: FxHashMap::default(),
            global: BTreeMap::new(),
            local: vec![BTreeMap::new(); n],
            gts: 0,
            evicted: None,
        }
    }

    /// The block to evict now.
    fn victim(&self) -> u64 {
        if !self.faults.any_failed() {
            return *self.global.values().next().expect("full cache");
        }
        // (W, TS, block) of the best candidate so far
        let mut best: Option<(u128, u64, u64)> = None;
        for ls in &self.local {
            if let Some((&(f, ts), &block)) = ls.iter().next() {
                let w = f as u128 * self.faults.penalty(block) as u128;
                if best.is_none_or(|(bw, bts, _)| (w, ts) < (bw, bts)) {
                    best = Some((w, ts, block));
                }
            }
        }
        best.expect("full cache").2
    }

    /// Frequency of a cached block (tests).
    pub fn freq(&self, block: u64) -> Option<u64> {
        self.map.get(&block).map(|e| e.f)
    }

    /// Cached blocks in eviction order of GS (smallest (F, TS) first).
    pub fn global_order(&self) -> Vec<u64> {
        self.global.values().copied().collect()
    }
}

impl Policy for VdfLfu {
    fn access(&mut self, a: &Access) -> bool {
        let gts = self.gts;
        self.gts += 1;
        self.evicted = None;
        if let Some(e) = self.map.get_mut(&a.block) {
            let old = (e.f, e.ts);
            e.f += 1;
            e.ts = gts;
            let new = (e.f, e.ts);
            let d = e.disk as usize;
            self.global.remove(&old);
            self.global.insert(new, a.block);
            self.local[d].remove(&old);
            self.local[d].insert(new, a.block);
            return true;
        }
        if self.map.len() >= self.capacity {
            let v = self.victim();
            self.evicted = Some(v);
            self.remove(v);
        }
        let disk = self.faults.disk_of(a.block);
        self.map.insert(a.block, Entry { disk, f: 1, ts: gts });
        self.global.insert((1, gts), a.block);
        self.local[disk as usize].insert((1, gts), a.block);
        false
    }

    fn contains(&self, block: u64) -> bool {
        self.map.contains_key(&block)
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        let Some(e) = self.map.remove(&block) else {
            return false;
        };
        self.global.remove(&(e.f, e.ts));
        self.local[e.disk as usize].remove(&(e.f, e.ts));
        true
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::fault::ModMap;
    use proptest::prelude::*;

    /// Algorithm 2 written naively: (block, F, TS) list and full scans.
    struct Naive {
        cap: usize,
        n: u64,
        failed: Vec<u64>,
        gts: u64,
        cache: Vec<(u64, u64, u64)>,
    }

    impl Naive {
        fn access(&mut self, b: u64) -> bool {
            let gts = self.gts;
            self.gts += 1;
            if let Some(e) = self.cache.iter_mut().find(|e| e.0 == b) {
                e.1 += 1;
                e.2 = gts;
                return true;
            }
            if self.cache.len() == self.cap {
                let idx = if self.failed.is_empty() {
                    (0..self.cache.len())
                        .min_by_key(|&i| (self.cache[i].1, self.cache[i].2))
                        .unwrap()
                } else {
                    let mut cands = vec![];
                    for j in 0..self.n {
                        if let Some(i) = (0..self.cache.len())
                            .filter(|&i| self.cache[i].0 % self.n == j)
                            .min_by_key(|&i| (self.cache[i].1, self.cache[i].2))
                        {
                            let mp = if self.failed.contains(&j) { self.n - 1 } else { 1 };
                            cands.push((self.cache[i].1 * mp, self.cache[i].2, i));
                        }
                    }
                    cands.sort();
                    cands[0].2
                };
                self.cache.remove(idx);
            }
            self.cache.push((b, 1, gts));
            false
        }
    }

    /// Plain LFU (ties: least recently accessed), naive.
    fn naive_lfu(cap: usize, n: u64) -> Naive {
        Naive {
            cap,
            n,
            failed: vec![],
            gts: 0,
            cache: vec![],
        }
    }

    #[test]
    fn hand_worked_faulty() {
        // 3 disks, disk 0 failed (MP 2). Cache 3.
        // 0,0,1,2: F(0)=2 TS1, F(1)=1 TS2, F(2)=1 TS3.
        // 4 (disk 1) at GTS 4: candidates LS0: 0 W=2*2=4; LS1: 1 W=1; LS2: 2 W=1.
        // tie W=1 -> older TS: block 1 evicted.
        let m = Arc::new(ModMap::with_failed(3, &[0]));
        let mut p = VdfLfu::new(3, m);
        let hits: Vec<bool> = [0, 0, 1, 2, 4].iter().map(|&b| p.access(&Access::read(b))).collect();
        assert_eq!(hits, vec![false, true, false, false, false]);
        assert_eq!(p.global_order(), vec![2, 4, 0]);
        // 2,4 hits: F(2)=2 TS5, F(4)=2 TS6. 3 (disk 0) at GTS 7:
        // LS0: 0 F2 W=4; LS1: 4 F2 W=2; LS2: 2 F2 W=2 -> tie, older TS: 2.
        assert!(p.access(&Access::read(2)));
        assert!(p.access(&Access::read(4)));
        assert!(!p.access(&Access::read(3)));
        assert_eq!(p.freq(2), None);
        assert_eq!(p.freq(0), Some(2));
        // Plain LFU would have evicted 0 (F2, TS1) instead.
        // 1 (disk 1) at GTS 8: LS0 bottom 3 (F1 TS7, W=2), LS1 bottom 4 (F2 TS6, W=2),
        // LS2 empty -> tie, older TS: block 4.
        assert!(!p.access(&Access::read(1)));
        assert_eq!(p.freq(4), None);
        assert_eq!(p.freq(3), Some(1));
    }

    #[test]
    fn hand_worked_fault_free() {
        let m = Arc::new(ModMap::new(3));
        let mut p = VdfLfu::new(2, m);
        // 0,0,1,2: 2 evicts 1 (F1) not 0 (F2); 1 then evicts 2 (F1, TS3)
        let hits: Vec<bool> = [0, 0, 1, 2, 1, 0].iter().map(|&b| p.access(&Access::read(b))).collect();
        assert_eq!(hits, vec![false, true, false, false, false, true]);
        assert_eq!(p.freq(0), Some(3));
        assert_eq!(p.freq(1), Some(1)); // forgotten on eviction
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn fault_free_equals_lfu(seq in prop::collection::vec(0u64..40, 1..400), cap in 1usize..12, n in 2u32..8) {
            let mut a = VdfLfu::new(cap, Arc::new(ModMap::new(n)));
            let mut r = naive_lfu(cap, n as u64);
            for &x in &seq {
                prop_assert_eq!(a.access(&Access::read(x)), r.access(x));
            }
        }

        /// ... and to the project's `lfu` (cache/lfu.rs), access for access.
        #[test]
        fn fault_free_equals_project_lfu(seq in prop::collection::vec(0u64..40, 1..400), cap in 1usize..12, n in 2u32..8) {
            let mut a = VdfLfu::new(cap, Arc::new(ModMap::new(n)));
            let mut b = crate::cache::lfu::Lfu::new(cap);
            for &x in &seq {
                prop_assert_eq!(a.access(&Access::read(x)), b.access(&Access::read(x)));
            }
        }

        #[test]
        fn equals_naive_algorithm_2(seq in prop::collection::vec(0u64..40, 1..400), cap in 1usize..12,
                                    n in 3u32..8, f in 0u32..8, fail_at in 0usize..400) {
            let f = f % n;
            let m = Arc::new(ModMap::new(n));
            let mut a = VdfLfu::new(cap, m.clone());
            let mut r = Naive { cap, n: n as u64, failed: vec![], gts: 0, cache: vec![] };
            for (i, &x) in seq.iter().enumerate() {
                if i == fail_at {
                    m.fail(f);
                    r.failed.push(f as u64);
                }
                prop_assert_eq!(a.access(&Access::read(x)), r.access(x), "access {} block {}", i, x);
            }
        }
    }
}
