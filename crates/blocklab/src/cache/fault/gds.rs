//! GreedyDual-Size (Cao & Irani, 1997) with cost = miss penalty, size = 1:
//! the classic cost-aware replacement, as a baseline for VDF.
//!
//! Each cached block carries H = L + cost(block) / size. A hit restores H to
//! L + cost; a miss evicts the block with the smallest H and raises the
//! inflation value L to that H (so blocks that are not touched "age" relative
//! to newly inserted ones). The cost is the array's current miss penalty (the
//! surviving-disk reads a read miss costs, `FaultMap::penalty`), looked up when
//! the block is inserted or hit. With all costs equal (fault-free array) GDS is
//! exactly LRU. Ties of H: the block whose H was set first goes first.
//! Everything is integer (size 1, integer costs): deterministic.
//!
//! `remove` drops the block and its H; L is left alone (it rises only when a
//! block is evicted). GDS keeps no history.

use super::FaultMap;
use crate::cache::{Access, Policy};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

pub struct Gds {
    capacity: usize,
    faults: Arc<dyn FaultMap>,
    /// block -> (H, seq)
    map: FxHashMap<u64, (u64, u64)>,
    /// (H, seq) -> block, smallest first
    order: BTreeMap<(u64, u64), u64>,
    /// Inflation value L.
    l: u64,
    seq: u64,
    evicted: Option<u64>,
}

impl Gds {
    pub fn new(capacity: usize, faults: Arc<dyn FaultMap>) -> Self {
        Gds {
            capacity,
            faults,
            map: FxHashMap::default(),
            order: BTreeMap::new(),
            l: 0,
            seq: 0,
            evicted: None,
        }
    }

    /// Current inflation value L.
    pub fn inflation(&self) -> u64 {
        self.l
    }

    /// H of a cached block.
    pub fn h(&self, block: u64) -> Option<u64> {
        self.map.get(&block).map(|e| e.0)
    }

    fn set(&mut self, block: u64) {
        let key = (self.l + self.faults.penalty(block) as u64, self.seq);
        self.seq += 1;
        if let Some(old) = self.map.insert(block, key) {
            self.order.remove(&old);
        }
        self.order.insert(key, block);
    }
}

impl Policy for Gds {
    fn access(&mut self, a: &Access) -> bool {
        self.evicted = None;
        if self.map.contains_key(&a.block) {
            self.set(a.block);
            return true;
        }
        if self.map.len() >= self.capacity {
            let (&(h, seq), &v) = self.order.iter().next().expect("full cache");
            self.order.remove(&(h, seq));
            self.map.remove(&v);
            self.l = h;
            self.evicted = Some(v);
        }
        self.set(a.block);
        false
    }

    fn contains(&self, block: u64) -> bool {
        self.map.contains_key(&block)
    }

    fn evicted(&self) -> Option<u64> {
        self.evicted
    }

    fn remove(&mut self, block: u64) -> bool {
        match self.map.remove(&block) {
            Some(key) => {
                self.order.remove(&key);
                true
            }
            None => false,
        }
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

    #[test]
    fn hand_worked() {
        // 3 disks, disk 0 failed: cost 2 on disk 0, 1 elsewhere. Cache 2.
        let m = Arc::new(ModMap::with_failed(3, &[0]));
        let mut g = Gds::new(2, m);
        assert!(!g.access(&Access::read(0))); // H(0) = 2
        assert!(!g.access(&Access::read(1))); // H(1) = 1
        assert!(!g.access(&Access::read(2))); // evict 1 (H 1), L = 1, H(2) = 2
        assert_eq!(g.inflation(), 1);
        assert_eq!(g.h(1), None);
        assert!(!g.access(&Access::read(4))); // tie H 2: 0 set first -> evict 0, L = 2, H(4) = 3
        assert_eq!(g.h(0), None);
        assert_eq!(g.h(4), Some(3));
        assert!(!g.access(&Access::read(3))); // evict 2 (H 2), L = 2, H(3) = 4
        assert_eq!(g.h(3), Some(4));
        assert!(g.access(&Access::read(4))); // hit: H(4) = L + 1 = 3
        assert_eq!(g.h(4), Some(3));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Equal costs: GDS is LRU.
        #[test]
        fn uniform_cost_is_lru(seq in prop::collection::vec(0u64..40, 1..300), cap in 1usize..10) {
            let mut g = Gds::new(cap, Arc::new(ModMap::new(4)));
            let mut l = Lru::new(cap);
            for &x in &seq {
                prop_assert_eq!(g.access(&Access::read(x)), l.access(&Access::read(x)));
            }
        }

        /// L never decreases, every cached H lies in [L, L + max cost], size bounded.
        #[test]
        fn invariants(seq in prop::collection::vec(0u64..40, 1..300), cap in 1usize..10, n in 3u32..7) {
            let m = Arc::new(ModMap::with_failed(n, &[1]));
            let mut g = Gds::new(cap, m);
            let mut last_l = 0;
            for &x in &seq {
                g.access(&Access::read(x));
                prop_assert!(g.inflation() >= last_l);
                last_l = g.inflation();
                prop_assert!(g.len() <= cap);
                for &(h, _) in g.order.keys() {
                    prop_assert!(h >= g.inflation() && h <= g.inflation() + (n as u64 - 1));
                }
            }
        }
    }
}
