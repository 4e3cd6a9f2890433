//! What a fault-aware cache needs to know about the array below it.
//!
//! VDF (Victim Disk First) and the other cost-aware policies weigh a cached
//! block by its *miss penalty*: the number of block reads on surviving disks a
//! read miss on it would cost. They ask the array through [`FaultMap`]; the
//! array's failure state may change during a run (`--fail-at`), so every query
//! reflects the state at the time of the call, and the policies keep their
//! stacks across the switch (the paper's "smooth runtime conversion").
//!
//! [`ModMap`] is a small stand-in used by the tests: block `b` lives on disk
//! `b mod n` and a block of a failed disk costs `n - 1` surviving reads, as a
//! RAID-5 reconstruct-read does. The real array implements the trait in
//! `array::shared`; [`NoFaults`] stands for a single device that never fails.

pub mod cost_aware;
pub mod gds;
pub mod vdf_arc;
pub mod vdf_lfu;
pub mod vdf_lru;

use super::{build, Policy, POLICIES};
use crate::error::{Error, Result};
use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The view of the array a fault-aware policy uses.
pub trait FaultMap: Send + Sync {
    /// Number of disks in the array (the paper's `n`).
    fn ndisks(&self) -> u32;
    /// The disk holding logical block `block` (for mirrors: its first copy).
    /// Must not change during a run.
    fn disk_of(&self, block: u64) -> u32;
    /// Whether `disk` has failed (now).
    fn is_failed(&self, disk: u32) -> bool;
    /// Whether any disk has failed (the array is in faulty mode).
    fn any_failed(&self) -> bool {
        (0..self.ndisks()).any(|d| self.is_failed(d))
    }
    /// Surviving-disk block reads a read miss on `block` costs now: 1 on a
    /// healthy disk, n-1 for a block lost on a RAID-5 failed disk, ...
    /// 0 when the block cannot be read at all (caching it saves nothing).
    fn penalty(&self, block: u64) -> u32;
}

/// Compare the weights of two candidates W = age / mp (mp = 0 is infinite).
fn cmp_age_over_mp(age_a: u64, mp_a: u32, age_b: u64, mp_b: u32) -> CmpOrdering {
    match (mp_a, mp_b) {
        (0, 0) => CmpOrdering::Equal,
        (0, _) => CmpOrdering::Greater,
        (_, 0) => CmpOrdering::Less,
        _ => (age_a as u128 * mp_b as u128).cmp(&(age_b as u128 * mp_a as u128)),
    }
}

/// The faulty-mode victim choice of VDF-LRU (and of the cost-aware FIFO and
/// CLOCK built on the same rule): among the candidates of the local stacks,
/// evict the one with the largest W = (GTS - TS) / MP, where MP = 0 (the
/// block cannot be read at all) counts as infinite; ties go to the older TS.
/// Offer the candidates one by one; `T` is whatever identifies a candidate.
pub(crate) struct AgeOverPenaltyPick<T> {
    /// (candidate, age, mp, ts) of the best so far.
    best: Option<(T, u64, u32, u64)>,
}

impl<T: Copy> AgeOverPenaltyPick<T> {
    pub fn new() -> Self {
        AgeOverPenaltyPick { best: None }
    }

    /// Consider candidate `c` with timestamp `ts` (age = gts - ts) and miss
    /// penalty `mp`.
    #[inline]
    pub fn offer(&mut self, c: T, age: u64, mp: u32, ts: u64) {
        let better = match self.best {
            None => true,
            Some((_, bage, bmp, bts)) => match cmp_age_over_mp(age, mp, bage, bmp) {
                CmpOrdering::Greater => true,
                CmpOrdering::Less => false,
                CmpOrdering::Equal => ts < bts,
            },
        };
        if better {
            self.best = Some((c, age, mp, ts));
        }
    }

    /// The candidate to evict (None if none was offered).
    pub fn best(&self) -> Option<T> {
        self.best.map(|b| b.0)
    }
}

/// Test stand-in: disk = block mod n, RAID-5-like penalties (1 or n-1).
/// Disks can be failed through a shared reference (`fail`), as `--fail-at` does.
#[derive(Debug)]
pub struct ModMap {
    n: u32,
    failed: AtomicU64,
}

