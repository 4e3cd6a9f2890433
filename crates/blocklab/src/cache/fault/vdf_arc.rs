//! VDF-ARC: victim disk first inside ARC (`vdf-arc`), the VDF paper's future
//! work ("we plan to build VDF into more general cache algorithms such as
//! CLOCK and ARC"). The paper does not define it; this is our design.
//!
//! ARC (`cache/arc.rs`) runs unchanged: the same lists T1, T2, B1, B2, the
//! same target p and its adaptation on ghost hits, the same choice of *which
//! list* REPLACE takes from (it depends on the request: a ghost hit in B2
//! takes from T1 when |T1| = p), and the block taken goes to its ghost list
//! as in ARC. Only the *block* taken from that list changes:
//! - fault-free: the list's LRU end, so VDF-ARC is ARC access for access;
//! - faulty: T1 and T2 are each split into one local LRU list per disk (the
//!   paper's local stacks LS_k, kept per ARC list); among their tails take
//!   the largest W = (GTS - TS) / MP, as VDF-LRU does (Algorithm 1), MP = 0
//!   counting as infinite, ties to the older TS.
//!
//! TS is the access counter GTS at the block's last access; both lists are
//! ordered by last access, so a local list's tail is the disk's oldest block
//! of that list. The same rule serves the case where ARC drops a block of T1
//! outright (|T1| = c, B1 empty). `remove` is ARC's (forgets the block, no
//! ghost). The mode is read at every eviction (`--fail-at` switches it).

use super::{AgeOverPenaltyPick, FaultMap};
use crate::cache::arc::{ArcOf, Victim, NONE, T2};
use crate::cache::list::{Ends, Links32, NIL};
use std::sync::Arc;

/// VDF-ARC: ARC whose victim within a list is chosen by [`PerDisk`].
pub type VdfArc = ArcOf<PerDisk>;

/// Build VDF-ARC with `capacity` blocks over the array `faults`.
pub fn new(capacity: usize, faults: Arc<dyn FaultMap>) -> VdfArc {
    let n = faults.ndisks() as usize;
    ArcOf::with_victim(
        capacity,
        PerDisk {
            faults,
            gts: 0,
            disk: Vec::new(),
            ts: Vec::new(),
            links: Links32::default(),
            local: vec![[Ends::default(); 2]; n],
        },
    )
}

/// The per-disk local lists of T1 and T2 and each resident block's TS.
pub struct PerDisk {
    faults: Arc<dyn FaultMap>,
    gts: u64,
    /// Per slot: its disk and TS (meaningful while resident; the block
    /// is ARC's, asked of `block_of`).
    disk: Vec<u32>,
    ts: Vec<u64>,
    links: Links32,
    /// Per disk: [T1's blocks, T2's blocks], head = most recent.
    local: Vec<[Ends; 2]>,
}

impl Victim for PerDisk {
    fn moved(&mut self, s: u32, from: u8, to: u8, block_of: impl Fn(u32) -> u64) {
        let i = s as usize;
        if from <= T2 {
            let d = self.disk[i] as usize;
            self.links.unlink(&mut self.local[d][from as usize], s);
        }
        if to <= T2 {
            if i >= self.disk.len() {
                self.disk.resize(i + 1, 0);
                self.ts.resize(i + 1, 0);
            }
            let d = self.faults.disk_of(block_of(s));
            self.disk[i] = d;
            self.ts[i] = self.gts;
            self.gts += 1; // a move into T1 or T2 is one access
            self.links.push_head(&mut self.local[d as usize][to as usize], s);
        }
        debug_assert!(from != NONE || to != NONE);
    }

    fn pick(&mut self, list: u8, tail: u32, block_of: impl Fn(u32) -> u64) -> u32 {
        if !self.faults.any_failed() {
            return tail;
        }
        // The access being served has not ticked GTS yet.
        let gts = self.gts;
        let mut pick = AgeOverPenaltyPick::new();
        for lists in &self.local {
            let t = lists[list as usize].tail;
            if t == NIL {
                continue;
            }
            let ts = self.ts[t as usize];
            pick.offer(t, gts - ts, self.faults.penalty(block_of(t)), ts);
        }
        pick.best().expect("non-empty list")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::fault::{ModMap, NoFaults};
    use crate::cache::{Access, Policy};
    use proptest::prelude::*;

    #[test]
    fn hand_worked_vdf_arc_keeps_the_failed_disks_block() {
        // 3 disks, disk 0 failed (MP 2), cache 3. 0, 1, 2 fill T1 (TS 0..2).
        // 4 at GTS 3: |T1| = c and B1 empty, so ARC drops a T1 block outright;
        // per-disk tails: 0 (age 3, W 3/2), 1 (age 2, W 2), 2 (age 1, W 1):
        // VDF-ARC drops 1 where ARC drops 0. So 0 then hits.
        // 1 at GTS 5: REPLACE takes from T1 = {2 (W 3), 4 (W 2)}: 2 to B1.
        let m = Arc::new(ModMap::with_failed(3, &[0]));
        let mut p = new(3, m);
        let mut ev = vec![];
        let h: Vec<bool> = [0, 1, 2, 4, 0, 1]
            .iter()
            .map(|&b| {
                let hit = p.access(&Access::read(b));
                ev.push(p.evicted());
                hit
            })
            .collect();
        assert_eq!(h, vec![false, false, false, false, true, false]);
        assert_eq!(ev, vec![None, None, None, Some(1), None, Some(2)]);
        let mut plain = crate::cache::arc::Arc::new(3);
        let h: Vec<bool> = [0, 1, 2, 4, 0, 1]
            .iter()
            .map(|&b| plain.access(&Access::read(b)))
            .collect();
        assert_eq!(h, vec![false; 6]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Without a failure VDF-ARC is ARC, hit for hit and eviction for
        /// eviction (removes included), on an array and on a single device.
        #[test]
        fn fault_free_is_arc(seq in prop::collection::vec((0u64..40, 0u8..8), 1..400), cap in 1usize..12, n in 2u32..7) {
            let mut plain = crate::cache::arc::Arc::new(cap);
            let mut on_array = new(cap, Arc::new(ModMap::new(n)));
            let mut alone = new(cap, Arc::new(NoFaults));
            for &(b, r) in &seq {
                if r == 0 {
                    let want = plain.remove(b);
                    prop_assert_eq!(on_array.remove(b), want);
                    prop_assert_eq!(alone.remove(b), want);
                    continue;
                }
                let want = plain.access(&Access::read(b));
                prop_assert_eq!(on_array.access(&Access::read(b)), want);
                prop_assert_eq!(alone.access(&Access::read(b)), want);
                prop_assert_eq!(on_array.evicted(), plain.evicted());
                prop_assert_eq!(alone.evicted(), plain.evicted());
            }
        }
    }
}
