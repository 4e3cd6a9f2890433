//! An array shared by the part of a stack that plans its I/O (and fails or
//! rebuilds its disks) and the fault-aware caches above it, which read its
//! placement and miss penalties (see `cache::fault`). One thread runs a
//! stack; the lock only makes the sharing safe to express.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::Array;
use crate::cache::fault::FaultMap;

pub struct SharedArray {
    inner: RwLock<Array>,
}

impl SharedArray {
    pub fn new(array: Array) -> Self {
        SharedArray {
            inner: RwLock::new(array),
        }
    }

    pub fn get(&self) -> RwLockReadGuard<'_, Array> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn get_mut(&self) -> RwLockWriteGuard<'_, Array> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
}

impl FaultMap for SharedArray {
    fn ndisks(&self) -> u32 {
        self.get().ndisks()
    }
    fn disk_of(&self, block: u64) -> u32 {
        self.get().disk_of(block)
    }
    fn is_failed(&self, disk: u32) -> bool {
        self.get().is_failed(disk)
    }
    fn any_failed(&self) -> bool {
        !self.get().failed().is_empty()
    }
    fn penalty(&self, block: u64) -> u32 {
        self.get().read_penalty(block).unwrap_or(0)
    }
}

/// The array as the caches of a stack see it: stack block `b` is array
/// block `b mod capacity` when the stack folds addresses (`wrap`); with
/// `fit = "scale"` it is where the target places it: its stack chunk's
/// array chunk when the span is stretched onto a larger array
/// (`stretch_block`), `⌊b · capacity / span⌋` when it is compressed.
pub struct FoldedFaults {
    pub array: Arc<SharedArray>,
    /// Capacity in blocks when addresses are folded.
    pub modulo: Option<u64>,
    /// (span, capacity, chunk blocks) when addresses are scaled.
    pub scale: Option<(u64, u64, u64)>,
}

impl FoldedFaults {
    #[inline]
    fn fold(&self, block: u64) -> u64 {
        match self.scale {
            Some((span, cap, chunk)) if cap >= span => crate::stack::target::stretch_block(block, span, cap, chunk),
            Some((span, cap, _)) => crate::stack::target::scale_block(block, 1, span, cap),
            None => self.modulo.map_or(block, |m| block % m),
        }
    }
}

impl FaultMap for FoldedFaults {
    fn ndisks(&self) -> u32 {
        self.array.ndisks()
    }
    fn disk_of(&self, block: u64) -> u32 {
        self.array.disk_of(self.fold(block))
    }
    fn is_failed(&self, disk: u32) -> bool {
        self.array.is_failed(disk)
    }
    fn any_failed(&self) -> bool {
        self.array.any_failed()
    }
    fn penalty(&self, block: u64) -> u32 {
        self.array.penalty(self.fold(block))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{ArrayConfig, Level};
    use crate::cache::fault::build_fault_aware;
    use crate::cache::{build, Access};
    use proptest::prelude::*;

    /// A RAID-5 of `n` disks with 2 MiB members (32 rows of 16-block
    /// chunks), disk `f` failed; with `rebuilt = Some(r)` a spare replaces it
    /// and rows `0..r` are rebuilt (MD's recovery offset).
    fn array(n: u32, f: u32, rebuilt: Option<u64>) -> Array {
        let mut cfg = ArrayConfig::new(Level::Raid5, n);
        cfg.disk_bytes = 2 << 20;
        let mut a = Array::new(cfg).unwrap();
        a.fail(f).unwrap();
        if let Some(r) = rebuilt {
            a.start_recovery(&[f]).unwrap();
            a.set_recovered_rows(r);
        }
        a
    }

    /// Hits of `policy` over `seq` with `faults`.
    fn hits(policy: &str, cap: usize, faults: Arc<dyn FaultMap>, seq: &[u64]) -> Vec<bool> {
        let mut p = if policy.starts_with("vdf") {
            build_fault_aware(policy, cap, faults).unwrap()
        } else {
            build(policy, cap).unwrap()
        };
        seq.iter().map(|&b| p.access(&Access::read(b))).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// A fault-aware policy over a real degraded or rebuilding array,
        /// with addresses folded onto it (`wrap`), against its base policy,
        /// on a trace made for the base policy to evict a block of the
        /// failed disk: block x of the failed disk first, then `cap - 1`
        /// blocks of surviving disks, one more surviving block y, x again.
        /// LRU, LFU (all frequencies 1, x the oldest), FIFO and CLOCK (x
        /// went in first, nothing is hit) evict x for y. VDF (and the
        /// cost-aware FIFO and CLOCK) keeps x — a miss on it costs n - 1
        /// reads — and hits it at the end, *unless* x's row is already
        /// rebuilt on the spare: then it costs
        /// one read like any other and VDF decides exactly as its base
        /// policy. (A trace whose blocks all lie behind the recovery offset
        /// therefore gives identical results.)
        #[test]
        fn vdf_keeps_a_failed_disk_block_the_base_policy_evicts(
            n in 3u32..8, f in 0u32..8, rebuilding in any::<bool>(), offset in 0u64..=32,
            pick in any::<prop::sample::Index>(), start in 0u64..100_000, fold in 0u64..4, cap in 3usize..20,
        ) {
            let f = f % n;
            let a = array(n, f, rebuilding.then_some(offset));
            let capacity = 32 * 16 * (n as u64 - 1);
            let lost: Vec<u64> = (0..capacity).filter(|&b| a.disk_of(b) == f).collect();
            let x_in_array = lost[pick.index(lost.len())];
            let row = x_in_array / 16 / (n as u64 - 1);
            let faults: Arc<dyn FaultMap> = Arc::new(FoldedFaults {
                array: Arc::new(SharedArray::new(a)),
                modulo: Some(capacity),
                scale: None,
            });
            // x as the trace addresses it: folded onto the array `fold` times.
            let x = x_in_array + fold * capacity;
            prop_assert_eq!(faults.disk_of(x), f);
            let healthy: Vec<u64> = (start..)
                .filter(|&b| faults.disk_of(b) != f)
                .take(cap)
                .collect();
            let mut seq = vec![x];
            seq.extend(&healthy); // cap - 1 fillers, then y
            seq.push(x);
            let row_rebuilt = rebuilding && row < offset;
            for (vdf, base) in [("vdf-lfu", "lfu"), ("vdf-lru", "lru"), ("vdf-fifo", "fifo"), ("vdf-clock", "clock"), ("vdf-arc", "arc")] {
                let b = hits(base, cap, faults.clone(), &seq);
                let v = hits(vdf, cap, faults.clone(), &seq);
                prop_assert!(!b[cap + 1], "{} evicts x", base);
                if row_rebuilt {
                    prop_assert_eq!(&v, &b, "{}: x's row {} is rebuilt (offset {})", vdf, row, offset);
                } else {
                    prop_assert!(v[cap + 1], "{} keeps x (row {}, rebuilding {}, offset {})", vdf, row, rebuilding, offset);
                }
            }
        }
    }
}