impl ModMap {
    pub fn new(n: u32) -> Self {
        assert!((2..=64).contains(&n), "ModMap supports 2..=64 disks");
        ModMap {
            n,
            failed: AtomicU64::new(0),
        }
    }

    pub fn with_failed(n: u32, failed: &[u32]) -> Self {
        let m = ModMap::new(n);
        for &d in failed {
            m.fail(d);
        }
        m
    }

    pub fn fail(&self, disk: u32) {
        self.failed.fetch_or(1 << disk, Ordering::Relaxed);
    }
}

impl FaultMap for ModMap {
    fn ndisks(&self) -> u32 {
        self.n
    }
    fn disk_of(&self, block: u64) -> u32 {
        (block % self.n as u64) as u32
    }
    fn is_failed(&self, disk: u32) -> bool {
        self.failed.load(Ordering::Relaxed) >> disk & 1 == 1
    }
    fn any_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed) != 0
    }
    fn penalty(&self, block: u64) -> u32 {
        let failed = self.failed.load(Ordering::Relaxed);
        if failed >> self.disk_of(block) & 1 == 0 {
            1
        } else if failed.count_ones() == 1 {
            self.n - 1
        } else {
            0 // a second failure loses RAID-5 data
        }
    }
}

/// A single device that never fails: a fault-aware policy over it behaves
/// as its base policy.
#[derive(Debug, Default)]
pub struct NoFaults;

impl FaultMap for NoFaults {
    fn ndisks(&self) -> u32 {
        1
    }
    fn disk_of(&self, _block: u64) -> u32 {
        0
    }
    fn is_failed(&self, _disk: u32) -> bool {
        false
    }
    fn any_failed(&self) -> bool {
        false
    }
    fn penalty(&self, _block: u64) -> u32 {
        1
    }
}

/// Policies that need a [`FaultMap`] (the others are built by [`build`]).
pub const FAULT_AWARE: &[&str] = &["vdf-lru", "vdf-lfu", "vdf-fifo", "vdf-clock", "vdf-arc", "gds"];

/// Every policy name [`build_fault_aware`] accepts.
pub fn all_policies() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = POLICIES.to_vec();
    v.extend_from_slice(FAULT_AWARE);
    v
}

/// Build a policy that may use the array's failure state. Plain policies
/// (lru, lfu, ...) are built by [`build`] and ignore `faults`.
pub fn build_fault_aware(name: &str, capacity: usize, faults: Arc<dyn FaultMap>) -> Result<Box<dyn Policy>> {
    if capacity == 0 {
        return Err(Error::config("cache size must be at least one block"));
    }
    Ok(match name {
        "vdf-lru" => Box::new(vdf_lru::VdfLru::new(capacity, faults)),
        "vdf-lfu" => Box::new(vdf_lfu::VdfLfu::new(capacity, faults)),
        "gds" => Box::new(gds::Gds::new(capacity, faults)),
        "vdf-fifo" => Box::new(cost_aware::CostAware::new("fifo", capacity, faults)?),
        "vdf-clock" => Box::new(cost_aware::CostAware::new("clock", capacity, faults)?),
        "vdf-arc" => Box::new(vdf_arc::new(capacity, faults)),
        other => match build(other, capacity) {
            Ok(p) => p,
            Err(_) => return Err(Error::unknown("policy", other, &all_policies())),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modmap_penalties() {
        let m = ModMap::new(5);
        assert!(!m.any_failed());
        assert_eq!(m.penalty(3), 1);
        m.fail(3);
        assert!(m.any_failed() && m.is_failed(3) && !m.is_failed(2));
        assert_eq!(m.penalty(3), 4);
        assert_eq!(m.penalty(8), 4);
        assert_eq!(m.penalty(4), 1);
        m.fail(1);
        assert_eq!(m.penalty(3), 0);
    }

    #[test]
    fn unknown_policy_lists_all() {
        let m: Arc<dyn FaultMap> = Arc::new(ModMap::new(4));
        let e = build_fault_aware("nope", 4, m).err().unwrap().to_string();
        assert!(e.contains("vdf-lru") && e.contains("lru"), "{e}");
    }
}
