//! Centaur and ECI-Cache: per-tenant partitions re-sized every window from
//! the tenants' reuse distances (traditional or useful), the online form of
//! `analysis::partition_plan`: each tenant's wish for the next window is
//! read off the window just closed (`analysis::sizing`), and when the
//! wishes do not fit the SSD the solver shares it (`analysis::partition`).
//!
//! Reactive, as in the paper: a tenant gets `initial_blocks` (c_min) until
//! its first window closes; a tenant without accesses in a window gets
//! nothing in the next (its space is reclaimed, §6.3), so a tenant that
//! comes back waits a window for space.

use super::partitioner::{Partitioner, PartitionerKind, Resize};
use crate::analysis::partition::{partition, Solver};
use crate::analysis::reuse::ReuseProfile;
use crate::analysis::sizing::Sizing;
use crate::error::Result;

pub struct ReuseSized {
    sizing: Sizing,
    solver: Solver,
    capacity: u64,
}

impl ReuseSized {
    pub fn new(sizing: Sizing, solver: Solver, capacity: u64) -> Self {
        ReuseSized {
            sizing,
            solver,
            capacity,
        }
    }
}

impl Partitioner for ReuseSized {
    fn kind(&self) -> PartitionerKind {
        match self.sizing.scheme {
            crate::analysis::sizing::Scheme::Centaur => PartitionerKind::Centaur,
            crate::analysis::sizing::Scheme::Eci => PartitionerKind::Eci,
        }
    }

    fn needs_profiles(&self) -> bool {
        true
    }

    fn initial(&mut self, _tenant: u32, free: u64) -> u64 {
        self.sizing.initial_blocks.min(free)
    }

    fn resize(&mut self, profiles: &[(u32, ReuseProfile)], tenants: &[u32]) -> Result<Resize> {
        let p = partition(&self.sizing.demands(profiles), self.capacity, self.solver)?;
        // Tenants idle in the window give their space back.
        let mut quotas: Vec<(u32, u64)> = tenants
            .iter()
            .filter(|&&t| profiles.binary_search_by_key(&t, |(x, _)| *x).is_err())
            .map(|&t| (t, 0))
            .collect();
        quotas.extend(p.allocations.iter().map(|a| (a.tenant, a.blocks)));
        quotas.sort_unstable();
        Ok(Resize {
            quotas,
            allocations: p.allocations,
            feasible: p.feasible,
        })
    }
}
