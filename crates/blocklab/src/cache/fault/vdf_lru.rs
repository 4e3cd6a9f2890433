//! VDF-LRU: Victim Disk(s) First LRU (Algorithm 1 of the VDF paper,
//! `../shared/papers/vdf-victim-disk-first-cache.txt`).
//!
//! Every cached block sits in two stacks at once: the global stack GS (plain
//! LRU order) and the local stack LS_k of the disk k holding it. The paper:
//! "we employ two types of stacks to achieve the smooth runtime conversion:
//! one is the global stack (GS) ... and the other is the local stack (LS)
//! holding the blocks on the same disk in cache. All blocks should be in two
//! types of stacks concurrently". "When the system works in fault-free mode,
//! it evicts the block with the smallest weight at the bottom of the GS stack.
//! Once a disk array drops to a faulty mode, it evicts the block with the
//! smallest weight at the bottom of each LS stack instead".
//!
//! Algorithm 1 (RAID-5, n disks):
//! - hit: "Update TS of xi, by TS = GTS; Move xi to the heads of LS_k and GS."
//! - miss, cache full: "foreach block at the bottom of LS_j, 0 <= j < n do
//!   if LS_j is a corresponding stack to a faulty disk then Its weight
//!   W = GTS - TS; else Its weight W = (GTS - TS) * (n - 1); Delete the block
//!   with maximum W to obtain a free block"
//! - then "Load xi ... Update TS of xi, by TS = GTS; Add xi to the heads of GS
//!   and the corresponding LS."
//! - after either case: "Update GTS, by GTS = GTS + 1".
//!
//! Details the algorithm leaves open, and what we do:
//! - `n` is the number of disks of the array, failed one included ("RAID-5
//!   with n disks"; "one cache miss to the faulty disk will result in n - 1
//!   I/O requests to the surviving disks"). The multiplier n - 1 is the miss
//!   penalty MP of a lost block relative to a surviving one (MP = 1): the
//!   weight is the paper's "minimum product of p_i x MP_i" with p_i =
//!   1/(GTS - TS). We therefore compute W = (GTS - TS) / MP(block), compared
//!   exactly by cross-multiplication. For RAID-5 with one failure MP is n - 1
//!   on the failed disk and 1 elsewhere, which orders the candidates exactly as
//!   Algorithm 1 does (multiply both weights by n - 1); for other arrays
//!   (RAID-6, two failures) the same rule uses the array's real penalties.
//!   A block that cannot be read at all (MP = 0) saves nothing when cached and
//!   is evicted first.
//! - Ties of W: the older TS (the LRU of the two) goes first; TS values are
//!   unique, so the choice is deterministic.
//! - The failed disk's local stack is a candidate like any other (it is not
//!   skipped); empty local stacks have no candidate.
//! - The mode is read from the array at every eviction, so a failure in the
//!   middle of a run switches the policy without losing any state.
//! - `remove` (an invalidation, not in the paper) drops the block from GS and
//!   its LS with its TS; like LRU, VDF-LRU keeps no history. GTS does not tick
//!   (it counts accesses).

use super::{AgeOverPenaltyPick, FaultMap};
use crate::cache::list::{Ends, Links32, NIL};
use crate::cache::{Access, Policy};
use rustc_hash::FxHashMap;
use std::sync::Arc;

pub struct VdfLru {
    capacity: usize,
    faults: Arc<dyn FaultMap>,
    map: FxHashMap<u64, u32>,
    /// Per slot: block, disk, timestamp.
    blocks: Vec<u64>,
    disk: Vec<u32>,
    ts: Vec<u64>,
    /// Global stack GS.
    glinks: Links32,
    global: Ends,
    /// Local stacks LS_k, one per disk.
    llinks: Links32,
    local: Vec<Ends>,
    /// Global timestamp GTS.
    gts: u64,
    /// Slots of removed blocks.
    free: Vec<u32>,
    evicted: Option<u64>,
}

