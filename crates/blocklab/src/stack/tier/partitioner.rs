//! How the SSD is shared among tenants: the [`Partitioner`] trait and the
//! two schemes that need no analysis of the workload, `global` (one LRU
//! shared by every tenant) and `static` (equal shares). The reuse-sized
//! schemes, Centaur and ECI-Cache, are in [`super::reuse_sized`].

use std::collections::BTreeMap;

use crate::analysis::partition::Allocation;
use crate::analysis::reuse::ReuseProfile;
use crate::error::{Error, Result};

/// The partitioners a `[tier]` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionerKind {
    Global,
    Static,
    Centaur,
    Eci,
}

impl PartitionerKind {
    pub const NAMES: &'static [&'static str] = &["global", "static", "centaur", "eci"];

    pub fn parse(s: &str) -> Result<PartitionerKind> {
        match s {
            "global" => Ok(PartitionerKind::Global),
            "static" => Ok(PartitionerKind::Static),
            "centaur" => Ok(PartitionerKind::Centaur),
            "eci" => Ok(PartitionerKind::Eci),
            other => Err(Error::unknown("partitioner", other, Self::NAMES)),
        }
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// What a partitioner decided when a window closed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resize {
    /// New quotas (tenants not listed keep theirs).
    pub quotas: Vec<(u32, u64)>,
    /// Per tenant active in the window: its wish and what it got (reuse-sized schemes).
    pub allocations: Vec<Allocation>,
    /// Whether every wish fit (true for schemes without wishes).
    pub feasible: bool,
}

/// A scheme sharing the SSD among tenants.
pub trait Partitioner: Send {
    fn kind(&self) -> PartitionerKind;
    /// One partition shared by every tenant (a global cache).
    fn shared(&self) -> bool {
        false
    }
    /// Whether the scheme sizes from the tenants' reuse profiles (the tier
    /// then runs the reuse analysis).
    fn needs_profiles(&self) -> bool {
        false
    }
    /// The quota of a tenant seen for the first time, `free` blocks being
    /// given to nobody (it gets at most that).
    fn initial(&mut self, tenant: u32, free: u64) -> u64;
    /// A window closed. `profiles`: the tenants active in it (ascending) with
    /// their reuse profiles (empty unless [`needs_profiles`](Self::needs_profiles));
    /// `tenants`: every tenant that has a partition (ascending).
    fn resize(&mut self, profiles: &[(u32, ReuseProfile)], tenants: &[u32]) -> Result<Resize>;
}

/// One LRU over the whole SSD, shared by every tenant.
pub struct Global;

impl Partitioner for Global {
    fn kind(&self) -> PartitionerKind {
        PartitionerKind::Global
    }
    fn shared(&self) -> bool {
        true
    }
    fn initial(&mut self, _tenant: u32, _free: u64) -> u64 {
        0
    }
    fn resize(&mut self, _p: &[(u32, ReuseProfile)], _t: &[u32]) -> Result<Resize> {
        Ok(Resize {
            feasible: true,
            ..Default::default()
        })
    }
}

/// Equal shares of the SSD for every tenant of the trace, fixed for the
/// run: ⌊C / N⌋ each, the remainder one block each to the lowest tenants.
pub struct Static {
    shares: BTreeMap<u32, u64>,
}

impl Static {
    /// `tenants`: every tenant of the trace (the pass over it lists them).
    pub fn new(capacity: u64, tenants: &[u32]) -> Self {
        let mut t = tenants.to_vec();
        t.sort_unstable();
        t.dedup();
        let n = t.len() as u64;
        let shares = t
            .iter()
            .enumerate()
            .map(|(i, &x)| (x, capacity / n + u64::from((i as u64) < capacity % n)))
            .collect();
        Static { shares }
    }
}

impl Partitioner for Static {
    fn kind(&self) -> PartitionerKind {
        PartitionerKind::Static
    }
    fn initial(&mut self, tenant: u32, free: u64) -> u64 {
        self.shares.get(&tenant).copied().unwrap_or(0).min(free)
    }
    fn resize(&mut self, _p: &[(u32, ReuseProfile)], _t: &[u32]) -> Result<Resize> {
        Ok(Resize {
            feasible: true,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_shares_sum_to_the_capacity() {
        let mut s = Static::new(10, &[7, 3, 5, 3]);
        assert_eq!((s.initial(3, 100), s.initial(5, 100), s.initial(7, 100)), (4, 3, 3));
        assert_eq!(s.initial(9, 100), 0, "not a tenant of the trace");
        assert_eq!(s.initial(3, 2), 2);
        assert_eq!(PartitionerKind::parse("eci").unwrap().name(), "eci");
        assert!(PartitionerKind::parse("lru")
            .unwrap_err()
            .to_string()
            .contains("global, static"));
    }
}