impl VdfLru {
    pub fn new(capacity: usize, faults: Arc<dyn FaultMap>) -> Self {
        let reserve = capacity.min(1 << 20);
        let n = faults.ndisks() as usize;
        VdfLru {
            capacity,
            faults,
            map: FxHashMap::default(),
            blocks: Vec::with_capacity(reserve),
            disk: Vec::with_capacity(reserve),
            ts: Vec::with_capacity(reserve),
            glinks: Links32::with_capacity(reserve),
            global: Ends::default(),
            llinks: Links32::with_capacity(reserve),
            local: vec![Ends::default(); n],
            gts: 0,
            free: Vec::new(),
            evicted: None,
        }
    }

    /// The slot to evict now.
    fn victim(&self) -> u32 {
        if !self.faults.any_failed() {
            return self.global.tail; // fault-free: plain LRU on GS
        }
        let mut pick = AgeOverPenaltyPick::new();
        for ls in &self.local {
            let c = ls.tail;
            if c != NIL {
                let ts = self.ts[c as usize];
                pick.offer(c, self.gts - ts, self.faults.penalty(self.blocks[c as usize]), ts);
            }
        }
        pick.best().unwrap_or(NIL)
    }

    /// Blocks in cache from LRU to MRU of the global stack (tests).
    pub fn global_order(&self) -> Vec<u64> {
        let mut v = Vec::new();
        let mut i = self.global.tail;
        while i != NIL {
            v.push(self.blocks[i as usize]);
            i = self.glinks.prev(i);
        }
        v
    }

    pub fn gts(&self) -> u64 {
        self.gts
    }
}

impl Policy for VdfLru {
    fn access(&mut self, a: &Access) -> bool {
        self.evicted = None;
        let hit = if let Some(&slot) = self.map.get(&a.block) {
            self.ts[slot as usize] = self.gts;
            let d = self.disk[slot as usize] as usize;
            self.glinks.move_to_head(&mut self.global, slot);
            self.llinks.move_to_head(&mut self.local[d], slot);
            true
        } else {
            let d = self.faults.disk_of(a.block);
            let slot = if self.map.len() >= self.capacity {
                let v = self.victim();
                let vd = self.disk[v as usize] as usize;
                self.glinks.unlink(&mut self.global, v);
                self.llinks.unlink(&mut self.local[vd], v);
                let old = self.blocks[v as usize];
                self.evicted = Some(old);
                self.map.remove(&old);
                self.blocks[v as usize] = a.block;
                self.disk[v as usize] = d;
                v
            } else if let Some(v) = self.free.pop() {
                self.blocks[v as usize] = a.block;
                self.disk[v as usize] = d;
                v
            } else {
                self.blocks.push(a.block);
                self.disk.push(d);
                self.ts.push(0);
                (self.blocks.len() - 1) as u32
            };
            self.ts[slot as usize] = self.gts;
            self.glinks.push_head(&mut self.global, slot);
            self.llinks.push_head(&mut self.local[d as usize], slot);
            self.map.insert(a.block, slot);
            false
        };
        self.gts += 1;
        hit
    }

    fn contains(&self, block: u64) -> bool {
        self.map.contains_key(&block)
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        let Some(s) = self.map.remove(&block) else {
            return false;
        };
        let d = self.disk[s as usize] as usize;
        self.glinks.unlink(&mut self.global, s);
        self.llinks.unlink(&mut self.local[d], s);
        self.free.push(s);
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
    use crate::cache::lru::Lru;
    use proptest::prelude::*;

    fn run(p: &mut dyn Policy, seq: &[u64]) -> Vec<bool> {
        seq.iter().map(|&b| p.access(&Access::read(b))).collect()
    }

    /// Algorithm 1 written naively: a list of (block, TS), full scans.
    struct Naive {
        cap: usize,
        n: u64,
        failed: Vec<u64>,
        gts: u64,
        cache: Vec<(u64, u64)>,
    }

    impl Naive {
        fn access(&mut self, b: u64) -> bool {
            let hit = if let Some(e) = self.cache.iter_mut().find(|e| e.0 == b) {
                e.1 = self.gts;
                true
            } else {
                if self.cache.len() == self.cap {
                    let idx = if self.failed.is_empty() {
                        (0..self.cache.len()).min_by_key(|&i| self.cache[i].1).unwrap()
                    } else {
                        // bottom (oldest TS) of each local stack
                        let mut cands = vec![];
                        for j in 0..self.n {
                            if let Some(i) = (0..self.cache.len())
                                .filter(|&i| self.cache[i].0 % self.n == j)
                                .min_by_key(|&i| self.cache[i].1)
                            {
                                let age = self.gts - self.cache[i].1;
                                let w = if self.failed.contains(&j) {
                                    age
                                } else {
                                    age * (self.n - 1)
                                };
                                cands.push((w, self.cache[i].1, i));
                            }
                        }
                        // maximum W, ties: older (smaller) TS
                        cands.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
                        cands[0].2
                    };
                    self.cache.remove(idx);
                }
                self.cache.push((b, self.gts));
                false
            };
            self.gts += 1;
            hit
        }
    }

    #[test]
    fn hand_worked_faulty() {
        // 3 disks (block mod 3), disk 0 failed: MP = 2 on disk 0, 1 elsewhere.
        // Cache of 3. Access 0,1,2 (TS 0,1,2), then 4 at GTS=3 misses, full:
        // candidates: LS0 bottom 0 (age 3, W=3), LS1 bottom 1 (age 2, W=4),
        // LS2 bottom 2 (age 1, W=2) -> evict block 1 (LRU would evict 0).
        let m = Arc::new(ModMap::with_failed(3, &[0]));
        let mut p = VdfLru::new(3, m);
        assert_eq!(run(&mut p, &[0, 1, 2, 4]), vec![false; 4]);
        assert_eq!(p.global_order(), vec![0, 2, 4]);
        // GTS=4, access 5 (disk 2): LS0 bottom 0 age 4 W=4; LS1 bottom 4 age 1 W=2;
        // LS2 bottom 2 age 2 W=4. Tie 4/4 -> older TS: block 0 (TS 0).
        assert!(!p.access(&Access::read(5)));
        assert_eq!(p.global_order(), vec![2, 4, 5]);
        // hit on 2 refreshes it (TS 5); GTS=6 then access 0: LS0 empty,
        // LS1 bottom 4 (TS 3, age 3, W=6), LS2 bottom 5 (TS 4, age 2, W=4) -> evict 4.
        assert!(p.access(&Access::read(2)));
        assert!(!p.access(&Access::read(0)));
        assert_eq!(p.global_order(), vec![5, 2, 0]);
        assert_eq!(p.gts(), 7);
    }

    #[test]
    fn hand_worked_fault_free_is_lru() {
        let m = Arc::new(ModMap::new(3));
        let mut p = VdfLru::new(3, m);
        assert_eq!(
            run(&mut p, &[0, 1, 2, 0, 4, 1]),
            vec![false, false, false, true, false, false]
        );
        // LRU: after 0,1,2,0 order (LRU..MRU) 1,2,0; 4 evicts 1; 1 evicts 2.
        assert_eq!(p.global_order(), vec![0, 4, 1]);
    }

    #[test]
    fn switch_at_failure_keeps_state() {
        let m = Arc::new(ModMap::new(3));
        let mut p = VdfLru::new(3, m.clone());
        run(&mut p, &[0, 1, 2]);
        m.fail(0);
        // now faulty: as in hand_worked_faulty, 4 evicts block 1, not 0.
        assert!(!p.access(&Access::read(4)));
        assert_eq!(p.global_order(), vec![0, 2, 4]);
        assert_eq!(p.len(), 3);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn fault_free_equals_lru(seq in prop::collection::vec(0u64..40, 1..400), cap in 1usize..12, n in 2u32..8) {
            let mut a = VdfLru::new(cap, Arc::new(ModMap::new(n)));
            let mut b = Lru::new(cap);
            for &x in &seq {
                prop_assert_eq!(a.access(&Access::read(x)), b.access(&Access::read(x)));
            }
        }

        #[test]
        fn equals_naive_algorithm_1(seq in prop::collection::vec(0u64..40, 1..400), cap in 1usize..12,
                                    n in 3u32..8, f in 0u32..8, fail_at in 0usize..400) {
            let f = f % n;
            let m = Arc::new(ModMap::new(n));
            let mut a = VdfLru::new(cap, m.clone());
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
